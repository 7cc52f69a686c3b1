"""The filter fails open: slurmctld restarts and accepts jobs (unchanged) with the data file missing,
truncated or broken, and picks the restored file up again. A family bucket keeps one torch version and one
zone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm


def _accepts_unchanged(slurm: slurmctl.Slurm) -> None:
    """The job passes unchanged, and never silently: its submitter reads that the locality was not enforced
    (sbatch's stderr) and its AdminComment records why."""
    p = slurm.run(
        [
            "timeout",
            "20",
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "--exclusive",
            "-N3",
            "--locality=zone",
            "--wrap",
            "sleep 300",
        ],
        timeout=25,
    )
    job = p.stdout.strip().split(";")[0]
    assert "slurm-topo: --locality=zone NOT enforced: data file " in p.stderr, p.stderr
    info = slurm.wait_state(job, "RUNNING", timeout=15)
    assert info["Features"] == "(null)", "without usable data the job must pass unchanged"
    assert info["AdminComment"].startswith("slurm-topo: not applied: data file "), info["AdminComment"]
    slurm.cancel(job)
    slurm.wait_state(job, "CANCELLED")


def test_slurmctld_restarts_and_accepts_jobs_with_missing_truncated_or_broken_data(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    data = filtered_cluster.etc / "slurm_topo_data.lua"
    good = data.read_bytes()
    header = good.split(b"\n", 1)[0]
    assert header.startswith(b"-- slurm-topo-data ")
    variants = {
        "missing": None,
        "truncated": good[: len(good) // 2],
        "broken": header + b"\nreturn { fingerprint = ,,, }\n",
        # one character of the content changed, header and checksum line intact: never loaded
        "edited": good.replace(b'"zone_us-east-1a"', b'"zone_us-east-1U"', 1),
    }
    try:
        for name, content in variants.items():
            if content is None:
                data.unlink()
            else:
                data.write_bytes(content)
            slurmctl.restart_ctld(filtered_cluster.base)
            try:
                _accepts_unchanged(fslurm)
            except AssertionError as e:
                raise AssertionError(f"data file {name}: {e}") from e
        log = (filtered_cluster.base / "log" / "slurmctld.log").read_text(errors="replace")
        assert "missing or without its header line; jobs pass unchanged" in log
        assert "fails its checksum" in log
    finally:
        data.write_bytes(good)
        slurmctl.restart_ctld(filtered_cluster.base)
    job = fslurm.submit("--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
    # the zone bracket, or the --prefer the filter adds inside it (a running job shows what it started with)
    assert fslurm.wait_state(job, "RUNNING", timeout=15)["Features"] in (
        "[zone_us-west-2a|zone_us-east-1a]",
        "[ng_us-east-1a.rack-a1|zone_us-west-2a|zone_us-east-1a]",
    )


FAMILY_FLEET = {
    "policy": {"families": {"torch": "torch-*"}},
    "nodes": [
        {"name": "t[1-2]", "region": "r1", "zone": "r1-a", "network_group": "g1", "features": ["torch-2.3"]},
        {"name": "t[3-5]", "region": "r1", "zone": "r1-a", "network_group": "g2", "features": ["torch-2.4"]},
        {"name": "t[6-8]", "region": "r1", "zone": "r1-b", "network_group": "g3", "features": ["torch-2.4"]},
    ],
}
for _entry in FAMILY_FLEET["nodes"]:
    _entry["slurm"] = {"CPUs": 4, "RealMemory": 8000}


def test_family_bucket_keeps_one_torch_version_and_one_zone(tmp_path: Path) -> None:
    """policy.families {torch: 'torch-*'}: zone r1-a mixes torch-2.3 (t1 t2) and torch-2.4 (t3-t5). With t3
    and t6 busy, r1-a still has 4 free nodes, but only 2 of one torch version: the -N3 zone job waits, then
    runs on t6-t8 (r1-b, torch-2.4) once t6 frees."""
    inventory = tmp_path / "families.yaml"
    inventory.write_text(yaml.safe_dump(FAMILY_FLEET))
    base = Path(f"/tmp/slurm-topo-it3-{os.getpid()}")
    try:
        cluster = slurmctl.start_cluster(base, "--with-filter", "--inventory", str(inventory), nodes_max=9)
        slurm = cluster.slurm
        feats = slurm.all_node_features()
        assert "zone_r1-a.torch-2.4" in feats["t3"], feats["t3"]
        blockers = [
            slurm.submit("--exclusive", "-w", n, "--locality=any", "--wrap", "sleep 300")
            for n in ("t3", "t6")
        ]
        for b in blockers:
            slurm.wait_state(b, "RUNNING")
        job = slurm.submit("--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
        info = slurm.wait_state(job, "PENDING")
        assert info["Features"] == "[zone_r1-a.torch-2.4|zone_r1-b.torch-2.4]", info["Features"]
        # tried by the scheduler (Reason None -> Resources, or Priority: slurmctl.NO_ROOM_YET) and still
        # pending: r1-a has 4 free nodes but no 3 of one torch version
        slurm.wait_state(job, "PENDING", reason=slurmctl.NO_ROOM_YET)
        slurm.cancel(blockers[1])
        slurm.wait_state(job, "RUNNING", timeout=30)
        nodes = set(slurm.allocation_of(job).nodes)
        assert nodes == {"t6", "t7", "t8"}, sorted(nodes)
        assert len({f for n in nodes for f in feats[n] if f.startswith("torch-")}) == 1
    finally:
        slurmctl.stop_cluster(base)
    assert slurmctl.cluster_pids(base) == []
