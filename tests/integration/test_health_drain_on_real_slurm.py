"""`slurm-topo health` on the nodes + `slurm-topo health-sync` on the controller side, on a real Slurm:
a hard fault drains the node with a reason naming the link, clearing it resumes the node only after the
node-side hysteresis (N healthy passes), an admin's drain is never lifted, and a health drain survives
`scontrol reconfigure`. Every assertion reads Slurm's own view (`scontrol show node`)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE
SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "health" / "sysfs-healthy"
PREFIX = "slurm-topo-health:"


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster(
        "health", {"nodes": [{"name": "h[1-3]", "region": "r1", "zone": "z1", "slurm": HW}]}, nodes_max=3
    ) as c:
        yield c


class Fleet:
    """Per node: a sysfs tree and a state file; one records folder; the controller-side pass."""

    def __init__(self, cluster: slurmctl.Cluster, work: Path):
        self.cluster = cluster
        self.env = dict(cluster.env)
        self.work = work
        self.records = work / "records"
        self.records.mkdir()

    def tree(self, node: str) -> Path:
        root = self.work / node / "sys"
        if not root.exists():
            shutil.copytree(SYSFS, root)
        return root

    def port_down(self, node: str, down: bool) -> None:
        state = self.tree(node) / "class/infiniband/mlx5_1/ports/1/state"
        state.write_text("1: DOWN\n" if down else "4: ACTIVE\n")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*slurmctl.slurm_topo_cli(), *args], capture_output=True, text=True, timeout=60, env=self.env
        )
        assert proc.returncode == 0, proc.stderr
        return proc

    def health(self, node: str) -> None:
        state = str(self.work / node / "state.json")
        root = str(self.tree(node))
        self.cli("health", "--node-name", node, "--no-nvml", "--sysfs-root", root, "--state", state,
                 "--records", str(self.records), "--threshold", "hysteresis=3")  # fmt: skip

    def sync(self) -> list[str]:
        return self.cli("health-sync", "--records", str(self.records)).stdout.splitlines()

    def wait_idle(self, node: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while (state := self.node(node)[0]) != "IDLE" and time.monotonic() < end:
            time.sleep(0.2)
        assert state == "IDLE", f"{node} is {state} {timeout} s after resume"

    def node(self, node: str) -> tuple[str, str]:
        """(State, Reason) as `scontrol show node` prints them."""
        out = self.cluster.slurm.out("scontrol", "show", "node", node)
        state = out.split("State=", 1)[1].split()[0]
        reason = ""
        for line in out.splitlines():
            if line.strip().startswith("Reason="):
                reason = line.strip()[len("Reason=") :]
        return state, reason


@pytest.fixture
def fleet(cluster: slurmctl.Cluster) -> Iterator[Fleet]:
    work = Path(f"/tmp/slurm-topo-it-health-work-{time.monotonic_ns()}")
    work.mkdir()
    try:
        yield Fleet(cluster, work)
    finally:
        for n in cluster.nodes:  # leave the module's cluster as found
            cluster.slurm.run(["scontrol", "update", f"NodeName={n}", "State=RESUME"], check=False)
        shutil.rmtree(work, ignore_errors=True)


def test_hard_fault_drains_and_clearing_resumes_after_n_passes(fleet: Fleet) -> None:
    for n in ("h1", "h2"):
        fleet.health(n)
    assert not any(line.startswith(("drain", "resume")) for line in fleet.sync())  # healthy: nothing to do
    assert fleet.node("h1")[0] == "IDLE"

    fleet.port_down("h1", True)
    fleet.health("h1")
    log = fleet.sync()
    assert f"drain h1: {PREFIX} mlx5_1/1 state DOWN" in log
    state, reason = fleet.node("h1")
    assert "DRAIN" in state and reason.startswith(f"{PREFIX} mlx5_1/1 state DOWN")
    assert fleet.node("h2")[0] == "IDLE"
    assert not any(line.startswith("drain") for line in fleet.sync())  # one change, not one per pass

    fleet.port_down("h1", False)
    for k in (1, 2):  # healthy, but not yet for 3 passes: still drained
        fleet.health("h1")
        assert not any(line.startswith("resume") for line in fleet.sync())
        assert "DRAIN" in fleet.node("h1")[0], f"resumed after {k} healthy pass(es)"
    fleet.health("h1")
    assert "resume h1: healthy for 3 passes" in fleet.sync()
    assert "DRAIN" not in fleet.node("h1")[0]
    fleet.wait_idle("h1")  # the node answers slurmctld's ping again (NOT_RESPONDING may show for a moment)
    state, reason = fleet.node("h1")
    # 22.05 and 26.05 clear the reason on RESUME; 24.11 (24.11.5) keeps it on the resumed node, and no
    # scontrol update (Reason=, UNDRAIN) clears it there: only the state tells it is no longer drained
    kept = fleet.cluster.version == (24, 11) and reason.startswith(f"{PREFIX} mlx5_1/1 state DOWN")
    assert state == "IDLE" and (reason == "" or kept), (state, reason)
    fleet.health("h1")  # the next pass leaves the resumed node alone (a kept reason is not a drain)
    assert [line for line in fleet.sync() if "h1" in line] == []


def test_an_admin_drain_is_never_lifted(fleet: Fleet) -> None:
    slurm = fleet.cluster.slurm
    slurm.out("scontrol", "update", "NodeName=h2", "State=DRAIN", "Reason=admin: bad dimm")
    fleet.health("h2")  # healthy record
    fleet.sync()
    state, reason = fleet.node("h2")
    assert "DRAIN" in state and reason.startswith("admin: bad dimm")
    fleet.port_down("h2", True)  # a hard fault on top: the admin's reason stays
    fleet.health("h2")
    assert "keep h2: hard fault, already drained (admin)" in fleet.sync()
    fleet.port_down("h2", False)
    for _ in range(4):
        fleet.health("h2")
        fleet.sync()
    state, reason = fleet.node("h2")
    assert "DRAIN" in state and reason.startswith("admin: bad dimm")


def test_a_health_drain_survives_reconfigure(fleet: Fleet) -> None:
    fleet.port_down("h3", True)
    fleet.health("h3")
    fleet.sync()
    assert "DRAIN" in fleet.node("h3")[0]
    slurm = fleet.cluster.slurm
    slurm.run(["scontrol", "reconfigure"], timeout=30)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if "UP" in slurm.run(["scontrol", "ping"], timeout=10, check=False).stdout:
            break
        time.sleep(0.2)
    state, reason = fleet.node("h3")
    assert "DRAIN" in state and reason.startswith(f"{PREFIX} mlx5_1/1 state DOWN")
    assert not any(line.startswith(("drain", "resume")) for line in fleet.sync())
