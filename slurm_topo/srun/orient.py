"""Which GPU of a TP group is which TP rank, and in which order a pipeline passes its stages on one node:
chosen by link **bandwidth** (NV2 before NV1 before PCIe before SYS: ``gpu.links.link_bandwidth``), not by
level, so that the DP and PP partners of a TP rank meet over the fastest links the node has, and a pipeline
that leaves one node on some GPUs enters the next node on the same GPUs (the same rail on a rail-optimised
fabric) where that costs the node nothing.

Pure; ``srun.plan`` calls :func:`orient` after the pipelines are placed and the replicas aligned, so the one
layout feeds ``gpulayer-srun`` and, through ``cost.comm.place_ranks``, the cost model.

Per node, in allocation order, the variables are the TP-rank order of each of its TP groups (every
permutation for up to :data:`MAX_FULL_TP` GPUs; else the bandwidth ring of ``gpu.rings.gpu_order``, its
rotations and reversal) and which TP group takes which (stage, replica) cell of the node (every assignment
for up to :data:`MAX_CELL_PERMUTATIONS` cells, else each pipeline's stages on the node among themselves), so
a pipeline entering from an earlier node may run its stages on this node in reverse. The node's score, larger
better, compared as a tuple:

1. the slowest link any PP hop or DP ring inside the node takes (one ring per stage and TP rank through the
   replicas on the node, in ``gpu_order``);
2. the TP ranks whose DP or PP partner on an earlier node sits on the same local GPU (rails);
3. the sum of the bandwidths of those PP hops and ring hops.

Every combination is tried when there are at most :data:`MAX_COMBOS` (and the node's score budget,
:data:`SCORE_BUDGET`, allows them); else coordinate ascent (each variable over its values, the others fixed,
at most :data:`MAX_ROUNDS` rounds, until the budget is spent). The layout as placed is the first
candidate of each variable and is kept unless another scores strictly more. Nodes whose situation is the
same (the links between their GPUs, their groups, the partners' GPUs on earlier nodes) share one search."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from ..gpu.gpu_topology import GpuTopology
from ..gpu.links import bandwidth_rows
from ..gpu.rings import gpu_order

Slot = tuple[str, tuple[int, ...]]
Key = tuple[int, int]  # (stage, pipeline)

MAX_FULL_TP = 4
"""TP groups of up to this many GPUs try every TP-rank order (4! = 24); larger ones their ring's 2·tp."""
MAX_COMBOS = 4096
"""At most this many combinations of a node are tried exhaustively; past it, coordinate ascent."""
MAX_ROUNDS = 8
"""Rounds of coordinate ascent."""
SCORE_BUDGET = 16_384
"""A node's search scores at most ``SCORE_BUDGET // cells`` layouts (at least :data:`MIN_SCORES`), a score
reading each of the node's (stage, replica) cells once: the search of one node is O(SCORE_BUDGET) cell reads
whatever its GPU count (36 nodes of 72 GPUs, TP 8: 9 cells, every combination up to 1 820 scores; two nodes
of 1 024 GPUs: 128 cells, 128 scores), and a plan O(nodes). Past it the best layout found so far is kept
(the layout as placed at worst); ``tests/test_srun_orient.py`` counts the scores."""
MIN_SCORES = 128
"""The fewest layouts a node's search may score, however many cells it has."""
MAX_CELL_PERMUTATIONS = 6
"""A node of up to this many (stage, replica) cells tries every assignment of its TP groups to them (6! =
720); more, each pipeline's stages on it among themselves (:data:`MAX_STAGE_PERMUTATIONS`)."""
MAX_STAGE_PERMUTATIONS = 5
"""A pipeline with up to this many stages on a node tries every order of them; more, its order as placed,
reversed, and the chain ``gpu_order`` gives through its stages' first GPUs (and that reversed)."""


def orientations(topo: GpuTopology, gpus: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The TP-rank orders a group tries, the order as given first."""
    if len(gpus) <= MAX_FULL_TP:
        return [gpus, *(p for p in itertools.permutations(gpus) if p != gpus)]
    ring = gpu_order(topo, gpus, closed=True)
    out = [gpus]
    for r in (ring, ring[::-1]):
        for k in range(len(r)):
            cand = r[k:] + r[:k]
            if cand not in out:
                out.append(cand)
    return out


def _bw(topo: GpuTopology, a: int, b: int) -> float:
    return bandwidth_rows(topo)[a][b] if a != b else float("inf")


class _Scorer:
    """The score of one node's assignment (module docstring)."""

    def __init__(
        self,
        node: str,
        topo: GpuTopology,
        at: Mapping[Key, int],
        gpus: Mapping[int, tuple[int, ...]],
        node_of: Mapping[int, str],
        done: set[str],
        pp: int,
        dp: int,
    ) -> None:
        self.node, self.topo, self.pp, self.dp = node, topo, pp, dp
        self.at, self.gpus, self.node_of, self.done = at, gpus, node_of, done
        self.keys = sorted(
            k for k, i in at.items() if node_of[i] == node
        )  # its cells: fixed, not their slots
        self.replicas: dict[int, list[int]] = {}  # per stage, its replicas on this node (fixed cells)
        for s, d in self.keys:
            self.replicas.setdefault(s, []).append(d)
        # per stage, the replicas on earlier nodes in replica order (fixed while this node is searched)
        self.earlier: dict[int, list[int]] = {}
        for (s, d), i in sorted(at.items()):
            if node_of[i] in done and len(self.earlier.setdefault(s, [])) < 2:
                self.earlier[s].append(d)

    def score(self) -> tuple[float, int, float]:
        low, same, total = float("inf"), 0, 0.0
        for s, j in self.keys:
            mine = self.gpus[self.at[(s, j)]]
            for t in (s - 1, s + 1):
                if not 0 <= t < self.pp:
                    continue
                other = self.at[(t, j)]
                where = self.node_of[other]
                if where == self.node and t == s + 1:
                    for a, b in zip(mine, self.gpus[other], strict=True):
                        bw = _bw(self.topo, a, b)
                        low, total = min(low, bw), total + bw
                elif where in self.done:
                    same += sum(a == b for a, b in zip(mine, self.gpus[other], strict=True))
            same += self._dp_rails(s, j, mine)
        for s in sorted({s for s, _ in self.keys}):
            low, total = self._rings(s, low, total)
        return low, same, total

    def _dp_rails(self, s: int, j: int, mine: tuple[int, ...]) -> int:
        """TP ranks on the same GPUs as the first replica of stage ``s`` on an earlier node."""
        for d in self.earlier.get(s, ()):
            if d != j:
                return sum(a == b for a, b in zip(mine, self.gpus[self.at[(s, d)]], strict=True))
        return 0

    def _rings(self, s: int, low: float, total: float) -> tuple[float, float]:
        here = [self.gpus[self.at[(s, d)]] for d in self.replicas[s]]
        if len(here) < 2:
            return low, total
        closed = len(here) == self.dp
        for k in range(len(here[0])):
            ring = gpu_order(self.topo, [g[k] for g in here], closed)
            hops = list(zip(ring, ring[1:], strict=False))
            if closed and len(ring) > 2:
                hops.append((ring[-1], ring[0]))
            for a, b in hops:
                bw = _bw(self.topo, a, b)
                low, total = min(low, bw), total + bw
        return low, total


def _stage_orders(
    at: Mapping[Key, int],
    gpus: Mapping[int, tuple[int, ...]],
    topo: GpuTopology,
    j: int,
    stages: Sequence[int],
) -> list[tuple[int, ...]]:
    """The slot sequences pipeline ``j``'s ``stages`` on one node try, as placed first."""
    placed = tuple(at[(s, j)] for s in stages)
    if len(placed) <= MAX_STAGE_PERMUTATIONS:
        return [placed, *(p for p in itertools.permutations(placed) if p != placed)]
    by_first = {gpus[i][0]: i for i in placed}
    chain = tuple(by_first[g] for g in gpu_order(topo, list(by_first), closed=False))
    return list(dict.fromkeys((placed, placed[::-1], chain, chain[::-1])))


Choice = tuple[tuple[Key, ...], int, list[tuple[int, ...]]]
"""A variable: ((), slot, its TP-rank orders) or (cells of the node, -1, the slots for them in turn)."""


def _cell_choices(
    at: Mapping[Key, int],
    gpus: Mapping[int, tuple[int, ...]],
    node_of: Mapping[int, str],
    topo: GpuTopology,
    node: str,
    pp: int,
    dp: int,
) -> list[Choice]:
    """Which TP group takes which (stage, replica) cell of the node: every assignment when the node has at
    most :data:`MAX_CELL_PERMUTATIONS` cells; else each pipeline's stages on the node
    (:func:`_stage_orders`)."""
    cells = tuple(sorted(k for k, i in at.items() if node_of[i] == node))
    if len(cells) < 2:
        return []
    placed = tuple(at[k] for k in cells)
    if len(cells) <= MAX_CELL_PERMUTATIONS:
        return [(cells, -1, [placed, *(q for q in itertools.permutations(placed) if q != placed)])]
    out: list[Choice] = []
    for j in range(dp):
        stages = tuple(s for s in range(pp) if node_of[at[(s, j)]] == node)
        if len(stages) > 1:
            out.append((tuple((s, j) for s in stages), -1, _stage_orders(at, gpus, topo, j, stages)))
    return out


def _search(scorer: _Scorer, choices: Sequence[Choice]) -> None:
    """Set each variable in the scorer's tables to its best value: exhaustive up to :data:`MAX_COMBOS`, else
    coordinate ascent."""
    at, gpus = scorer.at, scorer.gpus
    assert isinstance(at, dict) and isinstance(gpus, dict)

    def put(cells: tuple[Key, ...], slot: int, value: tuple[int, ...]) -> None:
        if not cells:
            gpus[slot] = value
        for k, i in zip(cells, value, strict=False):
            at[k] = i

    def now(cells: tuple[Key, ...], slot: int) -> tuple[int, ...]:
        return tuple(at[k] for k in cells) if cells else gpus[slot]

    combos = 1
    for _, _, values in choices:
        combos *= len(values)
    left = max(MIN_SCORES, SCORE_BUDGET // max(1, len(scorer.keys)))
    if combos <= min(MAX_COMBOS, left - 1):
        best, best_pick = scorer.score(), tuple(0 for _ in choices)
        for pick in itertools.product(*(range(len(v)) for _, _, v in choices)):
            for (cells, slot, values), p in zip(choices, pick, strict=True):
                put(cells, slot, values[p])
            got = scorer.score()
            if got > best:
                best, best_pick = got, pick
        for (cells, slot, values), p in zip(choices, best_pick, strict=True):
            put(cells, slot, values[p])
        return
    best = scorer.score()
    left -= 1
    for _ in range(MAX_ROUNDS):
        improved = False
        for cells, slot, values in choices:
            keep = now(cells, slot)
            for value in values[: max(0, left)]:
                put(cells, slot, value)
                got = scorer.score()
                left -= 1
                if got > best:
                    best, keep, improved = got, value, True
            put(cells, slot, keep)
        if not improved or left <= 0:
            break


def orient(
    stage_slot: Mapping[Key, int],
    slots: Sequence[Slot],
    topologies: Mapping[str, GpuTopology],
    pp: int,
    dp: int,
    nodes: Sequence[str],
) -> tuple[dict[Key, int], list[Slot]]:
    """(stage, pipeline) -> slot and the slots, each slot's GPUs in TP-rank order (module docstring). Nodes
    without link data keep their layout; so do slots of several GPUs per task (their order is the task's)."""
    at = dict(stage_slot)
    gpus = {i: g for i, (_, g) in enumerate(slots)}
    node_of = {i: n for i, (n, _) in enumerate(slots)}
    used = set(at.values())
    done: set[str] = set()
    memo: dict[tuple[object, ...], tuple[list[tuple[int, ...]], list[int]]] = {}
    for node in nodes:
        topo = topologies.get(node)
        mine = [i for i in sorted(used) if node_of[i] == node]
        if topo is None or not topo.has_links or not mine:
            done.add(node)
            continue
        choices = _cell_choices(at, gpus, node_of, topo, node, pp, dp)
        choices += [((), i, orientations(topo, gpus[i])) for i in mine if len(gpus[i]) > 1]
        if choices:
            _solve(node, topo, at, gpus, node_of, done, pp, dp, choices, memo)
        done.add(node)
    return at, [(node_of[i], gpus[i]) for i in range(len(slots))]


def _solve(
    node: str,
    topo: GpuTopology,
    at: dict[Key, int],
    gpus: dict[int, tuple[int, ...]],
    node_of: Mapping[int, str],
    done: set[str],
    pp: int,
    dp: int,
    choices: Sequence[Choice],
    memo: dict[tuple[object, ...], tuple[list[tuple[int, ...]], list[int]]],
) -> None:
    """One node's search, or the answer of an earlier node in the same situation (the same links, the same
    groups at the same stages, the same partners' GPUs on earlier nodes), carried over position by position
    (the node's keys in order)."""
    keys = sorted(k for k, i in at.items() if node_of[i] == node)
    pipes = sorted({j for _, j in keys})
    links = topo.matrix  # (nodes of one model have equal matrices)
    partners: list[tuple[int, str, tuple[int, ...]]] = []
    for n, (s, j) in enumerate(keys):
        for tag, t in (("prev", (s - 1, j)), ("next", (s + 1, j))):
            if t in at and node_of[at[t]] in done:
                partners.append((n, tag, gpus[at[t]]))
        first = next((d for d in range(dp) if d != j and node_of[at[(s, d)]] in done), None)
        if first is not None:
            partners.append((n, "dp", gpus[at[(s, first)]]))
    shape = tuple((s, pipes.index(j), gpus[at[(s, j)]]) for s, j in keys)
    sig = (tuple(topo.gpus), links, shape, tuple(partners))
    hit = memo.get(sig)
    if hit is not None:
        orders, moved = hit
        slot_at = [at[k] for k in keys]
        for n, k in enumerate(keys):
            at[k] = slot_at[moved[n]]
            gpus[at[k]] = orders[n]
        return
    before = [at[k] for k in keys]
    _search(_Scorer(node, topo, at, gpus, node_of, done, pp, dp), choices)
    memo[sig] = ([gpus[at[k]] for k in keys], [before.index(at[k]) for k in keys])
