"""Link model, NVLink islands and pick_devices (fast search equals the exhaustive one)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pick_cases import FAMILIES, SubsetTable

from slurm_topo.core.errors import InputError, ParseError
from slurm_topo.gpu import pick as pick_module
from slurm_topo.gpu import pick_lanes
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.links import (
    DEFAULT_BANDWIDTH,
    bandwidth_table,
    forget_topologies,
    islands,
    link_bandwidth,
)
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.gpu.pick import pick_devices, pick_exhaustive

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


def _real() -> dict[str, GpuTopology]:
    out = {}
    for path in sorted((REAL / "topo").glob("*.txt")) + [REAL / "h200-vm-1gpu" / "topo-m.txt"]:
        try:
            out[path.name] = parse_topo_matrix(path.read_text(), source=path.name)
        except ParseError:
            continue
    return out


REAL_TOPOS = _real()


def blocks(n: int, size: int, inside: str, outside: str) -> GpuTopology:
    """n GPUs in islands of ``size`` joined by ``inside``, everything else ``outside``."""
    m = tuple(
        tuple("X" if i == j else inside if i // size == j // size else outside for j in range(n))
        for i in range(n)
    )
    return GpuTopology(tuple(range(n)), m, source=f"{n // size}x{size}")


def from_rows(*rows: str) -> GpuTopology:
    return GpuTopology(tuple(range(len(rows))), tuple(tuple(r.split()) for r in rows))


# -- link model
# -----------------------------------------------------------------------------------------------------


def test_every_nvlink_class_beats_every_pcie_class() -> None:
    """NV1 is faster than PIX, NVa > NVb for a > b, then PIX > PXB > PHB > NODE > SYS; SOC is SYS."""
    pcie = [link_bandwidth(c) for c in ("PIX", "PXB", "PHB", "NODE", "SYS")]
    assert pcie == sorted(pcie, reverse=True) and len(set(pcie)) == 5
    nv = [link_bandwidth(f"NV{n}") for n in range(1, 19)]
    assert nv == sorted(nv) and len(set(nv)) == 18
    assert min(nv) > max(pcie)
    assert link_bandwidth("NV4") == 4 * DEFAULT_BANDWIDTH["NV"]
    assert link_bandwidth("SOC") == link_bandwidth("SYS")


def test_bandwidth_override_keeps_the_order() -> None:
    """An override table merges over the default; one breaking the order or naming a new class is refused."""
    assert bandwidth_table({"NV": 50})["NV"] == 50.0
    with pytest.raises(InputError, match="NV .* must be faster than PIX"):
        bandwidth_table({"NV": 10})
    with pytest.raises(InputError, match="unknown link classes"):
        bandwidth_table({"C2C": 900})
    with pytest.raises(InputError, match="unknown link class"):
        link_bandwidth("NVX")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt", [set(range(8))], id="hybrid cube mesh is one island"
        ),
        pytest.param(
            "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt", [set(range(8))], id="NVSwitch box is one island"
        ),
        pytest.param(
            "rtx3090-8gpu-pcie-node-sys-dualsocket.txt",
            [{i} for i in range(8)],
            id="PCIe-only box is all singletons",
        ),
        pytest.param("titanrtx-2gpu-nv2-bridge.txt", [{0, 1}], id="bridge pair is one island"),
        pytest.param("h100-4gpu-nv18-8nic-allphb-container.txt", [{0, 1, 2, 3}], id="NICs are not GPUs"),
    ],
)
def test_islands(name: str, expected: list[set[int]]) -> None:
    """Islands are maximal NVLink-connected groups of GPUs, sorted."""
    assert [set(i) for i in islands(REAL_TOPOS[name])] == expected


def test_islands_of_two_quads() -> None:
    """Two NV4 quads joined by SYS are two islands."""
    assert islands(blocks(8, 4, "NV4", "SYS")) == (frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7}))


# -- the worked examples of the pick rule
# ---------------------------------------------------------------------------------------------------


def test_adr_8gpu_two_islands_gpu0_busy_picks_the_whole_free_island() -> None:
    """8-GPU NVLink layout, islands 0-3 / 4-7, GPU 0 busy, 4 GPUs -> 4-7 (Slurm's greedy gives 1,2,3,4)."""
    assert pick_devices(blocks(8, 4, "NV4", "SYS"), [1, 2, 3, 4, 5, 6, 7], 4) == (4, 5, 6, 7)


def test_adr_four_rtx3070_two_phb_pairs_gpu0_busy() -> None:
    """4× RTX 3070 as two PHB pairs joined by SYS, 2 GPUs with GPU 0 busy -> 2-3."""
    topo = from_rows("X PHB SYS SYS", "PHB X SYS SYS", "SYS SYS X PHB", "SYS SYS PHB X")
    assert pick_devices(topo, [1, 2, 3], 2) == (2, 3)


def test_adr_two_a100_sxm4_nv4() -> None:
    """2× A100 SXM4 joined by NV4: a 2-GPU job gets both."""
    assert pick_devices(from_rows("X NV4", "NV4 X"), [0, 1], 2) == (0, 1)


# -- behaviour
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topo", "free", "k", "expected"),
    [
        pytest.param(blocks(8, 4, "NV4", "SYS"), range(8), 1, (0,), id="k=1 all free takes the lowest index"),
        pytest.param(
            blocks(8, 4, "NV4", "SYS"),
            [0, 1, 2, 4, 5, 6, 7],
            1,
            (0,),
            id="k=1 prefers an already broken island over a whole one",
        ),
        pytest.param(blocks(8, 2, "NV2", "SYS"), [0, 2, 3, 4, 5], 1, (0,), id="k=1 takes a lone free GPU"),
        pytest.param(blocks(8, 2, "NV2", "SYS"), [1, 2, 3, 4, 5], 2, (2, 3), id="pair inside an island"),
        pytest.param(
            REAL_TOPOS["dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"],
            range(8),
            2,
            (0, 3),
            id="hybrid cube prefers an NV2 pair over NV1",
        ),
        pytest.param(
            REAL_TOPOS["dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"],
            range(8),
            4,
            (0, 1, 2, 3),
            id="hybrid cube quad 0-3 is NV-connected",
        ),
        pytest.param(
            REAL_TOPOS["t4-4gpu-1plus3-sys-node-nolegend.txt"],
            range(4),
            2,
            (1, 2),
            id="T4 1+3 split avoids the lone socket",
        ),
        pytest.param(
            REAL_TOPOS["dgx1-8gpu-topo-mp-pcie-only.txt"],
            [0, 2, 3, 4, 5],
            2,
            (2, 3),
            id="PCIe-only prefers PIX over PHB",
        ),
        pytest.param(
            GpuTopology((0, 1, 2, 3), ()), [3, 1, 2], 2, (1, 2), id="no link data takes the lowest free"
        ),
        pytest.param(
            blocks(16, 8, "NV18", "SYS"),
            range(16),
            9,
            tuple(range(10))[:9],
            id="16 GPUs 2x8 k=9 fills one island and breaks one",
        ),
    ],
)
def test_pick(topo: GpuTopology, free: range | list[int], k: int, expected: tuple[int, ...]) -> None:
    """pick_devices chooses the best-connected free set and agrees with the exhaustive search."""
    assert pick_devices(topo, free, k) == expected
    assert pick_exhaustive(topo, free, k) == expected


@pytest.mark.parametrize(
    ("free", "k", "words"),
    [
        pytest.param([0, 1], 3, "only 2 free", id="more than free is refused"),
        pytest.param([0, 1], 0, "at least 1", id="zero is refused"),
        pytest.param([0, 9], 1, "not on this node", id="unknown GPU index is refused"),
    ],
)
def test_pick_refuses(free: list[int], k: int, words: str) -> None:
    """Impossible requests raise InputError."""
    with pytest.raises(InputError, match=words):
        pick_devices(blocks(4, 2, "NV2", "SYS"), free, k)


# -- fast equals exhaustive
# -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REAL_TOPOS))
def test_every_real_fixture_every_k_all_free(name: str) -> None:
    """On every real fixture, for every k with all GPUs free, the fast pick equals the exhaustive one."""
    topo = REAL_TOPOS[name]
    for k in range(1, len(topo.gpus) + 1):
        assert pick_devices(topo, topo.gpus, k) == pick_exhaustive(topo, topo.gpus, k)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_real_fixtures_random_busy_masks(data: st.DataObject) -> None:
    """Random busy masks and k on the real fixtures: fast pick == exhaustive pick."""
    topo = REAL_TOPOS[data.draw(st.sampled_from(sorted(REAL_TOPOS)))]
    free = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=1, unique=True))
    k = data.draw(st.integers(1, len(free)))
    assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


CLASSES = ["NV1", "NV2", "NV4", "NV6", "NV12", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"]


@st.composite
def random_topology(draw: st.DrawFn) -> GpuTopology:
    n = draw(st.integers(1, 10))
    palette = draw(st.lists(st.sampled_from(CLASSES), min_size=1, max_size=4, unique=True))
    m = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j] = m[j][i] = draw(st.sampled_from(palette))
    return GpuTopology(tuple(range(n)), tuple(tuple(r) for r in m))


@settings(max_examples=400, deadline=None)
@given(random_topology(), st.data())
def test_random_matrices(topo: GpuTopology, data: st.DataObject) -> None:
    """Random symmetric link matrices (up to 10 GPUs, few classes so ties abound): fast == exhaustive."""
    free = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=1, unique=True))
    k = data.draw(st.integers(1, len(free)))
    assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


@pytest.mark.parametrize(
    "topo",
    [blocks(16, 8, "NV18", "SYS"), blocks(16, 16, "NV6", "SYS"), blocks(16, 4, "NV4", "NODE")],
    ids=["2x8 islands", "NVSwitch 16", "4x4 islands"],
)
def test_sixteen_gpus_some_masks(topo: GpuTopology) -> None:
    """16-GPU layouts with a few busy masks: fast == exhaustive."""
    for busy in ((), (0,), (1, 9), (0, 5, 10, 15)):
        free = [g for g in topo.gpus if g not in busy]
        for k in (2, 5, 9, len(free) - 1):
            assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


def _two_cubes() -> GpuTopology:
    """Two DGX-1 V100 hybrid cube-meshes (the real capture's GPU block) joined by SYS: 16 GPUs."""
    cube = REAL_TOPOS["dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"].matrix
    m = tuple(tuple(cube[i % 8][j % 8] if i // 8 == j // 8 else "SYS" for j in range(16)) for i in range(16))
    return GpuTopology(tuple(range(16)), m, source="two cubes")


def _pcie_tree() -> GpuTopology:
    """16 GPUs under PCIe switches: PIX pairs, PXB quads, NODE inside a socket's 8, SYS across."""

    def cls(i: int, j: int) -> str:
        if i == j:
            return "X"
        if i // 2 == j // 2:
            return "PIX"
        if i // 4 == j // 4:
            return "PXB"
        return "NODE" if i // 8 == j // 8 else "SYS"

    return GpuTopology(tuple(range(16)), tuple(tuple(cls(i, j) for j in range(16)) for i in range(16)))


NON_UNIFORM_16 = {
    "two cubes": _two_cubes(),
    "pcie tree": _pcie_tree(),
    "2x8 islands": blocks(16, 8, "NV18", "SYS"),
    "nvswitch 16": blocks(16, 16, "NV6", "SYS"),
    "4x4 islands": blocks(16, 4, "NV4", "NODE"),
}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_sixteen_gpu_non_uniform_layouts_equal_exhaustive(data: st.DataObject) -> None:
    """16-GPU layouts that are not uniform (two cube-meshes joined, a PCIe tree) and the uniform ones, random
    busy masks, k from 2 to free-1 (9-12 included): the fast pick equals the exhaustive search."""
    topo = NON_UNIFORM_16[data.draw(st.sampled_from(sorted(NON_UNIFORM_16)))]
    busy = data.draw(st.sets(st.integers(0, 15), max_size=8))
    free = [g for g in topo.gpus if g not in busy]
    k = data.draw(st.integers(2, len(free) - 1))
    assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


@st.composite
def hierarchical_topology(draw: st.DrawFn) -> GpuTopology:
    """11-13 GPUs with nested groups (a random tree of link classes, fastest innermost), a few pairs
    overridden: groups above the search's group limit and islands that span groups both occur."""
    n = draw(st.integers(11, 13))
    classes = draw(st.lists(st.sampled_from(CLASSES), min_size=2, max_size=4, unique=True))
    classes.sort(key=link_bandwidth, reverse=True)
    cuts = [draw(st.integers(1, n)) for _ in classes]
    m = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            level = next(
                (c for c, size in zip(classes, sorted(cuts), strict=True) if i // size == j // size), None
            )
            m[i][j] = m[j][i] = level or classes[-1]
    for _ in range(draw(st.integers(0, 3))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if i != j:
            m[i][j] = m[j][i] = draw(st.sampled_from(classes))
    return GpuTopology(tuple(range(n)), tuple(tuple(r) for r in m))


@settings(max_examples=150, deadline=None)
@given(hierarchical_topology(), st.data())
def test_hierarchical_matrices_equal_exhaustive(topo: GpuTopology, data: st.DataObject) -> None:
    """Nested link classes (the shape of real boxes) on 11-13 GPUs, random masks and k: fast == exhaustive."""
    free = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=2, unique=True))
    k = data.draw(st.integers(1, len(free)))
    assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


# -- rule (3a): the same local GPUs as the job's other nodes
# ----------------------------------------------------------------


def test_prefer_takes_the_other_nodes_set_when_it_ties() -> None:
    """Two NV4 islands (0-3, 4-7), all free, k=4: without a preference the lowest island; preferring the set
    another node of the job holds (4-7) gives 4-7 — the same rails on every node, at no cost."""
    topo = blocks(8, 4, "NV4", "SYS")
    assert pick_devices(topo, topo.gpus, 4) == (0, 1, 2, 3)
    assert pick_devices(topo, topo.gpus, 4, prefer=[(4, 5, 6, 7)]) == (4, 5, 6, 7)
    assert pick_exhaustive(topo, topo.gpus, 4, prefer=[(4, 5, 6, 7)]) == (4, 5, 6, 7)


def test_prefer_never_costs_bandwidth_or_islands() -> None:
    """A preferred set that is worse on (1)-(3) loses: 0,1,4,5 spans the islands, 4-7 is busy in part."""
    topo = blocks(8, 4, "NV4", "SYS")
    assert pick_devices(topo, topo.gpus, 4, prefer=[(0, 1, 4, 5)]) == (0, 1, 2, 3)
    assert pick_devices(topo, [0, 1, 2, 3, 4, 5, 6], 4, prefer=[(4, 5, 6, 7)]) == (0, 1, 2, 3)
    # the first preferred set that ties wins, in the order given
    assert pick_devices(topo, topo.gpus, 4, prefer=[(0, 1, 4, 5), (4, 5, 6, 7), (0, 1, 2, 3)]) == (4, 5, 6, 7)


def test_prefer_without_link_data_takes_the_preferred_set() -> None:
    """No link data: every set ties on (1)-(3), so a free preferred set wins over the lowest indices."""
    topo = GpuTopology(tuple(range(8)), ())
    assert pick_devices(topo, range(8), 2) == (0, 1)
    assert pick_devices(topo, range(8), 2, prefer=[(6, 7)]) == (6, 7)
    assert pick_exhaustive(topo, range(8), 2, prefer=[(6, 7)]) == (6, 7)
    assert pick_devices(topo, range(6), 2, prefer=[(6, 7)]) == (0, 1)


@settings(max_examples=300, deadline=None)
@given(random_topology(), st.data())
def test_prefer_equals_exhaustive(topo: GpuTopology, data: st.DataObject) -> None:
    """Random matrices (ties abound), free sets, k and preference lists: fast == exhaustive with (3a)."""
    free = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=1, unique=True))
    k = data.draw(st.integers(1, len(free)))
    prefer = data.draw(
        st.lists(st.lists(st.sampled_from(topo.gpus), min_size=1, max_size=k + 1, unique=True), max_size=4)
    )
    assert pick_devices(topo, free, k, prefer=prefer) == pick_exhaustive(topo, free, k, prefer=prefer)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_prefer_equals_exhaustive_on_real_fixtures(data: st.DataObject) -> None:
    """On the real captures, preferring the pick of another free mask (what another node of the job took):
    fast == exhaustive with (3a)."""
    topo = REAL_TOPOS[data.draw(st.sampled_from(sorted(REAL_TOPOS)))]
    free = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=1, unique=True))
    other = data.draw(st.lists(st.sampled_from(topo.gpus), min_size=1, unique=True))
    k = data.draw(st.integers(1, min(len(free), len(other))))
    prefer = [pick_devices(topo, other, k)]
    assert pick_devices(topo, free, k, prefer=prefer) == pick_exhaustive(topo, free, k, prefer=prefer)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_subset_table_agrees_with_pick_exhaustive(family: str) -> None:
    """The fast reference the irregular tests use gives what the plain exhaustive search gives."""
    topo = FAMILIES[family](random.Random(11))
    table = SubsetTable(topo)
    for busy, k in (((), 2), ((3,), 7), ((0, 9), 10), ((1, 2, 12), 4)):
        free = [g for g in topo.gpus if g not in busy]
        assert table.pick(free, k) == pick_exhaustive(topo, free, k)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(FAMILIES)), st.randoms(use_true_random=False), st.data())
def test_sixteen_gpu_irregular_matrices(family: str, rng: random.Random, data: st.DataObject) -> None:
    """Bridged, demoted and random-class 16-GPU matrices (tests/pick_cases.py), any free set and k: the
    search equals the exhaustive reference."""
    topo = FAMILIES[family](rng)
    table = SubsetTable(topo)
    for _ in range(5):
        free = data.draw(st.sets(st.sampled_from(topo.gpus), min_size=3))
        k = data.draw(st.integers(3, len(free)))
        assert pick_devices(topo, free, k) == table.pick(free, k), (topo.matrix, sorted(free), k)


# -- the lanes (9-16 GPUs, slurm_topo/gpu/pick_lanes.py)
# -----------------------------------------------------------------


def _lanes_pick(topo: GpuTopology, free: list[int], k: int) -> tuple[int, ...]:
    """pick_lanes.best alone on ``topo`` (the path pick_devices takes on 9-16 GPUs for 3 <= k < free)."""
    p = pick_module._prepare(topo, None)
    fmask = sum(1 << p.position[g] for g in free)
    whole = [isl for isl in p.islands if isl & fmask == isl and isl & (isl - 1)]
    got = pick_lanes.best(p.weight, sorted(p.position[g] for g in free), k, whole)
    return tuple(g for i, g in enumerate(topo.gpus) if got >> i & 1)


@pytest.mark.parametrize("name", sorted(NON_UNIFORM_16))
def test_lanes_on_regular_layouts(name: str) -> None:
    """The regular 16-GPU layouts (whole tie groups of equal sets, islands deciding among them, every busy
    set leaving whole islands of 2-16 GPUs) through the lanes: equal to the exhaustive reference."""
    topo = NON_UNIFORM_16[name]
    table = SubsetTable(topo)
    rng = random.Random(name)
    for busy in ((), (0,), (1, 9), (0, 5, 10, 15), tuple(rng.sample(range(16), 6))):
        free = [g for g in topo.gpus if g not in busy]
        for k in range(3, len(free)):
            assert _lanes_pick(topo, free, k) == table.pick(free, k), (busy, k)


def _hub(n: int = 16) -> GpuTopology:
    """GPU 0 joined to every other GPU by NV18, the rest by NV1 and PCIe: swapping any member of a set for
    GPU 0 keeps or raises its slowest link and raises its sum, so the best set of every size holds GPU 0."""
    pcie = ("PIX", "PXB", "NODE", "SYS")

    def cls(i: int, j: int) -> str:
        if i == j:
            return "X"
        if min(i, j) == 0:
            return "NV18"
        return "NV1" if (i + j) % 3 == 0 else pcie[(i * j) % 4]

    return GpuTopology(tuple(range(n)), tuple(tuple(cls(i, j) for j in range(n)) for i in range(n)))


def test_hub_gpu_busy() -> None:
    """The GPU the best set of every size holds is busy: the pick is still the exhaustive one, for every k."""
    topo = _hub()
    table = SubsetTable(topo)
    assert all(0 in pick_devices(topo, topo.gpus, k) for k in range(3, 16))
    for busy in ((0,), (0, 1), (0, 3, 6, 9)):
        free = [g for g in topo.gpus if g not in busy]
        for k in range(3, len(free)):
            assert pick_devices(topo, free, k) == table.pick(free, k), (busy, k)


def test_up_to_sixteen_gpus_never_search(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Up to 16 GPUs every pick of 3 <= k < free is the lanes' (a cost that does not depend on the
    matrix): the search and the knapsack are never entered, their tables never made — on the families and
    on every real capture."""

    def refuse(*args: object) -> None:
        raise AssertionError("searched")

    monkeypatch.setattr(pick_module, "_searched", refuse)
    for family in sorted(FAMILIES):
        topo = FAMILIES[family](random.Random(20))
        table = SubsetTable(topo)
        for k in (3, 8, 9, 15):
            assert pick_devices(topo, topo.gpus, k) == table.pick(topo.gpus, k)
        assert "adjacency" not in vars(pick_module._prepare(topo, None))
    for topo in REAL_TOPOS.values():
        for k in range(3, len(topo.gpus)):
            assert pick_devices(topo, topo.gpus[1:], k) == pick_exhaustive(topo, topo.gpus[1:], k)
        assert "adjacency" not in vars(pick_module._prepare(topo, None))


@settings(max_examples=25, deadline=None)
@given(st.integers(17, 18), st.data())
def test_more_than_sixteen_gpus_search_exactly(n: int, data: st.DataObject) -> None:
    """Past 16 GPUs the lanes would be too many: the branch and bound (steps 1, 2, 4) answers, equal to the
    exhaustive search (small k keeps the reference quick)."""
    palette = data.draw(st.lists(st.sampled_from(CLASSES), min_size=1, max_size=3, unique=True))
    m = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j] = m[j][i] = data.draw(st.sampled_from(palette))
    topo = GpuTopology(tuple(range(n)), tuple(tuple(r) for r in m))
    free = data.draw(st.sets(st.sampled_from(topo.gpus), min_size=5))
    k = data.draw(st.integers(3, 4))
    assert pick_devices(topo, free, k) == pick_exhaustive(topo, free, k)


@st.composite
def mid_size_topology(draw: st.DrawFn) -> GpuTopology:
    """9-15 GPUs, two to four link classes (ties abound), NVLink islands of any shape."""
    n = draw(st.integers(9, 15))
    palette = draw(st.lists(st.sampled_from(CLASSES), min_size=2, max_size=4, unique=True))
    m = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j] = m[j][i] = draw(st.sampled_from(palette))
    return GpuTopology(tuple(range(n)), tuple(tuple(r) for r in m))


@settings(max_examples=60, deadline=None)
@given(mid_size_topology(), st.data())
def test_nine_to_fifteen_gpus_equal_exhaustive(topo: GpuTopology, data: st.DataObject) -> None:
    """Between 9 and 15 GPUs (fewer lanes than 2^16, fewer rows than a chunk): fast == exhaustive."""
    table = SubsetTable(topo)
    for _ in range(4):
        free = data.draw(st.sets(st.sampled_from(topo.gpus), min_size=3))
        k = data.draw(st.integers(3, len(free)))
        assert pick_devices(topo, free, k) == table.pick(free, k), (topo.matrix, sorted(free), k)


@st.composite
def islands_topology(draw: st.DrawFn) -> GpuTopology:
    """9-16 GPUs cut into NVLink islands of random sizes (1-8, in any GPU order), each island's pairs of
    one or two NV classes, pairs between islands of one to three PCIe classes: islands of every size are
    whole, broken or busy, and sums tie often, so rule (3) decides (not one of the benchmark's families)."""
    n = draw(st.integers(9, 16))
    order = draw(st.permutations(range(n)))
    home: dict[int, int] = {}
    start = 0
    while start < n:
        size = draw(st.integers(1, 8))
        for g in order[start : start + size]:
            home[g] = start
        start += size
    inside = draw(st.lists(st.sampled_from(CLASSES[:6]), min_size=1, max_size=2, unique=True))
    between = draw(st.lists(st.sampled_from(CLASSES[6:]), min_size=1, max_size=3, unique=True))
    m = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            m[i][j] = m[j][i] = draw(st.sampled_from(inside if home[i] == home[j] else between))
    return GpuTopology(tuple(range(n)), tuple(tuple(r) for r in m))


@settings(max_examples=80, deadline=None)
@given(islands_topology(), st.data())
def test_islands_of_every_size_equal_exhaustive(topo: GpuTopology, data: st.DataObject) -> None:
    """Whole islands of 2-8 GPUs in any index order (the lanes' island field: a -1 from the first row of
    an island in a set, a +1 from its last when all of it is there), any free set and k: fast ==
    exhaustive."""
    table = SubsetTable(topo)
    for _ in range(4):
        free = data.draw(st.sets(st.sampled_from(topo.gpus), min_size=3))
        k = data.draw(st.integers(3, len(free)))
        assert pick_devices(topo, free, k) == table.pick(free, k), (topo.matrix, sorted(free), k)


def test_table_with_a_bandwidth_override() -> None:
    """A bandwidth table changes the levels and sums the lanes are built from: still exhaustive."""
    topo = FAMILIES["bridged"](random.Random(5))
    bw = {"NV": 30.0, "PIX": 29.0, "SYS": 1.0}
    for busy, k in (((), 3), ((2, 7, 11, 12), 9), ((0, 1, 4, 5, 8, 9), 6)):
        free = [g for g in topo.gpus if g not in busy]
        assert pick_devices(topo, free, k, bw) == pick_exhaustive(topo, free, k, bw)


def test_wide_lanes_when_the_fields_need_them() -> None:
    """Bandwidths whose differences have a gcd of 1 MB/s and many link levels between the bounds: the
    fields outgrow one 30-bit digit and the lanes take two; the picks are still the exhaustive ones."""
    topo = FAMILIES["random, all classes"](random.Random(3))
    bw = {"NV": 25.001, "PIX": 19.999, "PXB": 15.003, "PHB": 12.007, "NODE": 9.011, "SYS": 5.013}
    table = pick_module._prepare(topo, bw)
    present = sorted({w for row in table.weight for w in row if w}, reverse=True)
    assert (120 * (present[0] - present[-1])).bit_length() + 5 + 1 > 30  # the sum field alone is wide
    rng = random.Random(3)
    for busy in ((), tuple(rng.sample(range(16), 3))):
        free = [g for g in topo.gpus if g not in busy]
        for k in (3, 7, 8, 12):
            assert pick_devices(topo, free, k, bw) == pick_exhaustive(topo, free, k, bw), (busy, k)


def test_nodes_alike_share_their_answers() -> None:
    """Two topology objects with the same link matrix (a job's nodes read from gres.conf) share one
    prepared matrix and its remembered picks; a different matrix gets its own."""
    a, b = (FAMILIES["demoted"](random.Random(3)) for _ in range(2))
    other = FAMILIES["demoted"](random.Random(4))
    assert a is not b and a.matrix == b.matrix and a.matrix != other.matrix
    prepared = pick_module._prepare(a, None)
    assert pick_module._prepare(b, None) is prepared
    assert pick_module._prepare(other, None) is not prepared
    first = pick_devices(a, a.gpus, 8)
    assert prepared.picked[(0xFFFF, 8)] == sum(1 << g for g in first)
    assert pick_devices(b, b.gpus, 8) == first == SubsetTable(b).pick(b.gpus, 8)


def test_a_freed_topology_s_address_gets_its_own_pick() -> None:
    """Make, pick on and free 16-GPU topologies of different families many times (the cache by object,
    which holds each object it is keyed by, dropped after each pick, as when it fills): CPython hands a new
    topology the freed one's address (``id``); every pick is still that matrix's own, so no cache is keyed
    by a bare ``id()``."""
    reused, last = 0, None
    for i in range(60):
        family = sorted(FAMILIES)[i % len(FAMILIES)]
        topo = FAMILIES[family](random.Random(i))
        reused += id(topo) == last
        want = SubsetTable(topo).pick(topo.gpus, 6)
        assert pick_devices(topo, topo.gpus, 6) == want, (family, i)
        pick_module._CACHE.clear()
        forget_topologies()  # the per-topology memo (islands) holds its topology the same way
        last = id(topo)
        del topo
    assert reused, "no address was reused; the test proves nothing here"


def test_lanes_refuse_what_they_do_not_answer() -> None:
    """pick_lanes.best takes 3 <= k < rows <= 16 only (pick_devices answers the rest another way)."""
    topo = FAMILIES["bridged"](random.Random(1))
    p = pick_module._prepare(topo, None)
    for rows, k in ((list(range(16)), 2), (list(range(16)), 16), (list(range(5)), 5)):
        with pytest.raises(ValueError, match="pick_lanes"):
            pick_lanes.best(p.weight, rows, k, [])


def _floor_and_lanes(topo: GpuTopology, free: list[int], k: int) -> tuple[int, int, int]:
    """Run pick_lanes.best on ``topo`` and read what it works with: the floor the tournament drops integers
    by, and the lane the build made for the greedy set (its chunk and lane read back by position), and the
    lane width's mask. The real functions run; they are only wrapped to see their arguments."""
    p = pick_module._prepare(topo, None)
    fmask = sum(1 << p.position[g] for g in free)
    whole = [isl for isl in p.islands if isl & fmask == isl and isl & (isl - 1)]
    seen: dict[str, object] = {}
    real = (pick_lanes._greedy, pick_lanes._peel, pick_lanes._tournament)

    def greedy(*args: object) -> object:
        seen["greedy"] = got = real[0](*args)  # type: ignore[arg-type]
        return got

    def peel(*args: object) -> object:
        seen["peel"] = got = real[1](*args)  # type: ignore[arg-type]
        return got

    def tournament(*args: object) -> object:
        seen["tournament"] = args
        return real[2](*args)  # type: ignore[arg-type]

    pick_lanes._greedy, pick_lanes._peel, pick_lanes._tournament = greedy, peel, tournament  # type: ignore[assignment]
    try:
        pick_lanes.best(p.weight, sorted(p.position[g] for g in free), k, whole)
    finally:
        pick_lanes._greedy, pick_lanes._peel, pick_lanes._tournament = real
    if "tournament" not in seen:  # only the greedy set was left after the peel
        return 0, 0, 0
    lanes, _, lay, c, _, floor = seen["tournament"]  # type: ignore[misc]
    _, found = seen["greedy"]  # type: ignore[misc]
    keep = seen["peel"]
    at = sorted(keep.index(x) for x in found)  # type: ignore[attr-defined]
    lane = sum(1 << i for i in at if i < c)
    chunk = sum(1 << (i - c) for i in at if i >= c)
    return floor, lanes[chunk] >> (lane * lay.width) & lay.lane, lay.lane


@settings(max_examples=60, deadline=None)
@given(islands_topology(), st.data())
def test_lanes_floor_is_the_greedy_set_s_own_lane(topo: GpuTopology, data: st.DataObject) -> None:
    """The floor the tournament drops integers by (computed from the greedy set alone, islands included) is
    exactly the lane the build makes for that set, so the best lane, at least as large, is never dropped;
    and the pick is still the exhaustive one."""
    table = SubsetTable(topo)
    for _ in range(3):
        free = sorted(data.draw(st.sets(st.sampled_from(topo.gpus), min_size=4)))
        k = data.draw(st.integers(3, len(free) - 1))
        floor, made, _ = _floor_and_lanes(topo, free, k)
        assert floor == made, (topo.matrix, free, k)
        assert pick_devices(topo, free, k) == table.pick(free, k), (topo.matrix, free, k)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_lanes_floor_on_the_families(family: str) -> None:
    """The same on each benchmark family, all free and every k: the floor is the greedy set's own lane."""
    for seed in range(3):
        topo = FAMILIES[family](random.Random(seed))
        for k in range(3, 16):
            floor, made, lane = _floor_and_lanes(topo, list(topo.gpus), k)
            assert floor == made and floor <= lane, (family, seed, k)


def test_a_link_x_between_two_gpus_is_refused_in_one_line() -> None:
    """A link class X means a GPU to itself; between two GPUs it is a broken matrix, refused with the GPU
    named (it was a KeyError)."""
    topo = GpuTopology((0, 1, 2), (("X", "NV4", "SYS"), ("NV4", "X", "X"), ("SYS", "X", "X")), source="bad")
    with pytest.raises(InputError, match=r"bad: GPU 1 has a link X to another GPU"):
        pick_devices(topo, [0, 1, 2], 2)
