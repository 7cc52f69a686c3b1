"""Every subset of a 9-16 GPU node scored at once, in lanes of Python integers: the pick of
:mod:`slurm_topo.gpu.pick` (its order, rules 1-4) at a cost fixed by the number of free GPUs, with nothing
built ahead of it.

The free rows ``f_0 < f_1 < … < f_(m-1)`` (m <= 16) index 2^m *lanes*: lane ``s`` is the subset holding
``f_i`` for every bit i of s. A lane is ``B`` bits of a Python integer (B = 30, one CPython digit, or a
multiple of it when the fields below need more), and its fields, high to low, are::

    guard (1) | size (5) | bad flags (d) | sum (SB) | islands (wi)

- *size*: the GPUs of the subset;
- *bad flags*: one bit per link level ``ℓ_0 > … > ℓ_(d-1)`` between ``hi`` (no k-set can have a slowest
  link above it: each of its k GPUs needs k-1 free links that fast) and ``lo`` (the slowest link of a
  k-clique found greedily): bit j is set when some pair of the subset is slower than ``ℓ_j``. Flipped at
  the end, the flags are a thermometer code of the subset's slowest link: the more bits, the faster (rule 1);
- *sum*: the sum over the subset's pairs of ``(bandwidth - lo) / g`` (g the gcd of those differences), which
  orders the sets of one size and one slowest link by their bandwidth sum (rule 2);
- *islands*: ``len(whole) - broken`` where ``broken`` counts the previously whole free islands the subset
  takes part of but not all (rule 3).

The lanes are built by doubling: the lanes of the subsets of the first i+1 rows are those of the first i
rows followed by the same lanes plus row i's contribution ``T_i`` (its size unit, its pairs to the rows
already there, OR-ed flags), itself built by doubling over the rows below it. The island field needs one
trick: row r of island I adds -1 when it is the first row of I in the subset (``T_r`` carries a bit that
the rows of I below r switch off) and its last row adds +1 when every row of I is there (a bit in the guard
position that the absent rows of I switch off) — so a subset's field is ``len(whole)`` minus its touched
islands plus its whole ones, exactly. Lanes are kept in a list of integers of 2^10 lanes each (``_CHUNK``),
so no operation copies more than one chunk and no broadcast constant is larger than one.

A pick is then the largest lane after one XOR (size k becomes the top value of the size field, the flags
are flipped): a tournament halves the lanes (compare by subtraction with the guard bit, select by mask), an
upper lane winning ties. The last round decides bit 0 (row ``f_0``), the one before it bit 1, and so on, so
among equal keys the winner holds the lowest rows — the lexicographically lowest set (rule 4). Its index is
read back from the rounds' selection bits.

Cost: every step is a pass over at most 2^m lanes in C (additions, logic operations, shifts within one
chunk): about a dozen passes for the build and one tournament (below 50 machine instructions per lane in
all its rounds), whatever the matrix, the busy set or k, plus O(m^2) Python steps for the bounds and the
pair values and O(m^2 + 2^m / 2^10) Python steps for the loops (``benchmarks/results/pick_worst.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

_CHUNK = 10  # lanes per integer of the lane list: 2^10
_SIZE_BITS = 5  # subsets of up to 16 GPUs (31 is the size field's top value)
_DIGIT = 30  # CPython's digit: a lane width of a multiple keeps chunk shifts aligned

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
    flags: int  # position of the bad flags
    nflags: int  # d
    size: int  # position of the size field
    guard: int  # position of the guard bit

    @property
    def flag_mask(self) -> int:
        return ((1 << self.nflags) - 1) << self.flags


def best(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int, whole: list[int]) -> int:
    """The best ``k`` of ``rows`` (ascending row indices of ``weight``, at most 16, 3 <= k < len(rows))
    under rules (1)-(4) of :mod:`slurm_topo.gpu.pick`, as a row bitmask. ``whole``: the previously whole
    free islands (row masks inside ``rows``; one holding every row is broken by every k-set alike)."""
    if len(rows) > 16 or not 3 <= k < len(rows):
        raise ValueError(f"pick_lanes: {k} of {len(rows)} rows (3 <= k < rows <= 16)")
    every = sum(1 << r for r in rows)
    whole = [isl for isl in whole if isl & (isl - 1) and isl != every]
    lo, seed = _greedy(weight, rows, k)
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
    lay = _layout(len(levels), max(1, (m * (m - 1) // 2 * (present[0] - lo) // g).bit_length()), len(whole))
    values = {w: _pair_value(w, levels, lo, g, lay) for w in present}
    lanes = _build(weight, values, rows, k, whole, lay)
    floor = _key(weight, seed, values, whole, lay)
    pos = _tournament(lanes, k, lay, min(m, _CHUNK), floor)
    return sum(1 << r for i, r in enumerate(rows) if pos >> i & 1)


def _greedy(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int) -> tuple[int, list[int]]:
    """A k-set built greedily (the fastest pair, then each time the row whose slowest link to the set is
    fastest) and its slowest link: some k-set is at least that fast. O(k·m) after the first pair."""
    low, a, b = max((weight[x][y], x, y) for i, x in enumerate(rows) for y in rows[i + 1 :])
    chosen = [a, b]
    to_set = {x: min(weight[x][a], weight[x][b]) for x in rows if x not in (a, b)}
    for _ in range(k - 2):
        x = max(to_set, key=to_set.__getitem__)
        low = min(low, to_set.pop(x))
        chosen.append(x)
        wx = weight[x]
        for y, w in to_set.items():
            if wx[y] < w:
                to_set[y] = wx[y]
    return low, sorted(chosen)


def _peel(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int, lo: int) -> list[int]:
    """The rows that may be in a k-set whose slowest link is at least ``lo``: those with k-1 such links to
    other such rows (repeated). The greedy set of that floor is among them."""
    live = list(rows)
    while True:
        keep = [r for r in live if sum(1 for x in live if weight[r][x] >= lo) >= k - 1]  # 0 on the diagonal
        if len(keep) == len(live):
            return live
        live = keep


def _key(
    weight: tuple[tuple[int, ...], ...],
    seed: list[int],
    values: dict[int, tuple[int, int]],
    whole: list[int],
    lay: _Layout,
) -> int:
    """The tournament key of one k-set at the floor (its slowest link ``lo``): the lowest flag, its sum, its
    island field."""
    total = sum(values[weight[a][b]][0] for i, a in enumerate(seed) for b in seed[i + 1 :])
    mask = sum(1 << r for r in seed)
    broken = sum(1 for isl in whole if isl & mask and isl & ~mask)
    top = (1 << _SIZE_BITS) - 1
    return top << lay.size | 1 << lay.flags | total | (len(whole) - broken)


def _present(weight: tuple[tuple[int, ...], ...], rows: list[int]) -> list[int]:
    """The distinct bandwidths between free rows, fastest first."""
    return sorted({weight[a][b] for i, a in enumerate(rows) for b in rows[i + 1 :]}, reverse=True)


def _ceiling(weight: tuple[tuple[int, ...], ...], rows: list[int], k: int) -> int:
    """No k-set of ``rows`` has a slowest link above this: each of its rows has k-1 links at least that
    fast, so it is at most the k-th largest of the rows' (k-1)-th fastest links."""
    kth = []
    for r in rows:
        wr = weight[r]
        kth.append(sorted([wr[x] for x in rows if x != r], reverse=True)[k - 2])
    kth.sort(reverse=True)
    return kth[k - 1]


def _layout(nflags: int, sum_bits: int, islands: int) -> _Layout:
    isl_bits = max(2, islands.bit_length()) if islands else 0  # a row's T holds 0-2 there during a build
    flags = isl_bits + sum_bits
    size = flags + nflags
    guard = size + _SIZE_BITS
    return _Layout(_DIGIT * (guard // _DIGIT + 1), isl_bits, flags, nflags, size, guard)


def _pair_value(w: int, levels: list[int], lo: int, g: int, lay: _Layout) -> tuple[int, int]:
    """What a pair of bandwidth ``w`` adds to the sum field and ORs into the bad flags."""
    slower = sum(1 for t in levels if t > w)  # the levels this pair is too slow for, the fastest first
    bad = ((1 << slower) - 1) << (lay.nflags - slower)
    return ((w - lo) // g if w >= lo else 0) << lay.sum, bad << lay.flags


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
    home = {}
    for isl in whole:
        for i, r in enumerate(rows):
            if isl >> r & 1:
                home[i] = isl
    out = []
    for i, r in enumerate(rows):
        wr = weight[r]
        isl = home.get(i, 0)
        mates = sum(1 << j for j in range(i) if home.get(j) == isl) if isl else 0
        last = bool(isl) and isl & live == isl and isl >> (r + 1) == 0  # a peeled row is never there
        out.append(_Row([values[wr[x]] for x in rows[:i]], mates, bool(isl), last))
    return out


def _contribution(row: _Row, b: int, lay: _Layout, bc: _Broadcast, c: int) -> list[int]:
    """T for one row: its lanes over the subsets of the rows below it, as a list of chunks of 2^c lanes
    (one chunk, of 2^b lanes, while b <= c)."""
    guard = 1 << lay.guard
    keep = ((1 << lay.width) - 1) ^ guard  # clears the island's "all there" bit (in the guard position)
    t = (1 << lay.size) | (guard if row.last else 0)
    for b2 in range(min(b, c)):
        add, orv = row.values[b2]
        mate = row.mates >> b2 & 1
        low = t & bc(keep, b2) if mate and row.last else t
        up = t + bc(add, b2) if add else t
        orv |= mate  # the island's "touched below" bit (the field's unit)
        if orv:
            up |= bc(orv, b2)
        t = low | up << ((1 << b2) * lay.width)
    chunks = [t]
    for b2 in range(c, b):
        add, orv = row.values[b2]
        mate = row.mates >> b2 & 1
        orv |= mate
        lower = chunks
        if mate and row.last:
            kept = bc(keep, c)
            lower = [x & kept for x in chunks]
        upper = chunks
        if add:
            plus = bc(add, c)
            upper = [x + plus for x in upper]
        if orv:
            bits = bc(orv, c)
            upper = [x | bits for x in upper]
        chunks = lower + upper
    if row.last:  # the "all there" bit moves from the guard position to the island field's unit
        gb = bc(guard, min(b, c))
        chunks = [(x ^ (x & gb)) + ((x & gb) >> lay.guard) for x in chunks]
    return chunks


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
    lanes: list[int | None] = [len(whole)]  # the empty set: every whole island untouched
    for b, row in enumerate(_rows(weight, values, rows, whole)):
        t = _contribution(row, b, lay, bc, c)
        j = min(b, c)
        fm = bc(lay.flag_mask, j)
        minus = bc(1, j) if row.island else 0  # the -1 of a row of a whole island (see the docstring)
        if b < c:
            v, tt = lanes[0], t[0]
            assert v is not None
            tf = tt & fm
            lanes = [v | ((v | tf) + (tt ^ tf) - minus) << ((1 << b) * lay.width)]
            continue
        up: list[int | None] = []
        for i, (v, tt) in enumerate(zip(lanes, t, strict=True)):
            if v is None or i.bit_count() >= k:  # with this row, more than k rows in every lane
                up.append(None)
                continue
            tf = tt & fm
            up.append((v | tf) + (tt ^ tf) - minus)
        lanes += up
    return lanes


def _duel(high: int, low: int, guard_bits: int, guard: int) -> tuple[int, int]:
    """Lane by lane the larger of ``high`` and ``low`` (``high`` on ties) and the guard bits of the lanes
    where ``high`` won."""
    won = ((high | guard_bits) - low) & guard_bits
    return won, low ^ ((high ^ low) & (won - (won >> guard)))


def _tournament(lanes: list[int | None], k: int, lay: _Layout, c: int, floor: int) -> int:
    """The index of the largest lane after the XOR that makes size k the top of the size field and flips
    the flags (see the module docstring): the rounds halve the lane list, then the one chunk left. A chunk
    without a lane at least ``floor`` (a k-set's key) drops out first."""
    bc = _Broadcast(lay.width)
    xor = bc(((k ^ ((1 << _SIZE_BITS) - 1)) << lay.size) | lay.flag_mask, c)
    keys = [None if v is None or i.bit_count() + c < k else v ^ xor for i, v in enumerate(lanes)]
    guards = bc(1 << lay.guard, c)
    least = bc(floor, c)
    keys = [None if x is None or not ((x | guards) - least) & guards else x for x in keys]
    rounds: list[list[int]] = []  # per round over the list: the high chunk's won lanes (-1: all of it)
    while len(keys) > 1:
        half = len(keys) // 2
        sel, out = [], []
        for low, high in zip(keys[:half], keys[half:], strict=True):
            if high is None or low is None:
                sel.append(0 if high is None else -1)
                out.append(low if high is None else high)
                continue
            won, best = _duel(high, low, guards, lay.guard)
            sel.append(won)
            out.append(best)
        rounds.append(sel)
        keys = out
    key = keys[0]
    assert key is not None, "pick_lanes: no lane of size k"
    inner = []
    for j in range(c - 1, -1, -1):
        h = (1 << j) * lay.width
        won, key = _duel(key >> h, key & ((1 << h) - 1), bc(1 << lay.guard, j), lay.guard)
        inner.append(won)
    top = (1 << _SIZE_BITS) - 1
    assert key >> lay.size & top == top and key & lay.flag_mask, "pick_lanes: no k-clique at the floor"
    pos = 0
    for j, won in enumerate(reversed(inner)):
        if won >> (pos * lay.width + lay.guard) & 1:
            pos += 1 << j
    chunk = 0
    for j, sel in enumerate(reversed(rounds)):
        won = sel[chunk]
        if won == -1 or won >> (pos * lay.width + lay.guard) & 1:
            chunk += 1 << j
    return chunk << c | pos
