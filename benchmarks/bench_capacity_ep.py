#!/usr/bin/env python3
"""Cost of ``capacity`` with EP shapes (``NxG:ep=E``) at fleet scale, beside the same shapes without EP.

Synthetic fleets of GB200-like racks: 4-GPU nodes with one link matrix (the real 4-GPU H100 NV18 capture,
tests/fixtures/real/topo: one NVLink island), NVLink domains of 18 nodes (an NVL72 rack), network
groups of 4 racks (72 nodes), 2-10 regions of 3 zones. Node states (seeded): 35 % idle, 30 % mixed with
0-3 GPUs free, 30 % allocated, 5 % drained. Shapes: 8x4, 8x4:ep=16 (blocks of 4 nodes), 16x4:ep=32 (8),
2x4:ep=8 (2), 4x4:ep=4 (inside a node). Library calls in-process, CPU time (``time.process_time``) per call
of ``capacity`` over the fleet's default levels (network_group, zone, region, any).

    python benchmarks/bench_capacity_ep.py [--sizes 1000,10000,100000] [--repeat 7] [--seed 46]
        [--out benchmarks/results/capacity_ep.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.core.model import Inventory, Location, Node  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402
from slurm_topo.reports.capacity import ALLOCATED, DRAINED, FREE, NodeState, capacity, parse_shape  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
RACK, RACKS_PER_GROUP, GPUS = 18, 4, 4
CAPTURE = ROOT / "tests/fixtures/real/topo/h100-4gpu-nv18-8nic-allphb-container.txt"
SHAPES = ("8x4", "8x4:ep=16", "16x4:ep=32", "2x4:ep=8", "4x4:ep=4")


def fleet(n: int, seed: int) -> tuple[Inventory, dict[str, NodeState]]:
    rng = random.Random(seed)
    regions = max(2, min(10, n // 12_500 + 2))
    nodes, states = [], {}
    topo = parse_topo_matrix(CAPTURE.read_text())
    group_nodes = RACK * RACKS_PER_GROUP
    locations: dict[int, Location] = {}
    for i in range(n):
        g = i // group_nodes
        if g not in locations:
            r, z = g % regions, (g // regions) % 3
            locations[g] = Location(f"region{r}", f"region{r}-{'abc'[z]}", f"ng{g:05d}")
        name = f"gb{i:06d}"
        nodes.append(
            Node(name, locations[g], gpus=GPUS, nvlink_domain=f"rack{i // RACK:05d}", gpu_topology=topo)
        )
        roll = rng.random()
        if roll < 0.35:
            states[name] = NodeState(name, FREE, GPUS, GPUS, "IDLE")
        elif roll < 0.65:
            free = rng.randint(0, GPUS - 1)
            states[name] = NodeState(name, ALLOCATED, GPUS, free, "MIXED")
        elif roll < 0.95:
            states[name] = NodeState(name, ALLOCATED, GPUS, 0, "ALLOCATED")
        else:
            states[name] = NodeState(name, DRAINED, GPUS, 0, "IDLE+DRAIN")
    return Inventory(tuple(nodes)), states


def cpu_ms(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out.append((time.process_time() - t0) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--out")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = [
        "# capacity with EP shapes",
        "",
        f"`python benchmarks/bench_capacity_ep.py --sizes {args.sizes} --repeat {args.repeat} "
        f"--seed {args.seed}` on {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs ({platform.machine()}); CPU ms per `capacity()` call, one shape at a time, "
        "4 levels; jobs = the `any` level's count.",
        "",
        "| nodes | shape | EP groups | jobs (any) | median ms | max ms | runs |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for n in sizes:
        inv, states = fleet(n, args.seed)
        for text in SHAPES:
            shape = parse_shape(text)
            result = capacity(inv, states, [shape]).shapes[0]
            times = cpu_ms(lambda i=inv, s=states, sh=shape: capacity(i, s, [sh]), args.repeat)
            lines.append(
                f"| {n} | {text} | {result.ep_within or '-'} | {result.levels[-1].jobs} | "
                f"{statistics.median(times):.1f} | {max(times):.1f} | {len(times)} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
