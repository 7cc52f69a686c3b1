"""Prove a staged file set with Slurm's own parser before it goes live.

slurm-topo's own checks (lint, node-line sanity) cannot know everything slurmctld refuses: a value
outside a range, an unknown node state, a host range over Slurm's limit. A reconfigure on such a set stops
the running slurmctld on 22.05 (``fatal: Invalid state BOGUS from a1``). So before any live file changes,
the whole set as it would be live (the config directory's files with the staged ones in place) is loaded
by a **throwaway slurmctld**:

* a private temporary copy of the config directory's files, the staged files written over it (its
  subdirectories — the submit filter's ``slurm_topo_filter/``, ``plugstack.conf.d/`` — linked, not copied:
  slurmctld only reads them);
* its ``slurm.conf`` keeps everything that describes the cluster but gets a private
  ``StateSaveLocation`` and pid file, ``SlurmctldHost`` = this host, ``SlurmUser=root``, no log file
  (foreground, ``-D``), no accounting, job completion, sched log or power-save / primary-on/off programs
  (nothing it could reach or run);
* ``unshare --net --mount``: a network namespace of its own, so it can neither bind the real controller's
  port nor reach a slurmd, slurmdbd or anything else. Its loopback carries an address of each family,
  192.0.2.1 and 2001:db8::1 (documentation ranges, never routed): getaddrinfo(AI_ADDRCONFIG), which Slurm
  calls for every ``NodeAddr``, resolves a family only where the host has an address of it besides
  loopback, and without an IPv6 one every IPv6 node address was retried for about 10 s. A private
  ``/etc/hosts`` names every node on both addresses (no DNS is reachable in there), so a name resolves at
  once whatever family ``CommunicationParameters`` asks for; an address given as such resolves as itself;
* ``slurmctld -D -c -i -f <copy>/slurm.conf``: it reads slurm.conf, the node lines, topology.conf and
  gres.conf exactly as the real one would at a restart; ``Running as primary controller`` (logged right
  after ``read_slurm_conf`` on every release from 22.05 to 26.05) means the set loads, a ``fatal:`` line,
  an ``error:`` line (:func:`config_error`: every one but the few the throwaway prints whatever it loads,
  :data:`SANDBOX_ERRORS`, each with its reason) or an exit before it means it does not — that line is
  what the refusal names (an ``error:`` line and the next one after it: getaddrinfo's says what failed,
  the one after it which address);
* then its process group is killed (SIGKILL: its state is thrown away) and the copy removed.

Per release (slurmctld(8) has no configuration-test option — 22.05 and the December 2024 page checked —
so all use the same throwaway; proven live on 22.05, 24.11.5 and 26.05.5 by the real-Slurm tests, each with
the release's own slurmctld):

=======  =================================================================================================
22.05    throwaway controller (a reconfigure with a bad set kills the running slurmctld: this is the guard)
24.11    throwaway controller (a reconfigure re-executes slurmctld; bad files left live stop the next
         restart)
26.05    throwaway controller (a reconfigure with a set it cannot load stopped ``slurmctld -D`` 26.05.5:
         ``fatal: ... Requested topology configuration is not available``)
=======  =================================================================================================

It needs root (namespaces; the real apply runs as root), ``unshare`` and ``mount`` (util-linux), ``ip``
(iproute2) and ``slurmctld`` on the apply host, and ``slurm.conf`` in the config directory. Without them
the set is applied unproven and the result's details say so.
"""

from __future__ import annotations

import ipaddress
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from ..core import hostlist
from ..core.errors import InputError, SlurmTopoError
from ..plumbing.version import parse_slurm_version
from ..slurmconfig.slurmconf import logical_lines, split_pairs

ACCEPTED_MARK = "Running as primary controller"
"""Logged by slurmctld right after read_slurm_conf() succeeded (22.05 … 26.05)."""
NO_ADDRESS_MARK = "slurm-topo apply: no address in the proof namespace"
"""Printed before slurmctld starts when the namespace could not be given an address (``ip addr add`` refused:
a container without CAP_NET_ADMIN): getaddrinfo then resolves nothing there, so its lines say nothing about
the set and are not counted (the proof's details say address resolution was not proven)."""
_RESOLVER_RE = re.compile(
    r"getaddrinfo|get_addr_info|slurm_set_addr|Unable to resolve|slurm_get_port: Address family"
    r"|_validate_slurmd_addr: failure on"
)
"""What getaddrinfo's failure makes slurmctld log (22.05: the retries, ``Unable to resolve``, then
``slurm_get_port: Address family '0' not supported`` and ``_validate_slurmd_addr: failure on ADDR``)."""
MAX_COPY = 16 * 1024 * 1024
"""Files of the config directory larger than this are not copied (Slurm config files are small)."""

_NETNS_ADDR = "192.0.2.1/32"
"""TEST-NET-1 (RFC 5737), on the namespace's own loopback: never routed, never anyone's."""
_NETNS_ADDR6 = "2001:db8::1/128"
"""The IPv6 documentation prefix (RFC 3849), on the same loopback: with it getaddrinfo(AI_ADDRCONFIG),
which Slurm calls, resolves IPv6 (a NodeAddr like ``fd00::5``, a name under ``CommunicationParameters=
EnableIPv6``) as it does on the controller host; without it only ``::1`` is there, which AI_ADDRCONFIG does
not count, and Slurm retries each IPv6 address for about 10 s ("Address family for hostname not
supported")."""
_DROP_KEYS = {
    "slurmctldhost",
    "controlmachine",
    "controladdr",
    "backupcontroller",
    "backupaddr",
    "slurmuser",
    "statesavelocation",
    "slurmctldpidfile",
    "slurmctldlogfile",
    "slurmctlddebug",
    "slurmctldsyslogdebug",
    "slurmschedlogfile",
    "slurmschedloglevel",
    "slurmctldprimaryonprog",
    "slurmctldprimaryoffprog",
    "suspendprogram",
    "resumeprogram",
    "resumefailprogram",
}
_DROP_PREFIXES = ("accountingstorage", "jobcomp")
_KEY_RE = re.compile(r"^\s*([A-Za-z]+)\s*=")
_INCLUDE_RE = re.compile(r"^(\s*include\s+)(\S+)(.*)$", re.I)


@dataclass(frozen=True)
class Proof:
    verdict: Literal["accepted", "rejected", "timeout", "skipped"]
    how: str
    """One phrase: what ran (or why nothing could), for the details."""
    error: str = ""
    """Slurm's own line (``fatal: …``, or the parser's first ``error:`` about the set) when rejected."""
    log: tuple[str, ...] = field(default=())
    """The last lines slurmctld printed."""


class Prover(Protocol):
    def prove(self, slurm_dir: Path, staged: Mapping[str, bytes | None], timeout: float) -> Proof:
        """Would slurmctld load ``slurm_dir`` with ``staged`` (name → bytes, None: absent) in place?"""
        ...


def prover_for(version: tuple[int, int] | None) -> Prover:
    """The best proof the release offers: a throwaway controller on every supported one (see the module
    docstring's table; no release checked has a configuration-test mode). With ``version`` known, a
    slurmctld of another release on this host proves nothing and is not asked."""
    return ThrowawayController(expect=version)


def probe_conf(
    text: str, slurm_dir: Path, copy_dir: Path, hostname: str, staged: Collection[str] = ()
) -> str:
    """``slurm.conf`` text for the throwaway controller: private paths, this host, nothing it could reach
    or run; ``Include`` lines that name a file of ``slurm_dir`` point into the copy, relative ones below it
    (or patterns) to the live directory. ``staged``: the names the set writes.

    "A file of ``slurm_dir``" is decided on resolved paths (``os.path.realpath``), never on the spelling:
    ``--slurm-dir /etc/slurm-llnl`` (a symlink to /etc/slurm) and ``Include
    /etc/slurm/slurm-topo-nodes.conf`` name the same file, and the throwaway must read the staged one, not
    the live one."""
    real_dir = Path(os.path.realpath(slurm_dir))
    out = []
    for line in text.splitlines():
        m = _KEY_RE.match(line)
        if m:
            key = m.group(1).lower()
            if key in _DROP_KEYS or key.startswith(_DROP_PREFIXES):
                continue
        out.append(_redirect_include(line, slurm_dir, real_dir, copy_dir, staged))
    out += [
        "# slurm-topo apply: throwaway controller that only proves the files load",
        f"SlurmctldHost={hostname}",
        "SlurmUser=root",
        f"StateSaveLocation={copy_dir / 'state'}",
        f"SlurmctldPidFile={copy_dir / 'slurmctld.pid'}",
        "SlurmctldDebug=info",
        "SlurmctldSyslogDebug=quiet",
    ]
    return "\n".join(out) + "\n"


def _redirect_include(
    line: str, slurm_dir: Path, real_dir: Path, copy_dir: Path, staged: Collection[str]
) -> str:
    """``real_dir``: ``slurm_dir`` resolved. An absolute Include names a file of the set when its directory
    resolves to ``real_dir`` and its name is staged (apply's rename replaces whatever had that name, a
    symlink too), or when the whole path resolves to a file there (through a symlinked directory, or a
    symlink to one of its files); otherwise the copy of the file it names, or the line as it is."""
    m = _INCLUDE_RE.match(line)
    if not m:
        return line
    target = Path(m.group(2))
    if target.is_absolute():
        here = Path(os.path.realpath(target.parent)) == real_dir
        if here and target.name in staged:
            return f"{m.group(1)}{copy_dir / target.name}{m.group(3)}"
        real = Path(os.path.realpath(target))
        if real.parent == real_dir:
            return f"{m.group(1)}{copy_dir / real.name}{m.group(3)}"
        return f"{m.group(1)}{copy_dir / target.name}{m.group(3)}" if here else line
    if "/" in m.group(2) or any(c in m.group(2) for c in "*?["):
        # only the directory's own files are copied: a relative path below it (or a pattern) stays live
        return f"{m.group(1)}{slurm_dir / target}{m.group(3)}"
    return line


class ThrowawayController:
    """A slurmctld of our own, in its own network namespace, on a private copy of the set (module doc)."""

    def __init__(
        self,
        slurmctld: str | None = None,
        unshare: str | None = None,
        expect: tuple[int, int] | None = None,
    ):
        self.expect = expect
        """The running controller's release: a slurmctld of another one here is not asked."""
        self.slurmctld = (
            slurmctld
            or shutil.which("slurmctld")
            or _first_executable(
                "/usr/sbin/slurmctld", "/usr/sbin/slurmctld-wlm", "/usr/local/sbin/slurmctld"
            )
        )
        self.unshare = unshare or shutil.which("unshare")
        self.progress: Callable[[float, float], None] | None = None
        """Called every PROGRESS_EVERY seconds while the set loads (``apply`` prints a line on stderr)."""

    def prove(self, slurm_dir: Path, staged: Mapping[str, bytes | None], timeout: float) -> Proof:
        conf = slurm_dir / "slurm.conf"
        if not conf.is_file():
            return Proof("skipped", f"no slurm.conf in {slurm_dir}: not proven by Slurm")
        if self.slurmctld is None or self.unshare is None:
            return Proof("skipped", "slurmctld or unshare not found on this host: not proven by Slurm")
        if os.geteuid() != 0:
            return Proof("skipped", "not root (a network namespace is needed): not proven by Slurm")
        if shutil.which("ip") is None:  # without an address besides loopback getaddrinfo resolves nothing
            return Proof("skipped", "ip (iproute2) not found on this host: not proven by Slurm")
        if self.expect is not None:
            here = _binary_version(self.slurmctld)
            if here != self.expect:
                shown = "unknown" if here is None else f"{here[0]}.{here[1]:02d}"
                return Proof(
                    "skipped",
                    f"{self.slurmctld} is Slurm {shown}, the controller runs "
                    f"{self.expect[0]}.{self.expect[1]:02d}: not proven by Slurm",
                )
        copy_dir = Path(tempfile.mkdtemp(prefix="slurm-topo-prove-"))
        try:
            self._populate(slurm_dir, copy_dir, staged)
            return self._run(copy_dir, proof_timeout(timeout, len(node_host_names(copy_dir))))
        finally:
            shutil.rmtree(copy_dir, ignore_errors=True)

    def _populate(self, slurm_dir: Path, copy_dir: Path, staged: Mapping[str, bytes | None]) -> None:
        for entry in os.scandir(slurm_dir):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                # read in place, never written: the submit filter's slurm_topo_filter/ (job_submit.lua
                # in the copy requires it: `error: lua: ... module 'slurm_topo_filter' not found`
                # otherwise), plugstack.conf.d/, ...
                os.symlink(os.path.realpath(entry.path), copy_dir / entry.name)
            elif entry.is_file() and entry.stat().st_size <= MAX_COPY:
                shutil.copyfile(entry.path, copy_dir / entry.name)
        for name, data in staged.items():
            if data is None:
                (copy_dir / name).unlink(missing_ok=True)
            else:
                (copy_dir / name).write_bytes(data)
        text = (copy_dir / "slurm.conf").read_text(encoding="utf-8", errors="replace")
        host = socket.gethostname().split(".")[0]
        (copy_dir / "slurm.conf").write_text(probe_conf(text, slurm_dir, copy_dir, host, staged))
        (copy_dir / "hosts").write_text(hosts_file(node_host_names(copy_dir) | {host}, has_ipv6()))
        (copy_dir / "nsswitch.conf").write_text("hosts: files\n")
        (copy_dir / "state").mkdir(mode=0o700)

    def _run(self, copy_dir: Path, timeout: float) -> Proof:
        assert self.slurmctld is not None and self.unshare is not None
        conf = str(copy_dir / "slurm.conf")
        daemon = [self.slurmctld, "-D", "-c", "-i", "-f", conf]
        ip = shutil.which("ip") or "ip"  # checked by prove()
        # an address besides 127.0.0.1 (and ::1), or getaddrinfo(AI_ADDRCONFIG) resolves nothing; where the
        # namespace may not be given one (a container without CAP_NET_ADMIN), the proof says so and cannot
        # judge address resolution (_Reading.blind)
        setup = [
            f"{{ {ip} link set lo up && {ip} addr add {_NETNS_ADDR} dev lo; }} || echo '{NO_ADDRESS_MARK}'"
        ]
        if has_ipv6():  # a host without IPv6 cannot reach an IPv6 node either: the proof says so
            setup.append(
                f"{ip} -6 addr add {_NETNS_ADDR6} dev lo nodad"
                " || echo 'slurm-topo apply: no IPv6 address in the proof namespace' >&2"
            )
        # every node name resolves at once from a private /etc/hosts (no DNS is reachable in there, and
        # Slurm retries an unresolvable name for about 10 s)
        setup.append(f"mount --bind {copy_dir / 'hosts'} /etc/hosts")
        setup.append(f"mount --bind {copy_dir / 'nsswitch.conf'} /etc/nsswitch.conf")
        script = "; ".join(setup) + '; exec "$@"'
        argv = [self.unshare, "--net", "--mount", "--", "/bin/sh", "-c", script, "sh", *daemon]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["SLURM_CONF"] = conf
        started = time.monotonic()
        how = f"throwaway slurmctld ({Path(self.slurmctld).name} -D in its own network namespace)"
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=copy_dir,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return Proof("skipped", f"could not start {argv[0]}: {exc.strerror or exc}: not proven by Slurm")
        lines: list[str] = []
        try:
            verdict, error = _watch(proc, lines, started + timeout, self.progress)
        finally:
            _kill_group(proc)
        took = f"{time.monotonic() - started:.1f}s"
        if NO_ADDRESS_MARK in lines:
            took += "; its namespace could not be given an address: address resolution not proven"
        tail = tuple(lines[-20:])
        if verdict == "accepted":
            return Proof("accepted", f"{how} loaded the set ({took})", log=tail)
        if verdict == "timeout":
            return Proof(
                "timeout",
                f"{how} ({took})",
                f"timed out: no '{ACCEPTED_MARK}' and no fatal: or error: line within {timeout:g}s",
                tail,
            )
        return Proof("rejected", f"{how} ({took})", error, tail)


_ERROR_LINE_RE = re.compile(r"^(?:\[[^\]]*\] *)?(?:slurmctld(?:\[\d+\])?: *)?(?P<text>(?:error|fatal):.*)$")
"""A line slurmctld logged at level ``error`` (or ``fatal``): ``slurmctld: error: …`` on stderr with ``-D``
(22.05, 24.11), ``[2026-12-06T07:48:04.927] error: …`` (26.05); the text from the level on."""
_RETRY_RE = re.compile(r"attempt number -?\d+$")
"""getaddrinfo's retries (``… failed: …, attempt number 3``, -4 to 5 on 22.05-26.05): Slurm tries a name it
cannot resolve for about 10 s, then says which (``getaddrinfo(fd00::3:6818) failed``, ``Unable to resolve
"fd00::3"``)."""


@dataclass(frozen=True)
class Allowed:
    """An ``error:`` line the throwaway prints whatever the set, and why it says nothing about the set."""

    pattern: re.Pattern[str]
    why: str
    source: str = ""
    """Where the line comes from in Slurm's source, for a line no captured log of this host holds (it depends
    on the host's load, not on the set): the format string, ``%d`` where Slurm prints a number."""


SANDBOX_ERRORS: tuple[Allowed, ...] = (
    Allowed(
        re.compile(
            r"^error: Could not open (?:job|node|reservation|trigger) state file "
            r"\S*/slurm-topo-prove-[^/\s]+/state/\w+: No such file or directory$"
        ),
        "the throwaway's StateSaveLocation is its own new, empty directory (it must never read the real "
        "controller's jobs): 22.05 and 24.11 log each state file they do not find as an error (26.05 as "
        "'No ... state file to recover'); only the throwaway's own state directory is allowed",
    ),
    Allowed(
        re.compile(
            r"^error: NOTE: Trying backup state save file\. (?:Jobs|Reservations|Information|Triggers) "
            r"may be lost!?$"
        ),
        "printed right after each of those missing state files (the line before it)",
    ),
    Allowed(
        re.compile(
            r"^error: +mpi/pmix(?:_v\d+)?: init: .*pmi/pmix: can not load PMIx library$"
            r"|^error: Couldn't load specified plugin name for mpi/pmix(?:_v\d+)?: Plugin init\(\) callback "
            r"failed$"
            r"|^error: MPI: Cannot create context for mpi/pmix(?:_v\d+)?$"
        ),
        "22.05's slurmctld loads every installed mpi plugin at start whatever slurm.conf says, and the pmix "
        "one fails where the PMIx library is not installed (Debian's slurm-wlm-basic-plugins ships the "
        "plugin but does not depend on libpmix2): the running controller logs the same three lines at each "
        "of its own starts; it is the host's packages, not the set (apply writes no file MPI plugins read)",
    ),
    Allowed(
        re.compile(r"^error: High latency for 1000 calls to gettimeofday\(\): \d+ microseconds$"),
        "slurmctld times 1000 gettimeofday() calls as it starts and logs this at level error when they take "
        "over 200 µs: a busy host (or no vDSO), never the set; a 26.05 proof in CI refused a set on it "
        "(399 microseconds) while the host ran the test suite",
        source='src/slurmctld/controller.c main(): error("High latency for 1000 calls to gettimeofday(): '
        '%d microseconds") when the latency is over 200 (22.05 to 26.05)',
    ),
)
"""The only ``error:`` lines a proof lets pass, each with its reason (``tests/test_apply_proof_errors.py``
runs them over real logs of 22.05, 24.11 and 26.05): every other ``error:`` line of the throwaway slurmctld
refuses the set, as a ``fatal:`` one does."""


def slurm_text(line: str) -> str:
    """A log line without slurmctld's prefix (``slurmctld: ``, 26.05's ``[timestamp] ``)."""
    m = _ERROR_LINE_RE.match(line)
    return m["text"] if m else line.split("slurmctld: ", 1)[-1]


def allowed_error(line: str) -> Allowed | None:
    """The :data:`SANDBOX_ERRORS` entry that lets ``line`` pass, None where none does."""
    text = slurm_text(line)
    return next((a for a in SANDBOX_ERRORS if a.pattern.match(text)), None)


def config_error(line: str) -> bool:
    """Whether ``line`` is an ``error:`` line of slurmctld that refuses the set: every one, except the few
    the throwaway prints whatever it loads (:data:`SANDBOX_ERRORS`)."""
    m = _ERROR_LINE_RE.match(line)
    return m is not None and m["text"].startswith("error:") and allowed_error(line) is None


PROOF_SECONDS_PER_NODE = 0.012
"""How much longer the proof may take per node of the set: measured 10 200 nodes in 58 s (5.7 ms a node on
2 cores), twice that for a loaded host."""


def proof_timeout(base: float, nodes: int) -> float:
    """The proof's limit for a set of ``nodes`` nodes: ``base`` (``--slurm-check-timeout``) plus
    :data:`PROOF_SECONDS_PER_NODE` per node."""
    return base + PROOF_SECONDS_PER_NODE * nodes


PROGRESS_EVERY = 10.0
"""Seconds between two progress lines while the throwaway slurmctld loads a large set."""


ERROR_GRACE = 0.5
"""Seconds the proof keeps reading after the first ``error:`` line that refuses the set: the lines Slurm
prints with it (which name, after ``getaddrinfo() failed``, the address) reach the details."""


class _Reading:
    """What the proof makes of slurmctld's lines (:func:`_watch`): a ``fatal:`` line, the mark that it
    runs, or the first ``error:`` line that refuses the set (:func:`config_error`) — then reading goes on
    for :data:`ERROR_GRACE` (the lines Slurm prints with it) and the next such line is named too.
    getaddrinfo's retries (``attempt number N``) only refuse where nothing concludes them in time."""

    def __init__(self, deadline: float) -> None:
        self.until = deadline
        """When to stop reading: the deadline, or the end of the grace after the first error line."""
        self.error = self.then = self.retry = ""
        self.blind = False
        """The namespace has no address (:data:`NO_ADDRESS_MARK`): resolver lines are not counted."""

    def line(self, line: str) -> tuple[str, str] | None:
        """The verdict ``line`` settles, None while reading goes on."""
        if "fatal:" in line:
            return "fatal", slurm_text(line)
        if ACCEPTED_MARK in line:
            return self.refusal() or ("accepted", "")
        if NO_ADDRESS_MARK in line:
            self.blind = True
        if not config_error(line) or (self.blind and _RESOLVER_RE.search(line)):
            return None
        text = slurm_text(line)
        if self.error:  # the next line that says something else (the address getaddrinfo failed on)
            if not self.then and text != self.error and not _RETRY_RE.search(text):
                self.then = text
        elif _RETRY_RE.search(text):  # the conclusion follows within Slurm's retries
            self.retry = self.retry or text
        else:
            self.error, self.until = text, min(self.until, time.monotonic() + ERROR_GRACE)
        return None

    def refusal(self) -> tuple[str, str] | None:
        """``("error", Slurm's line)`` once an error line refused the set, else None."""
        if self.error:
            return "error", f"{self.error} (then: {self.then})" if self.then else self.error
        return ("error", self.retry) if self.retry else None


def _watch(
    proc: subprocess.Popen[bytes],
    lines: list[str],
    deadline: float,
    progress: Callable[[float, float], None] | None = None,
    every: float = PROGRESS_EVERY,
) -> tuple[str, str]:
    """Read slurmctld's output until it says it runs, says fatal, prints an ``error:`` line that refuses
    the set (:class:`_Reading`), exits, or the deadline passes; every ``every`` seconds meanwhile
    ``progress(elapsed, limit)``. Returns (``accepted``/``fatal``/``error``/``exited``/``timeout``, Slurm's
    line)."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    start = time.monotonic()
    reported = start
    reading = _Reading(deadline)
    try:
        while True:
            now = time.monotonic()
            if now >= reading.until:
                return reading.refusal() or ("timeout", "")
            if progress is not None and now - reported >= every:
                reported = now
                progress(now - start, deadline - start)
            if not sel.select(min(reading.until - now, 0.5, every)):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:  # slurmctld exited
                proc.wait(timeout=5)
                return reading.refusal() or _exited(proc, lines)
            buf += chunk
            *done, buf = buf.split(b"\n")
            for raw in done:
                line = raw.decode("utf-8", "replace").rstrip()
                lines.append(line)
                if (verdict := reading.line(line)) is not None:
                    return verdict
    finally:
        sel.close()


def _exited(proc: subprocess.Popen[bytes], lines: list[str]) -> tuple[str, str]:
    """slurmctld exited before it ran: its last error or fatal line, else its exit status."""
    last = next((ln for ln in reversed(lines) if "error" in ln or "fatal" in ln), "")
    return "exited", slurm_text(last) if last else f"slurmctld exited {proc.returncode} before it ran"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the throwaway's process group (slurmctld and its slurmscriptd); we started it, by its id."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    if proc.stdout is not None:
        proc.stdout.close()


def node_host_names(conf_dir: Path) -> set[str]:
    """Every NodeName / NodeHostname / NodeAddr name on the node lines of the ``*.conf`` files in
    ``conf_dir`` (hostlists expanded; ``DEFAULT`` skipped)."""
    names: set[str] = set()
    for path in sorted(conf_dir.glob("*.conf")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for _, line in logical_lines(text):
            if not line[:9].lower() == "nodename=":
                continue
            try:
                pairs = {k.lower(): v for k, v in split_pairs(line).items()}
                for key in ("nodename", "nodehostname", "nodeaddr"):
                    if key in pairs and pairs[key].upper() != "DEFAULT":
                        names.update(hostlist.expand(pairs[key]))
            except (ValueError, SlurmTopoError):
                continue  # slurmctld itself will say what is wrong with the line
    return names


def has_ipv6() -> bool:
    """Whether this host's kernel has IPv6 (off with ``ipv6.disable=1``)."""
    return os.path.exists("/proc/net/if_inet6")


def hosts_file(names: Collection[str], ipv6: bool = True) -> str:
    """The throwaway's ``/etc/hosts``: every host name the node lines and the controller use, on the
    namespace's own addresses of each family (so a name resolves at once whatever family slurm.conf's
    ``CommunicationParameters`` asks for); addresses given as such (IPv4 or IPv6) resolve as themselves."""
    v4, v6 = _NETNS_ADDR.split("/")[0], _NETNS_ADDR6.split("/")[0]
    out = ["127.0.0.1 localhost\n", "::1 localhost\n" if ipv6 else ""]
    for name in sorted(n for n in names if not _is_ip(n)):
        out.append(f"{v4} {name}\n")
        if ipv6:
            out.append(f"{v6} {name}\n")
    return "".join(out)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _binary_version(slurmctld: str) -> tuple[int, int] | None:
    """``slurmctld -V`` → (major, minor), None when it does not say."""
    try:
        out = subprocess.run([slurmctld, "-V"], capture_output=True, text=True, timeout=10, check=False)
        return parse_slurm_version(out.stdout)
    except (OSError, subprocess.TimeoutExpired, InputError):
        return None


def _first_executable(*paths: str) -> str | None:
    return next((p for p in paths if os.access(p, os.X_OK)), None)
