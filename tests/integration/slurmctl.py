"""Small typed helpers for integration tests against the real Slurm test cluster (docker-slurm/cluster).

Every client call runs under a timeout (pitfall 14: a broken step can hang srun/sbatch for minutes), and
every answer is Slurm's own words: ``scontrol show job -d``, ``scontrol show topology``, ``sinfo``.
A :class:`Slurm` is bound to one cluster through ``SLURM_CONF`` in its environment, so two clusters can be
driven from one test session. A cluster of another Slurm release (``cluster up --slurm 24.11``) also puts
its ``<base>/clients`` first on that environment's ``PATH``: wrappers that run the release's own clients
inside its root (``cluster.json``'s ``client_prefix``), so ``timeout 30 srun ...`` and every program that
calls ``sbatch``/``scontrol`` with the cluster's environment talk to it with a matching client.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "docker-slurm" / "cluster"

NO_ROOM_YET = ("Resources", "Priority")
"""The Reason of a pending job with ``--prefer`` (every job the filter gives a required level) that the
scheduler tried and could not start. Such a job has two queue records, prefer first, then its constraint
(docs/slurm-facts.md). When the prefer record finds no room, the main scheduler counts the partition as
failed for the rest of its pass (job_scheduler.c), so the constraint record that follows gets ``Priority``;
a backfill pass says ``Resources``. Which one a poll sees is a race between the two (Slurm 24.11 in CI:
``Priority``, with no other job pending). Either is set only by a scheduling attempt: a new job's Reason is
None."""

#: job states after which a job never runs again
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)


class SlurmCommandError(AssertionError):
    """A Slurm client command failed or timed out; the message carries its argv and output."""


@dataclass(frozen=True)
class Allocation:
    """What Slurm allocated to a job, read from ``scontrol show job -d``."""

    job_id: str
    nodes: tuple[str, ...]
    #: GPU indices per node, from ``GRES=gpu:h100:2(IDX:0-1)``; nodes without GPUs are absent
    gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: CPU_IDs per node as Slurm prints them (``0-15``)
    cpu_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Switch:
    """One line of ``scontrol show topology`` (or of topology.conf), with hostlists expanded."""

    name: str
    nodes: frozenset[str]
    switches: frozenset[str]
    level: int | None = None


def expand_index_list(text: str) -> tuple[int, ...]:
    """``0-1,4`` -> (0, 1, 4)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


BENIGN_ERRORS = (
    # slurmctld's own start on a fresh test cluster, not the tests' doing: no PMIx library on the host,
    # and the first state save of an empty StateSaveLocation
    re.compile(r"mpi/pmix|pmi/pmix|Cannot create context for mpi/"),
    re.compile(r"Could not open (?:job|node|reservation|trigger|resv|assoc|qos|fed_mgr)\w* state file"),
    re.compile(r"NOTE: Trying backup state save file"),
    re.compile(r"No (?:job|node|reservation|trigger)\w* state file"),
)
"""``error:`` lines of slurmctld.log that say nothing about what a test did; every other one is a finding."""


def log_errors(text: str) -> list[str]:
    """The ``error:`` lines of a slurmctld log excerpt, less :data:`BENIGN_ERRORS`."""
    return [
        line
        for line in text.splitlines()
        if "error:" in line and not any(rx.search(line) for rx in BENIGN_ERRORS)
    ]


def parse_kv_line(line: str) -> dict[str, str]:
    """``Key=Value Key2=Value2`` tokens of one Slurm config/scontrol line."""
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


class Slurm:
    """Client commands for one cluster (``env`` must carry its ``SLURM_CONF``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    # ---- plumbing
    def run(
        self, argv: Sequence[str], timeout: float = 20, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a client command under ``timeout`` seconds (the process is killed after that)."""
        argv = list(argv)
        try:
            p = subprocess.run(
                argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as e:
            raise SlurmCommandError(
                f"{argv} timed out after {timeout}s; output so far: {e.stdout!r} {e.stderr!r}"
            ) from e
        if check and p.returncode != 0:
            raise SlurmCommandError(f"{argv} exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
        return p

    def out(self, *argv: str, timeout: float = 20) -> str:
        """A command's output. A query (scontrol show, squeue, sinfo, sacct) whose client died of a signal
        with nothing said (seen once under load: scontrol -13, SIGPIPE, on 24.11) is asked once more; it
        changes nothing, so asking again cannot hide what Slurm did."""
        query = argv[0] in ("squeue", "sinfo", "sacct") or argv[:2] == ("scontrol", "show")
        p = self.run(argv, timeout=timeout, check=not query)
        if query and p.returncode < 0 and not p.stdout.strip():
            p = self.run(argv, timeout=timeout, check=False)
        if p.returncode != 0:
            raise SlurmCommandError(
                f"{list(argv)} exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}"
            )
        return p.stdout

    def daemon(self, name: str) -> list[str]:
        """argv that runs this cluster's own ``slurmd``/``slurmctld`` binary (e.g. for ``slurmd -G``): the
        launcher's ``<base>/bin/<name>`` link, inside the release's root for a ``--slurm X.Y`` cluster."""
        base = Path(self.env["SLURM_CONF"]).parent.parent
        try:
            prefix = json.loads((base / "cluster.json").read_text()).get("client_prefix") or []
        except (OSError, ValueError):
            prefix = []
        return [*prefix, str(base / "bin" / name)]

    def hostnames(self, hostlist: str) -> tuple[str, ...]:
        """Slurm's own expansion of a hostlist expression (``scontrol show hostnames``)."""
        if not hostlist or hostlist == "(null)":
            return ()
        return tuple(self.out("scontrol", "show", "hostnames", hostlist).split())

    # ---- jobs
    def submit(self, *sbatch_args: str, timeout: float = 20) -> str:
        """``sbatch --parsable`` under a timeout (output to /dev/null unless ``-o`` is given); the job id."""
        args = list(sbatch_args)
        if not any(a in ("-o", "--output") or a.startswith("--output=") for a in args):
            args = ["-o", "/dev/null", *args]
        out = self.run(
            ["timeout", str(int(timeout)), "sbatch", "--parsable", *args], timeout=timeout + 5
        ).stdout
        return out.strip().split(";")[0]

    def as_user(
        self, *argv: str, timeout: int = 20, user: str = "nobody"
    ) -> subprocess.CompletedProcess[str]:
        """A client command run as an unprivileged ``user`` (the owner of its jobs; ``nobody`` by default),
        with this cluster's SLURM_CONF and clients, under ``timeout`` seconds; never raises on its exit."""
        return self.run(
            [
                "runuser",
                "-u",
                user,
                "--",
                "env",
                f"PATH={self.env.get('PATH', '/usr/bin:/bin')}",
                f"SLURM_CONF={self.env['SLURM_CONF']}",
                "timeout",
                str(timeout),
                *argv,
            ],
            timeout=timeout + 5,
            check=False,
        )

    def submit_error(self, *sbatch_args: str, timeout: float = 20) -> str:
        """Submit a job that Slurm must reject; returns sbatch's error output."""
        p = self.run(
            ["timeout", str(int(timeout)), "sbatch", "-o", "/dev/null", *sbatch_args],
            timeout=timeout + 5,
            check=False,
        )
        if p.returncode == 0:
            raise SlurmCommandError(
                f"sbatch {sbatch_args} was accepted (job {p.stdout.strip()}), expected a rejection"
            )
        return p.stderr

    def job(self, job_id: str) -> dict[str, str]:
        """Slurm's record of the job through slurm_topo.access (``squeue --json``: no field of the job's own
        can pass for another), in scontrol's vocabulary; {} once the job is gone."""
        from slurm_topo.access import SlurmAccess
        from slurm_topo.core.errors import CommandError

        try:
            return SlurmAccess(EnvRunner(self.env)).job(job_id, timeout=30) or {}
        except CommandError:
            return {}

    def state(self, job_id: str) -> str:
        return self.job(job_id).get("JobState", "")

    def wait_state(
        self, job_id: str, state: str, timeout: float = 20, reason: str | tuple[str, ...] | None = None
    ) -> dict[str, str]:
        """Poll at 10 Hz (pitfall 13) until the job is in ``state`` (and ``Reason`` is ``reason``, or one of
        them); return it."""
        end = time.monotonic() + timeout
        info: dict[str, str] = {}
        reasons = (reason,) if isinstance(reason, str) else reason
        while True:
            info = self.job(job_id)
            got = info.get("JobState", "")
            if got == state and (reasons is None or info.get("Reason") in reasons):
                return info
            if got in TERMINAL_STATES and got != state:
                break
            if time.monotonic() > end:
                break
            time.sleep(0.1)
        raise AssertionError(
            f"job {job_id}: wanted {state}{f' ({reason})' if reason else ''} within {timeout}s, "
            f"got {info.get('JobState')} Reason={info.get('Reason')} NodeList={info.get('NodeList')}"
        )

    def allocation_of(self, job_id: str) -> Allocation:
        """Nodes, per-node GPU indices and CPU ids of a job, from ``scontrol show job -d``.

        The detail lines look like ``Nodes=n[01-03] CPU_IDs=0-15 Mem=0 GRES=gpu:h100:8(IDX:0-7)``.
        """
        text = self.out("scontrol", "show", "job", "-d", job_id)
        nodes = self.hostnames(
            self.job(job_id).get("NodeList", "")
        )  # not from the text: a Comment can say NodeList=
        gpus: dict[str, tuple[int, ...]] = {}
        cpus: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("Nodes="):
                continue
            kv = parse_kv_line(line)
            idx: tuple[int, ...] = ()
            for m in re.finditer(r"gpu[^,(\s]*\(IDX:([0-9,-]*)\)", kv.get("GRES", "")):
                idx += expand_index_list(m.group(1))
            for node in self.hostnames(kv["Nodes"]):
                cpus[node] = kv.get("CPU_IDs", "")
                if idx:
                    gpus[node] = idx
        return Allocation(job_id=job_id, nodes=nodes, gpus=gpus, cpu_ids=cpus)

    def cancel(self, *job_ids: str) -> None:
        if job_ids:
            self.run(["scancel", "--full", *job_ids], timeout=10, check=False)

    def quiesce(self, timeout: float = 30) -> None:
        """Cancel every job and wait until the queue is empty and every node is idle."""
        jobs = self.out("squeue", "-h", "-o", "%i").split()
        self.cancel(*jobs)
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            queue = self.out("squeue", "-h", "-o", "%i %T")
            states = self.node_states()
            if not queue.strip() and states and all(s == "idle" for s in states.values()):
                return
            last = f"queue={queue.strip()!r} nodes={states}"
            time.sleep(0.1)
        raise AssertionError(f"cluster did not quiesce within {timeout}s: {last}")

    # ---- nodes and topology
    def node_states(self) -> dict[str, str]:
        out = self.out("sinfo", "-h", "-N", "-o", "%N %T")
        return dict(line.split()[:2] for line in out.splitlines() if line.strip())

    def node_features(self, node: str) -> tuple[str, ...]:
        """A node's AvailableFeatures as Slurm reports them (``scontrol show node``)."""
        info = parse_kv_line(self.out("scontrol", "show", "node", "-o", node))
        feats = info.get("AvailableFeatures", "(null)")
        return () if feats == "(null)" else tuple(feats.split(","))

    def all_node_features(self) -> dict[str, tuple[str, ...]]:
        """Features of every node (``sinfo -N -o '%N %f'``)."""
        out = self.out("sinfo", "-h", "-N", "-o", "%N %f")
        res: dict[str, tuple[str, ...]] = {}
        for line in out.splitlines():
            name, _, feats = line.strip().partition(" ")
            res[name] = () if feats.strip() in ("", "(null)") else tuple(feats.strip().split(","))
        return res

    def topology(self) -> dict[str, Switch]:
        """``scontrol show topology`` with every hostlist expanded by Slurm."""
        return self.parse_switch_lines(self.out("scontrol", "show", "topology"))

    def parse_switch_lines(self, text: str) -> dict[str, Switch]:
        """``SwitchName=`` lines (topology.conf, ``scontrol show topology``), hostlists expanded by Slurm."""
        res: dict[str, Switch] = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line.startswith("SwitchName="):
                continue
            kv = parse_kv_line(line)
            res[kv["SwitchName"]] = Switch(
                name=kv["SwitchName"],
                nodes=frozenset(self.hostnames(kv.get("Nodes", ""))),
                switches=frozenset(self.hostnames(kv.get("Switches", ""))),
                level=int(kv["Level"]) if "Level" in kv else None,
            )
        return res

    def reconfigure(self, version: tuple[int, int], timeout: float = 30) -> None:
        """``scontrol reconfigure``, then wait until slurmctld answers and every node is back.

        From 23.11 reconfigure re-executes the daemons, so wait for them rather than assume it is instant.
        """
        self.run(["scontrol", "reconfigure"], timeout=timeout)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ping = self.run(["scontrol", "ping"], timeout=10, check=False).stdout
            if "UP" in ping:
                states = self.node_states()
                if states and all(s in ("idle", "mixed", "allocated") for s in states.values()):
                    return
            time.sleep(0.1 if version >= (23, 11) else 0.05)
        raise AssertionError(f"cluster not back within {timeout}s after reconfigure: {self.node_states()}")


SMALL_NODE = {
    "CPUs": 4,
    "Boards": 1,
    "SocketsPerBoard": 1,
    "CoresPerSocket": 4,
    "ThreadsPerCore": 1,
    "RealMemory": 4000,
}
"""The ``slurm:`` hardware of a small test node (one 4-core socket, 4 GB), for the inventories the test
modules write."""


class EnvRunner:
    """slurm_topo's Runner with a cluster's environment (its SLURM_CONF, its release's clients first on PATH)
    and a timeout on every call: what apply's tests hand to ``run_apply``."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        from slurm_topo.core.errors import CommandError

        self.calls.append(list(argv))
        try:
            p = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, env=self.env, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CommandError(argv, None, str(exc)) from None
        if p.returncode != 0:
            raise CommandError(argv, p.returncode, p.stderr)
        return p.stdout


def slurm_topo_cli() -> list[str]:
    """The ``slurm-topo`` command the tests (and the launcher) use: $SLURM_TOPO_BIN, the venv's, or PATH's."""
    if os.environ.get("SLURM_TOPO_BIN"):
        return [os.environ["SLURM_TOPO_BIN"]]
    for cand in (Path(sys.executable).parent / "slurm-topo", REPO / ".venv" / "bin" / "slurm-topo"):
        if cand.exists():
            return [str(cand)]
    found = shutil.which("slurm-topo")
    if not found:
        raise AssertionError("slurm-topo CLI not found (pip install -e .)")
    return [found]


# --------------------------------------------------------------------------------------------------
# clusters (driven through the launcher, docker-slurm/cluster)


@dataclass(frozen=True)
class Cluster:
    """A running test cluster: its directory, client environment, Slurm version and node names."""

    base: Path
    env: Mapping[str, str]
    version: tuple[int, int]
    nodes: tuple[str, ...]
    #: True when this session started it (and so stops it)
    owned: bool
    up_seconds: float | None = None
    #: ``native`` (the host's Slurm) or the Debian-root release it runs (``24.11``, ``26.05``)
    release: str = "native"
    #: argv prefix that runs a command inside the release's root (empty for native)
    client_prefix: tuple[str, ...] = ()

    @property
    def etc(self) -> Path:
        return self.base / "etc"

    @property
    def slurm(self) -> Slurm:
        return Slurm(self.env)


def client_env(base: Path) -> dict[str, str]:
    """The environment of the cluster's clients: its ``SLURM_CONF``, and for a root release its client
    wrappers first on ``PATH`` (from ``cluster.json``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k.startswith("SLURM_TOPO_")}
    env["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    try:
        clients = json.loads((base / "cluster.json").read_text()).get("client_path")
    except (OSError, ValueError):
        clients = None
    if clients:
        env["PATH"] = f"{clients}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def load_cluster(base: Path, owned: bool) -> Cluster:
    """The cluster recorded in ``<base>/cluster.json`` by ``cluster up``."""
    state = json.loads((base / "cluster.json").read_text())
    major, minor = (int(x) for x in state["slurm_version"].split(".")[:2])
    return Cluster(
        base=base,
        env=client_env(base),
        version=(major, minor),
        nodes=tuple(state["nodes"]),
        owned=owned,
        up_seconds=state.get("up_seconds"),
        release=state.get("slurm", "native"),
        client_prefix=tuple(state.get("client_prefix") or ()),
    )


def port_block_free(start: int, count: int) -> bool:
    for port in range(start, start + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


PORT_RANGE_ENV = "SLURM_TOPO_PORT_RANGE"
"""``LO-HI``: the loopback ports test and benchmark clusters may take (default 12000-32000). Kept apart from
Linux's ephemeral range (``net.ipv4.ip_local_port_range``), where client connections of a busy host take
ports at any moment."""


def port_range() -> tuple[int, int]:
    """The ports clusters may take: ``$SLURM_TOPO_PORT_RANGE`` or 12000-32000, less any overlap with the
    host's ephemeral range."""
    text = os.environ.get(PORT_RANGE_ENV, "12000-32000")
    try:
        lo, hi = (int(x) for x in text.split("-", 1))
    except ValueError:
        raise AssertionError(f"{PORT_RANGE_ENV}={text!r}: want LO-HI, e.g. 12000-32000") from None
    try:
        eph_lo, eph_hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        eph_lo, eph_hi = 32768, 60999
    if lo < eph_lo <= hi:
        hi = eph_lo - 1
    elif eph_lo <= lo <= eph_hi:
        lo = eph_hi + 1
    if not 1024 <= lo < hi <= 65535:
        raise AssertionError(f"{PORT_RANGE_ENV}={text!r}: no ports left outside the ephemeral range")
    return lo, hi


def free_port_block(count: int) -> int:
    """First port of ``count`` consecutive free loopback ports in :func:`port_range`."""
    lo, hi = port_range()
    rng = random.Random()
    for _ in range(200):
        start = rng.randrange(lo, max(lo + 1, hi - count))
        if port_block_free(start, count):
            return start
    raise AssertionError(f"no block of {count} free ports found in {lo}-{hi}")


def launcher(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run docker-slurm/cluster with this interpreter (it has PyYAML); never raises on a non-zero exit.

    ``up`` runs the Slurm of ``$SLURM_TOPO_SLURM`` unless ``--slurm`` is given (the version fixture sets it).
    """
    return subprocess.run(
        [sys.executable, str(LAUNCHER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def start_cluster(base: Path, *extra: str, nodes_max: int = 98) -> Cluster:
    """``cluster up`` on ``base`` with free ports; raises AssertionError with the launcher's output."""
    port0 = free_port_block(nodes_max + 1)
    p = launcher("up", "--base", str(base), "--ctld-port", str(port0), "--node-port0", str(port0), *extra)
    if p.returncode != 0:
        raise AssertionError(f"cluster up --base {base} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return load_cluster(base, owned=True)


def stop_cluster(base: Path) -> None:
    p = launcher("down", "--base", str(base), timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"cluster down --base {base} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")


def restart_ctld(base: Path) -> None:
    """``cluster restart-ctld``: stop and start the cluster's slurmctld, wait until every node is up again."""
    p = launcher("restart-ctld", "--base", str(base), timeout=90)
    if p.returncode != 0:
        raise AssertionError(
            f"cluster restart-ctld --base {base} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
        )


NODES_INCLUDE = "Include slurm-topo-nodes.conf\n"
"""The line of the launcher's slurm.conf that defines every node (the generator's file)."""
_NODES_BEGIN = "# node definitions written by slurmctl.define_nodes: begin\n"
_NODES_END = "# node definitions written by slurmctl.define_nodes: end\n"


def define_nodes(cluster: Cluster, lines: str, restart: bool = False) -> None:
    """Put ``lines`` (a site's own ``NodeName=`` lines, or :data:`NODES_INCLUDE` back) where the cluster's
    slurm.conf defines its nodes, then ``scontrol reconfigure`` and wait for every node (slurmd re-reads the
    file too). The node set must stay the same. ``restart``: restart slurmctld first, so that it reads every
    attribute afresh (22.05's reconfigure keeps a node's old ``MemSpecLimit``)."""
    conf = cluster.etc / "slurm.conf"
    text = conf.read_text()
    block = f"{_NODES_BEGIN}{lines.rstrip()}\n{_NODES_END}"
    if _NODES_BEGIN in text:
        start, end = text.index(_NODES_BEGIN), text.index(_NODES_END) + len(_NODES_END)
        text = text[:start] + block + text[end:]
    elif NODES_INCLUDE in text:
        text = text.replace(NODES_INCLUDE, block, 1)
    else:
        raise AssertionError(f"{conf}: no {NODES_INCLUDE.strip()!r} line to replace")
    conf.write_text(text)
    if restart:
        restart_ctld(cluster.base)
    cluster.slurm.reconfigure(cluster.version)


def cluster_pids(base: Path) -> list[int]:
    p = launcher("pids", "--base", str(base), timeout=30)
    return [int(x) for x in p.stdout.split()]


def assert_topology_matches(slurm: Slurm, topology_conf: str) -> dict[str, Switch]:
    """``scontrol show topology`` has exactly the switches of ``topology_conf``, with the same children and
    leaf nodes; every parent lists the union of its subtree one level above its highest child."""
    generated = slurm.parse_switch_lines(topology_conf)
    live = slurm.topology()
    assert generated, "no SwitchName= lines in the generated topology.conf"
    assert set(live) == set(generated)
    for name, switch in generated.items():
        assert live[name].switches == switch.switches, name
        if switch.nodes:  # a leaf: Slurm keeps the nodes as written
            assert live[name].nodes == switch.nodes, name
            assert live[name].level == 0, name
        else:
            children = [live[c] for c in switch.switches]
            assert live[name].nodes == frozenset().union(*(c.nodes for c in children)), name
            assert live[name].level == 1 + max(c.level or 0 for c in children), name
    return live


@contextlib.contextmanager
def owned_cluster(base: Path, *launcher_args: str, nodes_max: int = 98) -> Iterator[Cluster]:
    """Start a cluster on ``base`` (a failure to start fails the test), stop it after, and check that none of
    its processes is left."""
    try:
        cluster = start_cluster(base, *launcher_args, nodes_max=nodes_max)
    except AssertionError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield cluster
    finally:
        stop_cluster(base)
        left = cluster_pids(base)
        assert not left, f"processes of {base} left after down: {left}"


@contextlib.contextmanager
def scratch_cluster(
    name: str, fleet: Mapping[str, object], *launcher_args: str, nodes_max: int = 4
) -> Iterator[Cluster]:
    """A small extra cluster for one test module, from ``fleet`` (an inventory mapping).

    It lives in /tmp/slurm-topo-it-<name>-<pid> (``cluster.base.parent``, also a work folder for the test):
    munged runs as the munge user and cannot reach pytest's 0700 tmp folders. Removed afterwards.
    """
    work = Path(f"/tmp/slurm-topo-it-{name}-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.chmod(work, 0o755)
    try:
        (work / "fleet.yaml").write_text(yaml.safe_dump(dict(fleet), sort_keys=False))
        with owned_cluster(
            work / "cluster", "--inventory", str(work / "fleet.yaml"), *launcher_args, nodes_max=nodes_max
        ) as cluster:
            yield cluster
    finally:
        shutil.rmtree(work, ignore_errors=True)
