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

from .slurmconf import SwitchLine, slurm_conf_node_definitions

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
