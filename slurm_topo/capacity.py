"""Topology-feasible capacity: how many jobs of a shape could start now inside one group (pure).

Free GPUs alone overstate what a multi-node job can get: a job of ``N`` nodes × ``G`` GPUs that must stay in
one network group (or zone, region) can only use the free GPUs of groups that hold ``N`` nodes with ``G``
free each. For each shape and locality level this module counts

* ``jobs``: how many such jobs could start now, each inside one group of the level (a node with ``k·G``
  free GPUs can host ``k`` of them, on different jobs; per group the largest ``j`` with
  ``Σ min(slots_i, j) >= j·N``);
* ``naive``: what the free GPUs alone suggest (``free GPUs // (N·G)``);
* ``stranded``: free GPUs no such job can use (``free GPUs − jobs·N·G``) — the fragmentation.

Node states come from ``scontrol show node -o`` records (:func:`node_states`): ``IDLE`` is free, ``MIXED``
frees what its GPU use leaves (``GresUsed=gpu:…(IDX:…)`` or ``AllocTRES=…gres/gpu=N``; unknown use counts as
none free), ``ALLOCATED``/``COMPLETING`` is allocated, and any of ``DRAIN``, ``DOWN``, ``FAIL``, ``MAINT``,
``NOT_RESPONDING`` (``*``), ``FUTURE``, ``RESERVED``, ``PLANNED``, ``INVALID`` makes a node unavailable.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .collector import collector_paused
from .cost.search import level_key, switch_depth
from .errors import InputError
from .model import Inventory, Node

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
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*\Z")


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


def parse_shape(text: str) -> tuple[int, int]:
    """``8x4`` -> (8 nodes, 4 GPUs per node)."""
    m = _SHAPE_RE.match(text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1 or len(text) > 20:
        raise InputError(f"--shape {text[:40]!r}: expected NODESxGPUS with both at least 1, e.g. 8x4")
    return int(m.group(1)), int(m.group(2))


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

    @property
    def shape(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}"

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
    shapes: Iterable[tuple[int, int]],
    levels: Sequence[str] | None = None,
    extra_nodes: Sequence[str] = (),
) -> Capacity:
    """Per shape and level: jobs that could start now inside one group, naive count, stranded GPUs
    (``levels`` None: :func:`capacity_levels`)."""
    with collector_paused():  # half its CPU at 100 000 nodes was the collector's passes over the fleet
        chosen = capacity_levels(inventory) if levels is None else tuple(levels)
        return _capacity(inventory, states, shapes, chosen, extra_nodes)


def _capacity(
    inventory: Inventory,
    states: Mapping[str, NodeState],
    shapes: Iterable[tuple[int, int]],
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
    out = []
    for n, g in shapes:
        naive = free_gpus // (n * g)
        rows = []
        for level in levels:
            jobs = groups_used = 0
            for frees in grouped[level].values():
                slots = [f // g for f in frees if f >= g]
                if len(slots) < n:
                    continue
                j = max_jobs(slots, n)
                jobs += j
                groups_used += j > 0
            rows.append(LevelCapacity(level, jobs, groups_used, free_gpus - jobs * n * g))
        out.append(ShapeCapacity(n, g, naive, tuple(rows)))
    return Capacity(counts, free_gpus, total_gpus, tuple(out), tuple(extra_nodes))


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
    head = ("shape", "level", "jobs", "groups", "naive", "stranded GPUs")
    table = [head]
    for s in cap.shapes:
        for lv in s.levels:
            table.append(
                (s.shape, lv.level, str(lv.jobs), str(lv.groups), str(s.naive_jobs), str(lv.stranded_gpus))
            )
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        lines.append(
            "  ".join(
                cell.rjust(w) if i >= 2 else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    lines.append(
        "jobs: could start now, each inside one group of the level; naive: free GPUs // (nodes × GPUs)"
    )
    if any(switch_depth(lv.level) for s in cap.shapes for lv in s.levels):
        lines.append(
            f"{SWITCH_LEVEL}.<k>: one switch of the k-th layer below the network group (a provider's "
            "sub-block or host, AWS's lower network nodes); deepest level each shape fits: "
            + ", ".join(f"{s.shape} {s.deepest or 'none'}" for s in cap.shapes)
        )
    return "\n".join(lines) + "\n"
