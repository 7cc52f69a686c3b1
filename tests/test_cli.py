"""The CLI end to end (subprocess, as a user runs it): check, generate with partitions, show, files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from fakes import ScriptedRunner
from policy_cases import FLEET, POLICY

from slurm_topo.cli import main
from slurm_topo.plumbing.version import __version__

REPO = Path(__file__).resolve().parents[1]


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _slurm_topo(argv: tuple[str, ...]) -> None:
    main(list(argv))


def invoke(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    """``slurm-topo ARGS`` in-process under CliRunner, through :func:`slurm_topo.cli.main`: the exit code
    and the ``slurm-topo: error: …`` line are the ones a user gets (tests/test_cli_*.py share it)."""
    return CliRunner().invoke(_slurm_topo, list(args), env=env, catch_exceptions=False)


def error_line(result: Result) -> str:
    """The one stderr line of a failed command, checked to be the only one and in the house style."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-topo: error: "), result.stderr
    return lines[0].removeprefix("slurm-topo: error: ")


FakeSlurm = ScriptedRunner
"""The CLI tests' name for the shared fake: commands the CLI modules create a runner for are pointed at it
with ``monkeypatch.setattr(<cli module>, "SubprocessRunner", lambda: fake)``."""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_check_accepts_and_lists_candidates_in_filter_order() -> None:
    """check: line 1 accept, the bracket, candidates in the filter's order, excluded groups counted."""
    proc = cli(
        "check",
        "-i",
        str(REPO / "examples/benchmark-five-zones.yaml"),
        "--locality",
        "network_group",
        "-N",
        "3",
        "--gpus-per-node",
        "h100:8",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "accept"
    assert lines[1] == (
        "features: [ng_us-central1-a.rack-1|ng_us-central1-a.rack-2|ng_us-central1-b.rack-1|"
        "ng_us-central1-b.rack-2]"
    )
    assert lines[2].startswith("candidates: us-central1-a/rack-1 (3 nodes, 24 GPUs), ")
    assert lines[3] == "excluded: 6 network groups too small"


def test_check_rejects_naming_level_request_and_largest() -> None:
    """check: an impossible :fail request prints reject, the reason, and exits 1; --verbose names the
    groups."""
    proc = cli(
        "check",
        "-i",
        str(REPO / "examples/gcp-two-regions.yaml"),
        "--locality",
        "zone:fail",
        "-N",
        "8",
        "--verbose",
    )
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0] == "reject"
    assert lines[1] == (
        "slurm-topo: --locality=zone:fail: no zone can ever hold 8 nodes; the largest is "
        "europe-west1-b with 6 nodes (48 GPUs)"
    )
    assert lines[2].startswith("excluded: 5 zones too small: europe-west1-b (6 nodes, 48 GPUs), ")


def test_check_json_and_usage_errors() -> None:
    """check --json prints one object; a bad locality or flag is a usage error (exit 2)."""
    proc = cli(
        "check",
        "-i",
        str(REPO / "examples/gcp-two-regions.yaml"),
        "--locality",
        "region",
        "--gpus",
        "64",
        "--json",
    )
    doc = json.loads(proc.stdout)
    assert doc["decision"] == "accept" and doc["features"] == "[region_europe-west4|region_europe-west1]"
    assert [c["group"] for c in doc["candidates"]] == ["europe-west4", "europe-west1"]
    assert (
        cli("check", "-i", str(REPO / "examples/gcp-two-regions.yaml"), "--locality", "nearby").returncode
        == 2
    )
    assert (
        cli(
            "check", "-i", str(REPO / "examples/gcp-two-regions.yaml"), "--locality", "zone", "-N", "0"
        ).returncode
        == 2
    )


def test_generate_with_partitions_and_policy(tmp_path: Path) -> None:
    """generate --partitions-from: the data file has the partitions, their defaults and the default
    partition."""
    inv = tmp_path / "fleet.yaml"
    inv.write_text(FLEET + POLICY)
    parts = tmp_path / "parts.txt"
    parts.write_text(
        "PartitionName=gpu AllowGroups=ALL Default=YES Nodes=n[01-12] State=UP\n"
        "PartitionName=cpu Default=NO Nodes=login1 State=UP\n"
    )
    proc = cli(
        "generate",
        "-i",
        str(inv),
        "-o",
        str(tmp_path / "out"),
        "--slurm-version",
        "22.05",
        "--partitions-from",
        str(parts),
    )
    assert proc.returncode == 0, proc.stderr
    data = (tmp_path / "out" / "slurm_topo_data.lua").read_text()
    assert 'default_partition="gpu"' in data
    assert 'partition_defaults={["cpu"]="any",["strict"]="zone:fail"}' in data
    assert '["cpu"]={' in data and '["gpu"]={' in data
    odd = tmp_path / "odd.txt"  # a name Slurm takes: kept, escaped (tests/test_partition_names.py)
    odd.write_text("PartitionName=we\\ird Nodes=n01\n")
    proc = cli("generate", "-i", str(inv), "-o", str(tmp_path / "out2"), "--partitions-from", str(odd))
    assert proc.returncode == 0 and "error" not in proc.stderr, proc.stderr
    assert '["we\\092ird"]={' in (tmp_path / "out2" / "slurm_topo_data.lua").read_text()


def test_files_copy_ships_the_filter(tmp_path: Path) -> None:
    """files --copy puts job_submit.lua and the filter module where an admin can install them."""
    proc = cli("files", "--copy", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "job_submit" / "job_submit.lua").read_text() == (
        REPO / "job_submit/job_submit.lua"
    ).read_text()
    shipped = sorted(p.name for p in (tmp_path / "job_submit" / "slurm_topo_filter").iterdir())
    assert shipped == sorted(p.name for p in (REPO / "job_submit" / "slurm_topo_filter").glob("*.lua"))
    assert "init.lua" in shipped and "decide.lua" in shipped
    assert (tmp_path / "examples" / "gcp-two-regions.yaml").exists()


def test_files_copy_keeps_build_spank_runnable(tmp_path: Path) -> None:
    """files --copy keeps build-spank's executable bit: the documented next step runs (here it stops at the
    missing headers, exit 2, instead of the shell's 126 "Permission denied")."""
    out = tmp_path / "copy"
    assert cli("files", "--copy", str(out)).returncode == 0
    script = out / "job_submit" / "build-spank"
    assert script.stat().st_mode & 0o100
    assert not (out / "job_submit" / "job_submit.lua").stat().st_mode & 0o111
    proc = subprocess.run(
        [str(script), str(tmp_path / "build")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "SLURM_INCLUDE": str(tmp_path / "no-headers")},
    )
    assert proc.returncode == 2, proc.stderr
    assert "spank.h not found" in proc.stderr


def test_show_marks_self_reported_nodes(tmp_path: Path) -> None:
    """show: counts per level, and nodes placed only by their own report are marked."""
    inv = tmp_path / "f.yaml"
    inv.write_text(
        "nodes:\n  - {name: 'a[1-2]', region: r1, zone: r1-a, gpus: 4}\n"
        "  - {name: b1, region: r1, zone: r1-a, network_group: g1, source: self}\n"
    )
    proc = cli("show", "-i", str(inv))
    assert proc.returncode == 0
    assert "fleet: 3 nodes, 8 GPUs, 1 self-reported*; 1 region, 1 zone" in proc.stdout
    assert "g1  1 node, 0 GPUs, 1 self-reported*" in proc.stdout
    assert proc.stdout.rstrip().endswith("* location known only from the node's own report")


TOPO = REPO / "tests" / "fixtures" / "real" / "topo"


def test_gpu_parse_json_is_the_matrix_as_the_legend_names_it() -> None:
    """gpu parse --json: only an object; gpus in order, the N×N classes with X on the diagonal, SOC as SYS."""
    proc = cli("gpu", "parse", "--json", str(TOPO / "azure-nv12-2x-m60-soc-noheaderindent.txt"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["gpus"] == [0, 1]
    assert doc["matrix"] == [["X", "SYS"], ["SYS", "X"]]


def test_gpu_pick_json_and_refusals(tmp_path: Path) -> None:
    """gpu pick --json gives the chosen indices ascending (GPU 0 busy, 4 of an 8-GPU 2-island box -> 4-7);
    a truncated capture or an unknown --busy GPU is refused with a reason and a non-zero exit."""
    synthetic = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
    proc = cli("gpu", "pick", "--topology", str(synthetic), "--count", "4", "--busy", "0", "--json")
    assert json.loads(proc.stdout) == {"gpus": [4, 5, 6, 7]}
    proc = cli("gpu", "islands", str(synthetic))
    assert proc.stdout.splitlines() == ["island 0: GPUs 0,1,2,3", "island 1: GPUs 4,5,6,7"]
    proc = cli("gpu", "parse", str(TOPO / "dgx2-16gpu-nv6-10nic-PARTIAL-first5rows.txt"))
    assert proc.returncode == 2 and "truncated" in proc.stderr and proc.stdout == ""
    proc = cli("gpu", "pick", "--topology", str(synthetic), "--count", "2", "--busy", "9")
    assert proc.returncode == 2 and "no GPU 9" in proc.stderr
    proc = cli("gpu", "pick", "--topology", str(synthetic), "--count", "9")
    assert proc.returncode == 2


def test_discover_json_is_one_object_and_asks_no_network_off_cloud(tmp_path: Path) -> None:
    """discover --json: exactly one object; with no DMI folder (not a cloud) nothing is asked and a note says
    so."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "discover",
            "--json",
            "--node-name",
            "n7",
            "--zone",
            "europe-west4-a",
            "--dmi-root",
            str(tmp_path / "absent"),
            "--gce-url",
            "http://127.0.0.1:9/none",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["name"], doc["region"], doc["zone"], doc["source"]) == (
        "n7",
        "europe-west4",
        "europe-west4-a",
        "self",
    )
    assert doc["notes"], "a note says that no metadata was asked"


def test_import_gcp_listing_gives_a_provider_inventory(tmp_path: Path) -> None:
    """import gcp FILE prints an inventory with source: provider that generate accepts."""
    proc = cli("import", "gcp", str(REPO / "tests/fixtures/clouds/gcp-instances.json"))
    assert proc.returncode == 0, proc.stderr
    inv = tmp_path / "provider.yaml"
    inv.write_text(proc.stdout)
    assert "source: provider" in proc.stdout
    proc = cli("generate", "-i", str(inv), "-o", str(tmp_path / "out"), "--slurm-version", "22.05")
    assert proc.returncode == 0, proc.stderr
    assert "SwitchName=root" in (tmp_path / "out" / "topology.conf").read_text()
    assert cli("import", "gcp", str(tmp_path / "missing.json")).returncode == 2


def test_apply_cli_writes_then_says_unchanged(tmp_path: Path) -> None:
    """apply --no-reconfigure writes the live set once; the next run changes nothing; exit codes as
    documented."""
    slurm_dir, state = tmp_path / "etc", tmp_path / "state"
    slurm_dir.mkdir()
    args = (
        "apply",
        "-i",
        str(REPO / "examples/benchmark-five-zones.yaml"),
        "--slurm-dir",
        str(slurm_dir),
        "--state-dir",
        str(state),
        "--no-reconfigure",
        "--slurm-version",
        "22.05",
    )
    first = cli(*args, "--detailed-exitcodes")
    assert first.returncode == 10, first.stderr  # ExitCode.APPLIED
    assert first.stdout.startswith("slurm-topo apply: applied:") and first.stdout.count("\n") == 1
    assert (slurm_dir / "topology.conf").exists() and not (slurm_dir / "slurm_topo_data.lua").exists()
    second = cli(*args)
    assert second.returncode == 0 and not (slurm_dir / "slurm_topo_data.lua").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - {name: n1, zone: 'z\\n'}\n")
    before = (slurm_dir / "topology.conf").read_bytes()
    proc = cli(
        "apply",
        "-i",
        str(bad),
        "--slurm-dir",
        str(slurm_dir),
        "--state-dir",
        str(state),
        "--no-reconfigure",
        "--slurm-version",
        "22.05",
    )
    assert proc.returncode == 2 and (slurm_dir / "topology.conf").read_bytes() == before


def test_gpu_parse_takes_a_file_or_nvml_not_both() -> None:
    """gpu parse: a capture FILE or --nvml; both or neither is a usage error naming the choice."""
    synthetic = REPO / "tests" / "fixtures" / "synthetic" / "islands-2x4-nv18.txt"
    for args in (("gpu", "parse"), ("gpu", "parse", "--nvml", str(synthetic))):
        proc = cli(*args)
        assert proc.returncode == 2 and "--nvml" in proc.stderr


# ---- the group itself, in-process (tests/test_cli_*.py drive every command the same way)

README_COMMANDS = {
    "generate", "lint", "show", "discover", "import", "check", "apply", "explain", "cost", "calibrate",
    "capacity", "gpu", "health", "health-sync", "relax", "files", "doctor", "metrics", "report",
}  # fmt: skip


def test_help_lists_the_readme_commands_and_hides_the_probes() -> None:
    """-h and --help print the same usage on stdout (exit 0): every command of README "Commands", and not
    the ``probe`` group calibrate runs on compute nodes."""
    long, short = invoke("--help"), invoke("-h")
    assert long.exit_code == short.exit_code == 0 and long.stdout == short.stdout and long.stderr == ""
    listed = set()
    section = long.stdout.split("Commands:", 1)[1]
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            listed.add(line.split()[0])
    assert listed == README_COMMANDS


def test_version_is_the_installed_distributions() -> None:
    import importlib.metadata

    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"slurm-topo, version {importlib.metadata.version('slurm-topo')}\n"
    assert __version__ == importlib.metadata.version("slurm-topo")


@pytest.mark.parametrize("argv", [(), ("gpu",)], ids=["slurm-topo", "slurm-topo gpu"])
def test_a_group_without_a_command_prints_its_help_then_one_error_line(argv: tuple[str, ...]) -> None:
    result = invoke(*argv)
    assert result.exit_code == 2 and result.stdout == ""
    path = " ".join(("slurm-topo", *argv))
    assert result.stderr.startswith(f"Usage: {path} [OPTIONS] COMMAND [ARGS]...")
    assert result.stderr.splitlines()[-1] == f"slurm-topo: error: give a command (see '{path} --help')"


def test_clicks_usage_errors_are_one_lower_case_line_naming_the_commands_help(tmp_path: Path) -> None:
    inv = str(REPO / "examples" / "gcp-two-regions.yaml")
    result = invoke("check", "-i", inv, "--locality", "zone", "--bogus")
    assert result.exit_code == 2 and result.stdout == ""
    line = error_line(result)
    assert line.startswith("no such option '--bogus'") and line.endswith("(see 'slurm-topo check --help')")
    result = invoke("generate", "-i", inv)
    assert result.exit_code == 2
    assert error_line(result) == "missing option '--out' / '-o' (see 'slurm-topo generate --help')"
    result = invoke("import", "ibm", inv)
    assert result.exit_code == 2 and error_line(result).startswith("invalid value for ")
    assert "'ibm' is not one of 'gcp', 'aws', 'azure'" in result.stderr


def test_a_usage_error_raised_by_a_command_names_its_help_and_writes_nothing(tmp_path: Path) -> None:
    """generate without any inventory: the command's own click.UsageError, mapped like click's."""
    out = tmp_path / "out"
    result = invoke("generate", "-o", str(out), "--slurm-version", "22.05")
    assert result.exit_code == 2
    assert error_line(result) == (
        "give at least one --inventory FILE or --records DIR (see 'slurm-topo generate --help')"
    )
    assert not out.exists()
