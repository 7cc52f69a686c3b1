#!/usr/bin/env python3
"""How fast the access layer reads a queue of pending jobs, per backend and release, on real Slurm daemons.

For each release: a 12-node test cluster (docker-slurm/cluster, fleet.yaml, no submit filter), MaxJobCount
raised, ``--jobs`` held jobs submitted (one in ten carries an ``auto`` budget record, as the filter writes
for ``zone:auto``). Then ``--rounds`` rounds, the three readers in a seeded random order each round:

- ``text-first-key`` — what relax read before slurm_topo.access: ``scontrol show job -o`` and a split of each
  budget line into pairs (the first of a repeated key wins: a job name could pass for another field);
- ``text-strict`` — the access layer's text backend: ``scontrol show job -o`` read by ``jobs_from_text``
  (every line split, ambiguous ones refused);
- ``json`` — the access layer's default without pyslurm: ``squeue --json --states=all`` read by
  ``jobs_from_json``;
- ``pyslurm`` — where the release's root has pyslurm (26.05: docker-slurm/build-pyslurm): ``Jobs.load()``
  read by ``slurm_topo.access.native``, in a helper process inside the root (the root's Python links the
  root's libslurm) that runs one pass per request; wall is timed here around the request, cpu is the
  helper's own.

Each is timed as a whole relax planning pass (the command, the parse, ``plan_pass``): wall seconds and this
process's CPU seconds (the parse and the plan; the command's own CPU is slurmctld's and the client's).
Reported: median and p95 per reader, and the ratio of medians against ``text-first-key`` measured in the same
run. The relax pass's Slurm-side cost is the listing; its updates are per due job and not timed here.

``--nodes N``: then N more node lines (``State=DOWN``, no slurmd: slurmctld lists them like any node) and a
restart of slurmctld, and the node listings, timed the same way: ``text`` (``scontrol show node -o`` read by
``access.text.node_records``, what ``relax`` reads without pyslurm), ``text-multiline`` (``scontrol show
node`` read by ``parse_show_node``, what ``health-sync`` reads) and, where the root has it, ``pyslurm``
(``Nodes.load()`` read by ``access.native.node_lines``).

Usage: python benchmarks/bench_access.py --jobs 10000 --rounds 7 --slurm native,26.05 \\
           --out benchmarks/results/access.md
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import slurmctl  # noqa: E402

from slurm_topo.access import argv as slurm_argv  # noqa: E402
from slurm_topo.access import jobs_from_json, jobs_from_text, json_jobs_argv, text_jobs_argv  # noqa: E402
from slurm_topo.access.text import node_records, parse_record_line, parse_show_node  # noqa: E402
from slurm_topo.relaxer.relax import BUDGET_PREFIX, judge, plan_pass  # noqa: E402

BUDGET = "slurm-topo: zone:auto [a(2n)]; slurm-topo-auto: zone limit=3600s region=300s any=1800s"


def first_key_pass(text: str, now: float) -> int:
    """The relaxer's planning pass before slurm_topo.access (relax.plan_pass over text): pending jobs
    counted from the raw line, budget lines split with the first-key-wins pair parser."""
    auto = 0
    for line in text.splitlines():
        if not line.startswith("JobId=") or BUDGET_PREFIX not in line:
            continue
        if judge(parse_record_line(line), now) is not None:
            auto += 1
    return auto


def submit_jobs(slurm: slurmctl.Slurm, n: int) -> None:
    """``n`` held jobs, one in ten with a budget record (what the filter writes for zone:auto)."""
    t0 = time.monotonic()
    batch = 200
    for start in range(0, n, batch):
        procs = [
            subprocess.Popen(
                [
                    "timeout",
                    "30",
                    "sbatch",
                    "--parsable",
                    "--hold",
                    "-N1",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "true",
                ],
                env=slurm.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(min(batch, n - start))
        ]
        ids = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            if p.returncode != 0:
                raise SystemExit(f"sbatch failed: {err.strip()}")
            ids.append(out.strip().split(";")[0])
        for job in ids[::10]:
            slurm.run(["scontrol", "update", f"JobId={job}", f"AdminComment={BUDGET}"], timeout=30)
        print(f"  {start + len(ids)} jobs ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)


PYSLURM_HELPER = r"""
import sys, time
sys.path.insert(0, "/opt/slurm-topo/src")
from slurm_topo.access import native
from slurm_topo.relaxer.relax import BUDGET_PREFIX, plan_pass
pyslurm = native.module()
for line in sys.stdin:
    c0 = time.process_time()
    if line.strip() == "nodes":
        n = len(native.node_lines(pyslurm))
    else:
        jobs = native.load_jobs(pyslurm, detail=lambda c: BUDGET_PREFIX in c).jobs  # as relax.run_pass asks
        n = plan_pass(jobs, time.time()).auto
    print(n, time.process_time() - c0, flush=True)
"""


def pyslurm_helper(cluster: slurmctl.Cluster) -> subprocess.Popen[str] | None:
    """A pass-per-request helper inside the cluster's root, where that root's Python imports pyslurm."""
    if not cluster.client_prefix:
        return None
    probe = subprocess.run(
        [*cluster.client_prefix, "python3", "-c", "import pyslurm"],
        env=dict(cluster.env),
        capture_output=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return None
    script = cluster.base / "pyslurm_helper.py"
    script.write_text(PYSLURM_HELPER)
    return subprocess.Popen(
        [*cluster.client_prefix, "python3", str(script)],
        env=dict(cluster.env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def helper_reader(helper: subprocess.Popen[str], request: str, cpu: list[float]) -> Callable[[], int]:
    """A reader that asks the in-root helper for one pass (``jobs`` or ``nodes``); the helper's own CPU
    seconds go to ``cpu``."""

    def read() -> int:
        assert helper.stdin is not None and helper.stdout is not None
        helper.stdin.write(request + "\n")
        helper.stdin.flush()
        n, seconds = helper.stdout.readline().split()
        cpu.append(float(seconds))
        return int(n)

    return read


def add_nodes(cluster: slurmctl.Cluster, n: int) -> None:
    """``n`` node lines with no slurmd behind them (State=DOWN), then a slurmctld restart."""
    conf = cluster.etc / "slurm.conf"
    port = int(re.search(r"(?m)^SlurmctldPort=(\d+)", conf.read_text())[1]) + 99  # type: ignore[index]
    nodes = cluster.etc / "slurm-topo-nodes.conf"
    nodes.write_text(
        nodes.read_text()
        + f"NodeName=x[00001-{n:05d}] NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
        "CPUs=2 RealMemory=1000 Gres=gpu:8 Features=region_x,zone_x-a State=DOWN\n"
    )
    slurmctl.restart_ctld(cluster.base)


def measure_nodes(
    cluster: slurmctl.Cluster, rounds: int, seed: int
) -> dict[str, list[tuple[float, float, int]]]:
    env = cluster.slurm.env

    def run(argv: list[str]) -> str:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=True).stdout

    readers: dict[str, Callable[[], int]] = {
        "text": lambda: len(node_records(run(slurm_argv.show_nodes()))),
        "text-multiline": lambda: len(parse_show_node(run(slurm_argv.show_nodes(one_line=False)))),
    }
    helper = pyslurm_helper(cluster)
    helper_cpu: list[float] = []
    if helper is not None:
        readers["pyslurm"] = helper_reader(helper, "nodes", helper_cpu)
    out = timed_rounds(readers, rounds, seed, helper_cpu)
    if helper is not None and helper.stdin is not None:
        helper.stdin.close()
        helper.wait(timeout=30)
    return out


def timed_rounds(
    readers: dict[str, Callable[[], int]], rounds: int, seed: int, helper_cpu: list[float]
) -> dict[str, list[tuple[float, float, int]]]:
    """One untimed warm-up each, then ``rounds`` rounds in a seeded random order: (wall, cpu, result)."""
    rng = random.Random(seed)
    out: dict[str, list[tuple[float, float, int]]] = {k: [] for k in readers}
    for fn in readers.values():
        fn()
    helper_cpu.clear()
    for _ in range(rounds):
        order = list(readers)
        rng.shuffle(order)
        for name in order:
            w0, c0 = time.perf_counter(), time.process_time()
            got = readers[name]()
            cpu = helper_cpu.pop() if name == "pyslurm" else time.process_time() - c0
            out[name].append((time.perf_counter() - w0, cpu, got))
    return out


def measure(cluster: slurmctl.Cluster, rounds: int, seed: int) -> dict[str, list[tuple[float, float, int]]]:
    slurm = cluster.slurm
    env = slurm.env

    def run(argv: list[str]) -> str:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=True).stdout

    def text_first_key() -> int:
        return first_key_pass(run(text_jobs_argv()), time.time())

    def text_strict() -> int:
        return plan_pass(jobs_from_text(run(text_jobs_argv())).jobs, time.time()).auto

    def json_reader() -> int:
        return plan_pass(jobs_from_json(run(json_jobs_argv())).jobs, time.time()).auto

    readers: dict[str, Callable[[], int]] = {
        "text-first-key": text_first_key,
        "text-strict": text_strict,
        "json": json_reader,
    }
    helper = pyslurm_helper(cluster)
    helper_cpu: list[float] = []
    if helper is not None:
        readers["pyslurm"] = helper_reader(helper, "jobs", helper_cpu)
    out = timed_rounds(readers, rounds, seed, helper_cpu)
    if helper is not None and helper.stdin is not None:
        helper.stdin.close()
        helper.wait(timeout=30)
    return out


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slurm", default="native,24.11,26.05")
    ap.add_argument("--nodes", type=int, default=0, help="also time node listings with this many more nodes")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lines = [
        "# Reading the pending queue: access-layer backends per release (real Slurm daemons)",
        "",
        f"Command: `python benchmarks/bench_access.py --jobs {args.jobs} --rounds {args.rounds} "
        f"--seed {args.seed} --slurm {args.slurm}"
        + (f" --nodes {args.nodes}" if args.nodes else "")
        + (f" --out {args.out}`  " if args.out else "`  "),
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; run "
        f"{time.strftime('%Y-%m-%d %H:%M')}  ",
        "Method: the module docstring (one relax planning pass per reader and round, readers in a seeded "
        "random order each round; wall = the command and the parse, cpu = this process only).",
        "",
        "| Slurm | reader | jobs | auto | wall median s | wall p95 s | cpu median s | cpu p95 s | "
        "wall ratio vs text-first-key |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    node_lines: list[str] = []
    for release in args.slurm.split(","):
        base = Path(f"/tmp/slurm-topo-bench-access-{release}-{os.getpid()}")
        os.environ["SLURM_TOPO_SLURM"] = release
        print(f"Slurm {release}: cluster up", file=sys.stderr, flush=True)
        cluster = slurmctl.start_cluster(base, nodes_max=12)
        try:
            conf = cluster.etc / "slurm.conf"
            conf.write_text(conf.read_text() + f"MaxJobCount={args.jobs * 2 + 1000}\n")
            slurmctl.restart_ctld(cluster.base)
            slurm = cluster.slurm
            submit_jobs(slurm, args.jobs)
            res = measure(cluster, args.rounds, args.seed)
            base_wall = statistics.median(w for w, _, _ in res["text-first-key"])
            version = f"{cluster.version[0]}.{cluster.version[1]:02d}"
            for name, rows in res.items():
                wall = [w for w, _, _ in rows]
                cpu = [c for _, c, _ in rows]
                lines.append(
                    f"| {version} ({release}) | {name} | {args.jobs} | {rows[-1][2]} | "
                    f"{statistics.median(wall):.3f} | {p95(wall):.3f} | {statistics.median(cpu):.3f} | "
                    f"{p95(cpu):.3f} | {statistics.median(wall) / base_wall:.2f} |"
                )
            print("\n".join(lines[-3:]), file=sys.stderr, flush=True)
            if args.nodes:
                add_nodes(cluster, args.nodes)
                nres = measure_nodes(cluster, args.rounds, args.seed)
                text_wall = statistics.median(w for w, _, _ in nres["text"])
                for name, rows in nres.items():
                    wall = [w for w, _, _ in rows]
                    cpu = [c for _, c, _ in rows]
                    node_lines.append(
                        f"| {version} ({release}) | {name} | {rows[-1][2]} | {statistics.median(wall):.3f} | "
                        f"{p95(wall):.3f} | {statistics.median(cpu):.3f} | {p95(cpu):.3f} | "
                        f"{statistics.median(wall) / text_wall:.2f} |"
                    )
                print("\n".join(node_lines[-3:]), file=sys.stderr, flush=True)
        finally:
            slurmctl.stop_cluster(base)
    if node_lines:
        lines += [
            "",
            f"Node listings ({args.nodes} node lines added, State=DOWN, no slurmd; plus the 12 real nodes):",
            "",
            "| Slurm | reader | nodes | wall median s | wall p95 s | cpu median s | cpu p95 s | "
            "wall ratio vs text |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *node_lines,
        ]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
