"""One node's health pass (``slurm-topo health``): read NVML and the InfiniBand ports, judge them against
the state of the pass before, and write the record where ``health-sync`` reads it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..core.errors import OutputError
from .drain import HEALTH_SUBDIR, record_path


def write_record(records_dir: Path, record: dict[str, Any]) -> Path:
    """``DIR/health/<node>.json``, written to a hidden temporary file and renamed (readers skip hidden
    files). ``generate --records DIR`` reads only files directly in DIR, so the ``health`` folder is not
    mistaken for a location record."""
    if not records_dir.is_dir():
        raise OutputError(f"records directory {records_dir}: not a directory")
    target = record_path(records_dir, record["name"])
    try:
        (records_dir / HEALTH_SUBDIR).mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(record, sort_keys=False) + "\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from None
    return target


def node_health(
    name: str,
    *,
    nvml_from: Path | None = None,
    use_nvml: bool = True,
    nvml_module: Any = None,
    sysfs_root: Path = Path("/sys"),
    state_file: Path | None = None,
    thresholds: Any = None,
    now: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """One pass on this node: the record, and warning lines (for stderr). The state file is updated."""
    from .ib import read_ports
    from .nvml import capture_pynvml, load_nvml_file, parse_nvml_doc
    from .verdict import Thresholds, evaluate, load_state, save_state

    warnings: list[str] = []
    notes: list[str] = []
    gpus = None
    if nvml_from is not None:
        gpus = load_nvml_file(nvml_from)
    elif use_nvml:
        doc = capture_pynvml(nvml_module)
        if doc is None:
            notes.append("no NVML here (no pynvml, no driver or no GPU): ports only")
        else:
            gpus = parse_nvml_doc(doc)
    else:
        notes.append("NVML not asked (--no-nvml)")
    ports = read_ports(sysfs_root)
    if not ports:
        notes.append(f"no InfiniBand/RoCE ports under {sysfs_root}/class/infiniband")
    prev, state_notes = load_state(state_file)
    notes.extend(state_notes)
    warnings.extend(n for n in state_notes if "unreadable" in n or "not a slurm-topo" in n or "larger" in n)
    record, state = evaluate(
        name, gpus, ports, prev, thresholds or Thresholds(), now=now, notes=notes, nvml_asked=use_nvml
    )
    if state_file is not None:
        try:
            save_state(state_file, state)
        except OSError as exc:
            line = (
                f"state file {state_file}: cannot write ({exc.strerror or exc}); "
                "no deltas or hysteresis next pass"
            )
            record["notes"].append(line)
            warnings.append(line)
    return record, warnings


def health_text(record: dict[str, Any]) -> str:
    """A short human summary: the verdict, then one line per fault."""
    gpus = record["gpus"]
    lines = [
        f"{record['name']}: {record['verdict']}"
        + (" (hard fault)" if record["hard_fault"] else "")
        + f" - {len(gpus)} GPU(s), {len(record['ports'])} port(s), pass {record['pass']}"
    ]
    for g in gpus:
        if g["nvlink"] == "known":
            lines.append(
                f"  gpu{g['index']} {g['bus_id']}: {g['verdict']}, {g['active_links']} active NVLink(s), "
                f"{g['nvswitch_links']} to NVSwitch"
            )
        else:
            lines.append(f"  gpu{g['index']} {g['bus_id']}: {g['verdict']}, NVLink state unknown")
    for p in record["ports"]:
        rate = "?" if p["rate_gbps"] is None else f"{p['rate_gbps']:g}"
        lines.append(
            f"  {p['device']}/{p['port']} {p['link_layer'] or '?'}: {p['verdict'] or 'unknown'}, "
            f"{p['state'] or '?'}/{p['phys_state'] or '?'}, {rate} Gb/s"
        )
    lines.extend(f"  {f['verdict']}: {f['reason']}" for f in record["faults"])  # missing items included
    lines.extend(f"  note: {n}" for n in record["notes"])
    return "\n".join(lines) + "\n"
