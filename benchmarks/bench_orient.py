#!/usr/bin/env python3
"""What choosing TP ranks, DP/PP partners and stage order by bandwidth (``slurm_topo.srun.orient``) costs
the layout that ``cost``, ``explain``, ``capacity``, the budgets and gpulayer-srun share: CPU time of
``cost.comm.place_ranks`` with the search and with it switched off (``srun.plan.orient`` replaced by the
identity), on fleets of one real capture, and the slowest PP/DP link class inside a node either way.

    python benchmarks/bench_orient.py [--nodes 36,100] [--out benchmarks/results/orient.md]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_topo.core.model import Inventory, Location, Node  # noqa: E402
from slurm_topo.cost import PlanSpec  # noqa: E402
from slurm_topo.cost.comm import Fabric, place_ranks  # noqa: E402
from slurm_topo.gpu.links import link_bandwidth  # noqa: E402
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix  # noqa: E402
from slurm_topo.srun import plan as srun_plan  # noqa: E402

REAL = ROOT / "tests/fixtures/real/topo"
CAPTURES = (
    ("dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt", "v100"),
    ("rtx3090-8gpu-pcie-node-sys-dualsocket.txt", None),
    ("hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt", "h100"),
)
SPECS = (PlanSpec(tp=8), PlanSpec(tp=4), PlanSpec(tp=2, pp=4), PlanSpec(tp=2, pp=8), PlanSpec(tp=1, pp=8))


def fleet(capture: str, gpu_type: str | None, n: int) -> Fabric:
    topo = parse_topo_matrix((REAL / capture).read_text())
    nodes = tuple(
        Node(f"n{i:03d}", Location("r", "z", f"g{i // 18}"), gpus=8, gpu_type=gpu_type, gpu_topology=topo)
        for i in range(n)
    )
    return Fabric.of(Inventory(nodes))


def slowest(fabric: Fabric, ranks: list[object]) -> str:
    """The slowest link class a PP hop or a DP pair inside one node takes (``-`` when none is inside)."""
    by = {(r.tp, r.dp, r.pp): r for r in ranks}  # type: ignore[attr-defined]
    worst: tuple[float, str] | None = None
    for (t, d, p), r in by.items():
        for other in (by.get((t, d, p + 1)), by.get((t, d + 1, p))):
            if other is None or other.node != r.node or other.gpu == r.gpu:  # type: ignore[attr-defined]
                continue
            cls = fabric.node(r.node).gpu_topology.link(r.gpu, other.gpu)  # type: ignore[union-attr]
            bw = link_bandwidth(cls)
            if worst is None or bw < worst[0]:
                worst = (bw, cls)
    return "-" if worst is None else worst[1]


def timed(fabric: Fabric, spec: PlanSpec) -> tuple[float, str]:
    t0 = time.process_time()
    ranks = place_ranks(fabric, list(fabric.nodes), spec)
    return (time.process_time() - t0) * 1000, slowest(fabric, list(ranks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="36,100")
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = [
        "| GPUs | nodes | plan | slowest inside a node, placed | by bandwidth | CPU placed (ms) "
        "| by bandwidth (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    real = srun_plan.orient
    for capture, gpu_type in CAPTURES:
        for n in (int(x) for x in args.nodes.split(",")):
            fabric = fleet(capture, gpu_type, n)
            for spec in SPECS:
                srun_plan.orient = lambda at, slots, *_: (dict(at), list(slots))  # type: ignore[assignment]
                off = timed(fabric, spec)
                srun_plan.orient = real
                on = timed(fabric, spec)
                plan = f"tp {spec.tp}" + (f" × pp {spec.pp}" if spec.pp > 1 else "")
                name = capture.split("-8gpu")[0]
                lines.append(f"| {name} | {n} | {plan} | {off[1]} | {on[1]} | {off[0]:.0f} | {on[0]:.0f} |")
                print(lines[-1], flush=True)
    head = [
        "# TP ranks, DP/PP partners and stage order by bandwidth (bench_orient.py)",
        "",
        f"`python benchmarks/bench_orient.py --nodes {args.nodes}` on {platform.python_version()}, "
        f"{platform.machine()} (process CPU time; shared 2-core machine).",
        "",
    ]
    if args.out:
        Path(args.out).write_text("\n".join([*head, *lines]) + "\n")


if __name__ == "__main__":
    main()
