"""A node's NVLink domain from NVML: fabric info (cluster UUID + clique) first, platform info (rack
chassis) as the fallback.

Inputs are NVML's answers as plain mappings, one per GPU, with NVML's own field names, so tests build them
from the documented structs and ``query_nvml`` fills them from ``pynvml`` on a real node:

* ``nvmlGpuFabricInfo_v3_t`` (``nvmlDeviceGetGpuFabricInfoV``): ``clusterUuid`` (16 bytes), ``status``
  (``nvmlReturn_t``, 0 = success; valid only once ``state`` is COMPLETED), ``cliqueId``, ``state``
  (``NVML_GPU_FABRIC_STATE_{NOT_SUPPORTED=0, NOT_STARTED=1, IN_PROGRESS=2, COMPLETED=3}``), ``healthMask``,
  ``healthSummary`` (``{HEALTHY=1, UNHEALTHY=2, LIMITED_CAPACITY=3}``);
* ``nvmlGpuFabricInfo_v4_t``: the same without ``cliqueId``, with ``cliques`` (``numCliques`` valid entries of
  ``{type, id}``, sorted by type then id); the legacy clique id is the first entry of type
  ``NVML_GPU_FABRIC_CLIQUE_TYPE_POINTER_UC`` (0);
* ``nvmlPlatformInfo`` (``nvmlDeviceGetPlatformInfo``): ``chassisSerialNumber``, ``slotNumber``,
  ``trayIndex``, ``hostId``, ``moduleId``.

The domain is ``<cluster UUID>.<clique id>`` (the string GPU feature discovery puts in the
``nvidia.com/gpu.clique`` label, so inventories and Kubernetes labels agree) — never an InfiniBand partition.
Only a COMPLETED fabric with a success status and a non-zero UUID gives one; a fabric still starting, or
failed, gives no domain and a note (the node's GPUs are not in their NVLink domain yet). Where the GPUs have
no fabric at all (NOT_SUPPORTED, or no fabric answer) the rack chassis serial number is the domain
(``chassis-<serial>``): the GPUs of one NVL72 rack share it. All GPUs of a node must agree, else no domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.model import LABEL_RE

FABRIC_STATES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
STATE_NOT_SUPPORTED = 0
STATE_COMPLETED = 3
HEALTH_SUMMARY = {0: "NOT_SUPPORTED", 1: "HEALTHY", 2: "UNHEALTHY", 3: "LIMITED_CAPACITY"}
CLIQUE_TYPE_POINTER_UC = 0
"""``NVML_GPU_FABRIC_CLIQUE_TYPE_POINTER_UC``: the clique that replaces v3's ``cliqueId``."""
UUID_LEN = 16


@dataclass(frozen=True, slots=True)
class FabricDomain:
    """What the GPUs of one node say about their NVLink domain."""

    domain: str | None
    """``<uuid>.<clique>``, ``chassis-<serial>``, or None."""
    found_by: str | None = None
    """``nvml fabric`` or ``nvml platform``."""
    notes: tuple[str, ...] = ()


def _uuid(raw: object) -> str | None:
    """16 bytes (or 16 ints, or a UUID string) -> ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``; None when absent
    or all zero (no cluster)."""
    if isinstance(raw, str):
        text = raw.strip().lower()
        hexdigits = text.replace("-", "")
        if len(hexdigits) != 32 or any(c not in "0123456789abcdef" for c in hexdigits):
            return None
        data = bytes.fromhex(hexdigits)
    elif isinstance(raw, (bytes, bytearray)) or (
        isinstance(raw, Sequence) and all(isinstance(x, int) and 0 <= x < 256 for x in raw)
    ):
        data = bytes(raw)
    else:
        return None
    if len(data) != UUID_LEN or not any(data):
        return None
    h = data.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _int(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _clique(info: Mapping[str, Any]) -> int | None:
    """v3 ``cliqueId``, else v4's first POINTER_UC entry of ``cliques[:numCliques]``."""
    if "cliqueId" in info:
        return _int(info["cliqueId"])
    cliques = info.get("cliques")
    if not isinstance(cliques, Sequence):
        return None
    count = _int(info.get("numCliques"))
    entries = list(cliques)[: count if count is not None else len(cliques)]
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("type") == CLIQUE_TYPE_POINTER_UC:
            return _int(entry.get("id"))
    return None


def fabric_domain(info: Mapping[str, Any] | None) -> tuple[str | None, str | None, bool]:
    """One GPU's fabric answer -> (domain, note, has_fabric). ``has_fabric`` is False when the GPU is on no
    fabric (NOT_SUPPORTED or no answer): only then may the platform info stand in."""
    if info is None:
        return None, None, False
    state = _int(info.get("state"))
    if state == STATE_NOT_SUPPORTED:
        return None, None, False
    if state != STATE_COMPLETED:
        name = FABRIC_STATES.get(state, repr(info.get("state"))) if state is not None else "unknown"
        return None, f"NVLink fabric state {name}, not COMPLETED: no NVLink domain yet", True
    status = info.get("status", 0)
    if status != 0:
        return None, f"NVLink fabric probe failed (NVML status {status!r}): no NVLink domain", True
    uuid = _uuid(info.get("clusterUuid"))
    if uuid is None:
        return None, "NVLink fabric COMPLETED but with no cluster UUID: no NVLink domain", True
    clique = _clique(info)
    if clique is None:
        return None, "NVLink fabric COMPLETED but with no unicast clique id: no NVLink domain", True
    note = None
    summary = _int(info.get("healthSummary"))
    if summary not in (None, 0, 1):
        health = HEALTH_SUMMARY.get(summary, str(summary))
        note = f"NVLink fabric health {health} (mask {info.get('healthMask')})"
    return f"{uuid}.{clique}", note, True


def platform_domain(info: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """One GPU's platform answer -> (``chassis-<serial>``, note)."""
    if info is None:
        return None, None
    serial = info.get("chassisSerialNumber")
    if isinstance(serial, (bytes, bytearray)):
        serial = bytes(serial).split(b"\0", 1)[0].decode("ascii", "replace")
    if not isinstance(serial, str) or not serial.strip():
        return None, None
    domain = f"chassis-{serial.strip()}"
    if not LABEL_RE.match(domain):
        return None, "rack chassis serial number is not a usable label: no NVLink domain from it"
    where = ", ".join(
        f"{key} {info[key]}"
        for key in ("slotNumber", "trayIndex", "hostId")
        if _int(info.get(key)) is not None
    )
    return domain, f"NVLink domain from the rack chassis serial ({where})" if where else None


def node_domain(
    fabric: Sequence[Mapping[str, Any] | None], platform: Sequence[Mapping[str, Any] | None] = ()
) -> FabricDomain:
    """The node's domain from its GPUs' answers (same order in both lists; ``platform`` may be shorter)."""
    notes: list[str] = []
    domains: set[str] = set()
    on_fabric = False
    for info in fabric:
        domain, note, has_fabric = fabric_domain(info)
        on_fabric = on_fabric or has_fabric
        if note is not None and note not in notes:
            notes.append(note)
        if domain is not None:
            domains.add(domain)
    if on_fabric:
        ready = all(fabric_domain(info)[0] is not None for info in fabric)
        if len(domains) == 1 and ready:
            return FabricDomain(domains.pop(), "nvml fabric", tuple(notes))
        if len(domains) > 1:
            notes.append(f"the GPUs are in {len(domains)} different NVLink cliques: no NVLink domain")
        return FabricDomain(None, None, tuple(notes))
    chassis: set[str] = set()
    for info in platform:
        domain, note = platform_domain(info)
        if note is not None and note not in notes:
            notes.append(note)
        if domain is not None:
            chassis.add(domain)
    if len(chassis) == 1:
        return FabricDomain(chassis.pop(), "nvml platform", tuple(notes))
    if len(chassis) > 1:
        notes.append("the GPUs report different rack chassis: no NVLink domain")
    return FabricDomain(None, None, tuple(notes))


def _struct_dict(struct: Any) -> dict[str, Any]:
    """A ctypes structure from pynvml -> {field: value} (arrays as lists, nested structures as dicts)."""
    out: dict[str, Any] = {}
    for name, *_ in getattr(struct, "_fields_", ()):
        value = getattr(struct, name)
        if hasattr(value, "_fields_"):
            value = _struct_dict(value)
        elif hasattr(value, "__len__") and not isinstance(value, (bytes, str)):
            value = [_struct_dict(v) if hasattr(v, "_fields_") else v for v in value]
        out[name] = value
    return out


def query_nvml(nvml: Any = None) -> FabricDomain:
    """Ask this node's NVML (``pynvml``, imported lazily) for every GPU's fabric and platform info. No NVML,
    no GPU or an NVML error: no domain and a note, never an exception."""
    try:
        if nvml is None:
            import pynvml as nvml  # type: ignore[import-not-found,no-redef,unused-ignore]
        nvml.nvmlInit()
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return FabricDomain(None, None, (f"NVML not available ({type(exc).__name__}): no NVLink domain",))
    fabric: list[Mapping[str, Any] | None] = []
    platform: list[Mapping[str, Any] | None] = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            fabric.append(_call_fabric(nvml, handle))
            try:
                platform.append(_struct_dict(nvml.nvmlDeviceGetPlatformInfo(handle)))
            except Exception:
                platform.append(None)
    except Exception as exc:
        return FabricDomain(None, None, (f"NVML failed ({type(exc).__name__}): no NVLink domain",))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    if not fabric:
        return FabricDomain(None, None, ("no GPU: no NVLink domain",))
    return node_domain(fabric, platform)


def _call_fabric(nvml: Any, handle: Any) -> Mapping[str, Any] | None:
    """v3 through ``nvmlDeviceGetGpuFabricInfoV`` where the bindings have it, else the v1 call."""
    try:
        if hasattr(nvml, "c_nvmlGpuFabricInfo_v3_t") and hasattr(nvml, "nvmlDeviceGetGpuFabricInfoV"):
            info = nvml.c_nvmlGpuFabricInfo_v3_t()
            info.version = nvml.nvmlGpuFabricInfo_v3
            nvml.nvmlDeviceGetGpuFabricInfoV(handle, info)
        else:
            info = nvml.nvmlDeviceGetGpuFabricInfo(handle)
        return _struct_dict(info)
    except Exception:
        return None
