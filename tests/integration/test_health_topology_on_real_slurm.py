"""Health records change what Slurm is given, on a real Slurm with the submit filter: a node whose links are
degraded (a port at half its rate) stops receiving `--locality=zone` jobs, is the last node `prefer` and `any`
jobs get, and is still used when nothing else is free; a hard-fault drain survives the reconfigure `apply`
makes for it; once the node is healthy again `apply` gives its location back. Every assertion reads Slurm's
own view (`scontrol show node`, `scontrol show job -d`)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl

from slurm_topo.access.text import parse_show_node

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE
SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "health" / "sysfs-healthy"
PREFIX = "slurm-topo-health:"
RECHECK = 10  # job_submit/slurm_topo_filter/vocab.lua RECHECK_SECONDS


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Two zones of three nodes: d[1-3] in z1, d[4-6] in z2."""
    with scratch_cluster(
        "healthtopo",
        {
            "nodes": [
                {"name": "d[1-3]", "region": "r1", "zone": "z1", "network_group": "g1", "slurm": HW},
                {"name": "d[4-6]", "region": "r1", "zone": "z2", "network_group": "g2", "slurm": HW},
            ]
        },
        "--with-filter",
        nodes_max=6,
    ) as c:
        yield c


class Site:
    """The nodes' sysfs trees and state files, the records folder, `health`, `health-sync` and `apply`."""

    def __init__(self, cluster: slurmctl.Cluster, work: Path):
        self.cluster = cluster
        self.slurm = cluster.slurm
        self.work = work
        self.records = work / "records"
        self.records.mkdir()

    def cli(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*slurmctl.slurm_topo_cli(), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(self.cluster.env),
        )
        assert proc.returncode in ok, f"{args[0]}: {proc.returncode}\n{proc.stderr}{proc.stdout}"
        return proc

    def port(self, node: str, *, rate: str = "400 Gb/sec (4X NDR)", state: str = "4: ACTIVE") -> None:
        root = self.work / node / "sys"
        if not root.exists():
            shutil.copytree(SYSFS, root)
        port = root / "class/infiniband/mlx5_0/ports/1"
        (port / "rate").write_text(rate + "\n")
        (port / "state").write_text(state + "\n")

    def health(self, node: str) -> None:
        if not (self.work / node).exists():
            self.port(node)
        self.cli("health", "--node-name", node, "--no-nvml", "--sysfs-root", str(self.work / node / "sys"),
                 "--state", str(self.work / node / "state.json"), "--records", str(self.records),
                 "--threshold", "hysteresis=1", "--threshold", "ib_expected_gbps=400")  # fmt: skip

    def apply(self) -> str:
        c = self.cluster
        p = self.cli("apply", "-i", str(c.etc / "inventory.yaml"), "--records", str(self.records),
                     "--slurm-dir", str(c.etc), "--state-dir", str(self.work / "apply-state"),
                     "--slurm-version", f"{c.version[0]}.{c.version[1]:02d}", "--min-interval", "0",
                     "--no-slurm-check", "--assume-minor-equals-index",
                     "--gpu-device-prefix", str(c.base / "dev" / "nvidia"))  # fmt: skip
        time.sleep(RECHECK + 1)  # the filter reads a new data file within RECHECK_SECONDS of its change
        return p.stdout + p.stderr

    def node(self, name: str) -> dict[str, str]:
        return slurmctl.parse_kv_line(self.slurm.out("scontrol", "show", "node", "-o", name))

    def runs_on(self, *sbatch: str) -> tuple[str, ...]:
        job = self.slurm.submit("--exclusive", "--wrap", "sleep 300", *sbatch)
        self.slurm.wait_state(job, "RUNNING", timeout=20)
        return self.slurm.allocation_of(job).nodes


@pytest.fixture
def site(cluster: slurmctl.Cluster) -> Iterator[Site]:
    work = Path(f"/tmp/slurm-topo-it-healthtopo-work-{time.monotonic_ns()}")
    work.mkdir()
    try:
        yield Site(cluster, work)
    finally:
        for n in cluster.nodes:  # leave the module's cluster as found
            cluster.slurm.run(["scontrol", "update", f"NodeName={n}", "State=RESUME"], check=False)
        cluster.slurm.quiesce()
        shutil.rmtree(work, ignore_errors=True)


def test_a_degraded_node_is_left_out_of_required_localities_and_given_last(site: Site) -> None:
    slurm = site.slurm
    # healthy: the filter's smallest-first bracket and the tree start at d1
    assert site.runs_on("--locality=zone", "-N3") == ("d1", "d2", "d3")
    slurm.quiesce()

    site.port("d1", rate="200 Gb/sec (4X HDR)")  # half the fabric's rate: degraded, not a hard fault
    site.health("d1")
    out = site.apply()
    assert "health: d1: degraded (mlx5_0/1 rate 200 Gb/s, expected 400)" in out, out
    d1 = site.node("d1")
    assert d1["AvailableFeatures"] == "linkdeg" and d1["Weight"] == "1000001", d1
    assert "DRAIN" not in d1["State"]  # degraded is not a reason to take the node away

    # required zone: z1 has two healthy nodes now, so a 3-node zone job goes to z2
    assert site.runs_on("--locality=zone", "-N3") == ("d4", "d5", "d6")
    slurm.quiesce()
    assert "d1" not in site.runs_on("--locality=prefer", "-N2")
    slurm.quiesce()
    assert site.runs_on("--locality=any", "-N5") == ("d2", "d3", "d4", "d5", "d6")
    slurm.quiesce()
    assert "d1" in site.runs_on("--locality=any", "-N6")  # a last resort, not gone
    slurm.quiesce()
    # a required zone that needs it cannot have it: the filter says so at submit
    slurm.submit_error("--locality=zone", "-N3", "--nodelist=d1", "--wrap", "true")

    site.port("d1")  # healthy again: after the hysteresis (1 pass here) the record is clean
    site.health("d1")
    site.apply()
    d1 = site.node("d1")
    assert d1["AvailableFeatures"] == "region_r1,zone_z1,ng_z1.g1" and d1["Weight"] == "1", d1
    assert site.runs_on("--locality=zone", "-N3") == ("d1", "d2", "d3")


def test_a_health_drain_survives_the_reconfigure_apply_makes_for_it(site: Site) -> None:
    site.port("d2", state="1: DOWN")
    site.health("d2")
    assert (
        f"drain d2: {PREFIX} mlx5_0/1 state DOWN"
        in site.cli("health-sync", "--records", str(site.records)).stdout
    )
    before = site.node("d2")
    assert "DRAIN" in before["State"]
    out = site.apply()  # the record is `down`: d2 loses its location features, slurmctld reconfigures
    assert "applied" in out, out
    after = site.node("d2")
    assert after["AvailableFeatures"] == "linkdeg", after
    state = parse_show_node(site.slurm.out("scontrol", "show", "node", "d2"))["d2"]
    assert state.drained and (state.reason or "").startswith(f"{PREFIX} mlx5_0/1 state DOWN"), state

    site.port("d2")
    site.health("d2")
    assert "resume d2: healthy for 1 passes" in site.cli("health-sync", "--records", str(site.records)).stdout
    site.apply()
    after = site.node("d2")
    assert "DRAIN" not in after["State"] and after["AvailableFeatures"] == "region_r1,zone_z1,ng_z1.g1", after
