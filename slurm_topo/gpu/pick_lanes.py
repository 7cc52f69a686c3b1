"""Every subset of a 9-16 GPU node scored at once, in lanes of Python integers: the pick of
:mod:`slurm_topo.gpu.pick` (its order, rules 1-4) at a cost bounded by the number of free GPUs (less where
chunks are left out or integers dropped, below), with nothing built ahead of it.

The free rows ``f_0 < f_1 < … < f_(m-1)`` (m <= 16) index 2^m *lanes*: lane ``s`` is the subset holding
``f_i`` for every bit i of s. A lane is ``B`` bits of a Python integer, B = its fields and a guard bit and no
more (the work is linear in B: 9-20 bits on the 16-GPU families, where rounding up to CPython's 30-bit digit
cost 1.1-1.6× for no gain in shift speed), and its fields, high to low, are::

    guard (1) | flags (d) | sum (SB) | islands (wi)

- *flags*: one bit per link level ``ℓ_0 > … > ℓ_(d-1)`` between ``hi`` (no k-set can have a slowest link
  above it: each of its k GPUs needs k-1 free links that fast) and ``lo`` (the slowest link of a k-set
  found greedily; rows without k-1 links that fast to such rows are left out first): bit j is cleared when
  a pair of the subset is slower than ``ℓ_j``. The flags are a thermometer code of the subset's slowest
  link: the more bits, the faster (rule 1);
- *sum*: the sum over the subset's pairs of ``(bandwidth - lo) / g`` (g the gcd of those differences), which
  orders the sets of one slowest link by their bandwidth sum (rule 2);
- *islands*: ``len(whole) - broken``, ``broken`` the previously whole free islands the subset takes part of
  but not all (rule 3).

The lanes are built by doubling: those of the subsets of the first i+1 rows are those of the first i rows
followed by the same lanes plus row i's contribution ``T_i`` (its pairs to the rows already there: an
addition, and an AND that clears flags), itself built by doubling over the rows below it. The island field:
a row of island I adds -1 unless a row of I below it is there (so a set adds -1 per island it touches), and
I's highest row adds +1 when all of I is there — bits while T is built over the low rows, one number after
that. Lanes are kept in a list of integers of 2^10 lanes each (``_CHUNK``; the list index holds the high
rows, so no operation copies more than one chunk and no broadcast constant is larger than one); a chunk
whose sets all hold more than k rows is not built, nor one whose high rows hold a pair slower than the
floor ``lo`` (no flag is left in its lanes, nor in those of any chunk above it). A high row's contribution
is the same for the chunks whose pairs to it add and clear alike: once those are left out, each distinct
one is made once.

A pick is the largest lane among the sets of k rows: each chunk keeps its lanes of k rows (an AND with a
fixed mask), chunks with different numbers of high rows then hold disjoint lanes and are ORed together;
the integers with no lane at least the greedy set's own (its lane computed directly, a floor the best
reaches; the greedy takes, among the rows whose slowest link to the set is fastest, the one with the most
bandwidth to it: often close to the best, and then most integers have no such lane; where its slowest
link is below the best's, many do) are dropped with one subtraction each, and a tournament (compare by
subtraction against the guard bit, select by mask) takes the largest lane by lane across the rest, then
within the one integer left, an upper lane winning ties: its last round decides bit 0 (row ``f_0``), the
one before bit 1, … so among equal keys the winner holds the lowest rows. The lane's index is read back
from those rounds; the chunk, among those whose lane reaches the key, is the one with the lowest high rows
(rule 4).

Cost: passes in C over at most 2^m lanes — about four per row's contribution and lane step, three for the
tournament's masks and floor, a duel per integer that reaches the floor — plus O(m^2) Python steps for the
bounds and the pair values and O(m·2^m / 2^10) for the loops; the chunks left out and the integers dropped
depend on the matrix, the rest does not (``benchmarks/results/pick_worst.md``).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from math import gcd

_CHUNK = 10  # lanes per integer of the lane list: 2^10

_ONES: dict[tuple[int, int], int] = {}  # (lane width, j): a 1 in each of 2^j lanes


def _ones(width: int, j: int) -> int:
    key = (width, j)
    got = _ONES.get(key)
    if got is None:
        half = 1 if j == 0 else _ones(width, j - 1)
        got = half if j == 0 else half | half << ((1 << (j - 1)) * width)
        _ONES[key] = got
    return got


@dataclass(frozen=True, slots=True)
class _Layout:
    """The lane fields of one pick (see the module docstring): their positions and the lane width."""

    width: int  # B
    sum: int  # position of the sum field (the island field below it starts at bit 0)
    flags: int  # position of the flags
    nflags: int  # d
    guard: int  # position of the guard bit

    @property
    def flag_mask(self) -> int:
        return ((1 << self.nflags) - 1) << self.flags

    @property
    def lane(self) -> int:
        return (1 << self.width) - 1


def best(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int, whole: list[int]) -> int:
    """The best ``k`` of ``rows`` (ascending row indices of ``weight``, at most 16, 3 <= k < len(rows))
    under rules (1)-(4) of :mod:`slurm_topo.gpu.pick`, as a row bitmask. ``whole``: the previously whole
    free islands (row masks inside ``rows``; one holding every row is broken by every k-set alike)."""
    if len(rows) > 16 or not 3 <= k < len(rows):
        raise ValueError(f"pick_lanes: {k} of {len(rows)} rows (3 <= k < rows <= 16)")
    every = sum(1 << r for r in rows)
    whole = [isl for isl in whole if isl & (isl - 1) and isl != every]
    # the free rows' links, by position (every row free: the matrix's own rows, read only)
    sub: Sequence[Sequence[int]] = (
        weight if len(rows) == len(weight) else [list(map(weight[r].__getitem__, rows)) for r in rows]
    )
    lo, found = _greedy(sub, k)
    kth = _kth(sub, k)
    keep = _peel(sub, k, lo, kth)
    keep_pos = {x: i for i, x in enumerate(keep)}  # the greedy set's rows are kept: position after peel
    if len(keep) < len(rows):
        rows = [rows[i] for i in keep]
        sub = [list(map(sub[i].__getitem__, keep)) for i in keep]
        kth = _kth(sub, k)
    if len(rows) == k:  # only the greedy set is left
        return sum(1 << r for r in rows)
    lay, values = _fields(sub, k, lo, len(whole), kth)
    m = len(rows)
    bc = _Broadcast(lay.width)
    lanes = _build(sub, values, rows, k, whole, lay, bc)
    floor = _lane_of([keep_pos[x] for x in found], sub, values, rows, whole, lay)
    pos = _tournament(lanes, k, lay, min(m, _CHUNK), bc, floor)
    return sum(1 << r for i, r in enumerate(rows) if pos >> i & 1)


def _fields(
    sub: Sequence[Sequence[int]], k: int, lo: int, islands: int, kth: list[int]
) -> tuple[_Layout, dict[int, tuple[int, int]]]:
    """The lane layout of a pick over the rows of ``sub`` above the floor ``lo``, and what each bandwidth
    between them adds and clears (:func:`_pair_value`). ``kth``: :func:`_kth` of ``sub``."""
    present = sorted(set().union(*sub) - {0}, reverse=True)  # the distinct bandwidths, fastest first
    hi = _ceiling(kth, k)
    levels = [w for w in present if lo <= w <= hi]
    g = 0
    for w in present:
        if w > lo:
            g = gcd(g, w - lo)
    g = g or 1
    # the sum field holds at most the whole set's sum (every pair adds >= 0): its bits, not m(m-1)/2 × the top
    pairs = Counter(chain.from_iterable(r[:i] for i, r in enumerate(sub)))
    total = sum(n * ((w - lo) // g) for w, n in pairs.items() if w > lo)
    lay = _layout(len(levels), max(1, total.bit_length()), islands)
    return lay, {w: _pair_value(w, levels, lo, g, lay) for w in present}


def _lane_of(
    s: list[int],
    sub: Sequence[Sequence[int]],
    values: dict[int, tuple[int, int]],
    rows: list[int],
    whole: list[int],
    lay: _Layout,
) -> int:
    """The lane of one set (positions ``s``), as the build makes it: a floor the best lane reaches."""
    lane, add = len(whole) | lay.flag_mask, 0
    for i, x in enumerate(s):
        for y in s[:i]:
            a, clear = values[sub[x][y]]
            add += a
            if clear:
                lane &= clear
    held = sum(1 << rows[x] for x in s)
    live = sum(1 << r for r in rows)
    broken = sum(1 for isl in whole if isl & held and not (isl & live == isl and isl & held == isl))
    return lane + add - broken


def _greedy(sub: Sequence[Sequence[int]], k: int) -> tuple[int, list[int]]:
    """A k-set built greedily (the fastest pair, then each time the row whose slowest link to the set is
    fastest, of those the one with the most bandwidth to it, the first of equals) and its slowest link: some
    k-set is at least that fast. O(k·m) after the first pair. ``sub``: the links between the rows, by
    position."""
    low, a, b = 0, 0, 1
    for i, row in enumerate(sub[:-1]):
        ws = row[i + 1 :]
        top = max(ws)
        if top > low:
            low, a, b = top, i, i + 1 + ws.index(top)
    cand = [x for x in range(len(sub)) if x != a and x != b]
    to_set = list(map(min, map(sub[a].__getitem__, cand), map(sub[b].__getitem__, cand)))
    sums = list(map(operator.add, map(sub[a].__getitem__, cand), map(sub[b].__getitem__, cand)))
    scale = 1 + max(map(max, sub)) * len(sub)  # above any sum of links to the set
    found = [a, b]
    for _ in range(k - 2):
        keys = list(map(operator.add, map(scale.__mul__, to_set), sums))
        i = keys.index(max(keys))
        low = min(low, to_set[i])
        x = cand.pop(i)
        found.append(x)
        del to_set[i], sums[i]
        row = sub[x]
        to_set = list(map(min, to_set, map(row.__getitem__, cand)))
        sums = list(map(operator.add, sums, map(row.__getitem__, cand)))
    return low, found


def _kth(sub: Sequence[Sequence[int]], k: int) -> list[int]:
    """Per row, its (k-1)-th fastest link (the row's 0 on the diagonal sorts last): a row has k-1 links at
    least ``t`` fast exactly when this is at least ``t``."""
    return [sorted(row, reverse=True)[k - 2] for row in sub]


def _peel(sub: Sequence[Sequence[int]], k: int, lo: int, kth: list[int]) -> list[int]:
    """The positions of the rows that may be in a k-set whose slowest link is at least ``lo``: those with
    k-1 such links to other such rows (repeated). The greedy set of that floor is among them. ``kth``:
    :func:`_kth` of ``sub`` (the first round; when it keeps every row, so do the others)."""
    live = [i for i, t in enumerate(kth) if t >= lo]
    if len(live) == len(sub):
        return live
    while True:
        keep = [i for i in live if sum(map(lo.__le__, map(sub[i].__getitem__, live))) >= k - 1]
        if len(keep) == len(live):
            return live
        live = keep


def _ceiling(kth: list[int], k: int) -> int:
    """No k-set of the rows has a slowest link above this: each of its rows has k-1 links at least that
    fast, so it is at most the k-th largest of the rows' (k-1)-th fastest links (``kth``, :func:`_kth`)."""
    return sorted(kth, reverse=True)[k - 1]


def _layout(nflags: int, sum_bits: int, islands: int) -> _Layout:
    isl_bits = max(2, islands.bit_length()) if islands else 0  # a row's T holds 0-2 there during a build
    flags = isl_bits + sum_bits
    guard = flags + nflags
    return _Layout(guard + 1, isl_bits, flags, nflags, guard)


def _pair_value(w: int, levels: list[int], lo: int, g: int, lay: _Layout) -> tuple[int, int]:
    """What a pair of bandwidth ``w`` adds to the sum field, and the lane it ANDs in: every bit but the
    flags of the levels it is too slow for (the fastest first); 0 when it clears none."""
    slower = sum(1 for t in levels if t > w)
    bad = ((1 << slower) - 1) << (lay.nflags - slower)
    return ((w - lo) // g if w >= lo else 0) << lay.sum, lay.lane ^ bad << lay.flags if bad else 0


class _Broadcast(dict[int, int]):
    """A lane constant repeated over 2^j lanes (j <= the chunk), remembered for the pick: ``bc[value << 5 |
    j]`` (a subscript, not a call: the build reads it some 200 times a pick)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.ones = [_ones(width, j) for j in range(_CHUNK + 1)]

    def __missing__(self, key: int) -> int:
        got = self[key] = (key >> 5) * self.ones[key & 31]
        return got


@dataclass(slots=True)
class _Row:
    """What one row brings to the build: its pair values to the rows below it and its island role."""

    values: list[tuple[int, int]]  # per lower row: (add, or)
    mates: int  # bitmask of the lower rows (by position) in the same whole island
    island: bool  # in a whole island
    last: bool  # the highest row of its whole island (it adds the island's +1 when all of it is there)


def _rows(
    sub: Sequence[Sequence[int]],
    values: dict[int, tuple[int, int]],
    rows: list[int],
    whole: list[int],
) -> list[_Row]:
    live = sum(1 << r for r in rows)
    home = [0] * len(rows)  # per position: its whole island (a row mask), 0 when none
    at = [0] * len(rows)  # per position: the positions of its whole island's rows (a mask), 0 when none
    for isl in whole:
        held = [i for i, r in enumerate(rows) if isl >> r & 1]
        mask = sum(1 << i for i in held)
        for i in held:
            home[i], at[i] = isl, mask
    out = []
    for i, r in enumerate(rows):
        isl = home[i]
        last = bool(isl) and isl & live == isl and isl >> (r + 1) == 0  # a peeled row is never there
        pairs = list(map(values.__getitem__, sub[i][:i]))
        out.append(_Row(pairs, at[i] & ((1 << i) - 1), bool(isl), last))
    return out


def _contribution(
    row: _Row, b: int, lay: _Layout, bc: _Broadcast, c: int, need: list[bool] | None = None
) -> tuple[list[int], list[int]]:
    """T for one row over the subsets of the rows below it, in two parts: what it adds (sum, island field)
    and the lanes it ANDs in (the flags it clears), each a list of chunks of 2^c lanes (one chunk, of 2^b
    lanes, while b <= c). Over the low rows the island bits are bits ("touched below" at the field's unit,
    "all there" in the guard position); they become a number once (-1, the "all there" bit moved to the
    unit), and over the high rows each chunk then adds what its high rows change, by chunk."""
    j = min(b, c)
    add_part, and_part = _low_part(row, j, lay, bc)
    touched_low = all_low = 0
    if row.island:
        unit = bc[1 << 5 | j]
        touched_low = unit ^ (add_part & unit)  # what "touched" adds where no low mate is there
        if row.last:
            there = add_part & bc[(1 << lay.guard) << 5 | j]
            all_low = there >> lay.guard  # the +1 of "all there", where the low mates are
            add_part ^= there
            add_part += all_low
        add_part -= unit
    if need is not None and not row.island and not all(need):
        return _high_part(row, b, bc, c, (add_part, and_part), need)
    adds, ands = [add_part], [and_part]
    touched, whole = [False], [True]  # per chunk: a high mate is in it; every high mate so far is
    for b2 in range(c, b):
        add, clear = row.values[b2]
        lower, upper = adds, adds
        if add:
            plus = bc[add << 5 | c]
            upper = [x + plus for x in adds]
        if row.mates >> b2 & 1:
            upper = [x if t else x + touched_low for x, t in zip(upper, touched, strict=True)]
            if row.last:
                lower = [x - all_low if w else x for x, w in zip(lower, whole, strict=True)]
            touched, whole = touched + [True] * len(touched), [False] * len(whole) + whole
        else:
            touched, whole = touched + touched, whole + whole
        adds = lower + upper
        if clear:
            bits = bc[clear << 5 | c]
            ands = ands + [x & bits for x in ands]
        else:
            ands = ands + ands
    return adds, ands


def _high_part(
    row: _Row, b: int, bc: _Broadcast, c: int, parts: tuple[int, int], need: list[bool]
) -> tuple[list[int], list[int]]:
    """The chunks of T for a row of no whole island, for the sets of the high rows below it that ``need``
    one (the others get 0): the low part ``parts`` plus what the row's pairs to those rows add (and clear).
    Sets whose pairs add (and clear) alike share one integer: the pairs' sums and flags are doubled as
    small numbers, and each distinct one is made once, from the set less its highest row when that one was
    made."""
    sums, flags = [0], [-1]  # per set of high rows: its pairs' sum, the AND of their clears (-1: none)
    for add, clear in row.values[c:b]:
        sums += [x + add for x in sums] if add else sums
        flags += [x & clear for x in flags] if clear else flags
    made_add: dict[int, int] = {0: parts[0]}
    made_and: dict[int, int] = {-1: parts[1]}
    adds, ands = [0] * len(sums), [0] * len(sums)
    for i, wanted in enumerate(need):
        if not wanted:
            continue
        rest = i & ~(1 << i.bit_length() >> 1)  # the set less its highest row
        got = made_add.get(sums[i])
        if got is None:
            base = made_add.get(sums[rest])
            got = made_add[sums[i]] = (
                base + bc[(sums[i] - sums[rest]) << 5 | c]
                if base is not None
                else parts[0] + bc[sums[i] << 5 | c]
            )
        adds[i] = got
        got = made_and.get(flags[i])
        if got is None:
            base = made_and.get(flags[rest])
            clear = row.values[c + i.bit_length() - 1][1]
            got = made_and[flags[i]] = (
                base & bc[clear << 5 | c] if base is not None else parts[1] & bc[flags[i] << 5 | c]
            )
        ands[i] = got
    return adds, ands


def _low_part(row: _Row, j: int, lay: _Layout, bc: _Broadcast) -> tuple[int, int]:
    """T over the 2^j subsets of the low rows below the row: the adds (the island bits as bits) and ands."""
    if row.island:
        return _low_part_island(row, j, lay, bc)
    add_part, and_part, width, ones = 0, lay.lane, lay.width, bc.ones
    for b2, (add, clear) in enumerate(row.values[:j]):  # (a row's values seldom repeat: multiplied, not kept)
        shift = width << b2
        add_part |= (add_part + add * ones[b2] if add else add_part) << shift
        and_part |= (and_part & clear * ones[b2] if clear else and_part) << shift
    return add_part, and_part


def _low_part_island(row: _Row, j: int, lay: _Layout, bc: _Broadcast) -> tuple[int, int]:
    """:func:`_low_part` for a row of a whole island."""
    guard = 1 << lay.guard
    keep = lay.lane ^ guard  # clears the island's "all there" bit (in the guard position)
    add_part, and_part, ones = guard if row.last else 0, lay.lane, bc.ones
    for b2 in range(j):
        add, clear = row.values[b2]
        mate = row.mates >> b2 & 1
        shift = (1 << b2) * lay.width
        low = add_part & bc[keep << 5 | b2] if mate and row.last else add_part
        up = add_part + add * ones[b2] if add else add_part
        if mate:  # the island's "touched below" bit (the field's unit)
            up |= ones[b2]
        add_part = low | up << shift
        and_part |= (and_part & clear * ones[b2] if clear else and_part) << shift
    return add_part, and_part


def _build(
    sub: Sequence[Sequence[int]],
    values: dict[int, tuple[int, int]],
    rows: list[int],
    k: int,
    whole: list[int],
    lay: _Layout,
    bc: _Broadcast,
) -> list[int | None]:
    """The lanes of every subset of ``rows`` as chunks of 2^c lanes (c = min(rows, _CHUNK)); a chunk whose
    subsets all hold more than k rows is None."""
    c = min(len(rows), _CHUNK)
    lanes: list[int | None] = [len(whole) | lay.flag_mask]  # the empty set: no island touched, no pair slow
    for b, row in enumerate(_rows(sub, values, rows, whole)):
        if b < c:
            adds, ands = _contribution(row, b, lay, bc, c)
            v = lanes[0]
            assert v is not None
            lanes = [v | ((v & ands[0] if _clears(row) else v) + adds[0]) << ((1 << b) * lay.width)]
            continue
        # a set with a pair slower than the floor has no flag left, whatever joins it: it is never built
        slow = sum(
            1 << i for i, (_, clear) in enumerate(row.values[c:]) if clear and not clear & lay.flag_mask
        )
        need = [v is not None and i.bit_count() < k and not i & slow for i, v in enumerate(lanes)]
        adds, ands = _contribution(row, b, lay, bc, c, need)
        cl = _clears(row)
        up: list[int | None] = []
        for v, add, keep, wanted in zip(lanes, adds, ands, need, strict=True):
            if not wanted or v is None:
                up.append(None)
            else:
                up.append((v & keep) + add if cl else v + add)
        lanes += up
    return lanes


def _clears(row: _Row) -> bool:
    """Whether any pair of the row clears a flag (else every AND keeps every lane)."""
    return any(clear for _, clear in row.values)


_POPS: dict[
    tuple[int, int], list[int]
] = {}  # (lane width, c): per p, all-ones lanes where p of c bits are set


def _pops(width: int, c: int) -> list[int]:
    """Per p, the lanes (of 2^c) whose index has p bits set, all ones there: one doubling per bit, all p
    at once (the first pick of a process makes them)."""
    got = _POPS.get((width, c))
    if got is None:
        got = [(1 << width) - 1]
        for i in range(c):
            shift = width << i
            got = [low | high << shift for low, high in zip(got + [0], [0] + got, strict=True)]
        _POPS[width, c] = got
    return got


def _duel(high: int, low: int, guard_bits: int, guard: int) -> tuple[int, int]:
    """Lane by lane the larger of ``high`` and ``low`` (``high`` on ties) and the guard bits of the lanes
    where ``high`` won."""
    won = ((high | guard_bits) - low) & guard_bits
    return won, low ^ ((high ^ low) & (won - (won >> guard)))


def _tournament(lanes: list[int | None], k: int, lay: _Layout, c: int, bc: _Broadcast, floor: int) -> int:
    """The index of the best k-set: the largest lane among those of k rows. Each chunk keeps its lanes of
    k rows (the others become 0); chunks whose sets have different numbers of high rows keep disjoint
    lanes, so they are ORed into as few integers as the most numerous such group has chunks; those with no
    lane at least ``floor`` (the lane of a k-set) are dropped; the largest of the rest, lane by lane,
    then within the one integer left (its lane: the low rows, the lowest set among equals), then the
    lowest high rows among the chunks that reach it."""
    pops = _pops(lay.width, c)
    stacks: dict[int, list[int]] = {}  # per number of high rows: that group's kept chunks, in index order
    for i, v in enumerate(lanes):
        q = i.bit_count()
        if v is not None and 0 <= k - q <= c:
            stacks.setdefault(q, []).append(v & pops[k - q])
    merged = [0] * max(len(group) for group in stacks.values())
    for group in stacks.values():
        for j, x in enumerate(group):
            merged[j] |= x
    guards = bc[(1 << lay.guard) << 5 | c]
    if len(merged) > 1:  # only the integers with a lane at least as large as a known set's can win
        at_least = bc[floor << 5 | c]
        merged = [x for x in merged if (x | guards) - at_least & guards]
    while len(merged) > 1:  # lane by lane the largest (an odd one out waits for the next round)
        half = len(merged) // 2
        rest = merged[2 * half :]
        merged = [
            _duel(h, lo, guards, lay.guard)[1]
            for lo, h in zip(merged[:half], merged[half : 2 * half], strict=True)
        ]
        merged += rest
    key = merged[0]
    inner = []
    for j in range(c - 1, -1, -1):
        h = (1 << j) * lay.width
        won, key = _duel(key >> h, key & ((1 << h) - 1), bc[(1 << lay.guard) << 5 | j], lay.guard)
        inner.append(won)
    assert key & lay.flag_mask, "pick_lanes: no k-clique at the floor"
    pos = 0
    for j, won in enumerate(reversed(inner)):
        if won >> (pos * lay.width + lay.guard) & 1:
            pos += 1 << j
    q = k - pos.bit_count()
    shift = pos * lay.width
    reach = [
        i
        for i, v in enumerate(lanes)
        if v is not None and i.bit_count() == q and v >> shift & lay.lane == key
    ]
    assert reach, "pick_lanes: the best lane is in no chunk"
    high = (len(lanes) - 1).bit_length()
    # the lowest set holds the lowest high row where two differ: the largest chunk index read backwards
    return max(reach, key=lambda i: int(f"{i:0{high}b}"[::-1] or "0", 2)) << c | pos
