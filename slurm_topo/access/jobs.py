"""Slurm's job listings -> job records, read so that no field a user controls can change another field.

A job record is a ``dict`` in ``scontrol show job``'s vocabulary (``JobId``, ``JobState``, ``Reason``,
``Priority``, ``SubmitTime``, ``AdminComment``, ``Features``, ``NumNodes``, …: :data:`JOB_KEYS`), whatever
the backend read it from, so that the pure code (relax, explain) reads one shape.

Two parsers, both pure (text in, records out), and one reader:

- :func:`jobs_from_json`: ``squeue --json`` (Slurm 22.05's ``openapi/v0.0.38`` and the ``data_parser``
  v0.0.40+ of 23.02 and later: numbers as ``{"set", "infinite", "number"}``, states as lists). Structured:
  a job name is a JSON string, whatever it contains.
- :func:`jobs_from_text`: ``scontrol show job -o``, for a Slurm built without the JSON serializer. A value
  runs up to the next `` Key=``, so a free-text field (JobName, Comment, Extra, WorkDir, Command, SubmitLine,
  StdOut, an AdminComment written by someone else) could carry a forged `` JobState=PENDING``; and scontrol
  prints a value as it is, line breaks included, so a value can also end its line and start what looks like
  another job's record (``x\\nJobId=999999 …``). The parser refuses, not guesses: a record with a line break
  or carriage return in it, a key its release does not print (:data:`SCONTROL_JOB_KEYS`), a key twice or out
  of scontrol's order is untrusted whole and comes back in :attr:`JobListing.refused` with its job id; it is
  never read.
- :func:`load_text_jobs`: the text backend's reads, through a ``run`` callable: ``scontrol show job -o``
  between two ``squeue`` lists of the job ids (numbers only), and a re-read by id (``scontrol show job -o
  ID``, which prints that job alone) of each job whose line the listing cannot tell from a forgery.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..core import hostlist
from ..core.allocation import Allocation
from ..core.errors import CommandError, HostlistError, ParseError
from ..plumbing.text import NULL
from . import argv

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

#: The keys ``scontrol show job -o`` prints, release by release, in its order: Slurm's own printer
#: (``slurm_sprint_job_info`` in src/api/job_info.c of 22.05.8, ``_sprint_job_info`` in
#: src/scontrol/info_job.c of 24.11.5 and 26.05), checked against real listings of every release
#: (tests/fixtures/real/job-listing/, tests/test_access_text.py). ``A|B`` is one place that prints one
#: of them (``CoreSpec`` or ``ThreadSpec``). Keys printed only with ``-d`` (DerivedExitCode, SLUID) are
#: listed; ``-d``'s per-node lines (``Nodes= CPU_IDs= Mem= GRES=``) are not: the text reader never asks for
#: them. CPU_min_freq, CPU_max_freq and Governor are ``--cpu-freq``'s; the Gres…/KillO…/SpreadJob flags are
#: one place each (22.05 runs them together, 24.11 joins them with commas: only the first starts a key).
SCONTROL_JOB_KEYS: dict[str, tuple[str, ...]] = {
    "22.05": tuple(
        """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset JobName HetJobIdSet
        UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue
        Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime
        EligibleTime AccrueTime ResizeTime StartTime EndTime Deadline CronJob CrontabSpec
        PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition
        AllocNode:Sid ReqNodeList ExcNodeList NodeList SchedNodeList BatchFeatures BatchHost
        FedOrigin FedViableSiblings FedActiveSiblings NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T
        TRES Socks/Node NtasksPerN:B:S:C CoreSpec|ThreadSpec MinCPUsNode MinMemoryNode|MinMemoryCPU
        MinTmpDiskNode Features DelayBoot ClusterFeatures Prefer Reservation OverSubscribe
        Contiguous Licenses Network Command WorkDir AdminComment SystemComment Comment StdErr StdIn
        StdOut Switches BurstBuffer BurstBufferState CPU_min_freq CPU_max_freq Governor Power
        GresEnforceBind KillOInInvalidDependent SpreadJob CpusPerTres MemPerTres TresBind TresFreq
        TresPerJob TresPerNode TresPerSocket TresPerTask MailUser MailType NtasksPerTRES Container
        SELinuxContext""".split()
    ),
    "24.11": tuple(
        """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset JobName HetJobIdSet
        UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason FailedNode
        Dependency Requeue Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit
        TimeMin SubmitTime EligibleTime AccrueTime ResizeTime StartTime EndTime Deadline CronJob
        CrontabSpec PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval
        Scheduler Partition AllocNode:Sid ReqNodeList ExcNodeList NodeList SchedNodeList
        BatchFeatures BatchHost StepMgrEnabled FedOrigin FedViableSiblings FedActiveSiblings
        NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T ReqTRES AllocTRES Socks/Node NtasksPerN:B:S:C
        CoreSpec|ThreadSpec MinCPUsNode MinMemoryNode|MinMemoryCPU|MinMemoryTRES MinTmpDiskNode
        Features DelayBoot ClusterFeatures Prefer Reservation OverSubscribe Contiguous Licenses
        Network Command WorkDir AdminComment SystemComment Comment Extra StdErr StdIn StdOut
        Switches BurstBuffer BurstBufferState CPU_min_freq CPU_max_freq Governor
        GresAllowTaskSharing GresEnforceBind GresOneTaskPerSharing KillOInInvalidDependent SpreadJob
        OOMKillStep CpusPerTres MemPerTres TresBind TresFreq TresPerJob TresPerNode TresPerSocket
        TresPerTask MailUser MailType NtasksPerTRES Container ContainerID SELinuxContext ResvPorts""".split()
    ),
    "26.05": tuple(
        """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset JobName SLUID
        HetJobIdSet UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason
        FailedNode Dependency Requeue Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime
        TimeLimit TimeMin SubmitTime EligibleTime AccrueTime ResizeTime StartTime EndTime Deadline
        CronJob CrontabSpec PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval
        Scheduler Partition AllocNode:Sid ReqNodeList ExcNodeList NodeList SchedNodeList
        BatchFeatures BatchHost StepMgrEnabled FedOrigin FedViableSiblings FedActiveSiblings
        NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T ReqTRES AllocTRES Socks/Node NtasksPerN:B:S:C
        CoreSpec|ThreadSpec MinCPUsNode MinMemoryNode|MinMemoryCPU|MinMemoryTRES MinTmpDiskNode
        MemUpdate Features DelayBoot ClusterFeatures Prefer Reservation OverSubscribe Exclusive
        Contiguous Licenses LicensesAlloc Network Command SubmitLine WorkDir AdminComment
        SystemComment Comment Extra StdErr StdIn StdOut SegmentSize SpreadSegments
        ConsolidateSegments Switches BurstBuffer BurstBufferState CPU_min_freq CPU_max_freq Governor
        GresAllowTaskSharing GresEnforceBind GresOneTaskPerSharing KillOnInvalidDependent SpreadJob
        ExpeditedRequeue OOMKillStep CpusPerTres MemPerTres TresBind TresFreq TresPerJob TresPerNode
        TresPerSocket TresPerTask MailUser MailType NtasksPerTRES ContainerType Container
        ContainerID SELinuxContext ResvPorts""".split()
    ),
}


def _union(*orders: Sequence[str]) -> tuple[str, ...]:
    """One order holding every release's keys, each release's in its own order (a key new in one release
    goes right after the key before it there)."""
    out: list[str] = []
    for order in orders:
        at = -1
        for place in order:
            for key in place.split("|"):
                if key in out:
                    at = out.index(key)
                else:
                    at += 1
                    out.insert(at, key)
    return tuple(out)


#: Every key of :data:`SCONTROL_JOB_KEYS`, in an order that is each release's order (tests write job lines
#: in it).
SCONTROL_JOB_ORDER = _union(*reversed(SCONTROL_JOB_KEYS.values()))
#: Per release: key -> its place (the keys of one ``A|B`` share a place, so only one of them may appear).
_PLACES = tuple(
    {key: i for i, place in enumerate(order) for key in place.split("|")}
    for order in SCONTROL_JOB_KEYS.values()
)
#: The keys Slurm prints between ``JobId=`` and ``JobName=`` (the first value a user writes).
_ID_KEYS = frozenset(("ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset"))
_KEY_RE = re.compile(r"(?:^| )([A-Z][A-Za-z0-9_:/]*)=")
#: Characters that end a line for someone (str.splitlines, a terminal): in a record, a value carried them.
_BREAK_RE = re.compile("[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
REREADS = 256
"""At most this many re-reads by id in one text listing (:func:`load_text_jobs`); the jobs still ambiguous
then are refused for the pass, each with one line."""


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
    ids_checked: bool = False
    """A text listing: whether its lines were checked against squeue's job ids (:func:`load_text_jobs`)."""


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


def _fits(keys: Sequence[str]) -> str:
    """Why these keys (a line's, in order) are no record of any release: '' when they are one's (each key
    known to the release, none twice, in its order)."""
    best, why = -1, ""
    for places in _PLACES:
        last, bad = -1, ""
        for n, key in enumerate(keys):
            place = places.get(key)
            if place is None:
                bad = f"{key[:40]}= is no key scontrol prints"
            elif place == last:
                bad = f"{key}= appears twice"
            elif place < last:
                bad = f"{key}= out of scontrol's order"
            if bad or place is None:
                if n > best:
                    best, why = n, bad
                break
            last = place
        else:
            return ""
    return why


def _line_record(line: str, *, first_name: bool = False) -> dict[str, str]:
    """One ``scontrol show job -o`` line -> {key: value}. Raises ValueError (why) unless the line is a record
    no value can have shaped: no line break or carriage return, ``JobId=`` a number, every `` Key=`` one its
    release prints, once, in its order. ``first_name``: also ``JobName=`` right after the id keys, as Slurm
    starts every record (a line a value started need not)."""
    if _BREAK_RE.search(line):
        raise ValueError("a line break or carriage return in a value")
    matches = list(_KEY_RE.finditer(line))
    if not matches or matches[0].start() != 0 or matches[0][1] != "JobId":
        raise ValueError("not a JobId= line")
    keys = [m[1] for m in matches]
    why = _fits(keys)
    if why:
        raise ValueError(why)
    if first_name:
        n = 1
        while n < len(keys) and keys[n] in _ID_KEYS:
            n += 1
        if n >= len(keys) or keys[n] != "JobName":
            raise ValueError("no JobName= after JobId=, where Slurm prints it")
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m[1]] = line[m.end() : end].strip()
    if not out["JobId"].isdigit():
        raise ValueError("JobId= is not a number")
    return out


def job_from_text(line: str) -> dict[str, str]:
    """One ``scontrol show job -o`` line -> {key: value}. Raises ValueError when a value may have shaped the
    line: a line break or carriage return in it, a key scontrol does not print (:data:`SCONTROL_JOB_KEYS`),
    a key twice or out of scontrol's order (a free-text value carried it)."""
    return _line_record(line.strip(" \n"))


@dataclass
class _Block:
    """A line that starts ``JobId=``, and how many lines after it start no record (a value ran on)."""

    jid: str
    line: str
    more: int = 0

    def read(self, several: bool) -> tuple[dict[str, str] | None, str]:
        """(record, '') when the block is one clean line, else (None, why)."""
        if self.more:
            return None, "a value runs on to the next line"
        try:
            return _line_record(self.line, first_name=several), ""
        except ValueError as exc:
            return None, str(exc)


def _blocks(text: str) -> list[_Block]:
    """scontrol's text split at its line breaks only (``\\n``: a carriage return or another character
    str.splitlines breaks at stays inside its record, which then is untrusted). Lines before the first
    ``JobId=`` line (``No jobs in the system``) are no record."""
    out: list[_Block] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        if line.startswith("JobId="):
            out.append(_Block(line[6:].split(" ", 1)[0][:20], line))
        elif out:
            out[-1].more += 1
    return out


def _ambiguous(why: str) -> str:
    return f"ambiguous scontrol line ({why}): not read"


def _one_job(text: str, job: str, stable: frozenset[str] | None = None) -> JobListing:
    """``scontrol show job -o JOB`` -> its records. scontrol prints that job alone (every task of an array,
    every component of a heterogeneous job): a text of one clean line is that record, whatever it holds. A
    text of more lines is read only when every line is a clean record (``JobName=`` where Slurm prints it),
    no job id twice, each answering to ``JOB`` (its id, ``ArrayJobId=`` or ``HetJobId=``) and, with
    ``stable``, each a job squeue lists; else the whole answer is refused under ``JOB``."""
    blocks = _blocks(text)
    out = JobListing(backend="text", listed=len(blocks))
    several = len(blocks) > 1
    base = re.split(r"[_+]", job, maxsplit=1)[0]
    records: list[dict[str, str]] = []
    why = ""
    for b in blocks:
        rec, why = b.read(several)
        if rec is None:
            break
        if several and job not in (rec["JobId"], rec.get("ArrayJobId"), rec.get("HetJobId")):
            if base not in (rec.get("ArrayJobId"), rec.get("HetJobId")):
                why = f"a record of another job in the answer for job {job[:20]}"
                break
        if several and stable is not None and rec["JobId"] not in stable:
            why = "a record of a job squeue does not list"
            break
        records.append(rec)
    else:
        ids = [r["JobId"] for r in records]
        if len(set(ids)) == len(ids):
            out.jobs = records
            return out
        why = "claimed by more than one line"
    out.refused.append((job[:20], _ambiguous(why)))
    return out


class _Answer(NamedTuple):
    """A job's re-read (or why there is none): ``kind`` ok (``value``: the record), gone (scontrol knows no
    such job), refused or unread (``value``: why); ``lines``: the job ids its answer's lines claim, in
    order."""

    kind: str
    value: Any = None
    lines: tuple[str, ...] = ()


class _Listing:
    """``scontrol show job -o`` (every job) -> the records; :func:`load_text_jobs` says which line is
    whose. ``stable``: the ids squeue listed before and after the listing (None: not known); ``reread``: one
    job's answer by its id (None: nothing is re-read, every ambiguous job is refused); at most ``limit``
    re-reads."""

    CONTINUED = "the next line starts no record of its own: a value of this one may"

    def __init__(
        self,
        text: str,
        stable: frozenset[str] | None,
        reread: Callable[[str], _Answer] | None,
        limit: int,
    ) -> None:
        self.blocks = _blocks(text)
        self.stable, self.reread, self.limit = stable, reread, limit
        self.left = limit if reread is not None else 0
        several = len(self.blocks) > 1
        self.read = [b.read(several) for b in self.blocks]
        self.claims = Counter(b.jid for b in self.blocks)
        self.answers: dict[str, _Answer] = {}
        self.forged = [self.maybe_forged(i) for i in range(len(self.blocks))]
        self.swallowed: set[int] = set()
        """Lines a re-read showed to be another job's record going on (that job's answer printed them too):
        each is re-read in turn (a job's own line would have its own answer)."""

    def no_job(self, jid: str) -> bool:
        """Not a job squeue listed both times: a line a value wrote (or a job that came or went meanwhile)."""
        return not jid.isdigit() or (self.stable is not None and jid not in self.stable)

    def maybe_forged(self, i: int) -> bool:
        """Whether line ``i`` may be a value's: its id claimed twice or no job's; without squeue's list, any
        line that is not a clean record."""
        jid, unclean = self.blocks[i].jid, self.read[i][0] is None
        return self.claims[jid] > 1 or self.no_job(jid) or (self.stable is None and unclean)

    def ask(self, i: int, why: str) -> _Answer:
        """Line ``i``'s job re-read (once a job), or why there is none to make. The lines after line ``i``
        that its answer printed too (claims of the same ids, in the same order) may be its record's."""
        jid = self.blocks[i].jid
        if jid not in self.answers:
            if self.left > 0 and self.reread is not None:
                self.left -= 1
                self.answers[jid] = self.reread(jid)
            else:
                more = (
                    "" if self.reread is None else f"; not re-read: over {self.limit} re-reads this listing"
                )
                self.answers[jid] = _Answer("unread", _ambiguous(why) + more)
        answer = self.answers[jid]
        if answer.lines[:1] == (jid,):
            for k, claimed in enumerate(answer.lines[1:], i + 1):
                if k >= len(self.blocks) or self.blocks[k].jid != claimed:
                    break
                self.swallowed.add(k)
                self.forged[k] = True
        return answer

    def containers(self) -> set[str]:
        """The jobs whose record may hold a forged line: for each, the nearest line before it that is a job's
        own first line (its id claimed once, by a job squeue lists). Each is re-read: scontrol prints that
        job alone, so its own line breaks show. Without squeue's list, a line that is not clean is re-read
        too, and a line whose job is gone may be forged: the search goes on before it."""
        if self.stable is None:
            for i, (rec, why) in enumerate(self.read):
                if (
                    rec is None
                    and self.claims[self.blocks[i].jid] == 1
                    and not self.no_job(self.blocks[i].jid)
                ):
                    self.ask(i, why)
        found: set[str] = set()
        todo = [i for i, f in enumerate(self.forged) if f]
        seen: set[int] = set()
        while todo:
            j = todo.pop() - 1
            while j >= 0 and self.forged[j]:
                j -= 1
            if j < 0 or j in seen:
                continue
            seen.add(j)
            found.add(self.blocks[j].jid)
            if self.ask(j, self.CONTINUED).kind == "gone" and self.stable is None:
                self.forged[j] = True
                todo.append(j)
        return found

    def decide(self, i: int, containers: set[str]) -> _Answer:
        """Line ``i``'s job: its clean line, its re-read, or refused."""
        jid, (rec, why) = self.blocks[i].jid, self.read[i]
        if self.claims[jid] > 1:
            return self.ask(i, "claimed by more than one line")
        if jid in containers or i in self.swallowed or (self.stable is None and rec is None):
            return self.ask(i, why or "another job's record may go on in this line")
        return _Answer("ok", rec) if rec is not None else _Answer("refused", _ambiguous(why))

    def listing(self) -> JobListing:
        out = JobListing(backend="text", listed=len(self.blocks), ids_checked=self.stable is not None)
        containers = self.containers()
        done: set[str] = set()
        for i, b in enumerate(self.blocks):
            if b.jid in done or self.no_job(b.jid):
                continue  # a job once; a line of no job squeue lists is not reported
            done.add(b.jid)
            answer = self.decide(i, containers)
            if answer.kind == "ok":
                out.jobs.append(answer.value)
            elif answer.kind != "gone":
                out.refused.append((b.jid, answer.value))
        return out


def jobs_from_text(text: str, job: str | None = None) -> JobListing:
    """``scontrol show job -o [JOB]`` -> the jobs; the untrusted ones refused with their job id (one line
    each). Pure: with no squeue list and no re-read, a job whose line cannot be told from a forgery (its id
    claimed twice, or the line before one that starts no record of its own) is refused, never guessed
    (:func:`load_text_jobs` re-reads those). ``job``: the answer for that one job (:func:`_one_job`)."""
    if job is not None:
        return _one_job(text, job)
    return _Listing(text, None, None, 0).listing()


Run = Callable[[Sequence[str]], str]
"""Runs one command line, returns its output; a failure raises :class:`CommandError`."""


def _job_ids(run: Run) -> frozenset[str] | None:
    """squeue's job ids (numbers only: nothing a user writes), or None when squeue does not list them."""
    try:
        text = run(argv.job_ids())
    except Exception:  # a failed or missing squeue, whatever it raises: the listing is read without it
        return None
    words = text.split()
    return frozenset(words) if all(w.isdigit() for w in words) else None


def _reread(run: Run, jid: str, stable: frozenset[str] | None) -> _Answer:
    """``scontrol show job -o JID``: that job alone (:func:`_one_job`)."""
    try:
        text = run(argv.show_job(jid))
    except CommandError as exc:
        if "invalid job id" in str(exc).lower():
            return _Answer("gone")
        return _Answer("refused", _ambiguous(f"its re-read failed: {str(exc)[:80]}"))
    lines = tuple(b.jid for b in _blocks(text))
    one = _one_job(text, jid, stable)
    if one.refused:
        return _Answer("refused", one.refused[0][1], lines)
    rec = next((r for r in one.jobs if r["JobId"] == jid), None)
    return _Answer("ok", rec, lines) if rec is not None else _Answer("gone", None, lines)


def load_text_jobs(run: Run, job: str | None = None, *, limit: int = REREADS) -> JobListing:
    """The text backend's read of every job (or of ``job``: ``scontrol show job -o JOB``, :func:`_one_job`).

    A listing is ``scontrol show job -o`` between two ``squeue --noheader --states=all --format=%A`` (job
    ids, nothing a user writes). A job squeue listed both times was there all along: its own first line is in
    the listing, so any other line that claims its id was written by a value, and a line of a job squeue did
    not list twice is no job's (or one that came or went meanwhile): it is dropped, never reported. Then:

    - a job whose id more than one line claims is re-read by id (``scontrol show job -o ID`` prints that
      job alone): its own record, whatever another job's value printed; refused if that has a line break;
    - the job whose record a forged line continues starts on the nearest line before it that is a job's
      own first line: that job is re-read too, and refused when its record holds a line break (its listed
      line may be a whole forged record that its value wrote), else read as re-read;
    - any other line that is not a clean record (a line break or carriage return, a key its release does not
      print, a key twice or out of order) is its own job's, refused with one line.

    At most ``limit`` re-reads a listing; jobs still ambiguous then are refused for the pass. Where squeue
    cannot list the ids (it fails), every line of a job claimed once is taken as that job's own unless
    :func:`jobs_from_text`'s checks or a re-read say otherwise."""
    if job is not None:
        return _one_job(run(argv.show_job(job)), job)
    before = _job_ids(run)
    text = run(argv.show_job())
    after = _job_ids(run) if before is not None else None
    stable = before & after if before is not None and after is not None else None
    return _Listing(text, stable, lambda jid: _reread(run, jid, stable), limit).listing()


def pending_count(jobs: Sequence[Mapping[str, str]]) -> int:
    return sum(1 for j in jobs if j.get("JobState") == "PENDING")
