"""Hostlist expressions, over ClusterShell's NodeSet/RangeSet algebra.

Two functions: ``expand`` (expression -> names, in ClusterShell's sorted order; one plain bracket is expanded
arithmetically, to the same list) and ``compress`` (names -> one Slurm-compatible expression). Folding only
ever happens on the *last* numeric run of a name: Slurm accepts multi-dimensional ranges, but a one-axis fold
is unambiguous and what ``scontrol show hostlist`` prints.

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


_ONE_BRACKET = re.compile(
    r"((?:[A-Za-z0-9._-]*[A-Za-z._-])?)\[([0-9,-]+)\]((?:[A-Za-z._-][A-Za-z0-9._-]*)?)\Z"
)
"""``prefix[ranges]suffix`` with no digit touching a bracket (ClusterShell reads ``n9[8-10]`` its own way)."""
_ONE_NAME = re.compile(r"[A-Za-z0-9._-]+\Z")
_RANGE_NUMBERS = re.compile(r"(\d+)(?:-(\d+))?\Z")


def _plain_ranges(text: str) -> tuple[list[tuple[int, int]], int] | None:
    """A bracket's ranges (``000-039``, ``1-4,7``) -> ((low, high) each; the zero-padded width or 0), when
    ClusterShell's reading is plain arithmetic: every item ``N`` or ``LO-HI`` with ``LO <= HI``, and either no
    number written with a leading zero or every number written with the same width. None for anything else
    (steps, mixed widths, ``5-3``, an empty item): those go through ClusterShell."""
    width = -1
    ranges: list[tuple[int, int]] = []
    for item in text.split(","):
        m = _RANGE_NUMBERS.match(item)
        if m is None:
            return None
        lo_text, hi_text = m[1], m[2] or m[1]
        if (len(lo_text) > 1 and lo_text[0] == "0") or (len(hi_text) > 1 and hi_text[0] == "0"):
            if len(lo_text) != len(hi_text):
                return None
            this = len(lo_text)
        else:
            this = 0
        if width not in (-1, this):
            return None
        width = this
        lo, hi = int(lo_text), int(hi_text)
        if lo > hi:
            return None
        ranges.append((lo, hi))
    return ranges, width


def _expand_plain(expression: str) -> list[str] | None:
    """``prefix[ranges]suffix`` or one plain name, expanded arithmetically, in ClusterShell's order (the
    numbers ascending, each once); None for every other expression. ``tests/test_inventory.py`` compares it
    with ClusterShell on generated expressions. The caller has counted the names (``check_size``)."""
    if _ONE_NAME.match(expression):
        return [expression]
    m = _ONE_BRACKET.match(expression)
    if m is None:
        return None
    found = _plain_ranges(m[2])
    if found is None:
        return None
    ranges, width = found
    if len(ranges) == 1:
        numbers: Iterable[int] = range(ranges[0][0], ranges[0][1] + 1)
    else:
        numbers = sorted({i for lo, hi in ranges for i in range(lo, hi + 1)})
    prefix, suffix = m[1], m[3]
    if width:
        return [f"{prefix}{i:0{width}d}{suffix}" for i in numbers]
    return [f"{prefix}{i}{suffix}" for i in numbers]


def naturally_ordered(expression: str) -> bool:
    """True when ``expand(expression)`` is known to come out in :func:`~slurm_topo.model.natural_key` order
    without sorting: one plain name, or one ``prefix[ranges]suffix`` of plain arithmetic (its numbers ascend
    with a fixed prefix and suffix, so the digit run they form ascends too)."""
    if _ONE_NAME.match(expression):
        return True
    m = _ONE_BRACKET.match(expression)
    return m is not None and _plain_ranges(m[2]) is not None


def expand(expression: str) -> list[str]:
    """Expand a hostlist expression such as ``gpu-[01-03],login1`` into its names (in ClusterShell's order).

    One name or one ``prefix[ranges]suffix`` of plain ranges (an inventory's ``gpu-r0k00012-[000-039]``) is
    expanded arithmetically, to what ClusterShell gives (a 100 000-node inventory in racks of 40: 0.05 s
    instead of 0.2); anything else goes through ClusterShell's parser."""
    if not expression or not expression.strip():
        raise HostlistError(expression, "empty")
    if "@" in expression or "!" in expression or "&" in expression or "^" in expression:
        raise HostlistError(expression, "node groups and set operators are not allowed")
    check_size(expression)
    plain = _expand_plain(expression)
    if plain is not None:
        return plain
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
