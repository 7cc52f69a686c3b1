"""slurm_topo.explain.explain_job against the filtered cluster: the landed level of a placed job (from the nodes'
features as Slurm reports them) and the reason of a held one."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import pytest
import slurmctl

from slurm_topo.explain import explain_job

pytestmark = pytest.mark.slurm


class ClusterRunner:
    """slurm_topo.runner.Runner bound to one test cluster (its SLURM_CONF)."""

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
    assert nodes == {"n07", "n08", "n09"}  # the smallest zone that can hold 3: us-west-2a
    assert "locality zone:wait" in text, text
    assert "decision: zone:wait [us-west-2a(3n),us-east-1a(4n)]" in text, text
    assert "landed:   same zone us-west-2a, 2 network groups (3 nodes)" in text, text

    rack = fslurm.submit("--exclusive", "-N2", "--locality=network_group", "--wrap", "sleep 300")
    fslurm.wait_state(rack, "RUNNING")
    assert "landed:   same network group us-east-1b.rack-b1 (2 nodes)" in explain_job(rack, runner)

    held = fslurm.submit("--exclusive", "-N5", "--locality=zone", "--wrap", "true")
    fslurm.wait_state(held, "PENDING")
    text = explain_job(held, runner)
    assert f"job {held}: PENDING" in text
    assert "held by the locality filter: the largest is us-east-1a with 4 nodes" in text, text
