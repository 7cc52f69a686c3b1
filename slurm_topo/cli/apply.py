"""``slurm-topo apply``: generate, prove, install and reconfigure (the regeneration job)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..plumbing.runner import SubprocessRunner
from ..plumbing.version import parse_slurm_version
from ..render import RenderOptions, render_all
from .common import (
    _load,
    _partitions,
    _slurm_version,
    _warn,
    cli,
    inventory_option,
    nodes_from_option,
    partitions_option,
    records_option,
    scontrol_option,
    slurm_version_option,
)


@cli.command()
@inventory_option
@records_option
@click.option(
    "--slurm-dir", required=True, metavar="DIR", help="Where the live Slurm files are (e.g. /etc/slurm)."
)
@click.option(
    "--state-dir",
    default="/var/lib/slurm-topo",
    show_default=True,
    metavar="DIR",
    help="Lock, journal, state and the last 10 sets of backups (never inside --slurm-dir).",
)
@slurm_version_option("The running Slurm (default: `scontrol --version`).")
@nodes_from_option
@partitions_option
@scontrol_option
@click.option("--assume-minor-equals-index", is_flag=True, help="As for generate (gres.conf File=).")
@click.option("--gpu-device-prefix", default="/dev/nvidia", show_default=True, metavar="PATH")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--no-reconfigure", is_flag=True, help="Write the files but never contact slurmctld.")
@click.option("--adopt", is_flag=True, help="Take over live files without slurm-topo's header (once).")
@click.option(
    "--no-slurm-check",
    is_flag=True,
    help="Do not prove a changed set with a throwaway slurmctld before it goes live (docs/apply.md).",
)
@click.option(
    "--slurm-check-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1, 3600),
    metavar="S",
    help="Seconds the throwaway slurmctld may take, plus 12 ms per node of the set (a timeout refuses).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Apply over --max-removal, pending jobs naming a removed group and NVLink blocks that would move.",
)
@click.option(
    "--max-removal",
    default=0.2,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Refuse when more than this share of nodes would disappear.",
)
@click.option(
    "--min-interval",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds between two reconfigures (a change inside it waits for the next run).",
)
@click.option("--sync-cmd", metavar="CMD", help="Run before reconfiguring (copy the files to the nodes).")
@click.option(
    "--lock-wait",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds to wait for another apply writing the same --slurm-dir, then refuse.",
)
@click.option(
    "--detailed-exitcodes",
    is_flag=True,
    help="Exit 10 when something was applied (or a dry run would apply).",
)
@click.option("--recover", "mode", flag_value="recover", help="Only finish or revert a half-done run.")
@click.option("--rollback", "mode", flag_value="rollback", help="Put the previous set back.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def apply(
    inventories: tuple[str, ...],
    records_dir: str | None,
    slurm_dir: str,
    state_dir: str,
    slurm_version: str | None,
    nodes_from: str | None,
    partitions_from: str | None,
    scontrol: bool,
    assume_minor_equals_index: bool,
    gpu_device_prefix: str,
    dry_run: bool,
    no_reconfigure: bool,
    adopt: bool,
    no_slurm_check: bool,
    slurm_check_timeout: float,
    force: bool,
    max_removal: float,
    min_interval: float,
    sync_cmd: str | None,
    lock_wait: float,
    detailed_exitcodes: bool,
    mode: str | None,
    as_json: bool,
) -> None:
    """Keep Slurm true (cron/systemd): regenerate, lint, stage, reconfigure only on change, verify, roll back.

    Exit: 0 applied, unchanged, deferred or dry run (the summary says which; 10 for applied, or a dry run
    that would apply, with --detailed-exitcodes), 11 refused (nothing changed), 12 failed and rolled back,
    13 rollback failed or journal unreadable (look, then --recover). Every run prints one summary line.
    """
    from ..apply import ApplyOptions, recover, rollback, run_apply

    options = ApplyOptions(
        slurm_dir=Path(slurm_dir),
        state_dir=Path(state_dir),
        dry_run=dry_run,
        no_reconfigure=no_reconfigure,
        adopt=adopt,
        slurm_check=not no_slurm_check,
        slurm_check_timeout=slurm_check_timeout,
        force=force,
        max_removal=max_removal,
        min_interval=min_interval,
        sync_cmd=sync_cmd,
        lock_wait=lock_wait,
        detailed_exitcodes=detailed_exitcodes,
        slurm_version=parse_slurm_version(slurm_version) if slurm_version else None,
        progress=_warn,
    )
    runner = SubprocessRunner()
    if mode == "recover":
        result = recover(options, runner)
    elif mode == "rollback":
        result = rollback(options, runner)
    else:
        inventory = _load(inventories, nodes_from, scontrol, records_dir)
        version = options.slurm_version or _slurm_version(None)
        rendered = render_all(
            inventory,
            version,
            _partitions(partitions_from, scontrol),
            RenderOptions(assume_minor_equals_index, gpu_device_prefix),
        )
        result = run_apply(options, rendered, runner)
    if as_json:
        doc = {
            "status": result.status,
            "exit_code": int(result.exit_code),
            "summary": result.summary,
            "details": list(result.details),
            "changed": list(result.changed),
            "reconfigured": result.reconfigured,
        }
        click.echo(json.dumps(doc, sort_keys=True))
    else:
        for line in result.details:
            _warn(line)
        click.echo(result.summary)
    sys.exit(result.exit_code)
