"""The layout's promise: the pure core (model, policy, cost, render, show) never imports the YAML loader."""

from __future__ import annotations

import subprocess
import sys


def test_the_pure_core_does_not_import_the_yaml_loader() -> None:
    code = (
        "import sys\n"
        "import slurm_topo, slurm_topo.model, slurm_topo.policy, slurm_topo.cost, slurm_topo.render\n"
        "import slurm_topo.show, slurm_topo.topology, slurm_topo.capacity\n"
        "print(sorted(m for m in ('yaml', 'slurm_topo.inventory') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_loader_is_still_reachable_from_the_package() -> None:
    import slurm_topo

    assert slurm_topo.load_inventories.__module__ == "slurm_topo.inventory"
    assert slurm_topo.merge.__name__ == "merge"
