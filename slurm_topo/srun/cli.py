"""The command line of ``gpulayer-srun``: ask Slurm about the allocation, plan, print, exec srun.

``gpulayer-srun [OPTIONS] [SRUN OPTIONS] -- COMMAND…`` reads the allocation (``scontrol show job -d``),
each node's GPU links (the ``Links=`` of the gres.conf next to slurm.conf, or ``--topology`` a
``nvidia-smi topo -m`` capture) and each node's place in the switch tree (``scontrol show topology``),
computes one plan (:mod:`slurm_topo.srun.plan`) and ``exec``s the real ``srun`` with ``-m arbitrary`` and
``SLURM_HOSTFILE`` (one line per rank): from then on the process is srun, with srun's signals and exit
status. Every task goes through :mod:`slurm_topo.srun_shim`.

Errors leave through :func:`slurm_topo.entry.run_entry`: ``gpulayer-srun: error: …`` and the one exit-code
table.
``CUDA_VISIBLE_DEVICES`` holds local indices when ``TaskPlugin`` includes ``task/cgroup`` and cgroup.conf has
``ConstrainDevices=yes``; ``--local-indices`` / ``--global-indices`` override the detection.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from .. import hostlist, version
from ..access import SlurmAccess
from ..access import argv as slurm_argv
from ..access.text import (
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_show_config,
)
from ..allocation import SwitchTree
from ..entry import read_input, run_entry
from ..errors import CommandError, InputError, OutputError, UsageError
from ..gpu.gpu_topology import GpuTopology
from ..gpu.nvidia_smi import parse_topo_matrix
from ..runner import Runner, SubprocessRunner
from ..slurmconf import devices_constrained, parse_gres_links
from .options import PROG, check_srun_options, job_id
from .plan import DEFAULT_ORDER, Plan, format_plan, plan_srun


def _slurm_version(text: str) -> tuple[int, int] | None:
    try:
        return version.parse_slurm_version(text)
    except InputError:
        return None


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing and exiting (``run_entry`` reports it)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{PROG} --help')")


def _positive(text: str) -> int:
    """A size: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        allow_abbrev=False,
        usage=f"{PROG} --tp N [--pp N] [--dp N] [OPTIONS] [SRUN OPTIONS] -- COMMAND...",
        description="Run COMMAND with one Slurm task per rank, ranks ordered by TP/PP/DP over the "
        "allocation's "
        "NVLink islands and switch tree. Unknown options are passed to srun untouched.",
    )
    p.add_argument(
        "--tp", type=_positive, required=True, help="tensor-parallel size (one node, one NVLink island)"
    )
    p.add_argument(
        "--pp", type=_positive, default=1, help="pipeline-parallel size (stages inside one leaf if possible)"
    )
    p.add_argument(
        "--dp", type=_positive, default=None, help="data-parallel size (default: task count / (tp × pp))"
    )
    p.add_argument("--gpus-per-task", type=_positive, default=1, help="GPUs per rank (default 1)")
    p.add_argument(
        "--order",
        default=DEFAULT_ORDER,
        help=f"rank order, fastest dimension first (default Megatron's {DEFAULT_ORDER}; or tp-pp-dp)",
    )
    p.add_argument("--topology", metavar="FILE", help="a `nvidia-smi topo -m` capture used for every node")
    idx = p.add_mutually_exclusive_group()
    idx.add_argument(
        "--local-indices",
        dest="local",
        action="store_const",
        const=True,
        default=None,
        help="CUDA_VISIBLE_DEVICES in local indices (device cgroup constrained)",
    )
    idx.add_argument(
        "--global-indices",
        dest="local",
        action="store_const",
        const=False,
        help="CUDA_VISIBLE_DEVICES in global indices (no device cgroup)",
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    mode.add_argument("--explain", action="store_true", help="print the plan, then run")
    return p


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        raise UsageError("no command: put it after -- (gpulayer-srun --tp 4 -- python train.py)")
    i = list(argv).index("--")
    return list(argv[:i]), list(argv[i + 1 :])


def _link_data(
    topology: str | None, nodes: Sequence[str], conf_dir: Path
) -> tuple[dict[str, GpuTopology], str]:
    """Per node, its GPU links (``--topology`` for all, else gres.conf's ``Links=``), and where they came from
    (named in the warning for nodes without any)."""
    if topology:
        topo = parse_topo_matrix(read_input(topology, what="--topology"), source=topology)
        return dict.fromkeys(nodes, topo), f"--topology {topology}"
    gres = conf_dir / "gres.conf"
    try:
        text = gres.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}, f"no {gres}; no --topology"
    return parse_gres_links(text, source=str(gres)), f"no Links= in {gres}; no --topology"


def _local_indices(given: bool | None, config: Mapping[str, str], conf_dir: Path) -> bool:
    """``--local-indices``/``--global-indices``, else whether the device cgroup is constrained."""
    if given is not None:
        return given
    try:
        cgroup: str | None = (conf_dir / "cgroup.conf").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        cgroup = None
    return devices_constrained(config, cgroup)


def build_plan(
    argv: Sequence[str], environ: Mapping[str, str], runner: Runner, python: str = sys.executable
) -> tuple[Plan, argparse.Namespace]:
    """Parse the command line, ask Slurm about the allocation, and plan (no side effects beyond the
    queries)."""
    ours, command = split_argv(argv)
    args, srun_options = _parser().parse_known_args(ours)
    if not command:
        raise UsageError("no command after --")
    check_srun_options(srun_options)
    job = job_id(srun_options, environ)
    if not job:
        raise InputError(
            "not inside a Slurm allocation (SLURM_JOB_ID is not set): run it in an sbatch script or "
            "under salloc"
        )
    alloc = SlurmAccess(runner).allocation(job)  # squeue --json: no job field can pass for its node list
    config = parse_show_config(runner.run(slurm_argv.show_config()))
    conf_dir = Path(config.get("SLURM_CONF") or environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf").parent
    topologies, link_source = _link_data(args.topology, alloc.nodes, conf_dir)
    try:
        tree = parse_scontrol_topology(runner.run(slurm_argv.show_topology()))
    except CommandError:
        tree = SwitchTree()
    domains = _domains(runner, alloc.nodes)
    ntasks_text = environ.get("SLURM_NTASKS") or environ.get("SLURM_NPROCS")
    plan = plan_srun(
        alloc,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        gpus_per_task=args.gpus_per_task,
        order=args.order,
        topologies=topologies,
        tree=tree,
        local_indices=_local_indices(args.local, config, conf_dir),
        ntasks=int(ntasks_text) if ntasks_text and ntasks_text.isdigit() else None,
        slurm_version=_slurm_version(config.get("SLURM_VERSION", "")),
        srun_options=srun_options,
        command=command,
        python=python,
        link_source=link_source,
        tmpdir=environ.get("TMPDIR") or "/tmp",
        domains=domains,
    )
    return plan, args


def _domains(runner: Runner, nodes: Sequence[str]) -> dict[str, str]:
    """Each node's NVLink domain: its ``nvl_<domain>`` feature (slurm-topo writes one on every release), from
    ``scontrol show node -o``; none when Slurm does not answer."""
    if not nodes:
        return {}
    try:
        rows = parse_scontrol_nodes(runner.run(slurm_argv.show_nodes(hostlist.compress(nodes))))
    except (CommandError, InputError):
        return {}
    out = {}
    for row in rows:
        feats = (row.get("ActiveFeatures") or row.get("AvailableFeatures") or "").split(",")
        nvl = next((f for f in feats if f.startswith("nvl_")), None)
        if nvl and row.get("NodeName") in nodes:
            out[row["NodeName"]] = nvl
    return out


def write_hostfile(plan: Plan) -> None:
    """Write SLURM_HOSTFILE atomically (its name carries the job id and a hash of its content, so a re-run of
    the same plan reuses one file)."""
    path = Path(plan.hostfile)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text("\n".join(plan.hostfile_lines) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"cannot write {plan.hostfile}: {exc.strerror or exc}") from None


def run(argv: Sequence[str], environ: Mapping[str, str], runner: Runner) -> None:
    """Plan, print (--dry-run/--explain), write the hostfile and exec srun; errors are raised, not
    printed."""
    ours = argv[: list(argv).index("--")] if "--" in argv else argv
    if "-h" in ours or "--help" in ours:
        _parser().print_help()
        return
    if "--version" in ours:
        sys.stdout.write(f"{PROG} (slurm-topo) {version.__version__}\n")
        return
    plan, args = build_plan(argv, environ, runner)
    for w in plan.warnings:
        sys.stderr.write(f"{PROG}: {w}\n")
    if args.dry_run or args.explain:
        sys.stdout.write(format_plan(plan))
        sys.stdout.flush()
    if args.dry_run:
        return
    write_hostfile(plan)
    env = {k: v for k, v in environ.items() if k not in plan.unset_env}
    env.update(plan.env)
    sys.stderr.flush()
    try:
        # From here on the process is srun: its signals and its exit status are srun's own.
        os.execvpe(plan.argv[0], list(plan.argv), env)
    except OSError as exc:
        raise CommandError(plan.argv[:1], None, exc.strerror or str(exc)) from None


def main(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None, runner: Runner | None = None
) -> None:
    """``gpulayer-srun``: exits through ``run_entry`` (``gpulayer-srun: error: …``, one exit-code table)."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    run_entry(PROG, lambda: run(args, env, runner or SubprocessRunner()))


if __name__ == "__main__":
    main()
