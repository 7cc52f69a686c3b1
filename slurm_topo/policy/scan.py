"""A request's view of the data's groups, with a bound on the work of every decision (the Lua twin:
``job_submit/slurm_topo_filter/scan.lua``).

The work of a decision does not grow with the fleet. Everything that depends on the fleet only is done by
the generator or once per data load: groups sorted by (nodes, rank) per partition and level, ranks fleet-wide
(one tie rule: the natural order of labels), each list's feature index. A decision then *walks* lists:

* a **source** is a level's lists for the job's partitions (one list per partition; several are merged while
  they are walked, each feature taken once, its largest version, ties to the first partition named) or the
  groups a user's bracket names;
* a **walk** looks at one group per step in the source's order, from the first group as large as the job
  (ascending) or from the largest (descending), and stops at Slurm's limits (64 alternatives, the
  characters left) or after its **looks** (``LOOKS_LIST``, ``LOOKS_FINER``, ``LOOKS_LARGEST``,
  ``UNION_ROWS``): the bound. A step costs one look whatever it finds (a group that does not fit, another
  partition's smaller copy of a feature, a group outside --locality-regions);
* a walk stopped by its looks says so (``Walk.bound``) and the decision records it; what it kept is still
  right: every alternative is one group of the level that can hold the job. A required level whose walk
  found nothing within its looks takes the next groups of the level unchecked (``Walk.unchecked``): still
  one group per alternative, so the job never runs across groups; Slurm waits for one that can hold it.

``decide.py`` composes walks into decisions; nothing here remembers anything between decisions.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .compile import Group, PolicyData
from .constraint import Constraint, _class_ok
from .request import JobRequest
from .vocab import LOOKS_LARGEST, LOOKS_LIST, MAX_ALTERNATIVES


def needs(req: JobRequest) -> tuple[int, int, int, str | None]:
    """(nodes, GPUs in all, GPUs a node must have, GPU type) of a request."""
    nodes = req.min_nodes or 1
    gpu = req.gpu
    if gpu is None:
        return nodes, 0, 0, None
    if gpu.scope == "node":
        return nodes, gpu.count * nodes, gpu.count, gpu.gpu_type
    if gpu.scope == "task":
        return nodes, gpu.count * (req.num_tasks or nodes), 1, gpu.gpu_type
    return nodes, gpu.count, 1, gpu.gpu_type


Key = Callable[[Group], tuple[int, int]]


def _ascending(g: Group) -> tuple[int, int]:
    return (g.nodes, g.rank)


def _largest_first(g: Group) -> tuple[int, int]:
    return (-g.nodes, -g.rank)


def _values_order(g: Group) -> tuple[int, int]:
    return (-g.nodes, g.rank)


@dataclass(frozen=True, slots=True)
class Source:
    """One level's groups for a job: a list per partition (each sorted by ``key``), and each list's index by
    feature (a feature in several partitions is walked once: its largest copy, ties to the first named)."""

    lists: tuple[Sequence[Group], ...]
    index: tuple[Mapping[str, Group], ...]
    key: Key = _ascending

    def has(self, feature: str) -> bool:
        return any(feature in ix for ix in self.index)

    def best(self, g: Group, j: int) -> bool:
        """Whether ``g`` (from list ``j``) is its feature's copy the walk takes."""
        for q, ix in enumerate(self.index):
            h = ix.get(g.feature) if q != j else None
            if h is not None and (h.nodes > g.nodes or (h.nodes == g.nodes and q < j)):
                return False
        return True

    def steps(self, starts: Sequence[int], step: int) -> Iterator[Group | None]:
        """The lists merged in key order from ``starts``, one value per step: the group, or None for a
        step over another partition's smaller copy of a feature."""
        lists, key = self.lists, self.key
        if len(lists) == 1:
            only = lists[0]
            i = starts[0]
            while 0 <= i < len(only):
                yield only[i]
                i += step
            return
        pos = list(starts)
        while True:
            j = -1
            head: tuple[int, int] | None = None
            for q, lst in enumerate(lists):
                if 0 <= pos[q] < len(lst):
                    k = key(lst[pos[q]])
                    if head is None or k < head:
                        j, head = q, k
            if j < 0:
                return
            g = lists[j][pos[j]]
            pos[j] += step
            yield g if self.best(g, j) else None


def feature_index(groups: Sequence[Group]) -> dict[str, Group]:
    return {g.feature: g for g in groups}


def level_source(data: PolicyData, partitions: Sequence[str], level: str) -> Source:
    """A level's groups for the job's partitions (nvl: only where the fleet has domains)."""
    lists = tuple(data.partitions[p].get(level, ()) for p in partitions)
    return Source(lists, tuple(data.feature_index(p, level) for p in partitions))


def values_source(data: PolicyData, partitions: Sequence[str]) -> Source | None:
    """The bare family values of the job's partitions, largest first (None without any)."""
    if not data.family_values:
        return None
    lists = tuple(data.family_values[p] for p in partitions)
    if not any(lists):
        return None  # families declared, no value on the partitions' nodes: prefer as without families
    return Source(lists, tuple(data.feature_index(p, "family") for p in partitions), _values_order)


def named_source(src: Source, features: Sequence[str]) -> Source:
    """The groups of ``src`` a user's bracket (or the one group of --nodelist) names, in the source's
    order: a look-up per name and partition, never a walk of the level."""
    lists = []
    for ix in src.index:
        found = {ix[f].feature: ix[f] for f in features if f in ix}
        lists.append(tuple(sorted(found.values(), key=src.key)))
    return Source(tuple(lists), src.index, src.key)


@dataclass(slots=True)
class Walk:
    kept: list[tuple[Group, int]] = field(default_factory=list)
    cut: bool = False
    """Stopped with groups left (Slurm's limits or the looks)."""
    bound: bool = False
    """Stopped by its looks."""
    unchecked: int = 0
    """Of ``kept``, how many were taken without their fit checked (a required level past its looks)."""


class Scan:
    """Per-request evaluation of groups: which node classes count, and the bounded walks."""

    def __init__(
        self,
        data: PolicyData,
        req: JobRequest,
        c: Constraint,
        area_features: frozenset[str] | None,
        wanted: set[str] | None,
    ):
        self.data = data
        self.nodes, self.total_gpus, self.per_node, self.gpu_type = needs(req)
        self.check = req.unchecked is None and c.counted
        self.area_features = area_features
        self.ok = [
            _class_ok(cls, c)
            and (
                not self.per_node
                or (cls.gpus >= self.per_node and (self.gpu_type is None or cls.gpu_type == self.gpu_type))
            )
            for cls in data.classes
        ]
        self.wanted = wanted
        self.bounded = 0
        """Candidate walks of this decision stopped by their looks (the record says how many)."""

    def allowed(self, g: Group) -> bool:
        """Inside a --locality-regions area, or a region group holding one."""
        if self.area_features is None:
            return True
        return bool(g.location_features & self.area_features) or (
            g.zone is None and self.wanted is not None and g.region in self.wanted
        )

    def eligible(self, g: Group) -> tuple[int, int, int]:
        n = gp = most = 0
        for idx, count in g.counts:
            if self.ok[idx]:
                cls = self.data.classes[idx]
                n += count
                gp += count * cls.gpus
                most = max(most, cls.gpus)
        return n, gp, most

    def holds(self, n: int, gp: int, most: int) -> bool:
        """Whether eligible counts can hold the job."""
        need = self.nodes
        if self.total_gpus:
            if most == 0:
                return False
            need = max(need, math.ceil(self.total_gpus / most))
        return n >= need and gp >= self.total_gpus

    def fits(self, g: Group) -> tuple[bool, int]:
        n, gp, most = self.eligible(g)
        if not self.check:
            return True, n
        return self.holds(n, gp, most), n

    def starts(self, src: Source, ascending: bool) -> list[int]:
        """Where a walk starts in each list: the first group as large as the job (ascending, when the fit
        is checked), the first (values order), or the last (largest first)."""
        if not ascending:
            return [0] * len(src.lists)
        if not self.check:
            return [0] * len(src.lists)
        return [bisect.bisect_left([g.nodes for g in lst], self.nodes) for lst in src.lists]

    def candidates(
        self,
        src: Source,
        budget: int,
        looks: int = LOOKS_LIST,
        inside: tuple[int, set[str]] | None = None,
        unchecked_after: bool = False,
        limit: int = MAX_ALTERNATIVES,
    ) -> Walk:
        """Up to 64 groups that can hold the job within ``budget`` characters of bracket, in the source's
        order, looking at ``looks`` groups at most. ``inside``: (parent index, features) keeps only groups
        inside those zone (0) or region (1) groups. ``unchecked_after``: a required level whose looks found
        nothing goes on taking groups unchecked (see the module docstring). ``limit``: the most groups kept
        (at most 64): a walk that finds one more is cut."""
        ascending = src.key is _ascending
        walk = Walk()
        length = 2
        left = looks
        steps = src.steps(self.starts(src, ascending), 1)
        for g in steps:
            if left == 0:
                walk.cut = True
                if len(walk.kept) < limit:  # stopped short of what it may keep: the bound, counted
                    walk.bound = True
                    self.bounded += 1
                    if unchecked_after and not walk.kept:
                        self._unchecked(walk, g, steps, budget)
                return walk
            left -= 1
            if g is None or not self.allowed(g):
                continue
            if inside is not None and g.parents[inside[0]] not in inside[1]:
                continue
            ok, n = self.fits(g)
            if not ok:
                continue
            extra = len(g.feature) + (1 if walk.kept else 0)
            if len(walk.kept) == limit or length + extra > budget:
                walk.cut = True
                return walk
            walk.kept.append((g, n))
            length += extra
        return walk

    def _unchecked(self, walk: Walk, g: Group | None, steps: Iterator[Group | None], budget: int) -> None:
        """A required level past its looks with nothing kept: the next groups of the level inside the area
        (at most ``MAX_ALTERNATIVES`` steps), their fit not checked."""
        length = 2
        for _ in range(MAX_ALTERNATIVES):
            if g is not None and self.allowed(g):
                extra = len(g.feature) + (1 if walk.kept else 0)
                if length + extra > budget:
                    return
                walk.kept.append((g, self.eligible(g)[0]))
                walk.unchecked += 1
                length += extra
            try:
                g = next(steps)
            except StopIteration:
                return

    def largest(self, src: Source) -> tuple[Group, int, int] | None:
        """The group with the most eligible (nodes, GPUs), from the largest down: at most ``LOOKS_LARGEST``
        looks, and none past a group smaller than the best found (its eligible nodes cannot be more)."""
        best: tuple[Group, int, int] | None = None
        for g in self.largest_first(src, LOOKS_LARGEST):
            if best is not None and g.nodes < best[1]:
                break
            n, gp, _ = self.eligible(g)
            if best is None or (n, gp) >= (best[1], best[2]):  # ties: the first in the filter's order
                best = (g, n, gp)
        return best

    def largest_first(self, src: Source, looks: int) -> Iterator[Group]:
        """The groups of ``src`` from the largest down, inside the area, at most ``looks`` steps (by design:
        the largest are what is asked for, so it is not counted in ``bounded``)."""
        left = looks
        down = Source(src.lists, src.index, _largest_first)
        for g in down.steps([len(lst) - 1 for lst in src.lists], -1):
            if left == 0:
                return
            left -= 1
            if g is not None and self.allowed(g):
                yield g


NO_GROUPS = Source(((),), ({},))
"""An empty source (prefer's NVLink level with families)."""
