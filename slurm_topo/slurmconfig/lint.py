"""Checks a topology.conf (and the node definitions around it) for what makes Slurm fail or misplace
jobs.

Slurm has no dry run: on 22.05 a fatal topology.conf error at reconfigure stops slurmctld, and a node on no
switch is silently never allocated under topology/tree. Each check below names the Slurm behaviour it guards
against.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from .slurmconf import SwitchLine

_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str
    lineno: int | None = None


def lint_topology(
    switches: list[SwitchLine],
    *,
    known_nodes: Iterable[str] | None = None,
    slurm_conf: Path | None = None,
) -> list[Problem]:
    """Every problem found, in file order; an empty list means the file is fine."""
    if not switches:
        return [Problem("empty", "no SwitchName= lines: topology/tree would have no switch and place no job")]
    counts = Counter(sw.name for sw in switches)
    defined = {sw.name: sw for sw in switches}
    problems = _duplicate_switches(counts, defined)
    child_of: dict[str, list[str]] = {}
    leaf_of: dict[str, list[str]] = {}
    for sw in switches:
        problems += _switch_problems(sw, defined)
        for child in sw.switches or ():
            child_of.setdefault(child, []).append(sw.name)
        for node in Counter(sw.nodes or ()):
            leaf_of.setdefault(node, []).append(sw.name)
    problems += _shared_children(child_of, leaf_of, defined)
    problems += _reachability(switches, counts, child_of, defined)
    problems += _level_passes(switches)
    if known_nodes is not None:
        problems += _known_nodes(set(known_nodes), set(leaf_of))
    if slurm_conf is not None:
        problems += _defined_twice(slurm_conf)
    return problems


def _duplicate_switches(counts: Counter[str], defined: dict[str, SwitchLine]) -> list[Problem]:
    """A switch defined twice: 22.05 refuses the file."""
    return [
        Problem("duplicate-switch", f"switch {name} is defined {n} times", defined[name].lineno)
        for name, n in counts.items()
        if n > 1
    ]


def _switch_problems(sw: SwitchLine, defined: dict[str, SwitchLine]) -> list[Problem]:
    """What is wrong with one SwitchName= line on its own: its name, its children, its node list."""
    problems: list[Problem] = []
    if not _NAME_RE.match(sw.name):
        what = "longer than 64 characters" if len(sw.name) > 64 else "has characters outside [A-Za-z0-9._-]"
        problems.append(Problem("bad-name", f"switch name {sw.name!r} {what}", sw.lineno))
    if sw.nodes is not None and sw.switches is not None:
        problems.append(
            Problem("nodes-and-switches", f"switch {sw.name} has both Nodes= and Switches=", sw.lineno)
        )
    if not sw.nodes and not sw.switches:
        problems.append(
            Problem("empty-switch", f"switch {sw.name} has no children (fatal on Slurm 22.05)", sw.lineno)
        )
    for child in sw.switches or ():
        if child not in defined:
            problems.append(
                Problem("undefined-switch", f"switch {sw.name} lists undefined switch {child}", sw.lineno)
            )
    for node, n in Counter(sw.nodes or ()).items():
        if n > 1:
            problems.append(
                Problem("duplicate-node", f"node {node} is listed {n} times in {sw.name}", sw.lineno)
            )
    return problems


def _shared_children(
    child_of: dict[str, list[str]], leaf_of: dict[str, list[str]], defined: dict[str, SwitchLine]
) -> list[Problem]:
    """A switch with several parents, a node in several leaves: the tree is not a tree."""
    problems = [
        Problem(
            "two-parents",
            f"switch {child} has several parents: {', '.join(parents)}",
            defined[child].lineno if child in defined else None,
        )
        for child, parents in child_of.items()
        if len(parents) > 1
    ]
    problems += [
        Problem("node-in-two-leaves", f"node {node} is in several leaves: {', '.join(leaves)}")
        for node, leaves in leaf_of.items()
        if len(leaves) > 1
    ]
    return problems


def _reachability(
    switches: list[SwitchLine],
    counts: Counter[str],
    child_of: dict[str, list[str]],
    defined: dict[str, SwitchLine],
) -> list[Problem]:
    """Several top switches (no job can span them), and switches no top reaches (a cycle)."""
    problems: list[Problem] = []
    tops = [sw.name for sw in switches if sw.name not in child_of and counts[sw.name] == 1]
    reachable: set[str] = set()
    stack = list(tops)
    while stack:
        name = stack.pop()
        if name in reachable or name not in defined:
            continue
        reachable.add(name)
        stack.extend(defined[name].switches or ())
    if len(tops) > 1:
        problems.append(
            Problem(
                "no-common-root",
                f"{len(tops)} top-level switches ({', '.join(tops[:5])}"
                f"{', …' if len(tops) > 5 else ''}): no job can span them; add a root switch",
            )
        )
    problems += [
        Problem(
            "unreachable-switch",
            f"switch {sw.name} is not reachable from any top switch (a cycle)",
            sw.lineno,
        )
        for sw in switches
        if sw.name not in reachable and counts[sw.name] == 1
    ]
    return problems


SLURM_LEVEL_PASSES = 21
"""Slurm's switch levels are resolved in passes over the switch lines in file order (``topology_tree.c``
22.05 ``_validate_switches``, ``switch_record.c`` from 23.11: ``for (depth = 1; ; depth++)``): a switch with
nodes is level 0 at once, another is resolved in the pass that finds all its children resolved (earlier lines
of the same pass count), and after the 21st unfinished pass slurmctld stops: "Switch configuration is not a
tree"."""


def _level_passes(switches: list[SwitchLine]) -> list[Problem]:
    """A tree whose levels Slurm cannot resolve in ``SLURM_LEVEL_PASSES`` passes: deep, with parents written
    before their children (fatal). Cycles and undefined children are their own problems."""
    level: dict[str, int] = {sw.name: 0 for sw in switches if not sw.switches}
    pending = [sw for sw in switches if sw.switches]
    passes = 1
    while pending and passes <= SLURM_LEVEL_PASSES:  # bounded: a deeper file is fatal whatever follows
        left = []
        for sw in pending:
            kids = sw.switches or ()
            if all(c in level for c in kids):
                level[sw.name] = 1 + max(level[c] for c in kids)
            else:
                left.append(sw)
        if len(left) == len(pending):
            return []  # a cycle or an undefined child: reported as such
        pending = left
        passes += bool(pending)
    if not pending:
        return []
    return [
        Problem(
            "too-deep",
            f"Slurm resolves switch levels in at most {SLURM_LEVEL_PASSES} passes over the lines and stops "
            f'("Switch configuration is not a tree"); this file needs more ({pending[0].name} and '
            f"{len(pending) - 1} other switch(es) are unresolved after the last): write children before "
            "their parents or make the tree shallower",
            pending[0].lineno,
        )
    ]


def _known_nodes(known: set[str], placed: set[str]) -> list[Problem]:
    """Nodes Slurm does not know, and nodes Slurm knows that are on no switch (never allocated)."""
    problems = [
        Problem("unknown-node", f"node {node} is not a node Slurm knows") for node in sorted(placed - known)
    ]
    problems += [
        Problem("unplaced-node", f"node {node} is on no switch: topology/tree never allocates it")
        for node in sorted(known - placed)
    ]
    return problems


def _defined_twice(slurm_conf: Path) -> list[Problem]:
    """A node with two NodeName= lines across slurm.conf and its includes: fatal to slurmctld."""
    from .slurmconf_files import slurm_conf_node_definitions  # reads files: loaded by this check alone

    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for path, names in slurm_conf_node_definitions(slurm_conf).items():
        for node in names:
            if node in seen:
                where = "twice in " + path if seen[node] == path else f"in {seen[node]} and in {path}"
                problems.append(
                    Problem("node-defined-twice", f"node {node} is defined {where} (fatal to slurmctld)")
                )
            else:
                seen[node] = path
    return problems


# ------------------------------------------------------------------------------------------ block topologies


@dataclass(frozen=True, slots=True)
class BlockLine:
    name: str
    nodes: tuple[str, ...]
    lineno: int | None = None


@dataclass(frozen=True, slots=True)
class BlockTopology:
    """A block topology as written: topology.conf ``BlockName=`` lines or a topology.yaml ``block:``."""

    name: str
    blocks: tuple[BlockLine, ...]
    sizes: tuple[int, ...] | None = None
    levels: str | None = None
    lineno: int | None = None


def is_block_text(text: str) -> bool:
    """True for topology.conf in block syntax or a topology.yaml (which may hold blocks)."""
    from .slurmconf import logical_lines

    for _, line in logical_lines(text):
        return line.lower().startswith(("blockname=", "blocksizes=", "blocklevels=", "---", "- topology"))
    return False


def _is_yaml(text: str, source: str) -> bool:
    from .slurmconf import logical_lines

    if source.endswith((".yaml", ".yml")):
        return True
    for _, line in logical_lines(text):
        return line.startswith(("---", "- ", "["))
    return False


def parse_block_topologies(text: str, *, source: str = "topology.conf") -> list[BlockTopology]:
    """Block topologies of a topology.conf (``default``) or a topology.yaml (each ``block:`` topology);
    raises ``ParseError`` for text that is neither."""
    from ..core import hostlist
    from ..core.errors import HostlistError, ParseError
    from .slurmconf import logical_lines, split_pairs

    if _is_yaml(text, source):
        return _parse_yaml_blocks(text, source)
    blocks: list[BlockLine] = []
    sizes: tuple[int, ...] | None = None
    levels: str | None = None
    for lineno, line in logical_lines(text):
        try:
            pairs = {k.lower(): v for k, v in split_pairs(line).items()}
        except ValueError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        if "blockname" in pairs:
            try:
                nodes = tuple(hostlist.expand_keep_duplicates(pairs["nodes"])) if pairs.get("nodes") else ()
            except HostlistError as exc:
                raise ParseError(source, lineno, str(exc)) from None
            blocks.append(BlockLine(pairs["blockname"], nodes, lineno))
        elif "blocksizes" in pairs:
            sizes = _sizes(pairs["blocksizes"].split(","), source, lineno)
        elif "blocklevels" in pairs:
            levels = pairs["blocklevels"]
        else:
            raise ParseError(source, lineno, "expected BlockName=, BlockSizes= or BlockLevels=")
    return [BlockTopology("default", tuple(blocks), sizes, levels)]


def _sizes(raw: Iterable[object], source: str, lineno: int | None) -> tuple[int, ...]:
    from ..core.errors import ParseError

    out = []
    for item in raw:
        text = str(item).strip()
        if not text.isdigit() or len(text) > 9:
            raise ParseError(source, lineno, f"BlockSizes: {text[:20]!r} is not a node count")
        out.append(int(text))
    return tuple(out)


def _parse_yaml_blocks(text: str, source: str) -> list[BlockTopology]:
    from ..core import hostlist
    from ..core.errors import HostlistError, ParseError
    from ..inventory import load_yaml

    try:
        doc = load_yaml(text, max_nodes=1_000_000)
    except yaml.YAMLError as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise ParseError(source, None, f"not valid YAML: {first}") from None
    if doc is None:
        doc = []
    if not isinstance(doc, list):
        raise ParseError(source, None, "topology.yaml must be a list of topologies")
    out = []
    for i, topo in enumerate(doc):
        if not isinstance(topo, dict) or not isinstance(topo.get("topology"), str):
            raise ParseError(source, None, f"topology [{i}] has no 'topology:' name")
        block = topo.get("block")
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ParseError(source, None, f"topology {topo['topology']}: block must be a mapping")
        lines = []
        for j, entry in enumerate(block.get("blocks") or []):
            if not isinstance(entry, dict) or not isinstance(entry.get("block"), str):
                raise ParseError(
                    source, None, f"topology {topo['topology']}: blocks[{j}] has no 'block:' name"
                )
            try:
                nodes = (
                    tuple(hostlist.expand_keep_duplicates(str(entry["nodes"]))) if entry.get("nodes") else ()
                )
            except HostlistError as exc:
                raise ParseError(source, None, f"topology {topo['topology']}: {exc}") from None
            lines.append(BlockLine(entry["block"], nodes))
        raw_sizes = block.get("block_sizes")
        sizes = None
        if raw_sizes is not None:
            sizes = _sizes(
                raw_sizes if isinstance(raw_sizes, list) else str(raw_sizes).split(","), source, None
            )
        out.append(BlockTopology(topo["topology"], tuple(lines), sizes))
    return out


def lint_blocks(
    topologies: list[BlockTopology],
    *,
    slurm_version: tuple[int, int] | None = None,
    previous: list[BlockTopology] | None = None,
    known_nodes: Iterable[str] | None = None,
) -> list[Problem]:
    """Problems of block topologies: none at all, an empty one, bad ``BlockSizes``, blocks Slurm refuses
    (empty or short before 25.05), a node in two blocks, and — given the previous file — blocks whose position
    changed (aggregated blocks are consecutive base blocks, so a moved block changes which jobs fit where)."""
    if not topologies:
        return [Problem("empty", "no block topology: no BlockName= lines and no block: topology")]
    problems: list[Problem] = []
    version = slurm_version or (99, 0)
    for topo in topologies:
        problems += _topology_problems(topo, version, known_nodes)
    if previous is not None:
        problems += _moved_blocks(topologies, previous)
    return problems


def _topology_problems(
    topo: BlockTopology, version: tuple[int, int], known_nodes: Iterable[str] | None
) -> list[Problem]:
    """One block topology's problems: no block with nodes, names, nodes in two blocks, empty blocks before
    25.05, ``BlockSizes``, nodes Slurm does not know."""
    from ..render.topology_block import SHORT_BLOCKS_SINCE

    where = f"topology {topo.name}: " if topo.name != "default" else ""
    if not any(b.nodes for b in topo.blocks):
        return [
            Problem(
                "empty-block-topology",
                f"{where}no block has nodes (slurmctld stops on an empty block topology; 25.11 "
                "crash-looped on an empty one named by a partition)",
                topo.lineno,
            )
        ]
    problems: list[Problem] = []
    for name, n in Counter(b.name for b in topo.blocks).items():
        if n > 1:
            problems.append(Problem("duplicate-block", f"{where}block {name} is defined {n} times"))
    seen: dict[str, str] = {}
    for b in topo.blocks:
        if not _NAME_RE.match(b.name):
            problems.append(
                Problem("bad-name", f"{where}block name {b.name!r} is not a Slurm name", b.lineno)
            )
        for node in b.nodes:
            if node in seen and seen[node] != b.name:
                problems.append(
                    Problem(
                        "node-in-two-blocks", f"{where}node {node} is in {seen[node]} and {b.name}", b.lineno
                    )
                )
            seen.setdefault(node, b.name)
        if version < SHORT_BLOCKS_SINCE and not b.nodes:
            problems.append(
                Problem(
                    "empty-block", f"{where}block {b.name} has no nodes (fatal before Slurm 25.05)", b.lineno
                )
            )
    problems += _sizes_problems(topo, version, where)
    if known_nodes is not None:
        known = set(known_nodes)
        problems += [
            Problem("unknown-node", f"{where}node {node} is not a node Slurm knows")
            for node in sorted(set(seen) - known)
        ]
    return problems


def _sizes_problems(topo: BlockTopology, version: tuple[int, int], where: str) -> list[Problem]:
    """``BlockSizes`` that this release refuses for these blocks (empty ones left out before 25.05)."""
    from ..core.topology import Block
    from ..render.topology_block import SHORT_BLOCKS_SINCE, block_sizes_problem

    sizes = topo.sizes
    if sizes is None:
        return []
    as_blocks = tuple(Block(b.name, b.name, b.nodes) for b in topo.blocks)
    if version < SHORT_BLOCKS_SINCE:
        as_blocks = tuple(b for b in as_blocks if b.nodes)
    problem = block_sizes_problem(sizes, as_blocks, version)
    if problem is None:
        return []
    return [Problem("bad-block-sizes", f"{where}BlockSizes={','.join(map(str, sizes))}: {problem}")]


def _moved_blocks(topologies: list[BlockTopology], previous: list[BlockTopology]) -> list[Problem]:
    """A block that is at another index than in the previous file (or gone from it)."""
    problems: list[Problem] = []
    before = {t.name: t for t in previous}
    for topo in topologies:
        old = before.get(topo.name)
        if old is None:
            continue
        where = f"topology {topo.name}: " if topo.name != "default" else ""
        now = {b.name: i for i, b in enumerate(topo.blocks)}
        for i, b in enumerate(old.blocks):
            if b.name not in now:
                if i < len(old.blocks) - 1:
                    problems.append(
                        Problem(
                            "block-removed",
                            f"{where}block {b.name} (position {i}) is gone: every block after it moved up "
                            "one position and the aggregated blocks changed; keep it as an empty placeholder "
                            "(Slurm 25.05+) or keep its nodes",
                        )
                    )
            elif now[b.name] != i:
                problems.append(
                    Problem(
                        "block-moved",
                        f"{where}block {b.name} moved from position {i} to {now[b.name]}: aggregated blocks "
                        "are consecutive base blocks, so it now aggregates with other domains",
                        topo.blocks[now[b.name]].lineno,
                    )
                )
    return problems


def lint_file(
    text: str,
    *,
    source: str = "topology.conf",
    previous_text: str | None = None,
    previous_source: str = "previous",
    slurm_version: tuple[int, int] | None = None,
    known_nodes: Iterable[str] | None = None,
    slurm_conf: Path | None = None,
    slurm_patch: int | None = None,
) -> list[Problem]:
    """Lint a topology.conf in tree or block syntax, or a topology.yaml (its size, its topology types, its
    blocks, then its tree); with ``slurm_conf``, also its partitions' ``Exclusive=`` for the release.
    ``slurm_patch`` is the release's patch level where known (25.11.6 reads a 4096-byte multiple)."""

    extra = _exclusive_problems(slurm_conf, slurm_version) if slurm_conf is not None else []
    return extra + _lint_text(
        text, source, previous_text, previous_source, slurm_version, known_nodes, slurm_conf, slurm_patch
    )


def _lint_text(
    text: str,
    source: str,
    previous_text: str | None,
    previous_source: str,
    slurm_version: tuple[int, int] | None,
    known_nodes: Iterable[str] | None,
    slurm_conf: Path | None,
    slurm_patch: int | None,
) -> list[Problem]:
    from .slurmconf import parse_topology_conf

    if _is_yaml(text, source) or is_block_text(text):
        topologies = parse_block_topologies(text, source=source)
        previous = (
            parse_block_topologies(previous_text, source=previous_source)
            if previous_text is not None
            else None
        )
        if _is_yaml(text, source):
            return _yaml_page_problems(text, slurm_version, slurm_patch) + _lint_yaml(
                text, source, topologies, slurm_version, previous, known_nodes
            )
        return lint_blocks(
            topologies, slurm_version=slurm_version, previous=previous, known_nodes=known_nodes
        )
    return lint_topology(
        parse_topology_conf(text, source=source), known_nodes=known_nodes, slurm_conf=slurm_conf
    )


def _lint_yaml(
    text: str,
    source: str,
    blocks: list[BlockTopology],
    slurm_version: tuple[int, int] | None,
    previous: list[BlockTopology] | None,
    known_nodes: Iterable[str] | None,
) -> list[Problem]:
    from ..inventory import load_yaml

    doc = load_yaml(text) or []  # parse_block_topologies read it already: it is a list of mappings
    problems: list[Problem] = []
    if not doc:
        return [
            Problem("empty", "topology.yaml has no topology (an empty file crash-looped slurmctld 25.11)")
        ]
    defaults = [t.get("topology") for t in doc if isinstance(t, dict) and t.get("cluster_default") is True]
    if not defaults:
        problems.append(Problem("no-cluster-default", "no topology has cluster_default: true"))
    for topo in doc:
        problems += _type_problems(topo, slurm_version, known_nodes)
        tree = topo.get("tree") if isinstance(topo, dict) else None
        if isinstance(tree, dict):
            switches = [
                SwitchLine(
                    str(sw.get("switch")),
                    tuple(_expand(sw["nodes"])) if sw.get("nodes") else None,
                    tuple(str(sw["children"]).split(",")) if sw.get("children") else None,
                    0,
                    None,
                )
                for sw in tree.get("switches") or []
                if isinstance(sw, dict)
            ]
            problems += [
                Problem(p.code, f"topology {topo['topology']}: {p.message}", p.lineno)
                for p in lint_topology(switches, known_nodes=known_nodes)
            ]
    if blocks:
        problems += lint_blocks(
            blocks, slurm_version=slurm_version, previous=previous, known_nodes=known_nodes
        )
    return problems


def _expand(value: object) -> list[str]:
    from ..core import hostlist

    return hostlist.expand_keep_duplicates(str(value))


# ------------------------------------------------------------------------------- release gates (25.05-26.05)

YAML_TYPES = {"block": (25, 5), "flat": (25, 5), "tree": (25, 5), "ring": (26, 5), "torus3d": (26, 5)}
"""topology.yaml(5): each topology has exactly one of these keys; the release that first reads it (ring and
torus3d are 26.05's, as is ``flat`` given as a mapping of options)."""
RING_MAX_NODES = 16
"""topology.yaml(5) 26.05, "Ring definitions": "A maximum of 16 nodes can be specified per ring"."""
EXCLUSIVE_SINCE = (26, 5)
"""A partition's ``Exclusive=NO|NODE|USER|TOPO`` (``read_config.c`` 26.05; NONE is read as NO); earlier
releases do not know the key and stop on it."""
EXCLUSIVE_VALUES = ("NO", "NONE", "NODE", "USER", "TOPO")


def _yaml_page_problems(text: str, version: tuple[int, int] | None, patch: int | None) -> list[Problem]:
    """A topology.yaml whose size is a multiple of 4096 bytes, for a release that stops on it (or an unknown
    release): ``render.topology_yaml.YAML_PAGE``."""
    from ..render.topology_yaml import YAML_PAGE, yaml_page_bug

    size = len(text.encode())
    if size == 0 or size % YAML_PAGE or (version is not None and not yaml_page_bug(version, patch)):
        return []
    return [
        Problem(
            "yaml-page-size",
            f"the file is {size} bytes, a multiple of {YAML_PAGE}: slurmctld 25.05 to 25.11.5 stop on it "
            '("Something wrong with reading topology.yaml"; fixed in 25.11.6 and 26.05); add a comment line '
            "(slurm-topo generate pads it)",
        )
    ]


def _type_problems(
    topo: object, version: tuple[int, int] | None, known_nodes: Iterable[str] | None
) -> list[Problem]:
    """One topology's type: exactly one of ``YAML_TYPES``, one this release reads, and a ring or torus3d
    shaped as topology.yaml(5) says."""
    if not isinstance(topo, dict):
        return []
    name = topo.get("topology")
    kinds = [k for k in YAML_TYPES if k in topo]
    if len(kinds) != 1:
        return [
            Problem(
                "topology-type",
                f"topology {name}: has {', '.join(kinds) or 'none'} of {', '.join(sorted(YAML_TYPES))}; "
                "topology.yaml(5) asks for exactly one",
            )
        ]
    kind = kinds[0]
    since = (26, 5) if kind == "flat" and isinstance(topo[kind], dict) else YAML_TYPES[kind]
    if version is not None and version < since:
        what = "flat with options" if kind == "flat" and since == (26, 5) else kind
        return [
            Problem(
                "topology-type-release",
                f"topology {name}: {what} needs Slurm {since[0]}.{since[1]:02d} (the file is for "
                f"{version[0]}.{version[1]:02d})",
            )
        ]
    if kind == "ring":
        return _ring_problems(str(name), topo[kind], known_nodes)
    if kind == "torus3d":
        return _torus_problems(str(name), topo[kind])
    return []


def _ring_problems(name: str, ring: object, known_nodes: Iterable[str] | None) -> list[Problem]:
    rings = ring.get("rings") if isinstance(ring, dict) else None
    if not isinstance(rings, list) or not rings:
        return [Problem("bad-ring", f"topology {name}: ring needs a rings: list")]
    problems: list[Problem] = []
    seen: Counter[str] = Counter()
    placed: set[str] = set()
    for i, r in enumerate(rings):
        if not isinstance(r, dict) or not isinstance(r.get("ring"), str):
            problems.append(Problem("bad-ring", f"topology {name}: rings[{i}] has no 'ring:' name"))
            continue
        seen[r["ring"]] += 1
        nodes = _expand(r["nodes"]) if r.get("nodes") else []
        placed.update(nodes)
        if len(nodes) > RING_MAX_NODES:
            problems.append(
                Problem(
                    "bad-ring",
                    f"topology {name}: ring {r['ring']} has {len(nodes)} nodes (at most {RING_MAX_NODES})",
                )
            )
    problems += [
        Problem("bad-ring", f"topology {name}: ring {ring_name} is defined {n} times")
        for ring_name, n in seen.items()
        if n > 1
    ]
    if known_nodes is not None:
        problems += [
            Problem("unknown-node", f"topology {name}: node {node} is not a node Slurm knows")
            for node in sorted(placed - set(known_nodes))
        ]
    return problems


def _dims(value: object) -> tuple[int, int, int] | None:
    if not isinstance(value, dict):
        return None
    axes = [value.get(a) for a in ("x", "y", "z")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in axes):
        return None
    return (int(axes[0]), int(axes[1]), int(axes[2]))  # type: ignore[arg-type]


def _torus_problems(name: str, torus: object) -> list[Problem]:
    toruses = torus.get("toruses") if isinstance(torus, dict) else None
    if not isinstance(toruses, list) or not toruses:
        return [Problem("bad-torus", f"topology {name}: torus3d needs a toruses: list")]
    problems: list[Problem] = []
    for i, t in enumerate(toruses):
        where = f"topology {name}: toruses[{i}]"
        dims = _dims(t.get("dims")) if isinstance(t, dict) else None
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or dims is None:
            problems.append(Problem("bad-torus", f"{where} needs a name and dims with positive x, y and z"))
            continue
        if ("nodes" in t) == ("regions" in t):
            problems.append(Problem("bad-torus", f"{where}: give exactly one of nodes and regions"))
            continue
        cells = dims[0] * dims[1] * dims[2]
        count = len(_expand(t["nodes"])) if t.get("nodes") else 0
        if count > cells:
            problems.append(
                Problem(
                    "bad-torus", f"{where}: {count} nodes in {cells} cells ({dims[0]}x{dims[1]}x{dims[2]})"
                )
            )
    return problems


def _exclusive_problems(slurm_conf: Path, version: tuple[int, int] | None) -> list[Problem]:
    """Partition lines of slurm.conf (and its includes) with an ``Exclusive=`` this release stops on: the key
    before 26.05, a value other than ``EXCLUSIVE_VALUES`` on 26.05."""
    from .slurmconf_files import slurm_conf_partition_lines  # reads files: loaded by this check alone

    problems: list[Problem] = []
    for path, lineno, pairs in slurm_conf_partition_lines(slurm_conf):
        value = next((v for k, v in pairs.items() if k.lower() == "exclusive"), None)
        if value is None:
            continue
        where = f"{path}:{lineno}: PartitionName={pairs.get('PartitionName', '?')}"
        if version is not None and version < EXCLUSIVE_SINCE:
            problems.append(
                Problem(
                    "exclusive-release",
                    f"{where}: Exclusive= is read from Slurm 26.05 on; use ExclusiveUser=/ExclusiveTopo=/"
                    "OverSubscribe=EXCLUSIVE for this release",
                )
            )
        elif value.upper() not in EXCLUSIVE_VALUES:
            problems.append(
                Problem(
                    "bad-exclusive",
                    f"{where}: Exclusive={value[:40]} is not NO, NODE, USER or TOPO (slurmctld stops)",
                )
            )
    return problems
