"""``--json`` on every command that prints data: one JSON object on stdout, of the schema README "JSON
output" documents, saying the same as the text form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    doc = one_object(cli("explain", "77", "--json", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}))
    assert doc["known"] is False and doc["job_id"] == "77"
