"""What the generator does with the health records: a degraded node is kept as a last resort, a down NVLink
leaves ``Links=``.

``slurm-topo generate --records DIR`` (and ``apply``, ``show``, ``explain`` … with the same folder) reads
``DIR/health/<node>.json`` (written by ``slurm-topo health`` on each node) and changes the merged inventory
before anything is rendered, so that every output follows from one view:

* **degraded node** (the record's verdict is ``degraded`` or ``down``): it gets the node feature ``linkdeg``,
  its location features (``region_*``, ``zone_*``, ``ng_*``, ``nvl_*`` and family buckets) are left out of its
  ``NodeName=`` line and out of the submit filter's group counts — a required ``--locality`` (a bracket of
  those features) never lands on it and the filter does not count it as room — and its ``Weight`` is raised by
  :data:`DEGRADED_WEIGHT`, so Slurm gives it to other jobs (``any``, and ``prefer`` once its preferred groups
  are full) only after every healthy node of the same weight. It stays in ``topology.conf``: the tree still
  knows where it is. A hard fault also drains the node (``health-sync``); that is Slurm state, not a file.
* **measured port rate** (an ACTIVE port below its expected rate): the node's ``net_ratio`` (the slowest
  port's rate over the expected one), by which the cost model scales every network hop of the node;
* **down NVLink** (a link whose verdict is ``down``): toward another GPU (``remote: gpu``) one NVLink fewer
  between the pair; toward an NVSwitch one switch lane fewer for that GPU, and two GPUs joined through
  NVSwitches keep at most the smaller of their healthy lane counts. A pair left with none is a PCIe pair
  (``SYS``: the slowest class; the real PCIe path is not known once ``topo -m`` printed ``NV#``) — islands,
  ``Links=``, ``pick_devices`` and the cost model all read the changed matrix.

A record older than ``max_age`` seconds is ignored (the node stopped reporting: nothing is known), with a
note; a record of a node the inventory does not hold is ignored. Records are ``source: self`` and bounded by
:func:`slurm_topo.health.drain.read_health_records`; a value of the wrong type in a known field is ignored,
never trusted. Hysteresis is the node's (``slurm-topo health`` keeps a verdict until the link has been
healthy N passes), so a flapping link does not flap the files.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.model import Inventory, Node
from ..gpu.links import nvlink_count

DEGRADED_FEATURE = "linkdeg"
"""The node feature of a node whose links are degraded (``sinfo -o '%N %f'`` shows them)."""
DEGRADED_WEIGHT = 1_000_000
"""Added to a degraded node's ``Weight`` (Slurm's default weight is 1; a node's weight is at most
4 294 967 294): every healthy node of the fleet is allocated first."""
MAX_WEIGHT = 4_294_967_294
DEFAULT_MAX_AGE = 900.0
"""Seconds; ``health-sync``'s default: a record older than this says nothing."""
_VERDICTS = ("ok", "degraded", "down")


@dataclass(frozen=True, slots=True)
class HealthEffects:
    degraded: Mapping[str, str] = field(default_factory=dict)
    """Node -> why it is kept as a last resort (the first fault's reason)."""
    down_links: Mapping[str, tuple[tuple[int, int | None], ...]] = field(default_factory=dict)
    """Node -> one (GPU index, peer GPU index) per down NVLink; peer None: a lane to an NVSwitch."""
    net_ratio: Mapping[str, float] = field(default_factory=dict)
    """Node -> its slowest ACTIVE port's measured rate over the expected rate, where below 1."""
    notes: tuple[str, ...] = ()


MAX_CLOCK_SKEW = 300
"""Seconds a record may be ahead of this host's clock (``health.drain.MAX_CLOCK_SKEW``: the same rule)."""


def first_reason(record: Mapping[str, Any]) -> str:
    """The record's first degraded-or-down fault reason (cut to 160 characters), else its verdict."""
    for f in record.get("faults") or ():
        if isinstance(f, dict) and isinstance(f.get("reason"), str) and f.get("verdict") in _VERDICTS[1:]:
            return str(f["reason"])[:160]
    return str(record.get("verdict"))


def effects_of(
    records: Mapping[str, Mapping[str, Any]], *, now: float | None = None, max_age: float = DEFAULT_MAX_AGE
) -> HealthEffects:
    """The effects of the good records (name -> record, as ``read_health_records`` returns them)."""
    now = time.time() if now is None else now
    degraded: dict[str, str] = {}
    down: dict[str, tuple[tuple[int, int | None], ...]] = {}
    ratio: dict[str, float] = {}
    notes: list[str] = []
    for name, rec in sorted(records.items()):
        epoch = rec.get("time_epoch")
        if not isinstance(epoch, int) or now - epoch > max_age:
            notes.append(f"health record of {name} is older than {max_age:g} s: ignored")
            continue
        if epoch - now > MAX_CLOCK_SKEW:
            notes.append(f"health record of {name} is from the future ({epoch - now:.0f} s ahead): ignored")
            continue
        if rec.get("verdict") in ("degraded", "down"):
            degraded[name] = first_reason(rec)
        links: list[tuple[int, int | None]] = []
        for gpu in rec.get("gpus") or ():
            if not isinstance(gpu, dict) or type(gpu.get("index")) is not int:
                continue
            for lk in gpu.get("links") or ():
                if not isinstance(lk, dict) or lk.get("verdict") != "down" or lk.get("state") != "inactive":
                    continue
                peer = lk.get("peer")
                if lk.get("remote") == "gpu" and type(peer) is int:
                    links.append((gpu["index"], peer))
                elif lk.get("remote") == "nvswitch":
                    links.append((gpu["index"], None))
        if links:
            down[name] = tuple(links)
        slowest = _port_ratio(rec)
        if slowest is not None:
            ratio[name] = slowest
    return HealthEffects(degraded, down, net_ratio=ratio, notes=tuple(notes))


def _port_ratio(record: Mapping[str, Any]) -> float | None:
    """The slowest ACTIVE port's ``rate_gbps / expected_gbps`` below 1 (numbers only), else None."""
    worst = None
    for port in record.get("ports") or ():
        if not isinstance(port, dict) or port.get("state") != "ACTIVE":
            continue
        rate, expected = port.get("rate_gbps"), port.get("expected_gbps")
        if not isinstance(rate, (int, float)) or not isinstance(expected, (int, float)):
            continue
        if isinstance(rate, bool) or isinstance(expected, bool):
            continue
        if expected > 0 and 0 < rate < expected:
            r = rate / expected
            worst = r if worst is None else min(worst, r)
    return worst


def without_links(topo: Any, down: tuple[tuple[int, int | None], ...]) -> tuple[Any, list[str]]:
    """``topo`` (a GpuTopology) with the down NVLinks taken out; the notes say what changed."""
    index = {g: i for i, g in enumerate(topo.gpus)}
    matrix = [list(row) for row in topo.matrix]
    notes: list[str] = []
    if not matrix:
        return topo, notes
    switch_down: dict[int, int] = {}
    direct: dict[tuple[int, int], int] = {}
    for gpu, peer in down:
        if gpu not in index:
            notes.append(f"gpu{gpu} is not in the node's GPU topology: its down link is ignored")
        elif peer is None:
            switch_down[gpu] = switch_down.get(gpu, 0) + 1
        elif peer not in index or peer == gpu:
            notes.append(f"gpu{gpu}: down link to gpu{peer}, which is not another GPU of the node's topology")
        else:
            direct[(gpu, peer)] = direct.get((gpu, peer), 0) + 1
    # A direct link is seen from both of its ends: a pair loses as many NVLinks as the end that saw more.
    for a, b in sorted({(min(p), max(p)) for p in direct}):
        lost = max(direct.get((a, b), 0), direct.get((b, a), 0))
        i, j = index[a], index[b]
        n = max(0, nvlink_count(matrix[i][j]) - lost)
        if nvlink_count(matrix[i][j]):
            matrix[i][j] = matrix[j][i] = f"NV{n}" if n else "SYS"
        notes.append(f"gpu{a}-gpu{b}: {lost} NVLink(s) down, {n} left")
    if switch_down:
        # Through NVSwitches a pair has at most the smaller of the two GPUs' healthy lanes.
        lanes = {g: max(map(nvlink_count, matrix[index[g]]), default=0) for g in topo.gpus}  # "X": 0
        healthy = {g: max(0, lanes[g] - switch_down.get(g, 0)) for g in topo.gpus}
        for g, lost in sorted(switch_down.items()):
            notes.append(f"gpu{g}: {lost} NVSwitch lane(s) down, {healthy[g]} left")
            i = index[g]
            for k, other in enumerate(topo.gpus):
                if k == i:
                    continue
                n = min(nvlink_count(matrix[i][k]), healthy[g], healthy[other])
                cls = f"NV{n}" if n else "SYS"
                if nvlink_count(matrix[i][k]):
                    matrix[i][k] = matrix[k][i] = cls
    new = dataclasses.replace(topo, matrix=tuple(tuple(r) for r in matrix))
    return new, notes


def _raised_weight(node: Node) -> tuple[tuple[str, str], ...]:
    current = node.slurm_attr("Weight")
    try:
        base = int(current) if current is not None else 1
    except ValueError:
        base = 1
    weight = str(min(MAX_WEIGHT, base + DEGRADED_WEIGHT))
    if current is None:
        return (*node.slurm, ("Weight", weight))
    return tuple((k, weight if k == "Weight" else v) for k, v in node.slurm)


def apply_effects(inventory: Inventory, effects: HealthEffects) -> tuple[Inventory, list[str]]:
    """The inventory as the generator should see it, and a line per change (for stderr)."""
    lines = list(effects.notes)
    if not effects.degraded and not effects.down_links and not effects.net_ratio:
        return inventory, lines
    known = {n.name for n in inventory.nodes}
    for name in sorted(set(effects.degraded) | set(effects.down_links) | set(effects.net_ratio)):
        if name not in known:
            lines.append(f"health record of {name}: not in the inventory, ignored")
    nodes = []
    for node in inventory.nodes:
        changes: dict[str, Any] = {}
        if node.name in effects.degraded:
            changes["degraded"] = True
            if DEGRADED_FEATURE not in node.features:
                changes["features"] = (*node.features, DEGRADED_FEATURE)
            changes["slurm"] = _raised_weight(node)
            lines.append(
                f"{node.name}: degraded ({effects.degraded[node.name]}): feature {DEGRADED_FEATURE}, "
                "no locality features, allocated last"
            )
        if node.name in effects.net_ratio:
            changes["net_ratio"] = effects.net_ratio[node.name]  # the cost model's measured rate
        down = effects.down_links.get(node.name)
        if down and node.gpu_topology is not None:
            topo, notes = without_links(node.gpu_topology, down)
            if topo is not node.gpu_topology:
                changes["gpu_topology"] = topo
            lines.extend(f"{node.name}: {n}" for n in notes)
        nodes.append(dataclasses.replace(node, **changes) if changes else node)
    return dataclasses.replace(inventory, nodes=tuple(nodes)), lines
