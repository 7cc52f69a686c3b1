"""The locality policy: the executable specification of what the submit filter does.

``compile_policy`` turns the merged inventory (plus Slurm's partitions) into ``PolicyData``: node classes (own
features, GPUs, GPU type) and, per partition and level, the groups with their node count per class, ordered by
size (nodes in the partition) then label — Slurm takes the first alternative of a matching OR that fits now,
so the smallest group that can hold a job comes first. ``render/filter_data.py`` writes the same data as
``slurm_topo_data.lua``; ``job_submit/slurm_topo_filter/`` implements ``decide`` over it in Lua 5.1, and
the parity tests run one table of cases through both. ``decide`` and ``decide_modify`` are pure.

Modules, one per section of the Lua filter: ``vocab`` (levels, limits, message templates), ``compile``
(the job-independent data), ``request`` (reading a job_desc), ``constraint`` (the user's feature grammar),
``nodes`` (where a --nodelist's nodes are), ``decide`` (submit) and ``modify`` (``scontrol update`` of a
pending job).

Semantics:

* ``prefer`` (default) never delays a job. topology/tree already packs to the lowest common switch; in
  addition ``prefer = <user constraint>&[ng…|zone…|region…]``: the groups of every level that can ever hold
  the job, finest level first, smallest first within a level, with unions of 2-3 zones (inside one region
  before the regions, across regions after them; with families: each level's buckets, unions of one value's
  zone buckets only, then the bare family values, largest first). 22.05 tries a matching OR alternative by
  alternative and takes the first that can start, so the job lands in the finest group with room now and,
  failing that, in one region (benchmarks/results/placement.md). When Slurm's limits (64 alternatives,
  1,024 characters) cut the list, the finest level's tail goes first: regions and family values are kept.
  Untouched when the user gave ``--prefer``, when the constraint has brackets, parentheses or counts, or
  when no group fits (Slurm rejects at submit a ``--prefer`` that no node set can meet).
* ``network_group`` / ``zone`` / ``region``: ``features = <user constraint>&[g1|…]`` over the groups of that
  level that can ever hold the job, smallest first. None can → ``fail`` rejects at submit, ``wait`` holds
  (priority 0); both say why. A zone or region also gets ``prefer = <same hard part>&[finer groups inside
  g1…gN|g1|…]`` (unless the user gave ``--prefer`` or nothing finer fits): every alternative lies inside one
  group of the level, so the locality holds and the job lands in the finest group with room.
* ``any``: the job is left alone.
* ``--locality-regions=A,B`` restricts every node to the named regions or zones: a plain OR of their features
is
  ANDed in, and only groups overlapping them are candidates.

"Can ever hold", per group: the nodes of the job's partition whose own features satisfy the user's ``&``/``|``
list and that have at least the GPUs per node asked (of the type asked); the job needs
``max(min_nodes or 1, ⌈total GPUs ÷ largest GPUs per node⌉)`` of them and the group needs the GPUs in total.
It is not checked — and the decision says so — with ``--nodelist``, ``--exclude``, ``--reservation`` or
``--contiguous``, or when the constraint has parentheses or counts or names location features.

Algorithm: groups are pre-sorted by size, so a request for N nodes starts at the first group with ≥ N nodes
(binary search) and scans forward until 65 groups fit (64 are kept, the 65th tells that the list was cut).
The full scan happens only when nothing fits, to name the largest group. O(log G + scan) per level.
"""

from .compile import Group, NodeClass, Partition, PolicyData, compile_policy
from .constraint import Constraint, compose, parse_constraint
from .decide import Decision, Survey, decide, describe_request, survey
from .modify import ModifyDecision, decide_modify
from .request import GpuAsk, JobRequest, parse_gpu_tres
from .vocab import (
    IMPLICIT_PARTITION,
    INFINITE,
    LEVELS,
    LOCALITIES,
    LOCATION_PREFIXES,
    MAX_ALTERNATIVES,
    MAX_CONSTRAINT,
    MAX_FIELD,
    MAX_RECORD,
    MODES,
    NO_VAL,
    NO_VAL16,
    SPANK_LOCALITY,
    SPANK_REGIONS,
    parse_locality,
    safe,
)

__all__ = [
    "IMPLICIT_PARTITION",
    "INFINITE",
    "LEVELS",
    "LOCALITIES",
    "LOCATION_PREFIXES",
    "MAX_ALTERNATIVES",
    "MAX_CONSTRAINT",
    "MAX_FIELD",
    "MAX_RECORD",
    "MODES",
    "NO_VAL",
    "NO_VAL16",
    "SPANK_LOCALITY",
    "SPANK_REGIONS",
    "Constraint",
    "Decision",
    "GpuAsk",
    "Group",
    "JobRequest",
    "ModifyDecision",
    "NodeClass",
    "Partition",
    "PolicyData",
    "Survey",
    "compile_policy",
    "compose",
    "decide",
    "decide_modify",
    "describe_request",
    "parse_constraint",
    "parse_gpu_tres",
    "parse_locality",
    "safe",
    "survey",
]
