"""apply's controller client (slurm_topo/apply/controller.py) against scripted answers: what it asks, how it
reads ``scontrol``/``squeue`` (the real outputs of tests/fixtures/real/), and the verification's polling
under an injected clock (no wall time)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import ScriptedRunner

from slurm_topo.apply import NODES, TOPOLOGY, TOPOLOGY_YAML, ApplyOptions
from slurm_topo.apply.controller import _Slurm
from slurm_topo.core.errors import CommandError

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
BLOCKS = REAL / "topology-blocks-26.05"
UP = "Slurmctld(primary) at ctl1 is UP\n"


def real(release: str, name: str) -> str:
    return (REAL / release / name).read_text()


class TimedRunner(ScriptedRunner):
    """A ScriptedRunner that also records the timeout each command was given."""

    def __init__(self, answers: dict[str | tuple[str, ...], object]) -> None:
        super().__init__(answers)
        self.timeouts: list[float] = []

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        self.timeouts.append(timeout)
        return super().run(argv, timeout)


class Clock:
    """An injected clock: ``sleep`` moves it, and may change what the controller answers from then on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def slurm(runner: ScriptedRunner, clock: Clock | None = None, **kw: object) -> _Slurm:
    clock = clock or Clock()
    o = ApplyOptions(slurm_dir=Path("/etc/slurm"), clock=clock.time, sleep=clock.sleep, **kw)  # type: ignore[arg-type]
    return _Slurm(runner, o)


@pytest.mark.parametrize(
    ("answer", "up"),
    [
        (UP, True),
        ("Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is DOWN\n", True),
        ("Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n", False),
        ("Slurmctld(primary) at ctl1 is UP   \n", True),
        ("", False),
        ("something else entirely\n", False),
        (CommandError(["scontrol", "ping"], 1, "Unable to contact slurm controller"), False),
    ],
)
def test_only_the_primary_controller_being_up_counts(answer: object, up: bool) -> None:
    runner = ScriptedRunner({"scontrol ping": answer})
    assert slurm(runner).primary_up() is up
    assert runner.calls == [("scontrol", "ping")]


@pytest.mark.parametrize("release", ["slurm-22.05", "slurm-24.11", "slurm-26.05"])
def test_the_version_is_read_from_the_real_scontrol_output_once(release: str) -> None:
    runner = ScriptedRunner({"scontrol --version": real(release, "scontrol--version.txt")})
    s = slurm(runner)
    want = tuple(int(x) for x in release.removeprefix("slurm-").split("."))
    assert s.version() == want and s.version() == want
    assert runner.calls == [("scontrol", "--version")]


def test_a_given_version_asks_nothing_and_an_unknown_one_is_none() -> None:
    runner = ScriptedRunner({})
    assert slurm(runner, slurm_version=(23, 11)).version() == (23, 11) and runner.calls == []
    assert slurm(ScriptedRunner({})).version() is None  # scontrol fails
    assert slurm(ScriptedRunner({"scontrol --version": "slurm unknown\n"})).version() is None


@pytest.mark.parametrize("release", ["slurm-22.05", "slurm-26.05"])
def test_pending_features_of_the_real_squeue_output(release: str) -> None:
    """The capture's README: jobs 2 and 4 pending without a constraint, job 3 held with -C nvme."""
    runner = ScriptedRunner({"squeue -h -t PD": real(release, "squeue-pending-features.txt")})
    assert slurm(runner).pending_features() == [("2", "(null)"), ("4", "(null)"), ("3", "nvme")]
    assert runner.calls == [("squeue", "-h", "-t", "PD", "-o", "%i %f")]


def test_pending_features_skip_blank_lines_and_keep_a_constraint_whole() -> None:
    runner = ScriptedRunner({"squeue": "\n  17 [ng_a|ng_b]&ib \n\n18\n"})
    assert slurm(runner).pending_features() == [("17", "[ng_a|ng_b]&ib"), ("18", "")]


def test_the_running_plugin_from_the_real_show_config_and_none_when_unknown() -> None:
    runner = ScriptedRunner({"scontrol show config": real("slurm-24.11", "scontrol-show-config.txt")})
    assert slurm(runner).topology_plugin() == "topology/tree"
    assert slurm(ScriptedRunner({})).topology_plugin() is None
    assert slurm(ScriptedRunner({"scontrol show config": "ClusterName = c\n"})).topology_plugin() is None


def test_reconfigure_gets_at_least_a_minute_and_other_calls_the_command_timeout() -> None:
    runner = TimedRunner({"scontrol": ""})
    s = slurm(runner, command_timeout=5.0)
    s.reconfigure()
    s.show_topology("nvl")
    assert runner.calls == [("scontrol", "reconfigure"), ("scontrol", "show", "topology", "nvl")]
    assert runner.timeouts == [60.0, 5.0]
    runner = TimedRunner({"scontrol": ""})
    slurm(runner, command_timeout=90.0).reconfigure()
    assert runner.timeouts == [90.0]


def test_the_sync_command_is_split_like_a_shell_but_never_run_by_one() -> None:
    runner = TimedRunner({"pdcp": ""})
    cmd = "pdcp -w 'compute[001-100]' /etc/slurm/topology.conf \"/etc/slurm dir/\" $HOME;rm"
    slurm(runner, sync_cmd=cmd, sync_timeout=123.0).sync()
    assert runner.calls == [
        ("pdcp", "-w", "compute[001-100]", "/etc/slurm/topology.conf", "/etc/slurm dir/", "$HOME;rm")
    ]
    assert runner.timeouts == [123.0]
    for nothing in (None, "", "   "):
        quiet = ScriptedRunner({})
        slurm(quiet, sync_cmd=nothing).sync()
        assert quiet.calls == []


# --------------------------------------------------------------------------------------------------
# verify


def real_files(release: str) -> dict[str, bytes | None]:
    return {
        TOPOLOGY: real(release, "topology.conf").encode(),
        NODES: real(release, "slurm-topo-nodes.conf").encode(),
    }


def real_controller(release: str) -> dict[str | tuple[str, ...], object]:
    return {
        "scontrol ping": UP,
        "scontrol show topology": real(release, "scontrol-show-topology.txt"),
        "scontrol show node -o": real(release, "scontrol-show-node-o.txt"),
        "scontrol --version": real(release, "scontrol--version.txt"),
    }


@pytest.mark.parametrize("release", ["slurm-22.05", "slurm-24.11", "slurm-26.05"])
def test_the_files_a_real_controller_ran_on_verify_at_the_first_look(release: str) -> None:
    clock = Clock()
    runner = ScriptedRunner(real_controller(release))
    assert slurm(runner, clock).verify(real_files(release)) == []
    assert clock.slept == []
    assert ("scontrol", "show", "topology") in runner.calls and (
        "scontrol",
        "show",
        "node",
        "-o",
    ) in runner.calls


def test_a_difference_is_polled_until_the_timeout_and_the_last_one_returned() -> None:
    clock = Clock()
    runner = ScriptedRunner(real_controller("slurm-22.05"))
    files = real_files("slurm-22.05")
    nodes = real("slurm-22.05", "slurm-topo-nodes.conf").encode()
    files[NODES] = nodes.replace(
        b"Features=ib,nvme,region_us-east,zone_us-east-1a,ng_us-east-1a.rack-a1\nNodeName=n02",
        b"Features=ib\nNodeName=n02",
    )
    diff = slurm(runner, clock, verify_timeout=2.0).verify(files)
    shown = "ib,ng_us-east-1a.rack-a1,nvme,region_us-east,zone_us-east-1a"
    assert diff == [f"node n01: features {shown} in slurmctld, written ib"]
    assert len(clock.slept) > 1 and 2.0 <= sum(clock.slept) < 2.0 + max(clock.slept)


def test_a_controller_that_catches_up_while_polled_verifies() -> None:
    """Right after a reconfigure slurmctld may still show the old tree: the verification waits for it."""
    clock = Clock()
    answers = real_controller("slurm-22.05")
    shown = str(answers["scontrol show topology"])
    answers["scontrol show topology"] = shown.replace("Nodes=n[01-03]", "Nodes=n[01-02]", 1)
    answers["scontrol ping"] = CommandError(["scontrol", "ping"], 1, "reconfiguring")
    runner = ScriptedRunner(answers)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.slept) == 2:
            runner.answers["scontrol ping"] = UP
        if len(clock.slept) == 4:
            runner.answers["scontrol show topology"] = shown

    o = ApplyOptions(slurm_dir=Path("/etc/slurm"), clock=clock.time, sleep=sleep, verify_timeout=30.0)
    assert _Slurm(runner, o).verify(real_files("slurm-22.05")) == []
    assert len(clock.slept) == 4


def test_a_controller_that_never_answers_is_named_as_such() -> None:
    clock = Clock()
    runner = ScriptedRunner({"scontrol ping": "Slurmctld(primary) at ctl1 is DOWN\n"})
    assert slurm(runner, clock, verify_timeout=1.0).verify(real_files("slurm-22.05")) == [
        "slurmctld does not answer after the reconfigure"
    ]
    assert {c[:2] for c in runner.calls} == {("scontrol", "ping"), ("scontrol", "--version")}


def test_a_failing_show_command_is_a_difference_not_a_crash() -> None:
    answers = real_controller("slurm-22.05")
    answers["scontrol show node -o"] = CommandError(["scontrol", "show", "node", "-o"], 1, "Socket timed out")
    diff = slurm(ScriptedRunner(answers), verify_timeout=0.5).verify(real_files("slurm-22.05"))
    assert len(diff) == 1 and diff[0].startswith("verify: ") and "scontrol" in diff[0]


def test_a_foreign_file_being_restored_is_not_compared() -> None:
    runner = ScriptedRunner({})
    s = slurm(runner, slurm_version=(22, 5))
    assert s.verify({TOPOLOGY: b"SwitchName=s Nodes=n[3-1]\n", NODES: None}) == []
    assert s.verify({TOPOLOGY: None, NODES: b"PartitionName=p Nodes=ALL\n"}) == []
    assert runner.calls == []


def test_future_nodes_are_not_expected_in_show_node() -> None:
    files = real_files("slurm-22.05")
    nodes = real("slurm-22.05", "slurm-topo-nodes.conf").encode()
    files[NODES] = nodes + b"NodeName=f[1-2] State=FUTURE\n"
    answers = real_controller("slurm-22.05")
    assert slurm(ScriptedRunner(answers), verify_timeout=0).verify(files) == []
    files[NODES] = nodes + b"NodeName=f[1-2] State=FUTURE\nNodeName=g1\n"
    assert slurm(ScriptedRunner(answers), verify_timeout=0).verify(files) == ["node g1 unknown to slurmctld"]


def test_a_topology_yaml_is_verified_by_each_of_its_topologies_from_25_05() -> None:
    answers: dict[str | tuple[str, ...], object] = {
        "scontrol ping": UP,
        "scontrol show topology fabric": (BLOCKS / "show-topology-fabric.txt").read_text(),
        "scontrol show topology nvl": (BLOCKS / "show-topology-nvl.txt").read_text(),
    }
    files = {
        TOPOLOGY_YAML: (BLOCKS / "topology.yaml").read_bytes(),
        TOPOLOGY: b"SwitchName=old Nodes=g[01-04]\n",
    }
    runner = ScriptedRunner(answers)
    assert slurm(runner, slurm_version=(26, 5)).verify(files) == []
    assert ("scontrol", "show", "topology", "nvl") in runner.calls
    # a 24.11 controller never reads the yaml: topology.conf is what it must show
    old = ScriptedRunner(
        {"scontrol ping": UP, "scontrol show topology": "SwitchName=old Level=0 LinkSpeed=1 Nodes=g[01-04]\n"}
    )
    assert slurm(old, slurm_version=(24, 11)).verify(files) == []
    assert ("scontrol", "show", "topology", "nvl") not in old.calls
