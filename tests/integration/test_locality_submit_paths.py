"""Submit paths of the locality filter on a real Slurm 22.05 (the filtered test cluster, docker-slurm/cluster
up
--with-filter): a partition the data file does not know, and what Slurm records for the job.

The data file of the test cluster is generated from the inventory alone (no partitions), as the README's
install step does; the cluster's partition is ``main`` (Nodes=ALL, Default=YES).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

ZONE_3 = ("[zone_us-west-2a|zone_us-east-1a]", "[ng_us-east-1a.rack-a1|zone_us-west-2a|zone_us-east-1a]")
"""A zone -N3 job's constraint and the --prefer the filter adds (finer groups inside those zones first): a
running job shows in Features= the one it started with."""


def test_named_partition_unknown_to_the_data_still_gets_its_bracket(fslurm: slurmctl.Slurm) -> None:
    """`sbatch -p main --locality=zone -N3`: 'main' is not in the data file, which then counts every node; the
    job gets the zone bracket and the record says why (it was a silent no-op)."""
    job = fslurm.submit("-p", "main", "--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    assert info["Features"] in ZONE_3, info["Features"]
    record = fslurm.out("scontrol", "show", "job", "-o", job)
    assert "partition 'main' not in the data: all nodes counted" in record, record
    zones = {}
    for node, feats in fslurm.all_node_features().items():
        for f in feats:
            if f.startswith("zone_"):
                zones.setdefault(f, set()).add(node)
    nodes = set(fslurm.allocation_of(job).nodes)
    assert any(nodes <= members for members in zones.values()), sorted(nodes)
    p = fslurm.run(
        ["timeout", "20", "sbatch", "-p", "main", "-N5", "--locality=zone:fail", "--wrap", "true"],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0 and "no zone can ever hold 5 nodes" in p.stderr, p.stderr


USER = "nobody"


def as_user(slurm: slurmctl.Slurm, *argv: str, timeout: int = 20) -> subprocess.CompletedProcess[str]:
    """A client command run as ``nobody`` (the owner of its jobs), under a timeout: ``Slurm.as_user``."""
    return slurm.as_user(*argv, timeout=timeout, user=USER)


def log_since(cluster: slurmctl.Cluster, offset: int) -> str:
    return (cluster.base / "log" / "slurmctld.log").read_bytes()[offset:].decode(errors="replace")


def log_size(cluster: slurmctl.Cluster) -> int:
    return (cluster.base / "log" / "slurmctld.log").stat().st_size


def user_submit(slurm: slurmctl.Slurm, *args: str) -> tuple[str, str]:
    p = as_user(slurm, "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().split(";")[0], p.stderr


def test_owner_resizes_a_held_job_and_it_runs_in_one_zone(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    """The documented path, as a non-root owner: a held `--locality=zone -N5` job cannot be released by its
    owner (refused quietly), but `scontrol update NumNodes=3` re-plans it, and it runs inside one zone.
    Nothing of this writes an `error:` line to slurmctld.log (no admin_comment from a non-admin, no log_user
    in job_modify)."""
    start = log_size(filtered_cluster)
    job, said = user_submit(fslurm, "--exclusive", "-N5", "--locality=zone", "--wrap", "sleep 300")
    assert "no zone can ever hold 5 nodes" in said and "JobHeldUser" in said and "resize it" in said, said
    info = fslurm.wait_state(job, "PENDING")
    assert (info["Priority"], info["Reason"], info["UserId"].split("(")[0]) == ("0", "JobHeldUser", USER), (
        info
    )

    p = as_user(fslurm, "scontrol", "release", job)
    assert p.returncode != 0, "the owner's release of a filter hold must be refused"
    assert fslurm.job(job)["Priority"] == "0"

    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "NumNodes=3")
    assert p.returncode == 0, p.stderr
    info = fslurm.wait_state(job, "RUNNING", timeout=20)
    assert info["Features"] in ZONE_3, info
    nodes = set(fslurm.allocation_of(job).nodes)
    zones = zones_of(fslurm)
    assert len(nodes) == 3 and any(nodes <= z for z in zones.values()), sorted(nodes)
    log = log_since(filtered_cluster, start)
    assert slurmctl.log_errors(log) == [], slurmctl.log_errors(log)
    assert f"update of job {job} by uid" in log


def zones_of(slurm: slurmctl.Slurm) -> dict[str, set[str]]:
    zones: dict[str, set[str]] = {}
    for node, feats in slurm.all_node_features().items():
        for f in feats:
            if f.startswith("zone_"):
                zones.setdefault(f, set()).add(node)
    return zones


def test_owner_cannot_strip_a_required_bracket(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    """A pending (user-held) `--comment=locality=zone` job of a non-root owner: `Features=` (empty) and a new
    constraint get the zone bracket again; `Comment=locality=any` is refused; an unset --contiguous is not
    read as set; an administrator's update rewrites the record."""
    start = log_size(filtered_cluster)
    job, _ = user_submit(fslurm, "-H", "-N2", "--comment=locality=zone", "--wrap", "sleep 300")
    bracket = "[zone_us-east-1b|zone_us-west-2b|zone_us-west-2a|zone_us-east-1a]"
    assert fslurm.wait_state(job, "PENDING")["Features"] == bracket

    assert as_user(fslurm, "scontrol", "update", f"JobId={job}", "Features=").returncode == 0
    assert fslurm.job(job)["Features"] == bracket, "an owner's empty Features= must not strip the bracket"
    assert as_user(fslurm, "scontrol", "update", f"JobId={job}", "Features=nvme").returncode == 0
    assert fslurm.job(job)["Features"].startswith("nvme&[zone_"), fslurm.job(job)["Features"]
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "Comment=locality=any", "Features=")
    assert p.returncode != 0, "the locality is fixed at submit for the owner"
    info = fslurm.job(job)
    assert info["Comment"] == "locality=zone" and info["Features"].startswith("nvme&[zone_"), info
    assert info["Priority"] == "0", "the owner's own hold stays"

    fslurm.out(
        "scontrol", "update", f"JobId={job}", "NumNodes=1"
    )  # an administrator: the record is rewritten
    record = fslurm.out("scontrol", "show", "job", "-o", job)
    assert "AdminComment=slurm-topo: zone:wait [" in record and "--contiguous" not in record, record
    log = log_since(filtered_cluster, start)
    assert slurmctl.log_errors(log) == [] and "_job_env_field" not in log, slurmctl.log_errors(log)


@pytest.mark.parametrize("client", ["salloc", "srun"])
def test_interactive_allocation_no_zone_can_hold_fails_at_once(fslurm: slurmctl.Slurm, client: str) -> None:
    """`salloc/srun --locality=zone -N5` (default :wait): an interactive allocation is rejected at once with
    the reason, instead of being held with a terminal blocked."""
    p = fslurm.run(["timeout", "20", client, "-N5", "--locality=zone", "true"], timeout=25, check=False)
    assert p.returncode not in (0, 124), (p.returncode, p.stderr)
    assert "no zone can ever hold 5 nodes" in p.stderr and "interactive allocation does not wait" in p.stderr
    assert fslurm.out("squeue", "-h").strip() == ""


def test_the_same_request_as_batch_and_interactive_gets_each_its_own_decision(fslurm: slurmctl.Slurm) -> None:
    """The filter remembers decisions by request shape (job_submit/README.md, "Cost per submission"): the same
    impossible `--locality=zone -N5` request is held as a batch job, rejected at once as an allocation right
    after, and held again as a batch job (slurmctld's own view of each)."""
    held = []
    for client in ("sbatch", "salloc", "sbatch"):
        argv = [client, "-N5", "--locality=zone"] + (
            ["--parsable", "--wrap", "true"] if client == "sbatch" else ["true"]
        )
        p = fslurm.run(["timeout", "20", *argv], timeout=25, check=False)
        if client == "salloc":
            assert p.returncode not in (0, 124), (p.returncode, p.stderr)
            assert "interactive allocation does not wait" in p.stderr, p.stderr
            continue
        assert p.returncode == 0 and "the job is held" in p.stderr, p.stderr
        held.append(p.stdout.strip().split(";")[0])
    for job in held:
        info = fslurm.job(job)
        assert info["JobState"] == "PENDING" and info["Priority"] == "0", info
    assert sorted(fslurm.out("squeue", "-h", "-o", "%i").split()) == sorted(held)
    fslurm.cancel(*held)


def test_messages_name_the_real_problem(fslurm: slurmctl.Slurm) -> None:
    """An unknown `-C` feature is said to be unknown (Slurm then rejects it as invalid), not blamed on the
    node
    count or held; a bad locality value in the comment is refused like the option, without Slurm's "Node count
    specification invalid"."""
    p = fslurm.run(
        [
            "timeout",
            "20",
            "sbatch",
            "-o",
            "/dev/null",
            "-C",
            "nosuch",
            "--locality=zone",
            "-N3",
            "--wrap",
            "true",
        ],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0
    assert "no node of this cluster has the feature 'nosuch'" in p.stderr, p.stderr
    assert "Invalid feature specification" in p.stderr, p.stderr
    assert "held" not in p.stderr and "largest" not in p.stderr, p.stderr
    for args in (["--comment=locality=zone:"], ["--comment=locality=bogus"]):
        p = fslurm.run(
            ["timeout", "20", "sbatch", "-o", "/dev/null", *args, "-N2", "--wrap", "true"],
            timeout=25,
            check=False,
        )
        assert p.returncode != 0 and "unknown locality" in p.stderr, p.stderr
        assert "Node count specification invalid" not in p.stderr, p.stderr
    p = fslurm.run(
        ["timeout", "20", "sbatch", "-o", "/dev/null", "--locality=zone:", "--wrap", "true"],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0 and "--locality" in p.stderr, p.stderr
    assert fslurm.out("squeue", "-h").strip() == ""


def test_nodelist_across_zones_is_refused_at_submit(fslurm: slurmctl.Slurm) -> None:
    """`--locality=zone -N2 --nodelist=n01,n12`: the named nodes are in two zones (two regions), which Slurm
    would
    run as one job; refused at submit with both zones named. Named nodes inside one zone run there."""
    p = fslurm.run(
        [
            "timeout",
            "20",
            "sbatch",
            "-o",
            "/dev/null",
            "--locality=zone",
            "-N2",
            "-w",
            "n01,n12",
            "--wrap",
            "true",
        ],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0, p.stdout
    assert "the nodes of --nodelist are in more than one zone (zone_us-east-1a, zone_us-west-2c)" in p.stderr
    assert fslurm.out("squeue", "-h").strip() == ""
    job = fslurm.submit("--exclusive", "--locality=zone", "-N2", "-w", "n[01-02]", "--wrap", "sleep 300")
    info = fslurm.wait_state(job, "RUNNING", timeout=15)
    assert set(fslurm.allocation_of(job).nodes) == {"n01", "n02"} and info["Features"].endswith(
        "zone_us-east-1a]"
    )


def test_auto_is_a_mode_of_the_spank_option_and_is_decided_as_wait(fslurm: slurmctl.Slurm) -> None:
    """`--locality=zone:auto`: the SPANK plugin accepts it (and names it in its error for a bad mode); the
    filter gives the :wait bracket, holds what no zone can ever hold as :wait does, and on this fleet (no site
    plan in its inventory) writes a note instead of a budget."""
    bad = fslurm.submit_error("--locality=zone:later", "-N3", "--wrap", "true")
    assert "use LEVEL or LEVEL:wait, LEVEL:fail or LEVEL:auto" in bad, bad
    job = fslurm.submit("--locality=zone:auto", "-N3", "--time=5", "--hold", "--wrap", "true")
    info = fslurm.job(job)
    assert (info["Features"], info["Prefer"]) == ZONE_3, info
    comment = fslurm.out("scontrol", "show", "job", job)
    assert "AdminComment=slurm-topo: zone:auto [us-west-2a(3n),us-east-1a(4n)]; auto: no site plan" in comment
    held = fslurm.submit("--locality=zone:auto", "-N5", "--time=5", "--wrap", "true")
    assert fslurm.job(held)["Reason"] == "JobHeldUser"
    assert "zone:auto: held; the largest is us-east-1a" in fslurm.out("scontrol", "show", "job", held)
    fslurm.cancel(job, held)


def squeue_fields(slurm: slurmctl.Slurm, job: str) -> dict[str, str]:
    """Slurm's own view of a job, fixed-grammar fields only: state, reason, required nodes, constraint."""
    out = slurm.out("squeue", "-h", "-j", job, "-o", "%T;%r;%n;%f").strip()
    state, reason, nodes, features = out.split(";")
    return {"state": state, "reason": reason, "nodes": nodes, "features": features}


@pytest.mark.parametrize("level", ["zone", "region"])
def test_an_owners_node_list_update_cannot_break_a_required_level(fslurm: slurmctl.Slurm, level: str) -> None:
    """``scontrol update ReqNodeList=`` by the job's owner is re-planned as ``--nodelist`` is at submit:
    nodes of two zones (and regions) are refused and the job keeps what it had; nodes of one zone are
    taken, and the bracket stays."""
    job, _ = user_submit(fslurm, "-H", "-N2", f"--locality={level}", "--wrap", "sleep 300")
    before = squeue_fields(fslurm, job)
    assert before["features"].startswith(f"[{level}_"), before
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "ReqNodeList=n01,n07")  # us-east vs us-west
    assert p.returncode != 0, "a node list across the level must be refused"
    assert squeue_fields(fslurm, job) == before
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "ReqNodeList=n01,n02")  # one zone, one region
    assert p.returncode == 0, p.stderr
    after = squeue_fields(fslurm, job)
    assert after["nodes"] in ("n[01-02]", "n01,n02") and after["features"].startswith(f"[{level}_"), after
    fslurm.cancel(job)


def test_a_count_constraint_with_a_required_level_is_refused_at_submit(fslurm: slurmctl.Slurm) -> None:
    """Slurm's count syntax cannot be combined with a level's bracket: a required level refuses it with the
    reason (it ran across two zones and regions when passed through); prefer takes it as it is."""
    counts = "[zone_us-east-1a*2&zone_us-west-2a*2]"
    for loc in ("zone", "zone:auto", "region:fail"):
        p = as_user(
            fslurm,
            "sbatch",
            "-o",
            "/dev/null",
            "--chdir=/tmp",
            "-N4",
            f"--locality={loc}",
            "-C",
            counts,
            "--wrap",
            "true",
        )
        assert p.returncode != 0, (loc, p.stdout)
        assert "cannot be combined" in p.stderr and "cannot be enforced" in p.stderr, p.stderr
    job, _ = user_submit(fslurm, "-H", "-N4", "--locality=prefer", "-C", counts, "--wrap", "true")
    assert squeue_fields(fslurm, job)["features"] == counts
    fslurm.cancel(job)


def test_an_owners_comment_cannot_change_the_locality(fslurm: slurmctl.Slurm) -> None:
    """``Comment=locality=any`` by the owner of a ``--locality=zone`` job is refused: Comment and enforcement
    never disagree afterwards."""
    job, _ = user_submit(fslurm, "-H", "-N2", "--locality=zone", "--wrap", "sleep 300")
    before = squeue_fields(fslurm, job)
    comment = fslurm.out("squeue", "-h", "-j", job, "-O", "comment:200").strip()
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "Comment=locality=any")
    assert p.returncode != 0, "the locality is fixed at submit for the owner"
    assert fslurm.out("squeue", "-h", "-j", job, "-O", "comment:200").strip() == comment
    assert squeue_fields(fslurm, job) == before
    fslurm.cancel(job)


def test_a_partition_created_after_the_data_gets_a_slurm_topo_message(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """The data file generated with the live partitions (``--partitions-from``), then a partition created
    after it: a zone job there is refused by slurm-topo naming the partition and what to do (it got Slurm's
    generic "Requested node configuration is not available" with a bracket of zones outside the partition);
    a partition the data knows is placed as ever. The data file and the partitions are put back after."""
    etc = filtered_cluster.etc
    data = etc / "slurm_topo_data.lua"
    saved = data.read_bytes()
    parts = tmp_path / "partitions.txt"
    parts.write_text(fslurm.out("scontrol", "show", "partition", "-o"))
    out = tmp_path / "gen"
    argv = [*slurmctl.slurm_topo_cli(), "generate", "-i", str(etc / "inventory.yaml"), "-o", str(out)]
    argv += [
        "--partitions-from",
        str(parts),
        "--slurm-version",
        f"{filtered_cluster.version[0]}.{filtered_cluster.version[1]:02d}",
    ]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    try:
        data.write_bytes((out / "slurm_topo_data.lua").read_bytes())  # the filter reloads a changed file
        fslurm.out("scontrol", "create", "PartitionName=late", "Nodes=n[07-12]", "State=UP")
        argv = ["timeout", "20", "sbatch", "-p", "late", "-N2", "--locality=zone", "--wrap", "true"]
        deadline = (
            time.monotonic() + 40
        )  # the filter rereads a changed data file within 10 s (RECHECK_SECONDS)
        while time.monotonic() < deadline:
            p = fslurm.run([*argv[:3], "--test-only", *argv[3:]], timeout=25, check=False)
            if "not in slurm-topo's data" in p.stderr:
                break
            time.sleep(0.5)
        p = fslurm.run(argv, timeout=25, check=False)
        assert p.returncode != 0, p.stdout
        assert (
            "partition 'late' is not in slurm-topo's data" in p.stderr and "slurm-topo apply" in p.stderr
        ), p.stderr
        job = fslurm.submit("-p", "main", "-N2", "--locality=zone", "--hold", "--wrap", "true")
        assert fslurm.job(job)["Features"].startswith("[zone_"), fslurm.job(job)
        fslurm.cancel(job)
    finally:
        fslurm.run(["scontrol", "delete", "PartitionName=late"], check=False)
        data.write_bytes(saved)
        # the next tests meet the original data: wait until the filter has reread it (the probe then gets
        # Slurm's own "invalid partition", not the partition-aware data's refusal)
        probe = [
            "timeout",
            "20",
            "sbatch",
            "--test-only",
            "-p",
            "late",
            "-N2",
            "--locality=zone",
            "--wrap",
            "true",
        ]
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if "not in slurm-topo's data" not in fslurm.run(probe, timeout=25, check=False).stderr:
                break
            time.sleep(0.5)


def test_an_owners_update_that_holds_or_is_refused_says_why_where_slurm_lets_it(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    """An owner resizes a pending zone job beyond every zone (NumNodes=5; the largest zone has 4 nodes): the
    update is taken and the filter holds the job; an owner's ``Comment=locality=any`` is refused. From 23.02
    scontrol prints why (the same reason as at submit); 22.05 drops a job_modify message, so there the job's
    state is all that says it."""
    job, _ = user_submit(fslurm, "--begin=now+3600", "-N2", "--locality=zone", "--wrap", "sleep 300")
    start = log_size(filtered_cluster)
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "NumNodes=5")
    if filtered_cluster.version < (23, 2) and p.returncode != 0:  # 22.05: an owner may not raise it at all
        assert "Node count specification invalid" in p.stderr, p.stderr
    else:
        assert p.returncode == 0, p.stderr
        assert fslurm.job(job)["Priority"] == "0"
    q = as_user(fslurm, "scontrol", "update", f"JobId={job}", "Comment=locality=any")
    assert q.returncode != 0
    if filtered_cluster.version >= (23, 2):
        assert "no zone can ever hold 5 nodes" in p.stderr or "zone:wait: held;" in p.stderr, p.stderr
        assert "resize it" in p.stderr, p.stderr
        assert "the locality is fixed at submit" in q.stderr, q.stderr
    else:
        assert "slurm-topo" not in p.stderr + q.stderr  # nothing reaches the client on 22.05
        assert slurmctl.log_errors(log_since(filtered_cluster, start)) == []  # and nothing was tried
    fslurm.cancel(job)


def _admin_comment(slurm: slurmctl.Slurm, job: str) -> str:
    """The AdminComment alone (squeue -O prints nothing else on the line)."""
    return slurm.out("squeue", "-h", "-j", job, "-O", "admin_comment:4000").strip()


def test_a_plan_given_to_sbatch_is_kept_in_admin_comment_and_read_by_explain(fslurm: slurmctl.Slurm) -> None:
    """``sbatch --plan=…`` (the SPANK option): a bad plan fails on the submit host; a good one is the first
    record of AdminComment (slurmctld's field, which the owner cannot update), stays there through the
    owner's resize, and is the plan ``explain`` costs the running job with."""
    bad = as_user(fslurm, "sbatch", "-o", "/dev/null", "--chdir=/tmp", "--plan=dp=8;x", "--wrap", "true")
    assert bad.returncode != 0 and "--plan: invalid value 'dp=8;x'" in bad.stderr, bad.stderr
    job, _ = user_submit(
        fslurm, "-H", "-N3", "--locality=zone", "--plan=dp=8,bytes=1G", "--wrap", "sleep 300"
    )
    assert _admin_comment(fslurm, job).startswith("slurm-topo-plan: dp=8,bytes=1G; slurm-topo: zone:wait")
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "NumNodes=2")
    assert p.returncode == 0, p.stderr
    assert fslurm.job(job)["NumNodes"].startswith("2")
    after = _admin_comment(fslurm, job)
    assert (
        after.startswith("slurm-topo-plan: dp=8,bytes=1G; slurm-topo: zone:wait")
        and after.count("plan:") == 1
    )
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", "AdminComment=slurm-topo-plan: dp=1")
    assert p.returncode != 0 and _admin_comment(fslurm, job) == after
    fslurm.run(["scontrol", "release", job])
    fslurm.wait_state(job, "RUNNING")
    fleet = str(Path(__file__).resolve().parents[2] / "docker-slurm" / "fleet.yaml")
    out = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "explain", job, "-i", fleet],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(fslurm.env),
    )
    assert out.returncode == 0, out.stderr
    assert "(from the job's sbatch --plan: dp=8,bytes=1G)" in out.stdout, out.stdout
    fslurm.cancel(job)
