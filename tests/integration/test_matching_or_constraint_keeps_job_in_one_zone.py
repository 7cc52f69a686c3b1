"""A matching-OR constraint over the generated zone_* features keeps every node of a job in one zone."""

from __future__ import annotations

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

JOB_NODES = 3


def zones_of(features: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    zones: dict[str, set[str]] = {}
    for node, feats in features.items():
        for f in feats:
            if f.startswith("zone_"):
                zones.setdefault(f, set()).add(node)
    return zones


def test_matching_or_zone_constraint_waits_for_one_zone_instead_of_spanning(slurm: slurmctl.Slurm) -> None:
    """With at most 2 free nodes per zone, -N3 runs across zones unconstrained, but
    --constraint='[zone_a|zone_b|...]' pends until one zone has 3 free nodes and then runs there."""
    zones = zones_of(slurm.all_node_features())  # names as the generator wrote them, read back from Slurm
    big = sorted(z for z, nodes in zones.items() if len(nodes) >= JOB_NODES)
    assert len(zones) >= 2 and big, f"precondition: several zones, one with {JOB_NODES} nodes: {zones}"

    # fragment the cluster: leave JOB_NODES - 1 free nodes in every zone
    blockers: dict[str, list[str]] = {}
    for zone, nodes in zones.items():
        for node in sorted(nodes)[: max(0, len(nodes) - (JOB_NODES - 1))]:
            blockers.setdefault(zone, []).append(
                slurm.submit("--exclusive", "-w", node, "--wrap", "sleep 300")
            )
    for job in (j for jobs in blockers.values() for j in jobs):
        slurm.wait_state(job, "RUNNING")

    control = slurm.submit("--exclusive", f"-N{JOB_NODES}", "--wrap", "sleep 300")
    slurm.wait_state(control, "RUNNING")
    spread = set(slurm.allocation_of(control).nodes)
    assert len([z for z, nodes in zones.items() if nodes & spread]) > 1, "control job should span zones"
    slurm.cancel(control)
    slurm.wait_state(control, "CANCELLED")

    constraint = "[" + "|".join(sorted(zones)) + "]"
    job = slurm.submit("--exclusive", f"-N{JOB_NODES}", f"--constraint={constraint}", "--wrap", "sleep 300")
    # Slurm's own word that its scheduler tried the job and found no zone with room (a new job's Reason is
    # None until a scheduling attempt sets it): no zone has 3 free nodes, so the job must wait
    slurm.wait_state(job, "PENDING", reason="Resources")

    target = big[0]
    slurm.cancel(*blockers[target])
    info = slurm.wait_state(job, "RUNNING", timeout=30)
    nodes = set(slurm.allocation_of(job).nodes)
    assert nodes <= zones[target], f"{sorted(nodes)} not inside {target}"
    assert info["Features"] == constraint


def test_matching_or_zone_constraint_on_idle_cluster_uses_one_zone(slurm: slurmctl.Slurm) -> None:
    """On an idle cluster a matching-OR over all zones puts a job as big as the largest zone into one zone."""
    zones = zones_of(slurm.all_node_features())
    size = max(len(nodes) for nodes in zones.values())
    constraint = "[" + "|".join(sorted(zones)) + "]"
    job = slurm.submit("--exclusive", f"-N{size}", f"--constraint={constraint}", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert len(nodes) == size
    assert any(nodes <= z for z in zones.values()), f"{sorted(nodes)} spans zones"
