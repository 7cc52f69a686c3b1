"""gpulayer-srun in each form of allocation Slurm hands out (issue 46): ``--gpus=N`` for the job,
``--gpus-per-node``, ``--gres=gpu:N``, ``--ntasks-per-node`` with ``--exclusive``, an ``--overlap`` step
beside a running one, and an allocation with too few tasks per node (refused in one line). Every assertion
is on what Slurm ran: each task prints its ``SLURMD_NODENAME``, ``CUDA_VISIBLE_DEVICES`` and the step's
``SLURM_STEP_GPUS``, and the job prints its ``SLURM_TASKS_PER_NODE``; never the plan's prediction. The
SLURM_HOSTFILE leaves no file: the job's ``$TMPDIR`` (with files at the old predictable names made first by
another user) is the same after the step.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
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
PRINT = "echo rank=$SLURM_PROCID node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES step=$SLURM_STEP_GPUS"
LINE_RE = re.compile(r"rank=(\d+) node=(\S+) cvd=(\S*) step=(\S*)")


def _launcher() -> str:
    if os.environ.get("SLURM_TOPO_SLURM", "native") != "native":
        return "gpulayer-srun"
    cand = Path(sys.executable).parent / "gpulayer-srun"
    return str(cand if cand.exists() else REPO / ".venv" / "bin" / "gpulayer-srun")


@pytest.fixture(scope="module")
def forms_cluster(scratch_cluster) -> Iterator[tuple[slurmctl.Slurm, Path]]:  # type: ignore[no-untyped-def]
    """gs1, gs2: 8 GPUs each (two NVLink islands of 4), 16 CPUs."""
    node = {"region": "r1", "zone": "r1-a", "gpu_type": "h100", "gpu_topology": str(CAPTURE), "slurm": HW}
    with scratch_cluster(
        "srun-forms", {"nodes": [{"name": "gs[1-2]", "network_group": "rack-1", **node}]}
    ) as c:
        yield c.slurm, c.base.parent


def _numbers(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x}


def _job(slurm: slurmctl.Slurm, work: Path, name: str, sbatch: list[str], body: str) -> tuple[str, str, dict]:
    """Run ``body`` as a batch job with squatters in its TMPDIR; return (output, job id, GPUs per node)."""
    slurm.quiesce()
    tmp = work / f"{name}.tmp"
    tmp.mkdir(mode=0o755, exist_ok=True)
    for squat in ("gpulayer-srun-1.hosts", "gpulayer-srun-", "hosts"):
        path = tmp / squat
        path.mkdir(exist_ok=True)
        os.chown(path, 65534, 65534)  # another user took the predictable names first
    before = sorted(p.name for p in tmp.iterdir())
    script, out = work / f"{name}.sh", work / f"{name}.out"
    out.unlink(missing_ok=True)
    script.write_text(
        f"#!/bin/bash\nexport TMPDIR={tmp}\n"
        f"echo tasks=$SLURM_TASKS_PER_NODE nodes=$SLURM_JOB_NODELIST\n{body}\n"
        "echo rc=$?\n"
    )
    job = slurm.submit("-o", str(out), "-t", "2", "-w", "gs[1-2]", "-N2", *sbatch, str(script))
    try:
        slurm.wait_state(job, "RUNNING", timeout=30)
        alloc = slurm.allocation_of(job)
        slurm.wait_state(job, "COMPLETED", timeout=90)
    except AssertionError as e:
        raise AssertionError(f"{e}\njob output:\n{out.read_text() if out.exists() else ''}") from None
    assert sorted(p.name for p in tmp.iterdir()) == before, "a SLURM_HOSTFILE was left behind"
    return out.read_text(), job, alloc.gpus


def _gsrun(args: str) -> str:
    return f"timeout 60 {_launcher()} {args} -- /bin/sh -c '{PRINT}'"


def _check(
    slurm: slurmctl.Slurm, text: str, gpus: dict, ranks: int, tp: int
) -> list[tuple[int, str, str, str]]:
    """What Slurm ran: ``ranks`` tasks, srun's exit 0, no node with more ranks than Slurm's tasks there, each
    TP group on one node and one CUDA_VISIBLE_DEVICES inside the step's GPUs there, which are all of the
    job's GPUs on that node."""
    assert "rc=0" in text, text
    rows = sorted((int(m[1]), m[2], m[3], m[4]) for m in LINE_RE.finditer(text))
    assert [r[0] for r in rows] == list(range(ranks)), text
    m = re.search(r"tasks=(\S+) nodes=(\S+)", text)
    assert m, text
    counts = []
    for part in m[1].split(","):
        n, _, times = part.partition("(x")
        counts += [int(n)] * (int(times.rstrip(")")) if times else 1)
    per_node = dict(zip(slurm.hostnames(m[2]), counts, strict=True))
    for node, used in Counter(r[1] for r in rows).items():
        assert used <= per_node[node], (node, used, per_node, text)
    for g in range(ranks // tp):
        group = rows[tp * g : tp * g + tp]
        assert len({r[1] for r in group}) == 1 and len({r[2] for r in group}) == 1, group
    for _, node, cvd, step in rows:
        assert _numbers(cvd) <= _numbers(step) == set(gpus[node]), (node, cvd, step, gpus)
    return rows


def test_gpus_per_job_on_a_subset_of_the_nodes(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """``-N2 -n16 --gpus=16``, a plan on one node (tp 4 × pp 2): srun refused the step before ("Invalid
    generic resource (gres) specification"); now it runs on the node Slurm gave the most tasks."""
    slurm, work = forms_cluster
    text, _, gpus = _job(slurm, work, "gpus16", ["-n16", "--gpus=16"], _gsrun("--tp 4 --pp 2 --dp 1"))
    rows = _check(slurm, text, gpus, 8, 4)
    assert len({r[1] for r in rows}) == 1, rows
    assert "Invalid generic resource" not in text and "Unspecified error" not in text, text


def test_gpus_per_job_on_every_node(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    slurm, work = forms_cluster
    text, _, gpus = _job(slurm, work, "gpus16all", ["--ntasks-per-node=8", "--gpus=16"], _gsrun("--tp 4"))
    rows = _check(slurm, text, gpus, 16, 4)
    assert Counter(r[1] for r in rows) == {"gs1": 8, "gs2": 8}


def test_gpus_per_node_on_one_node(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    slurm, work = forms_cluster
    text, _, gpus = _job(
        slurm, work, "gpn", ["--ntasks-per-node=8", "--gpus-per-node=8"], _gsrun("--tp 4 --dp 2")
    )
    _check(slurm, text, gpus, 8, 4)


def test_gres_per_node(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    slurm, work = forms_cluster
    text, _, gpus = _job(slurm, work, "gres", ["--ntasks-per-node=8", "--gres=gpu:8"], _gsrun("--tp 8"))
    rows = _check(slurm, text, gpus, 16, 8)
    assert Counter(r[1] for r in rows) == {"gs1": 8, "gs2": 8}


@pytest.mark.parametrize(
    "name, sbatch, per_node",
    [
        ("excl2", ["--ntasks-per-node=2", "--exclusive"], 2),
        ("excl1", ["--ntasks-per-node=1", "--gres=gpu:1", "--exclusive"], 1),
    ],
)
def test_exclusive_follows_slurm_s_tasks_per_node(
    forms_cluster: tuple[slurmctl.Slurm, Path], name: str, sbatch: list[str], per_node: int
) -> None:
    """``--tp 1`` put every rank on the first node before, leaving the other idle; now each node runs the
    tasks Slurm gave it, as ``srun hostname`` does."""
    slurm, work = forms_cluster
    text, _, gpus = _job(slurm, work, name, sbatch, _gsrun("--tp 1"))
    rows = _check(slurm, text, gpus, 2 * per_node, 1)
    assert Counter(r[1] for r in rows) == {"gs1": per_node, "gs2": per_node}, rows


def test_overlap_step_beside_a_running_one(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """A step holding a task on each node runs on; gpulayer-srun ``--overlap`` starts beside it."""
    slurm, work = forms_cluster
    body = "timeout 60 srun -N2 -n2 --overlap sleep 15 &\nsleep 2\n" + _gsrun("--overlap --tp 4 --dp 2")
    text, _, gpus = _job(slurm, work, "overlap", ["--ntasks-per-node=8", "--gres=gpu:8"], body)
    _check(slurm, text, gpus, 8, 4)


def test_too_few_tasks_per_node_is_refused_in_one_line(forms_cluster: tuple[slurmctl.Slurm, Path]) -> None:
    """``--gres=gpu:8`` without a task count: one task per node; ``--tp 4`` is refused before srun."""
    slurm, work = forms_cluster
    text, _, _ = _job(slurm, work, "few", ["--gres=gpu:8"], _gsrun("--tp 4"))
    errors = [line for line in text.splitlines() if line.startswith("gpulayer-srun: error: ")]
    assert len(errors) == 1 and "allocate with --ntasks-per-node" in errors[0], text
    assert "rc=2" in text and not LINE_RE.search(text), text
