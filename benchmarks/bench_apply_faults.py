"""Fault injection for `slurm-topo apply`: SIGKILL an apply at random points, run apply again, check.

Each trial starts from a config directory holding an old set (rendered from a small fleet) and applies a new
set (a moved node, a new group, a removed group: round robin) in a child process killed with SIGKILL:

* ``step`` trials: the child kills itself right after journaled step k (k random over all steps);
* ``timer`` trials: the parent kills the child after a random delay in [0.4, 1.2] × the measured run time
  (most of a run is interpreter start-up).

Then the next apply runs to completion (no kill) and the trial checks that the live set equals the new set
byte for byte (or the old one, where the run after the crash did not apply), that no journal or staging file
is left, and that every ``scontrol reconfigure`` the fake slurmctld received (tests/test_apply.py's
FakeSlurm, its reads logged to a file across processes) read a complete old or new config set, never a
mixed one.

    .venv/bin/python benchmarks/bench_apply_faults.py [--trials 240] [--seed 1] \
        [--out benchmarks/results/apply_faults.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

SCENARIOS = {
    "move": {"n1": "rack-b"},
    "add-group": {"n1": "rack-c"},
    "remove-group": {f"n{i}": "rack-b" for i in range(1, 5)},
}
NAMES = ("gres.conf", "slurm-topo-nodes.conf", "slurm_topo_data.lua", "topology.conf")
CONFIG = ("topology.conf", "slurm-topo-nodes.conf", "gres.conf")


def shas(directory: Path, names=NAMES) -> tuple:  # type: ignore[no-untyped-def]
    return tuple(
        hashlib.sha256((directory / n).read_bytes()).hexdigest() if (directory / n).exists() else None
        for n in names
    )


def child(args: argparse.Namespace) -> int:
    from test_apply import FakeSlurm

    from slurm_topo.apply import ApplyOptions, run_apply

    class LoggingSlurm(FakeSlurm):
        def run(self, argv, timeout=30.0):  # type: ignore[no-untyped-def]
            if list(argv) == ["scontrol", "reconfigure"]:
                with open(args.log, "a") as fh:
                    fh.write(json.dumps(shas(Path(args.etc), CONFIG)) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            return super().run(argv, timeout)

    kill_at = args.kill_at
    count = [0]

    def hook(step: str) -> None:
        count[0] += 1
        if kill_at is not None and count[0] > kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    rendered = {p.name: p.read_text() for p in Path(args.new).iterdir()}
    options = ApplyOptions(
        slurm_dir=Path(args.etc),
        state_dir=Path(args.state),
        min_interval=0,
        verify_timeout=0.2,
        step_hook=hook,
    )
    res = run_apply(options, rendered, LoggingSlurm(Path(args.etc)))
    print(
        json.dumps({"status": res.status, "code": res.exit_code, "summary": res.summary, "steps": count[0]})
    )
    return res.exit_code


def run_child(
    etc: Path, state: Path, new: Path, log: Path, kill_at: int | None = None, kill_after: float | None = None
) -> subprocess.CompletedProcess[str] | int:
    argv = [
        sys.executable,
        __file__,
        "--child",
        "--etc",
        str(etc),
        "--state",
        str(state),
        "--new",
        str(new),
        "--log",
        str(log),
    ] + (["--kill-at", str(kill_at)] if kill_at is not None else [])
    if kill_after is None:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)  # this trial's own child, by its pid
    return proc.wait(timeout=60)


@dataclass
class _Bench:
    """The rendered config sets (old and one per scenario) and the steps and time of an uninterrupted run."""

    work: Path
    sets: dict[str, Path]
    steps: dict[str, int] = field(default_factory=dict)
    typical: float = 0.0

    def fresh(self, i: int) -> tuple[Path, Path, Path]:
        """Trial ``i``'s live directory (a copy of the old set), state directory and reconfigure log."""
        t = self.work / f"t{i}"
        etc = t / "etc"
        shutil.copytree(self.sets["old"], etc)
        return etc, t / "state", t / "reconfigure.log"


def _prepare(work: Path) -> _Bench:
    from test_apply import fleet, render

    sets = {}
    for name, moves in [("old", {}), *SCENARIOS.items()]:
        d = work / "sets" / name
        d.mkdir(parents=True)
        for fname, text in render(work, fleet(moves), f"{name}.yaml").items():
            (d / fname).write_text(text)
        sets[name] = d
    bench = _Bench(work, sets)
    secs = []
    for s in SCENARIOS:  # measure: steps and time of an uninterrupted run per scenario
        etc, state, log = bench.fresh(-1 - len(bench.steps))
        t0 = time.monotonic()
        p = run_child(etc, state, sets[s], log)
        secs.append(time.monotonic() - t0)
        bench.steps[s] = json.loads(p.stdout)["steps"]
    bench.typical = sorted(secs)[len(secs) // 2]
    return bench


@dataclass
class _Trial:
    scenario: str
    kind: str
    how: str
    crash_state: str
    status: str
    summary: str
    reconfigures: int
    ok_set: bool
    mixed: int
    leftovers: list[str]

    @property
    def good(self) -> bool:
        return self.ok_set and not self.mixed and not self.leftovers


def _trial(bench: _Bench, i: int, rng: random.Random) -> _Trial:
    """Kill an apply of the round robin's scenario (even i: after step k; odd i: after a random delay), then
    run the next apply to the end and check the live set, the reconfigures and the leftovers."""
    sets = bench.sets
    scenario = list(SCENARIOS)[i % len(SCENARIOS)]
    etc, state, log = bench.fresh(i)
    if i % 2 == 0:
        k = rng.randrange(0, bench.steps[scenario] + 1)
        kind, how = "step", f"k={k}"
        run_child(etc, state, sets[scenario], log, kill_at=k)
    else:
        delay = rng.uniform(bench.typical * 0.4, bench.typical * 1.2)
        kind, how = "timer", f"{delay * 1000:.0f}ms"
        run_child(etc, state, sets[scenario], log, kill_after=delay)
    after_crash = shas(etc)
    crash_state = (
        "old"
        if after_crash == shas(sets["old"])
        else "new"
        if after_crash == shas(sets[scenario])
        else "mixed"
    )
    res = json.loads(run_child(etc, state, sets[scenario], log).stdout)
    final = shas(etc)
    ok_set = final == shas(sets[scenario]) or (res["status"] != "applied" and final == shas(sets["old"]))
    allowed = {shas(sets["old"], CONFIG), shas(sets[scenario], CONFIG)}
    reconf = [tuple(json.loads(line)) for line in log.read_text().splitlines()] if log.exists() else []
    leftovers = [p.name for p in etc.iterdir() if p.name.startswith(".")] + (
        ["journal.json"] if (state / "journal.json").exists() else []
    )
    shutil.rmtree(etc.parent)
    mixed = sum(1 for r in reconf if r not in allowed)
    return _Trial(
        scenario, kind, how, crash_state, res["status"], res["summary"], len(reconf), ok_set, mixed, leftovers
    )


def _report(args: argparse.Namespace, bench: _Bench, trials: list[_Trial], elapsed: float) -> list[str]:
    failures = [
        f"trial {i} {t.scenario} {t.kind} {t.how}: final={'new' if t.ok_set else 'WRONG'} "
        f"mixed-reconfigures={t.mixed} leftovers={t.leftovers} {t.summary}"
        for i, t in enumerate(trials)
        if not t.good
    ]
    outcome_counts: dict[str, int] = {}
    for t in trials:
        key = f"{t.kind}: left {t.crash_state} -> {t.status}"
        outcome_counts[key] = outcome_counts.get(key, 0) + 1
    steps, typical = bench.steps, bench.typical
    cmd = "python benchmarks/bench_apply_faults.py " + " ".join(a for a in sys.argv[1:])
    lines = [
        "# apply: SIGKILL at random points",
        "",
        f"Command: `{cmd.strip()}` (seed {args.seed}), {time.strftime('%Y-%m-%d')}, Python "
        f"{sys.version.split()[0]}, {os.cpu_count()} CPUs.",
        "",
        f"{args.trials} trials ({elapsed:.1f} s): each applies a new set (move / add-group / remove-group, "
        "round robin) over an old one in a child process killed with SIGKILL — even trials right after "
        f"journaled step k (uninterrupted runs take {', '.join(f'{s} {n}' for s, n in steps.items())} "
        f"steps), odd trials after a random delay in [{typical * 0.4 * 1000:.0f}, "
        f"{typical * 1.2 * 1000:.0f}] ms (uninterrupted run {typical * 1000:.0f} ms). The next apply then "
        "runs to the end. Checked: live set == new set byte for byte, no journal or staging file left, and "
        "every `scontrol reconfigure` the fake slurmctld received read a complete old or new config set "
        "(tests/test_apply.py FakeSlurm, logged across processes).",
        "",
        f"**Result: {args.trials - len(failures)} of {args.trials} trials good, {len(failures)} failures; "
        f"{sum(t.reconfigures for t in trials)} reconfigures observed, 0 on a mixed set**"
        if not failures
        else f"**Result: {len(failures)} FAILURES**",
        "",
        "| kill | live set right after the kill -> next run | trials |",
        "|---|---|---|",
        *[f"| {k.split(':')[0]} | {k.split(': ', 1)[1]} | {n} |" for k, n in sorted(outcome_counts.items())],
        "",
        "`left mixed` trials are the point of the journal: the kill came between two renames; the next run "
        "reverted them before doing anything else (and reconfigured nothing in between).",
    ]
    if failures:
        lines += ["", "## Failures", "", *[f"- {f}" for f in failures]]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--etc"), ap.add_argument("--state"), ap.add_argument("--new"), ap.add_argument("--log")
    ap.add_argument("--kill-at", type=int)
    ap.add_argument("--trials", type=int, default=240)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "apply_faults.md"))
    args = ap.parse_args()
    if args.child:
        return child(args)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="slurm-topo-apply-faults-"))
    bench = _prepare(work)
    t_start = time.monotonic()
    trials = [_trial(bench, i, rng) for i in range(args.trials)]
    elapsed = time.monotonic() - t_start
    shutil.rmtree(work)
    lines = _report(args, bench, trials, elapsed)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(t.good for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
