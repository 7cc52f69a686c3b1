"""tests/quiet.py: a quiet test waits for the tests running beside it, and once it waits, none starts until it
has ended."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from quiet import QuietLock


def _taken(fd: int, how: int) -> bool:
    """Whether another open file holds ``fd``'s lock against ``how`` (a non-blocking try)."""
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # a state another thread reaches, not a time: up to ~30 s on a stalled machine
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"never: {what}")


class _Holder:
    """A lock held by a thread of its own: ``got`` once it holds, released when ``done`` is set."""

    def __init__(self, lock: QuietLock, exclusive: bool) -> None:
        self.lock, self.exclusive = lock, exclusive
        self.got, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)  # a wrong lock fails, never hangs
        self.thread.start()

    def _run(self) -> None:
        self.lock.hold(self.exclusive)
        self.got.set()
        self.done.wait()
        self.lock.release()

    def end(self) -> None:
        self.done.set()
        self.thread.join(30)


def test_a_quiet_test_waits_for_the_running_ones_and_stops_new_ones(tmp_path: Path) -> None:
    locks = [QuietLock(str(tmp_path)) for _ in range(3)]
    running, quiet, later = locks
    probe_gate = os.open(tmp_path / "gate", os.O_RDWR)
    probe_main = os.open(tmp_path / "main", os.O_RDWR)
    holders: list[_Holder] = []
    try:
        running.hold(exclusive=False)
        assert not _taken(probe_gate, fcntl.LOCK_SH)  # a running test leaves the gate open
        assert _taken(probe_main, fcntl.LOCK_EX) and not _taken(probe_main, fcntl.LOCK_SH)

        q = _Holder(quiet, exclusive=True)
        holders.append(q)
        _until(lambda: _taken(probe_gate, fcntl.LOCK_SH), "the quiet test closes the gate")
        assert not q.got.is_set()  # the running test still holds main
        # a test that would start now waits, though main is only held shared
        new = _Holder(later, exclusive=False)
        holders.append(new)
        assert not new.got.wait(0.2)  # (a wait, not a time asserted: it must not get in at all)

        running.release()
        _until(q.got.is_set, "the quiet test starts once the running one has ended")
        assert _taken(probe_main, fcntl.LOCK_SH)  # nothing runs beside it
        assert not new.got.wait(0.2)  # the new test still waits

        q.end()
        assert not q.thread.is_alive()
        _until(new.got.is_set, "the new test starts once the quiet one has ended")
        assert _taken(probe_main, fcntl.LOCK_EX) and not _taken(probe_main, fcntl.LOCK_SH)
        new.end()
        assert not new.thread.is_alive()
        assert not _taken(probe_main, fcntl.LOCK_EX) and not _taken(probe_gate, fcntl.LOCK_EX)
    finally:
        running.release()  # (a release of what is not held does nothing)
        for h in holders:
            h.end()
        for lock in locks:
            lock.close()
        os.close(probe_gate)
        os.close(probe_main)


class _Interrupted(BaseException):
    """What a signal raises inside flock (KeyboardInterrupt is one)."""


def test_an_interrupted_quiet_test_leaves_the_gate_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quiet test interrupted while it waits for the running ones does not keep new ones out."""
    running, quiet = QuietLock(str(tmp_path)), QuietLock(str(tmp_path))
    probe_gate = os.open(tmp_path / "gate", os.O_RDWR)
    raised: list[BaseException] = []
    try:
        running.hold(exclusive=False)
        real = fcntl.flock

        def interrupted(fd: int, how: int) -> None:
            if fd == quiet.main:
                raise _Interrupted
            real(fd, how)

        def quiet_test() -> None:
            try:
                quiet.hold(exclusive=True)
            except _Interrupted as exc:
                raised.append(exc)

        monkeypatch.setattr(fcntl, "flock", interrupted)
        t = threading.Thread(target=quiet_test, daemon=True)  # a wrong lock fails, never hangs
        t.start()
        t.join(30)
        monkeypatch.undo()
        assert not t.is_alive() and len(raised) == 1
        assert not _taken(probe_gate, fcntl.LOCK_SH)
    finally:
        running.release()
        running.close()
        quiet.close()
        os.close(probe_gate)
