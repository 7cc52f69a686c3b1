"""The generator's version and the Slurm version it renders for."""

from __future__ import annotations

import re

from ..core.errors import InputError

__version__ = "0.1.0"

DEFAULT_SLURM = (22, 5)
_VERSION_RE = re.compile(r"(\d+)\.(\d+)")


def parse_slurm_version(text: str) -> tuple[int, int]:
    """``22.05``, ``24.11.5`` or ``slurm 22.05.8`` -> (major, minor)."""
    m = _VERSION_RE.search(text)
    if m is None:
        raise InputError(f"not a Slurm version: {text!r} (expected e.g. 22.05 or 24.11)")
    major, minor = int(m[1]), int(m[2])
    if major < 20 or major > 99 or minor > 12:
        raise InputError(f"not a Slurm version: {text!r}")
    return major, minor


_PATCH_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_slurm_patch(text: str) -> int | None:
    """The patch level of ``24.11.5`` (5), or None where the text gives none (``24.11``): the releases that
    differ within a series (25.11.5 vs 25.11.6) are told apart by it, and an unknown patch counts as the
    series' oldest."""
    m = _PATCH_RE.search(text)
    return int(m[3]) if m is not None else None


def format_slurm_version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"
