"""sbatch submit cost of the slurm-topo locality filter on real Slurm daemons: against a trivial Lua
job_submit filter (and optionally no plugin), interleaved, per Slurm release.

Test clusters side by side (docker-slurm/cluster, fleet.yaml), identical but for the job_submit plugin; every
one loads the locality SPANK plugin (so every client pays the same plugin load):

* ``trivial``: ``JobSubmitPlugins=lua`` with a job_submit.lua whose hooks only return ``slurm.SUCCESS`` (the
  cost of the Lua plugin itself: the job_desc bridge, the interpreter call);
* ``filter``: ``JobSubmitPlugins=lua`` with job_submit.lua + slurm_topo_filter/ + the generated
  slurm_topo_data.lua (``--with-filter``);
* ``plain`` (``--configs plain,trivial,filter``): no JobSubmitPlugins;
* ``same`` (``--configs trivial,same,filter``): the trivial Lua filter, every job submitted with the
  constraint the filter decides for it given by the user (``-C``/``--prefer``, read from a job the filter
  cluster amended): what Slurm itself spends on that constraint, so ``filter`` against ``same`` is the
  filter's own cost and ``same`` against ``trivial`` the cost of placing by topology at all.

Rounds alternate blocks of submissions between them in seeded random order, so machine noise hits all alike.
Every submission is

    timeout 30 sbatch --parsable --hold -N1 --locality=zone -J bs -o /dev/null --wrap=true

(held: it never runs), timed around the process with perf_counter (wall time: client fork/exec, munge, SPANK
load and the RPC). With ``--sdiag`` each submission is also measured inside slurmctld: ``sdiag --reset``
before it, ``sdiag`` after it, and the REQUEST_SUBMIT_BATCH_JOB line's total_time (µs) is that one RPC's
server-side time (slurmctld's own timer around the RPC handler, job_submit plugin included; no client in
it), so tails come out as well as the mean. After each block the jobs are checked (Features=[zone_...] with
the filter, (null) without) and cancelled.

``--queued 0,300,1000`` measures at several queue depths, one after the other on the same clusters: before
each depth every cluster gets held jobs (``sbatch --hold -J q --wrap=true``, 4 at a time) until that many of
them are pending. job_submit/lua rebuilds its ``slurm.jobs`` table (one entry per record in slurmctld's job
list: pending, running, and finished ones not yet purged, MinJobAge) before a submission that follows a job
change in a later second, in every config with a Lua filter alike; each depth's table gives the job records
slurmctld held while it was measured (``squeue -t all``, median over the blocks).

``--slurm native,24.11,26.05`` runs the whole measurement once per release (docker-slurm/cluster
``--slurm``; the 24.11/26.05 Debian roots must be built or buildable) and writes one table per release.

``--callgrind N`` (host Slurm only) counts instructions instead of timing: each config's slurmctld is
restarted (``cluster restart-ctld --wrap``) under ``valgrind --tool=callgrind --toggle-collect=slurmctld_req``
(every RPC handler, nothing else), three untimed submissions, ``callgrind_control --zero``, N submissions,
``callgrind_control --dump``; the table is instructions per submit RPC, in all and inside the job_submit
plugin (``job_submit_plugin_submit``), Slurm's feature parsing (``build_feature_list``) and its log writer
(``log_var``): repeatable where times on a shared machine swing by more than the goal.

    .venv/bin/python benchmarks/bench_submit.py [--rounds 30 --block 20] [--sdiag] [--slurm native,24.11]
        [--configs trivial,filter] [--queued 0,300,1000] [--out benchmarks/results/submit.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import slurmctl  # noqa: E402

ARGS = ["--parsable", "--hold", "-N1", "--locality=zone", "-J", "bs", "-o", "/dev/null", "--wrap=true"]


def _lua_filter(comment: str, submit_body: str) -> str:
    """A job_submit.lua whose modify hook accepts every update and whose submit hook runs ``submit_body``."""
    return f"""\
{comment}
function slurm_job_submit(job_desc, part_list, submit_uid)
{submit_body}  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
"""


TRIVIAL_LUA = _lua_filter("-- the cheapest job_submit/lua filter: both hooks accept the job unchanged", "")
READS_LUA = _lua_filter(
    "-- the floor of any filter that decides from the job: it reads the job_desc fields slurm-topo's\n"
    "-- filter reads for this batch job (slurm_topo_filter/ request.lua, init.lua), accepts it unchanged",
    "  local _ = { job_desc.features, job_desc.prefer, job_desc.partition, job_desc.tres_per_job,\n"
    "    job_desc.tres_per_node, job_desc.tres_per_task, job_desc.script, job_desc.spank_job_env,\n"
    "    job_desc.comment, job_desc.req_nodes, job_desc.exc_nodes, job_desc.reservation,\n"
    "    job_desc.contiguous, job_desc.het_job_offset, job_desc.min_nodes, job_desc.time_limit,\n"
    "    job_desc.admin_comment }\n",
)
CONFIGS = ("plain", "trivial", "reads", "same", "filter")
LABELS = {
    "plain": "no JobSubmitPlugins",
    "trivial": "trivial Lua filter",
    "reads": "Lua filter reading the job fields the filter reads, nothing else",
    "same": "trivial Lua filter + the filter's constraint given by the user",
    "filter": "slurm-topo filter",
}
EXTRA = {
    "plain": ["--spank"],
    "trivial": ["--spank", "--job-submit", "TRIVIAL"],
    "reads": ["--spank", "--job-submit", "READS"],
    "same": ["--spank", "--job-submit", "TRIVIAL"],
    "filter": ["--with-filter"],
}
_SUBMIT_RPC = re.compile(
    r"^\s*REQUEST_SUBMIT_BATCH_JOB\s*\(\s*\d+\)\s*count:\s*(\d+)\s+ave_time:\s*(\d+)\s+total_time:\s*(\d+)",
    re.M,
)


@dataclass
class Samples:
    wall_ms: list[float] = field(default_factory=list)
    rpc_us: list[float] = field(default_factory=list)
    records: list[int] = field(default_factory=list)  # job records in slurmctld, one count per block


QUEUE_ARGS = ["--parsable", "--hold", "-N1", "-J", "q", "-o", "/dev/null", "--wrap=true"]


def fill_queue(slurm: slurmctl.Slurm, depth: int) -> None:
    """Submit held jobs named ``q`` until ``depth`` of them are pending (4 sbatch at a time)."""
    have = len(slurm.out("squeue", "-h", "-t", "PD", "-n", "q", "-o", "%i", timeout=60).split())

    def one(_: int) -> None:
        p = subprocess.run(
            ["timeout", "30", "sbatch", *QUEUE_ARGS],
            env=slurm.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if p.returncode != 0:
            raise SystemExit(f"sbatch (queue) failed: {p.stderr}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(max(0, depth - have))))


def job_records(slurm: slurmctl.Slurm) -> int:
    """Job records slurmctld holds now (every state, finished ones until MinJobAge purges them)."""
    return len(slurm.out("squeue", "-h", "-t", "all", "-o", "%i", timeout=60).split())


def sdiag_submit(slurm: slurmctl.Slurm) -> tuple[int, int]:
    """(count, total_time µs) of REQUEST_SUBMIT_BATCH_JOB since the last reset; (0, 0) when none."""
    m = _SUBMIT_RPC.search(slurm.out("sdiag"))
    return (0, 0) if m is None else (int(m[1]), int(m[3]))


def submit_block(
    slurm: slurmctl.Slurm, n: int, sdiag: bool, extra: tuple[str, ...] = ()
) -> tuple[list[float], list[float], list[str]]:
    times, rpcs, jobs = [], [], []
    for _ in range(n):
        if sdiag:
            slurm.out("sdiag", "--reset")
        t0 = time.perf_counter()
        p = subprocess.run(
            ["timeout", "30", "sbatch", *ARGS, *extra],
            env=slurm.env,
            capture_output=True,
            text=True,
            check=False,
        )
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"sbatch failed: {p.stderr}")
        if sdiag:
            count, total = sdiag_submit(slurm)
            if count != 1:
                raise SystemExit(f"sdiag counted {count} REQUEST_SUBMIT_BATCH_JOB since its reset, not 1")
            rpcs.append(float(total))
        times.append(dt * 1000)
        jobs.append(p.stdout.strip().split(";")[0])
    return times, rpcs, jobs


def check_and_cancel(slurm: slurmctl.Slurm, jobs: list[str], filtered: bool) -> None:
    out = slurm.out("squeue", "-h", "-o", "%i %f", "-j", ",".join(jobs))
    feats = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}
    for j in jobs:
        f = feats.get(j, "?")
        if filtered != f.startswith("[zone_"):
            raise SystemExit(
                f"job {j}: Features={f}, expected {'the filter decision' if filtered else '(null)'}"
            )
    slurm.cancel(*jobs)


def filter_constraint(slurm: slurmctl.Slurm) -> tuple[str, ...]:
    """The -C/--prefer arguments that give a job the constraint the filter decides for ARGS: one job
    submitted to the filter cluster, its Features and Prefer read back, cancelled."""
    job = slurm.submit(*ARGS[1:])
    info = slurm.job(job)
    slurm.cancel(job)
    features, prefer = info.get("Features", "(null)"), info.get("Prefer", "(null)")
    if not features.startswith("[zone_"):
        raise SystemExit(f"the filter did not amend job {job}: Features={features}")
    return ("-C", features) + (() if prefer in ("", "(null)") else ("--prefer", prefer))


def cluster_args(config: str, trivial: Path) -> list[str]:
    reads = trivial.with_name("reads") / "job_submit.lua"
    if not reads.exists():
        reads.parent.mkdir()
        reads.write_text(READS_LUA)
    return [str(trivial) if a == "TRIVIAL" else str(reads) if a == "READS" else a for a in EXTRA[config]]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


Phase = tuple[dict[str, Samples], list[float]]


def measure(
    args: argparse.Namespace, release: str, configs: list[str], trivial: Path
) -> tuple[dict[int, Phase], tuple[int, int]]:
    """One release: start its clusters, run the interleaved rounds at each queue depth, stop them."""
    tag = f"{release.replace('.', '')}-{os.getpid()}"
    bases = {c: Path(f"/tmp/slurm-topo-bench-{c}-{tag}") for c in configs}
    clusters: dict[str, slurmctl.Cluster] = {}
    phases: dict[int, Phase] = {}
    try:
        for c in configs:
            clusters[c] = slurmctl.start_cluster(bases[c], "--slurm", release, *cluster_args(c, trivial))
        job_args = {c: () for c in configs}
        if "same" in configs:
            job_args["same"] = filter_constraint(clusters["filter"].slurm)
        for depth in args.queued:
            for c in configs:
                fill_queue(clusters[c].slurm, depth)
            phases[depth] = rounds(args, configs, clusters, job_args)
            print(f"{release}, {depth} queued: done", flush=True)
        version = clusters[configs[0]].version
    finally:
        for b in bases.values():
            if b.exists():
                slurmctl.stop_cluster(b)
    return phases, version


def rounds(
    args: argparse.Namespace,
    configs: list[str],
    clusters: dict[str, slurmctl.Cluster],
    job_args: dict[str, tuple[str, ...]],
) -> Phase:
    """Warm-up and measured rounds: one block per cluster per round, in seeded random order."""
    rng = random.Random(args.seed)
    samples = {c: Samples() for c in configs}
    ratios: list[float] = []
    base = "trivial" if "trivial" in configs else configs[0]
    for r in range(args.warmup + args.rounds):
        order = list(configs)
        rng.shuffle(order)
        medians = {}
        for name in order:
            slurm = clusters[name].slurm
            t, rpc, jobs = submit_block(slurm, args.block, args.sdiag, job_args[name])
            records = job_records(slurm)
            check_and_cancel(slurm, jobs, name in ("filter", "same"))
            medians[name] = statistics.median(rpc if args.sdiag else t)
            if r >= args.warmup:
                samples[name].wall_ms.extend(t)
                samples[name].rpc_us.extend(rpc)
                samples[name].records.append(records)
        if r >= args.warmup and "filter" in medians:
            ratios.append(medians["filter"] / medians[base])
    return samples, ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sdiag", action="store_true", help="also slurmctld's own time per submit RPC")
    ap.add_argument("--slurm", default="native", help="releases, comma-separated: native, 24.11, 26.05")
    ap.add_argument("--configs", default="trivial,filter", help=f"from {','.join(CONFIGS)}")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown result here")
    ap.add_argument(
        "--queued",
        type=lambda v: sorted({int(x) for x in v.split(",") if x}),
        default=[0],
        help="queue depths to measure at, comma-separated (held jobs pending in every cluster)",
    )
    ap.add_argument(
        "--callgrind",
        type=int,
        default=0,
        metavar="N",
        help="count instructions per submit RPC over N submissions per config instead (host Slurm only)",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (the test clusters need it)")
    configs = [c for c in args.configs.split(",") if c]
    if not configs or any(c not in CONFIGS for c in configs) or len(set(configs)) != len(configs):
        raise SystemExit(f"--configs: a comma list of distinct {', '.join(CONFIGS)}")
    if "same" in configs and "filter" not in configs:
        raise SystemExit("--configs: same copies the filter's decision, so it needs filter too")
    releases = [r for r in args.slurm.split(",") if r]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        trivial = Path(tmp) / "job_submit.lua"
        trivial.write_text(TRIVIAL_LUA)
        if args.callgrind:
            report = callgrind(args, configs, trivial)
            print(report)
            if args.out:
                args.out.write_text(report)
                print(f"wrote {args.out}")
            return 0
        for release in releases:
            t0 = time.monotonic()
            phases, version = measure(args, release, configs, trivial)
            print(
                f"{release}: Slurm {version[0]}.{version[1]:02d}, {time.monotonic() - t0:.0f} s", flush=True
            )
            for depth, (samples, ratios) in phases.items():
                results.append((release, version, depth, samples, ratios))
                print(render_release(args, release, version, depth, samples, ratios, configs), flush=True)
    report = render(args, results, configs)
    if args.out:
        args.out.write_text(report)
        print(f"wrote {args.out}")
    return 0


def _row(label: str, xs: list[float], digits: int) -> str:
    return (
        f"| {label} | {len(xs)} | {statistics.mean(xs):.{digits}f} | {min(xs):.{digits}f} | "
        f"{statistics.median(xs):.{digits}f} | {pct(xs, 0.95):.{digits}f} | {pct(xs, 0.99):.{digits}f} | "
        f"{max(xs):.{digits}f} |"
    )


def render_release(
    args: argparse.Namespace,
    release: str,
    version: tuple[int, int],
    depth: int,
    samples: dict[str, Samples],
    ratios: list[float],
    configs: list[str],
) -> str:
    base = "trivial" if "trivial" in configs else configs[0]
    records = ", ".join(f"{LABELS[c]} {statistics.median(samples[c].records):.0f}" for c in configs)
    lines = [
        f"### Slurm {version[0]}.{version[1]:02d} (`--slurm {release}`), {depth} jobs queued",
        "",
        f"Job records in slurmctld while measured (median over blocks; pending, and finished ones until "
        f"MinJobAge): {records}.",
        "",
    ]
    if args.sdiag:
        lines += [
            "slurmctld's own time per REQUEST_SUBMIT_BATCH_JOB (µs, `sdiag` total_time after a reset):",
            "",
            "| config | RPCs | mean µs | min µs | median µs | p95 µs | p99 µs | max µs |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *(_row(LABELS[c], samples[c].rpc_us, 0) for c in configs),
            "",
        ]
    lines += [
        "Wall time of the sbatch process (ms; client included):",
        "",
        "| config | n | mean ms | min ms | median ms | p95 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *(_row(LABELS[c], samples[c].wall_ms, 2) for c in configs),
        "",
    ]
    if "filter" in configs and base != "filter":
        f, b = samples["filter"], samples[base]
        what = "server-side" if args.sdiag else "wall"
        fx, bx = (f.rpc_us, b.rpc_us) if args.sdiag else (f.wall_ms, b.wall_ms)
        rs = sorted(ratios)
        lines.append(
            f"Ratio filter/{base} ({what}): mean **{statistics.mean(fx) / statistics.mean(bx):.3f}**, "
            f"median **{statistics.median(fx) / statistics.median(bx):.3f}**, "
            f"p95 {pct(fx, 0.95) / pct(bx, 0.95):.3f}; "
            f"per-round ratio of block medians: median {statistics.median(ratios):.3f}, IQR "
            f"{pct(rs, 0.25):.3f}–{pct(rs, 0.75):.3f}. Wall-time ratio of means: "
            f"{statistics.mean(f.wall_ms) / statistics.mean(b.wall_ms):.3f}."
        )
        lines.append("")
    if "filter" in configs and "same" in configs:
        f, b = samples["filter"], samples["same"]
        fx, bx = (f.rpc_us, b.rpc_us) if args.sdiag else (f.wall_ms, b.wall_ms)
        lines.append(
            "Ratio filter/same (the filter's own cost): mean "
            f"**{statistics.mean(fx) / statistics.mean(bx):.3f}**, "
            f"median **{statistics.median(fx) / statistics.median(bx):.3f}**, "
            f"p95 {pct(fx, 0.95) / pct(bx, 0.95):.3f}, min {min(fx) / min(bx):.3f}."
        )
        lines.append("")
    return "\n".join(lines)


def render(
    args: argparse.Namespace,
    results: list[tuple[str, tuple[int, int], int, dict[str, Samples], list[float]]],
    configs: list[str],
) -> str:
    cmd = (
        f"python benchmarks/bench_submit.py --rounds {args.rounds} --block {args.block} --seed {args.seed}"
        f"{' --sdiag' if args.sdiag else ''} --slurm {args.slurm} --configs {args.configs}"
        f" --queued {','.join(map(str, args.queued))}"
        f"{' --out ' + str(args.out) if args.out else ''}"
    )
    base = "trivial" if "trivial" in configs else configs[0]
    lines = [
        "# sbatch submit cost of the locality filter (real Slurm daemons, per release)",
        "",
        f"Command: `{cmd}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; run "
        f"{time.strftime('%Y-%m-%d %H:%M')}  ",
        "Method: 12-node test clusters side by side (docker-slurm/cluster, fleet.yaml), all with the "
        "locality SPANK plugin: "
        + ", ".join(f"`{c}` = {LABELS[c]}" for c in configs)
        + " (the trivial filter's hooks only return slurm.SUCCESS; the slurm-topo filter is "
        f"job_submit.lua + slurm_topo_filter/ + generated data). {args.warmup} untimed rounds, then "
        f"{args.rounds} rounds of one block of {args.block} submissions per cluster in seeded random "
        "order; every submission "
        "`timeout 30 sbatch --parsable --hold -N1 --locality=zone -J bs -o /dev/null --wrap=true`"
        + (
            "; server-side time: `sdiag --reset` before each submission and the REQUEST_SUBMIT_BATCH_JOB "
            "total_time of `sdiag` after it (one RPC, slurmctld's own timer)"
            if args.sdiag
            else ""
        )
        + ". Each block's jobs were checked (Features=[zone_…] with the filter, (null) without) and "
        "cancelled.",
        "",
    ]
    if "filter" in configs and base != "filter":
        what = "server-side µs per RPC" if args.sdiag else "wall ms"
        lines += [
            f"## Summary: filter against {LABELS[base]} ({what}; goal ≤ ×1.02)",
            "",
            "| Slurm | jobs queued | job records | n | filter mean | base mean | ratio of means "
            "| ratio of mins | ratio of medians | ratio of p95 | per-round median ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for release, version, depth, samples, ratios in results:
            f, b = samples["filter"], samples[base]
            fx, bx = (f.rpc_us, b.rpc_us) if args.sdiag else (f.wall_ms, b.wall_ms)
            lines.append(
                f"| {version[0]}.{version[1]:02d} ({release}) | {depth} | "
                f"{statistics.median(f.records):.0f} | {len(fx)} | {statistics.mean(fx):.1f} | "
                f"{statistics.mean(bx):.1f} | {statistics.mean(fx) / statistics.mean(bx):.3f} | "
                f"{min(fx) / min(bx):.3f} | "
                f"{statistics.median(fx) / statistics.median(bx):.3f} | "
                f"{pct(fx, 0.95) / pct(bx, 0.95):.3f} | "
                f"{statistics.median(ratios):.3f} |"
            )
        lines.append("")
    lines.append("## Per release")
    lines.append("")
    for release, version, depth, samples, ratios in results:
        lines.append(render_release(args, release, version, depth, samples, ratios, configs))
    return "\n".join(lines)


_IR_LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(?:\*\s+)?(\S.*)$")
WATCHED = ("job_submit_plugin_submit", "build_feature_list", "log_var")


def _wait_gone(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def callgrind_config(
    cluster: slurmctl.Cluster, n: int, extra: tuple[str, ...], out: Path
) -> dict[str, float]:
    """Instructions per submit RPC of one cluster's slurmctld under callgrind (see the module docstring)."""
    slurm = cluster.slurm
    wrap = (
        f"valgrind --tool=callgrind --callgrind-out-file={out} --toggle-collect=slurmctld_req --dump-instr=no"
    )
    p = slurmctl.launcher("restart-ctld", "--base", str(cluster.base), "--timeout", "300", "--wrap", wrap)
    if p.returncode != 0:
        raise SystemExit(f"restart-ctld under valgrind failed:\n{p.stderr}")
    pid = int(p.stdout.split()[-1])
    try:
        jobs = [slurm.submit(*ARGS[1:], *extra, timeout=120) for _ in range(3)]
        subprocess.run(
            ["callgrind_control", "--zero", str(pid)], capture_output=True, check=True, timeout=120
        )
        jobs += [slurm.submit(*ARGS[1:], *extra, timeout=120) for _ in range(n)]
        subprocess.run(
            ["callgrind_control", "--dump=measured", str(pid)], capture_output=True, check=True, timeout=120
        )
        dump = Path(f"{out}.1")
        end = time.monotonic() + 60
        while not dump.exists() and time.monotonic() < end:
            time.sleep(0.5)
        slurm.cancel(*jobs)
    finally:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, 60):
            os.kill(pid, signal.SIGKILL)
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = {"total": 0.0, **{w: 0.0 for w in WATCHED}}
    for line in text.splitlines():
        m = _IR_LINE.match(line)
        if not m:
            continue
        ir, what = int(m[1].replace(",", "")), m[2]
        if what.startswith("PROGRAM TOTALS"):
            counts["total"] = ir / n
        for w in WATCHED:
            if re.search(rf"[?:]{w} \[", what) and counts[w] == 0.0:
                counts[w] = ir / n
    return counts


def callgrind(args: argparse.Namespace, configs: list[str], trivial: Path) -> str:
    if args.slurm != "native":
        raise SystemExit("--callgrind runs the host's slurmctld only (--slurm native)")
    order = sorted(configs, key=lambda c: c != "filter")  # the filter's decision first (same copies it)
    tag = f"cg-{os.getpid()}"
    results: dict[tuple[str, int], dict[str, float]] = {}
    version = (0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        same_args: tuple[str, ...] = ()
        for c in order:
            for depth in args.queued:  # a fresh cluster per depth: valgrind's slurmctld is stopped after
                base = Path(f"/tmp/slurm-topo-bench-{c}-{depth}-{tag}")
                try:
                    cluster = slurmctl.start_cluster(base, *cluster_args(c, trivial))
                    version = cluster.version
                    if c == "filter" and "same" in configs and not same_args:
                        same_args = filter_constraint(cluster.slurm)
                    extra = same_args if c == "same" else ()
                    fill_queue(cluster.slurm, depth)
                    records = job_records(cluster.slurm)
                    got = callgrind_config(cluster, args.callgrind, extra, Path(tmp) / f"{c}-{depth}.cg")
                    results[c, depth] = {**got, "records": float(records)}
                    print(f"{c}, {depth} queued: {results[c, depth]}", flush=True)
                finally:
                    if base.exists():
                        slurmctl.stop_cluster(base)
    return callgrind_report(args, configs, results, version)


def callgrind_report(
    args: argparse.Namespace,
    configs: list[str],
    results: dict[tuple[str, int], dict[str, float]],
    version: tuple[int, int],
) -> str:
    cmd = "python benchmarks/bench_submit.py " + " ".join(sys.argv[1:])
    lines = [
        f"## Instructions per submit RPC (callgrind, Slurm {version[0]}.{version[1]:02d})",
        "",
        f"Command: `{cmd}`  ",
        f"Method: each config's slurmctld restarted under `valgrind --tool=callgrind "
        f"--toggle-collect=slurmctld_req` (every RPC handler, nothing else), 3 untimed submissions, "
        f"`callgrind_control --zero`, {args.callgrind} submissions of "
        "`sbatch --hold -N1 --locality=zone -J bs -o /dev/null --wrap=true`, `callgrind_control --dump`; "
        "inclusive instructions (Ir) divided by the submissions. Under valgrind every submission comes in a "
        "later second than the job change before it, so every one pays job_submit/lua's `slurm.jobs` "
        "rebuild (at full speed, the first submission after a change in a new second does). Job records: "
        "what slurmctld held before the measured submissions (`squeue -t all`).",
        "",
        "| config | jobs queued | job records | per submit RPC | job_submit plugin | Slurm's feature parsing "
        "(build_feature_list) | log writes (log_var) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in configs:
        for depth in args.queued:
            r = results[c, depth]
            lines.append(
                f"| {LABELS[c]} | {depth} | {r['records']:.0f} | {r['total']:,.0f} | "
                f"{r['job_submit_plugin_submit']:,.0f} | {r['build_feature_list']:,.0f} | "
                f"{r['log_var']:,.0f} |"
            )
    lines.append("")
    pairs = [
        (a, b)
        for a, b in (("filter", "trivial"), ("filter", "same"), ("same", "trivial"), ("reads", "trivial"))
        if a in configs and b in configs
    ]
    for depth in args.queued:
        for a, b in pairs:
            ra, rb = results[a, depth]["total"], results[b, depth]["total"]
            lines.append(
                f"* {depth} queued, {a} / {b}: ×{ra / rb:.3f} (+{ra - rb:,.0f} instructions per submit RPC)"
            )
    low, high = args.queued[0], args.queued[-1]
    if high > low:
        for c in configs:
            a, b = results[c, low], results[c, high]
            per = (b["job_submit_plugin_submit"] - a["job_submit_plugin_submit"]) / max(
                1.0, b["records"] - a["records"]
            )
            lines.append(f"* {LABELS[c]}: {per:,.0f} job_submit plugin instructions per job record more")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
