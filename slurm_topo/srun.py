"""``gpulayer-srun``: topology-ordered ranks and per-task NVLink binding, inside a Slurm allocation.

``gpulayer-srun [OPTIONS] [SRUN OPTIONS] -- COMMAND…`` reads the allocation (``scontrol show job -d``), each node's
GPU links (the ``Links=`` of the gres.conf next to slurm.conf, or ``--topology`` a ``nvidia-smi topo -m`` capture)
and each node's place in the switch tree (``scontrol show topology``), computes one plan and runs the real ``srun``
with ``-m arbitrary`` and ``SLURM_HOSTFILE`` (one line per rank). Every task goes through
:mod:`slurm_topo.srun_shim`, which sets ``CUDA_VISIBLE_DEVICES`` to its TP group's GPUs in TP-rank order and
``LOCAL_RANK`` to its TP rank.

The plan (:func:`plan_srun`, pure):

1. *Rank coordinates*: ``--order`` lists the dimensions fastest first. Megatron's default ``tp-cp-ep-dp-pp``:
   ``rank = tp + TP·(dp + DP·pp)`` (cp = ep = 1 here): consecutive ranks form a TP group, a whole DP replica set of
   one stage comes before the next stage. ``tp-pp-dp``: ``rank = tp + TP·(pp + PP·dp)``: one pipeline's stages are
   consecutive (DeepSpeed/torchtitan style).
2. *TP groups → GPUs*: on every node, TP-group GPU sets are carved out of the allocated GPUs one after the other by
   ``pick_devices`` (best-connected free set, so one NVLink island when one is free), disjoint by construction.
   A node without link data gets the lowest indices (one warning line for all such nodes).
3. *Pipelines → slots*: pipeline ``d`` (the PP stages of DP replica ``d``) takes ``PP`` group slots in the smallest
   subtree that still has that many free: one node, else one leaf switch, else the lowest common switch; first
   fit in allocation order. Stage ``s`` gets the ``s``-th of those slots. DP replicas spread across.
4. *srun*: ``srun -m arbitrary -N <nodes> -n <ranks> [passed options] python -m slurm_topo.srun_shim -- COMMAND``
   with ``SLURM_HOSTFILE``; on Slurm 23.11+ with constrained devices also ``--gpu-bind=mask_gpu:…`` and
   ``--gres-flags=allow-task-sharing`` when every node has the same per-task masks (22.05 has no task sharing:
   a bound task would lose NVLink to its peers, so only the shim binds there).

Indices: ``CUDA_VISIBLE_DEVICES`` is local (the rank of the global index in the node's sorted allocated list) when
``TaskPlugin`` includes ``task/cgroup`` and cgroup.conf has ``ConstrainDevices=yes``; global otherwise.
``--local-indices`` / ``--global-indices`` override the detection.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from . import hostlist, version
from .entry import run_entry
from .errors import CommandError, InputError, OutputError, ParseError, UsageError
from .gpu.links import islands
from .gpu.model import GpuTopology
from .gpu.pick import pick_devices
from .gpu.topo import parse_topo_matrix
from .runner import Runner, SubprocessRunner
from .slurmconf import parse_gres_gpus, parse_topology_conf
from .srun_shim import GROUPS_VAR, RANKS_VAR

PROG = "gpulayer-srun"
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
_DIMS = ("tp", "cp", "ep", "dp", "pp")

#: srun options the plan decides; refused by name (long forms, and the short letters below)
REFUSED_LONG = ("--ntasks", "--nodes", "--ntasks-per-node", "--distribution", "--nodelist", "--gpu-bind")
REFUSED_SHORT = {"n": "-n/--ntasks", "N": "-N/--nodes", "m": "-m/--distribution", "w": "-w/--nodelist"}
#: srun short options that take no value (others take one: the rest of the token or the next token)
_SHORT_FLAGS = frozenset("hHklOQsuvVXZEI")
#: srun environment inputs that would contradict the plan; removed from srun's environment
UNSET_ENV = ("SLURM_NTASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_GPU_BIND", "SLURM_HOSTFILE")


# --------------------------------------------------------------------------------------------------
# reading the allocation


@dataclass(frozen=True, slots=True)
class Allocation:
    """A job's nodes (in Slurm's order) and each node's allocated GPU indices (sorted)."""

    job_id: str
    nodes: tuple[str, ...]
    gpus: Mapping[str, tuple[int, ...]]


_GRES_IDX_RE = re.compile(r"gpu[^,(\s]*\(IDX:([0-9,-]*)\)")


def parse_job_detail(text: str, source: str = "scontrol show job -d") -> Allocation:
    """``scontrol show job -d <id>`` → :class:`Allocation` (``Nodes=… GRES=gpu:h100:4(IDX:0-3)`` detail lines)."""
    job_id = re.search(r"\bJobId=(\S+)", text)
    nodelist = re.search(r"(?<![A-Za-z])NodeList=(\S+)", text)
    if not job_id or not nodelist or nodelist.group(1) == "(null)":
        raise ParseError(source, None, "no JobId= and NodeList= (is the job running?)")
    nodes = tuple(hostlist.expand(nodelist.group(1)))
    gpus: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"Nodes=(\S+)", line)
        if not m:
            continue
        idx: list[int] = []
        for g in _GRES_IDX_RE.finditer(line):
            idx.extend(hostlist.expand_numbers(g.group(1)))
        for node in hostlist.expand(m.group(1)):
            gpus[node] = tuple(sorted(set(idx)))
    return Allocation(job_id.group(1), nodes, {n: gpus.get(n, ()) for n in nodes})


def parse_show_config(text: str) -> dict[str, str]:
    """``scontrol show config`` → {key: value} (``Key = value`` lines)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def devices_constrained(config: Mapping[str, str], cgroup_conf: str | None) -> bool:
    """True when CUDA_VISIBLE_DEVICES holds local indices: task/cgroup and ``ConstrainDevices=yes``."""
    if "task/cgroup" not in config.get("TaskPlugin", ""):
        return False
    for line in (cgroup_conf or "").splitlines():
        m = re.match(r"\s*ConstrainDevices\s*=\s*(\S+)", line.split("#", 1)[0], re.IGNORECASE)
        if m:
            return m.group(1).lower() == "yes"
    return False


def parse_slurm_version(text: str) -> tuple[int, int] | None:
    try:
        return version.parse_slurm_version(text)
    except InputError:
        return None


def parse_gres_links(text: str, source: str = "gres.conf") -> dict[str, GpuTopology]:
    """Per node, the GPU×GPU link classes from the ``Links=`` of its ``Name=gpu`` lines (index = line order).

    ``Links=`` counts NVLinks per peer: ``n > 0`` → ``NV<n>``, ``0`` → no NVLink (``SYS``: the PCIe path is not in
    gres.conf). Nodes whose GPU lines carry no ``Links=`` are left out.
    """
    out: dict[str, GpuTopology] = {}
    for node, lines in parse_gres_gpus(text, source=source).items():
        if any("links" not in line for line in lines):
            continue
        n = len(lines)
        matrix = []
        for i, line in enumerate(lines):
            try:
                r = [int(x) for x in line["links"].split(",")]
            except ValueError:
                raise ParseError(source, None, f"bad Links={line['links']} for {node}") from None
            if len(r) != n or r[i] != -1:
                raise ParseError(
                    source,
                    None,
                    f"{node}: GPU {i} has Links={line['links']}, expected {n} "
                    "entries with -1 at its own index",
                )
            matrix.append(tuple("X" if j == i else (f"NV{c}" if c > 0 else "SYS") for j, c in enumerate(r)))
        out[node] = GpuTopology(gpus=tuple(range(n)), matrix=tuple(matrix), source=f"{source} Links=")
    return out


@dataclass(frozen=True, slots=True)
class Tree:
    """The switch tree: per node its leaf switch; per switch its parent and level."""

    leaf: Mapping[str, str] = field(default_factory=dict)
    parent: Mapping[str, str] = field(default_factory=dict)
    level: Mapping[str, int] = field(default_factory=dict)

    def path(self, node: str) -> tuple[str, ...]:
        """Switches above ``node``, lowest first (empty when the node is on no switch)."""
        out: list[str] = []
        sw = self.leaf.get(node)
        while sw is not None and sw not in out:
            out.append(sw)
            sw = self.parent.get(sw)
        return tuple(out)


def parse_scontrol_topology(text: str) -> Tree:
    """``scontrol show topology`` → :class:`Tree`; no ``SwitchName=`` lines → empty tree."""
    leaf: dict[str, str] = {}
    parent: dict[str, str] = {}
    level: dict[str, int] = {}
    children: dict[str, tuple[str, ...]] = {}
    for sw in parse_topology_conf(text, source="scontrol show topology", scontrol_output=True):
        if sw.switches:
            children[sw.name] = sw.switches
            for child in sw.switches:
                parent[child] = sw.name
        elif sw.nodes:
            for node in sw.nodes:
                leaf[node] = sw.name
            level[sw.name] = 0
        if sw.level is not None:
            level[sw.name] = sw.level

    def lvl(sw: str, seen: frozenset[str] = frozenset()) -> int:
        if sw in level:
            return level[sw]
        if sw in seen:
            return 0
        return 1 + max((lvl(c, seen | {sw}) for c in children.get(sw, ())), default=-1)

    for sw in set(children) | set(parent):
        level[sw] = lvl(sw)
    return Tree(leaf, parent, level)


# --------------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True, slots=True)
class RankRow:
    rank: int
    node: str
    gpus: tuple[int, ...]  # this rank's own GPUs (global indices)
    cuda_visible_devices: str  # the TP group's GPUs in TP-rank order, in the index space of the node
    local_rank: int  # = TP rank
    island: str  # the NVLink island(s) of the group on its node, "-" without link data
    tp: int
    pp: int
    dp: int
    tp_level: str  # lowest common level of the rank's TP group: gpu | island | node
    pp_level: str  # ... of its pipeline: node | <switch> | - (no common switch)


@dataclass(frozen=True, slots=True)
class Plan:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # set in srun's environment
    unset_env: tuple[str, ...]  # removed from srun's environment
    hostfile: str  # path of SLURM_HOSTFILE
    hostfile_lines: tuple[str, ...]
    rows: tuple[RankRow, ...]
    summary: str
    warnings: tuple[str, ...] = ()


def parse_order(order: str) -> tuple[str, ...]:
    dims = tuple(d.strip().lower() for d in order.split("-"))
    if len(set(dims)) != len(dims) or not {"tp", "pp", "dp"} <= set(dims) or not set(dims) <= set(_DIMS):
        raise InputError(
            f"--order {order!r}: expected the dimensions tp, pp and dp (cp, ep optional) once each, "
            f"fastest first, e.g. {DEFAULT_ORDER} or tp-pp-dp"
        )
    return dims


def coordinates(rank: int, order: Sequence[str], sizes: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for dim in order:
        out[dim] = rank % sizes[dim]
        rank //= sizes[dim]
    return out


def _fold(indices: Sequence[int]) -> str:
    """(0, 1, 2, 3, 6) -> ``0-3,6``."""
    parts: list[str] = []
    s = sorted(indices)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


def _world(
    alloc: Allocation, tp: int, pp: int, dp: int | None, gpus_per_task: int, ntasks: int | None
) -> tuple[int, int]:
    """(dp, ranks), checked against the task count."""
    if dp is not None:
        ranks = tp * pp * dp
        if ntasks is not None and ranks > ntasks:
            raise InputError(
                f"--tp {tp} × --pp {pp} × --dp {dp} = {ranks} ranks, more than the {ntasks} tasks of "
                "the allocation (SLURM_NTASKS)"
            )
        return dp, ranks
    if ntasks is not None:
        tasks, what = ntasks, f"{ntasks} tasks of the allocation (SLURM_NTASKS)"
    else:
        total = sum(len(g) for g in alloc.gpus.values())
        tasks, what = (
            total // gpus_per_task,
            (
                f"{total // gpus_per_task} tasks the allocation's {total} GPUs hold "
                f"at --gpus-per-task {gpus_per_task}"
            ),
        )
    if tasks < tp * pp or tasks % (tp * pp):
        raise InputError(
            f"--tp {tp} × --pp {pp} = {tp * pp} does not divide the {what}: give --dp, or sizes "
            "whose product is the task count"
        )
    return tasks // (tp * pp), tasks


def plan_srun(
    alloc: Allocation,
    *,
    tp: int,
    pp: int = 1,
    dp: int | None = None,
    gpus_per_task: int = 1,
    order: str = DEFAULT_ORDER,
    topologies: Mapping[str, GpuTopology] | None = None,
    tree: Tree | None = None,
    local_indices: bool = False,
    ntasks: int | None = None,
    slurm_version: tuple[int, int] | None = None,
    srun_options: Sequence[str] = (),
    command: Sequence[str] = ("true",),
    python: str = "python3",
    tmpdir: str = "/tmp",
    link_source: str = "link data",
) -> Plan:
    """The whole plan, without running anything: srun argv and environment, hostfile lines, per-rank table."""
    for name, value in (("--tp", tp), ("--pp", pp), ("--gpus-per-task", gpus_per_task)):
        if value < 1:
            raise InputError(f"{name} {value}: must be at least 1")
    if dp is not None and dp < 1:
        raise InputError(f"--dp {dp}: must be at least 1")
    dims = parse_order(order)
    check_srun_options(srun_options)
    topologies = topologies or {}
    tree = tree or Tree()
    per_group = tp * gpus_per_task
    dp, world = _world(alloc, tp, pp, dp, gpus_per_task, ntasks)
    if not alloc.nodes:
        raise InputError(f"job {alloc.job_id}: no nodes")
    most = max(alloc.nodes, key=lambda n: len(alloc.gpus.get(n, ())))
    if per_group > len(alloc.gpus.get(most, ())):
        raise InputError(
            f"--tp {tp} × --gpus-per-task {gpus_per_task} = {per_group} GPUs per TP group, more than "
            f"any node of the allocation has (most: {len(alloc.gpus.get(most, ()))} on {most})"
        )
    for node in alloc.nodes:
        have = alloc.gpus.get(node, ())
        if len(have) < per_group:
            raise InputError(
                f"node {node} has {len(have)} allocated GPUs ({_fold(have) or 'none'}), fewer than the "
                f"{per_group} one TP group needs (--tp {tp} × --gpus-per-task {gpus_per_task})"
            )

    # 2. TP-group GPU sets per node, disjoint
    warnings: list[str] = []
    no_links = [n for n in alloc.nodes if n not in topologies or not topologies[n].has_links]
    if no_links:
        warnings.append(
            f"warning: no GPU link data for {hostlist.compress(no_links)} ({link_source}): TP groups "
            "take the lowest allocated indices"
        )
    slots: list[tuple[str, tuple[int, ...]]] = []
    for node in alloc.nodes:
        free = list(alloc.gpus[node])
        topo = topologies.get(node)
        if topo is not None and topo.has_links:
            unknown = [g for g in free if g not in topo.gpus]
            if unknown:
                raise InputError(
                    f"node {node}: allocated GPUs {unknown} are not in its link data ({len(topo.gpus)} GPUs)"
                )
        while len(free) >= per_group:
            chosen = (
                pick_devices(topo, free, per_group)
                if topo is not None and topo.has_links
                else tuple(free[:per_group])
            )
            slots.append((node, tuple(sorted(chosen))))
            free = [g for g in free if g not in chosen]
    groups_needed = pp * dp
    if groups_needed > len(slots):
        per_node = ", ".join(f"{n}: {sum(1 for s in slots if s[0] == n)}" for n in alloc.nodes)
        raise InputError(
            f"{groups_needed} TP groups (--pp {pp} × --dp {dp}) of {per_group} GPUs do not fit: the "
            f"allocation holds {len(slots)} ({per_node})"
        )

    # 3. pipelines -> slots: smallest subtree with PP free slots, first fit
    subtrees: dict[tuple[int, str], list[int]] = {}
    for i, (node, _) in enumerate(slots):
        subtrees.setdefault((-1, "node:" + node), []).append(i)
        for sw in tree.path(node):
            subtrees.setdefault((tree.level.get(sw, 0), sw), []).append(i)
        subtrees.setdefault((1 << 30, "*"), []).append(i)
    candidates = sorted(subtrees.items(), key=lambda kv: (kv[0][0], kv[1][0]))
    used: set[int] = set()
    stage_slot: dict[tuple[int, int], int] = {}
    for d in range(dp):
        for _, members in candidates:
            free_here = [i for i in members if i not in used]
            if len(free_here) >= pp:
                for s, i in enumerate(free_here[:pp]):
                    stage_slot[(s, d)] = i
                    used.add(i)
                break

    def common(nodes: set[str]) -> str:
        if len(nodes) == 1:
            return "node"
        paths = [tree.path(n) for n in nodes]
        for sw in paths[0]:
            if all(sw in p for p in paths[1:]):
                return sw
        return "-"

    pipe_level = {d: common({slots[stage_slot[(s, d)]][0] for s in range(pp)}) for d in range(dp)}

    # per-rank rows
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1}
    sorted_alloc = {n: sorted(alloc.gpus[n]) for n in alloc.nodes}
    slot_ids = {i: k for k, i in enumerate(sorted(set(stage_slot.values())))}
    group_entries: dict[int, str] = {}
    rows: list[RankRow] = []
    rank_entries: list[str] = []
    for rank in range(world):
        c = coordinates(rank, dims, sizes)
        slot = stage_slot[(c["pp"], c["dp"])]
        node, gpus = slots[slot]
        space = [sorted_alloc[node].index(g) for g in gpus] if local_indices else list(gpus)
        cvd = ",".join(map(str, space))
        group_entries[slot_ids[slot]] = f"{node}={cvd}"
        topo = topologies.get(node)
        if topo is not None and topo.has_links:
            isl = [i for i in islands(topo) if i & set(gpus)]
            island = "+".join(_fold(sorted(i)) for i in isl)
            tp_level = "gpu" if len(gpus) == 1 else ("island" if len(isl) == 1 else "node")
        else:
            island = "-"
            tp_level = "gpu" if len(gpus) == 1 else "node"
        own = gpus[c["tp"] * gpus_per_task : (c["tp"] + 1) * gpus_per_task]
        rows.append(
            RankRow(
                rank,
                node,
                own,
                cvd,
                c["tp"],
                island,
                c["tp"],
                c["pp"],
                c["dp"],
                tp_level,
                pipe_level[c["dp"]],
            )
        )
        rank_entries.append(f"{slot_ids[slot]}:{c['tp']}")

    hostfile_lines = tuple(r.node for r in rows)
    digest = hashlib.sha1("\n".join(hostfile_lines).encode()).hexdigest()[:12]
    hostfile = os.path.join(tmpdir, f"gpulayer-srun-{alloc.job_id}-{digest}.hosts")
    used_nodes = sorted(set(hostfile_lines), key=alloc.nodes.index)

    extra: list[str] = []
    constrained_bind = (
        slurm_version is not None
        and slurm_version >= (23, 11)
        and local_indices
        and not any(o.split("=", 1)[0] == "--gres-flags" for o in srun_options)
    )
    if constrained_bind:
        masks = _per_node_masks(rows)
        if masks is not None:
            extra = [f"--gpu-bind=mask_gpu:{masks}", "--gres-flags=allow-task-sharing"]
    argv = (
        "srun",
        "-m",
        "arbitrary",
        "-N",
        str(len(used_nodes)),
        "-n",
        str(world),
        *extra,
        *srun_options,
        python,
        "-m",
        "slurm_topo.srun_shim",
        "--",
        *command,
    )
    env = {
        "SLURM_HOSTFILE": hostfile,
        GROUPS_VAR: ";".join(group_entries[k] for k in sorted(group_entries)),
        RANKS_VAR: ",".join(rank_entries),
    }
    summary = (
        f"{PROG}: job {alloc.job_id}: {world} ranks = tp {tp} × pp {pp} × dp {dp} (order {'-'.join(dims)}, "
        f"{gpus_per_task} GPU per task) on {len(used_nodes)} nodes {hostlist.compress(used_nodes)}; "
        f"CUDA_VISIBLE_DEVICES {'local' if local_indices else 'global'} indices"
    )
    return Plan(argv, env, UNSET_ENV, hostfile, hostfile_lines, tuple(rows), summary, tuple(warnings))


def _per_node_masks(rows: Sequence[RankRow]) -> str | None:
    """``--gpu-bind=mask_gpu:`` list (per local task id) when every node has the same one, else None."""
    per_node: dict[str, list[str]] = {}
    for r in rows:
        ids = [int(x) for x in r.cuda_visible_devices.split(",")]
        per_node.setdefault(r.node, []).append(hex(sum(1 << i for i in ids)))
    lists = {",".join(v) for v in per_node.values()}
    return lists.pop() if len(lists) == 1 else None


def format_plan(plan: Plan) -> str:
    """The plan as text: summary, warnings, the srun command, one table row per rank."""
    head = (
        "rank",
        "node",
        "gpus",
        "cuda_visible_devices",
        "local_rank",
        "island",
        "tp",
        "pp",
        "dp",
        "tp_group",
        "pp_group",
    )
    table = [head] + [
        (
            str(r.rank),
            r.node,
            _fold(r.gpus),
            r.cuda_visible_devices,
            str(r.local_rank),
            r.island,
            str(r.tp),
            str(r.pp),
            str(r.dp),
            r.tp_level,
            r.pp_level,
        )
        for r in plan.rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        plan.summary,
        f"{PROG}: SLURM_HOSTFILE={plan.hostfile} ({len(plan.hostfile_lines)} lines) {shlex.join(plan.argv)}",
    ]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# command line


def check_srun_options(options: Sequence[str]) -> None:
    """Refuse srun options the plan decides (``-n -N -m -w --ntasks --nodes --ntasks-per-node --distribution
    --nodelist --gpu-bind``), by name."""
    skip = False
    for tok in options:
        if skip:
            skip = False
            continue
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            if name in REFUSED_LONG:
                raise InputError(f"srun option {name} conflicts with the plan ({PROG} decides it): remove it")
            continue
        if tok.startswith("-") and len(tok) > 1:
            for k, ch in enumerate(tok[1:], start=1):
                if ch in REFUSED_SHORT:
                    raise InputError(
                        f"srun option -{ch} ({REFUSED_SHORT[ch]}) conflicts with the plan ({PROG} "
                        "decides it): remove it"
                    )
                if ch not in _SHORT_FLAGS:
                    skip = k == len(tok) - 1  # the value is the next token
                    break


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing and exiting (``run_entry`` reports it)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{PROG} --help')")


def _positive(text: str) -> int:
    """A size: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        allow_abbrev=False,
        usage=f"{PROG} --tp N [--pp N] [--dp N] [OPTIONS] [SRUN OPTIONS] -- COMMAND...",
        description="Run COMMAND with one Slurm task per rank, ranks ordered by TP/PP/DP over the allocation's "
        "NVLink islands and switch tree. Unknown options are passed to srun untouched.",
    )
    p.add_argument(
        "--tp", type=_positive, required=True, help="tensor-parallel size (one node, one NVLink island)"
    )
    p.add_argument(
        "--pp", type=_positive, default=1, help="pipeline-parallel size (stages inside one leaf if possible)"
    )
    p.add_argument(
        "--dp", type=_positive, default=None, help="data-parallel size (default: task count / (tp × pp))"
    )
    p.add_argument("--gpus-per-task", type=_positive, default=1, help="GPUs per rank (default 1)")
    p.add_argument(
        "--order",
        default=DEFAULT_ORDER,
        help=f"rank order, fastest dimension first (default Megatron's {DEFAULT_ORDER}; or tp-pp-dp)",
    )
    p.add_argument("--topology", metavar="FILE", help="a `nvidia-smi topo -m` capture used for every node")
    idx = p.add_mutually_exclusive_group()
    idx.add_argument(
        "--local-indices",
        dest="local",
        action="store_const",
        const=True,
        default=None,
        help="CUDA_VISIBLE_DEVICES in local indices (device cgroup constrained)",
    )
    idx.add_argument(
        "--global-indices",
        dest="local",
        action="store_const",
        const=False,
        help="CUDA_VISIBLE_DEVICES in global indices (no device cgroup)",
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    mode.add_argument("--explain", action="store_true", help="print the plan, then run")
    return p


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        raise UsageError("no command: put it after -- (gpulayer-srun --tp 4 -- python train.py)")
    i = list(argv).index("--")
    return list(argv[:i]), list(argv[i + 1 :])


def _jobid(srun_options: Sequence[str], environ: Mapping[str, str]) -> str | None:
    for k, tok in enumerate(srun_options):
        if tok.startswith("--jobid="):
            return tok.split("=", 1)[1]
        if tok == "--jobid" and k + 1 < len(srun_options):
            return srun_options[k + 1]
    return environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")


def build_plan(
    argv: Sequence[str], environ: Mapping[str, str], runner: Runner, python: str = sys.executable
) -> tuple[Plan, argparse.Namespace]:
    """Parse the command line, ask Slurm about the allocation, and plan (no side effects beyond the queries)."""
    ours, command = split_argv(argv)
    args, srun_options = _parser().parse_known_args(ours)
    if not command:
        raise UsageError("no command after --")
    check_srun_options(srun_options)
    job_id = _jobid(srun_options, environ)
    if not job_id:
        raise InputError(
            "not inside a Slurm allocation (SLURM_JOB_ID is not set): run it in an sbatch script or "
            "under salloc"
        )
    alloc = parse_job_detail(runner.run(["scontrol", "show", "job", "-d", job_id]))
    config = parse_show_config(runner.run(["scontrol", "show", "config"]))
    conf_dir = Path(config.get("SLURM_CONF") or environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf").parent

    topologies: dict[str, GpuTopology] = {}
    if args.topology:
        try:
            text = Path(args.topology).read_text()
        except OSError as e:
            raise InputError(f"--topology {args.topology}: {e.strerror}") from None
        topo = parse_topo_matrix(text, source=args.topology)
        topologies = {n: topo for n in alloc.nodes}
        link_source = f"--topology {args.topology}"
    else:
        gres = conf_dir / "gres.conf"
        try:
            topologies = parse_gres_links(gres.read_text(), source=str(gres))
            link_source = f"no Links= in {gres}; no --topology"
        except OSError:
            link_source = f"no {gres}; no --topology"
    try:
        tree = parse_scontrol_topology(runner.run(["scontrol", "show", "topology"]))
    except CommandError:
        tree = Tree()
    local = args.local
    if local is None:
        try:
            cgroup = (conf_dir / "cgroup.conf").read_text()
        except OSError:
            cgroup = None
        local = devices_constrained(config, cgroup)
    ntasks_text = environ.get("SLURM_NTASKS") or environ.get("SLURM_NPROCS")
    ntasks = int(ntasks_text) if ntasks_text and ntasks_text.isdigit() else None
    tmp = environ.get("TMPDIR") or "/tmp"
    plan = plan_srun(
        alloc,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        gpus_per_task=args.gpus_per_task,
        order=args.order,
        topologies=topologies,
        tree=tree,
        local_indices=local,
        ntasks=ntasks,
        slurm_version=parse_slurm_version(config.get("SLURM_VERSION", "")),
        srun_options=srun_options,
        command=command,
        python=python,
        link_source=link_source,
        tmpdir=tmp,
    )
    return plan, args


def write_hostfile(plan: Plan) -> None:
    """Write SLURM_HOSTFILE atomically (its name carries the job id and a hash of its content, so a re-run of
    the same plan reuses one file)."""
    path = Path(plan.hostfile)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text("\n".join(plan.hostfile_lines) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"cannot write {plan.hostfile}: {exc.strerror or exc}") from None


def run(argv: Sequence[str], environ: Mapping[str, str], runner: Runner) -> None:
    """Plan, print (--dry-run/--explain), write the hostfile and exec srun; errors are raised, never printed."""
    ours = argv[: list(argv).index("--")] if "--" in argv else argv
    if "-h" in ours or "--help" in ours:
        _parser().print_help()
        return
    if "--version" in ours:
        sys.stdout.write(f"{PROG} (slurm-topo) {version.__version__}\n")
        return
    plan, args = build_plan(argv, environ, runner)
    for w in plan.warnings:
        sys.stderr.write(f"{PROG}: {w}\n")
    if args.dry_run or args.explain:
        sys.stdout.write(format_plan(plan))
        sys.stdout.flush()
    if args.dry_run:
        return
    write_hostfile(plan)
    env = {k: v for k, v in environ.items() if k not in plan.unset_env}
    env.update(plan.env)
    sys.stderr.flush()
    try:
        # From here on the process is srun: its signals and its exit status are srun's own.
        os.execvpe(plan.argv[0], list(plan.argv), env)
    except OSError as exc:
        raise CommandError(plan.argv[:1], None, exc.strerror or str(exc)) from None


def main(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None, runner: Runner | None = None
) -> None:
    """``gpulayer-srun``: exits through ``run_entry`` (``gpulayer-srun: error: …``, the one exit-code table)."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    run_entry(PROG, lambda: run(args, env, runner or SubprocessRunner()))


if __name__ == "__main__":
    main()
