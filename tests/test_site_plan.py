"""The inventory's ``policy: {plan: ...}``: the site's default plan for explain's cost prediction."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo.core.errors import InventoryError
from slurm_topo.inventory import load_inventories
from slurm_topo.reports.explain import site_plan

NODES = """
nodes:
  - {name: 'n[1-2]', region: r1, zone: r1-a, gpus: 8}
"""


def _generate(inv: Path, out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "generate",
            "-i",
            str(inv),
            "-o",
            str(out),
            "--slurm-version",
            "22.05",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_site_plan_is_read_and_shapes_only_the_filter_data(tmp_path: Path) -> None:
    """The plan reaches explain (``site_plan``) and the filter's auto budgets in slurm_topo_data.lua, whose
    fingerprint changes with it; topology.conf and the node lines stay byte-identical."""
    (tmp_path / "with.yaml").write_text("policy: {default: prefer, plan: 'tp=8,bytes=10G'}\n" + NODES)
    (tmp_path / "without.yaml").write_text("policy: {default: prefer}\n" + NODES)
    assert site_plan(load_inventories([tmp_path / "with.yaml"])) == "tp=8,bytes=10G"
    assert site_plan(load_inventories([tmp_path / "without.yaml"])) is None
    _generate(tmp_path / "with.yaml", tmp_path / "a")
    _generate(tmp_path / "without.yaml", tmp_path / "b")

    def body(text: str) -> list[str]:
        return [ln for ln in text.splitlines() if "fingerprint" not in ln and "slurm-topo-data" not in ln]

    for name in ("topology.conf", "slurm-topo-nodes.conf"):
        a, b = ((tmp_path / d / name).read_text() for d in "ab")
        assert body(a) == body(b), name
    data_a, data_b = ((tmp_path / d / "slurm_topo_data.lua").read_text() for d in "ab")
    assert "auto_units" in data_a and data_a != data_b
    fp = [re.search(r"fingerprint=\"(\w+)\"", t)[1] for t in (data_a, data_b)]  # type: ignore[index]
    assert fp[0] != fp[1], "the plan shapes the data file, so it is in the fingerprint"


@pytest.mark.parametrize("plan", ["tp=zero", "7", "tp=8,bogus=1"])
def test_bad_site_plan_is_an_inventory_error(tmp_path: Path, plan: object) -> None:
    (tmp_path / "bad.yaml").write_text(f"policy: {{plan: '{plan}'}}\n" + NODES)
    with pytest.raises(InventoryError, match=r"policy\.plan"):
        load_inventories([tmp_path / "bad.yaml"])
