"""Every subset of a 9-16 GPU node ranked once: the bounded path of :mod:`slurm_topo.gpu.pick` (its order).

For one topology, :func:`build` codes every subset of the GPUs (a row bitmask) as one integer, the sum over
its pairs of ``bandwidth + 2^(shift + 7·level)`` (``level``: the pair's rank among the distinct bandwidths,
fastest 0). The low ``shift`` bits are the bandwidth sum (2); the 7-bit fields above count the pairs per
level, so the highest non-zero field is the slowest link (1). A sum over pairs is built by doubling — the
subsets holding row i are those without it plus i's links to them — in 2^n list additions.

:func:`ranked` lists the k-subsets once per k, best first under (1), (2), (4), by the key
``((L - slowest level) · 2^shift + sum) · 2^n + reversed rows`` (L levels; of two sets of one size, the one
with the lexicographically lower indices has the larger reversed rows), with their reversed rows as two
byte strings (rows 0-7 and 8-15).

:func:`best` answers a pick: the first entry without a busy row is optimal on (1), (2). It is found by two
``bytes.translate`` passes (per byte of rows: 1 when it holds a busy row), one OR of the two as integers and
``bytes.find`` — each a pass in C, over slices of 256, 1 024, 4 096 and the rest of the C(n, k) entries (at
most C(16, 8) = 12 870) until one is free, so over the whole list at worst, whatever the busy set. The
entries that tie it on (1), (2) follow it (their end found by bisection). When whole islands are free, rule
(3) is settled over that tie group in C as well (:func:`_settle`): per island four translations give a byte
per tie, 1 when the tie takes part of the island but not all; their sum, with 255 for a tie that holds a
busy row, is minimal first at the answer (the lowest index among the fewest broken). So a pick is at most
4 + 4 · islands passes in C over at most C(n, k) bytes, plus O(islands) Python operations, for any matrix
and busy set.

Preparation: 2^n codes once per topology, then per k C(n, k) keys, a sort and the two byte strings.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import combinations
from operator import neg

_FIELD = 7  # bits per level's pair count: at most C(16, 2) = 120 pairs


@dataclass(slots=True)
class Ranked:
    """One topology's subset codes (``code[mask]``, see the module docstring) and per k (filled on demand by
    :func:`ranked`) its k-subsets best first: their keys and, byte per entry, their reversed rows 0-7 and 8-15
    (``low``, ``high``)."""

    n: int
    levels: int
    shift: int
    code: list[int]
    by_k: dict[int, tuple[list[int], bytes, bytes]] = field(default_factory=dict)


def build(weight: tuple[tuple[int, ...], ...], levels: tuple[int, ...]) -> Ranked:
    """The codes of every subset of the rows of ``weight`` (at most 16 rows; bandwidths, 0 on the diagonal;
    ``levels`` its distinct off-diagonal values, descending)."""
    n = len(weight)
    if n > 16:
        raise ValueError(f"pick_table: {n} GPUs; the pair counts per level hold at most C(16, 2) pairs")
    rank = {t: i for i, t in enumerate(levels)}
    shift = (max(levels, default=0) * n * n).bit_length() + 1
    code = [0]
    for i in range(n):
        to_lower = [0]  # i's contribution to each subset of the rows below i
        for j in range(i):
            add = weight[i][j] + (1 << (shift + _FIELD * rank[weight[i][j]]))
            to_lower += [a + add for a in to_lower]
        code += [a + b for a, b in zip(code, to_lower, strict=True)]
    return Ranked(n, len(levels), shift, code)


def ranked(r: Ranked, k: int) -> tuple[list[int], bytes, bytes]:
    """The keys of the k-subsets (see the module docstring), descending, and their reversed rows as bytes;
    built once per k."""
    got = r.by_k.get(k)
    if got is not None:
        return got
    n, shift, top, code = r.n, r.shift, r.levels, r.code
    low = (1 << shift) - 1
    masks = map(sum, combinations([1 << i for i in range(n)], k))
    revs = map(sum, combinations([1 << (n - 1 - i) for i in range(n)], k))
    keys = [
        ((top - ((c >> shift).bit_length() - 1) // _FIELD) << shift | (c & low)) << n | rv
        for c, rv in zip(map(code.__getitem__, masks), revs, strict=True)
    ]
    keys.sort(reverse=True)
    low_byte = (255).__and__
    got = (keys, bytes(map(low_byte, keys)), bytes(map(low_byte, map((8).__rrshift__, keys))))
    r.by_k[k] = got
    return got


_HITS: dict[int, bytes] = {}  # per byte b: 1 where a byte shares a bit with b, else 0 (a translate table)


_HOLDS: dict[int, bytes] = {}  # per byte b: 1 where a byte holds every bit of b, else 0


def _hits(b: int) -> bytes:
    got = _HITS.get(b)
    if got is None:
        got = _HITS[b] = bytes(1 if x & b else 0 for x in range(256))
    return got


def _holds(b: int) -> bytes:
    got = _HOLDS.get(b)
    if got is None:
        got = _HOLDS[b] = bytes(1 if x & b == b else 0 for x in range(256))
    return got


_REVERSED = [int(f"{b:08b}"[::-1], 2) for b in range(256)]  # per byte: its 8 bits in reverse order


def reverse(mask: int, n: int) -> int:
    """The low n bits of ``mask`` (n <= 16) in reverse order (row i becomes bit n-1-i)."""
    both = _REVERSED[mask & 255] << 8 | _REVERSED[mask >> 8 & 255]
    return both >> (16 - n)


def best(r: Ranked, k: int, fmask: int, whole: list[int]) -> int:
    """The best k rows of ``fmask`` (a row mask) under (1), (2), (3), (4); ``whole``: the free islands of two
    or more rows that lie inside ``fmask`` (rule 3)."""
    n = r.n
    keys, low, high = ranked(r, k)
    busy = reverse(((1 << n) - 1) & ~fmask, n)
    # the first entry without a busy row, looked for in slices of 256, 1024, 4096, … entries: a free one is
    # mostly near the top, and the slices add up to less than twice the list (an entry is free: k < free rows)
    start, size = 0, 256
    while True:
        stop = start + size
        at = _busy_flags(low[start:stop], high[start:stop], busy).find(0)
        if at >= 0:
            at += start
            break
        if stop >= len(keys):
            raise AssertionError("unreachable: fewer than k free rows")
        start, size = stop, size * 4
    # an island holding every free row is broken by every k of them alike (k < free rows)
    islands = [reverse(isl, n) for isl in whole if isl != fmask]
    if not islands:
        return reverse(keys[at], n)
    return reverse(_settle(keys, low, high, busy, at, n, islands), n)


def _busy_flags(low: bytes, high: bytes, busy: int) -> bytes:
    """Per entry (its reversed rows 0-7 in ``low``, 8-15 in ``high``) 1 when it holds a row of ``busy``,
    else 0: a translation per byte string and an OR, each a pass in C."""
    flags = low.translate(_hits(busy & 255))
    if busy >> 8:
        both = int.from_bytes(flags, "big") | int.from_bytes(high.translate(_hits(busy >> 8)), "big")
        flags = both.to_bytes(len(low), "big")
    return flags


def _settle(keys: list[int], low: bytes, high: bytes, busy: int, at: int, n: int, islands: list[int]) -> int:
    """Among the free entries that tie entry ``at`` (the first free one) on (1), (2), the first with the
    fewest broken ``islands`` (reversed row masks): per tie a byte counting the islands it takes part of but
    not all, 255 when it holds a ``busy`` row, then the first least byte. A few passes in C over the ties."""
    end = bisect_right(keys, -(keys[at] >> n << n), at, key=neg)
    lo, hi = low[at:end], high[at:end]
    broken = 0
    for isl in islands:
        touch = int.from_bytes(lo.translate(_hits(isl & 255)), "big")
        touch |= int.from_bytes(hi.translate(_hits(isl >> 8)), "big")
        whole = int.from_bytes(lo.translate(_holds(isl & 255)), "big")
        whole &= int.from_bytes(hi.translate(_holds(isl >> 8)), "big")
        broken += touch & ~whole  # 0 or 1 per byte: at most 8 islands, so no byte carries
    score = (broken | int.from_bytes(_busy_flags(lo, hi, busy), "big") * 255).to_bytes(end - at, "big")
    return keys[at + score.find(min(score))]
