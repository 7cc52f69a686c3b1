#!/usr/bin/env python3
"""A larger run of the input fuzzer in tests/test_fuzz_inputs.py: several seeds, more cases, more CLI runs.

Every case is an inventory (operator, provider, self), a node record (YAML, JSON), a cloud listing (gcp, aws,
azure) or a ``--nodes-from`` listing with hostile values in one to three fields or a mutated document. It
counts tracebacks (any exception but ``SlurmTopoError``), hangs (a case over 5 s), partial writes (an
in-process ``slurm-topo generate`` that exits 2 but changed the output directory, or exits 0 with files of
different content) and unsafe output (a rendered line that is not ``Key=token`` pairs from a strict alphabet).

    python benchmarks/bench_fuzz_inputs.py [--seeds 1,2,3,4,5] [--cases 20000] [--cli-every 25]
        [--out benchmarks/results/fuzz_inputs.md]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_fuzz_inputs as fuzzer  # noqa: E402  (the suite's generator, run larger)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--cases", type=int, default=20_000, help="cases per seed")
    parser.add_argument("--cli-every", type=int, default=25)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/fuzz_inputs.md"))
    args = parser.parse_args()
    rows = []
    problems: list[str] = []
    for seed in (int(s) for s in args.seeds.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            tally = fuzzer.fuzz(seed, args.cases, Path(tmp), cli_every=args.cli_every)
            wall = time.monotonic() - started
        rows.append((seed, tally, wall))
        problems += tally.tracebacks + tally.hangs + tally.partial_writes + tally.bad_output
        print(
            f"seed {seed}: {tally.cases} cases ({tally.accepted} accepted, {tally.refused} refused), "
            f"{tally.cli_runs} CLI runs, {len(tally.tracebacks)} tracebacks, {len(tally.hangs)} hangs, "
            f"{len(tally.partial_writes)} partial writes, slowest case {tally.slowest_s * 1000:.0f} ms, "
            f"{wall:.1f} s",
            file=sys.stderr,
        )
    command = "python benchmarks/bench_fuzz_inputs.py " + " ".join(sys.argv[1:])
    lines = [
        "# Input fuzzing (larger run of tests/test_fuzz_inputs.py)",
        "",
        f"Command: `{command.strip()}`  ",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {platform.system()}; "
        "times are wall clock on a shared machine.",
        "",
        "Kinds in turn, as in the suite: inventories (operator, provider, self) and records (YAML, JSON) "
        "twice in every 14 cases, cloud listings (gcp, aws, azure) and `--nodes-from` once. One case in "
        f"{args.cli_every} (not listings) also runs `slurm-topo generate` in-process over existing outputs.",
        "",
        "| seed | cases | accepted | refused | CLI runs | tracebacks | hangs | partial writes "
        "| slowest case | wall |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seed, t, wall in rows:
        lines.append(
            f"| {seed} | {t.cases} | {t.accepted} | {t.refused} | {t.cli_runs} | {len(t.tracebacks)} | "
            f"{len(t.hangs)} | {len(t.partial_writes)} | {t.slowest_s * 1000:.0f} ms | {wall:.0f} s |"
        )
    total = sum(t.cases for _, t, _ in rows)
    lines += ["", f"Total: {total} cases, {len(problems)} problems."]
    if problems:
        lines += ["", "## Problems", "", *(f"- {p}" for p in problems[:50])]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
