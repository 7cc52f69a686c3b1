"""sbatch submit latency with the slurm-topo locality filter and without it, interleaved, on real Slurm
daemons.

Two test clusters side by side (docker-slurm/cluster), identical but for the filter: both load the locality
SPANK plugin (so both clients pay the same plugin load), only one has JobSubmitPlugins=lua with job_submit.lua
+ slurm_topo_filter.lua + the generated slurm_topo_data.lua. Rounds alternate blocks of submissions between
them in seeded random order, so machine noise hits both alike. Every submission is

    timeout 30 sbatch --parsable --hold -N1 --locality=zone -J bs -o /dev/null --wrap=true

(held: it never runs), timed around the process with perf_counter, as in shared/docs/baselines-22.05.md §A.
After each block the filtered cluster's jobs are checked for the filter's decision (Features=[zone_...]) and
the plain one's for none, then all are cancelled.

    .venv/bin/python benchmarks/bench_submit.py [--rounds 30 --block 20] [--out benchmarks/results/submit.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import slurmctl  # noqa: E402

ARGS = ["--parsable", "--hold", "-N1", "--locality=zone", "-J", "bs", "-o", "/dev/null", "--wrap=true"]


def submit_block(slurm: slurmctl.Slurm, n: int) -> tuple[list[float], list[str]]:
    times, jobs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.run(
            ["timeout", "30", "sbatch", *ARGS], env=slurm.env, capture_output=True, text=True, check=False
        )
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"sbatch failed: {p.stderr}")
        times.append(dt * 1000)
        jobs.append(p.stdout.strip().split(";")[0])
    return times, jobs


def check_and_cancel(slurm: slurmctl.Slurm, jobs: list[str], filtered: bool) -> None:
    out = slurm.out("squeue", "-h", "-o", "%i %f", "-j", ",".join(jobs))
    feats = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}
    for j in jobs:
        f = feats.get(j, "?")
        if filtered != f.startswith("[zone_"):
            raise SystemExit(
                f"job {j}: Features={f}, expected {'the filter decision' if filtered else '(null)'}"
            )
    slurm.cancel(*jobs)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown result here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (the test clusters need it)")
    bases = {
        "plain": Path(f"/tmp/slurm-topo-bench-plain-{os.getpid()}"),
        "filter": Path(f"/tmp/slurm-topo-bench-filter-{os.getpid()}"),
    }
    clusters: dict[str, slurmctl.Cluster] = {}
    try:
        clusters["plain"] = slurmctl.start_cluster(bases["plain"], "--spank")
        clusters["filter"] = slurmctl.start_cluster(bases["filter"], "--with-filter")
        rng = random.Random(args.seed)
        times: dict[str, list[float]] = {"plain": [], "filter": []}
        ratios: list[float] = []
        for r in range(args.warmup + args.rounds):
            order = ["plain", "filter"]
            rng.shuffle(order)
            medians = {}
            for name in order:
                slurm = clusters[name].slurm
                t, jobs = submit_block(slurm, args.block)
                check_and_cancel(slurm, jobs, name == "filter")
                medians[name] = statistics.median(t)
                if r >= args.warmup:
                    times[name].extend(t)
            if r >= args.warmup:
                ratios.append(medians["filter"] / medians["plain"])
        report = render(args, times, ratios, clusters["plain"].version)
    finally:
        for base in bases.values():
            if base.exists():
                slurmctl.stop_cluster(base)
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


def render(
    args: argparse.Namespace, times: dict[str, list[float]], ratios: list[float], version: tuple[int, int]
) -> str:
    p, f = times["plain"], times["filter"]
    med_ratio = statistics.median(f) / statistics.median(p)
    p95_ratio = pct(f, 0.95) / pct(p, 0.95)
    cpu = os.cpu_count()
    cmd = f"python benchmarks/bench_submit.py --rounds {args.rounds} --block {args.block} --seed {args.seed}"
    rs = sorted(ratios)
    lines = [
        "# sbatch submit latency with and without the locality filter (real Slurm daemons)",
        "",
        f"Command: `{cmd}{' --out ' + str(args.out) if args.out else ''}`  ",
        (
            f"Machine: {platform.machine()}, {cpu} CPUs, {platform.platform()}; Slurm "
            f"{version[0]}.{version[1]:02d}; "
            f"run {time.strftime('%Y-%m-%d %H:%M')}  "
        ),
        (
            "Method: two 12-node test clusters side by side (docker-slurm/cluster, fleet.yaml), both with "
            "the locality "
            "SPANK plugin; only `filter` has JobSubmitPlugins=lua (job_submit.lua + slurm_topo_filter.lua + "
            "generated "
            "data). "
            f"{args.warmup} untimed rounds, then {args.rounds} rounds of one block of {args.block} "
            "submissions per "
            "cluster in seeded random order; every submission `timeout 30 sbatch --parsable --hold -N1 "
            "--locality=zone "
            "-J bs -o /dev/null --wrap=true`, wall time of the process. Each block's jobs were checked "
            "(Features=[zone_…] with the filter, (null) without) and cancelled."
        ),
        "",
        "| config | n | median ms | p95 ms | mean ms |",
        "|---|---:|---:|---:|---:|",
        f"| no JobSubmitPlugins | {len(p)} | {statistics.median(p):.2f} | {pct(p, 0.95):.2f} | "
        f"{statistics.mean(p):.2f} |",
        f"| slurm-topo filter | {len(f)} | {statistics.median(f):.2f} | {pct(f, 0.95):.2f} | "
        f"{statistics.mean(f):.2f} |",
        "",
        (
            f"Ratio filter/plain: median **{med_ratio:.3f}**, p95 **{p95_ratio:.3f}**; per-round ratio of "
            "block medians: "
            f"median {statistics.median(ratios):.3f}, IQR {pct(rs, 0.25):.3f}–{pct(rs, 0.75):.3f}. Target ≤ "
            "1.05 "
            f"(median): {'met' if med_ratio <= 1.05 else 'NOT met'}."
        ),
        "",
        (
            "Baseline (shared/docs/baselines-22.05.md §A, 2-vCPU VM, one cluster toggled by reconfigure): no "
            "plugin "
            "6.22 ms, realistic Lua 6.55 ms median (ratio 1.053), p95 7.55 / 8.51 ms (1.127)."
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
