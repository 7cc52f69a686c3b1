"""Named nodes: where the nodes of a job's ``--nodelist`` are, so that a required locality they already break
is
refused at submit (Slurm would run such a job across groups). The Lua filter's "named nodes" section is the
twin.

Compiled (job-independent): every node name split into a prefix and a numeric suffix, runs of consecutive
numbers
with the same place kept as one range per ``prefix/width`` (``n01``..``n40`` in one rack: one range), and the
places themselves (the node's group feature per level). At submit the hostlist is read in Slurm's simple forms
(``n01``, ``n[01-03,07]``, comma lists of these); anything else, or a name the data does not place, is said to
be
not checked.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_NAME = re.compile(r"^(.*?)([0-9]+)\Z")
_ITEM = re.compile(r"^([^\[\]]*)\[([^\[\]]*)\]\Z")
_RANGE = re.compile(r"^([0-9]{1,9})(?:-([0-9]{1,9}))?\Z")
MAX_NAMED = 4096
"""Longest --nodelist read (bytes); a longer one is not checked."""
MAX_VISITS = 10000
"""Most ranges looked at for one --nodelist; past that the rest is not checked (hostile lists)."""
Place = tuple[str | None, str | None, str | None]
"""A node's group feature per level, in LEVELS order (network_group, zone, region); None where it has none."""


@dataclass(frozen=True, slots=True)
class NodeIndex:
    places: tuple[Place, ...] = ()
    ranges: Mapping[str, tuple[tuple[int, int, int], ...]] | None = None
    """``prefix/width`` -> sorted (first, last, place index) runs."""
    bare: Mapping[str, int] | None = None
    """Names without a numeric suffix -> place index."""


def split_name(name: str) -> tuple[str, int, int] | None:
    """``n007`` -> ("n", 7, 3); None for a name without a numeric suffix of at most 9 digits."""
    m = _NAME.match(name)
    return (m[1], int(m[2]), len(m[2])) if m and len(m[2]) <= 9 else None


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
    return NodeIndex(tuple(places), ranges, dict(sorted(bare.items())))


def _items(text: str) -> list[str]:
    """Top-level comma items of a hostlist (commas inside brackets stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _requested(text: str) -> tuple[list[tuple[str, int, int, int]], list[str], bool]:
    """(numbered ranges (prefix, first, last, width), bare names, whether some part was not understood)."""
    numbered: list[tuple[str, int, int, int]] = []
    bare: list[str] = []
    odd = False
    for item in _items(text):
        m = _ITEM.match(item)
        if m is None:
            if "[" in item or "]" in item or item == "":
                odd = True
                continue
            parts = split_name(item)
            if parts is None:
                bare.append(item)
            else:
                numbered.append((parts[0], parts[1], parts[1], parts[2]))
            continue
        for piece in m[2].split(","):
            r = _RANGE.match(piece)
            if r is None or (r[2] is not None and int(r[2]) < int(r[1])):
                odd = True
                continue
            numbered.append((m[1], int(r[1]), int(r[2] or r[1]), len(r[1])))
    return numbered, bare, odd


@dataclass(frozen=True, slots=True)
class Named:
    groups: tuple[str, ...]
    """The distinct groups (features) of the level the named nodes are in, in the order met (at most 2)."""
    homeless: bool
    """A named node has no group at this level."""
    unchecked: bool
    """Some names were not understood or are not in the data."""


def place_named(index: NodeIndex, text: str, level_index: int) -> Named:
    """Where the nodes of ``text`` (a --nodelist) are at one level; stops at the second group."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_NAMED:
        return Named((), False, True)
    numbered, bare, unchecked = _requested(text)
    seen: list[str] = []
    homeless = False

    def note(place_idx: int) -> bool:
        nonlocal homeless
        group = index.places[place_idx][level_index]
        if group is None:
            homeless = True
        elif group not in seen:
            seen.append(group)
        return len(seen) > 1 or homeless

    for name in bare:
        idx = (index.bare or {}).get(name)
        if idx is None:
            unchecked = True
        elif note(idx):
            return Named(tuple(seen), homeless, unchecked)
    visits = 0
    for prefix, lo, hi, width in numbered:
        runs = (index.ranges or {}).get(f"{prefix}/{width}", ())
        i = bisect.bisect_left(runs, (lo + 1, 0, 0)) - 1  # the last run starting at or before lo
        i = max(i, 0)
        covered = 0
        while i < len(runs) and runs[i][0] <= hi:
            visits += 1
            if visits > MAX_VISITS:
                return Named(tuple(seen), homeless, True)
            a, b, idx = runs[i]
            i += 1
            if b < lo:
                continue
            covered += min(b, hi) - max(a, lo) + 1
            if note(idx):
                return Named(tuple(seen), homeless, unchecked)
        if covered < hi - lo + 1:
            unchecked = True
    return Named(tuple(seen), homeless, unchecked)
