"""``slurm-topo explain``: why a job landed where it did (or waits), and ``check``'s decision text."""

from __future__ import annotations

import json
from typing import Any

import click

from ..core.errors import InputError
from ..plumbing.runner import SubprocessRunner
from ..plumbing.text import counted
from ..policy import Decision, Survey
from .common import _load, cli, inventory_option, records_option
from .cost import _links_table


@cli.command()
@click.argument("job_id", metavar="JOBID")
@inventory_option
@records_option
@click.option(
    "--plan", metavar="PLAN", help="The job's parallelism plan, e.g. tp=8,pp=4,bytes=10G (over its comment)."
)
@click.option(
    "--links", "links_file", metavar="FILE", help="Link constants (a links: mapping) over the defaults."
)
@click.option("--svg", "svg_file", metavar="FILE", help="Draw where the job landed and the best placement.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def explain(
    job_id: str,
    inventories: tuple[str, ...],
    records_dir: str | None,
    plan: str | None,
    links_file: str | None,
    svg_file: str | None,
    as_json: bool,
) -> None:
    """What a job asked for, what the locality filter decided, and where Slurm placed it (or why it waits).

    With -i FILE (the fleet) and a plan (--plan, else the job's --comment=plan=tp=…,pp=…,bytes=…): the
    predicted communication seconds per step of its placement, of the best placement free right now (its own
    nodes counted as free) and of the best on an idle fleet.

    A heterogeneous job's id (sbatch A : B) shows every component, JOBID+0, JOBID+1 …, each placed by Slurm on
    its own, and where they landed together; JOBID+K shows that component alone.

    A job slurmctld does not know is an error (exit 2); with --json its object, "known": false, is printed
    first."""
    from ..reports.explain import explain_full, write_overlay

    if not job_id.replace("_", "").replace("+", "").isdigit():
        raise click.UsageError(f"JOBID must be a job id such as 1234, 1234_5 or 1234+1, not {job_id!r}")
    if plan is not None:
        from ..cost import parse_plan

        parse_plan(plan)  # a bad --plan is an input error before slurmctld is asked
    if svg_file and not (inventories or records_dir):
        raise click.UsageError("--svg needs the fleet: give -i FILE")
    inventory = _load(inventories, records_dir=records_dir) if inventories or records_dir else None
    table = _links_table(inventories, links_file)
    explanation, view = explain_full(
        job_id, SubprocessRunner(), inventory=inventory, plan=plan, table=table, want_states=bool(svg_file)
    )
    if as_json:
        import dataclasses

        doc: dict[str, Any] = {"known": bool(explanation.state), **dataclasses.asdict(explanation)}
        if svg_file and inventory is not None and explanation.state:
            doc["svg"] = write_overlay(inventory, explanation, view, svg_file)
        click.echo(json.dumps(doc, sort_keys=True))  # an unknown job too: {"known": false, ...}, then exit 2
    if not explanation.state:
        raise InputError(
            f"job {job_id}: not known to slurmctld (never submitted, or ended longer ago than MinJobAge)"
        )
    if as_json:
        return
    click.echo(explanation.text(), nl=False)
    if svg_file and inventory is not None:
        click.echo(write_overlay(inventory, explanation, view, svg_file))


def _group_text(group: str, nodes: int, gpus: int) -> str:
    """``us-east-1b (1 node, 4 GPUs)``."""
    return f"{group} ({counted(nodes, 'node')}, {counted(gpus, 'GPU')})"


def render_check(decision: Decision, found: Survey | None, level: str, verbose: bool, as_json: bool) -> str:
    """Text (or JSON) for `check`: line 1 accept|reject, then what the filter would do and why."""
    verdict = "reject" if decision.action == "reject" else "accept"
    fitting = found.fitting if found else tuple(decision.candidates)
    small = found.too_small if found else ()
    if as_json:
        return (
            json.dumps(
                {
                    "decision": verdict,
                    **decision.as_dict(),
                    "level": level,
                    "candidates": [{"group": g, "nodes": n, "gpus": gp} for g, n, gp in fitting],
                    "excluded": [{"group": g, "nodes": n, "gpus": gp} for g, n, gp in small],
                },
                indent=2,
            )
            + "\n"
        )
    lines = [verdict]
    if decision.action == "hold":
        lines.append(
            "held: the job would wait (priority 0, Reason=JobHeldUser; its owner's release is refused) until "
            "it is resized or an administrator releases it"
        )
    if decision.message:
        lines.append(decision.message)
    if decision.features:
        lines.append(f"features: {decision.features}")
    if decision.prefer:
        lines.append(f"prefer: {decision.prefer}")
    if fitting and decision.action != "reject":
        lines.append("candidates: " + ", ".join(_group_text(*group) for group in fitting))
    if small:
        lines.append(
            f"excluded: {counted(len(small), level.replace('_', ' '))} too small"
            + (": " + ", ".join(_group_text(*group) for group in small) if verbose else "")
        )
    lines.append(f"record: {decision.record}")
    return "\n".join(lines) + "\n"
