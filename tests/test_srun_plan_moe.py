"""gpulayer-srun with expert (EP) and context (CP) parallelism: the rank order and the groups against an
independent reference written here from Megatron-LM's published algorithm
(``megatron/core/parallel_state.py``:
``initialize_model_parallel`` builds a dense ``RankGenerator(tp, ep=1, dp, pp, cp)`` and an expert
``RankGenerator(etp=tp, ep, edp=world/(tp·ep·pp), pp, cp=1)`` over the same order; a group of dimension X
is the ranks that agree on every other coordinate, ``generate_masked_orthogonal_rank_groups``), Megatron's
refusals, and the placement: EP groups inside one NVLink island or domain when one holds them, one warning
line otherwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fakes import ScriptedRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo import srun
from slurm_topo.core.errors import InputError
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.plumbing.srun_shim import bind
from slurm_topo.srun.cli import build_plan

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOPO = parse_topo_matrix((FIXTURES / "synthetic" / "islands-2x4-nv18.txt").read_text())  # islands 0-3, 4-7
ISLANDS = (frozenset(range(4)), frozenset(range(4, 8)))
NODES = ("gs1", "gs2", "gs3", "gs4")


def alloc(nodes: Mapping[str, Sequence[int]]) -> srun.Allocation:
    return srun.Allocation("7", tuple(nodes), {n: tuple(sorted(g)) for n, g in nodes.items()})


def whole(count: int) -> srun.Allocation:
    return alloc({n: range(8) for n in NODES[:count]})


# ---- the reference: Megatron-LM's rank groups, written from the published algorithm


def megatron_groups(order: str, sizes: Mapping[str, int], dim: str) -> list[list[int]]:
    """The groups of ``dim`` of a RankGenerator with ``sizes`` over ``order`` (fastest first; a dimension
    missing from the order is appended, as RankGenerator does for size 1): every rank's coordinate in each
    dimension is ``rank // stride % size``; a group holds the ranks that agree on all but ``dim``, in the
    order of their ``dim`` coordinate."""
    names = order.split("-")
    names += [n for n in ("tp", "cp", "ep", "dp", "pp") if n not in names]
    world = 1
    for n in names:
        world *= sizes[n]
    out: dict[tuple[int, ...], dict[int, int]] = {}
    for rank in range(world):
        coord, stride = {}, 1
        for n in names:
            coord[n] = rank // stride % sizes[n]
            stride *= sizes[n]
        key = tuple(coord[n] for n in names if n != dim)
        out.setdefault(key, {})[coord[dim]] = rank
    return [[g[i] for i in sorted(g)] for g in out.values()]


def reference(order: str, tp: int, cp: int, ep: int, dp: int, pp: int) -> dict[str, list[list[int]]]:
    world = tp * cp * dp * pp
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    expert = {"tp": tp, "cp": 1, "ep": ep, "dp": world // (tp * ep * pp), "pp": pp}
    out = {d: megatron_groups(order, dense, d) for d in ("tp", "cp", "dp", "pp")}
    out["ep"] = megatron_groups(order, expert, "ep")
    return out


def test_the_reference_reproduces_megatron_s_documented_example() -> None:
    """parallel_state.py's docstring: 16 GPUs, tp 2, pp 4 (order tp-dp-pp): 8 data-parallel groups
    [g0, g2], [g1, g3], …, 8 TP groups [g0, g1], …, 4 pipeline groups [g0, g4, g8, g12], …"""
    groups = reference("tp-cp-ep-dp-pp", 2, 1, 1, 2, 4)
    assert sorted(groups["dp"]) == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
    assert sorted(groups["tp"]) == [[2 * i, 2 * i + 1] for i in range(8)]
    assert sorted(groups["pp"]) == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    # and its context-parallel example: 8 GPUs, tp 4, cp 2: CP groups [g0, g4], [g1, g5], [g2, g6], [g3, g7]
    assert sorted(reference("tp-cp-ep-dp-pp", 4, 2, 1, 1, 1)["cp"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]


@st.composite
def moe_requests(draw: st.DrawFn) -> dict[str, object]:
    """Sizes that fit 1-4 whole 8-GPU nodes (link data or not, NVLink domains or not), with EP dividing
    cp × dp, in Megatron's default order or the pp-not-last order (then ep = cp, as Megatron requires)."""
    nodes = draw(st.integers(1, 4))
    tp = draw(st.sampled_from((1, 2, 4)))
    cp = draw(st.sampled_from((1, 2, 4)))
    pp = draw(st.sampled_from((1, 2)))
    room = nodes * 8 // (tp * cp * pp)
    if room < 1:
        tp, cp, pp, room = 1, 1, 1, nodes * 8
    dp = draw(st.integers(1, room))
    order = draw(st.sampled_from(("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")))
    if order.endswith("dp") and pp > 1:
        ep = cp
    else:
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (cp * dp) % e == 0]))
    a = whole(nodes)
    return {
        "alloc": a,
        "tp": tp,
        "cp": cp,
        "ep": ep,
        "pp": pp,
        "dp": dp,
        "order": order,
        "topologies": dict.fromkeys(a.nodes, TOPO) if draw(st.booleans()) else {},
        "domains": {n: "nvl_a" for n in a.nodes} if draw(st.booleans()) else None,
        "local_indices": draw(st.booleans()),
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moe_requests())
def test_every_group_of_the_plan_is_megatron_s(req: dict[str, object]) -> None:
    plan = srun.plan_srun(**req)  # type: ignore[arg-type]
    tp, cp, ep, dp, pp = (int(req[k]) for k in ("tp", "cp", "ep", "dp", "pp"))  # type: ignore[call-overload]
    world = tp * cp * dp * pp
    rows = plan.rows
    assert [r.rank for r in rows] == list(range(world))
    ref = reference(str(req["order"]), tp, cp, ep, dp, pp)
    for group in ref["tp"]:  # one TP group: one node, one CUDA_VISIBLE_DEVICES, LOCAL_RANK = its position
        assert len({(rows[r].node, rows[r].cuda_visible_devices) for r in group}) == 1
        assert [rows[r].local_rank for r in group] == list(range(tp))
    for dim, coord in (("cp", "cp"), ("pp", "pp"), ("ep", "ep")):
        for group in ref[dim]:
            assert [getattr(rows[r], coord) for r in group] == list(range(len(group)))
    for group in ref["ep"]:  # the ranks of one EP group share (tp, pp, edp), the plan's group key
        assert len({(rows[r].tp, rows[r].pp, rows[r].edp) for r in group}) == 1
    for group in ref["dp"]:
        assert [rows[r].dp for r in group] == list(range(dp))
    used = [(r.node, g) for r in rows for g in r.gpus]
    assert len(used) == len(set(used)) == world  # one GPU per rank, none twice
    for r in rows:  # the shim binds each rank as its row says
        got = bind({**plan.env, "SLURM_PROCID": str(r.rank), "SLURMD_NODENAME": r.node})
        assert (got["CUDA_VISIBLE_DEVICES"], got["LOCAL_RANK"]) == (r.cuda_visible_devices, str(r.tp))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4),
    st.sampled_from((1, 2, 4)),
    st.sampled_from((2, 4, 8)),
    st.sampled_from((1, 2)),
    st.booleans(),
)
def test_ep_groups_sit_in_one_island_when_one_holds_them(
    nodes: int, tp: int, ep: int, pp: int, domains: bool
) -> None:
    """Whole 8-GPU nodes of two 4-GPU islands: an EP group of tp × ep ≤ 4 GPUs is inside one island, with no
    warning; a larger one is on one node (≤ 8) or in one NVLink domain, else the one warning line."""
    world = nodes * 8
    if world % (tp * pp) or (world // (tp * pp)) % ep:
        return
    a = whole(nodes)
    doms = dict.fromkeys(a.nodes, "nvl_x") if domains else None
    plan = srun.plan_srun(a, tp=tp, pp=pp, ep=ep, topologies=dict.fromkeys(a.nodes, TOPO), domains=doms)
    groups: dict[tuple[int, int], list[srun.RankRow]] = {}
    for r in plan.rows:
        groups.setdefault((r.pp, r.edp), []).append(r)
    warned = [w for w in plan.warnings if "expert-parallel group" in w]
    size = tp * ep
    for members in groups.values():
        nodes_of = {r.node for r in members}
        gpus = {g for r in members for g in r.gpus}
        assert len({(r.node, g) for r in members for g in r.gpus}) == size
        if size <= 4:
            assert len(nodes_of) == 1 and any(gpus <= i for i in ISLANDS), members
            assert {r.ep_level for r in members} == {"gpu" if size == 1 else "island"}
        elif size <= 8:
            assert len(nodes_of) == 1 and {r.ep_level for r in members} == {"node"}
        elif domains:
            assert {r.ep_level for r in members} == {"nvl_x"}
    if size <= 4 or (size > 8 and domains):
        assert not warned, plan.warnings
    else:
        assert len(warned) == 1 and warned[0].startswith(f"warning: --ep {ep}: "), plan.warnings


def test_an_ep_group_of_two_nodes_in_two_domains_is_named_in_the_warning() -> None:
    a = whole(2)
    plan = srun.plan_srun(
        a, tp=1, ep=16, topologies=dict.fromkeys(a.nodes, TOPO), domains={"gs1": "nvl_a", "gs2": "nvl_b"}
    )
    (w,) = [w for w in plan.warnings if "expert-parallel" in w]
    assert "1 of 1 expert-parallel group of 16 GPUs" in w and "gs[1-2]" in w
    assert {r.ep_level for r in plan.rows} == {"-"}  # no common switch given


def test_ep_stages_go_to_different_nodes_before_an_ep_group_is_split() -> None:
    """tp 1, ep 8, pp 2 on two 8-GPU nodes: each stage's EP group on one node (the all-to-all on NVLink);
    the pipeline hop crosses the network instead."""
    a = whole(2)
    plan = srun.plan_srun(a, tp=1, pp=2, ep=8, topologies=dict.fromkeys(a.nodes, TOPO))
    by_stage = {s: {r.node for r in plan.rows if r.pp == s} for s in (0, 1)}
    assert by_stage == {0: {"gs1"}, 1: {"gs2"}}


def test_cp_groups_are_placed_together_too() -> None:
    a = whole(2)
    plan = srun.plan_srun(a, tp=2, cp=2, topologies=dict.fromkeys(a.nodes, TOPO))
    groups: dict[tuple[int, int, int], set[int]] = {}
    for r in plan.rows:
        groups.setdefault((r.tp, r.dp, r.pp), set()).update(r.gpus)
    for key, gpus in groups.items():
        assert any(gpus <= i for i in ISLANDS), (key, gpus)
    assert "tp 2 × cp 2 × pp 1 × dp 4" in plan.summary


# ---- sizes and refusals, as Megatron-LM refuses


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tp": 1, "ep": 3}, "--ep 3 does not divide --cp 1 × --dp 16 = 16"),
        ({"tp": 2, "cp": 2, "ep": 8, "dp": 2}, "must divide by tp × ep × pp = 16"),
        ({"tp": 1, "cp": 2, "order": "tp-pp-dp"}, "--cp 2 but --order tp-pp-dp has no cp"),
        ({"tp": 1, "ep": 2, "order": "tp-dp-pp"}, "has no ep"),
        ({"tp": 1, "ep": 2, "order": "ep-tp-dp-pp"}, "put tp first"),
        ({"tp": 1, "pp": 2, "ep": 2, "order": "tp-cp-ep-pp-dp"}, "does not end with pp"),
        ({"tp": 1, "cp": 0}, "--cp 0: must be at least 1"),
        ({"tp": 1, "ep": 0}, "--ep 0: must be at least 1"),
        ({"tp": 4, "cp": 3}, "--tp 4 × --pp 1 × --cp 3 = 12 does not divide"),
        ({"tp": 4, "cp": 2, "dp": 3}, "--tp 4 × --pp 1 × --cp 2 × --dp 3 = 24 ranks, more than the 16 tasks"),
    ],
)
def test_megatron_s_refusals(kwargs: dict[str, object], message: str) -> None:
    a = whole(2)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        srun.plan_srun(a, ntasks=16, topologies=dict.fromkeys(a.nodes, TOPO), **kwargs)  # type: ignore[arg-type]


def test_pp_not_last_is_taken_when_ep_equals_cp() -> None:
    a = whole(2)
    plan = srun.plan_srun(
        a, tp=1, pp=2, cp=2, ep=2, order="tp-cp-ep-pp-dp", topologies=dict.fromkeys(a.nodes, TOPO)
    )
    assert len(plan.rows) == 16 and not [w for w in plan.warnings if "expert" in w]


def test_without_ep_and_cp_the_plan_has_no_moe_columns() -> None:
    a = whole(1)
    text = srun.format_plan(srun.plan_srun(a, tp=4, topologies={"gs1": TOPO}))
    assert " ep " not in text.splitlines()[2] and "experts" not in text


def test_the_table_shows_cp_ep_edp_and_the_ep_group_level() -> None:
    a = whole(1)
    plan = srun.plan_srun(a, tp=1, cp=2, ep=2, topologies={"gs1": TOPO})
    lines = srun.format_plan(plan).splitlines()
    assert "experts: ep 2 × edp 4" in lines[0]
    assert lines[2].split()[-4:] == ["cp", "ep", "edp", "ep_group"]
    assert lines[4].split()[-4:] == ["1", "1", "0", "island"]  # rank 1: cp 1, ep 1, edp 0


def test_blocks_gathered_across_nodes_when_no_node_holds_one() -> None:
    """ep 3 of 2-GPU TP groups: a block of 6 GPUs on each node of 6; ep 4: blocks of 8 GPUs, more than a
    node holds, gathered from TP groups of one node and the next, with the warning; too many ranks
    for the GPUs is the one line of the plan without EP, which counts cp × dp groups."""
    a = alloc({n: range(6) for n in NODES[:3]})
    plan = srun.plan_srun(a, tp=2, ep=3, dp=9, topologies=dict.fromkeys(a.nodes, TOPO))
    assert len({(r.node, g) for r in plan.rows for g in r.gpus}) == 18
    # 3 TP groups of 2 per EP group: one node each, but 6 GPUs span the two islands of 4: warned
    assert all(len({r.node for r in plan.rows if r.edp == e}) == 1 for e in range(3))
    assert "3 of 3 expert-parallel groups of 6 GPUs" in "".join(plan.warnings)
    plan = srun.plan_srun(a, tp=2, ep=4, dp=8, topologies=dict.fromkeys(a.nodes, TOPO))
    assert len([w for w in plan.warnings if "expert-parallel" in w]) == 1
    with pytest.raises(InputError, match=r"10 TP groups \(--pp 1 × --dp 10\) of 2 GPUs do not fit"):
        srun.plan_srun(a, tp=2, cp=2, ep=2, dp=5, topologies=dict.fromkeys(a.nodes, TOPO))


def test_tasks_per_node_cap_the_blocks_a_node_takes() -> None:
    """Slurm gave each node 6 tasks: each takes one block of 4 and two single TP groups, which make the third
    EP group across the two nodes (warned); no node runs more ranks than its tasks."""
    a = whole(2)
    plan = srun.plan_srun(
        a, tp=1, ep=4, dp=12, topologies=dict.fromkeys(a.nodes, TOPO), tasks_per_node={"gs1": 6, "gs2": 6}
    )
    per_node = {n: sum(1 for r in plan.rows if r.node == n) for n in a.nodes}
    assert per_node == {"gs1": 6, "gs2": 6}
    spans = [e for e in range(3) if len({r.node for r in plan.rows if r.edp == e}) > 1]
    assert len(spans) == 1 and "1 of 3 expert-parallel groups of 4 GPUs" in "".join(plan.warnings)


def test_without_link_data_blocks_take_the_lowest_indices_and_are_not_warned() -> None:
    """No link data: every set ties, so a block is one an earlier node took where it is free (the same GPUs:
    gs2 takes gs1's 1,3,5 first), else the lowest free indices; islands are unknown, so an EP group on one
    node is at level node and not warned about (the no-link-data warning says it)."""
    a = alloc({"gs1": (1, 3, 5, 7, 8, 9), "gs2": (0, 1, 2, 3, 4, 5)})
    plan = srun.plan_srun(a, tp=1, ep=3, dp=12)
    by_group = {e: sorted((r.node, r.gpus[0]) for r in plan.rows if r.edp == e) for e in range(4)}
    assert by_group[0] == [("gs1", 1), ("gs1", 3), ("gs1", 5)]
    assert by_group[2] == [("gs2", 1), ("gs2", 3), ("gs2", 5)]
    assert by_group[3] == [("gs2", 0), ("gs2", 2), ("gs2", 4)]
    assert {r.ep_level for r in plan.rows} == {"node"}
    assert [w for w in plan.warnings if "expert" in w] == [] and "no GPU link data" in plan.warnings[0]


def test_every_node_takes_the_blocks_the_first_node_took() -> None:
    """The same local GPUs for EP group k of every node (one rail each on a rail-optimised fabric)."""
    a = whole(3)
    plan = srun.plan_srun(a, tp=1, ep=4, topologies=dict.fromkeys(a.nodes, TOPO))
    sets = {}
    for r in plan.rows:
        sets.setdefault((r.node, r.edp), set()).add(r.gpus[0])
    assert sorted(map(sorted, sets.values())) == [[0, 1, 2, 3]] * 3 + [[4, 5, 6, 7]] * 3


def test_pp_not_last_makes_the_cp_groups_the_ep_groups() -> None:
    """tp-cp-ep-pp-dp with ep = cp: Megatron's expert groups are the CP groups (edp = dp)."""
    a = whole(2)
    plan = srun.plan_srun(
        a, tp=2, pp=2, cp=2, ep=2, order="tp-cp-ep-pp-dp", topologies=dict.fromkeys(a.nodes, TOPO)
    )
    for r in plan.rows:
        assert (r.ep, r.edp) == (r.cp, r.dp)


# ---- the command line


CAPTURE = FIXTURES / "synthetic" / "islands-2x4-nv18.txt"
JOB = """JobId=42 JobName=train
   UserId=u(1000) GroupId=u(1000) MCS_label=N/A
   NodeList=gs[1-2] BatchHost=gs1
     Nodes=gs[1-2] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
"""


def test_the_command_line_takes_ep_and_cp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "text")
    runner = ScriptedRunner(
        {
            "scontrol show job": JOB,
            "scontrol show topology": "SwitchName=s Level=0 LinkSpeed=1 Nodes=gs[1-2]\n",
            "scontrol show config": f"SLURM_CONF = {tmp_path / 'slurm.conf'}\nSLURM_VERSION = 24.11.1\n",
        }
    )
    argv = ["--tp", "1", "--ep", "4", "--cp", "2", "--topology", str(CAPTURE), "--", "python", "t.py"]
    plan, args = build_plan(argv, {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "16"}, runner)
    assert (args.ep, args.cp) == (4, 2)
    assert "tp 1 × cp 2 × pp 1 × dp 8; experts: ep 4 × edp 4" in plan.summary
    assert {r.ep_level for r in plan.rows} == {"island"}
