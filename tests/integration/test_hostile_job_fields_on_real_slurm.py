"""A job's own fields never steer what root does (slurm_topo.access), on every release: an unprivileged
user submits jobs whose name and comment carry forged ``JobState=``, ``Reason=``, ``Priority=``,
``SubmitTime=``, ``AdminComment=`` (a budget record) and ``Features=`` fields. A real ``relax`` pass (judged
with ``--now``, no sleeping) widens only the one job whose true AdminComment carries a budget, skips a job
whose relax trail is damaged with one line and goes on, and leaves the hostile jobs exactly as they were;
``explain`` shows their true state. What is asserted is Slurm's own view (squeue's fixed-grammar fields,
``scontrol show job -d``)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

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
HOSTILE_NAME = (
    "x JobState=PENDING Reason=Priority Priority=100 SubmitTime=2000-01-01T00:00:00 AdminComment=slurm-topo: "
    "zone:auto [a]; slurm-topo-auto: zone limit=60s region=0s any=0s OWNED Features=[zone_z1|zone_z2]"
)
HOSTILE_COMMENT = (
    "c JobState=PENDING Reason=Priority Priority=100 NodeList=a1 Features=[zone_z1|zone_z2] "
    "AdminComment=slurm-topo-auto: zone limit=60s region=0s any=0s"
)
BUDGET = "slurm-topo-auto: zone limit=600s region=5s any=3600s"


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Region r1: zone z1 = a[1-2], zone z2 = a[3-4]; region r2: zone z3 = b[1-2]."""
    with scratch_cluster(
        "hostile",
        {
            "nodes": [
                {"name": "a[1-2]", "region": "r1", "zone": "z1", "network_group": "g1", "slurm": HW},
                {"name": "a[3-4]", "region": "r1", "zone": "z2", "network_group": "g2", "slurm": HW},
                {"name": "b[1-2]", "region": "r2", "zone": "z3", "network_group": "g3", "slurm": HW},
            ]
        },
        nodes_max=6,
    ) as c:
        yield c


def as_user(slurm: slurmctl.Slurm, *argv: str) -> subprocess.CompletedProcess[str]:
    return slurm.as_user(*argv, user=USER)


def user_submit(slurm: slurmctl.Slurm, *args: str) -> str:
    p = as_user(slurm, "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().split(";")[0]


def slurm_view(slurm: slurmctl.Slurm, job: str) -> tuple[str, ...]:
    """squeue's own fields with a fixed grammar (no user text): state, reason, priority, constraint, nodes."""
    out = slurm.out("squeue", "-h", "-j", job, "-o", "%T;%r;%Q;%f;%N")
    return tuple(out.strip().split(";"))


def admin_comment(slurm: slurmctl.Slurm, job: str) -> str:
    """The AdminComment alone (squeue -O prints nothing else on the line)."""
    return slurm.out("squeue", "-h", "-j", job, "-O", "admin_comment:4000").strip()


def cli(c: slurmctl.Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*slurmctl.slurm_topo_cli(), *args], env=dict(c.env), capture_output=True, text=True, timeout=60
    )


def test_hostile_jobs_are_read_as_slurm_holds_them_and_only_the_true_auto_job_is_widened(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    blockers = [
        slurm.submit("--exclusive", "-N1", f"--nodelist={n}", "--wrap", "sleep 300") for n in ("a2", "a4")
    ]
    for j in blockers:
        slurm.wait_state(j, "RUNNING")
    held = user_submit(
        slurm, "-H", "-N1", "-J", HOSTILE_NAME, f"--comment={HOSTILE_COMMENT}", "--wrap", "true"
    )
    running = user_submit(
        slurm,
        "-N1",
        "--nodelist=b2",
        "-J",
        HOSTILE_NAME,
        f"--comment={HOSTILE_COMMENT}",
        "--wrap",
        "sleep 300",
    )
    slurm.wait_state(running, "RUNNING")
    bracket = "[zone_z1|zone_z2]"
    auto = slurm.submit("--exclusive", "-N2", f"--constraint={bracket}", "--wrap", "sleep 300")
    damaged = slurm.submit("--exclusive", "-N2", f"--constraint={bracket}", "--wrap", "sleep 300")
    slurm.out("scontrol", "update", f"JobId={auto}", f"AdminComment={BUDGET}")
    trail = f"{BUDGET}; slurm-topo-relax: zone->bogus waited=1s budget=0s at=x"
    slurm.out("scontrol", "update", f"JobId={damaged}", f"AdminComment={trail}")
    before = {j: (slurm_view(slurm, j), admin_comment(slurm, j)) for j in (held, running, damaged)}
    assert before[held][0][:3] == ("PENDING", "JobHeldUser", "0"), before
    assert before[running][0][0] == "RUNNING" and before[running][1] == "(null)", before
    assert before[damaged][1] == trail, before  # the reader of the AdminComment reads it

    lock = cluster.base.parent / "relax.lock"
    now = time.time() + 60  # every job has waited 60 s: past the 5 s budget, without sleeping
    p = cli(
        cluster, "relax", "--once", "--json", "--plain-budget", "--lock", str(lock), "--now", f"{now:.0f}"
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["backend"] == "json"
    decided = {d["job"]: d for d in result["decisions"]}
    assert set(decided) == {auto}, result  # neither hostile job is an auto job; the damaged one is skipped
    assert decided[auto]["action"] == "relax" and decided[auto]["applied"] is True, result
    assert [e.split(":")[0] for e in result["errors"]] == [f"job {damaged}"], result
    assert "bogus" in result["errors"][0]

    slurm.wait_state(auto, "RUNNING", timeout=30)
    state, _, _, features, _ = slurm_view(slurm, auto)
    assert features == "[region_r1]"
    assert set(slurm.allocation_of(auto).nodes) == {"a1", "a3"}  # Slurm's own allocation: r1, two zones
    assert "slurm-topo-relax: zone->region waited=" in admin_comment(slurm, auto)
    for j in (held, running, damaged):  # the reason of a pending job may move on (None -> Resources)
        view = slurm_view(slurm, j)
        assert (view[0], *view[2:], admin_comment(slurm, j)) == (
            before[j][0][0],
            *before[j][0][2:],
            before[j][1],
        )
    assert slurm_view(slurm, held)[1] == "JobHeldUser"

    shown = cli(cluster, "explain", held)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"job {held}: PENDING", shown.stdout
    assert "Reason=JobHeldUser (held)" in shown.stdout and "\n  auto:" not in shown.stdout, shown.stdout
    shown = cli(cluster, "explain", running)
    assert shown.stdout.splitlines()[0] == f"job {running}: RUNNING on b2", shown.stdout
    assert "zone:auto" not in shown.stdout, shown.stdout
    slurm.quiesce()


# ---- the pyslurm backend (Slurm 26.05's root: docker-slurm/build-pyslurm) against --json and text

BACKENDS_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from slurm_topo.access import JOB_KEYS, SlurmAccess, native
from slurm_topo.plumbing.runner import SubprocessRunner
from slurm_topo.relaxer import relax
r = SubprocessRunner()
out = {"auto": SlurmAccess(r).backend, "probe": native.probe().__dict__}
for b in ("pyslurm", "json", "text"):
    a = SlurmAccess(r, backend=b)
    listing = a.jobs()
    out[b] = {
        "backend": a.backend,
        "jobs": {j["JobId"]: {k: j[k] for k in JOB_KEYS if k in j} for j in listing.jobs},
        "refused": [jid for jid, _ in listing.refused],
        "nodes": {n: [kv.get("State"), kv.get("ActiveFeatures")] for n, kv in a.nodes().items()},
    }
p = SlurmAccess(r, backend="pyslurm")
job, node = sys.argv[2], sys.argv[3]
p.update_job(job, ("Features", "[zone_z1|zone_z3]"), ("AdminComment", "slurm-topo: written by pyslurm"))
p.update_node(node, ("State", "DRAIN"), ("Reason", "slurm-topo: drained by pyslurm"))
seen = {b: SlurmAccess(r, backend=b).job(job) for b in ("json", "text")}
out["written"] = {b: [j["Features"], j["AdminComment"]] for b, j in seen.items()}
out["drained"] = SlurmAccess(r, backend="text").nodes()[node]
p.update_node(node, ("State", "RESUME"))
try:
    p.update_job(job, ("Features", "no_such_feature"))
    out["refused_write"] = ""
except Exception as exc:
    out["refused_write"] = f"{type(exc).__name__}: {exc}"
out["pass_backend"] = relax.run_pass(r, dry_run=True).backend
print(json.dumps(out))
"""


def test_pyslurm_reads_every_job_and_node_as_json_and_text_do_and_its_writes_reach_slurm(
    cluster: slurmctl.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Slurm 26.05 only (the one release here pyslurm builds for): the same cluster state through pyslurm,
    ``squeue --json`` and the strict text reader gives the same record of every job (the hostile ones
    included, which text refuses), the same node states and features; pyslurm is chosen without being
    asked; its writes are what the other backends then read; Slurm's refusal comes back in Slurm's words. On
    the other releases (no pyslurm for them): the automatic choice is ``--json``, and a fixed pyslurm says
    why not."""
    if cluster.release != "26.05":
        from slurm_topo.access import SlurmAccess
        from slurm_topo.core.errors import CommandError

        runner = slurmctl.EnvRunner(dict(cluster.env))
        assert SlurmAccess(runner).backend == "json"
        with pytest.raises(CommandError, match="SLURM_TOPO_SLURM_BACKEND=pyslurm.*pyslurm is not installed"):
            _ = SlurmAccess(runner, backend="pyslurm").backend
        return
    slurm = cluster.slurm
    slurm.quiesce()
    hostile = user_submit(
        slurm, "-H", "-N1", "-J", HOSTILE_NAME, f"--comment={HOSTILE_COMMENT}", "--wrap", "true"
    )
    plain = slurm.submit("-H", "-N2", "--constraint=[zone_z1|zone_z2]", "-J", "plain", "--wrap", "true")
    exclusive = slurm.submit("-H", "--exclusive", "-N1", "--wrap", "true")
    running = slurm.submit("-N1", "--nodelist=b1", "--time=10", "--wrap", "sleep 300")
    slurm.wait_state(running, "RUNNING")
    script = tmp_path_factory.mktemp("pyslurm") / "backends.py"
    script.write_text(BACKENDS_SCRIPT)
    script.chmod(0o644)
    script.parent.chmod(0o755)
    p = subprocess.run(
        [*cluster.client_prefix, "python3", str(script), "/opt/slurm-topo/src", plain, "a2"],
        env=dict(cluster.env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["auto"] == "pyslurm", out["probe"]
    assert out["pyslurm"]["backend"] == "pyslurm"
    py, js, tx = out["pyslurm"], out["json"], out["text"]
    assert set(py["jobs"]) == set(js["jobs"]) >= {hostile, plain, running}
    # every field of every job; but 26.05's squeue --json lists "shared": [] for every job, exclusive or not
    # (scontrol prints OverSubscribe=NO for all and the truth in Exclusive=): pyslurm alone tells
    for jid, rec in py["jobs"].items():
        assert {**rec, "OverSubscribe": ""} == {**js["jobs"][jid], "OverSubscribe": ""}, jid
    assert py["jobs"][exclusive]["OverSubscribe"] == "NO"
    assert py["jobs"][plain]["OverSubscribe"] == py["jobs"][running]["OverSubscribe"] == "OK"
    assert py["jobs"][hostile]["JobName"] == HOSTILE_NAME
    assert py["jobs"][hostile]["Comment"] == HOSTILE_COMMENT
    assert (py["jobs"][hostile]["JobState"], py["jobs"][hostile]["Priority"]) == ("PENDING", "0")
    assert hostile in tx["refused"] and hostile not in tx["jobs"]
    assert {plain, exclusive, running} <= set(tx["jobs"])
    for jid in (plain, exclusive, running):  # the keys scontrol printed (a finished job's differ: N/A)
        same = {k: v for k, v in tx["jobs"][jid].items() if k != "OverSubscribe"}
        assert same == {k: py["jobs"][jid][k] for k in same}, jid
    assert py["nodes"] == tx["nodes"] == js["nodes"]
    assert out["written"] == {
        "json": ["[zone_z1|zone_z3]", "slurm-topo: written by pyslurm"],
        "text": ["[zone_z1|zone_z3]", "slurm-topo: written by pyslurm"],
    }
    assert "DRAIN" in out["drained"]["State"]
    assert out["drained"]["Reason"].startswith("slurm-topo: drained by pyslurm")
    assert out["refused_write"].startswith("CommandError: pyslurm"), out["refused_write"]
    assert "Invalid feature specification" in out["refused_write"]
    assert out["pass_backend"] == "pyslurm"
    assert slurm_view(slurm, plain)[3] == "[zone_z1|zone_z3]"  # Slurm's own view, squeue's fixed field
    slurm.cancel(hostile, plain, exclusive, running)
    slurm.quiesce()


def test_the_strict_text_reader_reads_a_job_with_a_prefer_as_slurm_prints_it(
    cluster: slurmctl.Cluster,
) -> None:
    """scontrol prints ``Features= DelayBoot=`` then ``ClusterFeatures=``, ``Prefer=``, ``Reservation=``
    (every release here): a job with ``--prefer`` (what the filter's prefer cascade gives) is read by the
    strict text reader, not refused as out of order."""
    from slurm_topo.access import SlurmAccess
    from slurm_topo.access.jobs import job_from_text

    slurm = cluster.slurm
    job = slurm.submit("-H", "-N2", "--constraint=[zone_z1|zone_z2]", "--prefer=zone_z1", "--wrap", "true")
    line = slurm.out("scontrol", "show", "job", "-o", job).splitlines()[0]
    record = job_from_text(line)
    assert (record["JobId"], record["Features"], record["Prefer"]) == (job, "[zone_z1|zone_z2]", "zone_z1")
    runner = slurmctl.EnvRunner(dict(cluster.env))
    text = SlurmAccess(runner, backend="text").job(job)
    assert text is not None and (text["Prefer"], text["Features"]) == ("zone_z1", "[zone_z1|zone_z2]")
    assert job not in {jid for jid, _ in SlurmAccess(runner, backend="text").jobs().refused}
    slurm.out("scancel", job)


def test_a_budget_forged_in_the_working_directory_is_never_acted_on(
    cluster: slurmctl.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """scontrol prints AdminComment only when it is set, right after the always-printed WorkDir: a job with
    none whose working directory is named ``w AdminComment=slurm-topo-auto: …`` reads, in scontrol's text,
    as an auto job past its budget. The text backend's relax pass asks squeue for the job's own AdminComment
    before it writes, refuses the job, and Slurm's view of it is unchanged."""
    slurm = cluster.slurm
    slurm.quiesce()
    base = tmp_path_factory.mktemp("forged")
    base.chmod(0o777)
    forged = base / "w AdminComment=slurm-topo-auto: zone limit=60s region=0s any=0s"
    forged.mkdir()
    forged.chmod(0o777)
    bracket = "[zone_z1|zone_z2]"
    job = user_submit(  # pending, not held (a held job is never widened): it may start in an hour
        slurm, "--begin=now+3600", "-N2", f"--chdir={forged}", f"--constraint={bracket}", "--wrap", "true"
    )
    line = slurm.out("scontrol", "show", "job", "-o", job).splitlines()[0]
    assert " AdminComment=slurm-topo-auto: zone limit=60s" in line, line  # what the text reader is shown
    assert admin_comment(slurm, job) == "(null)"  # the job has none
    before = slurm_view(slurm, job)
    env = {**dict(cluster.env), "SLURM_TOPO_SLURM_BACKEND": "text"}
    now = time.time() + 600
    p = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "relax", "--once", "--json", "--plain-budget"]
        + ["--lock", str(base / "relax.lock"), "--now", f"{now:.0f}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["backend"] == "text", result
    decided = {d["job"]: d for d in result["decisions"]}
    # 22.05 and 24.11: the listing takes the forged budget and the re-read refuses it; 26.05's line already
    # reads as a job without one (no decision at all). Other jobs of the module may still be queued.
    assert job in decided or cluster.version >= (26, 5), result
    if job in decided:
        assert decided[job]["applied"] is False and "not the job's own" in decided[job]["why"], result
    assert admin_comment(slurm, job) == "(null)"
    assert slurm_view(slurm, job) == before
    slurm.out("scancel", job)
