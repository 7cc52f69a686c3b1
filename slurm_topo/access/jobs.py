"""Slurm's job listings -> job records, read so that no field a user controls can change another field.

A job record is a ``dict`` in ``scontrol show job``'s vocabulary (``JobId``, ``JobState``, ``Reason``,
``Priority``, ``SubmitTime``, ``AdminComment``, ``Features``, ``NumNodes``, …: :data:`JOB_KEYS`), whatever
the backend read it from, so that the pure code (relax, explain) reads one shape.

Two parsers, both pure (text in, records out):

- :func:`jobs_from_json`: ``squeue --json`` (Slurm 22.05's ``openapi/v0.0.38`` and the ``data_parser``
  v0.0.40+ of 23.02 and later: numbers as ``{"set", "infinite", "number"}``, states as lists). Structured:
  a job name is a JSON string, whatever it contains.
- :func:`jobs_from_text`: ``scontrol show job -o``, for a Slurm built without the JSON serializer. A value
  runs up to the next `` Key=``, so a free-text field (JobName, Comment, WorkDir, Command, StdOut, an
  AdminComment written by someone else) could carry a forged `` JobState=PENDING``. The parser refuses, not
  guesses: a line where a key scontrol prints appears twice, or out of scontrol's order, is ambiguous and
  comes back in :attr:`JobListing.refused` with its job id; it is never read.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import hostlist
from ..allocation import Allocation
from ..errors import HostlistError, ParseError
from ..text import NULL

#: The keys of a job record (scontrol's names). A JSON listing fills these; a text line keeps all of its own.
JOB_KEYS = (
    "JobId",
    "JobName",
    "UserId",
    "JobState",
    "Reason",
    "Priority",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "Partition",
    "ReqNodeList",
    "ExcNodeList",
    "NodeList",
    "NumNodes",
    "NumTasks",
    "CPUs/Task",
    "MinMemoryNode",
    "Features",
    "Prefer",
    "OverSubscribe",
    "TimeLimit",
    "WorkDir",
    "AdminComment",
    "Comment",
    "Reservation",
    "TresPerNode",
)

#: The keys ``scontrol show job -o`` prints (22.05 -> 26.05), in its order. A key of this list that a
#: line shows twice or out of this order makes the line ambiguous (a free-text field carried it).
SCONTROL_JOB_ORDER = (
    "JobId",
    "ArrayJobId",
    "ArrayTaskId",
    "ArrayTaskThrottle",
    "HetJobId",
    "HetJobOffset",
    "HetJobIdSet",
    "JobName",
    "UserId",
    "GroupId",
    "MCS_label",
    "Priority",
    "Nice",
    "Account",
    "QOS",
    "WCKey",
    "JobState",
    "Reason",
    "FailedNode",
    "Dependency",
    "Requeue",
    "Restarts",
    "BatchFlag",
    "Reboot",
    "ExitCode",
    "DerivedExitCode",
    "RunTime",
    "TimeLimit",
    "TimeMin",
    "SubmitTime",
    "EligibleTime",
    "AccrueTime",
    "StartTime",
    "EndTime",
    "Deadline",
    "PreemptEligibleTime",
    "PreemptTime",
    "SuspendTime",
    "SecsPreSuspend",
    "LastSchedEval",
    "ResizeTime",
    "Scheduler",
    "Partition",
    "AllocNode:Sid",
    "ReqNodeList",
    "ExcNodeList",
    "NodeList",
    "SchedNodeList",
    "BatchHost",
    "StepMgrEnabled",
    "NumNodes",
    "NumCPUs",
    "NumTasks",
    "CPUs/Task",
    "ReqB:S:C:T",
    "ReqTRES",
    "AllocTRES",
    "TRES",
    "Socks/Node",
    "NtasksPerN:B:S:C",
    "CoreSpec",
    "MinCPUsNode",
    "MinMemoryNode",
    "MinMemoryCPU",
    "MinTmpDiskNode",
    "Features",
    "DelayBoot",
    "ClusterFeatures",
    "Prefer",
    "Reservation",
    "OverSubscribe",
    "Exclusive",
    "Contiguous",
    "Licenses",
    "LicensesAlloc",
    "Network",
    "Command",
    "SubmitLine",
    "WorkDir",
    "AdminComment",
    "SystemComment",
    "Comment",
    "StdErr",
    "StdIn",
    "StdOut",
    "Power",
    "CpusPerTres",
    "MemPerTres",
    "TresBind",
    "TresFreq",
    "TresPerJob",
    "TresPerNode",
    "TresPerSocket",
    "TresPerTask",
    "MailUser",
    "MailType",
    "Segment",
)
_ORDER = {k: i for i, k in enumerate(SCONTROL_JOB_ORDER)}
_KEY_RE = re.compile(r"(?:^| )([A-Z][A-Za-z0-9_:/]*)=")


@dataclass
class JobListing:
    """What one read of the job list gave: the records, and the jobs that could not be read safely
    (``(job id, why)``; a caller logs one line each and goes on)."""

    jobs: list[dict[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    backend: str = ""
    listed: int = 0
    """How many jobs Slurm's answer held before a ``job`` filter: more than one for a one-job query means
    the client ignored its filter (22.05's ``squeue --json``)."""


# ---- JSON (squeue --json)


def _num(value: Any) -> int | None:
    """A JSON number of any release: ``5`` (v0.0.38) or ``{"set": true, "infinite": false, "number": 5}``
    (v0.0.40+); None when unset or infinite."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        n = value.get("number")
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    return None


def _infinite(value: Any) -> bool:
    return isinstance(value, dict) and bool(value.get("infinite"))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _or_null(value: Any) -> str:
    s = _text(value)
    return s if s else NULL


def _state(value: Any) -> str:
    """``"PENDING"`` (v0.0.38) or ``["PENDING", "REQUEUED"]`` (v0.0.40+): the base state first."""
    if isinstance(value, list):
        return _text(value[0]) if value else ""
    return _text(value)


def _local_time(epoch: int | None) -> str:
    """scontrol's local ``2026-12-01T22:56:59``, or ``Unknown``."""
    if not epoch:
        return "Unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def _time_limit(value: Any) -> str:
    """Minutes -> scontrol's ``[D-]HH:MM:SS``; ``UNLIMITED`` when infinite, ``NONE`` when unset
    (``Partition_Limit`` in scontrol's words: the job takes its partition's)."""
    if _infinite(value) and _num(value) is None:
        return "UNLIMITED"
    minutes = _num(value)
    if minutes is None:
        return "Partition_Limit"
    days, rest = divmod(minutes, 24 * 60)
    hms = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{hms}" if days else hms


_SHARED = {"none": "NO", "oversubscribe": "YES", "user": "USER", "mcs": "MCS", "topo": "TOPO"}


def _oversubscribe(value: Any) -> str:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) and value else []
    for item in items:
        if isinstance(item, str) and item.lower() in _SHARED:
            return _SHARED[item.lower()]
    return "OK"


def job_from_json(j: Mapping[str, Any]) -> dict[str, str]:
    """One job of ``squeue --json`` -> a record in scontrol's vocabulary (:data:`JOB_KEYS`)."""
    jid = _num(j.get("job_id"))
    if jid is None:
        raise ParseError("squeue --json", None, "a job without a job_id")
    state = _state(j.get("job_state"))
    nmin, nmax = _num(j.get("node_count")), _num(j.get("max_nodes"))
    nodes = "" if nmin is None else str(nmin)
    if state == "PENDING" and nmin is not None and nmax:
        nodes = f"{nmin}-{nmax}"  # scontrol's form for a pending job: the range asked for
    mem = _num(j.get("memory_per_node"))
    user, uid = _text(j.get("user_name")), _num(j.get("user_id"))
    return {
        "JobId": str(jid),
        "JobName": _text(j.get("name")),
        "UserId": f"{user}({uid})" if uid is not None else user,
        "JobState": state,
        "Reason": _text(j.get("state_reason")) or "None",
        "Priority": str(_num(j.get("priority")) or 0),
        "SubmitTime": _local_time(_num(j.get("submit_time"))),
        "StartTime": _local_time(_num(j.get("start_time"))),
        "EndTime": _local_time(_num(j.get("end_time"))),
        "Partition": _or_null(j.get("partition")),
        "ReqNodeList": _or_null(j.get("required_nodes")),
        "ExcNodeList": _or_null(j.get("excluded_nodes")),
        "NodeList": _text(j.get("nodes")),
        "NumNodes": nodes,
        "NumTasks": str(_num(j.get("tasks")) or 1),
        "CPUs/Task": str(_num(j.get("cpus_per_task")) or 1),
        "MinMemoryNode": f"{mem}M" if mem else "0",
        "Features": _or_null(j.get("features")),
        "Prefer": _or_null(j.get("prefer")),
        "OverSubscribe": _oversubscribe(j.get("shared")),
        "TimeLimit": _time_limit(j.get("time_limit")),
        "WorkDir": _text(j.get("current_working_directory")),
        "AdminComment": _text(j.get("admin_comment")),
        "Comment": _text(j.get("comment")),
        "Reservation": _or_null(j.get("resv_name")),
        "TresPerNode": _text(j.get("tres_per_node")),
    }


def _ids(j: Mapping[str, Any], jid: str) -> set[str]:
    """The names a job answers to: its id, ``ARRAY_TASK`` and ``HET+OFFSET``."""
    ids = {jid}
    array, task = _num(j.get("array_job_id")), _num(j.get("array_task_id"))
    if array and task is not None:
        ids.add(f"{array}_{task}")
    het, offset = _num(j.get("het_job_id")), _num(j.get("het_job_offset"))
    if het and offset is not None:
        ids.add(f"{het}+{offset}")
    return ids


def jobs_from_json(text: str, job: str | None = None) -> JobListing:
    """``squeue --json`` -> the jobs (only ``job`` when given: 22.05's squeue ignores its filters with
    ``--json``). A listing that is not JSON raises :class:`ParseError`; one malformed job is refused."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError("squeue --json", None, f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ParseError("squeue --json", None, "no 'jobs' list")
    out = JobListing(backend="json", listed=len(doc["jobs"]))
    for j in doc["jobs"]:
        if not isinstance(j, dict):
            continue
        try:
            rec = job_from_json(j)
        except (ParseError, TypeError, ValueError, AttributeError) as exc:
            out.refused.append((str(j.get("job_id", "?"))[:20], f"unreadable job: {str(exc)[:80]}"))
            continue
        if job is None or job in _ids(j, rec["JobId"]):
            out.jobs.append(rec)
    for e in doc.get("errors") or ():
        if isinstance(e, dict) and e.get("description"):
            raise ParseError("squeue --json", None, str(e.get("description"))[:200])
    return out


_IDX_RE = re.compile(r"gpu[^,(\s]*\(IDX:([0-9,-]*)\)")


def allocation_from_json(text: str, job: str) -> Allocation:
    """``squeue --json`` -> the nodes of ``job`` (Slurm's order) and each node's allocated GPU indices, from
    ``nodes`` and ``gres_detail`` (one entry per node, in that order): fields a job's own name or comment can
    never reach. Raises :class:`ParseError` for a job that is unknown or has no nodes yet."""
    where = f"squeue --json (job {job[:20]})"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(where, None, f"not JSON ({exc})") from None
    for j in doc.get("jobs") or () if isinstance(doc, dict) else ():
        if not isinstance(j, dict) or _num(j.get("job_id")) is None:
            continue
        if job not in _ids(j, str(_num(j.get("job_id")))):
            continue
        expr = _text(j.get("nodes"))
        if not expr or expr == NULL:
            raise ParseError(where, None, "no nodes (is the job running?)")
        try:
            nodes = tuple(hostlist.expand(expr))
            detail = [d for d in j.get("gres_detail") or () if isinstance(d, str)]
            gpus: dict[str, tuple[int, ...]] = {}
            for node, item in zip(nodes, detail, strict=False):
                idx: list[int] = []
                for g in _IDX_RE.finditer(item):
                    idx.extend(hostlist.expand_numbers(g.group(1)))
                gpus[node] = tuple(sorted(set(idx)))
        except HostlistError as exc:
            raise ParseError(where, None, str(exc)) from None
        return Allocation(str(_num(j.get("job_id"))), nodes, {n: gpus.get(n, ()) for n in nodes})
    raise ParseError(where, None, "no such job")


# ---- text (scontrol show job -o)


def job_from_text(line: str) -> dict[str, str]:
    """One ``scontrol show job -o`` line -> {key: value}. Raises ValueError when the line is ambiguous: a
    key scontrol prints appears twice or out of scontrol's order (a free-text value carried it)."""
    line = line.strip()
    matches = list(_KEY_RE.finditer(line))
    if not matches or matches[0].start() != 0 or matches[0][1] != "JobId":
        raise ValueError("not a JobId= line")
    known = [m for m in matches if m[1] in _ORDER]
    seen: set[str] = set()
    last = -1
    for m in known:
        key = m[1]
        if key in seen:
            raise ValueError(f"{key}= appears twice")
        if _ORDER[key] < last:
            raise ValueError(f"{key}= out of scontrol's order")
        seen.add(key)
        last = _ORDER[key]
    out: dict[str, str] = {}
    for i, m in enumerate(known):
        end = known[i + 1].start() if i + 1 < len(known) else len(line)
        out[m[1]] = line[m.end() : end].strip()
    return out


def jobs_from_text(text: str) -> JobListing:
    """``scontrol show job -o`` -> the jobs; ambiguous lines refused with their job id. scontrol prints a
    value as it is, line breaks included, so a job's record is one line only when none of its values holds
    one: a job followed by a line that is not a ``JobId=`` line is refused (its values run on), and so is
    every record of a job id that more than one ``JobId=`` line claims (a value's line break can start what
    looks like a record of its own)."""
    out = JobListing(backend="text")
    lines: list[tuple[str, str]] = []  # (job id, line) of every JobId= line, in order
    split: set[str] = set()
    for line in text.splitlines():
        if line.startswith("JobId="):
            lines.append((line[6:].split(" ", 1)[0][:20], line))
        elif line.strip() and lines:
            split.add(lines[-1][0])
    claims: dict[str, int] = {}
    for jid, _ in lines:
        claims[jid] = claims.get(jid, 0) + 1
    for jid, line in lines:
        if claims[jid] > 1 or jid in split:
            why = "claimed by more than one line" if claims[jid] > 1 else "a value runs on to the next line"
            out.refused.append((jid, f"ambiguous scontrol line ({why}): not read"))
            continue
        try:
            out.jobs.append(job_from_text(line))
        except ValueError as exc:
            out.refused.append((jid, f"ambiguous scontrol line ({exc}): not read"))
    return out


def pending_count(jobs: Sequence[Mapping[str, str]]) -> int:
    return sum(1 for j in jobs if j.get("JobState") == "PENDING")
