"""The throwaway controller (slurm_topo/apply/prove.py) with its two programs injected: a stand-in
``unshare`` that runs the command without a namespace (no mount reaches the host) and a stand-in
``slurmctld`` that prints what it was given and then what a real one prints (``Running as primary
controller``, a ``fatal:`` line, a parser ``error:``, nothing). The real slurmctld in its namespace runs in
tests/integration/. The slurm.conf is the test cluster's own template (docker-slurm/conf/slurm.conf.in)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest
from preconditions import needs_root as root_only

from slurm_topo.apply import TOPOLOGY, TOPOLOGY_YAML
from slurm_topo.apply.prove import (
    ACCEPTED_MARK,
    PROOF_SECONDS_PER_NODE,
    ThrowawayController,
    _binary_version,
    node_host_names,
    probe_conf,
    prover_for,
)

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "fixtures" / "real" / "slurm-22.05"
SLURM_CONF = (ROOT / "docker-slurm" / "conf" / "slurm.conf.in").read_text()

needs_root = root_only("the throwaway controller runs only as root")

UNSHARE = """#!/bin/sh
# stand-in for unshare(1): drop "--net --mount -- /bin/sh -c SCRIPT sh" and run the daemon as it is
shift 7
exec "$@"
"""


def program(path: Path, body: str) -> str:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def slurmctld(tmp: Path, then: str, version: str = "slurm 22.05.8") -> str:
    """A stand-in slurmctld: ``-V`` says ``version``; otherwise it reports its arguments, environment and
    copy directory, then runs ``then`` (a shell snippet)."""
    return program(
        tmp / "slurmctld",
        f"""#!/bin/sh
if [ "$1" = "-V" ]; then echo "{version}"; exit 0; fi
conf="$5"; dir=$(dirname "$conf")
echo "args: $*"
echo "env SLURM_CONF=$SLURM_CONF SLURM_JOB_ID=${{SLURM_JOB_ID:-unset}}"
echo "dir: $dir"
echo "hosts: $(tr '\\n' ';' < "$dir/hosts")"
grep -h '^SlurmctldHost=\\|^StateSaveLocation=' "$conf" | sed 's/^/conf: /'
head -n 1 "$dir/{TOPOLOGY}" | sed 's/^/topology: /'
[ -e "$dir/{TOPOLOGY_YAML}" ] && echo "yaml still there"
[ -e "$dir/.{TOPOLOGY}.slurm-topo.tmp" ] && echo "staging file copied"
{then}
""",
    )


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    d = tmp_path / "etc"
    d.mkdir()
    (d / "slurm.conf").write_text(SLURM_CONF)
    for name in ("slurm-topo-nodes.conf", TOPOLOGY, "gres.conf"):
        (d / name).write_text((REAL / name).read_text())
    (d / TOPOLOGY_YAML).write_text("- topology: old\n")
    (d / ".topology.conf.slurm-topo.tmp").write_text("a staging file is never copied\n")
    return d


def controller(tmp: Path, then: str, **kw: object) -> ThrowawayController:
    tools = tmp / "tools"
    tools.mkdir(exist_ok=True)
    return ThrowawayController(slurmctld(tools, then), program(tools / "unshare", UNSHARE), **kw)  # type: ignore[arg-type]


STAGED = {TOPOLOGY: b"# staged\nSwitchName=s Nodes=n[01-12]\n", TOPOLOGY_YAML: None}


def log_value(log: tuple[str, ...], prefix: str) -> list[str]:
    return [line.removeprefix(prefix) for line in log if line.startswith(prefix)]


# --------------------------------------------------------------------------------------------------
# the copy it loads and what it is told


@needs_root
def test_the_throwaway_loads_a_private_copy_with_the_staged_files_in_place(
    etc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "42")  # apply run from inside a job: nothing of it may leak in
    before = {p.name: p.read_bytes() for p in etc.iterdir()}
    proof = controller(tmp_path, f'echo "slurmctld: {ACCEPTED_MARK}"; sleep 30').prove(etc, STAGED, 20)
    assert proof.verdict == "accepted" and "loaded the set" in proof.how, proof
    (copy,) = log_value(proof.log, "dir: ")
    assert copy != str(etc) and not Path(copy).exists(), "the copy must be removed afterwards"
    assert log_value(proof.log, "args: ") == [f"-D -c -i -f {copy}/slurm.conf"]
    assert log_value(proof.log, "env ") == [f"SLURM_CONF={copy}/slurm.conf SLURM_JOB_ID=unset"]
    assert log_value(proof.log, "topology: ") == ["# staged"] and "yaml still there" not in proof.log
    assert "staging file copied" not in proof.log
    conf = log_value(proof.log, "conf: ")
    assert conf[-1] == f"StateSaveLocation={copy}/state" and len(conf) == 2
    (hosts_file,) = log_value(proof.log, "hosts: ")
    hosts = hosts_file.rstrip(";").split(";")
    assert hosts[0] == "127.0.0.1 localhost"
    named = {line.split()[1] for line in hosts[1:]}
    assert {f"n{i:02d}" for i in range(1, 13)} | {"localhost"} <= named and "127.0.0.1" not in named
    assert {p.name: p.read_bytes() for p in etc.iterdir()} == before, "the live directory was touched"


@needs_root
def test_a_fatal_line_is_a_rejection_that_names_slurms_own_words(etc: Path, tmp_path: Path) -> None:
    then = (
        'echo "slurmctld: error: something first"; '
        'echo "slurmctld: fatal: Invalid state BOGUS from n01"; sleep 30'
    )
    proof = controller(tmp_path, then).prove(etc, STAGED, 20)
    assert (proof.verdict, proof.error) == ("rejected", "fatal: Invalid state BOGUS from n01"), proof
    assert proof.log[-1] == "slurmctld: fatal: Invalid state BOGUS from n01"


@needs_root
def test_a_set_loaded_with_parser_complaints_is_a_rejection(etc: Path, tmp_path: Path) -> None:
    then = (
        'echo "slurmctld: error: Could not open job state file $dir/state/job_state: No such file or '
        'directory"; '
        'echo "slurmctld: error: NOTE: Trying backup state save file. Jobs may be lost!"; '
        'echo "slurmctld: error: NodeNames=n01 CPUs=12 match no Sockets. Resetting CPUs."; '
        f'echo "slurmctld: {ACCEPTED_MARK}"; sleep 30'
    )
    proof = controller(tmp_path, then).prove(etc, STAGED, 20)
    assert (
        proof.verdict == "rejected"
        and proof.error == "error: NodeNames=n01 CPUs=12 match no Sockets. Resetting CPUs."
    )


@needs_root
def test_a_controller_that_exits_without_a_word_is_a_rejection_with_its_exit_code(
    etc: Path, tmp_path: Path
) -> None:
    proof = controller(tmp_path, "exit 3").prove(etc, STAGED, 20)
    assert (proof.verdict, proof.error) == ("rejected", "slurmctld exited 3 before it ran"), proof
    said = controller(tmp_path, 'echo "slurmctld: error: Unable to bind listen port"; exit 1').prove(
        etc, STAGED, 20
    )
    assert said.verdict == "rejected" and said.error == "error: Unable to bind listen port"


@needs_root
def test_a_controller_that_says_nothing_in_time_is_a_timeout_and_its_group_is_killed(
    etc: Path, tmp_path: Path
) -> None:
    """slurmctld forks slurmscriptd: the whole process group goes, not just the first process."""
    then = 'sleep 300 & echo "child: $!"; sleep 300'
    proof = controller(tmp_path, then).prove(etc, STAGED, 2.0)  # ample for the child to start
    assert (
        proof.verdict == "timeout"
        and "no 'Running as primary controller' and no fatal: or error: line" in proof.error
    )
    (child,) = log_value(proof.log, "child: ")
    deadline = time.monotonic() + 10
    while alive(int(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(child)), "the throwaway's child outlived it"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# --------------------------------------------------------------------------------------------------
# when nothing is proven, and why


def test_without_slurm_conf_nothing_is_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    proof = controller(tmp_path, f"touch {marker}").prove(tmp_path, STAGED, 5)
    assert proof.verdict == "skipped" and proof.how == f"no slurm.conf in {tmp_path}: not proven by Slurm"
    assert not marker.exists()


def test_without_slurmctld_or_unshare_nothing_is_proven(etc: Path) -> None:
    prover = ThrowawayController()
    prover.unshare = None
    proof = prover.prove(etc, STAGED, 5)
    assert proof.verdict == "skipped" and "slurmctld or unshare not found on this host" in proof.how


@needs_root
@pytest.mark.parametrize(("says", "shown"), [("slurm 24.11.5", "24.11"), ("", "unknown")])
def test_a_slurmctld_of_another_release_is_not_asked(
    etc: Path, tmp_path: Path, says: str, shown: str
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    marker = tmp_path / "ran"
    prover = ThrowawayController(
        slurmctld(tools, f"touch {marker}", version=says), program(tools / "unshare", UNSHARE), expect=(26, 5)
    )
    proof = prover.prove(etc, STAGED, 5)
    assert proof.verdict == "skipped" and f"is Slurm {shown}, the controller runs 26.05" in proof.how, proof
    assert not marker.exists()


@needs_root
def test_a_slurmctld_of_the_controllers_release_is_asked(etc: Path, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    prover = ThrowawayController(
        slurmctld(tools, f'echo "slurmctld: {ACCEPTED_MARK}"', version="slurm 26.05.5"),
        program(tools / "unshare", UNSHARE),
        expect=(26, 5),
    )
    assert prover.prove(etc, STAGED, 20).verdict == "accepted"


def test_prover_for_expects_the_running_release() -> None:
    prover = prover_for((24, 11))
    assert isinstance(prover, ThrowawayController) and prover.expect == (24, 11)
    assert prover_for(None).expect is None  # type: ignore[attr-defined]


def test_binary_version_of_a_program_that_cannot_run_is_none(tmp_path: Path) -> None:
    assert _binary_version(str(tmp_path / "missing")) is None
    assert _binary_version(slurmctld(tmp_path, "", version="slurm-wlm 22.05.8")) == (22, 5)


# --------------------------------------------------------------------------------------------------
# the copy's slurm.conf and hosts


def test_the_test_clusters_slurm_conf_keeps_the_cluster_and_loses_what_could_reach_out() -> None:
    out = probe_conf(SLURM_CONF, Path("/etc/slurm"), Path("/tmp/copy"), "here")
    lines = out.splitlines()
    dropped = {
        "SlurmctldHost",
        "SlurmUser",
        "StateSaveLocation",
        "SlurmctldPidFile",
        "SlurmctldLogFile",
        "SlurmctldDebug",
    }
    kept = [ln for ln in SLURM_CONF.splitlines() if ln.split("=", 1)[0] not in dropped]
    assert lines[: len(kept)] == kept, "every other line stays, in order"
    assert lines[len(kept) :] == [
        "# slurm-topo apply: throwaway controller that only proves the files load",
        "SlurmctldHost=here",
        "SlurmUser=root",
        "StateSaveLocation=/tmp/copy/state",
        "SlurmctldPidFile=/tmp/copy/slurmctld.pid",
        "SlurmctldDebug=info",
        "SlurmctldSyslogDebug=quiet",
    ]
    assert "SlurmdPidFile=@BASE@/run/slurmd-%n.pid" in lines and "Include slurm-topo-nodes.conf" in lines


def test_programs_and_backup_controllers_are_dropped_in_any_case() -> None:
    text = (
        "ControlMachine=old\nBackupController=b\nbackupaddr=10.0.0.2\nSUSPENDPROGRAM=/x\n"
        "SlurmctldPrimaryOnProg=/y\nSlurmSchedLogFile=/z\nJobCompLoc=/j\nAccountingStorageEnforce=limits\n"
        "NodeName=a1 CPUs=2\n"
    )
    out = probe_conf(text, Path("/etc/slurm"), Path("/tmp/c"), "h").splitlines()
    assert out[0] == "NodeName=a1 CPUs=2" and out[1].startswith("# slurm-topo apply")


def test_node_host_names_of_the_real_node_lines_skip_defaults_and_broken_lines(tmp_path: Path) -> None:
    (tmp_path / "slurm-topo-nodes.conf").write_text((REAL / "slurm-topo-nodes.conf").read_text())
    (tmp_path / "slurm.conf").write_text(
        "NodeName=DEFAULT CPUs=2\nNodeName=login[1-2] NodeAddr=10.1.0.[1-2]\n"
        "NodeName=bad[3-1]\nPartitionName=p\n"
    )
    (tmp_path / "notes.txt").write_text("NodeName=ignored\n")
    names = node_host_names(tmp_path)
    assert names == {f"n{i:02d}" for i in range(1, 13)} | {"localhost", "127.0.0.1"} | {
        "login1",
        "login2",
        "10.1.0.1",
        "10.1.0.2",
    }


def test_the_proof_limit_grows_by_the_measured_time_per_node() -> None:
    from slurm_topo.apply.prove import proof_timeout

    assert proof_timeout(60, 10_200) == pytest.approx(60 + 10_200 * PROOF_SECONDS_PER_NODE)
    assert proof_timeout(60, 10_200) - 60 >= 58, "the measured 10 200-node load (58 s) must fit"


READ_INCLUDE = """inc=$(sed -n 's/^Include //p' "$conf" | head -n 1)
head -n 1 "$inc" | sed 's/^/included: /'
echo "slurmctld: Running as primary controller"
"""


@needs_root
def test_an_absolute_include_of_the_node_lines_loads_the_staged_ones(etc: Path, tmp_path: Path) -> None:
    (etc / "slurm.conf").write_text(f"ClusterName=c\nInclude {etc}/slurm-topo-nodes.conf\n")
    staged = {"slurm-topo-nodes.conf": b"# staged node lines\nNodeName=n01\n"}
    proof = controller(tmp_path, READ_INCLUDE).prove(etc, staged, 20)
    assert log_value(proof.log, "included: ") == ["# staged node lines"], proof


@needs_root
def test_through_a_symlinked_slurm_dir_the_include_still_loads_the_staged_node_lines(
    etc: Path, tmp_path: Path
) -> None:
    (etc / "slurm.conf").write_text(f"ClusterName=c\nInclude {etc}/slurm-topo-nodes.conf\n")
    link = tmp_path / "slurm-llnl"
    link.symlink_to(etc)
    staged = {"slurm-topo-nodes.conf": b"# staged node lines\nNodeName=n01\n"}
    proof = controller(tmp_path, READ_INCLUDE).prove(link, staged, 20)
    assert log_value(proof.log, "included: ") == ["# staged node lines"], proof


def include_of(conf: str) -> str:
    (line,) = [ln for ln in conf.splitlines() if ln.startswith("Include ")]
    return line.removeprefix("Include ")


def test_an_include_through_a_symlinked_directory_names_the_copy_whichever_side_is_the_link(
    tmp_path: Path,
) -> None:
    """--slurm-dir and the Include line may each spell the directory through a symlink: both resolve to
    one directory, so the staged node lines are what the throwaway reads."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm-topo-nodes.conf").write_text("# live\n")
    link = tmp_path / "slurm-llnl"
    link.symlink_to(etc)
    copy = tmp_path / "copy"
    staged = ["slurm-topo-nodes.conf"]
    for slurm_dir, named in ((link, etc), (etc, link), (link, link)):
        text = f"Include {named}/slurm-topo-nodes.conf\n"
        out = probe_conf(text, slurm_dir, copy, "h", staged)
        assert include_of(out) == f"{copy}/slurm-topo-nodes.conf", (slurm_dir, named)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    text = f"Include {elsewhere}/slurm-topo-nodes.conf\n"
    assert include_of(probe_conf(text, link, copy, "h", staged)) == f"{elsewhere}/slurm-topo-nodes.conf"


def test_an_include_of_a_symlink_follows_it_unless_apply_replaces_the_link(tmp_path: Path) -> None:
    """A symlink outside the directory to a file of it reads that file's copy; a symlink inside it that
    carries a name the set writes is replaced by apply's rename, so its copy is the staged file even where
    the link pointed at another file of the directory."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm-topo-nodes.conf").write_text("# live\n")
    (etc / "nodes-by-hand.conf").write_text("# by hand\n")
    (etc / "nodes.conf").symlink_to("slurm-topo-nodes.conf")  # not written by apply: followed
    (etc / "gres.conf").symlink_to("nodes-by-hand.conf")  # written by apply: the link is replaced
    (tmp_path / "outside.conf").symlink_to(etc / "slurm-topo-nodes.conf")
    copy = tmp_path / "copy"
    staged = ["slurm-topo-nodes.conf", "gres.conf"]
    for named, read in (
        (tmp_path / "outside.conf", "slurm-topo-nodes.conf"),
        (etc / "nodes.conf", "slurm-topo-nodes.conf"),
        (etc / "gres.conf", "gres.conf"),
        (etc / "nodes-by-hand.conf", "nodes-by-hand.conf"),
    ):
        out = probe_conf(f"Include {named}\n", etc, copy, "h", staged)
        assert include_of(out) == f"{copy}/{read}", named


@root_only("the proof's preconditions are checked as root")
def test_without_ip_the_set_is_not_proven_rather_than_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without iproute2 the namespace gets no address besides loopback and getaddrinfo (AI_ADDRCONFIG)
    resolves no node: every set would be refused on a resolver error that says nothing about it. The proof is
    skipped instead, and says why (the image once lacked iproute2: every apply there was refused)."""
    from slurm_topo.apply import prove as prove_module

    real_which = prove_module.shutil.which
    monkeypatch.setattr(prove_module.shutil, "which", lambda name: None if name == "ip" else real_which(name))
    (tmp_path / "slurm.conf").write_text("ClusterName=c\n")
    proof = prove_module.ThrowawayController(slurmctld="/bin/true", unshare="/bin/true").prove(
        tmp_path, {}, 5
    )
    assert proof.verdict == "skipped" and "ip (iproute2) not found" in proof.how
