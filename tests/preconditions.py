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
"""``config.stash``: what the integration fixtures report on a pytest-xdist worker (which has no terminal: a
root built, a cluster started), handed to the controller and printed in the summary by tests/conftest.py."""
