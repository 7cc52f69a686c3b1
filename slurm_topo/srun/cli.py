"""The command line of ``gpulayer-srun``: ask Slurm about the allocation, plan, print, exec srun.

``gpulayer-srun [OPTIONS] [SRUN OPTIONS] -- COMMAND…`` reads the allocation (``scontrol show job -d``),
each node's GPU links (the ``Links=`` of the gres.conf next to slurm.conf, or ``--topology`` a
``nvidia-smi topo -m`` capture) and each node's place in the switch tree (``scontrol show topology``),
computes one plan (:mod:`slurm_topo.srun.plan`) and ``exec``s the real ``srun`` with ``-m arbitrary`` and
``SLURM_HOSTFILE`` (one line per rank, a private in-memory file: :func:`private_hostfile`): from then on the
process is srun, with srun's signals and exit status. Every task goes through
:mod:`slurm_topo.plumbing.srun_shim`.

Errors leave through :func:`slurm_topo.plumbing.entry.run_entry`: ``gpulayer-srun: error: …`` and the one
exit-code table.
``CUDA_VISIBLE_DEVICES`` holds local indices when ``TaskPlugin`` includes ``task/cgroup`` and cgroup.conf has
``ConstrainDevices=yes``; ``--local-indices`` / ``--global-indices`` override the detection.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from ..access import SlurmAccess
from ..access import argv as slurm_argv
from ..access.text import (
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_show_config,
)
from ..core import hostlist
from ..core.allocation import SwitchTree
from ..core.errors import CommandError, HostlistError, InputError, OutputError, UsageError
from ..gpu.gpu_topology import GpuTopology
from ..gpu.nvidia_smi import parse_topo_matrix
from ..plumbing import version
from ..plumbing.entry import read_input, run_entry
from ..plumbing.runner import Runner, SubprocessRunner
from ..slurmconfig.slurmconf import devices_constrained, parse_gres_links
from .options import PROG, check_srun_options, job_id, without_gpu_tres
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
        usage=f"{PROG} --tp N [--pp N] [--dp N] [--cp N] [--ep N] [OPTIONS] [SRUN OPTIONS] -- COMMAND...",
        description="Run COMMAND with one Slurm task per rank, ranks ordered by TP/CP/EP/DP/PP over the "
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
        "--dp",
        type=_positive,
        default=None,
        help="data-parallel size (default: task count / (tp × cp × pp))",
    )
    p.add_argument(
        "--cp", type=_positive, default=1, help="context-parallel size (default 1; a factor of the world)"
    )
    p.add_argument(
        "--ep",
        type=_positive,
        default=1,
        help="expert-parallel size (default 1): divides cp × dp, as Megatron-LM forms expert groups; "
        "each group inside one NVLink island or domain when one holds it",
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
    tasks_per_node = _tasks_per_node(job, environ, alloc.nodes)
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
        domains=domains,
        tasks_per_node=tasks_per_node,
        cp=args.cp,
        ep=args.ep,
    )
    return plan, args


MAX_TASK_NODES = 1 << 18
"""As many nodes as any Slurm holds (262 144): a longer ``SLURM_TASKS_PER_NODE`` is malformed, unexpanded."""


def parse_tasks_per_node(text: str) -> list[int] | None:
    """``SLURM_TASKS_PER_NODE`` (``15,1``, ``8(x2)``, ``2(x3),1``) -> a count per node; None if malformed or
    longer than :data:`MAX_TASK_NODES` nodes (counted before anything is expanded)."""
    runs: list[tuple[int, int]] = []
    for part in text.split(","):
        count, paren, times = part.partition("(x")
        if not count.isdigit() or (paren and not (times.endswith(")") and times[:-1].isdigit())):
            return None
        runs.append((int(count), int(times[:-1]) if times else 1))
    if sum(n for _, n in runs) > MAX_TASK_NODES:
        return None
    return [count for count, n in runs for _ in range(n)]


def _tasks_per_node(job: str, environ: Mapping[str, str], nodes: Sequence[str]) -> dict[str, int] | None:
    """Slurm's tasks per node for ``job``: ``SLURM_TASKS_PER_NODE`` over ``SLURM_JOB_NODELIST``, as salloc and
    sbatch set them (the counts a step gets by default: ``--ntasks-per-node``, ``-n`` spread by Slurm, or
    the CPUs of each node when no task count was asked). None when the environment is not that job's
    allocation (``--jobid`` of another job, or inside a step, whose ``SLURM_TASKS_PER_NODE`` is the step's)
    or does not cover its nodes."""
    if (environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")) != job or _in_step(environ):
        return None
    counts = parse_tasks_per_node(environ.get("SLURM_TASKS_PER_NODE", ""))
    try:
        names = hostlist.expand(environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or "")
    except HostlistError:
        return None
    if not counts or len(counts) != len(names) or set(names) != set(nodes):
        return None
    return dict(zip(names, counts, strict=True))


def _in_step(environ: Mapping[str, str]) -> bool:
    """Inside a job step (``srun … gpulayer-srun``): a ``SLURM_STEP_ID`` of a real step, not of the batch
    script (26.05 sets ``-5`` there, older releases 4294967294) or another special step."""
    text = environ.get("SLURM_STEP_ID", "").strip()
    try:
        step = int(text)
    except ValueError:
        return False
    return 0 <= step < 0xFFFFFFF0


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


def private_hostfile(lines: Sequence[str], environ: Mapping[str, str], *, memory: bool = True) -> str:
    """The ``SLURM_HOSTFILE`` srun is about to read, private to this process and gone when srun ends.

    Linux: an anonymous in-memory file (``memfd_create``) left open across the ``exec``, named
    ``/proc/self/fd/N`` (srun opens it as a file on 22.05, 24.11 and 26.05): no name in any directory that
    another user could take first, nothing to remove, closed by the kernel when srun exits. Elsewhere (or
    ``memory=False``): a ``mkstemp`` file in a fresh ``mkdtemp`` directory (mode 0700, random name) under
    ``$XDG_RUNTIME_DIR``, ``$TMPDIR`` or /tmp, removed with its directory by a detached watcher once this
    process (srun after the ``exec``) has exited (:func:`_remove_after`)."""
    text = ("\n".join(lines) + "\n").encode()
    if memory and hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        try:
            fd = os.memfd_create("gpulayer-srun-hosts", 0)
            os.write(fd, text)
            os.set_inheritable(fd, True)
            return f"/proc/self/fd/{fd}"
        except OSError:
            pass
    bases = [environ.get("XDG_RUNTIME_DIR"), environ.get("TMPDIR"), "/tmp"]
    last: OSError | None = None
    for base in filter(None, bases):
        try:
            folder = tempfile.mkdtemp(prefix="gpulayer-srun-", dir=base)
        except OSError as exc:
            last = exc
            continue
        try:
            fd, path = tempfile.mkstemp(prefix="hosts-", dir=folder)
            with os.fdopen(fd, "wb") as f:
                f.write(text)
        except OSError as exc:
            _remove([folder])
            raise OutputError(f"cannot write the SLURM_HOSTFILE in {folder}: {exc.strerror or exc}") from None
        _remove_after(os.getpid(), [path, folder])
        return path
    raise OutputError(
        f"cannot make a private directory for the SLURM_HOSTFILE in {', '.join(filter(None, bases))}: "
        f"{(last.strerror if last else None) or last}"
    )


def _remove(paths: Sequence[str]) -> None:
    for p in paths:
        try:
            os.rmdir(p) if os.path.isdir(p) else os.unlink(p)
        except OSError:
            pass


def _remove_after(pid: int, paths: Sequence[str]) -> None:
    """Fork a detached watcher (double fork, own session, stdio on /dev/null, deaf to the terminal's and the
    job's signals) that removes ``paths`` once process ``pid`` has exited: ``pid`` keeps running as srun
    after the ``exec`` with srun's own signals and exit status, so the cleanup cannot be done in it."""
    try:
        pidfd: int | None = os.pidfd_open(pid)  # before the fork: no race with a quick exit
    except (AttributeError, OSError):
        pidfd = None
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        if pidfd is not None:
            os.close(pidfd)
        return
    try:  # the watcher: never returns into the caller's code
        os.setsid()
        if os.fork():
            os._exit(0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except OSError:
                    pass
                time.sleep(0.5)
        _remove(paths)
    finally:
        os._exit(0)


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
    env = without_gpu_tres(environ, plan.unset_env)
    env.update(plan.env)
    env["SLURM_HOSTFILE"] = private_hostfile(plan.hostfile_lines, environ)
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
