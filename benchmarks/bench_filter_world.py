#!/usr/bin/env python3
"""The submit filter's first decisions on fleets and request shapes nobody tuned on (issue 44, item 2).

A seeded generator of fleets (``draw_spec`` + ``make_fleet``: 1-100 000 nodes, 1-200 zones in 1-N regions,
operator network groups spanning several racks, up to 6 overlapping partitions given to the generator as
``scontrol show partition -o`` text, node classes of GPU types and counts 0-8 with CPU nodes inside GPU
racks, torch families, NVLink racks, regular and irregular node names) and a seeded generator of request
shapes (``make_shapes``: every field the filter reads, see ``FIELDS``). Per fleet the installed generator
writes the data file (``slurm-topo generate``, or ``--generator`` for another tree's), then
benchmarks/world_bench.lua runs the shapes through the filter's whole ``submit()`` hook, one family (a
locality level) at a time, each family on a freshly loaded data table (read, checksum, load, prepare: the
filter's own loader), as slurmctld has after a data load:

* once in plain ``lua5.1``: CPU time of every load and decision, each decision's outcome, and the internal
  errors (a decision that raised: the filter fails open);
* once under ``valgrind --tool=callgrind --dump-before=clock``: one profile per decision and per load, so the
  instructions (Ir) of every decision on its own, less the marker's cost.

The table (``--out``, appended): per fleet, the decisions over 500 000 instructions, p50, p99 and max, by
category (locality level, mode, multi-partition, nodelist, regions, GPU type, constraint, size), the data
load's CPU ms and instructions, the worst shapes spelled as options.

    python benchmarks/bench_filter_world.py                       # 3 seeds from the date/time, 100 000 nodes
    python benchmarks/bench_filter_world.py --seeds 7,8,9 --nodes any --shapes 2400
    python benchmarks/bench_filter_world.py --fleet 20250611:nodes=100000,partitions=0,rack=0 \\
        --fleet 20250612:nodes=100000,rack=50,partitions=6,families=1,nvl=0.5 --fleet 20250613:nodes=5000
    python benchmarks/bench_filter_world.py --tree /tmp/old --label "commit abc1234"   # another tree's
        # generator and filter: git archive abc1234 job_submit slurm_topo | tar -x -C /tmp/old
    python benchmarks/bench_filter_world.py --filter-dir OTHER/job_submit        # another filter only

Seeds not given are taken from the date and time of the run (printed into the result): nobody can have tuned
on them. ``--fleet SEED:key=value,...`` fixes what the seed would draw (keys: ``FleetSpec`` fields).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from slurm_topo.core import hostlist  # noqa: E402

GOAL = 500_000
"""Instructions (callgrind Ir) a decision may take: issue 44's bound."""
NO_VAL = 4294967294
NO_VAL16 = 65534
SPANK = "_SLURM_SPANK_OPTION_locality_"
MAX_NODES = 100_000

GPU_KINDS = (
    ("h100", 8), ("a100", 8), ("h200", 8), ("b200", 8), ("mi300x", 8), ("l40s", 4), ("gb200", 4), ("a10", 2),
    ("t4", 1), ("l4", 4),
)  # fmt: skip
NVL_TYPES = frozenset({"gb200", "b200", "h200"})
"""GPU types whose racks may be NVLink domains (``FleetSpec.nvl`` of them are)."""
OWN_FEATURES = ("ib", "roce", "nvme", "bigmem", "highmem", "ssd", "avx512", "genoa", "sapphire", "eth100")
TORCH = ("torch-2.1", "torch-2.3", "torch-2.4", "torch-2.5")
CUDA = ("cuda-12.1", "cuda-12.4", "cuda-12.8")
UNKNOWN_GPU_TYPES = ("tpu-v5", "h800", "rtx6000", "v100")
PARTITION_KINDS = ("all", "gpu", "cpu", "big8", "type", "region", "zones", "debug", "nvl", "odd")
RACK_SIZES = (1, 2, 4, 8, 10, 16, 18, 20, 32, 36, 40, 50, 64, 72)
LEVELS = ("prefer", "network_group", "zone", "region", "nvl", "any")
FAMILIES = ("prefer", "network_group", "zone", "region", "nvl", "other")
"""One family of shapes per locality level (``other``: any, none given, and values the filter refuses); each
runs on a freshly loaded data table."""
FIELDS = (
    "locality:spank", "locality:environment", "locality:comment", "locality:none", "mode:wait", "mode:fail",
    "mode:auto", "mode:none", "mode:bad", "level:prefer", "level:network_group", "level:zone", "level:region",
    "level:nvl", "level:any", "level:bad", "min_nodes", "num_tasks", "tres_per_job", "tres_per_node",
    "tres_per_task", "gpu:typed", "gpu:unknown-type", "gpu:untyped", "features:own", "features:location",
    "features:and", "features:or", "features:bracket", "features:complex", "features:unknown",
    "features:family", "prefer", "partition:one", "partition:several", "partition:unknown", "req_nodes",
    "nodelist:fleet", "nodelist:range", "nodelist:unknown", "exc_nodes", "reservation", "contiguous",
    "het_job_offset", "regions:spank", "regions:comment", "regions:unknown", "interactive", "time_limit",
    "plan", "admin_comment",
)  # fmt: skip
"""What ``make_shapes`` covers: the job_desc fields of job_submit/slurm_topo_filter/request.lua (and
policy/request.py) and the forms of each; ``test_bench_filter_world.py`` checks every one is drawn."""


# ---------------------------------------------------------------------------------------------------- fleets


@dataclass(frozen=True)
class FleetSpec:
    """What a fleet seed draws (each field may be fixed by ``--fleet SEED:key=value``)."""

    seed: int
    nodes: int = MAX_NODES
    regions: int = 1
    zones: int = 1
    rack: int = 0
    """Nodes per rack; 0: each rack's size drawn from RACK_SIZES (a heterogeneous fleet)."""
    ng_span: int = 1
    """Racks per operator network group."""
    kinds: int = 4
    """Node kinds (GPU type and count, own features) the racks are drawn from."""
    partitions: int = 0
    families: int = 0
    """0: none; 1: torch; 2: torch and cuda."""
    nvl: float = 0.0
    """Share of the racks of an NVLink-capable kind that are one NVLink domain each."""
    cpu_in_gpu: float = 0.0
    """Share of GPU racks whose last 1-4 nodes are CPU nodes (same place, no NVLink domain)."""
    irregular: float = 0.0
    """Share of racks named irregularly (unpadded, sparse, dotted names) instead of one global range."""
    region_only: float = 0.0
    """Share of racks with a region and no zone."""
    plan: int = 0
    """1: the policy carries a site plan (``:auto`` budgets)."""


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return min(high, max(low, int(math.exp(rng.uniform(math.log(low), math.log(high + 1))))))


def draw_spec(seed: int, nodes: int | None = None, **fixed: Any) -> FleetSpec:
    """The fleet a seed draws: ``nodes`` None draws log-uniformly 1-100 000; ``fixed`` overrides fields."""
    rng = random.Random(f"fleet:{seed}")
    n = nodes if nodes is not None else _log_uniform(rng, 1, MAX_NODES)
    zones = min(_log_uniform(rng, 1, 200), max(1, n // 2))
    spec = FleetSpec(
        seed=seed,
        nodes=n,
        regions=rng.randint(1, max(1, min(zones, 12))),
        zones=zones,
        rack=rng.choice((0, 0, 8, 10, 16, 18, 32, 40, 50, 64, 72)),
        ng_span=rng.choice((1, 1, 2, 4, 8)),
        kinds=rng.randint(2, 12),
        partitions=rng.choice((0, 0, 1, 2, 3, 4, 5, 6)),
        families=rng.choice((0, 0, 1, 2)),
        nvl=rng.choice((0.0, 0.2, 0.5, 1.0)),
        cpu_in_gpu=rng.choice((0.0, 0.05, 0.2)),
        irregular=rng.choice((0.0, 0.1, 0.5, 1.0)),
        region_only=rng.choice((0.0, 0.0, 0.02)),
        plan=rng.choice((0, 1)),
    )
    types = {f.name: f.type for f in dataclasses.fields(FleetSpec)}
    for key, value in fixed.items():
        if key not in types:
            raise SystemExit(f"--fleet: unknown key {key!r} (known: {', '.join(types)})")
        fixed[key] = float(value) if types[key] == "float" else int(value)
    return dataclasses.replace(spec, **fixed)


@dataclass
class Kind:
    gpu_type: str | None
    gpus: int
    features: tuple[str, ...]
    nvl: bool = False


@dataclass
class Rack:
    """One inventory entry's worth of nodes (a rack, or the CPU tail of a GPU rack)."""

    names: list[str]
    region: str
    zone: str | None
    ng: str
    kind: Kind
    family: tuple[str, ...] = ()
    domain: str | None = None


@dataclass
class Fleet:
    spec: FleetSpec
    racks: list[Rack]
    regions: list[str]
    zones: list[str]
    kinds: list[Kind]
    partitions: dict[str, list[str]] = field(default_factory=dict)
    default_partition: str | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    location_features: list[str] = field(default_factory=list)
    """Filled after generation (``location_features``): region_*, zone_*, ng_*, nvl_* the generator made."""

    @property
    def nodes(self) -> int:
        return sum(len(r.names) for r in self.racks)


def _kinds(rng: random.Random, spec: FleetSpec) -> list[Kind]:
    """The fleet's node kinds: at least one CPU kind and one GPU kind, GPU counts 1-8 (mostly the type's)."""
    kinds = [Kind(None, 0, tuple(rng.sample(OWN_FEATURES, rng.randint(0, 2))))]
    for i in range(1, max(2, spec.kinds)):
        if i > 1 and rng.random() < 0.15:
            kinds.append(Kind(None, 0, tuple(rng.sample(OWN_FEATURES, rng.randint(0, 3)))))
            continue
        gtype, gpus = rng.choice(GPU_KINDS)
        if rng.random() < 0.25:
            gpus = rng.randint(1, 8)
        nvl = gtype in NVL_TYPES and rng.random() < 0.7
        kinds.append(Kind(gtype, gpus, tuple(rng.sample(OWN_FEATURES, rng.randint(0, 3))), nvl))
    if spec.nvl > 0 and not any(k.nvl for k in kinds):  # NVLink racks asked for: one kind can be
        kinds[-1] = Kind("gb200", 4, kinds[-1].features, True)
    return kinds


def _places(rng: random.Random, spec: FleetSpec) -> tuple[list[str], list[tuple[str, str]]]:
    """Region labels, and the zones (label, region): some regions cloud-shaped with their zones, the rest
    an operator's names; every region has a zone."""
    regions = []
    for r in range(spec.regions):
        regions.append(f"europe-west{r + 1}" if rng.random() < 0.3 else f"site{r}")
    zones = []
    for z in range(max(spec.zones, spec.regions)):
        region = regions[z] if z < len(regions) else rng.choice(regions)
        if region.startswith("europe-west"):
            label = f"{region}-{'abcdefghijklmnopqrstuvwxyz'[z % 26]}{'' if z < 26 else z}"
            if z >= 26:
                label = f"{region}-hall{z}"
        else:
            label = f"{region}-hall{z}"
        zones.append((label, region))
    return regions, zones


def _rack_names(rng: random.Random, spec: FleetSpec, rack: int, size: int, first: int) -> list[str]:
    """A rack's node names: one global range (``node000123``), or, for ``irregular`` racks, a form of its own
    (unpadded, odd padding, sparse numbers, dots and underscores): unique by the rack number in the prefix."""
    if rng.random() >= spec.irregular:
        return [f"node{first + i:06d}" for i in range(size)]
    form = rng.randrange(5)
    if form == 0:
        return [f"gx{rack}a{i + 1}" for i in range(size)]  # unpadded: gx12a1 .. gx12a40
    if form == 1:
        start = rng.randint(0, 900)
        return [f"c{rack}_{start + i:04d}" for i in range(size)]
    if form == 2:
        numbers = sorted(rng.sample(range(1, size * 3 + 1), size))  # sparse: gaps inside the rack
        return [f"rk{rack}n{n}" for n in numbers]
    if form == 3:
        return [f"hpc.r{rack}-{i:02d}" for i in range(size)]
    word = rng.choice(("dgx", "srv", "x"))
    return [f"{word}{rack}-{i}" for i in range(size)]


def _family_of(rng: random.Random, spec: FleetSpec) -> tuple[str, ...]:
    values: list[str] = []
    if spec.families >= 1 and rng.random() < 0.9:
        values.append(rng.choice(TORCH))
    if spec.families >= 2 and rng.random() < 0.8:
        values.append(rng.choice(CUDA))
    return tuple(values)


def _rack_layout(rng: random.Random, spec: FleetSpec, zones: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """(size, zone index) per rack: sizes fixed or drawn, zones weighted unevenly (a few large zones)."""
    weights = [1.0 / (1 + i) ** 0.7 for i in range(len(zones))]
    rng.shuffle(weights)
    out: list[tuple[int, int]] = []
    made = 0
    while made < spec.nodes:
        size = spec.rack or rng.choice(RACK_SIZES)
        size = min(size, spec.nodes - made)
        z = len(out) if len(out) < len(zones) else rng.choices(range(len(zones)), weights)[0]
        out.append((size, z))
        made += size
    return out


def make_fleet(spec: FleetSpec) -> Fleet:
    """The fleet a spec describes, deterministic in its seed."""
    rng = random.Random(f"racks:{spec.seed}")
    kinds = _kinds(rng, spec)
    _, zones = _places(rng, spec)
    racks: list[Rack] = []
    made = 0
    ng_count: Counter[int] = Counter()
    for rack, (size, z) in enumerate(_rack_layout(rng, spec, zones)):
        label, region = zones[z]
        # the first rack always has its zone, so a fleet has at least one (a one-rack fleet of a region-only
        # rack had none); the draw is made all the same, so every other rack of a seed is as before
        draw = rng.random()
        zone: str | None = None if rack and draw < spec.region_only else label
        ng_count[z] += 1
        ng = f"leaf{(ng_count[z] - 1) // spec.ng_span}" if zone else f"edge{rack}"
        kind = rng.choice(kinds)
        names = _rack_names(rng, spec, rack, size, made + 1)
        made += size
        family = _family_of(rng, spec)
        domain = f"nvl{rack:05d}" if kind.nvl and rng.random() < spec.nvl else None
        tail = 0
        if kind.gpus and size > 1 and rng.random() < spec.cpu_in_gpu:
            tail = min(size - 1, rng.randint(1, 4))
        head = names[: len(names) - tail]
        racks.append(Rack(head, region, zone, ng, kind, family, domain))
        if tail:
            cpu = next((k for k in kinds if not k.gpus), kinds[0])
            racks.append(Rack(names[len(names) - tail :], region, zone, ng, cpu, family))
    used = sorted({r.region for r in racks})
    fleet = Fleet(spec, racks, used, sorted({r.zone for r in racks if r.zone}), kinds)
    _partitions(rng, fleet)
    fleet.policy = _policy(rng, fleet)
    return fleet


_SIMPLE_PARTITIONS: dict[str, tuple[str, Any]] = {
    "all": ("batch", lambda r: True),
    "gpu": ("gpu", lambda r: r.kind.gpus > 0),
    "cpu": ("cpu", lambda r: not r.kind.gpus),
    "big8": ("big8", lambda r: r.kind.gpus >= 8),
    "nvl": ("nvl", lambda r: r.domain is not None),
    "odd": ("gpu+big", lambda r: r.kind.gpus >= 4),  # a name Slurm takes that the data file escapes
}


def _partition_members(rng: random.Random, fleet: Fleet, kind: str) -> tuple[str, list[Rack]]:
    racks = fleet.racks
    if kind in _SIMPLE_PARTITIONS:
        name, keep = _SIMPLE_PARTITIONS[kind]
        return name, [r for r in racks if keep(r)]
    if kind == "debug":
        return "debug", rng.sample(racks, min(len(racks), rng.randint(1, 4)))
    if kind == "type":
        gtype = rng.choice(sorted({r.kind.gpu_type for r in racks if r.kind.gpu_type}) or ["none"])
        return gtype, [r for r in racks if r.kind.gpu_type == gtype]
    if kind == "region":
        region = rng.choice(fleet.regions)
        return f"in-{region}", [r for r in racks if r.region == region]
    chosen = set(rng.sample(fleet.zones, max(1, len(fleet.zones) // 3))) if fleet.zones else set()
    return "zoneset", [r for r in racks if r.zone in chosen]


def _partitions(rng: random.Random, fleet: Fleet) -> None:
    """``spec.partitions`` partitions over overlapping node sets (every node, GPU nodes, a type, a region,
    a third of the zones, a few racks, ...); one of them the default."""
    if not fleet.spec.partitions:
        return
    kinds = list(PARTITION_KINDS)
    rng.shuffle(kinds)
    for kind in kinds:
        if len(fleet.partitions) >= fleet.spec.partitions:
            break
        name, members = _partition_members(rng, fleet, kind)
        if members and name not in fleet.partitions:
            fleet.partitions[name] = [n for r in members for n in r.names]
    if fleet.partitions:
        fleet.default_partition = rng.choice(sorted(fleet.partitions))


def _policy(rng: random.Random, fleet: Fleet) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    if rng.random() < 0.2:
        policy["default"] = rng.choice(("network_group:wait", "zone", "any"))
    parts = {p: rng.choice(("zone:wait", "region", "prefer")) for p in fleet.partitions if p.isidentifier()}
    if parts and rng.random() < 0.5:
        policy["partitions"] = dict(list(parts.items())[:2])
    if fleet.spec.families:
        policy["families"] = {"torch": "torch-*"} | ({"cuda": "cuda-*"} if fleet.spec.families > 1 else {})
    if fleet.spec.plan:
        policy["plan"] = "tp=8,pp=2,bytes=1G"
    return policy


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def inventory_yaml(fleet: Fleet) -> str:
    """The fleet as an operator writes it: one entry per rack, its names a hostlist."""
    lines = []
    if fleet.policy:
        lines.append(f"policy: {_flow(fleet.policy)}")
    lines.append("nodes:")
    for r in fleet.racks:
        entry: dict[str, Any] = {"name": hostlist.compress(r.names), "region": r.region}
        if r.zone:
            entry["zone"] = r.zone
        entry["network_group"] = r.ng
        features = list(r.kind.features) + list(r.family)
        if features:
            entry["features"] = features
        if r.kind.gpus:
            entry["gpus"] = r.kind.gpus
            entry["gpu_type"] = r.kind.gpu_type
        if r.domain:
            entry["nvlink_domain"] = r.domain
        entry["slurm"] = {"CPUs": 128, "RealMemory": 1000000}
        lines.append(f"  - {_flow(entry)}")
    return "\n".join(lines) + "\n"


def partitions_text(fleet: Fleet) -> str | None:
    """The partitions as ``scontrol show partition -o`` prints them (the line of a real 22.05 capture,
    tests/fixtures/real/slurm-22.05/scontrol-show-partition-o.txt, with this fleet's names and nodes)."""
    if not fleet.partitions:
        return None
    lines = []
    for name, members in fleet.partitions.items():
        default = "YES" if name == fleet.default_partition else "NO"
        lines.append(
            f"PartitionName={name} AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
            f"Default={default} QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 "
            f"Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED "
            f"Nodes={hostlist.compress(members)} PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO "
            f"OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs={128 * len(members)} "
            f"TotalNodes={len(members)} SelectTypeParameters=NONE JobDefaults=(null) "
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED"
        )
    return "\n".join(lines) + "\n"


def location_features(inventory_path: Path) -> list[str]:
    """The level features the generator makes for this inventory (region_*, zone_*, ng_*, nvl_*): what a
    ``-C`` may name."""
    from slurm_topo import load_inventories
    from slurm_topo.core.topology import build_topology

    topology = build_topology(load_inventories([inventory_path]))
    names = {f for level in topology.group_names.values() for f in level.values()}
    return sorted(names | set(topology.nvl_features.values()))


# ---------------------------------------------------------------------------------------------------- shapes


@dataclass
class Shape:
    family: str
    job: dict[str, Any]
    tags: dict[str, str]
    """Category -> value, for the table (level, mode, partitions, nodelist, regions, gpu, constraint,
    size)."""
    covers: set[str]
    """FIELDS this shape exercises."""
    text: str
    """The request as options (for the worst-shapes list)."""


def _locality(rng: random.Random) -> tuple[str | None, str, str]:
    """(--locality value or None, level tag, mode tag)."""
    r = rng.random()
    if r < 0.08:
        return None, "(none)", "none"
    if r < 0.11:
        bad = rng.choice(("rack", "zone:later", "nvl:auto", "prefer:fail", "Zone", "zone:", ":wait"))
        return bad, "(bad)", "bad"
    level = rng.choices(LEVELS, (3, 2, 2, 2, 1.5, 0.6))[0]
    if level in ("prefer", "any"):
        return level, level, "none"
    mode = rng.choice(("", "wait", "fail", "auto")) if level != "nvl" else rng.choice(("", "wait", "fail"))
    return level + (f":{mode}" if mode else ""), level, mode or "wait"


def _place_locality(rng: random.Random, job: dict[str, Any], value: str, covers: set[str]) -> str:
    """Where the job says it: the SPANK option (sbatch/salloc/srun --locality), the batch environment, or
    the comment."""
    r = rng.random()
    if r < 0.7 or job.get("script") is None and r < 0.85:
        job.setdefault("spank_job_env", []).append(f"{SPANK}locality={value}")
        covers.add("locality:spank")
        return f"--locality={value}"
    if r < 0.85:
        job["environment"] = {f"SLURM_SPANK_{SPANK}locality": value}
        covers.add("locality:environment")
        return f"(env) SLURM_SPANK_..._locality={value}"
    job["comment"] = f"run7 locality={value}"
    covers.add("locality:comment")
    return f"--comment='run7 locality={value}'"


def _gpu(
    rng: random.Random, fleet: Fleet, job: dict[str, Any], covers: set[str], tags: dict[str, str]
) -> str:
    types = sorted({r.kind.gpu_type for r in fleet.racks if r.kind.gpu_type})  # types some node has
    r = rng.random()
    gtype = rng.choice(types) if r < 0.5 and types else rng.choice(UNKNOWN_GPU_TYPES) if r < 0.65 else None
    tags["gpu"] = "typed" if gtype in types else "unknown type" if gtype else "untyped"
    covers.add(
        {"typed": "gpu:typed", "unknown type": "gpu:unknown-type", "untyped": "gpu:untyped"}[tags["gpu"]]
    )
    scope = rng.choices(("job", "node", "task"), (4, 4, 2))[0]
    count = {
        "job": _log_uniform(rng, 1, 8 * MAX_NODES),
        "node": rng.choice((1, 2, 4, 8, 8, 8, 16)),
        "task": rng.randint(1, 4),
    }[scope]
    prefix = rng.choice(("gres/gpu", "gres:gpu"))
    item = f"{prefix}:{gtype}:{count}" if gtype else f"{prefix}:{count}"
    if rng.random() < 0.1:
        item = f"gres/shard:2,{item}" if scope != "job" else f"{item},gres/nic:1"
    job[f"tres_per_{scope}"] = item
    covers.add(f"tres_per_{scope}")
    if scope == "task":
        job["num_tasks"] = rng.randint(1, 512)
        covers.add("num_tasks")
    flag = {"job": "--gpus", "node": "--gpus-per-node", "task": "--gpus-per-task"}[scope]
    return f"{flag}={gtype + ':' if gtype else ''}{count}"


def _constraint(rng: random.Random, fleet: Fleet, covers: set[str]) -> tuple[str, str]:
    """A -C value and its form: own features (those the fleet's nodes have), location features, AND/OR,
    brackets, complex (parentheses, counts), unknown names, family values."""
    own = sorted({f for r in fleet.racks for f in r.kind.features})
    loc = fleet.location_features or ["zone_x"]
    fam = sorted({v for r in fleet.racks for v in r.family}) or ["torch-2.4"]
    kind = rng.choice(("own", "and", "or", "location", "bracket", "bracket", "complex", "unknown", "family"))
    if kind in ("own", "and", "complex") and not own:
        kind = "unknown"
    if kind == "and" and len(own) < 2:
        kind = "own"
    if kind == "or" and len(own + fam) < 2:
        kind = "family"
    covers.add(f"features:{kind}")
    if kind == "own":
        return rng.choice(own), kind
    if kind == "and":
        return "&".join(rng.sample(own, 2)), kind
    if kind == "or":
        return "|".join(rng.sample(own + fam, min(len(own + fam), rng.randint(2, 3)))), kind
    if kind == "location":
        return rng.choice(loc), kind
    if kind == "bracket":
        inside = "|".join(rng.sample(loc, min(len(loc), rng.randint(1, 6))))
        pre = f"{rng.choice(own)}&" if own and rng.random() < 0.4 else ""
        return f"{pre}[{inside}]", kind
    if kind == "complex":
        a, b = rng.choice(own), rng.choice(own)
        return rng.choice((f"({a}|{b})&{rng.choice(fam)}", f"{a}*2", f"[{a}*1&{b}*1]")), kind
    if kind == "unknown":
        return rng.choice(("gpu_big", "nosuch", f"{own[0] if own else 'ib'}&nosuch")), kind
    return rng.choice(fam), kind


def _partition(rng: random.Random, fleet: Fleet, covers: set[str]) -> tuple[str, str]:
    known = sorted(fleet.partitions)
    count = rng.choices((1, 2, 3), (5, 3, 2))[0]
    names = []
    for _ in range(count):
        if known and rng.random() < 0.85:
            names.append(rng.choice(known))
        else:
            names.append(rng.choice(("scavenger", "nosuch", "p9")))
    names = list(dict.fromkeys(names))
    unknown = any(n not in fleet.partitions for n in names)
    covers.add("partition:several" if len(names) > 1 else "partition:one")
    if unknown:
        covers.add("partition:unknown")
    tag = ("several" if len(names) > 1 else "one") + (" (unknown)" if unknown else "")
    return ",".join(names), tag


def _nodelist(rng: random.Random, fleet: Fleet, covers: set[str]) -> tuple[str, str]:
    """A --nodelist: names of the fleet (one, several racks, a range), or names it does not have."""
    r = rng.random()
    racks = fleet.racks
    if r < 0.2:
        covers.add("nodelist:unknown")
        return rng.choice(("ghost[1-4]", "nosuch001", f"{racks[0].names[0]},ghost7")), "unknown"
    several = [rack for rack in racks if len(rack.names) > 1]
    if r < 0.5 and several:
        covers.add("nodelist:range")
        rack = rng.choice(several)
        k = rng.randint(2, len(rack.names))
        return hostlist.compress(rack.names[:k]), "range"
    covers.add("nodelist:fleet")
    names = [rng.choice(rng.choice(racks).names) for _ in range(rng.randint(1, 6))]
    return ",".join(dict.fromkeys(names)), "names"


def _regions(rng: random.Random, fleet: Fleet, covers: set[str]) -> str:
    labels = fleet.regions + fleet.zones
    picked = rng.sample(labels, min(len(labels), rng.randint(1, 3)))
    if rng.random() < 0.15:
        picked.append("atlantis")
        covers.add("regions:unknown")
    return ",".join(picked)


def _fields(rng: random.Random, fleet: Fleet, job: dict[str, Any], sh: Shape, words: list[str]) -> None:
    """Everything but the locality and the size, each field with its own chance."""
    covers, tags = sh.covers, sh.tags
    if rng.random() < 0.5:
        words.append(_gpu(rng, fleet, job, covers, tags))
    if rng.random() < 0.35:
        job["features"], tags["constraint"] = _constraint(rng, fleet, covers)
        words.append(f"-C '{job['features']}'")
    if rng.random() < 0.08:
        job["prefer"] = _constraint(rng, fleet, set())[0]
        covers.add("prefer")
        words.append(f"--prefer='{job['prefer']}'")
    if rng.random() < 0.4:
        job["partition"], tags["partitions"] = _partition(rng, fleet, covers)
        words.append(f"-p {job['partition']}")
    if rng.random() < 0.08:
        job["req_nodes"], tags["nodelist"] = _nodelist(rng, fleet, covers)
        covers.add("req_nodes")
        words.append(f"-w {job['req_nodes']}")
    if rng.random() < 0.1:
        value = _regions(rng, fleet, covers)
        tags["regions"] = "given"
        if rng.random() < 0.7:
            job.setdefault("spank_job_env", []).append(f"{SPANK}locality_regions={value}")
            covers.add("regions:spank")
        else:
            job["comment"] = (job.get("comment", "") + f" locality-regions={value}").strip()
            covers.add("regions:comment")
        words.append(f"--locality-regions={value}")
    _rare(rng, fleet, job, covers, words)


def _rare(rng: random.Random, fleet: Fleet, job: dict[str, Any], covers: set[str], words: list[str]) -> None:
    """The fields most jobs leave unset: --exclude, --reservation, --contiguous, heterogeneous components,
    --time, --plan, an AdminComment already there."""
    extras: list[tuple[float, str, Any, str]] = [
        (0.03, "exc_nodes", rng.choice(rng.choice(fleet.racks).names), "-x"),
        (0.02, "reservation", "maint", "--reservation"),
        (0.02, "contiguous", 1, "--contiguous"),
        (0.03, "het_job_offset", rng.choice((0, 1)), "(het component)"),
        (0.5, "time_limit", _log_uniform(rng, 1, 43200), "-t"),
        (0.04, "admin_comment", "billing=ok", "(AdminComment)"),
    ]
    for chance, key, value, flag in extras:
        if rng.random() < chance:
            job[key] = value
            covers.add(key)
            words.append(f"{flag} {value}" if not flag.startswith("(") else flag)
    if rng.random() < 0.04:
        job.setdefault("spank_job_env", []).append(f"{SPANK}plan=tp=8,pp=2")
        covers.add("plan")
        words.append("--plan=tp=8,pp=2")


def _size_tag(n: int | None) -> str:
    if n is None:
        return "-N not given"
    return next(
        t for lim, t in ((1, "-N 1"), (16, "-N 2-16"), (512, "-N 17-512"), (MAX_NODES, "-N >512")) if n <= lim
    )


def make_shape(rng: random.Random, fleet: Fleet) -> Shape:
    """One request: a locality (or none, or a bad one) said one of three ways, a size, and each other field
    the filter reads with its own chance."""
    job: dict[str, Any] = {"script": "#!/bin/sh\n", "min_nodes": NO_VAL, "num_tasks": NO_VAL}
    covers: set[str] = set()
    words: list[str] = []
    if rng.random() < 0.15:
        del job["script"]
        covers.add("interactive")
        words.append("(salloc)")
    value, level, mode = _locality(rng)
    family = level if level in FAMILIES else "other"
    if level != "(none)":
        covers.add("level:bad" if level == "(bad)" else f"level:{level}")
    covers.add(f"mode:{mode}")
    if value is None:
        covers.add("locality:none")
    else:
        words.append(_place_locality(rng, job, value, covers))
    sh = Shape(family, job, {"level": level, "mode": mode}, covers, "")
    n = None
    if rng.random() < 0.85:
        n = _log_uniform(rng, 1, MAX_NODES)
        job["min_nodes"] = n
        covers.add("min_nodes")
        words.append(f"-N{n}")
    sh.tags["size"] = _size_tag(n)
    _fields(rng, fleet, job, sh, words)
    if "time_limit" not in covers:
        job["time_limit"] = NO_VAL
    else:
        covers.add("time_limit")
    sh.text = " ".join(words)
    return sh


def make_shapes(fleet: Fleet, count: int, seed: int) -> list[Shape]:
    """``count`` request shapes for a fleet, deterministic in ``seed``."""
    rng = random.Random(f"shapes:{seed}")
    return [make_shape(rng, fleet) for _ in range(count)]


def coverage(shapes: Iterable[Shape]) -> set[str]:
    return set().union(*(s.covers for s in shapes))


# ------------------------------------------------------------------------------------------------ Lua side


def _lua_str(text: str) -> str:
    """A Lua 5.1 string literal holding exactly ``text``'s UTF-8 bytes (decimal escapes outside printable
    ASCII and for quote and backslash)."""
    out = []
    for b in text.encode():
        out.append(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03d}")
    return '"' + "".join(out) + '"'


def _lua(value: Any) -> str:
    if isinstance(value, str):
        return _lua_str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):  # spank_job_env: 0-indexed, as slurmctld builds it
        return "{" + ",".join(f"[{i}]={_lua(v)}" for i, v in enumerate(value)) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"[{_lua(k)}]={_lua(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Lua form for {value!r}")


def shapes_lua(shapes: Sequence[Shape]) -> str:
    """The shapes file world_bench.lua reads: ``return { {name=FAMILY, jobs={job, ...}}, ... }``, families
    in FAMILIES order, each family's jobs in drawing order."""
    parts = ["return {"]
    for fam in FAMILIES:
        jobs = [s.job for s in shapes if s.family == fam]
        if jobs:
            parts.append(f"{{name={_lua(fam)},jobs={{")
            parts += [_lua(j) + "," for j in jobs]
            parts.append("}},")
    parts.append("}")
    return "\n".join(parts) + "\n"


def by_family(shapes: Sequence[Shape]) -> list[Shape]:
    """The shapes in the order the driver runs them."""
    return [s for fam in FAMILIES for s in shapes if s.family == fam]


def lua_env(filter_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if filter_dir:
        env["FILTER_DIR"] = filter_dir
    return env


def run_plain(lua: str, data: Path, shapes_file: Path, env: dict[str, str]) -> dict[str, Any]:
    """world_bench.lua in plain Lua: each load's CPU seconds, each decision's CPU µs, outcome and whether the
    filter raised on it."""
    p = subprocess.run(
        [lua, str(HERE / "world_bench.lua"), str(data), str(shapes_file)],
        capture_output=True,
        text=True,
        env=env,
    )
    if p.returncode != 0:
        raise SystemExit(f"world_bench.lua failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    loads, decisions = [], []
    for line in p.stdout.splitlines():
        kind, *rest = line.split("\t")
        if kind == "load":
            loads.append(float(rest[1]))
        elif kind == "d":
            decisions.append((rest[2], float(rest[3]), rest[4] == "1"))
    return {"loads": loads, "decisions": decisions, "stderr": p.stderr}


def _totals(path: Path) -> int:
    with path.open() as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise ValueError(f"callgrind dump {path} has no totals line")


def run_callgrind(
    lua: str, data: Path, shapes_file: Path, env: dict[str, str]
) -> tuple[list[int], list[int]]:
    """(instructions of each load, of each decision in run order), each less the marker's own cost."""
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
            + [lua, str(HERE / "world_bench.lua"), str(data), str(shapes_file), "each"],
            capture_output=True,
            text=True,
            env=env,
        )
        if p.returncode != 0:
            raise SystemExit(f"world_bench.lua under callgrind failed: {p.stderr.strip()[-2000:]}")
        lines = [line.split("\t") for line in p.stdout.splitlines()]
        calibrate = int(lines[0][1])
        floor = min(_totals(Path(f"{out}.{k}")) for k in range(2, calibrate + 1))
        k = calibrate + 1  # each family: one dump before its load, the load, its collection, its decisions
        loads, each = [], []
        for _, _, count in lines[1:]:
            loads.append(_totals(Path(f"{out}.{k + 1}")) - floor)
            each += [_totals(Path(f"{out}.{k + 3 + i}")) - floor for i in range(int(count))]
            k += 3 + int(count)
    return loads, each


# ----------------------------------------------------------------------------------------------- the table


def _q(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _m(ir: float) -> str:
    return f"{ir / 1e6:.2f} M" if ir >= 1e5 else f"{ir / 1e3:.0f} k"


@dataclass
class FleetResult:
    fleet: Fleet
    label: str
    shapes: list[Shape]
    irs: list[int]
    times: list[float]
    outcomes: list[str]
    raised: list[bool]
    load_ms: list[float]
    load_ir: list[int]
    data_bytes: int
    generate_cpu: float


def _row(name: str, idx: Sequence[int], r: FleetResult) -> str:
    irs = [r.irs[i] for i in idx]
    over = sum(1 for x in irs if x > GOAL)
    return (
        f"| {name} | {len(irs)} | {'**' + str(over) + '**' if over else 0} | {_m(_q(irs, 0.5))} | "
        f"{_m(_q(irs, 0.99))} | {_m(max(irs))} |"
    )


CATEGORIES = ("level", "mode", "partitions", "nodelist", "regions", "gpu", "constraint", "size")


def fleet_words(f: Fleet) -> str:
    s = f.spec
    domains = len({r.domain for r in f.racks if r.domain})
    classes = len({(r.kind.gpu_type, r.kind.gpus, r.kind.features, r.family) for r in f.racks})
    parts = ", ".join(f"{p} ({len(m)})" for p, m in f.partitions.items()) or "none"
    return (
        f"seed {s.seed}: {f.nodes} nodes in {len(f.racks)} entries "
        f"({f'racks of {s.rack}' if s.rack else f'rack sizes drawn from {RACK_SIZES[0]}-{RACK_SIZES[-1]}'}), "
        f"{len(f.regions)} regions, {len(f.zones)} zones, network groups of {s.ng_span} racks, "
        f"{classes} node classes ({len(f.kinds)} kinds), partitions: {parts}; families: "
        f"{ {0: 'none', 1: 'torch', 2: 'torch, cuda'}[s.families] }; {domains} NVLink domains; "
        f"CPU nodes in {s.cpu_in_gpu:.0%} of GPU racks; irregular names {s.irregular:.0%} of racks; "
        f"region-only racks {s.region_only:.0%}; site plan: {'yes' if s.plan else 'no'}"
    )


def section(r: FleetResult) -> list[str]:
    """One fleet's part of the table."""
    n = len(r.irs)
    over = sum(1 for x in r.irs if x > GOAL)
    worst = sorted(range(n), key=lambda i: -r.irs[i])[:8]
    outcomes = Counter(r.outcomes)
    lines = [
        f"### {r.label}: {fleet_words(r.fleet)}",
        "",
        f"Data file {r.data_bytes / 1024:.0f} KiB, written by the generator in {r.generate_cpu:.1f} s CPU. "
        f"Data load (read, checksum, load, prepare; {len(r.load_ms)} fresh loads): median "
        f"{_q(r.load_ms, 0.5):.1f} ms, max {max(r.load_ms):.1f} ms CPU; {_m(_q(r.load_ir, 0.5))} "
        "instructions "
        f"(max {_m(max(r.load_ir))}). Outcomes: "
        + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        + f"; decisions that raised (the filter failed open): {sum(r.raised)}. CPU per decision: median "
        f"{_q(r.times, 0.5):.0f} µs, p99 {_q(r.times, 0.99):.0f} µs, max {max(r.times):.0f} µs.",
        "",
        "| category | decisions | over 500 000 | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|",
        _row(f"**all** ({over} of {n} over)", range(n), r),
    ]
    for cat in CATEGORIES:
        values = sorted({s.tags[cat] for s in r.shapes if cat in s.tags})
        for v in values:
            lines.append(_row(f"{cat}: {v}", [i for i, s in enumerate(r.shapes) if s.tags.get(cat) == v], r))
    lines += ["", "Worst decisions (instructions, µs CPU, family, outcome: the request):", ""]
    for i in worst:
        s = r.shapes[i]
        lines.append(f"- {r.irs[i]:,} Ir, {r.times[i]:.0f} µs, {s.family}, {r.outcomes[i]}: `{s.text}`")
    return lines + [""]


def summary(results: Sequence[FleetResult]) -> list[str]:
    lines = [
        "| fleet | nodes | decisions over 500 000 instructions | p50 | p99 | max (slowest CPU) "
        "| data load ms (max) | load instructions | generate s CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        over = sum(1 for x in r.irs if x > GOAL)
        lines.append(
            f"| seed {r.fleet.spec.seed} ({r.label}) | {r.fleet.nodes} | **{over} of {len(r.irs)}** | "
            f"{_m(_q(r.irs, 0.5))} | {_m(_q(r.irs, 0.99))} | {_m(max(r.irs))} "
            f"({max(r.times) / 1000:.1f} ms) | "
            f"{_q(r.load_ms, 0.5):.1f} ({max(r.load_ms):.1f}) | {_m(_q(r.load_ir, 0.5))} | "
            f"{r.generate_cpu:.1f} |"
        )
    return lines


# ------------------------------------------------------------------------------------------------ running


_FROM_TREE = """
import sys
tree = sys.argv.pop(1)
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]  # not the installed one
sys.path.insert(0, tree)
import slurm_topo.cli
assert slurm_topo.cli.__file__.startswith(tree + "/"), slurm_topo.cli.__file__
sys.argv[0] = "slurm-topo"
sys.exit(slurm_topo.cli.main())
"""


def tree_generator(tree: Path) -> list[str]:
    """The command that runs another checkout's ``slurm-topo`` with this interpreter (its libraries), the
    installed package out of the way."""
    return [sys.executable, "-c", _FROM_TREE, str(tree)]


def generate(fleet: Fleet, tmp: Path, generator: list[str]) -> tuple[Path, float]:
    """The data file, written by the generator (``slurm-topo generate``) from the fleet's inventory and
    partitions; (its path, the generator's CPU seconds)."""
    inv = tmp / "fleet.yaml"
    inv.write_text(inventory_yaml(fleet))
    argv = generator + ["generate", "-i", str(inv), "--slurm-version", "22.05", "-o", str(tmp / "out")]
    parts = partitions_text(fleet)
    if parts is not None:
        (tmp / "partitions.txt").write_text(parts)
        argv += ["--partitions-from", str(tmp / "partitions.txt")]
    before = os.times()
    p = subprocess.run(argv, capture_output=True, text=True)
    after = os.times()
    if p.returncode != 0:
        raise SystemExit(f"generate failed for seed {fleet.spec.seed}: {p.stderr.strip()[-2000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    fleet.location_features = location_features(inv)
    return tmp / "out" / "slurm_topo_data.lua", cpu


def run_fleet(spec: FleetSpec, args: argparse.Namespace, lua: str) -> FleetResult:
    fleet = make_fleet(spec)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        t0 = time.monotonic()
        data, gen_cpu = generate(fleet, tmp, shlex.split(args.generator))
        shapes = by_family(make_shapes(fleet, args.shapes, spec.seed))
        shapes_file = tmp / "shapes.lua"
        shapes_file.write_text(shapes_lua(shapes))
        env = lua_env(args.filter_dir)
        plain = run_plain(lua, data, shapes_file, env)
        print(f"seed {spec.seed}: generated in {time.monotonic() - t0:.0f} s; plain run done", flush=True)
        load_ir, irs = (
            run_callgrind(lua, data, shapes_file, env) if not args.no_callgrind else ([0], [0] * len(shapes))
        )
        if len(irs) != len(shapes) or len(plain["decisions"]) != len(shapes):
            raise SystemExit(
                f"seed {spec.seed}: {len(irs)} profiles, {len(plain['decisions'])} decisions, "
                f"{len(shapes)} shapes"
            )
        result = FleetResult(
            fleet,
            args.label,
            shapes,
            irs,
            [d[1] for d in plain["decisions"]],
            [d[0] for d in plain["decisions"]],
            [d[2] for d in plain["decisions"]],
            [x * 1000 for x in plain["loads"]],
            load_ir,
            data.stat().st_size,
            gen_cpu,
        )
    over = sum(1 for x in irs if x > GOAL)
    print(
        f"seed {spec.seed}: {over} of {len(irs)} over {GOAL:,}; max {max(irs):,} Ir; "
        f"raised {sum(result.raised)}",
        flush=True,
    )
    return result


def write_fleet(spec: FleetSpec, out: Path, args: argparse.Namespace) -> None:
    """--write-fleet: one fleet's data file and shapes, kept for a closer look (filter_vm_profile.lua)."""
    out.mkdir(parents=True, exist_ok=True)
    fleet = make_fleet(spec)
    data, _ = generate(fleet, out, shlex.split(args.generator))
    shapes = by_family(make_shapes(fleet, args.shapes, spec.seed))
    (out / "shapes.lua").write_text(shapes_lua(shapes))
    (out / "shapes.txt").write_text("".join(f"{sh.family}\t{sh.text}\n" for sh in shapes))
    print(f"seed {spec.seed}: {data}, {len(shapes)} shapes in {out}")


def parse_fleet(text: str, nodes: int | None, now_seed: int) -> FleetSpec:
    """``SEED[:key=value,...]``; SEED ``now``: ``now_seed`` (from the date and time of the run)."""
    seed, _, rest = text.partition(":")
    fixed = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    if "nodes" in fixed:
        nodes = int(fixed.pop("nodes"))
    return draw_spec(now_seed if seed == "now" else int(seed), nodes, **fixed)


def seeds_of(args: argparse.Namespace, now: datetime) -> tuple[list[FleetSpec], str]:
    """The fleets to run and where their seeds came from: ``--fleet`` and ``--seeds`` as given, seeds
    ``now`` and the default three from the date and time (YYYYMMDDhhmm × 10 + position)."""
    nodes = None if args.nodes == "any" else int(args.nodes)
    base = int(now.strftime("%Y%m%d%H%M")) * 10
    specs = [parse_fleet(f, nodes, base + i) for i, f in enumerate(args.fleet)]
    specs += [draw_spec(int(s), nodes) for s in (args.seeds.split(",") if args.seeds else [])]
    if not specs:
        specs = [draw_spec(base + i, nodes) for i in range(3)]
    if any(s.seed // 10 == base // 10 for s in specs):
        return (
            specs,
            f"`now`: from the date and time of the run, {now:%Y-%m-%d %H:%M} (YYYYMMDDhhmm × 10 + i)",
        )
    return specs, "given on the command line"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", help="fleet seeds, comma-separated (default: 3 from the date and time)")
    ap.add_argument(
        "--fleet",
        action="append",
        default=[],
        help="SEED[:key=value,...] (repeat; SEED `now`: from the date and time; keys: FleetSpec's fields)",
    )
    ap.add_argument("--nodes", default=str(MAX_NODES), help="nodes per seed's fleet, or 'any' (log-uniform)")
    ap.add_argument("--shapes", type=int, default=2400, help="request shapes per fleet")
    ap.add_argument(
        "--tree",
        help="another checkout (e.g. `git archive REV job_submit slurm_topo | tar -x -C DIR`): its generator "
        "(DIR/slurm_topo) writes the data files and its filter (DIR/job_submit) decides",
    )
    ap.add_argument(
        "--filter-dir",
        help="the job_submit/ folder of the filter to measure (default: --tree's, else this tree's)",
    )
    ap.add_argument(
        "--generator",
        help="the command that runs `slurm-topo` (default: --tree's, else this "
        "interpreter's installed package)",
    )
    ap.add_argument("--label", default="this tree", help="what the measured filter is called in the table")
    ap.add_argument("--out", default=str(HERE / "results" / "filter_world.md"))
    ap.add_argument("--no-callgrind", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--write-fleet",
        metavar="DIR",
        help="write the first fleet's data file (DIR/out/slurm_topo_data.lua), its shapes (DIR/shapes.lua, "
        "in families, and DIR/shapes.txt, FAMILY<TAB>request per line, same order) and stop: the input of "
        "benchmarks/filter_vm_profile.lua",
    )
    args = ap.parse_args()
    if args.tree:
        tree = Path(args.tree).resolve()
        args.filter_dir = args.filter_dir or str(tree / "job_submit")
        args.generator = args.generator or shlex.join(tree_generator(tree))
    args.generator = args.generator or shlex.join([sys.executable, "-m", "slurm_topo"])
    lua = shutil.which("lua5.1")
    if lua is None or (not args.no_callgrind and shutil.which("valgrind") is None):
        sys.exit("needs lua5.1 and valgrind (apt-get install lua5.1 valgrind)")
    now = datetime.now()
    specs, seeds_from = seeds_of(args, now)
    if args.write_fleet:
        write_fleet(specs[0], Path(args.write_fleet), args)
        return
    started = time.monotonic()
    results = [run_fleet(spec, args, lua) for spec in specs]
    write(args, results, seeds_from, now, time.monotonic() - started)


def write(
    args: argparse.Namespace, results: Sequence[FleetResult], seeds_from: str, now: datetime, took: float
) -> None:
    version = subprocess.run(["lua5.1", "-v"], capture_output=True, text=True).stderr.strip()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    cmd = "python benchmarks/bench_filter_world.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = []
    out = Path(args.out)
    if not out.exists():
        lines += [
            "# The filter's first decisions on fleets and shapes nobody tuned on",
            "",
            "Written by `benchmarks/bench_filter_world.py` (issue 44, item 2): see its docstring for the",
            "generators and the method. Each run appends a section; goal: 0 decisions over 500 000",
            "instructions and a data load ≤ 50 ms CPU at 100 000 nodes, on any seed.",
            "",
        ]
    lines += [
        f"## {args.label} — {now:%Y-%m-%d %H:%M}",
        "",
        f"Command: `{cmd.strip()}`  ",
        f"Filter: {args.filter_dir or 'job_submit/ of this tree'}; generator: "
        f"{'the tree ' + args.tree if args.tree else args.generator}; this tree at commit "
        f"{head.stdout.strip() or '?'}.  ",
        f"Seeds: {', '.join(str(r.fleet.spec.seed) for r in results)} ({seeds_from}).  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs; {version}; run took {took / 60:.1f} min.  ",
        "Method: per fleet, the generator writes the data file (`slurm-topo generate --slurm-version 22.05`, "
        "partitions through `--partitions-from`); `benchmarks/world_bench.lua` runs every shape through the "
        "filter's `submit()` hook, one family per locality level (prefer, network_group, zone, region, nvl, "
        "other: any, none, refused values), each family on a freshly loaded data table (the filter's own "
        "loader: read, checksum, load, prepare); instructions from `valgrind --tool=callgrind "
        "--dump-before=clock` (one profile per decision and per load, less the marker's cost), CPU times "
        "from a plain `lua5.1` run of the same decisions (os.clock; a shared 2-core machine: read them as "
        "noisy). A decision counts in every category it has.",
        "",
        *summary(results),
        "",
    ]
    for r in results:
        lines += section(r)
    with out.open("a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
