#!/usr/bin/env python3
"""What the provider's layers below the block cost: import, load + merge, and render of a GCE-shaped fleet,
with the sub-block and host as switches (``switches:``) and with them left out (the block only).

The worst case for the tree: GCE VMs one per host (A3 Ultra / A4 shapes), so every VM is its own leaf switch
and its own inventory entry (the import writes one entry per place). Synthetic ``gcloud compute instances
list --format=json`` listings: blocks of 256 VMs, sub-blocks of 32, one zone per 4 096 VMs. Each size and
variant runs in a fresh process (``--one``), rounds interleaved; CPU seconds of the process for the work
(``time.process_time``), median and minimum of ``--repeat`` runs; the outputs' sizes and switch counts.

    python benchmarks/bench_switch_layers.py [--sizes 1000,10000,50000] [--repeat 3]
        [--out benchmarks/results/switch_layers.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = (1_000, 10_000, 50_000)
BLOCK, SUBBLOCK, ZONE = 256, 32, 4_096


def listing(n: int, layers: bool) -> str:
    """A GCE listing of ``n`` VMs; ``layers``: with sub-block and host (else the block alone)."""
    out = []
    for i in range(n):
        topo = {"cluster": "c1", "block": f"b{i // BLOCK:05d}"}
        if layers:
            topo |= {"subblock": f"s{i // SUBBLOCK:06d}", "host": f"h{i:07d}"}
        out.append(
            {
                "name": f"vm{i:07d}",
                "id": str(10**12 + i),
                "zone": f"projects/p/zones/us-central{1 + i // ZONE}-b",
                "machineType": "projects/p/zones/us-central1-b/machineTypes/a3-ultragpu-8g",
                "resourceStatus": {"physicalHostTopology": topo},
            }
        )
    return json.dumps(out)


def one(n: int, layers: bool) -> dict[str, object]:
    from slurm_topo import merge, parse_inventory, render_all
    from slurm_topo.sources.providers import import_listing

    text = listing(n, layers)
    t0 = time.process_time()
    result = import_listing("gcp", text, source="bench.json")
    t1 = time.process_time()
    inventory = merge([parse_inventory(result.text, source="bench.yaml")])
    t2 = time.process_time()
    files = render_all(inventory, (22, 5))
    t3 = time.process_time()
    topo = files["topology.conf"]
    return {
        "import": t1 - t0,
        "load": t2 - t1,
        "render": t3 - t2,
        "total": t3 - t0,
        "switches": topo.count("SwitchName="),
        "bytes": sum(len(v.encode()) for v in files.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--one", nargs=2, metavar=("N", "LAYERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1] == "1")))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    runs: dict[tuple[int, bool], list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for n in sizes:
            for layers in (False, True):
                p = subprocess.run(
                    [sys.executable, __file__, "--one", str(n), "1" if layers else "0"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.setdefault((n, layers), []).append(json.loads(p.stdout))
    lines = [
        "# The provider's layers below the block: import, load, render",
        "",
        f"Command: `python benchmarks/bench_switch_layers.py --sizes {args.sizes} --repeat {args.repeat}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}  ",
        "Method: synthetic GCE listings (blocks of 256 VMs, sub-blocks of 32, one VM per host, a zone per "
        "4 096); each size and variant in a fresh process, rounds interleaved; CPU seconds of the process "
        "(median, min); render = every output for Slurm 22.05 (topology.conf, node lines, gres.conf, the "
        "filter's data).",
        "",
        "| VMs | layers | switches | import s | load s | render s | total s (median) | total s (min) | "
        "output bytes |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for layers in (False, True):
            rs = runs[(n, layers)]

            def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            lines.append(
                f"| {n} | {'sub-block + host' if layers else 'block only'} | {rs[0]['switches']} | "
                f"{med('import'):.3f} | {med('load'):.3f} | {med('render'):.3f} | {med('total'):.3f} | "
                f"{min(r['total'] for r in rs):.3f} | {rs[0]['bytes']} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
