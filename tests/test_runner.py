"""The runner that every reader of Slurm goes through: what a command prints reaches the readers as text
whatever bytes a user put in it."""

from __future__ import annotations

import sys

import pytest

from slurm_topo.access import jobs_from_text
from slurm_topo.core.errors import CommandError
from slurm_topo.plumbing.runner import SubprocessRunner

# A job line as scontrol prints it, the name holding bytes that are not UTF-8 (Slurm passes them as is).
LINE = b"JobId=7 JobName=x\xff\xfey UserId=u(1) JobState=PENDING Reason=Priority\n"


def _printing(data: bytes) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({data!r})"]


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    """A job name of invalid UTF-8 must not stop the reader (a relax pass would fail for every job): the
    bytes read as U+FFFD and the line's other fields are read as they are."""
    text = SubprocessRunner().run(_printing(LINE))
    (job,) = jobs_from_text(text).jobs
    assert job["JobName"] == "x\ufffd\ufffdy"
    assert (job["JobId"], job["JobState"], job["Reason"]) == ("7", "PENDING", "Priority")


def test_a_failing_command_is_a_command_error_with_its_stderr() -> None:
    argv = [sys.executable, "-c", "import sys; sys.stderr.buffer.write(b'bad \\xff thing\\n'); sys.exit(3)"]
    with pytest.raises(CommandError, match="exited 3: bad \ufffd thing") as err:
        SubprocessRunner().run(argv)
    assert err.value.returncode == 3


def test_output_reads_as_text_mode_reads_it() -> None:
    """The runner decodes the bytes once itself: the same text as ``subprocess`` text mode (UTF-8 with
    replacement, universal newlines) on seeded output of CR, LF, CRLF, invalid and multi-byte UTF-8."""
    import random
    import subprocess

    pieces = [b"\r", b"\n", b"\r\n", b"\n\r", b"\xff", b"\xc3", b"\xc3\xa9", b"\xe2\x80", b"a", b" ", b"\x00"]
    rng = random.Random(77)
    for _ in range(5):
        data = b"".join(rng.choice(pieces) for _ in range(20_000))
        argv = _printing(data)
        text_mode = subprocess.run(argv, capture_output=True, encoding="utf-8", errors="replace", check=True)
        assert SubprocessRunner().run(argv) == text_mode.stdout
    assert SubprocessRunner().run(_printing(b"a\r\nb\rc\xff")) == "a\nb\nc\ufffd"
