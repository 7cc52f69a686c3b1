"""``slurm-topo apply`` through the command line (in-process, CliRunner; Slurm's answers scripted): what the
command prints where (details on stderr, one summary line on stdout, or one JSON object), its exit codes, and
that a refused or dry run leaves the live folder as it was. The engine's own cases: tests/test_apply.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import apply as apply_cli
from slurm_topo.cli import common

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "real" / "slurm-24.11"
INVENTORY = str(REAL / "inventory.yaml")
OUTPUTS = ("topology.conf", "slurm-topo-nodes.conf", "slurm_topo_data.lua")


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """No Slurm unless a test scripts one (the host's own never answers): every command fails."""
    fake = FakeSlurm({})
    monkeypatch.setattr(apply_cli, "SubprocessRunner", lambda: fake)
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    return fake


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    etc = tmp_path / "etc"
    etc.mkdir()
    return etc, tmp_path / "state"


def controller(monkeypatch: pytest.MonkeyPatch, up: bool = True) -> FakeSlurm:
    """The captured 24.11 cluster's answers (its nodes and config), slurmctld up or not answering."""
    answers: dict[str, object] = {
        "scontrol show node -o": (REAL / "scontrol-show-node-o.txt").read_text(),
        "scontrol show config": (REAL / "scontrol-show-config.txt").read_text(),
        "squeue": "",
    }
    if up:
        answers["scontrol ping"] = "Slurmctld(primary) at ctl is UP\n"
    fake = FakeSlurm(answers)
    monkeypatch.setattr(apply_cli, "SubprocessRunner", lambda: fake)
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    return fake


def apply_args(etc: Path, state: Path, *more: str, inventory: str = INVENTORY) -> list[str]:
    return [
        "apply",
        "-i",
        inventory,
        "--slurm-dir",
        str(etc),
        "--state-dir",
        str(state),
        "--slurm-version",
        "24.11",
        *more,
    ]


def test_dry_run_says_what_it_would_write_and_writes_nothing(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    etc, state = dirs
    fake = controller(monkeypatch)
    result = invoke(*apply_args(etc, state, "--dry-run", "--detailed-exitcodes"))
    assert result.exit_code == 10, result.output
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("slurm-topo apply: dry-run: would ")
    assert all(f"would create {etc / name}" in result.stderr.splitlines() for name in OUTPUTS)
    assert list(etc.iterdir()) == [] and not state.exists()
    assert not [c for c in fake.calls if c[:2] == ("scontrol", "reconfigure")]


def test_dry_run_without_detailed_exitcodes_exits_0_and_json_carries_the_details(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    etc, state = dirs
    controller(monkeypatch)
    result = invoke(*apply_args(etc, state, "--dry-run", "--json"))
    assert result.exit_code == 0 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert set(doc) == {"status", "exit_code", "summary", "details", "changed", "reconfigured"}
    assert doc["exit_code"] == 0 and doc["reconfigured"] is False
    assert doc["summary"].startswith(f"slurm-topo apply: {doc['status']}: would ")
    assert "nodes added: n[01-12]" in doc["details"]
    assert list(etc.iterdir()) == []


def test_a_controller_that_does_not_answer_refuses_with_exit_11(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    etc, state = dirs
    controller(monkeypatch, up=False)
    result = invoke(*apply_args(etc, state))
    assert result.exit_code == 11
    assert result.stdout == (
        "slurm-topo apply: refused: slurmctld (primary) does not answer `scontrol ping` UP; nothing changed\n"
    )
    assert list(etc.iterdir()) == []


def test_no_reconfigure_applies_without_asking_slurmctld(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-reconfigure: the files are written (the data file naming new groups held back until a
    reconfigure), and slurmctld is never contacted: not even a ping."""
    etc, state = dirs
    fake = controller(monkeypatch, up=False)
    result = invoke(*apply_args(etc, state, "--no-reconfigure", "--json"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["reconfigured"]) == ("applied", False)
    assert sorted(doc["changed"]) == sorted(p.name for p in etc.iterdir())
    assert "slurm_topo_data.lua" not in doc["changed"]
    assert fake.calls == []


def test_rollback_puts_the_previous_set_back(
    dirs: tuple[Path, Path], tmp_path: Path, no_slurm: FakeSlurm
) -> None:
    """Two applies (n04 moved from rack-a2 into rack-a1 by the second), then --rollback: the first set's
    topology.conf is live again, byte for byte."""
    etc, state = dirs
    assert invoke(*apply_args(etc, state, "--no-reconfigure")).exit_code == 0
    first = (etc / "topology.conf").read_bytes()
    moved = tmp_path / "moved.yaml"
    moved.write_text((REAL / "inventory.yaml").read_text().replace("rack-a2", "rack-a1"))
    assert invoke(*apply_args(etc, state, "--no-reconfigure", inventory=str(moved))).exit_code == 0
    assert (etc / "topology.conf").read_bytes() != first
    result = invoke(
        "apply", "--slurm-dir", str(etc), "--state-dir", str(state), "--rollback", "--no-reconfigure"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("slurm-topo apply: rolled back to the set before ")
    assert (etc / "topology.conf").read_bytes() == first
    assert no_slurm.calls == []


def test_rollback_or_recover_with_no_history(dirs: tuple[Path, Path]) -> None:
    """No state yet: a rollback is refused (nothing to roll back, exit 11), a recovery has nothing to do
    (exit 0); neither needs an inventory."""
    etc, state = dirs
    back = invoke("apply", "--slurm-dir", str(etc), "--state-dir", str(state), "--rollback")
    assert back.exit_code == 11
    assert back.stdout == f"slurm-topo apply: refused: no {state}: nothing to roll back; nothing changed\n"
    recover = invoke("apply", "--slurm-dir", str(etc), "--state-dir", str(state), "--recover")
    assert recover.exit_code == 0
    assert recover.stdout == "slurm-topo apply: recovered: no half-done journal; nothing to do\n"
    assert list(etc.iterdir()) == []


def test_a_state_dir_inside_the_slurm_dir_is_refused(dirs: tuple[Path, Path]) -> None:
    etc, _ = dirs
    result = invoke(*apply_args(etc, etc / "state", "--no-reconfigure"))
    assert result.exit_code == 11
    assert f"--state-dir {etc / 'state'} is inside --slurm-dir {etc}" in result.stdout
    assert list(etc.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-removal", "1.5", "invalid value for '--max-removal': 1.5 is not in the range 0<=x<=1"),
        (
            "--slurm-check-timeout",
            "0.5",
            "invalid value for '--slurm-check-timeout': 0.5 is not in the range",
        ),
        ("--min-interval", "-1", "invalid value for '--min-interval'"),
        ("--slurm-version", "twenty", "invalid value for '--slurm-version': not a Slurm version: 'twenty'"),
    ],
)
def test_bad_options_are_refused_before_anything_is_read_or_written(
    dirs: tuple[Path, Path], option: str, value: str, message: str
) -> None:
    etc, state = dirs
    result = invoke(
        "apply", "-i", INVENTORY, "--slurm-dir", str(etc), "--state-dir", str(state), option, value
    )
    assert result.exit_code == 2 and result.stdout == ""
    assert error_line(result).startswith(message)
    assert list(etc.iterdir()) == [] and not state.exists()


def test_a_bad_inventory_changes_nothing_live(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    etc, state = dirs
    assert invoke(*apply_args(etc, state, "--no-reconfigure")).exit_code == 0
    before = {p.name: p.read_bytes() for p in etc.iterdir()}
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - {name: n01, region: us-east, zone: 'us east'}\n")
    result = invoke(*apply_args(etc, state, "--no-reconfigure", inventory=str(bad)))
    assert result.exit_code == 2 and "nodes[0].zone" in error_line(result)
    assert {p.name: p.read_bytes() for p in etc.iterdir()} == before
