"""The one communication cost model (ARCHITECTURE.md, "One cost model"): pure, no I/O.

* :mod:`.links`: link levels, their constants (defaults cite their source) and the ``links:`` validator;
* :mod:`.comm`: ring all-reduce, EP all-to-all, the CP ring, a TP × CP × EP × PP × DP plan over a placement
  (ranks as ``gpulayer-srun`` lays them out) -> seconds per step per term;
* :mod:`.search`: the tightest placement of a shape on a fleet, by groups;
* :mod:`.step`: the step around the communication (compute, DP overlap): slowdowns are of the step.

:func:`predict` is the call for ``cost`` and ``explain``: the placement's step cost, the best placement of the
same shape among eligible nodes (the idle fleet by default), and the slowdown.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from ..core.model import Node
from .comm import (
    Fabric,
    PlanSpec,
    Rank,
    StepCost,
    Term,
    all_to_all_seconds,
    cp_ring_seconds,
    gpus_per_node,
    layout_reads_locations,
    network_level,
    pair_level,
    parse_bytes,
    parse_plan,
    place_ranks,
    ring_allreduce,
    ring_allreduce_seconds,
    score_placed,
    score_placement,
    score_ranks,
)
from .links import DEFAULT_LINKS, DEFAULT_TABLE, LINK_LEVELS, Link, LinkTable, parse_links
from .search import Found, best_nodes, switch_depth
from .step import DEFAULT_COMM_SHARE, StepModel, step_model

__all__ = [
    "all_to_all_seconds",
    "cp_ring_seconds",
    "level_words",
    "DEFAULT_COMM_SHARE",
    "DEFAULT_LINKS",
    "DEFAULT_TABLE",
    "LINK_LEVELS",
    "Fabric",
    "Found",
    "Link",
    "LinkTable",
    "PlanSpec",
    "Prediction",
    "Rank",
    "StepCost",
    "StepModel",
    "Term",
    "best_nodes",
    "network_level",
    "pair_level",
    "parse_bytes",
    "parse_links",
    "parse_plan",
    "gpus_per_node",
    "layout_reads_locations",
    "place_ranks",
    "describe",
    "predict",
    "predict_job",
    "ring_allreduce",
    "ring_allreduce_seconds",
    "score_placed",
    "score_placement",
    "score_ranks",
    "span_level",
    "step_model",
]


@dataclass(frozen=True, slots=True)
class Prediction:
    """A placement's step cost against the best placement of the same shape (None: no room for one), and
    the step model both are read with (:mod:`.step`: the compute assumed, and where it comes from)."""

    current: StepCost
    best: StepCost | None
    best_level: str | None
    step: StepModel = StepModel(None, 0.0, "communication only")

    @property
    def current_step(self) -> float:
        """Seconds per step of the placement: compute + exposed communication."""
        return self.step.step(self.current)

    @property
    def best_step(self) -> float | None:
        return None if self.best is None else self.step.step(self.best)

    @property
    def slowdown(self) -> float | None:
        """Step time of this placement / of the best (1.0 = as good as it gets); None without a best
        placement or when both steps are 0."""
        best = self.best_step
        if best is None:
            return None
        if best == 0:
            return 1.0 if self.current_step == 0 else None
        return self.current_step / best

    @property
    def comm_slowdown(self) -> float | None:
        """Communication seconds of this placement / of the best (what the step's slowdown is made of)."""
        if self.best is None:
            return None
        if self.best.seconds == 0:
            return 1.0 if self.current.seconds == 0 else None
        return self.current.seconds / self.best.seconds


def span_level(fabric: Fabric, nodes: Sequence[str]) -> str:
    """The level all of ``nodes`` share: ``node`` for one node, else the widest level between the first and
    any other (``network_group``, ``zone``, ``region``, ``any``; ``nvlink`` for one NVLink domain)."""
    if len(set(nodes)) <= 1:
        return "node"
    first = fabric.node(nodes[0])
    levels = {network_level(first, fabric.node(n), fabric.domains) for n in nodes[1:] if n != nodes[0]}
    return max(levels, key=LINK_LEVELS.index)


def hardware_kind(node: Node) -> tuple[str | None, tuple[tuple[str, ...], ...] | None]:
    """What makes two nodes the same hardware for the model: the GPU type and the GPU link matrix (None:
    no link data). A placement is compared with the best placement of its own kind, so a slowdown is the
    placement's, not a different machine's."""
    topo = node.gpu_topology
    return node.gpu_type, (topo.matrix if topo is not None and topo.matrix else None)


def predict(
    fabric: Fabric,
    nodes: Sequence[str],
    spec: PlanSpec,
    table: LinkTable = DEFAULT_TABLE,
    *,
    eligible: Callable[[Node], bool] | None = None,
    default_share: float | None = DEFAULT_COMM_SHARE,
    scorer: Callable[[Sequence[str], PlanSpec], StepCost] | None = None,
) -> Prediction:
    """Score ``spec`` on ``nodes`` and on the best ``len(nodes)`` nodes of the fleet that pass ``eligible``
    (default: every node, the idle fleet; pass "free now" for the best placement available now). The best
    placement keeps the shape: as many nodes, at least as many GPUs each, the same GPU type when the
    placement has one, and, where the placement's nodes are all of one :func:`hardware_kind`, nodes of
    that kind only. The step model (:func:`.step.step_model`) is solved on the best placement (on the
    placement itself without one); ``default_share`` is used when the plan gives no compute (None:
    communication only). ``scorer``: what scores a placement, called for ``nodes`` and then for the best
    placement found (default :func:`.comm.score_placement` with ``table``; ``report.Predictor`` passes its
    scores shared by structure)."""
    cache: dict[int, tuple[int, ...]] = {}

    def own(on: Sequence[str], plan: PlanSpec) -> StepCost:
        return score_placement(fabric, on, plan, table, cache)

    score = scorer if scorer is not None else own
    current = score(nodes, spec)
    g = gpus_per_node(fabric, nodes, spec.gpus_per_node)
    types = {fabric.node(n).gpu_type for n in nodes}
    gpu_type = types.pop() if len(types) == 1 else None
    kinds = {hardware_kind(fabric.node(n)) for n in nodes}
    if len(kinds) == 1:  # compare like with like: the same GPU model and the same links between its GPUs
        kind, outer = kinds.pop(), eligible
        same: dict[int, bool] = {}  # id(gpu_topology) -> same links: one matrix comparison per model

        def eligible(n: Node) -> bool:
            if n.gpu_type != kind[0]:
                return False
            key = id(n.gpu_topology)
            if key not in same:
                same[key] = hardware_kind(n)[1] == kind[1]
            return same[key] and (outer is None or outer(n))

    found = best_nodes(fabric, len(nodes), g, eligible=eligible, gpu_type=gpu_type)
    if found is None:
        return Prediction(current, None, None, step_model(spec, current, default_share))
    best = score(found.nodes, replace(spec, gpus_per_node=g))
    if best.seconds > current.seconds:  # the placement itself is the best there is
        return Prediction(
            current, current, span_level(fabric, nodes), step_model(spec, current, default_share)
        )
    return Prediction(current, best, found.level, step_model(spec, best, default_share))


def predict_job(
    fabric: Fabric,
    nodes: Sequence[str],
    spec: PlanSpec,
    table: LinkTable = DEFAULT_TABLE,
    free_now: Collection[str] | None = None,
) -> tuple[Prediction, Prediction | None]:
    """For ``explain``: the job's placement against the best on the idle fleet, and against the best among
    the nodes free now plus the job's own (None without ``free_now``, e.g. node states unknown)."""
    idle = predict(fabric, nodes, spec, table)
    if free_now is None:
        return idle, None
    allowed = set(free_now) | set(nodes)
    return idle, predict(fabric, nodes, spec, table, eligible=lambda n: n.name in allowed)


def level_words(level: str | None) -> str:
    """Where the best placement's nodes meet: ``one zone``, ``one NVLink domain``, ``one switch (layer 2
    below the network group)``; level ``any`` is nodes in different regions (or without one), not a group."""
    named = {"node": "one node", "nvlink": "one NVLink domain", "any": "no common region"}
    depth = switch_depth(level or "")
    if depth:
        return f"one switch (layer {depth} below the network group)"
    return named.get(level or "", f"one {(level or '?').replace('_', ' ')}")


def describe(idle: Prediction, now: Prediction | None = None) -> list[str]:
    """Lines for ``explain``: predicted seconds per step, the best placements and the slowdown in %."""
    cur = idle.current
    top = cur.bottleneck
    lines = [
        f"predicted communication: {cur.seconds:.4g} s per step"
        + (f" (bottleneck: {top.kind} at {top.level.replace('_', ' ')})" if top else "")
    ]
    if idle.step.compute_s is not None:
        lines.append(f"predicted step: {idle.current_step:.4g} s (assumed: {idle.step.source})")
    else:
        lines.append(f"assumed: {idle.step.source}")
    for label, pred in (("on an idle fleet", idle), ("free right now (with its own nodes)", now)):
        if pred is None:
            continue
        if pred.best is None or pred.slowdown is None:
            lines.append(f"best placement {label}: none of this shape")
            continue
        comm = pred.comm_slowdown
        head = (
            f"best placement {label}: {pred.best.seconds:.4g} s per step ({level_words(pred.best_level)}); "
        )
        if pred.step.compute_s is None or comm is None:
            lines.append(head + f"this placement is {(pred.slowdown - 1) * 100:.0f} % slower")
        else:
            lines.append(
                head + f"this placement's communication is {(comm - 1) * 100:.0f} % slower, "
                f"its step {(pred.slowdown - 1) * 100:.0f} % slower"
            )
    lines += [f"note: {n}" for n in cur.notes]
    return lines
