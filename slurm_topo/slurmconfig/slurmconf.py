"""Parsers for Slurm's configuration files: topology.conf, NodeName= lines of slurm.conf, gres.conf GPU lines
(and the ``Key=value`` splitting the readers of Slurm's output share: :mod:`slurm_topo.access.text` parses
what live Slurm prints).

Pure functions from text to values; they never run a command or read a file (slurm.conf and the files it
includes are read by :mod:`slurm_topo.slurmconfig.slurmconf_files`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..core import hostlist
from ..core.errors import HostlistError, ParseError
from ..gpu.gpu_topology import GpuTopology

_KEY = r"([A-Za-z][A-Za-z0-9_/]*)="
OUTPUT_KEY = r"([A-Z][A-Za-z0-9_:/]*)="
"""Keys in scontrol's output are CamelCase: a lower-case ``locality=`` inside a Comment value is not a key."""

_SPLITS = {  # (output, blanks are the line's only whitespace) -> the pattern that splits the line at its keys
    (False, False): re.compile(r"\s" + _KEY),
    (True, False): re.compile(r"\s" + OUTPUT_KEY),
    (False, True): re.compile(" " + _KEY),
    (True, True): re.compile(" " + OUTPUT_KEY),
}
"""A key starts the line or follows whitespace: ``split_pairs`` puts a blank before the line, so one
``re.split`` finds every key in C (a match object for each key took 1.8x the CPU); where a blank is the only
whitespace of the line, the pattern starts with a blank, which the engine finds faster than any whitespace."""

_ASCII_SPACES_BUT_BLANK = ("\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f")
"""The ASCII characters ``str.isspace`` and the ``\\s`` of a pattern count as whitespace, less the blank."""


def blanks_only(line: str) -> bool:
    """True when the blank is the only whitespace in ``line``: ASCII (no Unicode spaces) and none of
    ``_ASCII_SPACES_BUT_BLANK``."""
    if not line.isascii():
        return False
    for space in _ASCII_SPACES_BUT_BLANK:
        if space in line:
            return False
    return True


@dataclass(frozen=True, slots=True)
class SwitchLine:
    name: str
    nodes: tuple[str, ...] | None
    switches: tuple[str, ...] | None
    lineno: int
    level: int | None = None
    """Only in ``scontrol show topology`` output (leaf = 0)."""


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines without comments, with ``\\`` continuations joined, numbered by their first physical line."""
    pending, start = "", 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = lineno
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield start, line
    if pending.strip():
        yield start, pending.strip()


def split_pairs(line: str, *, output: bool = False) -> dict[str, str]:
    """``Key=value Key2=value with spaces`` -> dict; a value runs up to the next `` Key=``.

    ``output``: a line of scontrol's output (CamelCase keys only; the first of a repeated key wins).
    """
    parts = _SPLITS[output, blanks_only(line)].split(" " + line)
    # [text before the first key, key, value, key, value, ...]
    if len(parts) < 3 or parts[0].strip():
        raise ValueError("expected Key=value pairs")
    keys = list(map(sys.intern, parts[1::2]))  # one string per key name, not one a line: a third less memory
    out = dict(zip(keys, map(str.strip, parts[2::2]), strict=True))  # a repeated key: the last value
    if output and len(out) < len(keys):  # scontrol's output gives a key twice: the first value wins
        out = {}
        for key, value in zip(keys, parts[2::2], strict=True):
            out.setdefault(key, value.strip())
    return out


def parse_topology_conf(
    text: str, *, source: str = "topology.conf", scontrol_output: bool = False
) -> list[SwitchLine]:
    """topology.conf(5) tree syntax -> one ``SwitchLine`` per ``SwitchName=`` (hostlists expanded).

    ``scontrol_output``: read ``scontrol show topology`` instead — other lines are skipped, ``Level=`` is
    kept, ``(null)`` means none, and a parent lists every node below it as well as its switches.
    """
    out = []
    for lineno, line in logical_lines(text):
        if scontrol_output and not line.startswith("SwitchName="):
            continue
        try:
            pairs = {k.lower(): v for k, v in split_pairs(line, output=scontrol_output).items()}
        except ValueError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        if scontrol_output:
            pairs = {k: v for k, v in pairs.items() if v != "(null)"}
        allowed = {"switchname", "nodes", "switches", "linkspeed"} | ({"level"} if scontrol_output else set())
        unknown = set(pairs) - allowed
        if "switchname" not in pairs:
            raise ParseError(source, lineno, "expected SwitchName= (only topology/tree syntax is read)")
        if unknown and not scontrol_output:
            raise ParseError(source, lineno, f"unknown key {sorted(unknown)[0]!r}")
        try:
            nodes = tuple(hostlist.expand_keep_duplicates(pairs["nodes"])) if "nodes" in pairs else None
            switches = (
                tuple(hostlist.expand_keep_duplicates(pairs["switches"])) if "switches" in pairs else None
            )
        except HostlistError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        level = int(pairs["level"]) if pairs.get("level", "").isdigit() else None
        out.append(SwitchLine(pairs["switchname"], nodes, switches, lineno, level))
    return out


def parse_gres_gpus(text: str, *, source: str = "gres.conf") -> dict[str, list[dict[str, str]]]:
    """gres.conf -> per node, its ``Name=gpu`` lines in file order (Slurm's GPU index) as
    {lower-case key: value}.

    Lines this reader does not understand are skipped: a foreign gres.conf may hold other syntax.
    """
    out: dict[str, list[dict[str, str]]] = {}
    for lineno, line in logical_lines(text):
        try:
            pairs = {k.lower(): v for k, v in split_pairs(line).items()}
        except ValueError:
            continue
        if "nodename" not in pairs or pairs.get("name") != "gpu":
            continue
        try:
            names = hostlist.expand(pairs["nodename"])
        except HostlistError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        for node in names:
            out.setdefault(node, []).append(pairs)
    return out


def parse_gres_links(text: str, source: str = "gres.conf") -> dict[str, GpuTopology]:
    """Per node, the GPU×GPU link classes from the ``Links=`` of its ``Name=gpu`` lines (index = line order).

    ``Links=`` counts NVLinks per peer: ``n > 0`` → ``NV<n>``, ``0`` → no NVLink (``SYS``: the PCIe path is
    not in gres.conf). Nodes whose GPU lines carry no ``Links=`` are left out.
    """
    out: dict[str, GpuTopology] = {}
    for node, lines in parse_gres_gpus(text, source=source).items():
        if any("links" not in line for line in lines):
            continue
        n = len(lines)
        matrix = []
        for i, line in enumerate(lines):
            try:
                r = [int(x) for x in line["links"].split(",")]
            except ValueError:
                raise ParseError(source, None, f"bad Links={line['links']} for {node}") from None
            if len(r) != n or r[i] != -1:
                raise ParseError(
                    source,
                    None,
                    f"{node}: GPU {i} has Links={line['links']}, expected {n} "
                    "entries with -1 at its own index",
                )
            matrix.append(tuple("X" if j == i else (f"NV{c}" if c > 0 else "SYS") for j, c in enumerate(r)))
        out[node] = GpuTopology(gpus=tuple(range(n)), matrix=tuple(matrix), source=f"{source} Links=")
    return out


_CONSTRAIN_DEVICES_RE = re.compile(r"\s*ConstrainDevices\s*=\s*(\S+)", re.IGNORECASE)


def devices_constrained(config: Mapping[str, str], cgroup_conf: str | None) -> bool:
    """True when tasks see local GPU indices: ``TaskPlugin`` has task/cgroup and cgroup.conf has
    ``ConstrainDevices=yes``."""
    if "task/cgroup" not in config.get("TaskPlugin", ""):
        return False
    for line in (cgroup_conf or "").splitlines():
        m = _CONSTRAIN_DEVICES_RE.match(line.split("#", 1)[0])
        if m:
            return m.group(1).lower() == "yes"
    return False
