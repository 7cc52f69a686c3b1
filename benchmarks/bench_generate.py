#!/usr/bin/env python3
"""Generation cost against fleet size: wall time and peak memory of load + merge + render, per size.

Synthetic fleets with a realistic fan-out: 2-8 regions, 3 zones a region, racks of 40 nodes (network groups),
mixed 8- and 4-GPU nodes, written as one inventory entry per rack (as an operator would). Each size runs in a
fresh process (so peak RSS is that size's own), three times, the sizes interleaved (round 1 of every size,
then round 2, ...: a burst of load on a shared machine hits every size alike); the median and the minimum are
reported, and the growth t(100 000)/t(10 000) from the CPU times.

    python benchmarks/bench_generate.py [--sizes 30,120,...] [--repeat 3] [--partitions] [--cli]
        [--out benchmarks/results/generate.md]

``--partitions`` adds a realistic ``scontrol show partition -o`` listing (``partition_listing``: six
overlapping partitions, Slurm's ranged ``Nodes=`` strings), read as ``generate --partitions-from`` reads it.
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


def _racks(n: int, rack_size: int = RACK) -> list[tuple[str, int, str, str, int]]:
    """The fleet's racks in order: (name prefix, size, region, zone, GPUs a node)."""
    regions = max(2, min(8, n // 12_500 + 2))
    out = []
    made, rack = 0, 0
    while made < n:
        r = rack % regions
        z = (rack // regions) % 3
        size = min(rack_size, n - made)
        region = f"region{r}"
        out.append((f"gpu-r{r}z{z}k{rack:05d}-", size, region, f"{region}-{'abc'[z]}", 8 if rack % 3 else 4))
        made += size
        rack += 1
    return out


def fleet_yaml(n: int, rack_size: int = RACK) -> str:
    lines = ["nodes:"]
    for prefix, size, region, zone, gpus in _racks(n, rack_size):
        lines.append(
            f"  - {{name: '{prefix}[{0:03d}-{size - 1:03d}]', region: {region}, "
            f"zone: {zone}, network_group: rack-{prefix[-6:-1]}, gpus: {gpus}, gpu_type: h100, "
            f"slurm: {{CPUs: 128, RealMemory: 1000000}}}}"
        )
    return "\n".join(lines) + "\n"


def _folded(prefix: str, numbers: list[int]) -> str:
    """``prefix[000,003-005]`` as Slurm's ranged string writes one prefix's sorted numbers (width 3)."""
    runs: list[list[int]] = []
    for i in numbers:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    inner = ",".join(f"{lo:03d}" if lo == hi else f"{lo:03d}-{hi:03d}" for lo, hi in runs)
    return f"{prefix}[{inner}]"


PARTITIONS = ("all", "gpu8", "gpu4", "region0", "debug", "half")


def partition_listing(n: int, seed: int = 1) -> str:
    """``scontrol show partition -o`` for the fleet of :func:`fleet_yaml`, as a site with six overlapping
    partitions sees it: every node (the default), the 8-GPU racks, the 4-GPU racks, one region, a seeded 30 %
    of the nodes scattered over every rack, and every other node. ``Nodes=`` is Slurm's ranged string: a comma
    list of one folded bracket per rack (2 500 items at 100 000 nodes; scattered partitions fold badly)."""
    import random

    rng = random.Random(seed)
    members: dict[str, list[str]] = {name: [] for name in PARTITIONS}
    counts = dict.fromkeys(PARTITIONS, 0)
    for prefix, size, region, _, gpus in _racks(n):
        every = list(range(size))
        picks = {
            "all": every,
            "gpu8": every if gpus == 8 else [],
            "gpu4": every if gpus == 4 else [],
            "region0": every if region == "region0" else [],
            "debug": [i for i in every if rng.random() < 0.3],
            "half": every[::2],
        }
        for name, numbers in picks.items():
            if numbers:
                members[name].append(_folded(prefix, numbers))
                counts[name] += len(numbers)
    return "".join(
        f"PartitionName={name} AllowGroups=ALL AllowAccounts=ALL Default={'YES' if name == 'all' else 'NO'} "
        f"MaxNodes=UNLIMITED Nodes={','.join(items)} State=UP TotalNodes={counts[name]}\n"
        for name, items in members.items()
    )


def one_run(path: str, out: str, gc_mode: str = "default", partitions_from: str | None = None) -> None:
    """Child process: time the library path `generate` takes, print JSON. ``gc_mode``: ``off`` disables
    Python's cyclic collector for the run, ``freeze`` moves what loading made out of its reach.
    ``partitions_from``: a saved ``scontrol show partition -o``, read as ``generate --partitions-from`` reads
    it (``cli.common._partitions``: the listing parsed, every ``Nodes=`` expanded), inside the timed load."""
    from slurm_topo import load_inventories, render_all
    from slurm_topo.cli.common import _partitions
    from slurm_topo.plumbing.output import write_files

    if gc_mode == "off":
        gc.disable()
    c0 = time.process_time()
    t0 = time.perf_counter()
    inv = load_inventories([path])
    tp = time.process_time()
    partitions = _partitions(partitions_from, False)
    partitions_cpu = time.process_time() - tp
    if gc_mode == "freeze":
        gc.freeze()
    t1 = time.perf_counter()
    rendered = render_all(inv, (22, 5), partitions)
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
                "partitions_cpu_s": partitions_cpu,
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
    ap.add_argument(
        "--partitions",
        action="store_true",
        help="give generate a realistic partition listing (partition_listing: six overlapping partitions, "
        "Slurm's ranged Nodes= strings), parsed and expanded inside the timed load",
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--partitions-from", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        one_run(args.child[0], args.child[1], args.gc, args.partitions_from)
        return
    if args.cli:
        time_cli(args)
        return
    rows = []
    sizes = [int(s) for s in args.sizes.split(",")]
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            _write_inputs(tmp, n, args.partitions)
        for i in range(args.repeat):
            for n in sizes:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", f"{tmp}/fleet-{n}.yaml", f"{tmp}/out-{n}-{i}"]
                    + ["--gc", args.gc]
                    + (["--partitions-from", f"{tmp}/partitions-{n}.txt"] if args.partitions else []),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    sys.exit(f"{n} nodes, run {i + 1}: the child failed:\n{out.stderr[-2000:]}")
                r = json.loads(out.stdout)
                runs[n].append(r)
                print(
                    f"{n:>7} nodes, run {i + 1}: total {r['total_s']:.3f} s, cpu {r['cpu_s']:.3f} s "
                    f"(partitions {r['partitions_cpu_s']:.3f} cpu s; load "
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
        f"Racks of {RACK} nodes, 3 zones a region"
        + (
            "; with `partition_listing`'s six overlapping partitions, read as `--partitions-from` reads them "
            "inside the load (partitions cpu s: that reading alone)."
            if args.partitions
            else "."
        ),
        "",
        "| nodes | total s (median) | cpu s | cpu s (min) | partitions cpu s | load s | render s | write s "
        "| peak MiB | µs/node | output bytes | all runs s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n, med, totals in rows:
        lines.append(
            f"| {n} | {med['total_s']:.3f} | {med['cpu_s']:.3f} | {med['cpu_min']:.3f} | "
            f"{med['partitions_cpu_s']:.3f} | {med['load_s']:.3f} | {med['render_s']:.3f} | "
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


def _write_inputs(tmp: str, n: int, partitions: bool) -> None:
    (Path(tmp) / f"fleet-{n}.yaml").write_text(fleet_yaml(n))
    if partitions:
        (Path(tmp) / f"partitions-{n}.txt").write_text(partition_listing(n))


def time_cli(args: argparse.Namespace) -> None:
    """``slurm-topo generate`` as a user runs it, sizes interleaved: CPU (user + system, from the child's
    rusage) and wall per run."""
    cli = str(Path(sys.executable).parent / "slurm-topo")
    sizes = [int(s) for s in args.sizes.split(",")]
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    wall: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            _write_inputs(tmp, n, args.partitions)
        for i in range(args.repeat):
            for n in sizes:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                p = subprocess.run(
                    [cli, "generate", "--inventory", f"{tmp}/fleet-{n}.yaml", "--out", f"{tmp}/out-{n}-{i}"]
                    + ["--slurm-version", "22.05"]
                    + (["--partitions-from", f"{tmp}/partitions-{n}.txt"] if args.partitions else []),
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
        "Method: `slurm-topo generate --inventory FLEET --out DIR --slurm-version 22.05"
        + (" --partitions-from LISTING` (`partition_listing`'s six partitions)" if args.partitions else "`")
        + ", "
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
