"""Submit paths of the locality filter on a real Slurm 22.05 (the filtered test cluster, docker-slurm/cluster up
--with-filter): a partition the data file does not know, and what Slurm records for the job.

The data file of the test cluster is generated from the inventory alone (no partitions), as the README's install
step does; the cluster's partition is ``main`` (Nodes=ALL, Default=YES).
"""

from __future__ import annotations

import pytest
import slurmctl

pytestmark = pytest.mark.slurm


def test_named_partition_unknown_to_the_data_still_gets_its_bracket(fslurm: slurmctl.Slurm) -> None:
    """`sbatch -p main --locality=zone -N3`: 'main' is not in the data file, which then counts every node; the job
    gets the zone bracket and the record says why (it was a silent no-op)."""
    job = fslurm.submit("-p", "main", "--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    assert info["Features"] == "[zone_us-west-2a|zone_us-east-1a]", info["Features"]
    record = fslurm.out("scontrol", "show", "job", "-o", job)
    assert "partition 'main' not in the data: all nodes counted" in record, record
    zones = {}
    for node, feats in fslurm.all_node_features().items():
        for f in feats:
            if f.startswith("zone_"):
                zones.setdefault(f, set()).add(node)
    nodes = set(fslurm.allocation_of(job).nodes)
    assert any(nodes <= members for members in zones.values()), sorted(nodes)
    p = fslurm.run(
        ["timeout", "20", "sbatch", "-p", "main", "-N5", "--locality=zone:fail", "--wrap", "true"],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0 and "no zone can ever hold 5 nodes" in p.stderr, p.stderr
