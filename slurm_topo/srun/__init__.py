"""``gpulayer-srun``: topology-ordered ranks and per-task NVLink binding, inside a Slurm allocation.

- :mod:`.plan`: the plan (pure): sizes, TP groups → GPUs, pipelines → switch subtrees, rank rows, srun argv;
- :mod:`.options`: srun's own options (refused when the plan decides them, passed otherwise);
- :mod:`.cli`: the command line: ask Slurm (``scontrol``, via a Runner), plan, print, ``exec`` srun.

Slurm's text (``scontrol show job -d`` / ``topology`` / ``config``, gres.conf ``Links=``) is read by
:mod:`slurm_topo.slurmconf`; each task is bound by :mod:`slurm_topo.srun_shim`. The console script
``gpulayer-srun`` is :func:`main`.
"""

from ..access.text import Allocation, SwitchTree
from .cli import build_plan, main, write_hostfile
from .options import check_srun_options
from .plan import DEFAULT_ORDER, Plan, RankRow, format_plan, plan_srun

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
    "write_hostfile",
]
