"""``lint`` knows what each release reads: topology.yaml's types (flat, tree, block from 25.05; ring and
torus3d from 26.05, topology.yaml(5)), a partition's ``Exclusive=`` (26.05, ``read_config.c``), and the
4096-byte YAML size that 25.05-25.11.5 stop on (the CLI reads the patch level of ``--slurm-version``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_topo.render.topology_yaml import YAML_PAGE
from slurm_topo.slurmconfig.lint import EXCLUSIVE_VALUES, RING_MAX_NODES, lint_file

TREE = """- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: s1
        nodes: "n[01-04]"
"""


def _codes(text: str, version: tuple[int, int] | None, **kw: object) -> list[str]:
    return [p.code for p in lint_file(text, source="topology.yaml", slurm_version=version, **kw)]  # type: ignore[arg-type]


def _ring(count: int) -> str:
    return TREE + (
        f"- topology: rings\n  cluster_default: false\n  ring:\n    rings:\n"
        f'      - ring: r0\n        nodes: "m[1-{count}]"\n'
    )


@pytest.mark.parametrize("version", [(25, 5), (25, 11)])
def test_ring_and_torus_are_26_05(version: tuple[int, int]) -> None:
    assert _codes(_ring(4), version) == ["topology-type-release"]
    assert _codes(_ring(4), (26, 5)) == []


@given(count=st.integers(1, 40))
def test_a_ring_holds_at_most_16_nodes(count: int) -> None:
    assert _codes(_ring(count), (26, 5)) == ([] if count <= RING_MAX_NODES else ["bad-ring"])


@given(x=st.integers(1, 4), y=st.integers(1, 4), z=st.integers(1, 3), nodes=st.integers(1, 60))
def test_a_torus_holds_at_most_its_cells(x: int, y: int, z: int, nodes: int) -> None:
    text = TREE + (
        "- topology: pods\n  cluster_default: false\n  torus3d:\n    toruses:\n"
        f'      - name: pod1\n        dims: {{x: {x}, y: {y}, z: {z}}}\n        nodes: "t[1-{nodes}]"\n'
    )
    assert _codes(text, (26, 5)) == ([] if nodes <= x * y * z else ["bad-torus"])


def test_a_topology_has_exactly_one_type_and_flat_options_are_26_05() -> None:
    two = TREE + "  flat: true\n"
    assert _codes(two, (26, 5)) == ["topology-type"]
    none = TREE + "- topology: nothing\n  cluster_default: false\n"
    assert _codes(none, (26, 5)) == ["topology-type"]
    flat = TREE + "- topology: f\n  cluster_default: false\n  flat:\n    alpha_step_rank: true\n"
    assert _codes(flat, (25, 11)) == ["topology-type-release"]
    assert _codes(flat, (26, 5)) == []
    assert _codes(TREE + "- topology: f\n  cluster_default: false\n  flat: true\n", (25, 5)) == []


def _conf(tmp_path: Path, partition: str) -> Path:
    (tmp_path / "parts.conf").write_text(f"PartitionName=gpu Nodes=n[01-04] {partition}\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nPartitionName=DEFAULT MaxTime=10\nInclude parts.conf\n")
    return conf


@pytest.mark.parametrize("value", [*EXCLUSIVE_VALUES, "topo", "Node", "YES", "EXCLUSIVE", "USER,TOPO"])
def test_exclusive_is_26_05s_and_takes_four_values(tmp_path: Path, value: str) -> None:
    conf = _conf(tmp_path, f"Exclusive={value}")
    good = value.upper() in EXCLUSIVE_VALUES
    assert _codes(TREE, (26, 5), slurm_conf=conf) == ([] if good else ["bad-exclusive"])
    assert _codes(TREE, (25, 11), slurm_conf=conf) == ["exclusive-release"]
    old = _conf(tmp_path, "ExclusiveTopo=YES")
    assert _codes(TREE, (25, 11), slurm_conf=old) == [] == _codes(TREE, (26, 5), slurm_conf=old)
    default = tmp_path / "default.conf"
    default.write_text(f"PartitionName=DEFAULT Exclusive={value}\nPartitionName=gpu Nodes=n01\n")
    assert _codes(TREE, (25, 11), slurm_conf=default) == ["exclusive-release"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", *args], capture_output=True, text=True, check=False
    )


def test_cli_reads_the_patch_level(tmp_path: Path) -> None:
    text = TREE + "#" * (YAML_PAGE - len(TREE) - 1) + "\n"
    path = tmp_path / "topology.yaml"
    path.write_text(text)
    for version, bad in (
        ("25.05", True),
        ("25.11.5", True),
        ("25.11", True),
        ("25.11.6", False),
        ("26.05", False),
    ):
        out = _cli("--topology", str(path), "--slurm-version", version)
        assert (out.returncode == 1) == bad, (version, out.stdout, out.stderr)
        assert ("yaml-page-size" in out.stdout) == bad
