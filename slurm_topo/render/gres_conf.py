"""gres.conf for the GPUs of the nodes the inventory describes (gres.conf(5)).

* One line per GPU: ``NodeName=<nodes> Name=gpu [Type=<t>] File=/dev/nvidia<minor> [Cores=<ids>]
  Links=<counts>``. Lines are in PCI-bus order, which is how Slurm numbers a node's GPUs: never reorder them
  to steer Slurm, or ``SLURM_JOB_GPUS`` and ``CUDA_VISIBLE_DEVICES`` would name the wrong devices.
* ``Links=``: one entry per GPU index, ``-1`` for the GPU itself, else the number of NVLinks to that GPU
  (``0``: none). NVSwitch boxes read as NV<n> between every pair, one all-to-all island (AutoDetect=nvml would
  report all zeros there).
* ``File=``: the NVML minor number. From a ``topo -m`` capture (no minors) only with
  ``--assume-minor-equals-index``, with a warning.
* ``Cores=``: Slurm's logical core ids (socket-major) of the sockets the GPU's printed CPU/NUMA affinity
  touches (whole sockets: Slurm wants whole sockets), from the node's Sockets/CoresPerSocket/ThreadsPerCore.
  Which socket a kernel CPU id is on depends on how the kernel numbers CPUs (socket-major, SMT-adjacent on
  POWER, interleaved even/odd): :func:`slurm_topo.gpu.affinity.gpu_sockets` reads that from the capture
  itself. Left out when the affinity covers every socket, the layout is unknown, or the sockets cannot be
  read; every doubt is a ``# warning:`` line above the node's block (and :func:`gres_warnings`, for stderr). A
  ``Cores=`` change needs a slurmctld restart.
* ``NodeName=<nodes> AutoDetect=off`` for every described node: a mismatch with autodetection drains nodes.

Rendered only when at least one node has a ``gpu_topology:``; then every GPU node of the inventory needs one
(or ``--assume-minor-equals-index``), because this file replaces the admin's gres.conf.
"""

from __future__ import annotations

from ..core import hostlist
from ..core.model import Inventory, Node, natural_key
from ..gpu.affinity import Layout, gpu_sockets
from ..gpu.links import nvlink_count
from . import RenderContext, header, refusal


def _layout(node: Node) -> Layout | None:
    def num(key: str) -> int | None:
        v = node.slurm_attr(key)
        return int(v) if v is not None else None

    sockets = num("Sockets") or ((num("SocketsPerBoard") or 0) * (num("Boards") or 1)) or None
    cores, threads = num("CoresPerSocket"), num("ThreadsPerCore") or 1
    if not sockets or not cores:
        return None
    return sockets, cores, threads


def slurm_cores(sockets: frozenset[int] | None, layout: Layout | None) -> str | None:
    """The ``Cores=`` value for sockets of a GPU: Slurm's logical core ids of those whole sockets (Slurm wants
    whole sockets), or None (unknown, or every socket: nothing to say)."""
    if not sockets or layout is None:
        return None
    n_sockets, cps, _ = layout
    if len(sockets) >= n_sockets or max(sockets) >= n_sockets:
        return None
    return ",".join(f"{s * cps}-{s * cps + cps - 1}" for s in sorted(sockets))


def node_cores(node: Node) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    """Per GPU of ``node`` its ``Cores=`` value (None: left out), and the warnings about how it was read."""
    topo = node.gpu_topology
    if topo is None:
        return (), ()
    layout = _layout(node)
    if layout is None:
        return (None,) * len(topo.gpus), ()
    found = gpu_sockets(topo, layout)
    return tuple(slurm_cores(s, layout) for s in found.sockets), found.warnings


def gres_warnings(inventory: Inventory) -> list[str]:
    """What ``Cores=`` could not read exactly, one line per distinct warning and its nodes (for stderr)."""
    by_warning: dict[str, list[str]] = {}
    for node in inventory.nodes:
        if node.gpus and node.gpu_topology is not None:
            for w in node_cores(node)[1]:
                by_warning.setdefault(w, []).append(node.name)
    return [f"gres.conf: {hostlist.compress(names)}: {w}" for w, names in by_warning.items()]


def _links(matrix: tuple[tuple[str, ...], ...], i: int) -> str:
    out = []
    for j, cls in enumerate(matrix[i]):
        if i == j:
            out.append("-1")
        else:
            out.append(str(nvlink_count(cls)))
    return ",".join(out)


def _lines(node: Node, ctx: RenderContext) -> list[str]:
    opts = ctx.options
    topo = node.gpu_topology
    typ = f" Type={node.gpu_type}" if node.gpu_type else ""
    if topo is None:
        return [f"Name=gpu{typ} File={opts.gpu_device_prefix}{i}" for i in range(node.gpus or 0)]
    cores_per_gpu, _ = node_cores(node)
    lines = []
    for i in range(len(topo.gpus)):
        minor = topo.minors[i] if i < len(topo.minors) else None
        if minor is None:
            minor = i  # only reached with --assume-minor-equals-index (checked in render_gres_conf)
        cores = cores_per_gpu[i]
        line = f"Name=gpu{typ} File={opts.gpu_device_prefix}{minor}"
        if cores:
            line += f" Cores={cores}"
        lines.append(f"{line} Links={_links(topo.matrix, i)}")
    return lines


def render_gres_conf(ctx: RenderContext) -> str | None:
    nodes = [n for n in ctx.inventory.nodes if n.gpus]
    if not any(n.gpu_topology is not None for n in nodes):
        return None
    if not ctx.options.assume_minor_equals_index:
        guessing = [
            n.name
            for n in nodes
            if n.gpu_topology is None
            or any(m is None for m in (n.gpu_topology.minors or (None,) * len(n.gpu_topology.gpus)))
        ]
        if guessing:
            raise refusal(
                ctx.inventory,
                f"gres.conf: no device minor numbers for {hostlist.compress(guessing)} (a topo -m capture "
                "or no gpu_topology has none): pass --assume-minor-equals-index to write "
                "File=/dev/nvidia<index>",
                node=guessing[0],
            )
    blocks: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for node in nodes:
        warnings = node_cores(node)[1] if node.gpu_topology is not None else ()
        blocks.setdefault((tuple(_lines(node, ctx)), warnings), []).append(node.name)
    rows = sorted(blocks.items(), key=lambda kv: natural_key(kv[1][0]))
    gpus = sum(len(lines) * len(names) for (lines, _), names in rows)
    summary = (
        f"{len(nodes)} GPU nodes, {gpus} GPUs; AutoDetect=off for these nodes; Cores= changes need a restart"
    )
    out = [header("gres.conf", ctx, summary)]
    for (lines, warnings), names in rows:
        expr = hostlist.compress(names)
        out.extend(f"# warning: {w}\n" for w in warnings)
        out.append(f"NodeName={expr} AutoDetect=off\n")
        out.extend(f"NodeName={expr} {line}\n" for line in lines)
    return "".join(out)
