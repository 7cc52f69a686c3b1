"""gpulayer-srun with expert and context parallelism (issue 46, item 4) on real Slurm with fake GPUs: two
nodes of 8 GPUs in two NVLink islands of 4 (tests/fixtures/synthetic/islands-2x4-nv18.txt). Every task prints
what Slurm gave it (``SLURM_PROCID``, ``SLURMD_NODENAME``, ``CUDA_VISIBLE_DEVICES``, ``LOCAL_RANK``); the job
also prints the plan (``--dry-run``) in the same allocation. Asserted:

* each rank ran where the plan's table says, with its ``CUDA_VISIBLE_DEVICES`` and ``LOCAL_RANK`` (bound as
  planned);
* the expert-parallel groups, computed here from Megatron-LM's rule (world = tp·cp·dp·pp, expert ranks
  ``rank = etp + TP·(ep + EP·(edp + EDP·pp))`` over ``tp-cp-ep-dp-pp``) and not from the plan, each ran on
  one node inside one NVLink island of the capture, where one island can hold them; the CP groups too.
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
ISLANDS = ({0, 1, 2, 3}, {4, 5, 6, 7})  # the capture's NV18 islands
HW = {
    "CPUs": 16,
    "Boards": 1,
    "SocketsPerBoard": 2,
    "CoresPerSocket": 8,
    "ThreadsPerCore": 1,
    "RealMemory": 64000,
}
PRINT = "echo rank=$SLURM_PROCID node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK"
LINE_RE = re.compile(r"^rank=(\d+) node=(\S+) cvd=(\S*) local=(\S*)$", re.MULTILINE)
ROW_RE = re.compile(r"^(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\d+)\s", re.MULTILINE)


def _launcher() -> str:
    if os.environ.get("SLURM_TOPO_SLURM", "native") != "native":
        return "gpulayer-srun"
    cand = Path(sys.executable).parent / "gpulayer-srun"
    return str(cand if cand.exists() else REPO / ".venv" / "bin" / "gpulayer-srun")


@pytest.fixture(scope="module")
def moe_cluster(scratch_cluster) -> Iterator[tuple[slurmctl.Slurm, Path]]:  # type: ignore[no-untyped-def]
    node = {"region": "r1", "zone": "r1-a", "gpu_type": "h100", "gpu_topology": str(CAPTURE), "slurm": HW}
    with scratch_cluster(
        "srun-moe", {"nodes": [{"name": "gs[1-2]", "network_group": "rack-1", **node}]}
    ) as c:
        yield c.slurm, c.base.parent


def _run(slurm: slurmctl.Slurm, work: Path, name: str, args: str) -> str:
    """A batch job on gs[1-2] (8 tasks, 8 GPUs each) that prints the plan, then runs it."""
    slurm.quiesce()
    script, out = work / f"{name}.sh", work / f"{name}.out"
    out.unlink(missing_ok=True)
    launcher = _launcher()
    script.write_text(
        "#!/bin/bash\n"
        f"timeout 60 {launcher} {args} --dry-run -- true\n"
        f"timeout 60 {launcher} {args} -- /bin/sh -c '{PRINT}'\n"
        "echo rc=$?\n"
    )
    job = slurm.submit(
        "-o", str(out), "-t", "2", "-w", "gs[1-2]", "-N2", "--ntasks-per-node=8", "--gres=gpu:8", str(script)
    )
    try:
        slurm.wait_state(job, "COMPLETED", timeout=90)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{out.read_text() if out.exists() else ''}") from None
    return out.read_text()


def megatron_groups(
    world: int, tp: int, cp: int, ep: int, pp: int
) -> tuple[list[list[int]], list[list[int]]]:
    """(EP groups, CP groups) as Megatron-LM's RankGenerator forms them for order tp-cp-ep-dp-pp: the dense
    generator has sizes tp, cp, dp = world/(tp·cp·pp), pp; the expert one tp, ep, edp = world/(tp·ep·pp), pp.
    A group of dimension X: the ranks that agree on every other coordinate."""

    def groups(sizes: list[tuple[str, int]], dim: str) -> list[list[int]]:
        out: dict[tuple[int, ...], list[int]] = {}
        for rank in range(world):
            coord, r = [], rank
            for name, size in sizes:
                coord.append((name, r % size))
                r //= size
            key = tuple(v for n, v in coord if n != dim)
            out.setdefault(key, []).append(rank)
        return list(out.values())

    dp, edp = world // (tp * cp * pp), world // (tp * ep * pp)
    ep_groups = groups([("tp", tp), ("ep", ep), ("dp", edp), ("pp", pp)], "ep")
    cp_groups = groups([("tp", tp), ("cp", cp), ("dp", dp), ("pp", pp)], "cp")
    return ep_groups, cp_groups


@pytest.mark.parametrize(
    "name, tp, cp, ep, pp",
    [
        ("ep4", 1, 1, 4, 1),  # 16 ranks: 4 EP groups of 4, each one island
        ("ep4cp2pp2", 1, 2, 4, 2),  # dp 4, edp 2 per stage: EP groups of 4 GPUs, CP pairs inside them
        ("tp2ep2", 2, 1, 2, 1),  # EP groups of 2 TP groups: 4 GPUs, one island
    ],
)
def test_ep_and_cp_plans_bind_as_planned_with_expert_groups_in_one_island(
    moe_cluster: tuple[slurmctl.Slurm, Path], name: str, tp: int, cp: int, ep: int, pp: int
) -> None:
    slurm, work = moe_cluster
    text = _run(slurm, work, name, f"--tp {tp} --cp {cp} --ep {ep} --pp {pp}")
    assert "rc=0" in text, text
    ran = {int(m[1]): (m[2], m[3], m[4]) for m in LINE_RE.finditer(text)}
    world = 16
    assert sorted(ran) == list(range(world)), text
    planned = {int(m[1]): (m[2], m[3], m[4]) for m in ROW_RE.finditer(text)}
    assert planned == ran, text  # rank -> node, CUDA_VISIBLE_DEVICES, LOCAL_RANK: as the plan said
    ep_groups, cp_groups = megatron_groups(world, tp, cp, ep, pp)
    for group in ep_groups + cp_groups:
        nodes = {ran[r][0] for r in group}
        gpus = {int(x) for r in group for x in ran[r][1].split(",")}
        assert len(nodes) == 1, (group, ran)
        assert any(gpus <= island for island in ISLANDS), (group, gpus, text)
    assert "expert-parallel group" not in text, text  # no warning: every group fits an island


def test_an_ep_group_larger_than_an_island_runs_with_one_warning(
    moe_cluster: tuple[slurmctl.Slurm, Path],
) -> None:
    """EP 8 of one-GPU ranks: no island of the capture holds 8 GPUs, so each group takes one whole node (both
    islands) and the launcher says so in one line."""
    slurm, work = moe_cluster
    text = _run(slurm, work, "ep8", "--tp 1 --ep 8")
    assert "rc=0" in text, text
    ran = {int(m[1]): (m[2], m[3], m[4]) for m in LINE_RE.finditer(text)}
    ep_groups, _ = megatron_groups(16, 1, 1, 8, 1)
    for group in ep_groups:
        assert len({ran[r][0] for r in group}) == 1, (group, ran)
    warnings = [line for line in text.splitlines() if "expert-parallel group" in line]
    assert len(warnings) == 2 and all(w.startswith("gpulayer-srun: warning: --ep 8") for w in warnings), text
