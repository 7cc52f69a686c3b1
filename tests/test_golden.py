"""The embedded examples render byte-for-byte as tests/golden/.

Regenerate with ``pytest --update-golden``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo import load_inventories, render_all
from slurm_topo.slurmconfig.lint import lint_topology
from slurm_topo.slurmconfig.slurmconf import parse_topology_conf

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_matches_golden(example: Path, update_golden: bool) -> None:
    """Each example fleet renders exactly its checked-in golden files, and they lint clean."""
    rendered = render_all(load_inventories([example]), (22, 5))
    golden = REPO / "tests" / "golden" / example.stem
    if update_golden:
        golden.mkdir(parents=True, exist_ok=True)
        for name, text in rendered.items():
            (golden / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in golden.iterdir()) == sorted(rendered)
    for name, text in rendered.items():
        assert (golden / name).read_text(encoding="utf-8") == text, (
            f"{name} differs; --update-golden if intended"
        )
    assert lint_topology(parse_topology_conf(rendered["topology.conf"])) == []


def test_examples_start_with_a_drawing() -> None:
    """Every example file opens with a comment block drawing its fleet."""
    for example in EXAMPLES:
        head = example.read_text().splitlines()[:4]
        assert all(line.startswith("#") for line in head), example
        assert any("─" in line for line in example.read_text().splitlines() if line.startswith("#")), example
