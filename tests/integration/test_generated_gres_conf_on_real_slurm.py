"""Our gres.conf on real Slurm: accepted as written; Cores= per NVLink island keeps GPU jobs in one island."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
# real HGX capture whose CPU ids are numbered even/odd across the sockets (GPU0-3 on NUMA 0, GPU4-7 on NUMA 1)
HGX_CAPTURE = REPO / "tests" / "fixtures" / "real" / "topo" / "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt"
HGX_HW = {
    "CPUs": 224,
    "Boards": 1,
    "SocketsPerBoard": 2,
    "CoresPerSocket": 56,
    "ThreadsPerCore": 2,
    "RealMemory": 64000,
}
HW = {
    "CPUs": 16,
    "Boards": 1,
    "SocketsPerBoard": 2,
    "CoresPerSocket": 8,
    "ThreadsPerCore": 1,
    "RealMemory": 64000,
}


def sixteen_gpu_capture(path: Path) -> Path:
    """A `topo -m`-shaped capture of 16 GPUs: two DGX-1 V100 hybrid cube-meshes (the real capture's GPU block)
    joined by SYS, one per 8-core socket."""
    from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

    real = REPO / "tests" / "fixtures" / "real" / "topo" / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
    cube = parse_topo_matrix(real.read_text()).matrix
    head = "\t" + "\t".join(f"GPU{i}" for i in range(16)) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = [
        f"GPU{i}\t"
        + "\t".join(" X " if i == j else cube[i % 8][j % 8] if i // 8 == j // 8 else "SYS" for j in range(16))
        + f"\t{'0-7' if i < 8 else '8-15'}\t{i // 8}\n"
        for i in range(16)
    ]
    path.write_text(head + "".join(rows))
    return path


@pytest.fixture(scope="module")
def gpu_cluster(scratch_cluster, tmp_path_factory) -> Iterator[slurmctl.Slurm]:  # type: ignore[no-untyped-def]
    """A small cluster whose gres.conf is the generator's, from topo -m captures (8- and 16-GPU nodes)."""
    x16 = sixteen_gpu_capture(tmp_path_factory.mktemp("x16") / "two-cubes-16gpu.txt")
    with scratch_cluster(
        "gres",
        {
            "nodes": [
                {
                    "name": "gx[1-2]",
                    "region": "r1",
                    "zone": "r1-a",
                    "gpu_type": "h100",
                    "gpu_topology": str(CAPTURE),
                    "slurm": HW,
                },
                {
                    "name": "hx[1-2]",
                    "region": "r1",
                    "zone": "r1-a",
                    "gpu_type": "h100",
                    "gpu_topology": str(HGX_CAPTURE),
                    "slurm": HGX_HW,
                },
                {
                    "name": "x16",
                    "region": "r1",
                    "zone": "r1-a",
                    "gpu_type": "v100",
                    "gpu_topology": str(x16),
                    "slurm": HW,
                },
            ]
        },
        nodes_max=5,
    ) as cluster:
        yield cluster.slurm


def test_gres_conf_is_slurms_view(gpu_cluster: slurmctl.Slurm) -> None:
    """slurmctld/slurmd accept the generated gres.conf: each node reports 8 typed GPUs, and slurmd parses the
    Links= and Cores= we wrote."""
    out = gpu_cluster.out("scontrol", "show", "node", "gx1")
    assert "Gres=gpu:h100:8" in out
    assert "State=IDLE" in out
    parsed = "\n".join(_slurmd_gres(gpu_cluster, "gx1").values())
    assert "Index=0 " in parsed and "Cores=0-7" in parsed and "Links=-1,18,18,18,0,0,0,0" in parsed
    assert "Index=7 " in parsed and "Cores=8-15" in parsed and "Links=0,0,0,0,18,18,18,-1" in parsed


def _slurmd_gres(cluster: slurmctl.Slurm, node: str) -> dict[int, str]:
    """``slurmd -G -N node``: what slurmd parsed from gres.conf, one line per GPU index (the cluster's own
    slurmd, inside the release's root for a ``--slurm X.Y`` cluster)."""
    conf = cluster.env["SLURM_CONF"]
    proc = cluster.run([*cluster.daemon("slurmd"), "-G", "-N", node, "-f", conf], timeout=30, check=False)
    out: dict[int, str] = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        if "Index=" in line:
            out[int(line.split("Index=")[1].split()[0])] = line
    return out


def test_even_odd_numbered_hgx_gets_each_socket_s_cores(gpu_cluster: slurmctl.Slurm) -> None:
    """slurmd's own parse of the generated gres.conf for the HGX capture numbered even/odd: GPUs 0-3 on socket
    0's cores, GPUs 4-7 on socket 1's (socket-major arithmetic gave all eight socket 0)."""
    assert "Gres=gpu:h100:8" in gpu_cluster.out("scontrol", "show", "node", "hx1")
    parsed = _slurmd_gres(gpu_cluster, "hx1")
    assert sorted(parsed) == list(range(8)), parsed
    for index, line in parsed.items():
        want = "Cores=0-55" if index < 4 else "Cores=56-111"
        assert want in line, line


def test_sixteen_gpu_node_starts_and_runs_a_sixteen_gpu_job(gpu_cluster: slurmctl.Slurm) -> None:
    """A 16-GPU node from a generated gres.conf comes up IDLE with gpu:v100:16 (the launcher makes
    nvidia0-15), slurmd parses 16 lines with each cube's socket cores, and a 16-GPU job gets IDX 0-15."""
    node = gpu_cluster.out("scontrol", "show", "node", "x16")
    assert "Gres=gpu:v100:16" in node and "State=IDLE" in node, node
    parsed = _slurmd_gres(gpu_cluster, "x16")
    assert sorted(parsed) == list(range(16)), parsed
    assert all(("Cores=0-7" if i < 8 else "Cores=8-15") in line for i, line in parsed.items()), parsed
    job = gpu_cluster.submit("-w", "x16", "--gres=gpu:16", "-n1", "--wrap", "sleep 300")
    gpu_cluster.wait_state(job, "RUNNING")
    assert gpu_cluster.allocation_of(job).gpus["x16"] == tuple(range(16))
    gpu_cluster.quiesce()


def test_four_gpu_job_stays_in_the_free_island(gpu_cluster: slurmctl.Slurm) -> None:
    """With GPU 0 busy, Slurm 22.05's own greedy pick would take 1,2,3,4 across the sockets (slurm-facts §7);
    with our Cores= per island it takes the free island 4-7. Asserted on Slurm's IDX, not our model."""
    gpu_cluster.quiesce()
    first = gpu_cluster.submit("-w", "gx1", "--gres=gpu:1", "-n1", "--wrap", "sleep 300")
    gpu_cluster.wait_state(first, "RUNNING")
    assert gpu_cluster.allocation_of(first).gpus["gx1"] == (0,)
    second = gpu_cluster.submit("-w", "gx1", "--gres=gpu:4", "-n1", "--wrap", "sleep 300")
    gpu_cluster.wait_state(second, "RUNNING")
    assert gpu_cluster.allocation_of(second).gpus["gx1"] == (4, 5, 6, 7)
    gpu_cluster.quiesce()
