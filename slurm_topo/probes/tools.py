"""What ``slurm-topo calibrate --probe nccl|perftest|auto`` runs on the compute nodes, inside its srun steps.

* ``slurm-topo probe tools`` (:func:`tools_task`): one task per node reports which measuring tools are on
  the node's ``PATH`` (nccl-tests ``all_reduce_perf``, perftest ``ib_write_bw``/``ib_write_lat``), the RDMA
  devices with an active port (``/sys/class/infiniband/DEV/ports/N/state`` = ``4: ACTIVE``, and each port's
  ``link_layer``) and the perftest version (``ib_write_bw --version``); calibrate's ``auto`` chooses from it.
* ``slurm-topo probe tool`` (:func:`tool_task`): runs one tool in each task of a step and prints one JSON
  line with the node slurmd ran it on (``SLURMD_NODENAME``) and everything the tool printed, so calibrate
  parses each task's output whole (never two tasks' lines interleaved) and checks where it ran. With
  ``serve`` (perftest), task 0 runs the server side and task 1 the client, the step's first node's address
  appended, retried until the server listens. ``gpus`` names GPUs by the node's own index (nvidia-smi's,
  the capture's): :func:`visible_devices` turns them into the ``CUDA_VISIBLE_DEVICES`` the step needs (the
  index among the step's GPUs where Slurm's device cgroup renumbers them).

The tools run through :mod:`slurm_topo.plumbing.runner` (``env`` sets the variables for the tool alone).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..core.errors import CommandError, InputError
from ..core.hostlist import expand
from ..plumbing.runner import Runner
from . import RECORD_KEY

MEASURING_TOOLS = ("all_reduce_perf", "sendrecv_perf", "ib_write_bw", "ib_write_lat")
"""The programs ``probe tools`` looks for on the node's PATH."""
SYS_INFINIBAND = Path("/sys/class/infiniband")
_VERSION = re.compile(r"\bversion\s*:?\s*([0-9][0-9A-Za-z._+-]{0,40})", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")


def rdma_devices(root: Path = SYS_INFINIBAND) -> list[dict[str, object]]:
    """The RDMA devices under ``root`` (``/sys/class/infiniband``) with at least one ``ACTIVE`` port:
    ``{"name", "ports": [{"port", "link_layer", "rate"}]}`` in name order (a name outside the label
    alphabet is skipped: it goes on an srun line)."""
    out: list[dict[str, object]] = []
    try:
        devices = sorted(p for p in root.iterdir() if _NAME.match(p.name))
    except OSError:
        return out
    for dev in devices:
        ports = []
        try:
            port_dirs = sorted((dev / "ports").iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        for port in port_dirs:
            state = _read(port / "state")
            if state is None or "ACTIVE" not in state.upper():
                continue
            ports.append(
                {"port": port.name, "link_layer": _read(port / "link_layer"), "rate": _read(port / "rate")}
            )
        if ports:
            out.append({"name": dev.name, "ports": ports})
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()[:80]
    except OSError:
        return None


def tool_version(runner: Runner, program: str) -> str | None:
    """``program --version``'s version number (perftest prints ``Version: 6.22``), or None."""
    try:
        text = runner.run([program, "--version"], timeout=10)
    except CommandError as exc:  # some builds print it on stderr and exit non-zero
        text = exc.stderr
    m = _VERSION.search(text)
    return m.group(1) if m else None


def tools_task(
    env: Mapping[str, str],
    runner: Runner,
    *,
    which: Callable[[str], str | None] = shutil.which,
    root: Path = SYS_INFINIBAND,
) -> str:
    """This node's measuring tools, as one JSON line."""
    paths = {tool: which(tool) for tool in MEASURING_TOOLS}
    record: dict[str, object] = {
        RECORD_KEY: "tools",
        "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
        "paths": {k: v for k, v in paths.items() if v},
        "rdma": rdma_devices(root),
    }
    if paths.get("ib_write_bw"):
        record["perftest_version"] = tool_version(runner, "ib_write_bw")
    return json.dumps(record, sort_keys=True)


def _indices(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} {text[:60]!r}: expected GPU indices such as 0,1") from None
    if not out or any(i < 0 for i in out):
        raise InputError(f"{what} {text[:60]!r}: expected GPU indices such as 0,1")
    return out


def visible_devices(env: Mapping[str, str], gpus: Sequence[int]) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the node's GPUs ``gpus`` inside this step. Slurm names the step's GPUs by
    the node's index in ``SLURM_STEP_GPUS`` (or ``SLURM_JOB_GPUS``) and sets ``CUDA_VISIBLE_DEVICES`` to the
    same list, or, where the device cgroup renumbers them, to ``0..n-1``: a GPU is its position's entry.
    Without either, the node's own index. Raises :class:`InputError` for a GPU the step was not given."""
    given = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if not given or visible is None:
        return ",".join(str(g) for g in gpus)
    allocated = _indices(given, "SLURM_STEP_GPUS")
    shown = [x.strip() for x in visible.split(",")]
    if len(shown) != len(allocated):
        raise InputError(
            f"probe tool: CUDA_VISIBLE_DEVICES {visible[:60]!r} does not list the step's GPUs {given[:60]!r}"
        )
    missing = [g for g in gpus if g not in allocated]
    if missing:
        raise InputError(
            f"probe tool: GPU {missing[0]} is not among this step's GPUs ({given[:60]}): allocate the node's "
            "GPUs (salloc --gres=gpu:N, or --exclusive)"
        )
    return ",".join(shown[allocated.index(g)] for g in gpus)


def parse_gpus(items: Sequence[str]) -> dict[str, list[int]]:
    """``NODE=0,1`` items (``--gpus``) -> node -> GPU indices."""
    out: dict[str, list[int]] = {}
    for item in items:
        node, sep, gpus = item.partition("=")
        if not sep or not node:
            raise InputError(f"--gpus: {item[:60]!r} is not NODE=INDEX[,INDEX…]")
        out[node] = _indices(gpus, "--gpus")
    return out


def parse_variables(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` items (``--env``) -> a mapping."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.match(r"^[A-Z_][A-Z0-9_]{0,63}\Z", name) or len(item) > 300:
            raise InputError(f"--env: {item[:60]!r} is not NAME=VALUE")
        out[name] = value
    return out


def tool_task(
    env: Mapping[str, str],
    runner: Runner,
    argv: Sequence[str],
    *,
    gpus: Mapping[str, Sequence[int]] | None = None,
    variables: Mapping[str, str] | None = None,
    serve: bool = False,
    addresses: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Run ``argv`` as this task's side and report it (see the module docstring)."""
    if not argv:
        raise InputError("probe tool: give the tool's command after --")
    try:
        rank = int(env["SLURM_PROCID"])
        step_nodes = expand(env["SLURM_STEP_NODELIST"])
    except (KeyError, ValueError):
        raise InputError(
            "probe tool: run it in an srun step (SLURM_PROCID and SLURM_STEP_NODELIST unset); "
            "slurm-topo calibrate starts it"
        ) from None
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    setting = dict(variables or {})
    for key in setting:
        if not re.match(r"^[A-Z_][A-Z0-9_]{0,63}\Z", key):
            raise InputError(f"probe tool: {key[:40]!r} is not an environment variable name")
    mine = (gpus or {}).get(node)
    if mine is not None:
        setting["CUDA_VISIBLE_DEVICES"] = visible_devices(env, mine)
    command = list(argv)
    role = "run"
    if serve:
        if rank > 1:
            raise InputError(f"probe tool: task {rank}: a served tool's step has two tasks")
        role = "serve" if rank == 0 else "connect"
        if rank == 1:
            command.append((addresses or {}).get(step_nodes[0], step_nodes[0]))
    full = (["env", *(f"{k}={v}" for k, v in sorted(setting.items()))] if setting else []) + command
    try:
        if role == "connect":
            output = _connect(runner, full, timeout, clock, sleep)
        else:
            output = runner.run(full, timeout=timeout)
    except CommandError as exc:  # named by the tool, not by env(1) in front of it
        raise CommandError(command, exc.returncode, exc.stderr, timeout=exc.timeout) from None
    record = {
        RECORD_KEY: "tool",
        "node": node,
        "rank": rank,
        "role": role,
        "argv": command,
        **({"cuda_visible_devices": setting["CUDA_VISIBLE_DEVICES"]} if mine is not None else {}),
        "output": output,
    }
    return json.dumps(record, sort_keys=True)


def _connect(
    runner: Runner,
    argv: list[str],
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> str:
    """A perftest client: tried again until the server listens (it refuses the connection until then), up
    to ``timeout`` seconds in all."""
    deadline = clock() + timeout
    while True:
        left = deadline - clock()
        try:
            return runner.run(argv, timeout=max(left, 1.0))
        except CommandError as exc:
            if exc.returncode is None or clock() + 1.0 >= deadline:
                raise
        sleep(1.0)
