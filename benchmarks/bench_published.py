#!/usr/bin/env python3
"""The cost model's defaults against published figures, and its intra-node ring plans on every capture.

1. Model vs published: each row of the probe fixtures' anchor table (tests/fixtures/real/probes/INDEX.md,
   copied from shared/fixtures) that the model has a figure for: the model's figure (an intra-node
   collective: NCCL's ring plan over the node's real ``nvidia-smi topo -m`` capture with its GPU part's
   constants, :func:`slurm_topo.cost.links.node_plan`; the network: the link table's level), the figure as
   published, and their ratio. nccl-tests' busbw of a ring all-reduce is what each GPU moves at once, the
   quantity the plan computes.
2. Plans on every capture in tests/fixtures/real/topo: rings × speed (NCCL's channels after its doubling),
   against one ring's slowest hop (what the model took before), and the time to plan.
3. Fleet cost: planning the rings of every node of a fleet of 100 nodes (random GPU subsets per node, the
   plans cached by links as the cost model would call them), cold, per node kind.

    python benchmarks/bench_published.py [--out benchmarks/results/cost.md]
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.core.errors import SlurmTopoError  # noqa: E402
from slurm_topo.cost.links import DEFAULT_TABLE, generation_of, link_speeds, node_plan  # noqa: E402
from slurm_topo.gpu import nccl_rings  # noqa: E402
from slurm_topo.gpu.gpu_topology import GpuTopology  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402
from slurm_topo.gpu.rings import gpu_order  # noqa: E402

TOPO = ROOT / "tests/fixtures/real/topo"

# capture -> the GPU part its INDEX.md names (the capture itself prints no model)
PARTS = {
    "a100-2gpu-sys-2nic-della.txt": "A100-SXM4-80GB",
    "azure-nv12-2x-m60-soc-noheaderindent.txt": "Tesla M60",
    "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt": "A100-SXM4-80GB",
    "dgx-a100-oci-bm-8gpu-18nic-spaces.txt": "A100-SXM4-40GB",
    "dgx1-8gpu-topo-mp-pcie-only.txt": "Tesla V100-SXM2-16GB",
    "dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt": "Tesla P100-SXM2-16GB",
    "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt": "Tesla V100-SXM2-16GB",
    "gh200-quad-4gpu-nv6-gpu-numa-id.txt": "GH200",
    "h100-4gpu-nv18-8nic-allphb-container.txt": "NVIDIA H100 80GB HBM3",
    "h100pcie-2gpu-nv12-bridge-indented6.txt": "NVIDIA H100 PCIe",
    "h800-4gpu-nv8-17nic-empty-affinity.txt": "H800",
    "h800-8gpu-nv18-10nic-merged-affinity-numa.txt": "H800",
    "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt": "NVIDIA H100 80GB HBM3",
    "rtx3090-8gpu-pcie-node-sys-dualsocket.txt": "NVIDIA GeForce RTX 3090",
    "rtx4090-8gpu-all-sys-2nic-issue.txt": "NVIDIA GeForce RTX 4090",
    "rtx5090-2gpu-phb-tabs.txt": "NVIDIA GeForce RTX 5090",
    "t4-4gpu-1plus3-sys-node-nolegend.txt": "Tesla T4",
    "titanrtx-2gpu-nv2-bridge.txt": "TITAN RTX",
}


def _capture(name: str) -> GpuTopology:
    return parse_topo_matrix((TOPO / name).read_text())


def _all_to_all(n: int, cls: str) -> GpuTopology:
    matrix = tuple(tuple("X" if i == j else cls for j in range(n)) for i in range(n))
    return GpuTopology(gpus=tuple(range(n)), matrix=matrix, source=f"{n} GPUs, every pair {cls}")


def _plan(
    topo: GpuTopology, gpu_type: str, gpus: tuple[int, ...] | None = None, closed: bool = True
) -> float:
    plan = node_plan(topo, gpus if gpus is not None else topo.gpus, gpu_type, closed=closed)
    assert plan is not None
    return plan.bandwidth


def published_rows() -> list[tuple[str, str, float, float, str]]:
    """(row, what the model computes, model GB/s, published GB/s, note)."""
    h100 = _capture("hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt")
    a100 = _capture("dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt")
    ng = DEFAULT_TABLE["network_group"].bandwidth
    pix = GpuTopology(gpus=(0, 1), matrix=(("X", "PIX"), ("PIX", "X")))
    return [
        (
            "8× H100 SXM, NVLS disabled: all_reduce busbw (nccl-tests #309)",
            "ring plan, HGX H100 capture",
            _plan(h100, "h100"),
            368.76,
            "ring; the maintainer: 'over 370'",
        ),
        (
            "8× H100 SXM, NVLS: all_reduce busbw 4 GiB (issue290)",
            "ring plan (NVLS not modelled)",
            _plan(h100, "h100"),
            473.60,
            "NVLink SHARP reduces in the switch: ~1.3× any ring",
        ),
        (
            "8× A100-SXM4-40GB: all_reduce busbw 8 GiB (superbench)",
            "ring plan, DGX A100 capture",
            _plan(a100, "A100-SXM4-40GB"),
            235.26,
            "",
        ),
        (
            "A100 NV12 pair: sendrecv (issue 45's anchor)",
            "pair: 12 × SM80 20",
            _plan(a100, "A100-SXM4-40GB", (0, 1)),
            208.0,
            "",
        ),
        (
            "8× A100 NVLink, 1 process: sendrecv 1 GiB (li-plus)",
            "pair: 12 × SM80 20",
            _plan(a100, "A100-SXM4-40GB", (0, 1)),
            195.10,
            "8 ranks each sending to the next at once",
        ),
        (
            "NDR 400G IB: per NIC (maintainer, issue290)",
            "links: network_group",
            ng,
            47.0,
            "46–48 GB/s; line rate 50",
        ),
        (
            "2×8 H100, NCCL_ALGO=RING: all_reduce algbw 8 GiB (issue290)",
            "links: network_group (1 NIC a GPU)",
            ng,
            47.95,
            "algbw; busbw 89.90 = 2 rings' worth",
        ),
        (
            "GB200 NVL72, one rack, 72 ranks: all_reduce busbw 8 GiB (coreweave)",
            "ring plan, 72 GPUs all NV18, sm100",
            _plan(_all_to_all(72, "NV18"), "gb200"),
            834.57,
            "NVLS in the rack; a ring plan is capped at 18 × 40.1 = 721.8",
        ),
        (
            "2× RTX 2080 Ti, PCIe Gen3 PIX, no P2P: all_reduce busbw (autodl)",
            "ring plan, a PIX pair, sm75",
            _plan(pix, "NVIDIA GeForce RTX 2080 Ti"),
            4.00,
            "no P2P: through host memory; the model assumes P2P",
        ),
    ]


def capture_rows() -> list[tuple[str, str, int, str, str, float, float]]:
    rows = []
    for name, part in sorted(PARTS.items()):
        try:
            topo = _capture(name)
        except SlurmTopoError:
            continue
        gen = generation_of(part)
        speeds = link_speeds(gen)
        nccl_rings._PLAN_CACHE.clear()
        start = time.perf_counter()
        plan = nccl_rings.plan_rings(topo, topo.gpus, speeds)
        took = time.perf_counter() - start
        if plan is None:
            continue
        ring = gpu_order(topo, topo.gpus, True)
        hops = list(zip(ring, ring[1:] + ring[:1], strict=False))
        one = min(_pair(topo, a, b, speeds) for a, b in hops)
        channels, speed = plan.nccl_channels(speeds.sm)
        rows.append(
            (name, part, len(topo.gpus), plan.describe(), f"{channels} × {speed:g}", one, took * 1000)
        )
    return rows


def _pair(topo: GpuTopology, a: int, b: int, speeds: nccl_rings.LinkSpeeds) -> float:
    cls = topo.link(a, b)
    if cls.startswith("NV"):
        return min(int(cls[2:]), speeds.links) * speeds.per_link
    return min(speeds.pcie, speeds.sys) if cls in ("SYS", "SOC") else speeds.pcie


def fleet_rows(seed: int = 7) -> list[tuple[str, int, float, float]]:
    """(node kind, plans, seconds cold for 100 nodes, seconds per plan worst)."""
    rng = random.Random(seed)
    out = []
    for name in ("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt", "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt"):
        topo = _capture(name)
        nccl_rings._PLAN_CACHE.clear()
        worst, start = 0.0, time.perf_counter()
        for _node in range(100):
            for size in (2, 4, 8):
                gpus = tuple(sorted(rng.sample(topo.gpus, size)))
                t0 = time.perf_counter()
                node_plan(topo, gpus, PARTS[name])
                worst = max(worst, time.perf_counter() - t0)
        out.append((name, 300, time.perf_counter() - start, worst))
    for n, cls, part in ((32, "NV18", "h100"), (72, "NV18", "gb200")):
        topo = _all_to_all(n, cls)
        nccl_rings._PLAN_CACHE.clear()
        worst, start = 0.0, time.perf_counter()
        for _node in range(100):
            gpus = tuple(sorted(rng.sample(topo.gpus, rng.choice((8, n // 2, n)))))
            t0 = time.perf_counter()
            node_plan(topo, gpus, part)
            worst = max(worst, time.perf_counter() - t0)
        out.append((f"{n} GPUs all {cls} ({part})", 100, time.perf_counter() - start, worst))
    return out


def report() -> str:
    lines = [
        "## Defaults against published figures (bench_published.py)",
        "",
        f"`python benchmarks/bench_published.py` on {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}. Published figures: "
        "tests/fixtures/real/probes/INDEX.md (anchor table).",
        "",
        "| published row | model | model GB/s | published GB/s | model / published | note |",
        "|---|---|---|---|---|---|",
    ]
    for row, what, model, published, note in published_rows():
        lines.append(f"| {row} | {what} | {model:g} | {published:g} | {model / published:.2f} | {note} |")
    lines += [
        "",
        "Intra-node plans on every capture (NCCL's speed lists and channel search; the part from the",
        "capture's INDEX.md; one ring = the best single ring's slowest hop, what the cost model paced a ring",
        "by before):",
        "",
        "| capture | part | GPUs | plan | NCCL channels (after doubling) | one ring GB/s | plan / one ring "
        "| ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, part, n, plan, nccl, one, ms in capture_rows():
        bw = float(plan.rsplit("=", 1)[1].split()[0])
        lines.append(f"| {name} | {part} | {n} | {plan} | {nccl} | {one:g} | {bw / one:.1f}× | {ms:.1f} |")
    lines += [
        "",
        "Planning cost, 100 nodes (random GPU subsets, cold cache, plans cached by links as the model calls "
        "them):",
        "",
        "| node kind | plans | s per 100 nodes | worst plan s |",
        "|---|---|---|---|",
    ]
    for kind, plans, secs, worst in fleet_rows():
        lines.append(f"| {kind} | {plans} | {secs:.3f} | {worst:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="append the section to this file")
    args = parser.parse_args()
    text = report()
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
