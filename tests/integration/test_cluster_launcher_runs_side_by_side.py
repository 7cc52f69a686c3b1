"""docker-slurm/cluster: `up` twice on one base works, a second cluster runs beside the first,
and `down` leaves no process of that cluster behind (job processes included)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

SMALL_FLEET = {
    "nodes": [
        {
            "name": "m[1-2]",
            "region": "r1",
            "zone": "r1-a",
            "network_group": "g1",
            "gpus": 2,
            "gpu_type": "t4",
            "slurm": {"CPUs": 4, "RealMemory": 8000},
        },
        {
            "name": "m3",
            "region": "r1",
            "zone": "r1-b",
            "network_group": "g2",
            "slurm": {"CPUs": 4, "RealMemory": 8000},
        },
    ]
}
#: a `sleep` argument no other test (or concurrent session) uses: finds this cluster's job processes
MARK_SECONDS = str(100_000 + os.getpid())


def tagged_pids(base: Path) -> list[int]:
    """Processes whose environment carries the launcher's tag for ``base``, read here, not by it."""
    needle = f"SLURM_TOPO_CLUSTER_TAG={base}".encode()
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(d))
            except OSError:
                pass
    return found


def marked_job_processes() -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[:2] == [b"sleep", MARK_SECONDS.encode()]:
                        found.append(int(d))
            except OSError:
                pass
    return found


def test_second_cluster_runs_beside_the_first_and_down_leaves_no_process(
    slurm_cluster: slurmctl.Cluster, slurm: slurmctl.Slurm, tmp_path: Path
) -> None:
    """A small second cluster (own base and ports) comes up idle, runs a job, survives `up` again on the same
    base, and after `down` none of its processes (daemons or job steps) remain; the first cluster is
    untouched."""
    inventory = tmp_path / "small.yaml"
    inventory.write_text(yaml.safe_dump(SMALL_FLEET))
    base = Path(f"/tmp/slurm-topo-it2-{os.getpid()}")
    first_before = sorted(tagged_pids(slurm_cluster.base))
    try:
        second = slurmctl.start_cluster(base, "--inventory", str(inventory), nodes_max=4)
        assert second.slurm.node_states() == {"m1": "idle", "m2": "idle", "m3": "idle"}
        assert set(slurm.node_states()) == set(slurm_cluster.nodes), (
            "the first cluster still sees only its nodes"
        )

        job = second.slurm.submit("-N2", "--wrap", f"sleep {MARK_SECONDS}")
        second.slurm.wait_state(job, "RUNNING")
        assert set(second.slurm.allocation_of(job).nodes) <= {"m1", "m2", "m3"}
        old = tagged_pids(base)
        # RUNNING in slurmctld comes before slurmd has exec'd the batch script: wait for the step's process.
        deadline = time.monotonic() + 30
        while not marked_job_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert old and marked_job_processes()

        again = slurmctl.start_cluster(
            base, "--inventory", str(inventory), nodes_max=4
        )  # `up` on a running base
        assert again.slurm.node_states() == {"m1": "idle", "m2": "idle", "m3": "idle"}
        assert again.slurm.out("squeue", "-h").strip() == "", "a fresh cluster has no jobs"
        assert not set(old) & set(tagged_pids(base)), "old daemons must be gone"
        assert not marked_job_processes(), "the old cluster's job processes must be gone"
    finally:
        slurmctl.stop_cluster(base)
    assert tagged_pids(base) == []
    assert slurmctl.cluster_pids(base) == []
    assert not marked_job_processes()
    assert not base.exists()
    assert sorted(tagged_pids(slurm_cluster.base)) == first_before, (
        "the first cluster's processes are untouched"
    )
    assert set(slurm.node_states().values()) == {"idle"}


def test_a_node_port_taken_after_the_check_fails_up_at_once_naming_node_and_port(tmp_path: Path) -> None:
    """A port the pre-check finds free on 127.0.0.1 but slurmd cannot bind (held on another loopback
    address, as a client connection or another service takes it meanwhile on a busy host): ``up`` stops
    with slurmd's own reason, the node and the port, not after its whole wait."""
    import socket

    work = Path(f"/tmp/slurm-topo-it-ports-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    fleet = work / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(SMALL_FLEET, sort_keys=False))
    port0 = slurmctl.free_port_block(5)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.2", port0 + 2))  # node 2's port (node i listens on port0 + i)
        holder.listen(1)
        p = slurmctl.launcher(
            "up",
            "--base",
            str(work / "c"),
            "--inventory",
            str(fleet),
            "--ctld-port",
            str(port0),
            "--node-port0",
            str(port0),
            "--timeout",
            "120",
        )
        assert p.returncode != 0, p.stdout
        assert f"slurmd of node m2 cannot listen on port {port0 + 2}" in p.stderr, p.stderr
        assert "timed out" not in p.stderr, p.stderr
    finally:
        holder.close()
        slurmctl.launcher("down", "--base", str(work / "c"))
        assert slurmctl.cluster_pids(work / "c") == []
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def test_a_checkout_only_its_owner_may_enter_still_runs_other_users_jobs() -> None:
    """A clone in a mode-0700 folder (as ``/root/…`` is): a job owner's in-root cannot bind the checkout,
    so the launcher binds a snapshot of its package instead; ``nobody`` submits and the job runs
    ``slurm-topo`` inside the release's root (native: no root, the job runs on the host)."""
    import shutil
    import subprocess

    closed = Path(f"/tmp/slurm-topo-it-closed-{os.getpid()}")
    shutil.rmtree(closed, ignore_errors=True)
    closed.mkdir(mode=0o700)
    os.chmod(closed, 0o700)
    repo = closed / "checkout"
    work = Path(f"/tmp/slurm-topo-it-closedbase-{os.getpid()}")
    work.mkdir(exist_ok=True)
    os.chmod(work, 0o755)
    base = work / "c"
    try:
        for part in ("slurm_topo", "docker-slurm", "job_submit", "gres", "examples"):
            shutil.copytree(
                slurmctl.REPO / part, repo / part, ignore=shutil.ignore_patterns("__pycache__", ".venv")
            )
        fleet = work / "fleet.yaml"
        fleet.write_text(yaml.safe_dump(SMALL_FLEET, sort_keys=False))
        port0 = slurmctl.free_port_block(5)
        up = subprocess.run(
            [
                sys.executable,
                str(repo / "docker-slurm" / "cluster"),
                "up",
                "--base",
                str(base),
                "--inventory",
                str(fleet),
                "--ctld-port",
                str(port0),
                "--node-port0",
                str(port0),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, "SLURM_TOPO_BIN": slurmctl.slurm_topo_cli()[0]},  # the copy has no venv
        )
        assert up.returncode == 0, up.stdout + up.stderr
        cluster = slurmctl.load_cluster(base, owned=True)
        env = cluster.env
        (work / "out").mkdir()
        os.chmod(work / "out", 0o1777)  # the job owner writes its output here
        out = work / "out" / "out.txt"
        p = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                "env",
                f"PATH={env['PATH']}",
                f"SLURM_CONF={env['SLURM_CONF']}",
                "timeout",
                "20",
                "sbatch",
                "--parsable",
                f"--output={out}",
                "--chdir=/tmp",
                "-N1",
                "--wrap",
                # in a release's root: the checkout's slurm-topo (the bound snapshot); native jobs run the
                # host's programs, whose own installation is not the launcher's business
                "slurm-topo --version" if cluster.release != "native" else "echo slurm-topo native",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert p.returncode == 0, p.stderr
        job = p.stdout.strip().split(";")[0]
        cluster.slurm.wait_state(job, "COMPLETED", timeout=60)
        assert "slurm-topo" in out.read_text(), out.read_text()
    finally:
        subprocess.run(
            [sys.executable, str(repo / "docker-slurm" / "cluster"), "down", "--base", str(base)],
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert slurmctl.cluster_pids(base) == []
        shutil.rmtree(closed, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
