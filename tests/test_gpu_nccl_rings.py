"""gpu.nccl_rings: NCCL's plan of several rings inside a node (nChannels × speed), on real captures and on
seeded random link graphs, checked against the links' own capacities by an independent count; and
gpu.rings.gpu_order's bandwidth order (NV2 before NV1) against exhaustive search."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.errors import SlurmTopoError
from slurm_topo.cost.links import node_plan
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.links import link_bandwidth
from slurm_topo.gpu.nccl_rings import (
    MAX_CHANNELS,
    LinkSpeeds,
    RingPlan,
    plan_rings,
    speeds_for,
)
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.gpu.rings import gpu_order

REAL = Path(__file__).parent / "fixtures" / "real" / "topo"
V100 = LinkSpeeds(per_link=20.0, links=6, pcie=12.0, sys=10.0, sm=70)


def _capture(name: str) -> GpuTopology:
    return parse_topo_matrix((REAL / name).read_text())


def _captures() -> list[GpuTopology]:
    out = []
    for path in sorted(REAL.glob("*.txt")):
        try:
            topo = parse_topo_matrix(path.read_text())
        except SlurmTopoError:
            continue
        if topo.has_links and len(topo.gpus) >= 2:
            out.append(topo)
    return out


def _overcommitted(topo: GpuTopology, plan: RingPlan, speeds: LinkSpeeds) -> list[str]:
    """What the plan asks of a link beyond what it carries, counted from the link classes alone."""
    gpus = sorted(plan.rings[0])
    hops: Counter[tuple[int, int]] = Counter()
    for ring in plan.rings:
        pairs = list(zip(ring, ring[1:], strict=False)) + ([(ring[-1], ring[0])] if plan.closed else [])
        hops.update(pairs)
    bonds = {
        (a, b): min(int(topo.link(a, b)[2:]) if topo.link(a, b).startswith("NV") else 0, speeds.links)
        for a in gpus
        for b in gpus
        if a != b
    }
    bad = []
    for (a, b), count in hops.items():
        need = count * plan.speed
        cap = bonds[(a, b)] * speeds.per_link if bonds[(a, b)] else speeds.pcie
        if need > cap + 1e-6:
            bad.append(f"{a}->{b} {need} > {cap}")
    for g in gpus:
        nvl_cap = min(sum(bonds[(g, h)] for h in gpus if h != g), speeds.links) * speeds.per_link
        nvl_out = sum(c for (a, b), c in hops.items() if a == g and bonds[(a, b)]) * plan.speed
        nvl_in = sum(c for (a, b), c in hops.items() if b == g and bonds[(a, b)]) * plan.speed
        pci_out = sum(c for (a, b), c in hops.items() if a == g and not bonds[(a, b)]) * plan.speed
        pci_in = sum(c for (a, b), c in hops.items() if b == g and not bonds[(a, b)]) * plan.speed
        if max(nvl_out, nvl_in) > nvl_cap + 1e-6 or max(pci_out, pci_in) > speeds.pcie + 1e-6:
            bad.append(f"GPU {g}: NVLink {nvl_out}/{nvl_in} of {nvl_cap}, PCIe {pci_out}/{pci_in}")
    return bad


def test_dgx1_runs_six_rings_of_20_not_one_ring_s_bottleneck() -> None:
    """The issue's figures: DGX-1 (V100 hybrid cube mesh) all 8 GPUs: 6 rings × 20 = 120 GB/s planned;
    GPUs {0,1,2,3}: 80 GB/s; one ring's bottleneck would be 20 or 40."""
    dgx1 = _capture("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt")
    every = plan_rings(dgx1, range(8), V100)
    assert every is not None and (every.channels, every.speed, every.bandwidth) == (6, 20.0, 120.0)
    quad = plan_rings(dgx1, (0, 1, 2, 3), V100)
    assert quad is not None and quad.bandwidth == 80.0
    assert not _overcommitted(dgx1, every, V100) and not _overcommitted(dgx1, quad, V100)
    assert node_plan(dgx1, range(8), "Tesla V100-SXM2-16GB").bandwidth == 120.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("capture", "gpu_type", "want"),
    [
        ("dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt", "A100-SXM4-40GB", 240.0),  # 6 × 40; 12 links × 20
        ("hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt", "h100", 360.0),  # 6 × 60; 18 × 20.6 = 370.8 caps it
        ("h800-4gpu-nv8-17nic-empty-affinity.txt", "H800", 160.0),  # 8 links × 20.6 = 164.8: 4 × 40
        ("titanrtx-2gpu-nv2-bridge.txt", "TITAN RTX", 40.0),  # NV2 bridge, sm75: 2 × 20
    ],
)
def test_nvswitch_boards_are_capped_by_the_gpu_s_own_links(capture: str, gpu_type: str, want: float) -> None:
    """nvidia-smi prints NV12/NV18 for every pair of an NVSwitch board, but a GPU has 12 (18) links in all:
    the plan never sums the pairs."""
    topo = _capture(capture)
    plan = node_plan(topo, topo.gpus, gpu_type)
    assert plan is not None and plan.bandwidth == pytest.approx(want)


def test_ncclss_channel_doubling_keeps_the_sum() -> None:
    plan = RingPlan(((0, 1),) * 6, 60.0, True)
    assert plan.nccl_channels(90) == (12, 30.0)
    assert RingPlan(((0, 1),) * 6, 20.0, True).nccl_channels(70) == (6, 20.0)  # below 25 GB/s: kept
    assert RingPlan(((0, 1),) * 20, 40.0, True).nccl_channels(90) == (20, 40.0)  # sm90, < 50, > 4 rings


def test_no_link_data_or_one_gpu_has_no_plan() -> None:
    dgx1 = _capture("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt")
    assert plan_rings(None, range(8), V100) is None
    assert plan_rings(dgx1, (3,), V100) is None
    assert plan_rings(dgx1, (3, 99), V100) is None


@st.composite
def _random_node(draw: st.DrawFn) -> tuple[GpuTopology, LinkSpeeds]:
    n = draw(st.integers(2, 7))
    classes = ["NV1", "NV2", "NV4", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS"]
    cells = {(i, j): draw(st.sampled_from(classes)) for i in range(n) for j in range(i + 1, n)}
    matrix = tuple(
        tuple("X" if i == j else cells[(min(i, j), max(i, j))] for j in range(n)) for i in range(n)
    )
    speeds = LinkSpeeds(
        per_link=draw(st.sampled_from([12.0, 18.0, 20.0, 20.6, 40.1])),
        links=draw(st.sampled_from([2, 4, 6, 12, 18])),
        pcie=draw(st.sampled_from([12.0, 24.0, 48.0])),
        sys=draw(st.sampled_from([6.0, 10.0, 22.0])),
        sm=draw(st.sampled_from([70, 80, 86, 90, 100])),
    )
    return GpuTopology(gpus=tuple(range(n)), matrix=matrix), speeds


@settings(max_examples=80, deadline=None)
@given(_random_node(), st.booleans())
def test_a_plan_never_claims_more_than_the_links_carry(
    node: tuple[GpuTopology, LinkSpeeds], closed: bool
) -> None:
    topo, speeds = node
    plan = plan_rings(topo, topo.gpus, speeds, closed=closed)
    assert plan is not None  # the lowest speed always fits one ring over PCIe
    assert 1 <= plan.channels <= MAX_CHANNELS
    assert plan.speed in speeds_for(speeds.sm) or plan.channels == 1  # below the list: one ring
    for ring in plan.rings:
        assert sorted(ring) == list(topo.gpus)
    assert not _overcommitted(topo, plan, speeds)


def _pair_speed(topo: GpuTopology, a: int, b: int, speeds: LinkSpeeds) -> float:
    cls = topo.link(a, b)
    if cls.startswith("NV"):
        return min(int(cls[2:]), speeds.links) * speeds.per_link
    return min(speeds.pcie, speeds.sys) if cls == "SYS" else speeds.pcie


@settings(max_examples=80, deadline=None)
@given(_random_node())
def test_several_rings_are_never_below_the_best_single_ring(node: tuple[GpuTopology, LinkSpeeds]) -> None:
    """The plan is at least the fastest speed of NCCL's list that the best single ring (exhaustive, its
    slowest hop) could run at."""
    topo, speeds = node
    n = len(topo.gpus)
    best = max(
        min(_pair_speed(topo, p[k], p[(k + 1) % n], speeds) for k in range(n))
        for p in ((0, *rest) for rest in itertools.permutations(range(1, n)))
    )
    fitting = [s for s in speeds_for(speeds.sm) if s <= best + 1e-9]
    plan = plan_rings(topo, topo.gpus, speeds)
    assert plan is not None
    if fitting:
        assert plan.bandwidth >= fitting[0] - 1e-9


@pytest.mark.parametrize("topo", _captures(), ids=lambda t: t.source or str(len(t.gpus)))
def test_every_capture_plans_within_its_links(topo: GpuTopology) -> None:
    for speeds in (V100, LinkSpeeds(20.6, 18, 48.0, 22.0, 90)):
        for closed in (True, False):
            plan = plan_rings(topo, topo.gpus, speeds, closed=closed)
            assert plan is not None and not _overcommitted(topo, plan, speeds)


@settings(max_examples=200, deadline=None)
@given(_random_node(), st.booleans())
def test_gpu_order_s_slowest_hop_is_the_best_by_bandwidth(
    node: tuple[GpuTopology, LinkSpeeds], closed: bool
) -> None:
    """Exhaustive over every order: gpu_order's slowest hop (by link_bandwidth: NV2 before NV1, PIX before
    NODE) is the best any order has."""
    topo, _ = node
    n = len(topo.gpus)

    def slowest(seq: tuple[int, ...]) -> float:
        pairs = list(zip(seq, seq[1:], strict=False)) + ([(seq[-1], seq[0])] if closed and n > 2 else [])
        return min(link_bandwidth(topo.link(a, b)) for a, b in pairs)

    got = gpu_order(topo, topo.gpus, closed)
    assert sorted(got) == list(topo.gpus)
    assert slowest(got) == max(slowest(p) for p in itertools.permutations(topo.gpus))


def test_dgx1_tp8_ring_is_all_nv2() -> None:
    """The issue's DGX-1 --tp 8: 0-3-2-1-5-6-7-4 is all NV2 (by level any NVLink ring would do)."""
    dgx1 = _capture("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt")
    for closed in (True, False):
        ring = gpu_order(dgx1, range(8), closed)
        hops = [dgx1.link(ring[k], ring[(k + 1) % 8]) for k in range(8 if closed else 7)]
        assert set(hops) == {"NV2"}, (ring, hops)
