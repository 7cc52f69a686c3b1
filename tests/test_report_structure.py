"""``report.Predictor`` against :func:`slurm_topo.cost.predict` and :func:`slurm_topo.cost.score_placement`,
job by job, on random fleets (seeded): locations with gaps, NVLink domains, GPU kinds with and without link
data (real ``nvidia-smi topo -m`` captures), degraded ports, rails, and plans with and without pipelines,
CP and EP. Every placement is paired with another of the same hardware node by node but other locations, so
the layout carried over between structures is exercised on every example."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Location, Node
from slurm_topo.cost import (
    DEFAULT_TABLE,
    Fabric,
    layout_reads_locations,
    parse_links,
    parse_plan,
    predict,
    score_placement,
)
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.reports.report import Predictor

TOPO = Path(__file__).resolve().parent / "fixtures" / "real" / "topo"
EIGHT = [
    None,
    parse_topo_matrix((TOPO / "h800-8gpu-nv18-10nic-merged-affinity-numa.txt").read_text()),
    parse_topo_matrix((TOPO / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt").read_text()),
    parse_topo_matrix((TOPO / "rtx3090-8gpu-pcie-node-sys-dualsocket.txt").read_text()),
]
FOUR = [None, parse_topo_matrix((TOPO / "h100-4gpu-nv18-8nic-allphb-container.txt").read_text())]
TYPES = {8: ["h800", "v100", "rtx3090", None], 4: ["h100", "l40s", None]}
PLANS = [
    "tp=4,bytes=4G",
    "tp=2,bytes=1G,tp_bytes=100M",
    "tp=1,bytes=10G",
    "tp=2,dp=2,bytes=1G",
    "tp=2,pp=2,bytes=4G,pp_bytes=50M",
    "pp=2,bytes=100M,pp_bytes=10M,order=pp-tp-dp",
    "tp=4,pp=2,bytes=1G,pp_bytes=10M",
    "tp=4,pp=3,bytes=1G,pp_bytes=10M",
    "tp=2,cp=2,bytes=1G,cp_bytes=20M",
    "tp=4,cp=2,bytes=1G,cp_bytes=20M",
    "tp=4,ep=2,bytes=1G,ep_bytes=30M",
    "tp=2,ep=2,bytes=1G,ep_bytes=30M",
    "tp=4,bytes=1G,compute=0.2s",
    "tp=2,bytes=1G,comm=0.3,overlap=0.5",
]


def fleet(rnd: random.Random) -> tuple[Fabric, list[Node]]:
    """A random fleet of 6-24 nodes: a few hardware kinds, locations from a small alphabet (with gaps)."""
    nodes = []
    kinds = [(g, rnd.choice(EIGHT if g == 8 else FOUR), rnd.choice(TYPES[g])) for g in (8, 4, 8)]
    for i in range(rnd.randint(6, 24)):
        gpus, topo, gpu_type = rnd.choice(kinds)
        region = rnd.choice([None, "r0", "r1", "r1"])
        zone = rnd.choice([None, "a", "b", "b"]) if region else None
        group = rnd.choice([None, "g0", "g1", "g1"]) if zone else None
        nodes.append(
            Node(
                f"n{i:02d}",
                Location(region, zone, group),
                gpus=gpus,
                gpu_type=gpu_type,
                gpu_topology=topo,
                nvlink_domain=rnd.choice([None, None, "d0", "d1"]),
                net_ratio=rnd.choice([1.0, 1.0, 1.0, 0.5]),
            )
        )
    fabric = Fabric(
        {n.name: n for n in nodes},
        {n.name: n.nvlink_domain for n in nodes if n.nvlink_domain},
        rail_optimised=rnd.random() < 0.3,
    )
    return fabric, nodes


def _outcome(call, *args):  # type: ignore[no-untyped-def]
    try:
        return call(*args)
    except InputError as exc:
        return ("refused", str(exc))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_predictor_equals_predict_and_score_placement_job_by_job(seed: int) -> None:
    rnd = random.Random(seed)
    fabric, nodes = fleet(rnd)
    table = rnd.choice([DEFAULT_TABLE, parse_links({"rails": "gpu_index"})])
    predictor = Predictor(fabric, table)
    hardware = {n.name: (n.gpus, n.gpu_type, id(n.gpu_topology), n.net_ratio) for n in nodes}
    for _ in range(6):
        spec = parse_plan(rnd.choice(PLANS))
        placed = rnd.sample(nodes, rnd.randint(2, min(8, len(nodes))))
        twin = [rnd.choice([m for m in nodes if hardware[m.name] == hardware[n.name]]) for n in placed]
        for chosen in (placed, twin):
            names = [n.name for n in chosen]
            if len(set(names)) != len(names):
                continue
            want = _outcome(score_placement, fabric, names, spec, table)
            got = _outcome(predictor.score, names, spec)
            if isinstance(want, tuple):
                assert got == want
                continue
            assert not isinstance(got, tuple)
            assert got.terms == want.terms  # every figure, exactly
            assert len(got.notes) == len(want.notes)
            ref, mine = predict(fabric, names, spec, table), predictor(names, spec)
            assert (mine.slowdown, mine.best_level, mine.step) == (ref.slowdown, ref.best_level, ref.step)


def test_the_layout_is_carried_over_only_where_it_cannot_read_the_locations() -> None:
    """A layout made once per hardware sequence (one stage, no EP/CP blocks) and once per structure
    otherwise: the counts of layouts made say which, on placements of one hardware in many structures."""
    rnd = random.Random(48)
    nodes = [
        Node(
            f"n{i:02d}",
            Location("r0", "ab"[i % 2], f"g{i % 3}"),
            gpus=8,
            gpu_type="h800",
            gpu_topology=EIGHT[1],
            nvlink_domain=f"d{i % 4}" if i < 8 else None,
        )
        for i in range(16)
    ]
    fabric = Fabric({n.name: n for n in nodes}, {n.name: n.nvlink_domain for n in nodes if n.nvlink_domain})
    for text, carried in (
        ("tp=4,bytes=1G", True),
        ("tp=2,pp=2,bytes=1G,pp_bytes=1M", False),
        ("tp=2,cp=2,bytes=1G,cp_bytes=1M", False),
    ):
        spec = parse_plan(text)
        assert layout_reads_locations(spec) is not carried
        predictor = Predictor(fabric)
        for _ in range(40):
            names = [n.name for n in rnd.sample(nodes, 4)]
            assert predictor.score(names, spec).terms == score_placement(fabric, names, spec).terms
        structures = len(predictor._scores)
        assert structures > 1
        assert len(predictor._layouts) == (1 if carried else structures)


def test_a_node_named_twice_is_refused_as_score_placement_refuses_it() -> None:
    node = Node("a", Location("r", "z", "g"), gpus=4, gpu_type="h100")
    fabric = Fabric({"a": node, "b": Node("b", Location("r", "z", "g"), gpus=4, gpu_type="h100")})
    predictor = Predictor(fabric)
    spec = parse_plan("tp=4,bytes=1G")
    predictor.score(["a", "b"], spec)  # the structure of a, a is a, b's: still refused
    with pytest.raises(InputError, match="named twice"):
        predictor.score(["a", "a"], spec)
