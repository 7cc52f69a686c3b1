"""Nothing a user controls steers what ``slurm-topo relax`` does as root: job names, comments and paths
that carry forged fields, budget records or relax trails, through the real readers of Slurm's answers (the
captures of tests/fixtures/real/, scripted through tests/fakes.py), and values that reach
``sbatch --test-only`` run through a real shell."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedRunner
from test_relax_pass import BRACKET, BUDGET, NODES, SUBMITTED, auto_job, line, slurm, updates

from slurm_topo.access import SlurmAccess, admin_comment_argv, jobs_from_text
from slurm_topo.access.argv import job_ids
from slurm_topo.core.errors import ParseError
from slurm_topo.plumbing.runner import SubprocessRunner
from slurm_topo.relaxer.relax import Pass, run_pass, start_estimate

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
RELEASES = ("slurm-22.05", "slurm-24.11", "slurm-26.05")


def text_pass(runner: ScriptedRunner, waited: float) -> Pass:
    return run_pass(runner, access=SlurmAccess(runner, "text"), now=SUBMITTED + waited, load_aware=False)


@pytest.mark.parametrize("release", RELEASES)
def test_the_captured_hostile_line_is_refused_and_the_honest_job_still_relaxed(release: str) -> None:
    """Job 4's name forges ``JobState=PENDING … AdminComment=…slurm-topo-auto: zone limit=60s region=0s …
    Features=[zone_a|zone_b]`` and its comment another AdminComment: as scontrol printed it, the line is
    refused whole (one error line), never read, never re-read (squeue lists job 4: the line is its own),
    never updated."""
    folder = REAL / release
    hostile = (folder / "scontrol-show-job-o-hostile.txt").read_text().strip()
    runner = slurm(auto_job("12"))
    runner.answers["scontrol show node -o"] = (folder / "scontrol-show-node-o.txt").read_text()
    runner.answers["scontrol show job -o"] = f"{hostile}\n{line(auto_job('12'))}\n"
    runner.answers[tuple(job_ids())] = "4\n12\n"
    p = text_pass(runner, 400)
    assert [(d.job, d.action) for d in p.decisions] == [("12", "relax")]
    assert len(p.errors) == 1 and p.errors[0].startswith("job 4: skipped, ambiguous scontrol line (")
    assert [c[2] for c in updates(runner)] == ["JobId=12", "JobId=12"]
    assert ("scontrol", "show", "job", "-o", "4") not in runner.calls


@pytest.mark.parametrize("release", RELEASES)
def test_squeue_json_reads_the_hostile_job_as_the_non_auto_job_it_is(release: str) -> None:
    doc = (REAL / release / "squeue-json.txt").read_text()
    runner = ScriptedRunner({"squeue --json": doc, "scontrol show node -o": NODES, "scontrol update": ""})
    p = run_pass(runner, access=SlurmAccess(runner, "json"), now=SUBMITTED + 10**6, load_aware=False)
    assert (p.auto, p.decisions, p.errors, updates(runner)) == (0, [], [], [])
    assert p.pending == 3  # jobs 2, 3 and the hostile 4 (held)


def test_a_json_job_name_cannot_choose_the_constraint_root_writes() -> None:
    """A genuine auto job whose name carries ``Features=``, ``AdminComment=`` and a relax trail: the update
    is the region of its own zones, from the nodes' features, and its trail starts at its own level."""
    doc = json.loads((REAL / "slurm-24.11" / "squeue-json.txt").read_text())
    (job,) = [j for j in doc["jobs"] if j["job_id"] == 2]
    job.update(
        name="x Features=[region_evil] AdminComment=slurm-topo-relax: region->any waited=1s budget=0s at=x",
        comment="slurm-topo-auto: zone limit=1s region=0s any=0s",
        admin_comment=BUDGET,
        features=BRACKET,
    )
    doc["jobs"] = [job]
    runner = ScriptedRunner(
        {"squeue --json": json.dumps(doc), "scontrol show node -o": NODES, "scontrol update": ""}
    )
    now = job["submit_time"]["number"] + 400
    p = run_pass(runner, access=SlurmAccess(runner, "json"), now=now, load_aware=False)
    assert [(d.level, d.target) for d in p.decisions] == [("zone", "region")]
    first = updates(runner)[0]
    assert first[:4] == ("scontrol", "update", "JobId=2", "Features=ib&[region_us-east]")
    assert first[4].startswith(
        f"AdminComment={BUDGET}; slurm-topo-relax: zone->region waited=400s budget=300s "
    )


def test_a_trail_in_a_users_comment_does_not_move_the_level() -> None:
    """``Comment`` follows AdminComment in scontrol's line, so a trail there is no forged key: it is read as
    the comment it is, and the job moves from its own level (zone) to region, not on to any."""
    trail = (
        "c slurm-topo-relax: zone->region waited=1s budget=0s at=x; slurm-topo-relax: region->any waited=1s"
    )
    runner = slurm(auto_job("12", Comment=trail, JobName="slurm-topo-relax: zone->any"))
    p = text_pass(runner, 400)
    assert [(d.level, d.target, d.applied) for d in p.decisions] == [("zone", "region", True)]
    assert updates(runner)[0][3] == "Features=ib&[region_us-east]"


def test_a_budget_forged_in_a_path_is_never_acted_on() -> None:
    """A job without an AdminComment of its own (no filter record: a partition without a locality policy, or
    a job from before the filter), a matching-OR constraint of the user's and ``--chdir`` a folder named
    ``w AdminComment=slurm-topo-auto: zone limit=3600s region=0s any=0s``: scontrol prints the path as is, so
    the listing's line reads as an auto job past its budget. Before it writes, the relaxer asks squeue for the
    job's own AdminComment (none), refuses the job and writes nothing."""
    job = auto_job("12", WorkDir="/home/u/w AdminComment=slurm-topo-auto: zone limit=3600s region=0s any=0s")
    del job["AdminComment"]
    runner = slurm(job)
    p = text_pass(runner, 60)
    assert updates(runner) == []
    (d,) = p.decisions
    assert (d.action, d.applied) == ("skip", False)
    assert "not the job's own" in d.why
    assert tuple(admin_comment_argv("12")) in runner.calls


def test_test_only_values_reach_sbatch_unparsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``sbatch --test-only`` call runs through ``sh -c 'exec "$@" 2>&1'`` (answers on stderr): shell
    text in the job's partition, GRES or constraint reaches sbatch as one argument each and runs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    report = tmp_path / "argv.json"
    (bin_dir / "sbatch").write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(report)!r}, 'w'))\n"
        "print('sbatch: Job 99 to start at 2026-12-02T00:00:00 using 1 processors on nodes n01',\n"
        "      file=sys.stderr)\n"
    )
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    pwned = tmp_path / "pwned"
    job: dict[str, Any] = {
        "NumNodes": "2-2",
        "Partition": f"main;touch {pwned}",
        "TresPerNode": f"gres:gpu:4`touch {pwned}`",
        "TimeLimit": f"$(touch {pwned})",
    }
    features = f"ib&[zone_a|$(touch {pwned})]"
    start = start_estimate(SubprocessRunner(), job, features, timeout=30)
    assert start == datetime.fromisoformat("2026-12-02T00:00:00").timestamp()
    assert json.loads(report.read_text()) == [
        "--test-only",
        "--comment=locality=any",
        "--nodes=2-2",
        f"--partition=main;touch {pwned}",
        f"--gres=gpu:4`touch {pwned}`",
        f"--constraint={features}",
        "--wrap",
        "true",
    ]  # no --time: the limit is not a time
    assert not pwned.exists()


def test_a_line_break_in_a_value_cannot_start_a_record_of_its_own() -> None:
    """scontrol prints a value as it is: a WorkDir ending in a line break and ``JobId=12 … SubmitTime=<a
    million seconds ago> … WorkDir=b`` prints as two ``JobId=12`` lines, the second with the job's true
    AdminComment (which squeue confirms) and a forged wait. The job is refused (one line), in the listing
    (re-read: its answer has both lines) and in the writer's re-read, and nothing is written."""
    job = auto_job("12")  # submitted at the capture: 10 s waited, far from its 300 s budget
    forged = line(auto_job("12", submitted_ago=10**6, WorkDir="b"))
    first = line({**job, "WorkDir": "/a"}).split(" AdminComment=")[0]  # the record runs on in the WorkDir
    text = f"{first}\n{forged}\n"
    runner = slurm(job)
    runner.answers["scontrol show job -o"] = text
    runner.answers["scontrol show job -o 12"] = text
    p = text_pass(runner, 10)
    assert updates(runner) == [] and p.decisions == []
    listing = SlurmAccess(runner, "text").jobs()
    assert listing.jobs == [] and [jid for jid, _ in listing.refused] == ["12"]
    with pytest.raises(ParseError, match="claimed by more than one line"):
        SlurmAccess(runner, "text").job("12", own_admin_comment=True)


def test_a_record_whose_value_runs_on_is_refused_and_the_next_read() -> None:
    """A line that is not a ``JobId=`` line continues the record before it (a value held a line break): that
    job is refused, the next job is read."""
    honest = line(auto_job("13"))
    text = f"{line(auto_job('12', WorkDir='/a'))}\n   StdOut=/b\n{honest}\n"
    listing = jobs_from_text(text)
    assert [j["JobId"] for j in listing.jobs] == ["13"]
    assert listing.refused == [("12", "ambiguous scontrol line (a value runs on to the next line): not read")]


def test_a_writer_reads_exactly_the_job_it_asked_for() -> None:
    """A re-read that answers with another job's record is refused for a writer (none: the job is gone);
    squeue's ``(null)`` (an AdminComment never set) reads as none."""
    runner = slurm(auto_job("12"))
    runner.answers["scontrol show job -o 12"] = line(auto_job("14")) + "\n"
    with pytest.raises(ParseError, match="answered with job 14"):
        SlurmAccess(runner, "text").job("12", own_admin_comment=True)
    runner.answers["scontrol show job -o 12"] = ""  # gone since the listing
    assert SlurmAccess(runner, "text").job("12", own_admin_comment=True) is None
    plain = {k: v for k, v in auto_job("12").items() if k != "AdminComment"}
    runner.answers["scontrol show job -o 12"] = line(plain) + "\n"
    runner.answers[tuple(admin_comment_argv("12"))] = "(null)" + " " * 40 + "\n"
    assert "AdminComment" not in (SlurmAccess(runner, "text").job("12", own_admin_comment=True) or {})


def test_a_budget_forged_in_a_path_costs_no_start_estimate() -> None:
    """The same forged path on a job not yet due, with ``--estimates``: the listing reads as an auto job that
    could be relaxed on Slurm's start estimate. Before any ``sbatch --test-only`` call the job is read as its
    writer reads it; squeue says it has no AdminComment, so no call is spent on it and nothing is written.
    An honest job beside it is confirmed and asked."""
    forged = auto_job("12", WorkDir=f"/home/u/w AdminComment={BUDGET}")
    del forged["AdminComment"]
    runner = slurm(forged, auto_job("13"))
    runner.answers[("sh", "-c", 'exec "$@" 2>&1', "sh", "sbatch")] = (
        "sbatch: error: Requested node configuration is not available\n"
    )
    p = run_pass(
        runner, access=SlurmAccess(runner, "text"), now=SUBMITTED + 60, load_aware=False, estimates=10
    )
    by = {d.job: d for d in p.decisions}
    assert "; no start estimate: " in by["12"].why and "not the job's own" in by["12"].why, by["12"].why
    asked = [c for c in runner.calls if "--test-only" in c]
    assert asked and all("--constraint=ib&region_us-east" in c for c in asked)
    assert len(asked) == 1  # job 13's one looser group; job 12 costs none
    assert tuple(admin_comment_argv("12")) in runner.calls and updates(runner) == []
    assert "start estimate failed" in by["13"].why


def test_confirmations_are_bounded_like_the_calls() -> None:
    """On a text listing each candidate is confirmed before its calls, at most ``--estimates`` of them a
    pass: with one call allowed, the longest-waiting job is confirmed and asked, the next is neither and says
    why."""
    runner = slurm(auto_job("12", submitted_ago=30), auto_job("13"))
    runner.answers[("sh", "-c", 'exec "$@" 2>&1', "sh", "sbatch")] = (
        "sbatch: error: Requested node configuration is not available\n"
    )
    p = run_pass(
        runner, access=SlurmAccess(runner, "text"), now=SUBMITTED + 60, load_aware=False, estimates=1
    )
    by = {d.job: d for d in p.decisions}
    assert "start estimate failed" in by["12"].why
    assert by["13"].why.endswith(
        "; no start estimate (the pass's confirmations are spent: one per --test-only call)"
    )
    assert tuple(admin_comment_argv("12")) in runner.calls
    assert tuple(admin_comment_argv("13")) not in runner.calls
    assert len([c for c in runner.calls if "--test-only" in c]) == 1
