"""``--json`` on every command that prints data: one JSON object on stdout, of the schema README "JSON
output" documents, saying the same as the text form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import cli as slurm_topo_cli
from slurm_topo.cli import relax as relax_cli

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "examples" / "benchmark-five-zones.yaml"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_object(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.stdout.count("\n") == 1, proc.stdout
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    return doc


def test_generate_lint_show_and_islands(tmp_path: Path) -> None:
    out = tmp_path / "out"
    g = one_object(cli("generate", "-i", str(FLEET), "-o", str(out), "--slurm-version", "22.05", "--json"))
    assert g["nodes"] == 30 and {f["status"] for f in g["files"]} == {"created"}  # type: ignore[attr-defined]
    assert {Path(f["path"]).name for f in g["files"]} >= {"topology.conf", "slurm-topo-nodes.conf"}  # type: ignore[attr-defined]
    again = one_object(
        cli("generate", "-i", str(FLEET), "-o", str(out), "--slurm-version", "22.05", "--json")
    )
    assert {f["status"] for f in again["files"]} == {"unchanged"}  # type: ignore[attr-defined]
    lint = one_object(cli("lint", "--topology", str(out / "topology.conf"), "--json"))
    assert lint["ok"] is True and lint["problems"] == [] and lint["nodes"] == 30
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n")
    p = cli("lint", "--topology", str(bad), "--json")
    assert p.returncode == 1
    doc = one_object(p)
    assert doc["ok"] is False and doc["problems"] and doc["problems"][0]["line"] == 2  # type: ignore[index]
    show = one_object(cli("show", "-i", str(FLEET), "--json"))
    regions = show["regions"]
    assert show["nodes"] == 30 and sum(r["nodes"] for r in regions) == 30  # type: ignore[attr-defined]
    zone = regions[0]["zones"][0]  # type: ignore[index]
    assert sum(g["nodes"] for g in zone["network_groups"]) == zone["nodes"]
    topo = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
    assert one_object(cli("gpu", "islands", str(topo), "--json")) == {"islands": [[0, 1, 2, 3], [4, 5, 6, 7]]}


def test_import_apply_and_health_sync(tmp_path: Path) -> None:
    listing = REPO / "tests" / "fixtures" / "clouds" / "gcp-instances.json"
    doc = one_object(cli("import", "gcp", str(listing), "--json"))
    nodes = doc["inventory"]["nodes"]  # type: ignore[index]
    assert nodes and all(n["source"] == "provider" for n in nodes) and isinstance(doc["warnings"], list)
    etc, state = tmp_path / "etc", tmp_path / "state"
    etc.mkdir()
    args = ["apply", "-i", str(FLEET), "--slurm-dir", str(etc), "--state-dir", str(state)]
    args += ["--no-reconfigure", "--slurm-version", "22.05", "--json"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    res = one_object(first)
    assert res["status"] == "applied" and res["exit_code"] == 0 and "topology.conf" in res["changed"]  # type: ignore[operator]
    second = one_object(cli(*args))
    assert str(second["summary"]).startswith(f"slurm-topo apply: {second['status']}"), second
    records = tmp_path / "records"
    (records / "health").mkdir(parents=True)
    sync = one_object(cli("health-sync", "--records", str(records), "--dry-run", "--json"))
    assert sync == {"actions": [], "dry_run": True, "log": []}


def test_explain_of_a_job_slurm_does_not_know(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"
    )
    (bin_dir / "squeue").chmod(0o755)
    proc = cli("explain", "77", "--json", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    doc = one_object(proc)
    assert doc["known"] is False and doc["job_id"] == "77"
    assert proc.returncode == 2 and proc.stderr.startswith(
        "slurm-topo: error: job 77: not known to slurmctld"
    )
    assert proc.stderr.count("\n") == 1


def test_files_lists_and_copies_as_one_object(tmp_path: Path) -> None:
    """files --json: the shipped files' names (the text form's lines) and where they were copied (null
    without --copy); every name is then a file under copied_to."""
    text = cli("files")
    listed = one_object(cli("files", "--json"))
    assert listed == {"files": text.stdout.splitlines(), "copied_to": None}
    assert "job_submit/job_submit.lua" in listed["files"]  # type: ignore[operator]
    out = tmp_path / "copy"
    copied = one_object(cli("files", "--copy", str(out), "--json"))
    assert copied == {"files": listed["files"], "copied_to": str(out)}
    assert all((out / name).is_file() for name in copied["files"])  # type: ignore[attr-defined]


# ---- an error under --json: one line on stderr, nothing on stdout


def _json_commands(group: click.Group, path: str = "") -> set[str]:
    """Every command (``gpu pick``, …) that takes ``--json``, hidden ones too."""
    found = set()
    for name, command in group.commands.items():
        full = f"{path} {name}".strip()
        if isinstance(command, click.Group):
            found |= _json_commands(command, full)
        elif any("--json" in getattr(p, "opts", ()) for p in command.params):
            found.add(full)
    return found


MISSING = "/nonexistent/slurm-topo-test-input"
JSON_ERRORS: dict[str, tuple[list[str], int]] = {
    "generate": (["-i", MISSING, "-o", "{tmp}/out", "--slurm-version", "22.05"], 2),
    "lint": (["--topology", MISSING], 2),
    "show": (["-i", MISSING], 2),
    "discover": (["--zone", "a b", "--dmi-root", "{tmp}"], 2),
    "import": (["gcp", MISSING], 2),
    "check": (["-i", MISSING, "--locality", "zone"], 2),
    "apply": (
        ["-i", MISSING, "--slurm-dir", "{tmp}/etc", "--state-dir", "{tmp}/state", "--slurm-version", "22.05"],
        2,
    ),
    "explain": (["1", "--plan", "tp=x"], 2),
    "cost": (["-i", MISSING, "--nodes", "n1", "--allreduce-bytes", "1G"], 2),
    "capacity": (["-i", str(FLEET), "--nodes-from", MISSING, "--shape", "1x8"], 2),
    "calibrate": (["-i", str(FLEET), "--nodes", "n1", "--bytes", "0"], 2),
    "health": (["--threshold", "hysteresis"], 2),
    "health-sync": (["--records", MISSING], 2),
    "relax": (["--once", "--lock", "{tmp}/relax.lock"], 3),  # squeue fails (every Slurm command here does)
    "gpu parse": ([MISSING], 2),
    "gpu islands": ([MISSING], 2),
    "gpu pick": ([MISSING, "-k", "1"], 2),
    "files": (["--copy", "{tmp}/a-file/copy"], 4),
    "doctor": (["-i", MISSING], 2),
    "probe parse": ([MISSING], 2),
    "report": (["-i", str(FLEET), "--sacct-json", MISSING], 2),
}


def test_every_json_command_has_an_error_case_here() -> None:
    """A command that gains --json gets a row in JSON_ERRORS (what makes it fail, and its exit code)."""
    assert _json_commands(slurm_topo_cli) - set(JSON_ERRORS) == set()


@pytest.mark.parametrize("command", sorted(JSON_ERRORS))
def test_an_error_under_json_is_one_stderr_line_and_nothing_on_stdout(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README "JSON output": errors stay one line on stderr, with the same exit codes, and stdout holds no
    object (health-sync printed an empty pass's object before its error: a caller reading stdout took the
    pass for done)."""
    assert command in _json_commands(slurm_topo_cli), f"JSON_ERRORS names {command}, which has no --json"
    monkeypatch.setattr(relax_cli, "SubprocessRunner", lambda: FakeSlurm({}))
    (tmp_path / "a-file").write_text("")
    args, code = JSON_ERRORS[command]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = invoke(*command.split(), *args, "--json")
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    error_line(result)
    text = invoke(*command.split(), *args)  # the text form fails the same way
    assert text.exit_code == code and error_line(text) == error_line(result)
