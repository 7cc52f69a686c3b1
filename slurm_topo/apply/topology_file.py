"""The topology file of a set (pure): which one Slurm reads, its kind, lint, block order, the nodes it places,
the ``TopologyPlugin`` it needs, and what ``scontrol show topology`` must show for it.

A set has one topology file: ``topology.conf`` in tree syntax (``topology/tree``) or block syntax
(``topology/block``, 23.11-24.11), or ``topology.yaml`` (25.05+: several topologies, partition ``Topology=``).
Once ``topology.yaml`` exists Slurm 25.05+ ignores topology.conf, so the set that writes the yaml retires
topology.conf in the same commit (and the reverse), and both are journaled as one set.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..core import hostlist
from ..core.errors import HostlistError, ParseError
from ..slurmconfig.lint import BlockTopology, is_block_text, lint_blocks, lint_file, parse_block_topologies
from ..slurmconfig.slurmconf import logical_lines, parse_topology_conf
from .base import TOPOLOGY, TOPOLOGY_YAML
from .parse import topology_difference

TREE, BLOCK, YAML = "tree", "block", "yaml"
PLUGIN = {TREE: "topology/tree", BLOCK: "topology/block"}
"""The ``TopologyPlugin`` a topology.conf of that kind needs (topology.yaml needs none)."""
YAML_SINCE = (25, 5)
PLUGIN_SWITCH_AT_RECONFIGURE_SINCE = (24, 11)
"""A ``scontrol reconfigure`` re-executes slurmctld, which then loads another ``TopologyPlugin`` from
slurm.conf (topology/tree -> topology/block checked live on 24.11.5; earlier releases: restart)."""
_PLUGIN_RE = re.compile(r"^\s*TopologyPlugin\s*=\s*(\S+)", re.I)


def kind(name: str, data: bytes | None) -> str | None:
    """``tree``, ``block`` or ``yaml`` for a topology file's bytes (None: absent)."""
    if data is None:
        return None
    if name == TOPOLOGY_YAML:
        return YAML
    return BLOCK if is_block_text(data.decode("utf-8", "replace")) else TREE


def active(
    files: Mapping[str, bytes | None], version: tuple[int, int] | None = None
) -> tuple[str, bytes] | None:
    """The topology file slurmctld reads from ``files``: topology.yaml when present (25.05+; an older
    ``version`` never reads it), else topology.conf; None when neither is there."""
    names = (TOPOLOGY,) if version is not None and version < YAML_SINCE else (TOPOLOGY_YAML, TOPOLOGY)
    for name in names:
        data = files.get(name)
        if data is not None:
            return name, data
    return None


def active_kind(files: Mapping[str, bytes | None]) -> str | None:
    found = active(files)
    return kind(*found) if found else None


def lint_problems(name: str, data: bytes, version: tuple[int, int] | None) -> list[str]:
    """``slurm-topo lint``'s problems of a new topology file (tree, block or yaml), one line each."""
    try:
        problems = lint_file(data.decode(), source=name, slurm_version=version)
    except ParseError as exc:
        return [str(exc)]
    return [f"{name}: {p.code}: {p.message}" for p in problems]


def _blocks(name: str, data: bytes) -> list[BlockTopology]:
    if kind(name, data) == TREE:
        return []
    try:
        return [t for t in parse_block_topologies(data.decode(), source=name) if t.blocks]
    except ParseError:
        return []


def moved_blocks(old: tuple[str, bytes] | None, new: tuple[str, bytes] | None) -> list[str]:
    """Blocks of the live topology file that the new one puts at another position or drops from before the
    last one (aggregated blocks are runs of consecutive base blocks: a moved block changes which domains a
    job may combine). A topology.conf's blocks (``default``) are compared with the only block topology of a
    topology.yaml that replaces it."""
    if old is None or new is None:
        return []
    before, after = _blocks(*old), _blocks(*new)
    if not before or not after:
        return []
    if len(before) == 1 and len(after) == 1 and before[0].name != after[0].name:
        before = [BlockTopology(after[0].name, before[0].blocks, before[0].sizes, before[0].levels)]
    problems = lint_blocks(after, previous=before)
    return [p.message for p in problems if p.code in ("block-moved", "block-removed")]


def placed_nodes(name: str, data: bytes) -> set[str] | None:
    """The nodes the file's default topology places (a tree's leaves, or the blocks); None when it cannot
    be read (lint has said why)."""
    text = data.decode("utf-8", "replace")
    try:
        k = kind(name, data)
        if k == TREE:
            return {n for sw in parse_topology_conf(text, source=name) for n in sw.nodes or ()}
        if k == BLOCK:
            return {n for t in parse_block_topologies(text, source=name) for b in t.blocks for n in b.nodes}
        default = _yaml_default(text)
        if default is None:
            return None
        if isinstance(default.get("tree"), dict):
            return {n for sw in _yaml_switches(default["tree"]) for n in sw[1] or ()}
        if isinstance(default.get("block"), dict):
            return {n for b in default["block"].get("blocks") or [] for n in _expand(b.get("nodes"))}
        return None  # flat: every node
    except (ParseError, HostlistError, ValueError):
        return None


def slurm_conf_plugin(text: str) -> str | None:
    """The ``TopologyPlugin=`` slurm.conf sets (the last one; Include files are not read), None if unset."""
    found = None
    for _, line in logical_lines(text):
        m = _PLUGIN_RE.match(line)
        if m:
            found = m.group(1)
    return found


# --------------------------------------------------------------------------------------------------
# what slurmctld must show


def difference(
    files: Mapping[str, bytes | None],
    show: Callable[[str | None], str],
    version: tuple[int, int] | None = None,
) -> list[str]:
    """What ``scontrol show topology [NAME]`` (``show(NAME)``) lacks or has more than the set's topology
    file (empty: equal). A tree is compared switch by switch (``parse.topology_difference``), blocks by
    name, position and nodes (aggregated blocks are Slurm's own)."""
    found = active(files, version)
    if found is None:
        return []
    name, data = found
    text = data.decode("utf-8", "replace")
    k = kind(name, data)
    if k == TREE:
        return topology_difference(text, show(None))
    if k == BLOCK:
        return block_difference(parse_block_topologies(text, source=name)[0], show(None))
    diff: list[str] = []
    for topo in _yaml_doc(text):
        if not isinstance(topo, dict) or not isinstance(topo.get("topology"), str):
            continue
        tname = topo["topology"]
        if isinstance(topo.get("tree"), dict):
            written = "".join(
                f"SwitchName={sw}"
                + (f" Nodes={','.join(nodes)}" if nodes else "")
                + (f" Switches={','.join(children)}" if children else "")
                + "\n"
                for sw, nodes, children in _yaml_switches(topo["tree"])
            )
            diff += [f"topology {tname}: {d}" for d in topology_difference(written, show(tname))]
        elif isinstance(topo.get("block"), dict):
            blocks = [t for t in parse_block_topologies(text, source=name) if t.name == tname]
            if blocks:
                diff += [f"topology {tname}: {d}" for d in block_difference(blocks[0], show(tname))]
    return diff


def shown_blocks(text: str) -> list[tuple[str, int, frozenset[str]]]:
    """``scontrol show topology`` block lines → (BlockName, BlockIndex, nodes), in output order;
    ``AggregatedBlock=`` lines (Slurm's own aggregates) are skipped."""
    out: list[tuple[str, int, frozenset[str]]] = []
    for line in text.splitlines():
        if not line.startswith("BlockName="):
            continue
        pairs = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        nodes = pairs.get("Nodes", "")
        members = frozenset(hostlist.expand(nodes)) if nodes and nodes != "(null)" else frozenset()
        index = int(pairs["BlockIndex"]) if pairs.get("BlockIndex", "").isdigit() else len(out)
        out.append((pairs["BlockName"], index, members))
    return out


def block_difference(written: BlockTopology, shown_text: str) -> list[str]:
    shown = sorted(shown_blocks(shown_text), key=lambda b: b[1])
    want = [b.name for b in written.blocks]
    have = [b[0] for b in shown]
    diff = []
    if want != have:
        diff.append(f"blocks in slurmctld: {','.join(have) or '-'}; written: {','.join(want)}")
    members = {b[0]: b[2] for b in shown}
    for b in written.blocks:
        if b.name in members and frozenset(b.nodes) != members[b.name]:
            diff.append(
                f"block {b.name}: nodes {hostlist.compress(sorted(members[b.name])) or '-'} in slurmctld, "
                f"written {hostlist.compress(sorted(b.nodes)) or '-'}"
            )
    return diff


# --------------------------------------------------------------------------------------------------
# topology.yaml


def _yaml_doc(text: str) -> list[Any]:
    from ..inventory import load_yaml

    try:
        doc = load_yaml(text, max_nodes=1_000_000)
    except Exception as exc:  # yaml.YAMLError and the loader's bounds: lint reports them first
        raise ParseError(TOPOLOGY_YAML, None, f"not valid YAML: {exc}") from None
    return doc if isinstance(doc, list) else []


def _yaml_default(text: str) -> dict[str, Any] | None:
    topologies = [t for t in _yaml_doc(text) if isinstance(t, dict)]
    default = [t for t in topologies if t.get("cluster_default") is True]
    first = default or topologies
    return first[0] if first else None


def _yaml_switches(tree: dict[str, Any]) -> list[tuple[str, list[str], list[str]]]:
    out = []
    for sw in tree.get("switches") or []:
        if isinstance(sw, dict):
            children = [c for c in str(sw.get("children") or "").split(",") if c]
            out.append((str(sw.get("switch")), _expand(sw.get("nodes")), children))
    return out


def _expand(value: object) -> list[str]:
    return hostlist.expand(str(value)) if value else []
