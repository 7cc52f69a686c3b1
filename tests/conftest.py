"""Shared test options: ``--update-golden`` rewrites tests/golden/ from the current renderers;
``--slurm-versions`` selects the Slurm releases of the integration tests (tests/integration/conftest.py
reads it).

The suite runs on pytest-xdist workers (pyproject.toml: ``-n auto``): one worker per selected Slurm release
and one more, unless ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says otherwise (``-n 0``: in this process). The
scheduler (``pytest_xdist_make_scheduler``) hands each release's integration tests to one worker as one unit:
its session clusters (their base, ports and munged) are started by one process and its tests run in order on
them, while the releases run side by side; every other test module is a unit of its own.
A test marked ``quiet`` measures the machine's speed (the shaped testbed's rates, gloo's latency): on
workers it runs while no other test does (tests/quiet.py), as it did when the suite ran in one process.
Hypothesis runs without its per-example deadline and its too-slow health check: a wall-clock limit fails a
correct test on a loaded machine.

Options live here because pytest parses the command line once, after loading only the conftest files of the
paths it was given (and their parents): an option registered by tests/integration/conftest.py alone would be
unknown to ``pytest tests`` or ``pytest tests/test_x.py --slurm-versions ...``."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("slurm-topo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("slurm-topo")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # shared test modules (luafilter, policy_cases)

from preconditions import NOT_FOR_VERSION, SAID  # noqa: E402
from quiet import QuietLock  # noqa: E402
from releases import release_scope, selected_releases  # noqa: E402

# The package under test, imported first: the installed one wherever this Python has it (CI: the wheel),
# before any test module can put the checkout on sys.path (tests/test_wheel.py checks which one ran).
import slurm_topo  # noqa: E402,F401


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current renderers instead of comparing",
    )
    parser.addoption(
        "--slurm-versions",
        default=None,
        help="comma-separated Slurm releases to run the integration tests on: native, 24.11, 26.05 "
        "(env SLURM_TOPO_SLURM_VERSIONS; default native = the host's Slurm)",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per selected Slurm release (its integration tests, one group) and one for the
    rest to start on; None (pytest-xdist's own reading) where ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(selected_releases(config)) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scope scheduling, where a scope is one Slurm release's integration tests (its
    ``[slurm-X]`` test id; ``native`` when only the host's runs and ids carry none) or else one test module
    (or class)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByRelease(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return release_scope(nodeid) or str(super()._split_scope(nodeid))

    return ByRelease(config, log)


QUIET_DIR = "slurm_topo_quiet_dir"  # the controller's temporary directory, in each worker's workerinput
QUIET_DIR_KEY = pytest.StashKey[str]()  # the controller's
QUIET = pytest.StashKey[QuietLock]()  # a worker's


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    directory = node.config.stash.get(QUIET_DIR_KEY, None)
    if directory is not None:
        node.workerinput[QUIET_DIR] = directory


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    lock = item.config.stash.get(QUIET, None)
    if lock is None:  # in one process (-n 0): nothing runs beside
        yield
        return
    lock.hold(exclusive=item.get_closest_marker("quiet") is not None)
    try:
        yield
    finally:
        lock.release()


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(QUIET_DIR_KEY, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    # one usage error for a release not known (the option's or the environment's), also when no integration
    # test is collected
    selected_releases(config)
    worker = getattr(config, "workerinput", None)
    if worker is not None and worker.get(QUIET_DIR):
        config.stash[QUIET] = QuietLock(worker[QUIET_DIR])
    elif worker is None and getattr(config.option, "numprocesses", None):
        config.stash[QUIET_DIR_KEY] = tempfile.mkdtemp(prefix="slurm-topo-quiet-")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    # every pytest-xdist worker collects (and deselects) the same tests: the first list that comes is the list
    out = getattr(node, "workeroutput", {})
    got = out.get("not_for_version")
    if got and not node.config.stash.get(NOT_FOR_VERSION, []):
        node.config.stash[NOT_FOR_VERSION] = json.loads(got)
    node.config.stash.setdefault(SAID, []).extend(json.loads(out.get("said") or "[]"))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """In the process that reports (not on a worker): what the integration tests said on the workers, and
    the integration tests CI deselected on a release by design, by name (CI counts every skip as a failure,
    so nothing is left out silently)."""
    if getattr(config, "workerinput", None) is not None:
        return
    said = config.stash.get(SAID, [])
    if said:
        terminalreporter.write_line(
            "said on the workers (Slurm roots, session clusters, measurements taken again):"
        )
        for line in said:
            terminalreporter.write_line(f"  {line}")
    lines = config.stash.get(NOT_FOR_VERSION, [])
    if lines:
        terminalreporter.write_line(f"not run on this Slurm by design (slurm_min), {len(lines)} test(s):")
        for line in lines:
            terminalreporter.write_line(f"  {line}")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def repo() -> Path:
    return REPO
