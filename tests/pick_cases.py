"""Irregular 16-GPU link matrices and an exhaustive reference over every subset, shared by the pick tests
and ``benchmarks/bench_pick_worst.py``.

Families (each built from a ``random.Random``, so a seed gives the same matrix; the property test passes
hypothesis's own ``Random``):

- ``bridged``: a PCIe tree (PIX pairs, PXB quads, NODE halves, SYS across the sockets) with NVLink bridges
  (NV2 or NV4) joining GPUs under *different* PCIe switches, so bridges and switches disagree;
- ``demoted``: an NV18 all-to-all box with a share of the pairs demoted to NV1 (failed links);
- ``random``: every pair's class drawn from a palette of link classes (all eleven, or a few);
- ``nearly regular``: NVLink islands of 2, 4 or 8 joined by one PCIe class, a few pairs between islands of
  another class (large groups of sets tied on bandwidth, which the islands decide).

:class:`SubsetTable` is the reference: the bandwidth sum and the slowest link of every subset by a DP over
bitmasks (independent of the search in :mod:`slurm_topo.gpu.pick`), then per pick the best k-subset of the
free GPUs under the order of that module's docstring, every subset looked at. About 50 ms to build for 16
GPUs and a few ms per pick: fast enough to check thousands of picks where ``pick_exhaustive`` takes a
quarter of a second each.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.links import islands, link_bandwidth

CLASSES = ("NV1", "NV2", "NV4", "NV6", "NV12", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS")


def _matrix(n: int, cls: Callable[[int, int], str], source: str) -> GpuTopology:
    m = tuple(tuple("X" if i == j else cls(min(i, j), max(i, j)) for j in range(n)) for i in range(n))
    return GpuTopology(tuple(range(n)), m, source=source)


def _pcie(i: int, j: int) -> str:
    if i // 2 == j // 2:
        return "PIX"
    if i // 4 == j // 4:
        return "PXB"
    return "NODE" if i // 8 == j // 8 else "SYS"


def bridged(rng: random.Random, n: int = 16) -> GpuTopology:
    """PCIe tree plus bridges between neighbours under different switches (1-2, 3-4, …, 15-0), each NV2 or
    NV4, and a few drawn anywhere else."""
    bridges = {}
    for i in range(1, n, 2):
        a, b = sorted((i, (i + 1) % n))
        bridges[a, b] = rng.choice(("NV2", "NV4"))
    for _ in range(rng.randint(0, 3)):
        a, b = sorted(rng.sample(range(n), 2))
        bridges[a, b] = rng.choice(("NV1", "NV2", "NV4"))
    return _matrix(n, lambda i, j: bridges.get((i, j), _pcie(i, j)), "bridged")


def demoted(rng: random.Random, n: int = 16) -> GpuTopology:
    """NV18 between every pair, a share (a fifth to a half) demoted to NV1."""
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    down = set(rng.sample(pairs, int(len(pairs) * rng.uniform(0.2, 0.5))))
    return _matrix(n, lambda i, j: "NV1" if (i, j) in down else "NV18", "demoted")


def random_classes(rng: random.Random, n: int = 16, palette: int | None = None) -> GpuTopology:
    """Every pair's class drawn from ``palette`` classes (all of :data:`CLASSES` when None)."""
    pool = CLASSES if palette is None else tuple(rng.sample(CLASSES, palette))
    table = {(i, j): rng.choice(pool) for i in range(n) for j in range(i + 1, n)}
    return _matrix(n, lambda i, j: table[i, j], f"random {len(pool)} classes")


def nearly_regular(rng: random.Random, n: int = 16) -> GpuTopology:
    """NVLink islands of 2, 4 or 8 (one NV class inside, one PCIe class between them) with one to three pairs
    between islands set to another PCIe class: whole groups of equal sets that the islands decide, where the
    complete-component knapsack does not apply."""
    size = rng.choice((2, 4, 8))
    inside = rng.choice(("NV2", "NV4", "NV6", "NV18"))
    pcie = ("PIX", "PXB", "NODE", "SYS")
    between = rng.choice(pcie)
    odd = {}
    for _ in range(rng.randint(1, 3)):
        a, b = sorted(rng.sample(range(n), 2))
        if a // size != b // size:
            odd[a, b] = rng.choice([c for c in pcie if c != between])
    return _matrix(
        n, lambda i, j: inside if i // size == j // size else odd.get((i, j), between), "nearly regular"
    )


FAMILIES: dict[str, Callable[[random.Random], GpuTopology]] = {
    "bridged": bridged,
    "demoted": demoted,
    "random, all classes": random_classes,
    "random, 3 classes": lambda rng: random_classes(rng, palette=3),
    "nearly regular": nearly_regular,
}


class SubsetTable:
    """Every subset of ``topo``'s GPUs with its bandwidth sum (MB/s, as the search rounds them) and slowest
    link; :meth:`pick` is the exhaustive answer. Up to 16 GPUs."""

    def __init__(self, topo: GpuTopology) -> None:
        n = len(topo.gpus)
        if n > 16:
            raise ValueError("SubsetTable: at most 16 GPUs")
        self.topo, self.n = topo, n
        w = [
            [0 if i == j else round(link_bandwidth(c) * 1000) for j, c in enumerate(row)]
            for i, row in enumerate(topo.matrix)
        ]
        top = max((x for row in w for x in row), default=0) + 1
        total = [0] * (1 << n)
        slowest = [top] * (1 << n)
        for mask in range(1, 1 << n):
            low = (mask & -mask).bit_length() - 1
            rest = mask & (mask - 1)
            row = w[low]
            others = [row[j] for j in range(n) if rest >> j & 1]
            total[mask] = total[rest] + sum(others)
            slowest[mask] = min([slowest[rest], *others])
        self.total, self.slowest = total, slowest
        position = {g: i for i, g in enumerate(topo.gpus)}
        self.islands = [sum(1 << position[g] for g in isl) for isl in islands(topo)]
        self.position = position
        self.reverse = [int(f"{mask:0{n}b}"[::-1], 2) for mask in range(1 << n)] if n else [0]
        self.by_size: list[list[int]] = [[] for _ in range(n + 1)]
        for mask in range(1 << n):
            self.by_size[mask.bit_count()].append(mask)

    def pick(self, free: Iterable[int], k: int) -> tuple[int, ...]:
        """The best ``k`` of ``free``: slowest link, then sum, then fewest whole free islands broken, then
        the lowest indices (the largest bit-reversed mask)."""
        fmask = sum(1 << self.position[g] for g in set(free))
        whole = [isl for isl in self.islands if isl & fmask == isl and isl.bit_count() > 1]
        slowest, total, reverse = self.slowest, self.total, self.reverse

        def key(mask: int) -> tuple[int, int, int, int]:
            broken = sum(1 for isl in whole if isl & mask and isl & ~mask)
            return (slowest[mask] if k > 1 else 0, total[mask], -broken, reverse[mask])

        best = max((m for m in self.by_size[k] if not m & ~fmask), key=key)
        return tuple(g for g, i in self.position.items() if best >> i & 1)
