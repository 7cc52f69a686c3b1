"""NVML on a real NVIDIA GPU, checked against nvidia-smi on the same machine (run on a GPU machine:
``pytest -m gpu tests/test_gpu_nvml_real.py``).

Every assertion compares two independent readings of the same hardware — our NVML reader against the
``nvidia-smi`` binary (``-L``, ``--query-gpu``, ``topo -m``, ``topo -p2p r``) — so a reader that loses a GPU,
misorders them, misreads an NVLink or a PCIe path, or invents an island fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest

from slurm_topo.core.hostlist import expand_numbers
from slurm_topo.gpu.links import is_nvlink, islands
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.gpu.nvml import NvmlReport, read_nvml
from slurm_topo.gpu.pick import pick_devices

pytestmark = pytest.mark.gpu


def _smi(*args: str) -> str:
    proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"nvidia-smi {' '.join(args)}: {proc.stderr or proc.stdout}"
    return proc.stdout


@pytest.fixture(scope="module")
def report() -> NvmlReport:
    pynvml: Any = pytest.importorskip("pynvml")
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi to compare with")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA driver here: {e}")
    return read_nvml(pynvml)


def _bus(bus_id: str) -> str:
    """``00000000:1B:00.0`` and ``0000:1b:00.0`` -> ``1b:00.0`` (domain 0 dropped, lower case)."""
    domain, rest = bus_id.strip().lower().split(":", 1)
    return rest if int(domain, 16) == 0 else f"{int(domain, 16):x}:{rest}"


def _p2p_read(text: str) -> dict[tuple[int, int], bool]:
    """``nvidia-smi topo -p2p r``: per GPU pair, True for ``OK``, False for any other status."""
    out: dict[tuple[int, int], bool] = {}
    for line in text.splitlines():
        m = re.match(r"\s*GPU(\d+)\s+(.*)$", line)
        if not m or "GPU" in m.group(2):
            continue
        for j, cell in enumerate(m.group(2).split()):
            if cell != "X":
                out[(int(m.group(1)), j)] = cell == "OK"
    return out


def test_gpus_are_the_ones_nvidia_smi_lists(report: NvmlReport) -> None:
    """Same GPU count as `nvidia-smi -L`, the same PCI bus ids, in PCI-bus order (Slurm's index order); names,
    UUIDs and distinct minor numbers known."""
    listed = [ln for ln in _smi("-L").splitlines() if ln.startswith("GPU ")]
    topo = report.topology
    assert len(topo.gpus) == len(listed) >= 1
    assert topo.gpus == tuple(range(len(listed)))
    smi_bus = [_bus(ln) for ln in _smi("--query-gpu=pci.bus_id", "--format=csv,noheader").splitlines() if ln]
    ours = [_bus(g.bus_id or "") for g in report.gpus]
    assert sorted(ours) == sorted(smi_bus)
    assert ours == sorted(ours, key=lambda b: [int(x, 16) for x in re.split(r"[:.]", b)])
    uuids = {ln.split("UUID: ")[1].rstrip(")") for ln in listed}
    assert {g.uuid for g in report.gpus} == uuids
    assert all(isinstance(m, int) and m >= 0 for m in topo.minors) and len(set(topo.minors)) == len(listed)


def test_links_and_islands_equal_nvidia_smi_topo_m(report: NvmlReport) -> None:
    """Per GPU pair: NVLink or not, and the NVLink count, as `nvidia-smi topo -m` prints them; the PCIe class
    wherever NVML answered it; the islands computed from NVML equal those from the printed matrix; NVML's CPU
    affinity holds every CPU nvidia-smi prints (nvidia-smi may cut it to its own cpuset)."""
    smi = parse_topo_matrix(_smi("topo", "-m"), source="nvidia-smi topo -m")
    topo = report.topology
    n = len(topo.gpus)
    assert len(smi.gpus) == n
    if not topo.matrix:
        assert n == 1 or all(report.ancestor[i][j] is None for i in range(n) for j in range(n) if i != j)
        return
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            printed, read = smi.matrix[i][j], topo.matrix[i][j]
            assert is_nvlink(printed) == is_nvlink(read), (i, j, printed, read)
            if is_nvlink(printed) or report.ancestor[i][j] is not None:
                assert read == printed, (i, j, printed, read)
    assert islands(topo) == islands(smi)
    for i in range(n):
        ours, printed_cpus = topo.cpu_affinity[i], smi.cpu_affinity[i] if smi.cpu_affinity else None
        if ours and printed_cpus:
            assert set(expand_numbers(ours)) >= set(expand_numbers(printed_cpus)), (i, ours, printed_cpus)


def test_p2p_read_status_equals_nvidia_smi(report: NvmlReport) -> None:
    """NVML's per-pair P2P read status equals `nvidia-smi topo -p2p r` on the same machine."""
    n = len(report.gpus)
    if n < 2:
        pytest.skip("one GPU: no pair to compare")
    printed = _p2p_read(_smi("topo", "-p2p", "r"))
    assert set(printed) == {(i, j) for i in range(n) for j in range(n) if i != j}
    for (i, j), ok in printed.items():
        if report.p2p_read[i][j] is not None:
            assert report.p2p_read[i][j] == ok, (i, j)


def test_pick_prefers_what_the_matrix_says(report: NvmlReport) -> None:
    """On the real matrix, a 2-GPU pick is a pair whose link is the fastest the node has (NVLink when any pair
    has one)."""
    topo = report.topology
    if len(topo.gpus) < 2 or not topo.matrix:
        pytest.skip("fewer than two GPUs with link data")
    a, b = pick_devices(topo, topo.gpus, 2)
    if any(is_nvlink(c) for row in topo.matrix for c in row):
        assert is_nvlink(topo.matrix[a][b])


def test_cli_reads_real_gpu_through_nvml(report: NvmlReport) -> None:
    """`slurm-topo gpu parse --nvml --json` prints the matrix the reader built (same GPUs, same cells)."""
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "gpu", "parse", "--nvml", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["gpus"] == list(report.topology.gpus)
    assert doc["matrix"] == [list(r) for r in report.topology.matrix]
