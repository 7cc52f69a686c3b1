"""The strict text reader (``SLURM_TOPO_SLURM_BACKEND=text``: ``scontrol show job -o``) on real Slurm, every
release: the unprivileged ``nobody`` submits jobs whose name, comment or ``--extra`` (24.11 and later) hold
line breaks, a carriage return and whole forged records (auto jobs long past a budget of their own): lines
that claim job ids nobody has (999999 cut short, 999998 and 999996 as Slurm starts a record), lines that claim
an honest auto job's id, one right before that job's own line, and an AdminComment after ``Extra=``. A real
``relax`` pass (judged with ``--now``, no sleeping) decides the two honest auto jobs only, from their own
budget and submit time, counts the honest pending jobs only, skips each forger with one line and reports no
forged id; ``explain`` shows the honest job's own budget, refuses a forger's and does not know a forged id.
What is asserted is Slurm's own view (squeue's fixed-grammar fields)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import datetime

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

HW = {
    "CPUs": 2,
    "Boards": 1,
    "SocketsPerBoard": 1,
    "CoresPerSocket": 2,
    "ThreadsPerCore": 1,
    "RealMemory": 1000,
}
USER = "nobody"
BUDGET = "slurm-topo: zone:auto [z1(2n),z2(2n)]; slurm-topo-auto: zone limit=600s region=5s any=3600s"
FORGED_BUDGET = "slurm-topo-auto: zone limit=1s region=0s any=0s"
#: a whole record after ``JobName=``, every key in scontrol's order (each release prints these, and more):
#: an auto job submitted in 2000, far past a budget of its own
REST = (
    " ".join(
        """UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=100 Nice=0 Account=(null) QOS=(null)
        JobState=PENDING Reason=Priority Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0
        ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2000-01-01T00:00:00
        EligibleTime=Unknown AccrueTime=Unknown StartTime=Unknown EndTime=Unknown Deadline=N/A
        SuspendTime=None SecsPreSuspend=0 LastSchedEval=Unknown Scheduler=Main Partition=main
        AllocNode:Sid=h:1 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=2-2 NumCPUs=2
        NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
        MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=[zone_z1|zone_z2] DelayBoot=00:00:00
        OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp""".split()
    )
    + f" AdminComment={FORGED_BUDGET}"
)
AUTO = ("--begin=now+3600", "-N2", "--exclusive", "--constraint=[zone_z1|zone_z2]", "--wrap", "sleep 300")
FORGED_IDS = ("999996", "999997", "999998", "999999")


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Region r1: zone z1 = a[1-2], zone z2 = a[3-4]."""
    with scratch_cluster(
        "linebreaks",
        {
            "nodes": [
                {"name": "a[1-2]", "region": "r1", "zone": "z1", "network_group": "g1", "slurm": HW},
                {"name": "a[3-4]", "region": "r1", "zone": "z2", "network_group": "g2", "slurm": HW},
            ]
        },
        nodes_max=6,
    ) as c:
        yield c


def user_submit(slurm: slurmctl.Slurm, *args: str) -> str:
    """``sbatch`` as ``nobody``, under a timeout; the job id."""
    env = [f"PATH={slurm.env.get('PATH', '/usr/bin:/bin')}", f"SLURM_CONF={slurm.env['SLURM_CONF']}"]
    p = slurm.run(
        ["runuser", "-u", USER, "--", "env", *env, "timeout", "20", "sbatch", "--parsable", "-o", "/dev/null"]
        + ["--chdir=/tmp", "--begin=now+3600", *args, "--wrap", "true"],
        timeout=25,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().split(";")[0]


def auto_job(slurm: slurmctl.Slurm) -> str:
    """An honest pending auto job of root's: its budget is in its AdminComment, as the filter writes it."""
    job = slurm.submit("--chdir=/tmp", *AUTO)
    slurm.out("scontrol", "update", f"JobId={job}", f"AdminComment={BUDGET}")
    return job


def squeue_ids(slurm: slurmctl.Slurm, *args: str) -> list[str]:
    return slurm.out("squeue", "--noheader", "--states=all", "--format=%A", *args).split()


def view(slurm: slurmctl.Slurm, job: str) -> tuple[str, str]:
    """squeue's own fields of the job: its constraint and its AdminComment."""
    features = slurm.out("squeue", "-h", "-j", job, "-o", "%f").strip()
    return features, slurm.out("squeue", "-h", "-j", job, "-O", "admin_comment:4000").strip()


def cli(c: slurmctl.Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**dict(c.env), "SLURM_TOPO_SLURM_BACKEND": "text"}
    return subprocess.run(
        [*slurmctl.slurm_topo_cli(), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_relax_and_explain_read_the_true_state_whatever_the_jobs_values_print(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    victim = auto_job(slurm)
    held = slurm.submit("--chdir=/tmp", "-H", "-N1", "--wrap", "true")  # honest, pending, not auto
    forgers = {
        "cut record": user_submit(slurm, f"--job-name=x {REST}\nJobId=999999 x"),
        "record, new id": user_submit(slurm, f"--job-name=x {REST}\nJobId=999998 JobName=y"),
        "victim's id": user_submit(
            slurm, f"--job-name=x\nJobId={victim} JobName=v {REST}\nJobId=999997 JobName=z"
        ),
        "carriage return": user_submit(slurm, f"--job-name=x\rJobId={victim} JobName=v {REST}"),
        "comment": user_submit(slurm, f"--comment=c\nJobId={victim}"),
    }
    if cluster.version >= (24, 11):
        forgers["extra budget"] = user_submit(slurm, f"--extra=x AdminComment={FORGED_BUDGET}")
        forgers["extra line"] = user_submit(slurm, f"--extra=e\nJobId=999996 JobName=w {REST}")
    following = max(int(j) for j in squeue_ids(slurm)) + 2  # the forger takes the next id, root's job this
    forgers["right before"] = user_submit(slurm, f"--job-name=x\nJobId={following} JobName=v {REST}")
    victim2 = auto_job(slurm)
    assert victim2 == str(following), (victim2, following)  # the forger's line comes right before its own
    listing = slurm.out("scontrol", "show", "job", "-o")
    assert "\nJobId=999999 " in listing and f"\nJobId={victim} JobName=v " in listing  # what the reader gets
    assert set(FORGED_IDS) & set(squeue_ids(slurm)) == set()
    before = {j: view(slurm, j) for j in forgers.values()}
    submitted = slurm.out("squeue", "-h", "-j", victim, "-o", "%V").strip()  # Slurm's local time, as scontrol
    now = datetime.fromisoformat(submitted).timestamp() + 60

    lock = cluster.base.parent / "relax.lock"
    p = cli(
        cluster, "relax", "--once", "--json", "--plain-budget", "--lock", str(lock), "--now", f"{now:.0f}"
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["backend"] == "text", result
    decided = {d["job"]: d for d in result["decisions"]}
    assert set(decided) == {victim, victim2}, result
    d = decided[victim]
    assert (d["action"], d["level"], d["target"], d["waited_s"], d["applied"]) == (
        "relax",
        "zone",
        "region",
        60,
        True,
    ), d
    assert decided[victim2]["target"] == "region" and decided[victim2]["applied"] is True, result
    skipped = sorted(e.split(":")[0].removeprefix("job ") for e in result["errors"])
    assert skipped == sorted(forgers.values()), result["errors"]
    assert not any(f in p.stdout for f in FORGED_IDS), result
    pending = set(slurm.out("squeue", "--noheader", "--states=PD", "--format=%A").split())
    assert result["pending"] == len(pending - set(forgers.values())) == len({victim, victim2, held}), result

    for job in (victim, victim2):  # Slurm's own view: the honest jobs widened to their region
        features, comment = view(slurm, job)
        assert features == "[region_r1]" and comment.startswith(f"{BUDGET}; slurm-topo-relax: zone->region")
    assert {j: view(slurm, j) for j in forgers.values()} == before  # the forgers: as they were

    shown = cli(cluster, "explain", victim)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"job {victim}: PENDING", shown.stdout
    assert "  auto:     zone:auto, now region;" in shown.stdout and "(limit 600 s)" in shown.stdout, (
        shown.stdout
    )
    assert "limit 1 s" not in shown.stdout, shown.stdout
    for job in (forgers["victim's id"], forgers["record, new id"]):
        refused = cli(cluster, "explain", job)
        assert refused.returncode != 0 and "ambiguous scontrol line" in refused.stderr, refused
    for forged in ("999999", "999998"):
        unknown = cli(cluster, "explain", forged)
        assert unknown.returncode != 0 and "not known to slurmctld" in unknown.stderr, unknown
    slurm.cancel(victim, victim2, held, *forgers.values())
    slurm.quiesce()
