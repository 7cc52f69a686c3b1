"""The link model: a bandwidth per GPU pair from its class, and NVLink islands.

``DEFAULT_BANDWIDTH`` is the documented table (GB/s, one direction, order-of-magnitude figures meant for
*ranking* pairs, not for predicting throughput):

======  =========================================================================
class   GB/s
======  =========================================================================
NV      25 per bonded NVLink (``NV<n>`` = n × 25: NV1 = 25, NV4 = 100, NV18 = 450)
PIX     20   one PCIe bridge between the GPUs
PXB     16   several PCIe bridges, no host bridge
PHB     12   through a PCIe host bridge (the CPU)
NODE    10   between host bridges inside one NUMA node
SYS      6   across the inter-socket link (QPI/UPI/xGMI); ``SOC`` is ``SYS``
======  =========================================================================

Pass an override mapping (any subset of these keys) to :func:`bandwidth_table`; the merged table must keep the
model's order — every ``NV<n>`` faster than every PCIe class (so ``NV`` > ``PIX``), ``NVa`` > ``NVb`` when a >
b (automatic: per-link × n), and ``PIX > PXB > PHB > NODE > SYS`` — else :class:`InputError`.

Islands are the connected components of the graph whose edges are NVLink pairs (union-find, O(n² α(n))); every
GPU is in exactly one island (a GPU without NVLink is an island of one). NICs are never part of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from ..core.errors import InputError
from .gpu_topology import PCIE_CLASSES, GpuTopology

DEFAULT_BANDWIDTH: Mapping[str, float] = MappingProxyType(
    {"NV": 25.0, "PIX": 20.0, "PXB": 16.0, "PHB": 12.0, "NODE": 10.0, "SYS": 6.0}
)

_NV_RE = re.compile(r"NV(\d+)")


def bandwidth_table(overrides: Mapping[str, float] | None = None) -> Mapping[str, float]:
    """``DEFAULT_BANDWIDTH`` updated with ``overrides``, checked to keep the model's order."""
    table = dict(DEFAULT_BANDWIDTH)
    if overrides:
        unknown = sorted(set(overrides) - set(table))
        if unknown:
            raise InputError(
                f"bandwidth table: unknown link classes {', '.join(unknown)} "
                f"(known: {', '.join(DEFAULT_BANDWIDTH)})"
            )
        table.update({k: float(v) for k, v in overrides.items()})
    order = ["NV", *PCIE_CLASSES]
    for a, b in zip(order, order[1:], strict=False):
        if not table[a] > table[b]:
            raise InputError(f"bandwidth table: {a} ({table[a]}) must be faster than {b} ({table[b]})")
    if not table["SYS"] > 0:
        raise InputError(f"bandwidth table: SYS ({table['SYS']}) must be positive")
    return MappingProxyType(table)


def link_bandwidth(cls: str, table: Mapping[str, float] = DEFAULT_BANDWIDTH) -> float:
    """GB/s of one link class (``NV<n>`` = n × per-link; ``SOC`` = ``SYS``)."""
    m = _NV_RE.fullmatch(cls)
    if m:
        lanes = int(m.group(1))
        if lanes < 1:
            raise InputError(f"link class {cls!r}: NVLink count must be at least 1")
        return lanes * table["NV"]
    key = "SYS" if cls == "SOC" else cls
    if key not in PCIE_CLASSES:
        raise InputError(f"unknown link class {cls!r} (expected NV<n>, {', '.join(PCIE_CLASSES)})")
    return table[key]


def is_nvlink(cls: str) -> bool:
    """True for ``NV<n>`` classes."""
    return bool(_NV_RE.fullmatch(cls))


def nvlink_count(cls: str) -> int:
    """The bonded NVLinks of a link class: ``n`` for ``NV<n>``, 0 for every other class."""
    m = _NV_RE.fullmatch(cls)
    return int(m.group(1)) if m else 0


_PER_TOPOLOGY: dict[int, tuple[GpuTopology, dict[object, object]]] = {}
_PER_TOPOLOGY_MAX = 64
_PER_TOPOLOGY_CELLS = 2_097_152  # GPU pairs of the topologies held: ~80 MB of bandwidth rows at most
_held_cells = 0


def remembered(topo: GpuTopology) -> dict[object, object]:
    """A memo for answers about ``topo`` (its islands, its bandwidth rows, ring orders through it): the
    launcher and the cost model ask the same questions of one node's topology once per rank or group (2 916
    island searches for 36 nodes of 72 GPUs). Keyed by ``id()`` with the topology kept beside its memo, so
    the address cannot be reused by another topology while the entry lives (hashing a topology by value
    reads its whole matrix: a million cells at 1 024 GPUs). At most :data:`_PER_TOPOLOGY_MAX` topologies and
    :data:`_PER_TOPOLOGY_CELLS` GPU pairs among them; past that every memo is dropped (and the topologies
    freed) before the next one is made."""
    global _held_cells
    got = _PER_TOPOLOGY.get(id(topo))
    if got is not None and got[0] is topo:
        return got[1]
    cells = len(topo.gpus) ** 2
    if len(_PER_TOPOLOGY) >= _PER_TOPOLOGY_MAX or _held_cells + cells > _PER_TOPOLOGY_CELLS:
        forget_topologies()
    _held_cells += cells
    memo: dict[object, object] = {}
    _PER_TOPOLOGY[id(topo)] = (topo, memo)
    return memo


def forget_topologies() -> None:
    """Drop every memo :func:`remembered` holds (and the topologies it keeps alive)."""
    global _held_cells
    _PER_TOPOLOGY.clear()
    _held_cells = 0


def bandwidth_rows(topo: GpuTopology) -> dict[int, dict[int, float]]:
    """GB/s between every two GPUs of ``topo`` by GPU index (``link_bandwidth`` of their class), read once
    per topology."""
    memo = remembered(topo)
    got = memo.get("bandwidth_rows")
    if got is None:
        by_class: dict[str, float] = {}
        rows: dict[int, dict[int, float]] = {}
        for g, row in zip(topo.gpus, topo.matrix, strict=True):
            rows[g] = {
                h: by_class[c] if c in by_class else by_class.setdefault(c, link_bandwidth(c))
                for h, c in zip(topo.gpus, row, strict=True)
                if h != g
            }
        got = memo["bandwidth_rows"] = rows
    return got  # type: ignore[return-value]


def islands(topo: GpuTopology) -> tuple[frozenset[int], ...]:
    """Maximal NVLink-connected groups of GPU indices, sorted by their lowest index.

    Every GPU is in exactly one island; without link data each GPU is its own island. Remembered per
    topology (:func:`remembered`).
    """
    memo = remembered(topo)
    got = memo.get("islands")
    if got is None:
        got = memo["islands"] = _islands(topo)
    return got  # type: ignore[return-value]


def _islands(topo: GpuTopology) -> tuple[frozenset[int], ...]:
    n = len(topo.gpus)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, row in enumerate(topo.matrix):
        for j in range(i + 1, len(row)):
            if is_nvlink(row[j]):
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, set[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), set()).add(topo.gpus[i])
    return tuple(sorted((frozenset(g) for g in groups.values()), key=min))
