"""`slurm_topo.cost.search` as it was before the switch layers (commit caf49ee, imports made absolute), kept
unchanged as the reference `tests/test_cost_search_switches.py` compares fleets without layers against:
they must get exactly the placement they got before."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from slurm_topo.core.model import Node
from slurm_topo.cost.comm import Fabric, node_gpus
from slurm_topo.gpu.links import DEFAULT_BANDWIDTH, link_bandwidth

SEARCH_LEVELS = ("nvlink", "network_group", "zone", "region", "any")

Key = tuple[str, ...]


def level_key(node: Node, level: str, domains: Mapping[str, str]) -> Key | None:
    """The group ``node`` is in at ``level`` (None: it is in none, e.g. no zone)."""
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
    return (loc.region, loc.zone, loc.network_group)


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
    for n in members:
        groups.setdefault(level_key(n, levels[0], domains), []).append(n)
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
    for n in members:
        k = level_key(n, finer, domains)
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
    fleet has fewer."""
    if count < 1:
        return None
    nodes, by_topo = _candidates(fabric, gpus, eligible, gpu_type, pool)
    if len(nodes) < count:
        return None

    def quality(node: Node) -> float:
        return by_topo[id(node.gpu_topology)]

    domains = fabric.domains
    levels = [lvl for lvl in SEARCH_LEVELS if lvl != "nvlink" or domains]
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
) -> tuple[list[Node], dict[int, float]]:
    """The nodes that qualify, best intra-node links first (the fleet's own order within a quality), and
    each hardware model's quality (computed once per link table)."""
    cache: dict[int, tuple[int, ...]] = {}
    seen: dict[int, float] = {}
    by_topo: dict[int, float] = {}  # id(link table) -> quality: computed once per hardware model
    buckets: dict[float, list[Node]] = {}
    for n in pool if pool is not None else fabric.nodes.values():
        if (n.gpus or 0) < gpus or (gpu_type is not None and n.gpu_type != gpu_type):
            continue
        if eligible is not None and not eligible(n):
            continue
        q = by_topo.get(id(n.gpu_topology))
        if q is None:
            q = by_topo[id(n.gpu_topology)] = intra_quality(n, gpus, cache, seen)
        buckets.setdefault(q, []).append(n)
    return [n for q in sorted(buckets, reverse=True) for n in buckets[q]], by_topo
