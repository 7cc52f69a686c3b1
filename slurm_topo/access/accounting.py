"""Finished jobs from Slurm's accounting (``sacct``), for ``slurm-topo report``: one :class:`FinishedJob` per
job allocation, whatever the release.

- ``sacct --json`` (22.05's dbv0.0.38, 24.11's v0.0.42, 26.05's v0.0.45): a job's name, comment and
  AdminComment are JSON strings; they cannot become another field or another job.
- the text form, for a sacct without its JSON serializer: ``sacct -P`` of fixed-grammar fields only
  (:data:`~slurm_topo.access.argv.SACCT_TEXT_FIELDS`: no name, comment or path), each line checked whole
  (field count, a numeric job id, ISO times, integers, a node list Slurm's way); a line that does not fit is
  refused, never guessed. A multi-node job's AdminComment and Comment are then asked one field of one job a
  call (:func:`~slurm_topo.access.argv.sacct_field`), so whatever they hold is that field's value.

Pure parsers (text in, records out) and one loader (:func:`load_finished`) that runs the commands.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import hostlist
from ..core.errors import CommandError, HostlistError, ParseError
from . import argv
from .jobs import _num, _state, _text

FINISHED_STATES = frozenset(
    (
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "DEADLINE",
        "BOOT_FAIL",
    )
)
"""Slurm's terminal job states (a CANCELLED text state may read ``CANCELLED by 0``)."""

_JOB_ID_RE = re.compile(r"[0-9]{1,12}")
_ISO_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_TRES_GPU_RE = re.compile(r"(?:^|,)gres/gpu=([0-9]{1,9})(?:,|$)")
_NAME_RE = re.compile(r"[A-Za-z0-9_.@-]{1,128}|\(unknown\)")
UNKNOWN_USER = "(unknown)"
"""22.05's ``sacct --json`` gives ``user: null`` for a job whose user has no association (the text form names
it): such a job is kept, under this name."""
_STATE_RE = re.compile(r"([A-Z_]{1,32})(?: by [0-9]{1,10})?")


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """One finished job allocation as accounting kept it. Times are seconds since the epoch; ``gpus`` the
    allocated ``gres/gpu`` (0: none accounted)."""

    job_id: str
    user: str
    partition: str
    state: str
    submit: int
    start: int
    end: int
    elapsed: int
    nodes: tuple[str, ...]
    gpus: int
    admin_comment: str = ""
    comment: str = ""

    @property
    def node_list(self) -> str:
        return hostlist.compress(self.nodes) if self.nodes else ""


@dataclass
class Finished:
    """What one read of the accounting gave: the finished jobs, those refused (job id or line, why), and
    the backend (``json`` or ``text``)."""

    jobs: list[FinishedJob] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    backend: str = ""


def _label(value: str, what: str) -> str:
    """A user or partition name as Slurm allows it; anything else is refused (it would steer a summary)."""
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"{what} {value[:40]!r} is not a name")
    return value


def _nodes(text: str) -> tuple[str, ...]:
    if text in ("", "None assigned", "(null)"):
        return ()
    try:
        return tuple(hostlist.expand(text))
    except HostlistError as exc:
        raise ValueError(f"node list {text[:60]!r}: {exc}") from None


# ---- JSON


def _json_gpus(tres: Any) -> int:
    allocated = tres.get("allocated") if isinstance(tres, Mapping) else None
    if not isinstance(allocated, list):
        raise ValueError("tres.allocated is not a list")
    for t in allocated:
        if isinstance(t, Mapping) and t.get("type") == "gres" and t.get("name") == "gpu":
            count = _num(t.get("count"))
            return count if count and count > 0 else 0
    return 0


def job_from_sacct_json(j: Mapping[str, Any]) -> FinishedJob | None:
    """One job of ``sacct --json``; None when it has not finished (or never ran); ValueError when a field
    Slurm always fills is missing or of another type."""
    jid = _num(j.get("job_id"))
    if jid is None or jid <= 0:
        raise ValueError("no job_id")
    state = _state((j.get("state") or {}).get("current") if isinstance(j.get("state"), Mapping) else None)
    t = j.get("time")
    if not isinstance(t, Mapping):
        raise ValueError("no time")
    start, end, submit = _num(t.get("start")), _num(t.get("end")), _num(t.get("submission"))
    elapsed = _num(t.get("elapsed"))
    if state not in FINISHED_STATES or not start or not end or elapsed is None:
        return None
    comment = j.get("comment")
    comments = comment if isinstance(comment, Mapping) else {}
    return FinishedJob(
        str(jid),
        _label(_text(j.get("user")) or UNKNOWN_USER, "user"),
        _label(_text(j.get("partition")), "partition"),
        state,
        submit or 0,
        start,
        end,
        elapsed,
        _nodes(_text(j.get("nodes"))),
        _json_gpus(j.get("tres")),
        _text(comments.get("administrator")),
        _text(comments.get("job")),
    )


def finished_from_json(text: str) -> Finished:
    """``sacct --json`` -> the finished jobs; a job whose fields do not fit is refused with why."""
    import json

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError("sacct --json", 1, f"not JSON: {exc}") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ParseError("sacct --json", 1, "no 'jobs' list")
    out = Finished(backend="json")
    for j in jobs:
        if not isinstance(j, Mapping):
            out.refused.append(("?", "a job that is not an object"))
            continue
        try:
            job = job_from_sacct_json(j)
        except ValueError as exc:
            out.refused.append((str(j.get("job_id", "?"))[:20], str(exc)))
            continue
        if job is not None:
            out.jobs.append(job)
    return out


# ---- text (sacct -P of fixed-grammar fields)


def _epoch(value: str, what: str) -> int:
    if value in ("Unknown", "None", ""):
        return 0
    if not _ISO_RE.fullmatch(value):
        raise ValueError(f"{what} {value[:30]!r} is not sacct's ISO time (SLURM_TIME_FORMAT must be unset)")
    return int(time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S")))


def _int(value: str, what: str) -> int:
    if not value.isdigit() or len(value) > 12:
        raise ValueError(f"{what} {value[:20]!r} is not a count")
    return int(value)


def job_from_sacct_line(line: str) -> FinishedJob | None:
    """One line of :func:`~slurm_topo.access.argv.sacct_text`; None when the job has not finished;
    ValueError for a line that does not fit the fields asked for."""
    fields = line.split("|")
    if len(fields) != len(argv.SACCT_TEXT_FIELDS):
        raise ValueError(f"{len(fields)} fields, expected {len(argv.SACCT_TEXT_FIELDS)}")
    rec = dict(zip(argv.SACCT_TEXT_FIELDS, fields, strict=True))
    if not _JOB_ID_RE.fullmatch(rec["JobIDRaw"]):
        raise ValueError(f"JobIDRaw {rec['JobIDRaw'][:20]!r} is not a job id")
    m = _STATE_RE.fullmatch(rec["State"])
    if m is None:
        raise ValueError(f"State {rec['State'][:30]!r} is not a job state")
    start, end = _epoch(rec["Start"], "Start"), _epoch(rec["End"], "End")
    elapsed = _int(rec["ElapsedRaw"], "ElapsedRaw")
    nodes = _nodes(rec["NodeList"])
    if _int(rec["NNodes"], "NNodes") != len(nodes) and nodes:
        raise ValueError(f"NNodes {rec['NNodes']} but NodeList {rec['NodeList'][:40]!r}")
    gpu = _TRES_GPU_RE.search(rec["AllocTRES"])
    job = FinishedJob(
        rec["JobIDRaw"],
        _label(rec["User"], "user"),
        _label(rec["Partition"], "partition"),
        m.group(1),
        _epoch(rec["Submit"], "Submit"),
        start,
        end,
        elapsed,
        nodes,
        int(gpu.group(1)) if gpu else 0,
    )
    return job if job.state in FINISHED_STATES and start and end else None


def finished_from_text(text: str) -> Finished:
    """``sacct -n -P`` of the fixed fields -> the finished jobs (comments not yet read); a line that does
    not fit is refused with its number and why."""
    out = Finished(backend="text")
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        try:
            job = job_from_sacct_line(line)
        except ValueError as exc:
            out.refused.append((f"line {lineno}", str(exc)))
            continue
        if job is not None:
            out.jobs.append(job)
    return out


def field_value(text: str) -> str:
    """What :func:`~slurm_topo.access.argv.sacct_field` printed: the one field, its own line breaks kept
    (the last newline is sacct's)."""
    return text[:-1] if text.endswith("\n") else text


# ---- the loader


Run = Callable[[Sequence[str]], str]


def _no_json(exc: CommandError) -> bool:
    text = str(exc).lower()
    return "unrecognized option" in text or "serializer" in text or "data_parser" in text


def with_comments(
    run: Run, jobs: Iterable[FinishedJob], wanted: Callable[[FinishedJob], bool]
) -> list[FinishedJob]:
    """The text backend's second step: each wanted job's AdminComment and Comment, one field a call."""
    out = []
    for job in jobs:
        if wanted(job):
            admin = field_value(run(argv.sacct_field(job.job_id, "AdminComment")))
            comment = field_value(run(argv.sacct_field(job.job_id, "Comment")))
            job = replace(job, admin_comment=admin, comment=comment)
        out.append(job)
    return out


def load_finished(
    run: Run,
    since: str,
    until: str,
    backend: str | None = None,
    wanted: Callable[[FinishedJob], bool] | None = None,
) -> Finished:
    """Finished jobs between ``since`` and ``until`` (sacct's ``--starttime``/``--endtime`` forms):
    ``sacct --json`` unless ``backend == "text"`` or sacct has no JSON. ``wanted``: the jobs whose comments
    the text backend reads (default: multi-node jobs)."""
    if backend not in (None, "json", "text"):
        raise ValueError(f"sacct backend {backend!r}: json or text")
    if backend != "text":
        try:
            return finished_from_json(run(argv.sacct_json(since, until)))
        except CommandError as exc:
            if backend == "json" or not _no_json(exc):
                raise
    listing = finished_from_text(run(argv.sacct_text(since, until)))
    listing.jobs = with_comments(run, listing.jobs, wanted or (lambda j: len(j.nodes) > 1))
    return listing
