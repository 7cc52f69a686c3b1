#!/usr/bin/env python3
"""Cost of the submit filter per submission, in the real Lua 5.1 interpreter, against fleet size.

For 1 000, 10 000 and 100 000 nodes (the same synthetic fleets as bench_generate.py: racks of 40, 3 zones a
region) it renders slurm_topo_data.lua, then runs benchmarks/filter_bench.lua under `lua5.1`: the data file's
load time, and per job shape the full `submit()` path (read the job, decide, write the decision back) — median
of five runs of N submissions each (min and max shown). Also the same for the Python reference, for scale.

    python benchmarks/bench_filter.py [--sizes 1000,10000,100000] [--iterations 20000]
    python benchmarks/bench_filter.py --first [--sizes 100000] [--filter-dir DIR --label-before X]

``--first``: the *first* decision of request shapes (benchmarks/first_bench.lua: sweeps of sizes no earlier
decision asked for, so no memo holds them) on a heterogeneous fleet (``hetero_fleet_yaml``: CPU, H100, A100
and NVL-domain racks of 10 nodes, 10 regions × 10 zones; ``--fleet irregular``: ``irregular_fleet_yaml``,
racks of random kinds and sizes in uneven zones): CPU time per decision (median, p95, worst) and, by
callgrind, the instructions of every decision on its own (one profile per decision): mean, p95 and the worst,
which the goal (FIRST_GOAL) bounds.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_generate import fleet_yaml  # noqa: E402

from slurm_topo import load_inventories, render_all  # noqa: E402


def _rack_line(kind: str, gpus: int, gtype: str | None, rack: int, size: int, region: str, zone: str) -> str:
    """One inventory entry: a rack of ``size`` nodes of one kind (a GB200 rack is an NVLink domain)."""
    extra = f", gpus: {gpus}, gpu_type: {gtype}" if gpus else ""
    if kind == "gb200":
        extra += f", nvlink_domain: nvl-{rack:05d}"
    return (
        f"  - {{name: '{kind}-{rack:05d}-[{0:03d}-{size - 1:03d}]', region: {region}, zone: {zone}, "
        f"network_group: rack-{rack:05d}{extra}, slurm: {{CPUs: 128, RealMemory: 1000000}}}}"
    )


def hetero_fleet_yaml(n: int, rack_size: int = 10, regions: int = 10, zones: int = 10) -> str:
    """A heterogeneous fleet: racks of ``rack_size`` nodes cycling CPU-only, 8×H100, 8×A100 and 4×GB200 (each
    GB200 rack one NVLink domain), spread over ``regions`` × ``zones``."""
    kinds = (("cpu", 0, None), ("h100", 8, "h100"), ("a100", 8, "a100"), ("gb200", 4, "gb200"))
    lines = ["nodes:"]
    made, rack = 0, 0
    while made < n:
        r, z = rack % regions, (rack // regions) % zones
        kind, gpus, gtype = kinds[rack % len(kinds)]
        size = min(rack_size, n - made)
        lines.append(_rack_line(kind, gpus, gtype, rack, size, f"reg{r}", f"reg{r}-z{z}"))
        made += size
        rack += 1
    return "\n".join(lines) + "\n"


def irregular_fleet_yaml(n: int, seed: int = 1) -> str:
    """An irregular fleet (seeded): racks of random kinds (CPU, 8×H100, 8×A100, 8×H200, 4×L40S, 4×GB200
    NVLink domains) and sizes (8-72 nodes) placed at random over 6-14 regions of 2-12 zones each, so nearly
    every zone and region holds a mix of its own (a size of its own in the filter's lists) — the shape of a
    fleet grown rack by rack, where ``hetero_fleet_yaml`` repeats one mix everywhere."""
    rng = random.Random(seed)
    kinds = [
        ("cpu", 0, "", 3), ("h100", 8, "h100", 3), ("a100", 8, "a100", 2), ("h200", 8, "h200", 2),
        ("l40s", 4, "l40s", 1), ("gb200", 4, "gb200", 2),
    ]  # fmt: skip
    regions = [[f"r{r}-z{z}" for z in range(rng.randint(2, 12))] for r in range(rng.randint(6, 14))]
    lines = ["nodes:"]
    made = rack = 0
    while made < n:
        kind, gpus, gtype, _ = rng.choices(kinds, [k[3] for k in kinds])[0]
        r = rng.randrange(len(regions))
        zone = rng.choice(regions[r])
        sizes = [8, 10, 16, 18, 32, 72] if kind == "gb200" else [8, 10, 16, 20, 32, 40]
        size = min(rng.choice(sizes), n - made)
        lines.append(_rack_line(kind, gpus, gtype, rack, size, f"r{r}", zone))
        made += size
        rack += 1
    return "\n".join(lines) + "\n"


FLEETS: dict[str, Callable[[int], str]] = {"hetero": hetero_fleet_yaml, "irregular": irregular_fleet_yaml}
FLEET_WORDS = {
    "hetero": "`hetero_fleet_yaml` fleet (racks of 10: CPU, 8×H100, 8×A100, 4×GB200 NVLink domains;"
    " 10 regions × 10 zones, every zone the same mix)",
    "irregular": "`irregular_fleet_yaml` fleet (seed 1: racks of 8-72 nodes of six kinds placed at random"
    " over uneven regions and zones, nearly every zone a mix of its own)",
}


# The goal of every first decision, in instructions (callgrind Ir): the bound at 100 000 nodes
FIRST_GOAL = 500_000


def _first_each_ir(lua: str, data_path: Path, env: dict[str, str]) -> dict[str, list[int]]:
    """Instructions (callgrind Ir) of every first decision, per family in first_bench.lua's order: one
    callgrind profile per decision (``--dump-before=clock``: first_bench.lua ``each`` calls os.clock after
    every decision and nothing else calls C's clock()), less the marker's own cost (the least of its
    back-to-back calls)."""
    with tempfile.TemporaryDirectory() as dumps:
        out = Path(dumps) / "cg.out"
        p = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=clock",
                "--dump-line=no",
                f"--callgrind-out-file={out}",
            ]
            + [lua, str(HERE / "first_bench.lua"), str(data_path), "each"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )

        def totals(k: int) -> int:
            for line in Path(f"{out}.{k}").read_text().splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1])
            raise ValueError(f"callgrind dump {k} has no totals line")

        lines = [line.split("\t") for line in p.stdout.splitlines()]
        calibrate = int(lines[0][1])
        floor = min(totals(k) for k in range(2, calibrate + 1))
        k = calibrate + 1  # each family: one dump for its data load, then one per decision
        per_family: dict[str, list[int]] = {}
        for _, family, count in lines[1:]:
            per_family[family] = [totals(k + i) - floor for i in range(1, int(count) + 1)]
            k += int(count) + 1
    return per_family


def _tail(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def first_decisions(args: argparse.Namespace, lua: str) -> None:
    """``--first``: see the module docstring; appends a section to ``--out``."""
    versions = [(args.label, None)]
    if args.filter_dir:
        versions.insert(0, (args.label_before, args.filter_dir))
    n = int(args.sizes.split(",")[-1])
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        inv_path = Path(tmp) / "fleet.yaml"
        inv_path.write_text(FLEETS[args.fleet](n))
        data_path = Path(tmp) / "data.lua"
        data_path.write_text(render_all(load_inventories([inv_path]), (22, 5))["slurm_topo_data.lua"])
        for label, filter_dir in versions:
            env = dict(os.environ)
            if filter_dir:
                env["FILTER_DIR"] = filter_dir
            out = subprocess.run(
                [lua, str(HERE / "first_bench.lua"), str(data_path)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout
            irs = _first_each_ir(lua, data_path, env)
            rows = []
            for line in out.splitlines():
                _, family, count, median, p95, worst, worst_i = line.split("\t")
                ir = irs[family]
                most = max(ir)
                rows.append(
                    f"| {family} | {count} | {float(median):.0f} | {float(p95):.0f} | "
                    f"{float(worst):.0f} (#{worst_i}) | {sum(ir) / len(ir):,.0f} | {_tail(ir, 0.95):,} | "
                    f"{most:,} (#{ir.index(most) + 1}) | {sum(1 for x in ir if x > FIRST_GOAL)} |"
                )
                print(label, rows[-1], flush=True)
            sections.append((label, rows))
    cmd = "python benchmarks/bench_filter.py " + " ".join(sys.argv[1:])
    lines = [
        "",
        f"## First decisions of new request shapes ({n} nodes, {args.fleet} fleet)",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Method: `lua5.1 benchmarks/first_bench.lua DATA` on bench_filter.py's {FLEET_WORDS[args.fleet]}."
        " Each family"
        " is a sweep of sizes no earlier decision asked for, so every decision is the first of its shape"
        " (the memos miss); each family starts on a freshly loaded data table, so its first decision is"
        " also the first after a data load (no label derived, no class set seen, every memo empty). Times:"
        " CPU µs per decision (os.clock, one run; the worst includes whatever garbage collection"
        " that decision triggered). Instructions (callgrind Ir) of every decision on its own"
        " (`first_bench.lua DATA each` under `valgrind --tool=callgrind --dump-before=clock`: one profile"
        " per decision, less the marker's own cost; garbage collection included): mean, p95, worst"
        " (which) and how many exceed 500 000. "
        "Goal: ≤ 150 µs and ≤ 500 000 instructions for every decision.",
        "",
    ]
    for label, rows in sections:
        lines += [
            f"### {label}",
            "",
            "| family | decisions | median µs | p95 µs | worst µs (which) | mean instructions | p95 "
            "instructions | worst instructions (which) | over 500 000 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")


def instructions(lua: str, data_path: Path, case: int | str, n: int, env: dict[str, str]) -> int:
    """Lua VM + interpreter instructions (callgrind's Ir) of n decisions of one case, whole process (case
    ``submit:K`` / ``trivial:K``: n whole submit hooks, or n trivial ones, on a copy of case K's job)."""
    p = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            lua,
            str(HERE / "filter_bench.lua"),
            str(data_path),
            str(n),
            str(case),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return int(next(line for line in p.stderr.splitlines() if "Collected :" in line).split()[-1])


def per_decision(lua: str, data_path: Path, case: int | str, env: dict[str, str]) -> float:
    """Instructions per decision: the difference between 2 000 and 1 000 decisions (setup and load cancel)."""
    return (
        instructions(lua, data_path, case, 2000, env) - instructions(lua, data_path, case, 1000, env)
    ) / 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--out", default=str(HERE / "results" / "filter.md"))
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="instructions per decision (valgrind) instead of times; appends a section to --out",
    )
    ap.add_argument("--data", help="with --callgrind: this data file instead of a generated fleet")
    ap.add_argument("--filter-dir", help="with --callgrind: the job_submit/ folder of another filter version")
    ap.add_argument("--label", default="this tree", help="with --callgrind: what the column is called")
    ap.add_argument("--label-before", default="before", help="with --first and --filter-dir: its name")
    ap.add_argument("--first", action="store_true", help="first decisions of new shapes (appends to --out)")
    ap.add_argument("--fleet", choices=sorted(FLEETS), default="hetero", help="with --first: which fleet")
    ap.add_argument(
        "--callgrind-submit",
        action="store_true",
        help="instructions per whole submit() hook against a trivial hook (the submit overhead's Lua part), "
        "on the test cluster's fleet (docker-slurm/fleet.yaml) and the --sizes fleets; appends to --out",
    )
    ap.add_argument(
        "--load-only",
        action="store_true",
        help="only the data file's load (read, checksum, load in the first submission): --repeat fresh "
        "processes per size for its tails, and callgrind's instructions for it; appends to --out",
    )
    ap.add_argument("--repeat", type=int, default=30, help="with --load-only: loads per size")
    ap.add_argument("--racks", default="40", help="with --load-only: rack sizes of the fleets (comma list)")
    args = ap.parse_args()
    lua = shutil.which("lua5.1")
    if lua is None:
        sys.exit("lua5.1 not found (apt-get install lua5.1): the benchmark runs the real interpreter")
    if args.first:
        first_decisions(args, lua)
        return
    if args.callgrind:
        count_instructions(args, lua)
        return
    if args.callgrind_submit:
        count_submit_instructions(args, lua)
        return
    if args.load_only:
        measure_load(args, lua)
        return
    version = subprocess.run([lua, "-v"], capture_output=True, text=True).stderr.strip() or "lua5.1"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            inv_path = Path(tmp) / f"fleet-{n}.yaml"
            inv_path.write_text(fleet_yaml(n))
            data = render_all(load_inventories([inv_path]), (22, 5))["slurm_topo_data.lua"]
            data_path = Path(tmp) / f"data-{n}.lua"
            data_path.write_text(data)
            out = subprocess.run(
                [lua, str(HERE / "filter_bench.lua"), str(data_path), str(args.iterations)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            load_s = float(out.splitlines()[0].split()[1])
            cases = [line.split("\t")[1:] for line in out.splitlines()[1:] if line.startswith("case")]
            rows.append((n, len(data), load_s, cases))
            print(
                f"{n} nodes: data {len(data) / 1024:.0f} KiB, load {load_s * 1000:.1f} ms; "
                + "; ".join(f"{c[0]}: {float(c[4]):.1f} / {float(c[1]):.1f} µs" for c in cases),
                flush=True,
            )
    cmd = "python benchmarks/bench_filter.py " + " ".join(sys.argv[1:])
    lines = [
        "# Submit filter cost per submission (real Lua 5.1)",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; {version}  ",
        f"Method: each cell is **decision / submit**, in µs of CPU time (os.clock), median of five runs of "
        f"{args.iterations}: *decision* = `decide(data, request(job_desc))` (read the job, decide); *submit* "
        "= "
        "`submit()` on a fresh job_desc copy (the whole hook: also the data-file check, writing the decision "
        "back and logging), with its min–max. Data load: the filter's own load inside its first submission "
        "(read, "
        "checksum, load), once.",
        "",
    ]
    header = "| case | " + " | ".join(f"{n} nodes" for n, *_ in rows) + " |"
    lines += [header, "|---|" + "---:|" * len(rows)]
    names = [c[0] for c in rows[0][3]]
    for i, name in enumerate(names):
        cells = [
            f"{float(r[3][i][4]):.1f} / {float(r[3][i][1]):.1f} "
            f"({float(r[3][i][2]):.1f}–{float(r[3][i][3]):.1f})"
            for r in rows
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| data file load, ms | " + " | ".join(f"{r[2] * 1000:.1f}" for r in rows) + " |")
    lines.append("| data file size, KiB | " + " | ".join(f"{r[1] / 1024:.0f}" for r in rows) + " |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


CASES = [
    "zone -N4",
    "prefer -N2",
    "network_group:fail -N8 8xGPU/node",
    "region --gpus h100:64",
    "zone -C ib -N4",
    "zone:fail impossible -N100000",
    "any",
    "zone -N1 (bench_submit's job)",
]


def count_instructions(args: argparse.Namespace, lua: str) -> None:
    """Instructions per decision (callgrind), repeatable where times on a shared machine are not."""
    env = dict(os.environ)
    if args.filter_dir:
        env["FILTER_DIR"] = args.filter_dir
    with tempfile.TemporaryDirectory() as tmp:
        if args.data:
            data_path, n = Path(args.data), "given"
        else:
            n = args.sizes.split(",")[-1]
            inv_path = Path(tmp) / "fleet.yaml"
            inv_path.write_text(fleet_yaml(int(n)))
            data_path = Path(tmp) / "data.lua"
            data_path.write_text(render_all(load_inventories([inv_path]), (22, 5))["slurm_topo_data.lua"])
        rows = [(name, per_decision(lua, data_path, i, env)) for i, name in enumerate(CASES, 1)]
    cmd = "python benchmarks/bench_filter.py " + " ".join(sys.argv[1:])
    lines = [
        "",
        f"## Instructions per decision ({args.label}, {n} nodes)",
        "",
        f"Command: `{cmd.strip()}`  ",
        "Method: `valgrind --tool=callgrind` on `lua5.1 filter_bench.lua DATA N CASE` for N = 2 000 and 1 "
        "000 "
        "decisions of one case (`decide(data, request(job_desc))`); the difference over 1 000 is the cost of "
        "one decision in machine instructions (Ir), repeatable where CPU times on this shared machine are "
        "not.",
        "",
        "| case | instructions per decision |",
        "|---|---:|",
        *(f"| {name} | {ir:,.0f} |" for name, ir in rows),
    ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    for name, ir in rows:
        print(f"{name}: {ir:,.0f} instructions per decision")


def _load_instructions(lua: str, data_path: Path) -> int:
    p = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", lua]
        + [str(HERE / "filter_bench.lua"), str(data_path), "0", "load"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(next(line for line in p.stderr.splitlines() if "Collected :" in line).split()[-1])


def measure_load(args: argparse.Namespace, lua: str) -> None:
    """The data file's load at each size and rack size: CPU time over fresh processes (median, p95, max) and
    instructions (callgrind, the whole process less the same process loading the 12-node test fleet's
    file)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.lua"
        small.write_text(
            render_all(load_inventories([HERE.parent / "docker-slurm" / "fleet.yaml"]), (22, 5))[
                "slurm_topo_data.lua"
            ]
        )
        floor = _load_instructions(lua, small)
        for rack in (int(r) for r in args.racks.split(",")):
            for n in (int(s) for s in args.sizes.split(",")):
                inv_path = Path(tmp) / "fleet.yaml"
                inv_path.write_text(fleet_yaml(n, rack))
                data = render_all(load_inventories([inv_path]), (22, 5))["slurm_topo_data.lua"]
                data_path = Path(tmp) / "data.lua"
                data_path.write_text(data)
                times = []
                for _ in range(args.repeat):
                    out = subprocess.run(
                        [lua, str(HERE / "filter_bench.lua"), str(data_path), "0", "load"],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    times.append(float(out.split()[1]) * 1000)
                times.sort()
                ir = _load_instructions(lua, data_path) - floor
                p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                rows.append((n, rack, len(data.encode()), times, p95, ir))
                print(
                    f"{n} nodes, racks of {rack}: {len(data.encode()) / 1024:.0f} KiB, load median "
                    f"{times[len(times) // 2]:.1f} ms, p95 {p95:.1f}, max {times[-1]:.1f}; {ir:,} Ir",
                    flush=True,
                )
    cmd = "python benchmarks/bench_filter.py " + " ".join(sys.argv[1:])
    lines = [
        "",
        "## Data file load (read, checksum, load inside the first submission)",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Method: `lua5.1 filter_bench.lua DATA 0 load`, {args.repeat} fresh processes per row, CPU time "
        "(os.clock) of the filter's own load in its first submit(); instructions: callgrind's Ir of the same "
        "process less that of one loading the 12-node test fleet's file (so: the load's own instructions, "
        "repeatable where times on this shared machine are not). Goal: 50 ms at 100 000 nodes.",
        "",
        "| nodes | racks of | data KiB | median ms | p95 ms | max ms | min ms | instructions |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {n} | {rack} | {size / 1024:.0f} | {t[len(t) // 2]:.1f} | {p95:.1f} | {t[-1]:.1f} | "
            f"{t[0]:.1f} | {ir:,} |"
            for n, rack, size, t, p95, ir in rows
        ),
    ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")


def count_submit_instructions(args: argparse.Namespace, lua: str) -> None:
    """Instructions of the whole submit() hook per submission against a hook that only returns SUCCESS."""
    env = dict(os.environ)
    if args.filter_dir:
        env["FILTER_DIR"] = args.filter_dir
    fleets: list[tuple[str, str]] = [("test cluster (docker-slurm/fleet.yaml, 12 nodes)", "")]
    fleets += [(f"{int(n)} nodes", n) for n in args.sizes.split(",")]
    cases = [1, 2, len(CASES)]  # zone -N4, prefer -N2, bench_submit's zone -N1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, n in fleets:
            inv_path = Path(tmp) / "fleet.yaml"
            if n:
                inv_path.write_text(fleet_yaml(int(n)))
            else:
                inv_path = HERE.parent / "docker-slurm" / "fleet.yaml"
            data_path = Path(tmp) / "data.lua"
            data_path.write_text(render_all(load_inventories([inv_path]), (22, 5))["slurm_topo_data.lua"])
            for case in cases:
                filt = per_decision(lua, data_path, f"submit:{case}", env)
                triv = per_decision(lua, data_path, f"trivial:{case}", env)
                rows.append((label, CASES[case - 1], filt, triv))
                print(f"{label}, {CASES[case - 1]}: submit {filt:,.0f}, trivial {triv:,.0f} Ir", flush=True)
    cmd = "python benchmarks/bench_filter.py " + " ".join(sys.argv[1:])
    lines = [
        "",
        f"## Instructions per submit() hook against a trivial hook ({args.label})",
        "",
        f"Command: `{cmd.strip()}`  ",
        "Method: `valgrind --tool=callgrind` on `lua5.1 filter_bench.lua DATA N submit:K` (the filter's "
        "whole submit hook on a fresh copy of case K's job_desc: data-file check, read, decide, write back, "
        "log) and `trivial:K` (the same copy handed to a hook that only returns slurm.SUCCESS), N = 2 000 "
        "and 1 000; the difference over 1 000 is one submission in machine instructions (Ir). The data file "
        "is loaded once before (a submission after a new data file also pays the load: see the load row "
        "above).",
        "",
        "| fleet | case | filter Ir | trivial Ir | filter − trivial |",
        "|---|---|---:|---:|---:|",
        *(f"| {f} | {c} | {a:,.0f} | {b:,.0f} | {a - b:,.0f} |" for f, c, a, b in rows),
    ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
