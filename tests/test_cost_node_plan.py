"""cost/comm.ring_allreduce inside one node takes NCCL's plan of several link-disjoint rings
(cost/links.node_plan) where it is faster than one ring's slowest hop; and ``cost``/``explain`` (cost.predict,
predict_job) and the relax budgets (cost/budget.level_costs) all read that one figure. Topologies are real
``nvidia-smi topo -m`` captures; the random cases check the figure against bounds counted from the link
classes alone (never by calling the planner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.errors import SlurmTopoError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import PlanSpec, parse_links, predict, predict_job, score_placement
from slurm_topo.cost.budget import level_costs
from slurm_topo.cost.comm import Fabric, place_ranks, ring_allreduce
from slurm_topo.cost.links import DEFAULT_LINKS, GENERATIONS, LinkTable
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

REAL = Path(__file__).parent / "fixtures" / "real" / "topo"
DGX1 = "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"


def _topology(name: str) -> GpuTopology:
    return parse_topo_matrix((REAL / name).read_text())


def _node(name: str, gpu_type: str | None, topology: GpuTopology, group: str = "g") -> Node:
    return Node(
        name,
        Location("r", "z", group),
        gpus=len(topology.gpus),
        gpu_type=gpu_type,
        gpu_topology=topology,
    )


def _dgx1(names: str = "a") -> Fabric:
    topology = _topology(DGX1)
    return Fabric.of(Inventory(tuple(_node(n, "v100", topology) for n in names)))


def _ring_seconds(p: int, nbytes: float, bandwidth: float, latency_us: float) -> float:
    """The ring all-reduce formula written out (the topology-aware concept; NCCL tuning.cc's shape)."""
    return 2 * (p - 1) * latency_us * 1e-6 + 2 * (p - 1) / p * nbytes / (bandwidth * 1e9)


def test_eight_v100s_of_a_dgx1_are_six_rings_of_20() -> None:
    """The issue's figure: NCCL plans 6 rings × 20 GB/s = 120 over all 8 GPUs of a hybrid cube mesh."""
    ring = [("a", g) for g in range(8)]
    seconds, hop = ring_allreduce(_dgx1(), ring, 1e9, parse_links(None))
    assert hop.level == "nvlink"
    assert hop.link.bandwidth == pytest.approx(120.0)
    assert hop.generation is GENERATIONS["v100"]
    assert seconds == pytest.approx(_ring_seconds(8, 1e9, 120.0, DEFAULT_LINKS["nvlink"].latency_us))


def test_one_quad_of_a_dgx1_is_four_rings_of_20() -> None:
    """{0,1,2,3}: each GPU has 4 of its links inside the quad (one NV2 and two NV1 peers), so 4 rings × 20
    GB/s = 80 (the issue's figure), not one ring's 20."""
    ring = [("a", g) for g in (0, 1, 2, 3)]
    _, hop = ring_allreduce(_dgx1(), ring, 1e9, parse_links(None))
    assert hop.link.bandwidth == pytest.approx(80.0)


def test_a_tp4_group_of_a_dgx1_is_costed_at_the_plan() -> None:
    fabric = _dgx1()
    spec = PlanSpec(tp=4, tp_bytes=1e9)
    groups = {frozenset(r.gpu for r in place_ranks(fabric, ["a"], spec) if r.dp == d) for d in (0, 1)}
    assert frozenset({0, 1, 2, 3}) in groups
    tp = next(t for t in score_placement(fabric, ["a"], spec).terms if t.kind == "tp")
    assert tp.bandwidth == pytest.approx(80.0)


def test_cost_explain_and_the_budgets_read_one_figure() -> None:
    """One cost model: cost (predict), explain (predict_job) and the relax budgets (level_costs) see the
    same planned 120 GB/s for a TP-8 group of a DGX-1; across nodes the DP ring stays at the network's."""
    fabric = _dgx1("ab")
    spec = PlanSpec(tp=8, tp_bytes=1e9, allreduce_bytes=1e10)
    seen = [
        score_placement(fabric, ["a", "b"], spec),
        predict(fabric, ["a", "b"], spec).current,
        predict_job(fabric, ["a", "b"], spec, parse_links(None), free_now=["a", "b"])[0].current,
        *level_costs(fabric.node("a"), 2, spec).values(),
    ]
    for cost in seen:
        terms = {t.kind: t for t in cost.terms}
        assert terms["tp"].level == "nvlink" and terms["tp"].bandwidth == pytest.approx(120.0)
        assert terms["dp"].level in ("network_group", "zone", "region", "any")
        assert terms["dp"].bandwidth == DEFAULT_LINKS[terms["dp"].level].bandwidth


def test_a_figure_the_site_set_is_not_replaced_by_the_plan() -> None:
    """A measured or given nvlink (calibrate's, or links:) stands: the plan is the model's default only."""
    table = parse_links({"nvlink": {"bandwidth": 30, "latency_us": 2}})
    ring = [("a", g) for g in range(8)]
    seconds, hop = ring_allreduce(_dgx1(), ring, 1e9, table)
    assert hop.link.bandwidth == 30.0
    assert seconds == pytest.approx(_ring_seconds(8, 1e9, 30.0, 2.0))


def test_two_v100s_on_one_nv2_bond_keep_the_bond() -> None:
    """A pair: one ring each way over its two links (40), never more than the links carry."""
    topology = _topology(DGX1)
    a, b = next((i, j) for i in range(8) for j in range(8) if topology.link(i, j) == "NV2")
    _, hop = ring_allreduce(_dgx1(), [("a", a), ("a", b)], 1e9, parse_links(None))
    assert hop.link.bandwidth == pytest.approx(40.0)


# ---- every capture, every generation, random GPU sets


def _captures() -> dict[str, GpuTopology]:
    out = {}
    for path in sorted(REAL.glob("*.txt")):
        try:
            topo = parse_topo_matrix(path.read_text())
        except SlurmTopoError:
            continue
        if topo.has_links and len(topo.gpus) >= 2:
            out[path.name] = topo
    return out


CAPTURES = _captures()
PARTS = sorted(GENERATIONS)


def _pair_bandwidth(cls: str, part: str, table: LinkTable) -> float:
    """One pair's link from its class alone: NV<n> = min(n, links) × per_link, else PCIe (across the
    sockets no faster than PCIe nor the table's sys)."""
    gen = GENERATIONS[part]
    pcie = gen.pcie if gen.pcie is not None else table["pcie"].bandwidth
    if cls.startswith("NV") and cls[2:].isdigit() and gen.nvlink_capable:
        return min(int(cls[2:]), gen.links) * gen.per_link
    if cls == "SYS":
        return min(pcie, table["sys"].bandwidth)
    return pcie


@settings(max_examples=150, deadline=None)
@given(
    capture=st.sampled_from(sorted(CAPTURES)),
    part=st.sampled_from(PARTS),
    data=st.data(),
)
def test_a_ring_inside_a_node_is_bounded_by_its_links(capture: str, part: str, data: st.DataObject) -> None:
    """At least the slowest pair of the set (any one ring does that well), at most what every GPU's links
    carry together (its NVLinks and its PCIe host link); and the seconds are the formula's at that figure."""
    topo = CAPTURES[capture]
    gpus = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=2, max_size=len(topo.gpus), unique=True))
    table = parse_links(None)
    fabric = Fabric.of(Inventory((_node("a", part, topo),)))
    seconds, hop = ring_allreduce(fabric, [("a", g) for g in gpus], 1e9, table)
    pairs = [_pair_bandwidth(topo.link(x, y), part, table) for x in gpus for y in gpus if x != y]
    gen = GENERATIONS[part]
    pcie = gen.pcie if gen.pcie is not None else table["pcie"].bandwidth
    ceiling = (gen.nvlink if gen.nvlink_capable else 0.0) + pcie
    assert min(pairs) - 1e-9 <= hop.link.bandwidth <= ceiling + 1e-9
    assert seconds == pytest.approx(_ring_seconds(len(gpus), 1e9, hop.link.bandwidth, hop.link.latency_us))
