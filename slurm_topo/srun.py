"""``gpulayer-srun``: topology-aware rank order and per-task NVLink binding (not built yet)."""

from __future__ import annotations

import sys

NOT_BUILT = (
    "gpulayer-srun: not built yet. It will order ranks by TP/PP/DP and bind each task's GPUs to NVLink islands;\n"
    "until then use plain srun. (slurm-topo issue: 'gpulayer-srun: rank order by TP/PP/DP ...')\n"
)


def main(argv: list[str] | None = None) -> None:
    sys.stderr.write(NOT_BUILT)
    sys.exit(2)
