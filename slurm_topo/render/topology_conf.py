"""topology.conf for ``TopologyPlugin=topology/tree`` (topology.conf(5): ``SwitchName= Nodes=|Switches=``).

Hostlist-compressed ``Nodes=``; ``Switches=`` as a plain comma list (Slurm expands only digits in switch
ranges).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..core import hostlist
from ..core.topology import ROOT, Switch
from . import RenderContext, header


def render_topology_conf(ctx: RenderContext) -> str | None:
    """The tree; the NVLink blocks instead on 23.11-24.11 when every node has a domain; nothing when
    topology.yaml holds both (25.05+), as Slurm then ignores topology.conf (``render.topology_block``)."""
    from .topology_block import BLOCK_CONF, YAML, render_block_conf, topology_mode

    mode = topology_mode(ctx)
    if mode == YAML:
        return None
    if mode == BLOCK_CONF:
        return render_block_conf(ctx)
    return render_tree_conf(ctx)


def render_tree_conf(ctx: RenderContext) -> str:
    topo = ctx.topology
    nodes = sum(len(sw.nodes) for sw in topo.switches)
    below = sum(1 for sw in topo.switches if sw.kind == "switch")
    summary = (
        "topology/tree: root -> region -> zone -> network group (leaf) -> nodes; "
        if not below
        else "topology/tree: root -> region -> zone -> network group -> its switches (leaf) -> nodes; "
    ) + f"{len(topo.switches)} switches, {nodes} nodes"
    out = [header("topology.conf", ctx, summary)]
    for sw in sorted(topo.switches, key=_largest_first(topo.switches)):
        if sw.nodes:
            out.append(f"SwitchName={sw.name} Nodes={hostlist.compress(sw.nodes)}\n")
        else:
            out.append(f"SwitchName={sw.name} Switches={','.join(sw.switches)}\n")
    return "".join(out)


def _largest_first(switches: Sequence[Switch]) -> Callable[[Switch], tuple[int, int, int]]:
    """Sort key for the switch lines: leaves (and the switches below the network groups, a group with
    switches below it after them: children before parents), then zones, regions and the root (as
    ``build_topology`` lists them), each level depth first from the root with the larger subtree (more nodes)
    first, ties by name.

    Children before parents: Slurm resolves switch levels in passes over the lines, a switch in the pass that
    finds all its children resolved, and stops with "Switch configuration is not a tree" after 21 passes
    (``lint``: ``too-deep``); in this order one pass does.

    Slurm 22.05's tree selection breaks ties between equally good switches by their line here; with the larger
    region's switches first an unconstrained 8-node job stayed in one region in 19 of 20 busy patterns on the
    benchmark fleet, against 13 of 20 with the smaller region's first (benchmarks/results/placement.md).
    """
    by_name = {sw.name: sw for sw in switches}
    size: dict[str, int] = {}

    def count(name: str) -> int:
        if name not in size:
            sw = by_name[name]
            size[name] = len(sw.nodes) + sum(count(c) for c in sw.switches)
        return size[name]

    position: dict[str, int] = {}

    def visit(name: str) -> None:  # children come natural-sorted; sorted() keeps that order among equals
        position[name] = len(position)
        for child in sorted(by_name[name].switches, key=lambda c: -count(c)):
            visit(child)

    if ROOT in by_name:
        visit(ROOT)
    for sw in switches:  # nothing is outside the root's tree; kept for safety
        if sw.name not in position:
            visit(sw.name)
    height: dict[str, int] = {}

    def above_nodes(name: str) -> int:  # 0 for a switch with nodes
        if name not in height:
            height[name] = 1 + max(map(above_nodes, by_name[name].switches)) if by_name[name].switches else 0
        return height[name]

    levels = {"leaf": 0, "network_group": 0, "switch": 0, "zone": 1, "region": 2, "root": 3}
    return lambda sw: (
        levels[sw.kind],
        above_nodes(sw.name) if levels[sw.kind] == 0 else 0,
        position[sw.name],
    )
