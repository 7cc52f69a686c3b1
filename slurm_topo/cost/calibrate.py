"""``slurm-topo calibrate``: measure each link level the inventory knows and write a ``links:`` table.

1. :func:`choose_pairs` picks, among the nodes given (the allocation's, or ``--nodes``), one node pair per
   network level the inventory can tell apart (``network_group``: two nodes under one leaf; ``zone``: two
   leaves of one zone; ``region``: two zones; ``any``: two regions), and, inside one node, a GPU pair per
   node level its ``gpu_topology`` shows (``nvlink``, ``pcie``, ``sys``).
2. :func:`probe_argv` builds the ``srun`` step that measures a pair: two tasks, one per node (or two on one
   node), running ``slurm-topo probe tcp`` (the built-in probe, :mod:`slurm_topo.probes.tcp`). Node levels
   need a GPU probe (``all_reduce_perf``): the TCP probe cannot see GPU links, so they keep their figures
   and the table says they were not measured.
3. :func:`read_probe` takes the step's output: one JSON line per task, each naming the node slurmd ran it on
   (``SLURMD_NODENAME``); a step whose tasks ran elsewhere than asked is refused.
4. :func:`calibrated_table` puts the measurements over the base table (the inventory's ``links:`` or the
   defaults), keeps the levels monotone (a level further out is never faster or nearer than the one inside
   it: a noisy measurement is held at its inner neighbour's figure, and said), and :func:`render` writes it
   as an inventory file holding only ``links:`` with a ``measured:`` record (date, probe, pairs, each
   repeat's rate), which ``cost``/``explain`` (``--links FILE``, or as one of the inventory files) read and
   name in their output.

``--probe nccl|perftest|auto`` (:mod:`.calibrate_probes`): a ``probe tools`` step on every node says which
tools are there (:func:`detect_tools`); nccl-tests measures GPU pairs per link class inside a node and a GPU
on each node per network level, perftest each rail's NICs per network level, both directions at once; each
run is a step of ``slurm-topo probe tool`` (:func:`tool_step_argv`), whose JSON line carries the tool's whole
output and the node it ran on; the table's ``measured:`` record gains each level's tool, version and
command, and ``runs``: every run's figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import yaml

from ..core.errors import CommandError, InputError, PlacementError, show_value
from ..core.model import Inventory, Node
from ..plumbing.runner import Runner
from .calibrate_probes import (
    NCCL_TOOL,
    NodeTools,
    Result,
    Run,
    level_figures,
    nccl_runs,
    perftest_runs,
    read_nccl,
    read_perftest_bw,
    read_perftest_lat,
    read_tools,
    runs_notes_for,
)
from .comm import Fabric, network_level
from .links import MEASURED_KEY, NETWORK_LEVELS, NODE_LEVELS, Link, LinkTable

PROBES = ("tcp", "nccl", "perftest")


@dataclass(frozen=True, slots=True)
class Pair:
    """Where one level is measured: nodes ``a`` and ``b`` (the same node for a node level, with ``gpus``)."""

    level: str
    a: str
    b: str
    gpus: tuple[int, int] | None = None

    def text(self) -> str:
        if self.gpus is not None:
            return f"{self.a} GPUs {self.gpus[0]},{self.gpus[1]}"
        return f"{self.a} <-> {self.b}"


@dataclass(frozen=True, slots=True)
class Measurement:
    pair: Pair
    probe: str
    bandwidth: float
    latency_us: float
    detail: Mapping[str, Any] = field(default_factory=dict)


def _location_key(node: Node) -> tuple[str | None, str | None, str | None]:
    loc = node.location
    return (loc.region, loc.zone, loc.network_group)


def choose_pairs(inventory: Inventory, nodes: Sequence[str]) -> tuple[list[Pair], list[str]]:
    """One pair per level among ``nodes`` (in the inventory's order of names); and a note per level that
    has no pair there. Deterministic: the first nodes (by name) of the first location groups."""
    fabric = Fabric.of(inventory)
    known = {n.name: n for n in inventory.nodes}
    unknown = [n for n in nodes if n not in known]
    if unknown:
        raise InputError(f"calibrate: node {show_value(unknown[0])} is not in the inventory")
    chosen = sorted(dict.fromkeys(nodes))
    # two representatives per location (a leaf pair needs two), then every pair of those: the groups are
    # few even when the nodes are many
    reps: dict[tuple[str | None, str | None, str | None], list[str]] = {}
    for name in chosen:
        group = reps.setdefault(_location_key(known[name]), [])
        if len(group) < 2:
            group.append(name)
    candidates = [name for group in reps.values() for name in group]
    found: dict[str, Pair] = {}
    for i, a in enumerate(candidates):
        for b in candidates[i + 1 :]:
            level = network_level(known[a], known[b], fabric.domains)
            if level in NETWORK_LEVELS and level not in found:
                found[level] = Pair(level, a, b)
    notes = [
        f"{level}: no two of the nodes given meet there (not measured)"
        for level in NETWORK_LEVELS
        if level not in found
    ]
    return [found[level] for level in NETWORK_LEVELS if level in found], notes


def node_level_notes(inventory: Inventory, nodes: Sequence[str]) -> list[str]:
    """The node levels (inside one node) the TCP probe leaves as they were."""
    topo = any(n.gpu_topology is not None for n in inventory.nodes if n.name in set(nodes))
    what = "the nodes' GPU links" if topo else "links inside a node"
    return [f"{', '.join(NODE_LEVELS)}: the tcp probe cannot measure {what} (kept from the base table)"]


def srun_prefix(
    nodes: Sequence[str], ntasks: int, time_limit_min: int, srun_args: Sequence[str] = ()
) -> list[str]:
    """The ``srun`` options of every calibrate step: ``ntasks`` tasks over ``nodes``, spread evenly."""
    return [
        "srun",
        f"--nodes={len(nodes)}",
        f"--ntasks={ntasks}",
        f"--ntasks-per-node={max(ntasks // len(nodes), 1)}",
        f"--nodelist={','.join(nodes)}",
        "--job-name=slurm-topo-calibrate",
        f"--time={time_limit_min}",
        "--kill-on-bad-exit=1",
        # inside an allocation the batch step holds the job's CPUs and memory on its node: a probe step
        # (light tasks) shares them rather than waiting for them forever (Slurm >= 20.11)
        "--overlap",
        *srun_args,
    ]


def tools_argv(
    nodes: Sequence[str],
    probe_command: Sequence[str],
    *,
    time_limit_min: int = 2,
    srun_args: Sequence[str] = (),
) -> list[str]:
    """The step that asks every node which tools it has (``slurm-topo probe tools``, one task a node)."""
    chosen = sorted(dict.fromkeys(nodes))
    return [*srun_prefix(chosen, len(chosen), time_limit_min, srun_args), *probe_command, "probe", "tools"]


def tool_step_argv(
    run: Run,
    argv: Sequence[str],
    probe_command: Sequence[str],
    addresses: Mapping[str, str],
    *,
    time_limit_min: int = 5,
    srun_args: Sequence[str] = (),
) -> list[str]:
    """The step that runs one tool (``argv``: the run's own, or its latency companion) through ``slurm-topo
    probe tool``: one task per node (a GPU pair: one task driving both GPUs; a served tool: server on the
    first node, client on the second)."""
    out = [
        *srun_prefix(run.nodes, len(run.nodes), time_limit_min, srun_args),
        *probe_command,
        "probe",
        "tool",
        "--timeout",
        str(time_limit_min * 60),
    ]
    for node, gpus in (run.gpus or {}).items():
        out += ["--gpus", f"{node}={','.join(str(g) for g in gpus)}"]
    if run.tool == NCCL_TOOL:
        out += ["--env", "NCCL_DEBUG=VERSION"]  # NCCL prints its version: the run's provenance
    if run.serve:
        out.append("--serve")
        out += ["--address", f"{run.nodes[0]}={addresses.get(run.nodes[0]) or run.nodes[0]}"]
    return [*out, "--", *argv]


def detect_tools(
    runner: Runner,
    nodes: Sequence[str],
    probe_command: Sequence[str],
    *,
    srun_args: Sequence[str] = (),
) -> dict[str, NodeTools]:
    """Every node's ``probe tools`` report (a node whose task printed none has no tool)."""
    return read_tools(runner.run(tools_argv(nodes, probe_command, srun_args=srun_args), timeout=150))


def probe_argv(
    pair: Pair,
    probe_command: Sequence[str],
    addresses: Mapping[str, str],
    *,
    port: int,
    nbytes: int,
    repeats: int,
    time_limit_min: int = 5,
    srun_args: Sequence[str] = (),
) -> list[str]:
    """The ``srun`` step that measures ``pair`` with the TCP probe: one task per node, task 0 serving.
    ``addresses``: node -> the address its serving task is reached at (Slurm's NodeAddr)."""
    nodes = [pair.a] if pair.a == pair.b else [pair.a, pair.b]
    argv = [
        *srun_prefix(nodes, 2, time_limit_min, srun_args),
        *probe_command,
        "probe",
        "tcp",
        "--port",
        str(port),
        "--bytes",
        str(nbytes),
        "--repeats",
        str(repeats),
    ]
    for node in nodes:
        argv += ["--address", f"{node}={addresses.get(node) or node}"]
    return argv


def read_probe(pair: Pair, output: str) -> Measurement:
    """The measurement in a probe step's output: the measuring task's JSON line, checked against Slurm's
    own word on where each task ran (``node``, from ``SLURMD_NODENAME``). Raises :class:`PlacementError`
    when the tasks ran on other nodes than the pair's, :class:`InputError` when there is no result."""
    records = []
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("slurm_topo_probe") in ("serve", "measure"):
            records.append(doc)
    ran_on = sorted({str(r.get("node")) for r in records})
    want = sorted({pair.a, pair.b})
    if ran_on and ran_on != want:
        raise PlacementError(
            f"calibrate {pair.level}: the probe ran on {','.join(ran_on)}, not {','.join(want)}"
        )
    result = next((r for r in records if r["slurm_topo_probe"] == "measure"), None)
    if result is None:
        raise InputError(f"calibrate {pair.level}: the probe step printed no measurement")
    bandwidth, latency = result.get("bandwidth"), result.get("latency_us")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (bandwidth, latency)):
        raise InputError(
            f"calibrate {pair.level}: the probe's result is not usable: {json.dumps(result)[:200]}"
        )
    assert isinstance(bandwidth, (int, float)) and isinstance(latency, (int, float))
    detail = {k: result[k] for k in ("bytes", "repeats", "pings", "bandwidths") if k in result}
    return Measurement(pair, str(result.get("probe", "tcp")), float(bandwidth), float(latency), detail)


def calibrated_table(base: LinkTable, measured: Iterable[Measurement]) -> tuple[LinkTable, list[str]]:
    """``base`` with each measured level's figures; the network levels kept monotone (further out: not
    faster, not nearer) with a note for every figure held."""
    links = dict(base.links)
    got = {m.pair.level: m for m in measured}
    for level, m in got.items():
        links[level] = Link(round(m.bandwidth, 4), round(m.latency_us, 2))
    notes = []
    for inner, outer in zip(NETWORK_LEVELS, NETWORK_LEVELS[1:], strict=False):
        a, b = links[inner], links[outer]
        bandwidth, latency = min(a.bandwidth, b.bandwidth), max(a.latency_us, b.latency_us)
        if (bandwidth, latency) != (b.bandwidth, b.latency_us):
            how = "measured" if outer in got else "not measured; its base figure"
            notes.append(
                f"{outer}: {how} {b.bandwidth:g} GB/s {b.latency_us:g} µs is faster or nearer than {inner} "
                f"({a.bandwidth:g} GB/s {a.latency_us:g} µs): held at {bandwidth:g} GB/s {latency:g} µs"
            )
            links[outer] = Link(bandwidth, latency)
    # the measured levels are the site's now (no GPU generation replaces them), as the rendered file says
    return LinkTable(MappingProxyType(links), base.rails, base.measured, base.given | set(got)), notes


def render(
    table: LinkTable,
    measured: Sequence[Measurement],
    *,
    probe: str,
    notes: Sequence[str],
    now: datetime | None = None,
    runs: Sequence[Mapping[str, Any]] = (),
    choice: Sequence[str] = (),
) -> str:
    """The calibrated table as an inventory file: ``links:`` (every level, the rails kept) with its
    ``measured:`` record, and ``nodes: []`` (it holds no nodes; merge it with the fleet's files)."""
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    links: dict[str, Any] = {
        lvl: {"bandwidth": k.bandwidth, "latency_us": k.latency_us} for lvl, k in table.links.items()
    }
    if table.rails is not None:
        links["rails"] = dict(table.rails) if table.rails else "gpu_index"
    links[MEASURED_KEY] = {
        "date": when,
        "probe": probe,
        "levels": {
            m.pair.level: {
                "pair": [m.pair.a, m.pair.b],
                **({"gpus": list(m.pair.gpus)} if m.pair.gpus else {}),
                "probe": m.probe,
                "bandwidth": round(m.bandwidth, 4),
                "latency_us": round(m.latency_us, 2),
                **dict(m.detail),
            }
            for m in measured
        },
        **({"notes": list(notes)} if notes else {}),
        **({"probe_choice": list(choice)} if choice else {}),
        **({"runs": [dict(r) for r in runs]} if runs else {}),
    }
    head = (
        f"# slurm-topo calibrate, {when}: link constants measured with the {probe} probe.\n"
        "# Give it to cost/explain with --links FILE, or list it with the inventory's files (in place of\n"
        "# their own links:). Levels not in measured.levels keep the figures of the table it started from.\n"
    )
    return head + yaml.safe_dump({"links": links, "nodes": []}, sort_keys=False, allow_unicode=True)


def one_line(text: str) -> str:
    """``text`` on one line, whole: its lines stripped and joined with `` / `` (a step's stderr says its
    reason on any of them: the probe task's own error first, srun's "task 1: Exited" and "Terminating" after
    it)."""
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def failure_reason(exc: Exception) -> str:
    """Why a probe step failed, whole and on one line. A failed command is named by its program, not its
    argv (the step's srun line, its options and the probe's arguments, runs to hundreds of characters and
    said nothing the pair does not), then how it ended and everything it wrote on stderr."""
    if isinstance(exc, CommandError) and exc.argv:
        if exc.timeout is not None:
            how = f"did not answer within {exc.timeout:g} s"
        elif exc.returncode is None:
            how = "could not be started"
        else:
            how = f"exited {exc.returncode}"
        said = one_line(exc.stderr)
        return f"{exc.argv[0]} {how}" + (f": {said}" if said else "")
    return one_line(str(exc))


class NoLevelMeasured(CommandError):
    """Every pair's probe step failed (exit 3, an external command failed): the message gives each
    failure's reason whole, pairs that failed the same way named together, on one line."""

    def __init__(self, failures: Sequence[tuple[Pair, str]], notes: Sequence[str] = ()) -> None:
        self.failures = tuple(failures)
        by_reason: dict[str, list[str]] = {}
        for pair, why in self.failures:
            by_reason.setdefault(why, []).append(f"{pair.level} ({pair.text()})")
        parts = [f"{', '.join(where)}: {why}" for why, where in by_reason.items()]
        why = "; ".join(parts) or one_line("; ".join(notes[:1])) or "no pair"
        super().__init__(["srun"], None, why)
        self.args = (f"calibrate: no level could be measured: {why}",)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One calibration: the table, what was measured, what could not be, and the file's text."""

    table: LinkTable
    measured: tuple[Measurement, ...]
    notes: tuple[str, ...]
    text: str
    probe: str = "tcp"
    choice: tuple[str, ...] = ()
    """Why this probe (and not another): ``calibrate --probe auto``'s reasons."""


def run_calibration(
    inventory: Inventory,
    nodes: Sequence[str],
    runner: Runner,
    *,
    base: LinkTable,
    probe_command: Sequence[str],
    addresses: Mapping[str, str],
    port: int,
    nbytes: int,
    repeats: int,
    srun_args: Sequence[str] = (),
    time_limit_min: int = 5,
    now: datetime | None = None,
    probe: str = "tcp",
    tools: Mapping[str, NodeTools] | None = None,
    tool_args: Sequence[str] = (),
    choice: Sequence[str] = (),
) -> Outcome:
    """Measure one pair per level among ``nodes`` through ``runner`` (``srun`` steps, one after another)
    and build the calibrated table. A pair whose step fails is a note, not the end: the other levels are
    still measured. Raises :class:`NoLevelMeasured` (a :class:`CommandError`) when no level could be
    measured. ``probe`` ``nccl``/``perftest`` (chosen with :func:`.calibrate_probes.choose_probe` from
    ``tools``, :func:`detect_tools`) runs those tools instead of the TCP probe
    (:func:`run_tool_calibration`)."""
    if probe != "tcp":
        return run_tool_calibration(
            inventory,
            nodes,
            runner,
            ToolSettings(
                probe, base, probe_command, addresses, port, nbytes, srun_args, time_limit_min, tool_args
            ),
            tools or {},
            now=now,
            choice=choice,
        )
    pairs, notes = choose_pairs(inventory, nodes)
    notes += node_level_notes(inventory, nodes)
    measured: list[Measurement] = []
    failures: list[tuple[Pair, str]] = []
    for pair in pairs:
        argv = probe_argv(
            pair,
            probe_command,
            addresses,
            port=port,
            nbytes=nbytes,
            repeats=repeats,
            time_limit_min=time_limit_min,
            srun_args=srun_args,
        )
        try:
            measured.append(read_probe(pair, runner.run(argv, timeout=time_limit_min * 60 + 30)))
        except (CommandError, InputError, PlacementError) as exc:
            failures.append((pair, failure_reason(exc)))
    if not measured:
        raise NoLevelMeasured(failures, notes)
    table, held = calibrated_table(base, measured)
    notes = [
        *(f"{pair.level} ({pair.text()}): {why} (not measured)" for pair, why in failures),
        *notes,
        *held,
    ]
    text = render(table, measured, probe="tcp", notes=notes, now=now, choice=choice)
    return Outcome(table, tuple(measured), tuple(notes), text, "tcp", tuple(choice))


# ---- nccl-tests and perftest


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """How the tool steps run: the probe, the base table, how nodes start slurm-topo, addresses, the port
    (perftest), the largest size, extra srun arguments, the time limit, extra tool arguments."""

    probe: str
    base: LinkTable
    probe_command: Sequence[str]
    addresses: Mapping[str, str]
    port: int
    nbytes: int
    srun_args: Sequence[str] = ()
    time_limit_min: int = 5
    tool_args: Sequence[str] = ()

    def step(self, run: Run, argv: Sequence[str]) -> list[str]:
        return tool_step_argv(
            run,
            argv,
            self.probe_command,
            self.addresses,
            time_limit_min=self.time_limit_min,
            srun_args=self.srun_args,
        )


def plan_tool_runs(
    inventory: Inventory, nodes: Sequence[str], settings: ToolSettings, tools: Mapping[str, NodeTools]
) -> tuple[list[Run], list[str]]:
    """The runs of ``settings.probe`` among ``nodes``, and a note per level it does not measure."""
    pairs, notes = choose_pairs(inventory, nodes)
    network = [(p.level, p.a, p.b) for p in pairs]
    if settings.probe == "nccl":
        runs, more = nccl_runs(
            inventory, nodes, network, settings.base, nbytes=settings.nbytes, tool_args=settings.tool_args
        )
    elif settings.probe == "perftest":
        runs, more = perftest_runs(
            network,
            tools,
            settings.base,
            nbytes=settings.nbytes,
            port=settings.port,
            tool_args=settings.tool_args,
        )
    else:
        raise InputError(f"calibrate: no tool probe {show_value(settings.probe)}")
    return runs, [*notes, *runs_notes_for(settings.probe), *more]


def _measure(runner: Runner, settings: ToolSettings, run: Run, notes: list[str]) -> Result:
    """One run's steps (perftest: bandwidth, then latency) and what they measured."""
    timeout = settings.time_limit_min * 60 + 30
    output = runner.run(settings.step(run, run.argv), timeout=timeout)
    if run.tool == NCCL_TOOL:
        return read_nccl(run, output)
    result = read_perftest_bw(run, output)
    if run.companion is None:
        notes.append(f"{run.level} ({run.text()}): ib_write_lat is not on both nodes: latency not measured")
        return result
    try:
        latency = read_perftest_lat(run, runner.run(settings.step(run, run.companion), timeout=timeout))
    except (CommandError, InputError, PlacementError) as exc:
        notes.append(f"{run.level} ({run.text()}) latency: {failure_reason(exc)} (not measured)")
        return result
    detail = {**dict(result.detail), "latency_command": " ".join(run.companion)}
    return Result(run, result.bandwidth, latency, result.version, detail)


def _run_record(r: Result) -> dict[str, Any]:
    """One run for the ``measured.runs`` list: where, what, the tool's command and version, the figures."""
    return {
        "level": r.run.level,
        "what": r.run.what or None,
        "nodes": list(r.run.nodes),
        **({"gpus": {n: list(g) for n, g in r.run.gpus.items()}} if r.run.gpus else {}),
        "tool": r.run.tool,
        "version": r.version,
        "command": " ".join(r.run.argv),
        "bandwidth": round(r.bandwidth, 4),
        "latency_us": None if r.latency_us is None else round(r.latency_us, 2),
    }


def run_tool_calibration(
    inventory: Inventory,
    nodes: Sequence[str],
    runner: Runner,
    settings: ToolSettings,
    tools: Mapping[str, NodeTools],
    *,
    now: datetime | None = None,
    choice: Sequence[str] = (),
) -> Outcome:
    """:func:`run_calibration` with nccl-tests or perftest: every run of :func:`plan_tool_runs` one after
    another (a failed one is a note), each level's figure from its runs
    (:func:`.calibrate_probes.level_figures`), the table written with each level's tool, version and
    command and every run in ``measured.runs``."""
    runs, notes = plan_tool_runs(inventory, nodes, settings, tools)
    results: list[Result] = []
    failures: list[tuple[Pair, str]] = []
    for run in runs:
        try:
            results.append(_measure(runner, settings, run, notes))
        except (CommandError, InputError, PlacementError) as exc:
            pair = Pair(run.level, run.nodes[0], run.nodes[-1], _pair_gpus(run))
            failures.append((pair, f"{run.what + ': ' if run.what else ''}{failure_reason(exc)}"))
    figures, held = level_figures(results, settings.probe)
    measured = [
        Measurement(
            Pair(f.level, f.run.nodes[0], f.run.nodes[-1], _pair_gpus(f.run)),
            settings.probe,
            f.bandwidth,
            f.latency_us if f.latency_us is not None else settings.base[f.level].latency_us,
            {
                **dict(f.detail),
                **({} if f.latency_us is not None else {"latency": "not measured: the base table's"}),
            },
        )
        for f in figures
    ]
    if not measured:
        raise NoLevelMeasured(failures, [*held, *notes])
    table, monotone = calibrated_table(settings.base, measured)
    notes = [
        *(f"{pair.level} ({pair.text()}): {why} (not measured)" for pair, why in failures),
        *held,
        *notes,
        *monotone,
    ]
    runs_done = [_run_record(r) for r in results]
    text = render(table, measured, probe=settings.probe, notes=notes, now=now, runs=runs_done, choice=choice)
    return Outcome(table, tuple(measured), tuple(notes), text, settings.probe, tuple(choice))


def _pair_gpus(run: Run) -> tuple[int, int] | None:
    if len(run.nodes) == 1 and run.gpus:
        gpus = tuple(run.gpus[run.nodes[0]])
        return (gpus[0], gpus[1]) if len(gpus) == 2 else None
    return None
