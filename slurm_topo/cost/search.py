"""The best placement of a shape (N nodes × G GPUs) on a fleet, by groups, never by node subsets.

Levels are tried tightest first — one NVLink domain (where domains are known), one switch of each layer
below the network group (``switch.<k>``, the deepest layer first: the entry's ``switches:``, a provider's
sub-block or host, AWS's lower network nodes; only when some eligible node has such layers), one network
group, one zone, one region, anywhere — and the first level with a group of N eligible nodes wins: with
network levels that do not get faster going out (:func:`~slurm_topo.cost.links.parse_links` checks it,
``switch`` included) no placement spanning a wider group costs less. Inside the chosen group the nodes are
filled greedily, the concept's rule: whole largest sub-groups first, the remainder from the smallest
sub-group that holds it (so a 12-node job in a zone of leaves 8 + 8 + 4 takes 8 + 4, not 8 + 8's half), down
through the switch layers (a node without a layer is alone at it: a provider leaves out the layers that hold
a node alone). Among equal groups, the one needing the fewest sub-groups, then the lowest name. Nodes inside
a leaf go best intra-node links first, then in name order.

Cost: one pass over the eligible nodes per level (dict grouping) plus sorting the groups: O(n log n) for n
nodes; the model is evaluated once, on the chosen placement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..core.model import Node
from ..gpu.links import DEFAULT_BANDWIDTH, link_bandwidth
from .comm import Fabric, node_gpus

SEARCH_LEVELS = ("nvlink", "network_group", "zone", "region", "any")
"""The levels of a fleet without switch layers (:func:`search_levels` adds them after ``nvlink``)."""
SWITCH_LEVEL = "switch"
"""``switch.<k>``: one switch of the ``k``-th layer below the network group (1: the top one), as
``slurm_topo.reports.capacity`` names its levels."""

Key = tuple[str, ...]


def switch_level(depth: int) -> str:
    """The search level of one switch of the ``depth``-th layer below the network group."""
    return f"{SWITCH_LEVEL}.{depth}"


@functools.lru_cache(maxsize=256)  # asked once a node a level: a handful of level names
def switch_depth(level: str) -> int:
    """``k`` of a ``switch.<k>`` level, 0 for any other level."""
    head, dot, tail = level.partition(".")
    return int(tail) if head == SWITCH_LEVEL and dot and tail.isdigit() and int(tail) > 0 else 0


def search_levels(nodes: Iterable[Node], domains: Mapping[str, str]) -> list[str]:
    """The levels :func:`best_nodes` tries, tightest first: ``nvlink`` when ``domains`` are known, one
    ``switch.<k>`` per layer some node of a network group has (deepest first), then the group levels. Nodes
    without layers: :data:`SEARCH_LEVELS` as they always were."""
    return _levels(max((_layers(n) for n in nodes), default=0), domains)


def _layers(node: Node) -> int:
    """How many switch layers below its network group ``node`` has."""
    return len(node.switches) if node.switches and node.location.network_group is not None else 0


def _levels(depth: int, domains: Mapping[str, str]) -> list[str]:
    head = [SEARCH_LEVELS[0]] if domains else []
    return [*head, *(switch_level(k) for k in range(depth, 0, -1)), *SEARCH_LEVELS[1:]]


def level_key(node: Node, level: str, domains: Mapping[str, str]) -> Key | None:
    """The group ``node`` is in at ``level`` (None: it is in none, e.g. no zone); at ``switch.<k>`` its
    network group and its first ``k`` switches (labels are scoped by the ones above), None when it has
    fewer."""
    loc = node.location
    if level == "nvlink":
        d = domains.get(node.name)
        return (d,) if d is not None else None
    if level == "any":
        return ("*",)
    if loc.region is None:
        return None
    if level == "region":
        return (loc.region,)
    if loc.zone is None:
        return None
    if level == "zone":
        return (loc.region, loc.zone)
    if loc.network_group is None:
        return None
    group = (loc.region, loc.zone, loc.network_group)
    depth = switch_depth(level) if level != "network_group" else 0  # the group levels never pay for it
    if depth:
        return None if len(node.switches) < depth else (*group, *node.switches[:depth])
    return group


def intra_quality(node: Node, gpus: int, cache: dict[int, tuple[int, ...]], seen: dict[int, float]) -> float:
    """Higher is better: the slowest link among the GPUs a job would get on ``node`` (GB/s, the GPU link
    table); a node without link data ranks as NVLink (the model's ``node`` level assumes it). ``seen`` caches
    per link table (the nodes of one hardware model share one)."""
    topo = node.gpu_topology
    if gpus < 2 or topo is None or not topo.has_links:
        return float("inf")
    key = id(topo)
    if key not in seen:
        chosen = node_gpus(node, gpus, cache)
        seen[key] = min(
            link_bandwidth(topo.link(a, b), DEFAULT_BANDWIDTH) for a in chosen for b in chosen if a < b
        )
    return seen[key]


def _sub_key(node: Node, level: str, domains: Mapping[str, str]) -> Key | None:
    """:func:`level_key` at a switch layer for the fill, except that a node of a network group without that
    layer is a group of its own (a provider leaves out the layers that hold a node alone)."""
    key = level_key(node, level, domains)
    if key is None:
        group = level_key(node, "network_group", domains)
        if group is not None:
            return (*group, *node.switches, "", node.name)
    return key


@dataclass(frozen=True, slots=True)
class Found:
    level: str
    group: Key
    nodes: tuple[str, ...]


def _fill(
    members: Sequence[Node], need: int, levels: Sequence[str], domains: Mapping[str, str]
) -> list[Node]:
    """``need`` of ``members`` (already in preference order): whole largest sub-groups at ``levels[0]`` first,
    then the smallest sub-group that holds the rest, recursively."""
    if need >= len(members):
        return list(members)
    if not levels:
        return list(members[:need])
    groups: dict[Key | None, list[Node]] = {}
    key_of = _sub_key if switch_depth(levels[0]) else level_key
    for n in members:
        groups.setdefault(key_of(n, levels[0], domains), []).append(n)
    order = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0] is None, kv[0] or ()))
    out: list[Node] = []
    left = need
    rest = list(order)
    while left > 0 and rest:
        fitting = [kv for kv in rest if len(kv[1]) >= left]
        if fitting:
            key, nodes = min(fitting, key=lambda kv: (len(kv[1]), kv[0] is None, kv[0] or ()))
            out.extend(_fill(nodes, left, levels[1:], domains))
            return out
        key, nodes = rest.pop(0)
        out.extend(nodes)
        left -= len(nodes)
    return out


def _spread(members: Sequence[Node], need: int, finer: str, domains: Mapping[str, str]) -> int:
    """How many sub-groups at ``finer`` the greedy fill uses (the fewer, the tighter)."""
    sizes: dict[Key | None, int] = {}
    key_of = _sub_key if switch_depth(finer) else level_key
    for n in members:
        k = key_of(n, finer, domains)
        sizes[k] = sizes.get(k, 0) + 1
    used = 0
    for size in sorted(sizes.values(), reverse=True):
        used += 1
        need -= size
        if need <= 0:
            break
    return used


def best_nodes(
    fabric: Fabric,
    count: int,
    gpus: int,
    *,
    eligible: Callable[[Node], bool] | None = None,
    gpu_type: str | None = None,
    pool: Iterable[Node] | None = None,
) -> Found | None:
    """The tightest ``count`` nodes with at least ``gpus`` GPUs each (and ``gpu_type`` when given) among
    ``pool`` (default: the whole fleet) that pass ``eligible`` (default: all, the idle fleet); None when the
    fleet has fewer. ``Found.level``: the level of :func:`search_levels` that held them (``switch.<k>``
    for one switch of a layer below the network group), ``node`` for one node."""
    if count < 1:
        return None
    nodes, by_topo, depth = _candidates(fabric, gpus, eligible, gpu_type, pool)
    if len(nodes) < count:
        return None

    def quality(node: Node) -> float:
        return by_topo[id(node.gpu_topology)]

    domains = fabric.domains
    levels = _levels(depth, domains)  # search_levels(nodes, domains), the layers counted in the one pass
    for i, level in enumerate(levels):
        groups: dict[Key, list[Node]] = {}
        for n in nodes:
            k = level_key(n, level, domains)
            if k is not None:
                groups.setdefault(k, []).append(n)
        big = [(k, m) for k, m in groups.items() if len(m) >= count]
        if not big:
            continue
        below = [lvl for lvl in reversed(levels[:i])]  # the sub-levels, next finer first
        if below:
            key, members = min(
                big,
                key=lambda kv: (
                    _spread(kv[1], count, below[0], domains),
                    -quality(kv[1][count - 1]),  # members go best first: the worst one taken
                    kv[0],
                ),
            )
        else:
            key, members = min(big, key=lambda kv: kv[0])
        chosen = _fill(members, count, below, domains)
        return Found(level if count > 1 else "node", key, tuple(n.name for n in chosen))
    return None


def _candidates(
    fabric: Fabric,
    gpus: int,
    eligible: Callable[[Node], bool] | None,
    gpu_type: str | None,
    pool: Iterable[Node] | None,
) -> tuple[list[Node], dict[int, float], int]:
    """The nodes that qualify, best intra-node links first (the fleet's own order within a quality), each
    hardware model's quality (computed once per link table) and the most switch layers any of them has."""
    cache: dict[int, tuple[int, ...]] = {}
    seen: dict[int, float] = {}
    by_topo: dict[int, float] = {}  # id(link table) -> quality: computed once per hardware model
    buckets: dict[float, list[Node]] = {}
    depth = 0
    for n in pool if pool is not None else fabric.nodes.values():
        if (n.gpus or 0) < gpus or (gpu_type is not None and n.gpu_type != gpu_type):
            continue
        if eligible is not None and not eligible(n):
            continue
        q = by_topo.get(id(n.gpu_topology))
        if q is None:
            q = by_topo[id(n.gpu_topology)] = intra_quality(n, gpus, cache, seen)
        buckets.setdefault(q, []).append(n)
        if n.switches:
            depth = max(depth, _layers(n))
    return [n for q in sorted(buckets, reverse=True) for n in buckets[q]], by_topo, depth
