"""The plan of ``gpulayer-srun`` (:func:`plan_srun`, pure): which rank runs where, on which GPUs, how.

The steps, each its own function below:

1. *Sizes* (:func:`_check_sizes`, :func:`_world`, :func:`_check_nodes`, :func:`_expert_sizes`): TP × CP ×
   PP × DP against the task count and each node's GPUs; EP as Megatron-LM forms it (below).
2. *TP groups → GPUs* (:func:`_tp_slots`): on every node, TP-group GPU sets are carved out of the allocated
   GPUs one after the other by ``pick_devices`` (best-connected free set, so one NVLink island when one is
   free), disjoint by construction; among equally good sets, the ones earlier nodes took (same local GPUs,
   same rails). A node without link data gets the lowest indices (one warning line for all
   such nodes); a group that must span NVLink islands gets one warning line too (:func:`_island_warning`).
3. *Pipelines → slots* (:func:`_place_pipelines`): pipeline ``d`` (the PP stages of DP replica ``d``) takes
   ``PP`` group slots in the smallest subtree that still has that many free: one node, else one NVLink
   domain (multi-node NVLink, e.g. an NVL72 rack: the nodes' ``nvl_<domain>`` features), else one leaf
   switch, else the lowest common switch; first fit in allocation order. Stage ``s`` gets the ``s``-th of
   those slots. DP replicas spread across. With domains, a pipeline that must span two of them gets a
   warning, and the plan suggests ``--segment`` (24.05+ block topology) of one replica's node count.
4. *Rank coordinates* (:func:`coordinates`, :func:`_rank_rows`): ``--order`` lists the dimensions fastest
   first. Megatron's default ``tp-cp-ep-dp-pp``: ``rank = tp + TP·(cp + CP·(dp + DP·pp))``: consecutive
   ranks form a TP group, a whole DP replica set of one stage comes before the next stage.
   ``tp-pp-dp``: ``rank = tp + TP·(pp + PP·dp)``: one pipeline's stages are consecutive
   (DeepSpeed/torchtitan).

*Expert and context parallelism* (Megatron-LM ``megatron/core/parallel_state.py``,
``initialize_model_parallel`` and ``RankGenerator``): the world is ``tp × cp × dp × pp`` (EP is no factor of
it); the dense layers' groups come from a ``RankGenerator(tp, ep=1, dp, pp, cp, order)``, the expert layers'
from a second one, ``RankGenerator(etp=tp, ep, edp, pp, cp=1, order)`` with ``edp = world / (tp·ep·pp)``, so
EP must divide ``cp × dp`` (Megatron: "world_size is not divisible by expert_tensor_model_pipeline_parallel
size"), and, unless the order ends with ``pp`` (or ``pp = 1``), ``edp = dp``. With the default order an
expert-parallel group is ``ep`` consecutive (cp, dp) positions of one stage and TP index. The pipelines of
one EP or CP group (their union: :func:`_pipeline_blocks`) are placed as one *block*: at every stage their
TP groups are carved together on one node (:func:`_tp_slots`, ``pick_devices`` over the whole block: one
NVLink island when one is free), else gathered in the smallest subtree (NVLink domain first), and the
blocks' stages are placed as pipelines are (:func:`_place_blocks`); an EP group outside one NVLink island or
domain gets one warning line (:func:`_ep_warning`).
5. *srun* (:func:`_srun_argv`): ``srun -m arbitrary -n <ranks> [passed options] python -m
   slurm_topo.plumbing.srun_shim -- COMMAND`` with ``SLURM_HOSTFILE``, no ``-N``: the hostfile names the nodes
   (22.05 takes them from it; 24.05 and later refuse ``--nodes is incompatible with
   --distribution=arbitrary``, checked on 22.05, 24.11 and 26.05); on Slurm 23.11+ with constrained devices
   also ``--gpu-bind=mask_gpu:…`` and ``--gres-flags=allow-task-sharing`` when every node has the same
   per-task masks (22.05 has no task sharing: a bound task would lose NVLink to its peers, so only the shim
   binds there).

Indices: ``CUDA_VISIBLE_DEVICES`` is local (the rank of the global index in the node's sorted allocated list)
when the device cgroup is constrained (``local_indices``); global otherwise.
"""

from __future__ import annotations

import functools
import shlex
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from ClusterShell.RangeSet import RangeSet

from ..core import hostlist
from ..core.allocation import Allocation, SwitchTree
from ..core.errors import InputError
from ..gpu.gpu_topology import GpuTopology
from ..gpu.links import islands
from ..gpu.pick import pick_devices
from ..gpu.rings import gpu_order
from ..plumbing.text import counted
from .options import GROUPS_VAR, PROG, RANKS_VAR, STEP_GPU_ENV, UNSET_ENV, check_srun_options
from .orient import orient

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
HOSTFILE = "<private, in memory>"
_DIMS = ("tp", "cp", "ep", "dp", "pp")

Slot = tuple[str, tuple[int, ...]]
"""One TP group's place: its node and its GPUs (global indices, ascending)."""


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
    cp: int = 0
    ep: int = 0  # expert-parallel rank (Megatron's expert RankGenerator)
    edp: int = 0  # expert data-parallel index: the ranks of one EP group share (tp, pp, edp)
    ep_level: str = "-"  # lowest common level of its EP group: gpu | island | node | <domain> | <switch>


@dataclass(frozen=True, slots=True)
class Plan:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # set in srun's environment
    unset_env: tuple[str, ...]  # removed from srun's environment
    hostfile: str  # what SLURM_HOSTFILE will be (a private in-memory file, made when srun starts)
    hostfile_lines: tuple[str, ...]
    rows: tuple[RankRow, ...]
    summary: str
    warnings: tuple[str, ...] = ()


def numbers(indices: Sequence[int]) -> str:
    """(0, 1, 2, 3, 6) -> ``0-3,6`` (ClusterShell's RangeSet); empty -> ``""``. Remembered: a plan writes
    the same few GPU groups for every rank."""
    return _numbers(tuple(indices))


@functools.lru_cache(maxsize=4096)
def _numbers(indices: tuple[int, ...]) -> str:
    return str(RangeSet.fromlist([str(i) for i in indices]))


def parse_order(order: str) -> tuple[str, ...]:
    dims = tuple(d.strip().lower() for d in order.split("-"))
    if len(set(dims)) != len(dims) or not {"tp", "pp", "dp"} <= set(dims) or not set(dims) <= set(_DIMS):
        raise InputError(
            f"--order {order!r}: expected the dimensions tp, pp and dp (cp, ep optional) once each, "
            f"fastest first, e.g. {DEFAULT_ORDER} or tp-pp-dp"
        )
    return dims


def coordinates(rank: int, order: Sequence[str], sizes: Mapping[str, int]) -> dict[str, int]:
    """Rank -> its index in each dimension (``order`` fastest first); a dimension not in the order (of size
    1, as Megatron appends it) is 0."""
    out = dict.fromkeys(_DIMS, 0)
    for dim in order:
        out[dim] = rank % sizes[dim]
        rank //= sizes[dim]
    return out


# ---- 1. sizes


def _check_sizes(tp: int, pp: int, dp: int | None, gpus_per_task: int, cp: int = 1, ep: int = 1) -> None:
    """Every size at least 1."""
    for name, value in (
        ("--tp", tp),
        ("--pp", pp),
        ("--gpus-per-task", gpus_per_task),
        ("--cp", cp),
        ("--ep", ep),
    ):
        if value < 1:
            raise InputError(f"{name} {value}: must be at least 1")
    if dp is not None and dp < 1:
        raise InputError(f"--dp {dp}: must be at least 1")


def _check_nodes(alloc: Allocation, tp: int, gpus_per_task: int) -> None:
    """One TP group fits the GPUs of every node (the node that cannot is named)."""
    if not alloc.nodes:
        raise InputError(f"job {alloc.job_id}: no nodes")
    per_group = tp * gpus_per_task
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
                f"node {node} has {counted(len(have), 'allocated GPU')} ({numbers(have) or 'none'}), fewer "
                f"than the {per_group} one TP group needs (--tp {tp} × --gpus-per-task {gpus_per_task})"
            )


def _model(tp: int, pp: int, cp: int) -> tuple[int, str]:
    """The ranks of one data-parallel replica and their words (``--tp 4 × --pp 2``, ``× --cp 2`` when
    given)."""
    words = f"--tp {tp} × --pp {pp}" + (f" × --cp {cp}" if cp > 1 else "")
    return tp * pp * cp, words


def _world(
    alloc: Allocation,
    tp: int,
    pp: int,
    dp: int | None,
    gpus_per_task: int,
    ntasks: int | None,
    cp: int = 1,
) -> tuple[int, int]:
    """(dp, ranks), checked against the task count: ranks = tp × cp × pp × dp (Megatron's world)."""
    model, words = _model(tp, pp, cp)
    if dp is not None:
        ranks = model * dp
        if ntasks is not None and ranks > ntasks:
            raise InputError(
                f"{words} × --dp {dp} = {ranks} ranks, more than the {ntasks} tasks of "
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
    if tasks < model or tasks % model:
        raise InputError(
            f"{words} = {model} does not divide the {what}: give --dp, or sizes "
            "whose product is the task count"
        )
    return tasks // model, tasks


def _expert_sizes(dims: Sequence[str], tp: int, cp: int, ep: int, dp: int, pp: int) -> dict[str, int]:
    """The sizes of Megatron-LM's expert ``RankGenerator`` (``parallel_state.initialize_model_parallel``):
    ``etp = tp``, ``ep``, ``edp = tp·cp·dp·pp / (tp·ep·pp)``, ``pp``, ``cp = 1``, over the same order; refused
    as Megatron refuses: a size above 1 missing from the order, EP not dividing ``cp × dp``, and an order
    that does not end with ``pp`` while ``pp > 1`` and ``edp ≠ dp``. EP also needs ``tp`` first (the expert
    groups' TP index must be the dense one: the shim binds one TP group per rank)."""
    for name, size in (("cp", cp), ("ep", ep)):
        if size > 1 and name not in dims:
            raise InputError(
                f"--{name} {size} but --order {'-'.join(dims)} has no {name}: name it (e.g. {DEFAULT_ORDER})"
            )
    if (cp * dp) % ep:
        raise InputError(
            f"--ep {ep} does not divide --cp {cp} × --dp {dp} = {cp * dp}: Megatron-LM forms the expert-"
            f"parallel groups inside the data- and context-parallel ranks of a stage (the world, tp × cp × "
            f"dp × pp = {tp * cp * dp * pp}, must divide by tp × ep × pp = {tp * ep * pp})"
        )
    edp = cp * dp // ep
    if ep > 1 and dims[0] != "tp":
        raise InputError(
            f"--ep {ep} with --order {'-'.join(dims)}: put tp first (the expert layers' tensor-parallel "
            "groups are then the dense layers' TP groups)"
        )
    if pp > 1 and dims[-1] != "pp" and edp != dp:
        raise InputError(
            f"--order {'-'.join(dims)} does not end with pp, so Megatron-LM needs the expert data-parallel "
            f"size (cp × dp / ep = {edp}) to equal --dp {dp}: end the order with pp or give --ep = --cp"
        )
    return {"tp": tp, "cp": 1, "ep": ep, "dp": edp, "pp": pp}


# ---- 2. TP groups -> GPUs


def _linked(topologies: Mapping[str, GpuTopology], node: str) -> GpuTopology | None:
    topo = topologies.get(node)
    return topo if topo is not None and topo.has_links else None


def _tp_slots(
    alloc: Allocation,
    per_group: int,
    topologies: Mapping[str, GpuTopology],
    most: Mapping[str, int] | None = None,
    blocks: Sequence[int] = (1,),
) -> tuple[list[Slot], list[list[int]]]:
    """Per node, disjoint GPU sets of ``per_group`` GPUs, best connected first; in allocation order; at most
    ``most[node]`` of them on a node (the TP groups Slurm's tasks per node hold there). Also the slot
    indices carved together: with ``blocks`` (TP groups per block, largest first; ``(1,)`` without EP/CP) a
    node takes the largest block its free GPUs and tasks hold as one best-connected set of
    ``per_group × block`` GPUs (one NVLink island when one is free), then splits it into TP groups.

    Among equally good sets (``pick_devices`` rule 3a) a node takes the sets earlier nodes took, the one at
    the same position first: group ``m`` of every node on the same local GPUs where the allocation allows it,
    so a DP ring between nodes stays on one rail of a rail-optimised fabric."""
    slots: list[Slot] = []
    carved: list[list[int]] = []
    # per pick position, the distinct sets earlier nodes took there; and every distinct set, in order
    at: list[dict[tuple[int, ...], None]] = []
    taken: dict[tuple[int, ...], None] = {}
    took_blocks: dict[tuple[int, ...], None] = {}  # the blocks earlier nodes took, to take again (rails)
    for node in alloc.nodes:
        free = list(alloc.gpus[node])
        topo = _linked(topologies, node)
        if topo is not None:
            unknown = [g for g in free if g not in topo.gpus]
            if unknown:
                raise InputError(
                    f"node {node}: allocated GPUs {unknown} are not in its link data "
                    f"({counted(len(topo.gpus), 'GPU')})"
                )
        mine: list[tuple[int, ...]] = []
        cap = (most or {}).get(node)
        while len(free) >= per_group and (cap is None or len(mine) < cap):
            b = next(
                k
                for k in (*blocks, 1)
                if len(free) >= per_group * k and (cap is None or len(mine) + k <= cap)
            )
            pool = free
            if b > 1:
                same = [x for x in took_blocks if len(x) == per_group * b]
                pool = sorted(_pick(topo, free, per_group * b, same))
                took_blocks.setdefault(tuple(pool))
            first = len(slots)
            for _ in range(b):
                m = len(mine)
                prefer = [*at[m], *taken] if m < len(at) else list(taken)
                chosen = _pick(topo, pool, per_group, prefer)
                mine.append(tuple(sorted(chosen)))
                slots.append((node, mine[-1]))
                pool = [g for g in pool if g not in chosen]
                free = [g for g in free if g not in chosen]
            carved.append(list(range(first, len(slots))))
        for m, x in enumerate(mine):
            if m == len(at):
                at.append({})
            at[m].setdefault(x)
            taken.setdefault(x)
    return slots, carved


def _pick(
    topo: GpuTopology | None, free: Sequence[int], k: int, prefer: Sequence[tuple[int, ...]]
) -> tuple[int, ...]:
    """``k`` of ``free``: ``pick_devices`` with link data; without, every set ties, so the first preferred
    one that is free, else the lowest."""
    if topo is not None:
        return pick_devices(topo, free, k, prefer=prefer)
    have = set(free)
    return next((x for x in prefer if len(x) == k and have.issuperset(x)), tuple(free[:k]))


def _group_islands(topo: GpuTopology | None, gpus: Sequence[int]) -> list[frozenset[int]]:
    """The NVLink islands of ``topo`` that the group ``gpus`` touches (none without link data)."""
    if topo is None:
        return []
    return [frozenset(i) for i in islands(topo) if i & set(gpus)]


def _island_warning(slots: Sequence[Slot], topologies: Mapping[str, GpuTopology], tp: int) -> str | None:
    """One line naming the nodes where a TP group of more than one GPU spans NVLink islands, else None."""
    spans: dict[str, int] = {}  # node -> its largest island
    for node, gpus in slots:
        topo = _linked(topologies, node)
        if topo is not None and len(gpus) > 1 and len(_group_islands(topo, gpus)) > 1:
            spans[node] = max(len(i) for i in islands(topo))
    if not spans:
        return None
    per_group = len(slots[0][1])
    if min(spans.values()) < per_group:
        why = f"largest island there: {' or '.join(map(str, sorted(set(spans.values()))))} GPUs"
    else:
        why = f"the GPUs allocated there hold no whole island of {per_group}"
    return (
        f"warning: --tp {tp}: TP groups of {per_group} GPUs span NVLink islands on "
        f"{hostlist.compress(spans)} ({why}): tensor-parallel traffic between the islands leaves NVLink"
    )


def _no_fit(
    alloc: Allocation,
    slots: Sequence[Slot],
    tp: int,
    pp: int,
    dp: int,
    per_group: int,
    tasks_per_node: Mapping[str, int] | None,
) -> str:
    """The one line that says why ``pp × dp`` TP groups do not fit: per node, the groups it holds, its GPUs
    and (when Slurm said) its tasks."""
    tasks = tasks_per_node or {}
    parts = []
    for n in alloc.nodes:
        held = sum(1 for s in slots if s[0] == n)
        why = counted(len(alloc.gpus.get(n, ())), "GPU")
        if n in tasks:
            why += f", {counted(tasks[n], 'task')}"
        parts.append(f"{n}: {held} ({why})")
    text = (
        f"{pp * dp} TP groups (--pp {pp} × --dp {dp}) of {per_group} GPUs do not fit: the allocation holds "
        f"{len(slots)} ({'; '.join(parts)})"
    )
    short = [
        n for n in alloc.nodes if n in tasks and tasks[n] // tp < len(alloc.gpus.get(n, ())) // per_group
    ]
    if short:
        text += (
            f"; a TP group needs {counted(tp, 'task')} of one node and Slurm gave "
            f"{hostlist.compress(short)} fewer: allocate with --ntasks-per-node"
        )
    return text


# ---- 3. pipelines -> slots


def _place_pipelines(
    slots: Sequence[Slot], tree: SwitchTree, pp: int, dp: int, domains: Mapping[str, str] | None = None
) -> dict[tuple[int, int], int]:
    """(stage, replica) -> slot index: each pipeline in the smallest subtree with ``pp`` free slots (a node,
    an NVLink domain, then the switches upwards)."""
    groups = _group([(node,) for node, _ in slots], tree, pp, dp, domains)
    return {(s, d): i for d, members in enumerate(groups) for s, i in enumerate(members)}


def _group(
    members: Sequence[tuple[str, ...]],
    tree: SwitchTree,
    size: int,
    count: int,
    domains: Mapping[str, str] | None = None,
) -> list[list[int]]:
    """Up to ``count`` groups of ``size`` of the ``members`` (each on the nodes it names), one after the
    other, each in the smallest subtree with ``size`` free members: one node, an NVLink domain, then the
    switches upwards (first fit in member order). A member is in a subtree when all its nodes are."""
    subtrees: dict[tuple[int, str], list[int]] = {}
    for i, nodes in enumerate(members):
        first = nodes[0]
        if all(n == first for n in nodes):
            subtrees.setdefault((-2, "node:" + first), []).append(i)
        if domains and first in domains and all(domains.get(n) == domains[first] for n in nodes):
            subtrees.setdefault((-1, "nvl:" + domains[first]), []).append(i)
        paths = [set(tree.path(n)) for n in set(nodes) - {first}]
        for sw in tree.path(first):
            if all(sw in p for p in paths):
                subtrees.setdefault((tree.level.get(sw, 0), sw), []).append(i)
        subtrees.setdefault((1 << 30, "*"), []).append(i)
    candidates = sorted(subtrees.items(), key=lambda kv: (kv[0][0], kv[1][0]))
    used: set[int] = set()
    out: list[list[int]] = []
    for _ in range(count):
        for _, inside in candidates:
            free_here = [i for i in inside if i not in used]
            if len(free_here) >= size:
                out.append(free_here[:size])
                used.update(free_here[:size])
                break
    return out


def _pipeline_blocks(
    dims: Sequence[str], sizes: Mapping[str, int], expert: Mapping[str, int]
) -> list[list[int]]:
    """The pipelines (``j = cp + CP·dp``) that must be placed together, as lists ordered so that each EP
    group is consecutive: the unions of the EP groups (ranks of one stage and TP index sharing the expert
    generator's ``edp``) and the CP groups (sharing ``dp``), read off the ranks of TP index 0 of stage 0."""
    cp, dp, tp = sizes["cp"], sizes["dp"], sizes["tp"]
    parent = list(range(cp * dp))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[tuple[str, int], int] = {}
    where: dict[int, tuple[int, int]] = {}
    for rank in range(tp * cp * dp * sizes["pp"]):
        c = coordinates(rank, dims, sizes)
        if c["tp"] or c["pp"]:
            continue
        e = coordinates(rank, dims, expert)
        j = c["cp"] + cp * c["dp"]
        where[j] = (e["dp"], e["ep"])
        for key in (("ep", e["dp"]), ("cp", c["dp"])):
            k = first.setdefault(key, j)
            parent[root(j)] = root(k)
    blocks: dict[int, list[int]] = {}
    for j in range(cp * dp):
        blocks.setdefault(root(j), []).append(j)
    return [sorted(js, key=lambda j: where[j]) for js in blocks.values()]


def _place_blocks(
    slots: Sequence[Slot],
    carved: Sequence[Sequence[int]],
    tree: SwitchTree,
    pp: int,
    blocks: Sequence[Sequence[int]],
    domains: Mapping[str, str] | None,
) -> dict[tuple[int, int], int]:
    """(stage, pipeline) -> slot index with the pipelines of each block placed together: a *unit* is one
    stage of one block (as many TP groups as the block has pipelines): the blocks :func:`_tp_slots` carved
    whole on one node first, then units gathered from the other slots, each in the smallest subtree
    (:func:`_group`); then every block takes ``pp`` units as a pipeline takes ``pp`` slots. The units always
    suffice when the slots do (``pp × cp × dp`` of them, checked before): carved units are whole and the rest
    are gathered anywhere, so there are ``slots // width`` units."""
    width = len(blocks[0])
    units = [list(c) for c in carved if len(c) == width]
    rest = [i for c in carved if len(c) != width for i in c]
    more = _group([(slots[i][0],) for i in rest], tree, width, len(rest) // width, domains)
    units += [[rest[i] for i in grp] for grp in more]
    chosen = _group([tuple(slots[i][0] for i in u) for u in units], tree, pp, len(blocks), domains)
    out: dict[tuple[int, int], int] = {}
    for js, stages in zip(blocks, chosen, strict=True):
        for s, u in enumerate(stages):
            for j, i in zip(js, units[u], strict=True):
                out[(s, j)] = i
    return out


ALIGN_ROUNDS = 32
ALIGN_MAX_GROUPS = 4096
"""Bounds of :func:`_align_replicas` (rounds of swaps; TP groups of a plan it looks at)."""


def _hop(tree: SwitchTree, a: str, b: str, domains: Mapping[str, str] | None) -> int:
    """What a pipeline hop between nodes ``a`` and ``b`` costs, by the lowest level they share: 0 on one
    node, 1 in one NVLink domain, then 2 + the level of their lowest common switch; else a large one."""
    if a == b:
        return 0
    if domains and a in domains and domains.get(a) == domains.get(b):
        return 1
    above_b = set(tree.path(b))
    for sw in tree.path(a):
        if sw in above_b:
            return 2 + tree.level.get(sw, 0)
    return 1 << 20


def _align_replicas(
    stage_slot: dict[tuple[int, int], int],
    slots: Sequence[Slot],
    tree: SwitchTree,
    pp: int,
    dp: int,
    domains: Mapping[str, str] | None = None,
) -> dict[tuple[int, int], int]:
    """Where it costs the pipelines nothing, the DP peers of a stage on other nodes take the same local GPUs
    (one rail each on a rail-optimised fabric). Hill climbing over swaps of two (stage, replica) slots: a swap
    is kept when the pipelines' hop cost does not grow and fewer cross-node DP pairs of a stage differ in
    GPUs. Only swaps inside one pipeline are tried (the moves that can help: a swap inside one stage keeps its
    nodes and GPUs), at most :data:`ALIGN_ROUNDS` rounds, and not past :data:`ALIGN_MAX_GROUPS` groups."""
    if dp < 2 or pp * dp > ALIGN_MAX_GROUPS:
        return stage_slot
    at = dict(stage_slot)
    keys = sorted(at)
    # a swap inside one stage leaves that stage's nodes and GPUs as they were, so it never lowers the
    # mismatch: only swaps inside one pipeline can be kept
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :] if a[1] == b[1]]
    if not pairs:
        return at

    def pipeline_cost(d: int) -> int:
        return sum(_hop(tree, slots[at[(s, d)]][0], slots[at[(s + 1, d)]][0], domains) for s in range(pp - 1))

    # per stage, how many of its replicas sit on each node and on each GPU tuple: a pair of replicas on one
    # node or on the same GPUs is no mismatch (two replicas never share a slot, so no pair is both), and a
    # swap moves one replica of each of two stages, so its change is read off the counts in O(1)
    on_node = [Counter(slots[at[(s, d)]][0] for d in range(dp)) for s in range(pp)]
    on_gpus = [Counter(slots[at[(s, d)]][1] for d in range(dp)) for s in range(pp)]

    def matched_gain(s: int, old: int, new: int) -> int:
        """How many more same-node or same-GPU pairs stage ``s`` has when a replica moves from slot ``old`` to
        slot ``new``."""
        (na, ga), (nb, gb) = slots[old], slots[new]
        gain = on_node[s][nb] - (on_node[s][na] - 1) if na != nb else 0
        return gain + (on_gpus[s][gb] - (on_gpus[s][ga] - 1) if ga != gb else 0)

    def move(s: int, old: int, new: int) -> None:
        (na, ga), (nb, gb) = slots[old], slots[new]
        on_node[s][na] -= 1
        on_node[s][nb] += 1
        on_gpus[s][ga] -= 1
        on_gpus[s][gb] += 1

    for _ in range(ALIGN_ROUNDS):
        improved = False
        for a, b in pairs:
            pipes = {a[1], b[1]}
            x, y = at[a], at[b]
            gain = matched_gain(a[0], x, y) + matched_gain(b[0], y, x)
            if gain <= 0:  # the mismatch would not fall
                continue
            before = sum(map(pipeline_cost, pipes))
            at[a], at[b] = y, x
            if sum(map(pipeline_cost, pipes)) <= before:
                improved = True
                move(a[0], x, y)
                move(b[0], y, x)
            else:
                at[a], at[b] = x, y
        if not improved:
            break
    return at


def _chain_stages(
    stage_slot: dict[tuple[int, int], int],
    slots: Sequence[Slot],
    topologies: Mapping[str, GpuTopology],
    pp: int,
    dp: int,
) -> dict[tuple[int, int], int]:
    """A pipeline of one-GPU stages on one node passes its GPUs in the order whose slowest hop is fastest
    (``gpu.rings.gpu_order``: an NVLink chain on a DGX-1 cube mesh, not index order across SYS); other
    pipelines are left as placed."""
    if pp < 3:
        return stage_slot
    at = dict(stage_slot)
    for d in range(dp):
        mine = [at[(s, d)] for s in range(pp)]
        nodes = {slots[i][0] for i in mine}
        if len(nodes) != 1 or any(len(slots[i][1]) != 1 for i in mine):
            continue
        topo = _linked(topologies, next(iter(nodes)))
        by_gpu = {slots[i][1][0]: i for i in mine}
        for s, gpu in enumerate(gpu_order(topo, list(by_gpu), closed=False)):
            at[(s, d)] = by_gpu[gpu]
    return at


def _common_level(tree: SwitchTree, nodes: set[str], domains: Mapping[str, str] | None = None) -> str:
    """``node`` for one node, else their NVLink domain when they share one, else the lowest switch above all
    of them, else ``-``."""
    if len(nodes) == 1:
        return "node"
    if domains and len({domains.get(n) for n in nodes}) == 1 and domains.get(next(iter(nodes))):
        return domains[next(iter(nodes))]
    paths = [tree.path(n) for n in nodes]
    for sw in paths[0]:
        if all(sw in p for p in paths[1:]):
            return sw
    return "-"


def _domain_notes(
    slots: Sequence[Slot],
    stage_slot: Mapping[tuple[int, int], int],
    pp: int,
    dp: int,
    domains: Mapping[str, str] | None,
) -> list[str]:
    """With NVLink domains: a warning per pipeline across two domains, and the ``--segment`` that keeps each
    replica in one block (24.05+ topology/block, or the nvl topology of a 25.05+ topology.yaml)."""
    if not domains:
        return []
    out = []
    per_replica = []
    for d in range(dp):
        nodes = sorted({slots[stage_slot[(s, d)]][0] for s in range(pp)})
        per_replica.append(len(nodes))
        spanned = sorted({domains.get(n, "-") for n in nodes})
        if len(spanned) > 1:
            where = f"{', '.join(spanned)} ({hostlist.compress(nodes)})"
            out.append(
                f"warning: pipeline {d} spans NVLink domains {where}: its stages talk over the network"
            )
    k = max(per_replica)
    used = {slots[i][0] for i in stage_slot.values()}
    if k > 1 and len(set(per_replica)) == 1 and len(used) % k == 0:
        out.append(
            f"hint: each pipeline takes {k} nodes; submit with --segment={k} (Slurm 24.05+ block "
            "topology) to keep each in one NVLink block"
        )
    return out


# ---- 4. rank coordinates -> rows


@dataclass(frozen=True, slots=True)
class _Layout:
    """What the rows are computed from: the sizes (dense and expert), the slots and where each pipeline
    stage went (pipeline ``j = cp + CP·dp``)."""

    dims: tuple[str, ...]
    sizes: Mapping[str, int]
    gpus_per_task: int
    slots: Sequence[Slot]
    stage_slot: Mapping[tuple[int, int], int]
    pipe_level: Mapping[int, str]
    expert: Mapping[str, int] | None = None


def _rank_rows(
    layout: _Layout, alloc: Allocation, topologies: Mapping[str, GpuTopology], local_indices: bool
) -> tuple[list[RankRow], dict[str, str]]:
    """One row per rank, and the shim's two variables (groups in slot order, ranks in rank order)."""
    sorted_alloc = {n: sorted(alloc.gpus[n]) for n in alloc.nodes}
    slot_ids = {i: k for k, i in enumerate(sorted(set(layout.stage_slot.values())))}
    group_entries: dict[int, str] = {}
    rows: list[RankRow] = []
    rank_entries: list[str] = []
    g = layout.gpus_per_task
    sizes = layout.sizes
    expert = layout.expert or {**sizes, "dp": sizes["cp"] * sizes["dp"], "cp": 1, "ep": 1}
    world = sizes["tp"] * sizes["cp"] * sizes["pp"] * sizes["dp"]
    for rank in range(world):
        c = coordinates(rank, layout.dims, sizes)
        e = coordinates(rank, layout.dims, expert)
        if e["pp"] != c["pp"] or e["tp"] != c["tp"]:
            raise InputError(
                f"--order {'-'.join(layout.dims)}: rank {rank} would be in another pipeline stage or TP "
                "group for the expert layers than for the dense ones (Megatron-LM refuses it): end the "
                "order with pp"
            )
        j = c["cp"] + sizes["cp"] * c["dp"]
        slot = layout.stage_slot[(c["pp"], j)]
        node, gpus = layout.slots[slot]
        space = [sorted_alloc[node].index(x) for x in gpus] if local_indices else list(gpus)
        cvd = ",".join(map(str, space))
        group_entries[slot_ids[slot]] = f"{node}={cvd}"
        topo = _linked(topologies, node)
        isl = _group_islands(topo, gpus)
        island = "+".join(numbers(sorted(i)) for i in isl) if topo is not None else "-"
        tp_level = "gpu" if len(gpus) == 1 else ("island" if len(isl) == 1 else "node")
        own = gpus[c["tp"] * g : (c["tp"] + 1) * g]
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
                layout.pipe_level[j],
                c["cp"],
                e["ep"],
                e["dp"],
            )
        )
        rank_entries.append(f"{slot_ids[slot]}:{c['tp']}")
    env = {
        GROUPS_VAR: ";".join(group_entries[k] for k in sorted(group_entries)),
        RANKS_VAR: ",".join(rank_entries),
    }
    return rows, env


def _ep_levels(
    rows: Sequence[RankRow],
    topologies: Mapping[str, GpuTopology],
    tree: SwitchTree,
    domains: Mapping[str, str] | None,
) -> tuple[list[RankRow], dict[tuple[int, int], str]]:
    """Each row with the level its EP group (the ranks sharing tp, pp and edp) meets at: ``gpu``, ``island``
    (one NVLink island of one node), ``node``, the NVLink domain, a switch or ``-``; and each group's level
    by (pp, edp)."""
    members: dict[tuple[int, int], list[RankRow]] = {}
    for r in rows:
        members.setdefault((r.pp, r.edp), []).append(r)
    level: dict[tuple[int, int], str] = {}
    for key, group in members.items():
        nodes = {r.node for r in group}
        if len(nodes) > 1:
            level[key] = _common_level(tree, nodes, domains)
            continue
        gpus = {x for r in group for x in r.gpus}
        topo = _linked(topologies, next(iter(nodes)))
        isl = _group_islands(topo, sorted(gpus))
        level[key] = "gpu" if len(gpus) == 1 else ("island" if topo is not None and len(isl) == 1 else "node")
    return [replace(r, ep_level=level[(r.pp, r.edp)]) for r in rows], level


def _ep_warning(
    rows: Sequence[RankRow],
    level: Mapping[tuple[int, int], str],
    ep: int,
    domains: Mapping[str, str] | None,
    unlinked: Collection[str] = (),
) -> str | None:
    """One line when EP groups leave one NVLink island or domain: how many, on which nodes, and the GPUs
    one group needs; None when each is inside one (or there is no EP). A group on one node without link data
    (``unlinked``: its islands are unknown, and the no-link-data warning says so) is not counted."""
    if ep < 2:
        return None
    inside = {"gpu", "island"} | set((domains or {}).values())
    blind = {(r.pp, r.edp) for r in rows if r.node in unlinked and level[(r.pp, r.edp)] == "node"}
    out = sorted(k for k, lvl in level.items() if lvl not in inside and k not in blind)
    if not out:
        return None
    nodes = sorted({r.node for r in rows if (r.pp, r.edp) in set(out)})
    need = len([r for r in rows if (r.pp, r.edp) == out[0]]) * len(rows[0].gpus)
    return (
        f"warning: --ep {ep}: {len(out)} of {counted(len(level), 'expert-parallel group')} of {need} GPUs "
        f"leave one NVLink island or domain ({hostlist.compress(nodes)}): their all-to-all crosses slower "
        "links (allocate nodes whose islands or NVLink domain hold a whole group)"
    )


# ---- 5. srun


def _per_node_masks(rows: Sequence[RankRow]) -> str | None:
    """``--gpu-bind=mask_gpu:`` list (per local task id) when every node has the same one, else None."""
    per_node: dict[str, list[str]] = {}
    for r in rows:
        ids = [int(x) for x in r.cuda_visible_devices.split(",")]
        per_node.setdefault(r.node, []).append(hex(sum(1 << i for i in ids)))
    lists = {",".join(v) for v in per_node.values()}
    return lists.pop() if len(lists) == 1 else None


def step_gpus(rows: Sequence[RankRow], alloc: Allocation, srun_options: Sequence[str]) -> int | None:
    """The step's own GPU request, ``--gpus=<every allocated GPU of the nodes the plan uses>``: a step that
    names none inherits the job's (``--gpus=N`` is a count for the whole job, which Slurm refuses for a step
    on fewer nodes: "Invalid generic resource (gres) specification"; per node, ``--gres``/``--gpus-per-node``
    of a ``--gpus=N`` job are refused too), while a count equal to the used nodes' GPUs is accepted for every
    job form and gives each of them all its allocated GPUs, the ones the plan's indices refer to (checked on
    22.05, 24.11 and 26.05). None when srun's options already ask for GPUs (the user's request stands)."""
    if any(_names_gpus(o) for o in srun_options):
        return None
    used = {r.node for r in rows}
    return sum(len(alloc.gpus.get(n, ())) for n in used) or None


def _names_gpus(option: str) -> bool:
    name = option.split("=", 1)[0]
    if name in ("-G", "--gres", "--tres-per-task") or name.startswith("--gpus"):
        return True
    return option.startswith("-G") and not option.startswith("--")


def _srun_argv(
    rows: Sequence[RankRow],
    *,
    slurm_version: tuple[int, int] | None,
    local_indices: bool,
    srun_options: Sequence[str],
    python: str,
    command: Sequence[str],
    gpus: int | None = None,
) -> tuple[str, ...]:
    extra: list[str] = [f"--gpus={gpus}"] if gpus else []
    constrained_bind = (
        slurm_version is not None
        and slurm_version >= (23, 11)
        and local_indices
        and not any(o.split("=", 1)[0] == "--gres-flags" for o in srun_options)
    )
    if constrained_bind:
        masks = _per_node_masks(rows)
        if masks is not None:
            extra += [f"--gpu-bind=mask_gpu:{masks}", "--gres-flags=allow-task-sharing"]
    return (
        "srun",
        "-m",
        "arbitrary",
        "-n",
        str(len(rows)),
        *extra,
        *srun_options,
        python,
        "-m",
        "slurm_topo.plumbing.srun_shim",
        "--",
        *command,
    )


# ---- rails


def rail_warning(alloc: Allocation) -> str | None:
    """A warning when the nodes of a multi-node allocation hold different local GPU index sets (``n1: 0-3``,
    ``n2: 4-7``): on a rail-optimised fabric (GPU ``k`` of every node on rail ``k``) NCCL keeps a ring on
    one rail only when each node takes part with the same local GPUs; otherwise the ring crosses rails
    through the spine. Nodes without GPUs in the allocation are left out; None when the sets agree."""
    by_set: dict[tuple[int, ...], list[str]] = {}
    for node in alloc.nodes:
        gpus = alloc.gpus.get(node, ())
        if gpus:
            by_set.setdefault(tuple(gpus), []).append(node)
    if len(by_set) < 2:
        return None
    parts = "; ".join(
        f"{hostlist.compress(nodes)}: {numbers(gpus)}"
        for gpus, nodes in sorted(by_set.items(), key=lambda kv: alloc.nodes.index(kv[1][0]))
    )
    return (
        f"warning: the allocation's GPU indices differ across nodes ({parts}): NCCL keeps a ring on one rail "
        "only when every node uses the same local GPUs, so rings between these nodes cross rails (whole "
        "nodes, e.g. --exclusive, avoid it)"
    )


# ---- the whole plan


def plan_srun(
    alloc: Allocation,
    *,
    tp: int,
    pp: int = 1,
    dp: int | None = None,
    gpus_per_task: int = 1,
    order: str = DEFAULT_ORDER,
    topologies: Mapping[str, GpuTopology] | None = None,
    tree: SwitchTree | None = None,
    local_indices: bool = False,
    ntasks: int | None = None,
    slurm_version: tuple[int, int] | None = None,
    srun_options: Sequence[str] = (),
    command: Sequence[str] = ("true",),
    python: str = "python3",
    link_source: str = "link data",
    domains: Mapping[str, str] | None = None,
    tasks_per_node: Mapping[str, int] | None = None,
    cp: int = 1,
    ep: int = 1,
) -> Plan:
    """The whole plan, without running anything: srun argv and environment, hostfile lines, per-rank table.

    ``tasks_per_node``: Slurm's tasks per node for the job (``SLURM_TASKS_PER_NODE``); a node holds at most
    ``tasks // tp`` TP groups, so the plan never puts more ranks on a node than Slurm gave it tasks.
    ``cp``, ``ep``: context- and expert-parallel sizes, as Megatron-LM forms their groups (module
    docstring)."""
    _check_sizes(tp, pp, dp, gpus_per_task, cp, ep)
    dims = parse_order(order)
    check_srun_options(srun_options)
    topologies = topologies or {}
    tree = tree or SwitchTree()
    per_group = tp * gpus_per_task
    dp, world = _world(alloc, tp, pp, dp, gpus_per_task, ntasks, cp)
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1}
    expert = _expert_sizes(dims, tp, cp, ep, dp, pp)
    _check_nodes(alloc, tp, gpus_per_task)

    warnings: list[str] = []
    no_links = [n for n in alloc.nodes if _linked(topologies, n) is None]
    if no_links:
        warnings.append(
            f"warning: no GPU link data for {hostlist.compress(no_links)} ({link_source}): TP groups "
            "take the lowest allocated indices"
        )
    pipes = cp * dp
    stage_slot, slots = _placement(
        alloc, per_group, topologies, tree, domains, tasks_per_node, dims, sizes, expert
    )
    used = [stage_slot[(s, j)] for j in range(pipes) for s in range(pp)]
    span = _island_warning([slots[i] for i in used], topologies, tp)
    if span:
        warnings.append(span)
    rails = rail_warning(alloc)
    if rails:
        warnings.append(rails)
    pipe_level = {
        j: _common_level(tree, {slots[stage_slot[(s, j)]][0] for s in range(pp)}, domains)
        for j in range(pipes)
    }
    warnings += _domain_notes(slots, stage_slot, pp, pipes, domains)
    layout = _Layout(dims, sizes, gpus_per_task, slots, stage_slot, pipe_level, expert)
    rows, shim_env = _rank_rows(layout, alloc, topologies, local_indices)
    if ep > 1:
        rows, levels = _ep_levels(rows, topologies, tree, domains)
        ep_note = _ep_warning(rows, levels, ep, domains, set(no_links))
        if ep_note:
            warnings.append(ep_note)

    hostfile_lines = tuple(r.node for r in rows)
    used_nodes = sorted(set(hostfile_lines), key=alloc.nodes.index)
    gpus = step_gpus(rows, alloc, srun_options)
    argv = _srun_argv(
        rows,
        slurm_version=slurm_version,
        local_indices=local_indices,
        srun_options=srun_options,
        python=python,
        command=command,
        gpus=gpus,
    )
    summary = (
        f"{PROG}: job {alloc.job_id}: {counted(world, 'rank')} = {_sizes_words(sizes, expert)} "
        f"(order {'-'.join(dims)}, {counted(gpus_per_task, 'GPU')} per task) on "
        f"{counted(len(used_nodes), 'node')} {hostlist.compress(used_nodes)}; "
        f"CUDA_VISIBLE_DEVICES {'local' if local_indices else 'global'} indices"
    )
    unset = UNSET_ENV + (STEP_GPU_ENV if gpus else ())
    return Plan(argv, shim_env, unset, HOSTFILE, hostfile_lines, tuple(rows), summary, tuple(warnings))


def _sizes_words(sizes: Mapping[str, int], expert: Mapping[str, int]) -> str:
    """``tp 8 × pp 2 × dp 2``; with CP ``tp 8 × cp 2 × pp 2 × dp 2``; with EP also
    ``; experts: ep 4 × edp 1``."""
    words = f"tp {sizes['tp']}" + (f" × cp {sizes['cp']}" if sizes["cp"] > 1 else "")
    words += f" × pp {sizes['pp']} × dp {sizes['dp']}"
    if expert["ep"] > 1:
        words += f"; experts: ep {expert['ep']} × edp {expert['dp']}"
    return words


def _placement(
    alloc: Allocation,
    per_group: int,
    topologies: Mapping[str, GpuTopology],
    tree: SwitchTree,
    domains: Mapping[str, str] | None,
    tasks_per_node: Mapping[str, int] | None,
    dims: Sequence[str],
    sizes: Mapping[str, int],
    expert: Mapping[str, int],
) -> tuple[dict[tuple[int, int], int], list[Slot]]:
    """(stage, pipeline) -> slot, and the slots: steps 2 and 3. Without EP and CP each pipeline is placed on
    its own, then DP peers are aligned and one-node pipelines chained; with them, the pipelines of one EP/CP
    block are placed together (:func:`_place_blocks`) and left as placed."""
    tp, pp, dp, cp, ep = sizes["tp"], sizes["pp"], sizes["dp"], sizes["cp"], expert["ep"]
    most = {n: t // tp for n, t in (tasks_per_node or {}).items()}
    blocks = _pipeline_blocks(dims, sizes, expert) if cp * ep > 1 else [[j] for j in range(dp)]
    width = len(blocks[0])
    slots, carved = _tp_slots(
        alloc, per_group, topologies, most, sorted({width, ep if width % ep == 0 else 1}, reverse=True)
    )
    if pp * dp * cp > len(slots):
        raise InputError(_no_fit(alloc, slots, tp, pp, dp * cp, per_group, tasks_per_node))
    if width == 1:
        stage_slot = _place_pipelines(slots, tree, pp, dp, domains)
        stage_slot = _align_replicas(stage_slot, slots, tree, pp, dp, domains)
        stage_slot = _chain_stages(stage_slot, slots, topologies, pp, dp)
        if per_group == tp:  # one GPU a task: TP ranks and stage order by bandwidth (srun.orient)
            stage_slot, slots = orient(stage_slot, slots, topologies, pp, dp, alloc.nodes)
        return stage_slot, slots
    return _place_blocks(slots, carved, tree, pp, blocks, domains), slots


def format_plan(plan: Plan) -> str:
    """The plan as text: summary, the srun command, one table row per rank (with ``cp``, ``ep``, ``edp`` and
    ``ep_group`` columns when the plan has CP or EP)."""
    moe = any(r.cp or r.ep for r in plan.rows)
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
    ) + (("cp", "ep", "edp", "ep_group") if moe else ())
    table = [head] + [
        (
            str(r.rank),
            r.node,
            numbers(r.gpus),
            r.cuda_visible_devices,
            str(r.local_rank),
            r.island,
            str(r.tp),
            str(r.pp),
            str(r.dp),
            r.tp_level,
            r.pp_level,
        )
        + ((str(r.cp), str(r.ep), str(r.edp), r.ep_level) if moe else ())
        for r in plan.rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        plan.summary,
        f"{PROG}: SLURM_HOSTFILE={plan.hostfile} ({counted(len(plan.hostfile_lines), 'line')}) "
        f"{shlex.join(plan.argv)}",
    ]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return "\n".join(lines) + "\n"
