"""The layout's promise: the pure core (model, policy, cost, render, show) never imports the YAML loader."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_the_pure_core_does_not_import_the_yaml_loader() -> None:
    code = (
        "import sys\n"
        "import slurm_topo, slurm_topo.core.model, slurm_topo.policy, slurm_topo.cost, slurm_topo.render\n"
        "import slurm_topo.reports.show, slurm_topo.core.topology, slurm_topo.reports.capacity\n"
        "print(sorted(m for m in ('yaml', 'slurm_topo.inventory') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_loader_is_still_reachable_from_the_package() -> None:
    import slurm_topo

    assert slurm_topo.load_inventories.__module__ == "slurm_topo.inventory.merge"
    assert slurm_topo.merge.__name__ == "merge"


def test_only_the_access_layer_runs_or_parses_slurms_clients() -> None:
    """Every command that reads or changes live Slurm goes through slurm_topo.access: no other module names
    scontrol, squeue or sinfo (as a program: an exact string) or defines a parser of their output."""
    import ast

    root = Path(__file__).resolve().parents[1] / "slurm_topo"
    programs = {"scontrol", "squeue", "sinfo"}
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "access":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in programs:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
            if isinstance(node, ast.FunctionDef) and node.name.startswith(("parse_scontrol", "parse_show_")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: def {node.name}")
            if (  # scontrol's output form of the Key=value split: only the layer reads Slurm's output
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "split_pairs"
                and any(
                    k.arg == "output" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in node.keywords
                )
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: split_pairs(..., output=True)")
    assert found == [], "\n".join(found)


def test_the_pure_core_does_not_load_the_commands() -> None:
    """Compiling the submit filter's policy (its budgets included) and the cost model load neither the
    relaxer, ``explain`` nor gpulayer-srun's command line (a fresh interpreter: nothing loaded before)."""
    import subprocess
    import sys

    code = (
        "import sys, slurm_topo.policy, slurm_topo.cost, slurm_topo.cost.budget; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('slurm_topo'))))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(p.stdout.split())
    assert "slurm_topo.cost.budget" in loaded
    assert not loaded & {
        "slurm_topo.relaxer.relax",
        "slurm_topo.reports.explain",
        "slurm_topo.srun.cli",
        "slurm_topo.cli",
    }, loaded


PURE_CORE = (
    "slurm_topo.core.model",
    "slurm_topo.policy",
    "slurm_topo.cost",
    "slurm_topo.cost.budget",
    "slurm_topo.render",
    "slurm_topo.core.topology",
    "slurm_topo.gpu.pick",
    "slurm_topo.srun.plan",
    "slurm_topo.relaxer.relax_plan",
    "slurm_topo.health.effects",
    "slurm_topo.apply.plan",  # what apply would change and why it would refuse: no prover, runner, access
)
"""The modules whose import must stay pure: values in, values out."""

_EFFECTS = ("subprocess", "open(", "read_text", "read_bytes", "write_text", "os.exec", "pyslurm", "pynvml")


def _modules_with_effects() -> set[str]:
    """Every slurm_topo module whose source runs processes, reads or writes files, or loads Slurm's or
    NVIDIA's libraries (by the calls it makes: what a pure module never needs)."""
    root = Path(__file__).resolve().parents[1]
    out = set()
    for path in (root / "slurm_topo").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if any(effect in path.read_text() for effect in _EFFECTS):
            out.add(name)
    return out


def test_the_pure_core_loads_no_module_with_effects() -> None:
    """Importing the pure core (a fresh interpreter) loads no slurm_topo module that runs a process, reads a
    file or calls Slurm: the reader, the runner, the access layer and the shim stay out (ARCHITECTURE.md)."""
    import subprocess
    import sys

    effects = _modules_with_effects()
    assert {
        "slurm_topo.plumbing.runner",
        "slurm_topo.access",
        "slurm_topo.inventory.document",  # reads the inventory files
        "slurm_topo.apply.prove",  # runs a throwaway slurmctld
        "slurm_topo.slurmconfig.slurmconf_files",  # reads slurm.conf and its includes
        "slurm_topo.plumbing.srun_shim",
    } <= effects
    code = (
        f"import sys, {', '.join(PURE_CORE)}; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('slurm_topo'))))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(p.stdout.split())
    assert set(PURE_CORE) <= loaded
    assert not loaded & effects, sorted(loaded & effects)


MAX_COMPLEXITY = 25
"""radon's cyclomatic complexity (it counts boolean operators, which ruff's mccabe does not) of any one
function or method of the package."""


def test_no_function_of_the_package_is_above_the_complexity_limit() -> None:
    """A long function with many jobs is split into named phases (ARCHITECTURE.md): none of slurm_topo/ is
    above :data:`MAX_COMPLEXITY` by radon."""
    from radon.complexity import cc_visit

    root = Path(__file__).resolve().parents[1] / "slurm_topo"
    measured, over = 0, []
    for path in sorted(root.rglob("*.py")):
        for block in cc_visit(path.read_text()):
            for item in [block, *getattr(block, "methods", [])]:
                measured += 1
                if item.complexity > MAX_COMPLEXITY:
                    over.append(f"{path.relative_to(root)}:{item.lineno} {item.name} ({item.complexity})")
    assert measured > 500, measured
    assert not over, over


def test_no_function_of_the_test_cluster_launcher_is_above_the_complexity_limit() -> None:
    """docker-slurm/cluster (every integration test starts its clusters with it) keeps to the same limit:
    `up` is an overview calling named phases."""
    from radon.complexity import cc_visit

    launcher = Path(__file__).resolve().parents[1] / "docker-slurm" / "cluster"
    blocks = cc_visit(launcher.read_text())
    items = [item for block in blocks for item in [block, *getattr(block, "methods", [])]]
    assert len(items) > 60 and any(item.name == "_up" for item in items)
    over = [
        f"{item.lineno} {item.name} ({item.complexity})" for item in items if item.complexity > MAX_COMPLEXITY
    ]
    assert not over, over


def test_no_function_of_the_benchmarks_is_above_the_complexity_limit() -> None:
    """The benchmarks (their results are the project's measurements) keep to the same limit: a long run or
    report is an overview calling named steps."""
    from radon.complexity import cc_visit

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    scripts = sorted(root.glob("*.py"))
    assert len(scripts) > 10, scripts
    over = [
        f"{path.name}:{item.lineno} {item.name} ({item.complexity})"
        for path in scripts
        for block in cc_visit(path.read_text())
        for item in [block, *getattr(block, "methods", [])]
        if item.complexity > MAX_COMPLEXITY
    ]
    assert not over, over


# The packages whose unit tests are kept at least as long as their source (non-blank lines): the ones that
# run as root or for every user (apply, relax, srun) and the command line. Tests of a package are the unit
# test files named after it (tests/test_<name>*.py).
TESTED_AT_LEAST_AS_LONG = {
    "apply": ("slurm_topo/apply",),
    "srun": ("slurm_topo/srun",),
    "cli": ("slurm_topo/cli",),
    "relax": ("slurm_topo/relaxer/relax.py", "slurm_topo/relaxer/relax_plan.py"),
}


def _non_blank(paths: list[Path]) -> int:
    return sum(1 for p in paths for line in p.read_text().splitlines() if line.strip())


@pytest.mark.parametrize("name", sorted(TESTED_AT_LEAST_AS_LONG))
def test_unit_tests_are_at_least_as_long_as_the_source(name: str) -> None:
    root = Path(__file__).resolve().parents[1]
    source: list[Path] = []
    for part in TESTED_AT_LEAST_AS_LONG[name]:
        path = root / part
        source += sorted(path.glob("*.py")) if path.is_dir() else [path]
    tests = sorted((root / "tests").glob(f"test_{name}*.py"))
    assert source and tests
    ratio = _non_blank(tests) / _non_blank(source)
    assert ratio >= 1.0, f"{name}: unit tests / source = {ratio:.2f}"
