"""``slurm-topo relax``: the wait-or-go pass over pending ``:auto`` jobs."""

from __future__ import annotations

import json

import click

from ..core.errors import CommandError
from ..plumbing.runner import SubprocessRunner
from .common import cli


@cli.command()
@click.option("--once", is_flag=True, help="One pass, then exit (the systemd timer's form).")
@click.option("--interval", default=60.0, show_default=True, metavar="S", help="Seconds between passes.")
@click.option("--dry-run", is_flag=True, help="Print the relaxations, make none.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per pass.")
@click.option("--lock", "lock_path", default="/run/slurm-topo/relax.lock", show_default=True, metavar="FILE")
@click.option(
    "--max-changes", default=200, show_default=True, metavar="N", help="Jobs changed a pass at most."
)
@click.option(
    "--load-aware/--plain-budget",
    default=True,
    show_default=True,
    help="Multiply budgets by 1/(1-busy share)^2, and hold them while the queue asks for every node "
    "(docs/relax.md).",
)
@click.option(
    "--estimates",
    default=0,
    show_default=True,
    type=click.IntRange(0, 1000),
    metavar="N",
    help="Also widen jobs whose sbatch --test-only start one level looser saves more than it costs: "
    "at most N --test-only calls a pass (0: off).",
)
@click.option(
    "--estimate-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(1, 120),
    metavar="S",
    help="Seconds for one sbatch --test-only call.",
)
@click.option(
    "--now",
    "now_epoch",
    type=click.FloatRange(0, 2**40),
    default=None,
    metavar="EPOCH",
    help="Judge waits as if it were this time (seconds since the epoch; default: the clock). For tests "
    "and what-if runs with --dry-run.",
)
@click.option("--verbose", "-v", is_flag=True, help="Also print how Slurm was read (the access backend).")
def relax(
    once: bool,
    interval: float,
    dry_run: bool,
    as_json: bool,
    lock_path: str,
    max_changes: int,
    load_aware: bool,
    estimates: int,
    estimate_timeout: float,
    now_epoch: float | None,
    verbose: bool,
) -> None:
    """Widen pending LEVEL:auto jobs one level once their wait passed the budget in their AdminComment
    (scontrol update Features=, the decision appended to AdminComment). Guide: docs/relax.md."""
    import time as _time

    from ..relaxer import relax as rx

    while True:
        with rx.pass_lock(lock_path) as held:
            if not held:
                skipped = f"another pass holds {lock_path}; skipped"
                click.echo(json.dumps({"skipped": skipped}) if as_json else f"relax: {skipped}")
            else:
                try:
                    done = rx.run_pass(
                        SubprocessRunner(),
                        now=now_epoch,
                        dry_run=dry_run,
                        max_changes=max_changes,
                        load_aware=load_aware,
                        estimates=estimates,
                        estimate_timeout=estimate_timeout,
                        estimate_seconds=max(10.0, min(120.0, interval)),
                    )
                except CommandError as exc:
                    if once:
                        raise
                    click.echo(f"relax: pass failed, next in {interval:g} s: {exc}", err=True)
                else:
                    if as_json:
                        click.echo(rx.dumps(done))
                    else:
                        if verbose:
                            click.echo(
                                f"relax: jobs read with the {done.backend} backend (slurm_topo.access)"
                            )
                        for line in rx.log_lines(done, dry_run):
                            click.echo(("(dry run) " if dry_run else "") + line)
        if once:
            return
        _time.sleep(max(1.0, interval))
