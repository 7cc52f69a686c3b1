"""Rings and chains through the GPUs of one node, as the collective library builds them: which level two GPUs
meet at (NVLink, PCIe, SYS), and the order a ring (or a pipeline's chain) passes them so that its slowest hop
is fastest — by bandwidth, not by level: NV2 before NV1, PIX before NODE (``gpu.links.link_bandwidth``'s
order). Used by the cost model (``cost.comm.ring_positions``) and by gpulayer-srun's plan (pipeline stages on
one node), so both follow the same order. How many rings NCCL runs at once over them, and so the node's
bandwidth for a collective: :mod:`.nccl_rings`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .gpu_topology import GpuTopology
from .links import bandwidth_rows, is_nvlink, remembered

_ORDER_CACHE: dict[tuple[tuple[int, ...], bool, tuple[int, ...]], tuple[int, ...]] = {}
"""(GPUs, closed, the level of every pair of them) -> order: keyed by what decides the answer, never by a
topology's ``id()`` (a freed topology's address is reused by the next one, whose links may differ)."""
_ASKED_PER_TOPOLOGY = 16_384
"""Answers one topology's memo holds before it is dropped (orders, islands and rows are read again)."""
MAX_ORDER_STEPS = 200_000
"""The search's bound (DFS steps per order): exact for 8 GPUs and for every NVLink-only or regular layout
beyond; past it, index order."""


def _hamiltonian(
    order: tuple[int, ...], rank: Mapping[tuple[int, int], int], limit: int, closed: bool
) -> tuple[int, ...] | None:
    """A path through all of ``order`` (a cycle when ``closed``) whose hops all rank at most ``limit``, the
    lowest indices first among equals; None when there is none or the search passes its bound."""
    n = len(order)
    steps = 0

    def extend(path: list[int], used: set[int]) -> bool:
        nonlocal steps
        steps += 1
        if steps > MAX_ORDER_STEPS:
            return False
        if len(path) == n:
            return not closed or rank[(path[-1], path[0])] <= limit
        for g in order:
            if g not in used and rank[(path[-1], g)] <= limit:
                path.append(g)
                used.add(g)
                if extend(path, used):
                    return True
                path.pop()
                used.discard(g)
        return False

    for start in order[:1] if closed else order:  # a cycle may start anywhere: its first GPU is fixed
        path = [start]
        if extend(path, {start}):
            return tuple(path)
        if steps > MAX_ORDER_STEPS:
            return None
    return None


def gpu_order(topo: GpuTopology | None, gpus: Sequence[int], closed: bool) -> tuple[int, ...]:
    """The order a ring passes ``gpus`` of one node, as the collective library searches it: the cycle
    (``closed``: the ring is this node alone) or the path (the ring enters and leaves the node) whose slowest
    hop is fastest by bandwidth (NV2 before NV1 before PCIe before SYS; ``link_bandwidth``'s order of the
    classes), the lowest indices first among equals. On a DGX-1 hybrid cube mesh an all-NV2 ring of 8 exists
    (0-3-2-1-5-6-7-4) although index order crosses SYS and other NVLink rings take NV1 hops.
    Cached by the GPUs and the levels between them (any topology with the same links shares an entry); a
    bounded depth-first search (:data:`MAX_ORDER_STEPS`)."""
    order = tuple(sorted(gpus))
    if topo is None or not topo.has_links or len(order) < 3:
        return order
    memo = remembered(topo)  # the same question of the same topology: no O(k^2) link reads
    if not bandwidth_rows(topo).keys() >= set(order):
        return order
    asked = memo.get(("gpu_order", order, closed))
    if asked is None:
        if len(memo) > _ASKED_PER_TOPOLOGY:  # a long-lived process asking of one node model: stay bounded
            memo.clear()
        asked = memo[("gpu_order", order, closed)] = _order(topo, order, closed)
    return asked  # type: ignore[return-value]


def _order(topo: GpuTopology, order: tuple[int, ...], closed: bool) -> tuple[int, ...]:
    rows = bandwidth_rows(topo)
    hops = [rows[a][b] for a, b in zip(order, order[1:] + order[:1] if closed else order[1:], strict=False)]
    if min(hops) >= _fastest(topo):  # index order already takes only the node's fastest links
        return order
    if min(hops) >= _ceiling(rows, order, closed):  # no ring or chain through them does better
        return order
    speed = {(a, b): rows[a][b] for a in order for b in order if a != b}
    ladder = {bw: i for i, bw in enumerate(sorted(set(speed.values()), reverse=True))}
    rank = {pair: ladder[bw] for pair, bw in speed.items()}
    key = (order, closed, tuple(rank.values()))
    hit = _ORDER_CACHE.get(key)
    if hit is not None:
        return hit

    def worst(seq: Sequence[int]) -> int:
        hops = [rank[(seq[k], seq[k + 1])] for k in range(len(seq) - 1)]
        if closed:
            hops.append(rank[(seq[-1], seq[0])])
        return max(hops)

    best, best_rank = order, worst(order)
    for limit in range(best_rank):  # try every faster bottleneck, fastest first
        found = _hamiltonian(order, rank, limit, closed)
        if found is not None:
            best = found
            break
    if len(_ORDER_CACHE) > 65536:
        _ORDER_CACHE.clear()
    _ORDER_CACHE[key] = best
    return best


def _ceiling(rows: Mapping[int, Mapping[int, float]], order: tuple[int, ...], closed: bool) -> float:
    """No cycle (``closed``) or path through ``order`` has a slowest hop above this: on a cycle every GPU has
    two neighbours, so both of its links there are at most its second fastest to the others; on a path all but
    the two ends do."""
    second = sorted(sorted((rows[a][b] for b in order if b != a), reverse=True)[1] for a in order)
    return second[0] if closed else second[min(2, len(second) - 1)]


def _fastest(topo: GpuTopology) -> float:
    memo = remembered(topo)
    got = memo.get("fastest")
    if got is None:
        got = memo["fastest"] = max(
            (max(r.values(), default=0.0) for r in bandwidth_rows(topo).values()), default=0.0
        )
    return got  # type: ignore[return-value]


def gpu_level(topo: GpuTopology | None, i: int, j: int) -> str:
    """The level at which two GPUs of one node meet: ``nvlink`` (``NV<n>``), ``pcie`` (PIX, PXB, PHB, NODE),
    ``sys`` (SYS/SOC), or ``node`` without link data for them."""
    if i == j:
        return "nvlink"
    if topo is None or not topo.has_links or i not in topo.gpus or j not in topo.gpus:
        return "node"
    cls = topo.link(i, j)
    if is_nvlink(cls):
        return "nvlink"
    return "sys" if cls in ("SYS", "SOC") else "pcie"
