#!/usr/bin/env python3
"""What Slurm actually does with our gres.conf: which GPUs a real slurmctld picks on an 8-GPU, 2-island node.

One test cluster (docker-slurm/cluster, real Slurm daemons, fake GPU devices; ``--slurm native|24.11|26.05``)
with one 8-GPU node per configuration variant, all built from the same capture
(tests/fixtures/synthetic/islands-2x4-nv18.txt: NVLink islands 0-3 / 4-7, one per 8-core socket). Node gN
runs the N-th of ``--variants`` (``--list-variants`` prints them): `ours` is the gres.conf `slurm-topo
generate` writes, the others edit it and/or give the jobs extra sbatch flags:

    ours            Links= (NVLink counts) and Cores= (the island's socket, from the CPU affinity)
    links0          Links all 0 (what AutoDetect=nvml reports on NVSwitch boxes), Cores= kept
    nolinks         no Links, Cores= kept
    bare            neither Links nor Cores (a hand-written gres.conf)
    links-nocores   Links kept, no Cores
    invlinks-nocores  Links inverted (0 inside an island, 18 across), no Cores
    overlap         Links kept, Cores= every core of the node on every GPU (both sockets)
    reversed        ours with the GPU lines in reverse order (IDX 0 is /dev/nvidia7)
    bind            ours, jobs with --gres-flags=enforce-binding
    block           ours, jobs with -m block:block (best-fit socket in the task layout)
    cpg2            ours, jobs with --cpus-per-gpu=2 (cores used in proportion to GPUs)
    gpubind         ours, jobs with --gpu-bind=closest (sbatch has no --cpu-bind: that is srun's)
    gpus-ours       ours, jobs ask --gpus=k (GPUs per job) instead of --gres=gpu:k (per node)
    gpus-links-nocores  Links, no Cores, jobs --gpus=k
    gpus-bare       neither Links nor Cores, jobs --gpus=k

The same seeded job mix runs on every node in parallel (`sbatch -w gN --gres=gpu:k`, or `--gpus=k`, k = 1/2/4
with weights .5/.3/.2, 1 task, not exclusive). Time is virtual: a job is ended with scancel when its seeded
duration is over, and a job that does not fit waits until enough jobs have ended, so the busy set at each pick
is known exactly. The GPUs Slurm gave come from `scontrol show job -d` (IDX), mapped to device files through
the node's gres.conf line order. Reported per node: multi-GPU jobs inside one island (and among those where an
island had room), 1-GPU jobs that broke an entirely free island, and the *avoidable* breaks — a 1-GPU job that
broke an entirely free island although a partly used island had a free GPU — over the 1-GPU jobs that had that
choice and over all 1-GPU jobs. The goal column: multi-GPU inside one island 100 % of the times an island had
room, and avoidable breaks <= 2 % of the 1-GPU jobs. The last row is not Slurm: it is
`slurm_topo.gpu.pick_devices` computed (simulated) on the busy sets Slurm produced on g1 — the rule
gpulayer-srun applies inside an allocation. Per-job rows go to ``--rows`` (JSON lines) so the table can be
recomputed without a cluster: ``--from-rows FILE``.

    python benchmarks/bench_gres_picks.py [--slurm native|24.11|26.05] [--variants ours,bare,...]
        [--jobs 200] [--seed 7] [--out FILE.md] [--rows FILE.jsonl]
    python benchmarks/bench_gres_picks.py --from-rows ROWS.jsonl [--out FILE.md]     # no cluster
    python benchmarks/bench_gres_picks.py --combine ROWS.jsonl... --out FILE.md      # versions side by side
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from slurm_topo.gpu import islands, parse_topo_matrix, pick_devices  # noqa: E402

CAPTURE = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
HW = "{CPUs: 16, Boards: 1, SocketsPerBoard: 2, CoresPerSocket: 8, ThreadsPerCore: 1, RealMemory: 64000}"
LAUNCHER = REPO / "docker-slurm" / "cluster"


def _sub(pattern: str, repl: str | Callable[[re.Match[str]], str]) -> Callable[[str], str]:
    return lambda line: re.sub(pattern, repl, line)


def _links_all0(line: str) -> str:
    return re.sub(
        r"Links=([-0-9,]+)",
        lambda m: "Links=" + ",".join("-1" if x == "-1" else "0" for x in m[1].split(",")),
        line,
    )


def _links_inverted(line: str) -> str:
    line = re.sub(r" Cores=\S+", "", line)
    return re.sub(
        r"Links=([-0-9,]+)",
        lambda m: "Links=" + ",".join({"-1": "-1", "0": "18"}.get(x, "0") for x in m[1].split(",")),
        line,
    )


def _keep(line: str) -> str:
    return line


@dataclass(frozen=True)
class Variant:
    label: str
    edit: Callable[[str], str] = _keep
    sbatch: tuple[str, ...] = ()
    reverse: bool = False
    #: request the GPUs per job (``--gpus=k``: Slurm's _set_job_bits1) instead of per node (``--gres=gpu:k``)
    per_job: bool = False


VARIANTS: dict[str, Variant] = {
    "ours": Variant("ours: Links + Cores"),
    "links0": Variant("Links all 0, Cores", _links_all0),
    "nolinks": Variant("no Links, Cores", _sub(r" Links=\S+", "")),
    "bare": Variant("no Links, no Cores", _sub(r" (Links|Cores)=\S+", "")),
    "links-nocores": Variant("Links, no Cores", _sub(r" Cores=\S+", "")),
    "invlinks-nocores": Variant("Links inverted (0 in island, 18 across), no Cores", _links_inverted),
    "overlap": Variant("Links, Cores=0-15 on every GPU", _sub(r" Cores=\S+", " Cores=0-15")),
    "reversed": Variant("ours, GPU lines in reverse order", reverse=True),
    "bind": Variant("ours + `--gres-flags=enforce-binding`", sbatch=("--gres-flags=enforce-binding",)),
    "block": Variant("ours + `-m block:block`", sbatch=("-m", "block:block")),
    "cpg2": Variant("ours + `--cpus-per-gpu=2`", sbatch=("--cpus-per-gpu=2",)),
    "gpubind": Variant("ours + `--gpu-bind=closest`", sbatch=("--gpu-bind=closest",)),
    "gpus-ours": Variant("ours, jobs `--gpus=k`", per_job=True),
    "gpus-links-nocores": Variant("Links, no Cores, jobs `--gpus=k`", _sub(r" Cores=\S+", ""), per_job=True),
    "gpus-bare": Variant(
        "no Links, no Cores, jobs `--gpus=k`", _sub(r" (Links|Cores)=\S+", ""), per_job=True
    ),
}
DEFAULT_VARIANTS = ("ours", "links0", "nolinks", "bare")
#: the rows of the 22.05 run before --variants existed: node -> variant
LEGACY_NODES = {"g1": "ours", "g2": "links0", "g3": "nolinks", "g4": "bare"}


def sh(argv: list[str], env: dict[str, str], timeout: float = 30) -> str:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=True).stdout


def sh_all(argvs: list[list[str]], env: dict[str, str], timeout: float = 30) -> list[str]:
    """Run the commands concurrently (each under ``timeout``); their stdouts, in order."""
    procs = [
        subprocess.Popen(
            ["timeout", str(int(timeout)), *a],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for a in argvs
    ]
    out = []
    for a, p in zip(argvs, procs, strict=True):
        o, e = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{a} exited {p.returncode}: {e.strip() or o.strip()}")
        out.append(o)
    return out


def node_gres_lines(gres: list[str], node: str, v: Variant) -> list[str]:
    """The generated per-node GPU lines, renamed to ``node`` and edited into variant ``v``."""
    lines = []
    for line in gres:
        if line.startswith("NodeName=") and " Name=gpu" in line:
            _, rest = line.split(" ", 1)
            lines.append(v.edit(f"NodeName={node} {rest}"))
    return lines[::-1] if v.reverse else lines


def start_cluster(base: Path, names: list[str], slurm: str) -> tuple[dict[str, str], dict[str, list[int]]]:
    """Start the cluster, one node per variant; its client environment and, per node, the device minor of
    each GPU index (gres.conf line order)."""
    work = base.parent
    nodes = [f"g{i + 1}" for i in range(len(names))]
    fleet = work / "fleet.yaml"
    fleet.write_text(
        "nodes:\n"
        + "".join(
            f"  - {{name: {n}, region: r1, zone: r1-a, network_group: rack-1, gpu_type: h100, "
            f"gpu_topology: '{CAPTURE}', slurm: {HW}}}\n"
            for n in nodes
        )
    )
    launcher = [sys.executable, str(LAUNCHER)]
    up = [*launcher, "up", "--base", str(base), "--slurm", slurm]
    p = subprocess.run([*up, "--inventory", str(fleet)], timeout=300, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"cluster up: {p.stderr.strip()[-2000:]}")
    subprocess.run(
        [*launcher, "down", "--base", str(base), "--keep"], check=False, timeout=60, capture_output=True
    )
    files = work / "files"
    shutil.rmtree(files, ignore_errors=True)
    shutil.copytree(base / "etc" / "generated", files)
    gres = (files / "gres.conf").read_text().splitlines()
    first = next(i for i, line in enumerate(gres) if line.startswith("NodeName=") and " Name=gpu" in line)
    head = [line for line in gres[:first] if not line.startswith("NodeName=")]
    rest = [line for line in gres[first:] if not (line.startswith("NodeName=") and " Name=gpu" in line)]
    body: list[str] = []
    minors: dict[str, list[int]] = {}
    for node, name in zip(nodes, names, strict=True):
        lines = node_gres_lines(gres, node, VARIANTS[name])
        body += lines
        minors[node] = [int(re.search(r"File=\S*?(\d+)(?:\s|$)", line)[1]) for line in lines]  # type: ignore[index]
    (files / "gres.conf").write_text("\n".join([*head, *body, *rest]) + "\n")
    p = subprocess.run([*up, "--files", str(files)], timeout=300, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"cluster up --files: {p.stderr.strip()[-2000:]}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k.startswith("SLURM_TOPO_")}
    env["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    clients = json.loads((base / "cluster.json").read_text()).get("client_path")
    if clients:
        env["PATH"] = f"{clients}:{env.get('PATH', '/usr/bin:/bin')}"
    return env, minors


def job_mix(n: int, seed: int) -> list[tuple[float, int, float]]:
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for _ in range(n):
        t += rng.expovariate(1 / 1.6)
        jobs.append((t, rng.choices((1, 2, 4), (0.5, 0.3, 0.2))[0], rng.uniform(1, 10)))
    return jobs


def parse_idx(text: str) -> tuple[int, ...] | None:
    if "JobState=RUNNING" not in text:
        return None
    m = re.search(r"GRES=gpu(?::\w+)?:\d+\(IDX:([-0-9,]+)\)", text)
    if not m:
        return None
    out: list[int] = []
    for part in m[1].split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def gres_used(text: str) -> dict[str, int]:
    """``scontrol show node -d`` of every node: node -> GPUs in use."""
    out = {}
    for block in re.split(r"\n(?=NodeName=)", text):
        m, u = re.match(r"NodeName=(\S+)", block), re.search(r"GresUsed=gpu:\w+:(\d+)", block)
        if m and u:
            out[m[1]] = int(u[1])
    return out


def gpu_request(v: Variant, k: int) -> str:
    return f"--gpus={k}" if v.per_job else f"--gres=gpu:{k}"


Running = dict[str, list[tuple[float, str, tuple[int, ...]]]]


def _end_due(running: Running, arrival: float, k: int) -> tuple[list[str], dict[str, float]]:
    """Per node, end every job that is over at ``arrival``, then (virtual wait) the earliest ones until k GPUs
    are free: the job ids to cancel and each node's start time for the next job."""
    ending: list[str] = []
    nows: dict[str, float] = {}
    for node, active in running.items():
        now = arrival
        active.sort()
        while active and (active[0][0] <= now or 8 - sum(len(g) for _, _, g in active) < k):
            end, jid, _ = active.pop(0)
            now = max(now, end)
            ending.append(jid)
        nows[node] = now
    return ending, nows


def _wait_freed(env: dict[str, str], busy: dict[str, set[int]]) -> None:
    """Every node must show the freed GPUs (GresUsed) before the next submission."""
    deadline = time.time() + 30
    while True:
        used = gres_used(sh(["scontrol", "show", "node", "-d"], env))
        if all(used.get(n) == len(busy[n]) for n in busy):
            return
        if time.time() > deadline:
            raise RuntimeError(f"GresUsed {used} does not match {busy}")
        time.sleep(0.05)


def _submit(
    env: dict[str, str], nodes: dict[str, str], k: int, minors: dict[str, list[int]]
) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """One k-GPU job per node (its variant's options); wait until each has started and read the device
    minors Slurm gave it (IDX -> minor, line order): job ids and GPUs per node."""
    argvs = [
        ["sbatch", "--parsable", "-w", node, gpu_request(VARIANTS[name], k), "-n1", *VARIANTS[name].sbatch]
        + ["-o", "/dev/null", "--wrap", "sleep 1000"]
        for node, name in nodes.items()
    ]
    jids = dict(zip(nodes, (o.strip().split(";")[0] for o in sh_all(argvs, env)), strict=True))
    got: dict[str, tuple[int, ...]] = {}
    deadline = time.time() + 30
    while len(got) < len(nodes):
        todo = [n for n in nodes if n not in got]
        for node, text in zip(
            todo, sh_all([["scontrol", "show", "job", "-d", jids[n]] for n in todo], env), strict=True
        ):
            idx = parse_idx(text)
            if idx is not None:
                got[node] = tuple(minors[node][i] for i in idx)
        if len(got) < len(nodes):
            if time.time() > deadline:
                raise RuntimeError(f"jobs {jids} did not all start: {sorted(got)}")
            time.sleep(0.05)
    return jids, got


def _row(
    k: int, gpus: tuple[int, ...], b: set[int], ours: list[int], isl: list[set[int]]
) -> dict[str, object]:
    """One job's row: where Slurm put it (``gpus``) and where pick_devices would have (``ours``), against
    the islands and the GPUs busy before it (``b``)."""
    whole_free = [i for i in isl if not (i & b)]
    partly = [i for i in isl if (i & b) and (i - b)]
    choice = k == 1 and bool(whole_free) and bool(partly)
    return {
        "k": k,
        "busy": sorted(b),
        "got": gpus,
        "ours": ours,
        "in_island": any(set(gpus) <= i for i in isl),
        "island_had_room": any(len(i - b) >= k for i in isl),
        "ours_in_island": any(set(ours) <= i for i in isl),
        "broke_free": k == 1 and any(set(gpus) <= i for i in whole_free),
        "had_choice": choice,
        "avoidable": choice and any(set(gpus) <= i for i in whole_free),
        "ours_broke_free": k == 1 and any(set(ours) <= i for i in whole_free),
        "ours_avoidable": choice and any(set(ours) <= i for i in whole_free),
    }


def run(
    env: dict[str, str],
    jobs: list[tuple[float, int, float]],
    nodes: dict[str, str],
    minors: dict[str, list[int]],
    save: Callable[[str, dict[str, object]], None],
) -> dict[str, list[dict[str, object]]]:
    """Run the job mix; every row is also passed to ``save`` as soon as it is known (a run cut short keeps
    the rows of its first jobs: a prefix of the same seeded mix)."""
    topo = parse_topo_matrix(CAPTURE.read_text(), source=str(CAPTURE))
    isl = [set(i) for i in islands(topo)]
    running: Running = {n: [] for n in nodes}
    rows: dict[str, list[dict[str, object]]] = {n: [] for n in nodes}
    for arrival, k, duration in jobs:
        ending, nows = _end_due(running, arrival, k)
        if ending:
            sh(["timeout", "30", "scancel", *ending], env)
        busy = {n: {g for _, _, gpus in running[n] for g in gpus} for n in nodes}
        _wait_freed(env, busy)
        jids, got = _submit(env, nodes, k, minors)
        for node in nodes:
            gpus, b = got[node], busy[node]
            running[node].append((nows[node] + duration, jids[node], gpus))
            ours = pick_devices(topo, [g for g in range(8) if g not in b], k)
            rows[node].append(_row(k, gpus, b, ours, isl))
            save(node, rows[node][-1])
    return rows


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}% ({a}/{b})" if b else "–"


def summarize(rows: list[dict[str, object]], prefix: str = "") -> tuple[list[str], bool]:
    """The table cells — multi-GPU jobs in one island (all, and those where an island had room), 1-GPU jobs
    that broke a free island, avoidable breaks over the 1-GPU jobs that had a choice and over all 1-GPU jobs
    — and whether the goal is met (100 % in one island when possible, avoidable <= 2 % of 1-GPU jobs)."""
    multi = [r for r in rows if r["k"] != 1]
    room = [r for r in multi if r["island_had_room"]]
    singles = [r for r in rows if r["k"] == 1]
    chose = [r for r in singles if r["had_choice"]]
    in_room = sum(bool(r[prefix + "in_island"]) for r in room)
    avoid = sum(bool(r[prefix + "avoidable"]) for r in chose)
    goal = in_room == len(room) and 100 * avoid <= 2 * len(singles)
    return [
        pct(sum(bool(r[prefix + "in_island"]) for r in multi), len(multi)),
        pct(in_room, len(room)),
        pct(sum(bool(r[prefix + "broke_free"]) for r in singles), len(singles)),
        pct(avoid, len(chose)),
        pct(avoid, len(singles)),
    ], goal


def load_rows(path: Path) -> tuple[str, dict[str, str], dict[str, list[dict[str, object]]]]:
    """Saved rows: the Slurm version, node -> variant, node -> rows (trimmed to the jobs every node got)."""
    saved = [json.loads(line) for line in path.read_text().splitlines() if line]
    version = str(saved[0]["version"])
    for r in saved:
        r.setdefault("variant", LEGACY_NODES.get(str(r["node"]), ""))
    order = list(dict.fromkeys(str(r["node"]) for r in saved))
    nodes = {n: next(str(r["variant"]) for r in saved if r["node"] == n) for n in order}
    rows = {n: [r for r in saved if r["node"] == n] for n in nodes}
    done = min(len(r) for r in rows.values())  # a run cut short: the jobs every node got
    return version, nodes, {n: r[:done] for n, r in rows.items()}


def shortfall(rows: list[dict[str, object]]) -> float:
    """How far a node is from the goal, in percentage points: what is missing to 100 % inside one island
    (when an island had room) plus what the avoidable breaks exceed 2 % of the 1-GPU jobs by."""
    room = [r for r in rows if r["k"] != 1 and r["island_had_room"]]
    singles = [r for r in rows if r["k"] == 1]
    miss = 100 - 100 * sum(bool(r["in_island"]) for r in room) / max(len(room), 1)
    over = 100 * sum(bool(r["avoidable"]) for r in singles) / max(len(singles), 1) - 2
    return miss + max(over, 0.0)


def write_combined(files: list[Path], out: Path, t0: float) -> None:
    """One table over several runs (one column group per Slurm version; several runs of one version are
    merged, the first run of a variant counts): per variant, multi-GPU jobs inside one island
    when an island had room, avoidable breaks over all 1-GPU jobs, and the goal; then the best per version."""
    by_version: dict[str, tuple[dict[str, str], dict[str, list[dict[str, object]]]]] = {}
    for i, f in enumerate(files):  # several runs of one version: their variants side by side (first wins)
        version, nodes, rows = load_rows(f)
        seen, all_rows = by_version.setdefault(version.removeprefix("slurm-wlm "), ({}, {}))
        for node, name in nodes.items():
            if name not in seen.values():
                seen[f"{i}:{node}"] = name
                all_rows[f"{i}:{node}"] = rows[node]
    runs = [(v, n, r) for v, (n, r) in by_version.items()]
    variants = list(dict.fromkeys(v for _, nodes, _ in runs for v in nodes.values()))
    cmd = "python benchmarks/bench_gres_picks.py " + " ".join(sys.argv[1:])
    lines = [
        "| variant | gres.conf / job flags | "
        + " | ".join(f"{v}: in one island (room) | {v}: avoidable / 1-GPU | {v}: goal" for v, _, _ in runs)
        + " |",
        "|---|---|" + "---:|---:|---|" * len(runs),
    ]
    best: list[str] = []
    for name in variants:
        cells = []
        for _, nodes, rows in runs:
            hit = next((n for n, v in nodes.items() if v == name), None)
            if hit is None:
                cells += ["–", "–", "–"]
                continue
            c, goal = summarize(rows[hit])
            cells += [c[1], c[4], "met" if goal else "no"]
        label = VARIANTS[name].label if name in VARIANTS else name
        lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    for version, nodes, rows in runs:
        score = {v: shortfall(rows[n]) for n, v in nodes.items()}
        top = min(score.values())
        names = [v for v, x in score.items() if x == top]
        met = [v for v, n in ((v, n) for n, v in nodes.items()) if summarize(rows[n])[1]]
        best.append(
            f"* {version} ({len(next(iter(rows.values())))} jobs per node): closest to the goal "
            f"{', '.join(names)} (shortfall {top:.0f} points); goal met by "
            f"{', '.join(met) if met else 'no variant'}."
        )
    text = [
        f"Command: `{cmd.strip()}` ({time.time() - t0:.1f} s, from the saved rows)",
        "",
        *lines,
        "",
        "Shortfall = (100 − % of multi-GPU jobs inside one island when an island had room) + (% of 1-GPU "
        "jobs that broke a free island although a partly used one had a free GPU − 2, if positive).",
        "",
        *best,
    ]
    out.write_text("\n".join(text) + "\n")
    print("\n".join(text))


def _measure(
    args: argparse.Namespace, names: list[str]
) -> tuple[str, dict[str, str], dict[str, list[dict[str, object]]]]:
    """Start the cluster (one node per variant), run the job mix saving every row to --rows, tear the
    cluster down: the Slurm version, node -> variant, node -> rows."""
    nodes = {f"g{i + 1}": name for i, name in enumerate(names)}
    base = Path(args.base)
    base.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(base.parent, 0o755)
    # SIGTERM tears the cluster down too (a background job started by a shell ignores SIGINT)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with open(args.rows, "w") as fh:
        version = "?"

        def save(node: str, row: dict[str, object]) -> None:
            record = {"node": node, "variant": nodes[node], "version": version, **row}
            fh.write(json.dumps(record, default=list) + "\n")
            fh.flush()

        try:
            env, minors = start_cluster(base, names, args.slurm)
            version = sh(["scontrol", "--version"], env).strip()
            rows = run(env, job_mix(args.jobs, args.seed), nodes, minors, save)
        finally:
            try:
                subprocess.run(
                    [sys.executable, str(LAUNCHER), "down", "--base", str(base)],
                    check=False,
                    timeout=300,
                    capture_output=True,
                )
            except subprocess.TimeoutExpired:
                print(f"warning: cluster down --base {base} timed out: run it again", file=sys.stderr)
            else:  # the inventory and edited files this script wrote beside the cluster
                (base.parent / "fleet.yaml").unlink(missing_ok=True)
                shutil.rmtree(base.parent / "files", ignore_errors=True)
                with contextlib.suppress(OSError):
                    base.parent.rmdir()
    return version, nodes, rows


def _write_table(
    args: argparse.Namespace,
    version: str,
    nodes: dict[str, str],
    rows: dict[str, list[dict[str, object]]],
    t0: float,
) -> None:
    """The Markdown table (--out, and stdout): per node Slurm's picks, then pick_devices' on the same
    busy sets."""
    cmd = "python benchmarks/bench_gres_picks.py " + " ".join(sys.argv[1:])
    n_jobs = len(next(iter(rows.values())))
    lines = [
        f"# Which GPUs Slurm picks with our gres.conf ({version}, real slurmctld, fake devices)",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; {version}; "
        f"{time.time() - t0:.0f} s  ",
        f"Method: see the script's docstring. Seed {args.seed}, {n_jobs} jobs per node "
        f"(k=1/2/4 weights .5/.3/.2, mean inter-arrival 1.6, durations U(1,10), virtual time).",
        "",
        "| node | variant | gres.conf / job flags | multi-GPU inside one island | "
        "… when an island had room | 1-GPU broke a free island | "
        "avoidable breaks / 1-GPU jobs that had the choice | avoidable breaks / "
        "all 1-GPU jobs | goal |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for node, name in nodes.items():
        cells, goal = summarize(rows[node])
        label = VARIANTS[name].label if name in VARIANTS else name
        lines.append(
            f"| {node} | {name} | {label} | " + " | ".join(cells) + f" | {'met' if goal else 'no'} |"
        )
    first = next(iter(nodes))
    cells, goal = summarize(rows[first], "ours_")
    lines.append(
        f"| – | – | *simulated, not Slurm:* `pick_devices` computed on {first}'s busy sets | "
        + " | ".join(cells)
        + f" | {'met' if goal else 'no'} |"
    )
    same = {n: sum(r["got"] == rows[first][i]["got"] for i, r in enumerate(rows[n])) for n in nodes}
    lines += [
        "",
        f"Allocations identical to {first}, job by job: "
        + ", ".join(f"{n} {same[n]}/{len(rows[n])}" for n in list(nodes)[1:])
        + ".",
    ]
    short = {n: sum(len(r["got"]) != r["k"] for r in rows[n]) for n in nodes}  # type: ignore[arg-type]
    lines.append(
        "Jobs given another number of GPUs than they asked for: "
        + (", ".join(f"{n} ({nodes[n]}) {c}" for n, c in short.items() if c) or "none")
        + "."
    )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--slurm", default="native", help="native, 24.11 or 26.05 (docker-slurm/cluster --slurm)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="comma-separated, first is g1")
    ap.add_argument("--list-variants", action="store_true")
    ap.add_argument("--base", default=f"/tmp/slurm-topo-bench-gres-{os.getpid()}/cluster")
    ap.add_argument("--out", default=str(HERE / "results" / "gres_picks.md"))
    ap.add_argument("--rows", default=str(HERE / "results" / "gres_picks_rows.jsonl"), help="per-job rows")
    ap.add_argument("--from-rows", metavar="FILE", help="recompute the table from saved rows (no cluster)")
    ap.add_argument(
        "--combine", nargs="+", metavar="ROWS", help="one table over several runs' rows (no cluster)"
    )
    args = ap.parse_args()
    if args.list_variants:
        for name, v in VARIANTS.items():
            print(f"{name:18} {v.label}")
        return
    names = [n for n in args.variants.split(",") if n]
    bad = [n for n in names if n not in VARIANTS]
    if bad or not names or len(set(names)) != len(names):
        sys.exit(
            f"bench_gres_picks: --variants {args.variants}: unknown or repeated {bad or names} "
            f"(known: {', '.join(VARIANTS)})"
        )
    t0 = time.time()
    if args.combine:
        write_combined([Path(f) for f in args.combine], Path(args.out), t0)
        return
    if args.from_rows:
        version, nodes, rows = load_rows(Path(args.from_rows))
    else:
        version, nodes, rows = _measure(args, names)
    _write_table(args, version, nodes, rows, t0)


if __name__ == "__main__":
    main()
