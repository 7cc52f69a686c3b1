"""gpulayer-srun's command line (``slurm_topo.srun.cli``, ``.options``): what it asks Slurm and how it
reads the answers (scripted, tests/fakes.py), its usage errors, the hostfile, and the ``exec`` of srun (a
subprocess with a fake ``srun`` first on PATH that starts every task through the real shim, as
``-m arbitrary`` would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import ScriptedRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import srun
from slurm_topo.core.errors import InputError, OutputError, UsageError
from slurm_topo.srun.cli import MAX_TASK_NODES, build_plan, main, parse_tasks_per_node, private_hostfile
from slurm_topo.srun.options import check_srun_options, job_id

CAPTURE = Path(__file__).resolve().parent / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"

JOB = """JobId=42 JobName=train
   UserId=u(1000) GroupId=u(1000) MCS_label=N/A
   NodeList=gs[1-2] BatchHost=gs1
     Nodes=gs[1-2] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
"""
TOPOLOGY = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gs1\nSwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gs2\n"


@pytest.fixture(autouse=True)
def _text_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "text")


def slurm(conf_dir: Path, *, version: str = "23.11.4", task_plugin: str = "task/none") -> ScriptedRunner:
    return ScriptedRunner(
        {
            "scontrol show job": JOB,
            "scontrol show topology": TOPOLOGY,
            "scontrol show config": f"SLURM_CONF = {conf_dir / 'slurm.conf'}\nSLURM_VERSION = {version}\n"
            f"TaskPlugin = {task_plugin}\n",
        }
    )


def plan(argv: list[str], runner: ScriptedRunner, **env: str) -> srun.Plan:
    return build_plan([*argv, "--", "python", "train.py"], {"SLURM_JOB_ID": "42", **env}, runner)[0]


# ---- srun's options


@pytest.mark.parametrize(
    "options",
    [
        ["-J", "-n"],  # -J takes a value: "-n" is the job name
        ["-Jn"],  # the value in the same token
        ["-lJ", "-N"],  # flags, then -J whose value is the next token
        ["--ntasks-per-gpu=1", "--nodes-file"],  # other options that start like a refused one
        ["-"],
    ],
)
def test_values_of_srun_options_are_not_read_as_options(options: list[str]) -> None:
    check_srun_options(options)


@pytest.mark.parametrize(
    "options", [["-l", "-n", "4"], ["-lm", "block"], ["--gpu-bind"], ["-t", "5", "-w", "n1"]]
)
def test_a_refused_option_after_others_is_found(options: list[str]) -> None:
    with pytest.raises(InputError, match="conflicts with the plan"):
        check_srun_options(options)


def test_a_refused_option_after_kill_on_bad_exit_is_found() -> None:
    """srun's help: ``-K, --kill-on-bad-exit`` takes no separate value, so srun reads ``-N 2`` as -N."""
    with pytest.raises(InputError, match=r"-N \(-N/--nodes\) conflicts with the plan"):
        check_srun_options(["-K", "-N", "2"])


def test_job_id_from_jobid_then_the_environment() -> None:
    assert job_id(["--jobid=7"], {"SLURM_JOB_ID": "42"}) == "7"
    assert job_id(["-l", "--jobid", "8"], {"SLURM_JOB_ID": "42"}) == "8"
    assert job_id(["--jobid"], {"SLURM_JOB_ID": "42"}) == "42"  # no value: not a job id
    assert job_id([], {"SLURM_JOB_ID": "", "SLURM_JOBID": "9"}) == "9"
    assert job_id([], {}) is None


def test_jobid_names_the_job_asked_about_and_goes_to_srun(tmp_path: Path) -> None:
    runner = slurm(tmp_path)
    p = plan(["--tp", "8", "--jobid=77"], runner)
    assert ("scontrol", "show", "job", "-d", "77") in runner.calls
    assert "--jobid=77" in p.argv[: p.argv.index("slurm_topo.plumbing.srun_shim")]


# ---- usage errors


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tp", "4"], "no command: put it after --"),
        (["--tp", "4", "--"], "no command after --"),
        (["--pp", "2", "--", "true"], "the following arguments are required: --tp"),
        (["--tp", "four", "--", "true"], "expected a whole number, got 'four'"),
        (["--tp", "1", "--dp", "-1", "--", "true"], "-1: must be at least 1"),
        (["--tp", "1", "--local-indices", "--global-indices", "--", "true"], "not allowed with"),
        (["--tp", "1", "--dry-run", "--explain", "--", "true"], "not allowed with"),
    ],
)
def test_usage_errors(argv: list[str], message: str, tmp_path: Path) -> None:
    runner = slurm(tmp_path)
    with pytest.raises(UsageError, match=message):
        build_plan(argv, {"SLURM_JOB_ID": "42"}, runner)
    assert runner.calls == []  # refused before Slurm is asked


def test_help_and_version_ask_slurm_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    runner = ScriptedRunner({})
    main(["-h"], environ={}, runner=runner)
    out = capsys.readouterr().out
    assert out.startswith("usage: gpulayer-srun --tp N") and "--gpus-per-task" in out
    main(["--tp", "2", "--version", "--", "x"], environ={}, runner=runner)
    assert capsys.readouterr().out.startswith("gpulayer-srun (slurm-topo) ")
    assert runner.calls == []


def test_options_after_the_separator_belong_to_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gres.conf").write_text("")
    main(
        ["--tp", "8", "--dry-run", "--", "x", "-h", "--version", "-N"],
        {"SLURM_JOB_ID": "42"},
        slurm(tmp_path),
    )
    out = capsys.readouterr().out
    assert out.startswith("gpulayer-srun: job 42: 16 ranks") and "-- x -h --version -N\n" in out


# ---- what Slurm's answers decide


def test_link_data_from_gres_conf_beside_slurm_conf(tmp_path: Path) -> None:
    gres = "".join(
        f"NodeName=gs[1-2] Name=gpu File=/dev/nvidia{i} Links="
        + ",".join("-1" if i == j else ("18" if i // 4 == j // 4 else "0") for j in range(8))
        + "\n"
        for i in range(8)
    )
    (tmp_path / "gres.conf").write_text(gres)
    p = plan(["--tp", "4"], slurm(tmp_path))
    assert p.warnings == () and {r.island for r in p.rows} == {"0-3", "4-7"}


def test_without_link_data_the_warning_says_where_it_looked(tmp_path: Path) -> None:
    p = plan(["--tp", "4"], slurm(tmp_path))
    assert p.warnings == (
        f"warning: no GPU link data for gs[1-2] (no {tmp_path}/gres.conf; no --topology): TP groups take the "
        "lowest allocated indices",
    )
    (tmp_path / "gres.conf").write_text("NodeName=gs[1-2] Name=gpu File=/dev/nvidia[0-7]\n")
    assert (
        f"(no Links= in {tmp_path}/gres.conf; no --topology)"
        in plan(["--tp", "4"], slurm(tmp_path)).warnings[0]
    )


def test_slurm_conf_from_the_environment_when_the_config_names_none(tmp_path: Path) -> None:
    runner = slurm(tmp_path)
    runner.answers["scontrol show config"] = "SLURM_VERSION = 23.11.4\n"
    p = plan(["--tp", "4"], runner, SLURM_CONF=str(tmp_path / "etc" / "slurm.conf"))
    assert f"no {tmp_path}/etc/gres.conf;" in p.warnings[0]


def test_topology_capture_is_every_nodes_link_data(tmp_path: Path) -> None:
    p = plan(["--tp", "4", "--topology", str(CAPTURE)], slurm(tmp_path))
    assert p.warnings == () and [r.island for r in p.rows[::4]] == ["0-3", "4-7", "0-3", "4-7"]
    with pytest.raises(InputError, match=f"^--topology {tmp_path}/absent: cannot read: "):
        plan(["--tp", "4", "--topology", str(tmp_path / "absent")], slurm(tmp_path))


@pytest.mark.parametrize(
    "task_plugin, cgroup, flag, local",
    [
        ("task/affinity,task/cgroup", "ConstrainDevices=yes\n", None, True),
        ("task/affinity,task/cgroup", "ConstrainDevices=no\n", None, False),
        ("task/affinity,task/cgroup", None, None, False),  # no cgroup.conf
        ("task/affinity", "ConstrainDevices=yes\n", None, False),
        ("task/cgroup", "ConstrainDevices=yes\n", "--global-indices", False),
        ("task/none", None, "--local-indices", True),
    ],
)
def test_index_space_detected_or_given(
    tmp_path: Path, task_plugin: str, cgroup: str | None, flag: str | None, local: bool
) -> None:
    if cgroup is not None:
        (tmp_path / "cgroup.conf").write_text(cgroup)
    p = plan(["--tp", "4", *([flag] if flag else [])], slurm(tmp_path, task_plugin=task_plugin))
    assert p.summary.endswith(f"CUDA_VISIBLE_DEVICES {'local' if local else 'global'} indices")
    assert any(o.startswith("--gpu-bind=mask_gpu:") for o in p.argv) == local  # 23.11: bound when local


def test_an_unreadable_slurm_version_is_no_version(tmp_path: Path) -> None:
    p = plan(["--tp", "4", "--local-indices"], slurm(tmp_path, version="(null)"))
    assert not any(o.startswith("--gpu-bind") for o in p.argv)


def test_without_a_switch_tree_pipelines_have_no_common_switch(tmp_path: Path) -> None:
    runner = slurm(tmp_path)
    assert {r.pp_level for r in plan(["--tp", "8", "--pp", "2"], runner).rows} == {"-"}  # leaf1 ≠ leaf2
    del runner.answers[("scontrol", "show", "topology")]  # topology/flat: scontrol fails
    assert {r.pp_level for r in plan(["--tp", "8", "--pp", "2"], runner).rows} == {"-"}
    runner.answers["scontrol show topology"] = TOPOLOGY + "SwitchName=top Level=1 Switches=leaf[1-2]\n"
    assert {r.pp_level for r in plan(["--tp", "8", "--pp", "2"], runner).rows} == {"top"}


def test_nvlink_domains_come_from_the_nodes_features(tmp_path: Path) -> None:
    runner = slurm(tmp_path)
    runner.answers["scontrol show node -o gs[1-2]"] = (
        "NodeName=gs1 Arch=x86_64 AvailableFeatures=h100,nvl_rack-7 ActiveFeatures=h100,nvl_rack-7\n"
        "NodeName=gs2 Arch=x86_64 AvailableFeatures=nvl_rack-7,ib\n"  # no ActiveFeatures: the available ones
        "NodeName=gs9 Arch=x86_64 AvailableFeatures=nvl_other ActiveFeatures=nvl_other\n"
    )
    p = plan(["--tp", "8", "--pp", "2"], runner)
    assert {r.pp_level for r in p.rows} == {"nvl_rack-7"}
    assert any(w.startswith("hint: each pipeline takes 2 nodes; submit with --segment=2") for w in p.warnings)
    runner.answers["scontrol show node"] = "garbage without a NodeName\n"
    del runner.answers[("scontrol", "show", "node", "-o", "gs[1-2]")]
    assert {r.pp_level for r in plan(["--tp", "8", "--pp", "2"], runner).rows} == {"-"}


@pytest.mark.parametrize(
    "env, ranks",
    [({"SLURM_NTASKS": "8"}, 8), ({"SLURM_NPROCS": "8"}, 8), ({"SLURM_NTASKS": "8(x2)"}, 16), ({}, 16)],
)
def test_task_count_from_slurm_ntasks(tmp_path: Path, env: dict[str, str], ranks: int) -> None:
    assert len(plan(["--tp", "4"], slurm(tmp_path), **env).rows) == ranks


def test_the_plan_names_no_hostfile_path(tmp_path: Path) -> None:
    """The plan has no file name to predict: SLURM_HOSTFILE is made private when srun starts."""
    p = plan(["--tp", "4"], slurm(tmp_path), TMPDIR=str(tmp_path / "t"))
    assert (
        p.hostfile == srun.plan.HOSTFILE and "SLURM_HOSTFILE" not in p.env and "SLURM_HOSTFILE" in p.unset_env
    )


# ---- the hostfile


def test_hostfile_in_memory_is_one_line_per_rank_and_no_file(tmp_path: Path) -> None:
    """Linux: an anonymous in-memory file, readable as /proc/self/fd/N by srun after the exec; nothing is
    written to $TMPDIR."""
    p = plan(["--tp", "4", "--pp", "2"], slurm(tmp_path), TMPDIR=str(tmp_path))
    before = set(tmp_path.iterdir())
    path = private_hostfile(p.hostfile_lines, {"TMPDIR": str(tmp_path)})
    try:
        assert path.startswith("/proc/self/fd/")
        # Megatron's order: ranks 0-3 stage 0 of pipeline 0 (gs1), 4-7 stage 0 of pipeline 1 (gs2), …
        assert Path(path).read_text().splitlines() == (["gs1"] * 4 + ["gs2"] * 4) * 2
        assert os.get_inheritable(int(path.rsplit("/", 1)[1]))  # it survives the exec of srun
    finally:
        os.close(int(path.rsplit("/", 1)[1]))
    assert set(tmp_path.iterdir()) == before


FALLBACK = """import os, sys
from slurm_topo.srun.cli import private_hostfile
path = private_hostfile(["gs1", "gs2"], {"XDG_RUNTIME_DIR": sys.argv[1]}, memory=False)
print(path, flush=True)
os.execvp("sh", ["sh", "-c", 'cat "$0"; stat -c %a "$(dirname "$0")"; sleep 0.3; exit 5', path])
"""


def test_hostfile_on_disk_is_private_and_removed_when_srun_ends(tmp_path: Path) -> None:
    """Without memfd: a mkstemp file in a fresh 0700 mkdtemp folder under $XDG_RUNTIME_DIR, removed with its
    folder once the process that exec'd (srun) has exited; its exit status stays its own. Files another user
    could have made first at any fixed name (the old /tmp/gpulayer-srun-<job>-<hash>.hosts) change nothing."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    for name in ("gpulayer-srun-42.hosts", "hosts", "gpulayer-srun-"):
        (runtime / name).mkdir()  # squatters at predictable names
    proc = subprocess.run(
        [sys.executable, "-c", FALLBACK, str(runtime)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 5, proc.stderr
    path, *rest = proc.stdout.splitlines()
    assert Path(path).parent.parent == runtime and rest == ["gs1", "gs2", "700"]
    for _ in range(100):
        if not Path(path).parent.exists():
            break
        time.sleep(0.05)
    assert sorted(x.name for x in runtime.iterdir()) == ["gpulayer-srun-", "gpulayer-srun-42.hosts", "hosts"]


def test_an_unusable_private_folder_is_an_output_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkdtemp", refuse)
    with pytest.raises(
        OutputError, match="^cannot make a private directory for the SLURM_HOSTFILE in /r, /t, /tmp: "
    ):
        private_hostfile(["gs1"], {"XDG_RUNTIME_DIR": "/r", "TMPDIR": "/t"}, memory=False)


@pytest.mark.parametrize(
    "text, counts",
    [("15,1", [15, 1]), ("8(x2)", [8, 8]), ("2(x3),1", [2, 2, 2, 1]), ("", None), ("2(x", None), ("a", None)],
)
def test_tasks_per_node_is_read_as_slurm_writes_it(text: str, counts: list[int] | None) -> None:
    assert parse_tasks_per_node(text) == counts


def _slurm_runs(counts: list[int]) -> str:
    """Slurm's own run-length form of a per-node list (``uint32_compressed_to_str``): ``8(x2),1``."""
    parts, i = [], 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(parts)


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=60))
def test_tasks_per_node_reads_back_every_list_slurm_can_write(counts: list[int]) -> None:
    assert parse_tasks_per_node(_slurm_runs(counts)) == counts


def test_tasks_per_node_longer_than_any_cluster_is_refused_unexpanded() -> None:
    """A repeat count past every Slurm's node limit is malformed: nothing is expanded (no 10^9-entry list)."""
    assert parse_tasks_per_node(f"8(x{MAX_TASK_NODES})") == [8] * MAX_TASK_NODES
    assert parse_tasks_per_node(f"8(x{MAX_TASK_NODES}),1") is None
    assert parse_tasks_per_node("8(x1000000000)") is None


def test_slurm_tasks_per_node_caps_the_ranks_of_each_node(tmp_path: Path) -> None:
    """--ntasks-per-node=2 --exclusive on two 8-GPU nodes: --tp 1 puts two ranks on each node, as srun
    would, not four on the first; inside a step (SLURM_STEP_ID) or for another job the layout is unknown."""
    env = {"SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_JOB_NODELIST": "gs[1-2]"}
    assert [r.node for r in plan(["--tp", "1"], slurm(tmp_path), **env).rows] == ["gs1", "gs1", "gs2", "gs2"]
    inside = plan(["--tp", "1"], slurm(tmp_path), SLURM_STEP_ID="0", **env)
    assert [r.node for r in inside.rows] == ["gs1"] * 4
    for batch in ("-5", "4294967294"):  # the batch script's step: 26.05, older releases
        rows = plan(["--tp", "1"], slurm(tmp_path), SLURM_STEP_ID=batch, **env).rows
        assert [r.node for r in rows] == ["gs1", "gs1", "gs2", "gs2"]


def test_too_few_tasks_per_node_is_one_clear_line(tmp_path: Path) -> None:
    """22.05 spreads -n16 over two nodes as 15 + 1: --tp 4 --dp 4 needs two groups on gs2 (one task)."""
    env = {"SLURM_NTASKS": "16", "SLURM_TASKS_PER_NODE": "15,1", "SLURM_JOB_NODELIST": "gs[1-2]"}
    with pytest.raises(InputError) as err:
        plan(["--tp", "4"], slurm(tmp_path), **env)
    assert str(err.value) == (
        "4 TP groups (--pp 1 × --dp 4) of 4 GPUs do not fit: the allocation holds 2 "
        "(gs1: 2 (8 GPUs, 15 tasks); "
        "gs2: 0 (8 GPUs, 1 task)); a TP group needs 4 tasks of one node and Slurm gave gs2 fewer: "
        "allocate with --ntasks-per-node"
    )


def test_the_step_asks_for_every_gpu_of_the_nodes_it_uses(tmp_path: Path) -> None:
    """A --gpus=N job refuses a step on fewer nodes that names no GPUs: the step says --gpus=<the used nodes'
    GPUs>, and the job's GPU variables leave srun's environment (TRES lists keep their other entries)."""
    env = {"SLURM_NTASKS": "16", "SLURM_TASKS_PER_NODE": "15,1", "SLURM_JOB_NODELIST": "gs[1-2]"}
    p = plan(["--tp", "4", "--pp", "2", "--dp", "1"], slurm(tmp_path), **env)
    assert {r.node for r in p.rows} == {"gs1"} and "--gpus=8" in p.argv
    assert {"SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_TRES_PER_TASK"} <= set(
        p.unset_env
    )
    both = plan(["--tp", "4"], slurm(tmp_path))
    assert "--gpus=16" in both.argv
    own = plan(["--tp", "4", "--gres=gpu:8"], slurm(tmp_path))
    assert not any(a.startswith("--gpus=") for a in own.argv) and "SLURM_GPUS" not in own.unset_env
    out = srun.options.without_gpu_tres(
        {"SLURM_TRES_PER_TASK": "cpu=4,gres/gpu=1", "SLURM_TRES_BIND": "gres/gpu:per_task:1", "X": "1"},
        p.unset_env,
    )
    assert out == {"SLURM_TRES_PER_TASK": "cpu=4", "X": "1"}


# ---- exec srun


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)


FAKE_SCONTROL = f"""import sys
answers = {{"job": {JOB!r}, "config": "SLURM_VERSION = 22.05.8\\n", "topology": {TOPOLOGY!r}}}
if sys.argv[2] not in answers:
    sys.exit(1)
sys.stdout.write(answers[sys.argv[2]])
"""
FAKE_SRUN = """import json, os, subprocess, sys
# -m arbitrary: task i runs on line i of SLURM_HOSTFILE; the task is everything after srun's options
argv = sys.argv[1:]
start = argv.index("slurm_topo.plumbing.srun_shim") - 2
hosts = open(os.environ["SLURM_HOSTFILE"]).read().splitlines()
out = [subprocess.run(argv[start:], env={**os.environ, "SLURM_PROCID": str(i), "SLURMD_NODENAME": h},
                      capture_output=True, text=True, check=True).stdout for i, h in enumerate(hosts)]
keep = ("SLURM_NTASKS_PER_NODE", "SLURM_DISTRIBUTION", "KEEP_ME")
json.dump({"argv": argv[:start], "tasks": out, "env": {k: os.environ.get(k) for k in keep}},
          open(os.environ["REPORT"], "w"))
sys.exit(7)
"""


def test_exec_runs_srun_with_the_plan(tmp_path: Path) -> None:
    """srun replaces gpulayer-srun: its exit status (7) is the command's, the variables that contradict the
    plan are gone, and each task's shim binds the GPUs of its row (--tp 4 on two 8-GPU nodes, no link data:
    the lowest indices first)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "scontrol", FAKE_SCONTROL)
    _script(bin_dir / "srun", FAKE_SRUN)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_TOPO_SLURM_BACKEND": "text",
        "SLURM_JOB_ID": "42",
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
        "TMPDIR": str(tmp_path),
        "REPORT": str(tmp_path / "report.json"),
        "SLURM_NTASKS_PER_NODE": "8",
        "SLURM_DISTRIBUTION": "block",
        "KEEP_ME": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),  # the slurm_topo this test imported
    }
    cmd = ["sh", "-c", 'echo "$RANK $CUDA_VISIBLE_DEVICES $LOCAL_RANK"']
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo.srun", "--tp", "4", "--explain", "-l", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.startswith("gpulayer-srun: job 42: 16 ranks = tp 4 × pp 1 × dp 4")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["argv"] == ["-m", "arbitrary", "-n", "16", "--gpus=16", "-l"]
    assert report["env"] == {"SLURM_NTASKS_PER_NODE": None, "SLURM_DISTRIBUTION": None, "KEEP_ME": "1"}
    groups = ["0,1,2,3", "4,5,6,7"] * 2
    assert report["tasks"] == [f"{r} {groups[r // 4]} {r % 4}\n" for r in range(16)]


def test_srun_that_cannot_be_started_is_exit_3(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "scontrol", FAKE_SCONTROL)
    env = {
        "PATH": str(bin_dir),  # scontrol, no srun
        "SLURM_TOPO_SLURM_BACKEND": "text",
        "SLURM_JOB_ID": "42",
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo.srun", "--tp", "8", "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 3
    assert (
        proc.stderr.splitlines()[-1]
        == "gpulayer-srun: error: srun could not be started: No such file or directory"
    )
    assert not list(tmp_path.glob("*host*"))  # in memory: nothing on disk, before or after


@pytest.mark.parametrize(
    "opts", [["-I60", "-N", "2"], ["-koff", "-N", "2"], ["-K1", "-N", "2"], ["-vK", "-N2"]]
)
def test_an_attached_optional_value_does_not_hide_the_next_option(opts: list[str]) -> None:
    """-I, -k and -K take an optional value attached to the letter (srun --help): the next token is an
    option of its own, so a refused one after them is still found."""
    with pytest.raises(InputError, match=r"-N \(-N/--nodes\) conflicts with the plan"):
        check_srun_options(opts)


@pytest.mark.parametrize(
    ("opt", "named"),
    [
        ("--distrib=block", "--distribution"),
        ("--gpu-b=none", "--gpu-bind"),
        ("--nodel=a1", "--nodelist"),
        ("--ntasks-per-n=2", "--ntasks-per-node"),
    ],
)
def test_an_abbreviated_refused_option_is_refused(opt: str, named: str) -> None:
    """srun accepts any unambiguous abbreviation of a long option (getopt_long): ``--distrib=block`` is
    ``--distribution=block``, which the plan decides."""
    with pytest.raises(InputError, match="conflicts with the plan") as err:
        check_srun_options([opt])
    assert named in str(err.value)


@pytest.mark.parametrize("opt", ["--gpus=8", "--gpus-per-node=8", "--mem=1G", "--nodefile=x"])
def test_other_long_options_pass(opt: str) -> None:
    """Options that are not an abbreviation of a refused name pass (``--gpus`` is not ``--gpu-bind``)."""
    check_srun_options([opt])
