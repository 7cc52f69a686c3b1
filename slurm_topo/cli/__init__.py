"""``slurm-topo``: a thin click layer over the library.

Errors map to exit codes in one place: ``main`` runs the group through
:func:`slurm_topo.plumbing.entry.run_entry`, which prints ``slurm-topo: error: …`` and exits with
:func:`slurm_topo.core.errors.exit_code_for` (the table is
:class:`slurm_topo.core.errors.ExitCode`, shown in README "Exit codes"). click's own usage errors become
:class:`~slurm_topo.core.errors.UsageError` (exit 2) and Ctrl-C exits 130. A command that found problems
(``lint``, ``check``) exits 1 itself; ``apply`` exits with its outcome.

One module per group of commands (``common`` holds the group and what they share); importing this
package registers them all.
"""

from __future__ import annotations

import sys

import click

from ..core.errors import UsageError
from ..plumbing.entry import run_entry
from . import (  # noqa: F401  (each registers its commands with the group)
    apply,
    calibrate,
    cost,
    doctor,
    explain,
    generate,
    gpu,
    health,
    metrics,
    relax,
    report,
)
from .common import PROG, cli

__all__ = ["cli", "main"]


def _click_error(exc: click.ClickException) -> UsageError:
    """click's own error as ours: one line, ``slurm-topo: error: …``, with where to look for help."""
    message = exc.format_message().rstrip(".")
    if message[:2].istitle():  # click's "Invalid value …", "No such option …": our lines start lower-case
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return UsageError(message)


def _invoke(argv: list[str] | None) -> None:
    """Run the click group; click's exceptions become ours, so that ``run_entry`` maps every one."""
    try:
        cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C into Abort
        raise KeyboardInterrupt from None
    except click.ClickException as exc:
        no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
        if isinstance(exc, no_args) and exc.ctx is not None:  # a bare `slurm-topo` (or `slurm-topo gpu`)
            click.echo(exc.ctx.get_help(), err=True)
            raise UsageError(f"give a command (see '{exc.ctx.command_path} --help')") from None
        raise _click_error(exc) from None


def main(argv: list[str] | None = None) -> None:
    """``slurm-topo``: every outcome leaves through ``run_entry`` (one stderr line, one exit-code table)."""
    run_entry(PROG, lambda: _invoke(argv))
