"""Choose k GPUs of one node: the best-connected free set, exactly.

Order on candidate sets S ⊆ free, |S| = k (smaller key wins)::

    ( -min bandwidth over pairs of S,      # 1. the slowest link as fast as possible
      -sum of bandwidths over pairs of S,  # 2. then the most total link bandwidth
      islands broken,                      # 3. then fewest previously whole free islands split
      sorted(S) )                          # 4. then the lowest indices (lexicographic)

An island is *previously whole free* when all its GPUs are free; S *breaks* it when it takes some but not all of
them (an island of one is never broken). For k = 1 only (3) and (4) apply; without link data (empty matrix) the
answer is the k lowest free indices. Bandwidths come from :mod:`slurm_topo.gpu.links` and are compared as integers
(MB/s) so that sums are exact and the fast and exhaustive searches agree bit for bit.

Algorithm overview (``pick_devices``):

1. *Bottleneck*: the optimal (1) is one of the distinct pair bandwidths t₁ > t₂ > … (at most a handful: one per link
   class present). For each t in descending order, look for k-cliques in the graph "pairs with bandwidth ≥ t"
   restricted to the free GPUs. The first t that has one is the optimum of (1) — any set found there has its
   slowest link exactly t, since no k-clique exists at a higher threshold.
2. *Within that threshold*: depth-first branch-and-bound over cliques with bitmask candidate sets, members added in
   ascending index order, so cliques are visited in lexicographic order of their sorted indices; the incumbent is
   replaced only when strictly better on (2, 3), which makes the first optimum found the lexicographically lowest
   (4). A branch is cut when too few candidates remain, or when its upper bound on (2) — partial sum plus every
   missing pair at the level's maximum bandwidth — cannot beat the incumbent, or ties it while the islands it has
   already broken for sure (a member taken, another member excluded) are no fewer than the incumbent's.

Complexity: worst case O(T · C(n, k) · k) like the exhaustive search (T thresholds), but on real layouts the
threshold graph splits into islands and the bounds are tight where bandwidths are uniform (NVSwitch all-to-all
collapses to one path per level), so the visited tree is tiny. Preparation (bandwidth matrix, adjacency bitmasks
per threshold, islands) is O(n² T) and cached per topology object. ``pick_exhaustive`` is the O(C(n, k) · k²)
reference, used by the tests and the benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations

from ..errors import InputError
from .links import DEFAULT_BANDWIDTH, bandwidth_table, islands, link_bandwidth
from .model import GpuTopology


@dataclass(frozen=True, slots=True)
class _Prepared:
    n: int
    position: Mapping[int, int]  # GPU index -> row
    weight: tuple[tuple[int, ...], ...]  # MB/s per pair, 0 on the diagonal
    levels: tuple[int, ...]  # distinct pair bandwidths, descending
    adjacency: tuple[tuple[int, ...], ...]  # per level, per row: bitmask of rows joined at >= level
    islands: tuple[int, ...]  # bitmask per island


_CACHE: dict[tuple[int, int], tuple[GpuTopology, Mapping[str, float] | None, _Prepared]] = {}


def _prepare(topo: GpuTopology, bandwidth: Mapping[str, float] | None) -> _Prepared:
    key = (id(topo), id(bandwidth))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is topo and hit[1] is bandwidth:
        return hit[2]
    table = DEFAULT_BANDWIDTH if bandwidth is None else bandwidth_table(bandwidth)
    n = len(topo.gpus)
    position = {g: i for i, g in enumerate(topo.gpus)}
    if topo.matrix and (len(topo.matrix) != n or any(len(row) != n for row in topo.matrix)):
        raise InputError(f"{topo.source or 'topology'}: matrix is not {n}×{n}")
    weight = tuple(
        tuple(0 if i == j else round(link_bandwidth(c, table) * 1000) for j, c in enumerate(row))
        for i, row in enumerate(topo.matrix)
    )
    levels = tuple(
        sorted({w for i, row in enumerate(weight) for j, w in enumerate(row) if i != j}, reverse=True)
    )
    adjacency = tuple(
        tuple(sum(1 << j for j in range(n) if j != i and weight[i][j] >= t) for i in range(n)) for t in levels
    )
    island_masks = tuple(sum(1 << position[g] for g in isl) for isl in islands(topo)) if topo.matrix else ()
    prepared = _Prepared(n, position, weight, levels, adjacency, island_masks)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[key] = (topo, bandwidth, prepared)
    return prepared


def _check(topo: GpuTopology, free: Iterable[int], k: int) -> list[int]:
    free_sorted = sorted(set(free))
    unknown = [g for g in free_sorted if g not in topo.gpus]
    if unknown:
        raise InputError(f"free GPUs {unknown} are not on this node (GPUs: {list(topo.gpus)})")
    if k < 1:
        raise InputError(f"cannot pick {k} GPUs: the count must be at least 1")
    if k > len(free_sorted):
        raise InputError(f"cannot pick {k} GPUs: only {len(free_sorted)} free ({free_sorted})")
    return free_sorted


def _broken(smask: int, whole: list[int]) -> int:
    return sum(1 for isl in whole if isl & smask and isl & ~smask)


def pick_devices(
    topo: GpuTopology, free: Iterable[int], k: int, bandwidth: Mapping[str, float] | None = None
) -> tuple[int, ...]:
    """The best ``k`` GPUs among ``free`` under the order in the module docstring, ascending.

    ``bandwidth`` overrides entries of :data:`~slurm_topo.gpu.links.DEFAULT_BANDWIDTH`. Raises
    :class:`InputError` when ``k < 1``, ``k > len(free)`` or a free index is not a GPU of ``topo``.
    """
    free_sorted = _check(topo, free, k)
    if not topo.matrix:
        return tuple(free_sorted[:k])
    if k == len(free_sorted):
        return tuple(free_sorted)
    p = _prepare(topo, bandwidth)
    gpus, pos = topo.gpus, p.position
    fmask = 0
    for g in free_sorted:
        fmask |= 1 << pos[g]
    whole = [isl for isl in p.islands if isl & fmask == isl and isl & (isl - 1)]
    if k == 1:
        for g in free_sorted:
            bit = 1 << pos[g]
            if not any(isl & bit for isl in whole):
                return (g,)
        return (free_sorted[0],)

    weight = p.weight
    maxw = p.levels[0]
    for adjacency in p.adjacency:
        adj = [a & fmask for a in adjacency]
        best_mask = 0
        best_sum = -1
        best_broken = 1 << 30

        def rec(smask: int, cand: int, ssum: int, gain: list[int], need: int) -> None:
            # gain[w] = total bandwidth from w to the members of smask
            nonlocal best_mask, best_sum, best_broken
            c = cand
            r = need - 1
            pair_bound = r * (r - 1) // 2 * maxw
            while c:
                if c.bit_count() < need:
                    return
                low = c & -c
                v = low.bit_length() - 1
                c ^= low
                nsum = ssum + gain[v]
                nmask = smask | low
                if need == 1:
                    if nsum > best_sum or (nsum == best_sum and _broken(nmask, whole) < best_broken):
                        best_mask, best_sum, best_broken = nmask, nsum, _broken(nmask, whole)
                    continue
                ncand = c & adj[v]
                if ncand.bit_count() < r:
                    continue
                row = weight[v]
                ngain = gain[:]
                tops = []
                m = ncand
                while m:
                    lw = m & -m
                    w = lw.bit_length() - 1
                    m ^= lw
                    g = gain[w] + row[w]
                    ngain[w] = g
                    tops.append(g)
                tops.sort(reverse=True)
                ub = nsum + sum(tops[:r]) + pair_bound
                if ub < best_sum:
                    continue
                if ub == best_sum:
                    gone = fmask & ~(nmask | ncand)
                    if sum(1 for isl in whole if isl & nmask and isl & gone) >= best_broken:
                        continue
                rec(nmask, ncand, nsum, ngain, r)

        rec(0, fmask, 0, [0] * p.n, k)
        if best_mask:
            return tuple(gpus[i] for i in range(p.n) if best_mask >> i & 1)
    raise AssertionError("unreachable: the lowest threshold joins every pair")


def order_key(
    topo: GpuTopology,
    subset: Iterable[int],
    free: Iterable[int],
    bandwidth: Mapping[str, float] | None = None,
) -> tuple[int, int, int, tuple[int, ...]]:
    """The sort key of one candidate set (smaller is better), as defined in the module docstring."""
    p = _prepare(topo, bandwidth)
    s = sorted(subset)
    rows = [p.position[g] for g in s]
    fmask = sum(1 << p.position[g] for g in set(free))
    smask = sum(1 << r for r in rows)
    whole = [isl for isl in p.islands if isl & fmask == isl and isl & (isl - 1)]
    pairs = [p.weight[a][b] for a, b in combinations(rows, 2)]
    lowest = min(pairs) if pairs else 0
    return (-lowest, -sum(pairs), _broken(smask, whole), tuple(s))


def pick_exhaustive(
    topo: GpuTopology, free: Iterable[int], k: int, bandwidth: Mapping[str, float] | None = None
) -> tuple[int, ...]:
    """Reference implementation: every k-subset of ``free``, the minimum of :func:`order_key`. O(C(n,k)·k²)."""
    free_sorted = _check(topo, free, k)
    if not topo.matrix:
        return tuple(free_sorted[:k])
    return min(combinations(free_sorted, k), key=lambda s: order_key(topo, s, free_sorted, bandwidth))
