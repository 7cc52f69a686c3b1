"""Parsers of what live Slurm prints (``scontrol show node/partition/topology/job -d/config``), one per
output, each run over the real captures of every release (``tests/test_slurmconf_real.py``). Pure: text in,
values out; the commands are :mod:`slurm_topo.access.argv`, the job listings :mod:`slurm_topo.access.jobs`.

A node's fields (``Reason=``, ``Comment=``, ``Extra=``) are written by administrators and slurmd, not by job
owners; a job's are read from ``squeue --json`` (:mod:`slurm_topo.access.jobs`), except the per-node GRES
detail lines of ``scontrol show job -d``, which start a line of their own.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from ..core import hostlist
from ..core.allocation import Allocation, SwitchTree
from ..core.errors import HostlistError, ParseError
from ..plumbing.collector import collector_paused
from ..plumbing.text import NULL
from ..slurmconfig.slurmconf import OUTPUT_KEY, blanks_only, parse_topology_conf, split_pairs

REASON_PREFIX = "slurm-topo-health:"
"""The drain reason health-sync writes (and the only drains it resumes): :attr:`NodeState.ours`."""


def _one_line_records(
    text: str, source: str, key: str, plain: bool = False, first_lineno: int = 1
) -> Iterator[tuple[int, dict[str, str]]]:
    """``scontrol show … -o`` lines -> (line number, pairs); each record must start with ``key=``.

    With ``plain``, a line without ``=`` is a hostlist of records that have only ``key``.
    """
    for lineno, line in enumerate(text.splitlines(), first_lineno):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if plain and "=" not in line:
                for name in hostlist.expand(line):
                    yield lineno, {key: name}
                continue
            pairs = split_pairs(line, output=True)
        except (ValueError, HostlistError) as exc:
            raise ParseError(source, lineno, str(exc)) from None
        if key not in pairs:
            raise ParseError(source, lineno, f"expected {key}=")
        yield lineno, pairs


def parse_scontrol_nodes(
    text: str, *, source: str = "scontrol show node -o", keys: Collection[str] | None = None
) -> list[dict[str, str]]:
    """``scontrol show node -o`` (one node a line) -> one dict per node; a plain line is a hostlist.

    ``keys``: only these fields (``NodeName`` always), the values ``split_pairs`` gives: a line of
    ``NodeName=…`` with blanks its only whitespace is searched for the wanted keys alone (a 100 000-node
    ``-d`` listing is 85 MB: a dict of 40 fields a node is most of the parse); any other line is split whole.
    A listing of dicts of strings holds no cycle: the collector is paused while it is built (its passes over a
    loaded fleet beside 100 000 new dicts doubled the parse).
    """
    with collector_paused():
        return _parse_nodes(text, source, keys)


def _parse_nodes(text: str, source: str, keys: Collection[str] | None) -> list[dict[str, str]]:
    if keys is None:
        return [pairs for _, pairs in _one_line_records(text, source, "NodeName", plain=True)]
    wanted = tuple(dict.fromkeys(("NodeName", *keys)))
    needles = tuple((k, f" {k}=", len(k) + 2) for k in wanted if k != "NodeName")
    out: list[dict[str, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("NodeName=") and blanks_only(line):
            out.append(_wanted_pairs(line, needles))
            continue
        for _, pairs in _one_line_records(line, source, "NodeName", plain=True, first_lineno=lineno):
            out.append({k: pairs[k] for k in wanted if k in pairs})
    return out


_NEXT_KEY = re.compile(" " + OUTPUT_KEY)
"""Where a value ends in a line of blanks (``split_pairs``' boundary): a blank, a CamelCase key, ``=``."""


def _wanted_pairs(line: str, needles: tuple[tuple[str, str, int], ...]) -> dict[str, str]:
    """``split_pairs(line, output=True)`` restricted to ``NodeName`` and the needles' keys, for a line that
    starts with ``NodeName=`` and whose only whitespace is blanks. Every `` Key=`` in such a line is one of
    split_pairs' boundaries (a key holds no blank, so no match can span another's blank), hence the first
    `` Key=`` is the key's first, winning, occurrence, and its value runs to the next boundary."""
    end = _NEXT_KEY.search(line, 9)
    out = {"NodeName": line[9 : end.start() if end else None].strip(" ")}
    for key, needle, skip in needles:
        at = line.find(needle)
        if at >= 0:
            end = _NEXT_KEY.search(line, at + skip)
            out[key] = line[at + skip : end.start() if end else None].strip(" ")
    return out


def parse_scontrol_partitions(
    text: str, *, source: str = "scontrol show partition -o"
) -> list[tuple[str, list[str], bool]]:
    """``scontrol show partition -o`` -> [(name, nodes, is_default)]."""
    out = []
    for lineno, pairs in _one_line_records(text, source, "PartitionName"):
        nodes_expr = pairs.get("Nodes", "")
        try:
            nodes = hostlist.expand(nodes_expr) if nodes_expr not in ("", "(null)") else []
        except HostlistError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        out.append((pairs["PartitionName"], nodes, pairs.get("Default", "NO").upper() == "YES"))
    return out


def parse_scontrol_topology(text: str) -> SwitchTree:
    """``scontrol show topology`` → :class:`SwitchTree`; no ``SwitchName=`` lines → an empty tree.

    A switch without ``Level=`` gets one more than its highest child (a cycle counts as 0).
    """
    leaf: dict[str, str] = {}
    parent: dict[str, str] = {}
    level: dict[str, int] = {}
    children: dict[str, tuple[str, ...]] = {}
    for sw in parse_topology_conf(text, source="scontrol show topology", scontrol_output=True):
        if sw.switches:
            children[sw.name] = sw.switches
            for child in sw.switches:
                parent[child] = sw.name
        elif sw.nodes:
            for node in sw.nodes:
                leaf[node] = sw.name
            level[sw.name] = 0
        if sw.level is not None:
            level[sw.name] = sw.level

    def lvl(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name in level:
            return level[name]
        if name in seen:
            return 0
        return 1 + max((lvl(c, seen | {name}) for c in children.get(name, ())), default=-1)

    for name in set(children) | set(parent):
        level[name] = lvl(name)
    return SwitchTree(leaf, parent, level)


_GRES_IDX_RE = re.compile(r"gpu[^,(\s]*\(IDX:([0-9,-]*)\)")
_JOB_ID_RE = re.compile(r"JobId=(\S+)")
_NODELIST_RE = re.compile(r"NodeList=(\S+)")
_DETAIL_NODES_RE = re.compile(r"Nodes=(\S+)")


def parse_job_detail(text: str, source: str = "scontrol show job -d") -> Allocation:
    """``scontrol show job -d <id>`` → :class:`Allocation` (``Nodes=… GRES=gpu:h100:4(IDX:0-3)`` detail
    lines). Only lines that *start* with ``NodeList=`` or ``Nodes=`` are read, after the first line (which
    holds ``JobId=`` and the job's name): a ``NodeList=`` inside a name, comment or path is never taken."""
    lines = text.splitlines()
    job_id = _JOB_ID_RE.match(lines[0].strip()) if lines else None
    nodelist = next((m for ln in lines[1:] if (m := _NODELIST_RE.match(ln.strip()))), None)
    if not job_id or not nodelist or nodelist.group(1) == "(null)":
        raise ParseError(source, None, "no JobId= and NodeList= (is the job running?)")
    try:
        nodes = tuple(hostlist.expand(nodelist.group(1)))
        gpus: dict[str, tuple[int, ...]] = {}
        for line in lines[1:]:
            m = _DETAIL_NODES_RE.match(line.strip())
            if not m:
                continue
            idx: list[int] = []
            for g in _GRES_IDX_RE.finditer(line):
                idx.extend(hostlist.expand_numbers(g.group(1)))
            for node in hostlist.expand(m.group(1)):
                gpus[node] = tuple(sorted(set(idx)))
    except HostlistError as exc:
        raise ParseError(source, None, str(exc)) from None
    return Allocation(job_id.group(1), nodes, {n: gpus.get(n, ()) for n in nodes})


def parse_show_config(text: str) -> dict[str, str]:
    """``scontrol show config`` → {key: value} (``Key = value`` lines; the first of a repeated key wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def parse_record_line(line: str) -> dict[str, str]:
    """One ``scontrol show job -o`` / ``show node -o`` line -> {key: value}; values keep inner spaces."""
    try:
        return split_pairs(line.strip(), output=True)
    except ValueError:
        return {}


def node_records(text: str) -> dict[str, dict[str, str]]:
    """``scontrol show node -o`` -> {node: its line's fields}."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.strip().startswith("NodeName="):
            continue
        kv = parse_record_line(line)
        if kv.get("NodeName"):
            out[kv["NodeName"]] = kv
    return out


def features_of(records: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, ...]]:
    """Node records (any backend) -> {node: its features} (ActiveFeatures, else AvailableFeatures)."""
    nodes: dict[str, tuple[str, ...]] = {}
    for name, kv in records.items():
        feats = kv.get("ActiveFeatures") or kv.get("AvailableFeatures") or NULL
        nodes[name] = () if feats in ("", NULL) else tuple(f for f in feats.split(",") if f)
    return nodes


def parse_nodes(text: str) -> dict[str, tuple[str, ...]]:
    """``scontrol show node -o`` -> {node: its features} (ActiveFeatures, else AvailableFeatures)."""
    return features_of(node_records(text))


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    state: str  # e.g. IDLE+DRAIN
    reason: str | None
    features: tuple[str, ...] = ()
    """ActiveFeatures (else AvailableFeatures): where the node belongs (``nvl_<domain>``: its block)."""

    @property
    def drained(self) -> bool:
        flags = set(self.state.upper().replace("*", "").split("+"))
        return bool(flags & {"DRAIN", "DRAINED", "DRAINING"})

    @property
    def ours(self) -> bool:
        return self.drained and (self.reason or "").startswith(REASON_PREFIX)


def parse_show_node(text: str) -> dict[str, NodeState]:
    """``scontrol show node`` (the multi-line form: ``Reason=`` has a line of its own) -> name -> state.

    A node's block runs from its ``NodeName=`` line to the next one: 24.11 and later print a line of blanks
    before ``Reason=``, so a blank line does not end a block."""
    nodes: dict[str, NodeState] = {}
    for block in re.split(r"^(?=NodeName=)", text, flags=re.M):
        m = re.search(r"^NodeName=(\S+)", block, re.M)
        if not m:
            continue
        st = re.search(r"\bState=(\S+)", block)
        reason = re.search(r"^\s*Reason=(.*)$", block, re.M)
        feats = re.search(r"\bActiveFeatures=(\S*)", block) or re.search(r"\bAvailableFeatures=(\S*)", block)
        have = () if feats is None or feats[1] in ("", NULL) else tuple(f for f in feats[1].split(",") if f)
        nodes[m[1]] = NodeState(
            m[1], st[1] if st else "UNKNOWN", reason[1].strip() if reason else None, features=have
        )
    return nodes


def parse_show_topology(text: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """``scontrol show topology`` → switch → (nodes, switches), hostlists expanded."""
    return {
        sw.name: (frozenset(sw.nodes or ()), frozenset(sw.switches or ()))
        for sw in parse_topology_conf(text, source="scontrol show topology", scontrol_output=True)
    }


_UNUSABLE = ("DOWN", "DRAIN", "FAIL", "FUTURE", "NOT_RESPONDING")


def _usable(kv: Mapping[str, str]) -> bool:
    state = kv.get("State", "").upper()
    return not any(w in state for w in _UNUSABLE)


def busy_share_of(records: Mapping[str, Mapping[str, str]]) -> float:
    """Node records (any backend) -> the share of usable nodes in use (ALLOCATED, MIXED, COMPLETING); down,
    drained and failed nodes count as neither."""
    usable = [kv.get("State", "").upper() for kv in records.values() if _usable(kv)]
    used = sum(1 for state in usable if any(w in state for w in ("ALLOC", "MIXED", "COMPLETING")))
    return used / len(usable) if usable else 0.0


def usable_nodes(records: Mapping[str, Mapping[str, str]]) -> int:
    """Node records (any backend) -> how many can take a job (all but down, drained, failed, future)."""
    return sum(1 for kv in records.values() if _usable(kv))


def busy_share(text: str) -> float:
    """``scontrol show node -o`` -> :func:`busy_share_of` its nodes."""
    return busy_share_of(node_records(text))


@dataclass(frozen=True, slots=True)
class LiveBlocks:
    """Slurm's block topology ``nvl`` and tree topology ``fabric`` as ``scontrol show topology NAME`` prints
    them (25.05+): the block of each node, and each node's switch path from the root to its leaf."""

    block_of: dict[str, str]
    path_of: dict[str, tuple[str, ...]]
    blocks: frozenset[str] = frozenset()
    """Every block's name (``nvl_<domain>``, as slurm-topo names them), empty ones included."""


def parse_live_blocks(blocks_text: str, tree_text: str) -> LiveBlocks:
    block_of: dict[str, str] = {}
    names: set[str] = set()
    for line in blocks_text.splitlines():
        if line.startswith("BlockName="):  # AggregatedBlock= lines repeat the base blocks' nodes
            kv = split_pairs(line, output=True)
            names.add(kv["BlockName"])
            for node in hostlist.expand(kv.get("Nodes", "")) if kv.get("Nodes") else ():
                block_of[node] = kv["BlockName"]
    parent: dict[str, str] = {}
    leaves: dict[str, list[str]] = {}
    for line in tree_text.splitlines():
        if not line.startswith("SwitchName="):
            continue
        kv = split_pairs(line, output=True)
        name = kv["SwitchName"]
        if kv.get("Switches"):
            for child in kv["Switches"].split(","):
                parent[child] = name
        elif kv.get("Nodes"):
            leaves[name] = hostlist.expand(kv["Nodes"])
    path_of: dict[str, tuple[str, ...]] = {}
    for leaf, members in leaves.items():
        path = [leaf]
        while path[-1] in parent and len(path) < 64:
            path.append(parent[path[-1]])
        for node in members:
            path_of[node] = tuple(reversed(path))
    return LiveBlocks(block_of, path_of, frozenset(names))
