"""The cost model's expert-parallel (all-to-all) and context-parallel (KV ring) terms, against references
written here from the published algorithms, not from the implementation:

* all-to-all, pairwise exchange (Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication
  Operations in MPICH", IJHPCA 2005): ``p − 1`` rounds, in each a rank sends ``n/p`` bytes to one peer and
  receives as much, each round costing ``α + (n/p)/B``;
* ring attention (Liu et al. 2023; Megatron-LM ``cp_comm_type=p2p``): ``p − 1`` steps, in each a rank sends
  its neighbour one KV chunk of ``n`` bytes, ``α + n/B`` a step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.cli import cli
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import (
    Fabric,
    Link,
    PlanSpec,
    all_to_all_seconds,
    cp_ring_seconds,
    parse_links,
    parse_plan,
    score_placement,
)
from slurm_topo.cost.budget import level_costs
from slurm_topo.cost.comm import MOE_PLAN_KEYS, PLAN_KEYS
from slurm_topo.cost.step import StepModel
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

FIXTURES = Path(__file__).parent / "fixtures"
NV18 = parse_topo_matrix((FIXTURES / "real/topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt").read_text())
TABLE = parse_links(  # every level given, so the table's numbers are the ones used (no GPU generation's)
    {
        "nvlink": {"bandwidth": 450, "latency_us": 2},
        "node": {"bandwidth": 450, "latency_us": 2},
        "network_group": {"bandwidth": 50, "latency_us": 5},
        "zone": {"bandwidth": 25, "latency_us": 8},
        "region": {"bandwidth": 12, "latency_us": 20},
        "any": {"bandwidth": 5, "latency_us": 100},
    }
)


def pairwise_exchange(p: int, n: float, bandwidth_gb: float, latency_us: float) -> float:
    """The published algorithm, round by round."""
    t = 0.0
    for _ in range(1, p):
        t += latency_us * 1e-6 + (n / p) / (bandwidth_gb * 1e9)
    return t


def ring_pass(p: int, n: float, bandwidth_gb: float, latency_us: float) -> float:
    t = 0.0
    for _ in range(p - 1):
        t += latency_us * 1e-6 + n / (bandwidth_gb * 1e9)
    return t


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 512),
    st.floats(0, 1e12, allow_nan=False),
    st.floats(0.1, 2000, allow_nan=False),
    st.floats(0, 100, allow_nan=False),
)
def test_the_two_collectives_match_their_published_algorithms(
    p: int, n: float, bw: float, lat: float
) -> None:
    link = Link(bw, lat)
    assert all_to_all_seconds(p, n, link) == pytest.approx(
        pairwise_exchange(p, n, bw, lat), rel=1e-9, abs=1e-15
    )
    assert cp_ring_seconds(p, n, link) == pytest.approx(ring_pass(p, n, bw, lat), rel=1e-9, abs=1e-15)


def test_the_issue_s_formula_per_rank_at_the_bottleneck() -> None:
    """(p−1)/p · n/B without latency: 8 ranks exchanging 1 GB each over 450 GB/s NVLink: 7/8 · 1/450 s."""
    assert all_to_all_seconds(8, 1e9, Link(450, 0)) == pytest.approx(7 / 8 / 450)
    assert all_to_all_seconds(1, 1e9, Link(450, 5)) == 0.0 and cp_ring_seconds(1, 1e9, Link(450, 5)) == 0.0


def nodes(count: int, domain: str | None = None, *, per_group: int = 64) -> Fabric:
    """``count`` 8-GPU NV18 nodes, ``per_group`` a network group, all in NVLink domain ``domain``."""
    made = [
        Node(
            f"n{i}", Location("r", "z", f"g{i // per_group}"), gpus=8, gpu_topology=NV18, nvlink_domain=domain
        )
        for i in range(count)
    ]
    return Fabric.of(Inventory(tuple(made)))


def term(cost, kind):  # type: ignore[no-untyped-def]
    (t,) = [t for t in cost.terms if t.kind == kind]
    return t


def test_an_ep_group_inside_one_node_runs_at_nvlink() -> None:
    fabric = nodes(2)
    cost = score_placement(fabric, ["n0", "n1"], PlanSpec(ep=8, dp=16, ep_bytes=1e9), TABLE)
    t = term(cost, "ep")
    assert (t.groups, t.ranks, t.level) == (2, 8, "nvlink")
    assert t.seconds == pytest.approx(pairwise_exchange(8, 1e9, 450, 2))


def test_an_ep_group_across_nodes_runs_at_the_network_unless_one_domain_holds_it() -> None:
    """EP 16 over two 8-GPU nodes: the all-to-all at 50 GB/s through the leaf; in one NVLink domain (an NVL72
    rack) the same group runs at NVLink's 450: 9× less (the issue's point for EP > 8)."""
    split = term(score_placement(nodes(2), ["n0", "n1"], PlanSpec(ep=16, dp=16, ep_bytes=1e9), TABLE), "ep")
    assert (split.level, split.ranks) == ("network_group", 16)
    assert split.seconds == pytest.approx(pairwise_exchange(16, 1e9, 50, 5))
    rack = term(
        score_placement(nodes(2, "nvl0"), ["n0", "n1"], PlanSpec(ep=16, dp=16, ep_bytes=1e9), TABLE), "ep"
    )
    assert rack.level == "nvlink" and rack.seconds == pytest.approx(pairwise_exchange(16, 1e9, 450, 2))


def test_the_cp_ring_and_dp_over_dp_times_cp() -> None:
    """tp 2 × cp 2 × dp 4 on two nodes: CP pairs inside a node (NVLink ring of 2); the gradient all-reduce
    over the dp × cp = 8 ranks of Megatron's dp-cp group, across the two nodes."""
    spec = PlanSpec(tp=2, cp=2, dp=4, cp_bytes=2e8, allreduce_bytes=8e9)
    cost = score_placement(nodes(2), ["n0", "n1"], spec, TABLE)
    cp = term(cost, "cp")
    assert (cp.groups, cp.ranks, cp.level) == (8, 2, "nvlink")
    assert cp.seconds == pytest.approx(ring_pass(2, 2e8, 450, 2))
    dp = term(cost, "dp")
    assert (dp.groups, dp.ranks, dp.level) == (2, 8, "network_group")
    assert dp.bytes == pytest.approx(8e9 / 2)
    assert cost.sizes == {"tp": 2, "pp": 1, "dp": 4, "cp": 2}


def test_without_the_bytes_the_terms_are_noted_not_counted() -> None:
    cost = score_placement(nodes(1), ["n0"], PlanSpec(cp=2, ep=4, dp=4), TABLE)
    assert not [t for t in cost.terms if t.kind in ("ep", "cp")]
    assert any("ep_bytes" in n for n in cost.notes) and any("cp_bytes" in n for n in cost.notes)
    assert cost.sizes == {"tp": 1, "pp": 1, "dp": 4, "cp": 2, "ep": 4}


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4),
    st.sampled_from((1, 2)),
    st.sampled_from((1, 2)),
    st.sampled_from((2, 4, 8, 16)),
    st.floats(1e6, 1e10),
    st.integers(1, 2),
)
def test_ep_costs_lie_between_the_fastest_and_slowest_link_and_a_domain_never_costs_more(
    count: int, tp: int, cp: int, ep: int, n: float, per_group: int
) -> None:
    names = [f"n{i}" for i in range(count)]
    world = count * 8
    if world % (tp * cp) or (world // tp) % ep:
        return
    spec = PlanSpec(tp=tp, cp=cp, ep=ep, dp=world // (tp * cp), ep_bytes=n, cp_bytes=n)
    plain = score_placement(nodes(count, per_group=per_group), names, spec, TABLE)
    rack = score_placement(nodes(count, "nvl0", per_group=per_group), names, spec, TABLE)
    t = term(plain, "ep")
    assert t.ranks == ep and t.groups == world // ep
    assert (
        pairwise_exchange(ep, n, 450, 2) * (1 - 1e-9)
        <= t.seconds
        <= pairwise_exchange(ep, n, 25, 8) * (1 + 1e-9)
    )
    assert term(rack, "ep").seconds <= t.seconds * (1 + 1e-9)
    if tp * ep <= 8:  # one node holds a group: NVLink
        assert t.level == "nvlink"
    assert rack.seconds <= plain.seconds * (1 + 1e-9)


# ---- plans, the step, budgets


def test_plans_take_ep_cp_and_their_bytes() -> None:
    spec = parse_plan("tp=2,ep=8,cp=2,ep_bytes=2G,cp_bytes=500M,bytes=10G")
    assert (spec.ep, spec.cp, spec.ep_bytes, spec.cp_bytes) == (8, 2, 2e9, 5e8)
    assert parse_plan("tp=2").ep == 1 and parse_plan("tp=2").cp_bytes is None
    with pytest.raises(InputError, match="plan ep='0'"):
        parse_plan("ep=0")
    with pytest.raises(InputError, match="plan cp_bytes"):
        parse_plan("cp_bytes=lots")


def test_a_job_s_plan_may_give_the_ep_and_cp_keys() -> None:
    """A job's --plan is checked by the filter's vocab.lua PLAN_KEYS (equal to PLAN_KEYS): the EP/CP keys are
    among them, so `sbatch --plan=tp=8,ep=8,ep_bytes=2G` reaches explain and the budgets."""
    assert MOE_PLAN_KEYS <= PLAN_KEYS and MOE_PLAN_KEYS == {"ep", "cp", "ep_bytes", "cp_bytes"}


def test_ep_and_cp_sit_on_the_critical_path_dp_alone_overlaps() -> None:
    cost = score_placement(
        nodes(2),
        ["n0", "n1"],
        PlanSpec(cp=2, ep=16, dp=8, ep_bytes=1e9, cp_bytes=1e8, allreduce_bytes=1e9),
        TABLE,
    )
    by = {t.kind: t.seconds for t in cost.terms}
    model = StepModel(10.0, 1.0, "test")  # DP wholly hidden behind 10 s of compute
    assert model.exposed(cost) == pytest.approx(by["ep"] + by["cp"])


def test_budgets_count_the_all_to_all_at_each_level() -> None:
    """The relax budgets cost a plan at each level a placement may meet at: an EP group of 16 over two nodes
    pays the all-to-all at the level's bandwidth, so its seconds grow outwards with the table."""
    template = Node("t", Location("r", "z", "g"), gpus=8, gpu_topology=NV18)
    costs = level_costs(template, 2, parse_plan("ep=16,dp=16,ep_bytes=1G"), TABLE)
    ep = {level: term(c, "ep") for level, c in costs.items()}
    assert ep["network_group"].seconds == pytest.approx(pairwise_exchange(16, 1e9, 50, 5))
    assert ep["zone"].seconds == pytest.approx(pairwise_exchange(16, 1e9, 25, 8))
    assert ep["any"].seconds == pytest.approx(pairwise_exchange(16, 1e9, 5, 100))


def test_the_cost_command_takes_ep_and_cp(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "nodes:\n  - name: n[1-2]\n    region: r\n    zone: z\n    network_group: g\n    gpus: 8\n"
        f"    gpu_topology: {FIXTURES / 'real/topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt'}\n"
    )
    args = ["cost", "-i", str(inv), "--nodes", "n[1-2]", "--ep", "16", "--cp", "2", "--dp", "8"]
    args += ["--allreduce-bytes", "1G", "--ep-bytes", "1G", "--cp-bytes", "100M", "--comm-only"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "tp 1 × cp 2 × pp 1 × dp 8, ep 16:" in result.output
    assert "  ep  1 group of 16 ranks" in result.output and "  cp  8 groups of 2 ranks" in result.output
