"""NVML on a real NVIDIA GPU (run on a lent machine: pytest -m gpu tests/test_gpu_nvml_real.py)."""

from __future__ import annotations

import pytest

from slurm_topo.gpu.links import islands
from slurm_topo.gpu.nvml import read_nvml
from slurm_topo.gpu.pick import pick_devices


@pytest.mark.gpu
def test_reads_real_gpu() -> None:
    """A real node reads without crashing: GPUs in PCI order, X on the diagonal, minors known, a pick works."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA driver here: {e}")
    report = read_nvml(pynvml)
    topo = report.topology
    n = len(topo.gpus)
    assert n >= 1
    assert topo.gpus == tuple(range(n))
    assert [g.index for g in report.gpus] == list(range(n))
    buses = [g.bus_id for g in report.gpus]
    assert all(buses) and buses == sorted(buses, key=lambda b: int(b.split(":")[1], 16))  # type: ignore[union-attr]
    assert all(g.name for g in report.gpus) and all(g.uuid for g in report.gpus)
    assert all(isinstance(m, int) and m >= 0 for m in topo.minors)
    assert len(set(topo.minors)) == n
    if topo.matrix:
        assert all(topo.matrix[i][i] == "X" for i in range(n))
        assert all(topo.matrix[i][j] == topo.matrix[j][i] for i in range(n) for j in range(n))
    assert sorted(g for isl in islands(topo) for g in isl) == list(range(n)) or not topo.matrix
    assert pick_devices(topo, topo.gpus, 1) == (0,)
    print(
        {
            "gpus": n,
            "matrix": topo.matrix,
            "minors": topo.minors,
            "cpu": topo.cpu_affinity,
            "numa": topo.gpu_numa_id,
            "nvswitch": sorted(topo.nvswitch),
            "warnings": topo.warnings,
        }
    )


@pytest.mark.gpu
def test_cli_reads_real_gpu_through_nvml() -> None:
    """`slurm-topo gpu parse --nvml --json` on a real node prints the same kind of object as for a capture."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "gpu", "parse", "--nvml", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 3 and "NVML" in proc.stderr:
        pytest.skip(f"no NVIDIA driver here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["gpus"] == list(range(len(doc["gpus"]))) and len(doc["gpus"]) >= 1
