"""Small helpers shared by the unit tests (imported by path: tests/ is not a package)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from slurm_topo.cli import cli


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def run_cli(*args: str) -> Result:
    """Run the CLI in-process through the same error mapping as the console script."""
    from slurm_topo.cli import main

    runner = CliRunner()
    return runner.invoke(_Main(main), list(args), catch_exceptions=False)


class _Main:
    """Adapter so CliRunner can drive ``main`` (which maps errors to exit codes) instead of the bare group."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        self.name = "slurm-topo"

    def main(self, args, prog_name=None, **_extra):  # type: ignore[no-untyped-def]
        self.fn(list(args))


__all__ = ["cli", "run_cli", "write"]
