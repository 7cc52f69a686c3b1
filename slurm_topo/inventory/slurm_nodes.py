"""Slurm's own node records (``scontrol show nodes``) folded into an inventory: hardware Slurm reports fills
what the inventory does not say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..errors import InputError, show_value
from ..model import (
    MAX_NODES,
    NODE_NAME_RE,
    SLURM_INT_KEYS,
    SLURM_NODE_KEYS,
    Inventory,
    Node,
    natural_key,
    oversized_number,
)
from .entry import HARDWARE_KEYS, SLURM_VALUE_RE, hardware_problem, slurm_value_problem

# scontrol show node -o key -> NodeName= key (hardware only; location never comes from Slurm's own record).
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
    "Gres": "Gres",
    "Weight": "Weight",
}


def with_slurm_nodes(
    inventory: Inventory, records: Sequence[Mapping[str, str]], source: str = "scontrol show node"
) -> Inventory:
    """Take in the nodes Slurm knows (``scontrol show node -o`` records).

    Inventory nodes get the hardware attributes they lack (imported once, so the include can replace the
    admin's own ``NodeName=`` lines); nodes no inventory places become ``extra_nodes`` (the root's leaf).
    Every name is validated like an inventory name (they reach ``Nodes=`` and ``NodeName=``): a bad one raises
    ``InputError`` naming ``source``.
    """
    _check_slurm_names(records, source)
    by_name = {r["NodeName"]: r for r in records}
    nodes = []
    for node in inventory.nodes:
        rec = by_name.get(node.name)
        if rec is None:
            nodes.append(node)
            continue
        have = _hardware_merged(node, _taken_from(node, rec))
        nodes.append(replace(node, slurm=tuple((k, have[k]) for k in SLURM_NODE_KEYS if k in have)))
    known = {n.name for n in inventory.nodes}
    extra = tuple(sorted({*inventory.extra_nodes, *(n for n in by_name if n not in known)}, key=natural_key))
    return replace(inventory, nodes=tuple(nodes), extra_nodes=extra)


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


def _taken_from(node: Node, rec: Mapping[str, str]) -> dict[str, str]:
    """The node's Slurm attributes with what Slurm's record adds: only attributes the node lacks, never its
    own name as an address, no Gres where the inventory counts GPUs, and only values Slurm would load again
    (a plain token, an integer where Slurm wants one)."""
    have = dict(node.slurm)
    for skey, key in _SCONTROL_KEYS.items():
        value = rec.get(skey)
        if key in have or value in (None, "", "(null)", "N/A"):
            continue
        if key in ("NodeAddr", "NodeHostname") and value == node.name:
            continue
        if key == "Gres" and node.gpus is not None:
            continue
        if (
            SLURM_VALUE_RE.match(value)
            and (key not in SLURM_INT_KEYS or value.isdigit())
            and slurm_value_problem(key, value) is None
        ):
            have[key] = value
    return have


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
