"""Heterogeneous jobs and an owner's resize through a filter hold, on the filtered test cluster (real Slurm
with the locality filter: ``filtered_cluster``), every job submitted and updated by the unprivileged
``nobody`` (issue 43, items 4 and 5). Slurm's own view is asserted: ``squeue`` / ``scontrol show job``.

* A heterogeneous job reaches job_submit/lua once per component and Slurm places each component on its own
  (a matching-OR bracket is matched per component: ``--locality=zone -N2 : --locality=zone -N2`` ran in two
  regions). A required level is refused at submit, with why and what to do; prefer and any run, and
  ``explain JOBID`` shows every component (each backend).
* An owner's update that makes a job too large for every group holds it (priority 0, ``JobHeldUser``); the
  update that makes it fit again releases it. Slurm refuses AdminComment from an owner, so such a hold left
  no ``held;`` record, and the job stayed held (24.11 and 26.05 by a resize; every release by a constraint).
"""

from __future__ import annotations

import pwd
import subprocess

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

USER = "nobody"
HET_REFUSED = "a heterogeneous job cannot be kept in one"


def as_user(slurm: slurmctl.Slurm, *argv: str, timeout: int = 20) -> subprocess.CompletedProcess[str]:
    """A client command run as ``nobody`` (the owner of its jobs), under a timeout: ``Slurm.as_user``."""
    return slurm.as_user(*argv, timeout=timeout, user=USER)


def user_sbatch(slurm: slurmctl.Slurm, *args: str) -> subprocess.CompletedProcess[str]:
    return as_user(slurm, "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args)


def user_submit(slurm: slurmctl.Slurm, *args: str) -> str:
    p = user_sbatch(slurm, *args)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().split(";")[0]


def squeue(slurm: slurmctl.Slurm, job: str, fmt: str) -> list[list[str]]:
    """``squeue -h --states=all -j JOB -o %i;FMT`` (fields of Slurm's fixed grammar, ``;``-separated), one row
    a job (a heterogeneous job: one a component, in offset order), the job's name first."""
    out = slurm.out("timeout", "20", "squeue", "-h", "--states=all", "-j", job, "-o", f"%i;{fmt}", timeout=25)
    rows = [line.split(";") for line in out.splitlines() if line.strip()]
    return sorted(rows, key=lambda r: [int(x) for x in r[0].split("+")])


def groups_of(slurm: slurmctl.Slurm, prefix: str) -> dict[str, set[str]]:
    """Every group of a level (``zone_`` / ``region_``) -> its nodes, from the nodes' features in Slurm."""
    out: dict[str, set[str]] = {}
    for node, feats in slurm.all_node_features().items():
        for f in feats:
            if f.startswith(prefix):
                out.setdefault(f, set()).add(node)
    return out


def user_jobs(slurm: slurmctl.Slurm) -> list[str]:
    """Every job of the owner's Slurm holds (any state), by uid: a Debian root's squeue may not know the
    host's user names ("Invalid user: nobody")."""
    out = slurm.out("timeout", "20", "squeue", "-h", "--states=all", "-o", "%U;%i", timeout=25)
    uid = str(pwd.getpwnam(USER).pw_uid)
    return [job for owner, _, job in (line.partition(";") for line in out.split()) if owner == uid]


# ---- item 4: heterogeneous jobs


@pytest.mark.parametrize(
    ("first", "second", "word"),
    [
        (["--locality=zone"], ["--locality=zone"], "zone"),
        (["--locality=region:fail"], ["--locality=region:fail"], "region"),
        (["--locality=network_group"], [], "network group"),
        ([], ["--locality=zone:auto", "--time=10"], "zone"),  # the second component alone asks
        (["--comment=locality=zone"], ["--comment=locality=zone"], "zone"),  # without the SPANK plugin
    ],
)
def test_a_heterogeneous_job_with_a_required_level_is_refused_at_submit(
    fslurm: slurmctl.Slurm, first: list[str], second: list[str], word: str
) -> None:
    """``sbatch --locality=zone -N2 : --locality=zone -N2`` ran its components in two regions (each
    component's bracket is matched on its own): now refused at submit, with the reason and what to do, and no
    component of it is ever in Slurm's queue."""
    before = user_jobs(fslurm)
    p = user_sbatch(
        fslurm, "--exclusive", *first, "-N2", ":", "--exclusive", *second, "-N2", "--wrap", "true"
    )
    assert p.returncode != 0, p.stdout
    assert f"{HET_REFUSED} {word}" in p.stderr, p.stderr
    assert "places each component on its own" in p.stderr and "submit it as one job" in p.stderr, p.stderr
    assert "--locality=prefer or --locality=any" in p.stderr, p.stderr
    assert user_jobs(fslurm) == before, "no component of a refused job may be queued"


@pytest.mark.parametrize("client", ["salloc", "srun"])
def test_a_heterogeneous_allocation_with_a_required_level_is_refused(
    fslurm: slurmctl.Slurm, client: str
) -> None:
    before = user_jobs(fslurm)
    p = as_user(fslurm, client, "--locality=zone", "-N1", ":", "-N1", "true")
    assert p.returncode not in (0, 124), (p.returncode, p.stderr)
    assert f"{HET_REFUSED} zone" in p.stderr, p.stderr
    assert user_jobs(fslurm) == before


def test_no_heterogeneous_job_with_a_required_level_runs_across_groups(fslurm: slurmctl.Slurm) -> None:
    """The issue's job, by its owner, every required level: none runs; the same job with ``prefer`` runs
    (its components where each fits best: across groups is allowed there), and Slurm's NodeList of every
    component of every job of the owner's is inside one group of each required level it asked for."""
    before = set(user_jobs(fslurm))
    for loc in ("zone", "region", "network_group", "zone:fail", "region:auto"):
        p = user_sbatch(
            fslurm, f"--locality={loc}", "--exclusive", "-N2", ":", f"--locality={loc}", "--exclusive", "-N2",
            "--time=10", "--wrap", "sleep 300",
        )  # fmt: skip
        assert p.returncode != 0 and HET_REFUSED in p.stderr, (loc, p.stdout, p.stderr)
    job = user_submit(
        fslurm, "--locality=prefer", "--exclusive", "-N2", ":", "--locality=prefer", "--exclusive", "-N2",
        "--wrap", "sleep 300",
    )  # fmt: skip
    fslurm.wait_state(f"{job}+0", "RUNNING", timeout=30)
    fslurm.wait_state(f"{job}+1", "RUNNING", timeout=30)
    rows = squeue(fslurm, job, "%T;%N")
    assert [r[0] for r in rows] == [f"{job}+0", f"{job}+1"] and all(r[1] == "RUNNING" for r in rows), rows
    # the owner's jobs in Slurm's queue since: this one only (nothing of the refused ones)
    assert set(user_jobs(fslurm)) - before == {f"{job}+0", f"{job}+1"}, user_jobs(fslurm)
    fslurm.cancel(job)


def _explain(cluster: slurmctl.Cluster, job: str, backend: str) -> str:
    env = {**cluster.env, "SLURM_TOPO_SLURM_BACKEND": backend}
    if backend == "pyslurm":  # pyslurm lives in the 26.05 root: slurm-topo from the checkout, run there
        argv = [
            *cluster.client_prefix, "env", "PYTHONPATH=/opt/slurm-topo/src", "python3", "-c",
            "import sys; from slurm_topo.cli import main; main(sys.argv[1:])", "explain", job,
        ]  # fmt: skip
    else:
        argv = [*slurmctl.slurm_topo_cli(), "explain", job]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, (backend, p.stdout, p.stderr)
    return p.stdout


def test_explain_shows_every_component_of_a_heterogeneous_job(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    """``slurm-topo explain JOBID`` of a running heterogeneous job (the owner's, prefer): a block per
    component (JOBID+0, JOBID+1 …) with the nodes Slurm gave it, then where they landed together, through
    every backend of this release (squeue --json, scontrol's text; pyslurm on 26.05); ``JOBID+1`` alone that
    component."""
    job = user_submit(
        fslurm, "--locality=prefer", "--exclusive", "-N2", ":", "--exclusive", "-N1", ":", "--exclusive",
        "-N1", "--wrap", "sleep 300",
    )  # fmt: skip
    for k in range(3):
        fslurm.wait_state(f"{job}+{k}", "RUNNING", timeout=30)
    nodes = {r[0]: r[1] for r in squeue(fslurm, job, "%N")}
    assert sorted(nodes) == [f"{job}+0", f"{job}+1", f"{job}+2"], nodes
    backends = ["json", "text"] + (["pyslurm"] if filtered_cluster.release == "26.05" else [])
    for backend in backends:
        text = _explain(filtered_cluster, job, backend)
        lines = text.splitlines()
        assert lines[0].startswith(f"job {job}: heterogeneous, 3 components ({job}+0, {job}+1, {job}+2)"), (
            backend,
            text,
        )
        assert lines[1].startswith("  together: ") and "(4 nodes)" in lines[1], (backend, text)
        for name, where in nodes.items():
            assert f"job {name}: RUNNING on {where}" in lines, (backend, name, where, text)
        assert text.count("  decision: prefer ") == 3, (backend, text)
        for k in (0, 1):  # +0 too: pyslurm reads the first component's offset 0 as unset
            one = _explain(filtered_cluster, f"{job}+{k}", backend)
            assert one.splitlines()[0] == f"job {job}+{k}: RUNNING on {nodes[f'{job}+{k}']}", (backend, one)
    fslurm.cancel(job)


def test_owner_updates_of_a_heterogeneous_component(
    filtered_cluster: slurmctl.Cluster, fslurm: slurmctl.Slurm
) -> None:
    """A pending heterogeneous job of ``nobody`` (``--comment=locality=prefer``, each component): the owner
    resizes a component (by its own job id) and gives it a constraint: re-planned as prefer; the owner's
    ``Comment=locality=zone`` is refused (the locality is fixed at submit), and so is an administrator's (a
    component cannot be kept in one zone with the others); the job then runs."""
    job = user_submit(
        fslurm, "--begin=now+3600", "--comment=locality=prefer", "-N2", ":", "-N2", "--wrap", "sleep 300",
    )  # fmt: skip
    rows = squeue(fslurm, job, "%A;%D;%k")
    assert [(r[0], r[2], r[3]) for r in rows] == [
        (f"{job}+0", "2", "locality=prefer"),
        (f"{job}+1", "2", "locality=prefer"),
    ], rows
    second = rows[1][1]  # the component's own job id
    p = as_user(fslurm, "scontrol", "update", f"JobId={second}", "NumNodes=1")
    assert p.returncode == 0, p.stderr
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}+1", "Features=nvme")
    assert p.returncode == 0, p.stderr
    info = fslurm.job(f"{job}+1")
    assert info["NumNodes"].startswith("1") and info["Features"] == "nvme", info
    assert info["Prefer"].startswith("nvme&[ng_"), info  # re-planned for the new request
    assert fslurm.job(f"{job}+0")["Features"] in ("", "(null)"), "the other component is untouched"
    p = as_user(fslurm, "scontrol", "update", f"JobId={job}+1", "Comment=locality=zone")
    assert p.returncode != 0, "the owner cannot change the locality"
    p = fslurm.run(
        ["timeout", "20", "scontrol", "update", f"JobId={job}+1", "Comment=locality=zone"],
        timeout=25,
        check=False,
    )
    assert p.returncode != 0, "no re-plan gives a component a required level"
    if filtered_cluster.version >= (23, 2):
        assert "is a component of a heterogeneous job" in p.stderr, p.stderr
    assert [r[3] for r in squeue(fslurm, job, "%A;%D;%k")] == ["locality=prefer", "locality=prefer"]
    fslurm.out("timeout", "20", "scontrol", "update", f"JobId={job}", "StartTime=now", timeout=25)
    fslurm.wait_state(f"{job}+0", "RUNNING", timeout=30)
    fslurm.wait_state(f"{job}+1", "RUNNING", timeout=30)
    placed = {r[0]: fslurm.hostnames(r[1]) for r in squeue(fslurm, job, "%N")}
    assert len(placed[f"{job}+0"]) == 2 and placed[f"{job}+1"], placed
    assert all("nvme" in fslurm.node_features(n) for n in placed[f"{job}+1"]), placed
    fslurm.cancel(job)


# ---- item 5: an owner's update into a filter hold, and back


@pytest.mark.parametrize(
    ("size", "into", "back", "zone"),
    [
        pytest.param(
            "-N2",
            "NumNodes=5",
            "NumNodes=2",
            None,
            marks=pytest.mark.slurm_min("23.02", reason="22.05 refuses an owner's larger NumNodes outright"),
            id="resize",
        ),
        pytest.param("-N3", "Features=nvme&eth", "Features=nvme", {"n01", "n02", "n03"}, id="constraint"),
    ],
)
def test_an_owners_update_into_a_filter_hold_and_back_releases_the_job(
    filtered_cluster: slurmctl.Cluster,
    fslurm: slurmctl.Slurm,
    size: str,
    into: str,
    back: str,
    zone: set[str] | None,
) -> None:
    """``nobody``'s pending zone job: an update no zone can ever hold (5 nodes; ``nvme&eth`` has 2 nodes in
    each zone) holds it (priority 0, JobHeldUser); the update back to what fits releases it (it stayed
    JobHeldUser, priority 0, on 26.05), with its bracket, and it runs inside one zone."""
    job = user_submit(fslurm, "--begin=now+3600", size, "--locality=zone", "--wrap", "sleep 300")
    [[reason, prio, features]] = [r[1:] for r in squeue(fslurm, job, "%r;%Q;%f")]
    assert prio != "0" and features.startswith("[zone_"), (reason, prio, features)

    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", into)
    assert p.returncode == 0, p.stderr
    [[reason, prio, features]] = [r[1:] for r in squeue(fslurm, job, "%r;%Q;%f")]
    assert (reason, prio) == ("JobHeldUser", "0"), (reason, prio, features)
    p = as_user(fslurm, "scontrol", "release", job)
    assert p.returncode != 0, "the owner's release of a filter hold stays refused"

    p = as_user(fslurm, "scontrol", "update", f"JobId={job}", back)
    assert p.returncode == 0, p.stderr
    [[reason, prio, features]] = [r[1:] for r in squeue(fslurm, job, "%r;%Q;%f")]
    assert reason != "JobHeldUser" and prio != "0", (reason, prio, features)
    assert "[zone_" in features, features
    record = fslurm.out("timeout", "20", "scontrol", "show", "job", job, timeout=25)
    assert "Priority=0 " not in record and "JobHeldUser" not in record, record

    fslurm.out("timeout", "20", "scontrol", "update", f"JobId={job}", "StartTime=now", timeout=25)
    fslurm.wait_state(job, "RUNNING", timeout=30)
    nodes = set(fslurm.hostnames(squeue(fslurm, job, "%N")[0][1]))
    zones = groups_of(fslurm, "zone_")
    assert any(nodes <= members for members in zones.values()), (sorted(nodes), zones)
    if zone is not None:
        assert nodes == zone, sorted(nodes)  # nvme, -N3: only us-east-1a's n01-n03
    fslurm.cancel(job)


def test_an_owners_own_hold_of_a_job_that_fits_survives_its_updates(fslurm: slurmctl.Slurm) -> None:
    """``sbatch -H`` (the owner's hold) of a zone job that fits: a resize and a constraint re-plan it and the
    owner's hold stays (the filter releases only a job that could never run before the update)."""
    job = user_submit(fslurm, "-H", "-N3", "--locality=zone", "--wrap", "sleep 300")
    for update in ("NumNodes=2", "Features=nvme"):
        p = as_user(fslurm, "scontrol", "update", f"JobId={job}", update)
        assert p.returncode == 0, (update, p.stderr)
        [[reason, prio, features]] = [r[1:] for r in squeue(fslurm, job, "%r;%Q;%f")]
        assert (reason, prio) == ("JobHeldUser", "0"), (update, reason, prio)
        assert "[zone_" in features, features
    p = as_user(fslurm, "scontrol", "release", job)
    assert p.returncode == 0, p.stderr  # it fits: the owner's own release is the owner's
    [[reason, prio]] = [r[1:] for r in squeue(fslurm, job, "%r;%Q")]
    assert prio != "0", (reason, prio)
    fslurm.cancel(job)
