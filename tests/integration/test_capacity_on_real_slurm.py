"""`slurm-topo capacity` on the node states a real Slurm prints (docker-slurm/fleet.yaml, 12 nodes):

* n01 runs a job on 3 of its 8 GPUs (MIXED; ``scontrol -d show node -o`` says ``GresUsed=gpu:h100:3(IDX:…)``),
* n04 runs an exclusive job (ALLOCATED),
* n12 is drained (IDLE+DRAIN),

so whole 8-GPU nodes are free only in rack-a1 (n02, n03). Slurm's own view (``scontrol -d show node``) is
asserted first; the expected counts are derived by hand from the fleet in the comments."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

FLEET = Path(__file__).resolve().parents[2] / "docker-slurm/fleet.yaml"


def capacity(source: list[str], *shapes: str, env: dict[str, str] | None = None) -> dict[str, object]:
    argv = [*slurmctl.slurm_topo_cli(), "capacity", "-i", str(FLEET), *source, "--json"]
    for shape in shapes:
        argv += ["--shape", shape]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def jobs(data: dict[str, object], shape: str) -> dict[str, int]:
    for s in data["shapes"]:  # type: ignore[attr-defined]
        if s["shape"] == shape:
            return {lv["level"]: lv["jobs"] for lv in s["levels"]}
    raise AssertionError(shape)


def test_capacity_reads_slurms_node_states(slurm: slurmctl.Slurm, tmp_path: Path) -> None:
    part = slurm.submit("-N1", "-w", "n01", "--gres=gpu:h100:3", "--wrap", "sleep 300")
    whole = slurm.submit("-N1", "-w", "n04", "--exclusive", "--wrap", "sleep 300")
    slurm.wait_state(part, "RUNNING")
    slurm.wait_state(whole, "RUNNING")
    slurm.out("scontrol", "update", "NodeName=n12", "State=DRAIN", "Reason=capacity test")
    try:
        detail = slurm.out("scontrol", "-d", "show", "node", "-o")
        plain = slurm.out("scontrol", "show", "node", "-o")
        live = capacity(["--scontrol"], "1x8", "2x8", "1x4", "3x4", env=dict(slurm.env))
    finally:
        slurm.out("scontrol", "update", "NodeName=n12", "State=RESUME")
    by_node = {line.split()[0]: line for line in detail.splitlines() if line.startswith("NodeName=")}
    assert "State=MIXED" in by_node["NodeName=n01"] and "GresUsed=gpu:h100:3(IDX:" in by_node["NodeName=n01"]
    assert "State=ALLOCATED" in by_node["NodeName=n04"]
    assert "DRAIN" in by_node["NodeName=n12"]
    (tmp_path / "detail.txt").write_text(detail)
    (tmp_path / "plain.txt").write_text(plain)

    data = capacity(["--nodes-from", str(tmp_path / "detail.txt")], "1x8", "2x8", "1x4", "3x4")
    assert live == data  # --scontrol asks with -d too
    # 8-GPU fleet: 4 × h100 (8) = 32, 8 × a100 (4) = 32 GPUs; taken: 3 on n01, 8 on n04; n12 (4) drained
    assert data["total_gpus"] == 64 and data["free_gpus"] == 64 - 3 - 8 - 4
    assert data["nodes"] == {"free": 9, "allocated": 2, "drained": 1, "unknown": 0}
    # whole 8-GPU nodes free: n02, n03 (rack-a1)
    assert jobs(data, "1x8") == {"network_group": 2, "zone": 2, "region": 2, "any": 2}
    assert jobs(data, "2x8") == {"network_group": 1, "zone": 1, "region": 1, "any": 1}
    # GPU slots for 4-GPU jobs: n01 1 (5 left), n02 n03 2 each, n05-n11 1 each; n04 busy, n12 drained
    assert jobs(data, "1x4") == {"network_group": 12, "zone": 12, "region": 12, "any": 12}
    # 3 nodes × 4: rack-a1 [1,2,2] -> 1; zones: us-east-1a 1 + us-west-2a [1,1,1] 1; regions: us-east
    # [1,2,2,1,1] -> 2 + us-west [1,1,1,1,1] -> 1; anywhere: 12 slots on 10 nodes -> 4
    assert jobs(data, "3x4") == {"network_group": 1, "zone": 2, "region": 3, "any": 4}

    # without -d, a MIXED node's GPU use is known only from AllocTRES (gres/gpu when accounted): else none of
    # its GPUs counts as free
    plain_data = capacity(["--nodes-from", str(tmp_path / "plain.txt")], "1x4")
    n01_plain = next(line for line in plain.splitlines() if line.startswith("NodeName=n01 "))
    expected = 49 if "gres/gpu=3" in n01_plain else 49 - 5
    assert plain_data["free_gpus"] == expected
