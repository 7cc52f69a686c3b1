"""The one place that starts external commands. Everything else builds argv (Slurm's:
slurm_topo.access.argv) and parses text."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import Protocol

from ..core.errors import CommandError


class Runner(Protocol):
    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str: ...


class SubprocessRunner:
    """Runs a command, returns its stdout; a failure raises ``CommandError``."""

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        try:
            proc = subprocess.run(list(argv), capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CommandError(argv, None, timeout=timeout) from None
        except OSError as exc:
            raise CommandError(argv, None, str(exc)) from None
        if proc.returncode != 0:
            raise CommandError(argv, proc.returncode, _text(proc.stderr))
        return _text(proc.stdout)

    @staticmethod
    def available(program: str) -> bool:
        return shutil.which(program) is not None  # an absolute path is checked for being executable


def _text(data: bytes) -> str:
    """A command's output as text mode reads it: bytes that are not UTF-8 (a job name) as U+FFFD, never a
    crash; ``\r\n`` and ``\r`` as ``\n``. Decoded once (text mode's reader costs 0.13 s CPU more on the
    85 MB a 100 000-node ``scontrol -d show node -o`` prints)."""
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
