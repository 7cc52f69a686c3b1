"""``slurm-topo relax`` through the command line (in-process, CliRunner), Slurm's answers scripted from the
real 24.11 capture: one pass, its lines and JSON, the lock, failures with and without ``--once``."""

from __future__ import annotations

import fcntl
import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.access import admin_comment_argv, job_from_text
from slurm_topo.cli import relax as relax_cli
from slurm_topo.core.errors import CommandError

REAL = Path(__file__).resolve().parent / "fixtures" / "real" / "slurm-24.11"
NODES = (REAL / "scontrol-show-node-o.txt").read_text()
PENDING = (REAL / "scontrol-show-job-o-pending.txt").read_text().strip()
SUBMIT = "2026-12-01T23:02:13"  # job 2's SubmitTime in the capture
BUDGET = "slurm-topo-auto: zone limit=3600s region=300s any=1800s"
TEXT = {"SLURM_TOPO_SLURM_BACKEND": "text"}


def auto_job(job: str, submitted: str = SUBMIT) -> str:
    """The captured pending job as a 2-node zone:auto job bracketed to us-west-2a|us-west-2b, with a budget
    of 300 s before region (the line the submit filter leaves; everything else as captured)."""
    return (
        PENDING.replace("JobId=2 ", f"JobId={job} ")
        .replace("NumNodes=11-11", "NumNodes=2-2")
        .replace("Features=(null)", "Features=[zone_us-west-2a|zone_us-west-2b]")
        .replace(f"SubmitTime={SUBMIT}", f"SubmitTime={submitted}")
        .replace(
            "AdminComment=slurm-topo: prefer: no group fits; topology/tree packs",
            f"AdminComment=slurm-topo: zone:auto [us-west-2a(3n),us-west-2b(2n)]; {BUDGET}",
        )
    )


def at(stamp: str, later: int) -> str:
    """--now: ``later`` seconds after a SubmitTime (Slurm's local time, as relax reads it)."""
    return str(datetime.fromisoformat(stamp).timestamp() + later)


@pytest.fixture
def lock(tmp_path: Path) -> str:
    return str(tmp_path / "run" / "relax.lock")


def slurm(monkeypatch: pytest.MonkeyPatch, jobs: dict[str, str], **more: object) -> FakeSlurm:
    answers: dict[str, object] = {
        "scontrol show node -o": NODES,
        "scontrol show job -o": "".join(line + "\n" for line in jobs.values()),
        "scontrol update": "",
        **{f"scontrol show job -o {job}": line + "\n" for job, line in jobs.items()},
        **{  # squeue's admin_comment field: what the job's line says
            tuple(admin_comment_argv(job)): job_from_text(line).get("AdminComment", "") + "\n"
            for job, line in jobs.items()
        },
    }
    answers.update(more)
    fake = FakeSlurm(answers)
    monkeypatch.setattr(relax_cli, "SubprocessRunner", lambda: fake)
    return fake


def updates(fake: FakeSlurm) -> list[tuple[str, ...]]:
    return [c for c in fake.calls if c[:2] == ("scontrol", "update")]


def test_a_pass_over_the_real_cluster_counts_its_pending_jobs_and_load(
    lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture (its README): jobs 2, 3 (held) and 4 pending, none :auto (job 4's name imitates a budget
    and must not count); job 1 runs on n01-n02 and n12 is drained, so 2 of 11 usable nodes are busy; job 2
    asks for 11 nodes."""
    fake = FakeSlurm(
        {"scontrol show node -o": NODES, "squeue --json": (REAL / "squeue-json.txt").read_text()}
    )
    monkeypatch.setattr(relax_cli, "SubprocessRunner", lambda: fake)
    result = invoke("relax", "--once", "--dry-run", "--lock", lock, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["backend"], doc["pending"], doc["auto"], doc["relaxed"]) == ("json", 3, 0, 0)
    assert doc["busy"] == pytest.approx(2 / 11, abs=1e-4) and doc["queued_nodes"] == 11
    assert doc["decisions"] == [] and doc["errors"] == []
    text = invoke("relax", "--once", "--dry-run", "--lock", lock, "-v")
    first, last = text.stdout.splitlines()
    assert first == "relax: jobs read with the json backend (slurm_topo.access)"
    assert last.startswith("(dry run) relax: 3 pending, 0 auto, 0 relaxed, ")
    assert ", 18 % of nodes busy, 11 nodes queued" in last
    assert not updates(fake)


def test_a_job_past_its_budget_is_widened_to_its_region(lock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """301 s after submission, over the 300 s budget: us-west-2a and us-west-2b are zones of region
    us-west (the capture's node features), so Features becomes [region_us-west] and the decision is
    appended to AdminComment."""
    fake = slurm(monkeypatch, {"2": auto_job("2")})
    result = invoke("relax", "--once", "--plain-budget", "--lock", lock, "--now", at(SUBMIT, 301), env=TEXT)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "job 2: relaxed zone -> region (waited 301s > budget 300s): Features=[region_us-west]"
    )
    assert lines[1].startswith("relax: 1 pending, 1 auto, 1 relaxed, ")
    first = updates(fake)[0]
    assert first[2:4] == ("JobId=2", "Features=[region_us-west]")
    comment = first[4].removeprefix("AdminComment=")
    assert comment.startswith(f"slurm-topo: zone:auto [us-west-2a(3n),us-west-2b(2n)]; {BUDGET}; ")
    assert "zone->region waited=301s budget=300s" in comment


def test_before_the_budget_and_in_a_dry_run_nothing_is_updated(
    lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = slurm(monkeypatch, {"2": auto_job("2")})
    early = invoke("relax", "--once", "--plain-budget", "--lock", lock, "--now", at(SUBMIT, 299), env=TEXT)
    assert early.exit_code == 0 and early.stdout.startswith("relax: 1 pending, 1 auto, 0 relaxed, ")
    dry = invoke(
        "relax", "--once", "--plain-budget", "--dry-run", "--lock", lock, "--now", at(SUBMIT, 400), env=TEXT
    )
    assert dry.stdout.splitlines()[0] == (
        "(dry run) job 2: would relax zone -> region (waited 400s > budget 300s): Features=[region_us-west]"
    )
    assert updates(fake) == []


def test_max_changes_widens_the_longest_waiting_first(lock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs 5 (submitted 133 s earlier) and 6, both due; --max-changes 1: job 5 is widened, job 6 waits for
    the next pass and the JSON says why."""
    fake = slurm(monkeypatch, {"5": auto_job("5", "2026-12-01T23:00:00"), "6": auto_job("6")})
    result = invoke(
        "relax",
        "--once",
        "--plain-budget",
        "--max-changes",
        "1",
        "--json",
        "--lock",
        lock,
        "--now",
        at(SUBMIT, 301),
        env=TEXT,
    )
    doc = json.loads(result.stdout)
    assert doc["relaxed"] == 1 and doc["busy"] is None
    by_job = {d["job"]: d for d in doc["decisions"]}
    assert (by_job["5"]["action"], by_job["5"]["applied"], by_job["5"]["waited_s"]) == ("relax", True, 434)
    assert (by_job["6"]["action"], by_job["6"]["why"]) == ("skip", "over --max-changes 1 this pass")
    assert {c[2] for c in updates(fake)} == {"JobId=5"}


def test_a_pass_another_relax_holds_the_lock_for_is_skipped(
    lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = slurm(monkeypatch, {"2": auto_job("2")})
    os.makedirs(os.path.dirname(lock))
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        text = invoke("relax", "--once", "--lock", lock)
        as_json = invoke("relax", "--once", "--lock", lock, "--json")
    finally:
        os.close(fd)
    assert text.exit_code == 0 and text.stdout == f"relax: another pass holds {lock}; skipped\n"
    assert json.loads(as_json.stdout) == {"skipped": f"another pass holds {lock}; skipped"}
    assert fake.calls == []


def test_a_lock_that_cannot_be_made_is_an_output_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = invoke("relax", "--once", "--lock", str(blocker / "relax.lock"))
    assert result.exit_code == 4 and error_line(result).startswith(f"lock {blocker / 'relax.lock'}: ")


def test_once_a_failing_slurm_is_exit_3(lock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    down = CommandError(["scontrol", "show", "node", "-o"], 1, "Unable to contact slurm controller")
    slurm(monkeypatch, {}, **{"scontrol show node -o": down})
    result = invoke("relax", "--once", "--lock", lock, env=TEXT)
    assert result.exit_code == 3 and result.stdout == ""
    assert "Unable to contact slurm controller" in error_line(result)


def test_the_loop_outlives_a_failed_pass_and_waits_at_least_a_second(
    lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --once a failed pass is one stderr line naming when the next comes, and the loop sleeps
    max(1 s, --interval) between passes (the second sleep is interrupted here: Ctrl-C, exit 130)."""
    down = CommandError(["scontrol", "show", "node", "-o"], 1, "Unable to contact slurm controller")
    slurm(monkeypatch, {}, **{"scontrol show node -o": down})
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)
    result = invoke("relax", "--interval", "0.25", "--lock", lock, env=TEXT)
    assert result.exit_code == 130 and slept == [1.0, 1.0]
    failed = [line for line in result.stderr.splitlines() if line.startswith("relax: pass failed")]
    assert len(failed) == 2 and failed[0].startswith("relax: pass failed, next in 0.25 s: ")
    assert result.stderr.splitlines()[-1] == "slurm-topo: interrupted"


@pytest.mark.parametrize(
    ("option", "value"), [("--estimates", "1001"), ("--estimate-timeout", "0.5"), ("--now", "-1")]
)
def test_out_of_range_options_are_usage_errors(lock: str, option: str, value: str) -> None:
    result = invoke("relax", "--once", "--lock", lock, option, value)
    assert result.exit_code == 2 and error_line(result).startswith(f"invalid value for '{option}'")
    assert not Path(lock).exists()


def test_the_estimate_rule_asks_sbatch_test_only_within_its_call_budget(
    lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--estimates 1: a job not yet due gets one `sbatch --test-only` call at most, run through `sh -c` to
    read sbatch's stderr; an answer that names no start is a skip, not a failure."""
    fake = slurm(
        monkeypatch, {"2": auto_job("2")}, sh="sbatch: error: Requested node configuration is not available\n"
    )
    result = invoke(
        "relax",
        "--once",
        "--plain-budget",
        "--estimates",
        "1",
        "--lock",
        lock,
        "--json",
        "--now",
        at(SUBMIT, 60),
        env=TEXT,
    )
    assert result.exit_code == 0, result.output
    asked = [c for c in fake.calls if "--test-only" in c]
    assert len(asked) == 1 and asked[0][:3] == ("sh", "-c", 'exec "$@" 2>&1')
    (decision,) = json.loads(result.stdout)["decisions"]
    assert decision["action"] == "skip" and not updates(fake)
