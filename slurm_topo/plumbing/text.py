"""Small wording helpers shared by the command-line outputs."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``1 node``, ``2 nodes``, ``0 nodes``; ``plural`` where an added ``s`` is wrong (``switches``)."""
    if n == 1:
        return f"{n} {singular}"
    return f"{n} {plural or singular + 's'}"


NULL = "(null)"
"""What Slurm's commands print for a string field that is not set (``Comment=(null)``)."""
