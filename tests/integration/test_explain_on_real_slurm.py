"""slurm_topo.reports.explain.explain_job against real Slurm: the landed level of a placed job (from the
nodes' features as Slurm reports them), the reason of a held one, and a placement that breaks the job's
locality."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import pytest
import slurmctl

from slurm_topo.reports.explain import explain_job

pytestmark = pytest.mark.slurm


class ClusterRunner:
    """slurm_topo.plumbing.runner.Runner bound to one test cluster (its SLURM_CONF)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        p = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=True
        )
        return p.stdout


def test_explain_placed_and_held_jobs(fslurm: slurmctl.Slurm) -> None:
    runner = ClusterRunner(fslurm.env)
    placed = fslurm.submit("--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
    fslurm.wait_state(placed, "RUNNING")
    text = explain_job(placed, runner)
    nodes = set(fslurm.allocation_of(placed).nodes)
    # The bracket keeps the zones that can hold 3 (us-west-2a, us-east-1a); the filter's added --prefer lists
    # the network groups inside them first, and rack-a1 (n01-n03) is the one that can hold the job.
    assert nodes == {"n01", "n02", "n03"}
    assert "locality zone:wait" in text, text
    assert "decision: zone:wait [us-west-2a(3n),us-east-1a(4n)]" in text, text
    assert "landed:   same network group us-east-1a.rack-a1 (3 nodes)" in text, text

    rack = fslurm.submit("--exclusive", "-N2", "--locality=network_group", "--wrap", "sleep 300")
    fslurm.wait_state(rack, "RUNNING")
    assert "landed:   same network group us-east-1b.rack-b1 (2 nodes)" in explain_job(rack, runner)

    held = fslurm.submit("--exclusive", "-N5", "--locality=zone", "--wrap", "true")
    fslurm.wait_state(held, "PENDING")
    text = explain_job(held, runner)
    assert f"job {held}: PENDING" in text
    assert "held by the locality filter: the largest is us-east-1a with 4 nodes" in text, text


def test_explain_flags_a_placement_that_breaks_the_jobs_locality(slurm: slurmctl.Slurm) -> None:
    """A zone job pinned by --nodelist to nodes of two regions runs there (Slurm honours the nodelist);
    explain must say that the placement breaks the locality, read from the nodes' features in Slurm."""
    job = slurm.submit(
        "--exclusive", "-N2", "--nodelist=n01,n12", "--comment=locality=zone:wait", "--wrap", "sleep 300"
    )
    slurm.wait_state(job, "RUNNING")
    assert set(slurm.allocation_of(job).nodes) == {"n01", "n12"}
    text = explain_job(job, ClusterRunner(slurm.env))
    assert text.endswith("\n") and not text.endswith("\n\n"), repr(text)
    assert "  landed:   2 regions (2 nodes)" in text.splitlines(), text
    assert (
        "  BROKEN:   locality zone:wait asks for one zone; the job's nodes are in 2 zones"
        in text.splitlines()
    ), text

    inside = slurm.submit(
        "--exclusive", "-N2", "--nodelist=n07,n08", "--comment=locality=zone:wait", "--wrap", "sleep 300"
    )
    slurm.wait_state(inside, "RUNNING")
    assert "BROKEN" not in explain_job(inside, ClusterRunner(slurm.env))
