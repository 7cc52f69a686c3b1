"""The communication cost model (slurm_topo.cost): the concept's numbers, rings, terms, links, properties."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.allocation import Allocation
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import (
    DEFAULT_LINKS,
    DEFAULT_TABLE,
    LINK_LEVELS,
    Fabric,
    Link,
    PlanSpec,
    best_nodes,
    describe,
    parse_bytes,
    parse_links,
    parse_plan,
    place_ranks,
    predict,
    predict_job,
    ring_allreduce,
    ring_allreduce_seconds,
    score_placement,
)
from slurm_topo.cost.links import NETWORK_LEVELS
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.srun.plan import plan_srun

FLEET = Path(__file__).resolve().parents[1] / "docker-slurm" / "fleet.yaml"

FIXTURES = Path(__file__).parent / "fixtures"
CONCEPT = {  # the links: example, with α = 0
    "nvlink": {"bandwidth": 450, "latency_us": 0},
    "node": {"bandwidth": 450, "latency_us": 0},
    "network_group": {"bandwidth": 50, "latency_us": 0},
    "zone": {"bandwidth": 25, "latency_us": 0},
    "region": {"bandwidth": 12, "latency_us": 0},
    "any": {"bandwidth": 5, "latency_us": 0},
}


def fleet(*specs: tuple[str, str | None, str | None, str | None, int]) -> Fabric:
    nodes = [Node(name, Location(r, z, g), gpus=gpus) for name, r, z, g, gpus in specs]
    return Fabric.of(Inventory(tuple(nodes)))


def nv18_topology():  # type: ignore[no-untyped-def]
    return parse_topo_matrix(
        (FIXTURES / "real/topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt").read_text()
    )


def islands_topology():  # type: ignore[no-untyped-def]
    return parse_topo_matrix((FIXTURES / "synthetic/islands-2x4-nv18.txt").read_text())


# ---- the concept's two numbers


def test_concept_one_nvlink_node() -> None:
    node = Node("a1", Location("r", "z", "g"), gpus=8, gpu_topology=nv18_topology())
    fabric = Fabric.of(Inventory((node,)))
    cost = score_placement(fabric, ["a1"], PlanSpec(dp=8, allreduce_bytes=1e10), parse_links(CONCEPT))
    assert [t.kind for t in cost.terms] == ["dp"]
    assert cost.terms[0].level == "nvlink"
    assert cost.seconds == pytest.approx(2 * 7 / 8 * 10 / 450)
    assert round(cost.seconds, 4) == 0.0389


def test_concept_eight_nodes_one_network_group() -> None:
    fabric = fleet(*[(f"n{i}", "r", "z", "g", 1) for i in range(8)])
    cost = score_placement(
        fabric, [f"n{i}" for i in range(8)], PlanSpec(dp=8, allreduce_bytes=1e10), parse_links(CONCEPT)
    )
    assert cost.terms[0].level == "network_group"
    assert cost.seconds == pytest.approx(0.35)
    assert cost.bottleneck is not None and cost.bottleneck.level == "network_group"


def test_default_latency_adds_alpha() -> None:
    fabric = fleet(*[(f"n{i}", "r", "z", "g", 1) for i in range(8)])
    cost = score_placement(fabric, [f"n{i}" for i in range(8)], PlanSpec(dp=8, allreduce_bytes=1e10))
    assert cost.seconds == pytest.approx(0.35 + 2 * 7 * DEFAULT_LINKS["network_group"].latency_s)


# ---- rings


def test_ring_with_one_slow_hop_takes_its_bandwidth() -> None:
    # 4 nodes: three in one network group, one in another zone of the same region
    fabric = fleet(
        ("a", "r", "z1", "g", 1), ("b", "r", "z1", "g", 1), ("c", "r", "z1", "g", 1), ("d", "r", "z2", "h", 1)
    )
    ring = [("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    seconds, hop = ring_allreduce(fabric, ring, 1e9, DEFAULT_TABLE)
    assert hop.level == "region"
    assert seconds == pytest.approx(ring_allreduce_seconds(4, 1e9, DEFAULT_LINKS["region"]))
    fast, fast_hop = ring_allreduce(fabric, ring[:3], 1e9, DEFAULT_TABLE)
    assert fast_hop.level == "network_group" and fast < seconds


def test_a_measured_port_rate_paces_the_ring_on_top_of_rails() -> None:
    """A node whose port runs at half its rate (``net_ratio``, from the health records) halves the bandwidth
    of its network hops; on a rail-optimised fabric the hop it slows is the cross-rail (zone) one, not the
    network_group one it would be on one rail."""
    nodes = (
        Node("a", Location("r", "z", "g"), gpus=8),
        Node("b", Location("r", "z", "g"), gpus=8, net_ratio=0.5),
    )
    fabric = Fabric({n.name: n for n in nodes}, rail_optimised=True)
    table = parse_links(CONCEPT)
    same_rail, hop = ring_allreduce(fabric, [("a", 0), ("b", 0)], 1e9, table)
    assert (hop.level, hop.link.bandwidth) == ("network_group", 25.0)
    crossing, hop = ring_allreduce(fabric, [("a", 0), ("b", 1)], 1e9, table)
    assert (hop.level, hop.link.bandwidth) == ("zone", 12.5)
    assert crossing == pytest.approx(2 * same_rail)
    plain = Fabric({"a": nodes[0], "b": Node("b", Location("r", "z", "g"), gpus=8)}, rail_optimised=True)
    assert ring_allreduce(plain, [("a", 0), ("b", 1)], 1e9, table)[1].link.bandwidth == 25.0


def test_ring_formula() -> None:
    link = Link(bandwidth=10, latency_us=3)
    assert ring_allreduce_seconds(1, 1e9, link) == 0
    assert ring_allreduce_seconds(4, 1e9, link) == pytest.approx(2 * 3 * 3e-6 + 2 * 3 / 4 * 1e9 / 10e9)


def test_intra_node_levels_from_link_data() -> None:
    node = Node("x", Location("r", "z", "g"), gpus=8, gpu_topology=islands_topology())
    fabric = Fabric.of(Inventory((node,)))
    inside, hop = ring_allreduce(fabric, [("x", 0), ("x", 1), ("x", 2), ("x", 3)], 1e9, DEFAULT_TABLE)
    assert hop.level == "nvlink"
    across, hop2 = ring_allreduce(fabric, [("x", 0), ("x", 1), ("x", 4), ("x", 5)], 1e9, DEFAULT_TABLE)
    assert hop2.level in ("pcie", "sys") and across > inside


def test_nvlink_domain_across_nodes() -> None:
    nodes = (Node("a", Location("r", "z", "g"), gpus=4), Node("b", Location("r", "z", "g"), gpus=4))
    fabric = Fabric.of(Inventory(nodes), domains={"a": "nvl72-1", "b": "nvl72-1"})
    _, hop = ring_allreduce(fabric, [("a", 0), ("b", 0)], 1e9, DEFAULT_TABLE)
    assert hop.level == "nvlink"


# ---- terms of a plan


def test_term_counts_on_a_known_plan() -> None:
    fabric = fleet(("a", "r", "z", "g", 4), ("b", "r", "z", "g", 4))
    spec = PlanSpec(tp=2, pp=2, dp=2, allreduce_bytes=8e9, tp_bytes=1e9, pp_bytes=1e8)
    cost = score_placement(fabric, ["a", "b"], spec)
    got = {t.kind: (t.groups, t.ranks, t.bytes) for t in cost.terms}
    assert got == {"tp": (4, 2, 1e9), "pp": (4, 2, 1e8), "dp": (4, 2, 2e9)}
    assert cost.seconds == pytest.approx(sum(t.seconds for t in cost.terms))
    assert cost.bottleneck == max(cost.terms, key=lambda t: t.seconds)


def test_missing_bytes_drop_terms_with_a_note() -> None:
    fabric = fleet(("a", "r", "z", "g", 8))
    cost = score_placement(fabric, ["a"], PlanSpec(tp=2, pp=2, allreduce_bytes=1e9))
    assert [t.kind for t in cost.terms] == ["dp"]
    assert len(cost.notes) == 2


def test_ranks_follow_gpulayer_srun() -> None:
    fabric = fleet(("a", "r", "z", "g", 4), ("b", "r", "z", "h", 4))
    spec = PlanSpec(tp=2, pp=2, order="tp-pp-dp")
    ranks = place_ranks(fabric, ["a", "b"], spec)
    alloc = Allocation("cost", ("a", "b"), {"a": (0, 1, 2, 3), "b": (0, 1, 2, 3)})
    rows = plan_srun(alloc, tp=2, pp=2, order="tp-pp-dp").rows
    assert [(r.rank, r.node, r.gpu, r.tp, r.pp, r.dp) for r in ranks] == [
        (r.rank, r.node, r.gpus[0], r.tp, r.pp, r.dp) for r in rows
    ]


def test_pp_term_sums_stage_boundaries() -> None:
    fabric = fleet(("a", "r", "z", "g", 1), ("b", "r", "z", "g", 1), ("c", "r", "z", "h", 1))
    cost = score_placement(fabric, ["a", "b", "c"], PlanSpec(pp=3, pp_bytes=1e9), DEFAULT_TABLE)
    (term,) = cost.terms
    ng, zone = DEFAULT_LINKS["network_group"], DEFAULT_LINKS["zone"]
    assert term.seconds == pytest.approx(
        ng.latency_s + 1e9 / ng.bytes_per_s + zone.latency_s + 1e9 / zone.bytes_per_s
    )
    assert term.level == "zone"


def test_bad_plans() -> None:
    fabric = fleet(("a", "r", "z", "g", 4))
    with pytest.raises(InputError, match="does not divide"):
        place_ranks(fabric, ["a"], PlanSpec(tp=3))
    with pytest.raises(InputError, match="not in the inventory"):
        place_ranks(fabric, ["zz"], PlanSpec())
    with pytest.raises(InputError, match="fewer than --gpus-per-node"):
        place_ranks(fabric, ["a"], PlanSpec(gpus_per_node=8))


# ---- links: and sizes


def test_parse_links_defaults_and_overrides() -> None:
    assert parse_links(None) is DEFAULT_TABLE
    table = parse_links({"zone": {"bandwidth": 30}, "network-group": {"latency_us": 2}})
    assert table["zone"] == Link(30, DEFAULT_LINKS["zone"].latency_us)
    assert table["network_group"] == Link(DEFAULT_LINKS["network_group"].bandwidth, 2)
    assert set(table.links) == set(LINK_LEVELS)


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ([1], "must be a mapping"),
        ({"spine": {"bandwidth": 1}}, "unknown level"),
        ({"zone": 5}, "must be a mapping"),
        ({"zone": {"bw": 5}}, "unknown key 'bw'"),
        ({"zone": {}}, "give bandwidth"),
        ({"zone": {"bandwidth": 0}}, "must be above 0"),
        ({"zone": {"bandwidth": "fast"}}, "must be a number"),
        ({"zone": {"bandwidth": True}}, "must be a number"),
        ({"zone": {"latency_us": -1}}, "at least 0"),
        ({"zone": {"bandwidth": float("nan")}}, "above 0"),
        ({"zone": {"bandwidth": 80}}, "zone bandwidth .80. is above network_group"),
        ({"region": {"latency_us": 1}}, "region latency_us .1. is below zone"),
        ({"ng": {"bandwidth": 60}, "network_group": {"bandwidth": 60}}, "the same level"),
    ],
)
def test_parse_links_refuses(mapping: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_links(mapping)
    assert "\n" not in str(info.value)


def test_parse_bytes_and_plan() -> None:
    assert parse_bytes("10G") == 1e10 and parse_bytes("1e10") == 1e10 and parse_bytes("2GiB") == 2 * 2**30
    assert parse_bytes("512") == 512
    for bad in ("", "10X", "-1G", "G", "1e999"):
        with pytest.raises(InputError):
            parse_bytes(bad)
    spec = parse_plan("tp=8,pp=4,bytes=10G,pp_bytes=1M")
    assert (spec.tp, spec.pp, spec.dp, spec.allreduce_bytes, spec.pp_bytes, spec.tp_bytes) == (
        8,
        4,
        None,
        1e10,
        1e6,
        None,
    )
    for bad in ("tp=0", "tp=x", "foo=1", "tp=2,tp=4", "tp"):
        with pytest.raises(InputError):
            parse_plan(bad)


# ---- best placement


def test_best_nodes_takes_the_tightest_group() -> None:
    specs = [(f"a{i}", "r1", "z1", "g1", 8) for i in range(3)]
    specs += [(f"b{i}", "r1", "z1", "g2", 8) for i in range(4)]
    specs += [(f"c{i}", "r2", "z9", "g9", 8) for i in range(2)]
    fabric = fleet(*specs)
    found = best_nodes(fabric, 4, 8)
    assert (
        found is not None
        and found.level == "network_group"
        and set(found.nodes) == {f"b{i}" for i in range(4)}
    )
    found = best_nodes(fabric, 6, 8)  # zone z1: 4 + 2 of 3 (whole largest first)
    assert found is not None and found.level == "zone"
    assert sum(n.startswith("b") for n in found.nodes) == 4
    found = best_nodes(fabric, 9, 8)
    assert found is not None and found.level == "any"
    assert best_nodes(fabric, 10, 8) is None
    assert best_nodes(fabric, 2, 16) is None


def test_best_fit_for_the_remainder() -> None:
    specs = [(f"a{i}", "r", "z", "g8a", 1) for i in range(8)]
    specs += [(f"b{i}", "r", "z", "g8b", 1) for i in range(8)]
    specs += [(f"c{i}", "r", "z", "g4", 1) for i in range(4)]
    found = best_nodes(fleet(*specs), 12, 1)
    assert found is not None
    assert sum(n.startswith("c") for n in found.nodes) == 4  # 8 + 4, not 8 + half of 8


def test_predict_slowdown_across_zones() -> None:
    specs = [(f"a{i}", "r", "z1", "g1", 8) for i in range(4)] + [
        (f"b{i}", "r", "z2", "g2", 8) for i in range(4)
    ]
    fabric = fleet(*specs)
    spec = PlanSpec(tp=8, allreduce_bytes=1e10)
    spread = predict(fabric, ["a0", "a1", "b0", "b1"], spec)
    assert spread.best is not None and spread.best_level == "network_group"
    assert spread.current.terms[0].level == "region"
    assert spread.comm_slowdown is not None and spread.comm_slowdown > 3
    # the step: communication is the site default 25 % of the best step, so s = 1 + 0.25 (c - 1)
    assert spread.slowdown == pytest.approx(1 + 0.25 * (spread.comm_slowdown - 1))
    tight = predict(fabric, ["a0", "a1", "a2", "a3"], spec)
    assert tight.slowdown == pytest.approx(1.0)
    busy = predict(
        fabric, ["a0", "a1", "b0", "b1"], spec, eligible=lambda n: n.name not in ("a2", "a3", "b2", "b3")
    )
    assert busy.slowdown == pytest.approx(1.0)


# ---- properties

_levels = st.sampled_from(NETWORK_LEVELS)


@st.composite
def placements(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 6))
    g = draw(st.sampled_from([1, 2, 4]))
    specs = []
    for i in range(n):
        region = draw(st.sampled_from(["r1", "r2", None]))
        zone = draw(st.sampled_from(["z1", "z2"])) if region else None
        group = draw(st.sampled_from(["g1", "g2"])) if zone else None
        specs.append((f"n{i}", region, zone, group, g))
    tp = draw(st.sampled_from([t for t in (1, 2, 4) if t <= g]))
    total = n * g // tp
    pp = draw(st.sampled_from([p for p in (1, 2, 3) if total % p == 0]))
    spec = PlanSpec(tp=tp, pp=pp, allreduce_bytes=draw(st.floats(0, 1e11)), tp_bytes=1e9, pp_bytes=1e8)
    return fleet(*specs), [s[0] for s in specs], spec


@settings(max_examples=60, deadline=None)
@given(placements(), st.sampled_from(LINK_LEVELS), st.floats(1.01, 100), st.floats(0, 1e4))
def test_cost_is_monotone_when_a_link_gets_slower(case, level, factor, extra_us) -> None:  # type: ignore[no-untyped-def]
    fabric, nodes, spec = case
    base = score_placement(fabric, nodes, spec)
    link = DEFAULT_LINKS[level]
    slower = DEFAULT_TABLE.with_link(level, Link(link.bandwidth / factor, link.latency_us + extra_us))
    assert score_placement(fabric, nodes, spec, slower).seconds >= base.seconds
    assert math.isfinite(base.seconds) and base.seconds >= 0


@settings(max_examples=40, deadline=None)
@given(placements())
def test_best_is_never_worse(case) -> None:  # type: ignore[no-untyped-def]
    fabric, nodes, spec = case
    pred = predict(fabric, nodes, spec)
    assert pred.best is not None and pred.slowdown is not None
    assert pred.best.seconds <= pred.current.seconds * (1 + 1e-9)
    assert pred.slowdown >= 1 - 1e-9


def test_cross_rail_hop_counts_as_spine() -> None:
    nodes = (Node("a", Location("r", "z", "g"), gpus=8), Node("b", Location("r", "z", "g"), gpus=8))
    plain = Fabric.of(Inventory(nodes))
    rails = Fabric.of(Inventory(nodes), rail_optimised=True)
    assert ring_allreduce(plain, [("a", 0), ("b", 1)], 1e9, DEFAULT_TABLE)[1].level == "network_group"
    assert ring_allreduce(rails, [("a", 0), ("b", 1)], 1e9, DEFAULT_TABLE)[1].level == "zone"
    assert ring_allreduce(rails, [("a", 3), ("b", 3)], 1e9, DEFAULT_TABLE)[1].level == "network_group"
    same = [("a", 0), ("a", 2), ("b", 0), ("b", 2)]
    assert ring_allreduce(rails, same, 1e9, DEFAULT_TABLE)[1].level == "network_group"
    differ = [("a", 0), ("a", 2), ("b", 1), ("b", 3)]
    assert ring_allreduce(rails, differ, 1e9, DEFAULT_TABLE)[1].level == "zone"
    # gpulayer-srun's layout keeps each DP ring on one rail: same cost with and without the rule
    spec = PlanSpec(tp=2, allreduce_bytes=1e10)
    assert (
        score_placement(rails, ["a", "b"], spec).seconds == score_placement(plain, ["a", "b"], spec).seconds
    )


def test_predict_job_and_describe_for_explain() -> None:
    specs = [(f"a{i}", "r", "z1", "g1", 8) for i in range(4)] + [
        (f"b{i}", "r", "z2", "g2", 8) for i in range(4)
    ]
    fabric = fleet(*specs)
    spec = PlanSpec(tp=8, allreduce_bytes=1e10)
    idle, now = predict_job(fabric, ["a0", "b0"], spec, free_now={"a1", "b1"})
    assert idle.best_level == "network_group" and idle.comm_slowdown is not None and idle.comm_slowdown > 3
    assert now is not None and now.best is not None
    assert now.comm_slowdown is not None and now.comm_slowdown > 3  # a0+a1 (own + a free one): one leaf
    assert set(now.best.nodes) <= {"a0", "a1", "b0", "b1"}
    lines = describe(idle, now)
    assert lines[0].startswith("predicted communication: ") and "bottleneck: dp at region" in lines[0]
    assert any(line.startswith("best placement on an idle fleet:") and "% slower" in line for line in lines)
    assert any(line.startswith("best placement free right now (with its own nodes):") for line in lines)
    assert predict_job(fabric, ["a0", "b0"], spec)[1] is None


def test_span_level() -> None:
    from slurm_topo.cost import span_level

    fabric = fleet(
        ("a", "r", "z", "g", 1), ("b", "r", "z", "g", 1), ("c", "r", "z2", "h", 1), ("d", None, None, None, 1)
    )
    assert span_level(fabric, ["a"]) == "node"
    assert span_level(fabric, ["a", "b"]) == "network_group"
    assert span_level(fabric, ["a", "b", "c"]) == "region"
    assert span_level(fabric, ["a", "d"]) == "any"


def test_nvlink_domains_from_the_inventory() -> None:
    nodes = tuple(
        Node(f"c{i}", Location("r", "z", f"g{i % 2}"), gpus=4, nvlink_domain="nvl-1" if i < 4 else None)
        for i in range(8)
    )
    fabric = Fabric.of(Inventory(nodes))
    assert fabric.domains == {f"c{i}": "nvl-1" for i in range(4)}
    cost = score_placement(fabric, ["c0", "c1", "c2", "c3"], PlanSpec(allreduce_bytes=1e10))
    # four nodes, two leaves, one NVLink domain: no hop leaves NVLink (inside a node: `node`, as fast)
    assert (
        cost.terms[0].level in ("nvlink", "node")
        and cost.terms[0].bandwidth == DEFAULT_LINKS["nvlink"].bandwidth
    )
    found = best_nodes(fabric, 4, 4)
    assert found is not None and found.level == "nvlink" and set(found.nodes) == {"c0", "c1", "c2", "c3"}
    spread = predict(fabric, ["c4", "c5", "c6", "c7"], PlanSpec(allreduce_bytes=1e10))
    assert spread.best_level == "nvlink" and spread.slowdown is not None and spread.slowdown > 2


def test_a_ring_inside_a_node_follows_nvlink_not_index_order() -> None:
    """DGX-1 hybrid cube mesh (a real capture): index order 0..7 crosses SYS twice, but an all-NVLink ring of
    the 8 GPUs exists, as NCCL finds it; the cost model rings over it. A node where no NVLink ring exists
    (all PCIe) keeps its bottleneck."""
    from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
    from slurm_topo.gpu.rings import gpu_level, gpu_order

    real = Path(__file__).parent / "fixtures" / "real" / "topo"
    dgx1 = parse_topo_matrix((real / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt").read_text())
    assert [gpu_level(dgx1, k, (k + 1) % 8) for k in range(8)].count("sys") == 2
    ring = gpu_order(dgx1, range(8), closed=True)
    assert sorted(ring) == list(range(8))
    assert {gpu_level(dgx1, ring[k], ring[(k + 1) % 8]) for k in range(8)} == {"nvlink"}, ring
    chain = gpu_order(dgx1, (0, 3, 4, 7), closed=False)  # a path inside the node when the ring leaves it
    assert {gpu_level(dgx1, chain[k], chain[k + 1]) for k in range(3)} <= {"nvlink", "pcie"}, chain
    pcie = parse_topo_matrix((real / "rtx3090-8gpu-pcie-node-sys-dualsocket.txt").read_text())
    two_sockets = gpu_order(pcie, range(8), closed=True)
    hops = [gpu_level(pcie, two_sockets[k], two_sockets[(k + 1) % 8]) for k in range(8)]
    assert "nvlink" not in hops and hops.count("sys") == 2, hops  # a ring over 2 sockets crosses twice


def test_best_placement_is_of_the_same_hardware_kind() -> None:
    """Two leaves of h100 nodes: p* with NVLink (a real HGX capture), q* PCIe only (a real DGX-1 PCIe
    capture). A job on both q nodes is the tightest placement of its kind: compared with q, not with the
    NVLink machines, its slowdown is 1."""
    from slurm_topo.cost import PlanSpec, predict
    from slurm_topo.inventory import merge, parse_inventory

    topo = Path(__file__).resolve().parent / "fixtures" / "real" / "topo"
    text = yaml.safe_dump(
        {
            "nodes": [
                {
                    "name": "p[1-2]",
                    "region": "r",
                    "zone": "z",
                    "network_group": "leaf-p",
                    "gpus": 8,
                    "gpu_type": "h100",
                    "gpu_topology": str(topo / "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt"),
                },
                {
                    "name": "q[1-2]",
                    "region": "r",
                    "zone": "z",
                    "network_group": "leaf-q",
                    "gpus": 8,
                    "gpu_type": "h100",
                    "gpu_topology": str(topo / "dgx1-8gpu-topo-mp-pcie-only.txt"),
                },
            ]
        }
    )
    fabric = Fabric.of(merge([parse_inventory(text, source="kinds.yaml")]))
    spec = PlanSpec(tp=8, gpus_per_node=8, allreduce_bytes=1e9, tp_bytes=1e9)
    on_q = predict(fabric, ["q1", "q2"], spec)
    assert on_q.best is not None and set(on_q.best.nodes) == {"q1", "q2"}
    assert on_q.slowdown == pytest.approx(1.0)
    # the NVLink machines really are faster: without the kind rule they would have been "the best"
    on_p = predict(fabric, ["p1", "p2"], spec)
    assert on_p.current.seconds < on_q.current.seconds / 2
    assert on_p.best is not None and set(on_p.best.nodes) == {"p1", "p2"}


def test_cost_says_what_a_smaller_dp_assumed() -> None:
    argv = [sys.executable, "-m", "slurm_topo", "cost", "-i", str(FLEET), "--nodes", "n01,n02", "--dp", "4"]
    out = subprocess.run([*argv, "--allreduce-bytes", "10G"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (
        "note: assumed: the plan's 4 ranks (tp 1 × pp 1 × dp 4) use 4 of the placement's 16 GPUs (2 × 8); "
        "costed on n01; n02 holds no rank" in out.stdout
    )
    full = subprocess.run(
        [*argv[:-2], "--allreduce-bytes", "10G"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "assumed: the plan's" not in full.stdout
