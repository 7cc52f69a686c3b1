"""`sbatch --locality=...` end to end on the filtered cluster (docker-slurm/cluster up --with-filter): the
SPANK plugin takes the option, job_submit/lua runs slurm_topo_filter/ on the generated data file, and every
assertion is about Slurm's own record of the job (scontrol show job) and its allocation.

Fleet (docker-slurm/fleet-filter.yaml): us-east-1a n01-n04 (racks a1: n01-n03, a2: n04), us-east-1b n05-n06,
us-west-2a n07-n09 (racks c1: n07-n08, c2: n09), us-west-2b n10-n11, us-west-2c n12.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

SLEEP = "sleep 300"
ZONE_3 = ("[zone_us-west-2a|zone_us-east-1a]", "[ng_us-east-1a.rack-a1|zone_us-west-2a|zone_us-east-1a]")
"""A zone -N3 job's constraint and the --prefer the filter adds (finer groups inside those zones first): a
running job shows in Features= the one it started with."""


def zones_of(features: dict[str, tuple[str, ...]], prefix: str = "zone_") -> dict[str, set[str]]:
    zones: dict[str, set[str]] = {}
    for node, feats in features.items():
        for f in feats:
            if f.startswith(prefix):
                zones.setdefault(f, set()).add(node)
    return zones


def groups_touched(nodes: set[str], groups: dict[str, set[str]]) -> set[str]:
    return {g for g, members in groups.items() if members & nodes}


def block(slurm: slurmctl.Slurm, *nodes: str) -> list[str]:
    """Exclusive sleepers pinned to ``nodes`` (--locality=any: the filter leaves them alone); waits until
    running."""
    jobs = [slurm.submit("--exclusive", "-w", n, "--locality=any", "--wrap", SLEEP) for n in nodes]
    for j in jobs:
        slurm.wait_state(j, "RUNNING")
    return jobs


def sbatch(slurm: slurmctl.Slurm, *args: str, timeout: int = 20):
    """sbatch --parsable under timeout, returning the CompletedProcess (exit code and stderr are asserted)."""
    return slurm.run(
        ["timeout", str(timeout), "sbatch", "--parsable", "-o", "/dev/null", *args],
        timeout=timeout + 5,
        check=False,
    )


def test_required_zone_keeps_one_zone_pends_while_none_has_room_and_starts_when_one_frees(
    fslurm: slurmctl.Slurm,
) -> None:
    """--locality=zone -N3: with at most 2 free nodes per zone (9 free in all) a plain -N3 job spans zones at
    once, the zone job pends; when us-east-1a gets a third free node it starts there."""
    zones = zones_of(fslurm.all_node_features())
    assert zones["zone_us-east-1a"] == {"n01", "n02", "n03", "n04"}
    blockers = block(fslurm, "n01", "n02", "n07")  # free: n03 n04 | n05 n06 | n08 n09 | n10 n11 | n12

    control = fslurm.submit("--exclusive", "-N3", "--locality=any", "--wrap", SLEEP)
    fslurm.wait_state(control, "RUNNING")
    assert len(groups_touched(set(fslurm.allocation_of(control).nodes), zones)) > 1, "control must span zones"
    fslurm.cancel(control)
    fslurm.wait_state(control, "CANCELLED")

    job = fslurm.submit("--exclusive", "-N3", "--locality=zone", "--wrap", SLEEP)
    info = fslurm.wait_state(job, "PENDING")
    assert info["Features"] == "[zone_us-west-2a|zone_us-east-1a]", info["Features"]
    # Slurm's own word that its scheduler tried the job (a new job's Reason is None until an attempt sets it)
    # and found no zone with room: no zone has 3 free nodes, so the zone job must wait (Resources, or Priority
    # from the main scheduler's second queue record of a job with --prefer: slurmctl.NO_ROOM_YET)
    fslurm.wait_state(job, "PENDING", reason=slurmctl.NO_ROOM_YET)

    fslurm.cancel(blockers[0])  # n01 frees: us-east-1a has n01 n03 n04
    fslurm.wait_state(job, "RUNNING", timeout=30)
    nodes = set(fslurm.allocation_of(job).nodes)
    assert len(nodes) == 3 and nodes <= zones["zone_us-east-1a"], sorted(nodes)


def test_fail_on_impossible_size_is_rejected_with_level_request_and_largest_group(
    fslurm: slurmctl.Slurm,
) -> None:
    p = sbatch(fslurm, "-N5", "--locality=zone:fail", "--wrap", "true")
    assert p.returncode != 0, p.stdout
    assert "sbatch: error: slurm-topo: --locality=zone:fail: no zone can ever hold 5 nodes" in p.stderr, (
        p.stderr
    )
    assert "the largest is us-east-1a with 4 nodes" in p.stderr, p.stderr
    assert fslurm.out("squeue", "-h").strip() == ""


def test_wait_on_impossible_size_is_accepted_and_held_with_the_reason_shown(fslurm: slurmctl.Slurm) -> None:
    p = sbatch(fslurm, "-N5", "--locality=zone:wait", "--wrap", "true")
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip().split(";")[0]
    assert "no zone can ever hold 5 nodes; the largest is us-east-1a with 4 nodes" in p.stderr, p.stderr
    assert "the job is held" in p.stderr, p.stderr
    info = fslurm.wait_state(job, "PENDING")
    assert info["Priority"] == "0"
    # Slurm 22.05 records a priority-0 job from job_submit as a user hold (JobHeldUser), not JobHeldAdmin
    assert info["Reason"] in ("JobHeldUser", "JobHeldAdmin"), info["Reason"]
    record = fslurm.out("scontrol", "show", "job", job)
    assert "AdminComment=slurm-topo: zone:wait: held; the largest is us-east-1a with 4 nodes" in record


def test_prefer_never_waits_and_lands_in_one_region_when_no_zone_has_room(fslurm: slurmctl.Slurm) -> None:
    """Default locality (prefer): nothing required, so a -N3 job runs across zones while no zone can take it,
    at once, and in one region: the cascade's unions of one region's zones (then its region alternatives)
    can start where no rack or zone can — here us-west-2b + 2c, the fewest zones the free nodes allow."""
    feats = fslurm.all_node_features()
    zones, regions = zones_of(feats), zones_of(feats, "region_")
    block(fslurm, "n01", "n02", "n07")
    job = fslurm.submit("--exclusive", "-N3", "--wrap", SLEEP)
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    cascade = "[ng_us-east-1a.rack-a1|zone_us-west-2a|zone_us-east-1a|(zone_us-west-2b|zone_us-west-2c)|"
    shown = fslurm.out("scontrol", "show", "job", job)
    # 22.05 shows the prefer string it used as Features
    assert f"Prefer={cascade}" in shown or info["Features"].startswith(cascade), shown
    assert "slurm-topo: prefer network_group+zone+region+unions [us-east-1a/rack-a1(3n)," in shown
    nodes = set(fslurm.allocation_of(job).nodes)
    assert len(groups_touched(nodes, zones)) == 2 and len(groups_touched(nodes, regions)) == 1, sorted(nodes)
    # never held back: started within one scheduler pass of its submission (sched_interval=5; Slurm's own
    # timestamps, whole seconds)
    waited = datetime.fromisoformat(info["StartTime"]) - datetime.fromisoformat(info["SubmitTime"])
    assert waited.total_seconds() <= 5, (info["SubmitTime"], info["StartTime"])


def test_prefer_larger_than_every_network_group_is_accepted_and_runs(fslurm: slurmctl.Slurm) -> None:
    job = fslurm.submit("--exclusive", "-N4", "--locality=prefer", "--wrap", SLEEP)
    fslurm.wait_state(job, "RUNNING", timeout=15)
    assert "slurm-topo: prefer zone+region+unions [us-east-1a(4n),us-west-2a+us-west-2c(4n)," in fslurm.out(
        "scontrol", "show", "job", job
    )
    assert set(fslurm.allocation_of(job).nodes) == {"n01", "n02", "n03", "n04"}, (
        "idle cluster: the preferred zone"
    )


def test_any_leaves_the_job_unchanged(fslurm: slurmctl.Slurm) -> None:
    job = fslurm.submit("--exclusive", "-N3", "--locality=any", "--wrap", SLEEP)
    info = fslurm.wait_state(job, "RUNNING")
    assert info["Features"] == "(null)"
    assert info.get("AdminComment") == "slurm-topo: any"  # the whole record (squeue --json)
    assert "AdminComment=slurm-topo: any " in fslurm.out("scontrol", "show", "job", "-o", job)


def test_bogus_locality_is_refused_by_sbatch_itself(fslurm: slurmctl.Slurm) -> None:
    for args in (["--locality=bogus"], ["--locality=zone:later"], ["--locality-regions=us-west,,x"]):
        p = sbatch(fslurm, *args, "--wrap", "true")
        assert p.returncode != 0
        assert "sbatch: error: --locality" in p.stderr, p.stderr
    p = sbatch(fslurm, "--locality=bogus", "--wrap", "true")
    assert "prefer|nvl|network_group|zone|region|any" in p.stderr, p.stderr
    assert fslurm.out("squeue", "-h").strip() == ""


def test_sbatch_directive_in_the_script_works(fslurm: slurmctl.Slurm, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --locality=zone\n#SBATCH -N3 --exclusive\nsleep 300\n")
    job = fslurm.submit(str(script))
    info = fslurm.wait_state(job, "RUNNING")
    assert info["Features"] in ZONE_3, info["Features"]
    nodes = set(fslurm.allocation_of(job).nodes)
    assert any(nodes <= z for z in zones_of(fslurm.all_node_features()).values()), sorted(nodes)


def test_salloc_and_srun_take_the_option(fslurm: slurmctl.Slurm) -> None:
    """An srun allocation gets the same decision (the SPANK option travels in its spank_job_env too)."""
    p = fslurm.run(
        ["timeout", "30", "srun", "--exclusive", "-N2", "--locality=network_group:fail", "hostname"],
        timeout=35,
    )
    hosts = set(p.stdout.split())
    racks = zones_of(fslurm.all_node_features(), prefix="ng_")
    assert len(hosts) == 2 and any(hosts <= r for r in racks.values()), (hosts, p.stderr)
    p = fslurm.run(
        [
            "timeout",
            "30",
            "salloc",
            "--exclusive",
            "-N2",
            "--locality=zone",
            "sh",
            "-c",
            "echo $SLURM_JOB_NODELIST",
        ],
        timeout=35,
    )
    nodes = set(fslurm.hostnames(p.stdout.strip().splitlines()[-1]))
    assert len(nodes) == 2 and any(nodes <= z for z in zones_of(fslurm.all_node_features()).values()), p


def test_user_or_constraint_with_parentheses_is_composed_and_accepted(fslurm: slurmctl.Slurm) -> None:
    """-C '(ib|eth)&nvme' --locality=zone: the filter writes '(ib|eth)&nvme&[zone_...]'; Slurm 22.05 accepts
    it and puts all 3 nodes on nvme nodes of one zone (only us-east-1a has 3)."""
    job = fslurm.submit("--exclusive", "-N3", "--locality=zone", "-C", "(ib|eth)&nvme", "--wrap", SLEEP)
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    assert info["Features"].startswith("(ib|eth)&nvme&[") and info["Features"].endswith(
        "|zone_us-east-1a]"
    ), info["Features"]
    feats = fslurm.all_node_features()
    nodes = set(fslurm.allocation_of(job).nodes)
    assert nodes == {"n01", "n02", "n03"}, sorted(nodes)
    assert all("nvme" in feats[n] for n in nodes)

    # a plain OR is parenthesised before the bracket: (ib|eth)&[...]
    job2 = fslurm.submit("--exclusive", "-N2", "--locality=zone", "-C", "ib|eth", "--wrap", SLEEP)
    info = fslurm.wait_state(job2, "RUNNING", timeout=15)
    assert info["Features"].startswith("(ib|eth)&[") and "|zone_" in info["Features"], info["Features"]
    nodes2 = set(fslurm.allocation_of(job2).nodes)
    assert any(nodes2 <= z for z in zones_of(feats).values()), sorted(nodes2)


def test_locality_regions_keeps_nodes_in_that_region(fslurm: slurmctl.Slurm) -> None:
    job = fslurm.submit("--exclusive", "-N4", "--locality-regions=us-west", "--wrap", SLEEP)
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    # features = region_us-west, prefer = region_us-west&[region_us-west]; 22.05 shows the prefer string it
    # used
    assert info["Features"].startswith("region_us-west"), info["Features"]
    nodes = set(fslurm.allocation_of(job).nodes)
    assert len(nodes) == 4 and nodes <= {"n07", "n08", "n09", "n10", "n11", "n12"}, sorted(nodes)
    p = sbatch(fslurm, "--locality-regions=mars", "--wrap", "true")
    assert p.returncode != 0 and "'mars' is not a region or zone of this cluster" in p.stderr, p.stderr


def test_messages_say_what_the_user_typed_and_what_happens(fslurm: slurmctl.Slurm) -> None:
    """nvl:auto is refused with advice for nvl itself; --locality=nvl on a fleet without NVLink domains is
    refused at submit (no size can ever fit), never held; zone:auto without --time is accepted and says on
    stderr that it waits as zone:wait. What Slurm holds is read back (squeue)."""
    p = sbatch(fslurm, "-N1", "--locality=nvl:auto", "--wrap", "true")
    assert p.returncode != 0 and "--locality=nvl:auto: an NVLink domain has no looser level" in p.stderr, p
    p = sbatch(fslurm, "-N2", "--locality=nvl", "--wrap", "true")
    assert p.returncode != 0, p
    assert "no node of the partition is in an NVLink domain; no size can ever fit" in p.stderr, p.stderr
    p = sbatch(fslurm, "-N2", "--hold", "--locality=zone:auto", "--wrap", "true")  # held: read as submitted
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip().split(";")[0]
    assert (
        "--locality=zone:auto: no time limit (give --time), so no budget: the job waits as zone:wait"
        in p.stderr
    )
    features = fslurm.out("squeue", "-h", "-j", job, "-o", "%f").strip()
    assert features.startswith("[zone_"), features
    fslurm.cancel(job)
