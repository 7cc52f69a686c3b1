"""TP ranks, DP/PP partners and stage order chosen by link bandwidth (``slurm_topo.srun.orient``), checked on
real captures against a brute-force reference written here: every assignment of the plan's TP groups to
(stage, replica) cells and every TP-rank order of each group, scored by a bandwidth order of the link
classes of its own (NV<n> by n, then PIX > PXB > PHB > NODE > SYS)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo import srun
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import PlanSpec, score_placement
from slurm_topo.cost.comm import Fabric
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

REAL = Path(__file__).resolve().parent / "fixtures" / "real" / "topo"
DGX1 = "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
CAPTURES = (
    DGX1,  # hybrid cube mesh: NV2 and NV1 bonds, SYS between the quads
    "dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt",  # NV1 cube, SOC elsewhere
    "rtx3090-8gpu-pcie-node-sys-dualsocket.txt",  # PCIe NODE inside a socket, SYS across
    "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt",  # NVSwitch: every pair alike
)
PCIE = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")


def topo(name: str) -> GpuTopology:
    return parse_topo_matrix((REAL / name).read_text())


def speed(t: GpuTopology, a: int, b: int) -> float:
    """The reference's own order of link classes (larger faster)."""
    cls = t.link(a, b)
    m = re.fullmatch(r"NV(\d+)", cls)
    if m:
        return 100.0 * int(m.group(1))
    return float(10 - PCIE.index(cls)) if cls in PCIE else 0.0


def best_ring(t: GpuTopology, gpus: Sequence[int], closed: bool) -> float:
    """The slowest hop of the best ring (``closed``) or path through ``gpus``, by trying every order."""
    if len(gpus) < 2:
        return float("inf")
    best = 0.0
    for rest in itertools.permutations(gpus[1:] if closed else gpus):
        seq = (gpus[0], *rest) if closed else rest
        hops = list(zip(seq, seq[1:], strict=False))
        if closed and len(seq) > 2:
            hops.append((seq[-1], seq[0]))
        best = max(best, min(speed(t, a, b) for a, b in hops))
    return best


def slowest(t: GpuTopology, grid: dict[tuple[int, int], tuple[int, ...]], pp: int, dp: int) -> float:
    """The slowest link of a one-node layout (cell (stage, replica) -> GPUs in TP-rank order): every PP hop
    of every TP rank and the best DP ring of every (stage, TP rank)."""
    tp = len(grid[(0, 0)])
    low = float("inf")
    for d, s, k in itertools.product(range(dp), range(pp - 1), range(tp)):
        low = min(low, speed(t, grid[(s, d)][k], grid[(s + 1, d)][k]))
    for s, k in itertools.product(range(pp), range(tp)):
        low = min(low, best_ring(t, [grid[(s, d)][k] for d in range(dp)], True))
    return low


def reference(t: GpuTopology, groups: Sequence[tuple[int, ...]], pp: int, dp: int) -> float:
    """The best slowest link over every assignment of ``groups`` to cells and every TP-rank order."""
    cells = [(s, d) for d in range(dp) for s in range(pp)]
    best = 0.0
    for order in itertools.permutations(groups):
        for ranks in itertools.product(*(itertools.permutations(g) for g in order)):
            best = max(best, slowest(t, dict(zip(cells, ranks, strict=True)), pp, dp))
    return best


def plan_grid(
    t: GpuTopology, nodes: Sequence[str], tp: int, pp: int, dp: int
) -> dict[tuple[str, int, int], tuple[int, ...]]:
    """gpulayer-srun's layout: (node, stage, replica) -> the cell's GPUs in TP-rank order."""
    alloc = srun.Allocation("1", tuple(nodes), {n: tuple(sorted(t.gpus)) for n in nodes})
    plan = srun.plan_srun(alloc, tp=tp, pp=pp, dp=dp, topologies={n: t for n in nodes})
    cells: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
    for r in plan.rows:
        cells.setdefault((r.node, r.pp, r.dp), []).append((r.tp, r.gpus[0]))
    return {k: tuple(g for _, g in sorted(v)) for k, v in cells.items()}


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize(
    ("tp", "pp", "dp"), [(2, 4, 1), (4, 1, 2), (2, 1, 4), (2, 2, 2), (4, 2, 1), (1, 4, 2)]
)
def test_one_node_layout_is_as_fast_as_the_brute_force_best(capture: str, tp: int, pp: int, dp: int) -> None:
    t = topo(capture)
    assert len(t.gpus) >= tp * pp * dp, capture  # every capture here has 8 GPUs: never skipped
    got = plan_grid(t, ["a"], tp, pp, dp)
    grid = {(s, d): g for (_, s, d), g in got.items()}
    groups = [tuple(sorted(g)) for g in grid.values()]
    assert slowest(t, grid, pp, dp) == reference(t, groups, pp, dp)


def test_dgx1_tp2_pp4_takes_no_sys_hop_and_every_tp_pair_is_nv2() -> None:
    t = topo(DGX1)
    grid = plan_grid(t, ["a"], 2, 4, 1)
    assert {t.link(*g) for g in grid.values()} == {"NV2"}
    hops = {t.link(grid[("a", s, 0)][k], grid[("a", s + 1, 0)][k]) for s in range(3) for k in range(2)}
    assert hops <= {"NV1", "NV2"}, hops  # before: stage 1 -> 2 crossed SYS on both TP ranks


def test_the_cost_model_prices_the_same_layout() -> None:
    """One layout: the cost model's PP term on a DGX-1 --tp 2 --pp 4 is NVLink, no longer SYS."""
    node = Node("a", Location("r", "z", "g"), gpus=8, gpu_type="v100", gpu_topology=topo(DGX1))
    cost = score_placement(
        Fabric.of(Inventory((node,))), ["a"], PlanSpec(tp=2, pp=4, tp_bytes=1e8, pp_bytes=1e8)
    )
    pp_term = next(term for term in cost.terms if term.kind == "pp")
    assert pp_term.level == "nvlink", pp_term


@pytest.mark.parametrize("capture", [DGX1, "rtx3090-8gpu-pcie-node-sys-dualsocket.txt"])
def test_a_pipeline_enters_the_next_node_on_the_gpus_it_left_on(capture: str) -> None:
    """Rails: the stage leaving node a and the one entering node b use the same local GPUs TP rank by TP rank,
    and node b's stages are still as fast as the brute force's best chain through its groups."""
    t = topo(capture)
    got = plan_grid(t, ["a", "b"], 2, 8, 1)
    last_a = max(s for (n, s, _) in got if n == "a")
    assert got[("a", last_a, 0)] == got[("b", last_a + 1, 0)]
    on_b = {(s - last_a - 1, 0): g for (n, s, _), g in got.items() if n == "b"}
    assert slowest(t, on_b, len(on_b), 1) == reference(
        t, [tuple(sorted(g)) for g in on_b.values()], len(on_b), 1
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(CAPTURES[:3]),
    st.sampled_from([(2, 2, 1), (2, 3, 1), (2, 1, 3), (4, 1, 1), (1, 3, 2), (2, 2, 2)]),
    st.lists(st.integers(0, 7), min_size=4, max_size=8, unique=True),
)
def test_any_allocated_gpus_one_node(capture: str, sizes: tuple[int, int, int], gpus: list[int]) -> None:
    """Whatever GPUs Slurm gave, the layout matches the brute force on the groups the plan took."""
    tp, pp, dp = sizes
    t = topo(capture)
    if len(gpus) < tp * pp * dp:
        return
    alloc = srun.Allocation("1", ("a",), {"a": tuple(sorted(gpus))})
    plan = srun.plan_srun(alloc, tp=tp, pp=pp, dp=dp, topologies={"a": t})
    cells: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for r in plan.rows:
        cells.setdefault((r.pp, r.dp), []).append((r.tp, r.gpus[0]))
    grid = {k: tuple(g for _, g in sorted(v)) for k, v in cells.items()}
    assert sorted(g for v in grid.values() for g in v) == sorted(r.gpus[0] for r in plan.rows)
    assert slowest(t, grid, pp, dp) == reference(t, [tuple(sorted(g)) for g in grid.values()], pp, dp)


# ---- the search's parts, and its bounds


def test_small_groups_try_every_tp_rank_order_and_large_ones_their_ring() -> None:
    from slurm_topo.gpu.rings import gpu_order
    from slurm_topo.srun.orient import MAX_FULL_TP, orientations

    t = topo(DGX1)
    four = orientations(t, (0, 1, 2, 3))
    assert four[0] == (0, 1, 2, 3)  # as placed first: kept unless another scores more
    assert sorted(four) == sorted(itertools.permutations((0, 1, 2, 3)))
    assert MAX_FULL_TP == 4
    eight = orientations(t, tuple(range(8)))
    ring = gpu_order(t, range(8), closed=True)
    assert eight[0] == tuple(range(8))
    assert len(eight) == 1 + 2 * 8 - (tuple(range(8)) in eight[1:])
    for cand in eight[1:]:  # each a rotation of the all-NV2 ring or of its reverse
        k = cand.index(ring[0])
        assert cand[k:] + cand[:k] in (ring, (ring[0], *ring[:0:-1]))
    assert {t.link(ring[k], ring[(k + 1) % 8]) for k in range(8)} == {"NV2"}


@pytest.mark.parametrize("nodes", [2, 5])
def test_dp_partners_on_other_nodes_take_the_same_local_gpus(nodes: int) -> None:
    """Rails: --tp 2 --dp on identical DGX-1 nodes: TP rank k of every replica of a stage on the same GPU
    as on the first node (the earlier nodes' answer is carried over, not searched again)."""
    t = topo(DGX1)
    names = [f"n{i}" for i in range(nodes)]
    got = plan_grid(t, names, 2, 1, 4 * nodes)
    per_node: dict[str, set[tuple[int, ...]]] = {}
    for (n, _, _), g in got.items():
        per_node.setdefault(n, set()).add(g)
    first = per_node[names[0]]
    assert all(v == first for v in per_node.values())
    assert {t.link(*g) for g in first} == {"NV2"}


def test_eight_one_gpu_stages_take_an_nvlink_chain_beyond_the_exhaustive_bound() -> None:
    """--pp 8 on one DGX-1: 8 cells, past MAX_CELL_PERMUTATIONS: the stage orders tried are the chain's, and
    the slowest hop is the brute force's best path (NV2 throughout exists: 0-3-2-1-5-6-7-4)."""
    from slurm_topo.srun.orient import MAX_CELL_PERMUTATIONS

    assert MAX_CELL_PERMUTATIONS < 8
    t = topo(DGX1)
    got = plan_grid(t, ["a"], 1, 8, 1)
    chain = [got[("a", s, 0)][0] for s in range(8)]
    assert sorted(chain) == list(range(8))
    assert min(speed(t, a, b) for a, b in zip(chain, chain[1:], strict=False)) == best_ring(t, chain, False)


def test_nodes_without_link_data_and_several_gpus_a_task_keep_the_placed_layout() -> None:
    t = topo(DGX1)
    alloc = srun.Allocation("1", ("a",), {"a": tuple(range(8))})
    bare = srun.plan_srun(alloc, tp=2, pp=4)
    assert [r.gpus for r in bare.rows] == [(g,) for g in range(8)]
    wide = srun.plan_srun(alloc, tp=2, pp=2, gpus_per_task=2, topologies={"a": t})
    for r in wide.rows:  # a task's two GPUs stay in index order inside its group
        assert list(r.gpus) == sorted(r.gpus)


def test_the_shim_reads_the_tp_rank_order() -> None:
    """CUDA_VISIBLE_DEVICES lists the group's GPUs in TP-rank order, and each rank's own GPU is at its
    LOCAL_RANK there, whatever order the search chose."""
    t = topo(DGX1)
    alloc = srun.Allocation("1", ("a", "b"), {"a": tuple(range(8)), "b": tuple(range(8))})
    plan = srun.plan_srun(alloc, tp=2, pp=8, topologies={"a": t, "b": t})
    for r in plan.rows:
        cvd = [int(x) for x in r.cuda_visible_devices.split(",")]
        assert cvd[r.local_rank] == r.gpus[0]


def test_one_layout_for_the_cost_model_and_gpulayer_srun() -> None:
    """cost.place_ranks is gpulayer-srun's layout rank by rank (two DGX-1 nodes, --tp 2 --pp 8)."""
    from slurm_topo.cost.comm import place_ranks

    t = topo(DGX1)
    nodes = tuple(
        Node(n, Location("r", "z", "g"), gpus=8, gpu_type="v100", gpu_topology=t) for n in ("a", "b")
    )
    ranks = place_ranks(Fabric.of(Inventory(nodes)), ["a", "b"], PlanSpec(tp=2, pp=8))
    got = plan_grid(t, ["a", "b"], 2, 8, 1)
    for r in ranks:
        assert got[(r.node, r.pp, r.dp)][r.tp] == r.gpu


@pytest.mark.parametrize(("tp", "pp"), [(8, 1), (2, 4)])
def test_identical_nodes_share_one_search(monkeypatch: pytest.MonkeyPatch, tp: int, pp: int) -> None:
    """The work bound: 40 DGX-1 nodes in the same situation are searched at most twice (the first node, and
    a node whose partners sit on an earlier node), not once each."""
    from slurm_topo.srun import orient as mod

    calls: list[str] = []
    real = mod._search

    def counting(scorer: object, choices: object) -> None:
        calls.append("x")
        real(scorer, choices)  # type: ignore[arg-type]

    monkeypatch.setattr(mod, "_search", counting)
    t = topo(DGX1)
    names = [f"n{i:02d}" for i in range(40)]
    got = plan_grid(t, names, tp, pp, 40 * 8 // (tp * pp))
    assert len(got) == 40 * 8 // tp
    assert 1 <= len(calls) <= 2


def test_dp_partners_stay_inside_a_socket_on_a_pcie_node() -> None:
    """Two sockets of four GPUs (NODE inside, SYS across): --tp 2 --dp 2 --pp 2 puts every DP and PP partner
    of a TP rank inside one socket when the brute force can (the issue's aliyun case, on this capture)."""
    t = topo("rtx3090-8gpu-pcie-node-sys-dualsocket.txt")
    got = plan_grid(t, ["a"], 2, 2, 2)
    grid = {(s, d): g for (_, s, d), g in got.items()}
    want = reference(t, [tuple(sorted(g)) for g in grid.values()], 2, 2)
    assert slowest(t, grid, 2, 2) == want


def test_a_node_s_search_scores_at_most_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work bound by GPU count: two nodes of 256 GPUs (NVLink quads, SYS between them), TP 2 × PP 2, 128
    cells a node. Each node's search scores at most ``max(MIN_SCORES, SCORE_BUDGET // cells)`` layouts (not
    rounds × variables × values), and the layout it keeps still uses every GPU once."""
    from slurm_topo.srun import orient as mod

    n = 256
    quads = tuple(
        tuple("X" if i == j else ("NV4" if i // 4 == j // 4 else "SYS") for j in range(n)) for i in range(n)
    )
    t = GpuTopology(gpus=tuple(range(n)), matrix=quads)
    scores: dict[str, int] = {}
    real = mod._Scorer.score

    def counting(self: mod._Scorer) -> tuple[float, int, float]:
        scores[self.node] = scores.get(self.node, 0) + 1
        return real(self)

    monkeypatch.setattr(mod._Scorer, "score", counting)
    got = plan_grid(t, ["a", "b"], 2, 2, n // 2)
    cells = n // 2  # TP groups of 2: 128 (stage, replica) cells a node
    assert scores and all(v <= max(mod.MIN_SCORES, mod.SCORE_BUDGET // cells) for v in scores.values()), (
        scores
    )
    assert max(scores.values()) == max(mod.MIN_SCORES, mod.SCORE_BUDGET // cells)  # the bound stopped it
    for node in ("a", "b"):
        used = [g for (m, _, _), group in got.items() if m == node for g in group]
        assert sorted(used) == list(range(n))
