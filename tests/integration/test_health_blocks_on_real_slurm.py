"""On Slurm 25.05+ (topology.yaml with the tree `fabric` and the NVLink blocks `nvl`), `health-sync` takes a
node whose links are degraded out of its NVLink block at once — `scontrol update NodeName=… Topology=…`, no
reconfigure, no file rewritten — and does it again after a reconfigure put it back; a job of the block
partition then lands in a whole domain without it. Scaled down: two domains of two nodes (an NVL72 rack has
18 trays). Assertions read `scontrol show topology` and `scontrol show job -d`."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slurm_min("25.05", reason="scontrol update NodeName=… Topology= and topology.yaml"),
]

HW = {"CPUs": 2, "RealMemory": 1000}
SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "health" / "sysfs-healthy"
FLEET = {
    "nvlink": {"topology": "tree"},  # the launcher starts the tree; the module installs topology.yaml
    "nodes": [
        {
            "name": "g[01-02]",
            "region": "r1",
            "zone": "z1",
            "network_group": "ib-1",
            "nvlink_domain": "rack-01",
            "slurm": HW,
        },
        {
            "name": "g[03-04]",
            "region": "r1",
            "zone": "z1",
            "network_group": "ib-2",
            "nvlink_domain": "rack-02",
            "slurm": HW,
        },
    ],
}


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("healthblk", FLEET) as c:
        inv = yaml.safe_load((c.etc / "inventory.yaml").read_text())
        inv["nvlink"] = {"domains": ["rack-01", "rack-02"]}
        work = c.base.parent
        (work / "inv-nvl.yaml").write_text(yaml.safe_dump(inv, sort_keys=False))
        v = f"{c.version[0]}.{c.version[1]:02d}"
        p = subprocess.run(
            [
                *slurmctl.slurm_topo_cli(),
                "generate",
                "-i",
                str(work / "inv-nvl.yaml"),
                "-o",
                str(work / "gen"),
                "--slurm-version",
                v,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        shutil.copyfile(work / "gen" / "topology.yaml", c.etc / "topology.yaml")
        conf = c.etc / "slurm.conf"
        conf.write_text(conf.read_text() + "PartitionName=nvl Nodes=ALL Topology=nvl State=UP\n")
        slurmctl.restart_ctld(c.base)
        yield c


def blocks(slurm: slurmctl.Slurm) -> dict[str, tuple[str, ...]]:
    out = slurm.out("scontrol", "show", "topology", "nvl")
    rows = [slurmctl.parse_kv_line(x) for x in out.splitlines() if x.startswith("BlockName=")]
    return {r["BlockName"]: slurm.hostnames(r["Nodes"]) if r.get("Nodes") else () for r in rows}


def health_sync(c: slurmctl.Cluster, records: Path) -> list[str]:
    p = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "health-sync", "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(c.env),
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_a_degraded_node_leaves_its_block_live_and_again_after_a_reconfigure(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    work = Path(f"/tmp/slurm-topo-it-healthblk-work-{time.monotonic_ns()}")
    try:
        root = work / "sys"
        shutil.copytree(SYSFS, root)
        (root / "class/infiniband/mlx5_0/ports/1/rate").write_text("200 Gb/sec (4X HDR)\n")
        records = work / "records"
        records.mkdir()
        health = [
            *slurmctl.slurm_topo_cli(),
            "health",
            "--node-name",
            "g02",
            "--no-nvml",
            "--sysfs-root",
            str(root),
            "--state",
            str(work / "state.json"),
            "--records",
            str(records),
            "--threshold",
            "ib_expected_gbps=400",
        ]
        p = subprocess.run(
            health,
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(cluster.env),
        )
        assert p.returncode == 0, p.stderr
        assert blocks(slurm)["nvl_rack-01"] == ("g01", "g02")
        tree = slurm.out("scontrol", "show", "topology", "fabric")

        log = health_sync(cluster, records)
        assert "unblock g02: mlx5_0/1 rate 200 Gb/s, expected 400; leaves block nvl_rack-01" in log, log
        assert blocks(slurm) == {"nvl_rack-01": ("g01",), "nvl_rack-02": ("g03", "g04")}
        assert slurm.out("scontrol", "show", "topology", "fabric") == tree  # the tree keeps it
        assert not any(x.startswith("unblock") for x in health_sync(cluster, records))  # one change

        # a job of the block partition needing a whole 2-node block: rack-01 has one node left
        job = slurm.submit("-p", "nvl", "-N2", "--exclusive", "--wrap", "sleep 300")
        slurm.wait_state(job, "RUNNING", timeout=30)
        assert slurm.allocation_of(job).nodes == ("g03", "g04")
        slurm.cancel(job)

        # a reconfigure reloads topology.yaml (the node is back); the next pass takes it out again
        slurm.reconfigure(cluster.version)
        assert blocks(slurm)["nvl_rack-01"] == ("g01", "g02")
        assert any(x.startswith("unblock g02:") for x in health_sync(cluster, records))
        assert blocks(slurm)["nvl_rack-01"] == ("g01",)

        # the link recovers: after the hysteresis (3 healthy passes of `health`) the record says ok and the
        # next pass puts the node back into its block live, no reconfigure; a 2-node block job fits again
        (root / "class/infiniband/mlx5_0/ports/1/rate").write_text("400 Gb/sec (4X NDR)\n")
        passes = []
        for _ in range(3):
            p = subprocess.run(health, capture_output=True, text=True, timeout=60, env=dict(cluster.env))
            assert p.returncode == 0, p.stderr
            passes.append(health_sync(cluster, records))
        assert not any(x.startswith("reblock") for log in passes[:-1] for x in log), passes  # not before
        assert any(x.startswith("reblock g02: healthy for") for x in passes[-1]), passes
        assert blocks(slurm)["nvl_rack-01"] == ("g01", "g02")
        assert slurm.out("scontrol", "show", "topology", "fabric") == tree
        assert not any(x.startswith(("reblock", "unblock")) for x in health_sync(cluster, records))
        job = slurm.submit("-p", "nvl", "-N2", "--exclusive", "-w", "g01,g02", "--wrap", "sleep 300")
        slurm.wait_state(job, "RUNNING", timeout=30)
        slurm.cancel(job)
    finally:
        slurm.quiesce()
        slurm.reconfigure(cluster.version)  # leave the module's cluster as found
        shutil.rmtree(work, ignore_errors=True)
