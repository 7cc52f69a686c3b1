"""``gpulayer-srun``: topology-ordered ranks and per-task NVLink binding, inside a Slurm allocation.

- :mod:`.plan`: the plan (pure): sizes, TP groups → GPUs, pipelines → switch subtrees, rank rows, srun argv;
- :mod:`.options`: srun's own options (refused when the plan decides them, passed otherwise);
- :mod:`.cli`: the command line: ask Slurm (``scontrol``, via a Runner), plan, print, ``exec`` srun.

Slurm's text (``scontrol show job -d`` / ``topology`` / ``config``, gres.conf ``Links=``) is read by
:mod:`slurm_topo.slurmconfig.slurmconf`; each task is bound by :mod:`slurm_topo.plumbing.srun_shim`. The
console script ``gpulayer-srun`` is :func:`main`.
"""

from typing import Any

from ..core.allocation import Allocation, SwitchTree
from .options import check_srun_options
from .plan import DEFAULT_ORDER, Plan, RankRow, format_plan, plan_srun

_CLI = ("build_plan", "main", "private_hostfile")


def __getattr__(name: str) -> Any:
    """The command line's names, imported on first use: the pure plan (``slurm_topo.cost`` lays ranks out
    with it) does not load the command line, its runner or the shim's ``exec``."""
    if name in _CLI:
        from . import cli

        return getattr(cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_ORDER",
    "Allocation",
    "Plan",
    "RankRow",
    "SwitchTree",
    "build_plan",
    "check_srun_options",
    "format_plan",
    "main",
    "plan_srun",
    "private_hostfile",
]
