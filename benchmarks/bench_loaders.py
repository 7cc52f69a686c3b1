#!/usr/bin/env python3
"""The loaders at fleet scale: CPU seconds of the inventory load, of the parsers of Slurm's text, and of the
commands that start with them (show, cost, capacity, explain), on ``bench_generate.fleet_yaml(N)``.

Three parts (``--parts``):

* ``load``: ``load_inventories`` on the N-node fleet, in this process, ``--repeat`` times (the first run
  included: imports done lazily by the loader are paid once, as a command would);
* ``parse``: the readers of Slurm's text on N realistic ``scontrol -d show node -o`` lines made from the same
  fleet (the 26.05 capture ``tests/fixtures/real/slurm-26.05/scontrol-show-node-o.txt`` is the model: every
  key in its order, an ``OS=`` value with spaces and ``#``, a ``Reason=`` with spaces on drained nodes,
  ``GresUsed=`` as ``-d`` prints it), on N/10 ``scontrol show job -o`` lines, and on the topology.conf
  and gres.conf the generator writes for the fleet: ``split_pairs`` line by line, ``parse_scontrol_nodes``,
  ``node_records``, ``jobs_from_text``, ``parse_topology_conf``, ``parse_gres_gpus``;
* ``commands``: ``python -m slurm_topo show|cost|capacity|explain`` each in a fresh process, CPU from
  the children's rusage (user + system, interpreter start and imports included). ``explain`` reads Slurm
  through a stand-in ``scontrol`` on ``PATH`` (a shell script that prints the files made here: the job's
  ``show job -o`` line, its nodes' lines, the whole ``-d show node -o``), with the text backend; the shell
  script's own CPU is counted too (a ``cat``).

Every figure is CPU time (``time.process_time`` in process, ``RUSAGE_CHILDREN`` for commands): the machine is
shared, wall time is not reported. Each row gives best, median, p95 and worst of ``--repeat`` runs (with 5
runs p95 lies between the two worst, interpolated).

    python benchmarks/bench_loaders.py [--nodes 100000] [--repeat 5] [--parts load,parse,commands]
        [--label after] [--out benchmarks/results/loaders.md] [--check]

``--check``: also compare the loaded inventory with the reference loader kept in this file
(``reference_load``: ClusterShell expansion of every entry and a plain natural sort, what the loader did
before it was made faster) and stop with an error on any difference.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_generate import fleet_yaml  # noqa: E402

STATES = (  # (State=, share of the fleet): a busy cluster
    ("IDLE", 0.50),
    ("MIXED", 0.25),
    ("ALLOCATED", 0.18),
    ("IDLE+DRAIN", 0.04),
    ("MIXED+DRAIN", 0.02),
    ("DOWN*", 0.01),
)


def pick_state(rng: random.Random) -> str:
    x = rng.random()
    for state, share in STATES:
        if x < share:
            return state
        x -= share
    return STATES[0][0]


def node_line(name: str, features: str, gpus: int, state: str, rng: random.Random, port: int) -> str:
    """One ``scontrol -d show node -o`` line in 26.05's order and spacing (two blanks where scontrol prints
    them)."""
    used = 0 if state.startswith("IDLE") or state.startswith("DOWN") else gpus
    if state.startswith("MIXED"):
        used = rng.randint(1, gpus - 1) if gpus > 1 else 0
    idx = f"(IDX:0-{used - 1})" if used > 1 else ("(IDX:0)" if used == 1 else "(IDX:N/A)")
    alloc_cpu = 0 if used == 0 else 16 * used
    alloc_tres = f"cpu={alloc_cpu},mem={used * 120}G,gres/gpu={used}" if used else ""
    reason = (
        " Reason=gpu 3 xid 79: fell off the bus [root@2026-12-01T23:02:15]"
        if "DRAIN" in state or "DOWN" in state
        else ""
    )
    return (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=32  CPUAlloc={alloc_cpu} CPUEfctv=128 CPUTot=128 "
        f"CPULoad={rng.randint(0, 12800) / 100:.2f} AvailableFeatures={features} ActiveFeatures={features} "
        f"Gres=gpu:h100:{gpus} GresDrain=N/A GresUsed=gpu:h100:{used}{idx} NodeAddr={name} "
        f"NodeHostName={name} Port=6818 Version=26.05.5 OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  "
        f"RealMemory=1000000 AllocMem={used * 120000} FreeMem={rng.randint(100000, 900000)} Sockets=2 "
        f"Boards=1 State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  "
        "BootTime=2026-12-01T22:54:16 SlurmdStartTime=2026-12-01T23:02:15 LastBusyTime=2026-12-01T23:02:15 "
        "ResumeAfterTime=None SuspendTime=INFINITE "
        f"CfgTRES=cpu=128,mem=1000000M,billing=128,gres/gpu={gpus} AllocTRES={alloc_tres} CurrentWatts=0 "
        f"AveWatts=0{reason}"
    )


def job_line(job_id: int, nodelist: str, nodes: int, gpus: int, rng: random.Random) -> str:
    """One ``scontrol show job -o`` line of a running job, 26.05's keys in order (the capture's), with a name
    and a comment a user chose."""
    return (
        f"JobId={job_id} JobName=train llama {job_id} UserId=u{job_id % 97}({1000 + job_id % 97}) "
        f"GroupId=users(100) MCS_label=N/A Priority={rng.randint(1, 10**6)} Nice=0 Account=ml QOS=normal "
        "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 "
        "ExitCode=0:0 "
        "RunTime=01:02:03 TimeLimit=2-00:00:00 TimeMin=N/A SubmitTime=2026-12-01T23:02:15 "
        "EligibleTime=2026-12-01T23:02:15 AccrueTime=2026-12-01T23:02:15 StartTime=2026-12-01T23:02:17 "
        "EndTime=2026-12-03T23:02:17 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-12-01T23:02:17 Scheduler=Main Partition=gpu AllocNode:Sid=login1:1148 "
        f"ReqNodeList=(null) ExcNodeList=(null) NodeList={nodelist} BatchHost={nodelist.split('[')[0]} "
        f"NumNodes={nodes} NumCPUs={nodes * 128} NumTasks={nodes * gpus} CPUs/Task=16 ReqB:S:C:T=0:0:*:* "
        f"ReqTRES=cpu={nodes * 128},mem={nodes * 960}G,node={nodes},billing={nodes * 128},"
        f"gres/gpu={nodes * gpus} "
        f"AllocTRES=cpu={nodes * 128},node={nodes},billing={nodes * 128},gres/gpu={nodes * gpus} "
        "Socks/Node=* "
        "NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=16 MinMemoryNode=960G MinTmpDiskNode=0 "
        "Features=[ng_region0-a.rack-00000|zone_region0-a] DelayBoot=00:00:00 OverSubscribe=NO "
        "Exclusive=NO Contiguous=0 Licenses=(null) LicensesAlloc=(null) Network=(null) "
        "Command=/home/u/train.sh --steps 1000 WorkDir=/home/u "
        "AdminComment=slurm-topo: zone:wait [region0-a(40n)] "
        f"Comment=plan=tp=8,pp=2,bytes=10G run {job_id} StdErr=/home/u/slurm-%j.out StdIn=/dev/null "
        f"StdOut=/home/u/slurm-%j.out TresPerNode=gres/gpu:h100:{gpus}"
    )


def fleet_text(inventory, rng: random.Random) -> list[str]:  # type: ignore[no-untyped-def]
    """The fleet's ``scontrol -d show node -o`` lines, with the location features the generator gives."""
    from slurm_topo.core.topology import build_topology

    lines = []
    features_of = build_topology(inventory).node_features
    for i, node in enumerate(inventory.nodes):
        feats = ",".join(("ib", *features_of.get(node.name, ())))
        lines.append(node_line(node.name, feats, node.gpus or 0, pick_state(rng), rng, 6818 + i % 1000))
    return lines


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if len(ordered) > 1:
        p95 = statistics.quantiles(ordered, n=20, method="inclusive")[18]
    else:
        p95 = ordered[0]
    return {"best": ordered[0], "median": statistics.median(ordered), "p95": p95, "worst": ordered[-1]}


def cpu_runs(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        gc.collect()
        c0 = time.process_time()
        result = fn()
        out.append(time.process_time() - c0)
        del result
    return out


def row(name: str, values: list[float], note: str = "") -> str:
    s = summary(values)
    return (
        f"| {name} | {s['best']:.3f} | {s['median']:.3f} | {s['p95']:.3f} | {s['worst']:.3f} | {len(values)} "
        f"| {note} |"
    )


HEAD = ["| what | best s | median s | p95 s | worst s | runs | note |", "|---|---|---|---|---|---|---|"]


def part_load(fleet: Path, repeat: int, check: bool) -> list[str]:
    from slurm_topo import load_inventories

    runs = cpu_runs(lambda: load_inventories([fleet]), repeat)
    inv = load_inventories([fleet])
    lines = [row("load_inventories", runs, f"{len(inv.nodes)} nodes")]
    if check:
        c0 = time.process_time()
        ref = reference_load(fleet)
        ref_s = time.process_time() - c0
        if ref != inv or ref.names() != inv.names():
            raise SystemExit("check failed: load_inventories differs from reference_load")
        lines.append(f"| reference_load (the check) | {ref_s:.3f} | | | | 1 | same Inventory: yes |")
    return lines


def reference_load(fleet: Path):  # type: ignore[no-untyped-def]
    """The loader as it was: every entry expanded through ClusterShell's NodeSet, each node built by the
    dataclass constructor, the merged list sorted by ``natural_key`` (the behaviour to keep)."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    from slurm_topo.core.model import Inventory, natural_key
    from slurm_topo.inventory import entry as entry_mod
    from slurm_topo.inventory import load_inventories

    saved = entry_mod.hostlist.expand
    entry_mod.hostlist.expand = lambda e: list(NodeSet(e, resolver=RESOLVER_NOGROUP))  # type: ignore[assignment]
    try:
        inv = load_inventories([fleet])
    finally:
        entry_mod.hostlist.expand = saved  # type: ignore[assignment]
    from slurm_topo.core.model import Node

    nodes = tuple(
        sorted(
            (Node(**{f: getattr(n, f) for f in Node.__slots__}) for n in inv.nodes),  # type: ignore[attr-defined]
            key=lambda n: natural_key(n.name),
        )
    )
    return Inventory(nodes, inv.conflicts, inv.warnings, inv.extra_nodes, inv.policy, inv.nvlink, inv.links)


def part_parse(fleet: Path, tmp: Path, repeat: int) -> list[str]:
    from slurm_topo import load_inventories, render_all
    from slurm_topo.access.jobs import jobs_from_text
    from slurm_topo.access.text import node_records, parse_scontrol_nodes
    from slurm_topo.reports.capacity import STATE_KEYS
    from slurm_topo.slurmconfig.slurmconf import parse_gres_gpus, parse_topology_conf, split_pairs

    rng = random.Random(7)
    inv = load_inventories([fleet])
    lines = fleet_text(inv, rng)
    text = "\n".join(lines) + "\n"
    (tmp / "nodes-d.txt").write_text(text)
    names = inv.names()
    jobs = []
    for j in range(len(names) // 10):
        start = rng.randrange(0, len(names) - 8)
        first = names[start]
        jobs.append(job_line(1000 + j, first, 1, 8, rng))
    job_text = "\n".join(jobs) + "\n"
    rendered = render_all(inv, (22, 5))
    topo = rendered.get("topology.conf", "")
    gres = rendered.get("gres.conf", "") or gres_conf(fleet)
    out = [
        row(
            "split_pairs(output=True), each node line",
            cpu_runs(lambda: [split_pairs(x, output=True) for x in lines], repeat),
            f"{len(lines)} lines, {len(text) / 1e6:.0f} MB",
        ),
        row(
            "parse_scontrol_nodes (access.text)",
            cpu_runs(lambda: parse_scontrol_nodes(text), repeat),
            "split_pairs per line",
        ),
        row(
            "parse_scontrol_nodes(keys=STATE_KEYS)",
            cpu_runs(lambda: parse_scontrol_nodes(text, keys=STATE_KEYS), repeat),
            "node_states' 5 fields (capacity, explain)",
        ),
        row(
            "node_records (access.text)", cpu_runs(lambda: node_records(text), repeat), "split_pairs per line"
        ),
        row(
            "jobs_from_text (access.jobs)",
            cpu_runs(lambda: jobs_from_text(job_text), repeat),
            f"{len(jobs)} job lines; its own reader",
        ),
        row(
            "parse_topology_conf",
            cpu_runs(lambda: parse_topology_conf(topo), repeat),
            f"{topo.count(chr(10))} lines",
        ),
        row(
            "parse_gres_gpus",
            cpu_runs(lambda: parse_gres_gpus(gres), repeat),
            f"{gres.count(chr(10))} lines (one per rack)",
        ),
    ]
    return out


def gres_conf(fleet: Path) -> str:
    """A site's gres.conf for the fleet, one ``NodeName=`` line per rack (the generator writes none for GPUs
    it has no topology of)."""
    from slurm_topo.inventory import load_yaml

    lines = []
    for entry in load_yaml(fleet.read_text())["nodes"]:
        g = entry["gpus"]
        lines.append(
            f"NodeName={entry['name']} Name=gpu Type={entry['gpu_type']} File=/dev/nvidia[0-{g - 1}]"
        )
    return "\n".join(lines) + "\n"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fake_scontrol(tmp: Path, fleet: Path) -> tuple[dict[str, str], str]:
    """A stand-in ``scontrol`` (shell, ``cat`` of files made here) and the environment to find it."""
    from slurm_topo import load_inventories

    rng = random.Random(11)
    inv = load_inventories([fleet])
    job_nodes = [n.name for n in inv.nodes if n.gpus == 8][:16]  # one 8-GPU rack's first 16 nodes
    from slurm_topo.core.hostlist import compress

    nodelist = compress(job_nodes)
    (tmp / "job.txt").write_text(job_line(4242, nodelist, len(job_nodes), 8, rng) + "\n")
    all_lines = (tmp / "nodes-d.txt").read_text().splitlines()
    wanted = {f"NodeName={n} " for n in job_nodes}
    mine = [line for line in all_lines if line[: line.index(" ") + 1] in wanted]
    (tmp / "job-nodes.txt").write_text("\n".join(mine) + "\n")
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  "show job -o 4242") exec cat {tmp}/job.txt ;;\n'
        f'  "-d show node -o") exec cat {tmp}/nodes-d.txt ;;\n'
        f'  "show node -o "*) exec cat {tmp}/job-nodes.txt ;;\n'
        '  *) echo "scontrol stand-in: unexpected $*" >&2; exit 1 ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}", SLURM_TOPO_SLURM_BACKEND="text")
    return env, nodelist


def part_commands(fleet: Path, tmp: Path, repeat: int) -> list[str]:
    if not (tmp / "nodes-d.txt").exists():
        part_parse(fleet, tmp, 1)
    env, nodelist = fake_scontrol(tmp, fleet)
    py = [sys.executable, "-m", "slurm_topo"]
    f = str(fleet)
    commands = {
        "show": [*py, "show", "-i", f],
        "cost": [
            *py,
            "cost",
            "-i",
            f,
            "--nodes",
            nodelist,
            "--tp",
            "8",
            "--pp",
            "2",
            "--allreduce-bytes",
            "10G",
        ],
        "capacity": [
            *py,
            "capacity",
            "-i",
            f,
            "--nodes-from",
            str(tmp / "nodes-d.txt"),
            "--shape",
            "4x8",
            "--shape",
            "16x8",
        ],
        "explain": [*py, "explain", "4242", "-i", f],
        "(interpreter + import of slurm_topo.cli)": [sys.executable, "-c", "import slurm_topo.cli"],
    }
    runs: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(repeat):  # interleaved: a burst of load on the shared machine hits every command alike
        for name, argv in commands.items():
            c0 = _children_cpu()
            done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            runs[name].append(_children_cpu() - c0)
            if done.returncode != 0:
                raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-2000:]}")
    return [
        row(
            f"slurm-topo {k}" if not k.startswith("(") else k,
            v,
            " ".join(commands[k][3:])[:90].replace(str(tmp), "$TMP"),
        )
        for k, v in runs.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parts", default="load,parse,commands")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", help="append the tables to this markdown file")
    ap.add_argument("--check", action="store_true", help="compare the load with reference_load")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    report = [
        f"### {args.label or 'run'}: {args.nodes} nodes, {args.repeat} runs each",
        "",
        f"`python benchmarks/bench_loaders.py --nodes {args.nodes} --repeat {args.repeat} "
        f"--parts {args.parts}"
        f"{' --check' if args.check else ''}` — Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared); CPU seconds.",
        "",
        *HEAD,
    ]
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        fleet = tmp / "fleet.yaml"
        fleet.write_text(fleet_yaml(args.nodes))
        if "load" in parts:
            report += part_load(fleet, args.repeat, args.check)
        if "parse" in parts:
            report += part_parse(fleet, tmp, args.repeat)
        if "commands" in parts:
            report += part_commands(fleet, tmp, args.repeat)
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
