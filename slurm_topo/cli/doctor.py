"""``slurm-topo doctor``: this controller's wiring, checked against the live Slurm
(slurm_topo/slurmconfig/doctor.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..core.errors import ExitCode
from ..plumbing.runner import SubprocessRunner
from .common import _load, _partitions, cli, inventory_option, records_option, scontrol_option


@cli.command()
@click.option(
    "--slurm-conf",
    metavar="FILE",
    help="slurm.conf (default: the one slurmctld reports); the generated files and the filter sit beside it.",
)
@inventory_option
@records_option
@scontrol_option
@click.option(
    "--state-dir",
    default="/var/lib/slurm-topo",
    show_default=True,
    metavar="DIR",
    help="apply's state directory (an interrupted apply's journal is a finding).",
)
@click.option(
    "--probe-nodes",
    type=click.IntRange(1, 1_000_000),
    metavar="N",
    help="Nodes of the --test-only zone:fail probe (default: one more than slurm-topo-nodes.conf holds).",
)
@click.option(
    "--json", "as_json", is_flag=True, help='One JSON object: {"ok", "findings", "passed", "notes"}.'
)
def doctor(
    slurm_conf: str | None,
    inventories: tuple[str, ...],
    records_dir: str | None,
    scontrol: bool,
    state_dir: str,
    probe_nodes: int | None,
    as_json: bool,
) -> None:
    """Check the controller's wiring against the live Slurm: topology plugin and `scontrol show topology`,
    node features, the submit filter and its data file, a `sbatch --test-only` decision, the SPANK plugin,
    gres.conf Links=, the units. One line per finding with its fix; exit 1 on any.

    With --inventory (and --records/--scontrol as `generate` was run), the files must be generated from it."""
    from ..slurmconfig.doctor import DoctorOptions, examine, render_text

    fingerprint = None
    if inventories or records_dir:
        from ..render import fingerprint as render_fingerprint

        inventory = _load(inventories, None, scontrol, records_dir)
        partitions = _partitions(None, scontrol)

        def fingerprint(version: tuple[int, int]) -> str:
            return render_fingerprint(inventory, version, partitions)

    options = DoctorOptions(
        slurm_conf=Path(slurm_conf) if slurm_conf else None,
        inventory_fingerprint=fingerprint,
        state_dir=Path(state_dir),
        probe_nodes=probe_nodes,
    )
    report = examine(SubprocessRunner(), options)
    if as_json:
        click.echo(json.dumps(report.as_json(), sort_keys=True))
    else:
        click.echo(render_text(report), nl=False)
    if report.findings:
        sys.exit(ExitCode.PROBLEMS)
