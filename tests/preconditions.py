"""What a test may skip outside CI and must run in it (``CI`` set, as `.ci/run` sets it): CI runs as root with
Slurm installed, so a precondition missing there is a failure, never a skip."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def needs_root(why: str) -> pytest.MarkDecorator:
    """Skip without root, except in CI (which runs as root: there the test runs, and fails if it is not)."""
    return pytest.mark.skipif(
        os.geteuid() != 0 and not in_ci(), reason=f"{why} (in CI, which runs as root, it runs)"
    )


def unavailable(what: str) -> None:
    """A missing precondition: skip here, fail in CI."""
    if in_ci():
        pytest.fail(f"{what}: unavailable in CI, where it must run", pytrace=False)
    pytest.skip(what)


NOT_FOR_VERSION = pytest.StashKey[list[str]]()
"""``config.stash``: "test id: why" of each test CI deselected on a Slurm release by design (``slurm_min``,
``native_only``: tests/integration/conftest.py). The process that collects fills it, a pytest-xdist worker
hands it on, and tests/conftest.py prints it in the summary."""

SAID = pytest.StashKey[list[str]]()
"""``config.stash``: what the integration tests report on a pytest-xdist worker (which has no terminal: a root
built, a cluster started, a measurement taken again), handed to the controller and printed in the summary by
tests/conftest.py."""


def say(config: pytest.Config, line: str) -> None:
    """A line on the terminal now, or (a pytest-xdist worker, which has none) in the summary (``SAID``)."""
    if hasattr(config, "workerinput"):  # a worker's terminal goes nowhere
        worker = os.environ.get("PYTEST_XDIST_WORKER", "worker")
        config.stash.setdefault(SAID, []).append(f"[{worker}] {line.strip()}")
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line(line)
