"""Hostlist expressions, over ClusterShell's NodeSet/RangeSet algebra.

Two functions: ``expand`` (expression -> names, in ClusterShell's sorted order) and ``compress`` (names -> one
Slurm-compatible expression). Folding only ever happens on the *last* numeric run of a name: Slurm accepts
multi-dimensional ranges, but a one-axis fold is unambiguous and what ``scontrol show hostlist`` prints.

``compress`` splits each name once with a regular expression and hands the numbers to ``RangeSet`` (the
bracket algebra, padding included, stays ClusterShell's): parsing every name through ``NodeSet`` costs ~26 µs
a name, which alone would spend half the 5 s budget for a 100 000-node fleet.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetBase, NodeSetParseError
from ClusterShell.RangeSet import RangeSet, RangeSetParseError

from .errors import HostlistError
from .model import MAX_NODES, SLURM_MAX_RANGE

_LAST_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)\Z")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE_ITEM = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?(?:/\s*(\d+)\s*)?\Z")


def _top_level_parts(expression: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expression):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(expression[start:i])
            start = i + 1
    parts.append(expression[start:])
    return parts


MAX_DIGITS = 20
"""2^64 has 20 digits: a longer number in a range is refused before it is converted."""


def _range_count(text: str) -> int:
    """How many numbers a bracket's content (``1-4,7,10-20/2``) names; 0 for what ClusterShell will refuse."""
    total = 0
    for item in text.split(","):
        m = _RANGE_ITEM.match(item)
        if m is None:
            return 0  # not a range list: the parser says what is wrong
        if any(g is not None and len(g) > MAX_DIGITS for g in m.groups()):
            raise HostlistError(text, f"a number of more than {MAX_DIGITS} digits (Slurm's are below 2^64)")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        step = int(m[3]) if m[3] is not None else 1
        if hi >= lo and step > 0:
            total += (hi - lo) // step + 1
    return total


def count(expression: str) -> int:
    """How many names ``expression`` names (duplicates counted), without expanding it."""
    total = 0
    for part in _top_level_parts(expression):
        n = 1
        for group in _BRACKET.findall(part):
            n *= max(_range_count(group), 1)
        total += n
    return total


def check_size(expression: str, limit: int = MAX_NODES) -> int:
    """``count(expression)``, or ``HostlistError`` when it is over ``limit`` (before anything is expanded)."""
    n = count(expression)
    if n > limit:
        left = f" ({limit} left)" if limit < MAX_NODES else ""
        raise HostlistError(expression, f"names {n} hosts, over the limit of {MAX_NODES} nodes in all{left}")
    return n


def expand(expression: str) -> list[str]:
    """Expand a hostlist expression such as ``gpu-[01-03],login1`` into its names."""
    if not expression or not expression.strip():
        raise HostlistError(expression, "empty")
    if "@" in expression or "!" in expression or "&" in expression or "^" in expression:
        raise HostlistError(expression, "node groups and set operators are not allowed")
    check_size(expression)
    try:
        return list(NodeSet(expression, resolver=RESOLVER_NOGROUP))
    except (NodeSetParseError, RangeSetParseError) as exc:
        part = getattr(exc, "part", None)
        raise HostlistError(expression, f"{exc}" + (f" near {part!r}" if part else "")) from None


def expand_keep_duplicates(expression: str) -> list[str]:
    """Like ``expand``, but a name listed twice (``n1,n[1-2]``) comes out twice, as Slurm would read it."""
    check_size(expression)
    return [name for part in _top_level_parts(expression) for name in expand(part)]


def expand_numbers(text: str) -> list[int]:
    """A number list such as ``0-11,24-35`` (CPU ids, GPU indices) -> its integers, ascending."""
    if not text:
        return []
    n = _range_count(text)
    if n > MAX_NODES:
        raise HostlistError(text, f"names {n} numbers, over the limit of {MAX_NODES}")
    try:
        return sorted(int(x) for x in RangeSet(text))
    except (RangeSetParseError, ValueError) as exc:
        raise HostlistError(text, str(exc)) from None


def compress(names: Iterable[str]) -> str:
    """Fold names into one hostlist expression (``gpu-[01-06],login1``); empty input gives ``""``.

    Slurm reads at most ``SLURM_MAX_RANGE`` (65 536) hosts in one bracket range: names sharing a prefix and
    suffix are folded in chunks of at most that many, so no range is longer
    (``n[1-65536],n[65537-70000]``)."""
    return _compress(tuple(names))


@functools.lru_cache(maxsize=65536)
def _compress(names: tuple[str, ...]) -> str:
    # Cached: a leaf's nodes usually share one NodeName= line too, so each set is folded once per render. Room
    # for every leaf of a 100 000-node fleet in racks of 10 (topology.conf folds them all before
    # slurm-topo-nodes.conf asks again); an entry holds the names' tuple and the result.
    groups: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in names:
        match = _LAST_NUMBER.match(name)
        if match is None:
            plain.append(name)
        else:
            groups.setdefault((match[1], match[3]), []).append(match[2])
    nodeset = NodeSet(resolver=RESOLVER_NOGROUP)
    for name in plain:
        nodeset.update(NodeSetBase(name, None))
    long_runs: list[str] = []
    for (prefix, suffix), numbers in groups.items():
        rangeset = RangeSet()
        rangeset.update(numbers)  # RangeSet is a set of padded number strings; 4x faster than updaten()
        pattern = prefix + "%s" + suffix
        if len(rangeset) <= SLURM_MAX_RANGE:
            nodeset.update(NodeSetBase(pattern, rangeset))
            continue
        ordered = list(rangeset)  # sorted; chunks of at most SLURM_MAX_RANGE names fold to ranges no longer
        for start in range(0, len(ordered), SLURM_MAX_RANGE):
            chunk = RangeSet()
            chunk.update(ordered[start : start + SLURM_MAX_RANGE])
            long_runs.append(str(NodeSetBase(pattern, chunk)))
    return ",".join(filter(None, (str(nodeset), *long_runs)))
