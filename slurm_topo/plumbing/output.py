"""All-or-nothing writing of a set of generated files into one directory.

* A new directory is built beside its final place and renamed into it: either every file appears or none.
* In an existing directory each file is written to a temporary name and fsynced first; only when all are
  written are they renamed over their targets, then the directory is fsynced. A failure before the renames
  removes the temporaries and changes nothing.
* A replaced file keeps its mode and owner; a new one is 0644. Unchanged content is not rewritten (mtime
  kept).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import OutputError


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    status: str
    """``created``, ``replaced`` or ``unchanged``."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(directory: Path, name: str, text: str, like: Path | None) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if like is not None:
            st = like.stat()
            os.chmod(tmp, st.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.chown(tmp, st.st_uid, st.st_gid)
        else:
            os.chmod(tmp, 0o644)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_files(directory: str | Path, files: Mapping[str, str]) -> list[Written]:
    """Write ``files`` (name -> text) into ``directory`` all or nothing; see the module docstring."""
    directory = Path(directory)
    try:
        if not directory.exists():
            return _write_new_directory(directory, files)
        if not directory.is_dir():
            raise OutputError(f"{directory}: exists and is not a directory")
        return _write_into(directory, files)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(
            f"{exc.filename or directory}: {exc.strerror or exc}; nothing was changed"
        ) from None


def _write_new_directory(directory: Path, files: Mapping[str, str]) -> list[Written]:
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=parent))
    try:
        for name, text in files.items():
            _write_temp(staging, name, text, None).rename(staging / name)
        os.chmod(staging, 0o755)
        fsync_dir(staging)
        staging.rename(directory)
        fsync_dir(parent)
    except BaseException:
        for child in staging.iterdir() if staging.exists() else ():
            child.unlink(missing_ok=True)
        if staging.exists():
            staging.rmdir()
        raise
    return [Written(directory / name, "created") for name in files]


def _write_into(directory: Path, files: Mapping[str, str]) -> list[Written]:
    staged: list[tuple[Path, Path, str]] = []
    result: list[Written] = []
    try:
        for name, text in files.items():
            target = directory / name
            exists = target.exists()
            if exists and target.read_text(encoding="utf-8", errors="replace") == text:
                result.append(Written(target, "unchanged"))
                continue
            staged.append(
                (
                    _write_temp(directory, name, text, target if exists else None),
                    target,
                    "replaced" if exists else "created",
                )
            )
    except BaseException:
        for tmp, _, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, target, status in staged:
        os.replace(tmp, target)
        result.append(Written(target, status))
    if staged:
        fsync_dir(directory)
    order = list(files)
    return sorted(result, key=lambda w: order.index(w.path.name))
