#!/usr/bin/env python3
"""pick_devices cost: median time per pick for 8- and 16-GPU layouts over every k, beside the exhaustive search.

8 GPUs: the real DGX-1 V100 hybrid cube-mesh, DGX A100 (NVSwitch) and RTX 3090 (PCIe dual socket) captures.
16 GPUs: synthetic (the DGX-2 capture is truncated): an NVSwitch all-to-all box (NV6) and two NV18 islands of 8
joined by SYS. Each (layout, k) runs with all GPUs free and with a fixed busy mask; per case the median of
``--repeat`` timings of ``--number`` calls. Targets: 8 GPUs ≤ 50 µs, 16 GPUs ≤ 1 ms.

    python benchmarks/bench_pick.py [--number 200] [--repeat 7] [--out benchmarks/results/pick.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from slurm_topo.gpu.model import GpuTopology  # noqa: E402
from slurm_topo.gpu.pick import pick_devices, pick_exhaustive  # noqa: E402
from slurm_topo.gpu.topo import parse_topo_matrix  # noqa: E402

FIXTURES = HERE.parent / "tests" / "fixtures" / "real" / "topo"


def blocks(n: int, size: int, inside: str, outside: str, name: str) -> GpuTopology:
    m = tuple(
        tuple("X" if i == j else inside if i // size == j // size else outside for j in range(n))
        for i in range(n)
    )
    return GpuTopology(tuple(range(n)), m, source=name)


def layouts() -> list[GpuTopology]:
    out = [
        parse_topo_matrix((FIXTURES / f).read_text(), source=f.split("-")[0] + " " + label)
        for f, label in (
            ("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt", "V100 hybrid cube-mesh"),
            ("dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt", "A100 NVSwitch"),
            ("rtx3090-8gpu-pcie-node-sys-dualsocket.txt", "RTX 3090 PCIe"),
        )
    ]
    out.append(blocks(16, 16, "NV6", "SYS", "16 GPU NVSwitch (synthetic)"))
    out.append(blocks(16, 8, "NV18", "SYS", "16 GPU 2x8 islands (synthetic)"))
    return out


def median_us(fn: object, number: int, repeat: int) -> float:
    times = timeit.repeat(fn, number=number, repeat=repeat)  # type: ignore[arg-type]
    return statistics.median(times) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--exhaustive-number", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "pick.md"))
    args = ap.parse_args()
    rows = []
    summary = []
    for topo in layouts():
        n = len(topo.gpus)
        busy = {1, 6} if n == 8 else {1, 6, 9, 14}
        fast_all: list[float] = []
        for mask_name, free in (
            ("all free", list(topo.gpus)),
            (f"busy {sorted(busy)}", [g for g in topo.gpus if g not in busy]),
        ):
            for k in range(1, len(free) + 1):
                got = pick_devices(topo, free, k)
                ref = pick_exhaustive(topo, free, k)
                assert got == ref, (topo.source, free, k, got, ref)
                fast = median_us(lambda: pick_devices(topo, free, k), args.number, args.repeat)
                exh = median_us(lambda: pick_exhaustive(topo, free, k), args.exhaustive_number, 3)
                fast_all.append(fast)
                rows.append(
                    f"| {topo.source} | {mask_name} | {k} | {fast:.1f} | {exh:.0f} | {exh / fast:.0f}× | "
                    f"{','.join(map(str, got))} |"
                )
        target = 50.0 if n <= 8 else 1000.0
        summary.append(
            f"| {topo.source} | {n} | {statistics.median(fast_all):.1f} | {max(fast_all):.1f} | "
            f"{target:.0f} | {'yes' if max(fast_all) <= target else 'NO'} |"
        )
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = "\n".join(
        [
            "# pick_devices timing",
            "",
            f"Command: `python benchmarks/bench_pick.py --number {args.number} --repeat {args.repeat}`  ",
            f"Machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()} ({platform.system()} "
            f"{platform.release()})",
            "",
            "Median of the repeats, µs per call; fast pick checked equal to the exhaustive search in every row.",
            "",
            "## Summary (over every k and both masks)",
            "",
            "| layout | GPUs | median µs | worst µs | target µs | worst within target |",
            "|---|---|---|---|---|---|",
            *summary,
            "",
            "## Per k",
            "",
            "| layout | mask | k | pick µs | exhaustive µs | speed-up | picked |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
