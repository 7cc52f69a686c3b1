"""``slurm-topo metrics``: what slurm-topo computes, in Prometheus' text format (docs/report.md, "Metrics").

One pass reads a :class:`Snapshot` (the fleet's capacity per shape and level from
:mod:`slurm_topo.reports.capacity`, the jobs slurmctld holds and the nodes through :mod:`slurm_topo.access`,
the submit filter's data file) and
:func:`families` turns it into metric families; :func:`exposition` writes them with ``prometheus_client``'s
own exposition (:func:`write_textfile`: a node_exporter textfile-collector file, replaced atomically;
:func:`serve`: a scrape endpoint that reads a fresh snapshot at most every ``min_interval`` seconds).

Label values come from Slurm's own vocabularies or from records slurm-topo (or the filter inside slurmctld)
wrote, each checked against a fixed pattern: a value that does not fit is counted as ``other``, so no job
field a user writes can make a label, a series or a line (job names, comments and paths are never read).
The job counts are gauges over the jobs slurmctld still holds (``MinJobAge``): a finished job leaves them;
the history is ``slurm-topo report``'s (accounting).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..policy.vocab import AUTO_LEVELS as LEVELS
from ..policy.vocab import RECORD_PREFIX
from ..relaxer.relax_plan import relaxations
from .capacity import Capacity

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import GaugeMetricFamily, Metric

    from ..plumbing.runner import Runner

PREFIX = "slurm_topo_"
NOT_APPLIED = RECORD_PREFIX + "not applied"
"""The filter's fail-open record in a job's AdminComment (job_submit/slurm_topo_filter/init.lua)."""
HEALTH_PREFIX = "slurm-topo-health:"
OTHER = "other"

_REASON_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_LINK_RE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_LOCALITY_RE = re.compile(r"(network_group|zone|region|nvl|any|prefer)(?::(wait|fail|auto))?")
_STATE_RE = re.compile(r"[A-Z_]{1,32}")

METRICS: Mapping[str, tuple[str, str, tuple[str, ...]]] = {
    "capacity_jobs": (
        "gauge",
        "Jobs of the shape that could start now, each inside one group of the level",
        ("shape", "level"),
    ),
    "capacity_groups": (
        "gauge",
        "Groups of the level that can start at least one job of the shape",
        ("shape", "level"),
    ),
    "capacity_stranded_gpus": (
        "gauge",
        "Free GPUs no job of the shape can use inside one group of the level (fragmentation)",
        ("shape", "level"),
    ),
    "capacity_naive_jobs": ("gauge", "Jobs of the shape the free GPUs alone suggest", ("shape",)),
    "gpus": ("gauge", "GPUs of the inventory's nodes Slurm knows, by whether they are free", ("state",)),
    "nodes": ("gauge", "Inventory nodes by state kind (free, allocated, drained, unknown)", ("state",)),
    "locality_jobs": (
        "gauge",
        "Jobs slurmctld holds that carry the filter's record, by state, locality and Slurm's reason",
        ("state", "locality", "reason"),
    ),
    "relaxed_jobs": (
        "gauge",
        "Jobs slurmctld holds that slurm-topo relax widened, by relaxation (from the AdminComment trail)",
        ("from_level", "to_level"),
    ),
    "filter_not_applied_jobs": (
        "gauge",
        "Jobs slurmctld holds whose locality the filter did not apply (fail-open: 'slurm-topo: not applied')",
        (),
    ),
    "health_drained_nodes": (
        "gauge",
        "Nodes drained by slurm-topo health-sync, by the first fault's link",
        ("link",),
    ),
    "data_file_present": ("gauge", "1 when the filter's data file exists", ("path",)),
    "data_file_age_seconds": ("gauge", "Seconds since the filter's data file was written", ("path",)),
    "data_file_checksum_ok": (
        "gauge",
        "1 when the data file passes its checksum and format check (the filter would load it)",
        ("path",),
    ),
    "source_up": ("gauge", "1 when the source was read this pass, 0 when reading it failed", ("source",)),
    "refused_jobs": ("gauge", "Jobs the access layer could not read safely this pass", ()),
    "snapshot_timestamp_seconds": ("gauge", "When this pass read Slurm (seconds since the epoch)", ()),
}
"""Every metric: name (without :data:`PREFIX`) -> (type, help, label names). docs/report.md lists them."""


@dataclass(frozen=True)
class DataFileState:
    path: str
    present: bool
    age_s: float | None = None
    problem: str | None = None
    """Why the filter would not load it (doctor's check); None when it would."""


@dataclass(frozen=True)
class Snapshot:
    """What one pass read. ``errors``: source -> why it could not be read (its metrics are left out and
    ``source_up`` is 0)."""

    now: float
    capacity: Capacity | None = None
    jobs: Sequence[Mapping[str, str]] = ()
    nodes: Sequence[Mapping[str, str]] = ()
    data_file: DataFileState | None = None
    refused_jobs: int = 0
    sources: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)


def _label(value: str | None, pattern: re.Pattern[str]) -> str:
    return value if value is not None and pattern.fullmatch(value) else OTHER


def locality_of(admin_comment: str) -> str | None:
    """The locality the filter recorded (``slurm-topo: zone:wait [...]`` -> ``zone:wait``); ``not applied``
    and no record -> None."""
    from .explain import filter_record, locality_of_record

    record = filter_record(admin_comment)
    if record is None or record.startswith("not applied"):
        return None
    return locality_of_record(record)


def job_counts(
    jobs: Iterable[Mapping[str, str]],
) -> tuple[Counter[tuple[str, str, str]], Counter[tuple[str, str]], int]:
    """(state, locality, reason) of the jobs with a filter record; relaxations (from, to); fail-open jobs."""
    located: Counter[tuple[str, str, str]] = Counter()
    relaxed: Counter[tuple[str, str]] = Counter()
    not_applied = 0
    for job in jobs:
        admin = job.get("AdminComment") or ""
        if RECORD_PREFIX not in admin and "slurm-topo-" not in admin:
            continue
        if NOT_APPLIED in admin:
            not_applied += 1
        loc = locality_of(admin)
        if loc is not None:
            state = _label(job.get("JobState"), _STATE_RE)
            located[(state, _label(loc, _LOCALITY_RE), _label(job.get("Reason"), _REASON_RE))] += 1
        for src, dst in relaxations(admin):
            relaxed[(src if src in LEVELS else OTHER, dst if dst in LEVELS else OTHER)] += 1
    return located, relaxed, not_applied


def drain_counts(nodes: Iterable[Mapping[str, str]]) -> Counter[str]:
    """Nodes health-sync drained (Reason ``slurm-topo-health: <link> …``), by the link its reason names."""
    out: Counter[str] = Counter()
    for node in nodes:
        reason = node.get("Reason") or ""
        if not reason.startswith(HEALTH_PREFIX):
            continue
        words = reason[len(HEALTH_PREFIX) :].split()
        out[_label(words[0] if words else None, _LINK_RE)] += 1
    return out


def _family(name: str) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    kind, text, labels = METRICS[name]
    assert kind == "gauge"
    return GaugeMetricFamily(PREFIX + name, text, labels=list(labels))


def _capacity_families(cap: Capacity) -> list[Metric]:
    fams = {n: _family(n) for n in ("capacity_jobs", "capacity_groups", "capacity_stranded_gpus")}
    naive, gpus, nodes = _family("capacity_naive_jobs"), _family("gpus"), _family("nodes")
    for shape in cap.shapes:
        naive.add_metric([shape.shape], shape.naive_jobs)
        for lv in shape.levels:
            fams["capacity_jobs"].add_metric([shape.shape, lv.level], lv.jobs)
            fams["capacity_groups"].add_metric([shape.shape, lv.level], lv.groups)
            fams["capacity_stranded_gpus"].add_metric([shape.shape, lv.level], lv.stranded_gpus)
    gpus.add_metric(["free"], cap.free_gpus)
    gpus.add_metric(["total"], cap.total_gpus)
    for kind, count in sorted(cap.counts.items()):
        nodes.add_metric([kind], count)
    return [*fams.values(), naive, gpus, nodes]


def _job_families(snap: Snapshot) -> list[Metric]:
    located, relaxed, not_applied = job_counts(snap.jobs)
    loc, rel, fail_open = (
        _family("locality_jobs"),
        _family("relaxed_jobs"),
        _family("filter_not_applied_jobs"),
    )
    for located_key, count in sorted(located.items()):
        loc.add_metric(list(located_key), count)
    for relaxed_key, count in sorted(relaxed.items()):
        rel.add_metric(list(relaxed_key), count)
    fail_open.add_metric([], not_applied)
    refused = _family("refused_jobs")
    refused.add_metric([], snap.refused_jobs)
    return [loc, rel, fail_open, refused]


def _data_families(state: DataFileState) -> list[Metric]:
    present, age, ok = (
        _family("data_file_present"),
        _family("data_file_age_seconds"),
        _family("data_file_checksum_ok"),
    )
    present.add_metric([state.path], 1 if state.present else 0)
    if state.present:
        ok.add_metric([state.path], 0 if state.problem else 1)
        if state.age_s is not None:
            age.add_metric([state.path], state.age_s)
    return [present, age, ok]


def families(snap: Snapshot) -> list[Metric]:
    """Pure: the snapshot as metric families (a source that failed leaves its families out)."""
    out: list[Metric] = []
    if snap.capacity is not None:
        out += _capacity_families(snap.capacity)
    if "jobs" in snap.sources and "jobs" not in snap.errors:
        out += _job_families(snap)
    if "nodes" in snap.sources and "nodes" not in snap.errors:
        drains = _family("health_drained_nodes")
        for link, count in sorted(drain_counts(snap.nodes).items()):
            drains.add_metric([link], count)
        out.append(drains)
    if snap.data_file is not None:
        out += _data_families(snap.data_file)
    up = _family("source_up")
    for source in snap.sources:
        up.add_metric([source], 0 if source in snap.errors else 1)
    stamp = _family("snapshot_timestamp_seconds")
    stamp.add_metric([], snap.now)
    return [*out, up, stamp]


class _Collector:
    """prometheus_client's custom-collector protocol over a function that gives the families."""

    def __init__(self, produce: Callable[[], list[Metric]]) -> None:
        self._produce = produce

    def collect(self) -> Iterable[Metric]:
        return self._produce()

    def describe(self) -> Iterable[Metric]:  # no describe-time collection: the read runs on scrapes only
        return []


def registry_of(produce: Callable[[], list[Metric]]) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(produce))
    return reg


def exposition(snap: Snapshot) -> bytes:
    """The text format (``prometheus_client.generate_latest``) of one snapshot."""
    from prometheus_client import generate_latest

    return bytes(generate_latest(registry_of(lambda: families(snap))))


def write_textfile(path: str | os.PathLike[str], snap: Snapshot) -> None:
    """Write the exposition for node_exporter's textfile collector: to a temporary file in the same folder,
    then renamed over ``path`` (the collector never reads half a file; a failed write leaves the old one)."""
    from prometheus_client import write_to_textfile

    write_to_textfile(os.fspath(path), registry_of(lambda: families(snap)))


# ---- reading one snapshot (the only part that calls Slurm or reads a file)


def data_file_state(path: Path, now: float) -> DataFileState:
    from ..render.filter_data import FORMAT
    from ..slurmconfig.doctor import data_file_problem

    try:
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return DataFileState(str(path), False)
    except OSError as exc:
        return DataFileState(str(path), False, problem=exc.strerror or "unreadable")
    return DataFileState(str(path), True, max(0.0, now - mtime), data_file_problem(data, FORMAT))


@dataclass(frozen=True)
class Sources:
    """What a pass reads: the inventory (None: no capacity), the shapes to count, the data file (None: not
    checked), and whether to read jobs and nodes from Slurm."""

    inventory: object | None = None
    shapes: tuple[tuple[int, int] | tuple[int, int, int], ...] = ()  # (nodes, GPUs[, ep]): capacity.Shape
    data_file: Path | None = None
    slurm: bool = True


def read_snapshot(sources: Sources, runner: Runner, now: float | None = None) -> Snapshot:
    """One pass: node states (``scontrol -d show node -o``) for capacity and drains, the job listing through
    :class:`~slurm_topo.access.SlurmAccess`, the data file. A source that fails is recorded, not raised:
    the other metrics are still written."""
    from ..access import SlurmAccess
    from ..access import argv as slurm_argv
    from ..access.text import parse_scontrol_nodes
    from ..core.errors import SlurmTopoError
    from ..core.model import Inventory
    from .capacity import capacity, node_states

    now = time.time() if now is None else now
    errors: dict[str, str] = {}
    names: list[str] = []
    nodes: list[dict[str, str]] = []
    jobs: list[dict[str, str]] = []
    refused = 0
    cap = None
    if sources.slurm:
        names += ["nodes", "jobs"]
        try:
            nodes = parse_scontrol_nodes(
                runner.run(slurm_argv.show_nodes(detail=True)), source="scontrol -d show node -o"
            )
        except SlurmTopoError as exc:
            errors["nodes"] = str(exc)
        try:
            listing = SlurmAccess(runner).jobs()
            jobs, refused = listing.jobs, len(listing.refused)
        except SlurmTopoError as exc:
            errors["jobs"] = str(exc)
    inv = sources.inventory
    if isinstance(inv, Inventory) and sources.shapes and "nodes" not in errors and sources.slurm:
        states, extra = node_states(inv, nodes)
        cap = capacity(inv, states, sources.shapes, extra_nodes=extra)
    data = data_file_state(sources.data_file, now) if sources.data_file is not None else None
    return Snapshot(now, cap, jobs, nodes, data, refused, tuple(names), errors)


def serve(port: int, addr: str, produce: Callable[[], Snapshot], min_interval: float = 15.0) -> object:
    """A scrape endpoint (``prometheus_client.start_http_server``); a scrape within ``min_interval`` seconds
    of the last read answers that read's metrics (one Slurm read per interval, however many scrapers)."""
    import threading

    from prometheus_client import start_http_server

    lock = threading.Lock()
    last: list[tuple[float, list[Metric]]] = []

    def cached() -> list[Metric]:
        with lock:
            t = time.monotonic()
            if not last or t - last[0][0] >= min_interval:
                last[:] = [(t, families(produce()))]
            return last[0][1]

    return start_http_server(port, addr=addr, registry=registry_of(cached))
