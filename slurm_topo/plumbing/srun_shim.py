"""The per-task shim of ``gpulayer-srun``: bind one Slurm task to its TP group's GPUs, then exec the command.

srun starts ``python -m slurm_topo.plumbing.srun_shim -- COMMAND…`` once per rank. The plan travels in two
environment variables written by :func:`slurm_topo.srun.plan_srun` (srun copies the environment to every
task):

* ``GPULAYER_SRUN_GROUPS``: one entry per TP group, ``;``-separated, ``<node>=<CUDA_VISIBLE_DEVICES>``
  (``gx1=0,1,2,3``), the GPUs in TP-rank order, already in the index space the node needs (local or global);
* ``GPULAYER_SRUN_RANKS``: one entry per rank (``SLURM_PROCID`` order), ``,``-separated,
  ``<group>:<tp rank>``.

The shim sets ``CUDA_VISIBLE_DEVICES`` (the group's GPUs), ``LOCAL_RANK`` (the TP rank: the rank's own GPU
is ``cuda:LOCAL_RANK`` with one GPU per task), ``LOCAL_WORLD_SIZE`` (the TP size), ``RANK``
(``SLURM_PROCID``) and ``WORLD_SIZE``. A task that finds itself on another node than planned
(``SLURMD_NODENAME``) stops with exit 3 (:class:`~slurm_topo.core.errors.PlacementError`) rather than run on
the wrong GPUs; missing or malformed plan variables exit 2, a command that cannot be started exits 3 (the one
exit-code table, via ``run_entry``).
"""

from __future__ import annotations

import os
import sys

from ..core.errors import CommandError, InputError, PlacementError, UsageError
from ..srun.options import GROUPS_VAR, RANKS_VAR
from .entry import run_entry

PROG = "gpulayer-srun shim"


def bind(env: dict[str, str]) -> dict[str, str]:
    """The variables this task gets, from the plan variables and ``SLURM_PROCID``.

    Raises :class:`InputError` for missing or malformed plan variables, :class:`PlacementError` when the task
    runs on another node than planned.
    """
    try:
        groups = [g.partition("=") for g in env[GROUPS_VAR].split(";")]
        ranks = env[RANKS_VAR].split(",")
        rank = int(env["SLURM_PROCID"])
    except KeyError as exc:
        raise InputError(f"{exc.args[0]} is not set: the shim runs only under gpulayer-srun") from None
    except ValueError:
        raise InputError(f"SLURM_PROCID={env['SLURM_PROCID']!r} is not a rank") from None
    if not 0 <= rank < len(ranks):
        raise InputError(f"SLURM_PROCID={rank} is outside the plan's {len(ranks)} ranks")
    group, _, tp_rank = ranks[rank].partition(":")
    try:
        node, _, cvd = groups[int(group)]
    except (ValueError, IndexError):
        raise InputError(f"{RANKS_VAR} entry {ranks[rank]!r} names no group of {GROUPS_VAR}") from None
    here = env.get("SLURMD_NODENAME")
    if here and here != node:
        raise PlacementError(
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


def run(args: list[str]) -> None:
    """Bind this task and exec its command (errors raised, reported by ``run_entry``)."""
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise UsageError("no command given")
    os.environ.update(bind(dict(os.environ)))
    if os.environ.get("SLURM_HOSTFILE", "").startswith("/proc/self/fd/"):
        del os.environ["SLURM_HOSTFILE"]  # srun's private in-memory host list: no file in the task
    sys.stderr.flush()
    try:
        os.execvp(args[0], args)
    except OSError as exc:
        raise CommandError(args[:1], None, exc.strerror or str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    run_entry(PROG, lambda: run(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
