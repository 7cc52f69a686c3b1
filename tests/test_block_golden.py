"""The NVLink example fleets render byte-for-byte as tests/golden/<example>@<release>/ for the releases whose
block syntax differs (23.11 BlockLevels, 24.11 BlockSizes, 26.05 topology.yaml); 22.05 is test_golden's.

Regenerate with ``pytest --update-golden``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo import load_inventories, render_all
from slurm_topo.plumbing.version import format_slurm_version
from slurm_topo.slurmconfig.lint import lint_file

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = [p for p in sorted((REPO / "examples").glob("*.yaml")) if "nvlink_domain" in p.read_text()]
RELEASES = ((23, 11), (24, 11), (26, 5))


@pytest.mark.parametrize("release", RELEASES, ids=[format_slurm_version(r) for r in RELEASES])
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_nvl_example_matches_golden_per_release(
    example: Path, release: tuple[int, int], update_golden: bool
) -> None:
    rendered = render_all(load_inventories([example]), release)
    golden = REPO / "tests" / "golden" / f"{example.stem}@{format_slurm_version(release)}"
    if update_golden:
        golden.mkdir(parents=True, exist_ok=True)
        for name, text in rendered.items():
            (golden / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in golden.iterdir()) == sorted(rendered)
    for name, text in rendered.items():
        assert (golden / name).read_text(encoding="utf-8") == text, (
            f"{name} differs; --update-golden if intended"
        )
    topo_file = "topology.yaml" if "topology.yaml" in rendered else "topology.conf"
    assert lint_file(rendered[topo_file], source=topo_file, slurm_version=release) == []


def test_there_is_an_nvl_example() -> None:
    assert EXAMPLES
