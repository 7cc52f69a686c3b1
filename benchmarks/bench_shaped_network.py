#!/usr/bin/env python3
"""Calibrated vs shaped vs predicted vs measured, on the shaped testbed (as root, native Slurm):

    .venv/bin/python benchmarks/bench_shaped_network.py [--out benchmarks/results/shaped_network.md]

A 5-node cluster with every slurmd in its own network namespace, the links shaped per level by tc htb
(docker-slurm/cluster up --netns, the fleet and rates of
tests/integration/test_calibrate_on_a_shaped_network.py). It runs `slurm-topo calibrate` as a batch job,
then a plain-Python ring all-reduce (`slurm-topo probe ring`, one task per node) on a placement of every
class, and writes one table: per level the rate tc enforces and what calibrate measured; per placement the
seconds the cost model predicts on the calibrated table and the seconds the ring took (median of 3 runs, the
spread of the runs beside it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import slurmctl  # noqa: E402
import test_calibrate_on_a_shaped_network as bed  # noqa: E402

from slurm_topo.cost import Fabric, PlanSpec, score_placement  # noqa: E402
from slurm_topo.inventory import load_inventories  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(HERE / "results" / "shaped_network.md"))
    args = p.parse_args()
    if os.geteuid() != 0:
        print("bench_shaped_network: needs root (network namespaces)", file=sys.stderr)
        return 2
    with slurmctl.scratch_cluster("bench-shaped", bed.FLEET, "--netns", bed.SHAPE, nodes_max=5) as cluster:
        slurm, work = cluster.slurm, cluster.base.parent
        (work / "fleet.yaml").write_text(yaml.safe_dump(bed.FLEET, sort_keys=False))
        port = slurmctl.free_port_block(1)
        script = work / "calibrate.sh"
        script.write_text(
            "#!/bin/sh\nset -e\n"
            f"{slurmctl.slurm_topo_cli()[0]} calibrate -i {work}/fleet.yaml -o {work}/links.yaml --bytes 16M "
            f"--repeats 3 --time 3 --port {port} --probe-command '{sys.executable} -m slurm_topo'\n"
        )
        job = slurm.submit("-o", str(work / "out.txt"), "-t", "8", "-N5", str(script))
        slurm.wait_state(job, "COMPLETED", timeout=300)
        levels = yaml.safe_load((work / "links.yaml").read_text())["links"]["measured"]["levels"]
        inv = load_inventories([work / "fleet.yaml", work / "links.yaml"])
        fabric = Fabric.of(inv)
        spec = PlanSpec(gpus_per_node=1, allreduce_bytes=bed.RING_BYTES)
        rows = []
        for name, nodes in bed.RINGS.items():
            rec = bed._ring(slurm, nodes, port)
            predicted = score_placement(fabric, list(nodes), spec, inv.links).seconds
            runs = [float(x) for x in rec["runs"]]  # type: ignore[union-attr]
            rows.append((name, ",".join(nodes), predicted, float(rec["seconds"]), min(runs), max(runs)))  # type: ignore[arg-type]
    lines = [
        "# The shaped testbed: calibrated, predicted and measured",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in ['.venv/bin/python', *sys.argv])}` (as root, Slurm "
        f"{cluster.version[0]}.{cluster.version[1]:02d}, this machine: {os.cpu_count()} cores)",
        "",
        "| level | tc rate | calibrate measured | measured / rate | latency (µs, unshaped) |",
        "|---|---|---|---|---|",
    ]
    for level, mbit in bed.RATES_MBIT.items():
        got = levels[level]["bandwidth"]
        rate = mbit / 8000  # GB/s
        lines.append(
            f"| {level} | {mbit} Mbit/s ({rate:.4f} GB/s) | {got:.4f} GB/s | {got / rate:.3f} | "
            f"{levels[level]['latency_us']:.1f} |"
        )
    lines += [
        "",
        f"Ring all-reduce of {bed.RING_BYTES / 1e6:g} MB (`slurm-topo probe ring`, one task per node):",
        "",
        "| placement | nodes | predicted (s) | measured median (s) | runs min-max (s) | measured/predicted |",
        "|---|---|---|---|---|---|",
    ]
    for name, nodes, pred, meas, lo, hi in rows:
        lines.append(
            f"| {name} | {nodes} | {pred:.3f} | {meas:.3f} | {lo:.3f}-{hi:.3f} | {meas / pred:.3f} |"
        )
    by_pred = [r[0] for r in sorted(rows, key=lambda r: r[2])]
    by_meas = [r[0] for r in sorted(rows, key=lambda r: r[3])]
    lines += ["", f"Order by prediction = order by measurement: {'yes' if by_pred == by_meas else 'NO'}", ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
