"""``slurm-topo report``: what placement cost a site, from Slurm's accounting (docs/report.md).

For every finished multi-node job (:mod:`slurm_topo.access.accounting`): its nodes, the level they span in the
inventory (``node``, ``nvlink``, ``network_group``, ``zone``, ``region``, ``any``), its locality request
(the filter's record in AdminComment, else a ``locality=`` comment) and the record itself, the plan
(``--plan``, else the job's ``sbatch --plan`` record, its ``plan=`` comment, the site default: said which),
the predicted step slowdown against the best placement of the same hardware on the idle fleet
(:func:`slurm_topo.cost.predict`), and the GPU-hours it cost: ``elapsed × GPUs × (1 − 1/slowdown)``.
Summaries by partition, user, locality mode and ISO week, and before/after a date.

Pure: records in, values out. A job's own fields steer only its own row: the record is read from AdminComment
(slurmctld's), the user and partition are accounting's names, and a comment's ``plan=``/``locality=`` tokens
are that job's own request; a plan that does not parse, or a node the inventory lacks, is that row's note.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, count
from operator import itemgetter
from typing import Any, NamedTuple

from ..access.accounting import FinishedJob
from ..core.errors import InputError
from ..core.model import Inventory
from ..cost import (
    DEFAULT_COMM_SHARE,
    DEFAULT_TABLE,
    Fabric,
    LinkTable,
    PlanSpec,
    Prediction,
    Rank,
    StepCost,
    gpus_per_node,
    layout_reads_locations,
    parse_plan,
    place_ranks,
    predict,
    score_placed,
    score_placement,
    span_level,
    step_model,
)
from ..cost import hardware_kind as _hardware_kind
from .explain import filter_record, job_plan, locality_of_comment, locality_of_record

SPAN_LEVELS = ("node", "nvlink", "network_group", "zone", "region", "any", "unknown")
SUMMARY_KEYS = ("partition", "user", "locality", "week", "period")


@dataclass(frozen=True, slots=True)
class JobRow:
    """One finished multi-node job, as the report shows it."""

    job_id: str
    user: str
    partition: str
    state: str
    end: int
    elapsed_s: int
    nodes: str
    node_count: int
    gpus: int
    level: str
    locality: str
    """The mode: the filter's recorded locality (``zone:wait``, ``prefer``, ``any``), ``not applied``,
    ``comment:<l>`` (asked by comment, no filter record), or ``none``."""
    record: str | None
    plan: str | None
    plan_source: str | None
    gpu_hours: float
    slowdown: float | None = None
    best_level: str | None = None
    gpu_hours_lost: float | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Summary:
    key: str
    value: str
    jobs: int
    predicted: int
    gpu_hours: float
    gpu_hours_lost: float
    levels: Mapping[str, int]
    worst_slowdown: float | None

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["levels"] = dict(self.levels)
        return d


@dataclass(frozen=True)
class Report:
    rows: tuple[JobRow, ...]
    summaries: tuple[Summary, ...]
    single_node_jobs: int
    refused: tuple[tuple[str, str], ...] = ()
    split_at: int | None = None
    totals: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": [r.as_dict() for r in self.rows],
            "summaries": [s.as_dict() for s in self.summaries],
            "single_node_jobs": self.single_node_jobs,
            "refused": [list(r) for r in self.refused],
            "split_at": self.split_at,
            "totals": dict(self.totals),
        }


def locality_mode(job: FinishedJob) -> tuple[str, str | None]:
    """(mode, the filter's record) of a job: the record's locality, ``not applied``, ``comment:<l>``,
    or ``none``."""
    record = filter_record(job.admin_comment)
    if record is not None:
        if record.startswith("not applied"):
            return "not applied", record
        loc = locality_of_record(record)
        return (loc or "rejected"), record
    asked = locality_of_comment(job.comment)
    if asked and len(asked) <= 32 and asked.replace(":", "").replace("_", "").isalnum():
        return f"comment:{asked}", None
    return "none", None


_HARDWARE, _WHERE, _KIND = itemgetter(0), itemgetter(1), itemgetter(2)


class Structure(NamedTuple):
    """What the cost model reads of a placement (:meth:`Predictor.structure`)."""

    hardware: tuple[Any, ...]
    shape: tuple[int, ...]
    kinds: tuple[Any, ...]


class Predictor:
    """:func:`slurm_topo.cost.predict` over many jobs (tests/test_report_structure.py compares them job by
    job on random fleets):

    * the best placement of a shape (node count, plan, hardware kinds, GPU types) is searched once;
    * a placement is scored once per *structure*: the plan, each node's hardware in Slurm's order (GPU type
      and count, link matrix, measured port rate) and, level by level, which of its nodes share a region, a
      zone, a network group, an NVLink domain (labels numbered by first appearance). The model reads a
      placement through nothing else: node and switch names never enter a cost;
    * the rank layout (``gpulayer-srun``'s, the costly part) is made once per structure, and once per
      hardware sequence where it cannot depend on the locations
      (:func:`slurm_topo.cost.layout_reads_locations`: one pipeline stage, no EP/CP blocks), then carried
      over to the placement's own nodes and scored there."""

    def __init__(self, fabric: Fabric, table: LinkTable = DEFAULT_TABLE) -> None:
        self.fabric, self.table = fabric, table
        self._best: dict[tuple[Any, ...], Prediction] = {}
        self._scores: dict[tuple[Any, ...], StepCost] = {}
        self._layouts: dict[tuple[Any, ...], tuple[tuple[Rank, int], ...]] = {}
        self._spans: dict[tuple[Any, ...], str] = {}
        self._plans: dict[tuple[str, int], PlanSpec] = {}
        self._counts: dict[tuple[Any, ...], int] = {}  # (hardware, GPUs asked) -> GPUs per node
        self._nodes: dict[str, tuple[Any, ...]] = {}  # name -> (hardware key, location labels, kind)
        self._topologies: list[Any] = []  # the distinct GPU topologies: a node's number is its index
        self._last: tuple[tuple[str, ...], Structure] | None = None
        self._tags: dict[tuple[str | None, ...], int] = {}  # a level's group -> a number (cheap to hash)

    def _node(self, name: str) -> tuple[Any, ...]:
        """(hardware key, its (region, zone, network group, NVLink domain) as numbers, one per group of a
        level, None where there is none, (hardware kind, GPU type))."""
        got = self._nodes.get(name)
        if got is None:
            node = self.fabric.node(name)
            topo = node.gpu_topology
            if topo is None:
                tid = -1
            else:
                tid = next((i for i, t in enumerate(self._topologies) if t is topo or t == topo), -1)
                if tid == -1:
                    tid = len(self._topologies)
                    self._topologies.append(topo)
            loc = node.location
            r, z, g = loc.region, loc.zone, loc.network_group
            d = self.fabric.domains.get(name)
            tags = (
                None if r is None else ("region", r),
                None if r is None or z is None else ("zone", r, z),
                None if r is None or z is None or g is None else ("network_group", r, z, g),
                None if d is None else ("nvlink", d),
            )
            where = tuple(None if t is None else self._tags.setdefault(t, len(self._tags)) for t in tags)
            kind = (_hardware_kind(node), node.gpu_type)
            got = self._nodes[name] = ((node.gpu_type, node.gpus, tid, node.net_ratio), where, kind)
        return got

    def structure(self, nodes: Sequence[str]) -> Structure:
        """The placement's structure: (each node's hardware key in order, each node's four location labels
        numbered by first appearance — 0 where it has none —, each node's (hardware kind, GPU type))."""
        last = self._last
        if last is not None and last[0] is nodes:
            return last[1]
        get = self._nodes.get
        infos = [get(n) or self._node(n) for n in nodes]
        values = list(chain.from_iterable(map(_WHERE, infos)))
        first = dict(zip(dict.fromkeys((None, *values)), count()))  # None: 0, then by first appearance
        got = Structure(
            tuple(map(_HARDWARE, infos)), tuple(map(first.__getitem__, values)), tuple(map(_KIND, infos))
        )
        if isinstance(nodes, tuple):
            self._last = (nodes, got)
        return got

    def span(self, nodes: Sequence[str]) -> str:
        """:func:`slurm_topo.cost.span_level` of the placement, once per structure."""
        if len(set(nodes)) != len(nodes):
            return span_level(self.fabric, nodes)
        shape = self.structure(nodes).shape
        got = self._spans.get(shape)
        if got is None:
            got = self._spans[shape] = span_level(self.fabric, nodes)
        return got

    def plan(self, text: str, nodes: Sequence[str], gpus: int) -> PlanSpec:
        """The job's plan (:func:`slurm_topo.cost.parse_plan`) with its GPUs per node: the plan's own, else
        the job's GPUs over its nodes where they divide, checked against the nodes
        (:func:`slurm_topo.cost.gpus_per_node`); parsed once per text."""
        spec = self._plans.get((text, 0))
        if spec is None:
            spec = self._plans[(text, 0)] = parse_plan(text)
        g = spec.gpus_per_node or (gpus // len(nodes) if gpus % len(nodes) == 0 else None)
        counts = (self.structure(nodes).hardware, g or None)  # it reads the nodes' GPU counts only
        known = self._counts.get(counts)
        if known is None:  # refused each time, naming this job's node
            known = self._counts[counts] = gpus_per_node(self.fabric, nodes, g or None)
        g = known
        out = self._plans.get((text, g))
        if out is None:
            out = self._plans[(text, g)] = dataclasses.replace(spec, gpus_per_node=g)
        return out

    def _ranks(self, nodes: Sequence[str], spec: PlanSpec, key: tuple[Any, ...]) -> tuple[Rank, ...]:
        """:func:`slurm_topo.cost.place_ranks` on ``nodes``: the layout of the first placement of ``key``
        with its nodes replaced by these, node for node."""
        layout = self._layouts.get(key)
        if layout is None:
            ranks = place_ranks(self.fabric, nodes, spec)
            at = {n: i for i, n in enumerate(nodes)}
            self._layouts[key] = tuple((r, at[r.node]) for r in ranks)
            return ranks
        return tuple(Rank(r.rank, nodes[i], r.gpu, r.tp, r.pp, r.dp, r.cp, r.ep, r.edp) for r, i in layout)

    def score(self, nodes: Sequence[str], spec: PlanSpec) -> StepCost:
        """:func:`slurm_topo.cost.score_placement` of the placement, shared by placements of one structure:
        its terms are the placement's own; its nodes, ranks and a note naming nodes are those of the first
        placement of the structure."""
        if len(set(nodes)) != len(nodes):
            return score_placement(self.fabric, nodes, spec, self.table)  # refused as place_ranks refuses
        hardware, shape, _ = self.structure(nodes)
        key = (spec, hardware, shape)
        found = self._scores.get(key)
        if found is None:
            layout_key = key if layout_reads_locations(spec) else (spec, hardware)
            ranks = self._ranks(nodes, spec, layout_key)
            found = self._scores[key] = score_placed(self.fabric, nodes, ranks, spec, self.table)
        return found

    def __call__(self, nodes: Sequence[str], spec: PlanSpec) -> Prediction:
        fabric = self.fabric
        about = self.structure(nodes).kinds
        key = (len(nodes), spec, frozenset(about))
        ref = self._best.get(key)
        if ref is None:
            scored: list[StepCost] = []  # the placement's, then the best placement's found

            def score(on: Sequence[str], plan: PlanSpec) -> StepCost:
                scored.append(self.score(on, plan))
                return scored[-1]

            got = predict(fabric, nodes, spec, self.table, scorer=score)
            if len(scored) == 2 and not scored[1].seconds > scored[0].seconds:
                self._best[key] = got  # predict kept the best it found: the same for every job of the key
            return got
        current = self.score(nodes, spec)
        assert ref.best is not None
        if ref.best.seconds > current.seconds:
            return Prediction(
                current, current, self.span(nodes), step_model(spec, current, DEFAULT_COMM_SHARE)
            )
        return Prediction(current, ref.best, ref.best_level, ref.step)


def _span(predictor: Predictor, nodes: Sequence[str]) -> str:
    try:
        return predictor.span(nodes)
    except (KeyError, InputError):
        return "unknown"


def job_row(
    job: FinishedJob, fabric: Fabric, inventory: Inventory, predictor: Predictor, plan: str | None
) -> JobRow:
    """One job's row: level spanned, locality, plan, slowdown and GPU-hours (a model error is a note)."""
    level = _span(predictor, job.nodes)
    mode, record = locality_mode(job)
    text, source = job_plan(plan, job.comment, inventory, job.admin_comment)
    gpu_hours = job.elapsed * job.gpus / 3600.0
    slow = lost = best_level = None
    note = ""
    if text is None:
        note = "no plan"
    elif level == "unknown":
        note = "a node not in the inventory"
    else:
        try:
            pred = predictor(job.nodes, predictor.plan(text, job.nodes, job.gpus))
        except InputError as exc:
            note = f"not predicted: {exc}"
        else:
            slow, best_level = pred.slowdown, pred.best_level
            lost = gpu_hours * (1 - 1 / slow) if slow is not None and slow > 0 else None
    return JobRow(
        job.job_id,
        job.user,
        job.partition,
        job.state,
        job.end,
        job.elapsed,
        job.node_list,
        len(job.nodes),
        job.gpus,
        level,
        mode,
        record,
        text,
        source,
        gpu_hours,
        slow,
        best_level,
        lost,
        note,
    )


def week_of(epoch: int) -> str:
    """The ISO week of a time (local): ``2026-W49``."""
    y, w, _ = datetime.date.fromtimestamp(epoch).isocalendar()
    return f"{y}-W{w:02d}"


def _keys(row: JobRow, split_at: int | None) -> Iterable[tuple[str, str]]:
    yield "partition", row.partition
    yield "user", row.user
    yield "locality", row.locality
    yield "week", week_of(row.end)
    if split_at is not None:
        yield "period", "before" if row.end < split_at else "after"


def summarise(rows: Iterable[JobRow], split_at: int | None = None) -> tuple[Summary, ...]:
    acc: dict[tuple[str, str], list[JobRow]] = defaultdict(list)
    for row in rows:
        for key in _keys(row, split_at):
            acc[key].append(row)
    out = []
    for (name, value), members in sorted(acc.items()):
        levels: dict[str, int] = defaultdict(int)
        for r in members:
            levels[r.level] += 1
        slows = [r.slowdown for r in members if r.slowdown is not None]
        out.append(
            Summary(
                name,
                value,
                len(members),
                len(slows),
                sum(r.gpu_hours for r in members),
                sum(r.gpu_hours_lost or 0.0 for r in members),
                {lv: levels[lv] for lv in SPAN_LEVELS if levels.get(lv)},
                max(slows) if slows else None,
            )
        )
    return tuple(out)


def build_report(
    jobs: Iterable[FinishedJob],
    inventory: Inventory,
    *,
    plan: str | None = None,
    partitions: Sequence[str] = (),
    split_at: int | None = None,
    table: LinkTable = DEFAULT_TABLE,
    refused: Sequence[tuple[str, str]] = (),
) -> Report:
    """Pure: finished jobs and the fleet -> the report (multi-node jobs only; single-node ones counted)."""
    from ..plumbing.collector import collector_paused

    with collector_paused():
        fabric = Fabric.of(inventory)
        predictor = Predictor(fabric, table)
        rows, single = [], 0
        for job in jobs:
            if partitions and job.partition not in partitions:
                continue
            if len(job.nodes) < 2:
                single += 1
                continue
            rows.append(job_row(job, fabric, inventory, predictor, plan))
        rows.sort(key=lambda r: (r.end, int(r.job_id)))
        totals = {
            "jobs": len(rows),
            "predicted": sum(r.slowdown is not None for r in rows),
            "gpu_hours": sum(r.gpu_hours for r in rows),
            "gpu_hours_lost": sum(r.gpu_hours_lost or 0.0 for r in rows),
        }
        return Report(tuple(rows), summarise(rows, split_at), single, tuple(refused), split_at, totals)


def format_report(report: Report, worst: int = 10) -> str:
    """The text form: totals, the summaries, the worst jobs."""
    t = report.totals
    lines = [
        f"multi-node jobs: {t['jobs']} ({t['predicted']} predicted; {report.single_node_jobs} one-node jobs "
        f"left out); GPU-hours {t['gpu_hours']:.1f}, lost to placement {t['gpu_hours_lost']:.1f}"
    ]
    for key in SUMMARY_KEYS:
        rows = [s for s in report.summaries if s.key == key]
        if not rows:
            continue
        lines.append(f"by {key}:")
        for s in rows:
            spread = " ".join(f"{lv}={n}" for lv, n in s.levels.items())
            lines.append(
                f"  {s.value:<20} jobs {s.jobs:>6}  GPU-h {s.gpu_hours:>10.1f}  "
                f"lost {s.gpu_hours_lost:>9.1f}  {spread}"
            )
    bad = sorted((r for r in report.rows if r.gpu_hours_lost), key=lambda r: -(r.gpu_hours_lost or 0))[:worst]
    if bad:
        lines.append("worst jobs (slurm-topo explain JOBID while Slurm remembers it):")
        for r in bad:
            lines.append(
                f"  {r.job_id:>8} {r.user:<12} {r.nodes} ({r.level}) slowdown {r.slowdown:.3f} "
                f"lost {r.gpu_hours_lost:.2f} GPU-h"
            )
    for who, why in report.refused:
        lines.append(f"refused: {who}: {why}")
    return "\n".join(lines) + "\n"
