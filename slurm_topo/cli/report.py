"""``slurm-topo report``: what placement cost, from Slurm's accounting (sacct)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from ..core.errors import InputError
from ..plumbing.runner import SubprocessRunner
from .common import _load, _warn, cli, inventory_option


def _epoch(text: str, what: str) -> int:
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"):
        try:
            return int(time.mktime(time.strptime(text, fmt)))
        except ValueError:
            continue
    raise InputError(f"{what} {text[:30]!r}: expected YYYY-MM-DD[THH:MM[:SS]]")


@cli.command()
@inventory_option
@click.option(
    "--since", default="now-7days", show_default=True, help="sacct --starttime (YYYY-MM-DD, now-7days …)."
)
@click.option("--until", default="now", show_default=True, help="sacct --endtime.")
@click.option(
    "--partition", "partitions", multiple=True, metavar="NAME", help="Only these partitions; repeat."
)
@click.option(
    "--plan", metavar="PLAN", help="The plan for every job (tp=8,pp=4,bytes=10G): overrides the jobs'."
)
@click.option("--split-at", metavar="DATE", help="Summaries before/after this date (the filter's install).")
@click.option(
    "--sacct-json",
    metavar="FILE",
    help="Read a saved `sacct --json --allusers --allocations` instead of running sacct.",
)
@click.option(
    "--backend",
    type=click.Choice(["json", "text"]),
    help="How to read sacct (default: --json, text without it).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object: every job, the summaries, the totals."
)
@click.option("--html", "html_path", metavar="FILE", help="Also write one self-contained HTML page.")
def report(
    inventories: tuple[str, ...],
    since: str,
    until: str,
    partitions: tuple[str, ...],
    plan: str | None,
    split_at: str | None,
    sacct_json: str | None,
    backend: str | None,
    as_json: bool,
    html_path: str | None,
) -> None:
    """Finished multi-node jobs from Slurm's accounting: the levels each spanned, its locality request and
    the filter's record, the predicted step slowdown against the best placement of the same hardware on an
    idle fleet, and the GPU-hours lost to it, summed by partition, user, locality mode and week.
    Guide: docs/report.md."""
    from ..access.accounting import finished_from_json, load_finished
    from ..reports import report as rp

    inventory = _load(inventories)
    if sacct_json:
        try:
            listing = finished_from_json(Path(sacct_json).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"{sacct_json}: cannot read: {exc.strerror}") from None
    else:
        runner = SubprocessRunner()
        listing = load_finished(lambda a: runner.run(a, timeout=600), since, until, backend)
    for who, why in listing.refused:
        _warn(f"report: job {who} refused: {why}")
    done = rp.build_report(
        listing.jobs,
        inventory,
        plan=plan,
        partitions=partitions,
        split_at=_epoch(split_at, "--split-at") if split_at else None,
        refused=listing.refused,
    )
    if html_path:
        from ..reports.report_html import write_html

        write_html(html_path, done)
    if as_json:
        click.echo(json.dumps(done.as_dict(), indent=2, sort_keys=True))
    else:
        click.echo(rp.format_report(done), nl=False)
