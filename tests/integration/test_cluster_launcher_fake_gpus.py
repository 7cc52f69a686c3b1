"""docker-slurm/cluster makes as many fake GPU devices as the cluster's gres.conf names: a 16-GPU node whose
gres.conf the generator wrote (from a topo -m capture) starts, and Slurm hands out all 16 GPUs. Bad input to
`up` is one clear line."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
LEGEND = (REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt").read_text().split("\n\n", 1)[1]
HW = {"CPUs": 16, "Boards": 1, "SocketsPerBoard": 2, "CoresPerSocket": 8, "ThreadsPerCore": 1}


def topo_m(gpus: int, island: int) -> str:
    """A ``nvidia-smi topo -m`` matrix in its tab layout: islands of ``island`` GPUs (NV18 inside, SYS
    across), island k on socket k % 2."""
    head = "\t" + "\t".join(f"GPU{i}" for i in range(gpus)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [head]
    for i in range(gpus):
        cells = [" X " if i == j else ("NV18" if i // island == j // island else "SYS") for j in range(gpus)]
        socket = (i // island) % 2
        cpus = "0-7" if socket == 0 else "8-15"
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{socket}\t\tN/A")
    return "\n".join(rows) + "\n\n" + LEGEND


@pytest.fixture(scope="module")
def big_gpu_cluster(  # type: ignore[no-untyped-def]
    scratch_cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[slurmctl.Cluster]:
    """g16: 16 GPUs from a capture (the generator writes gres.conf); p12: 12 GPUs without a capture."""
    capture = tmp_path_factory.mktemp("topo") / "topo16.txt"
    capture.write_text(topo_m(16, 8))
    fleet = {
        "nodes": [
            {
                "name": "g16",
                "region": "r1",
                "zone": "r1-a",
                "gpu_type": "h200",
                "gpu_topology": str(capture),
                "slurm": {**HW, "RealMemory": 64000},
            },
            {"name": "p12", "region": "r1", "zone": "r1-a", "gpus": 12, "gpu_type": "l4", "slurm": HW},
        ]
    }
    with scratch_cluster("gpu16", fleet) as cluster:
        yield cluster


def test_a_16_gpu_node_reaches_idle_with_its_16_gpus(big_gpu_cluster: slurmctl.Cluster) -> None:
    """Both nodes are idle with every GPU the generated gres.conf gives them, and a job asking for all 16
    GPUs of g16 runs on them (Slurm's own IDX list): every device file 0-15 exists as a char device."""
    slurm = big_gpu_cluster.slurm
    gres = big_gpu_cluster.etc / "gres.conf"
    text = gres.read_text()
    assert "Links=" in text and "fake GPUs" not in text, "the generator's gres.conf, not the launcher's own"
    assert slurm.node_states() == {"g16": "idle", "p12": "idle"}
    assert "Gres=gpu:h200:16" in slurm.out("scontrol", "show", "node", "-o", "g16")
    assert "Gres=gpu:l4:12" in slurm.out("scontrol", "show", "node", "-o", "p12")
    devices = sorted(p.name for p in (big_gpu_cluster.base / "dev").iterdir())
    assert devices == sorted(f"nvidia{i}" for i in range(16))
    assert all((big_gpu_cluster.base / "dev" / d).is_char_device() for d in devices)

    job = slurm.submit("-w", "g16", "--gres=gpu:h200:16", "--wrap", "sleep 30")
    slurm.wait_state(job, "RUNNING")
    assert slurm.allocation_of(job).gpus == {"g16": tuple(range(16))}
    job12 = slurm.submit("-w", "p12", "--gres=gpu:l4:12", "--wrap", "sleep 30")
    slurm.wait_state(job12, "RUNNING")
    assert slurm.allocation_of(job12).gpus == {"p12": tuple(range(12))}
    slurm.cancel(job, job12)


@pytest.mark.parametrize("case", ["bad hostlist", "missing device", "root base outside /tmp"])
def test_up_refuses_bad_input_in_one_line(scratch_cluster, case: str) -> None:  # type: ignore[no-untyped-def]
    """A fleet whose name is no hostlist, a gres.conf naming a device that is neither on this host nor the
    launcher's to make, or a Debian-root release on a base its root cannot see: `up` exits 1 with one
    `cluster: error:` line naming the problem, and nothing of the cluster runs."""
    work = Path(f"/tmp/slurm-topo-it-bad-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o755)
    base = work / "cluster"
    try:
        if case == "root base outside /tmp":
            base = Path(f"/var/tmp/slurm-topo-it-bad-{os.getpid()}")
            args = ["--slurm", "24.11"]
            want = f"--slurm 24.11: --base {base} must be under /tmp"
        elif case == "bad hostlist":
            (work / "fleet.yaml").write_text('nodes:\n  - {name: "x[1-", region: r1, zone: r1-a}\n')
            args = ["--inventory", str(work / "fleet.yaml")]
            want = f"{work / 'fleet.yaml'}: nodes[0].name: "
        else:
            fleet = {
                "nodes": [
                    {
                        "name": "x1",
                        "region": "r1",
                        "zone": "r1-a",
                        "gpus": 1,
                        "slurm": {"NodeHostname": "localhost", "NodeAddr": "127.0.0.1", "Port": 1},
                    }
                ]
            }
            (work / "fleet.yaml").write_text(yaml.safe_dump(fleet))
            files = work / "files"
            gen = subprocess.run(
                [*slurmctl.slurm_topo_cli(), "generate", "-i", str(work / "fleet.yaml"), "-o", str(files)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert gen.returncode == 0, gen.stderr
            missing = "/nonexistent-slurm-topo/nvidia0"
            (files / "gres.conf").write_text(f"NodeName=x1 Name=gpu File={missing}\n")
            args = ["--files", str(files)]
            want = f"{files / 'gres.conf'}: File={missing} does not exist"
        p = slurmctl.launcher("up", "--base", str(base), *args, timeout=60)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "Traceback" not in p.stderr
        errors = [line for line in p.stderr.splitlines() if line.startswith("cluster: error: ")]
        assert len(errors) == 1 and want in errors[0], p.stderr
        assert slurmctl.cluster_pids(base) == []
        if case == "root base outside /tmp":
            assert not base.exists(), "refused before anything is written"
    finally:
        slurmctl.launcher("down", "--base", str(base), timeout=60)
        shutil.rmtree(work, ignore_errors=True)
