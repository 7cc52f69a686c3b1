"""Every invalid inventory: exit != 0, exactly one stderr line naming FILE: nodes[i].key, and no file touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = """\
nodes:
  - name: n[01-04]
    region: r1
    zone: r1-a
"""

CASES = [
    pytest.param("nodes:\n  - region: r1\n", "nodes[0].name: missing", id="missing name"),
    pytest.param("nodes:\n  - name: n[01-\n", "nodes[0].name:", id="bad hostlist"),
    pytest.param("nodes:\n  - name: n1\n    rack: r3\n", "nodes[0].rack: unknown key", id="unknown key"),
    pytest.param(
        "nodes:\n  - name: n1\n    gpus: eight\n", "nodes[0].gpus: must be an integer", id="wrong type gpus"
    ),
    pytest.param(
        "nodes:\n  - name: n1\n    region: [r1]\n",
        "nodes[0].region: must be a string",
        id="wrong type region",
    ),
    pytest.param(
        "nodes:\n  - name: n1\n    features: torch\n",
        "nodes[0].features: must be a list",
        id="features not a list",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1}\n  - {name: 'n[1-2]', region: r2}\n",
        "nodes[1]: node n1 is at region=r2 here but at region=r1",
        id="same-trust duplicate",
    ),
    pytest.param(
        'nodes:\n  - name: n1\n    region: r1\n    zone: "z1\\n\\n    SwitchName=evil Nodes=n1"\n',
        "nodes[0].zone: must be 1-63 characters",
        id="label with newline injection",
    ),
    pytest.param("nodes:\n  - {name: n1, region: 'a=b'}\n", "nodes[0].region:", id="label with equals"),
    pytest.param("nodes:\n  - {name: n1, region: 'a#b'}\n", "nodes[0].region:", id="label with hash"),
    pytest.param("nodes:\n  - {name: n1, region: 'a[1]'}\n", "nodes[0].region:", id="label with brackets"),
    pytest.param(
        "nodes:\n  - {name: n1, region: 'a]'}\n", "nodes[0].region:", id="label with closing bracket"
    ),
    pytest.param("nodes:\n  - {name: n1, region: 'a,b'}\n", "nodes[0].region:", id="label with comma"),
    pytest.param("nodes:\n  - {name: n1, region: 'a b'}\n", "nodes[0].region:", id="label with space"),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, network_group: '" + "x" * 10_000 + "'}\n",
        "nodes[0].network_group: must be 1-63 characters",
        id="10 kB label",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, features: ['a&b']}\n", "nodes[0].features[0]:", id="feature with operator"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, labels: {foo/bar: x}}\n",
        "nodes[0].labels.foo/bar: unknown label",
        id="unknown label",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, network_group: g1, labels: {gpulayer.dev/network-group: g2}}\n",
        "disagrees with network_group=g1",
        id="label disagrees with key",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: europe-west1-b, zone: europe-west1-c}\n",
        "nodes[0].region: looks like a zone but zone is 'europe-west1-c'",
        id="zone-shaped region disagrees",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, zone: hall-a}\n", "nodes[0].zone: needs a region", id="zone without region"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, source: cloud}\n", "nodes[0].source: must be provider", id="bad source"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Feature: x}}\n",
        "nodes[0].slurm.Feature: unknown node attribute",
        id="unknown slurm attribute",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {CPUs: -4}}\n",
        "nodes[0].slurm.CPUs: must be a non-negative",
        id="negative cpus",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Gres: 'gpu:8 Features=x'}}\n",
        "nodes[0].slurm.Gres: not a valid",
        id="slurm value with space injection",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[1-3]', slurm: {NodeAddr: 10.0.0.1}}\n",
        "nodes[0].slurm.NodeAddr: names one node but the entry has 3",
        id="one address for three nodes",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[1-3]', slurm: {Port: '[7001-7002]'}}\n",
        "nodes[0].slurm.Port: has 2 values for 3 nodes",
        id="port count mismatch",
    ),
    pytest.param("nodes:\n  - {name: 'bad/name'}\n", "nodes[0].name: node names must be", id="bad node name"),
    pytest.param("nodes: [\n", "not valid YAML", id="yaml syntax error"),
    pytest.param("- name: n1\n", "must be a mapping with a 'nodes' list", id="top level not a mapping"),
    pytest.param("nodes:\n  - n1\n", "nodes[0]: must be a mapping", id="entry not a mapping"),
    pytest.param("nodes: []\nrules: {}\n", "rules: unknown key", id="unknown top-level key"),
    pytest.param(
        "nodes:\n  - {name: n1}\npolicy: {default: nearby}\n",
        "policy.default: must be LEVEL",
        id="bad policy default",
    ),
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_bad_inventory_is_one_line_and_writes_nothing(tmp_path: Path, text: str, expected: str) -> None:
    """A bad inventory exits non-zero with one stderr line naming file and key; no output appears or changes."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    good = tmp_path / "good.yaml"
    good.write_text(GOOD, encoding="utf-8")
    existing = tmp_path / "existing"
    assert _run("generate", "-i", str(good), "-o", str(existing), "--slurm-version", "22.05").returncode == 0
    before = _snapshot(existing)

    for out, inventories in ((tmp_path / "new", [bad]), (existing, [good, bad])):
        argv = [
            "generate",
            *sum((["-i", str(p)] for p in inventories), []),
            "-o",
            str(out),
            "--slurm-version",
            "22.05",
        ]
        proc = _run(*argv)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        if "nodes[" in expected or "not valid YAML" in expected or "mapping" in expected:
            assert f"{bad}: " in lines[0]
        assert expected in lines[0]
        assert len(lines[0]) < 400, "values are cut, never dumped whole"
        assert proc.stdout == ""
    assert not (tmp_path / "new").exists()
    assert _snapshot(existing) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_long_value_is_repr_escaped_and_cut(tmp_path: Path) -> None:
    """The offending value is shown as a repr, cut at 40 characters, so a hostile label cannot break the line."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        'nodes:\n  - {name: n1, region: r1, zone: "z1\\n\\n    SwitchName=evil Nodes=n1 and more"}\n'
    )
    proc = _run("generate", "-i", str(bad), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    line = proc.stderr.strip()
    assert "\\n\\n" in line and "…" in line
    value = line[line.index("('") + 1 : line.rindex(")")]
    assert len(value) == 41  # 40 characters of repr plus the ellipsis


def test_version_without_scontrol(tmp_path: Path) -> None:
    """Without --slurm-version and without scontrol, generate asks the installed daemons, else renders for 22.05
    and says so."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    env = dict(os.environ, PATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "generate", "-i", str(good), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    header = (tmp_path / "o" / "topology.conf").read_text().splitlines()[0]
    daemon = Path("/usr/sbin/slurmctld")
    if daemon.exists():
        version = subprocess.run(
            [str(daemon), "-V"], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        assert header.endswith("for Slurm " + ".".join(version.split(".")[:2]))
        assert proc.stderr == ""
    else:
        assert "rendering for Slurm 22.05" in proc.stderr
        assert header.endswith("for Slurm 22.05")


def test_empty_inventory_writes_nothing(tmp_path: Path) -> None:
    """An inventory with no nodes is refused: slurm-topo never writes an empty topology.conf."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("nodes: []\n")
    proc = _run("generate", "-i", str(empty), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: the inventory has no nodes; refusing to render empty Slurm files"
    ]
    assert not (tmp_path / "o").exists()


def test_trailing_newline_in_a_label_is_refused(tmp_path: Path) -> None:
    """A label ending in a newline is refused (a `$` anchor would let it through into topology.conf)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text('nodes:\n  - {name: n1, region: "r1\\n"}\n')
    proc = _run("generate", "-i", str(bad), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    assert proc.returncode == 2 and "nodes[0].region: must be 1-63 characters" in proc.stderr
    assert not (tmp_path / "o").exists()
