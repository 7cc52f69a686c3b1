"""A topology.conf regenerated from a changed inventory + `scontrol reconfigure` moves the next job."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

APPLIED = ("topology.conf", "slurm-topo-nodes.conf")
MERGED_GROUP = "merged-it"


@pytest.fixture
def restore_generated_files(slurm_cluster: slurmctl.Cluster) -> Iterator[None]:
    """Put the session cluster's original files back (and reconfigure) after the test."""
    saved = {name: (slurm_cluster.etc / name).read_bytes() for name in APPLIED}
    yield
    slurm = slurm_cluster.slurm
    slurm.quiesce()
    for name, data in saved.items():
        (slurm_cluster.etc / name).write_bytes(data)
    slurm.reconfigure(slurm_cluster.version)
    restored = slurm.parse_switch_lines(saved["topology.conf"].decode())
    assert set(slurm.topology()) == set(restored), "original topology not restored"


def regenerate(cluster: slurmctl.Cluster, inventory: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    inv = out / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory, sort_keys=False))
    argv = [
        *slurmctl.slurm_topo_cli(),
        "generate",
        "--inventory",
        str(inv),
        "--out",
        str(out / "generated"),
        "--slurm-version",
        "{}.{:02d}".format(*cluster.version),
    ]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=dict(cluster.env))
    assert p.returncode == 0, f"{argv}: {p.stderr}{p.stdout}"
    return out / "generated"


def test_merging_a_zone_into_one_new_network_group_makes_a_switches_1_job_use_it(
    slurm_cluster: slurmctl.Cluster, slurm: slurmctl.Slurm, restore_generated_files: None, tmp_path: Path
) -> None:
    """Moving all nodes of the largest multi-leaf zone into a new network group gives Slurm a new leaf
    after reconfigure, and an exclusive `--switches=1` job of that size lands exactly on it."""
    inventory = yaml.safe_load((slurm_cluster.etc / "inventory.yaml").read_text())
    groups: dict[str, set[str]] = {}
    for node in inventory["nodes"]:
        groups.setdefault(node["zone"], set()).add(node.get("network_group", ""))
    zone = max(
        (z for z, g in groups.items() if len(g) >= 2),
        key=lambda z: sum(n["zone"] == z for n in inventory["nodes"]),
    )
    moved = {n["name"] for n in inventory["nodes"] if n["zone"] == zone}
    before = slurm.topology()
    assert max(len(s.nodes) for s in before.values() if s.level == 0) < len(moved), (
        "precondition: no leaf is as large as the zone yet"
    )

    for node in inventory["nodes"]:
        if node["name"] in moved:
            node["network_group"] = MERGED_GROUP
    generated = regenerate(slurm_cluster, inventory, tmp_path)
    for name in APPLIED:
        shutil.copyfile(generated / name, slurm_cluster.etc / name)
    slurm.reconfigure(slurm_cluster.version)

    after = slurm.topology()
    assert after != before
    new_leaves = [s for s in after.values() if s.level == 0 and s.nodes == moved]
    assert len(new_leaves) == 1, f"no leaf with exactly {sorted(moved)} in {after}"
    assert new_leaves[0].name not in before
    for node in moved:  # the regenerated node lines (new ng_ feature) were re-read too
        assert any(MERGED_GROUP in f for f in slurm.node_features(node) if f.startswith("ng_")), node

    job = slurm.submit("--exclusive", f"-N{len(moved)}", "--switches=1", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    assert set(slurm.allocation_of(job).nodes) == moved
