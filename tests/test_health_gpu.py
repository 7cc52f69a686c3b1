"""`slurm-topo health` on a real NVIDIA GPU, NVML end to end, checked against nvidia-smi on the same machine
(run on a GPU machine: ``pytest -m gpu tests/test_health_gpu.py``; deselected elsewhere).

Two independent readings of the same hardware: our NVML capture against ``nvidia-smi`` (``--query-gpu``,
``nvlink -s``), so a capture that loses a GPU, misreads its bus id or counts NVLinks wrongly fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slurm_topo.health.nvml import capture_pynvml, parse_nvml_doc
from slurm_topo.health.verdict import VERDICTS

pytestmark = pytest.mark.gpu


def _smi(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    pynvml: Any = pytest.importorskip("pynvml")
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi to compare with")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        pytest.skip(f"no NVIDIA driver here: {e}")
    got = capture_pynvml(pynvml)
    assert got is not None, "NVML initialised but the capture found no NVML"
    return got


def _bus(bus_id: str) -> str:
    domain, rest = bus_id.strip().lower().split(":", 1)
    return rest if int(domain, 16) == 0 else f"{int(domain, 16):x}:{rest}"


def test_gpus_and_bus_ids_match_nvidia_smi(doc: dict[str, Any]) -> None:
    gpus = parse_nvml_doc(doc)
    proc = _smi("--query-gpu=pci.bus_id", "--format=csv,noheader")
    assert proc.returncode == 0, proc.stderr
    smi = sorted(_bus(line) for line in proc.stdout.splitlines() if line.strip())
    assert sorted(_bus(g.bus_id or "") for g in gpus) == smi and len(smi) >= 1


def test_active_nvlinks_match_nvidia_smi(doc: dict[str, Any]) -> None:
    """Per GPU: the links NVML calls active are the ones `nvidia-smi nvlink -s` shows with a speed."""
    for g in parse_nvml_doc(doc):
        proc = _smi("nvlink", "-s", "-i", str(g.index))
        smi_active = {int(m[1]) for m in re.finditer(r"Link (\d+): [\d.]+ GB/s", proc.stdout)}
        ours = {lk.link for lk in g.links if lk.active}
        assert ours == smi_active, f"gpu{g.index}: NVML {sorted(ours)}, nvidia-smi {sorted(smi_active)}"


def test_health_command_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("pynvml")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "health",
            "--node-name",
            "gpu-node",
            "--json",
            "--state",
            str(tmp_path / "state.json"),
            "--records",
            str(tmp_path),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["nvml"] == "available" and len(rec["gpus"]) >= 1
    assert rec["verdict"] in VERDICTS
    assert all(lk["verdict"] in VERDICTS for g in rec["gpus"] for lk in g["links"])
    assert json.loads((tmp_path / "health" / "gpu-node.json").read_text()) == rec
