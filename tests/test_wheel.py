"""What ships is what is tested: the wheel holds everything the source tree has, and it starts.

* Every package (a folder of ``slurm_topo/`` with an ``__init__.py``) and every module of the tree, every
  file of the Slurm-side folders shipped as data (``job_submit/`` with the filter's Lua modules, ``gres/``,
  ``examples/``, ``contrib/``), a man page per command of the click tree and per console script, and the
  console scripts themselves are in the wheel.
* The wheel, installed alone into a fresh virtual environment (``--no-deps``; its dependencies reached
  through a path file, so nothing of this checkout or of an editable install is visible), runs
  ``slurm-topo --version``, ``gpulayer-srun --help`` and ``slurm-topo files``, and imports every module from
  where it was installed.
* In CI (``SLURM_TOPO_TEST_INSTALLED=1``, set by ``.ci/run``) the suite itself imported the installed
  package, not the checkout, and not an editable install.

The wheel is ``$SLURM_TOPO_WHEEL`` (``.ci/run`` builds it with ``python -m build``, from the sdist), or one
built here with ``pip wheel`` from the checkout.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import click
import pytest
from preconditions import in_ci, unavailable

import slurm_topo
from slurm_topo.cli import cli

REPO = Path(__file__).resolve().parents[1]
SHIPPED = ("job_submit", "gres", "examples", "contrib")
#: never shipped: build outputs a checkout may hold (MANIFEST.in's global-exclude)
NOT_SHIPPED_SUFFIXES = (".so", ".so.slurm-version", ".pyc")


def _tree_files(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_dir() or "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
            continue
        if path.name.endswith(NOT_SHIPPED_SUFFIXES):
            continue
        out.append(rel.as_posix())
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SLURM_TOPO_WHEEL")
    if given:
        return Path(given)
    if not (REPO / "pyproject.toml").is_file():
        unavailable("no source tree to build a wheel from, and no $SLURM_TOPO_WHEEL")
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode == 0, f"pip wheel failed:\n{p.stderr[-3000:]}"
    (built,) = out.glob("slurm_topo-*.whl")
    return built


@pytest.fixture(scope="module")
def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_every_package_and_module_of_the_tree_is_in_the_wheel(names: set[str]) -> None:
    source = REPO / "slurm_topo"
    modules = [f"slurm_topo/{rel}" for rel in _tree_files(source) if rel.endswith((".py", ".typed"))]
    packages = [m for m in modules if m.endswith("/__init__.py")]
    assert len(packages) >= 10 and "slurm_topo/access/__init__.py" in packages
    missing = sorted(set(modules) - names)
    assert not missing, f"modules of the tree missing from the wheel: {missing}"


@pytest.mark.parametrize("group", SHIPPED)
def test_every_shipped_slurm_side_file_is_in_the_wheel(names: set[str], group: str) -> None:
    files = _tree_files(REPO / group)
    assert files, f"{group}/ is empty in the tree"
    missing = sorted(f for f in files if f"slurm_topo/files/{group}/{f}" not in names)
    assert not missing, f"{group}/ files missing from the wheel: {missing}"
    if group == "job_submit":
        lua = [f for f in files if f.endswith(".lua")]
        assert "slurm_topo_filter/init.lua" in lua and len(lua) >= 5


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        if getattr(cmd, "hidden", False):
            continue
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out.extend(_command_paths(cmd, (*prefix, name)))
    return out


def _scripts() -> dict[str, str]:
    with open(REPO / "pyproject.toml", "rb") as f:
        scripts: dict[str, str] = tomllib.load(f)["project"]["scripts"]
    return scripts


def test_a_man_page_for_every_command_and_script(names: set[str]) -> None:
    pages = {n.rsplit("/", 1)[1] for n in names if "/share/man/man1/" in n}
    want = {f"{script}.1" for script in _scripts()}
    want |= {"slurm-topo-" + "-".join(path) + ".1" for path in _command_paths(cli)}
    missing = sorted(want - pages)
    assert not missing, f"man pages missing from the wheel: {missing}"


def test_the_console_scripts_are_declared_in_the_wheel(names: set[str], wheel: Path) -> None:
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(entry_points).decode()
    for script, target in _scripts().items():
        assert f"{script} = {target}" in text
    # what the shipped units and the cron line run, and the launcher's name in the docs
    assert {"slurm-topo", "gpulayer-srun"} <= set(_scripts())


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel alone in a fresh venv; click, PyYAML and ClusterShell reached through a path file."""
    root = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(root)
    py = root / "bin" / "python"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, f"installing the wheel failed:\n{p.stderr[-3000:]}"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = sorted({str(Path(m.__file__).resolve().parents[1]) for m in _dependency_modules()})
    (Path(site) / "zz_test_deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return root


def _dependency_modules() -> list:  # type: ignore[type-arg]
    import ClusterShell
    import yaml

    return [click, yaml, ClusterShell]


def _run(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SLURM_TOPO"))}
    return subprocess.run(
        [str(root / "bin" / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=root,
        env=env,
    )


def test_the_installed_wheel_starts(installed: Path) -> None:
    version = _run(installed, "slurm-topo", "--version")
    assert version.returncode == 0, version.stderr
    assert slurm_topo.__version__ in version.stdout
    helped = _run(installed, "gpulayer-srun", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "--tp" in helped.stdout
    listed = _run(installed, "slurm-topo", "files")
    assert listed.returncode == 0, listed.stderr
    assert "job_submit/slurm_topo_filter/init.lua" in listed.stdout
    assert "contrib/systemd/slurm-topo-apply.service" in listed.stdout


def test_every_module_imports_from_the_installed_wheel(installed: Path) -> None:
    script = (
        "import importlib, pkgutil, sys, slurm_topo\n"
        "bad = []\n"
        "for m in pkgutil.walk_packages(slurm_topo.__path__, 'slurm_topo.'):\n"
        "    if m.name.endswith('.__main__'):\n"
        "        continue\n"
        "    mod = importlib.import_module(m.name)\n"
        "    if not mod.__file__.startswith(sys.prefix):\n"
        "        bad.append((m.name, mod.__file__))\n"
        "print(len(sys.modules), bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    p = _run(installed, "python", "-c", script)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_suite_runs_against_the_installed_package() -> None:
    """In CI the suite imports the wheel's package from site-packages: never the checkout, never editable."""
    if os.environ.get("SLURM_TOPO_TEST_INSTALLED") != "1":
        if in_ci():
            pytest.fail(
                "CI must run the suite against the installed wheel (.ci/run sets SLURM_TOPO_TEST_INSTALLED=1)"
            )
        pytest.skip("a development run (SLURM_TOPO_TEST_INSTALLED unset): the checkout may be imported")
    here = Path(slurm_topo.__file__).resolve()
    assert REPO not in here.parents, f"slurm_topo imported from the checkout: {here}"
    assert Path(sysconfig.get_paths()["purelib"]).resolve() in here.parents
    direct = importlib.metadata.distribution("slurm-topo").read_text("direct_url.json")
    assert not json.loads(direct or "{}").get("dir_info", {}).get("editable", False)
    leaked = sorted(
        name
        for name, mod in list(sys.modules.items())
        if (name == "slurm_topo" or name.startswith("slurm_topo."))
        and getattr(mod, "__file__", None)
        and REPO in Path(mod.__file__).parents
    )
    assert not leaked, f"modules imported from the checkout: {leaked}"
