#!/usr/bin/env python3
"""Cost of the cost model at fleet scale: ``cost`` (score a placement + best-placement search over the whole
fleet), the best-placement search alone, and ``capacity`` (3 shapes × 4 levels), per fleet size.

Synthetic fleets: 2-10 regions, 3 zones a region, leaves (network groups) of 32 nodes, two of three leaves
8-GPU nodes with the H800 NV18 link table (tests/fixtures/real/topo), the rest 4-GPU nodes without link data.
Node states: 60 % allocated, 5 % drained, 35 % idle (seeded). Placements: a 16-node × 8-GPU job (tp 8,
pp 2, dp 8) on random 8-GPU nodes, new ones each repetition (seeded). Library calls in-process (the fleet is
built once, as the CLI would load it once); then the whole ``slurm-topo cost`` / ``capacity`` command end to
end (YAML load included) a few times per size.

    python benchmarks/bench_cost.py [--sizes 1000,10000,100000] [--repeat 30] [--cli-repeat 3]
        [--out benchmarks/results/cost.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.core.model import Inventory, Location, Node  # noqa: E402
from slurm_topo.cost import Fabric, PlanSpec, best_nodes, predict  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402
from slurm_topo.reports.capacity import NodeState, capacity  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
LEAF = 32
NV18 = ROOT / "tests/fixtures/real/topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt"


def leaves(n: int) -> list[tuple[str, str, str, str, int, int]]:
    """(prefix, region, zone, group, size, gpus) per leaf."""
    regions = max(2, min(10, n // 12_500 + 2))
    out = []
    made, leaf = 0, 0
    while made < n:
        r, z = leaf % regions, (leaf // regions) % 3
        size = min(LEAF, n - made)
        out.append(
            (
                f"g{leaf:05d}n",
                f"region{r}",
                f"region{r}-{'abc'[z]}",
                f"leaf{leaf:05d}",
                size,
                4 if leaf % 3 == 0 else 8,
            )
        )
        made += size
        leaf += 1
    return out


def make_fleet(n: int) -> Inventory:
    topo = parse_topo_matrix(NV18.read_text())
    nodes = []
    for prefix, region, zone, group, size, gpus in leaves(n):
        for i in range(size):
            nodes.append(
                Node(
                    f"{prefix}{i:02d}",
                    Location(region, zone, group),
                    gpus=gpus,
                    gpu_type="h800" if gpus == 8 else "l40s",
                    gpu_topology=topo if gpus == 8 else None,
                )
            )
    return Inventory(tuple(sorted(nodes, key=lambda x: x.name)))


def fleet_yaml(n: int) -> str:
    lines = ["nodes:"]
    for prefix, region, zone, group, size, gpus in leaves(n):
        topo = f", gpu_topology: {NV18}" if gpus == 8 else ""
        lines.append(
            f"  - {{name: '{prefix}[00-{size - 1:02d}]', region: {region}, zone: {zone}, "
            f"network_group: {group}, gpus: {gpus}, gpu_type: {'h800' if gpus == 8 else 'l40s'}{topo}}}"
        )
    return "\n".join(lines) + "\n"


def states_of(inv: Inventory, rng: random.Random) -> dict[str, NodeState]:
    out = {}
    for node in inv.nodes:
        x = rng.random()
        g = node.gpus or 0
        if x < 0.60:
            out[node.name] = NodeState(node.name, "allocated", g, 0, "ALLOCATED")
        elif x < 0.65:
            out[node.name] = NodeState(node.name, "drained", g, 0, "IDLE+DRAIN")
        else:
            out[node.name] = NodeState(node.name, "free", g, g, "IDLE")
    return out


def node_list(inv: Inventory, states: dict[str, NodeState]) -> str:
    return (
        "\n".join(f"NodeName={n.name} State={states[n.name].state} Gres=gpu:{n.gpus}" for n in inv.nodes)
        + "\n"
    )


def stats(samples: list[float]) -> tuple[float, float, float]:
    s = sorted(samples)
    p95 = s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]
    return statistics.median(s), p95, s[-1]


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_size(
    n: int, repeat: int, cli_repeat: int
) -> list[tuple[str, int, int, tuple[float, float, float]]]:
    rng = random.Random(n)
    t0 = time.perf_counter()
    inv = make_fleet(n)
    fabric = Fabric.of(inv)
    build = time.perf_counter() - t0
    eights = [x.name for x in inv.nodes if x.gpus == 8]
    spec = PlanSpec(tp=8, pp=2, gpus_per_node=8, allreduce_bytes=20e9, tp_bytes=2e9, pp_bytes=2e8)
    placements = iter([rng.sample(eights, 16) for _ in range(repeat)])
    rows = []
    rows.append(("build the fleet in memory + Fabric (once)", n, 1, (build, build, build)))
    rows.append(
        (
            "cost: predict (16x8, tp8 pp2 dp8)",
            n,
            repeat,
            stats(timed(lambda: predict(fabric, next(placements), spec), repeat)),
        )
    )
    rows.append(
        (
            "best-placement search alone (16x8)",
            n,
            repeat,
            stats(timed(lambda: best_nodes(fabric, 16, 8), repeat)),
        )
    )
    states = states_of(inv, rng)
    free = {k for k, v in states.items() if v.kind == "free"}
    rows.append(
        (
            "best placement free now (16x8, 35 % idle)",
            n,
            repeat,
            stats(timed(lambda: best_nodes(fabric, 16, 8, eligible=lambda x: x.name in free), repeat)),
        )
    )
    shapes = [(16, 8), (4, 8), (2, 4)]
    rows.append(
        (
            "capacity: 3 shapes x 4 levels",
            n,
            repeat,
            stats(timed(lambda: capacity(inv, states, shapes), repeat)),
        )
    )
    if cli_repeat:
        with tempfile.TemporaryDirectory() as tmp:
            inv_path = Path(tmp) / "fleet.yaml"
            inv_path.write_text(fleet_yaml(n))
            nodes_path = Path(tmp) / "nodes.txt"
            nodes_path.write_text(node_list(inv, states))
            placement = ",".join(rng.sample(eights, 16))
            py = [sys.executable, "-m", "slurm_topo"]
            cost_argv = [*py, "cost", "-i", str(inv_path), "--nodes", placement, "--tp", "8", "--pp", "2",
                         "--allreduce-bytes", "20G", "--tp-bytes", "2G", "--pp-bytes", "200M",
                         "--json"]  # fmt: skip
            cap_argv = [*py, "capacity", "-i", str(inv_path), "--nodes-from", str(nodes_path),
                        "--shape", "16x8", "--shape", "4x8", "--shape", "2x4", "--json"]  # fmt: skip
            show_argv = [*py, "show", "-i", str(inv_path)]
            for label, argv in (("slurm-topo cost (end to end, YAML load included)", cost_argv),
                                ("slurm-topo capacity (end to end)", cap_argv),
                                ("for reference: slurm-topo show (the loader)", show_argv)):  # fmt: skip

                def once(argv: list[str] = argv) -> None:
                    subprocess.run(argv, check=True, capture_output=True, timeout=600, cwd=ROOT)

                rows.append((label, n, cli_repeat, stats(timed(once, cli_repeat))))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--cli-repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/cost.md"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        print(f"fleet of {n} nodes ...", file=sys.stderr)
        rows.extend(bench_size(n, args.repeat, args.cli_repeat))
    cmd = "python benchmarks/bench_cost.py " + " ".join(sys.argv[1:])
    lines = [
        "# Cost model at fleet scale",
        "",
        f"Command: `{cmd.strip()}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}.",
        "",
        "Fleet: leaves of 32 nodes, 3 zones a region, 2-10 regions; 8-GPU nodes (H800 NV18 link table) and",
        "4-GPU nodes; states 60 % allocated, 5 % drained, 35 % idle. Seconds; median, p95 and worst of N",
        f"runs. Load average (1 min) at the end: {os.getloadavg()[0]:.1f} (the machine is shared: times are",
        "upper bounds). The end-to-end rows are mostly the inventory loader (compare the `show` row).",
        "",
        "| what | nodes | N | median s | p95 s | worst s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, n, count, (med, p95, worst) in rows:
        lines.append(f"| {label} | {n:,} | {count} | {med:.4f} | {p95:.4f} | {worst:.4f} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
