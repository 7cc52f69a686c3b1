#!/usr/bin/env python3
"""What NCCL's intra-node ring plan (cost/links.node_plan, used by cost/comm.ring_allreduce inside one
node) adds to scoring a placement: ``score_placement`` CPU time with the plan and with it switched off
(``comm._planned`` replaced by the identity), on fleets of one real capture (DGX-1 V100 hybrid cube mesh, HGX
H100, DGX A100), for TP-8, TP-4 and TP-2 × PP-4 plans over every node; and the TP term's bandwidth either way.

    python benchmarks/bench_cost_plan.py [--nodes 36,100] [--out benchmarks/results/cost_plan.md]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.core.model import Inventory, Location, Node  # noqa: E402
from slurm_topo.cost import PlanSpec, comm, score_placement  # noqa: E402
from slurm_topo.cost.comm import Fabric  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402

REAL = ROOT / "tests/fixtures/real/topo"
CAPTURES = (
    ("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt", "v100"),
    ("hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt", "h100"),
    ("dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt", "a100"),
)
SPECS = (
    PlanSpec(tp=8, tp_bytes=1e9, allreduce_bytes=1e10),
    PlanSpec(tp=4, tp_bytes=1e9, allreduce_bytes=1e10),
    PlanSpec(tp=2, pp=4, tp_bytes=1e9, pp_bytes=1e8, allreduce_bytes=1e10),
)


def fleet(capture: str, gpu_type: str, n: int) -> Fabric:
    topo = parse_topo_matrix((REAL / capture).read_text())
    nodes = tuple(
        Node(f"n{i:04d}", Location("r", "z", f"g{i // 8}"), gpus=8, gpu_type=gpu_type, gpu_topology=topo)
        for i in range(n)
    )
    return Fabric.of(Inventory(nodes))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="36,100")
    ap.add_argument("--out")
    args = ap.parse_args()
    sizes = [int(x) for x in args.nodes.split(",")]
    planned = comm._planned
    rows = [
        "| GPUs | nodes | plan | TP GB/s without plan | with plan | CPU without (ms) | with (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for capture, gpu_type in CAPTURES:
        for n in sizes:
            fabric = fleet(capture, gpu_type, n)
            for spec in SPECS:
                got = []
                for on in (False, True):
                    comm._planned = planned if on else (lambda f, r, t, h: h)  # type: ignore[assignment]
                    t0 = time.process_time()
                    cost = score_placement(fabric, list(fabric.nodes), spec)
                    got.append(
                        (time.process_time() - t0, next(t.bandwidth for t in cost.terms if t.kind == "tp"))
                    )
                comm._planned = planned  # type: ignore[assignment]
                shape = f"tp {spec.tp}" + (f" × pp {spec.pp}" if spec.pp > 1 else "")
                rows.append(
                    f"| {gpu_type} | {n} | {shape} | {got[0][1]:g} | {got[1][1]:g} | "
                    f"{got[0][0] * 1000:.0f} | {got[1][0] * 1000:.0f} |"
                )
    head = [
        "# Intra-node ring plans in the cost model (bench_cost_plan.py)",
        "",
        f"`python benchmarks/bench_cost_plan.py --nodes {args.nodes}` on {platform.python_version()}, "
        f"{platform.machine()} (shared 2-core machine: CPU times are ±15 %).",
        "",
    ]
    text = "\n".join(head + rows) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
