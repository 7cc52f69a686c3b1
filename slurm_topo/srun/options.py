"""srun's options on a ``gpulayer-srun`` command line: those the plan decides are refused, the rest pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.errors import InputError

PROG = "gpulayer-srun"

#: the plan's variables for each task (srun's environment), read by the shim
# (:mod:`slurm_topo.plumbing.srun_shim`)
GROUPS_VAR = "GPULAYER_SRUN_GROUPS"
RANKS_VAR = "GPULAYER_SRUN_RANKS"

#: srun options the plan decides; refused by name (long forms, and the short letters below)
REFUSED_LONG = ("--ntasks", "--nodes", "--ntasks-per-node", "--distribution", "--nodelist", "--gpu-bind")
REFUSED_SHORT = {"n": "-n/--ntasks", "N": "-N/--nodes", "m": "-m/--distribution", "w": "-w/--nodelist"}
#: srun short options that take no value (others take one: the rest of the token or the next token)
_SHORT_FLAGS = frozenset("hHlOQsuvVXZE")
# an optional value, attached only: -I[secs] --immediate, -k[off] --no-kill, -K[0|1] --kill-on-bad-exit
_SHORT_OPTIONAL = frozenset("IkK")
#: srun environment inputs that would contradict the plan; removed from srun's environment
UNSET_ENV = ("SLURM_NTASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_GPU_BIND", "SLURM_HOSTFILE")
#: the job's GPU request as srun reads it from the environment: removed when the plan gives the step its own
#: ``--gpus=N`` (a per-task request would also bind each task to its own GPUs, away from its TP peers);
#: ``SLURM_TRES_PER_TASK`` and ``SLURM_TRES_BIND`` lose only their GPU entries (:func:`without_gpu_tres`)
STEP_GPU_ENV = (
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_TRES_PER_TASK",
    "SLURM_TRES_BIND",
)
_TRES_LISTS = ("SLURM_TRES_PER_TASK", "SLURM_TRES_BIND")


def without_gpu_tres(environ: Mapping[str, str], unset: Sequence[str]) -> dict[str, str]:
    """``environ`` less ``unset``; of the TRES lists in ``unset`` (``SLURM_TRES_PER_TASK=cpu=4,gres/gpu=1``)
    only the GPU entries go (``cpu=4`` stays: 23.11+ srun reads --cpus-per-task from it)."""
    out = {k: v for k, v in environ.items() if k not in unset}
    for key in _TRES_LISTS:
        if key in unset and environ.get(key):
            keep = [e for e in environ[key].split(",") if not e.startswith(("gres/gpu", "gres:gpu", "gpu"))]
            if keep:
                out[key] = ",".join(keep)
    return out


def check_srun_options(options: Sequence[str]) -> None:
    """Refuse srun options the plan decides (``-n -N -m -w --ntasks --nodes --ntasks-per-node --distribution
    --nodelist --gpu-bind``), by name."""
    skip = False
    for tok in options:
        if skip:
            skip = False
            continue
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            meant = [r for r in REFUSED_LONG if r.startswith(name)] if len(name) > 2 else []
            if meant:  # srun, as getopt_long, takes an unambiguous abbreviation for the whole name
                which = name if name in REFUSED_LONG else f"{name} ({' or '.join(meant)})"
                raise InputError(
                    f"srun option {which} conflicts with the plan ({PROG} decides it): remove it"
                )
            continue
        if tok.startswith("-") and len(tok) > 1:
            for k, ch in enumerate(tok[1:], start=1):
                if ch in REFUSED_SHORT:
                    raise InputError(
                        f"srun option -{ch} ({REFUSED_SHORT[ch]}) conflicts with the plan ({PROG} "
                        "decides it): remove it"
                    )
                if ch in _SHORT_OPTIONAL:
                    break  # the rest of the token, if any, is its value; the next token is not
                if ch not in _SHORT_FLAGS:
                    skip = k == len(tok) - 1  # the value is the next token
                    break


def job_id(srun_options: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The job to plan for: srun's ``--jobid``, else ``SLURM_JOB_ID`` (``SLURM_JOBID``)."""
    for k, tok in enumerate(srun_options):
        if tok.startswith("--jobid="):
            return tok.split("=", 1)[1]
        if tok == "--jobid" and k + 1 < len(srun_options):
            return srun_options[k + 1]
    return environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
