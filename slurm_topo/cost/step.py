"""Step time, not only communication: what a placement costs a training step (pure: no I/O).

A step computes for ``c`` seconds and communicates for ``C = tp + cp + ep + pp + dp`` seconds (the terms of
:func:`.comm.score_ranks`). Tensor-parallel, context-parallel (KV ring), expert-parallel (all-to-all) and
pipeline traffic sit on the critical path; the DP gradient all-reduce can overlap the backward pass, so a
share ``o`` of the compute hides that much of it:

    step = c + tp + cp + ep + pp + max(0, dp − o·c)

The slowdown of a placement is ``step(placement) / step(best placement)``: a job whose step is mostly
compute barely notices a slower link, which is what the ADR's measurement on GCP shows (two regions cost
1.2× the step, not the 8× its communication alone would say).

A plan gives the compute in one of two ways (:class:`.model.PlanSpec`):

* ``compute=0.45s``: seconds of computation per step (a profiler's forward + backward time);
* ``comm=0.3``: the share of the step that is (exposed) communication on the best placement — what
  ``nsys``/the PyTorch profiler report as "communication" on a well-placed run — from which the compute is
  solved (:func:`compute_from_share`).

``overlap=0.5`` is the share of the compute during which DP's all-reduce runs (PyTorch DDP buckets start
during backward: about half the step's compute; 0 = no overlap, the default). A plan with neither
``compute=`` nor ``comm=`` is costed with the site's default share (:data:`DEFAULT_COMM_SHARE`, the same
default the ``:auto`` budgets use), and every reader says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from .comm import PlanSpec, StepCost

DEFAULT_COMM_SHARE = 0.25
"""Communication's share of a step on the best placement when the plan says nothing: NCCL-tests-scale
data-parallel jobs on one NVLink/InfiniBand fabric spend 10-40 % of a step in exposed communication
(MLPerf training submissions' profiles, Megatron-LM's reported model FLOPs utilisation of 40-55 %); 0.25 sits
inside that range and is the site default of the ``:auto`` budgets (``docs/relax.md``)."""


@dataclass(frozen=True, slots=True)
class StepModel:
    """How a step's compute is known: ``compute_s`` (None: communication only), the DP ``overlap`` and
    ``source``, the words every reader prints ("compute 0.45 s per step (plan compute=)")."""

    compute_s: float | None
    overlap: float
    source: str

    def exposed(self, cost: StepCost) -> float:
        """The communication seconds the step waits for (DP partly hidden behind the compute)."""
        return exposed_seconds(cost, self.compute_s or 0.0, self.overlap)

    def step(self, cost: StepCost) -> float:
        """Seconds per step: compute + exposed communication (communication only without compute)."""
        return (self.compute_s or 0.0) + self.exposed(cost)


def exposed_seconds(cost: StepCost, compute_s: float, overlap: float) -> float:
    """``tp + cp + ep + pp + max(0, dp − overlap·compute)``: every term but DP on the critical path."""
    hidden = overlap * compute_s
    out = 0.0
    for term in cost.terms:
        out += max(0.0, term.seconds - hidden) if term.kind == "dp" else term.seconds
    return out


def compute_from_share(cost: StepCost, share: float, overlap: float) -> float:
    """The compute seconds ``c`` at which exposed communication is ``share`` of the step on ``cost``'s
    placement: ``E(c) = share · (c + E(c))`` with ``E(c) = a + max(0, d − o·c)`` (``a`` = the other terms'
    seconds, ``d`` = DP seconds). Solved in closed form: first with DP not fully hidden, else with DP
    hidden."""
    if not 0 < share <= 1:
        raise ValueError(f"share {share}: expected (0, 1]")
    d = sum(t.seconds for t in cost.terms if t.kind == "dp")
    a = cost.seconds - d
    if share == 1:
        return 0.0
    c = (a + d) * (1 - share) / (share * (1 - overlap) + overlap)
    if d - overlap * c >= 0:
        return c
    return a * (1 - share) / share


def step_model(spec: PlanSpec, best: StepCost, default_share: float | None = DEFAULT_COMM_SHARE) -> StepModel:
    """The step model of ``spec``: its ``compute=``, else its ``comm=`` share solved on ``best`` (the best
    placement's communication), else ``default_share`` (None: communication only)."""
    overlap = spec.overlap
    tail = f", DP overlaps {overlap:.0%} of it" if overlap else ""
    if spec.compute_s is not None:
        return StepModel(
            spec.compute_s, overlap, f"compute {spec.compute_s:.4g} s per step (plan compute=){tail}"
        )
    share = spec.comm_share if spec.comm_share is not None else default_share
    if share is None:
        return StepModel(None, overlap, "communication only (no compute= or comm= in the plan)")
    c = compute_from_share(best, share, overlap)
    given = (
        "plan comm=" if spec.comm_share is not None else "site default: the plan gives no compute= or comm="
    )
    return StepModel(
        c,
        overlap,
        f"compute {c:.4g} s per step, from communication {share:.0%} of the step on the best placement "
        f"({given}){tail}",
    )
