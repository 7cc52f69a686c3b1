"""More than 65 536 nodes under one leaf: the generated topology.conf and node lines split their host
ranges at Slurm's limit, and slurmctld itself loads them (a throwaway controller on the cluster's own
configuration, the way `apply` proves a staged set), while the unsplit range stops it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

from slurm_topo.apply.prove import prover_for
from slurm_topo.core.errors import InputError
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import RenderOptions, render_all

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE
SMALL = [{"name": "s[1-2]", "region": "r1", "zone": "z1", "network_group": "rack-1", "slurm": HW}]
# FUTURE nodes need no slurmd: slurmctld only parses and records them.
BIG = {"name": "big[1-70000]", "region": "r1", "zone": "z2", "network_group": "rack-big"}
BIG_HW = {"CPUs": 1, "RealMemory": 100, "State": "FUTURE"}


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("ranges", {"nodes": SMALL}) as c:
        yield c


def _render(c: slurmctl.Cluster, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"nodes": [*SMALL, {**BIG, "slurm": BIG_HW}]}, sort_keys=False))
    return render_all(
        merge([load_inventory_file(path)]),
        c.version,
        None,
        RenderOptions(True, str(c.base / "dev" / "nvidia")),
    )


def test_a_leaf_of_70000_nodes_loads_in_slurmctld_split_and_not_unsplit(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    if cluster.version >= (24, 11):
        # These releases hold at most 65 536 nodes (MAX_SLURM_NODES): the generator refuses, in one line.
        with pytest.raises(InputError, match="65 ?536"):
            _render(cluster, tmp_path)
        return
    files = _render(cluster, tmp_path)
    topo = files["topology.conf"]
    assert "big[1-65536],big[65537-70000]" in topo, topo
    assert re.search(r"^NodeName=big\[1-65536\],big\[65537-70000\] ", files["slurm-topo-nodes.conf"], re.M)

    staged = {name: files[name].encode() for name in ("topology.conf", "slurm-topo-nodes.conf")}
    proof = prover_for(cluster.version).prove(cluster.etc, staged, timeout=240)
    assert proof.verdict == "accepted", proof

    unsplit = {
        "topology.conf": topo.replace("big[1-65536],big[65537-70000]", "big[1-70000]").encode(),
        "slurm-topo-nodes.conf": staged["slurm-topo-nodes.conf"],
    }
    proof = prover_for(cluster.version).prove(cluster.etc, unsplit, timeout=240)
    assert proof.verdict == "rejected", proof
    # 22.05: "fatal: Invalid node name (big[1-70000]) in switch config (...)" (hostlist's range limit)
    assert "big[1-70000]" in proof.error, proof
