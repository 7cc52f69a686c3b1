"""Wait or go, the relaxer's pure half: a ``LEVEL:auto`` job's records, the load-aware timer and the pass's
decisions (:func:`plan_pass`: job records and the pass's load in, decisions out). Nothing here runs a process,
reads a file or calls Slurm; :mod:`slurm_topo.relaxer.relax` is the driver (``slurm-topo relax``).

A job in ``auto`` mode is required at its level (``network_group``, ``zone`` or ``region``) at submit,
exactly as ``:wait``; the budget record in its AdminComment says, per looser level L, how long it may wait
before L is the better deal:

    budget_L = R · (s_L − s_tight)

with R the job's time limit and s_L the job's runtime slowdown at L (1 = the tight level). The cost model
(:mod:`slurm_topo.cost`) gives communication seconds per step ``C_L`` of the job's plan spread over two
groups of level L; the plan carries no compute time, so a step's share of communication on the tight
placement is the site's ``comm_fraction`` f (default 0.25) and

    s_L = 1 + f · (C_L / C_tight − 1)

Records (one line each, appended to AdminComment with ``; `` as the filter does; their prefixes never contain
the filter's ``slurm-topo: `` so ``explain`` keeps reading the filter's own record):

* budget, written once at submit: ``slurm-topo-auto: zone limit=7200s region=720s any=3600s``
* one per relaxation, appended by the relaxer:
  ``slurm-topo-relax: zone->region waited=812s budget=720s load=x1.50 at=2026-11-30T12:00:00Z`` (the timer;
  ``load=`` with the load-aware timer), or for the start-estimate rule (``--estimates``)
  ``slurm-topo-relax: zone->region waited=60s budget=1200s start=+3953s looser=+360s cost=1200s at=…``

The relaxer is stateless: the job's level now is the last relaxation's target (else the budget's level), its
wait is now − SubmitTime, so a restarted slurmctld or relaxer loses nothing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..cost.budget import Budget
from ..plumbing.text import NULL
from ..policy.vocab import AUTO_LEVELS as LEVELS
from ..policy.vocab import BUDGET_PREFIX, RELAX_PREFIX

FEATURE_PREFIX: Mapping[str, str] = {"network_group": "ng_", "zone": "zone_", "region": "region_"}
HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")


_BUDGET_RE = re.compile(r"slurm-topo-auto: ([a-z_]+)((?: [a-z_]+=\d+s)+)")
_RELAX_RE = re.compile(r"slurm-topo-relax: ([a-z_]+)->([a-z_]+) ")


def parse_budget(admin_comment: str | None) -> Budget | None:
    """The budget record in an AdminComment (the last one), or None (not an ``auto`` job, or damaged)."""
    if not admin_comment or admin_comment == NULL:
        return None
    found = list(_BUDGET_RE.finditer(admin_comment))
    if not found:
        return None
    m = found[-1]
    if m[1] not in LEVELS[:-1]:
        return None
    values = dict(p.split("=", 1) for p in m[2].split())
    try:
        limit = int(values.pop("limit")[:-1])
        budgets = tuple((lvl, int(values[lvl][:-1])) for lvl in LEVELS[LEVELS.index(m[1]) + 1 :])
    except (KeyError, ValueError):
        return None
    return Budget(m[1], limit, budgets)


def relaxations(admin_comment: str | None) -> list[tuple[str, str]]:
    """Every relaxation recorded in an AdminComment, oldest first: (from, to)."""
    if not admin_comment:
        return []
    return [(m[1], m[2]) for m in _RELAX_RE.finditer(admin_comment)]


def current_level(budget: Budget, admin_comment: str | None) -> str:
    """The level the job is at now: the last relaxation's target, else the budget's level. Raises
    ValueError when the last relaxation names a level that is not one of :data:`LEVELS` (a damaged trail:
    the job is skipped, never widened from a guess)."""
    done = relaxations(admin_comment)
    if not done:
        return budget.level
    src, dst = done[-1]
    if src not in LEVELS or dst not in LEVELS:
        raise ValueError(f"relax trail {src[:20]}->{dst[:20]}: not a level ({', '.join(LEVELS)})")
    return dst


def next_level(level: str) -> str | None:
    if level not in LEVELS:
        raise ValueError(f"{level[:20]!r}: not a level ({', '.join(LEVELS)})")
    i = LEVELS.index(level)
    return LEVELS[i + 1] if i + 1 < len(LEVELS) else None


MAX_BUSY = 0.99
"""The busy share at which :func:`load_factor` stops growing (×10 000)."""


def load_factor(busy: float) -> float:
    """1 / (1 − ρ)², ρ the share of the partition's nodes in use (capped at :data:`MAX_BUSY`): a job that runs
    slower keeps its nodes R · Δs longer, and on a busy cluster everyone behind it waits for them. In a queue
    whose mean number of jobs is ρ / (1 − ρ), a unit more work delays the others by its derivative,
    1 / (1 − ρ)²: the marginal cost, not queueing's mean-response factor 1 / (1 − ρ), which the wait-policy
    benchmark showed too eager at 90 % load (benchmarks/results/wait_policy.md). 1 on an idle cluster."""
    rho = min(max(busy, 0.0), MAX_BUSY)
    return 1.0 / (1.0 - rho) ** 2


WAITING_FOR_NODES = ("None", "Priority", "Resources", "")
"""The pending reasons of a job that would start on free nodes (not one held, waiting for a dependency, a
begin time, a limit or a down partition): what :func:`queued_nodes` counts."""


def queued_nodes(jobs: Sequence[Mapping[str, str]]) -> int:
    """The nodes the pending jobs waiting for nodes ask for (:data:`WAITING_FOR_NODES`; each job's minimum,
    ``NumNodes=2-4`` -> 2; a job whose count cannot be read counts as one node). A pending job array's
    record counts once, whatever its number of tasks."""
    total = 0
    for job in jobs:
        if job.get("JobState") != "PENDING" or job.get("Reason", "") not in WAITING_FOR_NODES:
            continue
        if job.get("Priority") == "0":
            continue
        head = job.get("NumNodes", "").split("-", 1)[0]
        total += int(head) if head.isdigit() and 0 < len(head) < 8 else 1
    return total


def pass_load(busy: float, queued: int, usable: int) -> float:
    """The load a pass prices budgets at: ``busy``, or :data:`MAX_BUSY` when the pending jobs ask for at
    least every usable node (overloaded: each node freed is taken at once, so a slower placement only adds
    work to the queue; the benchmark's guard at load 1.2)."""
    return MAX_BUSY if usable > 0 and queued >= usable else busy


def due(budget: Budget, level: str, waited_s: float, busy: float | None = None) -> str | None:
    """The level to widen to now (one step), or None: the wait has passed the next level's budget (times
    :func:`load_factor` of ``busy`` when given: the load-aware timer)."""
    nxt = next_level(level)
    if nxt is None:
        return None
    b = budget.of(nxt)
    factor = 1.0 if busy is None else load_factor(busy)
    return nxt if b is not None and waited_s > b * factor else None


def relax_cost(budget: Budget, level: str, target: str) -> int:
    """Seconds of runtime the job loses by running at ``target`` instead of ``level``:
    R · (s_target − s_level) = budget_target − budget_level."""
    return (budget.of(target) or 0) - (budget.of(level) or 0)


def estimate_says(budget: Budget, level: str, wait_now_s: float, wait_loose_s: float) -> str | None:
    """The start-estimate rule (``sbatch --test-only`` or a simulator's): widen one level when the expected
    wait at the job's level minus the expected wait one level looser exceeds what the looser placement costs
    (R · Δs); None otherwise."""
    nxt = next_level(level)
    if nxt is None or budget.of(nxt) is None:
        return None
    return nxt if wait_now_s - wait_loose_s > relax_cost(budget, level, nxt) else None


_RELAX_LINE_RE = re.compile(
    r"slurm-topo-relax: ([a-z_]+)->([a-z_]+) waited=(\d+)s budget=(-?\d+)s(?: load=x([0-9.]+))?"
    r"(?: start=\+(\d+)s looser=\+(\d+)s cost=(-?\d+)s)? at=(\S+)"
)


def auto_lines(job: Mapping[str, str], now: float | None = None) -> list[str]:
    """For ``explain``: the budget, the time waited (pending jobs) and each relaxation; [] without a
    budget."""
    comment = job.get("AdminComment")
    budget = parse_budget(comment)
    if budget is None:
        return []
    per = ", ".join(f"{lvl} {sec} s" for lvl, sec in budget.budgets)
    try:
        now_at = current_level(budget, comment)
    except ValueError as exc:
        now_at = f"unknown ({exc}; the relaxer skips this job)"
    head = f"{budget.level}:auto, now {now_at}; budget {per} (limit {budget.limit_s} s)"
    submitted = parse_time(job.get("SubmitTime"))
    if job.get("JobState") == "PENDING" and submitted is not None:
        head += f"; waited {max(0, int((time.time() if now is None else now) - submitted))} s"
    lines = [head]
    for m in _RELAX_LINE_RE.finditer(comment or ""):
        load = f" × load {m[5]}" if m[5] else ""
        why = (
            f"start estimate +{m[6]} s here, +{m[7]} s at {m[2]}, which costs {m[8]} s; budget {m[4]} s"
            if m[6]
            else f"budget {m[4]} s{load}"
        )
        lines.append(f"relaxed {m[1]} -> {m[2]} after {m[3]} s ({why}) at {m[9]}")
    return lines


# ---- widening a constraint


def split_bracket(features: str | None) -> tuple[str, list[str]]:
    """``gpu&[zone_a|zone_b]`` -> (``gpu``, [zone_a, zone_b]); no trailing bracket -> (features, [])."""
    text = "" if features in (None, NULL) else str(features)
    if not text.endswith("]") or "[" not in text:
        return text, []
    i = text.rfind("[")
    groups = [g for g in text[i + 1 : -1].split("|") if g]
    user = text[:i]
    return (user[:-1] if user.endswith("&") else user), groups


def widen(features: str | None, target: str, node_features: Mapping[str, Sequence[str]]) -> str | None:
    """The constraint one level looser: each group of the bracket mapped to the ``target`` group(s) of its
    nodes (from the nodes' features), sorted; ``any`` drops the bracket. None: no bracket to widen, or its
    groups map to nothing."""
    user, groups = split_bracket(features)
    if not groups:
        return None
    if target == "any":
        return user
    prefix = FEATURE_PREFIX[target]
    wanted = set(groups)
    parents = sorted(
        {f for feats in node_features.values() if wanted & set(feats) for f in feats if f.startswith(prefix)}
    )
    if not parents:
        return None
    bracket = "[" + "|".join(parents) + "]"
    return f"{user}&{bracket}" if user else bracket


# ---- one pass


@dataclass
class Decision:
    job: str
    action: str  # relax, skip
    why: str
    level: str | None = None
    target: str | None = None
    waited_s: int | None = None
    budget_s: int | None = None
    features: str | None = None
    applied: bool = False
    factor: float | None = None
    """The load factor the budget was multiplied by (load-aware timer), None without."""
    rule: str | None = None
    """Why a job was widened: ``budget`` (the timer) or ``estimate`` (``sbatch --test-only``)."""
    estimate: tuple[int, int, int] | None = None
    """The start-estimate rule's numbers: seconds to the estimated start at the job's level and one level
    looser, and what the looser placement costs (R · Δs)."""
    fields: Mapping[str, str] | None = field(default=None, repr=False)
    """The job's line as listed (for ``--test-only``); not reported."""

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v is not None and k not in ("fields", "estimate")}
        if self.estimate is not None:
            out["estimate_start_s"], out["estimate_looser_s"], out["estimate_cost_s"] = self.estimate
        return out


@dataclass
class Pass:
    decisions: list[Decision] = field(default_factory=list)
    pending: int = 0
    auto: int = 0
    seconds: float = 0.0
    busy: float | None = None
    """The share of usable nodes in use; None with ``--plain-budget``."""
    priced: float | None = None
    """The load the budgets were priced at (:func:`pass_load`: the busy share, or the cap when overloaded)."""
    queued: int | None = None
    """The nodes the pending jobs asked for (:func:`queued_nodes`; the load-aware timer only)."""
    errors: list[str] = field(default_factory=list)
    """One line per job skipped because it could not be read safely or its record does not parse."""
    backend: str = ""
    """How the jobs were read (:mod:`slurm_topo.access`: json or text)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "errors": self.errors,
            "pending": self.pending,
            "auto": self.auto,
            "relaxed": sum(1 for d in self.decisions if d.action == "relax"),
            "seconds": round(self.seconds, 4),
            "busy": None if self.busy is None else round(self.busy, 4),
            "priced_load": None if self.priced is None else round(self.priced, 4),
            "queued_nodes": self.queued,
            "decisions": [d.as_dict() for d in self.decisions],
        }


def parse_time(text: str | None) -> float | None:
    """scontrol's local ``2026-11-30T12:00:00`` -> epoch seconds; None for Unknown/None."""
    if not text or text in ("Unknown", "None", NULL):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def judge(job: Mapping[str, str], now: float, busy: float | None = None) -> Decision | None:
    """The relaxer's decision for one job line (None: not an ``auto`` job); ``busy``: the load-aware timer
    (:func:`due`)."""
    jid = job.get("JobId", "?")
    comment = job.get("AdminComment")
    budget = parse_budget(comment)
    if budget is None:
        return None
    level = current_level(budget, comment)
    if job.get("JobState") != "PENDING":
        return Decision(jid, "skip", f"state {job.get('JobState')}", level)
    reason = job.get("Reason", "")
    if reason in HELD_REASONS or job.get("Priority") == "0":
        return Decision(jid, "skip", f"held ({reason})", level)
    submitted = parse_time(job.get("SubmitTime"))
    if submitted is None:
        return Decision(jid, "skip", "no SubmitTime", level)
    waited = max(0, int(now - submitted))
    target = due(budget, level, waited, busy)
    factor = None if busy is None else round(load_factor(busy), 2)
    if target is None:
        nxt = next_level(level)
        why = "loosest level" if nxt is None else f"waited {waited}s of {budget.of(nxt)}s for {nxt}"
        if nxt is not None and factor is not None:
            why += f" × load {factor}"
        return Decision(jid, "skip", why, level, nxt, waited, budget.of(nxt) if nxt else None, factor=factor)
    return Decision(
        jid, "relax", "budget passed", level, target, waited, budget.of(target), factor=factor, rule="budget"
    )


def relax_record(d: Decision, now: float) -> str:
    at = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if d.estimate is not None:
        start, looser, cost = d.estimate
        why = f" start=+{start}s looser=+{looser}s cost={cost}s"
    else:
        why = "" if d.factor is None else f" load=x{d.factor:.2f}"
    return f"{RELAX_PREFIX}{d.level}->{d.target} waited={d.waited_s}s budget={d.budget_s}s{why} at={at}"


def plan_pass(jobs: Sequence[Mapping[str, str]], now: float, busy: float | None = None) -> Pass:
    """Pure: the job records (:mod:`slurm_topo.access`) -> the decisions of one pass (features not yet
    computed). A job whose record makes the relaxer raise (a malformed trail in its AdminComment) is
    skipped with one line in :attr:`Pass.errors`; the pass goes on."""
    out = Pass()
    for job in jobs:
        if job.get("JobState") == "PENDING":
            out.pending += 1
        if BUDGET_PREFIX not in job.get("AdminComment", ""):  # most jobs: not auto
            continue
        try:
            d = judge(job, now, busy)
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            jid = job.get("JobId", "?")[:20]
            out.errors.append(f"job {jid}: skipped, unreadable record: {str(exc)[:100]}")
            continue
        if d is None:
            continue
        d.fields = job
        out.auto += 1
        out.decisions.append(d)
    return out


_TEST_ONLY_RE = re.compile(r"to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
_COUNT_RE = re.compile(r"\d+(?:-\d+)?")
_TIME_RE = re.compile(r"(?:\d+-)?\d+(?::\d+){0,2}")


def will_run_argv(job: Mapping[str, str], features: str) -> list[str] | None:
    """``sbatch --test-only`` for a job like ``job`` (node count, tasks, CPUs per task, partition, time limit,
    exclusive, GRES per node, memory per node) with constraint ``features``; None when the line lacks a
    node count. Its stderr carries the answer, so it runs as ``sh -c 'exec "$@" 2>&1'`` (no shell parsing of
    any value). ``--comment=locality=any``: the submit filter leaves the request as it is."""
    nodes = job.get("NumNodes", "")
    if not _COUNT_RE.fullmatch(nodes):
        return None
    argv = ["sbatch", "--test-only", "--comment=locality=any", f"--nodes={nodes}"]
    if _COUNT_RE.fullmatch(job.get("NumTasks", "")):
        argv.append(f"--ntasks={job['NumTasks']}")
    if job.get("CPUs/Task", "").isdigit():
        argv.append(f"--cpus-per-task={job['CPUs/Task']}")
    if job.get("Partition") not in (None, "", NULL):
        argv.append(f"--partition={job['Partition']}")
    if _TIME_RE.fullmatch(job.get("TimeLimit", "")):
        argv.append(f"--time={job['TimeLimit']}")
    if job.get("OverSubscribe") == "NO":
        argv.append("--exclusive")
    gres = [g[5:] for g in job.get("TresPerNode", "").split(",") if g[:5] in ("gres:", "gres/")]
    if gres:
        argv.append(f"--gres={','.join(gres)}")
    mem = job.get("MinMemoryNode", "")
    if re.fullmatch(r"[1-9]\d*[KMGT]?", mem):
        argv.append(f"--mem={mem}")
    if features:
        argv.append(f"--constraint={features}")
    return ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv, "--wrap", "true"]


def parse_test_only(text: str) -> float | None:
    """``sbatch: Job 12 to start at 2026-11-30T12:00:00 using …`` -> epoch seconds (local time, as
    scontrol prints it); None when the answer has no start."""
    m = _TEST_ONLY_RE.search(text)
    return parse_time(m[1]) if m else None


def alternatives(features: str | None) -> list[str]:
    """One constraint per group of the trailing bracket (``gpu&[a|b]`` -> ``gpu&a``, ``gpu&b``); the
    constraint itself without a bracket. Slurm 22.05's ``--test-only`` ignores a matching-OR bracket (it
    answers with nodes of no listed group), so each group is asked on its own."""
    user, groups = split_bracket(features)
    if not groups:
        return [user]
    return [f"{user}&{g}" if user else g for g in groups]


def log_lines(p: Pass, dry_run: bool) -> list[str]:
    lines = []
    for d in p.decisions:
        if d.action != "relax":
            continue
        verb = "would relax" if dry_run else ("relaxed" if d.applied else "relax failed")
        if d.estimate is not None:
            here, there, cost = d.estimate
            why = f"start estimate +{here}s here, +{there}s at {d.target}: saves more than its {cost}s"
        else:
            load = "" if d.factor is None else f" × load {d.factor}"
            why = f"waited {d.waited_s}s > budget {d.budget_s}s{load}"
        lines.append(f"job {d.job}: {verb} {d.level} -> {d.target} ({why}): Features={d.features}")
    lines.extend(p.errors)
    lines.append(
        f"relax: {p.pending} pending, {p.auto} auto, "
        f"{sum(1 for d in p.decisions if d.action == 'relax')} relaxed, {p.seconds:.3f}s"
        + (
            ""
            if p.busy is None or p.priced is None
            else f", {p.busy * 100:.0f} % of nodes busy"
            + (f", {p.queued} nodes queued" if p.queued is not None else "")
            + (", overloaded" if p.priced != p.busy else "")
            + f" (budgets × {load_factor(p.priced):.2f})"
        )
    )
    return lines


def dumps(p: Pass) -> str:
    return json.dumps(p.as_dict(), sort_keys=True)
