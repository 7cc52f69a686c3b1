"""slurm-topo relax against real Slurm: a pending LEVEL:auto job whose zone has no room is widened to its
region after its budget and starts there; a job that fits, a user-held job and a job without a budget are
never touched; two relaxers at once apply one change; the AdminComment keeps the whole trail.

The jobs here carry the bracket the filter writes (``--constraint=[zone_…|…]``) and a budget record an
administrator sets right after submit, to pick budgets of a few seconds; the filter writing the record itself
for ``--locality=zone:auto`` is tests/integration/test_relax_auto_from_the_filter.py."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

import pytest
import slurmctl

from slurm_topo.access.text import parse_record_line
from slurm_topo.relaxer.relax import parse_budget, relaxations
from slurm_topo.reports.explain import explain_job

pytestmark = pytest.mark.slurm

HW = {
    "CPUs": 2,
    "Boards": 1,
    "SocketsPerBoard": 1,
    "CoresPerSocket": 2,
    "ThreadsPerCore": 1,
    "RealMemory": 1000,
}


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Region r1: zone z1 = a[1-2], zone z2 = a[3-4]; region r2: zone z3 = b[1-2]."""
    with scratch_cluster(
        "relax",
        {
            "nodes": [
                {"name": "a[1-2]", "region": "r1", "zone": "z1", "network_group": "g1", "slurm": HW},
                {"name": "a[3-4]", "region": "r1", "zone": "z2", "network_group": "g2", "slurm": HW},
                {"name": "b[1-2]", "region": "r2", "zone": "z3", "network_group": "g3", "slurm": HW},
            ]
        },
        nodes_max=6,
    ) as c:
        yield c


@pytest.fixture
def slurm(cluster: slurmctl.Cluster) -> Iterator[slurmctl.Slurm]:
    s = cluster.slurm
    yield s
    s.quiesce()


AHEAD = 5.0
"""Seconds ahead of the clock the relaxer judges waits by default (``--now``): every job has waited more than
a 0 s budget, none an hour, without a test sleeping for it."""


def relax(
    c: slurmctl.Cluster, *args: str, timeout: float = 30, now: float | None = None
) -> subprocess.CompletedProcess[str]:
    lock = c.base.parent / "relax.lock"
    at = time.time() + AHEAD if now is None else now
    return subprocess.run(
        [*slurmctl.slurm_topo_cli(), "relax", "--once", "--lock", str(lock), "--now", f"{at:.3f}", *args],
        env=dict(c.env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class ClusterRunner:
    """slurm_topo.plumbing.runner.Runner bound to the test cluster (its SLURM_CONF)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=True
        ).stdout


def job_of(s: slurmctl.Slurm, job: str) -> dict[str, str]:
    """The job as Slurm shows it, values with spaces kept (AdminComment)."""
    return parse_record_line(s.out("scontrol", "show", "job", "-o", job))


def set_budget(s: slurmctl.Slurm, job: str, record: str) -> None:
    s.out("scontrol", "update", f"JobId={job}", f"AdminComment={record}")


def block(s: slurmctl.Slurm, *nodes: str) -> list[str]:
    jobs = [s.submit("--exclusive", "-N1", f"--nodelist={n}", "--wrap", "sleep 300") for n in nodes]
    for j in jobs:
        s.wait_state(j, "RUNNING")
    return jobs


def test_pending_auto_job_is_widened_after_its_budget_and_starts(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """Half the nodes busy: the load-aware timer multiplies the 6 s budget by 1/(1 − 0.5)² = 4; the job is
    widened after 24 s. The relaxer judges the wait at a given time (``--now``: the job's own SubmitTime plus
    7 s, 23 s, then 25 s), so how fast this host runs changes nothing."""
    block(slurm, "a2", "a4", "b1")  # each zone of r1 has one free node; the job needs two in one zone
    job = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z1|zone_z2]", "--wrap", "sleep 300")
    record = "slurm-topo-auto: zone limit=600s region=6s any=3600s"
    set_budget(slurm, job, record)
    submitted = datetime.fromisoformat(slurm.out("squeue", "-h", "-j", job, "-o", "%V").strip()).timestamp()
    assert slurm.state(job) == "PENDING"
    plain = relax(cluster, "--dry-run", "--plain-budget", now=submitted + 7)
    assert "would relax zone -> region" in plain.stdout, plain.stdout  # past 6 s
    early = relax(cluster, "--dry-run", "--plain-budget", now=submitted + 5)
    assert "would relax" not in early.stdout, early.stdout  # not yet past 6 s
    first = relax(cluster, "--json", now=submitted + 7)
    assert first.returncode == 0, first.stderr
    assert '"busy": 0.5' in first.stdout and '"queued_nodes": 2' in first.stdout, first.stdout
    assert '"priced_load": 0.5' in first.stdout, first.stdout
    assert job_of(slurm, job)["Features"] == "[zone_z1|zone_z2]"  # not past 6 s × 4
    assert relaxations(job_of(slurm, job)["AdminComment"]) == []
    assert "would relax" not in relax(cluster, "--dry-run", now=submitted + 23).stdout

    p = relax(cluster, now=submitted + 25)
    assert p.returncode == 0, p.stderr
    assert f"job {job}: relaxed zone -> region" in p.stdout, p.stdout
    slurm.wait_state(job, "RUNNING")
    info = job_of(slurm, job)
    assert info["Features"] == "[region_r1]"
    assert set(slurm.allocation_of(job).nodes) == {"a1", "a3"}  # the free nodes of r1, across its zones
    comment = info["AdminComment"]
    assert comment.startswith(record + "; slurm-topo-relax: zone->region waited=")
    assert " budget=6s load=x4.00 at=" in comment
    assert relaxations(comment) == [("zone", "region")]
    assert parse_budget(comment) == parse_budget(record)
    shown = explain_job(job, ClusterRunner(cluster.env))
    assert "  auto:     zone:auto, now region; budget region 6 s, any 3600 s (limit 600 s)" in shown, shown
    assert "            relaxed zone -> region after " in shown and "(budget 6 s × load 4.00)" in shown, shown

    # running now: later passes leave it alone
    again = relax(cluster)
    assert again.returncode == 0 and job_of(slurm, job)["AdminComment"] == comment


def test_a_job_that_fits_and_a_job_without_budget_are_never_touched(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    fits = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z1|zone_z2]", "--wrap", "sleep 300")
    set_budget(slurm, fits, "slurm-topo-auto: zone limit=600s region=0s any=0s")
    slurm.wait_state(fits, "RUNNING")
    block(slurm, "b1")
    waits = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z3]", "--wrap", "sleep 300")
    set_budget(slurm, waits, "slurm-topo-admin-note")  # an AdminComment, but no budget: not auto
    before = {j: job_of(slurm, j) for j in (fits, waits)}
    p = relax(cluster, "--json")
    assert p.returncode == 0, p.stderr
    for j in (fits, waits):
        now = job_of(slurm, j)
        assert (now["Features"], now["AdminComment"]) == (before[j]["Features"], before[j]["AdminComment"])
    assert slurm.state(waits) == "PENDING"


def test_a_user_held_job_is_never_touched(cluster: slurmctl.Cluster, slurm: slurmctl.Slurm) -> None:
    block(slurm, "a2", "a4")
    job = slurm.submit("--hold", "--exclusive", "-N2", "--constraint=[zone_z1|zone_z2]", "--wrap", "true")
    record = "slurm-topo-auto: zone limit=600s region=0s any=0s"
    set_budget(slurm, job, record)
    assert job_of(slurm, job)["Reason"] == "JobHeldUser"
    p = relax(cluster)
    assert p.returncode == 0, p.stderr
    info = job_of(slurm, job)
    assert (info["Features"], info["AdminComment"], info["JobState"]) == (
        "[zone_z1|zone_z2]",
        record,
        "PENDING",
    )


def test_two_relaxers_at_once_apply_one_change(cluster: slurmctl.Cluster, slurm: slurmctl.Slurm) -> None:
    block(slurm, "a1", "a2", "a3", "a4", "b1")  # nothing can start: the widened job stays pending
    job = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z1]", "--wrap", "true")
    set_budget(slurm, job, "slurm-topo-auto: zone limit=600s region=0s any=3600s")
    lock = str(cluster.base.parent / "relax.lock")
    argv = [
        *slurmctl.slurm_topo_cli(),
        "relax",
        "--once",
        "--lock",
        lock,
        "--now",
        f"{time.time() + AHEAD:.0f}",
    ]
    procs = [
        subprocess.Popen(
            argv, env=dict(cluster.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=30) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    # a third pass, after both: the job is at region, whose next level's budget has not passed
    assert relax(cluster).returncode == 0
    info = job_of(slurm, job)
    assert relaxations(info["AdminComment"]) == [("zone", "region")], info["AdminComment"]
    assert info["Features"] == "[region_r1]"
    assert info["AdminComment"].count("slurm-topo-relax:") == 1


def test_dry_run_changes_nothing_and_a_restarted_controller_keeps_the_trail(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    block(slurm, "a1", "a2", "a3", "a4", "b1")
    job = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z1]", "--wrap", "true")
    set_budget(slurm, job, "slurm-topo-auto: zone limit=600s region=0s any=1s")
    dry = relax(cluster, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert '"action": "relax"' in dry.stdout and '"features": "[region_r1]"' in dry.stdout, dry.stdout
    assert job_of(slurm, job)["Features"] == "[zone_z1]"
    assert relax(cluster).returncode == 0
    slurmctl.restart_ctld(cluster.base)
    # state read back from the job: region -> any, one more level (the plain budget: with 5 of 6 nodes busy
    # the load factor of 36 would make this step wait for the restart's own speed)
    assert relax(cluster, "--plain-budget").returncode == 0
    info = job_of(slurm, job)
    assert relaxations(info["AdminComment"]) == [("zone", "region"), ("region", "any")], info
    assert info["Features"] in ("", "(null)")


def test_max_changes_caps_a_pass_longest_waiting_first(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    block(slurm, "a1", "a2", "a3", "a4", "b1")
    older = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z1]", "--wrap", "true")
    time.sleep(1.1)
    newer = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z2]", "--wrap", "true")
    for j in (older, newer):
        set_budget(slurm, j, "slurm-topo-auto: zone limit=600s region=0s any=3600s")
    p = relax(cluster, "--max-changes", "1")
    assert p.returncode == 0, p.stderr
    assert job_of(slurm, older)["Features"] == "[region_r1]"
    assert job_of(slurm, newer)["Features"] == "[zone_z2]"
    assert relax(cluster, "--max-changes", "1").returncode == 0  # the next pass takes the other
    assert job_of(slurm, newer)["Features"] == "[region_r1]"
    assert relaxations(job_of(slurm, older)["AdminComment"]) == [("zone", "region")]


def test_with_the_submit_filter_the_widened_job_keeps_the_whole_trail(
    fslurm: slurmctl.Slurm, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """On the cluster running the locality filter, a zone:auto job (comment fallback): its fleet has no site
    plan, so the filter writes a note instead of a budget and an administrator sets one; the filter's modify
    hook lets the relaxer's Features= update of an auto job through, and the trail stays whole."""
    blocker = fslurm.submit("--exclusive", "-N1", "--nodelist=n01", "--wrap", "sleep 120")
    fslurm.wait_state(blocker, "RUNNING")
    job = fslurm.submit(
        "--exclusive", "-N4", "--time=1", "--comment=locality=zone:auto", "--wrap", "sleep 60"
    )
    time.sleep(1)
    before = job_of(fslurm, job)
    assert before["Features"] == "[zone_us-east-1a]" and before["JobState"] == "PENDING", before
    decision = before["AdminComment"]
    assert decision.startswith("slurm-topo: zone:auto "), decision
    assert (
        decision.endswith("; auto: no site plan, no budget (waits as :wait)")
        and parse_budget(decision) is None
    )
    fslurm.out(
        "scontrol",
        "update",
        f"JobId={job}",
        f"AdminComment={decision}; slurm-topo-auto: zone limit=60s region=0s any=3600s",
    )
    p = subprocess.run(
        [
            *slurmctl.slurm_topo_cli(),
            "relax",
            "--once",
            "--lock",
            str(tmp_path / "relax.lock"),
            "--now",
            f"{time.time() + AHEAD:.0f}",
        ],
        env=dict(fslurm.env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert f"job {job}: relaxed zone -> region" in p.stdout, p.stdout
    fslurm.wait_state(job, "RUNNING")
    info = job_of(fslurm, job)
    assert info["Features"] == "[region_us-east]"
    comment = info["AdminComment"]
    assert comment.startswith(f"{decision}; slurm-topo-auto: zone limit=60s region=0s any=3600s; "), comment
    assert relaxations(comment) == [("zone", "region")]
    fslurm.cancel(job, blocker)


def test_start_estimate_widens_a_job_whose_zone_frees_late(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """a1 and a3 run 1-hour jobs: each zone of r1 has one free node, r1 has two. Slurm's own
    ``sbatch --test-only`` estimates about an hour to a zone and no wait for the region. Job ``cheap``
    (the region costs 1200 s) is widened by the estimate long before its budget and starts on a2, a4; job
    ``dear`` (the region costs 7200 s, more than the hour it saves) keeps its zone."""
    blockers = [
        slurm.submit("--exclusive", "-N1", f"--nodelist={n}", "--time=60", "--wrap", "sleep 300")
        for n in ("a1", "a3")
    ]
    for b in blockers:
        slurm.wait_state(b, "RUNNING")
    dear = slurm.submit(
        "--exclusive", "-N2", "--time=10", "--constraint=[zone_z1|zone_z2]", "--wrap", "sleep 300"
    )
    cheap = slurm.submit(
        "--exclusive", "-N2", "--time=10", "--constraint=[zone_z1|zone_z2]", "--wrap", "sleep 300"
    )
    set_budget(slurm, dear, "slurm-topo-auto: zone limit=600s region=7200s any=9000s")
    set_budget(slurm, cheap, "slurm-topo-auto: zone limit=600s region=1200s any=9000s")
    plain = relax(cluster, "--json")  # without --estimates: budgets far off, nothing changes
    assert plain.returncode == 0 and '"action": "relax"' not in plain.stdout, plain.stdout
    p = relax(cluster, "--json", "--estimates", "10")
    assert p.returncode == 0, p.stderr
    by = {d["job"]: d for d in json.loads(p.stdout)["decisions"]}
    assert by[cheap]["action"] == "relax" and by[cheap]["rule"] == "estimate" and by[cheap]["applied"], by
    est = by[cheap]
    assert est["estimate_start_s"] >= 3000 and est["estimate_start_s"] - est["estimate_looser_s"] > 1200, by
    assert by[dear]["action"] == "skip" and by[dear]["estimate_cost_s"] == 7200, by
    assert by[dear]["estimate_start_s"] >= 3000, by
    slurm.wait_state(cheap, "RUNNING")
    assert set(slurm.allocation_of(cheap).nodes) == {"a2", "a4"}
    info = job_of(slurm, cheap)
    assert info["Features"] == "[region_r1]" and relaxations(info["AdminComment"]) == [("zone", "region")]
    assert " budget=1200s start=+" in info["AdminComment"] and " cost=1200s at=" in info["AdminComment"]
    shown = explain_job(cheap, ClusterRunner(cluster.env))
    assert "relaxed zone -> region after " in shown and "(start estimate +" in shown, shown
    kept = job_of(slurm, dear)
    assert kept["Features"] == "[zone_z1|zone_z2]" and relaxations(kept["AdminComment"]) == []
    assert kept["JobState"] == "PENDING"


def test_a_failing_start_estimate_never_stops_the_pass(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """A job pending in a partition an administrator has since made INACTIVE: Slurm refuses its
    ``--test-only`` (the partition takes no new jobs), the job is reported and left; the job behind it
    still gets its budget relaxation in the same pass."""
    block(slurm, "a1", "a2", "a3", "a4", "b1")
    slurm.out("scontrol", "create", "PartitionName=side", "Nodes=a[1-4],b[1-2]", "State=UP")
    try:
        never = slurm.submit("-p", "side", "--exclusive", "-N2", "--constraint=[zone_z1]", "--wrap", "true")
        set_budget(slurm, never, "slurm-topo-auto: zone limit=600s region=5000s any=9000s")
        slurm.out("scontrol", "update", "PartitionName=side", "State=INACTIVE")
        due = slurm.submit("--exclusive", "-N2", "--constraint=[zone_z2]", "--wrap", "true")
        set_budget(slurm, due, "slurm-topo-auto: zone limit=600s region=0s any=9000s")
        p = relax(cluster, "--json", "--estimates", "10", "--plain-budget")
        assert p.returncode == 0, p.stderr
        by = {d["job"]: d for d in json.loads(p.stdout)["decisions"]}
        assert by[never]["action"] == "skip" and "start estimate failed" in by[never]["why"], by
        assert by[due]["applied"] and by[due]["rule"] == "budget", by
        assert job_of(slurm, due)["Features"] == "[region_r1]"
        kept = job_of(slurm, never)
        assert kept["Features"] == "[zone_z1]" and kept["JobState"] == "PENDING"
        slurm.cancel(never)
    finally:
        slurm.run(["scontrol", "delete", "PartitionName=side"], check=False)
