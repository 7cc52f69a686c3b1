"""Slurm runs on exactly the files `slurm-topo generate` wrote for the cluster's fleet and reports them."""

from __future__ import annotations

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

#: feature prefix -> topology/tree level of the switches that group the same nodes (leaf = 0)
FEATURE_LEVELS = {"ng_": 0, "zone_": 1, "region_": 2}


def generated_node_lines(cluster: slurmctl.Cluster) -> list[dict[str, str]]:
    text = (cluster.etc / "slurm-topo-nodes.conf").read_text()
    return [slurmctl.parse_kv_line(ln) for ln in text.splitlines() if ln.startswith("NodeName=")]


def test_scontrol_show_topology_matches_the_generated_topology_conf(
    slurm_cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """Every generated switch is live with the same child switches and nodes; parents cover their subtrees."""
    live = slurmctl.assert_topology_matches(slurm, (slurm_cluster.etc / "topology.conf").read_text())
    assert live["root"].nodes == frozenset(slurm_cluster.nodes)


def test_every_generated_node_line_is_an_idle_node_with_its_features_and_gres(
    slurm_cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """Each NodeName= line becomes an idle node whose features, GRES and CPUs are the ones written."""
    lines = generated_node_lines(slurm_cluster)
    assert sorted(ln["NodeName"] for ln in lines) == sorted(slurm_cluster.nodes)
    for line in lines:
        node = slurmctl.parse_kv_line(slurm.out("scontrol", "show", "node", "-o", line["NodeName"]))
        assert node["State"] == "IDLE", node
        assert node["AvailableFeatures"].split(",") == line["Features"].split(","), node
        assert node["Gres"] == line["Gres"], node
        assert node["CPUTot"] == line["CPUs"], node


def test_level_features_group_the_same_nodes_as_the_switches_of_that_level(
    slurm_cluster: slurmctl.Cluster, slurm: slurmctl.Slurm
) -> None:
    """ng_/zone_/region_ features partition the nodes exactly like leaf/zone/region switches."""
    features = slurm.all_node_features()
    topo = slurm.topology()
    for prefix, level in FEATURE_LEVELS.items():
        by_feature: dict[str, set[str]] = {}
        for node, feats in features.items():
            for f in feats:
                if f.startswith(prefix):
                    by_feature.setdefault(f, set()).add(node)
        by_switch = {s.nodes for s in topo.values() if s.level == level}
        assert {frozenset(v) for v in by_feature.values()} == by_switch, prefix


def test_typed_gpu_request_gets_gpu_indices_on_a_node_with_that_type(slurm: slurmctl.Slurm) -> None:
    """`--gres=gpu:<type>:2` runs on a node whose generated Gres has that type and gets two GPU indices."""
    gres = {
        n: slurmctl.parse_kv_line(slurm.out("scontrol", "show", "node", "-o", n))["Gres"]
        for n in slurm.node_states()
    }
    gpu_type = sorted(g.split(":")[1] for g in gres.values() if g.count(":") == 2)[0]
    job = slurm.submit("-N1", f"--gres=gpu:{gpu_type}:2", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    alloc = slurm.allocation_of(job)
    (node,) = alloc.nodes
    assert gres[node].startswith(f"gpu:{gpu_type}:")
    assert len(alloc.gpus[node]) == 2
