"""``slurm-topo cost`` and ``capacity``: the cost model's prediction for a plan on a placement, and what the
fleet can hold.
"""

from __future__ import annotations

import json

import click

from ..access import argv as slurm_argv
from ..access.text import parse_scontrol_nodes
from ..core.errors import InputError
from ..plumbing.entry import read_input
from ..plumbing.runner import SubprocessRunner
from ..plumbing.text import counted
from .common import (
    _load,
    _slurm_nodes,
    cli,
    inventory_option,
    nodes_from_option,
    records_option,
    scontrol_option,
)


def _links_table(inventories: tuple[str, ...], links_file: str | None):  # type: ignore[no-untyped-def]
    """The link constants: defaults, then the inventories' ``links:`` mappings, then ``--links FILE``. Two
    providers' imports (each ``links: {profile: …}`` alone) give per level the slower of their profiles, as
    the merged inventory has them (``inventory.merge``)."""
    import re

    from ..cost import DEFAULT_TABLE, parse_links
    from ..cost.links import profile_of, slowest
    from ..inventory import load_yaml

    table, given, profiles = DEFAULT_TABLE, None, {}
    for path in (*inventories, *([links_file] if links_file else [])):
        text = read_input(path)
        has_links = re.search(r"(^|[{,])\s*[\"']?links[\"']?\s*:", text, re.MULTILINE)
        if path != links_file and not has_links:
            continue  # no top-level links: (parsing a large inventory twice costs seconds)
        doc = load_yaml(text)
        raw = doc.get("links") if isinstance(doc, dict) else None
        if path == links_file and isinstance(doc, dict) and "links" not in doc:
            raw = doc  # a file holding the mapping itself
        if raw is None:
            continue
        parsed = parse_links(raw, source=f"{path}: links", base=table)
        if path != links_file:
            name = profile_of(parsed)
            if given is not None and raw != given and (name is None or not profiles):
                raise InputError(f"{path}: links: differs from an earlier inventory's; give links: once")
            if name is not None and (given is None or profiles):  # imports: the slower profile per level
                profiles[name] = parsed
                parsed = slowest(list(profiles.values()))
            given = raw if given is None else given
        table = parsed
    return table


def _seconds(value: float) -> str:
    return f"{value:.4f} s" if value >= 0.001 or value == 0 else f"{value:.3g} s"


def _cost_json(prediction, spec) -> dict[str, object]:  # type: ignore[no-untyped-def]
    cur, best = prediction.current, prediction.best
    top = cur.bottleneck
    return {
        "seconds": cur.seconds,
        "terms": [t.as_dict() for t in cur.terms],
        "bottleneck": top.level if top else None,
        "bottleneck_term": top.kind if top else None,
        "nodes": list(cur.nodes),
        "plan": {**cur.sizes, "gpus_per_node": spec.gpus_per_node, "order": spec.order},
        "best_seconds": best.seconds if best else None,
        "best_nodes": list(best.nodes) if best else None,
        "best_level": prediction.best_level,
        "slowdown": prediction.slowdown,
        "comm_slowdown": prediction.comm_slowdown,
        "compute_seconds": prediction.step.compute_s,
        "overlap": prediction.step.overlap,
        "step_seconds": prediction.current_step,
        "best_step_seconds": prediction.best_step,
        "assumed": prediction.step.source,
        "notes": list(cur.notes),
    }


def _cost_text(prediction, spec) -> str:  # type: ignore[no-untyped-def]
    from ..core.hostlist import compress
    from ..cost import level_words
    from ..reports.explain import plan_words

    cur, best = prediction.current, prediction.best
    s = cur.sizes
    lines = [
        f"placement: {counted(len(cur.nodes), 'node')} {compress(cur.nodes)} × "
        f"{counted(spec.gpus_per_node or 0, 'GPU')}, "
        f"{plan_words(s)}: {_seconds(cur.seconds)} of communication per step"
    ]
    for t in cur.terms:
        lines.append(
            f"  {t.kind}  {counted(t.groups, 'group')} of {t.ranks} ranks, {t.bytes / 1e9:g} GB each: "
            f"{t.level} ({t.bandwidth:g} GB/s, {t.latency_us:g} µs/hop)  {_seconds(t.seconds)}"
        )
    lines += [f"  note: {n}" for n in cur.notes]
    top = cur.bottleneck
    if top is not None:
        lines.append(f"bottleneck: {top.kind} at {top.level}")
    if prediction.step.compute_s is not None:
        lines.append(f"step: {_seconds(prediction.current_step)} (assumed: {prediction.step.source})")
    else:
        lines.append(f"assumed: {prediction.step.source}")
    if best is None:
        lines.append("best placement: none (the fleet has no other room for this shape)")
    else:
        lines.append(
            f"best placement on the idle fleet: {compress(best.nodes)} "
            f"({level_words(prediction.best_level)}): "
            f"{_seconds(best.seconds)}"
        )
        comm = prediction.comm_slowdown
        if prediction.slowdown is not None and comm is not None and prediction.step.compute_s is not None:
            lines.append(
                f"slowdown: {prediction.slowdown:.2f}× per step ({(prediction.slowdown - 1) * 100:.0f} % "
                f"slower; communication {comm:.2f}×)"
            )
        elif prediction.slowdown is not None:
            lines.append(
                f"slowdown: {prediction.slowdown:.2f}× ({(prediction.slowdown - 1) * 100:.0f} % slower)"
            )
    return "\n".join(lines) + "\n"


@cli.command()
@inventory_option
@records_option
@click.option("--nodes", "nodelist", required=True, metavar="HOSTLIST", help="The placement, e.g. n[1-8].")
@click.option("--gpus-per-node", type=int, metavar="G", help="GPUs per node (default: the nodes' smallest).")
@click.option("--tp", default=1, show_default=True, type=click.IntRange(1), help="Tensor-parallel size.")
@click.option("--pp", default=1, show_default=True, type=click.IntRange(1), help="Pipeline stages.")
@click.option("--dp", type=click.IntRange(1), help="Data-parallel replicas (default: what the GPUs hold).")
@click.option("--cp", default=1, show_default=True, type=click.IntRange(1), help="Context-parallel size.")
@click.option(
    "--ep",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Expert-parallel size (divides cp × dp).",
)
@click.option("--order", default="tp-cp-ep-dp-pp", show_default=True, help="Rank order, as gpulayer-srun.")
@click.option(
    "--allreduce-bytes", required=True, metavar="B", help="Gradient bytes all-reduced per step (10G)."
)
@click.option("--tp-bytes", metavar="B", help="Bytes each TP group all-reduces per step.")
@click.option("--pp-bytes", metavar="B", help="Bytes one stage sends the next per step.")
@click.option(
    "--ep-bytes", metavar="B", help="Bytes each rank of an EP group exchanges per step (all-to-all)."
)
@click.option("--cp-bytes", metavar="B", help="Bytes one rank passes its CP ring neighbour per ring step.")
@click.option(
    "--compute",
    metavar="SECONDS",
    help="Seconds a step computes (0.45, 450ms): the slowdown is of the whole step.",
)
@click.option(
    "--comm-share",
    metavar="F",
    help="Or: communication's share of the step on the best placement (0.3 or 30%).",
)
@click.option(
    "--overlap", metavar="F", help="Share of the compute DP's all-reduce runs behind (0-1; default 0)."
)
@click.option(
    "--comm-only", is_flag=True, help="Communication only: no compute assumed (the slowdown of the traffic)."
)
@click.option(
    "--links", "links_file", metavar="FILE", help="Link constants (a links: mapping) over the defaults."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def cost(
    inventories: tuple[str, ...],
    records_dir: str | None,
    nodelist: str,
    gpus_per_node: int | None,
    tp: int,
    pp: int,
    dp: int | None,
    cp: int,
    ep: int,
    order: str,
    allreduce_bytes: str,
    tp_bytes: str | None,
    pp_bytes: str | None,
    ep_bytes: str | None,
    cp_bytes: str | None,
    compute: str | None,
    comm_share: str | None,
    overlap: str | None,
    comm_only: bool,
    links_file: str | None,
    as_json: bool,
) -> None:
    """Predicted seconds per step of a plan on a placement (communication, and the step around it), against
    the best placement of the same shape on the idle fleet (slowdown = this step / the best's).

    Without --compute or --comm-share, communication is taken as the site default share of the best
    placement's step (25 %), and the output says so; --comm-only compares communication alone."""
    import dataclasses

    from ..core.hostlist import expand
    from ..cost import DEFAULT_COMM_SHARE, Fabric, PlanSpec, parse_bytes, predict
    from ..cost import gpus_per_node as resolve_gpus
    from ..cost.comm import parse_duration, parse_share

    nodes = expand(nodelist)
    table = _links_table(inventories, links_file)
    fabric = Fabric.of(_load(inventories, records_dir=records_dir))
    spec = PlanSpec(
        tp=tp,
        pp=pp,
        dp=dp,
        gpus_per_node=resolve_gpus(fabric, nodes, gpus_per_node),
        allreduce_bytes=parse_bytes(allreduce_bytes, "--allreduce-bytes"),
        tp_bytes=parse_bytes(tp_bytes, "--tp-bytes") if tp_bytes is not None else None,
        pp_bytes=parse_bytes(pp_bytes, "--pp-bytes") if pp_bytes is not None else None,
        order=order,
        compute_s=parse_duration(compute, "--compute") if compute is not None else None,
        comm_share=parse_share(comm_share, "--comm-share", zero=False) if comm_share is not None else None,
        overlap=parse_share(overlap, "--overlap", zero=True) if overlap is not None else 0.0,
        ep=ep,
        cp=cp,
        ep_bytes=parse_bytes(ep_bytes, "--ep-bytes") if ep_bytes is not None else None,
        cp_bytes=parse_bytes(cp_bytes, "--cp-bytes") if cp_bytes is not None else None,
    )
    if compute is not None and comm_share is not None:
        raise InputError("give --compute or --comm-share, not both (one fixes the other)")
    if comm_only and (compute is not None or comm_share is not None):
        raise InputError("--comm-only leaves the compute out: not with --compute or --comm-share")
    prediction = predict(fabric, nodes, spec, table, default_share=None if comm_only else DEFAULT_COMM_SHARE)
    if as_json:
        doc = _cost_json(prediction, spec)
        doc["links_measured"] = dataclasses.asdict(table.measured) if table.measured else None
        click.echo(json.dumps(doc, indent=2))
    else:
        text = _cost_text(prediction, spec)
        click.echo(text + (f"{table.measured.text()}\n" if table.measured else ""), nl=False)


@cli.command()
@inventory_option
@records_option
@nodes_from_option
@scontrol_option
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    required=True,
    metavar="NxG[:ep=E]",
    help="N nodes × G GPUs, with :ep=E EP groups of E consecutive GPUs (E divides N·G); repeat.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
def capacity(
    inventories: tuple[str, ...],
    records_dir: str | None,
    nodes_from: str | None,
    scontrol: bool,
    shapes: tuple[str, ...],
    as_json: bool,
) -> None:
    """How many jobs of each shape could start now inside one group per level, against what the free GPUs
    alone suggest; the rest is stranded (fragmentation).

    NxG:ep=E (ep= as --plan spells it): each job counted keeps every EP group inside one node's NVLink
    island (E divides G) or one NVLink domain, where one of the fleet holds a group; where none does, the
    rows say the groups leave one NVLink island or domain and count as without EP.

    --nodes-from: save `scontrol -d show node -o` (-d prints GresUsed, the GPUs a MIXED node has in use;
    without it such a node's GPUs count as not free unless AllocTRES accounts gres/gpu)."""
    from ..reports.capacity import STATE_KEYS, format_capacity, node_states, parse_shape
    from ..reports.capacity import capacity as count_capacity

    parsed = [parse_shape(s) for s in shapes]
    records: list[dict[str, str]] | None
    if scontrol and not nodes_from:  # -d: GresUsed=gpu:…(IDX:…), the GPUs a MIXED node has in use
        argv = slurm_argv.show_nodes(detail=True)
        records = parse_scontrol_nodes(
            SubprocessRunner().run(argv), source="scontrol -d show node -o", keys=STATE_KEYS
        )
    else:
        records = _slurm_nodes(nodes_from, scontrol, STATE_KEYS)
    if records is None:
        raise InputError("give --nodes-from FILE (`scontrol show node -o` output) or --scontrol")
    inventory = _load(inventories, records_dir=records_dir)
    states, extra = node_states(inventory, records)
    result = count_capacity(inventory, states, parsed, extra_nodes=extra)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else format_capacity(result), nl=as_json)
