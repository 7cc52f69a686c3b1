"""``calibrate --probe nccl|perftest|auto``: which probe, which pairs, which commands, and what their outputs
say (pure: the srun steps run in :mod:`.calibrate`, the tools inside them in :mod:`slurm_topo.probes.tools`).

Which probe (:func:`choose_probe`, from every node's ``probe tools`` report): ``auto`` takes ``nccl`` when
nccl-tests' ``all_reduce_perf`` is on every node's PATH, else ``perftest`` when ``ib_write_bw`` is and every
node has an RDMA device with an active port, else ``tcp``; each probe not taken is named with why.

What each measures, both directions at once, as a ring sends:

* ``nccl``, inside a node: one GPU pair per link class of the node's capture (each ``NV<n>`` bond count,
  ``PIX``/``PXB``/``PHB``/``NODE``, ``SYS``), ``all_reduce_perf -g 2`` on the pair (one process, the pair
  as its ``CUDA_VISIBLE_DEVICES``); between nodes, per network level, ``all_reduce_perf -g 1`` over two
  tasks, one GPU on each node of the level's pair (the same rail: GPU ``k`` and its rail's GPU on the
  other node). Bandwidth: the largest size's out-of-place busbw (for an all-reduce, busbw is ``B`` of the
  model's ``2(p−1)/p · n/B``: GB/s per GPU per direction); latency: the smallest size's time over
  ``2(p−1)`` (the model's ``2(p−1)·α``).
* ``perftest``, per network level: ``ib_write_bw -b`` (bidirectional: the two directions' sum, halved) and
  ``ib_write_lat`` (``t_typical``, the median one-way latency of a 2-byte write), server on the pair's first
  node, client on the second, on each rail's NIC (the ``links: rails`` NICs, else each active RDMA device
  both nodes have) for ``network_group``, the first rail's for the levels further out. A level's figure
  is its slowest rail's. perftest cannot see GPU links: the node levels keep their figures.

A level's figure is its slowest class (a ring runs at its slowest hop), except ``nvlink`` when the capture
has several bond counts (a V100 mesh of NV1 and NV2 pairs): one figure cannot say both, so the level keeps
the GPU generation's per-link figures and NCCL's ring plan, and the measured classes are recorded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, PlacementError, show_value
from ..core.model import Inventory, Node
from ..gpu.gpu_topology import GpuTopology
from ..gpu.rings import gpu_level
from .comm import Fabric, gpu_rail
from .links import LINK_LEVELS, NODE_LEVELS, LinkTable

if TYPE_CHECKING:
    from ..probes.nccl_tests import Half, NcclTable

PROBE_CHOICES = ("auto", "nccl", "perftest", "tcp")
NCCL_TOOL = "all_reduce_perf"
BW_TOOL = "ib_write_bw"
LAT_TOOL = "ib_write_lat"
PERFTEST_MAX_BYTES = 1 << 23
"""perftest's message: at most 8 MiB (its default 5000 iterations of it are ~40 GB each way)."""
NCCL_MIN_BYTES = 8
SMALL_MESSAGE = 1 << 16
"""The largest size whose all-reduce time is read as latency (``2(p−1)·α``; above it bytes dominate)."""


@dataclass(frozen=True, slots=True)
class NodeTools:
    """One node's ``probe tools`` report."""

    node: str
    paths: Mapping[str, str] = field(default_factory=dict)
    rdma: tuple[str, ...] = ()
    """RDMA devices with an active port."""
    link_layers: Mapping[str, str] = field(default_factory=dict)
    perftest_version: str | None = None


def read_tools(output: str) -> dict[str, NodeTools]:
    """The ``probe tools`` lines of a step's output, by the node each ran on."""
    out: dict[str, NodeTools] = {}
    for line in output.splitlines():
        doc = _record(line, "tools")
        if doc is None:
            continue
        paths = doc.get("paths") if isinstance(doc.get("paths"), dict) else {}
        rdma: list[str] = []
        layers: dict[str, str] = {}
        for dev in doc.get("rdma") or ():
            if isinstance(dev, dict) and isinstance(dev.get("name"), str):
                rdma.append(dev["name"])
                ports = [p for p in dev.get("ports") or () if isinstance(p, dict)]
                layers[dev["name"]] = str(ports[0].get("link_layer")) if ports else "?"
        version = doc.get("perftest_version")
        out[str(doc.get("node"))] = NodeTools(
            str(doc.get("node")),
            {str(k): str(v) for k, v in paths.items()},  # type: ignore[union-attr]
            tuple(rdma),
            layers,
            version if isinstance(version, str) else None,
        )
    return out


def _record(line: str, kind: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("slurm_topo_probe") == kind:
        return doc
    return None


@dataclass(frozen=True, slots=True)
class Choice:
    """The probe calibrate runs, and one line per probe on why it was or was not taken."""

    probe: str
    reasons: tuple[str, ...]


def _names(nodes: Sequence[str]) -> str:
    return ", ".join(nodes[:6]) + (f" and {len(nodes) - 6} more" if len(nodes) > 6 else "")


def _nccl_missing(found: Mapping[str, NodeTools], nodes: Sequence[str]) -> list[str]:
    return [n for n in nodes if n not in found or NCCL_TOOL not in found[n].paths]


def _perftest_missing(found: Mapping[str, NodeTools], nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    no_tool = [n for n in nodes if n not in found or BW_TOOL not in found[n].paths]
    no_dev = [n for n in nodes if n in found and not found[n].rdma and n not in no_tool]
    return no_tool, no_dev


def choose_probe(requested: str, found: Mapping[str, NodeTools], nodes: Sequence[str]) -> Choice:
    """The probe to run among ``nodes`` (``requested``: one of :data:`PROBE_CHOICES`) given what each node
    reported (``found``; a node that did not report has no tool). A named probe whose tool is missing is a
    clear error, not a silent other probe."""
    if requested not in PROBE_CHOICES:
        raise InputError(f"calibrate --probe {show_value(requested)}: one of {', '.join(PROBE_CHOICES)}")
    if requested == "tcp":
        return Choice("tcp", ("tcp: asked for (--probe tcp); nccl and perftest not looked for",))
    silent = [n for n in nodes if n not in found]
    nccl_missing = _nccl_missing(found, nodes)
    no_tool, no_dev = _perftest_missing(found, nodes)
    where = found[nodes[0]].paths.get(NCCL_TOOL, "") if nodes and nodes[0] in found else ""
    nccl_ok = f"nccl: {NCCL_TOOL} is on every node's PATH ({nodes[0]}: {where})" if where else ""
    nccl_no = f"nccl not used: {NCCL_TOOL} is not on the PATH of {_names(nccl_missing)}"
    if no_tool:
        perf_no = f"perftest not used: {BW_TOOL} is not on the PATH of {_names(no_tool)}"
    elif no_dev:
        perf_no = f"perftest not used: no RDMA device with an active port on {_names(no_dev)}"
    else:
        perf_no = ""
    perf_ok = f"perftest: {BW_TOOL} and an active RDMA device on every node"
    lines = [f"did not report (srun step): {_names(silent)}"] if silent else []
    if requested == "nccl":
        if nccl_missing:
            raise InputError(f"calibrate --probe nccl: {nccl_no.split(': ', 1)[1]} (try --probe auto)")
        return Choice("nccl", (nccl_ok,))
    if requested == "perftest":
        if perf_no:
            raise InputError(f"calibrate --probe perftest: {perf_no.split(': ', 1)[1]} (try --probe auto)")
        return Choice("perftest", (perf_ok, "nccl not used: --probe perftest asked for"))
    if not nccl_missing:
        return Choice(
            "nccl",
            (*lines, nccl_ok, "perftest not used: nccl measures the network levels too, and the GPUs"),
        )
    if not perf_no:
        return Choice("perftest", (*lines, perf_ok, nccl_no))
    return Choice(
        "tcp", (*lines, "tcp: the built-in probe (Python sockets) runs everywhere", nccl_no, perf_no)
    )


# ---- what to run


@dataclass(frozen=True, slots=True)
class Run:
    """One tool run: the ``level`` it measures, on ``nodes`` (one node for a GPU pair), ``what`` it measures
    there (the link class ``NV2``/``PIX``/``SYS``, or the NIC of a rail), the GPUs per node (None: no GPU),
    the tool's own argv, and ``serve`` (perftest: task 0 the server, task 1 the client)."""

    level: str
    nodes: tuple[str, ...]
    what: str
    tool: str
    argv: tuple[str, ...]
    gpus: Mapping[str, tuple[int, ...]] | None = None
    serve: bool = False
    companion: tuple[str, ...] | None = None
    """perftest: the latency tool's argv, run as its own step after the bandwidth one."""

    def text(self) -> str:
        if len(self.nodes) == 1 and self.gpus:
            gpus = ",".join(str(g) for g in self.gpus[self.nodes[0]])
            return f"{self.nodes[0]} GPUs {gpus} ({self.what})"
        return f"{' <-> '.join(self.nodes)}" + (f" ({self.what})" if self.what else "")


def gpu_classes(topo: GpuTopology) -> list[tuple[str, str, int, int]]:
    """(level, class, i, j): the first GPU pair (in index order) of each link class the capture shows, the
    levels fastest first, then the classes by name."""
    first: dict[str, tuple[str, str, int, int]] = {}
    for n, i in enumerate(topo.gpus):
        for j in topo.gpus[n + 1 :]:
            level = gpu_level(topo, i, j)
            if level not in NODE_LEVELS or level == "node":
                continue
            cls = topo.link(i, j)
            first.setdefault(cls, (level, cls, i, j))
    return sorted(first.values(), key=lambda r: (LINK_LEVELS.index(r[0]), r[1]))


def _capture(node: Node) -> GpuTopology | None:
    """The node's capture where it links two GPUs or more."""
    topo = node.gpu_topology
    return topo if topo is not None and topo.has_links and len(topo.gpus) >= 2 else None


def _gpu_node(
    inventory: Inventory, nodes: Sequence[str]
) -> tuple[tuple[Node, GpuTopology] | None, list[str]]:
    """The node whose capture the node levels are measured on (the first by name with link data between
    two GPUs or more), and a note where the nodes hold other GPU link layouts."""
    known = {n.name: n for n in inventory.nodes}
    with_links = [(known[n], topo) for n in sorted(set(nodes)) if (topo := _capture(known[n])) is not None]
    if not with_links:
        return None, [
            f"{', '.join(NODE_LEVELS)}: no node given has a GPU capture (gpu_topology): not measured"
        ]
    chosen, topo = with_links[0]
    other = sorted(
        {n.name for n, t in with_links if (n.gpu_type, t.matrix) != (chosen.gpu_type, topo.matrix)}
    )
    notes = []
    if other:
        notes.append(
            f"node levels measured on {chosen.name}; {_names(other)} have other GPUs or links (links: holds "
            "one figure per level for the fleet)"
        )
    return (chosen, topo), notes


def nccl_runs(
    inventory: Inventory,
    nodes: Sequence[str],
    network_pairs: Sequence[tuple[str, str, str]],
    table: LinkTable,
    *,
    nbytes: int,
    tool_args: Sequence[str] = (),
) -> tuple[list[Run], list[str]]:
    """The nccl-tests runs: a GPU pair per link class of one node's capture, and per network level
    (``network_pairs``: (level, a, b)) one GPU on each node, on one rail."""
    sweep = ("-b", str(NCCL_MIN_BYTES), "-e", str(max(nbytes, NCCL_MIN_BYTES)), "-f", "2")
    runs: list[Run] = []
    chosen, notes = _gpu_node(inventory, nodes)
    if chosen is not None:
        node, topo = chosen
        for level, cls, i, j in gpu_classes(topo):
            argv = (NCCL_TOOL, *sweep, "-g", "2", *tool_args)
            runs.append(Run(level, (node.name,), cls, NCCL_TOOL, argv, {node.name: (i, j)}))
    fabric = Fabric.of(inventory)
    for level, a, b in network_pairs:
        gpus = _rail_gpus(fabric, table, a, b)
        if gpus is None:
            notes.append(f"{level} ({a} <-> {b}): a node holds no GPU in the inventory: not measured")
            continue
        argv = (NCCL_TOOL, *sweep, "-g", "1", *tool_args)
        runs.append(Run(level, (a, b), "", NCCL_TOOL, argv, {a: (gpus[0],), b: (gpus[1],)}))
    return runs, notes


def _rail_gpus(fabric: Fabric, table: LinkTable, a: str, b: str) -> tuple[int, int] | None:
    """GPU 0 of ``a`` (its lowest index) and the GPU of ``b`` on the same rail (:func:`.comm.gpu_rail`;
    the same index where rails follow indices or are not known)."""
    ga, gb = _gpu_list(fabric.node(a)), _gpu_list(fabric.node(b))
    if not ga or not gb:
        return None
    rail = gpu_rail(fabric, table, (a, ga[0]))
    same = [g for g in gb if gpu_rail(fabric, table, (b, g)) == rail]
    return ga[0], (same[0] if same else (ga[0] if ga[0] in gb else gb[0]))


def _gpu_list(node: Node) -> list[int]:
    if node.gpu_topology is not None and node.gpu_topology.gpus:
        return list(node.gpu_topology.gpus)
    return list(range(node.gpus or 0))


def perftest_runs(
    network_pairs: Sequence[tuple[str, str, str]],
    found: Mapping[str, NodeTools],
    table: LinkTable,
    *,
    nbytes: int,
    port: int,
    tool_args: Sequence[str] = (),
) -> tuple[list[Run], list[str]]:
    """The perftest runs: per network level's pair, each rail's NIC for ``network_group`` and the first
    rail's further out, bandwidth (``ib_write_bw -b``) then latency (``ib_write_lat``)."""
    size = str(min(max(nbytes, 2), PERFTEST_MAX_BYTES))
    runs: list[Run] = []
    notes: list[str] = []
    for level, a, b in network_pairs:
        devices = _devices(table, found, a, b)
        if not devices:
            notes.append(f"{level} ({a} <-> {b}): no RDMA device both nodes have: not measured")
            continue
        for dev in devices if level == "network_group" else devices[:1]:
            bw = (BW_TOOL, "-d", dev, "-b", "-s", size, "-F", "--report_gbits", "-p", str(port), *tool_args)
            lat = (
                (LAT_TOOL, "-d", dev, "-s", "2", "-F", "-p", str(port), *tool_args)
                if all(LAT_TOOL in found[n].paths for n in (a, b) if n in found)
                else None
            )
            runs.append(Run(level, (a, b), dev, BW_TOOL, bw, None, True, lat))
    return runs, notes


def _devices(table: LinkTable, found: Mapping[str, NodeTools], a: str, b: str) -> list[str]:
    """The NICs to measure between ``a`` and ``b``: the ``links: rails`` NICs in rail order where given,
    else the active RDMA devices both report (by name); only those both nodes have active."""
    both = [d for d in (found[a].rdma if a in found else ()) if b in found and d in found[b].rdma]
    if table.rails:
        order = sorted(table.rails, key=lambda nic: (_rail_key(table.rails[nic]), nic))  # type: ignore[index]
        return [nic for nic in order if nic in both]
    return sorted(both)


def _rail_key(rail: str) -> tuple[int, str]:
    return (int(rail), "") if rail.isdigit() else (1 << 30, rail)


def runs_notes_for(probe: str) -> list[str]:
    """What a probe cannot measure (said in the table's notes)."""
    if probe == "perftest":
        return [f"{', '.join(NODE_LEVELS)}: perftest cannot measure GPU links (kept from the base table)"]
    return []


# ---- reading what ran


@dataclass(frozen=True, slots=True)
class Result:
    """What one run measured: GB/s per GPU per direction (both directions running), latency in µs (None:
    not measured), and its provenance."""

    run: Run
    bandwidth: float
    latency_us: float | None
    version: str | None
    detail: Mapping[str, Any] = field(default_factory=dict)


def tool_records(run: Run, output: str) -> list[dict[str, Any]]:
    """The ``probe tool`` lines of a step's output, checked against Slurm's word on where each task ran:
    :class:`PlacementError` when they ran on other nodes than the run's, :class:`InputError` with none."""
    records = [doc for line in output.splitlines() if (doc := _record(line, "tool")) is not None]
    if not records:
        raise InputError(f"calibrate {run.level} ({run.text()}): the step printed no tool output")
    ran_on = sorted({str(r.get("node")) for r in records})
    if ran_on != sorted(set(run.nodes)):
        want = ",".join(sorted(set(run.nodes)))
        raise PlacementError(f"calibrate {run.level}: the tool ran on {','.join(ran_on)}, not {want}")
    return records


def _nccl_table(run: Run, records: Sequence[Mapping[str, Any]], ranks: int, where: str) -> NcclTable:
    """The all_reduce table the tool printed, checked: as many ranks as asked, on as many hosts."""
    from ..probes.nccl_tests import parse_nccl_tests

    tables = [t for r in records for t in parse_nccl_tests(str(r.get("output", "")), where)]
    tables = [t for t in tables if t.collective in (None, "all_reduce") and t.rows]
    if not tables:
        raise InputError(f"{where}: {NCCL_TOOL} printed no all_reduce table")
    t = tables[-1]
    if t.ranks is not None and t.ranks != ranks:
        raise InputError(f"{where}: the table is of {t.ranks} ranks, not the {ranks} asked for")
    if t.hosts and len(t.hosts) != len(run.nodes):
        raise PlacementError(f"{where}: the ranks ran on {len(t.hosts)} host(s), not {len(run.nodes)}")
    return t


def _nccl_rows(t: NcclTable, where: str) -> tuple[int, Half, int, Half]:
    """(bytes, out-of-place half) of the largest and of the smallest size above 0; wrong results refused."""
    rows = [(r.bytes, r.out_of_place) for r in t.rows if r.out_of_place is not None and r.bytes > 0]
    if not rows:
        raise InputError(f"{where}: no out-of-place row of a size above 0")
    wrong = [size for size, half in rows if half.wrong]
    if wrong:
        raise InputError(f"{where}: {NCCL_TOOL} found wrong results at {wrong[0]} bytes: not a measurement")
    big, small = max(rows, key=lambda r: r[0]), min(rows, key=lambda r: r[0])
    return big[0], big[1], small[0], small[1]


def read_nccl(run: Run, output: str) -> Result:
    """busbw of the largest size and latency from the smallest, from the tool's all_reduce table."""
    records = tool_records(run, output)
    ranks = sum(len(g) for g in (run.gpus or {}).values()) or 2
    where = f"calibrate {run.level} ({run.text()})"
    t = _nccl_table(run, records, ranks, where)
    big_bytes, big, small_bytes, small = _nccl_rows(t, where)
    bandwidth = big.busbw_gbs
    # the smallest size's time is 2(p−1)·α only for a small message (a sweep from 8 bytes, not from 1 GiB)
    latency = small.time_us / (2 * (ranks - 1)) if small_bytes <= SMALL_MESSAGE else None
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise InputError(f"{where}: busbw {bandwidth} at {big_bytes} bytes is not a rate")
    detail = {
        "bytes": big_bytes,
        "busbw_at": big_bytes,
        "latency_from_bytes": small_bytes,
        "ranks": ranks,
        **({"hosts": list(t.hosts)} if t.hosts else {}),
    }
    return Result(run, bandwidth, latency, t.nccl_version, detail)


def read_perftest_bw(run: Run, output: str) -> Result:
    """The client's bandwidth at the run's size, halved when bidirectional (both directions summed)."""
    from ..probes.perftest import BwRow, parse_perftest

    records = tool_records(run, output)
    where = f"calibrate {run.level} ({run.text()})"
    client = [r for r in records if r.get("role") == "connect"]
    tables = [t for r in client for t in parse_perftest(str(r.get("output", "")), where) if t.kind == "bw"]
    rows = [(t, r) for t in tables for r in t.rows if isinstance(r, BwRow)]
    if not rows:
        raise InputError(f"{where}: the {BW_TOOL} client printed no bandwidth row")
    table, row = max(rows, key=lambda tr: tr[1].bytes)
    assert isinstance(row, BwRow)
    both = "-b" in run.argv
    if both and not table.bidirectional:
        raise InputError(f"{where}: asked for -b but the output is not a bidirectional test")
    bandwidth = row.bw_average_gbs / (2 if table.bidirectional else 1)
    detail = {
        "bytes": row.bytes,
        "bidirectional_sum": row.bw_average_gbs if table.bidirectional else None,
        "device": table.device or run.what,
        "link_type": table.link_type,
    }
    return Result(run, bandwidth, None, None, {k: v for k, v in detail.items() if v is not None})


def read_perftest_lat(run: Run, output: str) -> float:
    """``t_typical`` (the median) of the latency client's smallest size, in µs."""
    from ..probes.perftest import LatRow, parse_perftest

    records = tool_records(run, output)
    where = f"calibrate {run.level} ({run.text()}) latency"
    client = [r for r in records if r.get("role") == "connect"]
    rows = [
        r
        for rec in client
        for t in parse_perftest(str(rec.get("output", "")), where)
        if t.kind == "lat"
        for r in t.rows
        if isinstance(r, LatRow)
    ]
    typical = [r for r in rows if r.t_typical_us is not None]
    if not typical:
        raise InputError(f"{where}: the {LAT_TOOL} client printed no t_typical")
    best = min(typical, key=lambda r: r.bytes)
    assert best.t_typical_us is not None
    return best.t_typical_us


# ---- from results to levels


@dataclass(frozen=True, slots=True)
class LevelFigure:
    """A level's figure from its runs: the slowest run's bandwidth, the largest latency measured."""

    level: str
    run: Run
    bandwidth: float
    latency_us: float | None
    detail: Mapping[str, Any]


def level_figures(results: Sequence[Result], probe: str) -> tuple[list[LevelFigure], list[str]]:
    """Each level's figure from its results (see the module docstring), and a note per level that keeps
    its figure (an NVLink mesh of several bond counts)."""
    by_level: dict[str, list[Result]] = {}
    for r in results:
        by_level.setdefault(r.run.level, []).append(r)
    figures: list[LevelFigure] = []
    notes: list[str] = []
    for level in LINK_LEVELS:
        got = by_level.get(level)
        if not got:
            continue
        parts = {
            r.run.what or "-": {
                "pair": r.run.text(),
                "bandwidth": round(r.bandwidth, 4),
                **({"latency_us": round(r.latency_us, 2)} if r.latency_us is not None else {}),
            }
            for r in got
        }
        if level == "nvlink" and len({r.run.what for r in got}) > 1:
            shown = ", ".join(f"{r.run.what} {r.bandwidth:.4g} GB/s" for r in got)
            notes.append(
                f"nvlink: measured {shown}; one figure cannot say every bond, so the level keeps the GPU "
                "generation's per-link figures and NCCL's ring plan"
            )
            continue
        slow = min(got, key=lambda r: r.bandwidth)
        latencies = [r.latency_us for r in got if r.latency_us is not None]
        versions = sorted({r.version for r in got if r.version})
        key = "classes" if level in NODE_LEVELS else "rails"
        detail = {
            "tool": slow.run.tool,
            **({"version": ", ".join(versions)} if versions else {}),
            "command": " ".join(slow.run.argv),
            **dict(slow.detail),
            **({key: parts} if len(parts) > 1 or level in NODE_LEVELS else {}),
        }
        figures.append(
            LevelFigure(level, slow.run, slow.bandwidth, max(latencies) if latencies else None, detail)
        )
    return figures, notes
