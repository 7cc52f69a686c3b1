"""``slurm-topo doctor``: is this controller wired the way the README says, as the live Slurm sees it?

Each check reads what slurmctld runs (``scontrol show config``, ``show topology``, ``show node``), the files
beside slurm.conf, a ``sbatch --test-only`` the filter must decide, and the units; each problem is one
:class:`Finding` with its fix. A check that cannot be made here (no systemd, no gres.conf, no inventory given)
is a note, never a finding. The faults it finds (README "Wiring the outputs into Slurm"; tested one by one on
real Slurm in tests/integration/test_readme_wiring.py):

* ``slurmctld``    slurmctld does not answer;
* ``files``        a generated file missing beside slurm.conf, the files of two generations, or not generated
                   from the inventory given (``-i``);
* ``topology``     ``TopologyPlugin`` not the one the topology file is for; slurmctld showing no topology (the
                   plugin switched without the restart 22.05 needs) or another one than the file;
* ``nodes``        node features in slurmctld other than slurm-topo-nodes.conf's (the Include missing, a
                   stale reconfigure, an update by hand);
* ``filter``       ``JobSubmitPlugins`` without lua; job_submit.lua or slurm_topo_filter/ missing or not this
                   release's; the data file missing where job_submit.lua reads it, failing its checksum, or of
                   another format;
* ``decision``     a ``sbatch --test-only`` zone:fail job no zone can hold is not refused by the filter;
* ``spank``        no ``locality.so`` in plugstack.conf, the file missing, built for another Slurm, or
                   ``sbatch --help`` without ``--locality``;
* ``gres``         gres.conf's GPU lines or ``Links=`` not matching a node's GPUs;
* ``units``        a unit of ours installed but not enabled, or whose last run failed; apply's journal left
                   by an interrupted run.

The checks take a :class:`~slurm_topo.plumbing.runner.Runner`: nothing here runs a program by itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import files as shipped
from ..access import argv as slurm_argv
from ..access.text import parse_scontrol_nodes, parse_show_config
from ..apply import topology_file as topo
from ..apply.parse import features_difference, future_nodes, parse_node_lines
from ..core.errors import CommandError, HostlistError, ParseError
from ..plumbing.runner import Runner
from ..render.filter_data import FORMAT, checksum
from .slurmconf import parse_gres_gpus

TOPOLOGY, TOPOLOGY_YAML, NODES, DATA, GRES = (
    "topology.conf",
    "topology.yaml",
    "slurm-topo-nodes.conf",
    "slurm_topo_data.lua",
    "gres.conf",
)
FILTER_SCRIPT, FILTER_DIR = "job_submit.lua", "slurm_topo_filter"
#: the units a controller runs (contrib/systemd): timer -> its service
UNITS = {
    "slurm-topo-apply.timer": "slurm-topo-apply.service",
    "slurm-topo-relax.timer": "slurm-topo-relax.service",
    "slurm-topo-health-sync.timer": "slurm-topo-health-sync.service",
}
_FINGERPRINT_RE = re.compile(r"fingerprint sha256:([0-9a-f]{16})")
_DATA_HEADER_RE = re.compile(r"^-- slurm-topo-data ([0-9a-f]+)$")
_CHECKSUM_RE = re.compile(r"^-- slurm-topo-checksum adler32:([0-9a-f]{8}):(\d+)$")
_FORMAT_RE = re.compile(r"^format=(\d+),$", re.M)
_DATA_PATH_RE = re.compile(r'^\s*SLURM_TOPO_DATA\s*=\s*"([^"]+)"\s*$', re.M)
_VERSION_RE = re.compile(r"(\d+)\.(\d+)")
MAX_LISTED = 3


@dataclass(frozen=True)
class Finding:
    check: str
    message: str
    fix: str

    def line(self) -> str:
        return f"{self.check}: {self.message}; fix: {self.fix}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)

    def fail(self, check: str, message: str, fix: str) -> None:
        self.findings.append(Finding(check, message, fix))

    def as_json(self) -> dict[str, object]:
        return {
            "ok": not self.findings,
            "findings": [asdict(f) for f in self.findings],
            "passed": self.passed,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class DoctorOptions:
    slurm_conf: Path | None = None
    """slurm.conf (default: the one slurmctld reports, ``SLURM_CONF`` in ``scontrol show config``)."""
    inventory_fingerprint: Callable[[tuple[int, int]], str] | None = None
    """The fingerprint ``generate`` would write now from the inventories given (``-i``), for a Slurm
    release: the files must carry it."""
    state_dir: Path = Path("/var/lib/slurm-topo")
    probe_nodes: int | None = None
    """The node count of the ``--test-only`` probe (default: one more than the nodes of slurm-topo-nodes.conf,
    which no zone can hold)."""


def _listed(items: Sequence[str]) -> str:
    head = "; ".join(items[:MAX_LISTED])
    return head + (f"; and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _stderr_of(exc: CommandError) -> str:
    return " ".join(exc.stderr.split())


def data_file_problem(data: bytes, format_now: int) -> str | None:
    """Why the filter would not load this data file (as ``data.lua`` decides), None when it would."""
    first_end = data.find(b"\n")
    second_end = data.find(b"\n", first_end + 1) if first_end >= 0 else -1
    if first_end < 0 or not _DATA_HEADER_RE.match(data[:first_end].decode("utf-8", "replace")):
        return "has no slurm-topo-data header line"
    m = (
        _CHECKSUM_RE.match(data[first_end + 1 : second_end].decode("utf-8", "replace"))
        if second_end > 0
        else None
    )
    if m is None:
        return "has no checksum line"
    body = data[second_end + 1 :].decode("utf-8", "replace")
    if checksum(body) != f"adler32:{m.group(1)}:{m.group(2)}":  # the writer's own function
        return "fails its checksum (truncated, edited or damaged)"
    fmt = _FORMAT_RE.search(body)
    if fmt is None or int(fmt.group(1)) != format_now:
        return f"has format {fmt.group(1) if fmt else '?'}, this slurm-topo's filter reads {format_now}"
    return None


def plugstack_entries(path: Path, _depth: int = 0) -> list[str]:
    """The plugin paths of a plugstack.conf (``required``/``optional`` lines, ``include`` globs followed)."""
    text = _read(path)
    if text is None or _depth > 4:
        return []
    out: list[str] = []
    for raw in text.decode("utf-8", "replace").splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] in ("required", "optional"):
            out.append(words[1])
        elif len(words) >= 2 and words[0] == "include":
            pattern = words[1] if words[1].startswith("/") else str(path.parent / words[1])
            base = Path(pattern).parent
            for inc in sorted(base.glob(Path(pattern).name)):
                out.extend(plugstack_entries(inc, _depth + 1))
    return out


class Doctor:
    def __init__(self, runner: Runner, options: DoctorOptions = DoctorOptions()) -> None:
        self.runner = runner
        self.o = options
        self.r = Report()
        self.config: dict[str, str] = {}
        self.etc = Path("/etc/slurm")
        self.version: tuple[int, int] | None = None
        self.files: dict[str, bytes | None] = {}

    # ---- helpers
    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        return self.runner.run(list(argv), timeout=timeout)

    def ok(self, what: str) -> None:
        self.r.passed.append(what)

    # ---- the checks, in the README's order
    def examine(self) -> Report:
        if not self.slurmctld():
            return self.r
        self.generated_files()
        self.topology()
        self.nodes()
        self.job_submit()
        self.decision()
        self.spank()
        self.gres()
        self.units()
        return self.r

    def slurmctld(self) -> bool:
        try:
            self.config = parse_show_config(self.run(slurm_argv.show_config()))
        except CommandError as exc:
            self.r.fail(
                "slurmctld",
                f"scontrol show config failed ({exc})",
                "start slurmctld, or point SLURM_CONF at this cluster's slurm.conf",
            )
            return False
        conf = self.o.slurm_conf or Path(self.config.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
        self.etc = conf.parent
        m = _VERSION_RE.match(self.config.get("SLURM_VERSION", ""))
        self.version = (int(m.group(1)), int(m.group(2))) if m else None
        self.files = {n: _read(self.etc / n) for n in (TOPOLOGY, TOPOLOGY_YAML, NODES, DATA, GRES)}
        self.ok(f"slurmctld answers (Slurm {self.config.get('SLURM_VERSION', '?')}, {conf})")
        return True

    def generated_files(self) -> None:
        gen = f"slurm-topo generate --inventory FILE --out {self.etc} (or slurm-topo apply)"
        if topo.active(self.files, self.version) is None:
            self.r.fail("files", f"no {TOPOLOGY} or {TOPOLOGY_YAML} in {self.etc}", gen)
        for name in (NODES, DATA):
            if self.files[name] is None:
                self.r.fail("files", f"no {name} in {self.etc}, beside slurm.conf", gen)
        prints = {}
        for name in (TOPOLOGY, TOPOLOGY_YAML, NODES, DATA, GRES):
            data = self.files[name]
            if data is None:
                continue
            m = _FINGERPRINT_RE.search(data[:2000].decode("utf-8", "replace"))
            if m:
                prints[name] = m.group(1)
        if len(set(prints.values())) > 1:
            by = ", ".join(f"{n} {fp}" for n, fp in sorted(prints.items()))
            self.r.fail("files", f"the files in {self.etc} are of different generations ({by})", gen)
        elif prints:
            (fp,) = set(prints.values())
            make = self.o.inventory_fingerprint
            want = make(self.version or (22, 5)) if make is not None else None
            if want is not None and want != fp:
                self.r.fail(
                    "files",
                    f"the files in {self.etc} (fingerprint {fp}) were not generated from the inventory "
                    f"given (fingerprint {want})",
                    gen,
                )
            else:
                self.ok(f"generated files of one generation ({fp})")
        if self.o.inventory_fingerprint is None:
            self.r.notes.append("files: no --inventory given: not compared with the inventory")

    def topology(self) -> None:
        found = topo.active(self.files, self.version)
        if found is None:
            return
        name, data = found
        need = topo.PLUGIN.get(topo.kind(name, data) or "")
        plugin = self.config.get("TopologyPlugin", "")
        restart = (
            "restart slurmctld (a release before 24.11 keeps the plugin it started with)"
            if self.version is not None and self.version < topo.PLUGIN_SWITCH_AT_RECONFIGURE_SINCE
            else "scontrol reconfigure"
        )
        if need is not None and plugin != need:
            self.r.fail(
                "topology",
                f"slurmctld runs TopologyPlugin={plugin or '(none)'}, {self.etc / name} is for {need}",
                f"TopologyPlugin={need} in slurm.conf, then {restart}",
            )
            return
        no_topology = (
            "topology",
            f"slurmctld shows no topology although it reports TopologyPlugin={plugin or '(none)'}",
            restart,
        )
        try:
            shown = self.run(slurm_argv.show_topology())
            if need is not None and "SwitchName=" not in shown and "BlockName=" not in shown:
                self.r.fail(*no_topology)  # 22.05 after a reconfigure that switched the plugin
                return
            diff = topo.difference(
                {name: data},
                lambda n: shown if n is None else self.run(slurm_argv.show_topology(n)),
                self.version,
            )
        except CommandError as exc:
            said = _stderr_of(exc)
            if "No topology information" in said:
                self.r.fail(*no_topology)
            else:
                self.r.fail("topology", f"scontrol show topology failed: {said or exc}", restart)
            return
        except (ParseError, HostlistError) as exc:
            self.r.fail("topology", f"{name} does not read: {exc}", "regenerate it: slurm-topo apply")
            return
        if diff:
            self.r.fail(
                "topology",
                f"scontrol show topology differs from {self.etc / name}: {_listed(diff)}",
                f"{restart}; if it persists, regenerate with slurm-topo apply",
            )
        else:
            self.ok(f"scontrol show topology equals {self.etc / name} ({plugin or 'no plugin needed'})")

    def nodes(self) -> None:
        data = self.files[NODES]
        if data is None:
            return
        try:
            text = data.decode()
            want = parse_node_lines(text)
            future = future_nodes(text)
            want = {n: f for n, f in want.items() if n not in future}
            live = self.run(slurm_argv.show_nodes(), timeout=60)
        except (ParseError, HostlistError, UnicodeDecodeError) as exc:
            self.r.fail(
                "nodes", f"{self.etc / NODES} does not read: {exc}", "regenerate it: slurm-topo apply"
            )
            return
        except CommandError as exc:
            self.r.fail("nodes", f"scontrol show node failed: {exc}", "check slurmctld")
            return
        diff = features_difference(want, live)
        if diff:
            self.r.fail(
                "nodes",
                f"slurmctld's node features differ from {self.etc / NODES}: {_listed(diff)}",
                f"'Include {NODES}' in slurm.conf (and none of these nodes' own NodeName= lines), "
                "then scontrol reconfigure",
            )
        else:
            self.ok(f"{len(want)} nodes carry the features of {NODES}")

    def _data_path(self) -> Path:
        script = _read(self.etc / FILTER_SCRIPT)
        if script is not None:
            m = _DATA_PATH_RE.search(script.decode("utf-8", "replace"))
            if m:
                return Path(m.group(1))
        return self.etc / DATA

    def job_submit(self) -> None:
        plugins = self.config.get("JobSubmitPlugins", "")
        names = {p.strip().removeprefix("job_submit/") for p in plugins.split(",")}
        if "lua" not in names:
            self.r.fail(
                "filter",
                f"slurmctld runs JobSubmitPlugins={plugins or '(none)'}: the filter is not loaded",
                "JobSubmitPlugins=lua in slurm.conf (keep the others in the list), then scontrol reconfigure",
            )
        copy = (
            "slurm-topo files --copy /tmp/st; cp /tmp/st/job_submit/job_submit.lua "
            f"{self.etc}/; rm -rf {self.etc}/{FILTER_DIR}; cp -r /tmp/st/job_submit/{FILTER_DIR} {self.etc}/"
        )
        stale = []
        for rel in shipped.names():
            if not rel.startswith("job_submit/"):
                continue
            local = rel.removeprefix("job_submit/")
            if local != FILTER_SCRIPT and not local.startswith(FILTER_DIR + "/"):
                continue
            have = _read(self.etc / local)
            if have is None:
                stale.append(f"{local} missing")
            elif have != shipped.read_text(rel).encode():
                stale.append(f"{local} is not this slurm-topo's")
        if stale:
            self.r.fail("filter", f"in {self.etc}: {_listed(stale)}", copy)
        else:
            self.ok(f"{FILTER_SCRIPT} and {FILTER_DIR}/ are this release's")
        path = self._data_path()
        data = _read(path)
        if data is None:
            self.r.fail(
                "filter",
                f"the filter reads its data from {path}, which does not exist (jobs pass unchanged)",
                f"slurm-topo generate --out {path.parent} (the directory of job_submit.lua)",
            )
            return

        why = data_file_problem(data, FORMAT)
        if why is not None:
            self.r.fail("filter", f"{path} {why} (jobs pass unchanged)", f"regenerate it into {path.parent}")
        else:
            self.ok(f"{path} loads (checksum and format {FORMAT})")

    def _probe_size(self) -> int:
        if self.o.probe_nodes is not None:
            return self.o.probe_nodes
        data = self.files[NODES]
        try:
            return len(parse_node_lines(data.decode())) + 1 if data is not None else 100_000
        except (ParseError, HostlistError, UnicodeDecodeError):
            return 100_000

    def decision(self) -> None:
        """A zone:fail job no zone can hold must be refused by the filter (``slurm-topo: …`` on sbatch's
        stderr); accepted, or refused by Slurm alone, it did not decide (the findings above say why)."""
        n = self._probe_size()
        argv = slurm_argv.sbatch_test_only(f"--nodes={n}", "--comment=locality=zone:fail")
        try:
            out = self.run(argv, timeout=60)
        except CommandError as exc:
            said = _stderr_of(exc)
            if exc.returncode is None:
                self.r.fail(
                    "decision", f"{' '.join(argv)} could not run: {exc}", "check sbatch and slurmctld"
                )
                return
            if "slurm-topo:" in said and "can ever hold" in said:
                self.ok(f"the filter refuses a zone:fail job of {n} nodes (sbatch --test-only)")
                return
        else:
            said = "accepted: " + " ".join(out.split())
        self.r.fail(
            "decision",
            f"a sbatch --test-only zone:fail job of {n} nodes got no decision from the filter ({said[:200]})",
            "check the filter's findings above and slurmctld.log for 'slurm-topo:'",
        )

    def spank(self) -> None:
        configured = self.config.get("PlugStackConfig", "")
        stack = Path(configured) if configured not in ("", "(null)") else self.etc / "plugstack.conf"
        plugins = [p for p in plugstack_entries(stack) if Path(p).name == "locality.so"]
        build = (
            "slurm-topo files --copy /tmp/st && /tmp/st/job_submit/build-spank /usr/local/lib/slurm && "
            f"echo 'optional /usr/local/lib/slurm/locality.so' >> {stack}"
        )
        if not plugins:
            self.r.fail("spank", f"no locality.so in {stack}: sbatch has no --locality", build)
            return
        lib = Path(plugins[0])
        if not lib.is_file():
            self.r.fail("spank", f"{stack} names {lib}, which does not exist", build)
            return
        stamp = _read(lib.with_name(lib.name + ".slurm-version"))
        running = self.config.get("SLURM_VERSION", "")
        if stamp is not None and running and not running.startswith(stamp.decode().strip() + "."):
            self.r.fail(
                "spank",
                f"{lib} was built for Slurm {stamp.decode().strip()}, this is {running} (it does not load)",
                f"rebuild it: build-spank {lib.parent}",
            )
            return
        try:
            helped = self.run(slurm_argv.sbatch_help())
        except CommandError as exc:
            self.r.fail("spank", f"sbatch --help failed: {exc}", "check the submit host's Slurm")
            return
        if "--locality" not in helped:
            self.r.fail("spank", f"sbatch --help shows no --locality although {stack} names {lib}", build)
        else:
            self.ok(f"sbatch --help shows --locality ({lib})")

    def gres(self) -> None:
        data = self.files[GRES]
        if data is None:
            self.r.notes.append(f"gres: no {GRES} in {self.etc}: not checked")
            return
        try:
            lines = parse_gres_gpus(data.decode("utf-8", "replace"), source=str(self.etc / GRES))
            live = {
                r["NodeName"]: r for r in parse_scontrol_nodes(self.run(slurm_argv.show_nodes(), timeout=60))
            }
        except (ParseError, HostlistError) as exc:
            self.r.fail("gres", str(exc), f"regenerate {GRES}")
            return
        except CommandError as exc:
            self.r.fail("gres", f"scontrol show node failed: {exc}", "check slurmctld")
            return
        bad = []
        for node, gpus in sorted(lines.items()):
            count = sum(_file_count(g.get("file", "")) for g in gpus)
            have = _gres_gpu_count(live.get(node, {}).get("Gres", ""))
            if node not in live:
                bad.append(f"{node} is in {GRES} but unknown to slurmctld")
                continue
            if have != count:
                bad.append(f"{node}: {count} GPUs in {GRES}, {have} in its Gres=")
                continue
            for i, g in enumerate(gpus):
                links = g.get("links")
                if links is None:
                    continue
                vals = links.split(",")
                if len(vals) != count or (count == len(gpus) and vals[i] != "-1"):
                    bad.append(f"{node}: Links={links} of GPU line {i} does not fit its {count} GPUs")
                    break
        if bad:
            self.r.fail(
                "gres", _listed(bad), f"regenerate {GRES} (slurm-topo apply) from the nodes' captures"
            )
        else:
            self.ok(f"{GRES}: {len(lines)} nodes' GPU lines and Links= fit their Gres=")

    def units(self) -> None:
        try:
            for timer, service in UNITS.items():
                props = _props(self.run(["systemctl", "show", *[f"-p{p}" for p in _UNIT_PROPS], timer]))
                if props.get("LoadState") != "loaded":
                    self.r.notes.append(f"units: {timer} is not installed")
                    continue
                if props.get("UnitFileState") not in ("enabled", "enabled-runtime", "static"):
                    self.r.fail(
                        "units",
                        f"{timer} is installed but {props.get('UnitFileState') or 'not enabled'}",
                        f"systemctl enable --now {timer}",
                    )
                svc = _props(self.run(["systemctl", "show", *[f"-p{p}" for p in _UNIT_PROPS], service]))
                when = svc.get("ExecMainExitTimestamp", "") or "never"
                if svc.get("Result", "success") != "success":
                    self.r.fail(
                        "units",
                        f"{service}'s last run failed ({svc.get('Result')}, {when})",
                        f"journalctl -u {service}",
                    )
                else:
                    self.ok(f"{timer} {props.get('UnitFileState')}; {service} last ran {when}")
        except CommandError as exc:
            self.r.notes.append(f"units: not checked (systemctl: {_stderr_of(exc) or exc})")
        journal = self.o.state_dir / "journal.json"
        if journal.exists():
            self.r.fail(
                "units",
                f"{journal}: an apply was interrupted",
                f"slurm-topo apply --recover --state-dir {self.o.state_dir} --slurm-dir {self.etc} …",
            )


_UNIT_PROPS = ("LoadState", "UnitFileState", "ActiveState", "Result", "ExecMainExitTimestamp")


def _props(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def _file_count(spec: str) -> int:
    """Devices a gres.conf ``File=`` names (``/dev/nvidia[0-3]`` is 4)."""
    if not spec:
        return 1
    from ..core import hostlist

    try:
        return len(hostlist.expand(spec))
    except HostlistError:
        return 1


def _gres_gpu_count(gres: str) -> int:
    """GPUs in a node's ``Gres=`` (``gpu:h100:8(S:0-1),…``)."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def examine(runner: Runner, options: DoctorOptions = DoctorOptions()) -> Report:
    return Doctor(runner, options).examine()


def render_text(report: Report) -> str:
    lines = [f"ok    {p}" for p in report.passed]
    lines += [f"note  {n}" for n in report.notes]
    lines += [f"FAIL  {f.line()}" for f in report.findings]
    verdict = "doctor: ok" if not report.findings else f"doctor: {len(report.findings)} finding(s)"
    return "\n".join([*lines, verdict]) + "\n"


__all__ = ["DoctorOptions", "Finding", "Report", "data_file_problem", "examine", "render_text"]
