"""The per-task shim of ``gpulayer-srun``: bind one Slurm task to its TP group's GPUs, then exec the command.

srun starts ``python -m slurm_topo.srun_shim -- COMMAND…`` once per rank. The plan travels in two environment
variables written by :func:`slurm_topo.srun.plan_srun` (srun copies the environment to every task):

* ``GPULAYER_SRUN_GROUPS``: one entry per TP group, ``;``-separated, ``<node>=<CUDA_VISIBLE_DEVICES>``
  (``gx1=0,1,2,3``), the GPUs in TP-rank order, already in the index space the node needs (local or global);
* ``GPULAYER_SRUN_RANKS``: one entry per rank (``SLURM_PROCID`` order), ``,``-separated, ``<group>:<tp rank>``.

The shim sets ``CUDA_VISIBLE_DEVICES`` (the group's GPUs), ``LOCAL_RANK`` (the TP rank: the rank's own GPU is
``cuda:LOCAL_RANK`` with one GPU per task), ``LOCAL_WORLD_SIZE`` (the TP size), ``RANK`` (``SLURM_PROCID``) and
``WORLD_SIZE``. A task that finds itself on another node than planned (``SLURMD_NODENAME``) stops with exit 3 rather
than run on the wrong GPUs.
"""

from __future__ import annotations

import os
import sys

GROUPS_VAR = "GPULAYER_SRUN_GROUPS"
RANKS_VAR = "GPULAYER_SRUN_RANKS"


def bind(env: dict[str, str]) -> dict[str, str]:
    """The variables this task gets, from the plan variables and ``SLURM_PROCID``; raises ValueError."""
    groups = [g.partition("=") for g in env[GROUPS_VAR].split(";")]
    ranks = env[RANKS_VAR].split(",")
    rank = int(env["SLURM_PROCID"])
    if not 0 <= rank < len(ranks):
        raise ValueError(f"SLURM_PROCID={rank} is outside the plan's {len(ranks)} ranks")
    group, _, tp_rank = ranks[rank].partition(":")
    node, _, cvd = groups[int(group)]
    here = env.get("SLURMD_NODENAME")
    if here and here != node:
        raise ValueError(
            f"rank {rank} was planned on {node} but runs on {here}: srun did not follow "
            "SLURM_HOSTFILE (-m arbitrary)"
        )
    tp = sum(1 for r in ranks if r.partition(":")[0] == group)
    return {
        "CUDA_VISIBLE_DEVICES": cvd,
        "LOCAL_RANK": tp_rank,
        "LOCAL_WORLD_SIZE": str(tp),
        "RANK": str(rank),
        "WORLD_SIZE": str(len(ranks)),
    }


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.stderr.write("gpulayer-srun shim: no command given\n")
        sys.exit(2)
    try:
        os.environ.update(bind(dict(os.environ)))
    except (KeyError, ValueError) as e:
        sys.stderr.write(f"gpulayer-srun shim: {e}\n")
        sys.exit(3)
    try:
        os.execvp(args[0], args)
    except OSError as e:
        sys.stderr.write(f"gpulayer-srun shim: cannot run {args[0]}: {e}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
