"""The scopes the suite's pytest-xdist scheduler gives test ids (tests/releases.py): every integration test of
one Slurm release in one scope, whatever its other parameters hold."""

from __future__ import annotations

import pytest
from releases import release_scope

IT = "tests/integration/test_x.py::test_y"


@pytest.mark.parametrize(
    ("nodeid", "scope"),
    [
        (f"{IT}[slurm-24.11]", "slurm-24.11"),
        (f"{IT}[slurm-26.05]", "slurm-26.05"),
        (f"{IT}[slurm-native]", "slurm-native"),
        (IT, "slurm-native"),  # only the host's Slurm: ids carry no release
        (f"{IT}[resize]", "slurm-native"),
        # other parameters after it, hostlists among them (brackets inside the id)
        (f"{IT}[slurm-24.11-h1[8],h0[2]-zone]", "slurm-24.11"),
        (f"{IT}[slurm-26.05-n[01,04,08,10,12-14]]", "slurm-26.05"),
        (f"{IT}[slurm-native-h[0-1][6]-region]", "slurm-native"),
        (f"{IT}[slurm-native-srun]", "slurm-native"),
        # a parameter before it, and one that only looks like a release
        (f"{IT}[4-slurm-24.11]", "slurm-24.11"),
        (f"{IT}[myslurm-24.11]", "slurm-native"),
        ("tests/test_policy.py::test_z[slurm-24.11]", None),  # not an integration test: its module's scope
        ("tests/test_policy.py::test_z", None),
    ],
)
def test_every_test_of_one_release_has_one_scope(nodeid: str, scope: str | None) -> None:
    assert release_scope(nodeid) == scope
