"""The pyslurm backend's pure part (slurm_topo.access.native) on real captures: pyslurm 25.11.2's job
attributes and ``squeue --json`` of the same three jobs on Slurm 26.05.5 (tests/fixtures/real/pyslurm-26.05)
give the same records. pyslurm itself is not needed here; its live use is tested on real 26.05
(tests/integration/test_hostile_job_fields_on_real_slurm.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_topo.access import SlurmAccess, jobs_from_json, native
from slurm_topo.core.errors import CommandError

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


# ---- a relax pass through the pyslurm backend: one listing, then each due job read by its id


class FakePyslurm:
    """``pyslurm`` as slurm_topo.access.native calls it, over job attribute rows (the captured ones' shape)
    and the nodes of a captured ``scontrol show node -o``; counts every load, applies every modify to its
    rows."""

    def __init__(self, rows: list[dict[str, object]], nodes_text: str) -> None:
        from types import SimpleNamespace

        from slurm_topo.access.text import parse_scontrol_nodes

        self.rows = {int(r["id"]): dict(r) for r in rows}  # type: ignore[call-overload]
        self.loads: list[str] = []
        self.modified: list[int] = []
        fake = self

        def split(text: str) -> list[str]:
            return [] if text == "(null)" else text.split(",")

        nodes = {
            r["NodeName"]: SimpleNamespace(
                state=r["State"],
                active_features=split(r["ActiveFeatures"]),
                available_features=split(r["AvailableFeatures"]),
                reason=r.get("Reason"),
                address=r["NodeAddr"],
                hostname=r["NodeHostName"],
            )
            for r in parse_scontrol_nodes(nodes_text)
        }

        def load_all() -> FakeJobs:
            fake.loads.append("Jobs.load")
            return FakeJobs(list(fake.rows.values()))

        def load_nodes() -> dict[str, object]:
            fake.loads.append("Nodes.load")
            return nodes

        class Job:
            def __init__(self, job_id: int) -> None:
                self.id = job_id

            @staticmethod
            def load(job_id: int) -> object:
                fake.loads.append(f"Job.load({job_id})")
                if job_id not in fake.rows:
                    raise RuntimeError("Invalid job id specified")  # what pyslurm's RPCError says
                return SimpleNamespace(**fake.rows[job_id])

            def modify(self, changes: SimpleNamespace) -> None:
                fake.modified.append(self.id)
                fake.rows[self.id].update(vars(changes))

        self.Jobs = SimpleNamespace(load=load_all)
        self.Nodes = SimpleNamespace(load=load_nodes)
        self.Job = Job
        self.JobSubmitDescription = SimpleNamespace


RELAX_BUDGET = (
    "slurm-topo: zone:auto [us-east-1a(3n),us-east-1b(2n)]; "
    "slurm-topo-auto: zone limit=3600s region=300s any=1800s"
)
NOW = 1_796_200_000


def pending_queue(n: int, due: int) -> list[dict[str, object]]:
    """``n`` pending jobs like the captured job 2 (not held): ``due`` auto jobs waiting past their region
    budget (300 s), as many auto jobs just submitted, the rest without a budget."""
    base = {**attrs()[1], "state_reason": "Resources", "priority": 1000, "max_nodes": 2}
    rows = []
    for i in range(n):
        row = {**base, "id": 100 + i, "submit_time": NOW - 10, "admin_comment": None}
        if i < 2 * due:
            row["admin_comment"] = RELAX_BUDGET
            row["constraints"] = ["ib&[zone_us-east-1a|zone_us-east-1b]"]
            if i < due:
                row["submit_time"] = NOW - 400
        rows.append(row)
    return rows


def pyslurm_access(monkeypatch: pytest.MonkeyPatch, fake: FakePyslurm) -> SlurmAccess:
    monkeypatch.setattr(native, "installed", lambda: True)
    monkeypatch.setattr(native, "probe", lambda timeout=30.0: native.Probe(True, version="26.5.5"))
    monkeypatch.setattr(native, "module", lambda: fake)
    access = SlurmAccess(VersionRunner(), backend="pyslurm")
    assert access.backend == "pyslurm"
    return access


NODES_26 = Path(__file__).parent / "fixtures" / "real" / "slurm-26.05" / "scontrol-show-node-o.txt"


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_relax_pass_lists_the_queue_once_and_reads_each_due_job_by_its_id(
    monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    """Issue 42: 40 pending jobs, 3 due: one listing of the queue, then each due job read again by its id
    (pyslurm's ``Job.load``) before it is changed and once after (the filter's trail check) — never the whole
    queue per due job, which cost 83 s of CPU and 20 s of slurmctld's time a pass at 10 000 jobs, 200 due."""
    from slurm_topo.relaxer.relax import run_pass

    fake = FakePyslurm(pending_queue(40, due=3), NODES_26.read_text())
    p = run_pass(
        VersionRunner(), access=pyslurm_access(monkeypatch, fake), now=NOW, load_aware=False, dry_run=dry_run
    )
    due = [100, 101, 102]
    relaxed = [d for d in p.decisions if d.action == "relax"]
    assert [int(d.job) for d in relaxed] == due and p.backend == "pyslurm"
    assert {d.features for d in relaxed} == {"ib&[region_us-east]"}
    reads = [f"Job.load({j})" for j in due for _ in range(1 if dry_run else 2)]
    assert fake.loads.count("Jobs.load") == 1
    assert sorted(x for x in fake.loads if x.startswith("Job.load")) == sorted(reads)
    assert fake.modified == ([] if dry_run else due)
    if not dry_run:
        assert all(fake.rows[j]["constraints"] == "ib&[region_us-east]" for j in due)


def test_one_job_is_read_by_its_id_and_an_unknown_id_is_no_job(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePyslurm(pending_queue(5, due=1), NODES_26.read_text())
    access = pyslurm_access(monkeypatch, fake)
    one = access.job("102")
    assert one is not None and one["JobId"] == "102" and one["JobState"] == "PENDING"
    assert access.job("999") is None
    assert fake.loads == ["Job.load(102)", "Job.load(999)"]


def test_an_id_pyslurm_cannot_load_by_itself_is_found_in_the_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An array task's name (``100_3``) is no id ``Job.load`` takes; a record Slurm gives first that is not
    the asked job's own (an array's id whose own record is gone) is not taken for it: the listing decides."""
    rows = pending_queue(3, due=0)
    rows[1].update(array_id=100, array_task_id=3)  # job 101 is task 3 of array 100
    fake = FakePyslurm(rows, NODES_26.read_text())
    access = pyslurm_access(monkeypatch, fake)
    task = access.job("100_3")
    assert task is not None and task["JobId"] == "101"
    assert fake.loads == ["Jobs.load"]
    real_load = fake.Job.load
    monkeypatch.setattr(fake.Job, "load", staticmethod(lambda job_id: real_load(101)))
    array = access.job("100")
    assert array is not None and array["JobId"] == "100"
    assert fake.loads == ["Jobs.load", "Job.load(101)", "Jobs.load"]


def test_the_first_component_of_a_heterogeneous_job_answers_to_its_offset_0() -> None:
    """pyslurm reads a heterogeneous job's offset 0 as unset (its u32_parse takes 0 for no value): the
    component whose id is the heterogeneous job's own still answers to J+0, and only that one."""
    base = dict(attrs()[2])
    leader = {**base, "id": 10, "heterogeneous_id": 10, "heterogeneous_offset": None}
    second = {**base, "id": 11, "heterogeneous_id": 10, "heterogeneous_offset": 1}
    stray = {**base, "id": 12, "heterogeneous_id": 10, "heterogeneous_offset": None}
    alone = {**base, "id": 13, "heterogeneous_id": None, "heterogeneous_offset": None}
    rows = [leader, second, stray, alone]
    assert native.job_ids(leader) == {"10", "10+0"}
    assert native.job_ids(second) == {"11", "10+1"}
    assert native.job_ids(stray) == {"12"}  # not the heterogeneous job's own id: no offset is guessed
    assert native.job_ids(alone) == {"13"}
    for name, want in (("10+0", ["10"]), ("10+1", ["11"]), ("10", ["10"]), ("13+0", [])):
        assert [j["JobId"] for j in native.listing_from_attrs(rows, name).jobs] == want, name
