"""slurm-topo-nodes.conf: the only ``NodeName=`` definition of every inventory node (slurm.conf(5) NODE
CONFIGURATION).

slurm.conf pulls it in with ``Include slurm-topo-nodes.conf``; a second ``NodeName=`` for the same node is
fatal to slurmctld, so the admin removes those nodes' own lines. Each line carries the node's hardware
attributes, its own features and its location features (``region_*``, ``zone_*``, ``ng_*``, and
``nvl_<domain>`` for a node in an NVLink domain, on every release: ``--constraint='[nvl_a|nvl_b]'`` keeps a
job in one domain). Nodes whose lines would be identical are folded into one hostlist; there is no
``NodeName=DEFAULT`` line, so nothing leaks into
the admin's other nodes.
"""

from __future__ import annotations

from ..core import hostlist
from ..core.model import Node, natural_key
from . import RenderContext, header
from .topology_block import placeholders


def _gres(node: Node) -> str | None:
    explicit = node.slurm_attr("Gres")
    if explicit is not None or not node.gpus:
        return explicit
    return f"gpu:{node.gpu_type}:{node.gpus}" if node.gpu_type else f"gpu:{node.gpus}"


def node_attributes(node: Node, location_features: tuple[str, ...]) -> str:
    """Everything after ``NodeName=<names>`` for one node."""
    parts = [f"{k}={v}" for k, v in node.slurm if k not in ("Gres", "Weight", "State")]
    gres = _gres(node)
    if gres:
        parts.append(f"Gres={gres}")
    weight = node.slurm_attr("Weight")
    if weight is not None:
        parts.append(f"Weight={weight}")
    features = node.features + tuple(f for f in location_features if f not in node.features)
    if features:
        parts.append(f"Features={','.join(features)}")
    state = node.slurm_attr("State")
    if state is not None:
        parts.append(f"State={state}")
    return " ".join(parts)


def render_nodes_conf(ctx: RenderContext) -> str:
    lines: dict[str, list[str]] = {}
    seen: dict[tuple[object, ...], str] = {}  # nodes of one rack share their attributes: format them once
    for node in ctx.inventory.nodes:
        features = ctx.topology.node_features[node.name] + ctx.policy.bucket_features.get(node.name, ())
        nvl = ctx.topology.nvl_features.get(node.name)
        if nvl is not None:
            features += (nvl,)
        key = (node.slurm, node.features, node.gpus, node.gpu_type, features)
        attrs = seen.get(key)
        if attrs is None:
            attrs = seen[key] = node_attributes(node, features)
        lines.setdefault(attrs, []).append(node.name)
    rows = sorted(((names, attrs) for attrs, names in lines.items()), key=lambda row: natural_key(row[0][0]))
    summary = f"{len(ctx.inventory.nodes)} nodes on {len(rows)} NodeName= lines; Include it from slurm.conf"
    pads = [n for names in placeholders(ctx).values() for n in names]
    if pads:
        summary += f"; {len(pads)} NVLink block placeholders (State=FUTURE) at the end"
    out = [header("slurm-topo-nodes.conf", ctx, summary)]
    for names, attrs in rows:
        out.append(f"NodeName={hostlist.compress(names)}{' ' + attrs if attrs else ''}\n")
    if pads:
        out.append(
            "# Not hardware: placeholders that fill short NVLink blocks to the base block size, which Slurm\n"
            "# 24.x requires of every block (topology.conf). State=FUTURE: never allocated, no slurmd.\n"
            f"NodeName={hostlist.compress(pads)} State=FUTURE\n"
        )
    return "".join(out)
