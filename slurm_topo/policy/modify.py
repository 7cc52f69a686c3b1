"""Modify: what the filter does with an update of a pending job (``scontrol update``), from the job's record
and the update; the Python twin of the Lua filter's "modify" section (parity tests run one case table through
both).

What an owner may change, and what stays enforced (administrators are uid 0):

* **Size, GPUs, partition, features, node lists and reservation**: re-planned as at submit, from the job's own
  locality (``ReqNodeList=`` naming nodes of two zones is refused for a zone job, as ``--nodelist`` is). The
  bracket an earlier decision added is replaced, so an owner cannot strip a required level: ``Features=``
  (empty) or a new constraint gets the level's bracket again.
* **The locality** is fixed at submit for owners: an update of the comment that would change it
  (``Comment=locality=any``) is refused. Administrators may change it (``any`` then gives back the job's own
  constraint).
* **A release of a job the filter holds** is re-planned: refused while no group can ever hold the job,
released
  with its bracket once one can (the data changed). A resize that fits releases the job as well.
  Administrators' releases pass unchanged.
* **An administrator's ``Features=`` update of a ``LEVEL:auto`` job** passes untouched: that is how
  ``slurm-topo relax`` widens it. Other re-plans that rewrite AdminComment keep the relaxer's records after
  ours (``slurm-topo-relax: …``; the ``slurm-topo-auto: …`` budget unless the new decision writes one).
* **AdminComment** is written only for administrators: Slurm refuses it from anyone else ("Attempt to change
  admin_comment"), which would deny the whole update. Owners' re-plans are logged in slurmctld.log instead.

A refusal is Slurm's "Access/permission denied"; the reason is in the job's AdminComment (a hold) or the
locality the owner asked to change. From 23.02 the Lua filter also tells the updating client why (a refusal,
a new hold: ``log_user``, printed by scontrol); 22.05 discards ``log_user`` in job_modify (with an ``error:``
line), so there it says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .decide import Decision, decide
from .request import JobRequest, _blen, _comment_values, _int, _str
from .vocab import BUDGET_PREFIX, INFINITE, LEVELS, MAX_FIELD, NO_VAL, RECORD_PREFIX, RELAX_PREFIX

_SIZE_FIELDS = (
    "partition",
    "tres_per_node",
    "tres_per_job",
    "tres_per_task",
    "req_nodes",
    "exc_nodes",
    "reservation",
)
"""What an update may change that the decision depends on: size, GPUs, partition, and the nodes it may run on
(``ReqNodeList``, ``ExcNodeList``, ``Reservation``: re-planned, so a node list across the level is refused as
at submit)."""


@dataclass(frozen=True, slots=True)
class ModifyDecision:
    """``pass`` (the update goes on untouched), ``apply`` (the fields below are written into the update),
    ``deny`` (Access/permission denied) or ``reject`` (the decision's rejection, as at submit)."""

    action: str
    features: str | None = None
    """The job's new constraint ("" clears it); None leaves the update's own."""
    prefer: str | None = None
    priority: int | None = None
    """0 holds the job, INFINITE releases it; None leaves it."""
    admin_comment: str | None = None
    """Only for administrators: the AdminComment with this decision's record in place of the earlier one."""
    log: str | None = None
    """A line for slurmctld.log (info): the new decision's record, or why the update is refused."""

    def as_dict(self) -> dict[str, object]:
        return {
            "action": self.action,
            "features": self.features,
            "prefer": self.prefer,
            "priority": self.priority,
            "admin_comment": self.admin_comment,
            "log": self.log,
        }


PASS = ModifyDecision("pass")


def segment_update_refusal(locality: str, segment: int) -> str:
    """An update that would need a segment the job does not have (a resize past every NVLink domain): Slurm
    cannot set a pending job's segment size (``scontrol update … SegmentSize=`` is "not supported" on 26.05,
    and job_modify's segment_size is not applied), so it is refused, saying what to do."""
    return (
        f"slurm-topo: --locality={locality}: the update makes the job larger than any NVLink domain, and "
        f"Slurm cannot give a pending job a segment size: resubmit it (--locality=nvl:segment={segment}, "
        f"-N a multiple of {segment})"
    )


REQUIRED_LEVELS = frozenset(("network_group", "zone", "region", "nvl"))
"""The levels a job is promised (``prefer`` and ``any`` never delay a job)."""


def strip_bracket(features: str | None) -> str | None:
    """The job's constraint without the matching-OR bracket a previous decision appended (``X&[..]`` or
    ``[..]``)."""
    if features is None or not features.endswith("]"):
        return features
    i = features.rfind("[")
    inner = features[i + 1 : -1]
    if i < 0 or "[" in inner or "]" in inner:
        return features
    if i == 0:
        return None
    return features[: i - 1] if features[i - 1] == "&" else features


def without_record(text: object) -> str | None:
    """AdminComment without our record (always its last part)."""
    if not isinstance(text, str):
        return None
    i = text.find(RECORD_PREFIX)
    if i < 0:
        return text
    rest = text[:i].rstrip("; ")
    return rest or None


def _ours(rec: Mapping[str, Any]) -> str | None:
    """The earlier decision's record on the job (after ``slurm-topo: ``), or None."""
    text = _str(rec.get("admin_comment"))
    if text is None:
        return None
    i = text.find(RECORD_PREFIX)
    return None if i < 0 else text[i + len(RECORD_PREFIX) :]


def _is_auto(ours: str | None) -> bool:
    """The job is in ``LEVEL:auto`` mode (its record starts ``zone:auto``)."""
    if ours is None:
        return False
    level, _, rest = ours.partition(":")
    return level in LEVELS and rest.startswith("auto")


def trail(text: object, new_record: str) -> str:
    """The relaxer's records after ours in an AdminComment (``slurm-topo-auto:`` budget,
    ``slurm-topo-relax:`` relaxations), each with its ``; ``: kept when a new decision replaces our record
    (the budget ones only when the new record carries no budget of its own)."""
    if not isinstance(text, str):
        return ""
    i = text.find(RECORD_PREFIX)
    if i < 0:
        return ""
    keep_budget = BUDGET_PREFIX not in new_record
    return "".join(
        "; " + part
        for part in text[i:].split("; ")
        if part.startswith(RELAX_PREFIX) or (keep_budget and part.startswith(BUDGET_PREFIX))
    )


def _contradicts(comment: str, req: JobRequest) -> bool:
    """The comment names a locality (or regions) other than the job keeps: a ``--locality=zone`` job (the
    SPANK option wins over the comment) given ``Comment=locality=any`` would say one thing and do another."""
    if _blen(comment) > MAX_FIELD:
        return False
    locality, regions = _comment_values(comment)
    return (locality is not None and locality != req.locality) or (
        regions is not None and regions != req.regions
    )


def _changes(upd: Mapping[str, Any]) -> bool:
    """Whether the update touches what the decision depends on (size, GPUs, partition, features)."""
    return (
        _int(upd.get("min_nodes")) is not None
        or isinstance(upd.get("features"), str)
        or any(_str(upd.get(k)) is not None for k in _SIZE_FIELDS)
    )


def _our_prefer(rec: Mapping[str, Any], ours: str | None) -> bool:
    """A required level's --prefer added by an earlier decision: the same hard part as the constraint, with a
    bracket (the decision re-plans it)."""
    prefer = _str(rec.get("prefer"))
    if ours is None or ours.startswith(("prefer", "any")) or prefer is None or not prefer.endswith("]"):
        return False
    return strip_bracket(prefer) == strip_bracket(_str(rec.get("features")))


def _merged(
    rec: Mapping[str, Any], upd: Mapping[str, Any], new: JobRequest, base: JobRequest, ours: str | None
) -> JobRequest:
    """The request the job makes after the update (``new``, read from it): the update's fields over the
    record's, the locality from ``base``, and the record's constraint without the bracket an earlier decision
    added."""
    if isinstance(upd.get("features"), str):
        features = _str(upd.get("features"))
    elif ours is not None and not ours.startswith(("prefer", "any")):
        features = strip_bracket(_str(rec.get("features")))
    else:
        features = _str(rec.get("features"))
    prefer = new.prefer
    if (
        prefer is None
        and not (ours is not None and ours.startswith("prefer "))
        and not _our_prefer(rec, ours)
    ):
        prefer = _str(rec.get("prefer"))
    return JobRequest(
        locality=base.locality,
        regions=base.regions,
        features=features,
        prefer=prefer,
        partition=new.partition or _str(rec.get("partition")),
        min_nodes=new.min_nodes or _int(rec.get("min_nodes")),
        num_tasks=new.num_tasks or _int(rec.get("num_tasks")),
        gpu=new.gpu or base.gpu,
        unchecked=new.unchecked or base.unchecked,
        nodelist=new.nodelist or base.nodelist,
        time_limit=new.time_limit or base.time_limit,
        segment_ok=base.segment_ok,
        user_segment=base.user_segment,
    )


def decide_modify(
    data: Any, rec: Mapping[str, Any] | None, upd: Mapping[str, Any], admin: bool, segments: bool = False
) -> ModifyDecision:
    """The filter's answer to one update (see the module docstring). ``data`` is the compiled PolicyData.
    ``segments``: the release takes ``segment_size`` from job_submit/lua (25.11.2+); the record's own
    segment (one the filter set at submit included) is then the job's, kept as it is."""
    if rec is None:
        return PASS
    prio = upd.get("priority")
    release = _int(prio) is not None or prio == INFINITE
    held = rec.get("priority") == 0
    if not isinstance(upd.get("comment"), str) and not _changes(upd) and not (release and held):
        return PASS
    if admin and isinstance(upd.get("features"), str) and _is_auto(_ours(rec)):
        return PASS  # an administrator's Features= update of an auto job: how the relaxer widens it
    orig = JobRequest.from_job_desc(rec, segments)
    if orig.oversize is not None:
        return PASS  # hostile sizes are not scanned (as at submit)
    base = orig
    relocated = False
    if isinstance(upd.get("comment"), str):
        again = JobRequest.from_job_desc({**rec, "comment": upd["comment"]}, segments)
        moved = (again.locality, again.regions) != (orig.locality, orig.regions)
        if not admin and (moved or _contradicts(upd["comment"], again)):
            return ModifyDecision("deny", log="the locality is fixed at submit; update refused")
        if moved:
            base, relocated = again, True
    changed = _changes(upd) or relocated
    if not changed and not (release and held):
        return PASS
    if not changed and admin:
        return PASS  # an administrator's release
    new = JobRequest.from_job_desc(upd)
    if new.oversize is not None:
        return PASS  # hostile sizes are not scanned (as at submit); Slurm applies its own limits
    ours = _ours(rec)
    req = _merged(rec, upd, new, base, ours)
    d = decide(data, req)
    releasable = _releasable(data, d, rec, orig, ours, held, release)
    return _outcome(d, req, rec, upd, admin, release, releasable)


def _releasable(
    data: Any,
    d: Decision,
    rec: Mapping[str, Any],
    orig: JobRequest,
    ours: str | None,
    held: bool,
    release: bool,
) -> bool:
    """Whether the update (re-planned as ``d``) releases a held job: its release, or an update that fits a job
    the filter holds. The hold is the filter's when the job as it stands (before this update) is one no group
    can ever hold, whoever's update put it there. An owner's update cannot write AdminComment, so a hold made
    by one (a resize past every group) leaves no ``held;`` record, and an old record outlives the release it
    led to: the record is not the judge. A job its owner held while it fitted keeps the owner's hold."""
    if not held or release:
        return held
    if d.action in ("hold", "reject"):
        return False
    return decide(data, _merged(rec, {}, JobRequest(), orig, ours)).action == "hold"


def _outcome(
    d: Decision,
    req: JobRequest,
    rec: Mapping[str, Any],
    upd: Mapping[str, Any],
    admin: bool,
    release: bool,
    releasable: bool,
) -> ModifyDecision:
    if d.action == "reject":
        return ModifyDecision("reject", log=d.record)
    if d.segment is not None:
        return ModifyDecision("reject", log=segment_update_refusal(d.locality, d.segment))
    het = _int(rec.get("het_job_id"))
    level = (d.locality or "").partition(":")[0]
    if het is not None and level in REQUIRED_LEVELS and d.action in ("amend", "hold"):
        # a component of a heterogeneous job: placed on its own, so a required level cannot be kept (refused
        # at submit): no re-plan gives it one
        return ModifyDecision(
            "deny",
            log=f"job {het}+{_int(rec.get('het_job_offset')) or 0} is a component of a heterogeneous job: "
            f"{d.locality} cannot be enforced across its components (Slurm places each on its own); "
            "update refused",
        )
    own = req.features or ""
    give_back = own if upd.get("features") is None and req.features != _str(rec.get("features")) else None
    priority = None
    if d.action == "hold":
        if release and not admin:
            return ModifyDecision("deny", log=d.record)
        features = give_back
        priority = None if rec.get("priority") == 0 else 0
    else:
        features = d.features if d.features is not None else give_back
        if releasable:
            priority = INFINITE
    comment = None
    if admin:
        old = without_record(rec.get("admin_comment"))
        comment = (f"{old}; {d.record}" if old else d.record) + trail(rec.get("admin_comment"), d.record)
    return ModifyDecision("apply", features, d.prefer, priority, comment, d.record)


__all__ = ["INFINITE", "NO_VAL", "ModifyDecision", "decide_modify", "strip_bracket", "without_record"]
