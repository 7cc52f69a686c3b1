"""NVML reader against fake pynvml modules: a real H200 VM, an 8-GPU NVSwitch box, a bridge pair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_topo.core.errors import CommandError
from slurm_topo.gpu.links import islands
from slurm_topo.gpu.nvml import read_nvml
from slurm_topo.gpu.pick import pick_devices

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's spelling
    def __str__(self) -> str:
        return "Not Supported"


class FakeNvml:
    """A pynvml look-alike. ``devices``: dicts with bus_id, minor, cpus, links ({link: remote bus id or
    "switch"}), numa; ``ancestor``: {(i, j): level}; any missing answer raises NVMLError_NotSupported, as NVML
    does on a VM."""

    NVMLError = NVMLError
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_P2P_CAPS_INDEX_READ = 0
    NVML_P2P_STATUS_OK = 0
    NVML_AFFINITY_SCOPE_NODE = 0

    def __init__(
        self,
        devices: list[dict[str, Any]],
        ancestor: dict[tuple[int, int], int] | None = None,
        nvlink_supported: bool = True,
        driver: str = "550.0",
    ):
        self.devices = devices
        self.ancestor = ancestor
        self.nvlink_supported = nvlink_supported
        self.driver = driver
        self.shutdown = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self.devices[h]["bus_id"].encode())

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self.devices[h].get("name", "GPU"))

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h}"

    def nvmlDeviceGetMinorNumber(self, h: int) -> int:
        return int(self.devices[h]["minor"])

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:
        if self.devices[h].get("numa") is None:
            raise NVMLError_NotSupported()
        return int(self.devices[h]["numa"])

    def nvmlDeviceGetCpuAffinity(self, h: int, words: int) -> list[int]:
        mask = sum(1 << c for c in self.devices[h]["cpus"])
        return [(mask >> (64 * w)) & (2**64 - 1) for w in range(max(words, 1))]

    def nvmlDeviceGetMemoryAffinity(self, h: int, words: int, scope: int) -> list[int]:
        if self.devices[h].get("numa") is None:
            raise NVMLError_NotSupported()
        return [1 << int(self.devices[h]["numa"])]

    def _link(self, h: int, link: int) -> str | None:
        if not self.nvlink_supported:
            raise NVMLError_NotSupported()
        return self.devices[h].get("links", {}).get(link)

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        if not self.nvlink_supported:
            raise NVMLError_NotSupported()
        return 1 if self._link(h, link) else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        remote = self._link(h, link)
        return SimpleNamespace(busId=("00000000:FF:00.0" if remote == "switch" else remote or "").encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return 2 if self._link(h, link) == "switch" else 0

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        if self.ancestor is None:
            raise NVMLError_NotSupported()
        return self.ancestor[(min(a, b), max(a, b))]

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, cap: int) -> int:
        if self.ancestor is None:
            raise NVMLError_NotSupported()
        return 0


def h200_vm() -> FakeNvml:
    """The single-H200 VM, from tests/fixtures/real/h200-vm-1gpu/nvml.json (NUMA, NVLink, topology:
    NotSupported).

    The capture printed the CPU affinity array unreadably; the same VM's topo -m says 0-15, used here."""
    record = json.loads((REAL / "h200-vm-1gpu" / "nvml.json").read_text())
    dev = record["devices"][0]
    assert dev["numa_node"].startswith("ERR NVMLError_NotSupported")
    assert dev["nvlinks"][0]["state"].startswith("ERR NVMLError_NotSupported")
    numa = None if str(dev["numa_node"]).startswith("ERR") else dev["numa_node"]
    fake = FakeNvml(
        [
            {
                "bus_id": dev["bus_id"],
                "minor": dev["minor"],
                "name": dev["name"],
                "cpus": range(16),
                "numa": numa,
            }
        ],
        ancestor=None,
        nvlink_supported=False,
        driver=record["driver"],
    )
    return fake


def test_h200_vm_not_supported_degrades_to_unknown() -> None:
    """On the real H200 VM's answers each NotSupported call becomes unknown, with a warning; no crash."""
    fake = h200_vm()
    report = read_nvml(fake)
    topo = report.topology
    assert topo.gpus == (0,)
    assert topo.matrix == (("X",),)
    assert topo.minors == (0,)
    assert topo.cpu_affinity == ("0-15",)
    assert topo.numa_affinity == (None,) and topo.gpu_numa_id == (None,)
    assert report.gpus[0].nvlinks is None
    assert report.gpus[0].bus_id == "00000000:00:06.0"
    assert report.driver == "580.159.04"
    assert any("nvmlDeviceGetNvLinkState: Not Supported" in w for w in topo.warnings)
    assert any("nvmlDeviceGetNumaNodeId: Not Supported" in w for w in topo.warnings)
    assert fake.shutdown


def nvswitch_box() -> FakeNvml:
    """8 GPUs, 12 NVLinks each to NVSwitches, listed by NVML out of PCI order; two sockets of 4."""
    buses = ["07", "0F", "47", "4E", "87", "90", "B7", "BD"]
    order = [1, 0, 2, 3, 4, 5, 7, 6]  # NVML index -> PCI position
    devices = [
        {
            "bus_id": f"00000000:{buses[p]}:00.0",
            "minor": p,
            "cpus": range(0, 48) if p < 4 else range(48, 96),
            "numa": 0 if p < 4 else 1,
            "links": {link: "switch" for link in range(12)},
        }
        for p in order
    ]
    ancestor = {
        (a, b): (40 if (order[a] < 4) == (order[b] < 4) else 50) for a in range(8) for b in range(a + 1, 8)
    }
    return FakeNvml(devices, ancestor)


def test_nvswitch_box_is_all_to_all() -> None:
    """GPUs whose NVLinks end at NVSwitches are NV<links> to each other, one island, listed in nvswitch."""
    topo = read_nvml(nvswitch_box()).topology
    assert topo.matrix == tuple(tuple("X" if i == j else "NV12" for j in range(8)) for i in range(8))
    assert topo.nvswitch == frozenset(range(8))
    assert islands(topo) == (frozenset(range(8)),)
    assert topo.minors == tuple(range(8))  # re-ordered into PCI-bus order
    assert topo.cpu_affinity == ("0-47",) * 4 + ("48-95",) * 4
    assert topo.numa_affinity == ("0",) * 4 + ("1",) * 4
    assert any("PCI-bus order" in w for w in topo.warnings)


def bridge_pair() -> FakeNvml:
    """2 PCIe GPUs joined by a 4-link bridge, plus a third GPU on the other socket without NVLink."""
    a, b, c = "00000000:17:00.0", "00000000:65:00.0", "00000000:CA:00.0"
    devices = [
        {"bus_id": a, "minor": 0, "cpus": range(8), "numa": 0, "links": {i: b for i in range(4)}},
        {"bus_id": b, "minor": 1, "cpus": range(8), "numa": 0, "links": {i: a for i in range(4)}},
        {"bus_id": c, "minor": 2, "cpus": range(8, 16), "numa": 1},
    ]
    return FakeNvml(devices, {(0, 1): 30, (0, 2): 50, (1, 2): 50})


def test_bridge_pair_counts_lanes() -> None:
    """Direct NVLinks to a peer GPU count as NV<lanes>; other pairs take the common-ancestor class."""
    report = read_nvml(bridge_pair())
    assert report.topology.matrix == (("X", "NV4", "SYS"), ("NV4", "X", "SYS"), ("SYS", "SYS", "X"))
    assert report.topology.nvswitch == frozenset()
    assert report.gpus[0].nvlinks is not None and {link.peer for link in report.gpus[0].nvlinks} == {1}
    assert report.p2p_read[0][1] is True
    assert report.ancestor[0][1] == "PHB"
    assert pick_devices(report.topology, [0, 1, 2], 2) == (0, 1)


def test_unknown_links_everywhere_means_no_link_data() -> None:
    """Several GPUs, neither NVLink nor topology answers: the matrix is empty (pickers use lowest indices)."""
    devices = [{"bus_id": f"00000000:0{i}:00.0", "minor": i, "cpus": range(4)} for i in range(3)]
    topo = read_nvml(FakeNvml(devices, None, nvlink_supported=False)).topology
    assert topo.matrix == ()
    assert pick_devices(topo, [2, 1], 1) == (1,)


def test_nvml_init_failure_is_a_command_error() -> None:
    """No driver: nvmlInit's error becomes a CommandError, not a pynvml traceback."""
    fake = h200_vm()

    def fail() -> None:
        raise NVMLError("Driver Not Loaded")

    fake.nvmlInit = fail  # type: ignore[method-assign]
    with pytest.raises(CommandError, match="Driver Not Loaded"):
        read_nvml(fake)


def test_missing_nvidia_ml_py_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nvidia-ml-py, read_nvml raises a CommandError (exit 3) whose message names the package and the
    install command, not only that an import failed."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    with pytest.raises(CommandError) as e:
        read_nvml()
    assert e.value.exit_code == 3
    assert "nvidia-ml-py is not installed" in str(e.value)
    assert "pip install 'slurm-topo[nvml]'" in str(e.value) and "pip install nvidia-ml-py" in str(e.value)


def test_cli_nvml_without_nvidia_ml_py_is_one_line_with_the_hint() -> None:
    """`slurm-topo gpu parse --nvml` where pynvml cannot be imported: exit 3, one `slurm-topo: error:` line
    with the install hint, no traceback."""
    code = (
        "import sys; sys.modules['pynvml'] = None; sys.argv = ['slurm-topo', 'gpu', 'parse', '--nvml']; "
        "from slurm_topo.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-topo: error: "), proc.stderr
    assert "pip install 'slurm-topo[nvml]'" in lines[0]
