"""The proof's error rule (slurm_topo/apply/prove.py): every ``error:`` line of the throwaway slurmctld
refuses the set, except the few it prints whatever it loads (``SANDBOX_ERRORS``, each with its reason) —
run over real logs of Slurm 22.05, 24.11 and 26.05 (tests/fixtures/real/proof-logs/<release>/, captured from
the throwaway on the test cluster: a set it loads, IPv6 node addresses without ``EnableIPv6``,
``RealMemory=0``, ``Sockets=`` beside ``SocketsPerBoard=``, ``State=BOGUS``), line by line and replayed
through the throwaway controller (a stand-in slurmctld that prints the log)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from preconditions import needs_root as root_only

from slurm_topo.apply.prove import (
    SANDBOX_ERRORS,
    ThrowawayController,
    allowed_error,
    config_error,
    hosts_file,
    slurm_text,
)

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "real" / "proof-logs"
RELEASES = ("22.05", "24.11", "26.05")
needs_root = root_only("the throwaway controller runs only as root")


def log(release: str, case: str) -> list[str]:
    return (LOGS / release / f"{case}.log").read_text().splitlines()


def counted(lines: list[str]) -> list[str]:
    return [slurm_text(ln) for ln in lines if config_error(ln)]


# --------------------------------------------------------------------------------------------------
# the rule, line by line


@pytest.mark.parametrize("release", RELEASES)
def test_a_set_slurm_loads_has_no_error_line_that_counts(release: str) -> None:
    lines = log(release, "accepted")
    assert lines[-1].endswith("Running as primary controller")
    assert counted(lines) == [], counted(lines)
    errors = [ln for ln in lines if " error: " in f" {slurm_text(ln)}"]
    assert all(allowed_error(ln) is not None for ln in errors)
    if release == "22.05":  # PMIx and the empty state directory; 26.05 logs neither as an error
        assert len(errors) == 7, errors


@pytest.mark.parametrize("release", RELEASES)
def test_addresses_slurm_cannot_resolve_count_though_slurm_goes_on_loading(release: str) -> None:
    """IPv6 node addresses without ``CommunicationParameters=EnableIPv6``: getaddrinfo's errors, then
    slurmctld loads the set without the nodes' addresses. Only ``NodeNames=``/``PartitionName=``/…
    lines counted before: these passed."""
    lines = counted(log(release, "ipv6-without-enableipv6"))
    assert lines and all("getaddrinfo" in ln or "fd00::" in ln or "Address family" in ln for ln in lines), (
        lines
    )
    assert any('Unable to resolve "fd00::1"' in ln for ln in lines), lines


@pytest.mark.parametrize(
    ("case", "line"),
    [
        ("realmemory-0", "error: NodeNames=a1 MemSpecLimit=0 is invalid, reset to 0"),
        (
            "sockets-and-socketsperboard",
            "error: NodeNames=a1 Sockets=# and SocketsPerBoard=# is invalid , using SocketsPerBoard",
        ),
    ],
)
@pytest.mark.parametrize("release", RELEASES)
def test_a_value_slurm_resets_counts(release: str, case: str, line: str) -> None:
    assert set(counted(log(release, case))) == {line}


@pytest.mark.parametrize("release", RELEASES)
def test_the_error_line_before_a_fatal_one_counts_too(release: str) -> None:
    """``State=BOGUS``: an ``error:`` line, then the ``fatal:`` one (which the replay below names)."""
    lines = log(release, "state-bogus")
    assert slurm_text(lines[-1]) == "fatal: Invalid state BOGUS from a1"
    assert counted(lines) == ["error: node a1 has invalid state BOGUS"]


def test_every_allowed_line_has_its_reason_and_a_real_line_it_lets_pass() -> None:
    """No dead entries: each one lets at least one line of a real log pass, and says why."""
    real = [
        ln
        for release in RELEASES
        for path in (LOGS / release).glob("*.log")
        for ln in path.read_text().splitlines()
    ]
    for entry in SANDBOX_ERRORS:
        assert len(entry.why) > 60, entry
        if entry.source:  # a line of a loaded host: its text from Slurm's format string, in both prefixes
            text = "error: " + entry.source.split('error("', 1)[1].split('")', 1)[0].replace("%d", "399")
            for line in (f"slurmctld: {text}", f"[2026-12-06T16:31:02.118] {text}"):
                assert allowed_error(line) is entry, line
            continue
        assert any(allowed_error(ln) is entry for ln in real), entry.pattern.pattern


@pytest.mark.parametrize(
    "line",
    [
        # a state file that is not the throwaway's own (never read: it has a state directory of its own)
        "slurmctld: error: Could not open job state file /var/spool/slurmctld/job_state: No such file or "
        "directory",
        "slurmctld: error: Could not open job state file /tmp/slurm-topo-prove-x/state/job_state: Permission "
        "denied",
        "slurmctld: error: mpi/pmix_v4: init: something else entirely",
        "slurmctld: error: Couldn't load specified plugin name for select/cons_tres: Plugin init() callback "
        "failed",
        "slurmctld: error: NOTE: Trying backup state save file. Nodes may be lost!",
        "[2026-12-06T07:48:04.927] error: _xgetaddrinfo: getaddrinfo(h1:6818) failed: Temporary failure",
        "slurmctld: error: CPUs 1 specified more than once, latest value used",
        "slurmctld[42]: error: anything at all",
        "slurmctld: error: High latency for 1000 calls to gettimeofday(): 399 microseconds, and more",
        "slurmctld: error: High latency for 1000 calls to getaddrinfo(): 399 microseconds",
    ],
)
def test_near_misses_of_the_allowed_lines_count(line: str) -> None:
    assert config_error(line), line


@pytest.mark.parametrize(
    "line",
    [
        "slurmctld: warning: TOPOLOGY: no switch can reach all nodes through its descendants.",
        "slurmctld: debug:  an error: inside another level's text",
        "slurmctld: No reservation state file (/tmp/slurm-topo-prove-x/state/resv_state.old) to recover",
        "slurmctld: fatal: Invalid state BOGUS from a1",  # a fatal line ends the proof on its own
        "slurm-topo apply: no IPv6 address in the proof namespace",
    ],
)
def test_lines_that_are_not_errors_do_not_count(line: str) -> None:
    assert not config_error(line), line


def test_slurms_prefixes_are_taken_off() -> None:
    assert slurm_text("slurmctld: error: x: y") == "error: x: y"
    assert slurm_text("[2026-12-06T08:24:23.347] error: NodeNames=a1 y") == "error: NodeNames=a1 y"
    assert slurm_text("[2026-12-06T08:24:23.347] fatal: z") == "fatal: z"


def test_the_private_hosts_file_names_every_host_on_both_families() -> None:
    text = hosts_file({"n1", "ctl", "10.0.0.1", "fd00::5"})
    assert text.splitlines() == [
        "127.0.0.1 localhost",
        "::1 localhost",
        "192.0.2.1 ctl",
        "2001:db8::1 ctl",
        "192.0.2.1 n1",
        "2001:db8::1 n1",
    ]
    assert hosts_file({"n1"}, ipv6=False).splitlines() == ["127.0.0.1 localhost", "192.0.2.1 n1"]


# --------------------------------------------------------------------------------------------------
# replayed through the throwaway controller


UNSHARE = """#!/bin/sh
# stand-in for unshare(1): drop "--net --mount -- /bin/sh -c SCRIPT sh" and run the daemon as it is
shift 7
exec "$@"
"""


def program(path: Path, body: str) -> str:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def replaying(tmp: Path, logfile: Path, then: str = "sleep 30") -> ThrowawayController:
    """A throwaway whose slurmctld prints ``logfile`` (a real one's output), then runs ``then``."""
    tools = tmp / "tools"
    tools.mkdir(exist_ok=True)
    slurmctld = program(tools / "slurmctld", f'#!/bin/sh\ncat "{logfile}"\n{then}\n')
    return ThrowawayController(slurmctld, program(tools / "unshare", UNSHARE))


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    d = tmp_path / "etc"
    d.mkdir()
    (d / "slurm.conf").write_text("ClusterName=c\nNodeName=a1 CPUs=1\n")
    return d


@needs_root
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("case", "verdict", "error"),
    [
        ("accepted", "accepted", ""),
        ("ipv6-without-enableipv6", "rejected", 'Unable to resolve "fd00::1"'),
        ("realmemory-0", "rejected", "error: NodeNames=a1 MemSpecLimit=0 is invalid, reset to 0"),
        ("sockets-and-socketsperboard", "rejected", "Sockets=# and SocketsPerBoard=# is invalid"),
        ("state-bogus", "rejected", "fatal: Invalid state BOGUS from a1"),
    ],
)
def test_a_real_log_replayed_gets_its_verdict(
    etc: Path, tmp_path: Path, release: str, case: str, verdict: str, error: str
) -> None:
    proof = replaying(tmp_path, LOGS / release / f"{case}.log").prove(etc, {}, 20)
    assert proof.verdict == verdict, proof
    assert error in proof.error, proof.error
    if case == "ipv6-without-enableipv6":
        assert proof.error.startswith("error: ") and "getaddrinfo" in proof.error, proof.error


@needs_root
def test_an_error_line_refuses_at_once_whatever_follows(etc: Path, tmp_path: Path) -> None:
    """The refusal comes within the grace after the line, not at the deadline, and names the first line
    and the next one that says something else."""
    logfile = tmp_path / "x.log"
    logfile.write_text(
        "slurmctld: error: _xgetaddrinfo: getaddrinfo(h1:6818) failed: Temporary failure in name resolution\n"
        'slurmctld: error: slurm_set_addr: Unable to resolve "h1"\n'
    )
    # had the proof read on past its grace, it would have seen this line 20 s later (no clock is asserted)
    then = "sleep 20; echo 'slurmctld: Running as primary controller'; sleep 60"
    proof = replaying(tmp_path, logfile, then).prove(etc, {}, 30)
    assert not any("Running as primary controller" in line for line in proof.log), proof.log
    assert proof.verdict == "rejected"
    assert proof.error == (
        "error: _xgetaddrinfo: getaddrinfo(h1:6818) failed: Temporary failure in name resolution "
        '(then: error: slurm_set_addr: Unable to resolve "h1")'
    )


@needs_root
def test_retries_alone_refuse_when_nothing_concludes_them_in_time(etc: Path, tmp_path: Path) -> None:
    logfile = tmp_path / "x.log"
    logfile.write_text(
        "slurmctld: error: get_addr_info: getaddrinfo() failed: Address family for hostname not supported: "
        "No error, attempt number -4\n"
    )
    proof = replaying(tmp_path, logfile, "sleep 60").prove(etc, {}, 2)
    assert proof.verdict == "rejected" and proof.error.endswith("attempt number -4"), proof


@needs_root
def test_a_namespace_without_an_address_does_not_count_resolver_lines(etc: Path, tmp_path: Path) -> None:
    """Where the proof's namespace could not be given an address (a container without CAP_NET_ADMIN: the
    setup prints NO_ADDRESS_MARK), getaddrinfo resolves nothing there: its lines say nothing about the set and
    do not refuse it, and the details say address resolution was not proven. Any other error still refuses."""
    from slurm_topo.apply.prove import NO_ADDRESS_MARK

    resolver = (
        f"{NO_ADDRESS_MARK}\n"
        "slurmctld: error: get_addr_info: getaddrinfo() failed: Name or service not known: No error, attempt "
        "number 3\n"
        'slurmctld: error: slurm_set_addr: Unable to resolve "127.0.0.1"\n'
        "slurmctld: error: slurm_get_port: Address family '0' not supported\n"
        "slurmctld: error: _validate_slurmd_addr: failure on 127.0.0.1\n"
        "slurmctld: Running as primary controller\n"
    )
    logfile = tmp_path / "blind.log"
    logfile.write_text(resolver)
    proof = replaying(tmp_path, logfile).prove(etc, {}, 20)
    assert proof.verdict == "accepted", proof
    assert "address resolution not proven" in proof.how
    logfile.write_text(resolver.replace(NO_ADDRESS_MARK + "\n", ""))
    assert replaying(tmp_path, logfile).prove(etc, {}, 20).verdict == "rejected"
    logfile.write_text(
        f"{NO_ADDRESS_MARK}\nslurmctld: error: NodeNames=a1 MemSpecLimit=0 is invalid, reset to 0\n"
    )
    assert replaying(tmp_path, logfile).prove(etc, {}, 20).verdict == "rejected"
