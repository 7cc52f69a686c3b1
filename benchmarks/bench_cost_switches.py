#!/usr/bin/env python3
"""What the provider's switch layers cost the cost model: ``capacity`` (a ``switch.<k>`` row per layer) and a
placement's score (``switch_tree`` with the deeper switches, the ``switch`` level) on a GCE-shaped fleet with
its sub-block and host layers and on the same fleet with them stripped (the cost of a fleet without layers),
and the stripped fleet with ``capacity``'s levels given (``CAPACITY_LEVELS``: the call as it was before the
layers, no pass to find them).

The fleet is ``bench_switch_layers.listing``'s (blocks of 256 VMs, sub-blocks of 32, one host a VM — the host
layer is trimmed by the import, so one layer stays), imported with ``import gcp`` and given 8 GPUs a node. Per
size and variant, rounds interleaved: CPU seconds (``time.process_time``) of ``capacity`` over the idle fleet
for shapes 1x8, 4x8, 32x8, 64x8, and of ``score_placement`` of a 64-node TP 8 × PP 4 × DP 16 plan on the first
64 nodes (two sub-blocks). Median and minimum of ``--repeat`` rounds.

    python benchmarks/bench_cost_switches.py [--sizes 1000,10000,100000] [--repeat 5]
        [--out benchmarks/results/cost_switches.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_switch_layers import listing  # noqa: E402

from slurm_topo import merge, parse_inventory  # noqa: E402
from slurm_topo.core.model import Inventory  # noqa: E402
from slurm_topo.cost import DEFAULT_TABLE, Fabric, PlanSpec, score_placement  # noqa: E402
from slurm_topo.reports.capacity import CAPACITY_LEVELS, capacity, idle_states  # noqa: E402
from slurm_topo.sources.providers import import_listing  # noqa: E402

SHAPES = [(1, 8), (4, 8), (32, 8), (64, 8)]
PLAN = PlanSpec(tp=8, pp=4, gpus_per_node=8, allreduce_bytes=1e10, tp_bytes=1e9, pp_bytes=1e8)


def fleet(n: int) -> tuple[Inventory, Inventory]:
    inv = merge([parse_inventory(import_listing("gcp", listing(n, True), source="bench.json").text)])
    inv = dataclasses.replace(inv, nodes=tuple(dataclasses.replace(x, gpus=8) for x in inv.nodes))
    flat = dataclasses.replace(inv, nodes=tuple(dataclasses.replace(x, switches=()) for x in inv.nodes))
    return inv, flat


def round_of(inv: Inventory, given: bool) -> tuple[float, float, str, str]:
    states = idle_states(inv)
    t0 = time.process_time()
    cap = capacity(inv, states, SHAPES, levels=CAPACITY_LEVELS if given else None)
    t1 = time.process_time()
    nodes = [x.name for x in inv.nodes[:64]]
    cost = score_placement(Fabric.of(inv), nodes, PLAN, inv.links or DEFAULT_TABLE)
    t2 = time.process_time()
    rows = " ".join(f"{s.shape}:{s.deepest}" for s in cap.shapes)
    terms = " ".join(f"{t.kind}@{t.level}={t.seconds:.4g}" for t in cost.terms)
    return t1 - t0, t2 - t1, rows, terms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = [
        "# The provider's switch layers in the cost model: capacity and a placement's score",
        "",
        f"`python benchmarks/bench_cost_switches.py --sizes {args.sizes} --repeat {args.repeat}` on "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}; CPU seconds, "
        "median (min) of the rounds, rounds interleaved.",
        "",
        "| VMs | variant | capacity s | score_placement s | deepest level per shape | terms |",
        "|---:|---|---:|---:|---|---|",
    ]
    for n in (int(x) for x in args.sizes.split(",")):
        layers, flat = fleet(n)
        variants = {
            "layers": (layers, False),
            "stripped": (flat, False),
            "stripped, levels given": (flat, True),
        }
        got: dict[str, list[tuple[float, float, str, str]]] = {k: [] for k in variants}
        for _ in range(args.repeat):
            for name, (inv, given) in variants.items():
                got[name].append(round_of(inv, given))
        for name, runs in got.items():
            cap = [r[0] for r in runs]
            score = [r[1] for r in runs]
            lines.append(
                f"| {n} | {name} | {statistics.median(cap):.4f} ({min(cap):.4f}) | "
                f"{statistics.median(score):.4f} ({min(score):.4f}) | {runs[0][2]} | {runs[0][3]} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
