"""``slurm-topo health`` and ``health-sync``: a node's link health, and its records into Slurm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.errors import InputError
from ..plumbing.runner import SubprocessRunner
from .common import _warn, cli

if TYPE_CHECKING:
    from ..health.drain import Action


@cli.command()
@click.option(
    "--node-name", metavar="NAME", help="Slurm node name (default $SLURMD_NODENAME, else hostname -s)."
)
@click.option("--nvml-from", metavar="FILE", help="NVML answers from a JSON file instead of the driver.")
@click.option("--no-nvml", is_flag=True, help="Do not ask NVML (ports only).")
@click.option(
    "--sysfs-root", default="/sys", show_default=True, metavar="DIR", help="Root laid out like /sys."
)
@click.option(
    "--state",
    "state_file",
    default="/var/lib/slurm-topo/health-state.json",
    show_default=True,
    metavar="FILE",
    help="Previous pass (counter deltas, hysteresis); replaced atomically.",
)
@click.option("--records", "records_dir", metavar="DIR", help="Also write DIR/health/<node>.json atomically.")
@click.option(
    "--threshold", "thresholds", multiple=True, metavar="KEY=VALUE", help="Override a limit; repeat."
)
@click.option("--json", "as_json", is_flag=True, help="The record as one JSON object.")
def health(
    node_name: str | None,
    nvml_from: str | None,
    no_nvml: bool,
    sysfs_root: str,
    state_file: str,
    records_dir: str | None,
    thresholds: tuple[str, ...],
    as_json: bool,
) -> None:
    """This node's GPU links (NVML) and InfiniBand/RoCE ports (sysfs): a verdict per link and port (ok,
    degraded, down) with reasons. Guide: docs/health.md."""
    import os
    import socket

    from ..core.model import NODE_NAME_RE
    from ..health.node import health_text, node_health, write_record
    from ..health.verdict import parse_thresholds

    for pair in thresholds:  # a bare word is a missing '=', not an unknown key
        if "=" not in pair:
            raise InputError(f"--threshold {pair!r}: give KEY=VALUE (e.g. hysteresis=3)")
    limits = parse_thresholds(thresholds)
    if records_dir and not Path(records_dir).is_dir():
        raise InputError(f"--records {records_dir}: not a directory")
    name = node_name or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
    if not NODE_NAME_RE.fullmatch(name):
        raise InputError(f"node name: must be 1-64 characters from [A-Za-z0-9._-] ({name[:80]!r})")
    record, warnings = node_health(
        name,
        nvml_from=Path(nvml_from) if nvml_from else None,
        use_nvml=not no_nvml,
        sysfs_root=Path(sysfs_root),
        state_file=Path(state_file) if state_file else None,
        thresholds=limits,
    )
    for line in warnings:
        _warn(f"warning: {line}")
    if records_dir:
        write_record(Path(records_dir), record)
    click.echo(json.dumps(record) if as_json else health_text(record), nl=as_json)


@cli.command("health-sync")
@click.option(
    "--records", "records_dir", required=True, metavar="DIR", help="The records folder (DIR/health/)."
)
@click.option(
    "--max-age", default=900.0, show_default=True, metavar="S", help="Ignore records older than S s."
)
@click.option("--dry-run", is_flag=True, help="Print the changes, make none.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def health_sync(records_dir: str, max_age: float, dry_run: bool, as_json: bool) -> None:
    """Drain nodes whose health record has a hard fault; resume only the drains made here (reason
    'slurm-topo-health: ...'). At most one change per node per pass. Guide: docs/health.md."""
    from ..health.drain import SyncError, sync

    log: list[str] = []
    try:
        actions = sync(Path(records_dir), SubprocessRunner(), max_age=max_age, dry_run=dry_run, log=log)
    except SyncError as exc:  # some updates failed: the whole pass is still reported, then exit 3
        _sync_report(log, exc.actions, exc.failed, dry_run, as_json)
        raise
    except BaseException:  # no pass: --json prints nothing (the error line says why); text keeps its log
        if not as_json:
            _sync_report(log, [], [], dry_run, as_json)
        raise
    _sync_report(log, actions, [], dry_run, as_json)


def _sync_report(
    log: list[str], actions: list[Action], failed: list[Action], dry_run: bool, as_json: bool
) -> None:
    """``health-sync``'s answer: its log lines, or (``--json``) one object of the pass's actions."""
    if as_json:
        doc = {
            "dry_run": dry_run,
            "actions": [
                {
                    "node": a.node,
                    "action": a.verb,
                    "why": a.why,
                    "command": list(a.argv),
                    "failed": a in failed,
                }
                for a in actions
            ],
            "log": log,
        }
        click.echo(json.dumps(doc, sort_keys=True))
    else:
        for line in log:
            click.echo(("(dry run) " if dry_run else "") + line)
