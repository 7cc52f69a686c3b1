"""``slurm-topo health`` and ``health-sync`` through the command line (in-process, CliRunner): a node's record
written by the first, read by the second, which drains through a scripted ``scontrol`` (docs/health.md)."""

from __future__ import annotations

import json
import re
import shutil
import socket
from pathlib import Path

import pytest
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import health as health_cli
from slurm_topo.core.errors import CommandError

HEALTHY = Path(__file__).resolve().parent / "fixtures" / "health" / "sysfs-healthy"
REASON = "slurm-topo-health: mlx5_0/1 state DOWN"
DRAIN = ("scontrol", "update", "NodeName=g1", "State=DRAIN", f"Reason={REASON}")


def port_down(tmp_path: Path) -> Path:
    """The healthy sysfs tree with mlx5_0 port 1 DOWN."""
    root = tmp_path / "sys"
    shutil.copytree(HEALTHY, root)
    (root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state").write_text("1: DOWN\n")
    return root


def health(tmp_path: Path, sysfs: Path, *more: str) -> tuple[int, str, str]:
    result = invoke(
        "health", "--no-nvml", "--sysfs-root", str(sysfs), "--state", str(tmp_path / "state.json"), *more
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """A records folder holding g1's record of a pass that found mlx5_0/1 down (hysteresis 1)."""
    folder = tmp_path / "records"
    folder.mkdir()
    code, out, _ = health(
        tmp_path,
        port_down(tmp_path),
        "--node-name",
        "g1",
        "--records",
        str(folder),
        "--threshold",
        "hysteresis=1",
    )
    assert code == 0 and out.startswith("g1: down (hard fault)")
    return folder


def slurm(monkeypatch: pytest.MonkeyPatch, show: str, update: object = "") -> FakeSlurm:
    fake = FakeSlurm({"scontrol show node": show, "scontrol update": update})
    monkeypatch.setattr(health_cli, "SubprocessRunner", lambda: fake)
    return fake


IDLE = "NodeName=g1 Arch=x86_64\n   State=IDLE ThreadsPerCore=1\n"


# ---- health


def test_a_down_port_is_reported_but_exits_0(tmp_path: Path) -> None:
    """docs/health.md: exit 0 whatever the verdict (it is in the record)."""
    code, out, err = health(tmp_path, port_down(tmp_path), "--node-name", "g1")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("g1: down (hard fault) - 0 GPU(s), 3 port(s), pass 1")
    assert "  mlx5_0/1 InfiniBand: down, DOWN/LinkUp, 400 Gb/s" in lines
    assert f"  down: {REASON.removeprefix('slurm-topo-health: ')}" in lines


def test_the_state_file_counts_passes_and_a_garbled_one_starts_afresh(tmp_path: Path) -> None:
    first = health(tmp_path, HEALTHY, "--node-name", "g1")[1]
    second = health(tmp_path, HEALTHY, "--node-name", "g1")[1]
    assert "pass 1" in first.splitlines()[0] and "pass 2" in second.splitlines()[0]
    assert "none yet (first pass)" in first and "first pass" not in second
    (tmp_path / "state.json").write_text("{garbage")
    code, out, err = health(tmp_path, HEALTHY, "--node-name", "g1")
    assert code == 0 and "pass 1" in out.splitlines()[0]
    assert (
        err
        == f"warning: state file {tmp_path / 'state.json'}: unreadable (JSONDecodeError); started afresh\n"
    )
    assert json.loads((tmp_path / "state.json").read_text())  # replaced by this pass's state
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_node_name_comes_from_slurmd_then_the_host(tmp_path: Path) -> None:
    args = [
        "health",
        "--no-nvml",
        "--sysfs-root",
        str(HEALTHY),
        "--state",
        str(tmp_path / "s.json"),
        "--json",
    ]
    from_env = invoke(*args, env={"SLURMD_NODENAME": "gpu-07"})
    assert json.loads(from_env.stdout)["name"] == "gpu-07"
    from_host = invoke(*args, env={"SLURMD_NODENAME": None})
    short = socket.gethostname().split(".", 1)[0]
    if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", short):
        assert json.loads(from_host.stdout)["name"] == short
    else:  # a host name Slurm could not use is refused, not reported under
        assert from_host.exit_code == 2 and error_line(from_host).startswith("node name: ")
    flag = invoke(*args, "--node-name", "n1", env={"SLURMD_NODENAME": "gpu-07"})
    assert json.loads(flag.stdout)["name"] == "n1"


def test_a_record_that_cannot_be_written_is_exit_4(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "health").write_text("a file where the folder goes\n")
    code, out, _ = health(tmp_path, HEALTHY, "--node-name", "g1", "--records", str(folder))
    assert code == 4 and out == ""
    assert (folder / "health").read_text() == "a file where the folder goes\n"


def test_a_threshold_without_a_value_asks_for_key_equals_value(tmp_path: Path) -> None:
    """A bare word is a missing '=': the error asks for KEY=VALUE, whether or not the word is a known key;
    an unknown key with a value is still named as unknown. Nothing is read or written (no state file)."""
    for word in ("nope", "hysteresis"):
        result = invoke("health", "--no-nvml", "--sysfs-root", str(HEALTHY), "--node-name", "g1",
                        "--state", str(tmp_path / "state.json"), "--threshold", word)  # fmt: skip
        assert result.exit_code == 2 and result.stdout == ""
        assert error_line(result) == f"--threshold '{word}': give KEY=VALUE (e.g. hysteresis=3)"
    unknown = invoke("health", "--no-nvml", "--sysfs-root", str(HEALTHY), "--threshold", "nope=3")
    assert unknown.exit_code == 2 and error_line(unknown).startswith(
        "--threshold 'nope=3': unknown key (known: "
    )
    assert not (tmp_path / "state.json").exists()


# ---- health-sync


def test_sync_drains_a_node_whose_record_has_a_hard_fault(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/health.md: `scontrol update NodeName=N State=DRAIN Reason="slurm-topo-health: <first fault>"`,
    one log line; JSON has the README's keys."""
    fake = slurm(monkeypatch, IDLE)
    result = invoke("health-sync", "--records", str(records), "--json")
    assert result.exit_code == 0, result.output
    assert DRAIN in fake.calls
    assert json.loads(result.stdout) == {
        "dry_run": False,
        "actions": [
            {"node": "g1", "action": "drain", "why": REASON, "command": list(DRAIN), "failed": False}
        ],
        "log": [f"drain g1: {REASON}"],
    }


def test_sync_dry_run_changes_nothing_and_says_so(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = slurm(monkeypatch, IDLE)
    result = invoke("health-sync", "--records", str(records), "--dry-run")
    assert result.exit_code == 0
    assert result.stdout == f"(dry run) drain g1: {REASON}\n"
    assert not [c for c in fake.calls if c[:2] == ("scontrol", "update")]


def admin_drain(reason: str) -> str:
    return f"NodeName=g1 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason={reason}\n"


def test_sync_never_lifts_or_rewords_an_admins_drain(
    records: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain whose reason is not ours stays as it is, with a hard fault in the record or without."""
    fake = slurm(monkeypatch, admin_drain("bios update [admin@2026-12-01T10:00:00]"))
    faulty = invoke("health-sync", "--records", str(records))
    assert faulty.exit_code == 0 and faulty.stdout.startswith("keep g1: ") and "admin" in faulty.stdout
    health(tmp_path, HEALTHY, "--node-name", "g1", "--records", str(records), "--threshold", "hysteresis=1")
    healthy = invoke("health-sync", "--records", str(records))
    assert healthy.stdout == "keep g1: drained by an admin; never lifted here\n"
    assert not [c for c in fake.calls if c[:2] == ("scontrol", "update")]


def test_sync_resumes_only_its_own_drain_once_healthy(
    records: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health(tmp_path, HEALTHY, "--node-name", "g1", "--records", str(records), "--threshold", "hysteresis=1")
    fake = slurm(monkeypatch, admin_drain(f"{REASON} [root@2026-12-01T10:00:00]"))
    result = invoke("health-sync", "--records", str(records), "--json")
    assert result.exit_code == 0, result.output
    (action,) = json.loads(result.stdout)["actions"]
    assert (action["action"], action["command"]) == (
        "resume",
        ["scontrol", "update", "NodeName=g1", "State=RESUME"],
    )
    assert tuple(action["command"]) in fake.calls


def test_sync_ignores_a_record_older_than_max_age(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = records / "health" / "g1.json"
    doc = json.loads(path.read_text())
    doc["time_epoch"] -= 3600
    path.write_text(json.dumps(doc))
    fake = slurm(monkeypatch, IDLE)
    stale = invoke("health-sync", "--records", str(records))
    assert stale.exit_code == 0 and stale.stdout.startswith("keep g1: record is ")
    assert stale.stdout.endswith(" s old (max 900 s); nothing changed\n")
    assert not [c for c in fake.calls if c[:2] == ("scontrol", "update")]
    assert invoke("health-sync", "--records", str(records), "--max-age", "7200").exit_code == 0
    assert DRAIN in fake.calls


def test_sync_a_failed_drain_is_logged_then_exits_3(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failure = CommandError(list(DRAIN), 1, "slurm_update error: Invalid node state specified")
    slurm(monkeypatch, IDLE, failure)
    result = invoke("health-sync", "--records", str(records))
    assert result.exit_code == 3
    assert result.stdout.startswith(f"failed drain g1: {REASON}: ")
    assert "Invalid node state specified" in error_line(result)


def test_sync_json_marks_the_drain_that_failed(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slurm(monkeypatch, IDLE, CommandError(list(DRAIN), 1, "slurm_update error: Invalid node state specified"))
    result = invoke("health-sync", "--records", str(records), "--json")
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert [(a["node"], a["action"], a["failed"]) for a in doc["actions"]] == [("g1", "drain", True)]
    assert doc["actions"][0]["command"] == list(DRAIN) and doc["log"][0].startswith(
        f"failed drain g1: {REASON}: "
    )


def test_sync_with_no_records_asks_slurm_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = slurm(monkeypatch, IDLE)
    result = invoke("health-sync", "--records", str(tmp_path))
    assert result.exit_code == 0 and fake.calls == []
    assert result.stdout == f"{tmp_path / 'health'}: no health records yet\n"
