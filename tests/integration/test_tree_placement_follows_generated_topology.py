"""topology/tree placement on the generated tree: Slurm's own allocation, not our model's prediction."""

from __future__ import annotations

import pytest
import slurmctl

pytestmark = pytest.mark.slurm


def switches_at(topo: dict[str, slurmctl.Switch], level: int) -> list[slurmctl.Switch]:
    return [s for s in topo.values() if s.level == level]


def test_exclusive_three_node_job_lands_inside_one_leaf_that_can_hold_it(slurm: slurmctl.Slurm) -> None:
    """On an idle cluster an exclusive -N3 job (pitfall 9) gets all three nodes from one leaf switch."""
    leaves = switches_at(slurm.topology(), 0)
    assert any(len(leaf.nodes) >= 3 for leaf in leaves), "precondition: some leaf holds 3 nodes"
    job = slurm.submit("--exclusive", "-N3", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert len(nodes) == 3
    assert any(nodes <= leaf.nodes for leaf in leaves), f"{sorted(nodes)} spans leaves"


def test_job_too_big_for_any_zone_spans_zones_but_stays_in_one_region_if_one_fits(
    slurm: slurmctl.Slurm,
) -> None:
    """A job one node larger than the biggest zone spans zones, inside the smallest region holding it."""
    topo = slurm.topology()
    zones, regions = switches_at(topo, 1), switches_at(topo, 2)
    size = max(len(z.nodes) for z in zones) + 1
    assert size <= len(topo["root"].nodes), "precondition: the job fits the cluster"
    job = slurm.submit("--exclusive", f"-N{size}", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert len(nodes) == size
    assert len([z for z in zones if z.nodes & nodes]) > 1
    if any(len(r.nodes) >= size for r in regions):
        assert any(nodes <= r.nodes for r in regions), f"{sorted(nodes)} spans regions"
