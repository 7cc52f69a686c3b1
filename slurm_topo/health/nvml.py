"""NVML link, fabric and recovery answers for ``slurm-topo health``, from pynvml or from a JSON file.

Both sources give the same document (the ``--nvml-from FILE`` format, a superset of the capture in
``tests/fixtures/real/h200-vm-1gpu/nvml.json``); :func:`parse_nvml_doc` turns it into :class:`GpuHealth`.
An NVML call that fails is recorded as the string ``"ERR <reason>"`` and read as *unknown*: never a crash,
never a verdict (a VM that hides NVLink is not a node with broken links).

Document (every key but ``devices[].index`` optional)::

    {"driver": "580.159.04",
     "devices": [{"index": 0, "name": "NVIDIA H100", "uuid": "GPU-…", "bus_id": "00000000:18:00.0",
                  "nvlink_link_count": 18,                        # NVML_FI_DEV_NVLINK_LINK_COUNT (91)
                  "nvlinks": [{"link": 0, "state": 1,              # nvmlDeviceGetNvLinkState: 1 active, 0 not
                               "remote_type": 2,                  # NVML_NVLINK_DEVICE_TYPE_: 0 GPU, 2 SWITCH
                               "remote_bus_id": "00000000:05:00.0",
                               "errors": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0,
                                          "ecc_data": 0}}],        # nvmlDeviceGetNvLinkErrorCounter 0..4
                  "p2p_nvlink": {"00000000:2A:00.0": 0},          # nvmlDeviceGetP2PStatus(…, NVLINK=2)
                  "fabric": {"version": 3, "state": 3, "status": 0, "cliqueId": 7,
                             "healthMask": 0, "healthSummary": 1}, # v4: "cliques": [{"type": t, "id": i}]
                  "recovery_action": 0}]}                         # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION

Constants are NVML's (``nvml.h`` / ``nvidia-ml-py`` ``pynvml.py``; ``docs`` of the project:
``slurm-modern.md`` §5).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..gpu.nvml import NVML_NVLINK_MAX_LINKS

NVLINK_DEVICE_TYPE = {0: "gpu", 1: "ibmnpu", 2: "nvswitch"}
NVLINK_ERROR_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")  # NVML_NVLINK_ERROR_DL_*
FABRIC_STATE = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
FABRIC_SUMMARY = {0: "not_supported", 1: "healthy", 2: "unhealthy", 3: "limited_capacity"}
# healthMask: 2-bit fields, value 1 = TRUE (the condition holds), 2 = FALSE, 0 = not supported.
FABRIC_MASK_FLAGS = {
    "degraded_bw": 0,
    "route_recovery": 2,
    "route_unhealthy": 4,
    "access_timeout_recovery": 6,
}
FABRIC_MASK_INCORRECT_CONFIG_SHIFT = 8  # 4 bits: 0 not supported, 1 none, 2.. a configuration problem
FABRIC_INCORRECT_CONFIG = {
    2: "incorrect_sysguid",
    3: "incorrect_chassis_sn",
    4: "no_partition",
    5: "insufficient_nvlinks",
}
RECOVERY_ACTION = {0: "none", 1: "gpu_reset", 2: "node_reboot", 3: "drain_p2p", 4: "drain_and_reset"}
P2P_STATUS_OK = 0
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
MAX_NVML_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LinkHealth:
    """One NVLink of one GPU, as NVML answered (``None``: unknown)."""

    link: int
    active: bool | None
    remote: str | None  # "gpu", "nvswitch", "ibmnpu" or None
    remote_bus_id: str | None
    errors: tuple[tuple[str, int], ...]  # counter name -> running total


@dataclass(frozen=True, slots=True)
class FabricHealth:
    version: int | None
    state: str | None
    status: int | None
    summary: str | None
    mask: int | None
    clique: str | None  # v3 cliqueId, or the v4 cliques as "type:id,…"


@dataclass(frozen=True, slots=True)
class GpuHealth:
    index: int
    name: str | None
    uuid: str | None
    bus_id: str | None
    links: tuple[LinkHealth, ...]
    link_count: int | None  # NVML_FI_DEV_NVLINK_LINK_COUNT, when known
    p2p_nvlink: tuple[tuple[str, int], ...]  # peer bus id -> NVML P2P status
    fabric: FabricHealth | None
    recovery_action: int | None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return None  # "ERR …", None, anything else: unknown


def _str(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str) or value.startswith("ERR ") or not value:
        return None
    return value[:128]


def fabric_flags(mask: int) -> dict[str, bool]:
    """The healthMask's 2-bit flags that say TRUE, and a configuration problem, by name."""
    found = {name: (mask >> shift) & 0x3 == 1 for name, shift in FABRIC_MASK_FLAGS.items()}
    conf = (mask >> FABRIC_MASK_INCORRECT_CONFIG_SHIFT) & 0xF
    if conf >= 2:
        found["incorrect_configuration:" + FABRIC_INCORRECT_CONFIG.get(conf, str(conf))] = True
    return {k: v for k, v in found.items() if v}


def _fabric(value: Any) -> FabricHealth | None:
    if not isinstance(value, Mapping):
        return None
    clique: str | None = None
    if _int(value.get("cliqueId")) is not None:
        clique = str(value["cliqueId"])
    cliques = value.get("cliques")
    if isinstance(cliques, list):
        parts = [
            f"{_int(c.get('type'))}:{_int(c.get('id'))}"
            for c in cliques
            if isinstance(c, Mapping) and _int(c.get("id")) is not None
        ]
        clique = ",".join(parts[:64]) or clique
    state, summary = _int(value.get("state")), _int(value.get("healthSummary"))
    return FabricHealth(
        version=_int(value.get("version")),
        state=None if state is None else FABRIC_STATE.get(state, str(state)),
        status=_int(value.get("status")),
        summary=None if summary is None else FABRIC_SUMMARY.get(summary, str(summary)),
        mask=_int(value.get("healthMask")),
        clique=clique,
    )


def parse_nvml_doc(doc: Any, source: str = "NVML") -> tuple[GpuHealth, ...]:
    """The document (see the module docstring) -> one :class:`GpuHealth` per device, in ``index`` order."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("devices"), list):
        raise InputError(f"{source}: must be an object with a 'devices' list")
    gpus: list[GpuHealth] = []
    for n, dev in enumerate(doc["devices"]):
        if not isinstance(dev, Mapping):
            raise InputError(f"{source}: devices[{n}]: must be an object")
        index = _int(dev.get("index", n))
        if index is None or index < 0:
            raise InputError(f"{source}: devices[{n}].index: must be a number >= 0")
        links: list[LinkHealth] = []
        raw_links = dev.get("nvlinks", [])
        if not isinstance(raw_links, list):
            raise InputError(f"{source}: devices[{n}].nvlinks: must be a list")
        for m, lk in enumerate(raw_links):
            if not isinstance(lk, Mapping) or _int(lk.get("link")) is None:
                raise InputError(
                    f"{source}: devices[{n}].nvlinks[{m}]: must be an object with a 'link' number"
                )
            state = _int(lk.get("state"))
            rtype = _int(lk.get("remote_type"))
            errs = lk.get("errors") if isinstance(lk.get("errors"), Mapping) else {}
            assert isinstance(errs, Mapping)
            errors = tuple(
                (name, v)
                for name in NVLINK_ERROR_COUNTERS
                if (v := _int(errs.get(name))) is not None and v >= 0
            )
            links.append(
                LinkHealth(
                    link=int(lk["link"]),
                    active=None if state is None else state == 1,
                    remote=None if rtype is None else NVLINK_DEVICE_TYPE.get(rtype, str(rtype)),
                    remote_bus_id=_str(lk.get("remote_bus_id")),
                    errors=errors,
                )
            )
        p2p_raw = dev.get("p2p_nvlink", {})
        p2p = tuple(
            (str(k), v)
            for k, val in (p2p_raw.items() if isinstance(p2p_raw, Mapping) else ())
            if (v := _int(val)) is not None
        )
        gpus.append(
            GpuHealth(
                index=index,
                name=_str(dev.get("name")),
                uuid=_str(dev.get("uuid")),
                bus_id=_str(dev.get("bus_id")),
                links=tuple(links),
                link_count=_int(dev.get("nvlink_link_count")),
                p2p_nvlink=p2p,
                fabric=_fabric(dev.get("fabric")),
                recovery_action=_int(dev.get("recovery_action")),
            )
        )
    return tuple(sorted(gpus, key=lambda g: g.index))


def load_nvml_file(path: Path) -> tuple[GpuHealth, ...]:
    """``--nvml-from FILE``: a document written by :func:`capture_pynvml` (or by hand)."""
    try:
        if path.stat().st_size > MAX_NVML_FILE_BYTES:
            raise InputError(f"{path}: larger than {MAX_NVML_FILE_BYTES} bytes")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON: {str(exc).splitlines()[0][:200]}") from None
    return parse_nvml_doc(doc, str(path))


def capture_pynvml(nvml: Any = None) -> dict[str, Any] | None:
    """Ask NVML (the ``pynvml`` module, or any object with its functions) and return the document;
    ``None`` when there is no NVML here (no pynvml, no driver, no GPU)."""
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            return None
    error_type: type[BaseException] = getattr(nvml, "NVMLError", Exception)

    def call(fn: str, *args: Any) -> Any:
        try:
            f: Callable[..., Any] = getattr(nvml, fn)
            return f(*args)
        except AttributeError:
            return "ERR FunctionNotInBindings"
        except error_type as exc:
            return f"ERR {type(exc).__name__}: {str(exc)[:80]}"

    try:
        nvml.nvmlInit()
    except error_type:
        return None
    try:
        count = call("nvmlDeviceGetCount")
        if not isinstance(count, int):
            return None
        max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", NVML_NVLINK_MAX_LINKS))
        handles = [call("nvmlDeviceGetHandleByIndex", i) for i in range(count)]
        devices: list[dict[str, Any]] = []
        bus_ids: list[str | None] = []
        for i, h in enumerate(handles):
            pci = call("nvmlDeviceGetPciInfo", h)
            bus = _str(getattr(pci, "busId", None)) if not isinstance(pci, str) else None
            bus_ids.append(bus)
            dev: dict[str, Any] = {
                "index": i,
                "name": _str(call("nvmlDeviceGetName", h)),
                "uuid": _str(call("nvmlDeviceGetUUID", h)),
                "bus_id": bus,
            }
            dev["nvlink_link_count"] = _field(nvml, call, h, NVML_FI_DEV_NVLINK_LINK_COUNT)
            links: list[dict[str, Any]] = []
            for link in range(max_links):
                state = call("nvmlDeviceGetNvLinkState", h, link)
                if isinstance(state, str):
                    if link == 0:
                        links.append({"link": 0, "state": state})
                    continue  # no such link (InvalidArgument) or not supported here
                entry: dict[str, Any] = {"link": link, "state": int(state)}
                entry["remote_type"] = call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
                rpci = call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
                entry["remote_bus_id"] = (
                    _str(getattr(rpci, "busId", None)) if not isinstance(rpci, str) else None
                )
                entry["errors"] = {
                    name: call("nvmlDeviceGetNvLinkErrorCounter", h, link, code)
                    for code, name in enumerate(NVLINK_ERROR_COUNTERS)
                }
                links.append(entry)
            dev["nvlinks"] = links
            dev["fabric"] = _fabric_info(nvml, call, h)
            action_field = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
            dev["recovery_action"] = (
                _field(nvml, call, h, int(action_field)) if action_field is not None else "ERR no field"
            )
            devices.append(dev)
        for i, dev in enumerate(devices):  # P2P over NVLink, only toward GPUs this one has links to
            p2p: dict[str, Any] = {}
            for j, other in enumerate(bus_ids):
                if j == i or other is None:
                    continue
                status = call("nvmlDeviceGetP2PStatus", handles[i], handles[j], NVML_P2P_CAPS_INDEX_NVLINK)
                if isinstance(status, int):
                    p2p[other] = status
            dev["p2p_nvlink"] = p2p
        return {"driver": _str(call("nvmlSystemGetDriverVersion")), "devices": devices}
    finally:
        try:
            nvml.nvmlShutdown()
        except error_type:
            pass


def _field(nvml: Any, call: Callable[..., Any], handle: Any, field_id: int) -> Any:
    values = call("nvmlDeviceGetFieldValues", handle, [field_id])
    if isinstance(values, str) or not values:
        return values if isinstance(values, str) else None
    v = values[0]
    if getattr(v, "nvmlReturn", 0) != 0:
        return f"ERR nvmlReturn {getattr(v, 'nvmlReturn', '?')}"
    value = getattr(v, "value", None)
    for attr in ("uiVal", "ulVal", "ullVal", "sllVal", "siVal"):
        got = getattr(value, attr, None)
        if isinstance(got, int):
            return got
    return None


def _fabric_info(nvml: Any, call: Callable[..., Any], handle: Any) -> Any:
    """``nvmlDeviceGetGpuFabricInfoV`` with the newest struct the bindings know (v4, v3, else v2)."""
    for version in (4, 3, 2):
        cls = getattr(nvml, f"c_nvmlGpuFabricInfo_v{version}_t", None)
        tag = getattr(nvml, f"nvmlGpuFabricInfo_v{version}", None)
        if cls is None or tag is None:
            continue
        info = cls()
        info.version = tag
        got = call("nvmlDeviceGetGpuFabricInfoV", handle, info)
        if isinstance(got, str):
            return got
        out: dict[str, Any] = {"version": version}
        for key in ("state", "status", "cliqueId", "healthMask", "healthSummary"):
            val = getattr(info, key, None)
            if isinstance(val, int):
                out[key] = val
        cliques = getattr(info, "cliques", None)  # v4: (type, id) pairs instead of cliqueId
        if cliques is not None:
            try:
                out["cliques"] = [
                    {"type": int(getattr(c, "type", 0)), "id": int(getattr(c, "id", 0))}
                    for c in list(cliques)[:64]
                    if int(getattr(c, "id", 0)) or int(getattr(c, "type", 0))
                ]
            except (TypeError, ValueError):
                pass
        return out
    return "ERR no fabric struct in the bindings"
