"""The best-placement search (`cost/search.py`) through the provider's layers below the network group: a job
that one sub-block / lower network node holds is placed inside one (GCE listing with blocks and sub-blocks,
AWS `describe-instance-topology`), the layers never make a placement span a wider group or cost more, and a
fleet without layers gets exactly what the search gave before the layers (tests/search_before_switches.py)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import search_before_switches as before
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import level_words, predict, span_level
from slurm_topo.cost.comm import Fabric, PlanSpec, score_placement
from slurm_topo.cost.links import DEFAULT_TABLE, LinkTable, parse_links
from slurm_topo.cost.search import (
    SEARCH_LEVELS,
    Found,
    best_nodes,
    level_key,
    search_levels,
    switch_depth,
    switch_level,
)
from slurm_topo.sources.providers import Companion, import_listing

PROV = Path(__file__).parent / "fixtures" / "providers"


def _with_gpus(inv: Inventory, gpus: int = 8) -> Inventory:
    return dataclasses.replace(inv, nodes=tuple(dataclasses.replace(n, gpus=gpus) for n in inv.nodes))


def _stripped(inv: Inventory) -> Inventory:
    return dataclasses.replace(inv, nodes=tuple(dataclasses.replace(n, switches=()) for n in inv.nodes))


def _gce() -> Inventory:
    text = import_listing("gcp", (PROV / "gcp-instances-physical-topology.json").read_text()).text
    return _with_gpus(merge([parse_inventory(text)]))


def _aws() -> Inventory:
    topo = Companion((PROV / "aws-account-a-describe-instance-topology.json").read_text(), "topo-a.json")
    listing = (PROV / "aws-account-a-describe-instances.json").read_text()
    return _with_gpus(merge([parse_inventory(import_listing("aws", listing, topology=topo).text)]))


def _table(inv: Inventory) -> LinkTable:
    return inv.links if inv.links is not None else DEFAULT_TABLE


def _deepest_holding(fabric: Fabric, pool: Sequence[Node], count: int) -> int:
    """The deepest switch layer with one switch holding ``count`` of ``pool`` (0: none)."""
    depth = max((len(n.switches) for n in pool), default=0)
    for k in range(depth, 0, -1):
        sizes: dict[tuple[str, ...], int] = {}
        for n in pool:
            key = level_key(n, switch_level(k), fabric.domains)
            if key is not None:
                sizes[key] = sizes.get(key, 0) + 1
        if any(size >= count for size in sizes.values()):
            return k
    return 0


def _inside_one(fabric: Fabric, found: Found, level: str) -> bool:
    """All of ``found`` in one group of ``level``, or in one NVLink domain (tighter still)."""
    nodes = [fabric.node(n) for n in found.nodes]
    keys = {level_key(n, level, fabric.domains) for n in nodes}
    domains = {fabric.domains.get(n.name) for n in nodes}
    return (len(keys) == 1 and None not in keys) or (len(domains) == 1 and None not in domains)


def _check_tight(fabric: Fabric, pool: Sequence[Node], count: int) -> Found | None:
    """The search over ``pool``; where a switch of some layer holds ``count`` of it, the placement is inside
    one switch of the deepest such layer (or inside one NVLink domain)."""
    names = {n.name for n in pool}
    found = best_nodes(fabric, count, 1, eligible=lambda n: n.name in names)
    if found is None:
        assert len(pool) < count
        return None
    assert len(found.nodes) == count == len(set(found.nodes)) and set(found.nodes) <= names
    k = _deepest_holding(fabric, pool, count)
    if k and count > 1:
        assert _inside_one(fabric, found, switch_level(k)), (k, found)
        if found.level != "nvlink":
            assert found.level == switch_level(k)
    return found


# ---- the imported listings


@pytest.mark.parametrize("load", [_gce, _aws], ids=["gce", "aws"])
def test_a_job_one_switch_holds_is_placed_inside_one(load) -> None:  # type: ignore[no-untyped-def]
    """Every subset of the imported fleet as the eligible nodes, every job size: the tightest switch."""
    inv = load()
    fabric = Fabric.of(inv)
    nodes = list(inv.nodes)
    subsets = list(itertools.chain.from_iterable(itertools.combinations(nodes, r) for r in range(1, 7)))
    rng = random.Random(47)  # every subset up to 6 nodes; a seeded sample of the larger ones
    larger = [c for r in range(7, len(nodes) + 1) for c in itertools.combinations(nodes, r)]
    subsets += rng.sample(larger, min(len(larger), 600))
    switch_placed = 0
    for pool in subsets:
        for count in range(1, len(pool) + 1):
            found = _check_tight(fabric, pool, count)
            switch_placed += found is not None and switch_depth(found.level) > 0
    assert switch_placed > 100  # the layers decided many of them


def test_aws_two_nodes_under_one_lower_network_node() -> None:
    """p5-a-01 (nn-2a33…) and p5-a-05/06 (nn-2a34… / nn-3a55…) share top node nn-1a11…: without the
    layers the search took p5-a-01 + p5-a-05 (one network group, name order); with them it takes the two
    under one lowest node, and that placement costs less."""
    inv = _aws()
    pool = {"p5-a-01", "p5-a-03", "p5-a-05", "p5-a-06"}
    flat = best_nodes(Fabric.of(_stripped(inv)), 2, 8, eligible=_member(pool))
    assert flat is not None and flat.level == "network_group" and flat.nodes == ("p5-a-01", "p5-a-05")
    fabric = Fabric.of(inv)
    found = best_nodes(fabric, 2, 8, eligible=_member(pool))
    assert found is not None and found.level == "switch.2" and set(found.nodes) == {"p5-a-05", "p5-a-06"}
    assert found.group == (
        "us-east-1",
        "use1-az1",
        "nn-1a11111111example",
        "nn-2a34343434example",
        "nn-3a55555555example",
    )
    plan = PlanSpec(gpus_per_node=8, allreduce_bytes=1e10)
    mine = score_placement(fabric, found.nodes, plan, _table(inv))
    theirs = score_placement(fabric, flat.nodes, plan, _table(inv))
    assert mine.seconds < theirs.seconds
    assert level_words(found.level) == "one switch (layer 2 below the network group)"
    # three nodes: one top node's two lower ones, the whole of one and one of the other
    found = best_nodes(fabric, 3, 8, eligible=lambda n: n.name in pool | {"p5-a-02"})
    assert found is not None and found.level == "network_group"
    assert len({fabric.node(n).switches[0] for n in found.nodes}) == 2


def test_gce_levels_and_the_a4x_domains() -> None:
    """The GCE import: a sub-block and a host layer (switch.2 deepest), NVLink domains of the A4X sub-blocks
    tried first; a 4-node job of block 0f9e… is its one sub-block."""
    inv = _gce()
    fabric = Fabric.of(inv)
    assert search_levels(inv.nodes, fabric.domains) == [
        "nvlink",
        "switch.2",
        "switch.1",
        "network_group",
        "zone",
        "region",
        "any",
    ]
    a3 = {"a3h-01", "a3h-02", "a3u-01", "a3u-02"}
    found = best_nodes(fabric, 4, 8, eligible=lambda n: n.name in a3)
    assert found is not None and found.level == "switch.1" and set(found.nodes) == a3
    found = best_nodes(fabric, 2, 8)
    assert found is not None and found.level == "nvlink"
    found = best_nodes(fabric, 2, 8, eligible=lambda n: n.name in a3)
    assert found is not None and found.level == "switch.2" and set(found.nodes) == {"a3h-01", "a3h-02"}


# ---- seeded random fleets


def _random_fleet(seed: int, layers: bool) -> list[Node]:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(1, 40)):
        region = rng.choice(["r0", "r1", None]) if rng.random() < 0.2 else rng.choice(["r0", "r1"])
        zone = rng.choice(["z0", "z1", None]) if region else None
        group = rng.choice(["g0", "g1", "g2", None]) if zone else None
        switches: tuple[str, ...] = ()
        if layers and group is not None:
            switches = tuple(rng.choice(["s0", "s1"]) for _ in range(rng.choice([0, 1, 1, 2, 2, 3])))
        domain = rng.choice(["d0", "d1", "d2"]) if rng.random() < 0.15 else None
        # an NVLink domain is a rack's: inside one network group (a domain across regions is no fleet's, and
        # span_level would call two regions NVLink-close)
        domain = f"{region}.{zone}.{group}.{domain}" if domain is not None and group is not None else None
        nodes.append(
            Node(
                f"n{i}",
                Location(region, zone, group),
                gpus=rng.choice([4, 8, 8]),
                switches=switches,
                nvlink_domain=domain,
            )
        )
    return nodes


def _member(pool: set[str]) -> Callable[[Node], bool]:
    return lambda n: n.name in pool


def _ask(rng: random.Random, nodes: Sequence[Node]) -> tuple[int, int, set[str]]:
    pool = {n.name for n in nodes if rng.random() < 0.8}
    return rng.randint(1, max(1, len(pool))), rng.choice([1, 4, 8]), pool


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_fleet_without_layers_gets_what_it_got_before(seed: int) -> None:
    nodes = _random_fleet(seed, layers=False)
    fabric = Fabric.of(Inventory(tuple(nodes)))
    rng = random.Random(seed ^ 0x5EED)
    assert search_levels(nodes, fabric.domains) == [
        lvl for lvl in SEARCH_LEVELS if lvl != "nvlink" or fabric.domains
    ]
    for _ in range(8):
        count, gpus, pool = _ask(rng, nodes)
        mine = best_nodes(fabric, count, gpus, eligible=_member(pool))
        theirs = before.best_nodes(fabric, count, gpus, eligible=_member(pool))
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert (mine.level, mine.group, mine.nodes) == (theirs.level, theirs.group, theirs.nodes)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_layers_never_widen_a_placement_nor_make_it_cost_more(seed: int) -> None:
    """The same fleet with and without its layers: the placement spans the same group level (the layers
    only choose inside it), is the same one where an NVLink domain holds the job, is inside one switch of
    the deepest layer that holds it, and costs no more (the cost model sees the layers)."""
    nodes = _random_fleet(seed, layers=True)
    inv = Inventory(tuple(nodes))
    fabric, flat = Fabric.of(inv), Fabric.of(_stripped(inv))
    rng = random.Random(seed ^ 0x5EED)
    for _ in range(8):
        count, gpus, pool = _ask(rng, nodes)
        mine = best_nodes(fabric, count, gpus, eligible=_member(pool))
        theirs = best_nodes(flat, count, gpus, eligible=_member(pool))
        assert (mine is None) == (theirs is None)
        if mine is None or theirs is None:
            continue
        assert span_level(fabric, mine.nodes) == span_level(fabric, theirs.nodes)
        if theirs.level == "nvlink":
            assert mine == theirs
        _check_tight(fabric, [n for n in nodes if n.name in pool and (n.gpus or 0) >= gpus], count)
        plan = PlanSpec(gpus_per_node=gpus, allreduce_bytes=1e9)
        assert score_placement(fabric, mine.nodes, plan).seconds <= score_placement(
            fabric, theirs.nodes, plan
        ).seconds * (1 + 1e-9)


def test_switch_levels_named_as_capacity_names_them() -> None:
    from slurm_topo.reports.capacity import capacity_levels

    inv = _aws()
    levels = search_levels(inv.nodes, {})
    assert [lv for lv in levels if switch_depth(lv)] == [
        lv for lv in capacity_levels(inv) if lv.startswith("switch.")
    ]
    assert switch_depth("switch.0") == 0 and switch_depth("switch") == 0 and switch_depth("zone") == 0
    # a profile table is monotone with the switch level inside the group
    table = parse_links({"profile": "aws"})
    assert table["switch"].latency_us < table["network_group"].latency_us


def test_predict_compares_a_placement_across_lower_nodes_with_one_under_one() -> None:
    """`explain`/`cost`'s comparison: p5-a-01 + p5-a-05 (two lower nodes of one top node) against the best
    of the same pool, two under one lowest node: slower, and said so."""
    inv = _aws()
    pool = {"p5-a-01", "p5-a-03", "p5-a-05", "p5-a-06"}
    plan = PlanSpec(gpus_per_node=8, allreduce_bytes=1e8)
    got = predict(Fabric.of(inv), ["p5-a-01", "p5-a-05"], plan, _table(inv), eligible=_member(pool))
    assert got.best_level == "switch.2" and got.best is not None
    assert got.comm_slowdown is not None and got.comm_slowdown > 1
    flat = _stripped(inv)
    same = predict(Fabric.of(flat), ["p5-a-01", "p5-a-05"], plan, _table(flat), eligible=_member(pool))
    assert same.best_level == "network_group" and same.comm_slowdown == 1  # without layers: already the best
