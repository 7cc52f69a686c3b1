"""Which CPU socket each GPU is attached to, read from the CPU/NUMA affinity a capture (or NVML) prints.

``gres.conf``'s ``Cores=`` names Slurm's *logical* core ids, socket-major (core ``s × CoresPerSocket + c`` is
core c of socket s, whatever the kernel calls its CPUs), while ``nvidia-smi topo -m`` and NVML print the
kernel's CPU ids. Kernels number CPUs in more than one way, so the socket of a CPU id is not a formula of the
layout alone:

==================  ==============================================  ======================================
numbering           socket of CPU id ``c`` (S sockets, C cores per  seen on
                    socket, T threads per core)
==================  ==============================================  ======================================
``socket-major``    ``(c mod S·C) div C``; hyper-threads in a       most x86 servers (``0-11,24-35``)
                    second block after every first thread
``smt-adjacent``    ``c div (C·T)``; a core's threads are adjacent  POWER (SMT4: ``0-63`` / ``64-127``)
``interleaved``     ``c mod S``                                     BIOSes that deal cores round-robin
                                                                    across sockets (``0,2,…`` / ``1,3,…``)
==================  ==============================================  ======================================

:func:`gpu_sockets` reads every numbering against the printed affinities and keeps the one that explains them
best:

1. it agrees with the NUMA Affinity column when that column names exactly one NUMA node set per socket (the
   i-th lowest node set is socket i — Linux numbers NUMA nodes in socket order, POWER's 0 and 8 included);
2. each distinct CPU list touches the fewest sockets (a GPU's CPUs are one socket's, or one NUMA node's);
3. CPU lists that share no CPU land on different sockets (a cpuset-limited capture such as ``4,6,8,10,12`` /
   ``1,3,5,7,9,11`` is one socket each only under ``interleaved``);
4. still tied: ``socket-major``, then ``smt-adjacent``, then ``interleaved`` — and a warning when the tied
   numberings would give different sockets.

Without CPU affinity the NUMA column alone is used (one node set per socket, as in 1.); with neither, or with
CPU ids beyond the layout, or when no numbering agrees with the NUMA column, the sockets are unknown
(``None``) and a warning says why — never a guess. Every GPU printing the same affinity is reported too:
``Cores=`` is then the same on every GPU and cannot tell islands apart. Cost: O(GPUs × CPUs listed) per
numbering, three numberings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

from ..core import hostlist
from ..core.errors import HostlistError
from .gpu_topology import GpuTopology
from .links import islands

#: (sockets, cores per socket, threads per core), as Slurm's node line gives them.
Layout = tuple[int, int, int]

NUMBERINGS: tuple[str, ...] = ("socket-major", "smt-adjacent", "interleaved")


@dataclass(frozen=True, slots=True)
class SocketMap:
    """Per GPU the set of sockets its CPU affinity touches (``None``: unknown), and how that was read."""

    sockets: tuple[frozenset[int] | None, ...]
    numbering: str | None  # one of NUMBERINGS, "numa" (NUMA column alone), or None (unknown)
    warnings: tuple[str, ...] = ()


def _socket_of(numbering: str, layout: Layout) -> Callable[[int], int]:
    sockets, cores, threads = layout
    if numbering == "socket-major":
        return lambda cpu: (cpu % (sockets * cores)) // cores
    if numbering == "smt-adjacent":
        return lambda cpu: cpu // (cores * threads)
    return lambda cpu: cpu % sockets


def _id_sets(
    values: Sequence[str | None], n: int, what: str, warnings: list[str]
) -> list[frozenset[int] | None]:
    out: list[frozenset[int] | None] = []
    for i in range(n):
        text = values[i] if i < len(values) else None
        if not text:
            out.append(None)
            continue
        try:
            ids = frozenset(hostlist.expand_numbers(text))
        except HostlistError:
            warnings.append(f"GPU{i}: {what} {text!r} is not a number list; ignored")
            ids = frozenset()
        out.append(ids or None)
    return out


def _numa_ranks(numa: list[frozenset[int] | None], n_sockets: int) -> list[int | None] | None:
    """Socket per GPU from the NUMA column when it names exactly one node set per socket, else None."""
    known = sorted({s for s in numa if s is not None}, key=min)
    if len(known) != n_sockets or n_sockets < 2:
        return None
    if any(a & b for a, b in combinations(known, 2)):
        return None
    rank = {s: r for r, s in enumerate(known)}
    return [None if s is None else rank[s] for s in numa]


def _score(
    mapped: list[frozenset[int] | None],
    cpus: list[frozenset[int] | None],
    ranks: list[int | None] | None,
) -> tuple[int, int, int]:
    disagree = 0
    if ranks is not None:
        disagree = sum(
            1
            for m, r in zip(mapped, ranks, strict=True)
            if m is not None and r is not None and m != frozenset((r,))
        )
    groups: dict[frozenset[int], frozenset[int]] = {}
    for c, m in zip(cpus, mapped, strict=True):
        if c is not None and m is not None:
            groups[c] = m
    touches = sum(len(m) for m in groups.values())
    separated = sum(1 for (a, ma), (b, mb) in combinations(groups.items(), 2) if not a & b and not ma & mb)
    return (disagree, touches, -separated)


def gpu_sockets(topo: GpuTopology, layout: Layout) -> SocketMap:
    """The sockets each GPU of ``topo`` is attached to on a node of ``layout``; see the module docstring.

    Steps: the affinity cells as id sets; one socket: socket 0; a CPU beyond the layout: unknown
    (:func:`_beyond`); no CPU affinity: the NUMA ranks or unknown (:func:`_by_numa`); else the CPU
    numbering that agrees best with the NUMA affinity (:func:`_best_numbering`) and what it cannot tell
    (:func:`_doubts`)."""
    n = len(topo.gpus)
    n_sockets = layout[0]
    warnings: list[str] = []
    cpus = _id_sets(topo.cpu_affinity, n, "CPU affinity", warnings)
    numa = _id_sets(topo.numa_affinity, n, "NUMA affinity", warnings)
    if n_sockets <= 1:
        return SocketMap(tuple(frozenset((0,)) if c else None for c in cpus), "socket-major", tuple(warnings))
    if _beyond(topo, cpus, layout, warnings):
        return SocketMap((None,) * n, None, tuple(warnings))
    ranks = _numa_ranks(numa, n_sockets)
    if all(c is None for c in cpus):
        return _by_numa(n, ranks, warnings)
    best = _best_numbering(cpus, ranks, layout, warnings)
    if best is None:
        return SocketMap((None,) * n, None, tuple(warnings))
    numbering, mapped = best
    _doubts(topo, cpus, mapped, n_sockets, warnings)
    return SocketMap(tuple(mapped), numbering, tuple(warnings))


def _beyond(
    topo: GpuTopology, cpus: Sequence[frozenset[int] | None], layout: Layout, warnings: list[str]
) -> bool:
    """A GPU whose CPU affinity names a CPU the layout does not have (the layout or the capture is wrong)."""
    n_sockets, cores, threads = layout
    total = n_sockets * cores * threads
    beyond = [i for i, c in enumerate(cpus) if c is not None and max(c) >= total]
    if not beyond:
        return False
    i = beyond[0]
    warnings.append(
        f"GPU{i}: CPU affinity {topo.cpu_affinity[i]!r} names CPU {max(cpus[i] or (0,))} but the node "
        f"has {total} CPUs ({n_sockets} sockets × {cores} cores × {threads} threads): the layout or the "
        "capture is wrong; Cores= left out"
    )
    return True


def _by_numa(n: int, ranks: list[int | None] | None, warnings: list[str]) -> SocketMap:
    """No CPU affinity at all: the sockets from the NUMA affinity (one node per socket), else unknown."""
    if ranks is not None and all(r is not None for r in ranks):
        return SocketMap(tuple(frozenset((r,)) for r in ranks if r is not None), "numa", tuple(warnings))
    warnings.append(
        "no CPU affinity printed (and no NUMA affinity with one node per socket): "
        "the GPUs' sockets are unknown; Cores= left out"
    )
    return SocketMap((None,) * n, None, tuple(warnings))


def _best_numbering(
    cpus: list[frozenset[int] | None],
    ranks: list[int | None] | None,
    layout: Layout,
    warnings: list[str],
) -> tuple[str, list[frozenset[int] | None]] | None:
    """The CPU numbering (of :data:`NUMBERINGS`, in preference order) whose sockets agree best with the
    NUMA affinity, and each GPU's sockets under it; None when every numbering disagrees."""
    candidates = []
    for pref, numbering in enumerate(NUMBERINGS):
        of = _socket_of(numbering, layout)
        mapped = [None if c is None else frozenset(of(cpu) for cpu in c) for c in cpus]
        candidates.append((_score(mapped, cpus, ranks), pref, numbering, mapped))
    candidates.sort(key=lambda t: (t[0], t[1]))
    score, _, numbering, mapped = candidates[0]
    if score[0]:
        warnings.append(
            "the CPU affinity and the NUMA affinity disagree under every CPU numbering "
            f"({', '.join(NUMBERINGS)}): the GPUs' sockets are unknown; Cores= left out"
        )
        return None
    rivals = [c[2] for c in candidates[1:] if c[0] == score and c[3] != mapped]
    if rivals:
        warnings.append(
            f"the CPU affinity does not show how CPUs are numbered ({numbering} and {', '.join(rivals)} "
            f"read it differently): assumed {numbering}; check Cores= against `lscpu -e` on the node"
        )
    return numbering, mapped


def _doubts(
    topo: GpuTopology,
    cpus: Sequence[frozenset[int] | None],
    mapped: Sequence[frozenset[int] | None],
    n_sockets: int,
    warnings: list[str],
) -> None:
    """What the mapping cannot tell: GPUs without CPU affinity, and one affinity printed for every GPU."""
    n = len(topo.gpus)
    missing = [i for i, c in enumerate(cpus) if c is None]
    if missing:
        warnings.append(
            f"no CPU affinity for {', '.join(f'GPU{i}' for i in missing)}: Cores= left out for them"
        )
    known = {c for c in cpus if c is not None}
    spread = {m for m in mapped if m is not None}
    if n > 1 and not missing and len(known) == 1 and len(next(iter(spread))) < n_sockets:
        count = len(islands(topo)) if topo.matrix else n
        what = f"its {count} NVLink islands" if count > 1 else "its GPUs"
        warnings.append(
            f"all {n} GPUs print the same CPU affinity {next(iter(topo.cpu_affinity))!r}: Cores= is the same "
            f"on every GPU and cannot tell {what} apart by CPU (a capture taken inside a cpuset or container "
            "shows only that cpuset)"
        )
