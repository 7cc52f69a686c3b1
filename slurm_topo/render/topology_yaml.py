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

from ..core import hostlist
from ..core.model import LABEL_RE
from ..core.topology import Topology
from . import RenderContext, header
from .topology_block import YAML, block_sizes, topology_mode
from .topology_conf import _largest_first

TREE_TOPOLOGY = "fabric"
BLOCK_TOPOLOGY = "nvl"

YAML_PAGE = 4096
"""Slurm 25.05.0 to 25.11.5 read a YAML configuration file through ``create_mmap_buf`` and then
``strlen()`` it (``serializer_yaml.c`` ``serialize_p_string_to_data``): a file whose size is an exact multiple
of the page size has no NUL after its last byte, the parse fails with EINVAL and slurmctld stops ("Something
wrong with reading topology.yaml", ``src/interfaces/topology.c``). Fixed by SchedMD commit 79a81a8a7e in
25.11.6 (cherry-pick of 7043f48859, in 26.05.0; ticket 25019): "Prevent fataling if the size of a yaml
configuration file is a multiple of 4096 bytes". No 25.05 release has the fix."""
YAML_PAGE_BUG = ((25, 5), (25, 11), 5)
"""The affected releases: 25.05.x and 25.11.0 to 25.11.5 (first series, last series, its last bad patch)."""
PAD_LINE = "# padded: Slurm 25.05 to 25.11.5 stop on a YAML file whose size is a multiple of 4096 bytes\n"
"""Appended to a YAML file Slurm reads when its size would be a multiple of ``YAML_PAGE``; shorter than a
page, so the padded size is never a multiple."""


def yaml_page_bug(version: tuple[int, int], patch: int | None = None) -> bool:
    """True where this Slurm stops on a YAML file whose size is a multiple of 4096 bytes; a 25.11 without its
    patch level (``--slurm-version 25.11``) counts as affected."""
    first, last, last_patch = YAML_PAGE_BUG
    if not first <= version <= last:
        return False
    return version < last or patch is None or patch <= last_patch


def pad_yaml(text: str, version: tuple[int, int], patch: int | None = None) -> str:
    """``text`` with ``PAD_LINE`` added where ``version`` would stop on its size (every YAML file Slurm reads
    goes through it); unchanged otherwise."""
    if yaml_page_bug(version, patch) and len(text.encode()) % YAML_PAGE == 0:
        return text + PAD_LINE
    return text


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
    return pad_yaml("".join(out), ctx.slurm_version)
