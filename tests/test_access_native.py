"""The pyslurm backend's pure part (slurm_topo.access.native) on real captures: pyslurm 25.11.2's job
attributes and ``squeue --json`` of the same three jobs on Slurm 26.05.5 (tests/fixtures/real/pyslurm-26.05)
give the same records. pyslurm itself is not needed here; its live use is tested on real 26.05
(tests/integration/test_hostile_job_fields_on_real_slurm.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_topo.access import SlurmAccess, jobs_from_json, native
from slurm_topo.errors import CommandError

FIX = Path(__file__).parent / "fixtures" / "real" / "pyslurm-26.05"


def attrs() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads((FIX / "pyslurm-jobs.json").read_text())
    return rows


def test_every_captured_job_reads_as_squeue_json_reads_it() -> None:
    py = {r["JobId"]: r for r in native.listing_from_attrs(attrs()).jobs}
    js = {r["JobId"]: r for r in jobs_from_json((FIX / "squeue-json.txt").read_text()).jobs}
    assert set(py) == set(js) == {"1", "2", "3"}
    for jid in py:  # 26.05's JSON lists "shared": [] for every job: pyslurm alone knows job 2 is exclusive
        assert {**py[jid], "OverSubscribe": ""} == {**js[jid], "OverSubscribe": ""}, jid
    assert [py[j]["OverSubscribe"] for j in ("1", "2", "3")] == ["OK", "NO", "OK"]
    hostile = py["1"]
    assert hostile["JobName"].startswith("x JobState=PENDING Reason=Priority")
    assert (hostile["JobState"], hostile["Reason"], hostile["Priority"]) == ("PENDING", "JobHeldUser", "0")
    assert hostile["Features"] == "(null)" and hostile["Comment"] == "c NodeList=n01"
    assert py["2"]["Features"] == "[zone_us-east-1a|zone_us-east-1b]" and py["2"]["TimeLimit"] == "00:30:00"
    assert py["3"]["TresPerNode"] == "gres/gpu:2" and py["3"]["JobState"] == "RUNNING"


def test_a_job_filter_and_a_bad_row() -> None:
    rows = [*attrs(), {"id": "not a number"}]
    listing = native.listing_from_attrs(rows, "2")
    assert [j["JobId"] for j in listing.jobs] == ["2"]
    assert listing.refused == [("not a number", "unreadable job: pyslurm: a job without an id")]
    assert listing.listed == 4 and listing.backend == "pyslurm"


@pytest.mark.parametrize(
    ("api", "running", "same"),
    [("26.5.5", "26.05", True), ("26.5.5", "26.5", True), ("25.11.2", "26.05", False), ("x", "26.05", False)],
)
def test_same_release(api: str, running: str, same: bool) -> None:
    assert native.same_release(api, running) is same


def test_records_of_odd_values() -> None:
    base = {"id": 7, "state": "PENDING", "num_nodes": 2, "max_nodes": None, "time_limit": 1500}
    rec = native.job_record(
        {**base, "gres_per_node": {"gres/gpu:h100": 8, "bad": "x"}, "constraints": ["a", "b"]}
    )
    assert (rec["NumNodes"], rec["TimeLimit"], rec["TresPerNode"], rec["Features"]) == (
        "2",
        "1-01:00:00",
        "gres/gpu:h100:8",
        "a,b",
    )
    assert native.job_record({**base, "time_limit": None})["TimeLimit"] == "UNLIMITED"
    with pytest.raises(Exception, match="without an id"):
        native.job_record({"id": True})


class VersionRunner:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], timeout: float = 30.0) -> str:
        self.calls.append(list(argv))
        return "slurm 26.05.5\n"


def test_a_fixed_pyslurm_that_is_not_installed_says_why_and_auto_keeps_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "installed", lambda: False)
    native.reset_probe()
    runner = VersionRunner()
    assert SlurmAccess(runner).backend == "json"
    assert runner.calls == []  # nothing asked where pyslurm is not installed
    with pytest.raises(CommandError, match="pyslurm is not installed"):
        _ = SlurmAccess(runner, backend="pyslurm").backend
    native.reset_probe()


def test_pyslurm_of_another_release_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "installed", lambda: True)
    monkeypatch.setattr(native, "probe", lambda timeout=30.0: native.Probe(True, version="25.11.2"))
    a = SlurmAccess(VersionRunner())
    assert a.backend == "json"
    assert a.why_not_pyslurm == "pyslurm's library is Slurm 25.11.2, the running Slurm 26.5"


def test_a_probe_whose_import_exits_is_a_reason_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pyslurm's import exits where Slurm has no configuration: the probe's child does, we don't."""
    fake = tmp_path / "pyslurm"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import sys\nsys.stderr.write('fatal: Could not establish a configuration source\\n')\nsys.exit(1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    native.reset_probe()
    try:
        p = native.probe()
    finally:
        native.reset_probe()
    assert not p.ok and p.why == "importing pyslurm failed: fatal: Could not establish a configuration source"


class FakeJobs:
    """What ``pyslurm.Jobs.load()`` gives: a mapping of job objects with the captured attributes."""

    def __init__(self, rows: list[dict[str, object]]) -> None:
        from types import SimpleNamespace

        self.rows = {r["id"]: SimpleNamespace(**r) for r in rows}

    def values(self):  # type: ignore[no-untyped-def]
        return self.rows.values()

    def __len__(self) -> int:
        return len(self.rows)


def test_a_detail_hint_reads_only_what_the_other_jobs_queue() -> None:
    from types import SimpleNamespace

    rows = attrs()
    rows[1]["admin_comment"] = "slurm-topo-auto: zone limit=60s region=0s any=0s"
    pyslurm = SimpleNamespace(Jobs=SimpleNamespace(load=lambda: FakeJobs(rows)))
    listing = native.load_jobs(pyslurm, detail=lambda c: "slurm-topo-auto:" in c)
    by_id = {j["JobId"]: j for j in listing.jobs}
    full = native.job_record(rows[0])
    assert by_id["1"] == {
        "JobId": "1",
        "JobState": "PENDING",
        "AdminComment": "",
        "NumNodes": full["NumNodes"].split("-")[0],
        "Reason": full["Reason"],
    }
    assert by_id["2"] == native.job_record(rows[1]) and by_id["2"]["NumNodes"] == "2-2"
    assert listing.listed == 3
