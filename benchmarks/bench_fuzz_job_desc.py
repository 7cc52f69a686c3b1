"""The job_desc fuzzer of the suite (tests/test_fuzz_job_desc.py), run larger: several seeds, more jobs each.

Each run is the suite's own test — hostile job_desc tables and updates through the real Lua 5.1 filter, every
call under an instruction budget — with ``SLURM_TOPO_FUZZ_SEED`` / ``SLURM_TOPO_FUZZ_JOBS`` set; a run passes
only with 0 errors escaping, 0 calls over budget (hangs) and 0 internal errors logged.

    python benchmarks/bench_fuzz_job_desc.py --seeds 1,2,3,4,5 --jobs 200000

writes benchmarks/results/fuzz_job_desc.md (with this command line).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_fuzz_job_desc.py::test_fuzz_100k_job_descs_no_error_escapes"


def run(seed: int, jobs: int) -> tuple[bool, str, float]:
    env = {**os.environ, "SLURM_TOPO_FUZZ_SEED": str(seed), "SLURM_TOPO_FUZZ_JOBS": str(jobs)}
    t0 = time.monotonic()
    p = subprocess.run(  # -n 0: in this process, so that -s shows the test's own line
        [sys.executable, "-m", "pytest", "-q", "-s", "-n", "0", "-p", "no:cacheprovider", TEST],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    took = time.monotonic() - t0
    m = re.search(r"fuzz: (\d+) submissions \+ (\d+) updates in ([\d.]+) s", p.stdout)
    line = f"{m[1]} submissions + {m[2]} updates, {m[3]} s in the driver" if m else p.stdout.strip()[-300:]
    return p.returncode == 0, line, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "fuzz_job_desc.md"))
    args = ap.parse_args()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        ok, line, took = run(seed, args.jobs)
        rows.append((seed, ok, line, took))
        print(f"seed {seed}: {'pass' if ok else 'FAIL'}: {line} ({took:.0f} s)", flush=True)
    cmd = "python benchmarks/bench_fuzz_job_desc.py " + " ".join(sys.argv[1:])
    lines = [
        "# job_desc fuzzer, larger run",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}  ",
        "Each row is `tests/test_fuzz_job_desc.py`'s fuzzer (real Lua 5.1 through lupa, hostile job_desc"
        " tables and updates, every call under an instruction budget) with that seed and size; pass = 0"
        " errors escaped, 0 calls over budget, 0 internal errors logged.",
        "",
        "| seed | result | what ran | wall s |",
        "|---:|---|---|---:|",
        *(f"| {s} | {'pass' if ok else 'FAIL'} | {line} | {took:.0f} |" for s, ok, line, took in rows),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    if not all(ok for _, ok, _, _ in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
