"""topology.conf for ``TopologyPlugin=topology/tree`` (topology.conf(5): ``SwitchName= Nodes=|Switches=``).

Hostlist-compressed ``Nodes=``; ``Switches=`` as a plain comma list (Slurm expands only digits in switch
ranges).
"""

from __future__ import annotations

from .. import hostlist
from . import RenderContext, header


def render_topology_conf(ctx: RenderContext) -> str:
    topo = ctx.topology
    nodes = sum(len(sw.nodes) for sw in topo.switches)
    summary = (
        f"topology/tree: root -> region -> zone -> network group (leaf) -> nodes; "
        f"{len(topo.switches)} switches, {nodes} nodes"
    )
    out = [header("topology.conf", ctx, summary)]
    for sw in topo.switches:
        if sw.nodes:
            out.append(f"SwitchName={sw.name} Nodes={hostlist.compress(sw.nodes)}\n")
        else:
            out.append(f"SwitchName={sw.name} Switches={','.join(sw.switches)}\n")
    return "".join(out)
