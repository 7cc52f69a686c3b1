#!/usr/bin/env python3
"""Generation cost against fleet size: wall time and peak memory of load + merge + render, per size.

Synthetic fleets with a realistic fan-out: 2-8 regions, 3 zones a region, racks of 40 nodes (network groups),
mixed 8- and 4-GPU nodes, written as one inventory entry per rack (as an operator would). Each size runs in a
fresh process (so peak RSS is that size's own), three times, the sizes interleaved (round 1 of every size,
then round 2, ...: a burst of load on a shared machine hits every size alike); the median and the minimum are
reported, and the growth t(100 000)/t(10 000) from the CPU times.

    python benchmarks/bench_generate.py [--sizes 30,120,...] [--repeat 3]
        [--out benchmarks/results/generate.md]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (30, 120, 500, 5_000, 10_000, 50_000, 100_000)
RACK = 40


def fleet_yaml(n: int, rack_size: int = RACK) -> str:
    regions = max(2, min(8, n // 12_500 + 2))
    lines = ["nodes:"]
    made, rack = 0, 0
    while made < n:
        r = rack % regions
        z = (rack // regions) % 3
        size = min(rack_size, n - made)
        region = f"region{r}"
        gpus = 8 if rack % 3 else 4
        lines.append(
            f"  - {{name: 'gpu-r{r}z{z}k{rack:05d}-[{0:03d}-{size - 1:03d}]', region: {region}, "
            f"zone: {region}-{'abc'[z]}, network_group: rack-{rack:05d}, gpus: {gpus}, gpu_type: h100, "
            f"slurm: {{CPUs: 128, RealMemory: 1000000}}}}"
        )
        made += size
        rack += 1
    return "\n".join(lines) + "\n"


def one_run(path: str, out: str, gc_mode: str = "default") -> None:
    """Child process: time the library path `generate` takes, print JSON. ``gc_mode``: ``off`` disables
    Python's cyclic collector for the run, ``freeze`` moves what loading made out of its reach."""
    from slurm_topo import load_inventories, render_all
    from slurm_topo.output import write_files

    if gc_mode == "off":
        gc.disable()
    c0 = time.process_time()
    t0 = time.perf_counter()
    inv = load_inventories([path])
    if gc_mode == "freeze":
        gc.freeze()
    t1 = time.perf_counter()
    rendered = render_all(inv, (22, 5))
    t2 = time.perf_counter()
    write_files(out, rendered)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "load_s": t1 - t0,
                "render_s": t2 - t1,
                "write_s": t3 - t2,
                "total_s": t3 - t0,
                "cpu_s": cpu,
                "peak_mib": peak_kib / 1024,
                "bytes": sum(len(t) for t in rendered.values()),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "generate.md"))
    ap.add_argument(
        "--gc",
        choices=("default", "off", "freeze"),
        default="default",
        help="Python's cyclic collector in the runs: as is, disabled, or frozen after loading",
    )
    ap.add_argument(
        "--cli",
        action="store_true",
        help="time the `slurm-topo generate` command instead (process CPU and wall, interpreter start and "
        "imports included); appends a table to --out",
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        one_run(args.child[0], args.child[1], args.gc)
        return
    if args.cli:
        time_cli(args)
        return
    rows = []
    sizes = [int(s) for s in args.sizes.split(",")]
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            (Path(tmp) / f"fleet-{n}.yaml").write_text(fleet_yaml(n))
        for i in range(args.repeat):
            for n in sizes:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", f"{tmp}/fleet-{n}.yaml", f"{tmp}/out-{n}-{i}"]
                    + ["--gc", args.gc],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    sys.exit(f"{n} nodes, run {i + 1}: the child failed:\n{out.stderr[-2000:]}")
                r = json.loads(out.stdout)
                runs[n].append(r)
                print(
                    f"{n:>7} nodes, run {i + 1}: total {r['total_s']:.3f} s, cpu {r['cpu_s']:.3f} s (load "
                    f"{r['load_s']:.3f}, render {r['render_s']:.3f}, write {r['write_s']:.3f}), peak "
                    f"{r['peak_mib']:.0f} MiB",
                    flush=True,
                )
    for n in sizes:
        med = {k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]}
        med["cpu_min"] = min(r["cpu_s"] for r in runs[n])
        rows.append((n, med, [r["total_s"] for r in runs[n]]))
    cmd = "python benchmarks/bench_generate.py " + " ".join(sys.argv[1:])
    lines = [
        "# Generation cost against fleet size",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}  ",
        "Method: load + validate + merge + render + atomic write of every output (topology.conf, "
        "slurm-topo-nodes.conf, slurm_topo_data.lua), each size in "
        f"a fresh process, median of {args.repeat}; cpu = the process's CPU time for the same work (steadier "
        "than wall time on a shared machine); peak = the process's max RSS (interpreter included). "
        f"Racks of {RACK} nodes, 3 zones a region.",
        "",
        "| nodes | total s (median) | cpu s | cpu s (min) | load s | render s | write s | peak MiB | µs/node "
        "| output bytes | all runs s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, med, totals in rows:
        lines.append(
            f"| {n} | {med['total_s']:.3f} | {med['cpu_s']:.3f} | {med['cpu_min']:.3f} | "
            f"{med['load_s']:.3f} | {med['render_s']:.3f} | "
            f"{med['write_s']:.3f} | {med['peak_mib']:.0f} | {med['total_s'] / n * 1e6:.1f} | "
            f"{int(med['bytes'])} | {', '.join(f'{t:.3f}' for t in totals)} |"
        )
    lines += [
        "",
        "Target: 100 000 nodes in <= 5 s and <= 1 GiB, growing about linearly (see µs/node). "
        "Every `slurm:` value is checked against what Slurm accepts and every hostlist is counted "
        "before it is expanded; the "
        "rows show what that costs at each size.",
    ]
    by_n = {n: med for n, med, _ in rows}
    if 10_000 in by_n and 100_000 in by_n:
        a, b = by_n[10_000], by_n[100_000]
        lines += [
            "",
            f"Growth t(100 000)/t(10 000): cpu median **{b['cpu_s'] / a['cpu_s']:.2f}**, cpu min "
            f"**{b['cpu_min'] / a['cpu_min']:.2f}**, wall median {b['total_s'] / a['total_s']:.2f} "
            "(goal <= 11).",
        ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


def time_cli(args: argparse.Namespace) -> None:
    """``slurm-topo generate`` as a user runs it, sizes interleaved: CPU (user + system, from the child's
    rusage) and wall per run."""
    cli = str(Path(sys.executable).parent / "slurm-topo")
    sizes = [int(s) for s in args.sizes.split(",")]
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    wall: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            (Path(tmp) / f"fleet-{n}.yaml").write_text(fleet_yaml(n))
        for i in range(args.repeat):
            for n in sizes:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                p = subprocess.run(
                    [cli, "generate", "--inventory", f"{tmp}/fleet-{n}.yaml", "--out", f"{tmp}/out-{n}-{i}"]
                    + ["--slurm-version", "22.05"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                wall[n].append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if p.returncode != 0:
                    sys.exit(f"{n} nodes, run {i + 1}: slurm-topo generate failed:\n{p.stderr[-2000:]}")
                cpu[n].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                print(
                    f"{n:>7} nodes, run {i + 1}: cpu {cpu[n][-1]:.3f} s, wall {wall[n][-1]:.3f} s", flush=True
                )
    cmd = "python benchmarks/bench_generate.py " + " ".join(sys.argv[1:])
    lines = [
        "",
        "## `slurm-topo generate` (the command, interpreter start and imports included)",
        "",
        f"Command: `{cmd.strip()}`  ",
        "Method: `slurm-topo generate --inventory FLEET --out DIR --slurm-version 22.05`, "
        f"{args.repeat} runs per size, sizes interleaved; CPU = the command's user + system time.",
        "",
        "| nodes | cpu s (median) | cpu s (min) | wall s (median) | all cpu s |",
        "|---:|---:|---:|---:|---|",
        *(
            f"| {n} | {statistics.median(cpu[n]):.3f} | {min(cpu[n]):.3f} | "
            f"{statistics.median(wall[n]):.3f} | "
            f"{', '.join(f'{c:.3f}' for c in cpu[n])} |"
            for n in sizes
        ),
    ]
    if 10_000 in cpu and 100_000 in cpu:
        a, b = cpu[10_000], cpu[100_000]
        lines += [
            "",
            f"Growth t(100 000)/t(10 000): cpu median **{statistics.median(b) / statistics.median(a):.2f}**, "
            f"cpu min **{min(b) / min(a):.2f}** (goal <= 11).",
        ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
