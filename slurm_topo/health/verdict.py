"""Thresholds, verdicts and the hysteresis state of ``slurm-topo health``.

Every GPU link, GPU-wide item (recovery action, fabric, P2P) and network port gets one verdict: ``ok``,
``degraded`` or ``down``, with reasons. ``down`` is reserved for the hard faults (``slurm-modern.md`` §5
"For us"): a GPU recovery action other than none, an inactive NVLink, a port whose state is not ACTIVE or
whose physical state is not LinkUp. Everything else that is wrong is ``degraded``.

**Deltas.** Error counters are running totals; each pass compares them with the previous pass kept in the
state file (a counter that went down was reset: its new value is the delta). The first pass has no deltas.

**Hysteresis.** An item that was ``degraded``/``down`` keeps that verdict, with the reason
``recovering: healthy k/N passes``, until it has been healthy for N passes in a row (``hysteresis``): a
flapping link is never trusted between two failures.

The state file is small JSON, replaced atomically (a hidden temporary file in the same folder, then
``os.replace``). A missing state file is a first pass; an unreadable or garbled one is a first pass too, with
a note (the health check must still report).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from .ib import PortHealth
from .nvml import RECOVERY_ACTION, GpuHealth, fabric_flags

OK, DEGRADED, DOWN = "ok", "degraded", "down"
VERDICTS = (OK, DEGRADED, DOWN)
_RANK = {OK: 0, DEGRADED: 1, DOWN: 2}
STATE_VERSION = 1
MAX_STATE_BYTES = 1024 * 1024

# Per-pass limits on InfiniBand error-counter deltas: the defaults of infiniband-diags' error_thresholds
# (the thresholds `ibqueryerrors` applies), except link_downed: one more link-down in a pass is a flap.
IB_COUNTER_LIMITS: dict[str, int] = {
    "symbol_error": 10,
    "link_error_recovery": 10,
    "link_downed": 1,
    "port_rcv_errors": 10,
    "port_rcv_remote_physical_errors": 100,
    "port_rcv_switch_relay_errors": 100,
    "local_link_integrity_errors": 10,
    "excessive_buffer_overrun_errors": 10,
    "port_xmit_discards": 100,
    "port_xmit_constraint_errors": 100,
    "port_rcv_constraint_errors": 100,
    "VL15_dropped": 100,
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Limits; every one can be set with ``--threshold KEY=VALUE``."""

    # Passes an item must be healthy in a row before it is trusted again (issue "no flapping").
    hysteresis: int = 3
    # NVIDIA Health Validation, reference/checks/nvlink: max_inactive_nvlinks = 0.
    max_inactive_nvlinks: int = 0
    # NVIDIA Health Validation expected_link_count (18 on H100/H200/B200 SXM); 0 = not checked, an inactive
    # link then counts once the GPU has other active links or the link was active on an earlier pass.
    expected_nvlinks: int = 0
    # DCGM dcgm_gpu_hardware_limits.h: DCGM_LIMIT_MAX_LWLINK_CRC_ERROR = 100.0 ("CRC errors only matter at
    # rates of 100+ per second"), applied to CRC flit + CRC data errors per second between two passes.
    nvlink_crc_per_s: float = 100.0
    # DCGM dcgm_gpu_hardware_limits.h: DCGM_LIMIT_MAX_LWLINK_ERROR = 1, applied to replay and recovery
    # errors per pass.
    nvlink_errors_per_pass: int = 1
    # Expected port rate in Gb/s (Meta GCM check_iblink compares with a manifest); 0 = the node's fastest
    # ACTIVE port of the same link layer.
    ib_expected_gbps: float = 0.0
    # The same for RoCE ports (link_layer Ethernet); 0 = the node's fastest ACTIVE Ethernet port.
    roce_expected_gbps: float = 0.0
    # A port below ratio x expected is degraded (1.0: any shortfall, e.g. 200 of 400 Gb/s).
    ib_rate_ratio: float = 1.0
    ib_counters: Mapping[str, int] = field(default_factory=lambda: dict(IB_COUNTER_LIMITS))


def parse_thresholds(pairs: tuple[str, ...] | list[str]) -> Thresholds:
    """``KEY=VALUE`` strings -> :class:`Thresholds`; ``ib.<counter>=N`` sets one counter limit."""
    t = Thresholds()
    counters = dict(t.ib_counters)
    names = {f.name: f for f in fields(Thresholds) if f.name != "ib_counters"}
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if key not in names and not (key.startswith("ib.") and key[3:] in counters):
            known = ", ".join([*names, *(f"ib.{c}" for c in counters)])
            raise InputError(f"--threshold {pair!r}: unknown key (known: {known})")
        try:
            if not sep:
                raise ValueError
            if key.startswith("ib."):
                counters[key[3:]] = int(value)
                if counters[key[3:]] < 0:
                    raise ValueError
                continue
            number: int | float = float(value) if isinstance(getattr(t, key), float) else int(value)
            if number < 0 or (key == "hysteresis" and number < 1):
                raise ValueError
            changes[key] = number
        except ValueError:
            raise InputError(
                f"--threshold {pair!r}: must be KEY=NUMBER (a number >= 0; hysteresis >= 1)"
            ) from None
    return replace(t, ib_counters=counters, **changes)


# ------------------------------------------------------------------------------------------------ state file


def load_state(path: Path | None) -> tuple[dict[str, Any], list[str]]:
    """The previous pass (empty on the first one) and notes."""
    empty: dict[str, Any] = {"version": STATE_VERSION, "pass": 0, "time": None, "counters": {}, "items": {}}
    if path is None:
        return empty, ["no state file: no counter deltas, no hysteresis"]
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            return empty, [f"state file {path}: larger than {MAX_STATE_BYTES} bytes; started afresh"]
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty, [f"state file {path}: none yet (first pass)"]
    except (OSError, ValueError, RecursionError) as exc:
        return empty, [f"state file {path}: unreadable ({type(exc).__name__}); started afresh"]
    ok = (
        isinstance(doc, dict)
        and doc.get("version") == STATE_VERSION
        and isinstance(doc.get("counters"), dict)
        and isinstance(doc.get("items"), dict)
        and isinstance(doc.get("pass"), int)
        and (doc.get("time") is None or isinstance(doc.get("time"), (int, float)))
    )
    if not ok:
        return empty, [f"state file {path}: not a slurm-topo health state; started afresh"]
    doc.setdefault("seen_active", [])
    return doc, []


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically; raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(state, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ------------------------------------------------------------------------------------------------- verdicts


def _delta(old: Any, new: int) -> int:
    if not isinstance(old, int) or isinstance(old, bool):
        return -1  # unknown
    return new - old if new >= old else new  # a counter that went down was reset


class _Pass:
    """One pass: raw verdicts, then hysteresis against the previous state."""

    def __init__(self, prev: Mapping[str, Any], thresholds: Thresholds, now: float):
        self.prev = prev
        self.t = thresholds
        self.now = now
        prev_time = prev.get("time")
        self.elapsed = now - prev_time if isinstance(prev_time, (int, float)) and now > prev_time else None
        self.counters: dict[str, dict[str, int]] = {}
        self.items: dict[str, Any] = {}
        self.faults: list[dict[str, str]] = []
        self.seen_active: set[str] = set(x for x in prev.get("seen_active", []) if isinstance(x, str))
        self.known: dict[str, list[str]] = {}

    def deltas(self, key: str, totals: tuple[tuple[str, int], ...]) -> dict[str, int]:
        self.counters[key] = dict(totals)
        old = self.prev.get("counters", {}).get(key)
        if not isinstance(old, dict):
            return {}
        return {n: d for n, v in totals if (d := _delta(old.get(n), v)) >= 0}

    def judge(self, key: str, verdict: str, reasons: list[str]) -> tuple[str, list[str]]:
        """Hysteresis: a bad item stays bad until healthy ``hysteresis`` passes in a row."""
        old = self.prev.get("items", {}).get(key)
        if verdict != OK:
            self.items[key] = {"verdict": verdict, "reasons": reasons[:8], "good": 0}
        elif isinstance(old, dict) and old.get("verdict") in (DEGRADED, DOWN):
            good = int(old.get("good", 0)) + 1 if isinstance(old.get("good"), int) else 1
            if good < self.t.hysteresis:
                verdict = str(old["verdict"])
                kept = [str(r) for r in old.get("reasons", []) if isinstance(r, str)][:8]
                reasons = [*kept, f"recovering: healthy {good}/{self.t.hysteresis} passes"]
                self.items[key] = {"verdict": verdict, "reasons": kept, "good": good}
        for reason in reasons if verdict != OK else ():
            self.faults.append({"item": key, "verdict": verdict, "reason": reason})
        return verdict, reasons


def _worst(verdicts: list[str]) -> str:
    return max(verdicts, key=lambda v: _RANK[v], default=OK)


def _gpu(p: _Pass, g: GpuHealth, by_bus: Mapping[str, GpuHealth]) -> dict[str, Any]:
    """One GPU's verdict: the worst of its NVLinks (each, then how many are active), its recovery action,
    its fabric state and its P2P over NVLink, judged in that order (each through the pass's hysteresis)."""
    prefix = f"gpu{g.index}"
    active = [lk for lk in g.links if lk.active]
    nvswitch = sum(1 for lk in active if lk.remote == "nvswitch")
    links_out, verdicts = _nvlinks(p, g, by_bus, prefix, bool(active))
    verdicts += _nvlink_count(p, g, prefix, len(active))
    action, recovery = _recovery(p, g, prefix)
    fabric_out, fabric = _fabric(p, g, prefix)
    p2p_out, p2p = _p2p(p, g, by_bus, prefix, nvswitch)
    verdicts += recovery + fabric + p2p
    known_links = [lk for lk in g.links if lk.active is not None]
    return {
        "index": g.index,
        "bus_id": g.bus_id,
        "name": g.name,
        "uuid": g.uuid,
        "nvlink": "known" if known_links else "unknown",
        "active_links": len(active),
        "nvswitch_links": nvswitch,
        "links": links_out,
        "recovery_action": action,
        "fabric": fabric_out,
        "p2p_nvlink": p2p_out,
        "verdict": _worst(verdicts),
    }


def _nvlinks(
    p: _Pass, g: GpuHealth, by_bus: Mapping[str, GpuHealth], prefix: str, any_active: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each NVLink's verdict: inactive (beyond the tolerated count, once the link is known to exist), error
    counters per pass, CRC rate; a link NVML cannot tell about is left out, never judged."""
    links_out: list[dict[str, Any]] = []
    verdicts: list[str] = []
    inactive_counted = 0
    for lk in g.links:
        key = f"{prefix}/nvlink{lk.link}"
        if g.link_count is not None and lk.link >= g.link_count:  # beyond NVML_FI_DEV_NVLINK_LINK_COUNT
            continue
        reasons: list[str] = []
        verdict = OK
        if lk.active:
            p.seen_active.add(key)
        if lk.active is False:
            known = key in p.seen_active or any_active or p.t.expected_nvlinks > 0
            if known:
                inactive_counted += 1
                if inactive_counted > p.t.max_inactive_nvlinks:
                    verdict, reasons = DOWN, [f"{key} inactive"]
        deltas = p.deltas(key, lk.errors) if lk.active else {}
        if lk.active:
            verdict, reasons = _link_errors(p, key, deltas, verdict, reasons)
        if lk.active is None:
            continue  # unknown (NotSupported on a VM, an old driver): left out, never judged
        verdict, reasons = p.judge(key, verdict, reasons)
        verdicts.append(verdict)
        peer = by_bus.get(lk.remote_bus_id or "") if lk.remote == "gpu" else None
        links_out.append(
            {
                "link": lk.link,
                "state": "active" if lk.active else "inactive",
                "remote": lk.remote,
                "remote_bus_id": lk.remote_bus_id,
                "peer": peer.index if peer is not None else None,
                "errors_delta": deltas,
                "verdict": verdict,
                "reasons": reasons,
            }
        )
    return links_out, verdicts


def _link_errors(
    p: _Pass, key: str, deltas: Mapping[str, int], verdict: str, reasons: list[str]
) -> tuple[str, list[str]]:
    """An active link's error counters this pass: replay/recovery over the per-pass limit, CRC by rate."""
    for name in ("replay", "recovery"):
        if deltas.get(name, 0) >= p.t.nvlink_errors_per_pass > 0:
            verdict = _worst([verdict, DEGRADED])
            reasons.append(f"{key} {name} errors +{deltas[name]} in a pass")
    crc = deltas.get("crc_flit", 0) + deltas.get("crc_data", 0)
    if crc and p.elapsed and crc / p.elapsed > p.t.nvlink_crc_per_s:
        verdict = _worst([verdict, DEGRADED])
        reasons.append(f"{key} CRC errors {crc / p.elapsed:.0f}/s (limit {p.t.nvlink_crc_per_s:g}/s)")
    return verdict, reasons


def _nvlink_count(p: _Pass, g: GpuHealth, prefix: str, active: int) -> list[str]:
    """Fewer active NVLinks than the thresholds expect (where NVML tells about links at all): down."""
    if not p.t.expected_nvlinks:
        return []
    if any(lk.active is not None for lk in g.links) and active < p.t.expected_nvlinks:
        why = [f"{prefix}: {active} of {p.t.expected_nvlinks} NVLinks active"]
        return [p.judge(f"{prefix}/nvlinks", DOWN, why)[0]]
    return [p.judge(f"{prefix}/nvlinks", OK, [])[0]]


def _recovery(p: _Pass, g: GpuHealth, prefix: str) -> tuple[str | None, list[str]]:
    """GPU recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): anything but none is a hard fault."""
    if g.recovery_action is None:
        return None, []
    action = RECOVERY_ACTION.get(g.recovery_action, str(g.recovery_action))
    bad = g.recovery_action != 0
    v, _ = p.judge(
        f"{prefix}/recovery", DOWN if bad else OK, [f"{prefix} recovery action {action}"] if bad else []
    )
    return action, [v]


def _fabric(p: _Pass, g: GpuHealth, prefix: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The NVLink fabric's state, status and health (where the GPU reports one): degraded unless healthy."""
    f = g.fabric
    if f is None or f.state in (None, "not_supported"):
        return None, []
    reasons = []
    if f.state != "completed":
        reasons.append(f"{prefix} fabric state {f.state}")
    if f.status not in (None, 0):
        reasons.append(f"{prefix} fabric status {f.status}")
    if f.summary in ("unhealthy", "limited_capacity"):
        reasons.append(f"{prefix} fabric health {f.summary}")
    flags = sorted(fabric_flags(f.mask)) if f.mask is not None else []
    reasons.extend(f"{prefix} fabric {flag}" for flag in flags)
    v, r = p.judge(f"{prefix}/fabric", DEGRADED if reasons else OK, reasons)
    out = {
        "version": f.version,
        "state": f.state,
        "status": f.status,
        "health_summary": f.summary,
        "health_mask": f.mask,
        "health_flags": flags,
        "clique": f.clique,
        "verdict": v,
        "reasons": r,
    }
    return out, [v]


def _p2p(
    p: _Pass, g: GpuHealth, by_bus: Mapping[str, GpuHealth], prefix: str, nvswitch: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """P2P over NVLink, between GPUs that NVLink joins (directly, or both through NVSwitches)."""
    p2p_out: list[dict[str, Any]] = []
    p2p_reasons: list[str] = []
    for bus, status in g.p2p_nvlink:
        other = by_bus.get(bus)
        if other is None:
            continue
        direct = any(lk.active and lk.remote_bus_id == bus for lk in g.links)
        switched = nvswitch > 0 and any(lk.active and lk.remote == "nvswitch" for lk in other.links)
        if not (direct or switched):
            continue
        p2p_out.append({"peer": other.index, "status": status})
        if status != 0:
            why = " (disabled by regkey)" if status == 4 else ""
            p2p_reasons.append(f"{prefix} P2P over NVLink to gpu{other.index} status {status}{why}")
    if not p2p_out:
        return p2p_out, []
    v, _ = p.judge(f"{prefix}/p2p", DEGRADED if p2p_reasons else OK, p2p_reasons)
    return p2p_out, [v]


def _port(p: _Pass, port: PortHealth, expected: float | None) -> dict[str, Any]:
    key = f"ib:{port.key}"
    reasons: list[str] = []
    verdict = OK
    if port.state is not None and port.state != "ACTIVE":
        verdict, reasons = DOWN, [f"{port.key} state {port.state}"]
    if port.phys_state is not None and port.phys_state != "LinkUp":
        verdict = DOWN
        reasons.append(f"{port.key} phys_state {port.phys_state}")
    if (
        verdict == OK
        and expected
        and port.rate_gbps is not None
        and port.rate_gbps < expected * p.t.ib_rate_ratio
    ):
        verdict = DEGRADED
        reasons.append(f"{port.key} rate {port.rate_gbps:g} Gb/s, expected {expected:g}")
    deltas = p.deltas(key, port.counters)
    for name, limit in p.t.ib_counters.items():
        if limit > 0 and deltas.get(name, 0) >= limit:
            verdict = _worst([verdict, DEGRADED])
            reasons.append(f"{port.key} {name} +{deltas[name]} in a pass (limit {limit})")
    if port.state is None or port.phys_state is None:
        verdict = _worst([verdict, DEGRADED])
        reasons.append(f"{port.key} state or phys_state unreadable")
    verdict, reasons = p.judge(key, verdict, reasons)
    return {
        "device": port.device,
        "port": port.port,
        "link_layer": port.link_layer,
        "state": port.state,
        "phys_state": port.phys_state,
        "rate_gbps": port.rate_gbps,
        "expected_gbps": expected,
        "counters_delta": deltas,
        "verdict": verdict,
        "reasons": reasons,
    }


def _missing(
    p: _Pass, gpus: tuple[GpuHealth, ...] | None, ports: tuple[PortHealth, ...], nvml_asked: bool
) -> list[dict[str, Any]]:
    known = p.prev.get("known") if isinstance(p.prev.get("known"), dict) else {}
    assert isinstance(known, dict)
    old_gpus = sorted({str(x) for x in known.get("gpus", []) if isinstance(x, str)})
    old_ports = sorted({str(x) for x in known.get("ports", []) if isinstance(x, str)})
    out: list[dict[str, Any]] = []

    def item(key: str, bad: bool, reason: str) -> None:
        v, r = p.judge(key, DOWN if bad else OK, [reason] if bad else [])
        if v != OK:
            out.append({"item": key, "verdict": v, "reasons": r})

    now_gpus = {g.bus_id for g in gpus or () if g.bus_id}
    if gpus is None:
        if nvml_asked and old_gpus:
            item("nvml", True, f"NVML unavailable; {len(old_gpus)} GPU(s) seen on earlier passes")
        elif not nvml_asked and isinstance(p.prev.get("items", {}).get("nvml"), dict):
            p.items["nvml"] = p.prev["items"]["nvml"]  # not asked: neither better nor worse
    else:
        item("nvml", False, "")
        for bus in sorted(set(old_gpus) | now_gpus):
            item(f"gpu@{bus}", bus not in now_gpus, f"GPU {bus} missing (seen on an earlier pass)")
    now_ports = {port.key for port in ports}
    for key in old_ports:
        if key not in now_ports:
            item(f"ib:{key}", True, f"{key} missing (seen on an earlier pass)")
    p.known = {"gpus": sorted(set(old_gpus) | now_gpus), "ports": sorted(set(old_ports) | now_ports)}
    return out


def evaluate(
    name: str,
    gpus: tuple[GpuHealth, ...] | None,
    ports: tuple[PortHealth, ...],
    prev: Mapping[str, Any],
    thresholds: Thresholds,
    *,
    now: float | None = None,
    notes: list[str] | None = None,
    nvml_asked: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """This pass's record and the next state. ``gpus`` None: no NVML on this node (ports only).

    A GPU (by PCI bus id) or port seen on an earlier pass and missing now is ``down`` (a GPU fallen off the
    bus, an HCA gone); so is NVML failing where GPUs were seen (``nvml_asked``: NVML was asked this pass).
    Known hardware is never forgotten: after removing it for good, delete the state file."""
    now = time.time() if now is None else now
    p = _Pass(prev, thresholds, now)
    by_bus = {g.bus_id: g for g in gpus or () if g.bus_id}
    gpus_out = [_gpu(p, g, by_bus) for g in gpus or ()]
    expected_by_layer: dict[str | None, float] = {}
    for port in ports:
        if port.state == "ACTIVE" and port.rate_gbps is not None:
            layer = port.link_layer
            expected_by_layer[layer] = max(expected_by_layer.get(layer, 0.0), port.rate_gbps)

    def expected(port: PortHealth) -> float | None:
        given = (
            thresholds.roce_expected_gbps if port.link_layer == "Ethernet" else thresholds.ib_expected_gbps
        )
        return given or expected_by_layer.get(port.link_layer)

    ports_out = [_port(p, port, expected(port)) for port in ports]
    missing_out = _missing(p, gpus, ports, nvml_asked)
    all_verdicts = [g["verdict"] for g in gpus_out] + [x["verdict"] for x in ports_out]
    all_verdicts += [m["verdict"] for m in missing_out]
    worst = _worst(all_verdicts)
    faults = sorted(p.faults, key=lambda f: -_RANK[f["verdict"]])
    record = {
        "name": name,
        "source": "self",
        "kind": "health",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "time_epoch": int(now),
        "pass": int(prev.get("pass", 0)) + 1,
        "hysteresis": thresholds.hysteresis,
        "verdict": worst,
        "hard_fault": worst == DOWN,
        "faults": faults,
        "nvml": "unavailable" if gpus is None else "available",
        "gpus": gpus_out,
        "ports": ports_out,
        "missing": missing_out,
        "notes": list(notes or []),
    }
    state = {
        "version": STATE_VERSION,
        "pass": record["pass"],
        "time": now,
        "counters": p.counters,
        "items": p.items,
        "seen_active": sorted(p.seen_active),
        "known": p.known,
    }
    return record, state
