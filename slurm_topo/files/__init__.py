"""The Slurm-side files shipped with the package (job_submit/, gres/, examples/, contrib/), read through
importlib.resources.

A copied file keeps its executable bit (``job_submit/build-spank`` is run as the next step); a file that
starts with ``#!`` is made executable even where the package's own copy lost the bit (an installation that
does not keep modes).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..core.errors import OutputError

GROUPS = ("job_submit", "gres", "examples", "contrib")


def _walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name.startswith((".", "__")) or child.name.endswith(".pyc"):
            continue
        rel = f"{prefix}/{child.name}"
        if child.is_dir():
            yield from _walk(child, rel)
        else:
            yield rel, child


def _group_root(group: str) -> Traversable:
    try:
        return resources.files(f"{__name__}.{group}")
    except ModuleNotFoundError:
        # An editable install maps only real packages; in a source checkout the folder sits at the top level.
        source = Path(__file__).resolve().parents[2] / group
        if source.is_dir():
            return source
        raise


def _entries() -> Iterator[tuple[str, Traversable]]:
    for group in GROUPS:
        yield from _walk(_group_root(group), group)


def names() -> list[str]:
    return [rel for rel, _ in _entries()]


def read_text(rel: str) -> str:
    for name, entry in _entries():
        if name == rel:
            return entry.read_text(encoding="utf-8")
    raise KeyError(rel)


def _executable(entry: Traversable) -> bool:
    """Whether a shipped file is meant to be run: its own executable bit, else a ``#!`` first line."""
    if isinstance(entry, Path) and entry.stat().st_mode & 0o111:
        return True
    with entry.open("rb") as src:
        return src.read(2) == b"#!"


def copy_to(directory: Path) -> list[Path]:
    """Copy every shipped file into ``directory`` keeping the group folders and executable bits; returns the
    paths written."""
    out = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for rel, entry in _entries():
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with entry.open("rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            if _executable(entry):
                mode = stat.S_IMODE(target.stat().st_mode)
                target.chmod(mode | (0o111 & ~umask))
            out.append(target)
    except OSError as exc:
        raise OutputError(f"{exc.filename or directory}: {exc.strerror or exc}") from None
    return out
