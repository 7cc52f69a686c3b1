"""Each example fleet in examples/ runs as its own cluster on the files `slurm-topo generate` writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import slurmctl
import yaml
from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

pytestmark = pytest.mark.slurm

#: bigger fleets would start too many slurmd on a 2-core CI machine; they are left out, not skipped
MAX_NODES = 64


def node_count(inventory: Path) -> int:
    data = yaml.safe_load(inventory.read_text())
    return sum(len(NodeSet(str(entry["name"]), resolver=RESOLVER_NOGROUP)) for entry in data["nodes"])


EXAMPLES = [p for p in sorted((slurmctl.REPO / "examples").glob("*.yaml")) if node_count(p) <= MAX_NODES]


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_fleet_comes_up_idle_with_its_generated_topology(
    slurm_cluster: slurmctl.Cluster, example: Path
) -> None:
    """The example's generated topology.conf is what `scontrol show topology` reports and every node is idle
    with the features written for it."""
    count = node_count(example)
    base = Path(f"/tmp/slurm-topo-it-{example.stem}-{os.getpid()}")
    try:
        cluster = slurmctl.start_cluster(base, "--inventory", str(example), nodes_max=count + 1)
        slurm = cluster.slurm
        live = slurmctl.assert_topology_matches(slurm, (cluster.etc / "topology.conf").read_text())
        assert live["root"].nodes == frozenset(cluster.nodes)
        assert len(cluster.nodes) == count
        assert set(slurm.node_states().values()) == {"idle"}
        written = {
            kv["NodeName"]: kv.get("Features", "")
            for kv in map(
                slurmctl.parse_kv_line, (cluster.etc / "slurm-topo-nodes.conf").read_text().splitlines()
            )
            if kv.get("NodeName")
        }
        assert {n: ",".join(f) for n, f in slurm.all_node_features().items()} == written
    finally:
        slurmctl.stop_cluster(base)
    assert slurmctl.cluster_pids(base) == []
