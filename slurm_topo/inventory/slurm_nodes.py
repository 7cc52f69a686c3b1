"""Slurm's own node records (``scontrol show nodes``) folded into an inventory: what Slurm's definition of a
node says that the inventory does not — its hardware, its own features and the site's other ``NodeName=``
attributes — is carried over, so that the generated ``NodeName=`` line can replace the site's own.

Never carried: what the generator writes itself (location, bucket, leaf and NVLink features: ``model.
LEVEL_FEATURE_PREFIXES``; the health feature ``linkdeg`` and the weight it adds) and what Slurm keeps at run
time (a node's state but for its ``CLOUD``/``FUTURE`` configuration, its reason, boot time, load, …).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..core import hostlist
from ..core.errors import InputError, show_value
from ..core.model import (
    LABEL_RE,
    MAX_NODES,
    NODE_NAME_RE,
    SLURM_INT_KEYS,
    SLURM_NODE_KEYS,
    Inventory,
    Node,
    is_level_feature,
    natural_key,
    oversized_number,
)
from ..health.effects import DEGRADED_FEATURE, DEGRADED_WEIGHT, MAX_WEIGHT
from .entry import HARDWARE_KEYS, SLURM_VALUE_RE, hardware_problem, slurm_value_problem

# scontrol show node -o key -> NodeName= key (location never comes from Slurm's own record).
_SCONTROL_KEYS = {
    "NodeAddr": "NodeAddr",
    "NodeHostName": "NodeHostname",
    "Port": "Port",
    "CPUTot": "CPUs",
    "Boards": "Boards",
    "Sockets": "Sockets",
    "CoresPerSocket": "CoresPerSocket",
    "ThreadsPerCore": "ThreadsPerCore",
    "RealMemory": "RealMemory",
    "TmpDisk": "TmpDisk",
    "CoreSpecCount": "CoreSpecCount",
    "CPUSpecList": "CpuSpecList",
    "MemSpecLimit": "MemSpecLimit",
    "CpuBind": "CpuBind",
    "Gres": "Gres",
    "Weight": "Weight",
}

CORE_SPEC_KEYS = ("CoreSpecCount", "CpuSpecList")
"""One attribute, the cores set aside for Slurm's daemons, in two spellings. Slurm prints both once slurmd
registered (``CoreSpecCount=2 CPUSpecList=0,1`` for ``CpuSpecList=0,1``, ``CoreSpecCount=1 CPUSpecList=3``
for ``CoreSpecCount=1``): the list is carried, which names the very CPUs either spelling set aside; the count
only where Slurm prints no list. Where the inventory gives either, neither is carried."""

CONFIG_STATES = ("CLOUD", "FUTURE")
"""The parts of a node's state only its ``NodeName=`` line gives (``State=IDLE+CLOUD``, ``State=FUTURE``):
they are carried as ``State=``; every other state (IDLE, DOWN, DRAIN, …) is Slurm's run-time view and is
not."""

FEATURE_KEYS = ("AvailableFeatures", "Features", "ActiveFeatures")
"""Where Slurm's record names the node's features: the first of these keys it has (``Features`` in old
releases' output; ``ActiveFeatures`` only where no other is printed)."""


def with_slurm_nodes(
    inventory: Inventory, records: Sequence[Mapping[str, str]], source: str = "scontrol show node"
) -> Inventory:
    """Take in the nodes Slurm knows (``scontrol show node -o`` records).

    Inventory nodes get what Slurm's definition of them says and the inventory does not: the ``NodeName=``
    attributes they lack (:func:`_taken_from`), and, where the inventory gives a node no ``features``,
    Slurm's features of it less the generator's own (:func:`site_features`) — so that the include can replace
    the admin's own ``NodeName=`` lines. The inventory wins: an attribute it gives is kept, and where it gives
    a node features those are the node's features (a site feature it lacks is named in a warning). Nodes no
    inventory places become ``extra_nodes`` (the root's leaf). Every name is validated like an inventory name
    (they reach ``Nodes=`` and ``NodeName=``): a bad one raises ``InputError`` naming ``source``.
    """
    _check_slurm_names(records, source)
    by_name = {r["NodeName"]: r for r in records}
    nodes = []
    dropped: dict[tuple[str, ...], list[str]] = {}  # features Slurm has that the inventory's list lacks
    unusable: dict[str, list[str]] = {}  # Slurm's features no inventory could name
    for node in inventory.nodes:
        rec = by_name.get(node.name)
        if rec is None:
            nodes.append(node)
            continue
        carried, bad, degraded = _read_features(_features_text(rec))
        for feature in bad:
            unusable.setdefault(feature, []).append(node.name)
        have = _hardware_merged(node, _taken_from(node, rec, degraded))
        slurm = tuple((k, have[k]) for k in SLURM_NODE_KEYS if k in have)
        if not node.features:
            nodes.append(replace(node, slurm=slurm, features=carried))
            continue
        if lacking := tuple(f for f in carried if f not in node.features):
            dropped.setdefault(lacking, []).append(node.name)
        nodes.append(replace(node, slurm=slurm))
    known = {n.name for n in inventory.nodes}
    extra = tuple(sorted({*inventory.extra_nodes, *(n for n in by_name if n not in known)}, key=natural_key))
    warnings = [
        f"{source}: {hostlist.compress(names)}: Slurm's feature(s) {','.join(lacking)} not carried over: the "
        "inventory gives these nodes' features (list them there to keep them)"
        for lacking, names in dropped.items()
    ]
    warnings += [
        f"{source}: {hostlist.compress(names)}: Slurm's feature {show_value(feature)} not carried over: not "
        "1-63 characters from [A-Za-z0-9._-]"
        for feature, names in unusable.items()
    ]
    return replace(
        inventory, nodes=tuple(nodes), extra_nodes=extra, warnings=(*inventory.warnings, *warnings)
    )


def site_features(rec: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Slurm's features of a node that are the site's own (in Slurm's order, each once), and those that could
    not be carried (not a label). Left out: the generator's own — its level features (``region_*``,
    ``zone_*``, ``ng_*``, ``leaf_*``, ``nvl_*``: ``model.LEVEL_FEATURE_PREFIXES``) and the health feature
    ``linkdeg`` — which an earlier generated file gave the node and which are stale once carried."""
    carried, bad, _ = _read_features(_features_text(rec))
    return carried, bad


def _features_text(rec: Mapping[str, str]) -> str:
    return next((rec[k] for k in FEATURE_KEYS if k in rec), "")


@functools.lru_cache(maxsize=4096)
def _read_features(text: str) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """:func:`site_features` of one ``AvailableFeatures=`` value, and whether it holds ``linkdeg`` (a rack's
    nodes share one value: it is read once)."""
    carried: dict[str, None] = {}
    bad: dict[str, None] = {}
    degraded = False
    for feature in text.split(","):
        feature = feature.strip()
        degraded = degraded or feature == DEGRADED_FEATURE
        if not feature or feature == "(null)" or is_level_feature(feature) or feature == DEGRADED_FEATURE:
            continue
        if LABEL_RE.match(feature):
            carried[feature] = None
        else:
            bad[feature] = None
    return tuple(carried), tuple(bad), degraded


def _check_slurm_names(records: Sequence[Mapping[str, str]], source: str) -> None:
    """Slurm's node names, validated like an inventory's (they reach ``Nodes=`` and ``NodeName=``)."""
    if len(records) > MAX_NODES:
        raise InputError(f"{source}: {len(records)} nodes, over the limit of {MAX_NODES} nodes in all")
    for record in records:
        name = record.get("NodeName")
        if not isinstance(name, str) or not NODE_NAME_RE.match(name):
            raise InputError(
                f"{source}: node name {show_value(name)}: must be 1-64 characters from [A-Za-z0-9._-]"
            )
        if (run := oversized_number(name)) is not None:
            raise InputError(
                f"{source}: node name {show_value(name)}: number {run[:24]} is too large for Slurm's hostlist"
            )


def _taken_from(node: Node, rec: Mapping[str, str], degraded: bool) -> dict[str, str]:
    """The node's Slurm attributes with what Slurm's record adds: only attributes the node lacks, never its
    own name as an address, no Gres where the inventory counts GPUs, the specialized cores in one spelling
    (:data:`CORE_SPEC_KEYS`), ``State=`` only for ``CLOUD``/``FUTURE`` (:data:`CONFIG_STATES`), a health
    raised ``Weight`` without its raise (``degraded``: Slurm's features hold ``linkdeg``), and only values
    Slurm would load again (:func:`_loadable`)."""
    have = dict(node.slurm)
    given = set(have)
    for skey, key in _SCONTROL_KEYS.items():
        value = rec.get(skey)
        if key in have or value in (None, "", "(null)", "N/A"):
            continue
        if key in ("NodeAddr", "NodeHostname") and value == node.name:
            continue
        if key == "Gres" and node.gpus is not None:
            continue
        if key in CORE_SPEC_KEYS and (
            given & set(CORE_SPEC_KEYS) or (key == "CoreSpecCount" and rec.get("CPUSpecList"))
        ):
            continue
        if key == "Weight" and degraded:
            value = _weight_before_health(value)
            if value is None:
                continue
        if _loadable(key, value):
            have[key] = value
    if "State" not in have and (state := _config_state(rec.get("State", ""))) is not None:
        have["State"] = state
    return _specs_that_fit(have, given)


def _specs_that_fit(have: dict[str, str], given: set[str]) -> dict[str, str]:
    """Slurm's specialized CPUs and memory, carried only inside the node's hardware as merged: an inventory
    with less memory or fewer CPUs than Slurm's record would otherwise get a line slurmctld resets with an
    error (``MemSpecLimit=… is invalid``)."""
    memory, cpus = have.get("RealMemory", ""), have.get("CPUs", "")
    limits = {
        "MemSpecLimit": int(memory) if memory.isdigit() else None,
        "CoreSpecCount": int(cpus) if cpus.isdigit() else None,
        "CpuSpecList": int(cpus) if cpus.isdigit() else None,
    }
    for key, limit in limits.items():
        if key in given or key not in have or limit is None:
            continue
        value = have[key]
        top = max(int(x) for x in value.replace("-", ",").split(",")) if key == "CpuSpecList" else int(value)
        if top >= limit:
            del have[key]
    return have


@functools.lru_cache(maxsize=65536)
def _loadable(key: str, value: str) -> bool:
    """A value Slurm would load again on a ``NodeName=`` line: a plain token, an integer where Slurm wants
    one, inside what slurm.conf's parser accepts (a fleet's nodes share most values: each is checked once)."""
    return bool(
        SLURM_VALUE_RE.match(value)
        and (key not in SLURM_INT_KEYS or value.isdigit())
        and slurm_value_problem(key, value) is None
    )


def _weight_before_health(value: str) -> str | None:
    """A degraded node's weight is the generator's: its own weight plus ``DEGRADED_WEIGHT`` (health.effects),
    so the weight carried is the one before; None where that cannot be told (the sum was capped)."""
    if not value.isdigit() or len(value) > 12:
        return None
    weight = int(value)
    if weight >= MAX_WEIGHT:
        return None
    return str(weight - DEGRADED_WEIGHT) if weight >= DEGRADED_WEIGHT else value


def _config_state(state: str) -> str | None:
    """``CLOUD`` or ``FUTURE`` where Slurm's state of a node (``IDLE+CLOUD+POWERED_DOWN``) holds one of them
    (only a ``NodeName=`` line sets them), else None."""
    parts = {p for p in state.upper().replace("*", "").split("+") if p}
    found = [s for s in CONFIG_STATES if s in parts]
    return found[0] if len(found) == 1 else None


def _hardware_merged(node: Node, have: dict[str, str]) -> dict[str, str]:
    """Where the merge made a hardware combination slurmctld rejects (``Sockets=`` with
    ``SocketsPerBoard=``, counts whose product does not match ``CPUs=``): the inventory's own hardware
    keys, else none at all."""
    if hardware_problem(have) is None:
        return have
    given = dict(node.slurm)
    for key in HARDWARE_KEYS:
        if key in given:
            have[key] = given[key]
        else:
            have.pop(key, None)
    if hardware_problem(have) is not None:
        have = {k: v for k, v in have.items() if k not in HARDWARE_KEYS}
    return have
