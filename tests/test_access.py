"""slurm_topo.access: the job readers on the real captures of every release (tests/fixtures/real/slurm-*),
a job whose own name and comment carry forged fields, and the backend choice."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import ScriptedRunner

from slurm_topo.access import SlurmAccess, jobs_from_json, jobs_from_text
from slurm_topo.access.jobs import SCONTROL_JOB_ORDER, job_from_text
from slurm_topo.core.errors import CommandError, ParseError
from slurm_topo.relaxer.relax import plan_pass
from slurm_topo.reports.explain import explain_record

REAL = Path(__file__).parent / "fixtures" / "real"
RELEASES = sorted(p.name for p in REAL.glob("slurm-*") if (p / "squeue-json.txt").exists())


@pytest.fixture(autouse=True)
def _utc() -> Iterator[None]:
    """The captures' times were printed in UTC: read the JSON epochs in the same zone."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def _capture(release: str) -> tuple[Path, dict[str, object]]:
    folder = REAL / release
    return folder, json.loads((folder / "capture.json").read_text())


def test_every_release_has_json_captures() -> None:
    assert RELEASES == ["slurm-22.05", "slurm-24.11", "slurm-26.05"]


@pytest.mark.parametrize("release", RELEASES)
def test_json_reads_every_captured_job_and_the_hostile_one_as_it_is(release: str) -> None:
    folder, facts = _capture(release)
    jobs: dict[str, str] = facts["jobs"]  # type: ignore[assignment]
    hostile: dict[str, str] = facts["hostile"]  # type: ignore[assignment]
    listing = jobs_from_json((folder / "squeue-json.txt").read_text())
    assert listing.refused == [] and listing.backend == "json"
    by_id = {j["JobId"]: j for j in listing.jobs}
    assert set(jobs.values()) <= set(by_id)
    bad = by_id[jobs["hostile"]]
    assert bad["JobName"] == hostile["name"] and bad["Comment"] == hostile["comment"]
    assert (bad["JobState"], bad["Reason"], bad["Priority"]) == ("PENDING", "JobHeldUser", "0")
    assert bad["UserId"] == "nobody(65534)"
    assert "slurm-topo-auto:" not in bad["AdminComment"] and bad["SubmitTime"] > "2026"
    assert bad["Features"] == "(null)" and bad["NodeList"] == ""
    assert by_id[jobs["running"]]["JobState"] == "RUNNING"
    assert by_id[jobs["pending"]]["Reason"] == "Resources"
    one = jobs_from_json((folder / "squeue-json-pending.txt").read_text(), jobs["pending"])
    assert [j["JobId"] for j in one.jobs] == [jobs["pending"]]


@pytest.mark.parametrize("release", RELEASES)
def test_text_and_json_agree_on_the_captured_jobs_and_text_refuses_the_hostile_line(release: str) -> None:
    """The same cluster state read both ways: equal on every field the relaxer and explain read
    (TimeLimit where the job set one; 26.05's JSON does not say OverSubscribe)."""
    folder, facts = _capture(release)
    jobs: dict[str, str] = facts["jobs"]  # type: ignore[assignment]
    by_id = {j["JobId"]: j for j in jobs_from_json((folder / "squeue-json.txt").read_text()).jobs}
    keys = ["JobId", "JobState", "Reason", "Priority", "SubmitTime", "Partition", "NodeList", "NumNodes"]
    keys += ["NumTasks", "CPUs/Task", "MinMemoryNode", "Features", "AdminComment", "UserId", "JobName"]
    if release != "slurm-26.05":
        keys.append("OverSubscribe")
    for kind in ("running", "pending", "held"):
        text = jobs_from_text((folder / f"scontrol-show-job-o-{kind}.txt").read_text())
        assert text.refused == [], text.refused
        got, want = text.jobs[0], by_id[jobs[kind]]
        assert {k: got.get(k) for k in keys} == {k: want[k] for k in keys}, kind
    hostile = jobs_from_text((folder / "scontrol-show-job-o-hostile.txt").read_text())
    assert hostile.jobs == [] and hostile.refused[0][0] == jobs["hostile"]
    assert "ambiguous" in hostile.refused[0][1]


@pytest.mark.parametrize("release", RELEASES)
def test_every_key_scontrol_printed_is_known_to_the_text_reader(release: str) -> None:
    """An unknown key would run into the previous key's value: every key of the captures is listed."""
    folder, _ = _capture(release)
    for kind in ("running", "pending", "held"):
        line = (folder / f"scontrol-show-job-o-{kind}.txt").read_text()
        keys = [tok.split("=", 1)[0] for tok in line.split() if "=" in tok and tok[0].isupper()]
        assert set(keys) - set(SCONTROL_JOB_ORDER) == set(), (kind, keys)


@pytest.mark.parametrize("release", RELEASES)
def test_the_relaxer_and_explain_read_the_hostile_job_as_slurm_holds_it(release: str) -> None:
    folder, facts = _capture(release)
    jobs: dict[str, str] = facts["jobs"]  # type: ignore[assignment]
    listing = jobs_from_json((folder / "squeue-json.txt").read_text())
    p = plan_pass(listing.jobs, time.time())
    assert p.auto == 0 and p.decisions == [] and p.errors == []
    bad = next(j for j in listing.jobs if j["JobId"] == jobs["hostile"])
    e = explain_record(bad, None)
    assert (e.state, e.reason, e.locality) == ("PENDING", "JobHeldUser", "prefer")  # the filter's record
    assert e.auto == () and "zone:auto" not in (e.record or "")


def test_text_reader_refuses_forged_keys_in_any_free_text_field() -> None:
    base = (
        "JobId=7 JobName={name} UserId=u(1) GroupId=g(1) Priority=5 JobState=PENDING Reason=Resources "
        "SubmitTime=2026-12-01T10:00:00 Features=[zone_a] Command=/bin/true WorkDir={wd} "
        "AdminComment={ac} Comment={c} StdOut=/tmp/o"
    )
    plain = dict(name="train", wd="/tmp", ac="slurm-topo: zone", c="plan=tp=8")
    assert job_from_text(base.format(**plain))["JobState"] == "PENDING"
    assert job_from_text(base.format(**{**plain, "name": "a b foo=1"}))["JobName"] == "a b foo=1"
    for field, forged in [
        ("name", "a b Foo=1"),  # a key no release prints: its text would run into the value before it
        ("name", "x JobState=RUNNING"),
        ("name", "x Prefer=[zone_b]"),  # a key the line does not have: out of order before UserId
        ("wd", "/tmp Features=[zone_b]"),
        ("ac", "x Priority=9"),
        ("c", "x StdOut=/etc/passwd"),
    ]:
        with pytest.raises(ValueError):
            job_from_text(base.format(**{**plain, field: forged}))


def test_a_damaged_trail_skips_its_job_with_one_line_and_the_pass_goes_on() -> None:
    auto = "slurm-topo-auto: zone limit=3600s region=0s any=1800s"
    common = {"JobState": "PENDING", "Reason": "Resources", "Priority": "5", "Features": "[zone_a]"}
    submitted = "2026-12-01T10:00:00"
    now = time.mktime(time.strptime(submitted, "%Y-%m-%dT%H:%M:%S")) + 60
    jobs = [
        {**common, "JobId": "1", "SubmitTime": submitted, "AdminComment": auto},
        {
            **common,
            "JobId": "2",
            "SubmitTime": submitted,
            "AdminComment": f"{auto}; slurm-topo-relax: zone->bogus waited=1s budget=0s at=x",
        },
        {**common, "JobId": "3", "SubmitTime": submitted, "AdminComment": auto},
    ]
    p = plan_pass(jobs, now)
    assert [(d.job, d.action) for d in p.decisions] == [("1", "relax"), ("3", "relax")]
    assert len(p.errors) == 1 and p.errors[0].startswith("job 2: skipped") and "bogus" in p.errors[0]
    assert explain_record(jobs[1], None).auto[0].startswith("zone:auto, now unknown (")


_Runner = ScriptedRunner  # answers by program name here


def test_backend_falls_back_to_text_only_where_squeue_has_no_json() -> None:
    line = (REAL / "slurm-22.05" / "scontrol-show-job-o-held.txt").read_text()
    no_json = CommandError(["squeue"], 1, "squeue: unrecognized option '--json'")
    r = _Runner({"squeue": no_json, "scontrol": line})
    access = SlurmAccess(r)
    assert access.backend == "json"
    assert [j["JobState"] for j in access.jobs().jobs] == ["PENDING"] and access.backend == "text"
    access.jobs()
    # remembered: squeue --json once; then squeue's job ids (failing here) and scontrol's listing
    assert [c[0] for c in r.calls] == ["squeue", "squeue", "scontrol", "squeue", "scontrol"]
    down = CommandError(["squeue"], 1, "slurm_load_jobs error: Unable to contact slurm controller")
    with pytest.raises(CommandError):
        SlurmAccess(_Runner({"squeue": down, "scontrol": line})).jobs()  # never read text instead
    with pytest.raises(CommandError):
        SlurmAccess(_Runner({"squeue": no_json}), backend="json").jobs()
    gone = CommandError(["squeue"], 1, "slurm_load_jobs error: Invalid job id specified")
    assert SlurmAccess(_Runner({"squeue": gone})).job("99") is None
    with pytest.raises(ParseError):
        SlurmAccess(_Runner({"squeue": "not json"}), backend="json").jobs()
    with pytest.raises(ValueError):
        SlurmAccess(_Runner({}), backend="yaml")


def test_json_of_one_job_answers_to_its_array_and_het_names() -> None:
    doc = {
        "jobs": [
            {
                "job_id": 11,
                "array_job_id": {"set": True, "number": 10},
                "array_task_id": {"set": True, "number": 1},
            },
            {"job_id": 21, "het_job_id": 20, "het_job_offset": 1, "job_state": ["PENDING"]},
        ]
    }
    text = json.dumps(doc)
    assert [j["JobId"] for j in jobs_from_json(text, "10_1").jobs] == ["11"]
    assert [j["JobId"] for j in jobs_from_json(text, "20+1").jobs] == ["21"]
    assert jobs_from_json(text, "11").jobs[0]["JobState"] == ""
    assert jobs_from_json(json.dumps({"jobs": [{"name": "no id"}]})).refused[0][1].startswith("unreadable")


@pytest.mark.parametrize("release", RELEASES)
def test_the_allocation_from_json_equals_scontrols_detail_lines(release: str) -> None:
    """gpulayer-srun's view of its allocation (nodes in Slurm's order, GPU indices per node) read from
    ``squeue --json`` equals the one from ``scontrol show job -d`` of the same running job."""
    from slurm_topo.access import allocation_from_json
    from slurm_topo.access.text import parse_job_detail

    folder, facts = _capture(release)
    jobs: dict[str, str] = facts["jobs"]  # type: ignore[assignment]
    running = jobs["running"]
    got = allocation_from_json((folder / "squeue-json.txt").read_text(), running)
    want = parse_job_detail((folder / "scontrol-show-job-d-running.txt").read_text())
    assert got == want and got.nodes == tuple(facts["hostnames"]["running"])  # type: ignore[index]
    assert all(len(idx) == 2 for idx in got.gpus.values()), got
    with pytest.raises(ParseError, match="no nodes"):
        allocation_from_json((folder / "squeue-json.txt").read_text(), jobs["pending"])


def test_a_job_name_cannot_pass_for_the_node_list_of_an_allocation() -> None:
    doc = {"jobs": [{"job_id": 7, "name": "x NodeList=evil[1-9]", "nodes": "n[1-2]", "gres_detail": []}]}
    from slurm_topo.access import allocation_from_json

    a = allocation_from_json(json.dumps(doc), "7")
    assert a.nodes == ("n1", "n2") and a.gpus == {"n1": (), "n2": ()}


def test_a_json_client_that_ignores_its_filter_reads_one_job_as_text_afterwards() -> None:
    """22.05's ``squeue --json --jobs=J`` answers with every job: read once, the next one-job reads take
    ``scontrol show job -o J`` (one job's cost) with the strict reader."""
    folder = REAL / "slurm-22.05"
    listing = (folder / "squeue-json.txt").read_text()
    line = (folder / "scontrol-show-job-o-held.txt").read_text()
    r = _Runner({"squeue": listing, "scontrol": line})
    access = SlurmAccess(r)
    first = access.job("3")
    assert first is not None and first["JobId"] == "3" and access.one_job_text
    again = access.job("3")
    assert again is not None and again["JobState"] == first["JobState"] == "PENDING"
    assert [c[0] for c in r.calls] == ["squeue", "scontrol"]
    assert [j["JobId"] for j in access.jobs().jobs] == ["1", "2", "3", "4"]  # a whole listing stays JSON
