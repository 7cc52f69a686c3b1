"""Compile: the inventory and Slurm's partitions -> ``PolicyData``, everything the decision needs that does
not depend on the job (node classes; per partition and level the groups in the filter's order)."""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.model import MAX_NAME, Inventory, Location, PolicyConfig, hashed_name, natural_key
from ..core.topology import Topology
from .nodes import NodeIndex, build_index
from .vocab import AUTO_LEVELS as AUTO
from .vocab import IMPLICIT_PARTITION, LEVELS, NVL


@dataclass(frozen=True, slots=True)
class NodeClass:
    features: frozenset[str]
    """The node's own features only; location (and family-bucket) features belong to the groups."""
    gpus: int
    gpu_type: str | None


@dataclass(frozen=True, slots=True)
class Group:
    feature: str
    label: str
    region: str | None
    zone: str | None
    location_features: frozenset[str]
    """This group's feature and its ancestors' (region_…, zone_…)."""
    counts: tuple[tuple[int, int], ...]
    """(class index, nodes) for the partition's nodes in this group."""
    nodes: int
    gpus: int
    max_gpus: int
    rank: int = 0
    """Position of (label, feature) in natural order among the level's groups: the tie-break after size."""
    parents: tuple[str | None, str | None] = (None, None)
    """The features of the zone and region groups holding this one (family buckets with families): what a
    required level's --prefer keeps its finer alternatives inside."""
    family: str | None = None
    """A family bucket's values (``torch-2.4``, several joined by ``.``); None for a location group: prefer's
    zone unions never join buckets of two values."""


@dataclass(frozen=True, slots=True)
class PolicyData:
    fingerprint: str
    config: PolicyConfig
    default_partition: str
    classes: tuple[NodeClass, ...]
    partitions: Mapping[str, Mapping[str, tuple[Group, ...]]]
    areas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
    """--locality-regions names: region or zone label -> (its features, the regions it lies in)."""
    bucket_features: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per node, the family-bucket features the node definitions carry (empty without families)."""
    everywhere: str = IMPLICIT_PARTITION
    """A partition holding every node: what a partition the data does not know is counted as."""
    nodes: NodeIndex = field(default_factory=NodeIndex)
    """Where each node is (for a --nodelist): see nodes.py."""
    family_values: Mapping[str, tuple[Group, ...]] = field(default_factory=dict)
    """Per partition, the bare family values (node features matching a family pattern) as groups, largest
    first: the last alternatives of a prefer cascade with families."""
    auto_units: Mapping[str, tuple[tuple[float, ...] | None, ...]] = field(default_factory=dict)
    """``LEVEL:auto`` budgets: per required level, per node count 1..``auto_max``, s_L - s_tight for each
    looser level in order (seconds of budget per second of time limit), from the site's plan on the
    cluster's most common node (``slurm_topo.cost.budget.unit_budgets``); empty without a site plan; None for
    a node count the plan does not fit."""
    auto_max: int = 0

    _indexes: dict[tuple[str, str], dict[str, Group]] = field(default_factory=dict, compare=False, repr=False)

    def feature_index(self, partition: str, level: str) -> Mapping[str, Group]:
        """A partition's groups of ``level`` (``family``: its bare family values) by feature (made once)."""
        key = (partition, level)
        ix = self._indexes.get(key)
        if ix is None:
            groups = (
                self.family_values.get(partition, ())
                if level == "family"
                else self.partitions[partition].get(level, ())
            )
            ix = self._indexes[key] = {g.feature: g for g in groups}
        return ix

    @property
    def known_features(self) -> frozenset[str]:
        """Every node feature of the cluster (own features; location features are the groups')."""
        return frozenset(f for cls in self.classes for f in cls.features)


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False


def _family_values(
    features: Sequence[str], families: Sequence[tuple[str, str]]
) -> tuple[str, tuple[str, ...]]:
    """(the family bucket's suffix: each family's value or "none", joined by "."; the values the node has)."""
    matched = [
        next((f for f in features if fnmatch.fnmatchcase(f, pattern)), None) for _, pattern in families
    ]
    return ".".join(v or "none" for v in matched), tuple(v for v in matched if v is not None)


def _bucket_name(feature: str, suffix: str) -> str:
    name = f"{feature}.{suffix}"
    return name if len(name) <= MAX_NAME else hashed_name(name, name)


_Tree = tuple[str | None, str | None, str | None]
"""A place's group features in LEVELS order (network_group, zone, region); the node index adds the node's
NVLink domain (nodes.py Place)."""


@dataclass(frozen=True, slots=True)
class _Rows:
    """What a node's place gives it, shared by the nodes of one place (one rack): its group rows per level,
    their parents, its place and its family-bucket features."""

    rows: tuple[tuple[str, str, str, Location, frozenset[str]], ...]
    parents: dict[str, tuple[str | None, str | None]]
    place: _Tree
    buckets: tuple[str, ...]
    family: str | None


def _level_key(level: str, loc: Location) -> Location | None:
    if loc.value(level) is None:
        return None
    return {"region": Location(loc.region), "zone": Location(loc.region, loc.zone)}.get(level, loc)


Row = tuple[str, str, str, Location, frozenset[str]]
"""One group a node is in: (level, feature, label, location key, the features of it and its ancestors)."""


@dataclass(slots=True)
class _Places:
    """Phase 1: each node's place, shared by the nodes of one place (one rack, one family value)."""

    shared: list[_Rows] = field(default_factory=list)
    slot_of: dict[str, int] = field(default_factory=dict)  # node -> its rows in `shared`
    buckets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> its family-bucket features
    areas: dict[str, tuple[set[str], set[str]]] = field(
        default_factory=dict
    )  # zone/region -> features, regions
    values_of: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> its family values


@dataclass(slots=True)
class _Entry:
    """A group being counted: its first row's fields and its nodes per class."""

    label: str
    key: Location
    locs: frozenset[str]
    up: tuple[str | None, str | None]
    family: str | None
    counts: dict[int, int] = field(default_factory=dict)


def compile_policy(
    inventory: Inventory, topology: Topology, partitions: Sequence[Partition] | None, fingerprint: str
) -> PolicyData:
    """Groups per partition and level, with node classes; family buckets when the policy declares families.

    Phases: each node's place and group rows (:func:`_places`), node classes (:func:`_classes`), the
    partitions' members (:func:`_members`), the groups' ranks by label (:func:`_ranks`); then per partition
    the groups of each level (:func:`_level_groups`), the bare family values (:func:`_value_groups`) and
    the NVLink domains."""
    config = inventory.policy or PolicyConfig()
    places = _places(inventory, topology.group_names, config.families)
    class_list, class_of = _classes(inventory)
    parts, default, everywhere = _members(inventory, partitions)
    ranks, value_rank = _ranks(places)
    compiled: dict[str, dict[str, tuple[Group, ...]]] = {}
    family_values: dict[str, tuple[Group, ...]] = {}
    # per node, once: what each partition counts it by (its place and class; its NVLink domain's)
    place_class = {name: (slot, class_of[name]) for name, slot in places.slot_of.items()}
    domains = _Domains(topology, inventory, class_of) if topology.blocks else None
    for pname, members in parts:
        compiled[pname] = _level_groups(places, members, place_class, class_list, ranks)
        if config.families:
            family_values[pname] = _value_groups(places, members, class_of, class_list, value_rank)
        if domains is not None:
            compiled[pname][NVL] = domains.groups(members, class_list)
    return PolicyData(
        fingerprint,
        config,
        default,
        class_list,
        compiled,
        {k: (tuple(sorted(f)), tuple(sorted(r))) for k, (f, r) in sorted(places.areas.items())},
        places.buckets,
        everywhere,
        build_index(
            [
                (name, (*places.shared[slot].place, topology.nvl_features.get(name)))
                for name, slot in places.slot_of.items()
            ]
        ),
        family_values,
        *_auto_units(inventory, config),
    )


def _places(
    inventory: Inventory, names: Mapping[str, Mapping[Location, str]], families: Sequence[tuple[str, str]]
) -> _Places:
    """Each node's group rows (region, zone, network group; family buckets with families), computed once per
    place and shared by its nodes; a degraded node holds no group's features."""
    out = _Places()
    by_place: dict[tuple[Location, bool, str], int] = {}
    by_features: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {}  # an entry's nodes share features
    for node in inventory.nodes:
        loc = node.location
        suffix = ""
        if families:
            known = by_features.get(node.features)
            if known is None:
                known = by_features[node.features] = _family_values(node.features, families)
            suffix, out.values_of[node.name] = known
        slot = by_place.get((loc, node.degraded, suffix))
        if slot is None:
            rows = [] if node.degraded else _rows(loc, names, suffix if families else None, out.areas)
            slot = by_place[(loc, node.degraded, suffix)] = len(out.shared)
            out.shared.append(
                _Rows(
                    tuple(rows),
                    _parents(rows),
                    _place(rows),
                    tuple(r[1] for r in rows),
                    suffix if families else None,
                )
            )
        out.slot_of[node.name] = slot
        if families:
            out.buckets[node.name] = out.shared[slot].buckets
    return out


def _rows(
    loc: Location,
    names: Mapping[str, Mapping[Location, str]],
    suffix: str | None,
    areas: dict[str, tuple[set[str], set[str]]],
) -> list[Row]:
    """One place's rows, coarsest level first (``suffix``: its family bucket); records each zone's and
    region's feature and regions in ``areas``."""
    rows: list[Row] = []
    ancestors: list[str] = []
    for level in ("region", "zone", "network_group"):
        key = _level_key(level, loc)
        if key is None:
            continue
        feature = names[level][key]
        ancestors.append(feature)
        if level in ("region", "zone"):
            feats, regions = areas.setdefault(loc.value(level) or "", (set(), set()))
            feats.add(feature)
            regions.add(loc.region or "")
        label = loc.value(level) or ""
        if level == "network_group":
            label = f"{loc.zone or loc.region}/{label}"  # a group is scoped to its zone
        if suffix is not None:
            feature, label = _bucket_name(feature, suffix), f"{label}/{suffix}"
        rows.append((level, feature, label, key, frozenset(ancestors) | {feature}))
    return rows


def _classes(inventory: Inventory) -> tuple[tuple[NodeClass, ...], dict[str, int]]:
    """The node classes (features, GPUs, GPU type), in the order first met, and each node's."""
    classes: dict[NodeClass, int] = {}
    class_of: dict[str, int] = {}
    class_by_fields: dict[tuple[tuple[str, ...], int, str | None], int] = {}
    for node in inventory.nodes:
        fields = (node.features, node.gpus or 0, node.gpu_type)
        idx = class_by_fields.get(fields)
        if idx is None:
            cls = NodeClass(frozenset(node.features), node.gpus or 0, node.gpu_type)
            idx = class_by_fields[fields] = classes.setdefault(cls, len(classes))
        class_of[node.name] = idx
    return tuple(classes), class_of


def _members(
    inventory: Inventory, partitions: Sequence[Partition] | None
) -> tuple[list[tuple[str, list[str]]], str, str]:
    """(partition, its nodes the inventory knows) for each partition, the default one, and the one holding
    every node. A partition the data does not know (created after the generator ran, or partitions never
    given) is counted as holding every node: an unknown name never switches the locality off."""
    all_names = [n.name for n in inventory.nodes]
    if not partitions:
        return [(IMPLICIT_PARTITION, all_names)], IMPLICIT_PARTITION, IMPLICIT_PARTITION
    known = set(all_names)
    parts = [(p.name, [n for n in p.nodes if n in known]) for p in partitions]
    default = next((p.name for p in partitions if p.default), partitions[0].name)
    everywhere = next((name for name, members in parts if len(set(members)) == len(known)), None)
    if everywhere is None:
        parts.append((IMPLICIT_PARTITION, all_names))
        everywhere = IMPLICIT_PARTITION
    return parts, default, everywhere


def _ranks(places: _Places) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Each level's groups ranked by label (natural order, then feature), and the family values by name."""
    labels: dict[str, set[tuple[str, str]]] = {level: set() for level in LEVELS}
    for place in places.shared:  # one pass over the places' rows for every level
        for row in place.rows:
            labels[row[0]].add((row[2], row[1]))
    ranks: dict[str, dict[str, int]] = {}
    for level in LEVELS:
        ranks[level] = {
            f: i for i, (_, f) in enumerate(sorted(labels[level], key=lambda x: (natural_key(x[0]), x[1])))
        }
    values: set[str] = set()
    for vs in set(places.values_of.values()):  # the nodes of one feature set share their values' tuple
        values.update(vs)
    return ranks, {v: i for i, v in enumerate(sorted(values, key=natural_key))}


def _level_groups(
    places: _Places,
    members: Sequence[str],
    place_class: Mapping[str, tuple[int, int]],
    class_list: Sequence[NodeClass],
    ranks: Mapping[str, Mapping[str, int]],
) -> dict[str, tuple[Group, ...]]:
    """One partition's groups per level, smallest first: its nodes counted per (place, class) first
    (``place_class``: each node's), then per group."""
    acc: dict[str, dict[str, _Entry]] = {lvl: {} for lvl in LEVELS}
    tally = Counter(map(place_class.__getitem__, members))  # (rows, class) -> nodes, in the order first met
    for (slot, cls_idx), count in tally.items():
        place = places.shared[slot]
        for level, feature, label, key, locs in place.rows:
            e = acc[level].get(feature)
            if e is None:
                e = acc[level][feature] = _Entry(label, key, locs, place.parents[level], place.family)
            e.counts[cls_idx] = e.counts.get(cls_idx, 0) + count
    out: dict[str, tuple[Group, ...]] = {}
    for level in LEVELS:
        groups = [_group(feature, e, class_list, ranks[level][feature]) for feature, e in acc[level].items()]
        groups.sort(key=lambda g: (g.nodes, g.rank))
        out[level] = tuple(groups)
    return out


def _group(feature: str, e: _Entry, class_list: Sequence[NodeClass], rank: int) -> Group:
    counts = tuple(sorted(e.counts.items()))
    return Group(
        feature,
        e.label,
        e.key.region,
        e.key.zone,
        e.locs,
        counts,
        sum(n for _, n in counts),
        sum(n * class_list[c].gpus for c, n in counts),
        max(class_list[c].gpus for c, _ in counts),
        rank,
        e.up,
        e.family,
    )


def _value_groups(
    places: _Places,
    members: Sequence[str],
    class_of: Mapping[str, int],
    class_list: Sequence[NodeClass],
    value_rank: Mapping[str, int],
) -> tuple[Group, ...]:
    """One partition's bare family values as groups, largest first."""
    vals: dict[str, dict[int, int]] = {}
    values_of = places.values_of
    # the members counted per (values, class) first: the nodes of one feature set share their values' tuple
    tally = Counter((values_of[name], class_of[name]) for name in members)
    for (vs, cls), count in tally.items():
        for v in vs:
            counts_v = vals.setdefault(v, {})
            counts_v[cls] = counts_v.get(cls, 0) + count
    return tuple(
        sorted(
            (_value_group(v, c, class_list, value_rank[v]) for v, c in vals.items()),
            key=lambda g: (-g.nodes, g.rank),
        )
    )


AUTO_MAX_NODES = 32
"""Largest node count the budget factors are computed for; a larger job uses this row (the factors flatten
out with size, and each row costs the cost model four placements)."""


def _auto_units(
    inventory: Inventory, config: PolicyConfig
) -> tuple[dict[str, tuple[tuple[float, ...] | None, ...]], int]:
    """The data's ``auto`` budget factors (see ``PolicyData.auto_units``), from ``policy: {plan: …}`` and the
    most common kind of node (GPUs, GPU type; the first such node as the template). A node count the plan
    does not fit (``tp=8`` on one 4-GPU node; nodes without GPUs) gets None: its jobs carry no budget."""
    if not config.plan or not inventory.nodes:
        return {}, 0
    from ..core.errors import InputError
    from ..cost import parse_plan
    from ..cost.budget import level_costs, plan_slowdowns
    from ..cost.links import DEFAULT_TABLE

    kinds: dict[tuple[int, str | None], int] = {}
    for node in inventory.nodes:
        key = (node.gpus or 0, node.gpu_type)
        kinds[key] = kinds.get(key, 0) + 1
    top = max(kinds.values())
    template = next(n for n in inventory.nodes if kinds[(n.gpus or 0, n.gpu_type)] == top)
    most = min(AUTO_MAX_NODES, len(inventory.nodes))
    spec = parse_plan(config.plan)
    out: dict[str, list[tuple[float, ...] | None]] = {lvl: [] for lvl in LEVELS}
    for n in range(1, most + 1):
        try:
            costs = level_costs(template, n, spec, inventory.links or DEFAULT_TABLE)
        except InputError:
            for lvl in LEVELS:
                out[lvl].append(None)
            continue
        for lvl in LEVELS:
            slow = plan_slowdowns(costs, lvl, spec)
            out[lvl].append(tuple(round(slow[k] - slow[lvl], 4) for k in AUTO[AUTO.index(lvl) + 1 :]))
    return {lvl: tuple(rows) for lvl, rows in out.items()}, most


class _Domains:
    """The NVLink domains as each partition's groups (``nvl_<domain>``; degraded nodes carry none), smallest
    first. What depends on the fleet only is made once: each node's (domain feature, class, region, zone) and
    the domains' ranks, fleet-wide as the tree's levels are (a domain has one rank in every partition: one tie
    rule). A domain's region and zone are its nodes' in the partition when they all share one (else None):
    what --locality-regions keeps a domain by."""

    def __init__(self, topology: Topology, inventory: Inventory, class_of: Mapping[str, int]):
        feature_of = topology.nvl_features
        self.topology = topology
        self.domain_of = {b.name: b.domain for b in topology.blocks}
        self.key_of = {
            n.name: (feature, class_of[n.name], n.location.region, n.location.zone)
            for n in inventory.nodes
            if (feature := feature_of.get(n.name)) is not None
        }
        domain_of = self.domain_of
        self.rank_of = {
            f: i for i, f in enumerate(sorted(domain_of, key=lambda f: (natural_key(domain_of[f]), f)))
        }

    def groups(self, members: Sequence[str], classes: Sequence[NodeClass]) -> tuple[Group, ...]:
        acc: dict[str, dict[int, int]] = {}
        locs: dict[str, set[tuple[str | None, str | None]]] = {}
        for (feature, cls, region, zone), count in Counter(
            filter(None, map(self.key_of.get, members))
        ).items():
            counts = acc.setdefault(feature, {})
            counts[cls] = counts.get(cls, 0) + count
            locs.setdefault(feature, set()).add((region, zone))
        rank_of, names = self.rank_of, self.topology.group_names
        groups = []
        for feature in sorted(acc, key=rank_of.__getitem__):
            rank = rank_of[feature]
            counts_t = tuple(sorted(acc[feature].items()))
            regions = {r for r, _ in locs[feature]}
            region = next(iter(regions)) if len(regions) == 1 else None
            zones = locs[feature]
            zone = next(iter(zones))[1] if len(zones) == 1 and region is not None else None
            ancestors = {feature}
            if region is not None:
                ancestors.add(names["region"][Location(region)])
                if zone is not None:
                    ancestors.add(names["zone"][Location(region, zone)])
            groups.append(
                Group(
                    feature,
                    self.domain_of[feature],
                    region,
                    zone,
                    frozenset(ancestors),
                    counts_t,
                    sum(n for _, n in counts_t),
                    sum(n * classes[c].gpus for c, n in counts_t),
                    max(classes[c].gpus for c, _ in counts_t),
                    rank,
                )
            )
        groups.sort(key=lambda g: (g.nodes, g.rank))
        return tuple(groups)


def _parents(
    rows: Sequence[tuple[str, str, str, Location, frozenset[str]]],
) -> dict[str, tuple[str | None, str | None]]:
    """Per level, the node's zone and region group features coarser than that level."""
    by_level = {row[0]: row[1] for row in rows}
    zone, region = by_level.get("zone"), by_level.get("region")
    return {"network_group": (zone, region), "zone": (None, region), "region": (None, None)}


def _value_group(value: str, counts: Mapping[int, int], classes: Sequence[NodeClass], rank: int) -> Group:
    """A bare family value as a group: its nodes in the partition, by class."""
    c = tuple(sorted(counts.items()))
    return Group(
        value,
        value,
        None,
        None,
        frozenset(),
        c,
        sum(n for _, n in c),
        sum(n * classes[i].gpus for i, n in c),
        max(classes[i].gpus for i, _ in c),
        rank,
    )


def _place(rows: Sequence[tuple[str, str, str, Location, frozenset[str]]]) -> _Tree:
    """A node's group feature per level, in LEVELS order."""
    by_level = {row[0]: row[1] for row in rows}
    ng, zone, region = (by_level.get(level) for level in LEVELS)
    return ng, zone, region
