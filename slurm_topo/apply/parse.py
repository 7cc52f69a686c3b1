"""Parsing what apply writes and what slurmctld shows (pure): node lines, gres ``Cores=``, headers,
and the differences the verification reports."""

from __future__ import annotations

from collections.abc import Mapping

from ..core import hostlist
from ..core.errors import HostlistError, ParseError
from ..slurmconfig.slurmconf import logical_lines as _logical_lines
from ..slurmconfig.slurmconf import parse_gres_gpus, parse_topology_conf, split_pairs
from .base import _HEADER_RE, GRES, NODES


def has_header(data: bytes) -> bool:
    head = data[:2048].decode("utf-8", "replace")
    return bool(_HEADER_RE.search("\n".join(head.splitlines()[:6])))


def parse_node_lines(text: str, source: str = NODES) -> dict[str, frozenset[str]]:
    """``NodeName=`` lines → node → its Features (a set). Raises ParseError on anything else in the file."""
    nodes: dict[str, frozenset[str]] = {}
    for lineno, line in _logical_lines(text):
        try:
            pairs = split_pairs(line)
        except ValueError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        keys = {k.lower(): v for k, v in pairs.items()}
        if list(pairs)[0].lower() != "nodename":
            raise ParseError(source, lineno, "expected only NodeName= lines")
        if keys["nodename"].upper() == "DEFAULT":
            raise ParseError(source, lineno, "NodeName=DEFAULT would leak into the admin's other nodes")
        try:
            names = hostlist.expand(keys["nodename"])
        except HostlistError as exc:
            raise ParseError(source, lineno, str(exc)) from None
        feats = frozenset(f for f in keys.get("features", "").split(",") if f)
        for n in names:
            if n in nodes:
                raise ParseError(source, lineno, f"node {n} is defined twice")
            nodes[n] = feats
    return nodes


def future_nodes(text: str, source: str = NODES) -> frozenset[str]:
    """The nodes of ``NodeName=`` lines with ``State=FUTURE`` (24.x's NVLink block placeholders): slurmctld
    knows them but ``scontrol show node`` does not list them."""
    out: set[str] = set()
    for lineno, line in _logical_lines(text):
        try:
            keys = {k.lower(): v for k, v in split_pairs(line).items()}
            if keys.get("state", "").upper() == "FUTURE":
                out.update(hostlist.expand(keys["nodename"]))
        except (ValueError, KeyError, HostlistError) as exc:
            raise ParseError(source, lineno, str(exc)) from None
    return frozenset(out)


def parse_gres_cores(text: str, source: str = GRES) -> dict[str, tuple[str, ...]]:
    """gres.conf → node → the Cores= values of its GPU lines in file order ('' where absent)."""
    return {
        node: tuple(line.get("cores", "") for line in lines)
        for node, lines in parse_gres_gpus(text, source=source).items()
    }


def _written_topology(text: str) -> dict[str, tuple[frozenset[str] | None, frozenset[str] | None]]:
    return {
        sw.name: (
            frozenset(sw.nodes) if sw.nodes is not None else None,
            frozenset(sw.switches) if sw.switches is not None else None,
        )
        for sw in parse_topology_conf(text)
    }


def topology_difference(written: str, shown: str) -> list[str]:
    """What ``scontrol show topology`` lacks or has more than the written topology.conf (empty: equal).
    Inner switches are compared by their child switches (Slurm lists every node below them), leaves by
    nodes."""
    from ..access.text import parse_show_topology  # the access layer: loaded by verification, not planning

    want = _written_topology(written)
    have = parse_show_topology(shown)
    diff = [f"switch {n} missing in slurmctld" for n in sorted(set(want) - set(have))]
    diff += [f"switch {n} in slurmctld but not written" for n in sorted(set(have) - set(want))]
    for name in sorted(set(want) & set(have)):
        nodes, sws = want[name]
        live_nodes, live_sws = have[name]
        if sws is not None and frozenset(sws) != live_sws:
            diff.append(
                f"switch {name}: switches {hostlist.compress(sorted(live_sws)) or '-'} in slurmctld, "
                f"written {','.join(sorted(sws))}"
            )
        if nodes is not None and nodes != live_nodes:
            diff.append(
                f"switch {name}: nodes {hostlist.compress(sorted(live_nodes)) or '-'} in slurmctld, "
                f"written {hostlist.compress(sorted(nodes))}"
            )
    return diff


def features_difference(written_nodes: Mapping[str, frozenset[str]], scontrol_nodes_text: str) -> list[str]:
    from ..access.text import parse_scontrol_nodes  # the access layer: loaded by verification, not planning

    live = {
        r["NodeName"]: r.get("AvailableFeatures", "(null)") for r in parse_scontrol_nodes(scontrol_nodes_text)
    }
    diff = []
    for node in sorted(written_nodes):
        if node not in live:
            diff.append(f"node {node} unknown to slurmctld")
            continue
        have = frozenset() if live[node] in ("", "(null)") else frozenset(live[node].split(","))
        if have != written_nodes[node]:
            diff.append(
                f"node {node}: features {','.join(sorted(have)) or '-'} in slurmctld, written "
                f"{','.join(sorted(written_nodes[node])) or '-'}"
            )
    return diff


def _nodes_hl(names: set[str] | frozenset[str]) -> str:
    return hostlist.compress(sorted(names)) if names else "-"
