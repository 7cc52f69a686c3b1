"""Links per GPU generation (cost/links.py GENERATIONS): inside a node, and across one NVLink domain, the
model takes NVLink as NCCL's per-link figure of the node's GPU generation × the pair's bonded links, and PCIe
as the generation's host link, where the site's ``links:`` does not say; the reader is told which figures
were assumed. Topologies are real ``nvidia-smi topo -m`` captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import PlanSpec, parse_links, score_placement
from slurm_topo.cost.comm import Fabric, hop_link
from slurm_topo.cost.links import DEFAULT_LINKS, GENERATIONS, generation_of, nvlink_bw
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

REAL = Path(__file__).parent / "fixtures" / "real" / "topo"


def _topology(name: str):  # type: ignore[no-untyped-def]
    return parse_topo_matrix((REAL / name).read_text())


def _one_node(gpu_type: str | None, capture: str) -> Fabric:
    topology = _topology(capture)
    node = Node(
        "a", Location("r", "z", "g"), gpus=len(topology.gpus), gpu_type=gpu_type, gpu_topology=topology
    )
    return Fabric.of(Inventory((node,)))


@pytest.mark.parametrize(
    ("gpu_type", "family"),
    [
        ("h100", "h100"),
        ("NVIDIA_H100_80GB_HBM3", "h100"),
        ("A100-SXM4-80GB", "a100"),
        ("tesla_v100", "v100"),
        ("gb200", "gb200"),
        ("b200", "b200"),
        ("h200", "h200"),
        ("l40s", "l40s"),
        ("NVIDIA-H20", "h20"),
        ("NVIDIA-B300-SXM6-AC", "b300"),
        ("Tesla-K40m", "k40"),
        ("H800", "h800"),
        ("A800-SXM4-80GB", "a800"),
        ("NVIDIA RTX A6000", "a6000"),
        ("", None),
        (None, None),
    ],
)
def test_the_generation_is_read_from_the_gpu_type(gpu_type: str | None, family: str | None) -> None:
    assert generation_of(gpu_type) is (GENERATIONS[family] if family else None)


def test_an_a100_nvswitch_ring_runs_at_ncclss_nv12_figure_not_the_h100_default() -> None:
    """DGX A100 (every pair NV12): a TP-8 ring's pace is 12 × 20 GB/s, and the cost says where from."""
    cost = score_placement(
        _one_node("a100", "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt"), ["a"], PlanSpec(tp=8, tp_bytes=1e9)
    )
    (term,) = cost.terms
    assert term.level == "nvlink"
    assert term.bandwidth == pytest.approx(240.0)
    assert term.seconds == pytest.approx(2 * 7 * 1e-6 + 2 * 7 / 8 * 1e9 / 240e9)
    assert any("SM80_NVLINK_BW" in note and "nvlink at 240" in note for note in cost.notes), cost.notes


def test_an_h800_nv18_ring_and_an_unknown_gpu_type() -> None:
    capture = "h800-8gpu-nv18-10nic-merged-affinity-numa.txt"
    h100 = score_placement(_one_node("h100", capture), ["a"], PlanSpec(tp=8, tp_bytes=1e9))
    assert h100.terms[0].bandwidth == pytest.approx(18 * 20.6)
    unknown = score_placement(_one_node("mystery", capture), ["a"], PlanSpec(tp=8, tp_bytes=1e9))
    # never H100's figures in silence: NCCL's own fallback (SM80_NVLINK_BW × at most 12 links), and said
    assert unknown.terms[0].bandwidth == pytest.approx(12 * 20.0) != DEFAULT_LINKS["nvlink"].bandwidth
    assert any("unknown GPU type 'mystery'" in note and "stated default" in note for note in unknown.notes)


def test_a_dgx1_ring_is_paced_by_its_weakest_bonded_pair() -> None:
    """V100 hybrid cube mesh (NV1 and NV2 pairs): NCCL plans 6 link-disjoint rings × 20 GB/s = 120 GB/s over
    the 8 GPUs (the issue's figure: each GPU's six links, bond-aware), not one ring's slowest pair (20)."""
    cost = score_placement(
        _one_node("v100", "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"), ["a"], PlanSpec(tp=8, tp_bytes=1e9)
    )
    assert cost.terms[0].level == "nvlink"
    assert cost.terms[0].bandwidth == pytest.approx(6 * 20.0)
    # the seconds are the ring formula at the plan's bandwidth and the NVLink latency
    assert cost.terms[0].seconds == pytest.approx(2 * 7 * 1e-6 + 2 * 7 / 8 * 1e9 / 120e9)


def test_pcie_takes_the_generations_host_link() -> None:
    """Two V100s of a PCIe-only DGX-1 view meeting through a PCIe switch: Gen3 x16, 12 GB/s (not Gen5 48)."""
    fabric = _one_node("v100", "dgx1-8gpu-topo-mp-pcie-only.txt")
    topology = fabric.node("a").gpu_topology
    pair = next(
        (i, j)
        for i in range(8)
        for j in range(i + 1, 8)
        if topology.link(i, j) in ("PIX", "PXB", "PHB", "NODE")
    )
    link, gen = hop_link(fabric, parse_links(None), "pcie", ("a", pair[0]), ("a", pair[1]))
    assert link.bandwidth == 12.0 and gen is GENERATIONS["v100"]


def test_the_sites_own_figure_wins() -> None:
    """A level the inventory's links: sets is the site's (measured, or calibrated): no generation replaces
    it."""
    table = parse_links({"nvlink": {"bandwidth": 300}})
    cost = score_placement(
        _one_node("a100", "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt"),
        ["a"],
        PlanSpec(tp=8, tp_bytes=1e9),
        table,
    )
    assert cost.terms[0].bandwidth == 300.0
    assert not any("NVLINK_BW" in note for note in cost.notes)


def test_two_nodes_of_one_nvl72_domain_meet_at_the_gb200_figure() -> None:
    nodes = tuple(
        Node(name, Location("r", "z", "g"), gpus=4, gpu_type="gb200", nvlink_domain="nvl-1") for name in "ab"
    )
    fabric = Fabric.of(Inventory(nodes))
    link, gen = hop_link(fabric, parse_links(None), "nvlink", ("a", 0), ("b", 0))
    assert link.bandwidth == pytest.approx(18 * 40.1) and gen is GENERATIONS["gb200"]
    cost = score_placement(fabric, ["a", "b"], PlanSpec(dp=8, allreduce_bytes=1e10))
    # the ring's hops inside a node (no link data: "node") and between the two: all at the GB200 figure
    assert cost.terms[0].level in ("node", "nvlink")
    assert cost.terms[0].bandwidth == pytest.approx(18 * 40.1)


def test_a_path_across_the_sockets_is_never_faster_than_the_generations_pcie() -> None:
    """V100 (PCIe Gen3, 12 GB/s): a SYS pair crosses PCIe too, so it is no faster than 12 (not the
    table's 22)."""
    fabric = _one_node("v100", "dgx1-8gpu-topo-mp-pcie-only.txt")
    topology = fabric.node("a").gpu_topology
    i, j = next((i, j) for i in range(8) for j in range(i + 1, 8) if topology.link(i, j) == "SYS")
    link, gen = hop_link(fabric, parse_links(None), "sys", ("a", i), ("a", j))
    assert link.bandwidth == 12.0 and gen is GENERATIONS["v100"]
    pcie, _ = hop_link(fabric, parse_links(None), "pcie", ("a", 0), ("a", 1))
    assert link.bandwidth <= pcie.bandwidth
    assert hop_link(fabric, parse_links({"sys": {"bandwidth": 10}}), "sys", ("a", i), ("a", j)) == (
        parse_links({"sys": {"bandwidth": 10}})["sys"],
        None,
    )


def test_a_calibrated_table_keeps_the_generations_where_it_did_not_measure() -> None:
    """calibrate writes every level under links: but measured only some: only those are the site's."""
    table = parse_links(
        {
            "nvlink": {"bandwidth": 450, "latency_us": 1},
            "network_group": {"bandwidth": 40, "latency_us": 4},
            "measured": {"date": "2026-12-03", "probe": "tcp", "levels": {"network_group": {}}},
        }
    )
    assert table.given == {"network_group"}
    cost = score_placement(
        _one_node("a100", "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt"),
        ["a"],
        PlanSpec(tp=8, tp_bytes=1e9),
        table,
    )
    assert cost.terms[0].bandwidth == pytest.approx(240.0)


def test_two_ranks_on_one_gpu_do_not_read_the_matrix() -> None:
    fabric = _one_node("h100", "h800-8gpu-nv18-10nic-merged-affinity-numa.txt")
    link, _ = hop_link(fabric, parse_links(None), "nvlink", ("a", 6), ("a", 6))
    assert link.bandwidth == pytest.approx(18 * 20.6)


def test_a_profile_replaces_the_levels_the_base_set() -> None:
    """links: {profile: gcp} over a base whose nvlink the site set: the profile's table holds, and its nvlink
    is no longer the site's, so a GPU generation applies again."""
    base = parse_links({"nvlink": {"bandwidth": 300}})
    assert parse_links({"profile": "gcp"}, base=base).given == frozenset()
    assert parse_links({"profile": "gcp", "zone": {"bandwidth": 2}}, base=base).given == {"zone"}


# Every GPU name the shared captures and probe outputs print (nvidia-smi, nccl-tests rank lines), the forms
# Slurm's gres and Kubernetes labels give them, and the names the issue lists: each names a part (its compute
# capability), or is said to be unknown.
NAMES = {
    "NVIDIA H100 80GB HBM3": 90,
    "NVIDIA A100-SXM4-40GB": 80,
    "NVIDIA H100 PCIe": 90,
    "NVIDIA GeForce RTX 2080 Ti": 75,
    "NVIDIA RTX A6000": 86,
    "NVIDIA H200": 90,
    "NVIDIA A100-PCIE-40GB": 80,
    "Tesla T4": 75,
    "Tesla M60": 52,
    "Tesla V100-SXM2-16GB": 70,
    "TITAN RTX": 75,
    "h100": 90,
    "a100": 80,
    "gb200": 100,
    "t4": 75,
    "l4": 89,
    "v100": 70,
    "h200": 90,
    "nvidia_h100_80gb_hbm3": 90,
    "NVIDIA-H20": 90,
    "NVIDIA-B300-SXM6-AC": 103,
    "Tesla-K40m": 35,
    "H800": 90,
    "A800": 80,
    "L40S": 89,
    "RTX A6000": 86,
    "a10g": 86,
    "GH200": 90,
    "NVIDIA GeForce RTX 5090": 120,
    "NVIDIA GeForce RTX 4090": 89,
    "NVIDIA GeForce RTX 3090": 86,
    "Tesla P100-SXM2-16GB": 60,
}


@pytest.mark.parametrize(("name", "sm"), sorted(NAMES.items()))
def test_every_known_name_reads_as_its_compute_capability(name: str, sm: int) -> None:
    gen = generation_of(name)
    assert gen is not None and not gen.assumed and gen.sm == sm, (name, gen)
    if gen.nvlink_capable:
        assert gen.per_link == nvlink_bw(sm)
    else:
        assert gen.links == 1 and gen.per_link == gen.pcie


def test_ncclss_per_link_constants_by_compute_capability() -> None:
    """NCCL 2.30.7 topo.h: SM60 18.0, SM70 20.0, SM80 20.0, SM86 12.0 (86 only), SM90 20.6, SM100 40.1; below
    sm60 NCCL answers SM80's."""
    anchors = {35: 20.0, 60: 18.0, 61: 18.0, 70: 20.0, 75: 20.0, 80: 20.0, 86: 12.0, 87: 20.0, 89: 20.0}
    anchors |= {90: 20.6, 100: 40.1, 103: 40.1, 120: 40.1}
    assert {sm: nvlink_bw(sm) for sm in anchors} == anchors


def test_an_a6000_nv4_pair_runs_at_48_not_h100s_figure() -> None:
    """RTX A6000 (sm86: 12 GB/s a link): an NV4 bridge is 48 GB/s; PCIe Gen4 24 (not H100's 450 and 48)."""
    matrix = (("X", "NV4", "NODE"), ("NV4", "X", "NODE"), ("NODE", "NODE", "X"))
    topology = GpuTopology(gpus=(0, 1, 2), matrix=matrix)
    node = Node("a", Location("r", "z", "g"), gpus=3, gpu_type="NVIDIA RTX A6000", gpu_topology=topology)
    fabric = Fabric.of(Inventory((node,)))
    link, gen = hop_link(fabric, parse_links(None), "nvlink", ("a", 0), ("a", 1))
    assert link.bandwidth == pytest.approx(48.0) and gen is GENERATIONS["a6000"]
    link, _ = hop_link(fabric, parse_links(None), "pcie", ("a", 0), ("a", 2))
    assert link.bandwidth == pytest.approx(24.0)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_name_reads_as_a_part_or_the_stated_default(name: str) -> None:
    gen = generation_of(name)
    if not name:
        assert gen is None
        return
    assert gen is not None
    if gen.assumed:
        assert "unknown GPU type" in gen.describe() and "stated default" in gen.describe()
        assert gen.nvlink == 240.0 and gen.pcie == 12.0
    else:
        assert gen in GENERATIONS.values()


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(NAMES)),
    st.sampled_from(["", "NVIDIA ", "nvidia_", "NVIDIA-", "tesla "]),
    st.sampled_from(["", "-80GB", "_80gb_hbm3", " 48GB", "-SXM5-94GB"]),
    st.booleans(),
)
def test_prefixes_suffixes_and_case_do_not_change_the_part(
    name: str, pre: str, post: str, upper: bool
) -> None:
    text = pre + name + post
    text = text.upper() if upper else text.lower()
    assert generation_of(text).sm == NAMES[name], text  # type: ignore[union-attr]
