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

from ..errors import InputError
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


def islands(topo: GpuTopology) -> tuple[frozenset[int], ...]:
    """Maximal NVLink-connected groups of GPU indices, sorted by their lowest index.

    Every GPU is in exactly one island; without link data each GPU is its own island.
    """
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
