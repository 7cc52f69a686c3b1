"""The Slurm releases the integration tests run on: which (``--slurm-versions``, registered by
tests/conftest.py, or ``$SLURM_TOPO_SLURM_VERSIONS``), and how the suite spreads over pytest-xdist workers by
them (tests/conftest.py ``pytest_xdist_make_scheduler``: a scope is a unit one worker runs in order)."""

from __future__ import annotations

import os
import re

import pytest

RELEASES = ("native", "24.11", "26.05")
VERSIONS_ENV = "SLURM_TOPO_SLURM_VERSIONS"

#: the slurm_release parameter's id among a test id's parameters (others may hold brackets: hostlists)
_RELEASE_IN_ID = re.compile(r"[\[-]slurm-(native|[0-9]+\.[0-9]+)(?=[-\]])")


def selected_releases(config: pytest.Config) -> list[str]:
    """The releases of ``--slurm-versions`` / ``$SLURM_TOPO_SLURM_VERSIONS`` (default: native)."""
    raw = config.getoption("--slurm-versions", default=None) or os.environ.get(VERSIONS_ENV) or "native"
    out: list[str] = []
    for v in (x.strip() for x in raw.split(",")):
        if v not in RELEASES:
            raise pytest.UsageError(f"--slurm-versions: {v!r} is not one of {', '.join(RELEASES)}")
        if v not in out:
            out.append(v)
    return out


def release_scope(nodeid: str) -> str | None:
    """``slurm-<release>`` for an integration test (its ``slurm_release`` parameter's id; ``native`` when only
    the host's Slurm runs and ids carry none): one release's clusters live in one worker. None for any other
    test."""
    if not nodeid.startswith("tests/integration/"):
        return None
    params = nodeid.find("[")  # a test's name has none: its parameters start there
    m = _RELEASE_IN_ID.search(nodeid, params) if params >= 0 else None
    return f"slurm-{m.group(1) if m else 'native'}"
