"""The provider's layers below the network group in the cost model: a GCE sub-block or an AWS lower network
node is the `switch` level (cheaper than the block), `switch_tree` puts the deeper switches below the group
so pipelines stay under one, `capacity` counts them; a fleet without them costs exactly as before."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory
from slurm_topo.core.allocation import SwitchTree
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import comm
from slurm_topo.cost.comm import Fabric, PlanSpec, place_ranks, score_placement, switch_tree
from slurm_topo.cost.links import DEFAULT_TABLE, LinkTable, parse_links
from slurm_topo.reports.capacity import (
    CAPACITY_LEVELS,
    capacity,
    capacity_levels,
    format_capacity,
    idle_states,
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


DP = PlanSpec(gpus_per_node=8, allreduce_bytes=1e10)


def _level_and_seconds(inv: Inventory, nodes: list[str]) -> tuple[str, float]:
    cost = score_placement(Fabric.of(inv), nodes, DP, _table(inv))
    (term,) = cost.terms
    return term.level, cost.seconds


def test_gce_one_sub_block_costs_less_than_two_blocks() -> None:
    """a3u-01/a3u-02 share sub-block 9a8b… of block 0f9e…; a4x-03 is in block a1b2… (listing fixture)."""
    inv = _gce()
    assert {n.name: n.switches[:1] for n in inv.nodes}["a3u-01"] == ("9a8b7c6d5e4f30211f2e3d4c5b6a7988",)
    sub_block = _level_and_seconds(inv, ["a3u-01", "a3u-02"])
    two_blocks = _level_and_seconds(inv, ["a3u-01", "a4x-03"])
    assert sub_block[0] == "switch" and two_blocks[0] == "zone"
    assert sub_block[1] < two_blocks[1]
    # without the layers the same pair is one block, and costs more than under its sub-block (the gcp
    # profile costs a block as its zone: one VPC, the VM's egress cap)
    flat = _level_and_seconds(_stripped(inv), ["a3u-01", "a3u-02"])
    assert flat[0] == "network_group" and sub_block[1] < flat[1] <= two_blocks[1]
    table = _table(inv)
    for level, seconds in (sub_block, two_blocks, flat):
        assert math.isclose(seconds, comm.ring_allreduce_seconds(16, 1e10, table[level]))


def test_aws_lower_network_node_costs_less_than_the_top_one_and_the_zone() -> None:
    """p5-a-01/02 under nn-2a33…, p5-a-05 under nn-2a34… (same top node nn-1a11…), p5-a-03 under another top
    node of the same AZ."""
    inv = _aws()
    leaf = _level_and_seconds(inv, ["p5-a-01", "p5-a-02"])
    group = _level_and_seconds(inv, ["p5-a-01", "p5-a-05"])
    zone = _level_and_seconds(inv, ["p5-a-01", "p5-a-03"])
    assert (leaf[0], group[0], zone[0]) == ("switch", "network_group", "zone")
    assert leaf[1] < group[1] < zone[1]
    # the third layer (p5-a-05/06 under nn-3a55…) is one switch too: its first label is alike
    assert _level_and_seconds(inv, ["p5-a-05", "p5-a-06"])[0] == "switch"


def test_a_pipeline_stays_under_one_lower_switch() -> None:
    """Four nodes of one AWS top node, two under each lower node, listed alternately: each pipeline of two
    8-GPU stages takes two nodes of one lower node (the tree's deeper subtrees), where the tree without the
    layers pairs them in list order across the lower nodes."""
    inv = _aws()
    nodes = ["p5-a-01", "p5-a-05", "p5-a-02", "p5-a-06"]
    spec = PlanSpec(tp=8, pp=2, dp=2, gpus_per_node=8, pp_bytes=1e9, allreduce_bytes=1e9)

    def pipelines(fleet: Inventory) -> set[frozenset[str]]:
        ranks = place_ranks(Fabric.of(fleet), nodes, spec)
        return {frozenset(r.node for r in ranks if r.dp == d) for d in range(2)}

    assert pipelines(inv) == {frozenset({"p5-a-01", "p5-a-02"}), frozenset({"p5-a-05", "p5-a-06"})}
    assert pipelines(_stripped(inv)) == {frozenset({"p5-a-01", "p5-a-05"}), frozenset({"p5-a-02", "p5-a-06"})}
    with_layers = score_placement(Fabric.of(inv), nodes, spec, _table(inv))
    pp = next(t for t in with_layers.terms if t.kind == "pp")
    assert pp.level == "switch"


def test_switch_tree_puts_the_deeper_switches_below_the_group() -> None:
    inv = _aws()
    tree = switch_tree(inv.nodes)
    path = tree.path("p5-a-05")
    group = "ng:us-east-1/use1-az1/nn-1a11111111example"
    assert path == (
        f"sw:{group}/nn-2a34343434example/nn-3a55555555example",
        f"sw:{group}/nn-2a34343434example",
        group,
        "zone:us-east-1/use1-az1",
        "region:us-east-1",
        "/",
    )
    assert [tree.level[s] for s in path] == [0, 1, 2, 3, 4, 5]
    assert (
        tree.path("p5-a-01")[0] == f"sw:{group}/nn-2a33333333example"
        and tree.level[tree.leaf["p5-a-01"]] == 1
    )


# ---- a fleet without the layers: exactly as before


def _old_switch_tree(nodes: Iterable[Node]) -> SwitchTree:
    """comm.switch_tree before the layers (commit 37164e1): leaf = network group, then zone, region, root."""
    leaf: dict[str, str] = {}
    parent: dict[str, str] = {}
    level: dict[str, int] = {"/": 3}
    for n in nodes:
        loc = n.location
        chain: list[tuple[str, int]] = []
        if loc.region is not None:
            if loc.zone is not None:
                if loc.network_group is not None:
                    chain.append((f"ng:{loc.region}/{loc.zone}/{loc.network_group}", 0))
                chain.append((f"zone:{loc.region}/{loc.zone}", 1))
            chain.append((f"region:{loc.region}", 2))
        chain.append(("/", 3))
        leaf[n.name] = chain[0][0]
        for (sw, lvl), (up, _) in zip(chain, chain[1:], strict=False):
            parent[sw] = up
            level[sw] = lvl
    return SwitchTree(leaf, parent, level)


def _old_network_level(a: Node, b: Node, domains: Mapping[str, str] | None = None, **_: object) -> str:
    """comm.network_level before the layers (commit 37164e1): the switches below a group are not looked at."""
    if domains:
        da, db = domains.get(a.name), domains.get(b.name)
        if da is not None and da == db:
            return "nvlink"
    la, lb = a.location, b.location
    if la.region is None or la.region != lb.region:
        return "any"
    if la.zone is None or la.zone != lb.zone:
        return "region"
    if la.network_group is None or la.network_group != lb.network_group:
        return "zone"
    return "network_group"


def _random_fleet(rng: random.Random) -> Inventory:
    """2-12 nodes, most of them in one network group (where the layers decide the level), some elsewhere or
    without a location; 0-3 layers below the group, two labels a layer."""
    nodes = []
    for k in range(rng.randint(2, 12)):
        far = rng.random() < 0.25
        region = rng.choice(["r1", "r2", None]) if far else "r1"
        zone = (rng.choice(["z1", "z2", None]) if far else "z1") if region else None
        group = (rng.choice(["g1", "g2", None]) if far else "g1") if zone else None
        layers = tuple(rng.choice(["s1", "s2"]) + f".{d}" for d in range(rng.randint(0, 3))) if group else ()
        nodes.append(
            Node(f"n{k:02d}", Location(region, zone, group), gpus=rng.choice([4, 8]), switches=layers)
        )
    return Inventory(nodes=tuple(nodes))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_without_the_layers_the_fleet_costs_exactly_as_before(seed: int) -> None:
    """Seeded random fleets with random layers and random plans: the fleet with its layers stripped costs,
    with today's code, exactly what the old path (the tree and the level rule before the layers, which never
    looked at them) gives on the fleet with its layers; and its tree is the old tree."""
    rng = random.Random(seed)
    fleet = _random_fleet(rng)
    flat = _stripped(fleet)
    assert switch_tree(flat.nodes) == _old_switch_tree(flat.nodes)
    assert switch_tree(flat.nodes) == _old_switch_tree(fleet.nodes)
    names = [n.name for n in fleet.nodes]
    chosen = rng.sample(names, rng.randint(1, len(names)))
    g = rng.choice([1, 2, 4])
    tp = rng.choice([t for t in (1, 2, 4) if t <= g])
    pp = rng.choice([p for p in (1, 2, 4) if (len(chosen) * g) % (tp * p) == 0])
    spec = PlanSpec(tp=tp, pp=pp, gpus_per_node=g, allreduce_bytes=1e10, tp_bytes=1e8, pp_bytes=1e8)
    table = parse_links({"profile": rng.choice(["default", "gcp", "aws", "azure"])})
    now = score_placement(Fabric.of(flat), chosen, spec, table)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(comm, "switch_tree", _old_switch_tree)
        m.setattr(comm, "network_level", _old_network_level)
        before = score_placement(Fabric.of(fleet), chosen, spec, table)
    assert now == before
    assert all(t.level != "switch" for t in now.terms)


def test_a_table_written_before_the_level_keeps_its_group_cost() -> None:
    """A site's links: giving network_group (and no switch) has its switch level follow it: never slower than
    the group, so the order holds, and the group's own cost is the site's figure."""
    table = parse_links({"network_group": {"bandwidth": 100, "latency_us": 3}, "zone": {"bandwidth": 80}})
    assert table["network_group"].bandwidth == 100 and table["switch"].bandwidth == 100
    assert table["switch"].latency_us < table["network_group"].latency_us
    assert table.as_dict()["switch"] == {"bandwidth": 100, "latency_us": table["switch"].latency_us}
    own = parse_links({"switch": {"bandwidth": 200, "latency_us": 1}, "network_group": {"bandwidth": 100}})
    assert own["switch"].bandwidth == 200
    with pytest.raises(Exception, match="above switch"):
        parse_links({"switch": {"bandwidth": 10}, "network_group": {"bandwidth": 100}})


# ---- capacity


def _by_hand(inv: Inventory, nodes: int, depth: int) -> int:
    """Jobs of ``nodes`` whole 8-GPU nodes inside one switch of layer ``depth`` (every node idle)."""
    groups: dict[tuple[object, ...], int] = {}
    for n in inv.nodes:
        if n.location.network_group is not None and len(n.switches) >= depth:
            key = (n.location.region, n.location.zone, n.location.network_group, *n.switches[:depth])
            groups[key] = groups.get(key, 0) + 1
    return sum(count // nodes for count in groups.values())


@pytest.mark.parametrize("fleet", [_gce, _aws])
def test_capacity_counts_each_layer_and_names_the_deepest_a_shape_fits(fleet) -> None:  # type: ignore[no-untyped-def]
    inv = fleet()
    depth = max(len(n.switches) for n in inv.nodes)
    levels = capacity_levels(inv)
    assert levels == (*(f"switch.{k}" for k in range(depth, 0, -1)), *CAPACITY_LEVELS)
    shapes = [(1, 8), (2, 8), (3, 8), (4, 8)]
    result = capacity(inv, idle_states(inv), shapes)
    flat = capacity(_stripped(inv), idle_states(inv), shapes)
    for shape, old in zip(result.shapes, flat.shapes, strict=True):
        rows = {lv.level: lv.jobs for lv in shape.levels}
        for k in range(1, depth + 1):
            assert rows[f"switch.{k}"] == _by_hand(inv, shape.nodes, k), (shape.shape, k)
        jobs = [lv.jobs for lv in shape.levels]
        assert jobs == sorted(jobs)  # a wider level never holds fewer
        assert shape.deepest == next((lv.level for lv in shape.levels if lv.jobs), None)
        assert shape.as_dict()["deepest_level"] == shape.deepest
        # the group levels are as they were without the layers
        assert shape.levels[depth:] == old.levels and [lv.level for lv in old.levels] == list(CAPACITY_LEVELS)
    assert "deepest level each shape fits" in format_capacity(result)
    assert "deepest level" not in format_capacity(flat)
