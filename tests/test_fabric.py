"""NVML fabric / platform answers -> a node's NVLink domain (no GPU needed: the answers are built from the
documented ``nvmlGpuFabricInfo_v3_t`` / ``_v4_t`` and ``nvmlPlatformInfo`` structs)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from slurm_topo.gpu.fabric import node_domain, query_nvml

UUID = bytes(range(1, 17))
UUID_TEXT = "01020304-0506-0708-090a-0b0c0d0e0f10"


def v3(clique: int = 7, state: int = 3, status: int = 0, uuid: bytes = UUID, **extra: Any) -> dict[str, Any]:
    return {
        "clusterUuid": list(uuid),
        "status": status,
        "cliqueId": clique,
        "state": state,
        "healthMask": 0,
        "healthSummary": 1,
        **extra,
    }


def v4(cliques: list[tuple[int, int]], count: int | None = None, state: int = 3) -> dict[str, Any]:
    padded = [{"type": t, "id": i} for t, i in cliques] + [{"type": 0, "id": 0}] * (64 - len(cliques))
    return {
        "clusterUuid": UUID,
        "status": 0,
        "cliques": padded,
        "numCliques": len(cliques) if count is None else count,
        "state": state,
        "healthMask": 0,
        "healthSummary": 1,
    }


def platform(serial: str | bytes = "1821324000123", slot: int = 5, tray: int = 2) -> dict[str, Any]:
    return {"chassisSerialNumber": serial, "slotNumber": slot, "trayIndex": tray, "hostId": 1, "moduleId": 3}


def test_v3_completed_fabric_gives_uuid_dot_clique() -> None:
    """Four GPUs of one GB200 tray in clique 7 of one NVLink cluster: the domain GFD would label."""
    got = node_domain([v3()] * 4, [platform()] * 4)
    assert got.domain == f"{UUID_TEXT}.7" and got.found_by == "nvml fabric"


def test_v4_takes_the_first_unicast_pointer_clique() -> None:
    """cliques are sorted by type then id; POINTER_UC (type 0) is the legacy cliqueId; entries past numCliques
    are ignored."""
    assert node_domain([v4([(0, 12), (1, 4), (2, 99)])]).domain == f"{UUID_TEXT}.12"
    assert node_domain([v4([(1, 4), (2, 99)])]).domain is None
    assert node_domain([v4([(0, 12)], count=0)]).domain is None


@pytest.mark.parametrize(
    ("info", "note"),
    [
        (v3(state=2), "IN_PROGRESS, not COMPLETED"),
        (v3(state=1), "NOT_STARTED, not COMPLETED"),
        (v3(status=999), "probe failed"),
        (v3(uuid=bytes(16)), "no cluster UUID"),
    ],
)
def test_fabric_not_ready_gives_no_domain_and_a_note(info: dict[str, Any], note: str) -> None:
    """A GPU on a fabric that is not COMPLETED is in no domain yet: the chassis must not stand in for it."""
    got = node_domain([info, v3()], [platform(), platform()])
    assert got.domain is None and any(note in n for n in got.notes)


def test_gpus_in_two_cliques_give_no_domain() -> None:
    got = node_domain([v3(clique=1), v3(clique=2)])
    assert got.domain is None and "2 different NVLink cliques" in got.notes[-1]


def test_no_fabric_falls_back_to_the_rack_chassis() -> None:
    """NOT_SUPPORTED (or no fabric answer): the chassis serial names the rack; slot and tray are noted."""
    got = node_domain([v3(state=0), None], [platform(b"1821324000123\0\0"), platform()])
    assert got.domain == "chassis-1821324000123" and got.found_by == "nvml platform"
    assert "slotNumber 5, trayIndex 2" in got.notes[0]
    assert node_domain([None], [platform("bad serial!")]).domain is None
    assert node_domain([None], [platform("A"), platform("B")]).domain is None
    assert node_domain([], []).domain is None


def test_unhealthy_fabric_keeps_the_domain_with_a_note() -> None:
    got = node_domain([v3(healthSummary=3, healthMask=1)])
    assert got.domain == f"{UUID_TEXT}.7" and "LIMITED_CAPACITY" in got.notes[0]


class _Uuid(ctypes.Array):  # type: ignore[type-arg]
    _type_ = ctypes.c_ubyte
    _length_ = 16


class _FabricV3(ctypes.Structure):
    """``nvmlGpuFabricInfo_v3_t`` as nvidia-ml-py declares it (version first)."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", _Uuid),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
        ("healthSummary", ctypes.c_ubyte),
    ]


class _FakeNvml:
    """The few pynvml entry points query_nvml uses, answering with real ctypes structures."""

    c_nvmlGpuFabricInfo_v3_t = _FabricV3
    nvmlGpuFabricInfo_v3 = 3

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetGpuFabricInfoV(self, handle: int, info: _FabricV3) -> None:
        info.clusterUuid[:] = list(UUID)
        info.cliqueId, info.state, info.status, info.healthSummary = 5, 3, 0, 1

    def nvmlDeviceGetPlatformInfo(self, handle: int) -> None:
        raise RuntimeError("NotSupported")


def test_query_reads_pynvml_structures() -> None:
    assert query_nvml(_FakeNvml()).domain == f"{UUID_TEXT}.5"


def test_query_without_nvml_is_a_note() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    got = query_nvml(Broken())
    assert got.domain is None and "NVML not available" in got.notes[0]


@pytest.mark.gpu
def test_real_gpu_answers_are_read() -> None:
    """On a node with NVIDIA GPUs: NVML answers, and gives a domain or says why not (no fabric on HGX)."""
    pytest.importorskip("pynvml")
    got = query_nvml()
    assert "NVML not available" not in " ".join(got.notes)
    assert got.domain is not None or got.notes
    print(got)


# --------------------------------------------------------------------------------------- slurm-topo discover


def _discover(tmp_path: Any, **kw: Any) -> Any:
    from slurm_topo.sources.discover import discover_node

    return discover_node(
        node_name="gb01", region="dc1", zone="dc1-a", network_group="r1", dmi_root=tmp_path, **kw
    )


def test_discover_record_carries_the_nvml_domain(tmp_path: Any) -> None:
    """The node's record gets the fabric domain, says where it came from, and loads as an inventory."""
    from slurm_topo import merge, parse_inventory
    from slurm_topo.sources.discover import record_json, record_yaml

    rec = _discover(tmp_path, environ={}, nvml=_FakeNvml())
    assert rec.nvlink_domain == f"{UUID_TEXT}.5"
    assert dict(rec.found_by)["nvlink_domain"] == "nvml fabric"
    assert f'"nvlink_domain": "{UUID_TEXT}.5"' in record_json(rec)
    inv = merge([parse_inventory(record_yaml(rec))])
    assert inv.nodes[0].nvlink_domain == f"{UUID_TEXT}.5"


def test_discover_domain_from_environment_wins_and_is_validated(tmp_path: Any) -> None:
    from slurm_topo.core.errors import InputError

    rec = _discover(tmp_path, environ={"GPULAYER_NVLINK_DOMAIN": "rack-07"}, nvml=_FakeNvml())
    assert (
        rec.nvlink_domain == "rack-07" and dict(rec.found_by)["nvlink_domain"] == "env:GPULAYER_NVLINK_DOMAIN"
    )
    with pytest.raises(InputError, match="GPULAYER_NVLINK_DOMAIN"):
        _discover(tmp_path, environ={"GPULAYER_NVLINK_DOMAIN": "rack 7"})


def test_discover_without_a_domain_keeps_the_record_as_before(tmp_path: Any) -> None:
    """No fabric: no nvlink_domain key at all in the JSON (records of other fleets are unchanged)."""
    from slurm_topo.sources.discover import record_json

    class NoFabric(_FakeNvml):
        def nvmlDeviceGetGpuFabricInfoV(self, handle: int, info: _FabricV3) -> None:
            info.state = 0

    rec = _discover(tmp_path, environ={}, nvml=NoFabric())
    assert rec.nvlink_domain is None and "nvlink_domain" not in record_json(rec)
