"""The runner that every reader of Slurm goes through: what a command prints reaches the readers as text
whatever bytes a user put in it."""

from __future__ import annotations

import sys

import pytest

from slurm_topo.access import jobs_from_text
from slurm_topo.errors import CommandError
from slurm_topo.runner import SubprocessRunner

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
