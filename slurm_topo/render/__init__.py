"""Renderers: pure functions from the merged model to Slurm text.

Each renderer takes a ``RenderContext`` and returns the whole file as ``str``; it never runs a command or
reads a file. ``RENDERERS`` is the one list of outputs ``generate`` writes: a later output (gres.conf, the
submit filter's data file) is one more entry here, without touching the others. Every file starts with
``header()``: the generator version, the Slurm version and a fingerprint of the merged content — no paths, no
times — so identical input gives identical bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.errors import InputError, InventoryError, show_value
from ..core.model import SLURM_MAX_NODES, Inventory
from ..core.topology import Topology, build_topology
from ..plumbing.version import __version__, format_slurm_version
from ..policy import Partition, PolicyData, compile_policy

if TYPE_CHECKING:
    from ..cost.links import LinkTable

_DEVICE_PREFIX_RE = re.compile(r"^/[A-Za-z0-9._/+-]{0,255}\Z")


@dataclass(frozen=True, slots=True)
class RenderOptions:
    assume_minor_equals_index: bool = False
    """Write File=<prefix><GPU index> where no NVML minor number is known (a topo -m capture)."""
    gpu_device_prefix: str = "/dev/nvidia"
    """gres.conf ``File=<prefix><minor>``: an absolute path from ``[A-Za-z0-9._/+-]`` (no brackets, ``|``,
    spaces or ``#=,``, which Slurm would read as a hostlist, an alternative or a new key)."""

    def __post_init__(self) -> None:
        if not _DEVICE_PREFIX_RE.match(self.gpu_device_prefix):
            raise InputError(
                "--gpu-device-prefix must be an absolute path of characters from [A-Za-z0-9._/+-] "
                f"({show_value(self.gpu_device_prefix)})"
            )


@dataclass(frozen=True, slots=True)
class RenderContext:
    inventory: Inventory
    topology: Topology
    slurm_version: tuple[int, int]
    fingerprint: str
    policy: PolicyData
    options: RenderOptions = RenderOptions()
    partitions: tuple[Partition, ...] = ()
    """Slurm's partitions when given (``--partitions-from``/``--scontrol``): the topology.yaml note."""


Renderer = Callable[[RenderContext], "str | None"]
"""A renderer returns the file's text, or None when the file does not apply (gres.conf without GPU data)."""


def fingerprint(
    inventory: Inventory, slurm_version: tuple[int, int], partitions: Sequence[Partition] | None = None
) -> str:
    """sha256 over everything that shapes the outputs (not origins, paths or times); 16 hex digits."""
    h = hashlib.sha256(
        f"slurm={slurm_version}\npolicy={inventory.policy}\npartitions={partitions}\n".encode()
    )
    for n in inventory.nodes:
        topo = n.gpu_topology
        gpu: tuple[object, ...] | None = None
        if topo is not None:
            gpu = (topo.matrix, topo.minors, topo.cpu_affinity)
            if any(topo.numa_affinity):  # Cores= reads it; absent: fingerprints as before
                gpu = (*gpu, topo.numa_affinity)
        h.update(
            repr(
                (
                    n.name,
                    n.location.region,
                    n.location.zone,
                    n.location.network_group,
                    n.features,
                    n.gpus,
                    n.gpu_type,
                    n.slurm,
                    gpu,
                )
            ).encode()
        )
        if n.nvlink_domain is not None:  # only then: fleets without domains keep their fingerprints
            h.update(f"nvlink_domain={n.nvlink_domain}".encode())
        if n.switches:  # only then: fleets without switches below the group keep their fingerprints
            h.update(f"switches={'/'.join(n.switches)}".encode())
        h.update(b"\n")
    h.update(repr(inventory.extra_nodes).encode())
    if inventory.policy is not None and inventory.policy.plan is not None:
        # the site plan shapes the filter's auto budgets; outside the policy's repr so that inventories
        # without a plan keep their fingerprints
        h.update(f"plan={inventory.policy.plan}".encode())
    if inventory.policy is not None and inventory.policy.nvl_segment is not None:
        h.update(f"nvl_segment={inventory.policy.nvl_segment}".encode())  # only then, as the plan
    if inventory.nvlink is not None:
        h.update(repr(inventory.nvlink).encode())
    if inventory.links is not None:  # only then, as the plan: the auto budgets and cost come from it
        h.update(_links_key(inventory.links).encode())
    return h.hexdigest()[:16]


def _links_key(links: LinkTable) -> str:
    """The ``links:`` table in a form that does not depend on the process (sets and mappings sorted): a
    changed table changes the data file's auto budgets, and the filter reloads a data file only when its
    fingerprint changes."""
    rails = None if links.rails is None else sorted(links.rails.items())
    return "links=" + repr(
        (
            sorted((k, repr(v)) for k, v in links.links.items()),
            rails,
            repr(links.measured),
            sorted(links.given),
        )
    )


def header(filename: str, ctx: RenderContext, summary: str, comment: str = "#") -> str:
    lines = [
        f"{filename}: generated by slurm-topo {__version__} "
        f"for Slurm {format_slurm_version(ctx.slurm_version)}",
        f"fingerprint sha256:{ctx.fingerprint}",
        summary,
        "Do not edit: regenerate with `slurm-topo generate` (see the slurm-topo README).",
    ]
    return "".join(f"{comment} {line}\n" for line in lines)


def sources_of(inventory: Inventory) -> tuple[str, ...]:
    """Every file ``inventory`` was merged from, in order (``inventory.merge.MergedInventory.sources``, read
    by name: the renderers do not import the loader); empty for an inventory built in code."""
    return tuple(getattr(inventory, "sources", ()))


def source_of(inventory: Inventory, section: str | None = None) -> str | None:
    """The file of a top-level section of ``inventory`` (``nvlink``, ``policy``, ``links``), or its first
    file (no ``section``); None where there is none."""
    if section is not None:
        return dict(getattr(inventory, "sections", ())).get(section)
    return next(iter(sources_of(inventory)), None)


def refusal(
    inventory: Inventory,
    reason: str,
    *,
    node: str | None = None,
    file_of: str | None = None,
    section: str | None = None,
    where: str = "",
) -> InputError:
    """A refusal of a check that runs after merging (for a release, at render time), naming the file as
    every refusal of an inventory does (README: ``FILE: nodes[3]…: reason``): ``node``'s entry where the
    refusal is about that node; else the file holding ``file_of`` (a node: its file, not its entry);
    else the file of ``section`` (``nvlink``: ``FILE: nvlink.block_sizes: reason`` with ``where``); else the
    first file merged. A plain ``InputError`` only for an inventory built in code (no file to name)."""
    origins = (
        {n.name: n.origin for n in inventory.nodes if n.name in (node, file_of)} if node or file_of else {}
    )
    if node is not None and origins.get(node):
        return InventoryError(origins[node], "", reason)
    if file_of is not None and origins.get(file_of):
        return InventoryError(origins[file_of].rsplit(": ", 1)[0], "", reason)
    if section is not None and (file := source_of(inventory, section)):
        return InventoryError(file, where, reason)
    if file := source_of(inventory):
        return InventoryError(file, where, reason)
    return InputError(f"{where}: {reason}" if where else reason)


def make_context(
    inventory: Inventory,
    slurm_version: tuple[int, int],
    partitions: Sequence[Partition] | None = None,
    options: RenderOptions | None = None,
) -> RenderContext:
    if not inventory.nodes and not inventory.extra_nodes:
        others = sources_of(inventory)[1:]
        what = f"no nodes here nor in {', '.join(others)}" if others else "the inventory has no nodes"
        raise refusal(inventory, f"{what}; refusing to render empty Slurm files")
    since, most = SLURM_MAX_NODES
    count = len(inventory.nodes) + len(inventory.extra_nodes)
    if slurm_version >= since and count > most:
        past = inventory.nodes[most].name if len(inventory.nodes) > most else None  # in name order
        raise refusal(
            inventory,
            f"{count} nodes{f' (node {past} is the first past the limit)' if past else ''}: Slurm "
            f"{format_slurm_version(since)} and later hold at most {most} nodes (MAX_SLURM_NODES); render "
            "for an older release or split the cluster",
            node=past,
        )
    topology = build_topology(inventory)
    fp = fingerprint(inventory, slurm_version, partitions)
    return RenderContext(
        inventory,
        topology,
        slurm_version,
        fp,
        compile_policy(inventory, topology, partitions, fp),
        options or RenderOptions(),
        tuple(partitions or ()),
    )


def _registry() -> dict[str, Renderer]:
    from .filter_data import render_filter_data
    from .gres_conf import render_gres_conf
    from .nodes_conf import render_nodes_conf
    from .topology_conf import render_topology_conf
    from .topology_yaml import render_topology_yaml

    return {
        "topology.conf": render_topology_conf,
        "topology.yaml": render_topology_yaml,
        "slurm-topo-nodes.conf": render_nodes_conf,
        "gres.conf": render_gres_conf,
        "slurm_topo_data.lua": render_filter_data,
    }


RENDERERS: dict[str, Renderer] = _registry()
"""Output file name -> renderer, in the order ``generate`` writes them."""


def render_all(
    inventory: Inventory,
    slurm_version: tuple[int, int],
    partitions: Sequence[Partition] | None = None,
    options: RenderOptions | None = None,
) -> dict[str, str]:
    """Render every registered output that applies, in memory; raises before anything could be written."""
    ctx = make_context(inventory, slurm_version, partitions, options)
    out = {}
    for name, renderer in RENDERERS.items():
        text = renderer(ctx)
        if text is not None:
            out[name] = text
    return out
