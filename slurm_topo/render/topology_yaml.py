"""topology.yaml for Slurm 25.05 and later (topology.yaml(5)): several topologies in one file.

* ``fabric``: the network tree (what topology.conf holds on older releases), ``cluster_default: true`` — the
  topology of every partition without ``Topology=`` and of slurmctld's message fan-out;
* ``nvl``: a block topology with one block per NVLink domain (``nvl_<domain>``, in ``Topology.blocks`` order,
  placeholders as blocks without nodes) and the release's ``block_sizes``; a degraded node (health records,
  ``slurm_topo.health.effects``) is left out of its block.

Written only when some node has an ``nvlink_domain`` (else topology.conf stays the one topology file, as
before) and never empty (an empty topology.yaml with a partition ``Topology=`` crash-looped 25.11). Once the
file exists Slurm ignores topology.conf. Partitions choose the blocks with ``Topology=nvl`` in slurm.conf: the
header lists the line to add for each partition whose nodes all have a domain.
"""

from __future__ import annotations

import json

from .. import hostlist
from ..model import LABEL_RE
from ..topology import Topology
from . import RenderContext, header
from .topology_block import YAML, block_sizes, topology_mode
from .topology_conf import _largest_first

TREE_TOPOLOGY = "fabric"
BLOCK_TOPOLOGY = "nvl"


def partitions_for_blocks(ctx: RenderContext) -> list[str]:
    """Partitions (``--partitions-from``/``--scontrol``) whose every node has an NVLink domain, by name."""
    domain = ctx.topology.nvl_features
    return sorted(p.name for p in ctx.partitions if p.nodes and all(n in domain for n in p.nodes))


def _shown(name: str) -> str:
    """A partition name in the file's comment: as it is when it is a label, else as a JSON string of ASCII
    (Slurm takes ``"``, ``#``, non-ASCII and control characters in a name: none may start a YAML line)."""
    return name if LABEL_RE.match(name) else json.dumps(name)


def _q(text: str) -> str:
    return f'"{text}"'  # names and hostlists are [A-Za-z0-9._,[]-] only: nothing to escape


def tree_lines(topo: Topology) -> list[str]:
    out = ["  tree:\n", "    switches:\n"]
    for sw in sorted(topo.switches, key=_largest_first(topo.switches)):
        out.append(f"      - switch: {sw.name}\n")
        if sw.nodes:
            out.append(f"        nodes: {_q(hostlist.compress(sw.nodes))}\n")
        else:
            out.append(f"        children: {_q(','.join(sw.switches))}\n")
    return out


def render_topology_yaml(ctx: RenderContext) -> str | None:
    if topology_mode(ctx) != YAML:
        return None
    topo = ctx.topology
    sizes = block_sizes(ctx)
    filled = sum(1 for b in topo.blocks if b.nodes)
    parts = partitions_for_blocks(ctx)
    summary = (
        f"topologies: {TREE_TOPOLOGY} (network tree, cluster default), {BLOCK_TOPOLOGY} ({len(topo.blocks)} "
        f"NVLink domain blocks, {filled} with nodes; block order is fixed: aggregates are consecutive blocks)"
    )
    out = [header("topology.yaml", ctx, summary)]
    out.append(
        f"# slurm.conf: add Topology={BLOCK_TOPOLOGY} to each partition that places by NVLink domain"
        + (f" ({', '.join(map(_shown, parts))} have a domain on every node)" if parts else "")
        + "; TopologyPlugin is not needed\n"
    )
    out.append("---\n")
    out.append(f"- topology: {TREE_TOPOLOGY}\n")
    out.append("  cluster_default: true\n")
    out += tree_lines(topo)
    out.append(f"- topology: {BLOCK_TOPOLOGY}\n")
    out.append("  cluster_default: false\n")
    out.append("  block:\n")
    out.append(f"    block_sizes: [{', '.join(map(str, sizes))}]\n")
    out.append("    blocks:\n")
    degraded = {n.name for n in ctx.inventory.nodes if n.degraded}
    for b in topo.blocks:
        out.append(f"      - block: {b.name}\n")
        # A degraded node (health records) leaves its block; the block keeps its position (25.05+ takes a
        # block shorter than the base size). Before 25.05 a short block is fatal: the node stays in it there.
        nodes = [n for n in b.nodes if n not in degraded]
        if nodes:
            out.append(f"        nodes: {_q(hostlist.compress(nodes))}\n")
    return "".join(out)
