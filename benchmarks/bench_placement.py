#!/usr/bin/env python3
"""Where real Slurm (22.05, 24.11, 26.05) puts 4-, 6- and 8-node jobs on a partly busy fleet, per constraint
form and switch order.

For each fleet a test cluster (docker-slurm/cluster: real slurmctld and one slurmd per node, topology/tree on
the generated topology.conf) runs seeded "busy patterns": a random subset of nodes is taken by one exclusive
filler job pinned with --nodelist; then each measured job (exclusive, sleeping) is submitted in each variant,
its nodes are read from ``scontrol show job -d`` once it runs, and it is cancelled. Placement is compared with
what the free nodes allowed: the fewest regions, then the fewest zones inside that many regions (with family
values: one value, then the same, where one value had room).

Variants (the constraint strings are built from the fleet as the submit filter sees it):

    tree              no constraint: topology/tree alone
    prefer_today      --prefer as policy.decide writes it (locality=prefer): one level until the cascade,
                      the cascade since (rows measured before it are one level)
    prefer_mixed      --prefer=[groups of every level that can ever hold the job, finest level first,
                      smallest group first inside a level] -- one matching OR across levels (family buckets
                      with families, then the bare family values as the coarsest alternatives)
    prefer_mixed_big  the same, largest group first inside a level
    prefer_mixed_fambig / _regbig  (fleets with family values) smallest first, but the bare family values
                      (and the region buckets) largest first
    region_asc/desc   --constraint=[regions that can ever hold it], smallest / largest first
    region_asc+prefer region_asc plus --prefer=[zones that can hold it|regions], finest first
    prefer_zonesets   the cascade's groups plus unions of 2-3 zones ``(zone_a|zone_b)`` as alternatives of
                      the same matching OR, ordered by (regions, zones) spanned, smallest first: the first
                      alternative with room is the placement with the fewest regions, then zones (see
                      ``zone_sets``); cut at Slurm's 64 alternatives / 1,024 characters from the tail
    filter_prefer     (--with-filter) sbatch --locality=prefer through the submit filter and SPANK plugin
    filter_region     (--with-filter) sbatch --locality=region through the filter
                      (with --with-filter every other variant and the filler job carry --locality=any)

Switch orders (topology.conf lines reordered, ``scontrol reconfigure``, checked in ``scontrol show
topology``): ``alpha`` (the file as generated, reordered by name), ``desc`` (depth first, the largest region,
zone and leaf first: what ``generate`` writes now), ``asc`` (the smallest first).

Fleets: ``five-zones`` (examples/benchmark-five-zones.yaml: 30 nodes, 2 regions of 3 and 2 zones of 6, racks
of 3), ``uneven`` (28 nodes, 3 regions of 14/11/3 nodes, zones of 8/7/4/3/3/3, racks of 1-4, names shuffled
across positions, torch-2.3/torch-2.4 with ``families: {torch: 'torch-*'}``, one rack mixed) and
``uneven-plain`` (the same without family values).

    python benchmarks/bench_placement.py [--patterns 20] [--sizes 4,6,8] [--fleets five-zones,uneven]
        [--orders alpha,desc,asc] [--variants A,B] [--seed 1] [--jsonl FILE] [--out FILE.md] [--with-filter]
        [--slurm native|24.11|26.05]

``--slurm`` runs the cluster on that release (docker-slurm/cluster up --slurm: the host's Slurm, or Debian
trixie's 24.11 / sid's 26.05 from the launcher's cached roots); every row records the release it ran on
(rows of files written before the option carry none and are read as 22.05, the host's then).
    python benchmarks/bench_placement.py --from-jsonl A.jsonl,B.jsonl --out ...   # re-summarize runs
    python benchmarks/bench_placement.py --model 22.05|24.11 [--patterns 500] ...  # no cluster: the model
    python benchmarks/bench_placement.py --model-check A.jsonl,B.jsonl   # does the model reproduce a run?
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import slurmctl  # noqa: E402

from slurm_topo.core import hostlist  # noqa: E402
from slurm_topo.core.topology import build_topology  # noqa: E402
from slurm_topo.inventory import load_inventories  # noqa: E402
from slurm_topo.policy import JobRequest, compile_policy, decide  # noqa: E402
from slurm_topo.reports.explain import _level_values  # noqa: E402

FAMILY_PREFIX = "torch-"


# ----------------------------------------------------------------------------------------------------
# fleets


def uneven_fleet(seed: int = 4242) -> dict[str, object]:
    """3 regions with 3/2/1 zones of 14/11/3 nodes, partial racks (1-4 nodes), two torch versions (one rack
    mixed), node names shuffled across the positions (so Slurm's node order says nothing about the tree)."""
    racks = [  # region, zone, group, [versions of its nodes]
        ("eu", "eu-1a", "g1", ["2.4"] * 4),
        ("eu", "eu-1a", "g2", ["2.3"] * 3),
        ("eu", "eu-1b", "g1", ["2.4", "2.4", "2.3", "2.3"]),
        ("eu", "eu-1c", "g1", ["2.3"] * 2),
        ("eu", "eu-1c", "g2", ["2.3"]),
        ("us", "us-1a", "g1", ["2.4"] * 4),
        ("us", "us-1a", "g2", ["2.4"] * 4),
        ("us", "us-1b", "g1", ["2.3"] * 3),
        ("ap", "ap-1a", "g1", ["2.4"] * 3),
    ]
    positions = [(r, z, g, v) for r, z, g, vs in racks for v in vs]
    names = [f"c{i:02d}" for i in range(1, len(positions) + 1)]
    random.Random(seed).shuffle(names)
    nodes = [
        {"name": n, "region": r, "zone": z, "network_group": g, "features": [f"{FAMILY_PREFIX}{v}"]}
        for n, (r, z, g, v) in sorted(zip(names, positions, strict=True))
    ]
    return {"policy": {"families": {"torch": f"{FAMILY_PREFIX}*"}}, "nodes": nodes}


def fleet_of(name: str) -> dict[str, object]:
    if name == "five-zones":
        data = yaml.safe_load((REPO / "examples" / "benchmark-five-zones.yaml").read_text())
        assert isinstance(data, dict)
        return data
    if name == "uneven":
        return uneven_fleet()
    if name == "uneven-plain":  # the same shape and names, no family values
        data = uneven_fleet()
        nodes = [{k: v for k, v in n.items() if k != "features"} for n in data["nodes"]]  # type: ignore[attr-defined]
        return {"nodes": nodes}
    raise SystemExit(f"bench_placement: unknown fleet {name!r}")


# ----------------------------------------------------------------------------------------------------
# the fleet as Slurm reports it


@dataclass
class Fleet:
    region: dict[str, str]  # node -> region label
    zone: dict[str, str]  # node -> zone label
    family: dict[str, str | None]  # node -> family value or None
    features: dict[str, tuple[str, ...]]

    @property
    def nodes(self) -> list[str]:
        return sorted(self.region)


def read_fleet(slurm: slurmctl.Slurm) -> Fleet:
    feats = slurm.all_node_features()
    region, zone, family = {}, {}, {}
    for node, fs in feats.items():
        (r,) = _level_values(fs, "region_")
        (z,) = _level_values(fs, "zone_")
        region[node], zone[node] = r, z
        fam = [f for f in fs if f.startswith(FAMILY_PREFIX)]
        family[node] = fam[0] if fam else None
    return Fleet(region, zone, family, feats)


def _fewest(nodes: Sequence[str], fleet: Fleet, n: int) -> tuple[int, int] | None:
    """(fewest regions, fewest zones inside that many regions) that ``nodes`` (free) allow for n nodes."""
    if len(nodes) < n:
        return None
    by_region: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for x in nodes:
        by_region[fleet.region[x]][fleet.zone[x]] += 1
    regions = list(by_region)
    for k in range(1, len(regions) + 1):
        best = None
        for combo in itertools.combinations(regions, k):
            sizes = sorted((c for r in combo for c in by_region[r].values()), reverse=True)
            if sum(sizes) < n:
                continue
            acc = zones = 0
            for s in sizes:
                acc += s
                zones += 1
                if acc >= n:
                    break
            best = zones if best is None else min(best, zones)
        if best is not None:
            return k, best
    return None


def _family_targets(free: Sequence[str], fleet: Fleet, n: int) -> tuple[tuple[int, int] | None, bool]:
    """(the fewest (regions, zones) with one family value, None when no value has room; whether one value's
    nodes in one region have room)."""
    by_fam: dict[str, list[str]] = defaultdict(list)
    for x in free:
        value = fleet.family[x]
        if value is not None:
            by_fam[value].append(x)
    same = [b for b in (_fewest(v, fleet, n) for v in by_fam.values()) if b is not None]
    region_bucket = any(
        sum(1 for x in v if fleet.region[x] == r) >= n
        for v in by_fam.values()
        for r in set(fleet.region.values())
    )
    return (min(same) if same else None), region_bucket


def spans(nodes: Sequence[str], fleet: Fleet) -> tuple[int, int]:
    return len({fleet.region[x] for x in nodes}), len({fleet.zone[x] for x in nodes})


# ----------------------------------------------------------------------------------------------------
# constraint forms


def groups_of(fleet: Fleet, prefix: str, family: bool) -> dict[str, set[str]]:
    """feature -> nodes of one level (``ng_``/``zone_``/``region_``): location features or family buckets."""
    out: dict[str, set[str]] = defaultdict(set)
    for node, fs in fleet.features.items():
        loc = _level_values(fs, prefix)
        value = fleet.family[node]
        for f in fs:
            if not f.startswith(prefix):
                continue
            is_bucket = f not in loc and value is not None and f.endswith("." + value)
            if is_bucket == family:
                out[f].add(node)
    return out


def bracket(groups: Mapping[str, set[str]], n: int, largest_first: bool = False) -> list[str]:
    """The groups that can ever hold n nodes, smallest first (name breaks ties), or largest first."""
    fit = [(len(v), k) for k, v in groups.items() if len(v) >= n]
    fit.sort(key=lambda x: (-x[0] if largest_first else x[0], x[1]))
    return [k for _, k in fit]


def mixed(fleet: Fleet, n: int, largest_first: bool | Sequence[str] = False) -> str | None:
    """One matching OR over every level that can ever hold n nodes, finest first; inside a level smallest
    first, or largest first (all levels, or those named: ``ng_``, ``zone_``, ``region_``, ``family``)."""
    family = any(v is not None for v in fleet.family.values())

    def big(level: str) -> bool:
        return largest_first if isinstance(largest_first, bool) else level in largest_first

    alts: list[str] = []
    for prefix in ("ng_", "zone_", "region_"):
        alts += bracket(groups_of(fleet, prefix, family), n, big(prefix))
    if family:  # the coarsest bucket: one family value anywhere
        fam: dict[str, set[str]] = defaultdict(set)
        for node, v in fleet.family.items():
            if v is not None:
                fam[v].add(node)
        alts += bracket(fam, n, big("family"))
    return "[" + "|".join(alts) + "]" if alts else None


def zone_sets(fleet: Fleet, n: int, max_zones: int = 3, limit: int = 64, chars: int = 1024) -> str | None:
    """One matching OR whose alternatives are the network groups, zones, unions of 2..``max_zones`` zones
    (``(zone_a|zone_b)``: Slurm 22.05 reads a parenthesised OR inside the bracket as one alternative) and
    regions that can ever hold n nodes, ordered by (regions spanned, zones spanned, level, size): a zone
    union comes before the region alternative when its zones lie in one region, after every region when
    they span several. Slurm takes the first alternative with room, so while the list is whole the job
    lands on the fewest regions, then the fewest zones, that the free nodes allow (up to ``max_zones``
    zones; beyond, the regions and then the plain tree decide). Cut from the tail at ``limit``
    alternatives / ``chars`` characters."""
    zones = groups_of(fleet, "zone_", False)
    regions = groups_of(fleet, "region_", False)
    region_of = {z: next(r for r, v in regions.items() if v >= nodes) for z, nodes in zones.items()}
    alts: list[tuple[tuple[int, int, int, int, str], str]] = []
    for g, v in groups_of(fleet, "ng_", False).items():
        if len(v) >= n:
            alts.append(((1, 1, 0, len(v), g), g))
    for z, v in zones.items():
        if len(v) >= n:
            alts.append(((1, 1, 1, len(v), z), z))
    for r, v in regions.items():
        if len(v) >= n:
            alts.append(((1, len(zones) + 1, 3, len(v), r), r))
    for k in range(2, max_zones + 1):
        for combo in itertools.combinations(sorted(zones), k):
            size = sum(len(zones[z]) for z in combo)
            if size >= n:
                spread = len({region_of[z] for z in combo})
                alts.append(((spread, k, 2, size, ",".join(combo)), "(" + "|".join(combo) + ")"))
    alts.sort(key=lambda a: a[0])
    kept: list[str] = []
    length = 2
    for _, text in alts:
        if len(kept) == limit or length + len(text) + (1 if kept else 0) > chars:
            break
        kept.append(text)
        length += len(text) + (1 if len(kept) > 1 else 0)
    return "[" + "|".join(kept) + "]" if kept else None


def prefer_today(inventory: Path, n: int) -> str | None:
    inv = load_inventories([inventory])
    data = compile_policy(inv, build_topology(inv), None, "bench")
    return decide(data, JobRequest(locality="prefer", min_nodes=n)).prefer


def variants(fleet: Fleet, inventory: Path, n: int, with_filter: bool = False) -> dict[str, list[str]]:
    out = _variants(fleet, inventory, n)
    if not with_filter:
        return out
    out = {k: ["--locality=any", *v] for k, v in out.items()}  # the filter leaves these alone
    out["filter_prefer"] = ["--locality=prefer"]
    out["filter_region"] = ["--locality=region"]
    return out


def _variants(fleet: Fleet, inventory: Path, n: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"tree": []}
    today = prefer_today(inventory, n)
    out["prefer_today"] = [f"--prefer={today}"] if today else []
    m = mixed(fleet, n)
    if m:
        out["prefer_mixed"] = [f"--prefer={m}"]
    zs = zone_sets(fleet, n)
    if zs:
        out["prefer_zonesets"] = [f"--prefer={zs}"]
    big = mixed(fleet, n, largest_first=True)
    if big:
        out["prefer_mixed_big"] = [f"--prefer={big}"]
    if any(
        v is not None for v in fleet.family.values()
    ):  # smallest first, but the family values largest first
        out["prefer_mixed_fambig"] = [f"--prefer={mixed(fleet, n, largest_first=('family',))}"]
        out["prefer_mixed_regbig"] = [f"--prefer={mixed(fleet, n, largest_first=('region_', 'family'))}"]
    family = any(
        v is not None for v in fleet.family.values()
    )  # with families the filter's groups are buckets
    regions = groups_of(fleet, "region_", family)
    asc, desc = bracket(regions, n), bracket(regions, n, largest_first=True)
    if asc:
        out["region_asc"] = ["--constraint=[" + "|".join(asc) + "]"]
        out["region_desc"] = ["--constraint=[" + "|".join(desc) + "]"]
        zr = "[" + "|".join(bracket(groups_of(fleet, "zone_", family), n) + asc) + "]"
        out["region_asc+prefer"] = [out["region_asc"][0], f"--prefer={zr}"]
    return out


# ----------------------------------------------------------------------------------------------------
# topology.conf orders


def parse_topology(text: str) -> list[tuple[str, list[str], list[str], str]]:
    """(name, nodes, switches, line) per SwitchName= line, in file order."""
    out = []
    for line in text.splitlines():
        s = line.split("#", 1)[0].strip()
        if not s.startswith("SwitchName="):
            continue
        kv = slurmctl.parse_kv_line(s)
        nodes = hostlist.expand(kv["Nodes"]) if "Nodes" in kv else []
        switches = kv["Switches"].split(",") if "Switches" in kv else []
        out.append((kv["SwitchName"], list(nodes), switches, s))
    return out


def reorder(text: str, order: str) -> str:
    """topology.conf with its switch lines in ``order``: alpha (each level by name, as generated before the
    larger-first order), desc or asc (each level depth first, by size)."""
    sw = {name: (nodes, kids) for name, nodes, kids, _ in parse_topology(text)}
    size: dict[str, int] = {}

    def count(name: str) -> int:
        if name not in size:
            nodes, kids = sw[name]
            size[name] = len(nodes) + sum(count(k) for k in kids)
        return size[name]

    sign = -1 if order == "desc" else 1
    level: dict[str, int] = {}
    seq: list[str] = []

    def walk(name: str) -> int:
        kids = sorted(sw[name][1], key=lambda k: (sign * count(k), k))
        level[name] = 1 + max((walk(k) for k in kids), default=-1)
        seq.append(name)
        return level[name]

    walk("root")
    pos = {name: i for i, name in enumerate(seq)}
    lines = []

    def natural(name: str) -> list[object]:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

    for name in sorted(seq, key=lambda x: (level[x], natural(x) if order == "alpha" else pos[x])):
        nodes, kids = sw[name]
        kids = sorted(kids, key=natural) if order == "alpha" else sorted(kids, key=lambda k: pos[k])
        lines.append(
            f"SwitchName={name} Nodes={hostlist.compress(nodes)}"
            if nodes
            else f"SwitchName={name} Switches={','.join(kids)}"
        )
    head = [ln for ln in text.splitlines() if ln.startswith("#")]
    return "\n".join([*head, *lines]) + "\n"


# ----------------------------------------------------------------------------------------------------
# measuring


@dataclass
class Row:
    fleet: str
    order: str
    pattern: int
    size: int
    variant: str
    nodes: list[str] = field(default_factory=list)
    state: str = ""  # running | pending | rejected
    regions: int = 0
    zones: int = 0
    best: tuple[int, int] | None = None
    best_same: tuple[int, int] | None = None  # fewest (regions, zones) with one family value, if any had room
    mixed_family: bool = False
    same_family_possible: bool = False
    same_region_bucket_possible: bool = False
    seconds: float = 0.0
    slurm: str = "22.05"  # the release the cluster ran (major.minor)
    asked: str = ""  # the job's Prefer= / Features= as slurmctld holds them (what the submit filter wrote)


def wait_idle(slurm: slurmctl.Slurm, nodes: Sequence[str], timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = slurm.node_states()
        if all(states.get(n) == "idle" for n in nodes):
            return
        time.sleep(0.05)
    raise AssertionError(f"nodes not idle after {timeout}s: {[(n, states.get(n)) for n in nodes]}")


def measure(
    slurm: slurmctl.Slurm, args: Sequence[str], n: int, run_timeout: float
) -> tuple[str, list[str], str]:
    """Submit one exclusive n-node job; its state after run_timeout, its nodes, and the constraint Slurm
    holds for it (``Prefer=…`` / ``Features=…``: what the submit filter wrote; a running 22.05 job that got
    its preferred features shows them as Features=)."""
    try:
        job = slurm.submit("--exclusive", f"-N{n}", *args, "--wrap", "sleep 100000", timeout=20)
    except slurmctl.SlurmCommandError as e:
        return "rejected: " + str(e).splitlines()[-1][-160:], [], ""
    end = time.monotonic() + run_timeout
    state, nodes, asked = "pending", [], ""
    while time.monotonic() < end:
        info = slurm.job(job)
        asked = " ".join(
            f"{k}={info[k]}" for k in ("Prefer", "Features") if info.get(k, "(null)") != "(null)"
        )
        if info.get("JobState") == "RUNNING":
            nodes = list(slurm.allocation_of(job).nodes)
            state = "running"
            break
        time.sleep(0.05)
    slurm.cancel(job)
    if nodes:
        wait_idle(slurm, nodes)
    else:
        end = time.monotonic() + 20
        while slurm.state(job) not in ("", *slurmctl.TERMINAL_STATES) and time.monotonic() < end:
            time.sleep(0.05)
    return state, nodes, asked


def _shape(fleet: Fleet) -> dict[str, dict[str, int]]:
    """Nodes per zone, per region."""
    return {
        r: {
            z: sum(1 for x in fleet.nodes if fleet.zone[x] == z)
            for z in sorted(set(fleet.zone.values()))
            if any(fleet.region[x] == r and fleet.zone[x] == z for x in fleet.nodes)
        }
        for r in sorted(set(fleet.region.values()))
    }


def _busy_patterns(a: argparse.Namespace, name: str, fleet: Fleet) -> list[list[str]]:
    """``a.patterns`` seeded busy sets, each 30–60 % of the fleet."""
    rng = random.Random(f"{a.seed}-{name}")
    total = len(fleet.nodes)
    patterns = []
    for _ in range(a.patterns):
        busy_n = rng.randint(int(total * 0.3), int(total * 0.6))
        patterns.append(sorted(rng.sample(fleet.nodes, busy_n)))
    return patterns


@dataclass
class _Pattern:
    """One busy pattern under one switch order: what each measured job's row records."""

    fleet_name: str
    order: str
    index: int
    busy: list[str]
    release: str


def _measure_pattern(
    slurm: slurmctl.Slurm,
    fleet: Fleet,
    a: argparse.Namespace,
    pat: _Pattern,
    forms: dict[int, dict[str, list[str]]],
    names: set[str] | None,
    rows: list[Row],
) -> None:
    """Fill the pattern's busy nodes with one job, then measure every size and variant on the rest."""
    filler = None
    if pat.busy:
        filler = slurm.submit(
            *(["--locality=any"] if a.with_filter else []),
            "--exclusive",
            f"-N{len(pat.busy)}",
            f"--nodelist={','.join(pat.busy)}",
            "--wrap",
            "sleep 100000",
        )
        slurm.wait_state(filler, "RUNNING", timeout=30)
    free = [x for x in fleet.nodes if x not in pat.busy]
    for n in a.sizes:
        best = _fewest(free, fleet, n)
        best_same, region_bucket = _family_targets(free, fleet, n)
        for vname, args in forms[n].items():
            if names is not None and vname not in names:
                continue
            t = time.monotonic()
            state, nodes, asked = measure(slurm, args, n, a.run_timeout)
            row = Row(
                pat.fleet_name,
                pat.order,
                pat.index,
                n,
                vname,
                nodes,
                state,
                best=best,
                seconds=time.monotonic() - t,
                slurm=pat.release,
                asked=asked,
            )
            if nodes:
                row.regions, row.zones = spans(nodes, fleet)
                row.mixed_family = len({fleet.family[x] for x in nodes}) > 1
            row.best_same = best_same
            row.same_family_possible = best_same is not None
            row.same_region_bucket_possible = region_bucket
            rows.append(row)
            if a.verbose:
                print(json.dumps(row.__dict__), flush=True)
    if filler:
        slurm.cancel(filler)
        wait_idle(slurm, pat.busy)


def _set_order(cluster: slurmctl.Cluster, generated: str, order: str) -> None:
    """Write topology.conf with its switches in ``order``, reconfigure, and check Slurm reads that order."""
    slurm = cluster.slurm
    (cluster.etc / "topology.conf").write_text(reorder(generated, order))
    slurm.reconfigure(cluster.version)
    live = [ln.split()[0] for ln in slurm.out("scontrol", "show", "topology").splitlines() if ln]
    want = [f"SwitchName={s[0]}" for s in parse_topology(reorder(generated, order))]
    assert live == want, f"order {order}: scontrol show topology {live} != {want}"


def run_fleet(name: str, a: argparse.Namespace, rows: list[Row]) -> dict[str, object]:
    """Start a cluster of fleet ``name``; per switch order and busy pattern measure every size and variant
    (:func:`_measure_pattern`); stop it. Returns the fleet's description for the report."""
    work = Path(f"/tmp/slurm-topo-bench-placement-{name}-{a.slurm}-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.chmod(work, 0o755)
    fleet_file = work / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump(fleet_of(name), sort_keys=False))
    t0 = time.monotonic()
    extra = ["--with-filter"] if a.with_filter else []
    extra += ["--slurm", a.slurm]
    cluster = slurmctl.start_cluster(work / "cluster", "--inventory", str(fleet_file), *extra, nodes_max=40)
    info: dict[str, object] = {"fleet": name}
    release = f"{cluster.version[0]}.{cluster.version[1]:02d}"
    info["slurm"] = release
    try:
        slurm = cluster.slurm
        fleet = read_fleet(slurm)
        inventory = cluster.etc / "inventory.yaml"
        generated = (cluster.etc / "topology.conf").read_text()
        info["nodes"] = len(fleet.nodes)
        info["shape"] = _shape(fleet)
        forms = {n: variants(fleet, inventory, n, a.with_filter) for n in a.sizes}
        info["forms"] = forms
        patterns = _busy_patterns(a, name, fleet)
        for order in a.orders:
            _set_order(cluster, generated, order)
            names = a.order_variants if order != "alpha" else a.variants
            for p, busy in enumerate(patterns):
                _measure_pattern(slurm, fleet, a, _Pattern(name, order, p, busy, release), forms, names, rows)
                print(
                    f"{name} {order} pattern {p + 1}/{len(patterns)} done at {time.monotonic() - t0:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        slurmctl.stop_cluster(work / "cluster")
        shutil.rmtree(work, ignore_errors=True)
    info["seconds"] = round(time.monotonic() - t0, 1)
    return info


# ----------------------------------------------------------------------------------------------------
# a model of Slurm's leaf choice (topology/tree, whole nodes of one weight), checked against real runs


class TreeModel:
    """What cons_tres ``_eval_nodes_topo`` (22.05; ``eval_nodes_tree.c`` from 24.11, the same in 26.05) picks
    for an exclusive n-node job of one node weight, from topology.conf's lines and Slurm's node order.

    The top switch is the highest-level switch with n free nodes (the root). Leaves are then added one at a
    time, scanning them in line order: the first with free nodes is the default and a later one replaces it
    when it is at the same distance (summed hops to the leaves taken) and fits the remainder more tightly
    (``_topo_compare_switches``: climbing to the parents while neither fits; the larger when neither does),
    or when it is closer and (22.05) fits no worse / (24.11+) fits the remainder at the level compared.
    24.11+ also subtract the nodes taken from the leaf's ancestors. Nodes of a leaf are taken in node order.
    ``--model-check`` replays measured rows against it."""

    def __init__(self, conf: str, node_order: Sequence[str], release: str) -> None:
        self.new = release != "22.05"
        lines = parse_topology(conf)
        self.names = [name for name, _, _, _ in lines]
        index = {name: i for i, name in enumerate(self.names)}
        self.kids = [[index[k] for k in kids] for _, _, kids, _ in lines]
        self.parent = [0] * len(lines)  # 22.05 leaves the root's parent at 0 (calloc)
        for i, kids in enumerate(self.kids):
            for k in kids:
                self.parent[k] = i
        self.root = next(i for i in range(len(lines)) if all(i not in ks for ks in self.kids))
        self.level: list[int] = []
        self.nodes: list[set[str]] = []
        for i, (_, nodes, _, _) in enumerate(lines):
            self.level.append(0 if nodes else 1 + max(self.level[k] for k in self.kids[i]))
            self.nodes.append(set(nodes).union(*(self.nodes[k] for k in self.kids[i])))
        # parents are listed after their children (generate's order and reorder()'s)
        self.rank = {x: i for i, x in enumerate(node_order)}
        self.dist = [[self._hops(i, j) for j in range(len(lines))] for i in range(len(lines))]

    def _hops(self, i: int, j: int) -> int:
        up_i = [i]
        while up_i[-1] != self.root:
            up_i.append(self.parent[up_i[-1]])
        up_j = [j]
        while up_j[-1] != self.root:
            up_j.append(self.parent[up_j[-1]])
        common = next(x for x in up_i if x in up_j)
        return up_i.index(common) + up_j.index(common)

    def _compare(self, i: int, j: int, rem: int, cnt: list[int]) -> tuple[int, bool]:
        i_fit = False
        while True:
            i_fit, j_fit = cnt[i] >= rem, cnt[j] >= rem
            if i_fit and j_fit:
                if cnt[i] != cnt[j]:
                    return (1 if cnt[i] < cnt[j] else -1), i_fit
                break
            if i_fit or j_fit:
                return (1 if i_fit else -1), i_fit
            if (self.parent[i] != i or self.parent[j] != j) and self.parent[i] != self.parent[j]:
                i, j = self.parent[i], self.parent[j]
                continue
            break
        if cnt[i] != cnt[j]:
            return (1 if cnt[i] > cnt[j] else -1), i_fit
        if self.level[i] != self.level[j]:
            return (1 if self.level[i] < self.level[j] else -1), i_fit
        return 0, i_fit

    def select(self, avail: set[str], n: int) -> list[str] | None:
        if len(avail) < n:
            return None
        count = [len(nodes & avail) for nodes in self.nodes]
        tops = [i for i in range(len(count)) if count[i] >= n]
        top = max(tops, key=lambda i: (self.level[i], i))
        cnt = [len(nodes & avail & self.nodes[top]) for nodes in self.nodes]
        dist = [0] * len(cnt)
        used: set[int] = set()
        chosen: list[str] = []
        while len(chosen) < n:
            rem, best = n - len(chosen), -1
            for i in range(len(cnt)):
                if i in used or not cnt[i] or self.level[i] != 0:
                    continue
                if best == -1:
                    best = i
                    continue
                tcs, i_fit = self._compare(i, best, rem, cnt)
                closer_ok = i_fit if self.new else tcs >= 0
                if (dist[i] < dist[best] and closer_ok) or (dist[i] == dist[best] and tcs > 0):
                    best = i
            if best == -1:
                return None
            dist = [d + self.dist[best][k] for k, d in enumerate(dist)]
            take = sorted(self.nodes[best] & avail & self.nodes[top], key=self.rank.__getitem__)[:rem]
            chosen += take
            if self.new and len(chosen) < n:
                k, taken = best, cnt[best]
                while True:
                    cnt[k] = max(0, cnt[k] - taken)
                    if k == self.root:
                        break
                    k = self.parent[k]
            cnt[best] = 0
            used.add(best)
        return chosen


def alternatives(form: str, features: Mapping[str, set[str]]) -> list[set[str]]:
    """The node sets of a matching OR's alternatives (``[a|(b|c)|d]``), in order."""
    out, depth, cur = [], 0, ""
    for ch in form.strip("[]") + "|":
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            out.append(set().union(*(features.get(f, set()) for f in cur.strip("()").split("|"))))
            cur = ""
        else:
            cur += ch
    return out


def model_place(
    model: TreeModel, free: set[str], n: int, prefer: Sequence[set[str]], required: Sequence[set[str]] = ()
) -> list[str] | None:
    """Slurm's order: the --prefer alternatives (inside the required one), then the required bracket's
    alternatives, then (no --constraint) all free nodes."""
    bases = [free & r for r in required] or [free]
    for alt in prefer:
        for base in bases:
            got = model.select(base & alt, n)
            if got:
                return got
    for base in bases:
        got = model.select(base, n)
        if got:
            return got
    return None


def model_fleet(name: str, work: Path) -> tuple[Fleet, str, Path, list[str]]:
    """The fleet as the test cluster sees it, from ``slurm-topo generate`` (one node line per node, in
    name order: the launcher's inventory order for these fleets)."""
    work.mkdir(parents=True, exist_ok=True)
    inventory = work / f"{name}.yaml"
    inventory.write_text(yaml.safe_dump(fleet_of(name), sort_keys=False))
    out = work / name
    proc = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "generate", "--inventory", str(inventory), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench_placement: generate failed: {proc.stderr.strip()}")
    feats: dict[str, tuple[str, ...]] = {}
    for line in (out / "slurm-topo-nodes.conf").read_text().splitlines():
        if line.startswith("NodeName="):
            kv = slurmctl.parse_kv_line(line)
            for x in hostlist.expand(kv["NodeName"]):
                feats[x] = tuple(kv.get("Features", "").split(","))
    region = {x: min(_level_values(fs, "region_")) for x, fs in feats.items()}
    zone = {x: min(_level_values(fs, "zone_")) for x, fs in feats.items()}
    family = {x: next((f for f in fs if f.startswith(FAMILY_PREFIX)), None) for x, fs in feats.items()}
    fleet = Fleet(region, zone, family, feats)
    order = sorted(feats, key=lambda x: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", x)])
    return fleet, (out / "topology.conf").read_text(), inventory, order


def model_forms(fleet: Fleet, inventory: Path, n: int) -> dict[str, tuple[list[str], list[str]]]:
    """variant -> (--prefer alternatives as strings, --constraint alternatives) as the model reads them."""
    family = any(v is not None for v in fleet.family.values())
    regions = bracket(groups_of(fleet, "region_", family), n)
    zones = bracket(groups_of(fleet, "zone_", family), n)
    today = prefer_today(inventory, n)
    sets = zone_sets(fleet, n)
    return {
        "tree": ([], []),
        "filter_prefer": ([today] if today else [], []),
        "filter_region": (["[" + "|".join(zones + regions) + "]"], regions),
        "prefer_zonesets": ([sets] if sets else [], []),
    }


def run_model(name: str, a: argparse.Namespace, rows: list[Row]) -> dict[str, object]:
    """The same seeded busy patterns as run_fleet, placed by the model instead of a cluster."""
    with tempfile.TemporaryDirectory(prefix="slurm-topo-bench-model-") as tmp:
        fleet, conf, inventory, order = model_fleet(name, Path(tmp))
        return _run_model(name, a, rows, fleet, conf, inventory, order)


def _run_model(
    name: str,
    a: argparse.Namespace,
    rows: list[Row],
    fleet: Fleet,
    conf: str,
    inventory: Path,
    order: list[str],
) -> dict[str, object]:
    features: dict[str, set[str]] = defaultdict(set)
    for x, fs in fleet.features.items():
        for f in fs:
            features[f].add(x)
    rng = random.Random(f"{a.seed}-{name}")
    total = len(fleet.nodes)
    patterns = []
    for _ in range(a.patterns):
        busy_n = rng.randint(int(total * 0.3), int(total * 0.6))
        patterns.append(sorted(rng.sample(fleet.nodes, busy_n)))
    for order_name in a.orders:
        model = TreeModel(reorder(conf, order_name), order, a.model)
        for n in a.sizes:
            forms = model_forms(fleet, inventory, n)
            for p, busy in enumerate(patterns):
                free = set(fleet.nodes) - set(busy)
                for vname, (prefer, required) in forms.items():
                    if a.variants is not None and vname not in a.variants:
                        continue
                    pref = [s for form in prefer for s in alternatives(form, features)]
                    req = alternatives("[" + "|".join(required) + "]", features) if required else []
                    if req and not any(len(free & r) >= n for r in req):
                        rows.append(
                            Row(name, order_name, p, n, vname, [], "pending", slurm=f"model {a.model}")
                        )
                        continue
                    nodes = model_place(model, free, n, pref, req) or []
                    row = Row(name, order_name, p, n, vname, nodes, "running" if nodes else "pending")
                    row.best, row.slurm = _fewest(sorted(free), fleet, n), f"model {a.model}"
                    row.best_same, row.same_region_bucket_possible = _family_targets(sorted(free), fleet, n)
                    row.same_family_possible = row.best_same is not None
                    if nodes:
                        row.regions, row.zones = spans(nodes, fleet)
                        row.mixed_family = len({fleet.family[x] for x in nodes}) > 1
                    rows.append(row)
    return {"fleet": name, "model": a.model}


def model_check(paths: Sequence[str]) -> list[str]:
    """Replay measured rows (tree, filter_prefer, filter_region, prefer_zonesets) with the model of their
    release: how many placements it reproduces node for node."""
    out = []
    cache: dict[str, tuple[Fleet, str, Path, list[str]]] = {}
    tally: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    tmp = tempfile.TemporaryDirectory(prefix="slurm-topo-bench-model-")
    work = Path(tmp.name)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            d = json.loads(line)
            if (
                d["state"] != "running"
                or d["order"] != "desc"
                or d["variant"]
                not in (
                    "tree",
                    "filter_prefer",
                    "filter_region",
                    "prefer_zonesets",
                )
            ):
                continue
            release = d.get("slurm", "22.05")
            if d["fleet"] not in cache:
                cache[d["fleet"]] = model_fleet(d["fleet"], work)
            fleet, conf, inventory, order = cache[d["fleet"]]
            features: dict[str, set[str]] = defaultdict(set)
            for x, fs in fleet.features.items():
                for f in fs:
                    features[f].add(x)
            rng = random.Random(f"1-{d['fleet']}")
            total = len(fleet.nodes)
            busy: list[str] = []
            for _ in range(d["pattern"] + 1):
                busy = sorted(rng.sample(fleet.nodes, rng.randint(int(total * 0.3), int(total * 0.6))))
            model = TreeModel(reorder(conf, "desc"), order, release)
            prefer, required = model_forms(fleet, inventory, d["size"])[d["variant"]]
            pref = [s for form in prefer for s in alternatives(form, features)]
            req = alternatives("[" + "|".join(required) + "]", features) if required else []
            got = model_place(model, set(fleet.nodes) - set(busy), d["size"], pref, req)
            tally[(release, d["fleet"], d["variant"])][
                0 if sorted(got or []) == sorted(d["nodes"]) else 1
            ] += 1
    tmp.cleanup()
    out.append("| Slurm | fleet | variant | placements the model reproduces |")
    out.append("|---|---|---|---|")
    for (release, fleet_name, variant), (ok, bad) in sorted(tally.items()):
        out.append(f"| {release} | {fleet_name} | {variant} | {ok}/{ok + bad} |")
    return out


# ----------------------------------------------------------------------------------------------------
# report


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} % ({k}/{n})" if n else "-"


def _family_counts(ran: Sequence[Row]) -> tuple[int, int, int]:
    """With family values the target is the fewest (regions, zones) of one value where one had room, else
    the fewest overall: the jobs that met it, those of them one value had room for, and how many had room."""
    roomy = [r for r in ran if r.best_same]
    ok_same = sum(1 for r in roomy if not r.mixed_family and (r.regions, r.zones) == r.best_same)
    ok_fam = sum(
        1
        for r in ran
        if (r.best_same and not r.mixed_family and (r.regions, r.zones) == r.best_same)
        or (not r.best_same and r.best and (r.regions, r.zones) == r.best)
    )
    return ok_fam, ok_same, len(roomy)


def _mean_spread(ran: Sequence[Row]) -> str:
    """Mean regions / zones the jobs spanned, and (in brackets) the fewest possible."""
    if not ran:
        return "-"
    n = len(ran)
    return (
        f"{sum(r.regions for r in ran) / n:.2f} / {sum(r.zones for r in ran) / n:.2f} "
        f"({sum(r.best[0] for r in ran if r.best) / n:.2f} / "
        f"{sum(r.best[1] for r in ran if r.best) / n:.2f})"
    )


def _summary_row(key: tuple[str, str, str, int, str], rs: Sequence[Row]) -> str:
    release, fleet, order, size, variant = key
    ran = [r for r in rs if r.state == "running"]
    ok_r = sum(1 for r in ran if r.best and r.regions == r.best[0])
    ok_rz = sum(1 for r in ran if r.best and (r.regions, r.zones) == r.best)
    fam = any(r.same_family_possible or r.mixed_family for r in rs)
    ok_fam, ok_same, roomy = _family_counts(ran) if fam else (0, 0, 0)
    pend = sum(1 for r in rs if r.state != "running")
    mixed_n = sum(1 for r in ran if r.mixed_family)
    avoid = sum(1 for r in ran if r.mixed_family and r.same_family_possible)
    return (
        f"| {release} | {fleet} | {order} | {size} | {variant} "
        f"| {pct(ok_r, len(ran))} | {pct(ok_rz, len(ran))} "
        f"| {pct(ok_fam, len(ran)) if fam else '-'} "
        f"| {pct(ok_same, roomy) if fam else '-'} | {_mean_spread(ran)} "
        f"| {pct(pend, len(rs))} | {pct(mixed_n, len(ran)) if fam else '-'} "
        f"| {pct(avoid, len(ran)) if fam else '-'} |"
    )


def summarize(rows: Sequence[Row]) -> list[str]:
    """One table row per (Slurm, fleet, order, size, variant): see :func:`_summary_row`."""
    keys: dict[tuple[str, str, str, int, str], list[Row]] = defaultdict(list)
    for r in rows:
        keys[(r.slurm, r.fleet, r.order, r.size, r.variant)].append(r)
    out = [
        "| Slurm | fleet | order | N | variant | fewest regions | fewest regions, then zones "
        "| one family value, then fewest regions and zones | … of the jobs one value had room for "
        "| mean regions / zones (best) | not started | mixed family values | … although one value had room |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    out += [_summary_row(key, rs) for key, rs in sorted(keys.items(), key=lambda kv: kv[0])]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--patterns", type=int, default=20)
    p.add_argument("--sizes", default="4,6,8")
    p.add_argument("--fleets", default="five-zones,uneven")
    p.add_argument("--orders", default="alpha,desc,asc")
    p.add_argument(
        "--order-variants",
        default="tree,region_asc,prefer_mixed",
        help="variants measured under the non-alpha orders (all of them under alpha)",
    )
    p.add_argument(
        "--variants", default=None, help="only these variants under the alpha order (default: all)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--run-timeout", type=float, default=12.0, help="seconds a job may pend before it counts as pending"
    )
    p.add_argument("--out", default=None)
    p.add_argument("--jsonl", default=None, help="also write every measured job as one JSON line")
    p.add_argument("--from-jsonl", default=None, help="summarize these --jsonl files instead of measuring")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument(
        "--slurm",
        default="native",
        choices=("native", "24.11", "26.05"),
        help="the Slurm release to run (docker-slurm/cluster up --slurm; default: the host's)",
    )
    p.add_argument(
        "--with-filter",
        action="store_true",
        help="start the cluster with the submit filter and SPANK plugin; adds filter_prefer/filter_region",
    )
    p.add_argument(
        "--model",
        default=None,
        choices=("22.05", "24.11"),
        help="place the jobs with the model of that release's leaf choice (24.11 also stands for 26.05) "
        "instead of a cluster: variants tree, filter_prefer, filter_region, prefer_zonesets; seconds",
    )
    p.add_argument(
        "--model-check",
        default=None,
        help="replay these --jsonl files with the model; print what it reproduces",
    )
    a = p.parse_args(argv)
    a.sizes = [int(x) for x in a.sizes.split(",")]
    a.orders = a.orders.split(",")
    a.order_variants = set(a.order_variants.split(","))
    a.variants = set(a.variants.split(",")) if a.variants else None
    rows: list[Row] = []
    infos: list[dict[str, object]] = []
    t0 = time.monotonic()
    if a.model_check:
        print("\n".join(model_check(a.model_check.split(","))))
        return 0
    if a.model:
        for name in a.fleets.split(","):
            infos.append(run_model(name, a, rows))
    elif a.from_jsonl:  # re-summarize earlier runs (several files: one per fleet run side by side)
        for path in a.from_jsonl.split(","):
            for line in Path(path).read_text().splitlines():
                d = json.loads(line)
                for k in ("best", "best_same"):
                    d[k] = tuple(d[k]) if d[k] else None
                rows.append(Row(**d))
    else:
        for name in a.fleets.split(","):
            infos.append(run_fleet(name, a, rows))
    table = summarize(rows)
    print("\n".join(table))
    if a.jsonl:
        Path(a.jsonl).write_text("".join(json.dumps(r.__dict__) + "\n" for r in rows))
    if a.out:
        cmd = "python benchmarks/bench_placement.py " + " ".join(sys.argv[1:] if argv is None else argv)
        text = [
            "# Placement on real Slurm "
            + ", ".join(sorted({r.slurm for r in rows}))
            + ": constraint forms and switch orders",
            "",
            f"Command: `{cmd}` ({time.monotonic() - t0:.0f} s)",
            "",
            *table,
            "",
            "Fleets and forms:",
            "",
            "```",
            *(json.dumps(i, sort_keys=True) for i in infos),
            "```",
        ]
        Path(a.out).write_text("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
