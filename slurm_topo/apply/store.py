"""The state store: file primitives (staged, fsynced writes), the two locks, the journal, state.json
and the applied sets in ``<state-dir>``."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..plumbing.output import fsync_dir as _fsync_dir
from .base import MANAGED, STAGE_SUFFIX, ApplyOptions, Journal, JournalUnreadable, Refusal


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_synced(path: Path, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        if owner is not None and os.geteuid() == 0:
            os.fchown(fd, *owner)
        os.fsync(fd)
    finally:
        os.close(fd)


def _stage_path(slurm_dir: Path, name: str) -> Path:
    return slurm_dir / f".{name}{STAGE_SUFFIX}"


def _put(slurm_dir: Path, name: str, data: bytes | None, like: Mapping[str, int] | None) -> None:
    """Make ``slurm_dir/name`` hold ``data`` (None: absent) by a staged write + rename, keeping ``like``'s
    mode/owner (a new file is 0644). Does not fsync the directory."""
    target = slurm_dir / name
    if data is None:
        target.unlink(missing_ok=True)
        return
    tmp = _stage_path(slurm_dir, name)
    mode = like["mode"] if like else 0o644
    owner = (like["uid"], like["gid"]) if like else None
    _write_synced(tmp, data, mode, owner)
    os.replace(tmp, target)


def _meta(path: Path) -> dict[str, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


def _clean_stage(slurm_dir: Path) -> list[str]:
    removed = []
    for name in MANAGED:
        p = _stage_path(slurm_dir, name)
        if p.exists():
            p.unlink()
            removed.append(p.name)
    return removed


class _Lock:
    """``flock`` on ``<state-dir>/lock``: one run per state directory; a second one is refused at once."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / "lock"
        self.fd: int | None = None

    def __enter__(self) -> _Lock:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise Refusal(f"cannot open the lock {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise Refusal(f"another slurm-topo apply holds {self.path}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock


class _DirLock:
    """``flock`` on the ``--slurm-dir`` directory itself: what is written is locked, whatever the state dir.

    Two runs with different state directories on one config directory would otherwise interleave their
    renames (a mixed live set). The lock is taken on an ``O_DIRECTORY`` descriptor, so nothing is created in
    the config directory; a second run waits up to ``wait`` seconds, then is refused. Taken after the
    state-dir lock, always in this order. Between tries it calls ``sleep`` (the options' own: a test sees
    that a run found the directory locked).
    """

    def __init__(self, slurm_dir: Path, wait: float, sleep: Callable[[float], None] = time.sleep):
        self.dir = slurm_dir
        self.wait = wait
        self.sleep = sleep
        self.fd: int | None = None

    def __enter__(self) -> _DirLock:
        try:
            self.fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise Refusal(f"cannot open --slurm-dir {self.dir} to lock it: {exc.strerror or exc}") from None
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    raise Refusal(
                        f"another slurm-topo apply is writing {self.dir} (its lock on the directory was "
                        f"held for {self.wait:g}s; another --state-dir?)"
                    ) from None
                self.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            except OSError as exc:
                os.close(self.fd)
                self.fd = None
                raise Refusal(f"cannot lock --slurm-dir {self.dir}: {exc.strerror or exc}") from None

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


@contextmanager
def _locked(options: ApplyOptions) -> Iterator[None]:
    """Both locks of a writing run: the state directory's, then the config directory's."""
    with _Lock(options.state_dir), _DirLock(options.slurm_dir, options.lock_wait, options.sleep):
        yield


# --------------------------------------------------------------------------------------------------
# the state directory


def _journal_shape_ok(journal: object) -> bool:
    """The keys recovery reads, with their types (a hand-edited or truncated journal fails here, not
    later)."""
    if not isinstance(journal, dict):
        return False
    if not all(isinstance(journal.get(k), str) for k in ("id", "phase", "slurm_dir")):
        return False
    files, order = journal.get("files"), journal.get("order")
    if not isinstance(files, list) or not isinstance(order, list):
        return False
    names = set()
    for f in files:
        if (
            not isinstance(f, dict)
            or f.get("name") not in MANAGED
            or not {"old_sha", "new_sha", "meta"} <= set(f)
        ):
            return False
        names.add(f["name"])
    return set(order) <= names and "/" not in journal["id"] and journal["id"] not in ("", ".", "..")


class _State:
    def __init__(self, state_dir: Path):
        self.dir = state_dir
        self.journal_path = state_dir / "journal.json"
        self.state_path = state_dir / "state.json"
        self.sets = state_dir / "sets"

    def _write_json(self, path: Path, value: object) -> None:
        tmp = path.with_name(path.name + ".tmp")
        _write_synced(tmp, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode(), 0o600)
        os.replace(tmp, path)
        _fsync_dir(self.dir)

    def journal(self) -> Journal | None:
        try:
            data = _read(self.journal_path)
        except OSError as exc:
            raise JournalUnreadable(f"cannot read {self.journal_path}: {exc.strerror or exc}") from None
        if data is None:
            return None
        try:
            journal = json.loads(data)
        except ValueError:
            journal = None
        if not isinstance(journal, dict) or not _journal_shape_ok(journal):
            raise JournalUnreadable(
                f"{self.journal_path} is not a slurm-topo journal: fix or remove it by hand (the set copies "
                f"are in {self.sets})"
            )
        return journal

    def write_journal(self, journal: Journal) -> None:
        self._write_json(self.journal_path, journal)

    def drop_journal(self) -> None:
        self.journal_path.unlink(missing_ok=True)
        _fsync_dir(self.dir)

    def state(self) -> Journal:
        data = _read(self.state_path)
        try:
            return json.loads(data) if data else {}
        except ValueError:
            return {}

    def update_state(self, **values: object) -> None:
        st = self.state()
        st.update(values)
        self._write_json(self.state_path, st)

    def new_set_id(self) -> str:
        """The name of the next set: one past the highest sequence number in ``sets/`` (the leading digits
        of a name; an earlier release's names hold the clock's nanoseconds there and count as theirs),
        zero-padded to 20 digits, then ``-<pid>``. Names sort in the order the sets were made, whatever
        the clock does."""
        highest = 0
        if self.sets.is_dir():
            for p in self.sets.iterdir():
                head = p.name.partition("-")[0]
                if head.isascii() and head.isdigit():
                    highest = max(highest, int(head))
        return f"{highest + 1:020d}-{os.getpid()}"

    def completed_sets(self) -> list[Path]:
        """The complete sets, oldest first: by name, except that the one ``state.json`` records as last
        applied is last (an earlier release named sets by the clock, so after a step back the newest could
        sort first)."""
        if not self.sets.is_dir():
            return []
        last = self.state().get("last_applied")
        done = sorted(p for p in self.sets.iterdir() if (p / "complete").exists())
        return sorted(done, key=lambda p: p.name == last)  # stable: only last_applied moves

    def prune(self, keep: int) -> None:
        if not self.sets.is_dir():
            return
        done = self.completed_sets()
        for p in done[: max(0, len(done) - keep)]:
            shutil.rmtree(p, ignore_errors=True)
        for p in self.sets.iterdir():  # sets of failed or recovered runs
            if not (p / "complete").exists() and p.name != (self.journal() or {}).get("id"):
                shutil.rmtree(p, ignore_errors=True)
