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
from typing import Any

from .access.accounting import FinishedJob
from .cost import (
    DEFAULT_COMM_SHARE,
    DEFAULT_TABLE,
    Fabric,
    LinkTable,
    PlanSpec,
    Prediction,
    gpus_per_node,
    network_level,
    parse_plan,
    predict,
    score_placement,
    span_level,
)
from .cost import hardware_kind as _hardware_kind
from .errors import InputError
from .explain import filter_record, job_plan, locality_of_comment, locality_of_record
from .model import Inventory

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


class Predictor:
    """:func:`slurm_topo.cost.predict` over many jobs: the best placement of a shape (node count, GPUs per
    node, hardware kinds, plan) is searched once and reused; each job's own placement is scored. The result
    equals ``predict`` for each job (tests/test_report.py compares them)."""

    def __init__(self, fabric: Fabric, table: LinkTable = DEFAULT_TABLE) -> None:
        self.fabric, self.table = fabric, table
        self._best: dict[tuple[Any, ...], Prediction] = {}
        self._scores: dict[tuple[Any, ...], Any] = {}
        self._topologies: dict[int, int] = {}  # id(gpu_topology) -> a number per distinct topology
        self._seen: dict[int, Any] = {}  # id -> the topology (kept: its id stays its own)

    def _node_key(self, name: str) -> tuple[Any, ...]:
        node = self.fabric.node(name)
        topo = node.gpu_topology
        if topo is None:
            tid = -1
        else:
            tid = self._topologies.get(id(topo), -2)
            if tid == -2:
                same = [k for k in self._topologies if self._seen[k] == topo]
                tid = self._topologies[same[0]] if same else len(set(self._topologies.values()))
                self._topologies[id(topo)] = tid
                self._seen[id(topo)] = topo
        return (node.gpu_type, node.gpus, tid, node.net_ratio)

    def score(self, nodes: Sequence[str], spec: PlanSpec) -> Any:
        """:func:`slurm_topo.cost.score_placement` of the placement, shared by placements of one structure:
        the same plan, the same hardware node by node (GPU type and count, link matrix, measured port rate)
        and the same level between every two nodes in rank order. The model reads a placement through
        nothing else (node names never enter a cost)."""
        fabric = self.fabric
        n = [fabric.node(x) for x in nodes]
        pairs = tuple(
            network_level(n[i], n[j], fabric.domains) for i in range(len(n)) for j in range(i + 1, len(n))
        )
        key = (spec, tuple(self._node_key(x) for x in nodes), pairs, fabric.rail_optimised)
        found = self._scores.get(key)
        if found is None:
            found = self._scores[key] = score_placement(fabric, nodes, spec, self.table)
        return found

    def __call__(self, nodes: Sequence[str], spec: PlanSpec) -> Prediction:
        fabric = self.fabric
        kinds = frozenset(_hardware_kind(fabric.node(n)) for n in nodes)
        types = frozenset(fabric.node(n).gpu_type for n in nodes)
        key = (len(nodes), spec, kinds, types)
        ref = self._best.get(key)
        if ref is None:
            ref = predict(fabric, nodes, spec, self.table)
            if ref.best is not ref.current:  # a searched best: the same for every job of the key
                self._best[key] = ref
            return ref
        current = self.score(nodes, spec)
        assert ref.best is not None
        if ref.best.seconds > current.seconds:
            from .cost import step_model

            return Prediction(
                current, current, span_level(fabric, nodes), step_model(spec, current, DEFAULT_COMM_SHARE)
            )
        return Prediction(current, ref.best, ref.best_level, ref.step)


def _span(fabric: Fabric, nodes: Sequence[str]) -> str:
    try:
        return span_level(fabric, nodes)
    except (KeyError, InputError):
        return "unknown"


def job_row(
    job: FinishedJob, fabric: Fabric, inventory: Inventory, predictor: Predictor, plan: str | None
) -> JobRow:
    """One job's row: level spanned, locality, plan, slowdown and GPU-hours (a model error is a note)."""
    level = _span(fabric, job.nodes)
    mode, record = locality_mode(job)
    text, source = job_plan(plan, job.comment, inventory, job.admin_comment)
    gpu_hours = job.elapsed * job.gpus / 3600.0
    row = JobRow(
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
    )
    if text is None:
        return dataclasses.replace(row, note="no plan")
    if level == "unknown":
        return dataclasses.replace(row, note="a node not in the inventory")
    try:
        spec = parse_plan(text)
        g = spec.gpus_per_node or (job.gpus // len(job.nodes) if job.gpus % len(job.nodes) == 0 else None)
        spec = dataclasses.replace(spec, gpus_per_node=gpus_per_node(fabric, job.nodes, g or None))
        pred = predictor(job.nodes, spec)
    except InputError as exc:
        return dataclasses.replace(row, note=f"not predicted: {exc}")
    slow = pred.slowdown
    lost = gpu_hours * (1 - 1 / slow) if slow is not None and slow > 0 else None
    return dataclasses.replace(row, slowdown=slow, best_level=pred.best_level, gpu_hours_lost=lost)


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
    from .collector import collector_paused

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
