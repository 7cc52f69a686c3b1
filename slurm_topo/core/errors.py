"""Errors raised by slurm-topo, grouped by who has to act.

::

    SlurmTopoError
    ├── InputError (ValueError)        the operator's input is wrong: fix the file or the flag      exit 2
    │   ├── UsageError                 a command line that does not parse (click's, argparse's)
    │   ├── InventoryError             a bad inventory value, with FILE: nodes[i].key: reason (value)
    │   ├── HostlistError              a hostlist expression that does not parse
    │   └── ParseError                 a Slurm file or command output that does not parse
    ├── CommandError (RuntimeError)    an external command failed (argv, returncode, stderr tail)   exit 3
    ├── PlacementError (RuntimeError)  Slurm did not do what a plan asked (a task on another node)  exit 3
    └── OutputError (OSError)          an output could not be written; nothing was changed         exit 4

The library never prints or exits. Every entry point (``slurm-topo``, ``gpulayer-srun``, the per-task shim)
maps exceptions to exit codes with :func:`exit_code_for` and nothing else (the one place that does it is
:func:`slurm_topo.plumbing.entry.run_entry`); :class:`ExitCode` is the one table (README "Exit codes" shows it
to users). ``apply``'s outcome codes (10-13) are disjoint from the input/command codes, so
``--detailed-exitcodes`` can never be mistaken for a bad inventory.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every slurm-topo entry point. One table, documented in README "Exit codes"."""

    OK = 0
    """Done; for ``apply`` also "unchanged", "deferred", a dry run, or applied without
    --detailed-exitcodes."""
    PROBLEMS = 1
    """The command ran and found problems: ``lint`` problems, ``check`` would reject. (``health`` exits 0
    whatever the verdict: the verdict is in its record, docs/health.md.)"""
    INPUT = 2
    """Bad input or usage: an inventory, a flag, a file handed to us. Nothing was written."""
    COMMAND = 3
    """An external command (scontrol, srun, nvidia-smi, NVML) failed or could not be started."""
    OUTPUT = 4
    """An output could not be written; the previous files are as they were."""
    APPLIED = 10
    """``apply --detailed-exitcodes``: a change was applied (or a dry run would apply one)."""
    REFUSED = 11
    """``apply`` refused: nothing was changed (restart required, foreign file, Slurm would not load the
    set, …)."""
    ROLLED_BACK = 12
    """``apply`` failed and rolled back: the old files are live again."""
    ROLLBACK_FAILED = 13
    """``apply``'s rollback or recovery failed, or the journal cannot be read: an operator must look."""
    INTERNAL = 70
    """A bug in slurm-topo (an unexpected exception); the traceback goes to stderr. (EX_SOFTWARE)"""
    INTERRUPTED = 130
    """Interrupted (SIGINT / Ctrl-C)."""


class SlurmTopoError(Exception):
    """Root of every error slurm-topo raises on purpose. ``exit_code`` is what an entry point exits with."""

    exit_code: ExitCode = ExitCode.INPUT


class InputError(SlurmTopoError, ValueError):
    """Bad input: an inventory, a flag, or a file handed to us."""

    exit_code = ExitCode.INPUT


def show_value(value: object, limit: int = 40) -> str:
    """repr() of a value, cut at ``limit`` characters, safe to print on one line (an integer too long for
    Python's repr is shown by its length)."""
    try:
        text = repr(value)
    except ValueError:  # int above sys.get_int_max_str_digits()
        digits = int(value.bit_length() * 0.30103) if isinstance(value, int) else "?"
        return f"<a number of about {digits} digits>"
    return text if len(text) <= limit else text[:limit] + "…"


class UsageError(InputError):
    """A command line that does not parse: an unknown option, a missing or malformed value."""


class InventoryError(InputError):
    """A bad value in an inventory file, located as ``FILE: nodes[3].zone``."""

    def __init__(
        self, source: str, where: str, reason: str, value: object = None, *, has_value: bool = False
    ):
        self.source = source
        self.where = where
        self.reason = reason
        self.value = value
        self.has_value = has_value
        super().__init__(str(self))

    def __str__(self) -> str:
        loc = f"{self.source}: {self.where}: " if self.where else f"{self.source}: "
        tail = f" ({show_value(self.value)})" if self.has_value else ""
        return f"{loc}{self.reason}{tail}"


class HostlistError(InputError):
    """A hostlist expression that Slurm would not read (or reads unlike this project:
    slurm_topo.core.hostlist)."""

    def __init__(self, expression: str, reason: str):
        self.expression = expression
        self.reason = reason
        super().__init__(f"bad hostlist {show_value(expression)}: {reason}")


class ParseError(InputError):
    """A Slurm file (topology.conf, slurm.conf) or command output that does not parse."""

    def __init__(self, source: str, lineno: int | None, reason: str):
        self.source = source
        self.lineno = lineno
        self.reason = reason
        where = f"{source}:{lineno}" if lineno is not None else source
        super().__init__(f"{where}: {reason}")


class CommandError(SlurmTopoError, RuntimeError):
    """An external command failed or could not be started."""

    exit_code = ExitCode.COMMAND

    def __init__(
        self, argv: Sequence[str], returncode: int | None, stderr: str = "", *, timeout: float | None = None
    ):
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.timeout = timeout
        """Set when the command was killed after this many seconds (it ran; it did not answer in time)."""
        tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        if timeout is not None:
            what = f"did not answer within {timeout:g} s (slurmctld down or overloaded?)"
            tail = ""
        else:
            what = "could not be started" if returncode is None else f"exited {returncode}"
        super().__init__(f"{' '.join(self.argv)} {what}" + (f": {tail}" if tail else ""))


class PlacementError(SlurmTopoError, RuntimeError):
    """Slurm did not do what a plan asked (a task started on another node than its SLURM_HOSTFILE line)."""

    exit_code = ExitCode.COMMAND


class OutputError(SlurmTopoError, OSError):
    """Writing an output failed; the previous files are left as they were."""

    exit_code = ExitCode.OUTPUT


def exit_code_for(exc: BaseException) -> ExitCode:
    """The one mapper from an exception to an exit code, used by every entry point.

    Our own errors carry their code; Ctrl-C is 130; anything else is a bug in slurm-topo (70).
    """
    if isinstance(exc, SlurmTopoError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.INTERNAL
