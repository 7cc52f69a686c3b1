"""How the suite is spread over pytest-xdist workers (tests/conftest.py ``pytest_xdist_make_scheduler``): a
scope is a unit one worker runs in order."""

from __future__ import annotations

import re

#: the slurm_release parameter's id among a test id's parameters (others may hold brackets: hostlists)
_RELEASE_IN_ID = re.compile(r"[\[-]slurm-(native|[0-9]+\.[0-9]+)(?=[-\]])")


def release_scope(nodeid: str) -> str | None:
    """``slurm-<release>`` for an integration test (its ``slurm_release`` parameter's id; ``native`` when only
    the host's Slurm runs and ids carry none): one release's clusters live in one worker. None for any other
    test."""
    if not nodeid.startswith("tests/integration/"):
        return None
    params = nodeid.find("[")  # a test's name has none: its parameters start there
    m = _RELEASE_IN_ID.search(nodeid, params) if params >= 0 else None
    return f"slurm-{m.group(1) if m else 'native'}"
