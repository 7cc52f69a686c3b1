"""Errors raised by slurm-topo, grouped by who has to act.

::

    SlurmTopoError
    ├── InputError (ValueError)        the operator's input is wrong: fix the file or the flag      exit 2
    │   ├── InventoryError             a bad inventory value, with FILE: nodes[i].key: reason (value)
    │   ├── HostlistError              a hostlist expression that does not parse
    │   └── ParseError                 a Slurm file or command output that does not parse
    ├── CommandError (RuntimeError)    an external command failed (argv, returncode, stderr tail)   exit 3
    └── OutputError (OSError)          an output could not be written; nothing was changed         exit 4

The library never prints or exits; ``slurm_topo.cli`` maps these to exit codes in one place.
"""

from __future__ import annotations

from collections.abc import Sequence


class SlurmTopoError(Exception):
    """Root of every error slurm-topo raises on purpose."""


class InputError(SlurmTopoError, ValueError):
    """Bad input: an inventory, a flag, or a file handed to us."""


def show_value(value: object, limit: int = 40) -> str:
    """repr() of a value, cut at ``limit`` characters, safe to print on one line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


class InventoryError(InputError):
    """A bad value in an inventory file, located as ``FILE: nodes[3].zone``."""

    def __init__(self, source: str, where: str, reason: str, value: object = None, *, has_value: bool = False):
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
    """A hostlist expression that ClusterShell cannot parse."""

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

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str = ""):
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr
        tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        what = "could not be started" if returncode is None else f"exited {returncode}"
        super().__init__(f"{' '.join(self.argv)} {what}" + (f": {tail}" if tail else ""))


class OutputError(SlurmTopoError, OSError):
    """Writing an output failed; the previous files are left as they were."""
