"""gres.conf for the GPUs of the nodes the inventory describes (gres.conf(5)).

* One line per GPU: ``NodeName=<nodes> Name=gpu [Type=<t>] File=/dev/nvidia<minor> [Cores=<ids>] Links=<counts>``.
  Lines are in PCI-bus order, which is how Slurm numbers a node's GPUs: never reorder them to steer Slurm, or
  ``SLURM_JOB_GPUS`` and ``CUDA_VISIBLE_DEVICES`` would name the wrong devices.
* ``Links=``: one entry per GPU index, ``-1`` for the GPU itself, else the number of NVLinks to that GPU (``0``:
  none). NVSwitch boxes read as NV<n> between every pair, one all-to-all island (AutoDetect=nvml would report all
  zeros there).
* ``File=``: the NVML minor number. From a ``topo -m`` capture (no minors) only with
  ``--assume-minor-equals-index``, with a warning.
* ``Cores=``: Slurm's logical core ids of the sockets the GPU's CPU affinity touches (whole sockets: Slurm wants
  whole sockets), from the node's Sockets/CoresPerSocket/ThreadsPerCore and Linux's CPU numbering (thread t of core
  c is CPU ``c + t × cores``). Left out when the affinity covers every CPU or the layout is unknown. A ``Cores=``
  change needs a slurmctld restart.
* ``NodeName=<nodes> AutoDetect=off`` for every described node: a mismatch with autodetection drains nodes.

Rendered only when at least one node has a ``gpu_topology:``; then every GPU node of the inventory needs one (or
``--assume-minor-equals-index``), because this file replaces the admin's gres.conf.
"""

from __future__ import annotations

from .. import hostlist
from ..errors import HostlistError, InputError
from ..inventory import natural_key
from ..model import Node
from . import RenderContext, header


def _layout(node: Node) -> tuple[int, int, int] | None:
    def num(key: str) -> int | None:
        v = node.slurm_attr(key)
        return int(v) if v is not None else None

    sockets = num("Sockets") or ((num("SocketsPerBoard") or 0) * (num("Boards") or 1)) or None
    cores, threads = num("CoresPerSocket"), num("ThreadsPerCore") or 1
    if not sockets or not cores:
        return None
    return sockets, cores, threads


def slurm_cores(affinity: str | None, layout: tuple[int, int, int] | None) -> str | None:
    """The ``Cores=`` value for one GPU, or None (unknown layout, unreadable affinity, or every CPU)."""
    if not affinity or layout is None:
        return None
    sockets, cps, tpc = layout
    total = sockets * cps
    try:
        cpus = set(hostlist.expand_numbers(affinity))
    except HostlistError:
        return None
    if not cpus or max(cpus) >= total * tpc:
        return None
    touched = sorted({(cpu % total) // cps for cpu in cpus})
    if len(touched) == sockets:
        return None
    return ",".join(f"{s * cps}-{s * cps + cps - 1}" for s in touched)


def _links(matrix: tuple[tuple[str, ...], ...], i: int) -> str:
    out = []
    for j, cls in enumerate(matrix[i]):
        if i == j:
            out.append("-1")
        else:
            out.append(cls[2:] if cls.startswith("NV") and cls[2:].isdigit() else "0")
    return ",".join(out)


def _lines(node: Node, ctx: RenderContext) -> list[str]:
    opts = ctx.options
    topo = node.gpu_topology
    typ = f" Type={node.gpu_type}" if node.gpu_type else ""
    if topo is None:
        return [f"Name=gpu{typ} File={opts.gpu_device_prefix}{i}" for i in range(node.gpus or 0)]
    layout = _layout(node)
    lines = []
    for i in range(len(topo.gpus)):
        minor = topo.minors[i] if i < len(topo.minors) else None
        if minor is None:
            minor = i  # only reached with --assume-minor-equals-index (checked in render_gres_conf)
        affinity = topo.cpu_affinity[i] if i < len(topo.cpu_affinity) else None
        cores = slurm_cores(affinity, layout)
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
            raise InputError(
                f"gres.conf: no device minor numbers for {hostlist.compress(guessing)} (a topo -m capture or no "
                "gpu_topology has none): pass --assume-minor-equals-index to write File=/dev/nvidia<index>"
            )
    blocks: dict[tuple[str, ...], list[str]] = {}
    for node in nodes:
        blocks.setdefault(tuple(_lines(node, ctx)), []).append(node.name)
    rows = sorted(blocks.items(), key=lambda kv: natural_key(kv[1][0]))
    gpus = sum(len(lines) * len(names) for lines, names in rows)
    summary = (
        f"{len(nodes)} GPU nodes, {gpus} GPUs; AutoDetect=off for these nodes; Cores= changes need a restart"
    )
    out = [header("gres.conf", ctx, summary)]
    for lines, names in rows:
        expr = hostlist.compress(names)
        out.append(f"NodeName={expr} AutoDetect=off\n")
        out.extend(f"NodeName={expr} {line}\n" for line in lines)
    return "".join(out)
