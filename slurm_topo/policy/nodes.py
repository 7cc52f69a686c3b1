"""Named nodes: where the nodes of a job's ``--nodelist`` (or an owner's ``ReqNodeList=`` update) are, so that
a required level they already break is refused (Slurm would run such a job across groups). The Lua filter's
nodes.lua is the twin.

Compiled (job-independent): every node name split into a prefix and a numeric suffix, runs of consecutive
numbers with the same place kept as one range per ``prefix/width`` (``n01``..``n40`` in one rack: one range),
and the places themselves (the node's group feature per level: network group, zone, region, NVLink domain).

At submit the list is read as Slurm reads it (``slurm_topo.core.hostlist``, its one reader): names and bracket
groups (``n[01-04,07]``, digits before a bracket ``h1[8]``, padding ``n[001-3]``, several brackets
``r[1-2]n[01-04]``, text after a bracket), separated by commas, spaces, tabs or newlines (Slurm's hostlist
separators). Its size is counted before anything is expanded. A required level is never passed unchecked:
a list that cannot be read (a character no node name has, whitespace inside a bracket, a number of more than
``MAX_NAMED_DIGITS`` digits, a form Slurm's reading is not sure of: ``n[1-]``, an unclosed bracket), one that
names more nodes than the cluster has or than ``MAX_VISITS``, or a name the data does not place is refused
with the reason, as is a list across two groups of the level.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core import hostlist
from ..core.errors import HostlistError
from .vocab import LEVELS, MAX_NAMED_DIGITS, NVL

_NAME = re.compile(r"^(.*?)([0-9]+)\Z")
_READABLE = re.compile(r"[A-Za-z0-9._\[\], \t\n-]*\Z")
"""What a node list may hold: node-name characters (``model.NODE_NAME_RE``), brackets, and the separators."""
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_NAMED_DIGITS + 1}}}")
_SPACE_IN_BRACKET = re.compile(r"\[[^\]]*[ \t\n]")
_SEPARATORS = re.compile(r"[ \t\n]")
"""Slurm's hostlist separators besides the comma (``hostlist_create``: ``\\t``, ``,``, space; newlines too):
outside a bracket they end a name as a comma does."""
MAX_NAMED = 4096
"""Longest --nodelist read (bytes); a longer one is refused with a required level."""
MAX_VISITS = 256
"""Most names one --nodelist may name, counted before it is expanded (each is one look-up in the node
index: the work bound, ARCHITECTURE.md); past it, or past the cluster's node count, a required level refuses
the list."""
PLACE_LEVELS = (*LEVELS, NVL)
"""A place's levels, in order: what ``place_named``'s ``level_index`` indexes."""
Place = tuple[str | None, str | None, str | None, str | None]
"""A node's group feature per level, in PLACE_LEVELS order (network_group, zone, region, nvl); None where it
has none."""


@dataclass(frozen=True, slots=True)
class NodeIndex:
    places: tuple[Place, ...] = ()
    ranges: Mapping[str, tuple[tuple[int, int, int], ...]] | None = None
    """``prefix/width`` -> sorted (first, last, place index) runs."""
    bare: Mapping[str, int] | None = None
    """Names without a numeric suffix -> place index."""
    nodes: int = 0
    """How many nodes the index places (a longer --nodelist is refused before it is expanded)."""


def split_name(name: str) -> tuple[str, int, int] | None:
    """``n007`` -> ("n", 7, 3); None for a name without a numeric suffix of at most 9 digits.

    ``_NAME``'s reading (the prefix, then every trailing ASCII digit) without the regex: ``build_index``
    splits every node name of the fleet."""
    prefix = name.rstrip("0123456789")
    width = len(name) - len(prefix)
    if width == 0 or width > 9 or "\n" in prefix:  # _NAME's `.` does not cross a line break
        return None
    return prefix, int(name[len(prefix) :]), width


def build_index(node_places: Sequence[tuple[str, Place]]) -> NodeIndex:
    """The index of (node name, place) pairs, in any order."""
    places: dict[Place, int] = {}
    runs: dict[str, list[tuple[int, int]]] = {}
    bare: dict[str, int] = {}
    for name, place in node_places:
        idx = places.setdefault(place, len(places))
        parts = split_name(name)
        if parts is None:
            bare[name] = idx
        else:
            runs.setdefault(f"{parts[0]}/{parts[2]}", []).append((parts[1], idx))
    ranges: dict[str, tuple[tuple[int, int, int], ...]] = {}
    for key, items in sorted(runs.items()):
        items.sort()
        merged: list[list[int]] = []
        for number, idx in items:
            if merged and merged[-1][1] + 1 == number and merged[-1][2] == idx:
                merged[-1][1] = number
            else:
                merged.append([number, number, idx])
        ranges[key] = tuple((a, b, c) for a, b, c in merged)
    return NodeIndex(tuple(places), ranges, dict(sorted(bare.items())), len(node_places))


def _first(run: tuple[int, int, int]) -> int:
    return run[0]


def place_of(index: NodeIndex, name: str) -> int | None:
    """The place index of one node name, None when the index does not have it."""
    parts = split_name(name)
    if parts is None:
        return (index.bare or {}).get(name)
    prefix, number, width = parts
    runs = (index.ranges or {}).get(f"{prefix}/{width}", ())
    i = bisect.bisect_right(runs, number, key=_first) - 1  # the last run starting at or before it
    if i >= 0 and runs[i][1] >= number:
        return runs[i][2]
    return None


def read_nodelist(text: str, limit: int) -> tuple[str, ...] | int | None:
    """The names of a node list in Slurm's order (duplicates kept), as Slurm reads it: None when it cannot be
    read (see the module docstring), the count (more than ``limit``) when it names too many; counted before
    it is expanded."""
    if not _READABLE.match(text) or _LONG_NUMBER.search(text) or _SPACE_IN_BRACKET.search(text):
        return None
    expression = _SEPARATORS.sub(",", text)
    try:
        n = hostlist.count(expression)
        if n > limit:
            return n
        names = tuple(hostlist.expand_keep_duplicates(expression))
    except HostlistError:
        return None
    return names or None


@dataclass(frozen=True, slots=True)
class Named:
    groups: tuple[str, ...]
    """The distinct groups (features) of the level the named nodes are in, in the order met (at most 2)."""
    homeless: bool
    """A named node has no group at this level."""
    problem: str | None = None
    """Why the list cannot be checked: ``long`` (over MAX_NAMED bytes), ``unread`` (not a node list the
    filter reads), ``many`` (more names than ``limit``), ``unknown`` (``name`` is not in the data)."""
    name: str | None = None
    limit: int = 0
    """With ``many``: the most names checked (the cluster's nodes, at most MAX_VISITS)."""


def place_named(index: NodeIndex, text: str, level_index: int) -> Named:
    """Where the nodes of ``text`` (a --nodelist) are at one level (an index in PLACE_LEVELS), in Slurm's
    order; stops at the second group, at a node in no group of the level, and at a name the data does not
    place."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_NAMED:
        return Named((), False, "long")
    limit = min(index.nodes, MAX_VISITS)
    names = read_nodelist(text, limit)
    if names is None:
        return Named((), False, "unread")
    if isinstance(names, int):
        return Named((), False, "many", limit=limit)
    seen: list[str] = []
    for name in names:
        idx = place_of(index, name)
        if idx is None:
            return Named(tuple(seen), False, "unknown", name)
        group = index.places[idx][level_index]
        if group is None:
            return Named(tuple(seen), True)
        if group not in seen:
            seen.append(group)
            if len(seen) > 1:
                break
    return Named(tuple(seen), False)
