"""The wait budget of an ``auto`` job (docs/relax.md): per looser level, how many seconds of waiting the
tighter placement is worth, from the cost model's step seconds at each level and the job's time limit. Pure;
``slurm_topo.relaxer.relax`` (the relaxer) and ``slurm_topo.policy.compile`` (the submit filter's data) read
it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..core.errors import InputError
from ..core.model import Location, Node
from ..policy.vocab import AUTO_LEVELS as LEVELS
from ..policy.vocab import BUDGET_PREFIX
from ..policy.vocab import budget_record as filter_record
from .comm import Fabric, PlanSpec, StepCost, parse_plan, score_placement
from .links import DEFAULT_TABLE, LinkTable
from .step import DEFAULT_COMM_SHARE, step_model

DEFAULT_COMM_FRACTION = DEFAULT_COMM_SHARE


def _level_location(level: str, half: int) -> Location:
    """Where node ``half`` (0 or 1) of a two-group placement meeting at ``level`` sits."""
    i = str(half)
    if level == "network_group":
        return Location("r", "z", "g")
    if level == "zone":
        return Location("r", "z", "g" + i)
    if level == "region":
        return Location("r", "z" + i, "g" + i)
    return Location("r" + i, "z" + i, "g" + i)


def level_costs(
    template: Node, nodes: int, spec: PlanSpec, table: LinkTable = DEFAULT_TABLE
) -> dict[str, StepCost]:
    """The communication of ``spec`` on ``nodes`` copies of ``template`` whose first half sits in one group
    and the rest in another group, meeting at each level (one node: every level costs the same). The copies
    keep none of the template's ``switches``: copies alike would all sit under its one switch, and the
    ``network_group`` level would be costed at ``switch`` (every budget level is a group level)."""
    out: dict[str, StepCost] = {}
    for level in LEVELS:
        fleet = {
            f"x{k}": replace(
                template,
                name=f"x{k}",
                location=_level_location(level, int(k >= nodes // 2)),
                switches=(),
                switches_source=None,
            )
            for k in range(nodes)
        }
        fabric = Fabric(fleet)
        out[level] = score_placement(fabric, list(fleet), spec, table)
    return out


def level_step_seconds(
    template: Node, nodes: int, spec: PlanSpec, table: LinkTable = DEFAULT_TABLE
) -> dict[str, float]:
    """Communication seconds per step at each level (:func:`level_costs`)."""
    return {lvl: c.seconds for lvl, c in level_costs(template, nodes, spec, table).items()}


def plan_slowdowns(
    costs: Mapping[str, StepCost],
    tight: str,
    spec: PlanSpec,
    comm_fraction: float = DEFAULT_COMM_FRACTION,
) -> dict[str, float]:
    """s_L = step(L) / step(tight) for the levels from ``tight`` out, with the plan's step model
    (:func:`.step.step_model`: its ``compute=``, ``comm=`` and ``overlap=``, solved on the tight placement).
    A plan that says none of them is :func:`level_slowdowns` with ``comm_fraction`` (the same numbers)."""
    if spec.compute_s is None and spec.comm_share is None and not spec.overlap:
        return level_slowdowns({k: c.seconds for k, c in costs.items()}, tight, comm_fraction)
    model = step_model(spec, costs[tight], comm_fraction)
    base = model.step(costs[tight])
    out: dict[str, float] = {}
    for level in LEVELS[LEVELS.index(tight) :]:
        out[level] = 1.0 if base <= 0 else max(1.0, model.step(costs[level]) / base)
    return out


def level_slowdowns(
    steps: Mapping[str, float], tight: str, comm_fraction: float = DEFAULT_COMM_FRACTION
) -> dict[str, float]:
    """s_L = 1 + f · (C_L / C_tight − 1) for the levels from ``tight`` out (1 for every level when the tight
    placement does not communicate)."""
    base = steps[tight]
    out: dict[str, float] = {}
    for level in LEVELS[LEVELS.index(tight) :]:
        out[level] = 1.0 if base <= 0 else max(1.0, 1.0 + comm_fraction * (steps[level] / base - 1.0))
    return out


@dataclass(frozen=True, slots=True)
class Budget:
    """A job's ``auto`` budget: its required level at submit, time limit and seconds per looser level."""

    level: str
    limit_s: int
    budgets: tuple[tuple[str, int], ...]

    def of(self, level: str) -> int | None:
        return dict(self.budgets).get(level)

    def record(self) -> str:
        parts = [f"{BUDGET_PREFIX}{self.level}", f"limit={self.limit_s}s"]
        parts += [f"{lvl}={sec}s" for lvl, sec in self.budgets]
        return " ".join(parts)


def auto_budget(
    level: str,
    nodes: int,
    plan: str | PlanSpec,
    limit_s: float,
    template: Node,
    *,
    table: LinkTable = DEFAULT_TABLE,
    comm_fraction: float = DEFAULT_COMM_FRACTION,
) -> Budget:
    """The budget record of an ``auto`` job of ``nodes`` nodes like ``template`` (GPUs, GPU topology), with
    ``plan`` (the job's, or the site default) and time limit ``limit_s``: per looser level,
    round(R · (s_L − s_tight)) seconds, s_L the step's slowdown (:func:`plan_slowdowns`: the plan's
    ``compute=``/``comm=``/``overlap=``, else ``comm_fraction``)."""
    if level not in LEVELS[:-1]:
        raise InputError(f"auto level {level!r}: expected network_group, zone or region")
    if not 0 < comm_fraction <= 1:
        raise InputError(f"comm fraction {comm_fraction}: expected a number in (0, 1]")
    if limit_s <= 0 or nodes < 1:
        raise InputError("auto budget: the time limit and the node count must be positive")
    spec = parse_plan(plan) if isinstance(plan, str) else plan
    slow = plan_slowdowns(level_costs(template, nodes, spec, table), level, spec, comm_fraction)
    budgets = tuple(
        (lvl, round(limit_s * (slow[lvl] - slow[level]))) for lvl in LEVELS[LEVELS.index(level) + 1 :]
    )
    return Budget(level, round(limit_s), budgets)


def unit_budgets(
    template: Node,
    plan: str | PlanSpec,
    max_nodes: int,
    *,
    table: LinkTable = DEFAULT_TABLE,
    comm_fraction: float = DEFAULT_COMM_FRACTION,
) -> dict[str, dict[int, dict[str, float]]]:
    """For the submit filter's data file: per required level, per node count 1..``max_nodes``, per looser
    level, s_L − s_tight (seconds of budget per second of time limit), rounded to 4 places. The filter
    multiplies by the job's time limit and writes :func:`budget_record`; it cannot run the cost model."""
    spec = parse_plan(plan) if isinstance(plan, str) else plan
    out: dict[str, dict[int, dict[str, float]]] = {lvl: {} for lvl in LEVELS[:-1]}
    for n in range(1, max_nodes + 1):
        costs = level_costs(template, n, spec, table)
        for lvl in LEVELS[:-1]:
            slow = plan_slowdowns(costs, lvl, spec, comm_fraction)
            out[lvl][n] = {k: round(slow[k] - slow[lvl], 4) for k in LEVELS[LEVELS.index(lvl) + 1 :]}
    return out


def budget_record(level: str, limit_s: float, units: Mapping[str, float]) -> str:
    """The record from a row of :func:`unit_budgets` and a time limit: the filter's own writer
    (``policy.vocab.budget_record``, rounding as its Lua twin does), so the record has one author."""
    return filter_record(level, round(limit_s), list(units.values()))
