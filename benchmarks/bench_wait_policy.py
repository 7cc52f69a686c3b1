#!/usr/bin/env python3
"""Wait or go, simulated: mean/p95 job completion time, mean wait and utilisation of the locality policies
``any``, ``prefer``, ``zone:wait`` and ``zone:auto`` at several loads, on the benchmark fleet
(``examples/benchmark-five-zones.yaml``: 30 nodes, 5 zones of 6 in 2 regions, racks of 3).

Workload (seeded): Poisson arrivals; gang sizes drawn from the AdaptDL/Pollux workload's distribution
(``benchmarks/data/adaptdl-gang-sizes.csv``, Apache-2.0, GPUs per job; a job takes ceil(GPUs / 8) whole
nodes); runtimes lognormal (median 1 h, sigma 1, cut to [5 min, 24 h]); time limit = runtime × U(1.2, 2);
per-job plans: tp=8 with a gradient of 1, 5 or 20 GB and a communication share of the step of 0.05, 0.2 or
0.4 on the tightest placement. The load is the offered node-seconds (at slowdown 1) per node-second.

Each job's runtime is stretched by the cost model's slowdown of the placement it got (the level its nodes
span, :func:`slurm_topo.relax.level_slowdowns` over :func:`slurm_topo.relax.level_step_seconds`, the same
numbers the budget uses). Policies (what the filter's decision makes Slurm do):

* ``any``: the filter leaves the job alone and the scheduler ignores the topology: the first free nodes in
  node order;
* ``prefer``: start as soon as enough nodes are free anywhere, on the tightest group that has room (what
  ``--prefer`` + topology/tree aim for);
* ``zone:wait``: start only inside one zone (tightest inside it);
* ``zone:auto``: as ``zone:wait``, with the budget of :func:`slurm_topo.relax.auto_budget` and the relaxer's
  decision :func:`slurm_topo.relax.due` run every 60 s, one level per pass: the live relaxer's default, the
  load-aware timer (budget × 1/(1 − share of nodes busy at the pass));
* ``zone:auto-plain``: the same with the plain budget (``slurm-topo relax --plain-budget``);
* ``zone:auto+estimate``: widen when the expected wait at the job's level minus the expected wait one level
  looser exceeds R · Δs (:func:`slurm_topo.relax.estimate_says`), the expected waits from the running jobs'
  time limits as ``sbatch --test-only`` would estimate them (queued jobs ignored); not in the live relaxer.

The scheduler is greedy first-come first-served with backfill without reservations (a job that cannot start
does not block those behind it), the same for every policy.

    python benchmarks/bench_wait_policy.py --seed 1 --jobs 2000 --loads 0.3,0.6,0.9 [--json]
        [--out benchmarks/results/wait_policy.md] [--pass-jobs 10000]

``--pass-jobs N`` also times one relaxer pass's parsing and decisions over N synthetic pending jobs
(``scontrol show job -o`` text through :func:`slurm_topo.relax.plan_pass`).
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.cost import parse_plan  # noqa: E402
from slurm_topo.model import Node  # noqa: E402
from slurm_topo.relax import (  # noqa: E402
    LEVELS,
    Budget,
    auto_budget,
    due,
    estimate_says,
    level_slowdowns,
    level_step_seconds,
    plan_pass,
)

POLICIES = ("any", "prefer", "zone:wait", "zone:auto", "zone:auto-plain", "zone:auto+estimate")
GANGS = ROOT / "benchmarks" / "data" / "adaptdl-gang-sizes.csv"
TEMPLATE = Node("t", gpus=8)
GRADIENTS = ("1G", "5G", "20G")
COMM_SHARES = (0.05, 0.2, 0.4)

# the benchmark fleet: (region, zone, rack) per node, n01..n30 (examples/benchmark-five-zones.yaml)
FLEET: list[tuple[str, str, str]] = []
for _zone_i, (_region, _zone) in enumerate(
    [
        ("us-central1", "us-central1-a"),
        ("us-central1", "us-central1-b"),
        ("us-central1", "us-central1-c"),
        ("us-east1", "us-east1-b"),
        ("us-east1", "us-east1-c"),
    ]
):
    for _k in range(6):
        FLEET.append((_region, _zone, f"{_zone}/rack-{1 + _k // 3}"))


def gang_sizes() -> list[tuple[int, int]]:
    rows = [line for line in GANGS.read_text().splitlines() if line and not line.startswith("#")]
    return [(int(r["gpus"]), int(r["jobs"])) for r in csv.DictReader(rows)]


@dataclass
class Job:
    jid: int
    arrival: float
    nodes: int
    runtime: float
    limit: float
    slow: dict[str, float]
    budget: Budget
    level: str = "zone"
    start: float | None = None
    end: float | None = None
    placed: tuple[int, ...] = ()


def make_jobs(seed: int, count: int, load: float) -> list[Job]:
    rng = random.Random(seed)
    sizes = gang_sizes()
    population = [g for g, n in sizes for _ in range(n)]
    cache: dict[tuple[int, str, float], tuple[dict[str, float], Budget]] = {}
    drafts = []
    for _ in range(count):
        gpus = rng.choice(population)
        nodes = max(1, math.ceil(gpus / 8))
        runtime = min(24 * 3600.0, max(300.0, rng.lognormvariate(math.log(3600), 1.0)))
        limit = runtime * rng.uniform(1.2, 2.0)
        plan = f"tp=8,bytes={rng.choice(GRADIENTS)}"
        share = rng.choice(COMM_SHARES)
        drafts.append((nodes, runtime, limit, plan, share))
    mean_work = statistics.fmean(n * r for n, r, *_ in drafts)
    rate = load * len(FLEET) / mean_work
    t = 0.0
    jobs = []
    for i, (nodes, runtime, limit, plan, share) in enumerate(drafts):
        t += rng.expovariate(rate)
        key = (nodes, plan, share)
        if key not in cache:
            steps = level_step_seconds(TEMPLATE, nodes, parse_plan(plan))
            slow = level_slowdowns(steps, "network_group", share)
            budget = auto_budget("zone", nodes, plan, 1.0, TEMPLATE, comm_fraction=share)
            cache[key] = (slow, budget)
        slow, unit = cache[key]
        # the budget scales with the limit (R · Δs): the unit budget above is per second of limit
        budget = auto_budget("zone", nodes, plan, limit, TEMPLATE, comm_fraction=share) if nodes > 1 else unit
        jobs.append(Job(i, t, nodes, runtime, limit, slow, budget))
    return jobs


def span(nodes: Sequence[int]) -> str:
    if len(set(FLEET[n][2] for n in nodes)) <= 1:
        return "network_group"
    if len(set(FLEET[n][1] for n in nodes)) == 1:
        return "zone"
    if len(set(FLEET[n][0] for n in nodes)) == 1:
        return "region"
    return "any"


def pick_in(free: set[int], group: list[int], want: int) -> tuple[int, ...] | None:
    """Tightest nodes inside ``group``: one rack if one has room (the fullest such rack), else racks by
    most free first."""
    avail = [n for n in group if n in free]
    if len(avail) < want:
        return None
    racks: dict[str, list[int]] = {}
    for n in avail:
        racks.setdefault(FLEET[n][2], []).append(n)
    fits = [r for r in racks.values() if len(r) >= want]
    if fits:
        return tuple(min(fits, key=len)[:want])
    out: list[int] = []
    for r in sorted(racks.values(), key=len, reverse=True):
        out += r[: want - len(out)]
        if len(out) == want:
            break
    return tuple(out)


def groups_at(level: str) -> list[list[int]]:
    if level == "any":
        return [list(range(len(FLEET)))]
    idx = {"network_group": 2, "zone": 1, "region": 0}[level]
    out: dict[str, list[int]] = {}
    for n, loc in enumerate(FLEET):
        out.setdefault(loc[idx], []).append(n)
    return list(out.values())


GROUPS = {lvl: groups_at(lvl) for lvl in LEVELS}


def place(policy: str, job: Job, free: set[int]) -> tuple[int, ...] | None:
    if len(free) < job.nodes:
        return None
    if policy == "any":
        return tuple(sorted(free)[: job.nodes])
    top = "any" if policy == "prefer" else job.level
    for level in LEVELS[: LEVELS.index(top) + 1]:
        # the fullest group that has room (best fit), tightest level first
        fits = [g for g in GROUPS[level] if sum(1 for n in g if n in free) >= job.nodes]
        if fits:
            g = min(fits, key=lambda g: sum(1 for n in g if n in free))
            return pick_in(free, g, job.nodes)
    return None


def earliest(release: Sequence[float], level: str, want: int) -> float:
    """When the first group of ``level`` has ``want`` nodes free, from each node's expected release (running
    jobs end at their time limit, as Slurm's ``--test-only`` estimate assumes; queued jobs ignored)."""
    best = math.inf
    for g in GROUPS[level]:
        if len(g) >= want:
            best = min(best, sorted(release[n] for n in g)[want - 1])
    return best


def simulate(policy: str, jobs: list[Job], interval: float = 60.0) -> dict[str, float]:
    free = set(range(len(FLEET)))
    queue: list[Job] = []
    events: list[tuple[float, int, int, str]] = []  # (time, order, job id, kind)
    seq = 0
    for j in jobs:
        events.append((j.arrival, seq, j.jid, "arrive"))
        seq += 1
    heapq.heapify(events)
    if policy.startswith("zone:auto"):
        heapq.heappush(events, (interval, -1, -1, "relax"))
    expected_end = [0.0] * len(FLEET)
    busy = 0.0
    done = 0
    while events:
        now, _, jid, kind = heapq.heappop(events)
        if kind == "arrive":
            queue.append(jobs[jid])
        elif kind == "end":
            free.update(jobs[jid].placed)
            done += 1
        elif kind == "relax":
            release = [now if n in free else expected_end[n] for n in range(len(FLEET))]
            for j in queue:
                if j.nodes == 1:  # one node: every level is the same placement
                    continue
                if policy == "zone:auto":  # the live relaxer's default: the load-aware timer
                    target = due(j.budget, j.level, now - j.arrival, 1 - len(free) / len(FLEET))
                elif policy == "zone:auto-plain":
                    target = due(j.budget, j.level, now - j.arrival)
                else:
                    nxt = LEVELS[LEVELS.index(j.level) + 1] if j.level != "any" else None
                    target = (
                        None
                        if nxt is None
                        else estimate_says(
                            j.budget,
                            j.level,
                            earliest(release, j.level, j.nodes) - now,
                            earliest(release, nxt, j.nodes) - now,
                        )
                    )
                if target is not None:
                    j.level = target
            if done < len(jobs):
                heapq.heappush(events, (now + interval, -1, -1, "relax"))
        started = []
        for j in queue:
            nodes = place(policy, j, free)
            if nodes is None:
                continue
            free.difference_update(nodes)
            for n in nodes:
                expected_end[n] = now + j.limit  # what Slurm knows: the time limit
            j.start, j.placed = now, nodes
            j.end = now + j.runtime * j.slow[span(nodes)]
            busy += j.nodes * (j.end - now)
            heapq.heappush(events, (j.end, seq, j.jid, "end"))
            seq += 1
            started.append(j)
        if started:
            ids = {j.jid for j in started}
            queue = [j for j in queue if j.jid not in ids]
    jct = [j.end - j.arrival for j in jobs if j.end is not None]
    wait = [j.start - j.arrival for j in jobs if j.start is not None]
    makespan = max(j.end for j in jobs if j.end is not None) - jobs[0].arrival
    return {
        "mean_jct": statistics.fmean(jct),
        "p95_jct": statistics.quantiles(jct, n=20)[-1],
        "mean_wait": statistics.fmean(wait),
        "utilization": busy / (len(FLEET) * makespan),
        "relaxed": sum(1 for j in jobs if j.level != "zone" and j.nodes > 1),
    }


def run(seed: int, count: int, loads: Sequence[float]) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    for load in loads:
        for policy in POLICIES:
            jobs = make_jobs(seed, count, load)  # the same workload for every policy
            out = simulate(policy, jobs)
            results.append(
                {
                    "policy": policy,
                    "load": load,
                    **{k: round(v, 4 if k == "utilization" else 1) for k, v in out.items()},
                }
            )
    return results


def verdict(results: list[dict[str, object]]) -> list[str]:
    """One row per load and auto variant: its mean JCT against the better and the worse of prefer and
    zone:wait, and whether the goal (within 2 % of the better, at least 20 % below the worse) is met."""
    lines = []
    for load in sorted({float(r["load"]) for r in results}):  # type: ignore[arg-type]
        by = {r["policy"]: float(r["mean_jct"]) for r in results if r["load"] == load}  # type: ignore[arg-type]
        better = min(by["prefer"], by["zone:wait"])
        worse = max(by["prefer"], by["zone:wait"])
        for variant in ("zone:auto", "zone:auto-plain", "zone:auto+estimate"):
            auto = by[variant]
            within = (auto - better) / better * 100
            below = (worse - auto) / worse * 100
            ok = within <= 2.0 and below >= 20.0
            lines.append(
                f"| {load} | {variant} | {by['any']:.0f} | {by['prefer']:.0f} | {by['zone:wait']:.0f} | "
                f"{auto:.0f} | {within:+.1f} % | {below:.1f} % | {'met' if ok else 'not met'} |"
            )
    return lines


def pass_cost(count: int, repeat: int = 5) -> tuple[float, float, int]:
    """Seconds of one relaxer pass's parsing and decisions at ``count`` pending auto jobs (median, best)."""
    rec = "slurm-topo: zone:wait [us-central1-a(6n),us-central1-b(6n)]; "
    rec += "slurm-topo-auto: zone limit=7200s region=900s any=5400s"
    lines = [
        f"JobId={i} JobName=train-{i} UserId=u{i % 50}(10{i % 50}) GroupId=g(100) MCS_label=N/A "
        f"Priority={1000 + i} Nice=0 Account=a QOS=normal JobState=PENDING Reason=Resources "
        "Dependency=(null) "
        f"Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=02:00:00 "
        f"TimeMin=N/A SubmitTime=2026-11-30T{8 + i % 4:02d}:00:00 EligibleTime=2026-11-30T08:00:00 "
        f"Partition=gpu AllocNode:Sid=login:1 NumNodes=2-2 NumCPUs=2 NumTasks=2 CPUs/Task=1 "
        f"Features=[zone_us-central1-a|zone_us-central1-b] Comment=plan=tp=8,bytes=10G AdminComment={rec}"
        for i in range(count)
    ]
    text = "\n".join(lines)
    now = time.time()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = plan_pass(text, now)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), sum(1 for d in p.decisions if d.action == "relax")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--loads", default="0.3,0.6,0.9")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", help="write a Markdown report here")
    ap.add_argument("--pass-jobs", type=int, default=0)
    args = ap.parse_args()
    try:
        loads = [float(x) for x in args.loads.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--loads {args.loads!r}: expected numbers such as 0.3,0.6,0.9")
    if not loads or any(not 0 < x < 1.5 for x in loads) or args.jobs < 20:
        ap.error("--loads in (0, 1.5) and --jobs of at least 20")
    t0 = time.perf_counter()
    results = run(args.seed, args.jobs, loads)
    took = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"results": results}))
    else:
        for r in results:
            print(r)
        print("\n".join(verdict(results)))
    if args.out:
        cmd = " ".join(["python", "benchmarks/bench_wait_policy.py", *sys.argv[1:]])
        lines = [
            "# Wait or go: any, prefer, zone:wait, zone:auto (simulated)",
            "",
            f"Command: `{cmd}` ({took:.0f} s; Python {platform.python_version()}, {platform.machine()}).",
            "Model, workload and policies: the docstring of `benchmarks/bench_wait_policy.py`.",
            "",
            "| policy | load | mean JCT s | p95 JCT s | mean wait s | utilisation | relaxed |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['policy']} | {r['load']} | {r['mean_jct']} | {r['p95_jct']} | {r['mean_wait']} | "
            f"{r['utilization']} | {r['relaxed'] if str(r['policy']).startswith('zone:auto') else ''} |"
            for r in results
        ]
        lines += [
            "",
            "Goal: auto's mean JCT within 2 % of the better of prefer and zone:wait, "
            "and ≥ 20 % below the worse.",
            "",
            "| load | variant | any | prefer | zone:wait | auto | auto vs better | auto below worse | goal |",
            "|---|---|---|---|---|---|---|---|---|",
            *verdict(results),
        ]
        if args.pass_jobs:
            med, best, relaxed = pass_cost(args.pass_jobs)
            lines += [
                "",
                f"## One relaxer pass at {args.pass_jobs} pending auto jobs",
                "",
                "Parsing `scontrol show job -o` text and deciding (`relax.plan_pass`): "
                f"median {med * 1000:.0f} ms, best {best * 1000:.0f} ms over 5 runs; {relaxed} jobs due. "
                "Each due job then costs one `scontrol show job -o ID` (compare and set) and one "
                "`scontrol update`; the listing itself is one `scontrol show job -o` (slurmctld's time, "
                "not measured here).",
            ]
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
