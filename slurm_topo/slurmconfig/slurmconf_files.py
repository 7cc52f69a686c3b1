"""slurm.conf as slurmctld reads it from disk: the file and the files it ``Include``s. The reading half of
:mod:`slurm_topo.slurmconfig.slurmconf`, whose parsers take text and stay pure (the apply plan and the access
layer's readers import them without loading a file reader: tests/test_layout.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..core import hostlist
from ..core.errors import ParseError
from .slurmconf import logical_lines, split_pairs


def _lines(path: Path, prefix: str) -> Iterator[tuple[Path, int, dict[str, str]]]:
    """(file, line number, ``Key=value`` pairs) of the lines starting with ``prefix`` (any case) in slurm.conf
    and the files it ``Include``s (relative to slurm.conf's folder, each file once), in the order slurmctld
    reads them."""
    seen: set[Path] = set()

    def visit(p: Path) -> Iterator[tuple[Path, int, dict[str, str]]]:
        if p in seen:
            return
        seen.add(p)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ParseError(str(p), None, f"cannot read: {exc.strerror}") from None
        for lineno, line in logical_lines(text):
            word = line.split(None, 1)
            if word[0].lower() == "include" and len(word) == 2:
                inc = Path(word[1])
                yield from visit(inc if inc.is_absolute() else path.parent / inc)
            elif line.lower().startswith(prefix):
                try:
                    yield p, lineno, split_pairs(line)
                except ValueError as exc:
                    raise ParseError(str(p), lineno, str(exc)) from None

    yield from visit(path)


def slurm_conf_node_definitions(path: Path) -> dict[str, list[str]]:
    """Node names defined by ``NodeName=`` lines in slurm.conf and the files it ``Include``s:
    file -> names."""
    found: dict[str, list[str]] = {}
    for p, lineno, pairs in _lines(path, "nodename="):
        expr = next(v for k, v in pairs.items() if k.lower() == "nodename")
        if expr.upper() == "DEFAULT":
            continue
        try:
            found.setdefault(str(p), []).extend(hostlist.expand(expr))
        except Exception as exc:  # noqa: BLE001 - any hostlist problem is a parse error here
            raise ParseError(str(p), lineno, str(exc)) from None
    return found


def slurm_conf_partition_lines(path: Path) -> list[tuple[str, int, dict[str, str]]]:
    """``PartitionName=`` lines (``DEFAULT`` ones too: slurmctld reads the same keys there) of slurm.conf and
    the files it ``Include``s, in file order: (file, line number, their ``Key=value`` pairs)."""
    return [(str(p), lineno, pairs) for p, lineno, pairs in _lines(path, "partitionname=")]
