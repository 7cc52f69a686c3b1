"""Links per GPU generation (cost/links.py GENERATIONS): inside a node, and across one NVLink domain, the
model takes NVLink as NCCL's per-link figure of the node's GPU generation × the pair's bonded links, and PCIe
as the generation's host link, where the site's ``links:`` does not say; the reader is told which figures
were assumed. Topologies are real ``nvidia-smi topo -m`` captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo.cost import PlanSpec, parse_links, score_placement
from slurm_topo.cost.comm import Fabric, hop_link
from slurm_topo.cost.links import DEFAULT_LINKS, GENERATIONS, generation_of
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.model import Inventory, Location, Node

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
        ("l40s", None),
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
    assert unknown.terms[0].bandwidth == DEFAULT_LINKS["nvlink"].bandwidth
    assert not any("NVLINK_BW" in note for note in unknown.notes)


def test_a_dgx1_ring_is_paced_by_its_weakest_bonded_pair() -> None:
    """V100 hybrid cube mesh (NV1 and NV2 pairs): the ring's pace is per pair (20 or 40 GB/s), never the six
    links of an NVSwitch (120)."""
    cost = score_placement(
        _one_node("v100", "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"), ["a"], PlanSpec(tp=8, tp_bytes=1e9)
    )
    assert cost.terms[0].level == "nvlink"
    assert cost.terms[0].bandwidth in (20.0, 40.0)


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
