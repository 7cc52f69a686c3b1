"""Node self-reports (`slurm-topo discover` records) → `generate --records` → Slurm's own topology and
features."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE


@pytest.fixture(scope="module")
def small_cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Four nodes: d[1-2] placed by the operator, d[3-4] with no location in any inventory (root leaf)."""
    with scratch_cluster(
        "records",
        {
            "nodes": [
                {"name": "d[1-2]", "region": "r1", "zone": "r1-a", "network_group": "rack-1", "slurm": HW},
                {"name": "d[3-4]", "slurm": HW},
            ]
        },
    ) as cluster:
        yield cluster


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*slurmctl.slurm_topo_cli(), *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )


def test_records_place_unplaced_nodes_and_never_move_trusted_ones(
    small_cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    """Records give d3/d4 a zone and rack; d1's self-report of another region is a listed conflict and d1
    stays where the operator put it — as Slurm itself reports after `scontrol reconfigure`."""
    env = dict(small_cluster.env)
    records = tmp_path / "records"
    records.mkdir()
    for node, region, zone, group in (
        ("d3", "r1", "r1-b", "rack-9"),
        ("d4", "r1", "r1-b", "rack-9"),
        ("d1", "r2", "r2-a", "rack-5"),
    ):
        proc = cli(
            "discover",
            "--node-name",
            node,
            "--region",
            region,
            "--zone",
            zone,
            "--network-group",
            group,
            "--dmi-root",
            str(tmp_path / "no-dmi"),
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        (records / f"{node}.yaml").write_text(proc.stdout)
    out = tmp_path / "generated"
    proc = cli(
        "generate",
        "--inventory",
        str(small_cluster.etc / "inventory.yaml"),
        "--records",
        str(records),
        "--out",
        str(out),
        "--slurm-version",
        "{}.{:02d}".format(*small_cluster.version),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    conflicts = [ln for ln in proc.stderr.splitlines() if ln.startswith("conflict:")]
    assert len(conflicts) == 1 and "node d1: region: self says r2, operator says r1" in conflicts[0]
    for name in ("topology.conf", "slurm-topo-nodes.conf"):
        (small_cluster.etc / name).write_bytes((out / name).read_bytes())
    slurm = small_cluster.slurm
    slurm.reconfigure(small_cluster.version)
    topo = slurm.topology()
    leaf_of = {n: name for name, sw in topo.items() if sw.level == 0 for n in sw.nodes}
    assert leaf_of["d3"] == leaf_of["d4"] == "ng_r1-b.rack-9"
    assert leaf_of["d1"] == leaf_of["d2"] == "ng_r1-a.rack-1"
    assert "zone_r1-b" in slurm.node_features("d3")
    assert "region_r1" in slurm.node_features("d1") and "region_r2" not in slurm.node_features("d1")
    shown = cli(
        "show", "--inventory", str(small_cluster.etc / "inventory.yaml"), "--records", str(records), env=env
    )
    assert "rack-9  2 nodes, 0 GPUs, 2 self-reported*" in shown.stdout
