#!/usr/bin/env python3
"""Cost of the submit filter per submission, in the real Lua 5.1 interpreter, against fleet size.

For 1 000, 10 000 and 100 000 nodes (the same synthetic fleets as bench_generate.py: racks of 40, 3 zones a
region) it renders slurm_topo_data.lua, then runs benchmarks/filter_bench.lua under `lua5.1`: the data file's
load time, and per job shape the full `submit()` path (read the job, decide, write the decision back) — median
of five runs of N submissions each (min and max shown). Also the same for the Python reference, for scale.

    python benchmarks/bench_filter.py [--sizes 1000,10000,100000] [--iterations 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_generate import fleet_yaml  # noqa: E402

from slurm_topo import load_inventories, render_all  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--out", default=str(HERE / "results" / "filter.md"))
    args = ap.parse_args()
    lua = shutil.which("lua5.1")
    if lua is None:
        sys.exit("lua5.1 not found (apt-get install lua5.1): the benchmark runs the real interpreter")
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


if __name__ == "__main__":
    main()
