"""Read the GPUs of this node through NVML (nvidia-ml-py, ``import pynvml``), degrading to "unknown".

``read_nvml()`` imports ``pynvml`` lazily (nothing happens at import time) and accepts any module-like object
with the same functions, so tests pass a fake. Every NVML call goes through one guard: an ``NVMLError``
(NotSupported on VMs, NoPermission, FunctionNotFound on old drivers, …) becomes ``None`` plus one warning per
(call, reason) — never a crash. Only ``nvmlInit`` and the device count are required.

Per GPU, in PCI-bus order (which is Slurm's GPU index order): PCI bus id, name, UUID, minor number, NUMA node,
CPU and memory (NUMA) affinity, the remote end of every active NVLink (peer GPU by PCI bus id, or NVSwitch),
and per pair the P2P read status and the common-ancestor level (``nvmlDeviceGetTopologyCommonAncestor``:
INTERNAL or SINGLE → PIX, MULTIPLE → PXB, HOSTBRIDGE → PHB, NODE (CPU) → NODE, SYSTEM → SYS).

The :class:`GpuTopology` built from it: ``NV<n>`` where n direct NVLinks join two GPUs; GPUs with links ending
at NVSwitches are all-to-all among themselves at ``NV<min(switch links of the two)>`` (plus any direct links)
and are listed in ``nvswitch`` (Slurm's AutoDetect=nvml reads such boxes as "no links"). A pair with neither
NVLink nor a known ancestor is assumed ``SYS`` with a warning; when no pair is known at all the matrix is left
empty ("no link data"). Complexity: O(n² + n · links) NVML calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import CommandError
from .gpu_topology import GpuTopology

_ANCESTOR = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
NVML_NVLINK_MAX_LINKS = 36
"""Links asked about per GPU when the binding does not say (nvidia-ml-py 13.x says 36; older bindings say
18 and answer InvalidArgument above it, which ends the walk). The one value for every NVML reader
(health/nvml.py too)."""


@dataclass(frozen=True, slots=True)
class NvLink:
    """One active NVLink of a GPU: where it ends."""

    link: int
    remote_bus_id: str | None
    remote: str  # "gpu", "nvswitch" or "unknown"
    peer: int | None = None  # GPU index (PCI-bus order) when remote == "gpu"


@dataclass(frozen=True, slots=True)
class NvmlGpu:
    """What NVML told us about one GPU; ``None`` = unknown (the call failed or is not supported)."""

    index: int  # position in PCI-bus order
    nvml_index: int
    bus_id: str | None
    name: str | None
    uuid: str | None
    minor: int | None
    numa_node: int | None
    cpu_affinity: str | None
    numa_affinity: str | None
    nvlinks: tuple[NvLink, ...] | None  # None: NVLink state unknown


@dataclass(frozen=True, slots=True)
class NvmlReport:
    """All GPUs of the node, the per-pair answers and the derived topology."""

    gpus: tuple[NvmlGpu, ...]
    ancestor: tuple[tuple[str | None, ...], ...]  # per pair PIX…SYS, "X" on the diagonal, None unknown
    p2p_read: tuple[tuple[bool | None, ...], ...]  # per pair P2P read OK, None unknown
    topology: GpuTopology
    driver: str | None = None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus_key(bus_id: str | None) -> tuple[int, ...]:
    """``00000000:1B:00.0`` -> (domain, bus, device, function); unparseable ids sort last."""
    if not bus_id:
        return (1 << 62,)
    try:
        domain, bus, rest = bus_id.strip().lower().split(":")
        dev, fn = rest.split(".")
        return (int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        return (1 << 62,)


def _mask_to_list(words: Any, bits: int = 64) -> str | None:
    """An NVML bitmask (array of unsigned longs, lowest word first) -> ``"0-11,24-35"``; None when empty."""
    if words is None:
        return None
    ids = [w * bits + b for w, word in enumerate(list(words)) for b in range(bits) if int(word) >> b & 1]
    if not ids:
        return None
    parts: list[str] = []
    start = prev = ids[0]
    for x in ids[1:] + [-2]:
        if x != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = x
        prev = x
    return ",".join(parts)


class _Calls:
    """NVML calls that turn a missing or failing function into None and one warning per (function, why)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.error_type: type[BaseException] = getattr(nvml, "NVMLError", Exception)
        self.warnings: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def __call__(self, fn: str, *args: Any) -> Any:
        try:
            f: Callable[..., Any] = getattr(self.nvml, fn)
            return f(*args)
        except AttributeError:
            reason = "not in this nvidia-ml-py"
        except self.error_type as e:
            reason = str(e) or type(e).__name__
        if (fn, reason) not in self.seen:
            self.seen.add((fn, reason))
            self.warnings.append(f"NVML {fn}: {reason}; treated as unknown")
        return None

    def const(self, name: str, default: int) -> Any:
        return getattr(self.nvml, name, default)


def _import_pynvml() -> Any:
    try:
        # optional extra: slurm-topo[nvml]
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise CommandError(
            ["NVML (Python module pynvml)"],
            None,
            f"nvidia-ml-py is not installed ({e}); install it with `pip install 'slurm-topo[nvml]'` "
            "or `pip install nvidia-ml-py`",
        ) from e
    return pynvml


def read_nvml(nvml: Any = None) -> NvmlReport:
    """Query NVML for every GPU of this node. ``nvml``: the ``pynvml`` module (imported lazily) or a fake.

    Steps: the GPUs in PCI-bus order (:func:`_handles`), each GPU's record and NVLinks (:func:`_gpu`,
    :func:`_nvlinks`), each pair's common ancestor and P2P status (:func:`_pairs`), then the link matrix
    (:func:`_topology`)."""
    call = _Calls(_import_pynvml() if nvml is None else nvml)
    try:
        call.nvml.nvmlInit()
    except call.error_type as e:
        raise CommandError(["nvmlInit"], None, f"NVML is not available: {e}") from e
    try:
        driver = _text(call("nvmlSystemGetDriverVersion"))
        handles, bus, order = _handles(call)
        by_bus = {_bus_key(b): pos for pos, b in enumerate(bus) if b}
        gpus = [_gpu(call, h, pos, order[pos], bus[pos], by_bus) for pos, h in enumerate(handles)]
        ancestor, p2p = _pairs(call, handles)
    finally:
        call("nvmlShutdown")
    topo = _topology(gpus, ancestor, call.warnings)
    return NvmlReport(
        gpus=tuple(gpus),
        ancestor=tuple(map(tuple, ancestor)),
        p2p_read=tuple(map(tuple, p2p)),
        topology=topo,
        driver=driver,
    )


def _handles(call: _Calls) -> tuple[list[Any], list[str | None], list[int]]:
    """The GPUs' handles and bus ids in PCI-bus order (NVML's own order can differ), and NVML's index of
    each."""
    nvml = call.nvml
    count = int(nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    bus = []
    for h in handles:
        pci = call("nvmlDeviceGetPciInfo", h)
        bus.append(_text(getattr(pci, "busId", None)) if pci is not None else None)
    order = sorted(range(count), key=lambda i: (_bus_key(bus[i]), i))
    if order != list(range(count)):
        call.warnings.append("NVML device order differs from PCI-bus order; GPUs are listed in PCI-bus order")
    return [handles[i] for i in order], [bus[i] for i in order], order


def _gpu(
    call: _Calls, h: Any, pos: int, nvml_index: int, bus_id: str | None, by_bus: Mapping[tuple[int, ...], int]
) -> NvmlGpu:
    """One GPU's record: names, NUMA node, CPU and memory affinity, NVLinks."""
    # CPU/NUMA masks in 64-bit words: room for 1024 CPUs or os.cpu_count(), whichever is more
    words = max(16, -(-(os.cpu_count() or 64) // 64))
    links = _nvlinks(call, h, pos, by_bus)
    numa = call("nvmlDeviceGetNumaNodeId", h)
    return NvmlGpu(
        index=pos,
        nvml_index=nvml_index,
        bus_id=bus_id,
        name=_text(call("nvmlDeviceGetName", h)),
        uuid=_text(call("nvmlDeviceGetUUID", h)),
        minor=call("nvmlDeviceGetMinorNumber", h),
        numa_node=None if numa is None or int(numa) < 0 else int(numa),
        cpu_affinity=_mask_to_list(call("nvmlDeviceGetCpuAffinity", h, words)),
        numa_affinity=_mask_to_list(
            call("nvmlDeviceGetMemoryAffinity", h, words, call.const("NVML_AFFINITY_SCOPE_NODE", 0))
        ),
        nvlinks=tuple(links) if links is not None else None,
    )


def _nvlinks(call: _Calls, h: Any, pos: int, by_bus: Mapping[tuple[int, ...], int]) -> list[NvLink] | None:
    """A GPU's active NVLinks and what each reaches (a GPU of this node, an NVSwitch, unknown); None when
    NVML cannot tell about NVLink on it (NotSupported on VMs, PCIe boards)."""
    gpu_type = call.const("NVML_NVLINK_DEVICE_TYPE_GPU", 0)
    switch_type = call.const("NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    enabled = call.const("NVML_FEATURE_ENABLED", 1)
    links: list[NvLink] = []
    for link in range(int(call.const("NVML_NVLINK_MAX_LINKS", NVML_NVLINK_MAX_LINKS))):
        state = call("nvmlDeviceGetNvLinkState", h, link)
        if state is None:
            return None if link == 0 else links
        if state != enabled:
            continue
        rpci = call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
        rbus = _text(getattr(rpci, "busId", None)) if rpci is not None else None
        rtype = call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
        peer = by_bus.get(_bus_key(rbus)) if rbus else None
        if rtype == switch_type:
            kind = "nvswitch"
        elif peer is not None and rtype in (None, gpu_type):
            kind = "gpu"
        elif rtype is None and rbus:
            kind = "nvswitch"  # active link to a non-GPU device: the only such ends are NVSwitches
            call.warnings.append(
                f"GPU{pos} NVLink {link}: remote {rbus} is not a GPU of this node; assumed an NVSwitch"
            )
        else:
            kind = "unknown"
        links.append(NvLink(link, rbus, kind, peer if kind == "gpu" else None))
    return links


def _pairs(call: _Calls, handles: list[Any]) -> tuple[list[list[str | None]], list[list[bool | None]]]:
    """Each GPU pair's common ancestor (the PCIe path) and whether P2P reads work between them."""
    n = len(handles)
    ancestor: list[list[str | None]] = [["X" if i == j else None for j in range(n)] for i in range(n)]
    p2p: list[list[bool | None]] = [[None] * n for _ in range(n)]
    read_cap = call.const("NVML_P2P_CAPS_INDEX_READ", 0)
    ok = call.const("NVML_P2P_STATUS_OK", 0)
    for i in range(n):
        for j in range(i + 1, n):
            level = call("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            ancestor[i][j] = ancestor[j][i] = _ANCESTOR.get(int(level)) if level is not None else None
            status = call("nvmlDeviceGetP2PStatus", handles[i], handles[j], read_cap)
            p2p[i][j] = p2p[j][i] = None if status is None else status == ok
    return ancestor, p2p


def _lanes(gpus: list[NvmlGpu]) -> tuple[list[list[int]], list[int]]:
    """Active NVLinks per GPU pair (as each GPU reports them) and per GPU to NVSwitches."""
    n = len(gpus)
    direct = [[0] * n for _ in range(n)]
    to_switch = [0] * n
    for g in gpus:
        for link in g.nvlinks or ():
            if link.remote == "gpu" and link.peer is not None and link.peer != g.index:
                direct[g.index][link.peer] += 1
            elif link.remote == "nvswitch":
                to_switch[g.index] += 1
    return direct, to_switch


def _topology(gpus: list[NvmlGpu], ancestor: list[list[str | None]], warnings: list[str]) -> GpuTopology:
    """The node's link matrix from NVML: NVLink lanes between each pair (direct, plus the lanes both have to
    NVSwitches), else the PCIe path NVML names, else SYS (unknown, counted)."""
    n = len(gpus)
    direct, to_switch = _lanes(gpus)
    switched = frozenset(i for i in range(n) if to_switch[i])
    matrix: list[list[str]] = [["X"] * n for _ in range(n)]
    known = unknown = 0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            lanes = max(direct[i][j], direct[j][i])
            if i in switched and j in switched:
                lanes += min(to_switch[i], to_switch[j])
            if lanes:
                matrix[i][j] = f"NV{lanes}"
            else:
                matrix[i][j] = ancestor[i][j] or "SYS"
            if lanes or ancestor[i][j] is not None:
                known += 1
            else:
                unknown += 1
    if n > 1 and not known:
        warnings.append(
            "no GPU pair has a known link (NVLink and topology queries unsupported): no link data"
        )
        final: tuple[tuple[str, ...], ...] = ()
    else:
        if unknown:
            warnings.append(f"{unknown // 2} GPU pairs have no NVLink and an unknown PCIe path: assumed SYS")
        final = tuple(tuple(row) for row in matrix)
    return GpuTopology(
        gpus=tuple(range(n)),
        matrix=final,
        cpu_affinity=tuple(g.cpu_affinity for g in gpus),
        numa_affinity=tuple(g.numa_affinity for g in gpus),
        gpu_numa_id=tuple(None if g.numa_node is None else str(g.numa_node) for g in gpus),
        minors=tuple(g.minor for g in gpus),
        nvswitch=switched,
        warnings=tuple(warnings),
        source="nvml",
    )
