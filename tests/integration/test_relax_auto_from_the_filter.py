"""``--locality=zone:auto`` end to end on real Slurm: the submit filter (job_submit.lua, with the SPANK
plugin) requires the zone as ``:wait`` does and writes the job's budget record into AdminComment from the
site plan (``policy: {plan: …}``); ``slurm-topo relax --once`` widens it to its region once the budget has
passed, and the job starts there. The filter's modify hook lets the relaxer's update (uid 0: Features= and
AdminComment=) through untouched. A partition whose default is ``zone:auto`` gives the same record; a job
without a time limit gets a note instead of a budget."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import datetime

import pytest
import slurmctl

from slurm_topo.access.text import parse_record_line
from slurm_topo.core.model import Node
from slurm_topo.relaxer.relax import auto_budget, parse_budget, relaxations

pytestmark = pytest.mark.slurm

PLAN = "tp=2,pp=2,bytes=1G,tp_bytes=100G"
"""Small budgets (a 5-minute limit gives about 4 s for the region, 19 s for any nodes): a short test."""
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
    """With the filter: region r1: zone z1 = a[1-2], zone z2 = a[3-4]; region r2: zone z3 = b[1-2]; 4 GPUs
    each; partition main defaults to zone:auto."""
    with scratch_cluster(
        "relaxauto",
        {
            "nodes": [
                {
                    "name": "a[1-2]",
                    "region": "r1",
                    "zone": "z1",
                    "network_group": "g1",
                    "gpus": 4,
                    "slurm": HW,
                },
                {
                    "name": "a[3-4]",
                    "region": "r1",
                    "zone": "z2",
                    "network_group": "g2",
                    "gpus": 4,
                    "slurm": HW,
                },
                {
                    "name": "b[1-2]",
                    "region": "r2",
                    "zone": "z3",
                    "network_group": "g3",
                    "gpus": 4,
                    "slurm": HW,
                },
            ],
            "policy": {"default": "prefer", "partitions": {"main": "zone:auto"}, "plan": PLAN},
        },
        "--with-filter",
        nodes_max=6,
    ) as c:
        yield c


@pytest.fixture
def slurm(cluster: slurmctl.Cluster) -> Iterator[slurmctl.Slurm]:
    s = cluster.slurm
    yield s
    s.quiesce()


def job_of(s: slurmctl.Slurm, job: str) -> dict[str, str]:
    return parse_record_line(s.out("scontrol", "show", "job", "-o", job))


def relax(c: slurmctl.Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *slurmctl.slurm_topo_cli(),
            "relax",
            "--once",
            "--plain-budget",
            "--lock",
            str(c.base.parent / "lock"),
        ]
        + list(args),
        env=dict(c.env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_filter_writes_the_budget_and_the_relaxer_widens_after_it(
    cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """One free node in z2 (r1) and one in z3 (r2): no zone and no region can hold -N2, any two nodes can.
    A 1-minute limit gives about 1 s for the region and 4 s for any nodes: two passes widen the job twice
    (the second drops the bracket: the filter's modify hook would put the zone back if it re-planned the
    relaxer's update) and it starts on a3 and b2."""
    blockers = [
        slurm.submit("--exclusive", "-N1", f"--nodelist={n}", "--wrap", "sleep 300")
        for n in ("a1", "a2", "a4", "b1")
    ]
    for b in blockers:
        slurm.wait_state(b, "RUNNING")
    job = slurm.submit("--locality=zone:auto", "--exclusive", "-N2", "--time=1", "--wrap", "sleep 30")
    submitted = datetime.fromisoformat(slurm.out("squeue", "-h", "-j", job, "-o", "%V").strip()).timestamp()
    info = job_of(slurm, job)
    assert info["JobState"] == "PENDING" and info["Features"] == "[zone_z1|zone_z2|zone_z3]", info
    comment = info["AdminComment"]
    assert comment.startswith(
        "slurm-topo: zone:auto [z1(2n),z2(2n),z3(2n)]; slurm-topo-auto: zone limit=60s "
    ), comment
    budget = parse_budget(comment)
    want = auto_budget("zone", 2, PLAN, 60, Node("t", gpus=4))
    assert budget is not None and budget.level == "zone" and budget.limit_s == 60
    for level, seconds in budget.budgets:
        assert abs(seconds - (want.of(level) or 0)) <= 1, (level, seconds, want)
    region, anywhere = budget.of("region") or 0, budget.of("any") or 0
    assert 1 <= region < anywhere < 30, budget

    for target, due in (("region", region), ("any", anywhere)):  # judged at that time (--now): no sleeping
        p = relax(cluster, "--now", f"{submitted + due + 1.5:.3f}")
        assert p.returncode == 0, p.stderr
        assert f"job {job}: relaxed {'zone' if target == 'region' else 'region'} -> {target}" in p.stdout, (
            p.stdout
        )
        if target == "region":
            info = job_of(slurm, job)
            assert info["Features"] == "[region_r1|region_r2]" and info["JobState"] == "PENDING", info
    slurm.wait_state(job, "RUNNING")
    started = job_of(slurm, job)  # (AdminComment has spaces: the whole record line)
    assert started["Features"] in ("", "(null)"), started
    assert started["NodeList"] in ("a3,b2", "a3,b[2]"), started
    after = started["AdminComment"]
    assert after.startswith(comment + "; slurm-topo-relax: zone->region "), after
    assert parse_budget(after) == budget and relaxations(after) == [("zone", "region"), ("region", "any")]

    by_partition = slurm.submit("-p", "main", "--exclusive", "-N2", "--time=1", "--wrap", "true")
    record = job_of(slurm, by_partition)["AdminComment"]
    assert record.startswith("slurm-topo: zone:auto [") and parse_budget(record) == budget, record
    unlimited = slurm.submit("--locality=zone:auto", "--exclusive", "-N2", "--wrap", "true")
    record = job_of(slurm, unlimited)["AdminComment"]
    assert (
        record.endswith("; auto: no time limit, no budget (waits as :wait)") and parse_budget(record) is None
    )
    # the filter remembers decisions by request shape: the same request with another time limit is its own
    longer = slurm.submit("--locality=zone:auto", "--exclusive", "-N2", "--time=2", "--wrap", "true")
    longer_budget = parse_budget(job_of(slurm, longer)["AdminComment"])
    longer_want = auto_budget("zone", 2, PLAN, 120, Node("t", gpus=4))
    assert longer_budget is not None and longer_budget.limit_s == 120 and longer_budget != budget
    for level, seconds in longer_budget.budgets:
        assert abs(seconds - (longer_want.of(level) or 0)) <= 1, (level, seconds, longer_want)
    slurm.cancel(job, by_partition, unlimited, longer, *blockers)


def test_start_estimates_pass_through_the_filter(cluster: slurmctl.Cluster, slurm: slurmctl.Slurm) -> None:
    """The relaxer's ``sbatch --test-only`` calls go through the submit filter (``locality=any``: left as
    asked): every zone and every region needs a node that a 30-minute job holds, so Slurm estimates the
    same wait (at least 25 minutes) at either level; the job keeps its zone with both estimates in its
    decision, and no call fails."""
    blockers = [
        slurm.submit("--exclusive", "-N1", f"--nodelist={n}", "--time=30", "--wrap", "sleep 300")
        for n in ("a1", "a2", "a4", "b1")
    ]
    for b in blockers:
        slurm.wait_state(b, "RUNNING")
    job = slurm.submit("--locality=zone:auto", "--exclusive", "-N2", "--time=60", "--wrap", "sleep 30")
    budget = parse_budget(job_of(slurm, job)["AdminComment"])
    assert budget is not None and (budget.of("region") or 0) > 30, budget
    p = relax(cluster, "--json", "--estimates", "10")
    assert p.returncode == 0, p.stderr
    (d,) = [d for d in json.loads(p.stdout)["decisions"] if d["job"] == job]
    assert d["action"] == "skip" and "failed" not in d["why"], d
    # both wait for a blocker (no zone and no region has two free nodes now: a3 and b2 alone are free)
    assert d["estimate_start_s"] >= 1500 and d["estimate_looser_s"] >= 1500, d
    assert abs(d["estimate_start_s"] - d["estimate_looser_s"]) <= 120, d
    assert d["estimate_cost_s"] == budget.of("region"), d
    info = job_of(slurm, job)
    assert info["Features"] == "[zone_z1|zone_z2|zone_z3]" and relaxations(info["AdminComment"]) == []
    slurm.cancel(job, *blockers)
