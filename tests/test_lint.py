"""`slurm-topo lint`: each problem Slurm would choke on is found and named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo.slurmconfig.lint import lint_topology
from slurm_topo.slurmconfig.slurmconf import parse_topology_conf

CASES = [
    pytest.param("# only a comment\n", None, "empty", id="empty file"),
    pytest.param(
        "SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n", None, "duplicate-switch", id="switch twice"
    ),
    pytest.param("SwitchName=s1 Nodes=n1,n1\n", None, "duplicate-node", id="node twice in a leaf"),
    pytest.param(
        "SwitchName=s1 Nodes=n1\nSwitchName=s2 Nodes=n1\nSwitchName=r Switches=s1,s2\n",
        None,
        "node-in-two-leaves",
        id="node in two leaves",
    ),
    pytest.param(
        "SwitchName=s1\nSwitchName=r Switches=s1\n", None, "empty-switch", id="switch with no children"
    ),
    pytest.param(
        "SwitchName=s1 Nodes=n1 Switches=s2\nSwitchName=s2 Nodes=n2\n",
        None,
        "nodes-and-switches",
        id="nodes and switches",
    ),
    pytest.param("SwitchName=r Switches=s9\n", None, "undefined-switch", id="undefined child"),
    pytest.param("SwitchName=s1 Nodes=n1\nSwitchName=s2 Nodes=n2\n", None, "no-common-root", id="two tops"),
    pytest.param(
        "SwitchName=r Switches=a\nSwitchName=a Nodes=n1\nSwitchName=b Switches=c\nSwitchName=c Switches=b\n",
        None,
        "unreachable-switch",
        id="cycle is unreachable",
    ),
    pytest.param(f"SwitchName={'s' * 65} Nodes=n1\n", None, "bad-name", id="name too long"),
    pytest.param("SwitchName=s{1} Nodes=n1\n", None, "bad-name", id="name with odd characters"),
    pytest.param("SwitchName=s1 Nodes=n[1-2]\n", ["n1"], "unknown-node", id="unknown node"),
    pytest.param(
        "SwitchName=s1 Nodes=n1\n", ["n1", "n2"], "unplaced-node", id="node Slurm knows on no switch"
    ),
]


@pytest.mark.parametrize(("text", "known", "code"), CASES)
def test_problem_is_found(text: str, known: list[str] | None, code: str) -> None:
    """The broken topology.conf yields the named problem."""
    codes = [p.code for p in lint_topology(parse_topology_conf(text), known_nodes=known)]
    assert code in codes


def test_clean_file_has_no_problem() -> None:
    """A proper tree with every known node placed lints clean."""
    text = "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n3\nSwitchName=root Switches=l1,l2\n"
    assert lint_topology(parse_topology_conf(text), known_nodes=["n1", "n2", "n3"]) == []


def test_node_defined_in_slurm_conf_and_include(tmp_path: Path) -> None:
    """A node with a NodeName= line in slurm.conf and in the include is reported (fatal to slurmctld)."""
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=x\nNodeName=DEFAULT CPUs=4\nNodeName=n[1-2] CPUs=4\nInclude slurm-topo-nodes.conf\n"
    )
    (tmp_path / "slurm-topo-nodes.conf").write_text("NodeName=n[2-3] Features=region_r1\n")
    problems = lint_topology(
        parse_topology_conf("SwitchName=r Nodes=n[1-3]\n"), slurm_conf=tmp_path / "slurm.conf"
    )
    assert [p.code for p in problems] == ["node-defined-twice"]
    assert "node n2" in problems[0].message


def test_cli_exit_codes(tmp_path: Path) -> None:
    """lint exits 1 and prints FILE:LINE: code: message for problems, 0 and 'ok' for a clean file."""
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n")
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", "--topology", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert f"{bad}:2: duplicate-switch: switch s1 is defined 2 times" in proc.stdout
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("n[1-2]\n")
    good = tmp_path / "good.conf"
    good.write_text("SwitchName=root Nodes=n[1-2]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", "--topology", str(good), "--nodes-from", str(nodes)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout
    assert "ok (1 switch, 2 nodes)" in proc.stdout


GOLDEN = Path(__file__).resolve().parent / "golden"


def _lint_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_lint_cli_reads_block_files_and_topology_yaml() -> None:
    for path, version in (
        (GOLDEN / "nvl72-racks@24.11" / "topology.conf", "24.11"),
        (GOLDEN / "nvl72-racks@26.05" / "topology.yaml", "26.05"),
    ):
        out = _lint_cli("--topology", str(path), "--slurm-version", version)
        assert out.returncode == 0 and out.stdout.strip().endswith(": ok"), out.stdout + out.stderr


def test_lint_cli_catches_bad_block_sizes_and_a_reordered_block_list(tmp_path: Path) -> None:
    live = (GOLDEN / "nvl72-racks@24.11" / "topology.conf").read_text()
    bad = tmp_path / "bad.conf"
    bad.write_text(
        "\n".join("BlockSizes=4,12" if line.startswith("BlockSizes=") else line for line in live.splitlines())
        + "\n"
    )
    out = _lint_cli("--topology", str(bad), "--slurm-version", "26.05")
    assert out.returncode == 1 and "bad-block-sizes" in out.stdout, out.stdout + out.stderr

    lines = live.splitlines()
    blocks = [i for i, line in enumerate(lines) if line.startswith("BlockName=")]
    lines[blocks[0]], lines[blocks[1]] = lines[blocks[1]], lines[blocks[0]]
    moved = tmp_path / "moved.conf"
    moved.write_text("\n".join(lines) + "\n")
    previous = tmp_path / "live.conf"
    previous.write_text(live)
    out = _lint_cli("--topology", str(moved), "--previous", str(previous), "--slurm-version", "24.11")
    assert out.returncode == 1 and "block-moved" in out.stdout, out.stdout + out.stderr
    assert _lint_cli("--topology", str(moved), "--slurm-version", "24.11").returncode == 0
