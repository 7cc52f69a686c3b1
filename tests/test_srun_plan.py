"""gpulayer-srun's pure plan (``slurm_topo.srun.plan``): the invariants every plan keeps (hypothesis), the
rank order of docs/gpulayer-srun.md, and the edges the plan tests in tests/test_srun.py leave out."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo import srun
from slurm_topo.access.text import parse_scontrol_topology
from slurm_topo.core.errors import InputError
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.plumbing.srun_shim import bind
from slurm_topo.srun.plan import numbers, parse_order

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOPO = parse_topo_matrix((FIXTURES / "synthetic" / "islands-2x4-nv18.txt").read_text())  # islands 0-3, 4-7
PCIE = parse_topo_matrix(
    (FIXTURES / "real" / "topo" / "rtx3090-8gpu-pcie-node-sys-dualsocket.txt").read_text()
)
TREE = parse_scontrol_topology(
    "SwitchName=root Level=2 LinkSpeed=1 Nodes=gs[1-4] Switches=zone\n"
    "SwitchName=zone Level=1 LinkSpeed=1 Nodes=gs[1-4] Switches=leaf1,leaf2\n"
    "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gs[1-2]\n"
    "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gs[3-4]\n"
)


def alloc(nodes: Mapping[str, Sequence[int]], job: str = "42") -> srun.Allocation:
    return srun.Allocation(job, tuple(nodes), {n: tuple(sorted(g)) for n, g in nodes.items()})


# ---- invariants of every plan


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, object]:
    """A valid request: nodes with any GPUs of 0-7 that each hold one TP group, sizes that fit, with or
    without link data, domains and a switch tree, in any rank order."""
    tp = draw(st.sampled_from((1, 2, 4)))
    g = draw(st.sampled_from((1, 2)))
    per_group = tp * g
    names = ["gs1", "gs2", "gs3", "gs4"][: draw(st.integers(1, 4))]
    gpus = {
        n: draw(st.lists(st.integers(0, 7), min_size=per_group, max_size=8, unique=True).map(sorted))
        for n in names
    }
    capacity = sum(len(v) // per_group for v in gpus.values())  # disjoint groups of per_group per node
    pp = draw(st.integers(1, min(3, capacity)))
    dp = draw(st.integers(1, capacity // pp))
    linked = {n: TOPO for n in names if draw(st.booleans())}
    domains = {n: f"nvl_{draw(st.sampled_from('ab'))}" for n in names} if draw(st.booleans()) else None
    order = draw(
        st.sampled_from(
            ["tp-cp-ep-dp-pp", *("-".join(p) for p in itertools.permutations("tp pp dp".split()))]
        )
    )
    return {
        "alloc": alloc(gpus),
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "gpus_per_task": g,
        "order": order,
        "topologies": linked,
        "tree": TREE if draw(st.booleans()) else None,
        "domains": domains,
        "local_indices": draw(st.booleans()),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_every_plan_places_each_rank_once_on_its_own_allocated_gpus(req: dict[str, object]) -> None:
    a: srun.Allocation = req["alloc"]  # type: ignore[assignment]
    tp, pp, dp, g = (int(req[k]) for k in ("tp", "pp", "dp", "gpus_per_task"))  # type: ignore[call-overload]
    plan = srun.plan_srun(**req)  # type: ignore[arg-type]
    world = tp * pp * dp
    assert [r.rank for r in plan.rows] == list(range(world))
    assert plan.hostfile_lines == tuple(r.node for r in plan.rows)
    assert plan.argv[:5] == ("srun", "-m", "arbitrary", "-n", str(world))
    assert sorted((r.tp, r.pp, r.dp) for r in plan.rows) == sorted(
        itertools.product(range(tp), range(pp), range(dp))
    )
    # the order names the dimensions fastest first: rank = c0 + n0·(c1 + n1·(c2 + …))
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1}
    dims = str(req["order"]).split("-")
    for r in plan.rows:
        coord = {"tp": r.tp, "pp": r.pp, "dp": r.dp, "cp": 0, "ep": 0}
        rank = 0
        for d in reversed(dims):
            rank = rank * sizes[d] + coord[d]
        assert rank == r.rank
    groups: dict[tuple[int, int], list[srun.RankRow]] = {}
    for r in plan.rows:
        groups.setdefault((r.pp, r.dp), []).append(r)
    on_node: dict[str, set[int]] = {}
    for members in groups.values():
        members.sort(key=lambda r: r.tp)
        node = members[0].node
        assert {r.node for r in members} == {node} and {r.cuda_visible_devices for r in members} == {
            members[0].cuda_visible_devices
        }
        assert [r.local_rank for r in members] == list(range(tp))
        own = [x for r in members for x in r.gpus]  # TP rank i owns entries i·g … i·g+g-1
        assert all(len(r.gpus) == g for r in members) and len(set(own)) == tp * g
        assert set(own) <= set(a.gpus[node]) and not set(own) & on_node.get(node, set())
        on_node.setdefault(node, set()).update(own)
        space = sorted(a.gpus[node]) if req["local_indices"] else list(range(8))
        assert [space[int(i)] for i in members[0].cuda_visible_devices.split(",")] == own
    # the shim, given only the plan's environment, binds every rank as its row says
    for r in plan.rows:
        got = bind({**plan.env, "SLURM_PROCID": str(r.rank), "SLURMD_NODENAME": r.node})
        assert got == {
            "CUDA_VISIBLE_DEVICES": r.cuda_visible_devices,
            "LOCAL_RANK": str(r.tp),
            "LOCAL_WORLD_SIZE": str(tp),
            "RANK": str(r.rank),
            "WORLD_SIZE": str(world),
        }


@pytest.mark.parametrize(
    "order, first_ranks",
    [
        # docs, TP 8 PP 2 DP 2: ranks 0-7 (pp 0, dp 0), 8-15 (pp 0, dp 1), 16-23 (pp 1, dp 0), 24-31 (…)
        ("tp-cp-ep-dp-pp", [(0, 0), (0, 1), (1, 0), (1, 1)]),
        # ranks 0-7 (pp 0, dp 0), 8-15 (pp 1, dp 0), 16-23 (pp 0, dp 1), …
        ("tp-pp-dp", [(0, 0), (1, 0), (0, 1), (1, 1)]),
    ],
)
def test_the_documented_rank_orders(order: str, first_ranks: list[tuple[int, int]]) -> None:
    a = alloc({n: range(8) for n in ("gs1", "gs2", "gs3", "gs4")})
    plan = srun.plan_srun(a, tp=8, pp=2, dp=2, order=order, topologies=dict.fromkeys(a.nodes, TOPO))
    for block, (pp, dp) in enumerate(first_ranks):
        rows = plan.rows[8 * block : 8 * block + 8]
        assert {(r.pp, r.dp) for r in rows} == {(pp, dp)} and [r.tp for r in rows] == list(range(8))


# ---- --order


@pytest.mark.parametrize("order", ["TP-PP-DP", " tp - dp - pp ", "dp-tp-pp", "ep-tp-cp-pp-dp"])
def test_order_accepts_any_permutation_in_any_case(order: str) -> None:
    dims = parse_order(order)
    assert set(dims) >= {"tp", "pp", "dp"} and all(d == d.strip().lower() for d in dims)
    plan = srun.plan_srun(alloc({"n1": range(4)}), tp=2, pp=2, order=order)
    assert f"(order {'-'.join(dims)}," in plan.summary


@pytest.mark.parametrize("order", ["tp-pp", "tp-pp-dp-tp", "tp-pp-dp-sp", "", "tp,pp,dp"])
def test_order_without_each_dimension_once_is_refused(order: str) -> None:
    with pytest.raises(InputError, match="expected the dimensions tp, pp and dp"):
        srun.plan_srun(alloc({"n1": range(4)}), tp=2, order=order)


# ---- sizes


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tp": 0}, "--tp 0: must be at least 1"),
        ({"tp": 1, "pp": 0}, "--pp 0: must be at least 1"),
        ({"tp": 1, "gpus_per_task": -1}, "--gpus-per-task -1: must be at least 1"),
        ({"tp": 1, "dp": 0}, "--dp 0: must be at least 1"),
    ],
)
def test_sizes_below_one_are_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        srun.plan_srun(alloc({"n1": range(8)}), **kwargs)  # type: ignore[arg-type]


def test_default_dp_counts_tasks_from_gpus_per_task() -> None:
    """No SLURM_NTASKS: the task count is the allocated GPUs / --gpus-per-task (16 / 2 = 8; tp 2 → dp 4)."""
    a = alloc({"n1": range(8), "n2": range(8)})
    plan = srun.plan_srun(a, tp=2, gpus_per_task=2)
    assert len(plan.rows) == 8 and {r.dp for r in plan.rows} == set(range(4))
    with pytest.raises(InputError, match="the 8 tasks the allocation's 16 GPUs hold at --gpus-per-task 2"):
        srun.plan_srun(a, tp=3, gpus_per_task=2)


def test_ntasks_decides_dp_and_a_given_dp_may_use_fewer_tasks() -> None:
    a = alloc({"n1": range(8), "n2": range(8)})
    assert {r.dp for r in srun.plan_srun(a, tp=4, ntasks=8).rows} == {0, 1}  # 8 tasks, not 16 GPUs
    assert len(srun.plan_srun(a, tp=4, dp=1, ntasks=16).rows) == 4


def test_an_allocation_without_nodes_is_refused() -> None:
    empty = srun.Allocation("5", (), {})
    with pytest.raises(InputError, match="^job 5: no nodes$"):
        srun.plan_srun(empty, tp=1, dp=1)
    with pytest.raises(InputError, match="the 0 tasks the allocation's 0 GPUs hold"):
        srun.plan_srun(empty, tp=1)


def test_too_many_groups_names_what_each_node_holds() -> None:
    """n1 holds two groups of 4, n2 (4 GPUs) one: 4 replicas do not fit in 3."""
    with pytest.raises(InputError) as e:
        srun.plan_srun(alloc({"n1": range(8), "n2": range(4)}), tp=4, dp=4)
    assert str(e.value) == (
        "4 TP groups (--pp 1 × --dp 4) of 4 GPUs do not fit: the allocation holds 3 "
        "(n1: 2 (8 GPUs); n2: 1 (4 GPUs))"
    )


def test_allocated_gpus_missing_from_the_link_data_are_named() -> None:
    with pytest.raises(
        InputError, match=r"node gs1: allocated GPUs \[8, 9\] are not in its link data \(8 GPUs\)"
    ):
        srun.plan_srun(alloc({"gs1": (6, 7, 8, 9)}), tp=2, topologies={"gs1": TOPO})


# ---- TP groups and their warnings


def test_island_warning_names_each_largest_island_size() -> None:
    """--tp 8 on a node with islands of 4 and on a PCIe-only node (islands of 1): one line, both sizes."""
    a = alloc({"gs1": range(8), "pc1": range(8)})
    plan = srun.plan_srun(a, tp=8, topologies={"gs1": TOPO, "pc1": PCIE})
    (line,) = [w for w in plan.warnings if "span NVLink islands" in w]
    assert "on gs1,pc1 (largest island there: 1 or 4 GPUs)" in line
    assert [r.island for r in plan.rows if r.tp == 0] == ["0-3+4-7", "0+1+2+3+4+5+6+7"]


def test_link_data_for_some_nodes_only_warns_for_the_others() -> None:
    plan = srun.plan_srun(alloc({"gs1": range(8), "gs2": range(8)}), tp=4, topologies={"gs2": TOPO})
    assert plan.warnings == (
        "warning: no GPU link data for gs1 (link data): TP groups take the lowest allocated indices",
    )
    assert {(r.node, r.island) for r in plan.rows} == {("gs1", "-"), ("gs2", "0-3"), ("gs2", "4-7")}


def test_tp_level_is_gpu_island_or_node() -> None:
    one = srun.plan_srun(alloc({"gs1": range(8)}), tp=1, topologies={"gs1": TOPO})
    assert {r.tp_level for r in one.rows} == {"gpu"}
    # two GPUs per task, one rank per group: the group is the rank's two GPUs, inside one island
    two = srun.plan_srun(alloc({"gs1": range(8)}), tp=1, gpus_per_task=2, topologies={"gs1": TOPO})
    assert {r.tp_level for r in two.rows} == {"island"}
    assert all(r.gpus[0] // 4 == r.gpus[1] // 4 for r in two.rows)


# ---- pipelines


def test_a_pipeline_prefers_one_later_node_to_a_leaf() -> None:
    """gs1 holds one group, gs2 two: the pipeline of two stages takes gs2 alone (a node before a leaf)."""
    plan = srun.plan_srun(alloc({"gs1": range(4), "gs2": range(8)}), tp=4, pp=2, dp=1, tree=TREE)
    assert set(plan.hostfile_lines) == {"gs2"} and {r.pp_level for r in plan.rows} == {"node"}


def test_pipeline_level_is_the_lowest_common_switch_or_dash() -> None:
    two_leaves = alloc({"gs1": range(8), "gs3": range(8)})
    plan = srun.plan_srun(two_leaves, tp=8, pp=2, tree=TREE)
    assert {r.pp_level for r in plan.rows} == {"zone"}
    assert {r.pp_level for r in srun.plan_srun(two_leaves, tp=8, pp=2).rows} == {"-"}  # no switch tree
    orphan = parse_scontrol_topology("SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gs1\n")
    assert {r.pp_level for r in srun.plan_srun(two_leaves, tp=8, pp=2, tree=orphan).rows} == {"-"}


def test_domain_hint_only_when_every_pipeline_takes_the_same_node_count() -> None:
    nodes = ("gs1", "gs2", "gs3")
    domains = dict.fromkeys(nodes, "nvl_r1")
    a = alloc({"gs1": range(8), "gs2": range(4), "gs3": range(4)})
    # tp 4 pp 2 dp 2: pipeline 0 on gs1 alone, pipeline 1 on gs2+gs3: 1 and 2 nodes, no --segment hint
    plan = srun.plan_srun(a, tp=4, pp=2, tree=TREE, domains=domains)
    assert sorted(len({r.node for r in plan.rows if r.dp == d}) for d in (0, 1)) == [1, 2]
    assert not any(w.startswith("hint:") for w in plan.warnings)
    assert {r.pp_level for r in plan.rows} == {"node", "nvl_r1"}
    # every pipeline on one node: nothing to keep together
    whole = srun.plan_srun(alloc({"gs1": range(8), "gs2": range(8)}), tp=4, pp=2, domains=domains)
    assert not any(w.startswith("hint:") for w in whole.warnings)


def test_a_node_without_a_domain_is_named_with_a_dash() -> None:
    plan = srun.plan_srun(alloc({"gs1": range(8), "gs2": range(8)}), tp=8, pp=2, domains={"gs1": "nvl_a"})
    assert "warning: pipeline 0 spans NVLink domains -, nvl_a (gs[1-2])" in "\n".join(plan.warnings)


# ---- srun's command line


def test_gpu_bind_masks_are_per_local_task_in_local_indices() -> None:
    """GPUs 2,3,6,7 are local 0-3; tp 2: tasks 0,1 see local 0,1 (mask 0x3), tasks 2,3 local 2,3 (0xc)."""
    plan = srun.plan_srun(
        alloc({"gs1": (2, 3, 6, 7)}),
        tp=2,
        topologies={"gs1": TOPO},
        local_indices=True,
        slurm_version=(23, 11),
    )
    assert "--gpu-bind=mask_gpu:0x3,0x3,0xc,0xc" in plan.argv


@pytest.mark.parametrize(
    "nodes, kwargs",
    [
        ({"n1": range(8), "n2": range(8)}, {"slurm_version": (23, 2)}),  # before task sharing
        ({"n1": range(8), "n2": range(8)}, {"local_indices": False}),  # no device cgroup
        ({"n1": range(8), "n2": range(8)}, {"srun_options": ["--gres-flags=enforce-binding"]}),  # the user's
        ({"n1": range(8), "n2": range(4)}, {}),  # n1 has 8 tasks, n2 4: the nodes' masks differ
    ],
)
def test_gpu_bind_is_left_to_the_shim(nodes: dict[str, Sequence[int]], kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"local_indices": True, "slurm_version": (24, 11), **kwargs}
    plan = srun.plan_srun(alloc(nodes), tp=4, **args)  # type: ignore[arg-type]
    assert not any(o.startswith("--gpu-bind") or o == "--gres-flags=allow-task-sharing" for o in plan.argv)


def test_refused_srun_options_are_refused_by_the_plan_too() -> None:
    with pytest.raises(InputError, match="--gpu-bind conflicts with the plan"):
        srun.plan_srun(alloc({"n1": range(2)}), tp=2, srun_options=["--gpu-bind=none"])


def test_the_plan_has_no_hostfile_name_to_predict() -> None:
    """The plan holds the lines only; SLURM_HOSTFILE is made when srun starts (cli.private_hostfile)."""
    a = alloc({"n1": range(4), "n2": range(4)}, job="77")
    one = srun.plan_srun(a, tp=2)
    assert one.hostfile == srun.plan.HOSTFILE and "SLURM_HOSTFILE" not in one.env
    other = srun.plan_srun(a, tp=2, dp=2)  # four ranks on n1 only
    assert other.hostfile_lines == ("n1",) * 4


def test_tasks_per_node_caps_groups_and_the_step_asks_for_the_used_gpus() -> None:
    """Slurm's 15 + 1 tasks (22.05, -n16 over two nodes): --tp 4 --pp 2 takes two groups of n1, and the
    step asks for n1's 8 GPUs (a --gpus=16 job refuses a step on n1 alone that names none)."""
    a = alloc({"n1": range(8), "n2": range(8)})
    plan = srun.plan_srun(a, tp=4, pp=2, dp=1, tasks_per_node={"n1": 15, "n2": 1})
    assert {r.node for r in plan.rows} == {"n1"} and "--gpus=8" in plan.argv
    spread = srun.plan_srun(a, tp=1, dp=4, tasks_per_node={"n1": 2, "n2": 2})
    assert [r.node for r in spread.rows] == ["n1", "n1", "n2", "n2"]
    assert "--gpus=16" in spread.argv


# ---- the printed plan


def test_summary_counts_in_the_singular() -> None:
    plan = srun.plan_srun(alloc({"n1": (3,)}, job="9"), tp=1, local_indices=True)
    assert plan.summary == (
        "gpulayer-srun: job 9: 1 rank = tp 1 × pp 1 × dp 1 (order tp-cp-ep-dp-pp, 1 GPU per task) on 1 node "
        "n1; CUDA_VISIBLE_DEVICES local indices"
    )
    assert plan.rows[0].cuda_visible_devices == "0" and plan.rows[0].gpus == (3,)


def test_format_plan_is_an_aligned_table_of_every_rank() -> None:
    a = alloc({"gs1": range(8), "gs10": range(8)})
    plan = srun.plan_srun(a, tp=4, pp=2, topologies=dict.fromkeys(a.nodes, TOPO), tree=TREE)
    lines = srun.format_plan(plan).splitlines()
    assert lines[0] == plan.summary
    assert lines[1].startswith(
        f"gpulayer-srun: SLURM_HOSTFILE={plan.hostfile} (16 lines) srun -m arbitrary -n 16 "
    )
    head, body = lines[2], lines[3:]
    assert head.split() == [
        "rank", "node", "gpus", "cuda_visible_devices", "local_rank", "island", "tp", "pp", "dp", "tp_group",
        "pp_group",
    ]  # fmt: skip
    assert len(body) == len(plan.rows)
    starts = [head.index(word) for word in head.split()]
    for line, row in zip(body, plan.rows, strict=True):
        cells = [line[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
        assert cells == [
            str(row.rank), row.node, numbers(row.gpus), row.cuda_visible_devices, str(row.tp), row.island,
            str(row.tp), str(row.pp), str(row.dp), row.tp_level, row.pp_level,
        ]  # fmt: skip


def test_numbers_are_slurm_ranges() -> None:
    assert numbers((0, 1, 2, 3, 6)) == "0-3,6" and numbers(()) == "" and numbers((7,)) == "7"
