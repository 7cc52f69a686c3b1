"""The shaped testbed's gloo job against the cost model: the tables, the predictions and the check (pure).

What gloo costs per message is mostly software: torch hands each operation to a worker thread, gloo's ring
all-reduce exchanges data and notifications at every step, and on the testbed's two shared cores each
exchange waits for a process to be scheduled. A wire probe (``calibrate``'s tcp probe: a few µs a hop on
the veths) cannot see it, so a 4 KiB all-reduce took 1.7–313× the prediction made with the wire's latency.
The honest model of it is a **software α per exchange, measured**: ranks on one node (no shaped link:
the wire costs nothing there) time the operation at the small size, and

* ``α_ring`` = a p-rank all-reduce's seconds / 2(p − 1): the cost of one ring step;
* ``α_p2p`` = a p-rank send/recv chain's seconds / (p − 1): the cost of one stage boundary;

measured at every rank count p a placement has (the testbed's "nodes" share two cores, so what an exchange
waits for grows with the processes: one node's p ranks wait as the p nodes' would). Each is added to every
network level's calibrated (wire) latency in a table of its own (:func:`gloo_table`): the model has one
latency per level, and gloo's collective step and its send differ by several times
(measured: ``benchmarks/results/shaped_network.md``). The bandwidths are calibrate's, untouched.

The check (:func:`failures`), per (operation, size) over the placements of every class:

* each placement's measured / predicted within ``CASE_BAND[size class]`` (large: ±30 %, the wire's rate is
  what a large message meets; small: 3×, a bound on one placement's gross error only: the minimum of 30
  small chains moved up to 2.6× between placements of the same prediction on the loaded machine);
* the geometric mean of measured / predicted over the placements within ``MEAN_BAND[size class]``: half
  way, in the logarithm, between right and off by the factor the test then applies to the term that sets
  the size's time, so that table fails and one right within the noise passes. Large: √2, a bandwidth off by
  2× fails (the means sit at 0.97-1.02). Small: √3, a latency off by 3× fails. At 256 B a mean over six
  placements moves with the machine: on a quiet one the same honest table gave 0.70-1.56 between
  measurements minutes apart, each placement's α measured in its own job (1.63-1.72 on a CI machine with
  one α shared by every placement), so 2× is within its noise there and 3× is not.

Each placement's job measures its own α first, on its first node: a one-off α shared by the placements moved
158-527 µs a ring step between runs and carried all four two-node ratios with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurm_topo.cost import Fabric, LinkTable, PlanSpec, Rank, score_ranks

NETWORK_LEVELS = ("network_group", "zone", "region", "any")
MEAN_BAND = {"large": math.sqrt(2.0), "small": math.sqrt(3.0)}
CASE_BAND = {"large": 1.3, "small": 3.0}


@dataclass(frozen=True)
class Case:
    """One measured operation: ``op`` (allreduce | chain) of ``nbytes`` over ``nodes`` (in rank order, as
    gpulayer-srun placed the ranks and slurmd reported them), its median seconds and its size class."""

    op: str
    placement: str
    nodes: tuple[str, ...]
    nbytes: int
    size: str  # large | small
    measured: float


def gloo_table(
    links: Mapping[str, Any], alpha_us: float, bandwidth_scale: float = 1.0, latency_scale: float = 1.0
) -> dict[str, Any]:
    """A ``links:`` document from calibrate's ``links`` mapping: each network level's latency = its wire
    latency + ``alpha_us`` (gloo's software α per exchange), everything × the scales (1: the honest table;
    2 or 0.5: a table off by 2×, for the check to catch). Levels inside a node are left out (no rank of these
    jobs shares a node with another)."""
    out = {}
    for level in NETWORK_LEVELS:
        rec = links[level]
        out[level] = {
            "bandwidth": round(float(rec["bandwidth"]) * bandwidth_scale, 6),
            "latency_us": round((float(rec["latency_us"]) + alpha_us) * latency_scale, 3),
        }
    return {"links": out}


def ranks_of(op: str, nodes: Sequence[str]) -> list[Rank]:
    """The ranks of the job gpulayer-srun ran: one a node, GPU 0; ``allreduce`` is ``--tp 1`` (every rank a
    DP replica), ``chain`` is ``--tp 1 --pp N`` (rank r is stage r)."""
    if op == "allreduce":
        return [Rank(r, n, 0, tp=0, pp=0, dp=r) for r, n in enumerate(nodes)]
    return [Rank(r, n, 0, tp=0, pp=r, dp=0) for r, n in enumerate(nodes)]


def predict(fabric: Fabric, table: LinkTable, case: Case) -> float:
    """The model's seconds for ``case``: the DP ring all-reduce term, or the PP chain term (``α + n/B`` per
    stage boundary, one after the other)."""
    if case.op == "allreduce":
        spec = PlanSpec(gpus_per_node=1, allreduce_bytes=case.nbytes)
    else:
        spec = PlanSpec(gpus_per_node=1, pp=len(case.nodes), pp_bytes=case.nbytes)
    cost = score_ranks(fabric, ranks_of(case.op, case.nodes), spec, table)
    kind = "dp" if case.op == "allreduce" else "pp"
    return sum(t.seconds for t in cost.terms if t.kind == kind)


def failures(cases: Sequence[Case], predicted: Sequence[float]) -> list[str]:
    """What the check finds wrong (empty: the model holds), one line per fault."""
    out = []
    groups: dict[tuple[str, str], list[float]] = {}
    for case, pred in zip(cases, predicted, strict=True):
        ratio = case.measured / pred
        groups.setdefault((case.op, case.size), []).append(ratio)
        band = CASE_BAND[case.size]
        if not 1 / band <= ratio <= band:
            out.append(
                f"{case.op} {case.size} {case.nbytes} B on {case.placement}: "
                f"measured {case.measured * 1e3:.3f} ms, predicted {pred * 1e3:.3f} ms "
                f"(x{ratio:.2f}, outside x{1 / band:.2f}-x{band:.2f})"
            )
    for (op, size), ratios in groups.items():
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        band = MEAN_BAND[size]
        if not 1 / band <= mean <= band:
            out.append(
                f"{op} {size}: geometric mean of measured/predicted x{mean:.2f} over {len(ratios)} "
                f"placements, outside x{1 / band:.2f}-x{band:.2f}"
            )
    return out


def table_lines(cases: Sequence[Case], predicted: Sequence[float]) -> list[str]:
    """Markdown rows: placement, op, bytes, predicted and measured ms, ratio."""
    return [
        f"| {c.placement} | {','.join(c.nodes)} | {c.op} | {c.nbytes} | {p * 1e3:.3f} "
        f"| {c.measured * 1e3:.3f} | {c.measured / p:.2f} |"
        for c, p in zip(cases, predicted, strict=True)
    ]
