"""The pyslurm backend: Slurm's C API in this process (``import pyslurm``), no client, no text.

pyslurm is built for one Slurm release (its version names it: 25.11.x for Slurm 25.11) and links that
release's ``libslurmfull``; on another release it does not build, or fails at import. Two hazards shape this
module:

- ``import pyslurm`` calls ``slurm_init``, which *exits the process* (``fatal: Could not establish a
  configuration source``) where no slurm.conf is found. So the module is first imported in a child process
  (:func:`probe`, once per process, only where pyslurm is installed at all); only a child that imported it
  and printed the library's version lets this process import it.
- A pyslurm built against another release's headers reads the wrong structure offsets. The probe's
  ``slurm_api_version()`` (the library's own) must name the same ``major.minor`` as the running Slurm
  (``scontrol --version``), else the backend is not used.

What it does not do: a running job's GPU indices per node. pyslurm's ``Job.get_resource_layout_per_node``
reads ``job_resources_t``, a structure Slurm keeps private and changed in 26.05: it crashes the process
(SIGSEGV, seen on 26.05.5). :meth:`SlurmAccess.allocation` reads ``squeue --json`` instead.

Records are the same dicts as the other backends' (scontrol's vocabulary, :data:`.jobs.JOB_KEYS`): the
mapping (:func:`job_record`) is pure and reads a plain mapping of a ``pyslurm.Job``'s attributes
(:data:`JOB_ATTRS`), so it is tested on captured attributes without pyslurm installed. Every value comes
from its own C field: a job's name or comment cannot reach another field.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import CommandError, ParseError
from ..plumbing.text import NULL
from .jobs import JobListing, _local_time, _or_null, _text

#: the attributes of a ``pyslurm.Job`` that :func:`job_record` reads
JOB_ATTRS = (
    "id",
    "name",
    "user_id",
    "user_name",
    "state",
    "state_reason",
    "priority",
    "submit_time",
    "start_time",
    "end_time",
    "partition",
    "required_nodes",
    "excluded_nodes",
    "allocated_nodes",
    "num_nodes",
    "max_nodes",
    "ntasks",
    "cpus_per_task",
    "memory_per_node",
    "constraints",
    "preferred_features",
    "resource_sharing",
    "time_limit",
    "working_directory",
    "admin_comment",
    "comment",
    "reservation",
    "gres_per_node",
    "array_id",
    "array_task_id",
    "heterogeneous_id",
    "heterogeneous_offset",
)


@dataclass(frozen=True)
class Probe:
    """What the child process found: ``ok`` with the library's ``version`` (``26.5.5``), or ``why`` not."""

    ok: bool
    version: str = ""
    why: str = ""


_PROBE: Probe | None = None
_PROBE_CODE = "import pyslurm; print('.'.join(map(str, pyslurm.slurm_api_version())))"


def installed() -> bool:
    """pyslurm is importable in principle (found on sys.path); nothing is imported."""
    try:
        return importlib.util.find_spec("pyslurm") is not None
    except (ImportError, ValueError):
        return False


def probe(timeout: float = 30.0) -> Probe:
    """Import pyslurm in a child process (once per process): a Slurm without configuration makes the import
    exit the process, which must not be ours."""
    global _PROBE
    if _PROBE is not None:
        return _PROBE
    if not installed():
        _PROBE = Probe(False, why="pyslurm is not installed")
        return _PROBE
    try:
        p = subprocess.run(
            [sys.executable, "-c", _PROBE_CODE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=os.environ.copy(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _PROBE = Probe(False, why=f"importing pyslurm failed: {str(exc)[:120]}")
        return _PROBE
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        _PROBE = Probe(False, why=f"importing pyslurm failed: {last[:160]}")
    else:
        _PROBE = Probe(True, version=lines[-1].strip())
    return _PROBE


def reset_probe() -> None:
    """Forget the probe (tests; a process that changed SLURM_CONF)."""
    global _PROBE
    _PROBE = None


def same_release(api_version: str, slurm_version: str) -> bool:
    """``26.5.5`` (pyslurm's ``slurm_api_version``) names the same release as ``26.05.5`` (scontrol)."""
    try:
        a = [int(x) for x in api_version.split(".")[:2]]
        b = [int(x) for x in slurm_version.split(".")[:2]]
    except ValueError:
        return False
    return len(a) == 2 and a == b


def module() -> Any:
    """The pyslurm module (import it only after a successful :func:`probe`)."""
    import pyslurm  # type: ignore[import-not-found,unused-ignore]

    return pyslurm


# ---- records (pure)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _join(value: Any) -> str:
    """pyslurm splits a feature expression at commas (``to_list``): joined again it is Slurm's string."""
    if isinstance(value, (list, tuple)):
        s = ",".join(v for v in value if isinstance(v, str))
        return s or NULL
    return _or_null(value)


def _time_limit(value: Any) -> str:
    """Minutes -> scontrol's ``[D-]HH:MM:SS``. pyslurm gives None for both INFINITE and NO_VAL; a job
    slurmctld accepted carries its partition's limit when it asked none, so None is ``UNLIMITED`` (what
    scontrol and squeue --json print for such a job)."""
    minutes = _int(value)
    if minutes is None:
        return "UNLIMITED"
    days, rest = divmod(minutes, 24 * 60)
    hms = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{hms}" if days else hms


def _gres(value: Any) -> str:
    """``{"gres/gpu:h100": 2}`` -> ``gres/gpu:h100:2`` (scontrol's TresPerNode)."""
    if not isinstance(value, Mapping):
        return ""
    parts = []
    for k, v in value.items():
        n = v.get("count") if isinstance(v, Mapping) else v
        if isinstance(k, str) and _int(n) is not None:
            parts.append(f"{k}:{n}")
    return ",".join(parts)


def job_record(a: Mapping[str, Any]) -> dict[str, str]:
    """A ``pyslurm.Job``'s attributes (:data:`JOB_ATTRS`) -> a record in scontrol's vocabulary."""
    jid = _int(a.get("id"))
    if jid is None:
        raise ParseError("pyslurm", None, "a job without an id")
    state = _text(a.get("state"))
    nmin, nmax = _int(a.get("num_nodes")), _int(a.get("max_nodes"))
    nodes = "" if nmin is None else str(nmin)
    if state == "PENDING" and nmin is not None and nmax:
        nodes = f"{nmin}-{nmax}"
    mem = _int(a.get("memory_per_node"))
    user, uid = _text(a.get("user_name")), _int(a.get("user_id"))
    return {
        "JobId": str(jid),
        "JobName": _text(a.get("name")),
        "UserId": f"{user}({uid})" if uid is not None else user,
        "JobState": state,
        "Reason": _text(a.get("state_reason")) or "None",
        "Priority": str(_int(a.get("priority")) or 0),
        "SubmitTime": _local_time(_int(a.get("submit_time"))),
        "StartTime": _local_time(_int(a.get("start_time"))),
        "EndTime": _local_time(_int(a.get("end_time"))),
        "Partition": _or_null(a.get("partition")),
        "ReqNodeList": _or_null(a.get("required_nodes")),
        "ExcNodeList": _or_null(a.get("excluded_nodes")),
        "NodeList": _text(a.get("allocated_nodes")),
        "NumNodes": nodes,
        "NumTasks": str(_int(a.get("ntasks")) or 1),
        "CPUs/Task": str(_int(a.get("cpus_per_task")) or 1),
        "MinMemoryNode": f"{mem}M" if mem else "0",
        "Features": _join(a.get("constraints")),
        "Prefer": _join(a.get("preferred_features")),
        "OverSubscribe": _text(a.get("resource_sharing")) or "OK",
        "TimeLimit": _time_limit(a.get("time_limit")),
        "WorkDir": _text(a.get("working_directory")),
        "AdminComment": _text(a.get("admin_comment")),
        "Comment": _text(a.get("comment")),
        "Reservation": _or_null(a.get("reservation")),
        "TresPerNode": _gres(a.get("gres_per_node")),
    }


def job_ids(a: Mapping[str, Any]) -> set[str]:
    """The names a job answers to: its id, ``ARRAY_TASK`` and ``HET+OFFSET``."""
    ids = {str(a.get("id"))}
    array, task = _int(a.get("array_id")), _int(a.get("array_task_id"))
    if array and task is not None:
        ids.add(f"{array}_{task}")
    het, offset = _int(a.get("heterogeneous_id")), _int(a.get("heterogeneous_offset"))
    if het and offset is None and str(het) == str(a.get("id")):
        # pyslurm reads an offset of 0 as unset (its u32_parse takes 0 for no value): the component whose
        # id is the heterogeneous job's own is its first one, offset 0
        offset = 0
    if het and offset is not None:
        ids.add(f"{het}+{offset}")
    return ids


def listing_from_attrs(rows: Sequence[Mapping[str, Any]], job: str | None = None) -> JobListing:
    out = JobListing(backend="pyslurm", listed=len(rows))
    for a in rows:
        try:
            rec = job_record(a)
        except (ParseError, TypeError, ValueError, AttributeError) as exc:
            out.refused.append((str(a.get("id", "?"))[:20], f"unreadable job: {str(exc)[:80]}"))
            continue
        if job is None or job in job_ids(a):
            out.jobs.append(rec)
    return out


# ---- calls into pyslurm (need the module)


def _attrs(job: Any) -> dict[str, Any]:
    return {k: getattr(job, k, None) for k in JOB_ATTRS}


def _rpc(what: str, call: Any) -> Any:
    """Run one pyslurm call; Slurm's refusal becomes a :class:`CommandError` with Slurm's own words."""
    try:
        return call()
    except Exception as exc:  # pyslurm raises RPCError (its own), ValueError and others
        raise CommandError(["pyslurm", what], 1, str(exc)[:200] or type(exc).__name__) from None


def load_jobs(
    pyslurm: Any, job: str | None = None, detail: Callable[[str], bool] | None = None
) -> JobListing:
    """Every job (or only ``job``: :func:`load_job` where it is a job id). ``detail``: given a job's
    AdminComment, whether the caller needs its whole record; the others carry only ``JobId``, ``JobState`` and
    ``AdminComment``, and when pending ``NumNodes`` and ``Reason`` (three to five attributes read, not thirty:
    a relax pass needs the rest only of its auto jobs, and of the others what they queue)."""
    if job is not None:
        one = load_job(pyslurm, job)
        if one is not None:
            return one
    jobs = _rpc("Jobs.load", lambda: pyslurm.Jobs.load())
    if detail is None or job is not None:
        return listing_from_attrs([_attrs(j) for j in jobs.values()], job)
    out = JobListing(backend="pyslurm", listed=len(jobs))
    rows = []
    for j in jobs.values():
        comment = _text(j.admin_comment)
        if detail(comment):
            rows.append(_attrs(j))
        else:
            light = {"JobId": str(j.id), "JobState": _text(j.state), "AdminComment": comment}
            if light["JobState"] == "PENDING":
                n = _int(j.num_nodes)
                light["NumNodes"] = "" if n is None else str(n)
                light["Reason"] = _text(j.state_reason) or "None"
            out.jobs.append(light)
    full = listing_from_attrs(rows)
    out.jobs.extend(full.jobs)
    out.refused.extend(full.refused)
    return out


MAX_JOB_ID = 2**32 - 1
"""Slurm's job ids are 32-bit (``uint32_t job_id``)."""


def load_job(pyslurm: Any, job: str) -> JobListing | None:
    """One job by its id: ``pyslurm.Job.load`` (Slurm's ``slurm_load_job``: that job's record, not the whole
    queue — a relax pass re-reads each due job, and a listing per due job cost a 10 000-job queue 0.4 s of
    CPU and 0.1 s of slurmctld's time each). An unknown id gives an empty listing, as the other backends do.

    None where the caller must read the listing instead: ``job`` is not a plain id (``123_4``, ``7+1``), or
    Slurm answered first with a record that is not that job's own (the id of an array whose record is gone
    names the array's other tasks)."""
    if not (job.isascii() and job.isdigit() and len(job) <= 10 and 0 < int(job) <= MAX_JOB_ID):
        return None
    try:
        one = _rpc(f"Job.load({job})", lambda: pyslurm.Job.load(int(job)))
    except CommandError as exc:
        if "invalid job id" in str(exc).lower():
            return JobListing(backend="pyslurm")
        raise
    listing = listing_from_attrs([_attrs(one)], job)
    return listing if listing.jobs or any(jid == job for jid, _ in listing.refused) else None


def node_lines(pyslurm: Any) -> dict[str, dict[str, str]]:
    """Every node: {name: {State, ActiveFeatures, AvailableFeatures, Reason, NodeAddr, NodeHostName}} in
    scontrol's words (an address or host name pyslurm leaves empty is the node's name, as Slurm's default)."""
    nodes = _rpc("Nodes.load", lambda: pyslurm.Nodes.load())
    out: dict[str, dict[str, str]] = {}
    for name, n in nodes.items():
        out[str(name)] = {
            "NodeName": str(name),
            "State": _text(getattr(n, "state", "")) or "UNKNOWN",
            "ActiveFeatures": _join(getattr(n, "active_features", None)),
            "AvailableFeatures": _join(getattr(n, "available_features", None)),
            "Reason": _or_null(getattr(n, "reason", None)),
            "NodeAddr": _text(getattr(n, "address", "")) or str(name),
            "NodeHostName": _text(getattr(n, "hostname", "")) or str(name),
        }
    return out


#: scontrol update keys a job write may carry -> pyslurm.JobSubmitDescription's names
JOB_WRITE_KEYS = {"Features": "constraints", "AdminComment": "admin_comment"}
#: scontrol update keys a node write may carry -> pyslurm.Node's names
NODE_WRITE_KEYS = {"State": "state", "Reason": "reason"}


def update_job(pyslurm: Any, job: str, fields: Sequence[tuple[str, str]]) -> None:
    unknown = [k for k, _ in fields if k not in JOB_WRITE_KEYS]
    if unknown:
        raise CommandError(["pyslurm", "update_job"], None, f"no job write for {', '.join(unknown)}")
    changes = {JOB_WRITE_KEYS[k]: v for k, v in fields}
    desc = pyslurm.JobSubmitDescription(**changes)
    _rpc(f"Job({job[:20]}).modify", lambda: pyslurm.Job(int(job)).modify(desc))


def update_node(pyslurm: Any, node: str, fields: Sequence[tuple[str, str]]) -> None:
    unknown = [k for k, _ in fields if k not in NODE_WRITE_KEYS]
    if unknown:
        raise CommandError(["pyslurm", "update_node"], None, f"no node write for {', '.join(unknown)}")
    changes = pyslurm.Node(**{NODE_WRITE_KEYS[k]: v for k, v in fields})
    _rpc(f"Node({node[:40]}).modify", lambda: pyslurm.Node(node).modify(changes))
