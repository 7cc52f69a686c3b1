#!/usr/bin/env python3
"""What one plan costs as nodes grow and as GPUs per node grow: ``score_placement`` (the layout gpulayer-srun
runs, the cost model's ranks) for TP 8 on NVSwitch nodes of 8-1 024 GPUs and on nodes of NVLink quads joined
by SYS, CPU seconds of this process. Goal (issue 45 item 3): every fleet ≤ 1 s per 100 nodes.

    python benchmarks/bench_plan_scale.py [--out benchmarks/results/plan_scale.md]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slurm_topo.core.model import Inventory, Location, Node  # noqa: E402
from slurm_topo.cost import PlanSpec, score_placement  # noqa: E402
from slurm_topo.cost.comm import Fabric  # noqa: E402
from slurm_topo.gpu.gpu_topology import GpuTopology  # noqa: E402

SHAPES = ((8, 100), (32, 100), (72, 36), (72, 100), (256, 2), (512, 2), (1024, 2))


def fleet(gpus: int, nodes: int, kind: str) -> Fabric:
    def cls(i: int, j: int) -> str:
        if i == j:
            return "X"
        return "NV18" if kind == "nvswitch" or i // 4 == j // 4 else "SYS"

    matrix = tuple(tuple(cls(i, j) for j in range(gpus)) for i in range(gpus))
    topo = GpuTopology(gpus=tuple(range(gpus)), matrix=matrix)
    return Fabric.of(
        Inventory(
            tuple(
                Node(
                    f"n{i:04d}",
                    Location("r", "z", f"g{i // 8}"),
                    gpus=gpus,
                    gpu_type="h100",
                    gpu_topology=topo,
                )
                for i in range(nodes)
            )
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = ["| node | GPUs a node | nodes | plan | CPU s | s per 100 nodes |", "|---|---|---|---|---|---|"]
    for kind in ("nvswitch", "quads"):
        for gpus, nodes in SHAPES:
            for spec, name in (
                (PlanSpec(tp=8, tp_bytes=1e9, allreduce_bytes=1e10), "tp 8"),
                (PlanSpec(tp=4, pp=2, tp_bytes=1e9, pp_bytes=1e8, allreduce_bytes=1e10), "tp 4 × pp 2"),
            ):
                fabric = fleet(gpus, nodes, kind)
                t0 = time.process_time()
                score_placement(fabric, list(fabric.nodes), spec)
                dt = time.process_time() - t0
                rows.append(f"| {kind} | {gpus} | {nodes} | {name} | {dt:.2f} | {dt * 100 / nodes:.2f} |")
                print(rows[-1], flush=True)
    head = [
        "# One plan as the fleet grows (bench_plan_scale.py)",
        "",
        f"`python benchmarks/bench_plan_scale.py` on {platform.python_version()}, {platform.machine()}, "
        "shared 2-core host (CPU times ±15 %).",
        "",
    ]
    text = "\n".join(head + rows) + "\n"
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
