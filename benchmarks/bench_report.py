#!/usr/bin/env python3
"""Cost of ``slurm-topo report``: N finished jobs on a synthetic fleet, in CPU seconds (process_time),
split into reading ``sacct --json`` (:func:`slurm_topo.access.accounting.finished_from_json`) and building the
report (:func:`slurm_topo.reports.report.build_report`: levels, locality, the plan, the prediction, the
summaries).

Fleet: benchmarks/bench_cost.py's (10 000 nodes: leaves of 32, two of three 8-GPU H800 NV18 nodes, the rest
4-GPU). Jobs (seeded): 2-16 nodes of one GPU kind, 60 % inside one leaf, 25 % one zone, 15 % anywhere; elapsed
10 min-2 days; a filter record on half of them; a sacct --json document in 24.11's shape (v0.0.42), written in
memory. The plan is given (``--plan tp=4,bytes=4G``), so every job is predicted.

    python benchmarks/bench_report.py [--nodes 10000] [--jobs 100000] [--out benchmarks/results/report.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cost import make_fleet  # noqa: E402

from slurm_topo.access.accounting import finished_from_json  # noqa: E402
from slurm_topo.core import hostlist  # noqa: E402
from slurm_topo.cost import Fabric  # noqa: E402
from slurm_topo.reports.report import Predictor, build_report  # noqa: E402

PLAN = "tp=4,bytes=4G"


def sacct_doc(inv, jobs: int, rng: random.Random) -> str:  # type: ignore[no-untyped-def]
    by_leaf: dict[tuple[str, str, str], list] = {}
    for n in inv.nodes:
        by_leaf.setdefault((n.location.region, n.location.zone, n.location.network_group), []).append(n)
    leaves = [v for v in by_leaf.values() if len(v) >= 16]
    zones: dict[tuple[str, str, int], list] = {}
    for (r, z, _), members in by_leaf.items():
        zones.setdefault((r, z, members[0].gpus), []).extend(members)
    kinds: dict[int, list] = {}
    for n in inv.nodes:
        kinds.setdefault(n.gpus, []).append(n)
    out = []
    t0 = 1_790_000_000
    for i in range(jobs):
        size = rng.randint(2, 16)
        x = rng.random()
        if x < 0.60:
            pool = rng.choice(leaves)
        elif x < 0.85:
            pool = rng.choice([v for v in zones.values() if len(v) >= size])
        else:
            pool = kinds[rng.choice([4, 8])]
        nodes = rng.sample(pool, size)
        gpus = nodes[0].gpus * size
        elapsed = rng.randint(600, 172_800)
        end = t0 + i * 60
        out.append(
            {
                "job_id": 1000 + i,
                "user": f"user{rng.randrange(200)}",
                "partition": rng.choice(("gpu", "big", "debug")),
                "state": {"current": ["COMPLETED"], "reason": "None"},
                "time": {
                    "start": end - elapsed,
                    "end": end,
                    "elapsed": elapsed,
                    "submission": end - elapsed - 5,
                },
                "nodes": hostlist.compress([n.name for n in nodes]),
                "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": gpus}]},
                "comment": {
                    "administrator": "slurm-topo: zone:wait [a(4n)]" if i % 2 else "",
                    "job": "",
                    "system": "",
                },
            }
        )
    return json.dumps({"jobs": out})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rng = random.Random(48)
    inv = make_fleet(args.nodes)
    doc = sacct_doc(inv, args.jobs, rng)
    c0 = time.process_time()
    listing = finished_from_json(doc)
    c1 = time.process_time()
    report = build_report(listing.jobs, inv, plan=PLAN)
    c2 = time.process_time()
    assert len(report.rows) == args.jobs and report.totals["predicted"] == args.jobs, report.totals
    probe = Predictor(Fabric.of(inv))  # untimed: how many placements the model scores and lays out
    shapes = [probe.structure(j.nodes) for j in listing.jobs]
    structures = len({(s.hardware, s.shape) for s in shapes})
    hardware = len({s.hardware for s in shapes})
    lines = [
        f"# slurm-topo report: {args.jobs} finished jobs on a {args.nodes}-node fleet",
        "",
        f"`python benchmarks/bench_report.py --nodes {args.nodes} --jobs {args.jobs}` "
        f"({platform.python_implementation()} {platform.python_version()}, {platform.machine()}, "
        "one process, CPU seconds by time.process_time)",
        "",
        "| phase | CPU s |",
        "|---|---:|",
        f"| read `sacct --json` ({len(doc) / 1e6:.0f} MB) | {c1 - c0:.2f} |",
        f"| build the report (levels, locality, plan, prediction, summaries) | {c2 - c1:.2f} |",
        f"| total | {c2 - c0:.2f} |",
        "",
        f"GPU-hours {report.totals['gpu_hours']:.0f}, lost {report.totals['gpu_hours_lost']:.0f}; "
        f"target <= 30 s CPU: {'met' if c2 - c0 <= 30 else 'NOT met'}.",
        "",
        f"The model scored {structures} placement structures and laid ranks out for {hardware} hardware "
        f"sequences (`report.Predictor`; the plan has one stage) for {len(listing.jobs)} jobs.",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
