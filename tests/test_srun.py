"""gpulayer-srun without Slurm: the plan, refusals, the shim, and the stable --dry-run (Slurm's answers are
parsed by slurmconf: tests/test_slurmconf.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import ScriptedRunner

from slurm_topo import srun
from slurm_topo.access.text import parse_scontrol_topology
from slurm_topo.core.errors import InputError, PlacementError
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.plumbing.srun_shim import bind

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
GOLDEN = REPO / "tests" / "golden" / "srun"
TOPO = parse_topo_matrix(CAPTURE.read_text())

JOB = """JobId=42 JobName=train
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=gs[1-4] BatchHost=gs1
   NumNodes=4 NumCPUs=32 NumTasks=32 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
     Nodes=gs[1-2] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
     Nodes=gs[3-4] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
   TresPerNode=gres:gpu:8
"""
TOPOLOGY = """SwitchName=root Level=2 LinkSpeed=1 Nodes=gs[1-4] Switches=zone_r1-a
SwitchName=zone_r1-a Level=1 LinkSpeed=1 Nodes=gs[1-4] Switches=ng_r1-a.rack-1,ng_r1-a.rack-2
SwitchName=ng_r1-a.rack-1 Level=0 LinkSpeed=1 Nodes=gs[1-2]
SwitchName=ng_r1-a.rack-2 Level=0 LinkSpeed=1 Nodes=gs[3-4]
"""
GRES = "".join(
    f"NodeName=gs[1-4] Name=gpu Type=h100 File=/dev/nvidia{i} Links="
    + ",".join("-1" if j == i else ("18" if (i < 4) == (j < 4) else "0") for j in range(8))
    + "\n"
    for i in range(8)
)


def alloc(nodes: dict[str, Sequence[int]], job: str = "42") -> srun.Allocation:
    return srun.Allocation(job, tuple(nodes), {n: tuple(g) for n, g in nodes.items()})


def eight(*names: str) -> srun.Allocation:
    return alloc({n: range(8) for n in names})


TREE = parse_scontrol_topology(TOPOLOGY)


# ---- the plan


def test_tp4_groups_are_islands_and_disjoint_per_node() -> None:
    plan = srun.plan_srun(eight("gs1", "gs2"), tp=4, topologies={"gs1": TOPO, "gs2": TOPO}, tree=TREE)
    assert len(plan.rows) == 16
    for g in range(4):
        rows = plan.rows[4 * g : 4 * g + 4]
        assert len({r.node for r in rows}) == 1 and len({r.cuda_visible_devices for r in rows}) == 1
        assert {r.tp_level for r in rows} == {"island"} and [r.local_rank for r in rows] == [0, 1, 2, 3]
    assert [r.cuda_visible_devices for r in plan.rows[::4]] == ["0,1,2,3", "4,5,6,7"] * 2
    assert plan.hostfile_lines == ("gs1",) * 8 + ("gs2",) * 8


def test_tp_group_avoids_a_split_island_among_allocated_gpus() -> None:
    # allocated 1,2,3,4,5,6,7 (0 busy): the 4-GPU group is the whole island 4-7, not the lowest 1-4
    plan = srun.plan_srun(alloc({"gs1": range(1, 8)}), tp=4, dp=1, topologies={"gs1": TOPO})
    assert plan.rows[0].cuda_visible_devices == "4,5,6,7" and plan.rows[0].island == "4-7"


def test_tp8_pp2_pipelines_stay_in_one_leaf_megatron_order() -> None:
    plan = srun.plan_srun(
        eight("gs1", "gs2", "gs3", "gs4"),
        tp=8,
        pp=2,
        tree=TREE,
        topologies=dict.fromkeys(("gs1", "gs2", "gs3", "gs4"), TOPO),
    )
    node = [r.node for r in plan.rows]
    assert node[:8] == ["gs1"] * 8 and node[8:16] == ["gs3"] * 8 and node[16:24] == ["gs2"] * 8
    assert {r.pp_level for r in plan.rows[:8]} == {"ng_r1-a.rack-1"}
    assert (plan.rows[17].pp, plan.rows[17].dp, plan.rows[17].tp) == (1, 0, 1)


def test_pipelines_stay_in_one_nvlink_domain_across_the_leaves() -> None:
    """NVLink domains that cut across the leaves (gs1+gs3 and gs2+gs4, as an NVL rack whose trays hang off
    two InfiniBand leaves): each pipeline takes its two nodes from one domain, not from one leaf; the
    plan suggests --segment=2. Without domains the leaf decides (the test above)."""
    nodes = ("gs1", "gs2", "gs3", "gs4")
    domains = {"gs1": "nvl_rack-01", "gs3": "nvl_rack-01", "gs2": "nvl_rack-02", "gs4": "nvl_rack-02"}
    plan = srun.plan_srun(
        eight(*nodes), tp=8, pp=2, tree=TREE, topologies=dict.fromkeys(nodes, TOPO), domains=domains
    )
    for d in (0, 1):
        pipe = {r.node for r in plan.rows if r.dp == d}
        assert len({domains[n] for n in pipe}) == 1 and len(pipe) == 2, pipe
    assert {r.pp_level for r in plan.rows} == {"nvl_rack-01", "nvl_rack-02"}
    assert any(
        w.startswith("hint: each pipeline takes 2 nodes; submit with --segment=2") for w in plan.warnings
    )
    leaf = srun.plan_srun(eight(*nodes), tp=8, pp=2, tree=TREE, topologies=dict.fromkeys(nodes, TOPO))
    assert {r.node for r in leaf.rows if r.dp == 0} == {"gs1", "gs2"}  # the leaf, across both domains


def test_a_pipeline_that_must_span_two_domains_is_warned() -> None:
    nodes = ("gs1", "gs2", "gs3", "gs4")
    domains = {"gs1": "nvl_a", "gs2": "nvl_b", "gs3": "nvl_c", "gs4": "nvl_d"}
    plan = srun.plan_srun(
        eight(*nodes), tp=8, pp=2, tree=TREE, topologies=dict.fromkeys(nodes, TOPO), domains=domains
    )
    spans = [w for w in plan.warnings if "spans NVLink domains" in w]
    assert len(spans) == 2 and spans[0].startswith("warning: pipeline 0 spans NVLink domains nvl_a, nvl_b"), (
        spans
    )


def test_order_tp_pp_dp_makes_pipeline_stages_consecutive() -> None:
    plan = srun.plan_srun(
        eight("gs1", "gs2"), tp=4, pp=2, order="tp-pp-dp", topologies={"gs1": TOPO, "gs2": TOPO}, tree=TREE
    )
    assert [(r.tp, r.pp, r.dp) for r in plan.rows[3:6]] == [(3, 0, 0), (0, 1, 0), (1, 1, 0)]
    assert {r.pp_level for r in plan.rows} == {"node"}  # a whole pipeline fits one node


def test_tp_group_that_must_span_islands_is_warned() -> None:
    """--tp 8 on two islands of 4: the plan runs (a group per node) and says, once, that TP leaves NVLink."""
    plan = srun.plan_srun(eight("gs1", "gs2"), tp=8, topologies={"gs1": TOPO, "gs2": TOPO})
    assert plan.warnings == (
        "warning: --tp 8: TP groups of 8 GPUs span NVLink islands on gs[1-2] (largest island there: 4 "
        "GPUs): tensor-parallel traffic between the islands leaves NVLink",
    )
    assert {r.tp_level for r in plan.rows} == {"node"} and plan.rows[0].island == "0-3+4-7"
    # islands of 4 but the allocation splits them: still one line, with that reason
    split = srun.plan_srun(alloc({"gs1": (2, 3, 4, 5)}), tp=4, topologies={"gs1": TOPO})
    assert split.warnings[0].endswith(
        "on gs1 (the GPUs allocated there hold no whole island of 4): tensor-parallel traffic between the "
        "islands leaves NVLink"
    )
    # a group inside one island, or a single GPU, or no link data: no such warning
    assert srun.plan_srun(eight("gs1"), tp=4, topologies={"gs1": TOPO}).warnings == ()
    assert srun.plan_srun(eight("gs1"), tp=1, topologies={"gs1": TOPO}).warnings == ()
    assert not any("span" in w for w in srun.plan_srun(eight("gs1"), tp=8).warnings)


def test_local_indices_are_ranks_in_the_allocated_list() -> None:
    plan = srun.plan_srun(alloc({"gs1": (2, 3, 6, 7)}), tp=2, topologies={"gs1": TOPO}, local_indices=True)
    assert [r.cuda_visible_devices for r in plan.rows] == ["0,1", "0,1", "2,3", "2,3"]
    assert [r.gpus for r in plan.rows] == [(2,), (3,), (6,), (7,)]


def test_gpus_per_task() -> None:
    plan = srun.plan_srun(eight("gs1"), tp=2, gpus_per_task=2, topologies={"gs1": TOPO})
    assert [r.gpus for r in plan.rows[:2]] == [(0, 1), (2, 3)] and plan.rows[
        0
    ].cuda_visible_devices == "0,1,2,3"


def test_missing_link_data_gives_lowest_indices_and_one_warning() -> None:
    plan = srun.plan_srun(alloc({"n1": range(8), "n2": range(8)}), tp=4, link_source="no Links=")
    assert len(plan.warnings) == 1 and "n[1-2]" in plan.warnings[0]
    assert plan.rows[0].cuda_visible_devices == "0,1,2,3" and plan.rows[0].island == "-"


def test_gpu_bind_only_on_23_11_with_task_sharing() -> None:
    a = eight("gs1", "gs2")
    topos = {"gs1": TOPO, "gs2": TOPO}
    old = srun.plan_srun(a, tp=4, topologies=topos, local_indices=True, slurm_version=(22, 5))
    assert not any("gpu-bind" in x or "gres-flags" in x for x in old.argv)
    new = srun.plan_srun(a, tp=4, topologies=topos, local_indices=True, slurm_version=(23, 11))
    assert "--gres-flags=allow-task-sharing" in new.argv
    assert "--gpu-bind=mask_gpu:0xf,0xf,0xf,0xf,0xf0,0xf0,0xf0,0xf0" in new.argv


def test_srun_argv_and_passthrough() -> None:
    plan = srun.plan_srun(
        eight("gs1"),
        tp=8,
        srun_options=["--time", "5", "-l", "--mpi=pmix"],
        command=["python", "train.py"],
        python="py",
    )
    assert plan.argv == (
        "srun",
        "-m",
        "arbitrary",
        "-n",
        "8",
        "--gpus=8",
        "--time",
        "5",
        "-l",
        "--mpi=pmix",
        "py",
        "-m",
        "slurm_topo.plumbing.srun_shim",
        "--",
        "python",
        "train.py",
    )
    assert "SLURM_HOSTFILE" not in plan.env and plan.hostfile == srun.plan.HOSTFILE  # made when srun starts
    assert "SLURM_NTASKS_PER_NODE" in plan.unset_env


@pytest.mark.parametrize("version", [None, (22, 5), (23, 11), (24, 11), (26, 5)])
def test_srun_argv_never_sets_nodes_with_arbitrary(version: tuple[int, int] | None) -> None:
    """``-m arbitrary`` takes its nodes from SLURM_HOSTFILE; Slurm 24.05+ refuses it together with ``-N``
    (``srun: error: --nodes is incompatible with --distribution=arbitrary``), 22.05 does not need it."""
    a = eight("gs1", "gs2")
    plan = srun.plan_srun(
        a, tp=4, topologies={"gs1": TOPO, "gs2": TOPO}, local_indices=True, slurm_version=version
    )
    assert plan.argv[:4] == ("srun", "-m", "arbitrary", "-n")
    head = plan.argv[: plan.argv.index("-m", 3)]  # srun's own options, before ``python -m slurm_topo...``
    assert not any(o in ("-N", "--nodes") or o.startswith(("--nodes=", "-N")) for o in head), plan.argv


# ---- bad input


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"tp": 16}, ["--tp 16", "16 GPUs", "8 on gs1"]),
        ({"tp": 3}, ["--tp 3", "does not divide", "16"]),
        ({"tp": 4, "dp": 8}, ["8 TP groups", "holds 4"]),
        ({"tp": 8, "ntasks": 12}, ["--tp 8 × --pp 1 = 8", "does not divide", "12 tasks"]),
        ({"tp": 4, "dp": 4, "ntasks": 8}, ["16 ranks", "8 tasks"]),
        ({"tp": 4, "order": "tp-dp"}, ["--order"]),
    ],
)
def test_bad_sizes_name_the_numbers(kwargs: dict[str, object], words: list[str]) -> None:
    with pytest.raises(InputError) as e:
        srun.plan_srun(eight("gs1", "gs2"), **kwargs)  # type: ignore[arg-type]
    for w in words:
        assert w in str(e.value), str(e.value)


def test_node_with_too_few_gpus_is_named() -> None:
    with pytest.raises(InputError, match=r"node gs2 has 2 allocated GPUs \(0-1\)"):
        srun.plan_srun(alloc({"gs1": range(8), "gs2": range(2)}), tp=4, dp=2)


@pytest.mark.parametrize(
    "opt",
    [
        "-n",
        "-n4",
        "--ntasks=4",
        "-N",
        "--nodes",
        "--ntasks-per-node=2",
        "-m",
        "--distribution=block",
        "-w",
        "--nodelist=n1",
        "--gpu-bind=closest",
        "-ln4",
    ],
)
def test_conflicting_srun_options_are_refused_by_name(opt: str) -> None:
    with pytest.raises(InputError, match="conflicts with the plan"):
        srun.check_srun_options([opt, "1"])


def test_other_srun_options_pass() -> None:
    srun.check_srun_options(["-l", "-J", "-n-like-name", "--time=5", "-t", "5", "--mpi", "pmix", "-c4", "-u"])


@pytest.fixture(autouse=True)
def _text_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fakes here answer ``scontrol show job -d`` (the text backend; JSON: tests/test_access.py)."""
    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "text")


FakeRunner = ScriptedRunner  # answers by the command's first three words here


def _runner(conf: Path) -> FakeRunner:
    return FakeRunner(
        {
            "scontrol show job": JOB,
            "scontrol show topology": TOPOLOGY,
            "scontrol show config": f"SLURM_CONF               = {conf}\nSLURM_VERSION            = 22.05.8\n"
            "TaskPlugin               = task/none\n",
        }
    )


def test_outside_an_allocation_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        srun.main(["--tp", "4", "--", "true"], environ={}, runner=FakeRunner({}))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not inside a Slurm allocation" in err


def test_refused_option_from_main(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        srun.main(
            ["--tp", "4", "-N", "2", "--", "true"],
            environ={"SLURM_JOB_ID": "42"},
            runner=_runner(tmp_path / "slurm.conf"),
        )
    assert e.value.code == 2 and "-N" in capsys.readouterr().err


# ---- --dry-run is stable


CASES = {
    "tp4-two-nodes": ["--tp", "4"],
    "tp8-pp2-two-leaves": ["--tp", "8", "--pp", "2"],
    "tp2-pp2-order-tp-pp-dp": ["--tp", "2", "--pp", "2", "--order", "tp-pp-dp", "-l", "--time=5"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_dry_run_matches_golden(
    case: str, tmp_path: Path, update_golden: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gres.conf").write_text(GRES)
    nodes = "gs[1-2]" if case == "tp4-two-nodes" else "gs[1-4]"
    runner = _runner(tmp_path / "slurm.conf")
    runner.answers["scontrol show job"] = JOB.replace("NodeList=gs[1-4]", f"NodeList={nodes}")
    argv = [*CASES[case], "--dry-run", "--", "python", "train.py"]
    env = {"SLURM_JOB_ID": "42", "TMPDIR": "/tmp"}
    plan, _ = srun.build_plan(argv, env, runner, python="python3")
    text = srun.format_plan(plan)
    golden = GOLDEN / f"{case}.txt"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.read_text() == text, "--dry-run output changed; --update-golden if intended"
    # main --dry-run prints exactly this (with its own interpreter) and runs nothing
    srun.main(argv, environ=env, runner=runner)
    import sys

    assert capsys.readouterr().out == text.replace(
        "python3 -m slurm_topo.plumbing.srun_shim", f"{sys.executable} -m slurm_topo.plumbing.srun_shim"
    )


# ---- the shim


def test_shim_binds_by_procid() -> None:
    plan = srun.plan_srun(eight("gs1", "gs2"), tp=4, topologies={"gs1": TOPO, "gs2": TOPO})
    env = dict(plan.env)
    got = bind({**env, "SLURM_PROCID": "6", "SLURMD_NODENAME": "gs1"})
    assert got == {
        "CUDA_VISIBLE_DEVICES": "4,5,6,7",
        "LOCAL_RANK": "2",
        "LOCAL_WORLD_SIZE": "4",
        "RANK": "6",
        "WORLD_SIZE": "16",
    }
    with pytest.raises(PlacementError, match="planned on gs1 but runs on gs2"):
        bind({**env, "SLURM_PROCID": "6", "SLURMD_NODENAME": "gs2"})


def test_python_dash_m_works() -> None:
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "slurm_topo.srun", "--tp", "1", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 2 and "not inside a Slurm allocation" in p.stderr


def test_console_script_is_the_cli_main() -> None:
    """The installed `gpulayer-srun` (pyproject: slurm_topo.srun:main) is the package's command line."""
    from importlib.metadata import entry_points

    from slurm_topo.srun import cli

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "gpulayer-srun"]
    assert ep.load() is cli.main


# ---- rails: the same local GPUs on every node


def test_different_gpu_sets_across_nodes_warn_with_each_nodes_set() -> None:
    from slurm_topo.srun.plan import rail_warning

    same = alloc({"n1": range(4), "n2": range(4)})
    assert rail_warning(same) is None
    assert not any("rail" in w for w in srun.plan_srun(same, tp=2).warnings)
    split = alloc({"n1": (0, 1), "n2": (2, 3), "n3": (0, 1)})
    w = rail_warning(split)
    assert w is not None and "n[1,3]: 0-1; n2: 2-3" in w and "one rail" in w, w
    assert w in srun.plan_srun(split, tp=2).warnings
    # a node without GPUs in the allocation, or one node alone, is no reason to warn
    assert rail_warning(alloc({"n1": (0, 1), "n2": ()})) is None
    assert rail_warning(alloc({"n1": (4, 5)})) is None


def test_rail_warning_from_scontrols_detail_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The per-node sets come from `scontrol show job -d` (GRES=gpu:…(IDX:…) per Nodes= line); main prints
    the warning on stderr."""
    runner = _runner(tmp_path / "slurm.conf")
    runner.answers["scontrol show job"] = (
        JOB.replace("NodeList=gs[1-4]", "NodeList=gs[1-2]")
        .replace(
            "Nodes=gs[1-2] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)", "Nodes=gs1 GRES=gpu:h100:4(IDX:0-3)"
        )
        .replace(
            "Nodes=gs[3-4] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)", "Nodes=gs2 GRES=gpu:h100:4(IDX:4-7)"
        )
    )
    srun.main(["--tp", "4", "--dry-run", "--", "true"], environ={"SLURM_JOB_ID": "42"}, runner=runner)
    err = capsys.readouterr().err
    assert (
        "gpulayer-srun: warning: the allocation's GPU indices differ across nodes (gs1: 0-3; gs2: 4-7)" in err
    )


def test_groups_take_the_same_local_gpus_as_earlier_nodes_when_it_costs_nothing() -> None:
    """gs1 holds 4-7, gs2 all eight (islands 0-3 and 4-7): gs2's first TP group takes 4-7 as gs1 does (equally
    good: one whole island), so DP replicas 0 and 1 — gs1's group and gs2's first — use the same local GPUs
    and their DP rings stay on one rail; gs2's second group gets 0-3."""
    a = alloc({"gs1": range(4, 8), "gs2": range(8)})
    plan = srun.plan_srun(a, tp=4, dp=3, topologies={"gs1": TOPO, "gs2": TOPO}, tree=TREE)
    by_dp = {r.dp: (r.node, r.cuda_visible_devices) for r in plan.rows if r.tp == 0}
    assert by_dp == {0: ("gs1", "4,5,6,7"), 1: ("gs2", "4,5,6,7"), 2: ("gs2", "0,1,2,3")}
    # a node whose allocation has no free copy of the earlier set keeps its own best set
    b = alloc({"gs1": range(4, 8), "gs2": range(4)})
    plan = srun.plan_srun(b, tp=4, topologies={"gs1": TOPO, "gs2": TOPO}, tree=TREE)
    assert [r.cuda_visible_devices for r in plan.rows if r.tp == 0] == ["4,5,6,7", "0,1,2,3"]


def test_same_local_gpus_without_link_data() -> None:
    """No link data: every set is as good, so a later node takes the earlier node's set when it holds it."""
    plan = srun.plan_srun(alloc({"n1": (2, 3), "n2": (0, 1, 2, 3)}), tp=2, dp=2)
    assert [(r.node, r.cuda_visible_devices) for r in plan.rows if r.tp == 0] == [
        ("n1", "2,3"),
        ("n2", "2,3"),
    ]


def test_dp_peers_of_a_stage_take_the_same_local_gpus_where_it_costs_nothing() -> None:
    """--tp 4 --pp 3 on three 8-GPU nodes (dp 2): each stage's two replicas are on one node, or on the same
    local GPUs of two nodes (one rail each), and the pipelines cross no more nodes than the plain layout
    (each one node change)."""
    nodes = ("gs1", "gs2", "gs3")
    plan = srun.plan_srun(eight(*nodes), tp=4, pp=3, tree=TREE, topologies=dict.fromkeys(nodes, TOPO))
    by: dict[tuple[int, int], tuple[str, str]] = {}
    for row in plan.rows:
        by[(row.pp, row.dp)] = (row.node, row.cuda_visible_devices)
    for s in range(3):
        (n0, g0), (n1, g1) = by[(s, 0)], by[(s, 1)]
        assert n0 == n1 or g0 == g1, (s, by)
    for d in range(2):
        changes = sum(by[(s, d)][0] != by[(s + 1, d)][0] for s in range(2))
        assert changes == 1, by


def test_pipeline_stages_on_one_dgx1_node_follow_an_nvlink_chain() -> None:
    """--pp 8 of one-GPU stages on a DGX-1 (hybrid cube mesh, a real capture): consecutive stages meet over
    NVLink, where index order crosses SYS between GPU 3 and 4."""
    from slurm_topo.gpu.rings import gpu_level

    real = REPO / "tests" / "fixtures" / "real" / "topo" / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
    dgx1 = parse_topo_matrix(real.read_text())
    assert gpu_level(dgx1, 3, 4) == "sys"
    plan = srun.plan_srun(alloc({"d1": range(8)}), tp=1, pp=8, dp=1, topologies={"d1": dgx1})
    by_stage = {row.pp: row.gpus[0] for row in plan.rows}
    chain = [by_stage[s] for s in range(8)]
    assert sorted(chain) == list(range(8))
    assert {gpu_level(dgx1, a, b) for a, b in zip(chain, chain[1:], strict=False)} == {"nvlink"}, chain
