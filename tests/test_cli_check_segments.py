"""``slurm-topo check --locality nvl:segment=N --slurm-version X.Y[.Z]`` (issue 47): the release decides
whether the filter can set ``segment_size`` (25.11.2 on; ``25.11`` alone counts as 25.11.0), so ``check``
gives the answer the filter gives on that release: the segment job accepted with its segment, or the
refusal naming the release it needs. Through the CLI as a user runs it (tests/test_cli.py's ``invoke``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_cases import FLEET
from test_cli import invoke

from slurm_topo.cli.common import SUPPORTED_SLURM
from slurm_topo.cli.generate import takes_segments
from slurm_topo.policy.vocab import SEGMENT_RELEASE

FIRST = tuple(int(x) for x in SEGMENT_RELEASE.split("."))  # (25, 11, 2)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """policy_cases' fleet: NVLink domains nvl-a (3 nodes), nvl-b (3), nvl-c (2): -N4 fits none."""
    path = tmp_path_factory.mktemp("check") / "fleet.yaml"
    path.write_text(FLEET)
    return path


def _check(fleet: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = invoke("check", "-i", str(fleet), "--locality", "nvl:segment=2", "-N4", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def test_without_a_release_check_refuses_the_segment_as_before(fleet: Path) -> None:
    code, got = _check(fleet)
    assert code == 1 and got["decision"] == "reject" and got["segment"] is None
    assert f"from Slurm {SEGMENT_RELEASE}" in str(got["message"])


@pytest.mark.parametrize("release", ["25.11.2", "25.11.9", "26.05"])
def test_from_25_11_2_check_accepts_the_segment_job_with_its_segment(fleet: Path, release: str) -> None:
    code, got = _check(fleet, "--slurm-version", release)
    assert code == 0 and got["decision"] == "accept", got
    assert got["segment"] == 2 and got["segment_policy"] is None
    assert "nvl:wait segment=2 [4 nodes in segments of 2, each in one NVLink domain" in str(got["record"])
    text = invoke(
        "check", "-i", str(fleet), "--locality", "nvl:segment=2:spread", "-N4", "--slurm-version", release
    )
    assert text.exit_code == 0 and text.stdout.startswith("accept\n")
    assert "record: slurm-topo: nvl:wait segment=2:spread [4 nodes in segments of 2" in text.stdout


@pytest.mark.parametrize("release", ["24.11", "25.05", "25.11", "25.11.0", "25.11.1"])
def test_before_25_11_2_check_refuses_naming_the_release(fleet: Path, release: str) -> None:
    """25.11 without a patch level is 25.11.0: refused, as the filter on it refuses."""
    code, got = _check(fleet, "--slurm-version", release)
    assert code == 1 and got["decision"] == "reject", got
    assert f"from Slurm {SEGMENT_RELEASE}" in str(got["message"]) and got["segment"] is None
    assert "from Slurm 24.05 `sbatch --segment=2`" in str(got["message"])


@settings(max_examples=80, deadline=None)
@given(release=st.sampled_from(sorted(SUPPORTED_SLURM)), patch=st.none() | st.integers(0, 12))
def test_the_gate_is_the_release_order_with_a_missing_patch_as_zero(
    release: tuple[int, int], patch: int | None
) -> None:
    text = f"{release[0]}.{release[1]:02d}" + ("" if patch is None else f".{patch}")
    assert takes_segments(text) == ((*release, patch or 0) >= FIRST)


def test_a_release_slurm_topo_does_not_know_is_a_usage_error(fleet: Path) -> None:
    result = invoke(
        "check", "-i", str(fleet), "--locality", "nvl:segment=2", "-N4", "--slurm-version", "25.12"
    )
    assert result.exit_code == 2 and "--slurm-version" in result.stderr


def test_the_help_says_which_release_sets_segments_and_how_25_11_counts() -> None:
    result = invoke("check", "--help")
    assert result.exit_code == 0
    words = " ".join(result.stdout.split())
    assert f"From {SEGMENT_RELEASE} the filter sets segment_size" in words
    assert "25.11 without a patch level counts as 25.11.0" in words


def test_a_non_segment_check_is_unchanged_by_the_release(fleet: Path) -> None:
    """An nvl job one domain holds: the same decision on every release."""
    answers = {
        invoke("check", "-i", str(fleet), "--locality", "nvl", "-N2", *a).stdout
        for a in ((), ("--slurm-version", "22.05"), ("--slurm-version", "26.05"))
    }
    assert len(answers) == 1 and next(iter(answers)).startswith("accept\n")
