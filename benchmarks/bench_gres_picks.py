#!/usr/bin/env python3
"""What Slurm actually does with our gres.conf: which GPUs a real slurmctld picks on an 8-GPU, 2-island node.

One test cluster (docker-slurm/cluster, real Slurm daemons, fake GPU devices) with four 8-GPU nodes built from
the same capture (tests/fixtures/synthetic/islands-2x4-nv18.txt: NVLink islands 0-3 / 4-7, one per 8-core
socket). Node g1 gets the gres.conf lines `slurm-topo generate` writes; the others get that file edited into
the variants the issue asks about:

    g1  ours: Links= (NVLink counts) and Cores= (the island's socket, from the CPU affinity)
    g2  Links all 0 (what AutoDetect=nvml reports on NVSwitch boxes), Cores= kept
    g3  no Links, Cores= kept
    g4  neither Links nor Cores (a hand-written gres.conf)

The same seeded job mix runs on every node in parallel (`sbatch -w gN --gres=gpu:k`, k = 1/2/4 with weights
.5/.3/.2, 1 CPU, not exclusive). Time is virtual: a job is ended with scancel when its seeded duration is
over, and a job that does not fit waits until enough jobs have ended, so the busy set at each pick is known
exactly. The GPUs Slurm gave come from `scontrol show job -d` (IDX). Reported per node: multi-GPU jobs inside
one island (and among those where an island had room), 1-GPU jobs that broke an entirely free island, and the
*avoidable* breaks counted only over the 1-GPU jobs that had a choice (an entirely free island to break *and*
a free GPU in a partly used island to take instead). The last row is not Slurm: it is
`slurm_topo.gpu.pick_devices` computed (simulated) on the busy sets Slurm produced on g1 — the rule
gpulayer-srun applies inside an allocation — so it answers "what would the picker have chosen here", not "what
happened under gpulayer-srun". Per-job rows go to ``--rows`` (JSON lines) so the table can be recomputed
without a cluster: ``--from-rows FILE``.

    python benchmarks/bench_gres_picks.py [--jobs 200] [--seed 7] [--out benchmarks/results/gres_picks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from slurm_topo.gpu import islands, parse_topo_matrix, pick_devices  # noqa: E402

CAPTURE = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
NODES = ("g1", "g2", "g3", "g4")
VARIANTS = {
    "g1": "ours: Links + Cores",
    "g2": "Links all 0, Cores",
    "g3": "no Links, Cores",
    "g4": "no Links, no Cores",
}
HW = "{CPUs: 16, Boards: 1, SocketsPerBoard: 2, CoresPerSocket: 8, ThreadsPerCore: 1, RealMemory: 64000}"


def sh(argv: list[str], env: dict[str, str], timeout: float = 30) -> str:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=True).stdout


def variant(line: str, node: str) -> str:
    if node == "g2":
        return re.sub(
            r"Links=([-0-9,]+)",
            lambda m: "Links=" + ",".join("-1" if x == "-1" else "0" for x in m[1].split(",")),
            line,
        )
    if node == "g3":
        return re.sub(r" Links=\S+", "", line)
    if node == "g4":
        return re.sub(r" (Links|Cores)=\S+", "", line)
    return line


def start_cluster(base: Path) -> dict[str, str]:
    work = base.parent
    fleet = work / "fleet.yaml"
    fleet.write_text(
        "nodes:\n"
        + "".join(
            f"  - {{name: {n}, region: r1, zone: r1-a, network_group: rack-1, gpu_type: h100, "
            f"gpu_topology: '{CAPTURE}', slurm: {HW}}}\n"
            for n in NODES
        )
    )
    launcher = [sys.executable, str(REPO / "docker-slurm" / "cluster")]
    subprocess.run(
        [*launcher, "up", "--base", str(base), "--inventory", str(fleet)],
        check=True,
        timeout=180,
        capture_output=True,
    )
    subprocess.run(
        [*launcher, "down", "--base", str(base), "--keep"], check=False, timeout=60, capture_output=True
    )
    files = work / "files"
    shutil.rmtree(files, ignore_errors=True)
    shutil.copytree(base / "etc" / "generated", files)
    gres = (files / "gres.conf").read_text().splitlines()
    out = []
    for line in gres:
        if line.startswith("NodeName="):
            expr, rest = line.split(" ", 1)
            for node in NODES:  # one block per node, each edited into its variant
                out.append(variant(f"NodeName={node} {rest}", node))
        else:
            out.append(line)
    (files / "gres.conf").write_text("\n".join(out) + "\n")
    subprocess.run(
        [*launcher, "up", "--base", str(base), "--files", str(files)],
        check=True,
        timeout=180,
        capture_output=True,
    )
    return dict(os.environ, SLURM_CONF=str(base / "etc" / "slurm.conf"))


def job_mix(n: int, seed: int) -> list[tuple[float, int, float]]:
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for _ in range(n):
        t += rng.expovariate(1 / 1.6)
        jobs.append((t, rng.choices((1, 2, 4), (0.5, 0.3, 0.2))[0], rng.uniform(1, 10)))
    return jobs


def idx_of(job: str, env: dict[str, str]) -> tuple[int, ...] | None:
    text = sh(["scontrol", "show", "job", "-d", job], env)
    if "JobState=RUNNING" not in text:
        return None
    m = re.search(r"GRES=gpu(?::\w+)?:\d+\(IDX:([-0-9,]+)\)", text)
    if not m:
        return None
    out: list[int] = []
    for part in m[1].split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def run(env: dict[str, str], jobs: list[tuple[float, int, float]]) -> dict[str, list[dict[str, object]]]:
    topo = parse_topo_matrix(CAPTURE.read_text(), source=str(CAPTURE))
    isl = [set(i) for i in islands(topo)]
    running: dict[str, list[tuple[float, str, tuple[int, ...]]]] = {n: [] for n in NODES}
    rows: dict[str, list[dict[str, object]]] = {n: [] for n in NODES}
    for arrival, k, duration in jobs:
        for node in NODES:
            active = running[node]
            now = arrival
            # end every job that is over, then (virtual wait) the earliest ones until k GPUs are free
            active.sort()
            while active and (active[0][0] <= now or 8 - sum(len(g) for _, _, g in active) < k):
                end, jid, _ = active.pop(0)
                now = max(now, end)
                sh(["scancel", jid], env)
            busy = {g for _, _, gpus in active for g in gpus}
            deadline = time.time() + 30
            while True:  # the node must show the freed GPUs before the next submission
                used = sh(["scontrol", "show", "node", "-d", node], env)
                m = re.search(r"GresUsed=gpu:\w+:(\d+)", used)
                if m and int(m[1]) == len(busy):
                    break
                if time.time() > deadline:
                    raise RuntimeError(f"{node}: GresUsed does not match {sorted(busy)}")
                time.sleep(0.05)
            jid = sh(
                [
                    "timeout",
                    "20",
                    "sbatch",
                    "--parsable",
                    "-w",
                    node,
                    f"--gres=gpu:{k}",
                    "-n1",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "sleep 1000",
                ],
                env,
            ).strip()
            deadline = time.time() + 30
            gpus = None
            while gpus is None:
                gpus = idx_of(jid, env)
                if gpus is None:
                    if time.time() > deadline:
                        raise RuntimeError(f"job {jid} on {node} did not start")
                    time.sleep(0.05)
            active.append((now + duration, jid, gpus))
            free = [g for g in range(8) if g not in busy]
            ours = pick_devices(topo, free, k)
            whole_free = [i for i in isl if not (i & busy)]
            partly = [i for i in isl if (i & busy) and (i - busy)]
            choice = k == 1 and bool(whole_free) and bool(partly)
            rows[node].append(
                {
                    "k": k,
                    "busy": sorted(busy),
                    "got": gpus,
                    "ours": ours,
                    "in_island": any(set(gpus) <= i for i in isl),
                    "island_had_room": any(len(i - busy) >= k for i in isl),
                    "ours_in_island": any(set(ours) <= i for i in isl),
                    "broke_free": k == 1 and any(set(gpus) <= i for i in whole_free),
                    "had_choice": choice,
                    "avoidable": choice and any(set(gpus) <= i for i in whole_free),
                    "ours_broke_free": k == 1 and any(set(ours) <= i for i in whole_free),
                    "ours_avoidable": choice and any(set(ours) <= i for i in whole_free),
                }
            )
    return rows


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}% ({a}/{b})" if b else "–"


def summarize(rows: list[dict[str, object]], prefix: str = "") -> list[str]:
    """The four table cells: multi-GPU jobs in one island (all, and those where an island had room), 1-GPU
    jobs that broke a free island, and avoidable breaks over the 1-GPU jobs that had a choice."""
    multi = [r for r in rows if r["k"] != 1]
    room = [r for r in multi if r["island_had_room"]]
    singles = [r for r in rows if r["k"] == 1]
    chose = [r for r in singles if r["had_choice"]]
    return [
        pct(sum(bool(r[prefix + "in_island"]) for r in multi), len(multi)),
        pct(sum(bool(r[prefix + "in_island"]) for r in room), len(room)),
        pct(sum(bool(r[prefix + "broke_free"]) for r in singles), len(singles)),
        pct(sum(bool(r[prefix + "avoidable"]) for r in chose), len(chose)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--base", default=f"/tmp/slurm-topo-bench-gres-{os.getpid()}/cluster")
    ap.add_argument("--out", default=str(HERE / "results" / "gres_picks.md"))
    ap.add_argument("--rows", default=str(HERE / "results" / "gres_picks_rows.jsonl"), help="per-job rows")
    ap.add_argument("--from-rows", metavar="FILE", help="recompute the table from saved rows (no cluster)")
    args = ap.parse_args()
    t0 = time.time()
    if args.from_rows:
        saved = [json.loads(line) for line in Path(args.from_rows).read_text().splitlines() if line]
        version = str(saved[0]["version"])
        rows = {n: [r for r in saved if r["node"] == n] for n in NODES}
    else:
        base = Path(args.base)
        base.parent.mkdir(parents=True, exist_ok=True)
        env = start_cluster(base)
        try:
            version = sh(["scontrol", "--version"], env).strip()
            rows = run(env, job_mix(args.jobs, args.seed))
        finally:
            subprocess.run(
                [sys.executable, str(REPO / "docker-slurm" / "cluster"), "down", "--base", str(base)],
                check=False,
                timeout=60,
                capture_output=True,
            )
        with open(args.rows, "w") as fh:
            for node in NODES:
                for r in rows[node]:
                    fh.write(json.dumps({"node": node, "version": version, **r}, default=list) + "\n")
    cmd = "python benchmarks/bench_gres_picks.py " + " ".join(sys.argv[1:])
    lines = [
        "# Which GPUs Slurm picks with our gres.conf (real slurmctld, fake devices)",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; {version}; "
        f"{time.time() - t0:.0f} s  ",
        f"Method: see the script's docstring. Seed {args.seed}, {args.jobs} jobs per node "
        f"(k=1/2/4 weights .5/.3/.2, mean inter-arrival 1.6, durations U(1,10), virtual time).",
        "",
        "| node | gres.conf | multi-GPU inside one island | … when an island had room | 1-GPU broke a free "
        "island | avoidable: broke one although a partly used island had room (over the 1-GPU jobs that had "
        "that choice) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for node in NODES:
        lines.append(f"| {node} | {VARIANTS[node]} | " + " | ".join(summarize(rows[node])) + " |")
    lines.append(
        "| – | *simulated, not Slurm:* `pick_devices` computed on g1's busy sets | "
        + " | ".join(summarize(rows["g1"], "ours_"))
        + " |"
    )
    same = {n: sum(r["got"] == rows["g1"][i]["got"] for i, r in enumerate(rows[n])) for n in NODES}
    lines += [
        "",
        "Allocations identical to g1, job by job: "
        + ", ".join(f"{n} {same[n]}/{len(rows[n])}" for n in NODES[1:])
        + ".",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
