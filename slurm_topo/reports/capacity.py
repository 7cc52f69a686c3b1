"""Topology-feasible capacity: how many jobs of a shape could start now inside one group (pure).

Free GPUs alone overstate what a multi-node job can get: a job of ``N`` nodes × ``G`` GPUs that must stay in
one network group (or zone, region) can only use the free GPUs of groups that hold ``N`` nodes with ``G``
free each. For each shape and locality level this module counts

* ``jobs``: how many such jobs could start now, each inside one group of the level (a node with ``k·G``
  free GPUs can host ``k`` of them, on different jobs; per group the largest ``j`` with
  ``Σ min(slots_i, j) >= j·N``);
* ``naive``: what the free GPUs alone suggest (``free GPUs // (N·G)``);
* ``stranded``: free GPUs no such job can use (``free GPUs − jobs·N·G``) — the fragmentation.

A shape may carry an expert-parallel degree, ``NxG:ep=E`` (``ep=`` as ``--plan`` spells it, ``--ep`` in
``gpulayer-srun``): the job's GPUs in rank order form EP groups of ``E`` consecutive GPUs, ``E`` dividing
``N·G``. Where ``E`` divides ``G`` the groups stay on one node, and where some node's NVLink islands hold a
group (or a node has no link data: unknown, as the launcher takes it), a node counts only for the job parts
whose groups its islands hold (:func:`island_parts`; capacity does not know which GPUs are free, so a free
node is taken as the launcher's pick would find it). Otherwise the groups tie the job's nodes into blocks of
``b = E / gcd(G, E)`` consecutive nodes (:func:`ep_block_nodes`), and where some NVLink domain of the fleet
holds ``b`` nodes of ``G`` GPUs or more, a job counts only with every block inside one domain (and inside the
level's group: :func:`max_ep_jobs`). Where no island or domain holds one, the groups cannot be kept inside
one: the shape's rows say so in the launcher's words and count as without EP.

Node states come from ``scontrol show node -o`` records (:func:`node_states`): ``IDLE`` is free, ``MIXED``
frees what its GPU use leaves (``GresUsed=gpu:…(IDX:…)`` or ``AllocTRES=…gres/gpu=N``; unknown use counts as
none free), ``ALLOCATED``/``COMPLETING`` is allocated, and any of ``DRAIN``, ``DOWN``, ``FAIL``, ``MAINT``,
``NOT_RESPONDING`` (``*``), ``FUTURE``, ``RESERVED``, ``PLANNED``, ``INVALID`` makes a node unavailable.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..core.errors import InputError
from ..core.model import Inventory, Node
from ..cost.search import level_key, switch_depth
from ..gpu.links import islands
from ..plumbing.collector import collector_paused
from ..plumbing.text import counted

CAPACITY_LEVELS = ("network_group", "zone", "region", "any")
SWITCH_LEVEL = "switch"
"""Capacity's levels below the network group: ``switch.<k>``, one switch of the ``k``-th layer below it
(the entry's ``switches:``: a GCE sub-block is ``switch.1``, its host ``switch.2``; AWS's second and third
network nodes), listed deepest first before :data:`CAPACITY_LEVELS` when the fleet has such layers."""

FREE, ALLOCATED, DRAINED, UNKNOWN = "free", "allocated", "drained", "unknown"
STATE_KINDS = (FREE, ALLOCATED, DRAINED, UNKNOWN)

_UNAVAILABLE = {
    "DRAIN",
    "DRAINED",
    "DRAINING",
    "DOWN",
    "FAIL",
    "FAILING",
    "MAINT",
    "NOT_RESPONDING",
    "FUTURE",
    "RESERVED",
    "PLANNED",
    "INVALID",
    "INVALID_REG",
    "REBOOT_ISSUED",
    "REBOOT_REQUESTED",
    "POWERING_DOWN",
    "POWER_DOWN",
    "UNKNOWN",
}
_ALLOCATED = {"ALLOCATED", "ALLOC", "COMPLETING"}
_SUFFIXES = "*~#!%$@^-"
STATE_KEYS = ("NodeName", "State", "Gres", "GresUsed", "AllocTRES")
"""The fields of ``scontrol -d show node -o`` that :func:`node_states` reads
(``parse_scontrol_nodes(text, keys=STATE_KEYS)`` parses only these)."""

_GPU_GRES_RE = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")
_GPU_USED_RE = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)(?:\(IDX:([^)]*)\))?")
_TRES_GPU_RE = re.compile(r"(?:^|,)gres/gpu=(\d+)")
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*(?::\s*(.*))?\Z")
_EP_RE = re.compile(r"^\s*ep\s*=\s*(\d{1,7})\s*\Z", re.IGNORECASE)

EP_IN_ISLAND, EP_IN_DOMAIN, EP_LEAVES = "island", "nvlink_domain", "none"
"""Where a shape's EP groups are kept (``ep_within``): inside one node's NVLink island (``E`` divides ``G``),
inside one NVLink domain, both counted so; or in none (no island or domain of the fleet holds one: counted
as without EP, with the launcher's warning)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    kind: str  # free | allocated | drained | unknown
    gpus: int
    free_gpus: int
    state: str = ""  # Slurm's State= as printed


@functools.lru_cache(maxsize=4096)
def _gpu_count(text: str | None, rx: re.Pattern[str]) -> int | None:
    # Cached: a fleet has few distinct Gres=/GresUsed=/AllocTRES= values (a 100 000-node list, a handful).
    if not text or text in ("(null)", "N/A"):
        return None
    found = [int(m.group(1)) for m in rx.finditer(text)]
    return sum(found) if found else None


@functools.lru_cache(maxsize=1024)
def classify(state: str) -> str:
    """Slurm's ``State=`` (``IDLE+DRAIN``, ``MIXED``, ``DOWN*``, ``IDLE~``) -> free | allocated | drained.

    Cached: a node list has a few distinct states for all its nodes."""
    raw = state.strip().upper()
    if not raw:
        return UNKNOWN
    words = raw.split("+")
    base = words[0].rstrip(_SUFFIXES)
    flags = {w.rstrip(_SUFFIXES) for w in words[1:]}
    if words[0].endswith("*"):  # not responding
        flags.add("NOT_RESPONDING")
    if base in _UNAVAILABLE or flags & _UNAVAILABLE:
        return DRAINED
    if base in _ALLOCATED or "COMPLETING" in flags:
        return ALLOCATED
    if base == "MIXED":
        return ALLOCATED  # partly: the caller looks at the GPUs
    if base == "IDLE":
        return FREE
    return UNKNOWN


def node_states(
    inventory: Inventory, records: Sequence[Mapping[str, str]]
) -> tuple[dict[str, NodeState], tuple[str, ...]]:
    """Per inventory node its state from ``scontrol show node -o`` records; also the record names no
    inventory places (left out of every group). A node with no record is ``unknown`` (nothing free)."""
    with collector_paused():  # 100 000 states beside the records and the inventory: no collector passes
        return _node_states(inventory, records)


def _node_states(
    inventory: Inventory, records: Sequence[Mapping[str, str]]
) -> tuple[dict[str, NodeState], tuple[str, ...]]:
    by_name = {r.get("NodeName", ""): r for r in records}
    out: dict[str, NodeState] = {}
    for node in inventory.nodes:
        name, total = node.name, node.gpus
        rec = by_name.get(name)
        if total is None:
            total = _gpu_count(rec.get("Gres"), _GPU_GRES_RE) if rec else None
        total = total or 0
        if rec is None:
            out[name] = NodeState(name, UNKNOWN, total, 0)
            continue
        state = rec.get("State", "")
        kind, mixed = _kind(state)
        free = 0
        if kind == FREE:
            free = total
        elif mixed:
            used = _gpu_count(rec.get("GresUsed"), _GPU_USED_RE)
            if used is None:
                used = _gpu_count(rec.get("AllocTRES"), _TRES_GPU_RE)
            free = max(0, total - used) if used is not None else 0
            if free:
                kind = FREE if used == 0 else ALLOCATED
        out[name] = NodeState(name, kind, total, free, state)
    extra = tuple(sorted(n for n in by_name.keys() - out.keys() if n))
    return out, extra


@functools.lru_cache(maxsize=1024)
def _kind(state: str) -> tuple[str, bool]:
    """``classify(state)`` and whether the node is MIXED and allocated (its GPU use says what is free)."""
    kind = classify(state)
    return kind, kind == ALLOCATED and state.upper().startswith("MIXED")


def idle_states(inventory: Inventory) -> dict[str, NodeState]:
    """Every node free with all its GPUs (the idle fleet)."""
    return {n.name: NodeState(n.name, FREE, n.gpus or 0, n.gpus or 0, "IDLE") for n in inventory.nodes}


class Shape(NamedTuple):
    """A job shape: ``nodes`` × ``gpus`` per node, with EP groups of ``ep`` consecutive GPUs (1: no EP)."""

    nodes: int
    gpus: int
    ep: int = 1


def parse_shape(text: str) -> Shape:
    """``8x4`` -> Shape(8 nodes, 4 GPUs per node); ``8x4:ep=16`` with EP groups of 16 GPUs (``ep=`` as
    ``--plan`` spells it), ``ep`` dividing the shape's GPUs."""
    m = _SHAPE_RE.match(text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1 or len(text) > 40:
        raise InputError(
            f"--shape {text[:40]!r}: expected NODESxGPUS with both at least 1, e.g. 8x4, "
            "optionally :ep=E (8x4:ep=16)"
        )
    nodes, gpus = int(m.group(1)), int(m.group(2))
    if m.group(3) is None:
        return Shape(nodes, gpus)
    ep = _EP_RE.match(m.group(3))
    if ep is None:
        raise InputError(
            f"--shape {text[:40]!r}: after NODESxGPUS only :ep=E, a whole number (8x4:ep=16); "
            f"not {m.group(3)[:20]!r}"
        )
    return Shape(nodes, gpus, check_ep(nodes, gpus, int(ep.group(1)), text))


def check_ep(nodes: int, gpus: int, ep: int, text: str | None = None) -> int:
    """``ep`` when it is at least 1 and divides the shape's ``nodes × gpus`` GPUs (the job's EP groups of
    ``ep`` consecutive GPUs; Megatron-LM: EP divides cp × dp, so the world); else :class:`InputError`."""
    what = text if text is not None else f"{nodes}x{gpus}:ep={ep}"
    if ep < 1 or (nodes * gpus) % ep:
        raise InputError(
            f"--shape {what[:40]!r}: ep={ep} must be at least 1 and divide the shape's "
            f"{nodes} × {gpus} = {nodes * gpus} GPUs (EP groups of ep consecutive GPUs)"
        )
    return ep


def island_parts(node: Node, gpus: int, ep: int) -> int | None:
    """How many job parts of ``gpus`` GPUs with EP groups of ``ep`` GPUs (``ep`` dividing ``gpus``) the
    node's NVLink islands hold at once, each group inside one island: ``Σ ⌊|island| / ep⌋ // (gpus / ep)``
    over its islands (:func:`slurm_topo.gpu.links.islands`); None without link data (unknown)."""
    topo = node.gpu_topology
    if topo is None or not topo.has_links:
        return None
    return sum(len(i) // ep for i in islands(topo)) // (gpus // ep)


def ep_block_nodes(gpus: int, ep: int) -> int:
    """The nodes one block of EP groups ties together when groups of ``ep`` consecutive GPUs run over nodes
    of ``gpus`` GPUs: ``ep / gcd(gpus, ep)`` (1: every group inside one node; a group over node boundaries
    joins them, and the blocks start where a node boundary is a group boundary)."""
    return ep // math.gcd(gpus, ep)


def max_ep_jobs(domains: Sequence[Sequence[int]], nodes: int, block: int) -> int:
    """The most jobs of ``nodes`` distinct nodes each, every job's nodes split into blocks of ``block`` nodes
    of one domain, when the ``i``-th node of domain ``d`` can host ``domains[d][i]`` of them.

    ``J`` jobs fit iff the domains' block capacities for ``J`` jobs sum to ``J · nodes / block``: a domain's
    (:func:`_domain_blocks`) is the largest total ``T`` of blocks it can give ``J`` jobs spread as evenly as
    they go (the even spread needs the fewest distinct nodes per job, Gale–Ryser), and the domains' uneven
    remainders rotate over the jobs so each gets its share. Binary search over ``J``; domains with the same
    slot counts computed once."""
    per_job = nodes // block
    alike = Counter(tuple(sorted((s for s in slots if s > 0), reverse=True)) for slots in domains)
    alike.pop((), None)
    usable = {k: c for k, c in alike.items() if len(k) >= block}
    if not usable:
        return 0
    lo, hi = 0, sum(c * sum(k) for k, c in usable.items()) // nodes
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(c * _domain_blocks(k, mid, block) for k, c in usable.items()) >= mid * per_job:
            lo = mid
        else:
            hi = mid - 1
    return lo


@functools.lru_cache(maxsize=4096)
def _domain_blocks(slots: tuple[int, ...], jobs: int, block: int) -> int:
    """The most blocks of ``block`` distinct nodes one domain (``slots``, largest first) gives ``jobs`` jobs,
    each job's blocks on distinct nodes: the largest ``T`` whose even spread (``q = T // jobs`` blocks each,
    ``r = T % jobs`` jobs one more) passes Gale–Ryser, ``block · (k·q + min(k, r)) <= Σ min(slot, k)`` for
    every ``k <= jobs`` (past the largest slot count only the total, ``block · T <= Σ slots``)."""
    if jobs < 1:
        return 0
    top = slots[0]
    reach = [sum(min(s, k) for s in slots) for k in range(min(jobs, top) + 1)]

    def fits(total: int) -> bool:
        q, r = divmod(total, jobs)
        return all(block * (k * q + min(k, r)) <= reach[k] for k in range(1, len(reach)))

    lo, hi = 0, sum(slots) // block
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_jobs(slots: Sequence[int], nodes: int) -> int:
    """The most jobs of ``nodes`` distinct nodes each when node ``i`` can host ``slots[i]`` of them: the
    largest ``j`` with ``Σ min(slots_i, j) >= j·nodes`` (binary search over a histogram of the slot counts:
    fleets have few distinct ones)."""
    items = list(Counter(slots).items())  # counted in C
    lo, hi = 0, sum(slots) // nodes
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(c * min(s, mid) for s, c in items) >= mid * nodes:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class LevelCapacity:
    level: str
    jobs: int
    groups: int  # groups that can start at least one
    stranded_gpus: int

    def as_dict(self) -> dict[str, object]:
        return {
            "level": self.level,
            "jobs": self.jobs,
            "groups": self.groups,
            "stranded_gpus": self.stranded_gpus,
        }


@dataclass(frozen=True, slots=True)
class ShapeCapacity:
    nodes: int
    gpus_per_node: int
    naive_jobs: int
    levels: tuple[LevelCapacity, ...]
    ep: int = 1
    ep_within: str | None = None  # EP_IN_ISLAND | EP_IN_DOMAIN | EP_LEAVES; None without EP

    @property
    def shape(self) -> str:
        """``8x4``, or ``8x4:ep=16`` with EP (the metrics' ``shape`` label)."""
        base = f"{self.nodes}x{self.gpus_per_node}"
        return f"{base}:ep={self.ep}" if self.ep > 1 else base

    @property
    def ep_warning(self) -> str | None:
        """The launcher's words when the shape's EP groups cannot be kept inside one NVLink island or
        domain (no domain of the fleet holds one), else None."""
        if self.ep_within != EP_LEAVES:
            return None
        block = ep_block_nodes(self.gpus_per_node, self.ep)
        why = (
            f"no node's NVLink islands hold {counted(self.gpus_per_node // self.ep, 'group')} of them"
            if block == 1
            else f"no NVLink domain holds {block} nodes of {self.gpus_per_node} GPUs"
        )
        return (
            f"warning: {self.shape}: expert-parallel groups of {self.ep} GPUs leave one NVLink island or "
            f"domain: their all-to-all crosses slower links ({why}; counted as without EP)"
        )

    @property
    def deepest(self) -> str | None:
        """The tightest level (first of ``levels``) where at least one job of the shape could start now,
        None where none could."""
        return next((lv.level for lv in self.levels if lv.jobs > 0), None)

    def as_dict(self) -> dict[str, object]:
        return {
            "shape": self.shape,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "naive_jobs": self.naive_jobs,
            "deepest_level": self.deepest,
            "ep": self.ep,
            "ep_block_nodes": ep_block_nodes(self.gpus_per_node, self.ep),
            "ep_within": self.ep_within,
            "ep_warning": self.ep_warning,
            "levels": [lv.as_dict() for lv in self.levels],
        }


@dataclass(frozen=True, slots=True)
class Capacity:
    counts: Mapping[str, int]  # nodes per state kind
    free_gpus: int
    total_gpus: int
    shapes: tuple[ShapeCapacity, ...]
    extra_nodes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": dict(self.counts),
            "free_gpus": self.free_gpus,
            "total_gpus": self.total_gpus,
            "not_in_inventory": len(self.extra_nodes),
            "shapes": [s.as_dict() for s in self.shapes],
        }


def switch_level(depth: int) -> str:
    """The capacity level of one switch of the ``depth``-th layer below the network group (1: the top)."""
    return f"{SWITCH_LEVEL}.{depth}"


def capacity_levels(inventory: Inventory) -> tuple[str, ...]:
    """The levels :func:`capacity` counts by default: one per switch layer below the network groups that
    some node has (deepest first), then :data:`CAPACITY_LEVELS`; a fleet without such layers gets
    :data:`CAPACITY_LEVELS` alone."""
    depth = max((len(n.switches) for n in inventory.nodes if n.location.network_group), default=0)
    return tuple(switch_level(k) for k in range(depth, 0, -1)) + CAPACITY_LEVELS


def capacity(
    inventory: Inventory,
    states: Mapping[str, NodeState],
    shapes: Iterable[tuple[int, int] | tuple[int, int, int]],
    levels: Sequence[str] | None = None,
    extra_nodes: Sequence[str] = (),
) -> Capacity:
    """Per shape and level: jobs that could start now inside one group, naive count, stranded GPUs
    (``levels`` None: :func:`capacity_levels`). A shape is (nodes, GPUs per node) or :class:`Shape` with
    ``ep`` (EP groups kept inside one NVLink domain where one holds them: the module's text)."""
    with collector_paused():  # half its CPU at 100 000 nodes was the collector's passes over the fleet
        chosen = capacity_levels(inventory) if levels is None else tuple(levels)
        return _capacity(inventory, states, shapes, chosen, extra_nodes)


def _capacity(
    inventory: Inventory,
    states: Mapping[str, NodeState],
    shapes: Iterable[tuple[int, int] | tuple[int, int, int]],
    levels: Sequence[str],
    extra_nodes: Sequence[str],
) -> Capacity:
    counts = dict.fromkeys(STATE_KINDS, 0)
    for s in states.values():
        counts[s.kind] += 1
    free_gpus = sum(s.free_gpus for s in states.values())
    total_gpus = sum(s.gpus for s in states.values())
    free_nodes: list[tuple[Node, int]] = [  # one look-up a node: states has one entry per node
        (n, free)
        for n in inventory.nodes
        if (state := states.get(n.name)) is not None and (free := state.free_gpus)
    ]
    grouped = _grouped(free_nodes, levels)
    by_domain: dict[str, dict[tuple[str, ...], dict[str, list[int]]]] | None = None
    out = []
    for raw in shapes:
        n, g, ep = Shape(*raw)
        ep = check_ep(n, g, ep)
        within = _ep_within(inventory, states, g, ep)
        block = ep_block_nodes(g, ep)
        if within == EP_IN_DOMAIN and by_domain is None:
            by_domain = _grouped_by_domain(free_nodes, levels)
        plain = grouped
        if within == EP_IN_ISLAND:  # each node's free GPUs as far as its islands hold the groups
            plain = _grouped(_island_free(free_nodes, g, ep), levels)
        rows = []
        for level in levels:
            if within == EP_IN_DOMAIN and by_domain is not None:
                per_group = [
                    max_ep_jobs([[f // g for f in frees] for frees in doms.values()], n, block)
                    for doms in by_domain[level].values()
                ]
            else:
                per_group = [_group_jobs(frees, n, g) for frees in plain[level].values()]
            jobs = sum(per_group)
            groups_used = sum(j > 0 for j in per_group)
            rows.append(LevelCapacity(level, jobs, groups_used, free_gpus - jobs * n * g))
        out.append(ShapeCapacity(n, g, free_gpus // (n * g), tuple(rows), ep, within))
    return Capacity(counts, free_gpus, total_gpus, tuple(out), tuple(extra_nodes))


def _group_jobs(frees: Sequence[int], n: int, g: int) -> int:
    """Jobs of ``n`` nodes × ``g`` GPUs one group (its nodes' free GPU counts) can start."""
    slots = [f // g for f in frees if f >= g]
    return max_jobs(slots, n) if len(slots) >= n else 0


def _ep_within(inventory: Inventory, states: Mapping[str, NodeState], gpus: int, ep: int) -> str | None:
    """Where EP groups of ``ep`` GPUs on nodes of ``gpus`` GPUs can be kept (:data:`EP_IN_ISLAND` …): a block
    of :func:`ep_block_nodes` nodes needs one NVLink domain with that many nodes of ``gpus`` GPUs or more
    (their hardware, whatever they run now)."""
    if ep < 2:
        return None
    block = ep_block_nodes(gpus, ep)
    sizes: Counter[str] = Counter()
    for node in inventory.nodes:
        state = states.get(node.name)
        total = state.gpus if state is not None else node.gpus or 0
        if total < gpus:
            continue
        if block == 1:
            parts = island_parts(node, gpus, ep)
            if parts is None or parts > 0:
                return EP_IN_ISLAND
        elif node.nvlink_domain is not None:
            sizes[node.nvlink_domain] += 1
    return EP_IN_DOMAIN if any(c >= block for c in sizes.values()) else EP_LEAVES


def _island_free(free_nodes: Sequence[tuple[Node, int]], gpus: int, ep: int) -> list[tuple[Node, int]]:
    """Each node's free GPUs cut to the job parts its NVLink islands hold (:func:`island_parts`; a node
    without link data keeps them all, one whose islands hold none is left out)."""
    out = []
    seen: dict[int, int | None] = {}  # per link matrix: the nodes of one model share one (alive meanwhile)
    for node, free in free_nodes:
        key = id(node.gpu_topology)
        parts = seen[key] if key in seen else seen.setdefault(key, island_parts(node, gpus, ep))
        kept = free if parts is None else min(free, parts * gpus)
        if kept:
            out.append((node, kept))
    return out


def _grouped_by_domain(
    free_nodes: Sequence[tuple[Node, int]], levels: Sequence[str]
) -> dict[str, dict[tuple[str, ...], dict[str, list[int]]]]:
    """Per level and group, the free GPU counts of the group's nodes per NVLink domain (nodes in none left
    out: they hold no block of EP groups): :func:`_grouped` of each domain's nodes."""
    by_domain: dict[str, list[tuple[Node, int]]] = {}
    for node, free in free_nodes:
        if node.nvlink_domain is not None:
            by_domain.setdefault(str(node.nvlink_domain), []).append((node, free))
    grouped: dict[str, dict[tuple[str, ...], dict[str, list[int]]]] = {level: {} for level in levels}
    for domain, members in by_domain.items():
        for level, groups in _grouped(members, levels).items():
            for key, frees in groups.items():
                grouped[level].setdefault(key, {})[domain] = frees
    return grouped


def _grouped(
    free_nodes: Sequence[tuple[Node, int]], levels: Sequence[str]
) -> dict[str, dict[tuple[str, ...], list[int]]]:
    """Per level, the free GPU counts of each group's nodes. A node's group at every level but ``nvlink`` is
    read from its location alone (``level_key``), so the nodes are gathered by location first (the nodes of
    one inventory entry share one ``Location`` object) and each location's key is computed once a level; the
    order within a group does not count (``max_jobs`` reads a histogram)."""
    by_place: dict[int, tuple[Node, list[int]]] = {}
    for node, free in free_nodes:
        place = by_place.get(id(node.location))
        if place is None:
            by_place[id(node.location)] = (node, [free])
        else:
            place[1].append(free)
    grouped: dict[str, dict[tuple[str, ...], list[int]]] = {}
    for level in levels:
        groups: dict[tuple[str, ...], list[int]] = {}
        if switch_depth(level) or level == "nvlink":
            # by node: the nodes of one location may have different switches (no NVLink domains given
            # here: no group)
            for node, free in free_nodes:
                key = level_key(node, level, {})
                if key is not None:
                    groups.setdefault(key, []).append(free)
        else:
            for node, frees in by_place.values():
                key = level_key(node, level, {})
                if key is not None:
                    groups.setdefault(key, []).extend(frees)
        grouped[level] = groups
    return grouped


_EP_CELL = {EP_IN_ISLAND: "in node island", EP_IN_DOMAIN: "in NVLink domain", EP_LEAVES: "leave NVLink"}


def format_capacity(cap: Capacity) -> str:
    """The table: one row per shape and level."""
    c = cap.counts
    total = sum(c.values())
    lines = [
        f"nodes: {total} ({c[FREE]} with free GPUs, {c[ALLOCATED]} allocated, {c[DRAINED]} drained/down, "
        f"{c[UNKNOWN]} unknown); free GPUs: {cap.free_gpus} of {cap.total_gpus}"
    ]
    if cap.extra_nodes:
        lines.append(f"not in any inventory (left out): {len(cap.extra_nodes)} nodes")
    with_ep = any(s.ep > 1 for s in cap.shapes)
    head: tuple[str, ...] = ("shape", "level", "jobs", "groups", "naive", "stranded GPUs")
    head += ("EP groups",) if with_ep else ()
    table = [head]
    for s in cap.shapes:
        for lv in s.levels:
            row = (s.shape, lv.level, str(lv.jobs), str(lv.groups), str(s.naive_jobs), str(lv.stranded_gpus))
            table.append(row + ((_EP_CELL.get(s.ep_within or "", "-"),) if with_ep else ()))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        lines.append(
            "  ".join(
                cell.rjust(w) if 2 <= i <= 5 else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    lines.append(
        "jobs: could start now, each inside one group of the level; naive: free GPUs // (nodes × GPUs)"
    )
    if with_ep:
        lines.append(
            "EP groups (NxG:ep=E, E consecutive GPUs): in node island or in NVLink domain (every job "
            "counted has each group inside one), or leave NVLink (none holds one; counted as without EP)"
        )
        lines += [s.ep_warning for s in cap.shapes if s.ep_warning]
    if any(switch_depth(lv.level) for s in cap.shapes for lv in s.levels):
        lines.append(
            f"{SWITCH_LEVEL}.<k>: one switch of the k-th layer below the network group (a provider's "
            "sub-block or host, AWS's lower network nodes); deepest level each shape fits: "
            + ", ".join(f"{s.shape} {s.deepest or 'none'}" for s in cap.shapes)
        )
    return "\n".join(lines) + "\n"
