"""Choose k GPUs of one node: the best-connected free set, exactly.

Order on candidate sets S ⊆ free, |S| = k (smaller key wins)::

    ( -min bandwidth over pairs of S,      # 1. the slowest link as fast as possible
      -sum of bandwidths over pairs of S,  # 2. then the most total link bandwidth
      islands broken,                      # 3. then fewest previously whole free islands split
      preferred,                           # 3a. then a set the job already uses on its other nodes
      sorted(S) )                          # 4. then the lowest indices (lexicographic)

An island is *previously whole free* when all its GPUs are free; S *breaks* it when it takes some but not all
of them (an island of one is never broken). For k = 1 only (3) and (4) apply; without link data (empty matrix)
the answer is the k lowest free indices (every set ties on (1)-(3) there). (3a) applies only when the caller
passes ``prefer`` — index sets in order of preference, the sets a multi-node job holds on its other nodes —:
among the sets that tie on (1)-(3), the first preferred one that is free wins, so every node of the job uses
the same local GPUs when that costs nothing (NCCL keeps a ring on one rail of a rail-optimised fabric only
then); otherwise (4) decides as without ``prefer``. Bandwidths come from :mod:`slurm_topo.gpu.links` and are
compared as integers (MB/s) so that sums are exact and the fast and exhaustive searches agree bit for bit.

Algorithm overview (``pick_devices``):

1. *Bottleneck*: the optimal (1) is one of the distinct pair bandwidths t₁ > t₂ > … (one per link class
   present). For each t in descending order, look for k-cliques in the graph "pairs with bandwidth ≥ t"
   restricted to the free GPUs: levels whose largest degree is below k-1 are skipped outright; otherwise GPUs
   of degree < k-1 are peeled off (repeatedly) and the rest split into connected components of ≥ k GPUs. The
   first t that has a k-clique is the optimum of (1) — any set found there has its slowest link exactly t.
2. *Complete components* (the large k of 16-GPU boxes: k-sets that must span islands or switches): when every
   live component is a clique at t, a k-set's bandwidth is t·C(k,2) plus the *extra* (bandwidth above t)
   inside each group of GPUs joined by links faster than t — pairs in different groups are exactly t. Every
   NVLink island lies in one group (or holds every live GPU, so all k-sets break it alike), so (3) is counted
   per group too, and (4) is the largest bit-reversed set, a sum over GPUs. One integer per subset of a group
   thus orders it by (2), (3), (4) at once, and the best k-set is a knapsack over the groups
   (:func:`_complete_pick`), each group's best subset per size read from its subsets pre-sorted by (2), (4)
   (groups of ≤ ``_PART_MAX`` GPUs).
3. *Lanes* (up to 16 GPUs, every k from 3 to free-1): :mod:`.pick_lanes` scores every subset of the free GPUs
   at once in fixed-width lanes of Python integers (size, a thermometer code of the slowest link, the
   bandwidth sum, the islands broken) and takes the largest by a tournament, a fixed number of passes in C
   over 2^free lanes whatever the matrix or the busy set: no search, no table built ahead of it, so the
   first pick of a k costs what any other does (``benchmarks/results/pick_worst.md``). Steps 1, 2 and 4
   are not tried there, and their tables are never made (on an 8-GPU capture they cost more than the pick:
   the knapsack's groups alone up to 0.5 ms on a first pick).
4. *Otherwise* (more than 16 GPUs), after steps 1 and 2: depth-first branch-and-bound over cliques
   with bitmask candidate sets, members added in ascending index order, so cliques are visited in
   lexicographic order; the incumbent is replaced only when strictly better on (2, 3), which makes the first
   optimum found the lexicographically lowest (4). A branch is cut when too few candidates remain, or when its
   bound on (2) — partial sum plus, per remaining candidate, its weight to the members and half its r-1 best
   links to other candidates (counted per level with bitmask popcounts) — cannot beat the incumbent, or ties
   it while the islands it has already broken for sure are no fewer than the incumbent's. While fewer
   candidates would be left out than taken, a second bound counts from the left-out side (exact when none is
   left out). The search starts from a greedy k-clique (:func:`_greedy`) as incumbent (from ``_SEED_FROM``
   live GPUs), which a tie met earlier in index order displaces, so (4) still holds. *Twins* (GPUs with the
   same link to every third GPU) are interchangeable: once a GPU is left out, its higher twins are too. Its
   worst case is exponential (the degree bounds are loose on irregular matrices at k near n/2, which is why
   up to 16 GPUs take step 3).

With ``prefer``, the optimum without it is found as above, then each preferred set that is free and of size k
is scored once (:func:`order_key`, O(k² + islands)) and returned if it ties on (1)-(3): the optimum of (1)-(3)
is unique as a value, so a tie means the set is optimal too. Without ``prefer`` nothing more is done.

Complexity: step 2 costs O(Σ 2^|group|) (at most 2^10 per group) plus O(groups · k · |group|); step 3
O(2^free) lane operations in C (about 100 machine instructions per lane in all) plus O(free²) Python
steps; step 4 is O(T · C(n, k) · k) in the worst case like the exhaustive search, reached only on more than
16 GPUs. Preparation (bandwidth matrix, levels, islands) is O(n²), remembered per topology object and
shared by topologies with the same links; the search's tables (adjacency and per-level link steps, twins,
groups with their subsets sorted, O(n³ + Σ 2^|group| log)) are made on the first search. A pick's answer
is remembered per link matrix, free set and k (``_PICKED_KEPT``), so a repeated pick is a lookup.
``pick_exhaustive`` is the O(C(n, k) · k²) reference, used by the tests and the benchmark.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations

from ..core.errors import InputError
from .gpu_topology import GpuTopology
from .links import DEFAULT_BANDWIDTH, bandwidth_table, is_nvlink, link_bandwidth
from .pick_lanes import best as _lanes_best


@dataclass(frozen=True)
class _Prepared:
    """What every pick on one link matrix reads; the search's tables (steps 1, 2 and 4) are made on first
    use, so a node whose picks the lanes answer (up to 16 GPUs) never pays for them."""

    n: int
    position: Mapping[int, int]  # GPU index -> row
    weight: tuple[tuple[int, ...], ...]  # MB/s per pair, 0 on the diagonal
    levels: tuple[int, ...]  # distinct pair bandwidths, descending
    islands: tuple[int, ...]  # bitmask per island
    parts: dict[int, tuple[_Part, ...] | None] = field(default_factory=dict)  # per level, filled on demand
    picked: dict[tuple[int, int], int] = field(default_factory=dict)  # (free rows, k) -> the rows chosen

    @cached_property
    def adjacency(self) -> tuple[tuple[int, ...], ...]:
        """Per level, per row: bitmask of rows joined at >= level."""
        n, weight = self.n, self.weight
        return tuple(
            tuple(sum(1 << j for j in range(n) if j != i and weight[i][j] >= t) for i in range(n))
            for t in self.levels
        )

    @cached_property
    def largest(self) -> tuple[int, ...]:
        """Per level: 1 + the largest degree (no clique at that level is larger)."""
        return tuple(1 + max((a.bit_count() for a in rows), default=0) for rows in self.adjacency)

    @cached_property
    def steps(self) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
        """Per level, per row: see _Search.branch."""
        return _steps(self.adjacency, self.levels, self.n)

    @cached_property
    def later_twins(self) -> tuple[int, ...]:
        """Per row: bitmask of higher rows with the same weight to every other row."""
        return _twins(self.weight)


@dataclass(frozen=True, slots=True)
class _Part:
    """A group of rows joined by links faster than a level (at most 10 rows), with the extra bandwidth above
    the level of every subset: ``extra[code]`` for the subset whose bit i is ``rows[i]``."""

    mask: int
    rows: tuple[int, ...]
    extra: tuple[int, ...]
    key: tuple[int, ...]  # per subset: (extra << 20) · 2^n + its rows' reversed bits (see _complete_pick)
    rowmask: tuple[int, ...]  # per subset: its rows as a row bitmask
    by_size: tuple[tuple[int, ...], ...]  # per size: the subsets of that size, by ``key`` descending


_PART_MAX = 10
_SEED_FROM = 12  # live GPUs from which the search starts from a greedy incumbent


def _parts(p: _Prepared, level: int) -> tuple[_Part, ...] | None:
    """The groups of rows joined (transitively) by links faster than ``levels[level]``; None if one is larger
    than ``_PART_MAX`` rows (then the search does without them)."""
    if level in p.parts:
        return p.parts[level]
    t, n, weight = p.levels[level], p.n, p.weight
    comp = list(range(n))

    def find(x: int) -> int:
        while comp[x] != x:
            comp[x] = comp[comp[x]]
            x = comp[x]
        return x

    for i in range(n):
        for j in range(i + 1, n):
            if weight[i][j] > t:
                comp[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    out: list[_Part] | None = []
    for rows in groups.values():
        if len(rows) > _PART_MAX:
            out = None
            break
        if len(rows) < 2 or out is None:
            continue
        extra = [0] * (1 << len(rows))
        for code in range(1, 1 << len(rows)):
            low = (code & -code).bit_length() - 1
            rest = code & (code - 1)
            add = sum(weight[rows[low]][rows[b]] - t for b in range(len(rows)) if rest >> b & 1)
            extra[code] = extra[rest] + add
        rowmask = [0] * (1 << len(rows))
        rev = [0] * (1 << len(rows))
        for code in range(1, 1 << len(rows)):
            low = (code & -code).bit_length() - 1
            rowmask[code] = rowmask[code & (code - 1)] | 1 << rows[low]
            rev[code] = rev[code & (code - 1)] | 1 << (n - 1 - rows[low])
        key = tuple((e << 20 << n) + r for e, r in zip(extra, rev, strict=True))
        sized: list[list[int]] = [[] for _ in range(len(rows) + 1)]
        for code in range(1 << len(rows)):
            sized[code.bit_count()].append(code)
        by_size = tuple(tuple(sorted(codes, key=key.__getitem__, reverse=True)) for codes in sized)
        out.append(_Part(sum(1 << r for r in rows), tuple(rows), tuple(extra), key, tuple(rowmask), by_size))
    result = tuple(out) if out is not None else None
    p.parts[level] = result
    return result


_CACHE: dict[tuple[int, int], tuple[GpuTopology, Mapping[str, float] | None, _Prepared]] = {}
_BY_LINKS: dict[tuple[object, ...], _Prepared] = {}  # nodes alike (one object each) share one
_KEPT = 256  # entries of each cache, all dropped when full
_LANE_GPUS = range(3, 17)  # nodes whose picks the lanes answer (pick_lanes)
_PICKED_KEPT = 4096  # answers remembered per link matrix


def _twins(weight: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Per row, the higher rows that are its twins: the same weight to every third row (so the same
    adjacency at every level and the same island). Swapping twins changes no part of the order but (4)."""
    n = len(weight)
    out = []
    for u in range(n):
        mask = 0
        for v in range(u + 1, n):
            ru, rv = list(weight[u]), list(weight[v])
            ru[v] = rv[u] = 0  # the pair's own link does not matter (both diagonals are 0 already)
            if ru == rv:
                mask |= 1 << v
        out.append(mask)
    return tuple(out)


def _prepare(topo: GpuTopology, bandwidth: Mapping[str, float] | None) -> _Prepared:
    """The tables every pick on ``topo`` reads, remembered per (topology, bandwidth) object and shared by
    topologies with the same GPUs, links and bandwidth table (a job's nodes read from gres.conf are one
    object each). Keyed by value or by an object it keeps, never by a bare ``id()``."""
    key = (id(topo), id(bandwidth))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is topo and hit[1] is bandwidth:
        return hit[2]
    links = (topo.gpus, topo.matrix, tuple(sorted(bandwidth.items())) if bandwidth is not None else None)
    prepared = _BY_LINKS.get(links)
    if prepared is None:
        prepared = _tables(topo, DEFAULT_BANDWIDTH if bandwidth is None else bandwidth_table(bandwidth))
        if len(_BY_LINKS) >= _KEPT:
            _BY_LINKS.clear()
        _BY_LINKS[links] = prepared
    if len(_CACHE) >= _KEPT:
        _CACHE.clear()
    _CACHE[key] = (topo, bandwidth, prepared)
    return prepared


def _tables(topo: GpuTopology, table: Mapping[str, float]) -> _Prepared:
    """Link weights (bandwidth in MB/s, 0 on the diagonal), their distinct levels (best first) and NVLink
    islands; the search's tables come later, on demand (:class:`_Prepared`)."""
    n = len(topo.gpus)
    position = {g: i for i, g in enumerate(topo.gpus)}
    if topo.matrix and (len(topo.matrix) != n or any(len(row) != n for row in topo.matrix)):
        raise InputError(f"{topo.source or 'topology'}: matrix is not {n}×{n}")
    classes = set().union(*topo.matrix) - {"X"}
    per_class = {c: round(link_bandwidth(c, table) * 1000) for c in classes}
    levels = tuple(sorted(set(per_class.values()), reverse=True))
    cell = dict(per_class, X=0)
    rows = [list(map(cell.__getitem__, row)) for row in topo.matrix]
    for i, (row, links) in enumerate(zip(rows, topo.matrix, strict=True)):
        if links.count("X") > (links[i] == "X"):
            raise InputError(f"{topo.source or 'topology'}: GPU {topo.gpus[i]} has a link X to another GPU")
        row[i] = 0  # the diagonal (a GPU to itself)
    weight = tuple(map(tuple, rows))
    nvlink = {c for c in classes if is_nvlink(c)}
    return _Prepared(n, position, weight, levels, _island_masks(topo.matrix, nvlink))


def _island_masks(matrix: tuple[tuple[str, ...], ...], nvlink: set[str]) -> tuple[int, ...]:
    """Row bitmasks of the NVLink islands (:func:`slurm_topo.gpu.links.islands`, by row; ``nvlink``: the
    NVLink classes present), by lowest row."""
    parent = list(range(len(matrix)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, row in enumerate(matrix):
        for j in range(i + 1, len(row)):
            if row[j] in nvlink:
                a, b = find(i), find(j)
                parent[max(a, b)] = min(a, b)
    groups: dict[int, int] = {}
    for i in range(len(matrix)):
        groups[find(i)] = groups.get(find(i), 0) | 1 << i
    return tuple(groups[r] for r in sorted(groups))


def _steps(
    adjacency: tuple[tuple[int, ...], ...], levels: tuple[int, ...], n: int
) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
    """Per level and row: (its adjacency at each level up to this one, that level's bandwidth step)."""
    return tuple(
        tuple(
            tuple(
                (adjacency[lv][i], levels[lv] - (levels[lv + 1] if lv < level else 0))
                for lv in range(level + 1)
            )
            for i in range(n)
        )
        for level in range(len(levels))
    )


def _check(topo: GpuTopology, free: Iterable[int], k: int) -> list[int]:
    free_sorted = sorted(set(free))
    known = frozenset(topo.gpus) if len(free_sorted) > 8 else topo.gpus
    unknown = [g for g in free_sorted if g not in known]
    if unknown:
        raise InputError(f"free GPUs {unknown} are not on this node (GPUs: {list(topo.gpus)})")
    if k < 1:
        raise InputError(f"cannot pick {k} GPUs: the count must be at least 1")
    if k > len(free_sorted):
        raise InputError(f"cannot pick {k} GPUs: only {len(free_sorted)} free ({free_sorted})")
    return free_sorted


def _broken(smask: int, whole: list[int]) -> int:
    return sum(1 for isl in whole if isl & smask and isl & ~smask)


def _rows(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        mask ^= low
        out.append(low.bit_length() - 1)
    return out


def _live_components(adj: list[int], fmask: int, k: int) -> list[int]:
    """The components (row bitmasks) of the free rows that may be in a k-clique of ``adj``: degree >= k-1
    (repeated), in a component of >= k rows. Every k-clique lies inside one of them."""
    alive = fmask
    while True:
        keep = 0
        m = alive
        while m:
            low = m & -m
            m ^= low
            if (adj[low.bit_length() - 1] & alive).bit_count() >= k - 1:
                keep |= low
        if keep == alive:
            break
        alive = keep
    out, rest = [], alive
    while rest:
        comp = frontier = rest & -rest
        while frontier:
            low = frontier & -frontier
            frontier ^= low
            new = adj[low.bit_length() - 1] & alive & ~comp
            comp |= new
            frontier |= new
        rest &= ~comp
        if comp.bit_count() >= k:
            out.append(comp)
    return out


def _complete_pick(
    p: _Prepared, parts: tuple[_Part, ...], alive: int, whole: list[int], k: int
) -> tuple[int, int] | None:
    """The best k rows of ``alive`` when every pair of them is joined at >= the level (see the module
    docstring, step 2), or None when an island spans two groups (the caller then searches).

    A k-set's bandwidth is the level's times C(k,2) plus the extra inside each group of rows joined by faster
    links; its broken islands are counted group by group (every island lies inside one group); and the lowest
    indices (4) are the largest *bit-reversed* set, a sum over rows. So one integer per subset of a group —
    ``(extra · 2^20 - broken) · 2^n + reversed bits`` — orders it by (2), (3), (4), the value of a set is the
    sum over its groups, and the best k-set is a knapsack over the groups (a row outside every group adds only
    its reversed bit). Cost: every subset of every group's live rows once (2^rows, rows <= ``_PART_MAX``),
    plus O(groups · k · rows) for the knapsack.
    """
    n = p.n
    grouped = 0
    for part in parts:
        grouped |= part.mask
    shift = 1 << n
    penalty = 0
    for isl in whole:
        if isl & alive and not any(isl & ~part.mask == 0 for part in parts):
            if alive & ~isl:
                return None
            # one island holds every live row: any k of them break it alike (unless they are all of it)
            penalty = 0 if isl.bit_count() == k else shift
            whole = []
            break
    # per stage: best value per size and the subset (a row mask) that reaches it
    stages: list[tuple[list[int | None], list[int]]] = []
    for part in parts:
        code = 0
        for b, row in enumerate(part.rows):
            if alive >> row & 1:
                code |= 1 << b
        if code:
            stages.append(_group_stage(part, code, whole, k, shift))
    loose = _rows(alive & ~grouped)  # ascending: the first j are the best j
    best_l: list[int | None] = [0]
    pick_l = [0]
    for r in loose:
        best_l.append((best_l[-1] or 0) + (1 << (n - 1 - r)))
        pick_l.append(pick_l[-1] | 1 << r)
    stages.append((best_l, pick_l))
    got = _knapsack(stages, k)
    return None if got is None else (got[0] - penalty, got[1])


def _group_stage(
    part: _Part, code: int, whole: list[int], k: int, shift: int
) -> tuple[list[int | None], list[int]]:
    """Per subset size up to k: the best value of a subset of the group's live rows (``code``), its rows."""
    isl_codes = [
        sum(1 << b for b, row in enumerate(part.rows) if isl >> row & 1) for isl in whole if isl & part.mask
    ]
    # one whole island is the group: every size strictly between 0 and all breaks it once
    whole_part = isl_codes == [(1 << len(part.rows)) - 1]
    if whole_part:
        isl_codes = []
    size_cap = min(code.bit_count(), k)
    best: list[int | None] = [None] * (size_cap + 1)
    pick = [0] * (size_cap + 1)
    extra, keys, rowmask = part.extra, part.key, part.rowmask
    for size in range(size_cap + 1):
        # subsets of this size by (2) then (4); the first live one has the best extra, and only the live
        # ones with that same extra can differ in (3)
        top = -1
        for sub in part.by_size[size]:
            if sub & ~code:
                continue
            if top < 0:
                top = extra[sub]
            elif extra[sub] < top:
                break
            val = keys[sub] - (shift if whole_part and 0 < size < len(part.rows) else 0)
            for ic in isl_codes:
                if ic & sub and ic & ~sub:
                    val -= shift
            cur = best[size]
            if cur is None or val > cur:
                best[size], pick[size] = val, rowmask[sub]
            if not isl_codes:
                break
    return best, pick


def _knapsack(stages: list[tuple[list[int | None], list[int]]], k: int) -> tuple[int, int] | None:
    """The largest sum of one value per stage (by size) with sizes adding to k, and the union of the rows."""
    dp: list[int | None] = [0] + [None] * k
    back: list[list[int]] = []
    for best, _ in stages:
        new: list[int | None] = [None] * (k + 1)
        choice = [0] * (k + 1)
        for j, d in enumerate(dp):
            if d is None:
                continue
            for size in range(min(len(best) - 1, k - j) + 1):
                got = best[size]
                if got is None:
                    continue
                v = d + got
                cur = new[j + size]
                if cur is None or v > cur:
                    new[j + size], choice[j + size] = v, size
        dp = new
        back.append(choice)
    total = dp[k]
    if total is None:
        return None
    chosen, j = 0, k
    for (_, pick), choice in zip(reversed(stages), reversed(back), strict=True):
        size = choice[j]
        chosen |= pick[size]
        j -= size
    return total, chosen


def _complete_levels(
    p: _Prepared, level: int, adj: list[int], comps: list[int], whole: list[int], k: int
) -> int | None:
    """When every live component is complete at this level, the best k-set by :func:`_complete_pick` per
    component (a k-clique lies in one component; values of different components compare as they are), else
    None."""
    parts = _parts(p, level)
    if parts is None:
        return None
    best: tuple[int, int] | None = None
    for comp in comps:
        if any(adj[v] | (1 << v) != adj[v] | comp for v in _rows(comp)):
            return None
        got = _complete_pick(p, parts, comp, whole, k)
        if got is None:
            return None
        if best is None or got[0] > best[0]:
            best = got
    return best[1] if best is not None else None


class _Search:
    """Branch and bound for the best k-clique of one threshold graph (step 3 of the module docstring).

    The bound from the left-out side: for the r to come R out of candidates C, with U = C \\ R (u rows),
    value(R) = Σ_C gain + in(C) − Σ_U (gain + weight to C) + in(U), and in(U) is at most half of each
    left-out row's u-1 best links in C; so the u rows with the smallest gain + weight to C − half those
    links bound it from above. It is exact at u = 0 and often tighter than the degree bound while u < r
    (the search takes the smaller of the two).

    ``seed`` starts the search with a k-clique found greedily (:func:`_greedy`): branches that cannot beat it
    are cut from the start. Until the search meets a set at least as good in index order (``met``), a tie
    with it displaces it, so the answer is still the lowest indices among the best (4).
    """

    __slots__ = (
        "adj",
        "weight",
        "top",
        "twins",
        "whole",
        "fmask",
        "best_mask",
        "best_sum",
        "best_broken",
        "met",
    )

    def __init__(self, p: _Prepared, level: int, adj: list[int], fmask: int, whole: list[int]) -> None:
        self.adj, self.weight, self.twins = adj, p.weight, p.later_twins
        self.top = p.steps[level]
        self.whole, self.fmask = whole, fmask
        self.best_mask, self.best_sum, self.best_broken = 0, -1, 1 << 30
        self.met = True

    def seed(self, mask: int, total: int) -> None:
        self.best_mask, self.best_sum, self.best_broken = mask, total, _broken(mask, self.whole)
        self.met = False

    def leaf(self, nmask: int, nsum: int) -> None:
        if nsum < self.best_sum:
            return
        broken = _broken(nmask, self.whole)
        if nsum > self.best_sum or broken < self.best_broken or (not self.met and broken == self.best_broken):
            self.best_mask, self.best_sum, self.best_broken = nmask, nsum, broken
            self.met = True

    def run(self, smask: int, cand: int, ssum: int, gain: list[int], need: int) -> None:
        # gain[w] = total weight from w to the members of smask; members are added in ascending row order
        c, r = cand, need - 1
        adj, weight, top, twins = self.adj, self.weight, self.top, self.twins
        while c:
            if c.bit_count() < need:
                return
            low = c & -c
            v = low.bit_length() - 1
            c ^= low
            nsum = ssum + gain[v]
            if need == 1:
                self.leaf(smask | low, nsum)
            else:
                ncand = c & adj[v]
                if ncand.bit_count() >= r:
                    self.branch(smask | low, ncand, nsum, gain, weight[v], top, r)
            c &= ~twins[v]  # a later twin instead of v: same key, higher indices

    def branch(
        self,
        nmask: int,
        ncand: int,
        nsum: int,
        gain: list[int],
        row: tuple[int, ...],
        top: tuple[tuple[tuple[int, int], ...], ...],
        r: int,
    ) -> None:
        # bound: each of the r still to come adds its weight to the members plus half its r-1 best links
        # (``vals``); when fewer than r candidates are left out (u < r), also the same bound taken from the
        # side of the u left out (``outs``, see _Search docstring), which is the tighter one there
        ngain = gain[:]
        vals = []
        u = ncand.bit_count() - r
        outs: list[int] | None = [] if u < r else None
        whole_c = 0  # 2 × (weight of the candidates to the members and among themselves)
        m = ncand
        while m:
            lw = m & -m
            w = lw.bit_length() - 1
            m ^= lw
            g = gain[w] + row[w]
            ngain[w] = g
            # the r-1 best links from w to other candidates: weights as increments per level, highest first
            best = 0
            if outs is None:
                for mask, step in top[w]:
                    best += step * min(r - 1, (mask & ncand).bit_count())
            else:
                to_c = left = 0
                for mask, step in top[w]:
                    d = (mask & ncand).bit_count()
                    best += step * (d if d < r else r - 1)
                    to_c += step * d
                    left += step * (d if d < u else u - 1)
                whole_c += 2 * g + to_c
                outs.append(2 * g + 2 * to_c - left)
            vals.append(2 * g + best)
        vals.sort(reverse=True)
        ub2 = 2 * nsum + sum(vals[:r])
        if outs is not None:
            outs.sort()
            ub2 = min(ub2, 2 * nsum + whole_c - sum(outs[:u]))
        best2 = 2 * self.best_sum
        if ub2 < best2:
            return
        if ub2 < best2 + 2:  # ties the incumbent at best: worth it only for fewer broken islands
            gone = self.fmask & ~(nmask | ncand)
            sure = sum(1 for isl in self.whole if isl & nmask and isl & gone)
            # a seeded incumbent (not yet met in index order) is displaced by a tie met before it
            if sure > self.best_broken or (sure == self.best_broken and self.met):
                return
        self.run(nmask, ncand, nsum, ngain, r)


def _greedy(
    weight: tuple[tuple[int, ...], ...], adj: list[int], alive: int, k: int
) -> tuple[int, int] | None:
    """A good k-clique of ``adj`` inside ``alive`` and its bandwidth sum, or None: from the row with the most
    bandwidth to the others, add the candidate with the most bandwidth to the set until k, then swap one
    member for one other row while that gains (at most twice). O(k·n) plus O(k·n) per swap."""
    rows = _rows(alive)
    first = max(rows, key=lambda v: (sum(weight[v][u] for u in rows), -v))
    return _grow(weight, adj, alive, rows, first, k)


def _grow(
    weight: tuple[tuple[int, ...], ...], adj: list[int], alive: int, rows: list[int], first: int, k: int
) -> tuple[int, int] | None:
    smask, cand, total = 1 << first, adj[first] & alive, 0
    to_set = list(weight[first])  # per row: bandwidth to the set
    for _ in range(k - 1):
        if not cand:
            return None
        v = max(_rows(cand), key=lambda x: (to_set[x], -x))
        smask |= 1 << v
        total += to_set[v]
        cand &= adj[v]
        for x, w in enumerate(weight[v]):
            to_set[x] += w
    for _ in range(2):
        gain, swap = 0, (0, 0)
        for out in _rows(smask):
            rest = smask & ~(1 << out)
            for x in rows:
                if not smask >> x & 1 and adj[x] & rest == rest:
                    d = to_set[x] - weight[x][out] - to_set[out]
                    if d > gain:
                        gain, swap = d, (out, x)
        if not gain:
            break
        out, x = swap
        smask = smask & ~(1 << out) | 1 << x
        total += gain
        for y, (wo, wx) in enumerate(zip(weight[out], weight[x], strict=True)):
            to_set[y] += wx - wo
    return smask, total


def _best_pair(p: _Prepared, gpus: tuple[int, ...], rows: list[int], whole: list[int]) -> tuple[int, ...]:
    """k = 2: every free pair once (its one link is both (1) and (2)), then (3) and (4); O(free²)."""
    home = {}
    for isl in whole:  # a whole island is broken by a pair that takes part of it
        m = isl
        while m:
            low = m & -m
            m ^= low
            home[low.bit_length() - 1] = isl
    weight = p.weight
    best: tuple[int, int, int, int] | None = None
    for i, a in enumerate(rows):
        wa, ia = weight[a], home.get(a, 0)
        for b in rows[i + 1 :]:
            ib = home.get(b, 0)
            pair = 1 << a | 1 << b
            broken = (1 if ia and ia & ~pair else 0) + (1 if ib and ib != ia and ib & ~pair else 0)
            key = (-wa[b], broken, a, b)
            if best is None or key < best:
                best = key
    assert best is not None
    return (gpus[best[2]], gpus[best[3]])


def _search(
    p: _Prepared, level: int, adj: list[int], comps: list[int], fmask: int, whole: list[int], k: int
) -> int:
    """Step 4: the best k-clique of the live components at this level (a row mask; 0 when there is none)."""
    alive = 0
    for comp in comps:
        alive |= comp
    search = _Search(p, level, adj, fmask, whole)
    if alive.bit_count() >= _SEED_FROM:  # below, the search is quick and a seed costs more than it saves
        start = _greedy(p.weight, adj, alive, k)
        if start is not None:
            search.seed(*start)
    search.run(0, alive, 0, [0] * p.n, k)
    return search.best_mask


def pick_devices(
    topo: GpuTopology,
    free: Iterable[int],
    k: int,
    bandwidth: Mapping[str, float] | None = None,
    *,
    prefer: Iterable[Collection[int]] = (),
) -> tuple[int, ...]:
    """The best ``k`` GPUs among ``free`` under the order in the module docstring, ascending.

    ``bandwidth`` overrides entries of :data:`~slurm_topo.gpu.links.DEFAULT_BANDWIDTH`. ``prefer``: index
    sets in order of preference (rule 3a: the sets the job uses on its other nodes). Raises
    :class:`InputError` when ``k < 1``, ``k > len(free)`` or a free index is not a GPU of ``topo``.
    """
    best = _pick(topo, free, k, bandwidth)
    return _preferred(topo, free, k, bandwidth, best, prefer) if prefer else best


def _preferred(
    topo: GpuTopology,
    free: Iterable[int],
    k: int,
    bandwidth: Mapping[str, float] | None,
    best: tuple[int, ...],
    prefer: Iterable[Collection[int]],
) -> tuple[int, ...]:
    """Rule (3a): the first preferred set that is free, has ``k`` GPUs and ties ``best`` on (1)-(3)."""
    free_set = set(free)
    best_key: tuple[int, int, int] | None = None
    for cand in prefer:
        s = tuple(sorted(set(cand)))
        if len(s) != k or not free_set.issuperset(s):
            continue
        if s == best:
            return best
        if not topo.matrix:
            return s  # no link data: every set ties on (1)-(3)
        if best_key is None:
            best_key = order_key(topo, best, free_set, bandwidth)[:3]
        if order_key(topo, s, free_set, bandwidth)[:3] == best_key:
            return s
    return best


def _pick(
    topo: GpuTopology, free: Iterable[int], k: int, bandwidth: Mapping[str, float] | None
) -> tuple[int, ...]:
    """pick_devices without rule (3a)."""
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
    if k == 2:
        return _best_pair(p, gpus, [pos[g] for g in free_sorted], whole)
    chosen = _best_rows(p, fmask, whole, k)
    return tuple(gpus[i] for i in range(p.n) if chosen >> i & 1)


def _best_rows(p: _Prepared, fmask: int, whole: list[int], k: int) -> int:
    """Steps 1-4 of the module docstring for 3 <= k < free rows: the chosen rows as a bitmask, remembered
    per link matrix, free rows and k."""
    key = (fmask, k)
    got = p.picked.get(key)
    if got is None:
        if p.n in _LANE_GPUS:
            got = _lanes_best(p.weight, [i for i in range(p.n) if fmask >> i & 1], k, whole)
        else:
            got = _searched(p, fmask, whole, k)
        if len(p.picked) >= _PICKED_KEPT:
            p.picked.clear()
        p.picked[key] = got
    return got


def _searched(p: _Prepared, fmask: int, whole: list[int], k: int) -> int:
    """Steps 1, 2 and 4: per level from the fastest, the complete-component knapsack or the search."""
    for level, adjacency in enumerate(p.adjacency):
        if p.largest[level] < k:
            continue
        adj = [a & fmask for a in adjacency]
        comps = _live_components(adj, fmask, k)
        if not comps:
            continue
        found = _complete_levels(p, level, adj, comps, whole, k)
        if found is None:
            found = _search(p, level, adj, comps, fmask, whole, k)
        if found:
            return found
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
    topo: GpuTopology,
    free: Iterable[int],
    k: int,
    bandwidth: Mapping[str, float] | None = None,
    *,
    prefer: Iterable[Collection[int]] = (),
) -> tuple[int, ...]:
    """Reference implementation: every k-subset of ``free``, the minimum of :func:`order_key` with rule (3a)
    (the position in ``prefer``, sets not preferred last) before (4). O(C(n,k)k²)."""
    free_sorted = _check(topo, free, k)
    rank: dict[tuple[int, ...], int] = {}
    for i, cand in enumerate(prefer):
        rank.setdefault(tuple(sorted(set(cand))), i)
    last = len(rank) and max(rank.values()) + 1  # not preferred: after every preferred set
    if not topo.matrix:
        return min(combinations(free_sorted, k), key=lambda s: (rank.get(s, last), s))

    def key(s: tuple[int, ...]) -> tuple[int, int, int, int, tuple[int, ...]]:
        o = order_key(topo, s, free_sorted, bandwidth)
        return (o[0], o[1], o[2], rank.get(s, last), o[3])

    return min(combinations(free_sorted, k), key=key)
