"""The quiet lock: a test marked ``quiet`` measures the machine's speed (the shaped testbed's rates and
gloo's latency, on two shared cores), so under pytest-xdist it runs while no other test does.
tests/conftest.py takes it around every test on a worker; in one process (``-n 0``) there is none."""

from __future__ import annotations

import fcntl
import os


class QuietLock:
    """A readers-writer lock over two files that every worker of one run opens: each test holds ``main``
    shared while it runs (its set-up and tear-down included); a ``quiet`` test holds it exclusive, so it
    starts once the tests running on other workers have ended, and none starts until it has. ``gate``
    gives the quiet test precedence: it is taken exclusive first, and a test takes it shared only to get
    ``main``, so a stream of other tests on three workers cannot keep ``main`` shared for ever."""

    def __init__(self, directory: str) -> None:
        self.gate = os.open(os.path.join(directory, "gate"), os.O_RDWR | os.O_CREAT, 0o600)
        self.main = os.open(os.path.join(directory, "main"), os.O_RDWR | os.O_CREAT, 0o600)

    def hold(self, exclusive: bool) -> None:
        fcntl.flock(self.gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            fcntl.flock(self.main, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except BaseException:  # interrupted while waiting for main: the gate is not kept closed
            fcntl.flock(self.gate, fcntl.LOCK_UN)
            raise
        if not exclusive:
            fcntl.flock(self.gate, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self.main, fcntl.LOCK_UN)
        fcntl.flock(self.gate, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self.gate)
        os.close(self.main)
