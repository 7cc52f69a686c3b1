"""One inventory document: its top-level keys (``nodes``, ``policy``, ``nvlink``, ``links``), parsed into a
:class:`Loaded` (nodes, policy, NVLink and link settings, warnings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core import hostlist
from ..core.errors import HostlistError, InputError, InventoryError
from ..core.model import (
    LABEL_RE,
    MAX_NODES,
    NVLINK_TOPOLOGIES,
    Node,
    NvlinkConfig,
    PolicyConfig,
)
from ..plumbing.collector import collector_paused
from ..policy.vocab import parse_locality, parse_segment
from .entry import FAMILY_RE, HOSTLIST_RE, Entry
from .yaml_safe import Shown, key_text, load_yaml

TOP_KEYS = frozenset({"nodes", "policy", "nvlink", "links"})


@dataclass(frozen=True, slots=True)
class Loaded:
    """One file's records before merging."""

    source: str
    nodes: tuple[Node, ...]
    warnings: tuple[str, ...]
    policy: PolicyConfig | None = None
    nvlink: NvlinkConfig | None = None
    links: Any = None
    """The file's ``links:`` table (``slurm_topo.cost.links.LinkTable``), None without one."""
    ordered_runs: tuple[int, ...] = field(default=(), compare=False, repr=False)
    """Where stretches of ``nodes`` known to be in natural order end (each entry of plain ranges is one): the
    merge orders the stretches instead of every node. Empty: nothing known (every node its own stretch)."""


def parse_inventory(
    text: str, *, source: str = "<inventory>", base: Path | None = None, max_nodes: int = MAX_NODES
) -> Loaded:
    """Validate one inventory document and expand it into per-node records (not yet merged).

    ``max_nodes`` bounds the nodes this document may name (what is left of ``MAX_NODES`` after earlier
    files)."""
    with collector_paused():
        return _parse_inventory(text, source, base, max_nodes)


def _parse_inventory(text: str, source: str, base: Path | None, max_nodes: int) -> Loaded:
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InventoryError(source, where, f"not valid YAML: {problem[:200]}") from None
    if not isinstance(doc, Mapping):
        raise InventoryError(source, "", f"must be a mapping with a 'nodes' list, not {type(doc).__name__}")
    for key in doc:
        if key not in TOP_KEYS:
            raise InventoryError(source, key_text(key), "unknown key", Shown(key), has_value=True)
    policy = _parse_policy(source, doc["policy"]) if doc.get("policy") is not None else None
    links = None
    if doc.get("links") is not None:  # the cost model's link table: validated here, read by the model
        from ..cost.links import parse_links

        links = parse_links(doc["links"], source=f"{source}: links")
    nvlink = _parse_nvlink(source, doc["nvlink"]) if doc.get("nvlink") is not None else None
    entries = doc.get("nodes")
    if not isinstance(entries, list):
        raise InventoryError(
            source, "nodes", "must be a list of node entries", Shown(entries), has_value=True
        )
    nodes: list[Node] = []
    warnings: list[str] = []
    topologies: dict[Path, Any] = {}
    counted = 0  # every entry's names are counted before any is expanded
    for i, raw in enumerate(entries):
        expr = raw.get("name") if isinstance(raw, Mapping) else None
        if isinstance(expr, str) and HOSTLIST_RE.match(expr):
            try:
                counted += hostlist.check_size(expr, max_nodes - counted)
            except HostlistError as exc:
                raise InventoryError(source, f"nodes[{i}].name", exc.reason, expr, has_value=True) from None
    runs: list[int] = []
    for i, raw in enumerate(entries):
        entry = Entry(source, i, raw, base, topologies)
        made = entry.nodes()
        if entry.ordered:
            nodes.extend(made)
            runs.append(len(nodes))
        else:
            for node in made:
                nodes.append(node)
                runs.append(len(nodes))
        warnings.extend(entry.warnings)
    return Loaded(source, tuple(nodes), tuple(warnings), policy, nvlink, links, tuple(runs))


MAX_BLOCK_SIZE = 65_536

MAX_NVLINK_DOMAINS = 65_536


def _parse_nvlink(source: str, raw: object) -> NvlinkConfig:
    def fail(where: str, reason: str, value: object) -> InventoryError:
        return InventoryError(source, f"nvlink{where[:80]}", reason, Shown(value), has_value=True)

    if not isinstance(raw, Mapping):
        raise fail("", f"must be a mapping, not {type(raw).__name__}", raw)
    for key in raw:
        if key not in ("topology", "block_sizes", "domains"):
            raise fail(f".{key_text(key)}", "unknown key (known: topology, block_sizes, domains)", key)
    topology = raw.get("topology", "auto")
    if topology not in NVLINK_TOPOLOGIES:
        raise fail(".topology", f"must be one of {', '.join(NVLINK_TOPOLOGIES)}", topology)
    sizes = raw.get("block_sizes") or []
    if isinstance(sizes, int) and not isinstance(sizes, bool):
        sizes = [sizes]
    if not isinstance(sizes, list) or len(sizes) > 32:
        raise fail(".block_sizes", "must be a list of at most 32 node counts, base block first", sizes)
    for i, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_BLOCK_SIZE:
            raise fail(f".block_sizes[{i}]", f"must be an integer from 1 to {MAX_BLOCK_SIZE}", size)
    domains = raw.get("domains") or []
    if not isinstance(domains, list) or len(domains) > MAX_NVLINK_DOMAINS:
        raise fail(".domains", f"must be a list of at most {MAX_NVLINK_DOMAINS} domain labels", domains)
    seen: dict[str, None] = {}
    for i, domain in enumerate(domains):
        if not isinstance(domain, str) or not LABEL_RE.match(domain):
            raise fail(f".domains[{i}]", "must be 1-63 characters from [A-Za-z0-9._-]", domain)
        if domain in seen:
            raise fail(f".domains[{i}]", "is listed twice", domain)
        seen[domain] = None
    return NvlinkConfig(topology, tuple(sizes), tuple(seen))


def _is_locality(text: str) -> bool:
    """``LEVEL[:MODE]`` as the filter reads it (the one grammar: ``policy.vocab.parse_locality``)."""
    try:
        parse_locality(text)
    except InputError:
        return False
    return True


def _parse_policy(source: str, raw: object) -> PolicyConfig:
    def fail(where: str, reason: str, value: object) -> InventoryError:
        return InventoryError(source, f"policy{where[:80]}", reason, Shown(value), has_value=True)

    def locality(where: str, value: object) -> str:
        if not isinstance(value, str) or not _is_locality(value):
            raise fail(
                where,
                "must be LEVEL[:MODE], LEVEL prefer|nvl|network_group|zone|region|any, MODE wait|fail|auto "
                "(nvl: wait|fail)",
                value,
            )
        return value

    if not isinstance(raw, Mapping):
        raise fail("", f"must be a mapping, not {type(raw).__name__}", raw)
    for key in raw:
        if key not in ("default", "partitions", "families", "plan", "nvl_segment"):
            raise fail(f".{key_text(key)}", "unknown key", key)
    default = locality(".default", raw.get("default", "prefer"))
    parts: list[tuple[str, str]] = []
    fams: list[tuple[str, str]] = []
    for key, out in (("partitions", parts), ("families", fams)):
        table = raw.get(key) or {}
        if not isinstance(table, Mapping):
            raise fail(f".{key}", f"must be a mapping, not {type(table).__name__}", table)
        for name, value in table.items():
            if not isinstance(name, str) or not LABEL_RE.match(name):
                raise fail(f".{key}", "names must be 1-63 characters from [A-Za-z0-9._-]", name)
            if key == "partitions":
                out.append((name, locality(f".partitions.{name}", value)))
            else:
                if not isinstance(value, str) or not FAMILY_RE.match(value):
                    raise fail(f".families.{name}", "must be a feature glob such as 'torch-*'", value)
                out.append((name, value))
    plan = raw.get("plan")
    if plan is not None:
        from ..cost import parse_plan  # the cost model's grammar, validated once here

        if not isinstance(plan, str):
            raise fail(".plan", "must be a string such as 'tp=8,pp=4,bytes=10G'", plan)
        try:
            parse_plan(plan)
        except InputError as exc:
            raise fail(".plan", str(exc)[:200], plan) from None
    return PolicyConfig(
        default, tuple(sorted(parts)), tuple(sorted(fams)), plan, _nvl_segment(raw.get("nvl_segment"), fail)
    )


def _nvl_segment(value: object, fail: Callable[[str, str, object], InventoryError]) -> str | None:
    """``policy.nvl_segment``: ``N`` or ``N:spread|consolidate`` (the segment part of
    ``--locality=nvl:segment=…``, read by ``policy.vocab.parse_segment``); None when not given."""
    if value is None:
        return None
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    ok = isinstance(text, str) and text.split(":")[-1] not in ("wait", "fail")
    try:
        ok = ok and parse_segment(f"nvl:segment={text}")[2] is not None
    except InputError:
        ok = False
    if not ok:
        raise fail(".nvl_segment", "must be N or N:spread|N:consolidate, N a whole number 1-9999", value)
    return str(text)


def load_inventory_file(path: str | Path, max_nodes: int = MAX_NODES) -> Loaded:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(str(path), "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_inventory(text, source=str(path), base=path.parent, max_nodes=max_nodes)
