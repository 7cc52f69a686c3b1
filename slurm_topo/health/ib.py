"""InfiniBand / RoCE ports from sysfs (kernel ABI ``Documentation/ABI/stable/sysfs-class-infiniband``).

``<root>/class/infiniband/<dev>/ports/<n>/`` holds ``state`` (``4: ACTIVE``), ``phys_state``
(``5: LinkUp``), ``rate`` (``400 Gb/sec (4X NDR)``), ``link_layer`` (``InfiniBand`` or ``Ethernet`` for
RoCE) and ``counters/<name>`` (running totals). A missing ``class/infiniband`` folder means no ports, not an
error; an unreadable or garbled file makes that value unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# The error counters judged by deltas, with the IBA names used by infiniband-diags' error_thresholds.
IB_ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "VL15_dropped",
)
_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(\S+)")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")
MAX_PORTS = 1024


@dataclass(frozen=True, slots=True)
class PortHealth:
    device: str
    port: int
    state: str | None  # "ACTIVE", "DOWN", "INIT", "ARMED", … (None: unreadable)
    phys_state: str | None  # "LinkUp", "Polling", "Disabled", …
    rate_gbps: float | None
    link_layer: str | None
    counters: tuple[tuple[str, int], ...]

    @property
    def key(self) -> str:
        return f"{self.device}/{self.port}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")[:256]
    except OSError:
        return None


def _state(text: str | None) -> str | None:
    m = _STATE_RE.match(text or "")
    return m[2] if m else None


def read_ports(root: Path = Path("/sys")) -> tuple[PortHealth, ...]:
    """Every port of every RDMA device under ``root/class/infiniband``, sorted by (device, port)."""
    base = root / "class" / "infiniband"
    try:
        devices = sorted(p for p in base.iterdir() if _NAME_RE.fullmatch(p.name))
    except OSError:
        return ()
    ports: list[PortHealth] = []
    for dev in devices:
        try:
            port_dirs = sorted(
                (p for p in (dev / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
            )
        except OSError:
            continue
        for pdir in port_dirs:
            if len(ports) >= MAX_PORTS:
                break
            rate = _RATE_RE.match(_read(pdir / "rate") or "")
            counters: list[tuple[str, int]] = []
            for name in IB_ERROR_COUNTERS:
                text = _read(pdir / "counters" / name)
                if text is not None and text.strip().isdigit():
                    counters.append((name, int(text.strip())))
            layer = (_read(pdir / "link_layer") or "").strip()
            ports.append(
                PortHealth(
                    device=dev.name,
                    port=int(pdir.name),
                    state=_state(_read(pdir / "state")),
                    phys_state=_state(_read(pdir / "phys_state")),
                    rate_gbps=float(rate[1]) if rate else None,
                    link_layer=layer if _NAME_RE.fullmatch(layer) else None,
                    counters=tuple(counters),
                )
            )
    return tuple(ports)
