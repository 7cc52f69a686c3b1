"""Rings inside one node as NCCL plans them: several rings at once over the link graph, not one ring's
slowest hop.

NCCL (``src/graph/search.cc`` ``ncclTopoCompute``, NCCL 2.30.7) picks a per-ring speed from a fixed list
(``speedArrayIntra``; ``sm90SpeedArrayIntra`` from compute capability 9.0, ``sm100SpeedArrayIntra`` from
10.0), highest first, and searches as many rings through every GPU as the links can carry at that speed:
each ring takes the speed from every directed link it crosses (``followPath``), up to ``maxChannels`` =
MAXCHANNELS/2 = 32 rings (``init.cc``). It keeps the plan with the most ``nChannels × speed`` and lowers the
speed while the next one is above 0.49 × the best one found, stopping early when the plan reaches the GPU's
whole bandwidth (``totalBw``: its NVLinks, or its PCIe link). The intra-node bandwidth of a collective is
that sum, so a DGX-1 (V100 hybrid cube mesh, NV1 = 20 and NV2 = 40 GB/s) runs 6 rings × 20 = 120 GB/s over
its 8 GPUs, not one ring's 20 or 40.

The link graph (directed, GB/s one way): an ``NV<n>`` pair carries ``min(n, links) × per_link`` (NCCL's
``ncclTopoNVLinkBw`` per link); every GPU's NVLinks together carry at most ``links × per_link`` (an NVSwitch:
``nvidia-smi`` shows every pair ``NV12`` but a GPU has 12 links, not 12 per peer); a pair without NVLink
meets through PCIe (``pcie``: each GPU's x16 host link, shared by all its PCIe hops, each way); a ``SYS`` pair
also crosses the link between the CPU sockets (``sys``, shared by every hop from one socket to the other,
each way). Sockets are the groups of GPUs that reach each other without ``SYS``.

Per speed: rings one after the other, each with its reverse (the other direction of the same links), the
roomiest hop first (NV2 before NV1); when that falls short of what the links could hold, a depth-first search
over sets of rings that backtracks into an earlier ring (NCCL's own search does), bounded by
:data:`MAX_STEPS` per speed. A ring count may so fall below NCCL's on an irregular mesh; a plan never claims
more than the links carry. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .gpu_topology import GpuTopology
from .links import nvlink_count

SPEEDS_INTRA: tuple[float, ...] = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEEDS_INTRA_SM90: tuple[float, ...] = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SPEEDS_INTRA_SM100: tuple[float, ...] = (
    90.0,
    80.0,
    70.0,
    60.0,
    50.0,
    45.0,
    40.0,
    30.0,
    24.0,
    20.0,
    19.0,
    18.0,
)
MAX_CHANNELS = 32
"""``ringGraph->maxChannels = MAXCHANNELS / 2`` (NCCL ``init.cc``; MAXCHANNELS 64)."""
MAX_STEPS = 4_000
"""Depth-first steps per speed tried: past it the plan keeps the most rings it found."""
_LOWER_WHILE = 0.49
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class LinkSpeeds:
    """What a GPU part's links carry (GB/s, one way): ``per_link`` per NVLink, ``links`` NVLinks per GPU,
    ``pcie`` its host link, ``sys`` the link between the sockets; ``sm`` picks NCCL's speed list."""

    per_link: float
    links: int
    pcie: float
    sys: float
    sm: int = 0


@dataclass(frozen=True, slots=True)
class RingPlan:
    """NCCL's plan for some GPUs of one node: ``rings`` (each GPU order; a path when the plan is not
    ``closed``), each at ``speed`` GB/s; ``bandwidth`` = rings × speed, what each GPU sends at once."""

    rings: tuple[tuple[int, ...], ...]
    speed: float
    closed: bool

    @property
    def channels(self) -> int:
        return len(self.rings)

    @property
    def bandwidth(self) -> float:
        return self.channels * self.speed

    def nccl_channels(self, sm: int) -> tuple[int, float]:
        """Channels and speed after NCCL's ``ncclTopoDupChannels`` (twice the rings at half the speed when
        a ring runs at 25 GB/s or more; not on sm90+ below 50 GB/s with more than 4 rings): the same sum."""
        if not self.rings or self.speed < 25.0 or (sm > 80 and self.speed < 50.0 and self.channels > 4):
            return self.channels, self.speed
        dup = min(self.channels * 2, MAX_CHANNELS)
        factor = -(-dup // self.channels)
        return dup, self.speed / factor

    def describe(self) -> str:
        kind = "rings" if self.closed else "chains"
        return f"{self.channels} {kind} × {self.speed:g} GB/s = {self.bandwidth:g} GB/s"


def speeds_for(sm: int) -> tuple[float, ...]:
    """NCCL's intra-node speed list for a compute capability (× 10)."""
    if sm >= 100:
        return SPEEDS_INTRA_SM100
    if sm >= 90:
        return SPEEDS_INTRA_SM90
    return SPEEDS_INTRA


Edge = tuple[int, int]


@dataclass(slots=True)
class _Graph:
    """Directed capacities: ``uses[(a, b)]`` the resources a hop a→b takes, ``left`` what each still holds."""

    order: tuple[int, ...]
    uses: dict[Edge, tuple[object, ...]]
    left: dict[object, float]

    def fits(self, a: int, b: int, speed: float) -> bool:
        return all(self.left[k] >= speed - _EPS for k in self.uses[(a, b)])

    def take(self, a: int, b: int, speed: float) -> None:
        for k in self.uses[(a, b)]:
            self.left[k] -= speed

    def give(self, a: int, b: int, speed: float) -> None:
        for k in self.uses[(a, b)]:
            self.left[k] += speed

    def room(self, a: int, b: int) -> float:
        return min(self.left[k] for k in self.uses[(a, b)])


def _sockets(topo: GpuTopology, order: Sequence[int]) -> Mapping[int, int]:
    """Each GPU's socket: the lowest GPU it reaches without a SYS hop."""
    parent = {g: g for g in order}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in order:
        for b in order:
            if a < b and topo.link(a, b) not in ("SYS", "SOC"):
                ra, rb = find(a), find(b)
                parent[max(ra, rb)] = min(ra, rb)
    return {g: find(g) for g in order}


def _graph(topo: GpuTopology, order: tuple[int, ...], speeds: LinkSpeeds) -> _Graph:
    sockets = _sockets(topo, order)
    bonds = {(a, b): min(nvlink_count(topo.link(a, b)), speeds.links) for a in order for b in order if a != b}
    left: dict[object, float] = {}
    uses: dict[Edge, tuple[object, ...]] = {}
    for g in order:
        nvl = min(sum(bonds[(g, h)] for h in order if h != g), speeds.links) * speeds.per_link
        left[("nvl-out", g)] = left[("nvl-in", g)] = nvl
        left[("pci-out", g)] = left[("pci-in", g)] = speeds.pcie
    for (a, b), n in bonds.items():
        if n:
            left[(a, b)] = n * speeds.per_link
            uses[(a, b)] = ((a, b), ("nvl-out", a), ("nvl-in", b))
            continue
        keys: tuple[object, ...] = (("pci-out", a), ("pci-in", b))
        if sockets[a] != sockets[b]:
            left.setdefault(("sys", sockets[a], sockets[b]), speeds.sys)
            keys += (("sys", sockets[a], sockets[b]),)
        uses[(a, b)] = keys
    return _Graph(order, uses, left)


class _Budget:
    def __init__(self, steps: int) -> None:
        self.steps = steps


def _cycles(
    graph: _Graph, speed: float, closed: bool, budget: _Budget, floor: tuple[int, ...]
) -> Iterator[tuple[int, ...]]:
    """Every ring (a path when not ``closed``) through all GPUs whose hops still carry ``speed``, the roomiest
    hop first (NV2 before NV1); each is taken from the graph while the caller holds it and given back when
    the caller asks for the next one (NCCL's ``ncclTopoSearchRecGpu`` order). Only rings not below ``floor``
    (as tuples): a set of rings is searched once, in one order, not in every order."""
    order, n = graph.order, len(graph.order)

    def extend(path: list[int], used: set[int]) -> Iterator[tuple[int, ...]]:
        budget.steps -= 1
        if budget.steps < 0:
            return
        last = path[-1]
        if len(path) == n:
            if not closed:
                yield tuple(path)
            elif graph.fits(last, path[0], speed):
                graph.take(last, path[0], speed)
                yield tuple(path)
                graph.give(last, path[0], speed)
            return
        nexts = sorted(
            (g for g in order if g not in used and graph.fits(last, g, speed)),
            key=lambda g: (-graph.room(last, g), g),
        )
        depth = len(path)
        for g in nexts:
            if depth < len(floor) and tuple(path) == floor[:depth] and g < floor[depth]:
                continue  # below the floor: this ring's set was searched in another order
            graph.take(last, g, speed)
            path.append(g)
            used.add(g)
            yield from extend(path, used)
            path.pop()
            used.discard(g)
            graph.give(last, g, speed)

    for start in order[:1] if closed else order:
        if floor and start < floor[0]:
            continue
        yield from extend([start], {start})


def _greedy(graph: _Graph, speed: float, closed: bool, want: int, budget: _Budget) -> list[tuple[int, ...]]:
    """Rings one after the other, each kept, and each ring's reverse at once when it fits (it runs on the
    other direction of the same links): how a mesh of NV2 and NV1 pairs fills (DGX-1: the NV2 ring both
    ways twice, then the NV1 ring both ways)."""
    rings: list[tuple[int, ...]] = []
    while len(rings) < want:
        ring = next(_cycles(graph, speed, closed, budget, ()), None)
        if ring is None:
            break
        rings.append(ring)  # the abandoned search leaves its hops taken
        back = ring[::-1]
        hops = list(zip(back, back[1:], strict=False)) + ([(back[-1], back[0])] if closed else [])
        if closed and len(rings) < want and len(ring) > 2 and _fits_all(graph, hops, speed):
            for a, b in hops:
                graph.take(a, b, speed)
            rings.append(back)
    return rings


def _fits_all(graph: _Graph, hops: Sequence[Edge], speed: float) -> bool:
    for k, (a, b) in enumerate(hops):
        if not graph.fits(a, b, speed):
            for a2, b2 in hops[:k]:
                graph.give(a2, b2, speed)
            return False
        graph.take(a, b, speed)
    for a, b in hops:
        graph.give(a, b, speed)
    return True


def _rings_at(
    topo_graph: _Graph, speed: float, closed: bool, want: int, steps: int
) -> tuple[tuple[int, ...], ...]:
    """The most rings (at most ``want``) at ``speed``: greedily (:func:`_greedy`), then, if that falls
    short, a depth-first search over rings, one after the other, that backtracks into an earlier ring when
    a later one finds no room (NCCL searches its channels the same way), within ``steps``."""
    budget = _Budget(steps)
    greedy = _greedy(
        _Graph(topo_graph.order, topo_graph.uses, dict(topo_graph.left)), speed, closed, want, budget
    )
    if len(greedy) >= want or budget.steps < 0:
        return tuple(greedy)
    graph = _Graph(topo_graph.order, topo_graph.uses, dict(topo_graph.left))
    best: list[tuple[int, ...]] = greedy
    current: list[tuple[int, ...]] = []

    def deeper() -> bool:
        nonlocal best
        if len(current) > len(best):
            best = list(current)
        if len(current) >= want:
            return True
        for ring in _cycles(graph, speed, closed, budget, current[-1] if current else ()):
            current.append(ring)
            if deeper():
                return True
            current.pop()
            if budget.steps < 0:
                return False
        return False

    deeper()
    return tuple(best)


def _more(graph: _Graph, speed: float) -> int:
    """At most how many more rings ``graph`` carries at ``speed``: the fewest any GPU can still send (or
    receive), each of its hops counted by how many rings it holds."""
    fewest = MAX_CHANNELS
    for g in graph.order:
        out = sum(int(graph.room(g, h) / speed + _EPS) for h in graph.order if h != g)
        into = sum(int(graph.room(h, g) / speed + _EPS) for h in graph.order if h != g)
        fewest = min(fewest, out, into)
    return fewest


_PLAN_CACHE: dict[tuple[object, ...], RingPlan | None] = {}


def plan_rings(
    topo: GpuTopology | None, gpus: Sequence[int], speeds: LinkSpeeds, *, closed: bool = True
) -> RingPlan | None:
    """NCCL's plan over ``gpus`` of one node (rings when ``closed``; chains that enter and leave the node
    otherwise), or None without link data for them or with fewer than two GPUs. Cached by the link classes
    between the GPUs in order (not their numbers: any 8 GPUs of an NVSwitch board share one entry) and
    ``speeds``."""
    order = tuple(sorted(set(gpus)))
    if topo is None or not topo.has_links or len(order) < 2 or any(g not in topo.gpus for g in order):
        return None
    classes = tuple(topo.link(a, b) for a in order for b in order if a != b)
    key = (len(order), classes, speeds, closed)
    if key not in _PLAN_CACHE:
        if len(_PLAN_CACHE) > 65536:
            _PLAN_CACHE.clear()
        positions = tuple(range(len(order)))
        shape = GpuTopology(
            gpus=positions,
            matrix=tuple(
                tuple("X" if i == j else topo.link(a, b) for j, b in enumerate(order))
                for i, a in enumerate(order)
            ),
        )
        _PLAN_CACHE[key] = _search(_graph(shape, positions, speeds), speeds, closed)
    plan = _PLAN_CACHE[key]
    if plan is None:
        return None
    return RingPlan(tuple(tuple(order[k] for k in ring) for ring in plan.rings), plan.speed, closed)


def _search(graph: _Graph, speeds: LinkSpeeds, closed: bool) -> RingPlan | None:
    """ncclTopoCompute's speed loop over :func:`_rings_at`."""
    order = graph.order
    max_bw = max(graph.room(a, b) for (a, b) in graph.uses)
    total = max(
        max(graph.left[("nvl-out", g)], graph.left[("pci-out", g)]) for g in order
    )  # getTotalBw: max(NVLink sum, PCIe)
    ladder = speeds_for(speeds.sm)
    i = 0
    while i < len(ladder) - 1 and (ladder[i] > max_bw + _EPS or ladder[i] > total + _EPS):
        i += 1
    best: RingPlan | None = None
    while i < len(ladder):
        want = min(MAX_CHANNELS, int(total / ladder[i] + _EPS), _more(graph, ladder[i]))
        if best is not None and want * ladder[i] <= best.bandwidth + _EPS:
            rings: tuple[tuple[int, ...], ...] = ()  # cannot beat the plan found: NCCL's answer stays
        else:
            rings = _rings_at(graph, ladder[i], closed, want, MAX_STEPS)
        if rings and (best is None or len(rings) * ladder[i] > best.bandwidth + _EPS):
            best = RingPlan(rings, ladder[i], closed)
        if best is not None and best.bandwidth >= total - _EPS:
            break
        if i + 1 >= len(ladder):
            break
        if best is not None and ladder[i + 1] / best.speed <= _LOWER_WHILE:
            break
        i += 1
    if best is None:  # slower than NCCL's lowest speed: one ring in index order at its slowest hop
        ring = order + order[:1] if closed else order
        return RingPlan((order,), min(graph.room(a, b) for a, b in zip(ring, ring[1:], strict=False)), closed)
    return best
