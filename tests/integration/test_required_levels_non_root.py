"""Required levels a job's owner cannot escape (issue 43, items 1-3), on a real Slurm with the filter
installed, every command run as the unprivileged ``nobody`` (the jobs' owner) under a timeout:

1. a node list in any hostlist form Slurm reads (``h18 h02``, ``h1[8],h0[2]``, ``h1[8-8],h02``, ``h18,h0[2]``,
   two brackets, tabs...), at submit (``-w``) and as the owner's ``scontrol update ReqNodeList=``: nodes of
   two zones are refused; nodes of one zone run there (the bracket is that zone's, so Slurm takes the job's
   other nodes from it too); a list the filter cannot read, or a node it does not know, is refused;
2. ``--locality=nvl`` checks node lists as the other levels do (``-N4 -w gb-a001,gb-a007`` ran on two racks);
3. a constraint naming the generator's own features (``-C 'nvl_a|nvl_c'``, ``zone_``...) keeps the level's
   bracket, at submit and as the owner's ``Features=`` update (it was "unknown, not applied" and ran in two
   zones and two regions).

What is asserted is Slurm's own view: every job that runs has its ``NodeList`` (``scontrol show job``) inside
one group of its level (the nodes' own ``zone_``/``region_``/``nvl_`` features, ``scontrol show node``); a
refused request is refused (no job, or the update not taken). Each test prints what it saw (``-s``).

The fleet (a scratch cluster, the tree topology on every release): region r1 holds zones r1-a (h01-h03, NVLink
domain a; gb-a001-gb-a008 in one rack, domains ga1 = gb-a[001-004] and ga2 = gb-a[005-008]) and r1-b (h04-h06,
domain b); region r2 holds r2-a (h16-h18, domain c) and r2-b (h19-h20, no domain). So ``h18`` and ``h02`` are
two zones and two regions; ``gb-a001`` and ``gb-a007`` two domains of one rack, zone and region."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest
import slurmctl

pytestmark = pytest.mark.slurm

USER = "nobody"
HW = {"CPUs": 2, "RealMemory": 1000}
NODE_ENTRIES: list[dict[str, object]] = [
    {"name": "h[01-03]", "region": "r1", "zone": "r1-a", "network_group": "rk1", "nvlink_domain": "a"},
    {"name": "h[04-06]", "region": "r1", "zone": "r1-b", "network_group": "rk2", "nvlink_domain": "b"},
    {"name": "h[16-18]", "region": "r2", "zone": "r2-a", "network_group": "rk3", "nvlink_domain": "c"},
    {"name": "h[19-20]", "region": "r2", "zone": "r2-b", "network_group": "rk4"},
    {
        "name": "gb-a[001-004]",
        "region": "r1",
        "zone": "r1-a",
        "network_group": "rk5",
        "nvlink_domain": "ga1",
    },
    {
        "name": "gb-a[005-008]",
        "region": "r1",
        "zone": "r1-a",
        "network_group": "rk5",
        "nvlink_domain": "ga2",
    },
]
FLEET = {"nvlink": {"topology": "tree"}, "nodes": NODE_ENTRIES}
for entry in NODE_ENTRIES:
    entry["slurm"] = HW
NODES = 19

ACROSS = [
    "h18 h02",
    "h1[8],h0[2]",
    "h1[8-8],h02",
    "h18,h0[2]",
    "h18,h02",
    "h[02,18]",
    "h0[2] h1[8]",
    "h18\th02",
    "h1[8],h[01-02]",
    "h[02-02,18-18]",
    "h[0-1][6]",
]
"""Node lists naming nodes of two zones and two regions (h18: r2-a, h02: r1-a; h06: r1-b, h16: r2-a) in the
forms Slurm reads; the first four escaped as ReqNodeList= updates (issue 43), the plain h18,h02 was
refused."""
ONE_ZONE = ["h01 h02", "h0[1],h0[2]", "h0[1-1],h02", "h01,h0[2]", "h0[1-2]", "h[01-02]", "h0[1]\th0[2]"]
"""h01 and h02 (zone r1-a) in the same forms."""
NOT_CHECKED = ["h[1-]", "h99,h01", "h0[1-2", "h[01- 02]"]
"""Lists the filter cannot read or place (a range with no end, a node it does not know, an unclosed bracket,
whitespace inside a bracket): refused with a required level whatever Slurm would make of them."""


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("reqlvl", FLEET, "--with-filter", nodes_max=NODES) as c:
        yield c


@pytest.fixture
def slurm(cluster: slurmctl.Cluster) -> Iterator[slurmctl.Slurm]:
    s = cluster.slurm
    s.quiesce()
    yield s
    s.quiesce()


def as_user(slurm: slurmctl.Slurm, *argv: str, timeout: int = 20) -> subprocess.CompletedProcess[str]:
    """A client command run as ``nobody`` (the owner of its jobs), under a timeout: ``Slurm.as_user``."""
    return slurm.as_user(*argv, timeout=timeout, user=USER)


def sbatch(slurm: slurmctl.Slurm, *args: str) -> subprocess.CompletedProcess[str]:
    return as_user(
        slurm, "sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args, "--wrap", "sleep 300"
    )


def submitted(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().split(";")[0]


def update(slurm: slurmctl.Slurm, job: str, *fields: str) -> subprocess.CompletedProcess[str]:
    return as_user(slurm, "scontrol", "update", f"JobId={job}", *fields)


def show(slurm: slurmctl.Slurm, job: str) -> dict[str, str]:
    """Slurm's own view of the job (``scontrol show job -o``): state, node list, required nodes, features."""
    line = slurm.out("timeout", "20", "scontrol", "show", "job", "-o", job, timeout=25)
    out = {}
    for key in ("JobState", "NodeList", "ReqNodeList", "Features", "Priority"):
        m = re.search(rf"(?:^|\s){key}=(\S*)", line)
        out[key] = m[1] if m else ""
    return out


def groups(slurm: slurmctl.Slurm) -> dict[str, dict[str, str]]:
    """Each node's zone, region and NVLink domain features, as Slurm has them (``scontrol show node``)."""
    out: dict[str, dict[str, str]] = {}
    for node, feats in slurm.all_node_features().items():
        out[node] = {f.split("_", 1)[0]: f for f in feats if f.startswith(("zone_", "region_", "nvl_"))}
    return out


LEVEL_KEY = {"zone": "zone", "region": "region", "nvl": "nvl"}


def landed(slurm: slurmctl.Slurm, job: str, level: str, wait: float = 20) -> str:
    """Wait for the job to run (``wait`` seconds; a job no group can take stays pending), then assert Slurm's
    own view: a running job's nodes all lie in one group of ``level``. The outcome: ``ran in <group>``,
    ``pending``."""
    end = time.monotonic() + wait
    info = show(slurm, job)
    while info["JobState"] != "RUNNING" and time.monotonic() < end:
        time.sleep(0.2)
        info = show(slurm, job)
    if info["JobState"] != "RUNNING":
        assert info["JobState"] == "PENDING", info
        return "pending"
    nodes = slurm.hostnames(info["NodeList"])
    where = groups(slurm)
    met = {where[n].get(LEVEL_KEY[level], "-") for n in nodes}
    assert len(met) == 1 and "-" not in met, f"job {job} runs on {nodes} across {level}s {sorted(met)}"
    return f"ran in {met.pop()} ({info['NodeList']})"


def refused_at_submit(p: subprocess.CompletedProcess[str], slurm: slurmctl.Slurm, level: str) -> None:
    """The submission was refused. Were it taken, Slurm's own view is asserted first: where the job runs."""
    if p.returncode == 0:
        job = submitted(p)
        raise AssertionError(f"accepted as job {job}: {landed(slurm, job, level)}")
    assert slurm.out("squeue", "-h", "-o", "%i").strip() == "", "a refused submission left a job"


def refused_update(slurm: slurmctl.Slurm, job: str, level: str, field: str) -> None:
    """The owner's update of a held job is refused and the job keeps what it had. Were it taken, the job is
    released and Slurm's own view asserted first: where it runs."""
    before = show(slurm, job)
    p = update(slurm, job, field)
    if p.returncode == 0:
        after = show(slurm, job)
        as_user(slurm, "scontrol", "release", job)
        raise AssertionError(f"{field!r} was taken ({after}): {landed(slurm, job, level)}")
    assert show(slurm, job) == before, field


# ---- 1. every hostlist form: at submit, and as the owner's ReqNodeList= update


@pytest.mark.parametrize("level", ["zone", "region"])
@pytest.mark.parametrize("nodes", ACROSS)
def test_a_node_list_across_the_level_is_refused_at_submit_in_every_form(
    slurm: slurmctl.Slurm, nodes: str, level: str
) -> None:
    size = len(set(slurm.hostnames(nodes)))  # sbatch wants -N to hold the named nodes
    p = sbatch(slurm, "--exclusive", f"--locality={level}", f"-N{size}", "-w", nodes)
    refused_at_submit(p, slurm, level)
    assert (
        f"slurm-topo: --locality={level}:wait: the nodes of --nodelist are in more than one {level}"
        in p.stderr
    )
    print(f"\n{level} -w {nodes!r}: refused")


@pytest.mark.parametrize("nodes", ONE_ZONE)
def test_a_node_list_of_one_zone_runs_there_in_every_form(slurm: slurmctl.Slurm, nodes: str) -> None:
    job = submitted(sbatch(slurm, "--exclusive", "--locality=zone", "-N2", "-w", nodes))
    features = show(slurm, job)["Features"]  # the constraint, or (running on them) the preferred groups
    assert features.endswith("zone_r1-a]") and set(re.findall(r"zone_[\w.-]+", features)) == {"zone_r1-a"}, (
        features
    )
    outcome = landed(slurm, job, "zone")
    assert outcome.startswith("ran in zone_r1-a"), outcome
    assert set(slurm.hostnames(show(slurm, job)["NodeList"])) == {"h01", "h02"}
    print(f"\nzone -w {nodes!r}: {outcome}")


@pytest.mark.parametrize(
    ("named", "size", "level"),
    [("h18", 3, "zone"), ("h1[8]", 3, "zone"), ("h0[4]", 4, "region"), ("gb-a00[7]", 4, "nvl")],
)
def test_the_other_nodes_of_a_job_come_from_the_group_of_the_named_ones(
    slurm: slurmctl.Slurm, named: str, size: int, level: str
) -> None:
    """``-N3 -w h18``: the named node is in zone r2-a, so the bracket is that zone alone; Slurm takes the two
    other nodes from it (a bracket of every zone, smallest first, let it pair h18 with another zone's
    nodes)."""
    job = submitted(sbatch(slurm, "--exclusive", f"--locality={level}", f"-N{size}", "-w", named))
    outcome = landed(slurm, job, level)
    assert outcome.startswith("ran in"), outcome
    print(f"\n{level} -N{size} -w {named!r}: {outcome}")


@pytest.mark.parametrize("nodes", NOT_CHECKED)
def test_a_node_list_the_filter_cannot_check_is_refused_not_passed(slurm: slurmctl.Slurm, nodes: str) -> None:
    """As the owner's ``ReqNodeList=`` (scontrol hands the text over as written): refused, the job unchanged.
    At submit sbatch reads the list first and sends Slurm's own reading (``h[1-]`` arrives as ``h1``,
    ``h[01- 02]`` as ``h[01-02]``): refused, or run inside one zone."""
    job = submitted(sbatch(slurm, "-H", "--locality=zone", "-N2"))
    refused_update(slurm, job, "zone", f"ReqNodeList={nodes}")
    slurm.cancel(job)
    seen = [f"ReqNodeList={nodes!r}: refused"]
    for level in ("zone", "nvl"):
        p = sbatch(slurm, "--exclusive", f"--locality={level}", "-N2", "-w", nodes)
        if p.returncode == 0:
            seen.append(f"{level} -w {nodes!r}: {landed(slurm, submitted(p), level)}")
            slurm.quiesce()
            continue
        refused_at_submit(p, slurm, level)  # by the filter, or by sbatch before it
        said = [line for line in p.stderr.splitlines() if "slurm-topo" in line] or p.stderr.splitlines()[-1:]
        seen.append(f"{level} -w {nodes!r}: refused: {said[0][:200]}")
    print("\n" + "\n".join(seen))


def test_an_owners_node_list_update_is_read_in_every_form(slurm: slurmctl.Slurm) -> None:
    """Each form across the zones as ``scontrol update ReqNodeList=`` by the owner of a held zone job:
    refused, and the job keeps what it had; then each form inside one zone: taken, and once released the job
    runs there. A job whose update was refused runs inside one zone too (its bracket was never lost)."""
    seen = []
    for nodes in ACROSS:
        job = submitted(sbatch(slurm, "-H", "--exclusive", "--locality=zone", "-N2"))
        refused_update(slurm, job, "zone", f"ReqNodeList={nodes}")
        assert as_user(slurm, "scontrol", "release", job).returncode == 0
        seen.append(f"ReqNodeList={nodes!r}: refused; released: {landed(slurm, job, 'zone')}")
        slurm.cancel(job)
    for nodes in ONE_ZONE:
        job = submitted(sbatch(slurm, "-H", "--exclusive", "--locality=zone", "-N2"))
        p = update(slurm, job, f"ReqNodeList={nodes}")
        assert p.returncode == 0, (nodes, p.stderr)
        assert as_user(slurm, "scontrol", "release", job).returncode == 0
        outcome = landed(slurm, job, "zone")
        assert outcome.startswith("ran in zone_r1-a"), (nodes, outcome)
        seen.append(f"ReqNodeList={nodes!r}: taken; {outcome}")
        slurm.cancel(job)
    print("\n" + "\n".join(seen))


# ---- 2. --locality=nvl checks node lists


NVL_ACROSS = [
    "gb-a001,gb-a007",
    "gb-a001 gb-a007",
    "gb-a00[1],gb-a00[7]",
    "gb-a00[1-1],gb-a007",
    "gb-a[001,007]",
    "h0[1],h0[4]",
]


@pytest.mark.parametrize("nodes", NVL_ACROSS)
def test_nvl_refuses_a_node_list_across_domains_at_submit(slurm: slurmctl.Slurm, nodes: str) -> None:
    p = sbatch(slurm, "--exclusive", "--locality=nvl", "-N4", "-w", nodes)
    refused_at_submit(p, slurm, "nvl")
    assert "the nodes of --nodelist are in more than one nvl" in p.stderr, p.stderr
    print(f"\nnvl -N4 -w {nodes!r}: refused")


def test_nvl_runs_a_node_list_of_one_domain_there_and_refuses_a_node_in_none(slurm: slurmctl.Slurm) -> None:
    job = submitted(sbatch(slurm, "--exclusive", "--locality=nvl", "-N4", "-w", "gb-a00[1-2]"))
    assert show(slurm, job)["Features"] == "[nvl_ga1]", show(slurm, job)
    outcome = landed(slurm, job, "nvl")
    assert outcome.startswith("ran in nvl_ga1"), outcome
    print(f"\nnvl -N4 -w 'gb-a00[1-2]': {outcome}")
    p = sbatch(slurm, "--locality=nvl:fail", "-N2", "-w", "h19,h20")
    assert p.returncode != 0 and "names a node that is in no nvl" in p.stderr, p.stderr


def test_nvl_checks_an_owners_node_list_update(slurm: slurmctl.Slurm) -> None:
    job = submitted(sbatch(slurm, "-H", "--exclusive", "--locality=nvl", "-N4"))
    for nodes in NVL_ACROSS:
        refused_update(slurm, job, "nvl", f"ReqNodeList={nodes}")
    p = update(slurm, job, "ReqNodeList=gb-a00[5] gb-a00[8]")
    assert p.returncode == 0, p.stderr
    assert as_user(slurm, "scontrol", "release", job).returncode == 0
    outcome = landed(slurm, job, "nvl")
    assert outcome.startswith("ran in nvl_ga2"), outcome
    print(f"\nnvl ReqNodeList=gb-a00[5] gb-a00[8]: {outcome}")


# ---- 3. constraints naming the generator's own features


GENERATED = [
    ("zone", 4, "nvl_a|nvl_c"),  # the issue's: nvl_a is in r1-a, nvl_c in r2-a: no zone has 4 of them
    ("zone", 2, "nvl_a|nvl_c"),
    ("region:fail", 4, "nvl_a|nvl_c"),
    ("region", 5, "nvl_a|nvl_b"),
    ("zone", 2, "nvl_c"),
    ("nvl", 2, "zone_r1-a"),
    ("nvl", 3, "zone_r1-a|zone_r2-a"),
    ("zone", 3, "region_r2"),
]


@pytest.mark.parametrize(("locality", "size", "constraint"), GENERATED)
def test_a_constraint_of_generated_features_keeps_the_level_at_submit(
    slurm: slurmctl.Slurm, locality: str, size: int, constraint: str
) -> None:
    p = sbatch(slurm, "--exclusive", f"--locality={locality}", f"-N{size}", "-C", constraint)
    if p.returncode == 0 and "not applied" in p.stderr:  # Slurm's view first: where does it run
        raise AssertionError(f"{p.stderr.strip()}: {landed(slurm, submitted(p), locality.split(':')[0], 12)}")
    assert "not applied" not in p.stderr and "no node of this cluster has the feature" not in p.stderr, (
        p.stderr
    )
    if p.returncode != 0:  # Slurm itself finds no group that can take the job
        assert "slurm-topo" not in p.stderr, p.stderr
        outcome = f"refused by Slurm: {p.stderr.strip().splitlines()[-1]}"
    else:
        job = submitted(p)
        features = show(slurm, job)["Features"]
        assert "&[" in features and features.startswith((f"({constraint})&", f"{constraint}&")), features
        outcome = landed(slurm, job, locality.split(":")[0], wait=12)
    print(f"\n{locality} -N{size} -C {constraint!r}: {outcome}")


def test_an_owners_features_update_with_generated_features_keeps_the_bracket(slurm: slurmctl.Slurm) -> None:
    """``Features='nvl_a|nvl_c'`` by the owner of a held zone job: the zone bracket is put back (it was
    dropped, and the job ran in two zones and two regions); a bracket of NVLink domains cannot be combined
    with one of zones: refused."""
    seen = []
    for size in (4, 2):
        job = submitted(sbatch(slurm, "-H", "--exclusive", "--locality=zone", f"-N{size}"))
        p = update(slurm, job, "Features=nvl_a|nvl_c")
        assert p.returncode == 0, p.stderr
        features = show(slurm, job)["Features"]
        if not features.startswith("(nvl_a|nvl_c)&[zone_"):  # Slurm's view first: where does it run now
            as_user(slurm, "scontrol", "release", job)
            raise AssertionError(f"Features={features}: {landed(slurm, job, 'zone', wait=12)}")
        refused_update(slurm, job, "zone", "Features=[nvl_a|nvl_c]")
        assert as_user(slurm, "scontrol", "release", job).returncode == 0
        outcome = landed(slurm, job, "zone", wait=12)
        if size == 2:
            assert outcome.startswith("ran in"), outcome
        seen.append(f"zone -N{size} Features='nvl_a|nvl_c': {features}; {outcome}")
        slurm.cancel(job)
    print("\n" + "\n".join(seen))
