"""gpulayer-srun on real Slurm: what each task printed (host, CUDA_VISIBLE_DEVICES, LOCAL_RANK), not the
plan.

A small extra cluster (4 nodes, 8 fake GPUs each, two leaf switches) whose gres.conf is the generator's from
the synthetic capture islands-2x4-nv18 (two NVLink islands, GPUs 0-3 and 4-7). Every task runs
``sh -c 'echo rank=… node=… cvd=… local=…'`` through the shim. The cluster has no cgroups, so indices are
global.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
HW = {
    "CPUs": 16,
    "Boards": 1,
    "SocketsPerBoard": 2,
    "CoresPerSocket": 8,
    "ThreadsPerCore": 1,
    "RealMemory": 64000,
}
ISLANDS = ({0, 1, 2, 3}, {4, 5, 6, 7})
PRINT = "echo rank=$SLURM_PROCID node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK"
LINE_RE = re.compile(r"rank=(\d+) node=(\S+) cvd=(\S*) local=(\S*)")


def _launcher() -> str:
    """The gpulayer-srun a job of the current release runs: the checkout's (the venv's) on the host's Slurm;
    inside a Debian root (``--slurm X.Y``, where the host's venv does not exist) the root's own
    ``gpulayer-srun`` on its PATH, which runs this checkout (bound read-only there) with the root's Python."""
    if os.environ.get("SLURM_TOPO_SLURM", "native") != "native":
        return "gpulayer-srun"
    cand = Path(sys.executable).parent / "gpulayer-srun"
    return str(cand if cand.exists() else REPO / ".venv" / "bin" / "gpulayer-srun")


@pytest.fixture(scope="module")
def srun_cluster(scratch_cluster) -> Iterator[tuple[slurmctl.Slurm, Path]]:  # type: ignore[no-untyped-def]
    """gs1, gs2 on leaf rack-1 and gs3, gs4 on leaf rack-2; gres.conf Links= from the capture."""
    node = {"region": "r1", "zone": "r1-a", "gpu_type": "h100", "gpu_topology": str(CAPTURE), "slurm": HW}
    with scratch_cluster(
        "srun",
        {
            "nodes": [
                {"name": "gs[1-2]", "network_group": "rack-1", **node},
                {"name": "gs[3-4]", "network_group": "rack-2", **node},
            ]
        },
    ) as cluster:
        yield cluster.slurm, cluster.base.parent


def _run_job(
    slurm: slurmctl.Slurm, work: Path, name: str, sbatch_args: list[str], body: str
) -> list[tuple[int, str, str, str]]:
    """Submit ``body`` as a batch script, wait for it to complete, return the tasks' lines sorted by rank."""
    slurm.quiesce()
    script = work / f"{name}.sh"
    out = work / f"{name}.out"
    out.unlink(missing_ok=True)
    script.write_text(
        f"#!/bin/bash\nset -e\nexport TMPDIR={work}  # the SLURM_HOSTFILE goes away with the work dir\n"
        f"{body}\n"
    )
    job = slurm.submit("-o", str(out), "-t", "2", *sbatch_args, str(script))
    try:
        slurm.wait_state(job, "COMPLETED", timeout=60)
    except AssertionError as e:
        text = out.read_text() if out.exists() else "(no output)"
        raise AssertionError(f"{e}\njob output:\n{text}") from None
    text = out.read_text()
    rows = [(int(m[1]), m[2], m[3], m[4]) for m in LINE_RE.finditer(text)]
    return sorted(rows)


def _gsrun(args: str, tag: str = "") -> str:
    return f"timeout 60 {_launcher()} {args} -- /bin/sh -c '{tag}{PRINT}'"


def test_tp4_on_two_nodes_binds_each_group_to_one_island(srun_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    slurm, work = srun_cluster
    rows = _run_job(
        slurm, work, "tp4", ["-N2", "-w", "gs[1-2]", "--ntasks-per-node=8", "--gres=gpu:8"], _gsrun("--tp 4")
    )
    assert [r[0] for r in rows] == list(range(16)), rows
    groups: dict[str, list[set[int]]] = {}
    for g in range(4):
        members = rows[4 * g : 4 * g + 4]
        nodes = {r[1] for r in members}
        cvds = {r[2] for r in members}
        assert len(nodes) == 1 and len(cvds) == 1, members  # one node, the same CUDA_VISIBLE_DEVICES
        gpus = [int(x) for x in cvds.pop().split(",")]
        assert len(gpus) == 4 and set(gpus) in ISLANDS, members  # one NVLink island per the generated Links
        assert [r[3] for r in members] == ["0", "1", "2", "3"]  # LOCAL_RANK = TP rank
        groups.setdefault(nodes.pop(), []).append(set(gpus))
    assert sorted(groups) == ["gs1", "gs2"]
    for node, sets in groups.items():
        assert len(sets) == 2 and not sets[0] & sets[1], (node, sets)  # the two groups on a node are disjoint
    assert "span NVLink islands" not in (work / "tp4.out").read_text()  # every group inside one island


def test_tp4_pp3_dp_peers_of_a_stage_take_the_same_local_gpus(
    srun_cluster: tuple[slurmctl.Slurm, Path],
) -> None:
    """--tp 4 --pp 3 on three 8-GPU nodes (dp 2): what each task printed shows every stage's two replicas
    on one node, or on the same local GPUs of two nodes (one rail each); each pipeline changes node once."""
    slurm, work = srun_cluster
    rows = _run_job(
        slurm,
        work,
        "tp4pp3",
        ["-N3", "-w", "gs[1-3]", "--ntasks-per-node=8", "--gres=gpu:8"],
        _gsrun("--tp 4 --pp 3 --order tp-pp-dp"),
    )
    assert [r[0] for r in rows] == list(range(24)), rows
    # --order tp-pp-dp: rank = tp + 4·(pp + 3·dp); a stage's replicas are the groups pp and pp + 3
    groups = [(rows[4 * g][1], rows[4 * g][2]) for g in range(6)]
    for stage in range(3):
        (n0, c0), (n1, c1) = groups[stage], groups[stage + 3]
        assert n0 == n1 or c0 == c1, (stage, groups)
    for d in range(2):
        pipe = [groups[3 * d + s][0] for s in range(3)]
        assert sum(a != b for a, b in zip(pipe, pipe[1:], strict=False)) == 1, (d, groups)


def test_tp8_pp2_keeps_pipelines_in_one_leaf(srun_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    slurm, work = srun_cluster
    leaf = {node: sw.name for sw in slurm.topology().values() if sw.level == 0 for node in sw.nodes}
    rows = _run_job(
        slurm, work, "tp8pp2", ["-N4", "--ntasks-per-node=8", "--gres=gpu:8"], _gsrun("--tp 8 --pp 2")
    )
    assert [r[0] for r in rows] == list(range(32)), rows
    node_of = {r[0]: r[1] for r in rows}
    for g in range(4):
        assert len({node_of[r] for r in range(8 * g, 8 * g + 8)}) == 1, (
            rows
        )  # ranks 0-7 (and each TP group) on one node
        assert {r[2] for r in rows[8 * g : 8 * g + 8]} == {"0,1,2,3,4,5,6,7"}
    # Megatron order tp-cp-ep-dp-pp: rank = tp + 8·(dp + 2·pp); pipeline dp = stages at ranks 8·dp and
    # 8·dp + 16
    for dp in range(2):
        first, second = node_of[8 * dp], node_of[8 * dp + 16]
        assert first != second and leaf[first] == leaf[second], (dp, first, second, leaf)
    # hostname order would have put stage 1 of pipeline 0 on gs3, in the other leaf
    assert leaf["gs1"] != leaf["gs3"]
    # a TP group of 8 on islands of 4 (the cluster's own gres.conf Links=): said once, on stderr
    text = (work / "tp8pp2.out").read_text()
    assert text.count("span NVLink islands") == 1, text
    assert (
        "gpulayer-srun: warning: --tp 8: TP groups of 8 GPUs span NVLink islands on gs[1-4] (largest island "
        "there: 4 GPUs)" in text
    ), text


def test_uneven_tasks_per_node_hostname_order_splits_tp_group_gpulayer_does_not(
    srun_cluster: tuple[slurmctl.Slurm, Path],
) -> None:
    """3 nodes with 4 task slots and 4 GPUs each, 8 ranks: plain ``srun -n 8`` (block distribution in hostname
    order, spread over the job's 3 nodes: 3+3+2) puts a TP group of 4 on two nodes. gpulayer-srun --tp 4
    --dp 2 keeps both groups whole, one node each."""
    slurm, work = srun_cluster
    body = "\n".join(
        [
            f"timeout 60 srun -n 8 /bin/sh -c 'echo plain {PRINT}'",
            _gsrun("--tp 4 --dp 2", tag="echo planned "),
        ]
    )
    out_rows: dict[str, list[tuple[int, str, str, str]]] = {"plain": [], "planned": []}
    slurm.quiesce()
    script = work / "split.sh"
    out = work / "split.out"
    out.unlink(missing_ok=True)
    script.write_text(
        f"#!/bin/bash\nset -e\nexport TMPDIR={work}  # the SLURM_HOSTFILE goes away with the work dir\n"
        f"{body}\n"
    )
    job = slurm.submit(
        "-o", str(out), "-t", "2", "-N3", "-w", "gs[1-3]", "--ntasks-per-node=4", "--gres=gpu:4", str(script)
    )
    try:
        slurm.wait_state(job, "COMPLETED", timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{out.read_text() if out.exists() else ''}") from None
    for line in out.read_text().splitlines():
        m = LINE_RE.search(line)
        if m:
            out_rows[line.split()[0]].append((int(m[1]), m[2], m[3], m[4]))
    plain = dict((r[0], r[1]) for r in out_rows["plain"])
    assert len(plain) == 8
    split = [g for g in range(2) if len({plain[r] for r in range(4 * g, 4 * g + 4)}) > 1]
    assert split, plain  # hostname order splits a TP group across nodes
    planned = sorted(out_rows["planned"])
    assert [r[0] for r in planned] == list(range(8)), planned
    for g in range(2):
        members = planned[4 * g : 4 * g + 4]
        assert len({r[1] for r in members}) == 1 and len({r[2] for r in members}) == 1, members
        assert len(members[0][2].split(",")) == 4
    assert planned[0][1] != planned[4][1]  # one group per node


def test_different_gpu_indices_across_nodes_warn(srun_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """A job holding GPUs 0-3 of gs1 first: the next job's 4 GPUs on gs1 are other indices than on gs2
    (Slurm's own view, ``scontrol show job -d``), and gpulayer-srun says so once, on stderr, with each
    node's set."""
    slurm, work = srun_cluster
    slurm.quiesce()
    holder = slurm.submit("-N1", "-w", "gs1", "-n1", "--gres=gpu:4", "--wrap", "sleep 120")
    slurm.wait_state(holder, "RUNNING")
    held = set(slurm.allocation_of(holder).gpus["gs1"])
    assert len(held) == 4
    script, out = work / "rails.sh", work / "rails.out"
    out.unlink(missing_ok=True)
    script.write_text(f"#!/bin/bash\nset -e\nexport TMPDIR={work}\nsleep 5\n{_gsrun('--tp 4')}\n")
    job = slurm.submit(
        "-o", str(out), "-t", "2", "-N2", "-w", "gs[1-2]", "--ntasks-per-node=4", "--gres=gpu:4", str(script)
    )
    slurm.wait_state(job, "RUNNING")
    gpus = slurm.allocation_of(job).gpus
    try:
        slurm.wait_state(job, "COMPLETED", timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{out.read_text() if out.exists() else ''}") from None
    finally:
        slurm.cancel(holder)
    assert not set(gpus["gs1"]) & held and gpus["gs1"] != gpus["gs2"], gpus  # Slurm's view
    text = out.read_text()

    def span(idx: tuple[int, ...]) -> str:
        return (
            f"{idx[0]}-{idx[-1]}"
            if list(idx) == list(range(idx[0], idx[-1] + 1))
            else ",".join(map(str, idx))
        )

    expected = f"(gs1: {span(gpus['gs1'])}; gs2: {span(gpus['gs2'])})"
    assert text.count("GPU indices differ across nodes") == 1, text
    assert f"gpulayer-srun: warning: the allocation's GPU indices differ across nodes {expected}" in text, (
        text
    )
    assert len(LINE_RE.findall(text)) == 8, text  # and the job still ran its 8 ranks


def test_later_node_takes_the_same_local_gpus_as_the_first(srun_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """A job holding 4 GPUs of gs1 first; the next job asks 12 GPUs on gs1 and gs2, so Slurm gives it gs1's 4
    others and all 8 of gs2 (``scontrol show job -d``). With --tp 4 --dp 3 the first group on gs2 takes the
    same local GPUs as gs1's group (one whole island either way), so DP replicas 0 and 1 sit on the same
    rails; gs2's other island is replica 2. What each task printed says so."""
    slurm, work = srun_cluster
    slurm.quiesce()
    holder = slurm.submit("-N1", "-w", "gs1", "-n1", "--gres=gpu:4", "--wrap", "sleep 120")
    slurm.wait_state(holder, "RUNNING")
    held = set(slurm.allocation_of(holder).gpus["gs1"])
    script, out = work / "same_rails.sh", work / "same_rails.out"
    out.unlink(missing_ok=True)
    script.write_text(f"#!/bin/bash\nset -e\nexport TMPDIR={work}\nsleep 5\n{_gsrun('--tp 4 --dp 3')}\n")
    job = slurm.submit(
        "-o", str(out), "-t", "2", "-N2", "-w", "gs[1-2]", "--ntasks-per-node=8", "--gpus=12", str(script)
    )
    try:
        slurm.wait_state(job, "RUNNING")
        gpus = slurm.allocation_of(job).gpus
        slurm.wait_state(job, "COMPLETED", timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{out.read_text() if out.exists() else ''}") from None
    finally:
        slurm.cancel(holder)
    # Slurm's view: gs1's other four GPUs (one island), all eight of gs2
    assert set(gpus["gs1"]) in ISLANDS and not set(gpus["gs1"]) & held and len(gpus["gs2"]) == 8, gpus
    text = out.read_text()
    rows = sorted((int(m[1]), m[2], m[3], m[4]) for m in LINE_RE.finditer(text))
    assert [r[0] for r in rows] == list(range(12)), text
    # default order tp-cp-ep-dp-pp: rank = tp + 4·dp
    replicas = {d: {(r[1], r[2]) for r in rows[4 * d : 4 * d + 4]} for d in range(3)}
    assert all(len(v) == 1 for v in replicas.values()), replicas
    (n0, c0), (n1, c1), (n2, c2) = (replicas[d].pop() for d in range(3))
    first = {int(x) for x in c0.split(",")}
    assert n0 == "gs1" and first == set(gpus["gs1"]), (n0, c0, gpus)
    assert n1 == "gs2" and {int(x) for x in c1.split(",")} == first, (n1, c1)  # the same local GPUs
    assert n2 == "gs2" and {int(x) for x in c2.split(",")} | first == set(range(8)), (n2, c2)


@pytest.fixture(scope="module")
def nvl_cluster(scratch_cluster) -> Iterator[tuple[slurmctl.Slurm, Path]]:  # type: ignore[no-untyped-def]
    """The same four nodes with NVLink domains across the leaves: rack-01 = gs1 + gs3, rack-02 = gs2 + gs4
    (an NVL rack whose trays hang off two InfiniBand leaves); the nodes carry nvl_rack-0N features."""
    node = {"region": "r1", "zone": "r1-a", "gpu_type": "h100", "gpu_topology": str(CAPTURE), "slurm": HW}
    nodes = [
        {"name": "gs1", "network_group": "rack-1", "nvlink_domain": "rack-01", **node},
        {"name": "gs2", "network_group": "rack-1", "nvlink_domain": "rack-02", **node},
        {"name": "gs3", "network_group": "rack-2", "nvlink_domain": "rack-01", **node},
        {"name": "gs4", "network_group": "rack-2", "nvlink_domain": "rack-02", **node},
    ]
    with scratch_cluster("srun-nvl", {"nvlink": {"topology": "tree"}, "nodes": nodes}) as cluster:
        yield cluster.slurm, cluster.base.parent


def test_tp8_pp2_keeps_pipelines_in_one_nvlink_domain(nvl_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """With domains, a pipeline's stages share an NVLink domain (here across the leaves) rather than a leaf,
    and gpulayer-srun suggests --segment=2."""
    slurm, work = nvl_cluster
    rows = _run_job(
        slurm, work, "nvl-tp8pp2", ["-N4", "--ntasks-per-node=8", "--gres=gpu:8"], _gsrun("--tp 8 --pp 2")
    )
    assert [r[0] for r in rows] == list(range(32)), rows
    node_of = {r[0]: r[1] for r in rows}
    domain = {"gs1": "rack-01", "gs3": "rack-01", "gs2": "rack-02", "gs4": "rack-02"}
    for dp in range(2):  # rank = tp + 8·(dp + 2·pp): stages of pipeline dp at ranks 8·dp and 8·dp + 16
        first, second = node_of[8 * dp], node_of[8 * dp + 16]
        assert first != second and domain[first] == domain[second], (dp, first, second)
    text = (work / "nvl-tp8pp2.out").read_text()
    assert "hint: each pipeline takes 2 nodes; submit with --segment=2" in text, text
