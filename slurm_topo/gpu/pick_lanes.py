"""Every subset of a 9-16 GPU node scored at once, in lanes of Python integers: the pick of
:mod:`slurm_topo.gpu.pick` (its order, rules 1-4) at a cost fixed by the number of free GPUs, with nothing
built ahead of it.

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
whose sets all hold more than k rows is not built.

A pick is the largest lane among the sets of k rows: each chunk keeps its lanes of k rows (an AND with a
fixed mask), chunks with different numbers of high rows then hold disjoint lanes and are ORed together, and
a tournament (compare by subtraction against the guard bit, select by mask) takes the largest lane by lane
across the rest, then within the one integer left, an upper lane winning ties: its last round decides bit 0
(row ``f_0``), the one before bit 1, … so among equal keys the winner holds the lowest rows. The lane's
index is read back from those rounds; the chunk, among those whose lane reaches the key, is the one with the
lowest high rows (rule 4).

Cost: passes in C over at most 2^m lanes — about four per row's contribution and lane step, a dozen for the
tournament — whatever the matrix, the busy set or k, plus O(m^2) Python steps for the bounds and the pair
values and O(m·2^m / 2^10) for the loops: about 4.3-5.6 million machine instructions for 16 free GPUs,
6.2-7.3 million for the first pick of a process (``benchmarks/results/pick_worst.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    lo = _greedy(weight, rows, k)
    rows = _peel(weight, rows, k, lo)
    if len(rows) == k:  # only the greedy set is left
        return sum(1 << r for r in rows)
    present = _present(weight, rows)
    hi = _ceiling(weight, rows, k)
    levels = [w for w in present if lo <= w <= hi]
    g = 0
    for w in present:
        if w > lo:
            g = gcd(g, w - lo)
    g = g or 1
    m = len(rows)
    # the sum field holds at most the whole set's sum (every pair adds >= 0): its bits, not m(m-1)/2 × the top
    total = sum(
        (w - lo) // g for i, r in enumerate(rows) for w in map(weight[r].__getitem__, rows[:i]) if w > lo
    )
    lay = _layout(len(levels), max(1, total.bit_length()), len(whole))
    values = {w: _pair_value(w, levels, lo, g, lay) for w in present}
    lanes = _build(weight, values, rows, k, whole, lay)
    pos = _tournament(lanes, k, lay, min(m, _CHUNK))
    return sum(1 << r for i, r in enumerate(rows) if pos >> i & 1)


def _greedy(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int) -> int:
    """The slowest link of a k-set built greedily (the fastest pair, then each time the row whose slowest
    link to the set is fastest): some k-set is at least that fast. O(k·m) after the first pair."""
    low, a, b = 0, rows[0], rows[1]
    for i, x in enumerate(rows[:-1]):
        after = rows[i + 1 :]
        ws = list(map(weight[x].__getitem__, after))
        top = max(ws)
        if top > low:
            low, a, b = top, x, after[ws.index(top)]
    to_set = {x: min(weight[x][a], weight[x][b]) for x in rows if x != a and x != b}
    for _ in range(k - 2):
        x = max(to_set, key=to_set.__getitem__)
        low = min(low, to_set.pop(x))
        wx = weight[x]
        for y, w in to_set.items():
            if wx[y] < w:
                to_set[y] = wx[y]
    return low


def _peel(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int, lo: int) -> list[int]:
    """The rows that may be in a k-set whose slowest link is at least ``lo``: those with k-1 such links to
    other such rows (repeated). The greedy set of that floor is among them."""
    live = list(rows)
    while True:
        keep = [r for r in live if sum(map(lo.__le__, map(weight[r].__getitem__, live))) >= k - 1]
        if len(keep) == len(live):  # (0 on the diagonal is below lo)
            return live
        live = keep


def _present(weight: tuple[tuple[int, ...], ...], rows: list[int]) -> list[int]:
    """The distinct bandwidths between free rows, fastest first."""
    return sorted(set().union(*(map(weight[r].__getitem__, rows) for r in rows)) - {0}, reverse=True)


def _ceiling(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int) -> int:
    """No k-set of ``rows`` has a slowest link above this: each of its rows has k-1 links at least that
    fast, so it is at most the k-th largest of the rows' (k-1)-th fastest links."""
    kth = sorted((sorted(map(weight[r].__getitem__, rows), reverse=True)[k - 2] for r in rows), reverse=True)
    return kth[k - 1]  # (each row's 0 on the diagonal sorts last)


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


class _Broadcast:
    """A lane constant repeated over 2^j lanes (j <= the chunk), remembered for the pick."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.seen: dict[tuple[int, int], int] = {}

    def __call__(self, value: int, j: int) -> int:
        key = (value, j)
        got = self.seen.get(key)
        if got is None:
            got = self.seen[key] = value * _ones(self.width, j)
        return got


@dataclass(slots=True)
class _Row:
    """What one row brings to the build: its pair values to the rows below it and its island role."""

    values: list[tuple[int, int]]  # per lower row: (add, or)
    mates: int  # bitmask of the lower rows (by position) in the same whole island
    island: bool  # in a whole island
    last: bool  # the highest row of its whole island (it adds the island's +1 when all of it is there)


def _rows(
    weight: tuple[tuple[int, ...], ...],
    values: dict[int, tuple[int, int]],
    rows: list[int],
    whole: list[int],
) -> list[_Row]:
    live = sum(1 << r for r in rows)
    home = [0] * len(rows)  # per position: its whole island (a row mask), 0 when none
    for isl in whole:
        for i, r in enumerate(rows):
            if isl >> r & 1:
                home[i] = isl
    out = []
    for i, r in enumerate(rows):
        isl = home[i]
        mates = sum(1 << j for j in range(i) if home[j] == isl) if isl else 0
        last = bool(isl) and isl & live == isl and isl >> (r + 1) == 0  # a peeled row is never there
        pairs = list(map(values.__getitem__, map(weight[r].__getitem__, rows[:i])))
        out.append(_Row(pairs, mates, bool(isl), last))
    return out


def _contribution(row: _Row, b: int, lay: _Layout, bc: _Broadcast, c: int) -> tuple[list[int], list[int]]:
    """T for one row over the subsets of the rows below it, in two parts: what it adds (sum, island field)
    and the lanes it ANDs in (the flags it clears), each a list of chunks of 2^c lanes (one chunk, of 2^b
    lanes, while b <= c). Over the low rows the island bits are bits ("touched below" at the field's unit,
    "all there" in the guard position); they become a number once (-1, the "all there" bit moved to the
    unit), and over the high rows each chunk then adds what its high rows change, by chunk."""
    j = min(b, c)
    add_part, and_part = _low_part(row, j, lay, bc)
    touched_low = all_low = 0
    if row.island:
        unit = bc(1, j)
        touched_low = unit ^ (add_part & unit)  # what "touched" adds where no low mate is there
        if row.last:
            there = add_part & bc(1 << lay.guard, j)
            all_low = there >> lay.guard  # the +1 of "all there", where the low mates are
            add_part ^= there
            add_part += all_low
        add_part -= unit
    adds, ands = [add_part], [and_part]
    touched, whole = [False], [True]  # per chunk: a high mate is in it; every high mate so far is
    for b2 in range(c, b):
        add, clear = row.values[b2]
        lower, upper = adds, adds
        if add:
            plus = bc(add, c)
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
            bits = bc(clear, c)
            ands = ands + [x & bits for x in ands]
        else:
            ands = ands + ands
    return adds, ands


def _low_part(row: _Row, j: int, lay: _Layout, bc: _Broadcast) -> tuple[int, int]:
    """T over the 2^j subsets of the low rows below the row: the adds (the island bits as bits) and ands."""
    guard = 1 << lay.guard
    keep = lay.lane ^ guard  # clears the island's "all there" bit (in the guard position)
    add_part, and_part = guard if row.last else 0, lay.lane
    for b2 in range(j):
        add, clear = row.values[b2]
        mate = row.mates >> b2 & 1
        shift = (1 << b2) * lay.width
        low = add_part & bc(keep, b2) if mate and row.last else add_part
        up = add_part + bc(add, b2) if add else add_part
        if mate:  # the island's "touched below" bit (the field's unit)
            up |= bc(1, b2)
        add_part = low | up << shift
        and_part |= (and_part & bc(clear, b2) if clear else and_part) << shift
    return add_part, and_part


def _build(
    weight: tuple[tuple[int, ...], ...],
    values: dict[int, tuple[int, int]],
    rows: list[int],
    k: int,
    whole: list[int],
    lay: _Layout,
) -> list[int | None]:
    """The lanes of every subset of ``rows`` as chunks of 2^c lanes (c = min(rows, _CHUNK)); a chunk whose
    subsets all hold more than k rows is None."""
    c = min(len(rows), _CHUNK)
    bc = _Broadcast(lay.width)
    lanes: list[int | None] = [len(whole) | lay.flag_mask]  # the empty set: no island touched, no pair slow
    for b, row in enumerate(_rows(weight, values, rows, whole)):
        adds, ands = _contribution(row, b, lay, bc, c)
        clears = any(clear for _, clear in row.values)  # else every AND keeps every lane
        if b < c:
            v = lanes[0]
            assert v is not None
            lanes = [v | ((v & ands[0] if clears else v) + adds[0]) << ((1 << b) * lay.width)]
            continue
        up: list[int | None] = []
        for i, (v, add, keep) in enumerate(zip(lanes, adds, ands, strict=True)):
            if v is None or i.bit_count() >= k:  # with this row, more than k rows in every lane
                up.append(None)
            else:
                up.append((v & keep) + add if clears else v + add)
        lanes += up
    return lanes


_POP: dict[tuple[int, int, int], int] = {}  # (lane width, c, p): all-ones lanes where p of c bits are set


def _pop(width: int, c: int, p: int) -> int:
    key = (width, c, p)
    got = _POP.get(key)
    if got is None:
        if c == 0:
            got = (1 << width) - 1 if p == 0 else 0
        else:
            got = _pop(width, c - 1, p) | (_pop(width, c - 1, p - 1) if p else 0) << ((1 << (c - 1)) * width)
        _POP[key] = got
    return got


def _duel(high: int, low: int, guard_bits: int, guard: int) -> tuple[int, int]:
    """Lane by lane the larger of ``high`` and ``low`` (``high`` on ties) and the guard bits of the lanes
    where ``high`` won."""
    won = ((high | guard_bits) - low) & guard_bits
    return won, low ^ ((high ^ low) & (won - (won >> guard)))


def _tournament(lanes: list[int | None], k: int, lay: _Layout, c: int) -> int:
    """The index of the best k-set: the largest lane among those of k rows. Each chunk keeps its lanes of
    k rows (the others become 0); chunks whose sets have different numbers of high rows keep disjoint
    lanes, so they are ORed into as few integers as the most numerous such group has chunks; the largest of
    those, lane by lane, then within the one integer left (its lane: the low rows, the lowest set among
    equals), then the lowest high rows among the chunks that reach it."""
    stacks: dict[int, list[int]] = {}  # per number of high rows: that group's kept chunks, in index order
    for i, v in enumerate(lanes):
        q = i.bit_count()
        if v is not None and 0 <= k - q <= c:
            stacks.setdefault(q, []).append(v & _pop(lay.width, c, k - q))
    merged = [0] * max(len(group) for group in stacks.values())
    for group in stacks.values():
        for j, x in enumerate(group):
            merged[j] |= x
    bc = _Broadcast(lay.width)
    guards = bc(1 << lay.guard, c)
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
        won, key = _duel(key >> h, key & ((1 << h) - 1), bc(1 << lay.guard, j), lay.guard)
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
