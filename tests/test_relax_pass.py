"""One pass of ``slurm-topo relax`` against Slurm's real answers (the 22.05 captures in
tests/fixtures/real/, scripted through tests/fakes.py): compare and set, what a failed read or update
leaves, ``--max-changes``, ``--dry-run``, the load the pass prices at, its report, and the pass lock."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedRunner

from slurm_topo.access import SlurmAccess, admin_comment_argv
from slurm_topo.access.jobs import SCONTROL_JOB_ORDER, job_from_text
from slurm_topo.core.errors import CommandError, OutputError
from slurm_topo.relaxer.relax import (
    Decision,
    Pass,
    auto_lines,
    dumps,
    log_lines,
    pass_lock,
    relax_record,
    run_pass,
)

REAL = Path(__file__).resolve().parent / "fixtures" / "real" / "slurm-22.05"
NODES = (REAL / "scontrol-show-node-o.txt").read_text()  # 12 nodes: 2 MIXED, 9 IDLE, 1 drained
PENDING = job_from_text((REAL / "scontrol-show-job-o-pending.txt").read_text())  # job 2, 11 nodes
SUBMITTED = datetime.fromisoformat(PENDING["SubmitTime"]).timestamp()
BUDGET = (
    "slurm-topo: zone:auto [us-east-1a(3n),us-east-1b(2n)]; "
    "slurm-topo-auto: zone limit=3600s region=300s any=1800s"
)
BRACKET = "ib&[zone_us-east-1a|zone_us-east-1b]"


def line(fields: dict[str, str]) -> str:
    """A ``scontrol show job -o`` line of these fields, in scontrol's order."""
    order = {k: i for i, k in enumerate(SCONTROL_JOB_ORDER)}
    return " ".join(f"{k}={v}" for k, v in sorted(fields.items(), key=lambda kv: order[kv[0]]))


def auto_job(job: str, submitted_ago: int = 0, **kw: str) -> dict[str, str]:
    """The captured pending job as an auto job of two nodes, ``submitted_ago`` seconds before the capture."""
    at = datetime.fromtimestamp(SUBMITTED - submitted_ago).isoformat()
    return {
        **PENDING,
        "JobId": job,
        "NumNodes": "2-2",
        "SubmitTime": at,
        "Features": BRACKET,
        "AdminComment": BUDGET,
        **kw,
    }


def slurm(*jobs: dict[str, str], again: dict[str, object] | None = None) -> ScriptedRunner:
    """The listing of ``jobs``; each re-read as listed unless ``again`` says otherwise; updates succeed."""
    answers: dict[str | tuple[str, ...], object] = {
        "scontrol show node -o": NODES,
        "scontrol show job -o": "\n".join(line(j) for j in jobs) + "\n",
        "scontrol update": "",
    }
    for j in jobs:
        answers[f"scontrol show job -o {j['JobId']}"] = line(j) + "\n"
        answers[tuple(admin_comment_argv(j["JobId"]))] = j.get("AdminComment", "") + "\n"
    for jid, answer in (again or {}).items():
        answers[f"scontrol show job -o {jid}"] = answer
        if isinstance(answer, str) and answer.startswith("JobId="):  # squeue sees the same job
            answers[tuple(admin_comment_argv(jid))] = job_from_text(answer).get("AdminComment", "") + "\n"
    return ScriptedRunner(answers)


def run(runner: ScriptedRunner, waited: float, **kw: Any) -> Pass:
    return run_pass(runner, access=SlurmAccess(runner, "text"), now=SUBMITTED + waited, **kw)


def updates(runner: ScriptedRunner) -> list[tuple[str, ...]]:
    return [c for c in runner.calls if c[:2] == ("scontrol", "update")]


def test_a_due_job_is_widened_once_with_its_trail() -> None:
    """Waited 301 s of a 300 s budget (plain timer): one update, the zones mapped to their region by the
    nodes' own features, the record appended; the filter's rewrite of AdminComment is then undone (the job
    read back still shows the old comment, so the trail is written again alone)."""
    runner = slurm(auto_job("12"))
    p = run(runner, 301, load_aware=False)
    comment = f"{BUDGET}; slurm-topo-relax: zone->region waited=301s budget=300s at="
    first, second = updates(runner)
    assert first[:4] == ("scontrol", "update", "JobId=12", "Features=ib&[region_us-east]")
    assert first[4].startswith(f"AdminComment={comment}") and first[4].endswith("Z")
    assert second == ("scontrol", "update", "JobId=12", first[4])
    (d,) = p.decisions
    assert (d.action, d.applied, d.features) == ("relax", True, "ib&[region_us-east]")
    assert log_lines(p, False)[0].startswith(
        "job 12: relaxed zone -> region (waited 301s > budget 300s): Features=ib&[region_us-east]"
    )


def test_dry_run_changes_nothing_and_says_what_it_would_do() -> None:
    runner = slurm(auto_job("12"))
    p = run(runner, 400, load_aware=False, dry_run=True)
    assert updates(runner) == []
    assert log_lines(p, True)[0] == (
        "job 12: would relax zone -> region (waited 400s > budget 300s): Features=ib&[region_us-east]"
    )


@pytest.mark.parametrize(
    "again",
    [
        {"Reason": "JobHeldAdmin"},  # held since the listing
        {"JobState": "RUNNING"},
        {"AdminComment": f"{BUDGET}; slurm-topo-relax: zone->region waited=1s budget=300s at=x"},
    ],
)
def test_a_job_that_changed_since_the_listing_is_left(again: dict[str, str]) -> None:
    job = auto_job("12")
    runner = slurm(job, again={"12": line({**job, **again}) + "\n"})
    p = run(runner, 400, load_aware=False)
    assert updates(runner) == []
    assert [(d.action, d.why) for d in p.decisions] == [("skip", "changed since the listing")]


@pytest.mark.parametrize(
    "answer, why",
    [
        (
            CommandError(["scontrol"], 1, "slurm_load_jobs error: Invalid job id specified"),
            "changed since the listing",
        ),
        (
            CommandError(["scontrol"], 1, "Unable to contact slurm controller"),
            "gone or unreadable: scontrol exited 1",
        ),
    ],
)
def test_a_job_gone_or_unreadable_on_the_second_read_is_left(answer: object, why: str) -> None:
    runner = slurm(auto_job("12"), again={"12": answer})
    p = run(runner, 400, load_aware=False)
    assert updates(runner) == [] and p.decisions[0].why.startswith(why)


@pytest.mark.parametrize("features", ["nvme", "[zone_mars]", "(null)"])
def test_nothing_to_widen_is_reported_not_changed(features: str) -> None:
    runner = slurm(auto_job("12", Features=features))
    p = run(runner, 400, load_aware=False)
    assert updates(runner) == []
    assert p.decisions[0].why == f"no bracket to widen in Features={features}"


def test_a_refused_update_is_reported_and_counts_as_no_change() -> None:
    runner = slurm(auto_job("12"))
    runner.answers["scontrol update"] = CommandError(["scontrol", "update"], 1, "Access/permission denied")
    p = run(runner, 400, load_aware=False)
    (d,) = p.decisions
    assert (d.action, d.applied) == ("skip", False)
    assert d.why == "scontrol update failed: scontrol update exited 1: Access/permission denied"
    assert log_lines(p, False)[-1].startswith("relax: 1 pending, 1 auto, 0 relaxed, ")


def test_max_changes_keeps_the_longest_waiting() -> None:
    jobs = [auto_job("21", 100), auto_job("22", 900), auto_job("23", 500)]
    runner = slurm(*jobs)
    p = run(runner, 400, load_aware=False, max_changes=2)
    assert [c[2] for c in updates(runner) if c[3].startswith("Features=")] == ["JobId=22", "JobId=23"]
    by = {d.job: d for d in p.decisions}
    assert (by["21"].action, by["21"].why) == ("skip", "over --max-changes 2 this pass")
    runner = slurm(*jobs)
    run(runner, 400, load_aware=False, max_changes=0)
    assert updates(runner) == []


def test_the_pass_prices_budgets_at_the_measured_load() -> None:
    """2 of the 11 usable nodes busy (the drained one counts as neither): budgets × 1/(1 − 2/11)² = (11/9)²;
    the pending jobs ask for 2 nodes, fewer than 11: not overloaded."""
    factor = (11 / 9) ** 2
    runner = slurm(auto_job("12"))
    early = run(runner, int(300 * factor) - 5)
    assert updates(runner) == [] and early.decisions[0].why.endswith("× load 1.49")
    p = run(runner, int(300 * factor) + 5)
    assert " budget=300s load=x1.49 at=" in updates(runner)[0][4]
    assert p.busy == pytest.approx(2 / 11) and p.priced == pytest.approx(2 / 11) and p.queued == 2
    assert log_lines(p, False)[-1].endswith(", 18 % of nodes busy, 2 nodes queued (budgets × 1.49)")


def test_an_overloaded_queue_relaxes_only_a_zero_budget() -> None:
    """The captured 11-node job waits for Resources too: 11 + 2 + 2 = 15 nodes asked of 11 usable: priced at
    the cap."""
    runner = slurm(
        PENDING, auto_job("12"), auto_job("13", AdminComment=BUDGET.replace("region=300s", "region=0s"))
    )
    p = run(runner, 100_000)
    assert [c[2] for c in updates(runner) if c[3].startswith("Features=")] == ["JobId=13"]
    assert p.priced == 0.99 and p.queued == 15
    assert log_lines(p, False)[-1].endswith(
        ", 18 % of nodes busy, 15 nodes queued, overloaded (budgets × 10000.00)"
    )


def test_a_damaged_trail_skips_the_job_with_one_line() -> None:
    bad = f"{BUDGET}; slurm-topo-relax: zone->bogus waited=1s budget=1s at=x"
    runner = slurm(auto_job("12", AdminComment=bad), auto_job("13"))
    p = run(runner, 400, load_aware=False)
    assert p.errors == [
        "job 12: skipped, unreadable record: relax trail zone->bogus: not a level "
        "(network_group, zone, region, any)"
    ]
    assert [c[2] for c in updates(runner)][:1] == ["JobId=13"]
    assert "job 12: skipped, unreadable record" in "\n".join(log_lines(p, False))
    assert auto_lines(auto_job("12", AdminComment=bad), SUBMITTED)[0].startswith(
        "zone:auto, now unknown (relax trail zone->bogus: not a level"
    )


def test_json_report_of_a_pass() -> None:
    runner = slurm(PENDING, auto_job("12"))
    doc = json.loads(dumps(run(runner, 301, load_aware=False)))
    assert (doc["backend"], doc["pending"], doc["auto"], doc["relaxed"], doc["errors"]) == (
        "text",
        2,
        1,
        1,
        [],
    )
    assert doc["busy"] is None and doc["priced_load"] is None and doc["queued_nodes"] is None
    (d,) = doc["decisions"]
    assert d["rule"] == "budget" and d["applied"] is True and "fields" not in d and "factor" not in d


def test_relax_record_is_in_utc() -> None:
    d = Decision("7", "relax", "budget passed", "zone", "region", waited_s=301, budget_s=300, factor=4.0)
    noon = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()
    assert (
        relax_record(d, noon)
        == "slurm-topo-relax: zone->region waited=301s budget=300s load=x4.00 at=2026-11-30T12:00:00Z"
    )


# ---- the lock


def test_a_second_pass_does_not_get_the_lock(tmp_path: Path) -> None:
    path = str(tmp_path / "run" / "relax.lock")  # the folder is made
    with pass_lock(path) as first:
        with pass_lock(path) as second:
            assert (first, second) == (True, False)
    with pass_lock(path) as again:
        assert again  # released


def test_an_unwritable_lock_is_an_output_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=f"^lock {tmp_path}/file/relax.lock: "):
        with pass_lock(str(tmp_path / "file" / "relax.lock")):
            pass


NO_START = "sbatch: error: Requested node configuration is not available\n"


def estimate_pass_without_a_start() -> tuple[ScriptedRunner, dict[str, Decision]]:
    """sbatch --test-only exits 0 but names no start (its error is on stderr, merged into the answer)."""
    runner = slurm(auto_job("12"), auto_job("13", NumNodes="(null)"))
    runner.answers[("sh", "-c", 'exec "$@" 2>&1', "sh", "sbatch")] = NO_START
    p = run(runner, 60, load_aware=False, estimates=10)
    return runner, {d.job: d for d in p.decisions}


def test_a_job_without_a_start_estimate_keeps_its_level() -> None:
    """Job 12's one looser group is asked and names no start: it keeps its level. Job 13's line has no node
    count, so it is never asked."""
    runner, by = estimate_pass_without_a_start()
    assert [(d.action, d.rule) for d in by.values()] == [("skip", None), ("skip", None)]
    assert by["12"].why.startswith("waited 60s of 300s for region; start estimate failed: ")
    assert by["13"].why.endswith("; start estimate failed: no node count in NumNodes=(null)")
    (asked,) = [c for c in runner.calls if "--test-only" in c]
    assert "--constraint=ib&region_us-east" in asked and updates(runner) == []


def test_a_failed_start_estimate_says_why() -> None:
    """docs/relax.md: a job whose calls all fail keeps its level with the reason in its decision."""
    _, by = estimate_pass_without_a_start()
    assert "Requested node configuration is not available" in by["12"].why
