"""How every entry point ends: one message line in one style, and the exit code from ``exit_code_for``.

``slurm-topo``, ``gpulayer-srun`` and the per-task shim run their body through :func:`run_entry`; nothing else
turns an exception into an exit code. The lines are::

    PROG: error: <what is wrong>                        our own errors (exit 2, 3, 4, …: the class says)
    PROG: interrupted                                    Ctrl-C / SIGINT (exit 130)
    <traceback>
    PROG: error: internal error (<Type>: <text>); …     anything else: a bug (exit 70)

A body may also end with a plain ``sys.exit(code)`` (``lint`` found problems, ``apply``'s outcome): that code
passes through untouched.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from ..core.errors import ExitCode, InputError, exit_code_for


def read_input(path: str | Path, *, what: str = "", errors: str = "strict") -> str:
    """The text of a file named on the command line; an unreadable one is an :class:`InputError` (exit 2).

    The message is ``[WHAT ]FILE: cannot read: <reason>`` (``what``: the option, e.g. ``--topology``).
    ``errors``: as for :meth:`bytes.decode` (``"replace"`` for captures that may hold stray bytes).
    """
    where = f"{what} {path}" if what else str(path)
    try:
        return Path(path).read_text(encoding="utf-8", errors=errors)
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: cannot read: not UTF-8 text (byte {exc.start})") from None


MAX_ERROR_LINE = 600
"""The longest error line printed: a value that reached a message whole (a multi-kilobyte label, a command's
output) is cut, never printed whole."""


def _cut(text: str, limit: int = MAX_ERROR_LINE) -> str:
    text = text.replace("\r", " ").replace("\n", " ")  # one line, whatever the message carried
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_line(prog: str, exc: BaseException) -> str:
    """The one stderr line for ``exc`` (without the traceback that an internal error also gets), at most
    :data:`MAX_ERROR_LINE` characters."""
    code = exit_code_for(exc)
    if code is ExitCode.INTERRUPTED:
        return f"{prog}: interrupted"
    try:
        what = str(exc)
    except ValueError:
        what = type(exc).__name__
    if code is ExitCode.INTERNAL:
        return (
            f"{prog}: error: internal error ({type(exc).__name__}: {_cut(what, 300)}); this is a bug in "
            "slurm-topo, please report it with the traceback above"
        )
    return _cut(f"{prog}: error: {what}")


def report(prog: str, exc: BaseException) -> ExitCode:
    """Print what ``exc`` means on stderr (a traceback first for a bug) and return its exit code."""
    code = exit_code_for(exc)
    if code is ExitCode.INTERNAL:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.stderr.write(error_line(prog, exc) + "\n")
    sys.stderr.flush()
    return code


def run_entry(prog: str, body: Callable[[], object]) -> None:
    """Run ``body``; return when it returns (exit 0), else exit with the code :func:`exit_code_for` gives its
    exception. ``SystemExit`` passes through."""
    try:
        body()
    except SystemExit:
        raise
    except (Exception, KeyboardInterrupt) as exc:
        sys.exit(int(report(prog, exc)))
