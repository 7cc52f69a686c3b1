#!/usr/bin/env python3
"""pick_devices at its worst: irregular 16-GPU matrices and every real 8-GPU capture, CPU time per call.

16 GPUs: the families of ``tests/pick_cases.py`` (bridged PCIe trees, NV18 boxes with links demoted to NV1,
random link classes from all eleven classes and from three), ``--seeds`` matrices each, plus the four
regular 16-GPU layouts of ``bench_pick.py``. Per matrix: all free and ``--masks`` seeded random busy sets
(1-8 busy) × every k. Every pick is checked equal to the exhaustive reference (``SubsetTable``, every subset
looked at); the script stops on the first difference. Goal: worst ≤ 1000 µs.

8 GPUs: every capture with 8 GPUs under ``tests/fixtures/real/topo`` (DGX-1 P100/V100, DGX A100 ×2, HGX
H100, H800, PCIe boxes): every free mask × every k, checked against ``pick_exhaustive``. Goal: p99 ≤ 50 µs.

A case's time is the least of ``--repeat`` timings of ``--number`` calls, CPU time of this process
(``time.process_time``), so other processes on a loaded host do not count; the tables give median, p95,
p99 and worst per family and the worst case itself (matrix seed, busy GPUs, k).

Preparation (what a one-shot command pays once): per 16-GPU matrix, the first call with every cache emptied
(all free, k = 8: the tables of the topology and of that k built inside it) and then the first call of every
other k on that object (the per-k part alone), one timing each; median and worst per family.

Instruction counts (repeatable where CPU times wobble with the host's load): ``--callgrind-only CASE ...``
runs each case (``family:seed:busy:k``, busy GPUs joined by ``+``, e.g. ``bridged:3::9`` or
``demoted:1:0+9:8``) under ``valgrind --tool=callgrind`` (PYTHONHASHSEED=0) three times — no pick, one
first pick, one first pick and ``--callgrind-calls`` more — and prints the instructions of the first pick
(preparation included) and per later pick.

    python benchmarks/bench_pick_worst.py [--seeds 40] [--masks 4] [--repeat 3] [--out FILE]
    python benchmarks/bench_pick_worst.py --callgrind-only bridged:3::9 [--callgrind-calls 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_pick import blocks, callgrind_total, pcie_tree, per_call_us, two_cubes  # noqa: E402

from slurm_topo.gpu import pick as pick_module  # noqa: E402
from slurm_topo.gpu.gpu_topology import GpuTopology  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402
from slurm_topo.gpu.pick import pick_devices, pick_exhaustive  # noqa: E402
from tests.pick_cases import FAMILIES, SubsetTable  # noqa: E402

CAPTURES = HERE.parent / "tests" / "fixtures" / "real" / "topo"


@dataclass
class Tally:
    """Per-case times of one family and its worst case."""

    name: str
    goal: str
    times: list[float] = field(default_factory=list)
    worst: tuple[float, str] = (0.0, "")

    def add(self, us: float, case: str) -> None:
        self.times.append(us)
        if us > self.worst[0]:
            self.worst = (us, case)

    def row(self) -> str:
        t = sorted(self.times)
        q = [t[min(len(t) - 1, round(f * (len(t) - 1)))] for f in (0.95, 0.99)]
        met = t[-1] <= 1000 if self.goal.startswith("worst") else q[1] <= 50
        return (
            f"| {self.name} | {len(t)} | {statistics.median(t):.1f} | {q[0]:.1f} | {q[1]:.1f} | "
            f"{t[-1]:.1f} | "
            f"{self.worst[1]} | {self.goal} | {'yes' if met else 'NO'} |"
        )


def free_sets(n: int, masks: int, rng: random.Random) -> Iterator[tuple[int, ...]]:
    yield tuple(range(n))
    for _ in range(masks):
        busy = set(rng.sample(range(n), rng.randint(1, 8)))
        yield tuple(g for g in range(n) if g not in busy)


def sixteen(args: argparse.Namespace) -> list[Tally]:
    matrices: list[tuple[str, list[tuple[str, GpuTopology]]]] = [
        (name, [(f"seed {s}", fam(random.Random(s))) for s in range(args.seeds)])
        for name, fam in FAMILIES.items()
    ]
    regular = [
        ("NVSwitch NV6", blocks(16, 16, "NV6", "SYS", "")),
        ("2×8 NV18 + SYS", blocks(16, 8, "NV18", "SYS", "")),
        ("two DGX-1 cube-meshes", two_cubes()),
        ("PCIe tree", pcie_tree()),
    ]
    matrices.append(("regular (4 layouts)", regular))
    out = []
    for name, topos in matrices:
        tally = Tally(f"16 GPU {name}", "worst ≤ 1000")
        for label, topo in topos:
            table = SubsetTable(topo)
            for free in free_sets(16, args.masks, random.Random(label)):
                for k in range(1, len(free) + 1):
                    got = pick_devices(topo, free, k)
                    assert got == table.pick(free, k), (name, label, free, k, got, table.pick(free, k))
                    us = per_call_us(lambda: pick_devices(topo, free, k), 1, args.repeat)  # noqa: B023
                    busy = sorted(set(range(16)) - set(free))
                    tally.add(us, f"{label}, busy {busy}, k={k}")
        print(tally.row(), flush=True)
        out.append(tally)
    return out


def first_calls(args: argparse.Namespace) -> list[str]:
    """Per family: CPU µs of the first call on a fresh topology object (k = 8, all free) and of the first
    call of each other k on it."""
    rows = []
    for name, fam in FAMILIES.items():
        fresh, per_k = [], []
        for s in range(args.seeds):
            topo = replace(fam(random.Random(s)))
            for cache in ("_CACHE", "_TABLES", "_BY_WEIGHT", "_SEARCHED"):  # nothing cached for it
                getattr(pick_module, cache, {}).clear()
            t0 = time.process_time()
            pick_devices(topo, range(16), 8)
            fresh.append((time.process_time() - t0) * 1e6)
            for k in (*range(3, 8), *range(9, 16)):
                t0 = time.process_time()
                pick_devices(topo, range(16), k)
                per_k.append((time.process_time() - t0) * 1e6)
        rows.append(
            f"| 16 GPU {name} | {len(fresh)} | {statistics.median(fresh):.0f} | {max(fresh):.0f} | "
            f"{statistics.median(per_k):.0f} | {max(per_k):.0f} |"
        )
        print(rows[-1], flush=True)
    return rows


def eight(args: argparse.Namespace) -> list[Tally]:
    out = []
    for path in sorted(CAPTURES.glob("*.txt")):
        try:
            topo = parse_topo_matrix(path.read_text(), source=path.name)
        except Exception:  # noqa: BLE001 - a capture this parser refuses is not a pick case
            continue
        if len(topo.gpus) != 8:
            continue
        tally = Tally(f"8 GPU {path.stem}", "p99 ≤ 50")
        gpus = topo.gpus
        for m in range(1, 256):
            free = tuple(g for i, g in enumerate(gpus) if m >> i & 1)
            for k in range(1, len(free) + 1):
                got = pick_devices(topo, free, k)
                assert got == pick_exhaustive(topo, free, k), (path.name, free, k)
                us = per_call_us(lambda: pick_devices(topo, free, k), args.number, args.repeat)  # noqa: B023
                tally.add(us, f"busy {sorted(set(gpus) - set(free))}, k={k}")
        print(tally.row(), flush=True)
        out.append(tally)
    return out


CALLGRIND_SNIPPET = """
import random, sys
sys.path.insert(0, {root!r})
from tests.pick_cases import FAMILIES
from slurm_topo.gpu.pick import pick_devices
topo = FAMILIES[{family!r}](random.Random({seed}))
free = [g for g in topo.gpus if g not in {busy!r}]
for _ in range({calls}):
    pick_devices(topo, free, {k})
"""


def callgrind_case(case: str, calls: int) -> str:
    """One table row: instructions of the first pick of ``case`` and per later pick (see the docstring)."""
    family, seed, busy_text, k = case.split(":")
    busy = tuple(int(g) for g in busy_text.split("+") if g)

    def total(n_calls: int) -> int:
        return callgrind_total(
            CALLGRIND_SNIPPET.format(
                root=str(HERE.parent), family=family, seed=int(seed), busy=busy, k=int(k), calls=n_calls
            )
        )

    none, first, more = total(0), total(1), total(1 + calls)
    later = (more - first) / calls
    return f"| {family} | seed {seed}, busy {list(busy)}, k={k} | {first - none:,} | {later:,.0f} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=40, help="matrices per irregular 16-GPU family")
    ap.add_argument("--masks", type=int, default=4, help="random busy sets per 16-GPU matrix")
    ap.add_argument("--number", type=int, default=20, help="calls per timing (8-GPU cases)")
    ap.add_argument("--repeat", type=int, default=3, help="timings per case, the least is kept")
    ap.add_argument("--out", default=str(HERE / "results" / "pick_worst.md"))
    ap.add_argument("--callgrind-only", nargs="+", metavar="CASE", help="count instructions of these cases")
    ap.add_argument("--callgrind-calls", type=int, default=20)
    args = ap.parse_args()
    if args.callgrind_only:
        print("| family | case | instructions, first pick | instructions per later pick |")
        print("|---|---|---|---|")
        for case in args.callgrind_only:
            print(callgrind_case(case, args.callgrind_calls), flush=True)
        return
    t0 = time.process_time()
    rows = [t.row() for t in sixteen(args)] + [t.row() for t in eight(args)]
    prep = first_calls(args)
    command = (
        f"python benchmarks/bench_pick_worst.py --seeds {args.seeds} --masks {args.masks} "
        f"--number {args.number} --repeat {args.repeat}"
    )
    text = "\n".join(
        [
            "# pick_devices at its worst",
            "",
            f"Command: `{command}`  ",
            f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()} ({platform.system()} "
            f"{platform.release()}); load average at the end {os.getloadavg()[0]:.1f}; "
            f"{time.process_time() - t0:.0f} s CPU in all.",
            "",
            "CPU µs per call (process_time, least of the repeats). Every case was checked equal to the "
            "exhaustive reference.",
            "",
            "| family | cases | median µs | p95 µs | p99 µs | worst µs | worst case | goal | met |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Preparation: CPU µs of the first call with every cache emptied (all free, k = 8), and of the "
            "first call of each other k (3-15) on that object afterwards; one timing each.",
            "",
            "| family | matrices | first call median µs | first call worst µs | first call of another k "
            "median µs | worst µs |",
            "|---|---|---|---|---|---|",
            *prep,
            "",
        ]
    )
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
