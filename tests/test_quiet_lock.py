"""tests/quiet.py: a quiet test waits for the tests running beside it, and once it waits, none starts."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from quiet import QuietLock


def _taken(fd: int, how: int) -> bool:
    """Whether another open file holds ``fd``'s lock against ``how`` (a non-blocking try)."""
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _until(cond, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(5000):  # a state another thread reaches, not a time: up to ~50 s on a stalled machine
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"never: {what}")


def test_a_quiet_test_waits_for_the_running_ones_and_stops_new_ones(tmp_path: Path) -> None:
    running, quiet, later = QuietLock(str(tmp_path)), QuietLock(str(tmp_path)), QuietLock(str(tmp_path))
    probe_gate = os.open(tmp_path / "gate", os.O_RDWR)
    probe_main = os.open(tmp_path / "main", os.O_RDWR)
    running.hold(exclusive=False)
    assert not _taken(probe_gate, fcntl.LOCK_SH)  # a running test leaves the gate open
    assert _taken(probe_main, fcntl.LOCK_EX) and not _taken(probe_main, fcntl.LOCK_SH)

    got, done = threading.Event(), threading.Event()

    def quiet_test() -> None:
        quiet.hold(exclusive=True)
        got.set()
        done.wait()
        quiet.release()

    t = threading.Thread(target=quiet_test)
    t.start()
    try:
        _until(lambda: _taken(probe_gate, fcntl.LOCK_SH), "the quiet test closes the gate")
        assert not got.is_set()  # the running test still holds main
        # a test that would start now waits at the gate (its first step), though main is only shared
        assert not _taken(probe_main, fcntl.LOCK_SH)
        running.release()
        _until(got.is_set, "the quiet test starts once the running one has ended")
        assert _taken(probe_main, fcntl.LOCK_SH)  # nothing runs beside it
    finally:
        done.set()
        t.join()
    later.hold(exclusive=False)  # and after it, tests start again
    assert _taken(probe_main, fcntl.LOCK_EX)
    later.release()
    assert not _taken(probe_main, fcntl.LOCK_EX) and not _taken(probe_gate, fcntl.LOCK_EX)
