"""Hostlist expressions read as Slurm reads them, and names folded back into one.

One reader, ``_parse``, follows Slurm's ``hostlist_create`` (``src/common/hostlist.c``, 22.05 to 26.05); every
other function reads through it. An expression is a comma list of items; an item is text with bracket groups,
``gpu1[8-12]`` or ``r[1-2]n[01-04]``; a bracket holds ``N`` and ``LO-HI`` items, comma-separated. A name is
the item's text with each bracket's number put in place, zero-padded to the width of the range's ``LO`` as
written. Slurm does not read it as ClusterShell's NodeSet does, which is why this is not NodeSet:

- ``gpu1[8-12]`` is the prefix ``gpu1`` and the numbers 8-12: gpu18, gpu19, gpu110, gpu111, gpu112
  (ClusterShell: gpu18 to gpu112, 95 names); ``x88[1-65535]`` is 65 535 names, not 8 864 655.
- The width is ``LO``'s alone: ``n[8-012]`` is n8-n12, ``n[0001-3]`` n0001-n0003, ``n[00-0]`` n00
  (ClusterShell refuses all three, "padding length mismatch").
- Brackets may touch or follow digits: ``n[1-2][3-4]`` is n13 n14 n23 n24, ``n[7-8]0[1-2]`` n701 n702 n801
  n802 (ClusterShell: "illegal reopening bracket").
- Names come in Slurm's order, duplicates kept (``n[3,1,2],n1`` is n3 n1 n2 n1; ClusterShell sorts and drops
  them). With three or more brackets Slurm's nesting is its own: the next-to-last bracket varies slowest, then
  the ones before it, the last fastest (``x[1-2]y[3-4]z[5-6]`` is x1y3z5 x1y3z6 x2y3z5 x2y3z6 x1y4z5 ...).
- Empty items are skipped (``n1,,n2``), as Slurm does (ClusterShell: an error). Steps (``n[1-9/2]``) and
  descending ranges are refused, as by Slurm (ClusterShell reads steps).

Refused although Slurm reads them (each a likely typo, or read differently by releases): ``+`` in a number
(Slurm: ``n[+1]`` is n01), a range with no end (``n[1-]`` is n1), an unclosed or stray bracket (22.05 reads
``n[1-2`` as ``n]``, ``n1]`` as ``n1]``), numbers over 2**64-2, ClusterShell's ``@group``/``!``/``&``/``^``,
and an item of three or more bracket groups with a malformed one before the last two (``[a]r[1-2]n[1-2]``:
Slurm silently reads no names for it, its recursion losing the error as ``MAX(0, -1)``). Whitespace is no
separator here (Slurm splits at it): it stays in the name, which no caller takes for a node name. Read
although Slurm refuses them: a range, or a bracket before the last, of more than 65 536 hosts (the renderers
never write one: ``compress`` splits them), and text after the last bracket, ``n[1-3]-ib`` (Slurm reads it
from 23.11 on, as n1-ib n2-ib n3-ib; 22.05 and 23.02 refuse it, so ``compress`` never writes it).

How many names an expression makes is computed from the parse, before anything is expanded (``check_size``).

``compress`` folds names into one expression of the forms every release reads alike: it folds only a name's
last digit run and only when the name ends with it (a name with text after its last digit is listed as it is),
with ClusterShell's RangeSet doing the range and padding algebra. It splits each name once with a regular
expression: parsing every name through ``NodeSet`` costs ~26 µs a name, which alone would spend half the 5 s
budget for a 100 000-node fleet. ``tests/test_hostlist_slurm.py`` compares the reader, and ``compress`` read
back, with ``scontrol show hostnames`` on generated expressions.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetBase
from ClusterShell.RangeSet import RangeSet, RangeSetParseError

from .errors import HostlistError
from .model import MAX_NODES, SLURM_MAX_RANGE, SLURM_MAX_SUFFIX

MAX_DIGITS = 20
"""2^64 has 20 digits: a longer number in a range is refused before it is converted."""

_Range = tuple[int, int, int]
"""One bracket item: (low, high, width); ``width`` is the length of ``low`` as written (Slurm's padding)."""
_Item = tuple[tuple[str, ...], tuple[tuple[_Range, ...], ...]]
"""One comma item of an expression: its texts (one more than its brackets) and its brackets' ranges."""

_PIECE = re.compile(r"([^,\[\]]+)|\[([^\[\]]*)\]|(,)|(.)", re.S)
_RANGE_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z")  # strtoul's digits: ASCII only
_FORBIDDEN = re.compile(r"[@!&^]")
_LAST_NUMBER = re.compile(r"^(.*?)([0-9]+)\Z")


def _ranges(expression: str, text: str) -> tuple[_Range, ...]:
    """A bracket's content (``1-4,07,10-20``) -> its ranges, or HostlistError saying what is wrong."""
    out: list[_Range] = []
    for item in text.split(","):
        m = _RANGE_ITEM.match(item)
        if m is None:
            if not item:
                reason = f"an empty range in [{text}]"
            elif "/" in item:
                reason = f"[{text}]: {item!r} has a step, which Slurm does not read"
            else:
                reason = f"[{text}]: {item!r} is not a number or a LOW-HIGH range"
            raise HostlistError(expression, reason)
        lo_text, hi_text = m[1], m[2] or m[1]
        if max(len(lo_text), len(hi_text)) > MAX_DIGITS:
            raise HostlistError(
                expression, f"a number of more than {MAX_DIGITS} digits (Slurm's are below 2^64)"
            )
        lo, hi = int(lo_text), int(hi_text)
        if hi > SLURM_MAX_SUFFIX:
            raise HostlistError(
                expression, f"number {hi_text} is too large for Slurm's hostlist (max 2**64-2)"
            )
        if lo > hi:
            raise HostlistError(expression, f"[{text}]: range {item} runs backwards (Slurm refuses it)")
        out.append((lo, hi, len(lo_text)))
    return tuple(out)


def _parse(expression: str) -> list[_Item]:
    """The expression's comma items, as Slurm's ``hostlist_create`` splits and reads them (empty items
    skipped), or HostlistError."""
    if not expression or not expression.strip():
        raise HostlistError(expression, "empty")
    if _FORBIDDEN.search(expression):
        raise HostlistError(expression, "node groups and set operators are not allowed")
    items: list[_Item] = []
    if "[" not in expression and "]" not in expression:
        items = [((name,), ()) for name in expression.split(",") if name]
        if not items:
            raise HostlistError(expression, "empty")
        return items
    texts: list[str] = [""]
    brackets: list[tuple[_Range, ...]] = []
    for m in _PIECE.finditer(expression):
        text, inside, comma, stray = m.groups()
        if text is not None:
            texts[-1] += text
        elif inside is not None:
            brackets.append(_ranges(expression, inside))
            texts.append("")
        elif comma is not None:
            if brackets or texts[0]:
                items.append((tuple(texts), tuple(brackets)))
            texts, brackets = [""], []
        elif stray == "[":
            raise HostlistError(expression, "a '[' with no ']' after it, or a bracket inside a bracket")
        else:
            raise HostlistError(expression, "a ']' with no '[' before it")
    if brackets or texts[0]:
        items.append((tuple(texts), tuple(brackets)))
    if not items:
        raise HostlistError(expression, "empty")
    return items


def _bracket_count(ranges: tuple[_Range, ...]) -> int:
    return sum(hi - lo + 1 for lo, hi, _ in ranges)


def _count(items: list[_Item]) -> int:
    return sum(math.prod(_bracket_count(b) for b in brackets) for _, brackets in items)


def count(expression: str) -> int:
    """How many names ``expression`` makes (duplicates counted), computed without expanding it."""
    return _count(_parse(expression))


def _check(expression: str, items: list[_Item], limit: int = MAX_NODES) -> int:
    n = _count(items)
    if n > limit:
        left = f" ({limit} left)" if limit < MAX_NODES else ""
        raise HostlistError(expression, f"names {n} hosts, over the limit of {MAX_NODES} nodes in all{left}")
    return n


def check_size(expression: str, limit: int = MAX_NODES) -> int:
    """``count(expression)``, or ``HostlistError`` when it is over ``limit`` or does not parse (before
    anything is expanded)."""
    return _check(expression, _parse(expression), limit)


def _numbers(ranges: tuple[_Range, ...]) -> list[str]:
    """A bracket's numbers as Slurm prints them (``%0*lu``: zero-padded to the range's width), in order."""
    out: list[str] = []
    for lo, hi, width in ranges:
        if width <= len(str(lo)):  # no padding: every number of the range is at least as long as lo
            out.extend(map(str, range(lo, hi + 1)))
        else:
            out.extend(f"{i:0{width}d}" for i in range(lo, hi + 1))
    return out


def _names(head: str, ranges: tuple[_Range, ...], tail: str) -> list[str]:
    """``head`` + each number of the bracket (zero-padded as Slurm's ``%0*lu``) + ``tail``, in order."""
    head, tail = head.replace("%", "%%"), tail.replace("%", "%%")
    out: list[str] = []
    for lo, hi, width in ranges:
        out.extend(map(f"{head}%0{width}d{tail}".__mod__, range(lo, hi + 1)))
    return out


def _expand_item(texts: tuple[str, ...], brackets: tuple[tuple[_Range, ...], ...]) -> list[str]:
    """One comma item's names in Slurm's order (``_push_range_list``): the brackets before the last vary from
    the next-to-last (slowest) back to the first, and the last bracket fastest."""
    if not brackets:
        return [texts[0]]
    if len(brackets) == 1:
        return _names(texts[0], brackets[0], texts[1])
    outer = range(len(brackets) - 2, -1, -1)  # next-to-last bracket first
    out: list[str] = []
    for combo in itertools.product(*(_numbers(brackets[i]) for i in outer)):
        values = dict(zip(outer, combo, strict=True))
        prefix = texts[0] + "".join(values[i] + texts[i + 1] for i in range(len(brackets) - 1))
        out.extend(_names(prefix, brackets[-1], texts[-1]))
    return out


def _ascending(items: list[_Item]) -> bool:
    """True when the names come out strictly ascending in ``natural_key`` order, the last the longest: one
    name, or one bracket whose ranges ascend without overlap and never narrow (the digit run each number sits
    in, digits before and after the bracket included, then grows with the number, and so does the name)."""
    if len(items) != 1:
        return False
    _, brackets = items[0]
    if not brackets:
        return True
    if len(brackets) != 1:
        return False
    ranges = brackets[0]
    return all(
        lo > ranges[i - 1][1] and width >= ranges[i - 1][2] for i, (lo, _, width) in enumerate(ranges) if i
    )


def expand_keep_duplicates(expression: str) -> list[str]:
    """Slurm's reading of ``expression``: every name in Slurm's order, a name listed twice (``n1,n[1-2]``)
    twice. Counted (``check_size``) before anything is expanded."""
    items = _parse(expression)
    _check(expression, items)
    if len(items) == 1:
        return _expand_item(*items[0])
    return [name for item in items for name in _expand_item(*item)]


def expand(expression: str) -> list[str]:
    """Expand a hostlist expression such as ``gpu-[01-03],login1`` into its names: Slurm's reading, in
    Slurm's order, each name once (its first place)."""
    items = _parse(expression)
    _check(expression, items)
    if len(items) == 1:
        names = _expand_item(*items[0])
        return names if _ascending(items) else list(dict.fromkeys(names))
    return list(dict.fromkeys(name for item in items for name in _expand_item(*item)))


def naturally_ordered(expression: str) -> bool:
    """True when ``expand(expression)`` is known to come out in :func:`~slurm_topo.core.model.natural_key`
    order without sorting, each name once, the last the longest: one plain name, or one
    ``prefix[ranges]suffix`` whose ranges ascend and never narrow."""
    try:
        return _ascending(_parse(expression))
    except HostlistError:
        return False


def expand_numbers(text: str) -> list[int]:
    """A number list such as ``0-11,24-35`` (CPU ids, GPU indices) -> its integers, ascending."""
    if not text:
        return []
    n = 0
    for item in text.split(","):
        m = _RANGE_ITEM.match(item.strip())
        if m is None:
            continue  # not a plain range: RangeSet says what is wrong
        if max(len(m[1]), len(m[2] or "")) > MAX_DIGITS:
            raise HostlistError(text, f"a number of more than {MAX_DIGITS} digits")
        n += max(int(m[2] or m[1]) - int(m[1]) + 1, 0)
    if n > MAX_NODES:
        raise HostlistError(text, f"names {n} numbers, over the limit of {MAX_NODES}")
    try:
        return sorted(int(x) for x in RangeSet(text))
    except (RangeSetParseError, ValueError) as exc:
        raise HostlistError(text, str(exc)) from None


def compress(names: Iterable[str]) -> str:
    """Fold names into one hostlist expression (``gpu-[01-06],login1``) that Slurm 22.05 and later read back
    as exactly those names; empty input gives ``""``.

    Only a name's trailing digit run is folded (``gpu1``, ``gpu18`` and ``gpu110`` are ``gpu[1,18,110]``); a
    name with text after its last digit (``n1-ib``) is listed as it is (Slurm reads ``n[1-2]-ib`` only from
    23.11 on). Slurm reads at most ``SLURM_MAX_RANGE`` (65 536) hosts in one bracket range: names sharing a
    prefix are folded in chunks of at most that many, so no range is longer
    (``n[1-65536],n[65537-70000]``)."""
    return _compress(tuple(names))


@functools.lru_cache(maxsize=65536)
def _compress(names: tuple[str, ...]) -> str:
    # Cached: a leaf's nodes usually share one NodeName= line too, so each set is folded once per render. Room
    # for every leaf of a 100 000-node fleet in racks of 10 (topology.conf folds them all before
    # slurm-topo-nodes.conf asks again); an entry holds the names' tuple and the result.
    folded = _one_prefix(names)
    return folded if folded is not None else _clustershell_fold(names)


_PLAIN_PREFIX = re.compile(r"[A-Za-z0-9._-]*\Z")


def _one_prefix(names: tuple[str, ...]) -> str | None:
    """The fold of names that share one plain prefix and whose trailing numbers all have one width (a rack's
    nodes, the common case), written without ClusterShell: what ``_clustershell_fold`` writes for them
    (tests/test_properties.py), ten times faster; None for any other set."""
    if not names or len(names) > SLURM_MAX_RANGE:
        return None
    first = _LAST_NUMBER.match(names[0])
    if first is None or not _PLAIN_PREFIX.match(first[1]):
        return None
    prefix, width = first[1], len(first[2])
    numbers = set()
    for name in names:
        match = _LAST_NUMBER.match(name)
        if match is None or match[1] != prefix or len(match[2]) != width:
            return None
        numbers.add(int(match[2]))
    ordered = sorted(numbers)
    runs, start = [], ordered[0]
    for prev, number in itertools.pairwise(ordered):
        if number != prev + 1:
            runs.append((start, prev))
            start = number
    runs.append((start, ordered[-1]))
    if len(ordered) == 1:
        return f"{prefix}{ordered[0]:0{width}d}"
    return (
        prefix
        + "["
        + ",".join(f"{a:0{width}d}" + (f"-{b:0{width}d}" if b != a else "") for a, b in runs)
        + "]"
    )


def _clustershell_fold(names: tuple[str, ...]) -> str:
    """compress() through ClusterShell's NodeSet: any names."""
    groups: dict[str, list[str]] = {}
    plain: list[str] = []
    for name in names:
        match = _LAST_NUMBER.match(name)
        if match is None:
            plain.append(name)
        else:
            groups.setdefault(match[1], []).append(match[2])
    nodeset = NodeSet(resolver=RESOLVER_NOGROUP)
    for name in plain:
        nodeset.update(NodeSetBase(name, None))
    long_runs: list[str] = []
    for prefix, numbers in groups.items():
        rangeset = RangeSet()
        rangeset.update(numbers)  # RangeSet is a set of padded number strings; 4x faster than updaten()
        pattern = prefix + "%s"
        if len(rangeset) <= SLURM_MAX_RANGE:
            nodeset.update(NodeSetBase(pattern, rangeset))
            continue
        ordered = list(rangeset)  # sorted; chunks of at most SLURM_MAX_RANGE names fold to ranges no longer
        for start in range(0, len(ordered), SLURM_MAX_RANGE):
            chunk = RangeSet()
            chunk.update(ordered[start : start + SLURM_MAX_RANGE])
            long_runs.append(str(NodeSetBase(pattern, chunk)))
    return ",".join(filter(None, (str(nodeset), *long_runs)))
