"""The switch tree and the per-level feature names, derived from an ``Inventory``.

Tree (topology/tree): ``root`` → region → zone → network group → the switches below it (``switches:``,
the provider's deeper layers, top first; none: the group is the leaf) → nodes. Nodes with no network group sit
in a per-zone leaf, nodes with no zone in a per-region leaf, nodes with no location (and nodes Slurm knows
that no inventory places) in the root's own leaf, so every node is on exactly one leaf and any job can still
span the fleet (topology/tree never allocates a node on no switch). A switch holds either nodes or switches,
never both, and never nothing.

Names are derived from the label path, so the same fleet always gives the same names:

=============  ======================  ===================================
level          name                    path (hashed on collision)
=============  ======================  ===================================
region         ``region_<region>``     ``region=R``
zone           ``zone_<zone>``         ``region=R/zone=Z``
network group  ``ng_<zone>.<group>``   ``region=R/zone=Z/network_group=G``
               ``ng_<region>.<group>`` ``region=R/network_group=G`` (no zone)
below a group  ``leaf_<zone|region>.<s>`` ``…/network_group=G/switch=S1[/switch=S2…]``
extra leaf     ``leaf_<zone|region>``  ``…/leaf``;  the root's: ``leaf_root``
               ``leaf_<zone|region>.<g|s>.nodes``  ``…/network_group=G[/switch=S…]/leaf``: the nodes of a
               switch that also has switches below it (some nodes with fewer layers)
=============  ======================  ===================================

A name longer than 64 characters (Slurm's HOST_NAME_MAX for switch names), or one that two different paths
would share (zone ``a`` in two regions), is cut to 55 characters and gets ``_<first 8 hex of sha1(path)>``.
The region/zone/group names double as node features, so the submit filter's ``[zone_…|zone_…]`` and the tree
always agree; so do the switches below a group (``leaf_<zone>.<s>``, a feature of every node under it, not a
filter level). The extra leaves are no feature.

NVLink domains (``nvlink_domain``) become blocks (topology/block, topology.yaml): one block ``nvl_<domain>``
per domain, the same string as the nodes' domain feature. Block order is semantics for Slurm (aggregated
blocks are runs of consecutive base blocks), so it is derived so that a domain keeps its slot across
regenerations: the inventory's ``nvlink.domains`` first, in that order, then the other domains by name; a
listed domain with no node, and a gap in a numbered run (``rack-01``, ``rack-03`` -> ``rack-02``), is an
empty placeholder block.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .model import MAX_NAME, NVL_PREFIX, SWITCH_PREFIX, Inventory, Location, hashed_name, natural_key

ROOT = "root"

Place = tuple[Location, tuple[str, ...]]
"""A node's place in the tree: its location and the switches below its network group."""


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    kind: str
    """``root``, ``region``, ``zone``, ``network_group``, ``switch`` (below a group) or ``leaf``."""
    label: str | None
    switches: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """One NVLink domain as a topology/block block; ``nodes`` is empty for a placeholder."""

    name: str
    domain: str
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    switches: tuple[Switch, ...]
    """Every switch once: leaves first, then zones, regions and the root (Slurm computes levels itself)."""
    node_features: Mapping[str, tuple[str, ...]]
    """Location features of each inventory node, coarsest first (region, zone, group, the switches below
    it)."""
    group_names: Mapping[str, Mapping[Location, str]]
    """Feature name per level and location (the location cut to that level)."""
    blocks: tuple[Block, ...] = ()
    """NVLink domains in block order, placeholders included; empty when no node has a domain."""
    nvl_features: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Node -> its domain's feature (== block name), for nodes with a domain."""


def _finalize_names(candidates: Mapping[str, str]) -> dict[str, str]:
    """path -> final unique name (see module docstring)."""
    counts = Counter(candidates.values())
    names = {
        path: cand if counts[cand] == 1 and len(cand) <= MAX_NAME else hashed_name(cand, path)
        for path, cand in candidates.items()
    }
    if len(set(names.values())) != len(names) or ROOT in names.values():
        raise RuntimeError(
            "switch name collision survived hashing"
        )  # sha1 prefix clash: report it, never guess
    return names


@dataclass(slots=True)
class _Tree:
    """The switch tree being built: per path (``region=r/zone=z/network_group=g``) its candidate name, parent
    and kind; each location's leaf path and each group's path."""

    candidates: dict[str, str] = field(default_factory=dict)
    parent_of: dict[str, str] = field(default_factory=dict)  # path -> parent path ("" = root)
    kind_of: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    leaf_of: dict[Place, str] = field(default_factory=dict)  # place -> leaf path
    level_path: dict[tuple[str, Location], str] = field(default_factory=dict)
    switch_paths: dict[Place, tuple[str, ...]] = field(default_factory=dict)  # the switches below the group

    def add(self, path: str, cand: str, parent: str, kind: str, label: str | None) -> str:
        if path not in self.candidates:
            self.candidates[path] = cand
            self.parent_of[path] = parent
            self.kind_of[path] = (kind, label)
        return path


def build_topology(inventory: Inventory) -> Topology:
    """Derive the tree and the location features from the merged inventory (pure, deterministic).

    Steps: the paths of every location (:func:`_tree`), their final names, the switches
    (:func:`_switches`), each level's group names and each node's features (:func:`_node_features`), the
    NVLink blocks."""
    by_place: dict[Place, list[str]] = {}
    for node in inventory.nodes:
        by_place.setdefault((node.location, node.switches), []).append(node.name)
    tree = _tree(by_place, bool(inventory.extra_nodes))
    names = _finalize_names(tree.candidates)
    switches = _switches(tree, names, by_place, inventory.extra_nodes)
    group_names: dict[str, dict[Location, str]] = {"region": {}, "zone": {}, "network_group": {}}
    for (level, loc), path in tree.level_path.items():
        group_names[level][loc] = names[path]
    below = {place: tuple(names[p] for p in paths) for place, paths in tree.switch_paths.items()}
    node_features = _node_features(inventory, group_names, below)
    blocks = build_blocks(inventory)
    degraded = {node.name for node in inventory.nodes if node.degraded}
    nvl_features = {node: b.name for b in blocks for node in b.nodes if node not in degraded}
    return Topology(
        switches=tuple(switches),
        node_features=MappingProxyType(node_features),
        group_names=MappingProxyType({k: MappingProxyType(v) for k, v in group_names.items()}),
        blocks=blocks,
        nvl_features=MappingProxyType(nvl_features),
    )


def _tree(by_place: Mapping[Place, list[str]], extra: bool) -> _Tree:
    """Every place's path: region, zone, then its network group and the switches below it, or the zone's
    (region's) own leaf; nodes without a region (and ``extra`` nodes no inventory places) hang off the root's
    leaf. A switch that would hold nodes and switches gives its nodes a leaf of their own below it."""
    tree = _Tree()
    for place in by_place:
        loc, below = place
        r, z, g = loc.region, loc.zone, loc.network_group
        if r is None:
            tree.leaf_of[place] = tree.add("leaf", "leaf_root", "", "leaf", None)
            continue
        parent = tree.add(f"region={r}", f"region_{r}", "", "region", r)
        tree.level_path[("region", Location(r))] = parent
        if z is not None:
            parent = tree.add(f"{parent}/zone={z}", f"zone_{z}", parent, "zone", z)
            tree.level_path[("zone", Location(r, z))] = parent
        if g is not None:
            leaf = tree.add(f"{parent}/network_group={g}", f"ng_{z or r}.{g}", parent, "network_group", g)
            tree.level_path[("network_group", loc)] = leaf
            paths = []
            for label in below:
                leaf = tree.add(
                    f"{leaf}/switch={label}", f"{SWITCH_PREFIX}{z or r}.{label}", leaf, "switch", label
                )
                paths.append(leaf)
            tree.switch_paths[place] = tuple(paths)
        else:
            leaf = tree.add(f"{parent}/leaf", f"leaf_{z or r}", parent, "leaf", None)
        tree.leaf_of[place] = leaf
    _split_mixed(tree)
    if extra:
        tree.add("leaf", "leaf_root", "", "leaf", None)
    return tree


def _split_mixed(tree: _Tree) -> None:
    """A switch that is some place's leaf and another's parent (nodes with fewer layers below the group than
    their neighbours) keeps its switches; its own nodes move to a leaf below it
    (``leaf_<zone|region>.<label>.nodes``)."""
    parents = set(tree.parent_of.values())
    for place, leaf in list(tree.leaf_of.items()):
        if leaf in parents:
            loc = place[0]
            label = tree.kind_of[leaf][1]
            tree.leaf_of[place] = tree.add(
                f"{leaf}/leaf", f"{SWITCH_PREFIX}{loc.zone or loc.region}.{label}.nodes", leaf, "leaf", None
            )


def _switches(
    tree: _Tree, names: Mapping[str, str], by_place: Mapping[Place, list[str]], extra: Sequence[str]
) -> list[Switch]:
    """The switch lines: leaves and the switches below the groups first, then zones, then regions (each by
    name), then the root."""
    children: dict[str, list[str]] = {}
    for path, parent in tree.parent_of.items():
        children.setdefault(parent, []).append(names[path])
    leaf_nodes: dict[str, list[str]] = {}
    for place, nodes in by_place.items():
        leaf_nodes.setdefault(tree.leaf_of[place], []).extend(nodes)
    if extra:
        leaf_nodes.setdefault("leaf", []).extend(extra)
    order = {"leaf": 0, "network_group": 0, "switch": 0, "zone": 1, "region": 2}
    switches = []
    for path in sorted(tree.candidates, key=lambda p: (order[tree.kind_of[p][0]], natural_key(names[p]))):
        kind, label = tree.kind_of[path]
        if path in leaf_nodes:
            members = tuple(sorted(leaf_nodes[path], key=natural_key))
            switches.append(Switch(names[path], kind, label, nodes=members))
        else:
            kids = tuple(sorted(children[path], key=natural_key))
            switches.append(Switch(names[path], kind, label, switches=kids))
    if tree.candidates:
        switches.append(Switch(ROOT, "root", None, switches=tuple(sorted(children[""], key=natural_key))))
    return switches


def _node_features(
    inventory: Inventory,
    group_names: Mapping[str, Mapping[Location, str]],
    below: Mapping[Place, tuple[str, ...]],
) -> dict[str, tuple[str, ...]]:
    """Each node's location features (region, zone, network group, the switches below it); none for a
    degraded node."""
    feature_cache: dict[Place, tuple[str, ...]] = {}
    node_features: dict[str, tuple[str, ...]] = {}
    for node in inventory.nodes:
        loc = node.location
        place = (loc, node.switches)
        feats = feature_cache.get(place)
        if feats is None:
            feats = tuple(
                group_names[level][key]
                for level, key in (
                    ("region", Location(loc.region)),
                    ("zone", Location(loc.region, loc.zone)),
                    ("network_group", loc),
                )
                if key in group_names[level] and loc.value(level) is not None
            ) + below.get(place, ())
            feature_cache[place] = feats
        node_features[node.name] = () if node.degraded else feats
    return node_features


_NUMBERED = re.compile(r"^(.*?)(\d+)\Z")


def domain_order(present: set[str] | frozenset[str], listed: tuple[str, ...] = ()) -> list[str]:
    """The block order: ``listed`` first, then the other domains by name with the gaps of each numbered run
    filled (same prefix and digit width, between its lowest and highest number, at most as many fillers as
    real domains in the run)."""
    rest = sorted(present - set(listed), key=natural_key)
    runs: dict[tuple[str, int], list[int]] = {}
    for domain in rest:
        m = _NUMBERED.match(domain)
        if m:
            runs.setdefault((m[1], len(m[2])), []).append(int(m[2]))
    fill: set[str] = set()
    for (prefix, width), numbers in runs.items():
        lo, hi = min(numbers), max(numbers)
        if hi - lo + 1 - len(numbers) <= len(numbers):
            fill.update(f"{prefix}{n:0{width}d}" for n in range(lo, hi + 1))
    fill -= set(listed)
    return list(listed) + sorted(set(rest) | fill, key=natural_key)


def block_name(domain: str) -> str:
    """``nvl_<domain>``, hashed when over 64 characters (``model.hashed_name``)."""
    name = f"{NVL_PREFIX}{domain}"
    return name if len(name) <= MAX_NAME else hashed_name(name, f"nvlink_domain={domain}")


def build_blocks(inventory: Inventory) -> tuple[Block, ...]:
    """One block per NVLink domain in ``domain_order`` (placeholders included); () when no node has one."""
    members: dict[str, list[str]] = {}
    for node in inventory.nodes:
        if node.nvlink_domain is not None:
            members.setdefault(node.nvlink_domain, []).append(node.name)
    if not members:
        return ()
    listed = inventory.nvlink.domains if inventory.nvlink is not None else ()
    return tuple(
        Block(block_name(d), d, tuple(sorted(members.get(d, ()), key=natural_key)))
        for d in domain_order(set(members), listed)
    )
