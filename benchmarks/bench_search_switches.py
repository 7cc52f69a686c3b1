#!/usr/bin/env python3
"""What the provider's switch layers cost the best-placement search (``cost.search.best_nodes``): a GCE-shaped
fleet with its sub-block layer (``bench_switch_layers.listing``: blocks of 256 VMs, sub-blocks of 32; the host
layer is trimmed by the import), the same fleet with the layer stripped, and the stripped fleet through the
search as it was before the layers (``tests/search_before_switches.py``). Half the fleet free (seeded), 8 GPUs
a node; per job size the CPU seconds (``time.process_time``) of one search, median (min) of ``--repeat``
rounds interleaved, the level found and how many sub-blocks the placement spans.

    python benchmarks/bench_search_switches.py [--sizes 1000,10000,100000] [--repeat 5]
        [--out benchmarks/results/search_switches.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

import search_before_switches as before  # noqa: E402
from bench_switch_layers import listing  # noqa: E402

from slurm_topo import merge, parse_inventory  # noqa: E402
from slurm_topo.core.model import Inventory, Node  # noqa: E402
from slurm_topo.cost import Fabric  # noqa: E402
from slurm_topo.cost.search import Found, best_nodes  # noqa: E402
from slurm_topo.sources.providers import import_listing  # noqa: E402

JOBS = (4, 32, 64, 200)
Search = Callable[..., Found | None]


def fleet(n: int) -> tuple[Inventory, Inventory]:
    inv = merge([parse_inventory(import_listing("gcp", listing(n, True), source="bench.json").text)])
    inv = dataclasses.replace(inv, nodes=tuple(dataclasses.replace(x, gpus=8) for x in inv.nodes))
    flat = dataclasses.replace(inv, nodes=tuple(dataclasses.replace(x, switches=()) for x in inv.nodes))
    return inv, flat


def one(search: Search, fabric: Fabric, count: int, free: set[str]) -> tuple[float, Found | None]:
    def eligible(node: Node) -> bool:
        return node.name in free

    t0 = time.process_time()
    found = search(fabric, count, 8, eligible=eligible)
    return time.process_time() - t0, found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = [
        "# The provider's switch layers in the best-placement search",
        "",
        f"`python benchmarks/bench_search_switches.py --sizes {args.sizes} --repeat {args.repeat}` on "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}; CPU seconds "
        "of one `best_nodes`, median (min) of the rounds, rounds interleaved; half the fleet free (seed 47).",
        "",
        "| VMs | nodes | variant | search s | level found | sub-blocks spanned |",
        "|---:|---:|---|---:|---|---:|",
    ]
    for n in (int(x) for x in args.sizes.split(",")):
        layers, flat = fleet(n)
        sub_block = {x.name: x.switches[:1] for x in layers.nodes}
        rng = random.Random(47)
        free = {x.name for x in layers.nodes if rng.random() < 0.5}
        variants: dict[str, tuple[Search, Fabric]] = {
            "layers": (best_nodes, Fabric.of(layers)),
            "stripped": (best_nodes, Fabric.of(flat)),
            "stripped, search before": (before.best_nodes, Fabric.of(flat)),
        }
        for count in JOBS:
            got: dict[str, list[tuple[float, Found | None]]] = {k: [] for k in variants}
            for _ in range(args.repeat):
                for name, (search, fabric) in variants.items():
                    got[name].append(one(search, fabric, count, free))
            for name, runs in got.items():
                secs = [r[0] for r in runs]
                found = runs[0][1]
                spans = len({(*sub_block[x],) for x in found.nodes}) if found else 0
                lines.append(
                    f"| {n} | {count} | {name} | {statistics.median(secs):.4f} ({min(secs):.4f}) | "
                    f"{found.level if found else 'none'} | {spans} |"
                )
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
