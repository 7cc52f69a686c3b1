"""Merging loaded inventories into one :class:`~slurm_topo.core.model.Inventory` (ARCHITECTURE.md, "Trust"):
records for the same node at the same trust level must agree on the location; across trust levels the most
trusted record wins, lower ones only fill gaps that agree with it, and every disagreement becomes a
``Conflict``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.errors import InventoryError
from ..core.model import (
    LEVELS,
    MAX_NODES,
    NO_LOCATION,
    SLURM_NODE_KEYS,
    Conflict,
    Inventory,
    Location,
    Node,
    NvlinkConfig,
    PolicyConfig,
    natural_key,
)
from ..plumbing.collector import collector_paused
from .document import Loaded, load_inventory_file


def _merge_same_trust(a: Node, b: Node) -> Node:
    if a.nvlink_domain and b.nvlink_domain and a.nvlink_domain != b.nvlink_domain:
        raise InventoryError(
            b.origin,
            "",
            f"node {b.name} is in NVLink domain {b.nvlink_domain} here but in {a.nvlink_domain} "
            f"in {a.origin} (both {a.source.label} records)",
        )
    if a.switches and b.switches and a.switches != b.switches:
        raise InventoryError(
            b.origin,
            "",
            f"node {b.name} is under switches {'/'.join(b.switches)} here but under "
            f"{'/'.join(a.switches)} in {a.origin} (both {a.source.label} records)",
        )
    if a.location != b.location:
        raise InventoryError(
            b.origin,
            "",
            f"node {b.name} is at {b.location.describe()} here but at {a.location.describe()} in {a.origin} "
            f"(both {a.source.label} records)",
        )
    return _fill(a, b)


def _fill(kept: Node, other: Node) -> Node:
    """Fill gaps of ``kept`` from ``other`` (never overriding a value ``kept`` has)."""
    slurm = dict(kept.slurm)
    for k, v in other.slurm:
        slurm.setdefault(k, v)
    features = kept.features + tuple(f for f in other.features if f not in kept.features)
    return replace(
        kept,
        features=features,
        gpus=kept.gpus if kept.gpus is not None else other.gpus,
        gpu_type=kept.gpu_type or other.gpu_type,
        gpu_topology=kept.gpu_topology if kept.gpu_topology is not None else other.gpu_topology,
        slurm=tuple((k, slurm[k]) for k in SLURM_NODE_KEYS if k in slurm),
        found_by=kept.found_by or other.found_by,
        notes=kept.notes + tuple(n for n in other.notes if n not in kept.notes),
        nvlink_domain=kept.nvlink_domain or other.nvlink_domain,
        nvlink_source=(
            kept.nvlink_source
            if kept.nvlink_domain or not other.nvlink_domain
            else (other.nvlink_source if other.nvlink_source is not None else other.source)
        ),
        switches=kept.switches or other.switches,
        switches_source=(
            kept.switches_source
            if kept.switches or not other.switches
            else (other.switches_source if other.switches_source is not None else other.source)
        ),
    )


def _fill_location(kept: Location, other: Location) -> Location:
    """Finer levels from a less trusted record, only below levels on which both agree."""
    values = {}
    for lvl in LEVELS:
        mine, theirs = kept.value(lvl), other.value(lvl)
        values[lvl] = mine if mine is not None else theirs
    return Location(**values)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MergedInventory(Inventory):
    """The merged fleet, and where its parts came from: what the checks that run after merging (at render
    time, for a release: block sizes, Slurm's node limit, nodes without an NVLink domain) name in a refusal,
    ``FILE: …`` as every refusal of an inventory does (``render.refusal``, which reads these fields by name:
    the renderers do not import the loader). A node says its own entry (``Node.origin``). Compared and
    hashed as the :class:`Inventory` it is (the sources do not count); ``dataclasses.replace`` (Slurm's node
    records, the health effects) keeps them."""

    sources: tuple[str, ...] = ()
    """Every file merged, in the order given."""
    sections: tuple[tuple[str, str], ...] = ()
    """(section, file) for the top-level sections other than ``nodes`` (``nvlink``, ``policy``,
    ``links``)."""


def merge(loaded: Iterable[Loaded], extra_nodes: Sequence[str] = ()) -> Inventory:
    """Merge per-file records into one ``Inventory`` (ARCHITECTURE.md, "Trust")."""
    with collector_paused():
        return _merge(loaded, extra_nodes)


def _merge(loaded: Iterable[Loaded], extra_nodes: Sequence[str]) -> Inventory:
    by_name: dict[str, list[Node]] = {}
    warnings: list[str] = []
    policy: PolicyConfig | None = None
    policy_source = ""
    nvlink: NvlinkConfig | None = None
    nvlink_source = ""
    items = list(loaded)
    for item in items:
        warnings.extend(item.warnings)
        if item.nvlink is not None:
            if nvlink is not None and item.nvlink != nvlink:
                raise InventoryError(
                    item.source,
                    "nvlink",
                    f"differs from the nvlink section in {nvlink_source}; give it in one inventory",
                )
            nvlink, nvlink_source = item.nvlink, item.source
        if item.policy is not None:
            if policy is not None and item.policy != policy:
                raise InventoryError(
                    item.source,
                    "policy",
                    f"differs from the policy in {policy_source}; give the policy in one inventory",
                )
            policy, policy_source = item.policy, item.source
    links, links_source, note = _merged_links([(item.links, item.source) for item in items if item.links])
    warnings.extend(note)
    every = [node for item in items for node in item.nodes]
    known = {node.name for node in every}
    if len(known) == len(every):  # the common case: each node in one record, nothing to merge
        nodes, conflicts = _natural_order(items), list[Conflict]()
    else:
        for node in every:
            by_name.setdefault(node.name, []).append(node)
        nodes, conflicts = _merge_records(by_name)
    extra = tuple(sorted({n for n in extra_nodes if n not in known}, key=natural_key))
    sections = (("nvlink", nvlink_source), ("policy", policy_source), ("links", links_source))
    return MergedInventory(
        nodes=tuple(nodes),
        conflicts=tuple(conflicts),
        warnings=tuple(warnings),
        extra_nodes=extra,
        policy=policy,
        nvlink=nvlink,
        links=links,
        sources=tuple(dict.fromkeys(item.source for item in items)),
        sections=tuple((name, file) for name, file in sections if file),
    )


def _merged_links(given: Sequence[tuple[Any, str]]) -> tuple[Any, str, tuple[str, ...]]:
    """The one ``links:`` table of the files that give one ((table, file) in order), the file named for it
    and a note. Tables alike are one table. Tables that are each a provider's profile unchanged (what
    ``slurm-topo import gcp|aws|azure`` writes: ``links: {profile: …}`` alone) are a fleet across providers:
    per level the slower of them (``cost.links.slowest``), with a note naming each profile. Any other two
    different tables (a site's own figures, a calibration) are refused: give ``links:`` once."""
    if not given:
        return None, "", ()
    first, first_source = given[0]
    if all(table == first for table, _ in given):
        return first, first_source, ()
    from ..cost.links import profile_of, slowest

    profiles: dict[str, tuple[Any, str]] = {}  # each profile once: its table and the first file giving it
    first_name = profile_of(first)
    for table, source in given:
        name = profile_of(table)
        if name is not None:
            profiles.setdefault(name, (table, source))
        if table != first and (name is None or first_name is None):
            raise InventoryError(
                source, "links", f"differs from the links: in {first_source}; give links: once"
            )
    named = [f"{name} ({source})" for name, (_, source) in profiles.items()]
    listed = ", ".join(named[:-1]) + f" and {named[-1]}"
    note = (
        f"links: the provider profiles {listed} are merged into one table, per level the slower of them "
        "(lower bandwidth, higher latency): the cost of a job that may span them"
    )
    return slowest([table for table, _ in profiles.values()]), first_source, (note,)


def _natural_order(items: Sequence[Loaded]) -> list[Node]:
    """Every node of ``items`` (names all different) sorted by ``natural_key``. Each file says which stretches
    of its nodes are in that order already (``Loaded.ordered_runs``: one per entry of plain ranges): when the
    stretches, ordered by their first names, follow each other without overlap (each one's last name before
    the next one's first), they are the sorted list, read off with two keys a stretch instead of one a node.
    Otherwise (stretches that interleave) every node is sorted."""
    runs: list[tuple[tuple[Any, ...], tuple[Any, ...], tuple[Node, ...], int, int]] = []
    for item in items:
        nodes, start = item.nodes, 0
        ordered = [e for e in item.ordered_runs if e <= len(nodes)]
        for end in itertools.chain(ordered, range(ordered[-1] if ordered else 0, len(nodes) + 1)):
            if end > start:  # the nodes after the last known stretch: one stretch each
                runs.append(
                    (natural_key(nodes[start].name), natural_key(nodes[end - 1].name), nodes, start, end)
                )
                start = end
    runs.sort(key=lambda run: run[0])
    if all(runs[i][1] < runs[i + 1][0] for i in range(len(runs) - 1)):
        return [node for _, _, nodes, start, end in runs for node in nodes[start:end]]
    return sorted((node for item in items for node in item.nodes), key=lambda n: natural_key(n.name))


def _merge_records(by_name: dict[str, list[Node]]) -> tuple[list[Node], list[Conflict]]:
    """Nodes named by more than one record: each name's records merged by trust (ARCHITECTURE.md, "Trust"),
    in natural order, and the conflicts."""
    merged: list[Node] = []
    conflicts: list[Conflict] = []
    for name, records in by_name.items():
        if len(records) == 1:  # the common case: one record, nothing to merge
            merged.append(records[0])
            continue
        records.sort(key=lambda n: -n.source)  # stable: file order within a trust level
        best = records[0]
        for other in records[1:]:
            if other.source == best.source:
                best = _merge_same_trust(best, other)
            elif best.location.covers(other.location) and other.location != NO_LOCATION:
                located_by = other.located_by if best.location.region is None else best.location_source
                best = replace(
                    _fill(best, other),
                    location=_fill_location(best.location, other.location),
                    location_source=located_by,
                )
            else:
                if other.location != NO_LOCATION:
                    # a record that is elsewhere says nothing here: neither its domain nor its switches
                    other = replace(other, nvlink_domain=None, switches=())
                    conflicts.append(
                        Conflict(
                            name,
                            best.location,
                            best.source,
                            best.origin,
                            other.location,
                            other.source,
                            other.origin,
                        )
                    )
                best = _fill(best, other)
            conflicts += _below_location_conflicts(best, other)
        merged.append(best)
    merged.sort(key=lambda n: natural_key(n.name))
    return merged, conflicts


def _below_location_conflicts(best: Node, other: Node) -> list[Conflict]:
    """A less trusted record that names another NVLink domain, or other switches below the same network
    group, than the kept one: a conflict each (the kept values stay)."""
    out = []
    if other.nvlink_domain and best.nvlink_domain != other.nvlink_domain:
        out.append(
            Conflict(
                best.name,
                best.location,
                best.source,
                best.origin,
                best.location,
                other.source,
                other.origin,
                best.nvlink_domain,
                other.nvlink_domain,
            )
        )
    if other.switches and best.switches != other.switches:
        out.append(
            Conflict(
                best.name,
                best.location,
                best.source,
                best.origin,
                best.location,
                other.source,
                other.origin,
                kept_switches=best.switches,
                ignored_switches=other.switches,
            )
        )
    return out


def load_inventories(paths: Sequence[str | Path], extra_nodes: Sequence[str] = ()) -> Inventory:
    """Load and merge inventory files; the first bad value raises ``InventoryError``."""
    loaded: list[Loaded] = []
    for p in paths:
        loaded.append(load_inventory_file(p, MAX_NODES - sum(len(x.nodes) for x in loaded)))
    return merge(loaded, extra_nodes)
