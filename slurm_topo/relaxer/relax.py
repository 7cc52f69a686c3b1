"""Wait or go, the relaxer's driver (``slurm-topo relax``): one pass reads the jobs and nodes through
:mod:`slurm_topo.access`, decides with :func:`slurm_topo.relaxer.relax_plan.plan_pass` (pure), asks Slurm's
start estimates (``sbatch --test-only``) where ``--estimates`` says so, and writes each due job's widened
constraint and record with compare and set, under a lock so that two passes never overlap.

The records, the budget and the timer are described in :mod:`slurm_topo.relaxer.relax_plan`; the budget maths
is
:mod:`slurm_topo.cost.budget`. Every name of both is importable from here as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence

from ..access import SlurmAccess
from ..access.text import busy_share, busy_share_of, features_of, usable_nodes
from ..core.errors import CommandError, OutputError, ParseError
from ..cost.budget import (
    Budget,
    auto_budget,
    budget_record,
    level_slowdowns,
    level_step_seconds,
    unit_budgets,
)
from ..plumbing.runner import Runner
from ..plumbing.text import NULL
from ..policy.vocab import AUTO_LEVELS as LEVELS
from ..policy.vocab import BUDGET_PREFIX, RELAX_PREFIX
from .relax_plan import (
    FEATURE_PREFIX,
    HELD_REASONS,
    MAX_BUSY,
    WAITING_FOR_NODES,
    Decision,
    Pass,
    alternatives,
    auto_lines,
    current_level,
    due,
    dumps,
    estimate_says,
    judge,
    load_factor,
    log_lines,
    next_level,
    parse_budget,
    parse_test_only,
    parse_time,
    pass_load,
    plan_pass,
    queued_nodes,
    relax_cost,
    relax_record,
    relaxations,
    split_bracket,
    widen,
    will_run_argv,
)

DEFAULT_LOCK = "/run/slurm-topo/relax.lock"


def _why(exc: CommandError) -> str:
    """A failed call's reason in a line: Slurm's own last line where it said one (the argv, a long
    ``sh -c … sbatch`` command, would fill the line before the reason)."""
    said = exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else str(exc)
    return " ".join(said.split())[:160]


def start_estimate(runner: Runner, job: Mapping[str, str], features: str, timeout: float) -> float:
    """Slurm's estimated start of a job like ``job`` under ``features`` (``sbatch --test-only``); raises
    CommandError when Slurm gives none."""
    argv = will_run_argv(job, features)
    if argv is None:
        raise CommandError(
            ["sbatch", "--test-only"], None, f"no node count in NumNodes={job.get('NumNodes')}"
        )
    text = runner.run(argv, timeout=timeout)
    start = parse_test_only(text)
    if start is None:
        raise CommandError(argv, None, f"no start estimate in {text.strip()[:120]!r}")
    return start


class _Calls:
    """The ``--test-only`` calls a pass may still make: a count and a deadline."""

    def __init__(self, count: int, seconds: float, timeout: float) -> None:
        self.left = count
        self.deadline = time.monotonic() + seconds
        self.timeout = timeout

    def start(self, runner: Runner, job: Mapping[str, str], features: str) -> float:
        remaining = self.deadline - time.monotonic()
        if self.left <= 0 or remaining < 1:
            raise _OutOfCalls()
        self.left -= 1
        return start_estimate(runner, job, features, min(self.timeout, remaining))


class _OutOfCalls(Exception):
    pass


def earliest(
    runner: Runner, job: Mapping[str, str], features: str | None, calls: _Calls, enough: float | None = None
) -> float:
    """The earliest estimated start over the alternatives of ``features``; stops at the first one at or
    before ``enough``. A failed call skips its alternative; all failed: CommandError."""
    best = math.inf
    failed: CommandError | None = None
    for alt in alternatives(features):
        try:
            best = min(best, calls.start(runner, job, alt))
        except CommandError as exc:
            failed = exc
            continue
        if enough is not None and best <= enough:
            break
    if best == math.inf:
        raise failed or CommandError(["sbatch", "--test-only"], None, "no alternative to ask")
    return best


def estimate_pass(
    runner: Runner,
    decisions: Sequence[Decision],
    nodes: Mapping[str, Sequence[str]],
    now: float,
    *,
    limit: int,
    timeout: float = 10.0,
    seconds: float = 60.0,
    confirm: SlurmAccess | None = None,
) -> list[Decision]:
    """The start-estimate rule for jobs not yet due, the longest waiting first, with at most ``limit``
    ``sbatch --test-only`` calls in all, each under ``timeout`` seconds and all within ``seconds``. A job's
    start one level looser is asked first (one call per group), then its start at its own level, group by
    group until one starts no later than the looser start plus what the looser level costs (R · Δs); the job
    becomes due when none does (:func:`estimate_says`). A call that fails or times out skips that group;
    a job whose calls all fail keeps its level (the reason in its decision) and the pass goes on.

    ``confirm`` (a listing read from text, where a user's path can forge a budget): before any call, the
    job is read again as its writer reads it (one record, AdminComment confirmed by squeue); a job whose
    budget is not its own costs no ``--test-only`` call, and the calls are made with the confirmed record.
    At most ``limit`` jobs are confirmed a pass."""
    candidates = [
        d
        for d in decisions
        if d.action == "skip" and d.target is not None and d.waited_s is not None and d.fields is not None
    ]
    candidates.sort(key=lambda d: -(d.waited_s or 0))
    calls = _Calls(limit, seconds, timeout)
    confirms = limit
    out: list[Decision] = []
    for d in candidates:
        job = d.fields or {}
        budget = parse_budget(job.get("AdminComment"))
        looser = widen(job.get("Features"), d.target or "any", nodes)
        if budget is None or d.level is None or looser is None:
            continue
        if confirm is not None:
            if confirms <= 0:
                d.why += "; no start estimate (the pass's confirmations are spent: one per --test-only call)"
                continue
            confirms -= 1
            try:
                own = confirm.job(d.job, timeout=timeout, own_admin_comment=True)
            except (CommandError, ParseError) as exc:
                d.why += f"; no start estimate: {str(exc)[:120]}"
                continue
            if own is None or own.get("AdminComment") != job.get("AdminComment"):
                d.why += "; no start estimate: the listing's budget is not the job's own AdminComment"
                continue
            job = own
        cost = relax_cost(budget, d.level, d.target or "any")
        try:
            there = max(now, earliest(runner, job, looser, calls))
            here = max(now, earliest(runner, job, job.get("Features"), calls, enough=there + cost))
        except _OutOfCalls:
            d.why += "; no start estimate (the pass's --test-only calls are spent)"
            continue
        except CommandError as exc:
            d.why += f"; start estimate failed: {_why(exc)}"
            continue
        wait_here, wait_there = round(here - now), round(there - now)
        d.estimate = (wait_here, wait_there, cost)
        if estimate_says(budget, d.level, wait_here, wait_there) != d.target:
            d.why += f"; start estimate +{wait_here}s here, +{wait_there}s at {d.target}, costs {cost}s"
            continue
        d.action, d.why, d.rule = "relax", "start estimate", "estimate"
        out.append(d)
    return out


def run_pass(
    runner: Runner,
    *,
    access: SlurmAccess | None = None,
    dry_run: bool = False,
    now: float | None = None,
    max_changes: int = 200,
    load_aware: bool = True,
    estimates: int = 0,
    estimate_timeout: float = 10.0,
    estimate_seconds: float = 60.0,
) -> Pass:
    """One pass: read the jobs, decide, and for each job due apply at most one ``scontrol update`` after
    re-reading that job (compare and set: nothing is applied when it changed since the listing). At most
    ``max_changes`` jobs are changed a pass (the longest waiting first); the rest wait for the next pass.
    ``estimates`` > 0: also ask Slurm's start estimate of jobs not yet due, at most that many
    ``sbatch --test-only`` calls a pass (:func:`estimate_pass`)."""
    started = time.monotonic()
    now = time.time() if now is None else now
    slurm = access or SlurmAccess(runner)
    node_recs = slurm.nodes(timeout=60)
    listing = slurm.jobs(timeout=60, detail=lambda comment: BUDGET_PREFIX in comment)
    measured = busy = queued = None
    if load_aware:
        queued = queued_nodes(listing.jobs)
        measured = busy_share_of(node_recs)
        busy = pass_load(measured, queued, usable_nodes(node_recs))
    result = plan_pass(listing.jobs, now, busy)
    result.errors[:0] = [f"job {jid}: skipped, {why}" for jid, why in listing.refused]
    result.busy, result.priced, result.queued = measured, busy, queued
    result.backend = listing.backend
    due_jobs = [d for d in result.decisions if d.action == "relax"]
    want_nodes = due_jobs or (estimates > 0 and result.decisions)
    nodes = features_of(node_recs) if want_nodes else {}
    if estimates > 0 and len(due_jobs) < max_changes:
        due_jobs += estimate_pass(
            runner,
            result.decisions,
            nodes,
            now,
            limit=estimates,
            timeout=estimate_timeout,
            seconds=estimate_seconds,
            confirm=slurm if listing.backend == "text" else None,
        )
    due_jobs.sort(key=lambda d: -(d.waited_s or 0))
    for d in due_jobs[max(0, max_changes) :]:
        d.action, d.why = "skip", f"over --max-changes {max_changes} this pass"
    for d in due_jobs[: max(0, max_changes)]:
        apply(runner, d, now, busy, nodes, dry_run, slurm)
    for d in result.decisions:
        d.fields = None
    result.seconds = time.monotonic() - started
    return result


def apply(
    runner: Runner,
    d: Decision,
    now: float,
    busy: float | None,
    nodes: Mapping[str, Sequence[str]],
    dry_run: bool,
    access: SlurmAccess | None = None,
) -> None:
    """Widen one due job: read it again and change it only when it is still pending, not held, at the same
    level and (for the budget rule) still due for the same level; one ``scontrol update``."""
    slurm = access or SlurmAccess(runner)
    try:
        one = slurm.job(d.job, timeout=30, own_admin_comment=True)
        again = judge(one, now, busy) if one is not None else None
    except (CommandError, ParseError, ValueError) as exc:
        d.action, d.why = "skip", f"gone or unreadable: {str(exc)[:80]}"
        return
    fresh = [one] if one is not None else []
    if d.rule == "estimate":
        same = again is not None and again.waited_s is not None and again.target == d.target
    else:
        same = again is not None and again.action == "relax" and again.target == d.target
    if not same or again is None or again.level != d.level:
        d.action, d.why = "skip", "changed since the listing"
        return
    job = fresh[0]
    features = widen(job.get("Features"), d.target or "any", nodes)
    if features is None:
        d.action, d.why = "skip", f"no bracket to widen in Features={job.get('Features')}"
        return
    d.features = features
    if dry_run:
        return
    old = job.get("AdminComment", "")
    comment = f"{old}; {relax_record(d, now)}" if old and old != NULL else relax_record(d, now)
    try:
        slurm.update_job(d.job, ("Features", features), ("AdminComment", comment), timeout=30)
    except CommandError as exc:
        d.action, d.why = "skip", f"scontrol update failed: {str(exc)[:120]}"
        return
    d.applied = True
    restore_trail(runner, d.job, comment, slurm)


def restore_trail(runner: Runner, job: str, comment: str, access: SlurmAccess | None = None) -> None:
    """The submit filter's modify hook answers an administrator's ``Features=`` update with its own record in
    place of the AdminComment (everything after its ``slurm-topo: `` is replaced): read the job back and,
    when the trail is gone, write it again alone (an AdminComment-only update, which the filter passes)."""
    try:
        slurm = access or SlurmAccess(runner)
        back = slurm.job(job, timeout=30)
        if back is not None and back.get("AdminComment") != comment:
            slurm.update_job(job, ("AdminComment", comment), timeout=30)
    except (CommandError, ParseError):
        pass  # the change is made; the next pass sees the level from Features only if the trail is kept


@contextlib.contextmanager
def pass_lock(path: str) -> Iterator[bool]:
    """An exclusive, non-blocking lock on ``path`` (created with its folder): True when held."""
    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OutputError(f"lock {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


__all__ = [
    "alternatives",
    "apply",
    "auto_budget",
    "auto_lines",
    "Budget",
    "BUDGET_PREFIX",
    "budget_record",
    "busy_share",
    "busy_share_of",
    "current_level",
    "Decision",
    "DEFAULT_LOCK",
    "due",
    "dumps",
    "earliest",
    "estimate_pass",
    "estimate_says",
    "FEATURE_PREFIX",
    "features_of",
    "HELD_REASONS",
    "judge",
    "level_slowdowns",
    "level_step_seconds",
    "LEVELS",
    "load_factor",
    "log_lines",
    "MAX_BUSY",
    "next_level",
    "NULL",
    "parse_budget",
    "parse_test_only",
    "parse_time",
    "Pass",
    "pass_load",
    "pass_lock",
    "plan_pass",
    "queued_nodes",
    "relax_cost",
    "RELAX_PREFIX",
    "relax_record",
    "relaxations",
    "restore_trail",
    "run_pass",
    "split_bracket",
    "start_estimate",
    "unit_budgets",
    "usable_nodes",
    "WAITING_FOR_NODES",
    "widen",
    "will_run_argv",
]
