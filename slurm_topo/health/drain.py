"""``slurm-topo health-sync``: drain and resume nodes from their health records, on the controller side.

Each node runs ``slurm-topo health --records DIR`` and its record lands in ``DIR/health/<node>.json``. This
pass, run where ``scontrol`` may update nodes (the slurmctld host, as root or SlurmUser), reads every record
and asks ``scontrol show node`` once, then per node makes **at most one change**:

* the record says ``hard_fault`` and the node is not drained -> ``scontrol update NodeName=N State=DRAIN
  Reason="slurm-topo-health: <first fault>"``;
* the record is clean (the node-side hysteresis already held each fault for N healthy passes) and the node is
  drained with a reason starting ``slurm-topo-health:`` -> ``State=RESUME``;
* a drain with any other reason is an admin's (or another tool's): never lifted, never re-worded.

A record older than ``max_age`` seconds, a record of a node Slurm does not know, or a bad record changes
nothing and gets a log line. Records are untrusted (``source: self``): the name must be the file's name, the
size is bounded, and a reason copied into Slurm is cut to printable characters.

* Slurm 25.05+ with the generator's block topology ``nvl`` (topology.yaml): a node whose record is
  ``degraded`` or ``down`` and that is still in an NVLink block leaves it at once, without a reconfigure:
  ``scontrol update NodeName=N Topology=fabric:root:…:<leaf>`` (the node's path in the tree topology
  ``fabric``, read from ``scontrol show topology fabric``; the other topologies are left out, so the block
  loses the node). A reconfigure puts the node back from topology.yaml; the next pass takes it out again while
  the record says so, and ``apply --records`` writes topology.yaml without it (docs/health.md). A recovered
  node returns to its block with the next reconfigure (``apply`` makes one when the files change).

Each change is one log line (``drain n1: …``, ``resume n1: …``, ``unblock n1: …``); the drain reason (with
Slurm's own ``[user@time]``) is the trail in ``scontrol show node``. A drain is node state in slurmctld, so it
survives ``scontrol reconfigure``; should one be lost anyway (a cold start), the next pass drains again.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..access import argv as slurm_argv
from ..access.text import REASON_PREFIX, LiveBlocks, NodeState, parse_live_blocks, parse_show_node
from ..core.errors import CommandError, InputError
from ..core.model import NODE_NAME_RE
from ..plumbing.runner import Runner
from .effects import DEFAULT_MAX_AGE, HealthEffects, effects_of, first_reason

MAX_RECORD_BYTES = 256 * 1024
MAX_REASON = 160
HEALTH_SUBDIR = "health"
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:/,()+-]")


@dataclass(frozen=True, slots=True)
class Action:
    node: str
    verb: str  # "drain", "resume", "keep"
    why: str
    argv: tuple[str, ...] = ()

    def line(self) -> str:
        return f"{self.verb} {self.node}: {self.why}"


def record_path(records_dir: Path, name: str) -> Path:
    return records_dir / HEALTH_SUBDIR / f"{name}.json"


def clean_reason(text: str) -> str:
    return _UNSAFE.sub("_", text)[:MAX_REASON]


MAX_CLOCK_SKEW = 300
"""Seconds a record's ``time_epoch`` may be ahead of this host's clock (skew between nodes); a record further
in the future is refused, never taken as fresh for ever."""


def read_health_records(records_dir: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Good records by node name, and a log line per skipped one."""
    folder = records_dir / HEALTH_SUBDIR
    if not records_dir.is_dir():
        raise InputError(f"records directory {records_dir}: not a directory")
    found: dict[str, dict[str, Any]] = {}
    log: list[str] = []
    try:
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except FileNotFoundError:
        return {}, [f"{folder}: no health records yet"]
    except OSError as exc:
        raise InputError(f"{folder}: cannot read: {exc.strerror or exc}") from None
    for path in paths:
        try:
            if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
                raise ValueError(f"not a regular file of at most {MAX_RECORD_BYTES} bytes")
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("kind") != "health":
                raise ValueError("not a health record")
            name = doc.get("name")
            if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name) or name != path.stem:
                raise ValueError("'name' must be the file's name")
            if not isinstance(doc.get("hard_fault"), bool) or not isinstance(doc.get("time_epoch"), int):
                raise ValueError("'hard_fault' and 'time_epoch' are required")
            if not isinstance(doc.get("faults", []), list):
                raise ValueError("'faults' must be a list")
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            log.append(f"skip {path}: {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}")
            continue
        doc["source"] = "self"  # whatever it says
        found[name] = doc
    return found, log


def first_fault(record: dict[str, Any]) -> str:
    for f in record.get("faults", []):
        if isinstance(f, dict) and f.get("verdict") == "down" and isinstance(f.get("reason"), str):
            return clean_reason(f["reason"])
    return "hard fault"


BLOCK_TOPOLOGY = "nvl"
TREE_TOPOLOGY = "fabric"
"""The topology names ``slurm-topo generate`` writes into topology.yaml (render/topology_yaml.py)."""


def live_blocks(runner: Runner) -> LiveBlocks | None:
    """None where Slurm has no block topology ``nvl`` (before 25.05, topology.conf, no NVLink domains)."""
    try:
        blocks = runner.run(slurm_argv.show_topology(BLOCK_TOPOLOGY))
        if "BlockName=" not in blocks:
            return None
        tree = runner.run(slurm_argv.show_topology(TREE_TOPOLOGY))
        return parse_live_blocks(blocks, tree)
    except (CommandError, ValueError, KeyError):  # no such topology, or output not understood: no change
        return None


def _unblock(name: str, rec: dict[str, Any], live: LiveBlocks | None) -> Action | None:
    """Take a degraded node out of its NVLink block (25.05+), keeping its tree path; None when not needed."""
    if live is None or rec.get("verdict") not in ("degraded", "down") or name not in live.block_of:
        return None
    path = live.path_of.get(name)
    block = live.block_of[name]
    if not path:
        return Action(name, "keep", f"degraded, in block {block}, but not in topology {TREE_TOPOLOGY}")
    topo = ":".join((TREE_TOPOLOGY, *path))
    why = f"{clean_reason(first_reason(rec))}; leaves block {block}"
    return Action(name, "unblock", why, tuple(slurm_argv.update_node(name, ("Topology", topo))))


def _reblock(name: str, rec: dict[str, Any], node: NodeState, live: LiveBlocks | None) -> Action | None:
    """Put a node that is healthy again (its record's verdict ``ok``: the node's hysteresis has passed) back
    into the NVLink block its ``nvl_<domain>`` feature names, live (``Topology=nvl:<block>,fabric:<path>``);
    None when it is in a block, has no domain, or Slurm has no such block."""
    if live is None or rec.get("verdict") != "ok" or name in live.block_of:
        return None
    home = next((f for f in node.features if f.startswith("nvl_") and f in live.blocks), None)
    path = live.path_of.get(name)
    if home is None or not path:
        return None
    topo = f"{BLOCK_TOPOLOGY}:{home},{':'.join((TREE_TOPOLOGY, *path))}"
    why = f"healthy for {rec.get('hysteresis', '?')} passes; back into block {home}"
    return Action(name, "reblock", why, tuple(slurm_argv.update_node(name, ("Topology", topo))))


def plan(
    records: dict[str, dict[str, Any]],
    nodes: dict[str, NodeState],
    *,
    now: float,
    max_age: float,
    live: LiveBlocks | None = None,
) -> list[Action]:
    """At most one action per node, in name order (a drain or resume first; leaving a block the pass
    after)."""
    actions: list[Action] = []
    for name in sorted(records):
        rec = records[name]
        node = nodes.get(name)
        if node is None:
            actions.append(Action(name, "keep", "not a node of this cluster"))
            continue
        age = now - rec["time_epoch"]
        if age < -MAX_CLOCK_SKEW:
            actions.append(
                Action(
                    name,
                    "keep",
                    f"record is from the future ({-age:.0f} s ahead, more than {MAX_CLOCK_SKEW} s of clock "
                    "skew): refused; nothing changed",
                )
            )
            continue
        if age > max_age:
            actions.append(
                Action(name, "keep", f"record is {age:.0f} s old (max {max_age:g} s); nothing changed")
            )
            continue
        unblock = _unblock(name, rec, live)
        if rec["hard_fault"]:
            if node.drained:
                who = "health check" if node.ours else "admin"
                actions.append(unblock or Action(name, "keep", f"hard fault, already drained ({who})"))
                continue
            reason = f"{REASON_PREFIX} {first_fault(rec)}"
            argv = tuple(slurm_argv.update_node(name, ("State", "DRAIN"), ("Reason", reason)))
            actions.append(Action(name, "drain", reason, argv))
        elif node.ours:
            why = f"healthy for {rec.get('hysteresis', '?')} passes"
            resume = tuple(slurm_argv.update_node(name, ("State", "RESUME")))
            actions.append(Action(name, "resume", why, resume))
        elif unblock is not None:
            actions.append(unblock)
        elif (reblock := _reblock(name, rec, node, live)) is not None and not node.drained:
            actions.append(reblock)
        elif node.drained:
            actions.append(Action(name, "keep", "drained by an admin; never lifted here"))
    return actions


class SyncError(CommandError):
    """A pass in which at least one update failed (the first failure's argv and status); the other nodes
    still got theirs. ``actions`` is the whole plan tried, ``failed`` the actions whose update failed."""

    def __init__(self, first: CommandError, actions: list[Action], failed: list[Action]):
        super().__init__(first.argv, first.returncode, first.stderr, timeout=first.timeout)
        self.actions = actions
        self.failed = failed


def sync(
    records_dir: Path,
    runner: Runner,
    *,
    max_age: float = 900.0,
    dry_run: bool = False,
    now: float | None = None,
    log: list[str] | None = None,
) -> list[Action]:
    """One pass: read the records and Slurm's nodes, apply the plan (unless ``dry_run``). An update that
    fails is logged and the pass goes on; then :class:`SyncError` (a :class:`CommandError`) carries the
    plan and which of its actions failed."""
    out = log if log is not None else []
    records, skipped = read_health_records(records_dir)
    out.extend(skipped)
    nodes = parse_show_node(runner.run(slurm_argv.show_nodes(one_line=False))) if records else {}
    live = live_blocks(runner) if records else None
    actions = plan(records, nodes, now=time.time() if now is None else now, max_age=max_age, live=live)
    first: CommandError | None = None
    failed: list[Action] = []
    for action in actions:
        if action.argv and not dry_run:
            try:
                runner.run(list(action.argv))
            except CommandError as exc:  # the other nodes still get their pass
                out.append(f"failed {action.line()}: {str(exc).splitlines()[0][:200]}")
                first = first or exc
                failed.append(action)
                continue
        out.append(action.line())
    if first is not None:
        raise SyncError(first, actions, failed)
    return actions


def changes(actions: Iterable[Action]) -> list[Action]:
    return [a for a in actions if a.argv]


def load_effects(
    records_dir: Path, *, now: float | None = None, max_age: float = DEFAULT_MAX_AGE
) -> HealthEffects:
    """Read ``records_dir/health/`` (missing: no effects) and judge it."""
    if not (records_dir / HEALTH_SUBDIR).is_dir():
        return HealthEffects()
    found, log = read_health_records(records_dir)
    effects = effects_of(found, now=now, max_age=max_age)
    return dataclasses.replace(effects, notes=(*log, *effects.notes))
