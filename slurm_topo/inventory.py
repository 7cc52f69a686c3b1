"""Load YAML inventories into the merged ``Inventory``.

An inventory is a mapping with the key ``nodes`` (a list of entries, each covering one or more nodes through a
Slurm hostlist expression) and, optionally, ``policy`` (the submit filter's defaults)::

    nodes:
      - name: gpu-ew1b-[01-06]
        region: europe-west1
        zone: europe-west1-b
        network_group: rack-3        # or labels: {gpulayer.dev/network-group: rack-3}
        nvlink_domain: nvl-07        # NVLink scale-up domain (an NVL72 rack); docs/nvlink-domains.md
        features: [torch-2.4]
        gpus: 8
        gpu_type: h100
        source: provider             # provider | operator | self (default operator)
        slurm: {CPUs: 64, RealMemory: 512000}

Validation stops at the first problem and raises ``InventoryError`` naming ``FILE: nodes[i].key``; nothing is
rewritten silently except one documented case (a zone-shaped region with no zone, with a warning).

What Slurm would refuse is refused here, before anything is written: every ``slurm:`` value is checked against
what slurm.conf's parser accepts (``model.SLURM_INT_RANGES``, ``model.SLURM_NODE_STATES``, the Gres syntax,
one address per node); a digit run Slurm's hostlist would misread (``model.SLURM_MAX_SUFFIX``) is refused in
names and addresses; features with a generator prefix (``model.LEVEL_FEATURE_PREFIXES``) are refused on every
source.

Hostile documents are bounded: YAML aliases may expand to at most ``MAX_YAML_NODES`` nodes, a duplicate key is
an error naming both lines, a tag that does not construct (``!!int x``) is an error, a hostlist is counted
before it is expanded (``model.MAX_NODES`` in all), and every message quotes at most 40 characters of a value.

Merging (ARCHITECTURE.md, "Trust"): records for the same node at the same trust level must agree on the
location; across trust levels the most trusted record wins, lower ones only fill gaps that agree with it, and
every disagreement becomes a ``Conflict``.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from . import hostlist
from .errors import HostlistError, InputError, InventoryError, show_value
from .model import (
    LABEL_RE,
    LEVEL_FEATURE_PREFIXES,
    LEVELS,
    MAX_NODES,
    NO_LOCATION,
    NODE_NAME_RE,
    NVLINK_TOPOLOGIES,
    SLURM_INT_KEYS,
    SLURM_INT_RANGES,
    SLURM_NODE_KEYS,
    SLURM_NODE_STATES,
    SLURM_PER_NODE_KEYS,
    Conflict,
    Inventory,
    Location,
    Node,
    NvlinkConfig,
    PlacementError,
    PolicyConfig,
    Source,
    is_level_feature,
    natural_key,
    oversized_number,
    place,
    region_of_zone,
)
from .policy.vocab import parse_locality

__all__ = [
    "Loaded",
    "load_inventories",
    "load_inventory_file",
    "load_yaml",
    "merge",
    "natural_key",  # re-exported: the rule lives in the model
    "parse_inventory",
    "region_of_zone",
    "with_slurm_nodes",
]

ENTRY_KEYS = frozenset(
    {
        "name",
        "region",
        "zone",
        "network_group",
        "labels",
        "features",
        "gpus",
        "gpu_type",
        "source",
        "slurm",
        "found_by",
        "notes",
        "gpu_topology",
        "nvlink_domain",
    }
)
TOP_KEYS = frozenset({"nodes", "policy", "nvlink", "links"})
_FAMILY_RE = re.compile(r"^[A-Za-z0-9._*?-]{1,63}\Z")
LABEL_KEYS = {
    "gpulayer.dev/network-group": "network_group",
    "gpulayer.dev/zone": "zone",
    "gpulayer.dev/region": "region",
    "topology.kubernetes.io/zone": "zone",
    "topology.kubernetes.io/region": "region",
    "gpulayer.dev/nvlink-domain": "nvlink_domain",
    "nvidia.com/gpu.clique": "nvlink_domain",  # GPU feature discovery: <cluster UUID>.<clique id>
}
_SLURM_VALUE_RE = re.compile(r"^[A-Za-z0-9._:/+,-]{1,256}\Z")
_ADDRESS_RE = re.compile(r"^[A-Za-z0-9._:-]{1,255}\Z")  # a host name, an IPv4 or IPv6 address: one node
_HOSTLIST_RE = re.compile(r"^[A-Za-z0-9._,\[\]-]{1,65536}\Z")  # Slurm's hostlist alphabet, no spaces
# Gres=<name>[:<type>][:no_consume][:<count>[KMGTP]], comma-separated (slurm.conf(5) "Gres").
_GRES_ITEM_RE = re.compile(
    r"^[A-Za-z][A-Za-z0-9_]{0,63}(?::[A-Za-z0-9_.-]{1,64})?(?::no_consume)?(?::(?P<count>\d{1,19})[KMGTP]?)?\Z"
)
_STATES = frozenset(SLURM_NODE_STATES)
_DIGITS_AT_BRACKET = re.compile(r"\d\[|\]\d|\d{20}")
MAX_YAML_NODES = 1_000_000
"""At most this many YAML nodes after alias expansion (a "billion laughs" document is refused unexpanded)."""
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = _SHORT.maxset = 4
_SHORT.maxlevel = 2


class _Shown:
    """A value whose repr is bounded (depth, items, characters) whatever the value is: messages never walk a
    huge or self-referencing structure."""

    __slots__ = ("text",)

    def __init__(self, value: object):
        self.text = _SHORT.repr(value)

    def __repr__(self) -> str:
        return self.text


def _key(key: object) -> str:
    """A mapping key as it may appear in ``nodes[3].<key>``: a short string as is, anything else bounded."""
    return key if isinstance(key, str) and len(key) <= 60 and key.isprintable() else _SHORT.repr(key)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


def _base_loader() -> Any:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_base_loader()):  # type: ignore[misc]
    """The safe loader (libyaml's when present) that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: the constructor reports it
            if first is not key_node:
                raise _DuplicateKeyError(
                    None,
                    None,
                    f"duplicate key {_SHORT.repr(key)} at line {key_node.start_mark.line + 1} "
                    f"(first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _expanded_size(text: str, limit: int) -> None:
    """Raise ``yaml.YAMLError`` when aliases would expand the document past ``limit`` nodes (events only;
    nothing is constructed; constant work per event, whatever the nesting)."""
    anchors: dict[str, int] = {}
    starts: list[tuple[str | None, int]] = []  # open collections: (anchor, expanded count at their start)
    expanded = 0
    for event in yaml.parse(text, Loader=_base_loader()):
        if isinstance(event, yaml.AliasEvent):
            expanded += anchors.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                anchors[event.anchor] = 1
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            starts.append((event.anchor, expanded))
            expanded += 1
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, start = starts.pop()
            if anchor:
                anchors[anchor] = expanded - start
        if expanded > limit:
            raise yaml.YAMLError(f"aliases expand to more than {limit} YAML nodes")


def load_yaml(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse one YAML document safely and boundedly. Raises ``yaml.YAMLError`` for anything that is not a
    plain document: bad syntax, a duplicate key, aliases that expand past ``max_nodes``, a tag that does not
    construct (``!!int x``, ``!!timestamp x``, ``!!python/...``), nesting too deep to build."""
    if "&" in text or "*" in text:
        _expanded_size(text, max_nodes)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        raise
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
    except (ValueError, TypeError, AttributeError, OverflowError, KeyError, IndexError):
        # SafeConstructor's own failures on a tagged scalar it cannot build (int('x'), a timestamp regex miss)
        raise yaml.YAMLError("a tagged value cannot be read (such as !!int x or !!timestamp x)") from None


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


class _Entry:
    """Validation of one ``nodes[i]`` entry; every error names the file and the key."""

    def __init__(
        self,
        source: str,
        index: int,
        raw: object,
        base: Path | None = None,
        topologies: dict[Path, Any] | None = None,
    ):
        self.source = source
        self.where = f"nodes[{index}]"
        self.raw = raw
        self.warnings: list[str] = []
        self.base = base
        self.topologies = topologies if topologies is not None else {}

    def fail(
        self, key: str | None, reason: str, value: object = None, *, has_value: bool = True
    ) -> InventoryError:
        where = f"{self.where}.{key}" if key else self.where
        shown = value if isinstance(value, (str, int, float, type(None))) else _Shown(value)
        return InventoryError(self.source, where, reason, shown, has_value=has_value)

    def label(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {type(value).__name__}", value)
        if not LABEL_RE.match(value):
            raise self.fail(key, "must be 1-63 characters from [A-Za-z0-9._-]", value)
        return value

    def nodes(self) -> list[Node]:
        """The entry's nodes: its keys known, its names (:meth:`names`), then each attribute read."""
        raw = self.raw
        if not isinstance(raw, Mapping):
            raise self.fail(None, f"must be a mapping, not {type(raw).__name__}", raw)
        for key in raw:
            if key not in ENTRY_KEYS:
                raise self.fail(_key(key), "unknown key", key)
        expr, names = self.names(raw)
        location = self.location(raw)
        domain = self.nvlink_domain(raw)
        if location.region is None:
            self.warnings.append(
                f"{self.source}: {self.where}: {show_value(expr)} has no region or zone; placed in the "
                "root's leaf switch (no locality)"
            )
        features = self.features(raw.get("features"))
        gpus = raw.get("gpus")
        if gpus is not None and (
            isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= 1024
        ):
            raise self.fail("gpus", "must be an integer from 0 to 1024", gpus)
        gpu_type = self.label("gpu_type", raw["gpu_type"]) if raw.get("gpu_type") is not None else None
        source = self.trust(raw.get("source", "operator"))
        per_node = self.slurm_attrs(raw.get("slurm"), len(names))
        if source == Source.SELF and any(k == "State" for k, _ in per_node[0]):
            raise self.fail("slurm.State", "a source: self entry cannot set a node's State", "State")
        found_by = self.found_by(raw.get("found_by"))
        notes = self.notes(raw.get("notes"))
        topology = self.gpu_topology(raw.get("gpu_topology"))
        if topology is not None:
            if gpus is not None and gpus != len(topology.gpus):
                raise self.fail("gpus", f"says {gpus} but gpu_topology has {len(topology.gpus)} GPUs", gpus)
            gpus = len(topology.gpus)
        origin = f"{self.source}: {self.where}"
        return [
            Node(
                name=name,
                location=location,
                features=features,
                gpus=gpus,
                gpu_type=gpu_type,
                slurm=per_node[i],
                source=source,
                origin=origin,
                found_by=found_by,
                notes=notes,
                gpu_topology=topology,
                nvlink_domain=domain,
            )
            for i, name in enumerate(names)
        ]

    def gpu_topology(self, raw: object) -> Any:
        """A ``nvidia-smi topo -m`` capture, relative to the inventory's folder; parsed once per file."""
        if raw is None:
            return None
        if not isinstance(raw, str) or not raw or "\n" in raw or "\0" in raw or len(raw) > 4096:
            raise self.fail("gpu_topology", "must be the path of a `nvidia-smi topo -m` capture", raw)
        path = Path(raw)
        if not path.is_absolute() and self.base is not None:
            path = self.base / path
        if path not in self.topologies:
            from .gpu.topo import parse_topo_matrix  # the GPU parser is only needed when a node points at one

            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise self.fail("gpu_topology", f"cannot read: {exc.strerror}", raw) from None
            try:
                self.topologies[path] = parse_topo_matrix(text, source=str(path))
            except InputError as exc:
                raise self.fail("gpu_topology", str(exc), raw, has_value=False) from None
        return self.topologies[path]

    def nvlink_domain(self, raw: Mapping[Any, Any]) -> str | None:
        """``nvlink_domain:`` or one of its labels (they must agree)."""
        domain = self.label("nvlink_domain", raw["nvlink_domain"]) if raw.get("nvlink_domain") else None
        labels = raw.get("labels")
        if isinstance(labels, Mapping):
            for key, value in labels.items():
                if isinstance(key, str) and LABEL_KEYS.get(key) == "nvlink_domain":
                    value = self.label(f"labels.{key}", value)
                    if domain is not None and domain != value:
                        raise self.fail(f"labels.{key}", f"disagrees with nvlink_domain={domain}", value)
                    domain = value
        return domain

    def location(self, raw: Mapping[Any, Any]) -> Location:
        values: dict[str, str | None] = {lvl: None for lvl in LEVELS}
        for lvl in LEVELS:
            if raw.get(lvl) is not None:
                values[lvl] = self.label(lvl, raw[lvl])
        labels = raw.get("labels")
        if labels is not None:
            if not isinstance(labels, Mapping):
                raise self.fail("labels", f"must be a mapping, not {type(labels).__name__}", labels)
            for key, value in labels.items():
                level = LABEL_KEYS.get(key) if isinstance(key, str) else None
                if level is None:
                    raise self.fail(
                        f"labels.{_key(key)}", f"unknown label (known: {', '.join(sorted(LABEL_KEYS))})", key
                    )
                if level == "nvlink_domain":
                    continue  # read by nvlink_domain()
                value = self.label(f"labels.{key}", value)
                if values[level] is not None and values[level] != value:
                    raise self.fail(f"labels.{key}", f"disagrees with {level}={values[level]}", value)
                values[level] = value
        group = values["network_group"]
        try:
            region, zone, note = place(values["region"], values["zone"])
        except PlacementError as exc:
            raise self.fail(exc.level, exc.reason, exc.value) from None
        if note is not None:
            self.warnings.append(f"{self.source}: {self.where}.region: {note}")
        if group is not None and region is None:
            raise self.fail("network_group", "needs a zone or a region to hang under", group)
        return Location(region, zone, group)

    def features(self, raw: object) -> tuple[str, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.fail("features", f"must be a list, not {type(raw).__name__}", raw)
        seen: dict[str, None] = {}
        for i, item in enumerate(raw):
            feature = self.label(f"features[{i}]", item)
            if is_level_feature(feature):
                raise self.fail(
                    f"features[{i}]",
                    f"{', '.join(p + '*' for p in LEVEL_FEATURE_PREFIXES)} features are made by slurm-topo "
                    "from the node's location; give region/zone/network_group instead",
                    feature,
                )
            seen[feature] = None
        return tuple(seen)

    def trust(self, raw: object) -> Source:
        if not isinstance(raw, str) or raw.lower() not in ("provider", "operator", "self"):
            raise self.fail("source", "must be provider, operator or self", raw)
        return Source.parse(raw)

    def names(self, raw: Mapping[str, Any]) -> tuple[str, list[str]]:
        """The entry's ``name:`` hostlist and the node names it expands to, each a valid Slurm node name."""
        if "name" not in raw:
            raise self.fail("name", "missing", has_value=False)
        expr = raw["name"]
        if not isinstance(expr, str):
            raise self.fail("name", f"must be a hostlist string, not {type(expr).__name__}", expr)
        if not _HOSTLIST_RE.match(expr):
            raise self.fail(
                "name",
                "node names must be 1-64 characters from [A-Za-z0-9._-], in a hostlist (no spaces or breaks)",
                expr,
            )
        try:
            names = hostlist.expand(expr)  # counted first (parse_inventory counted every entry already)
        except HostlistError as exc:
            raise self.fail("name", exc.reason, expr) from None
        # A name's digit runs are the expression's own unless digits touch a bracket (n9[99]): only then, or
        # when the expression itself has a 20-digit run, is every name checked.
        long_numbers = _DIGITS_AT_BRACKET.search(expr) is not None or oversized_number(expr) is not None
        for name in names:
            if not NODE_NAME_RE.match(name):
                raise self.fail("name", "node names must be 1-64 characters from [A-Za-z0-9._-]", name)
            if long_numbers and (run := oversized_number(name)) is not None:
                raise self.fail(
                    "name", f"number {run[:24]} is too large for Slurm's hostlist (max 2**64-2)", name
                )
        return expr, names

    def slurm_attrs(self, raw: object, count: int) -> list[tuple[tuple[str, str], ...]]:
        """The entry's ``slurm:`` attributes, one row per node: each key known, each value a token Slurm
        loads (per-node keys as a hostlist of one value per node), each hardware combination one slurmctld
        accepts."""
        if raw is None:
            return [()] * count
        if not isinstance(raw, Mapping):
            raise self.fail("slurm", f"must be a mapping, not {type(raw).__name__}", raw)
        columns: dict[str, list[str]] = {}
        for key, value in raw.items():
            if key not in SLURM_NODE_KEYS:
                raise self.fail(
                    f"slurm.{_key(key)}", f"unknown node attribute (known: {', '.join(SLURM_NODE_KEYS)})", key
                )
            text = self.slurm_text(key, value)
            values = self.per_node(key, text, count) if key in SLURM_PER_NODE_KEYS else [text] * count
            for v in dict.fromkeys(values):  # each distinct value once
                if not _SLURM_VALUE_RE.match(v) or (key in SLURM_INT_KEYS and not v.isdigit()):
                    raise self.fail(f"slurm.{key}", "not a valid value for a NodeName= line", v)
                self.slurm_value(key, v)
            columns[key] = values
        order = [k for k in SLURM_NODE_KEYS if k in columns]
        rows = [tuple((k, columns[k][i]) for k in order) for i in range(count)]
        for row in dict.fromkeys(tuple((k, v) for k, v in r if k in HARDWARE_KEYS) for r in rows):
            problem = hardware_problem(dict(row))
            if problem is not None:
                raise self.fail("slurm", problem, dict(row))
        return rows

    def slurm_text(self, key: str, value: object) -> str:
        """An attribute's value as text: a non-negative integer for the integer keys, else a string."""
        if key in SLURM_INT_KEYS and not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise self.fail(f"slurm.{key}", "must be a non-negative integer", value)
            value = str(value)
        if not isinstance(value, str):
            raise self.fail(f"slurm.{key}", f"must be a string, not {type(value).__name__}", value)
        return value

    def per_node(self, key: str, value: str, count: int) -> list[str]:
        """A per-node attribute (``NodeAddr``…): a hostlist with exactly one value per node of the entry."""
        if not _HOSTLIST_RE.match(value.replace(":", "")):
            raise self.fail(f"slurm.{key}", "not a valid value for a NodeName= line", value)
        try:
            hostlist.check_size(value)
            listed = "[" in value or "," in value
            values = hostlist.expand_keep_duplicates(value) if listed else [value]
        except HostlistError as exc:
            raise self.fail(f"slurm.{key}", exc.reason, value) from None
        if count == 1 and len(values) > 1:
            raise self.fail(
                f"slurm.{key}", f"the entry names one node: give one value, not {len(values)}", value
            )
        if len(values) == 1 and count > 1:
            raise self.fail(
                f"slurm.{key}",
                f"names one node but the entry has {count}; give a hostlist with one value per node",
                value,
            )
        if len(values) != count:
            raise self.fail(f"slurm.{key}", f"has {len(values)} values for {count} nodes", value)
        return values

    def slurm_value(self, key: str, value: str) -> None:
        problem = slurm_value_problem(key, value)
        if problem is not None:
            raise self.fail(f"slurm.{key}", problem, value)

    def found_by(self, raw: object) -> tuple[tuple[str, str], ...]:
        if raw is None:
            return ()
        if not isinstance(raw, Mapping):
            raise self.fail("found_by", f"must be a mapping, not {type(raw).__name__}", raw)
        return tuple(sorted((str(k), str(v)) for k, v in raw.items()))

    def notes(self, raw: object) -> tuple[str, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise self.fail("notes", "must be a list of strings", raw)
        return tuple(raw)


HARDWARE_KEYS = frozenset(
    {"CPUs", "Boards", "Sockets", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"}
)
MAX_NODE_CPUS = 65533
"""The most CPUs slurmctld keeps for a node (its counts are 16-bit, less two reserved values)."""


def hardware_problem(attrs: Mapping[str, str]) -> str | None:
    """What slurmctld's node-line parser (read_config.c) refuses, or complains about and changes, in the
    combination of a node's CPUs, Boards, Sockets, SocketsPerBoard, CoresPerSocket and ThreadsPerCore (each
    already inside its own range), else None:

    - ``Sockets`` with ``SocketsPerBoard``: "Sockets=# and SocketsPerBoard=# is invalid", printed by every
      client command;
    - a product Sockets × CoresPerSocket × ThreadsPerCore above 65 533: the 16-bit counts overflow (22.05's
      slurmctld stops: "CPUs=… doesn't match");
    - ``CPUs`` that is none of Sockets, Sockets × CoresPerSocket, Sockets × CoresPerSocket × ThreadsPerCore
      when the topology is given: slurmctld resets it with an ``error:`` line."""
    if "Sockets" in attrs and "SocketsPerBoard" in attrs:
        return "give Sockets or SocketsPerBoard, not both (Slurm: Sockets=# and SocketsPerBoard=# is invalid)"
    if not any(k in attrs for k in HARDWARE_KEYS - {"CPUs"}):
        return None
    try:
        boards = int(attrs.get("Boards", "1")[:8])
        sockets = (
            int(attrs["Sockets"][:8])
            if "Sockets" in attrs
            else boards * int(attrs.get("SocketsPerBoard", "1")[:8])
        )
        cores = int(attrs.get("CoresPerSocket", "1")[:8])
        threads = int(attrs.get("ThreadsPerCore", "1")[:8])
    except ValueError:
        return None  # each value's own check says what is wrong
    total = sockets * cores * threads
    if total > MAX_NODE_CPUS:
        return (
            f"Sockets × CoresPerSocket × ThreadsPerCore = {sockets} × {cores} × {threads} = {total}: above "
            f"the {MAX_NODE_CPUS} CPUs slurmctld can count on a node"
        )
    if "CPUs" in attrs and attrs["CPUs"].isdigit():
        cpus = int(attrs["CPUs"][:8])
        if cpus not in (sockets, sockets * cores, total):
            return (
                f"CPUs={cpus} is none of Sockets ({sockets}), Sockets × CoresPerSocket ({sockets * cores}) "
                f"and Sockets × CoresPerSocket × ThreadsPerCore ({total}): slurmctld would reset it with an "
                "error"
            )
    return None


GRES_NAMES = ("gpu", "mps", "shard", "nic")
"""GRES names slurmctld knows without a ``GresTypes=`` line: any other is dropped (or refused) unless the
site's slurm.conf names it."""
MAX_GRES_COUNT = 2**63 - 1


def slurm_value_problem(key: str, value: str) -> str | None:
    """What slurm.conf's parser would refuse (or silently change) in one ``NodeName=`` value, else None.

    ``value`` has passed the token alphabet (and is all digits for ``SLURM_INT_KEYS``)."""
    if key in SLURM_INT_RANGES:
        lo, hi = SLURM_INT_RANGES[key]
        if len(value) > 1 and value.startswith("0"):
            return "no leading zeros (Slurm would read the number as octal)"
        if not lo <= int(value[:40]) <= hi:
            return f"must be from {lo} to {hi} (what Slurm accepts)"
    elif key == "State":
        if value.upper() not in _STATES:
            return f"must be one of {', '.join(SLURM_NODE_STATES)}"
    elif key == "Gres":
        for item in value.split(","):
            m = _GRES_ITEM_RE.match(item)
            if m is None:
                return "must be NAME[:TYPE][:no_consume][:COUNT], comma-separated"
            if m["count"] is not None and int(m["count"]) > MAX_GRES_COUNT:
                return f"count too large (at most {MAX_GRES_COUNT})"
            name = item.split(":", 1)[0]
            if name not in GRES_NAMES:
                return f"GRES {name[:20]!r}: not one Slurm knows without GresTypes= ({', '.join(GRES_NAMES)})"
        names = [item.split(":", 1)[0] for item in value.split(",")]
        if any(n in ("mps", "shard") for n in names) and "gpu" not in names:
            return "mps and shard need a gpu GRES on the same node (Slurm drops them otherwise)"
    elif key in ("NodeAddr", "NodeHostname"):
        if not _ADDRESS_RE.match(value):
            return "must be one host name or address per node"
        if (run := oversized_number(value)) is not None:
            return f"number {run[:24]} is too large for Slurm's hostlist"
    return None


def parse_inventory(
    text: str, *, source: str = "<inventory>", base: Path | None = None, max_nodes: int = MAX_NODES
) -> Loaded:
    """Validate one inventory document and expand it into per-node records (not yet merged).

    ``max_nodes`` bounds the nodes this document may name (what is left of ``MAX_NODES`` after earlier
    files)."""
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
            raise InventoryError(source, _key(key), "unknown key", _Shown(key), has_value=True)
    policy = _parse_policy(source, doc["policy"]) if doc.get("policy") is not None else None
    links = None
    if doc.get("links") is not None:  # the cost model's link table: validated here, read by the model
        from .cost.links import parse_links

        links = parse_links(doc["links"], source=f"{source}: links")
    nvlink = _parse_nvlink(source, doc["nvlink"]) if doc.get("nvlink") is not None else None
    entries = doc.get("nodes")
    if not isinstance(entries, list):
        raise InventoryError(
            source, "nodes", "must be a list of node entries", _Shown(entries), has_value=True
        )
    nodes: list[Node] = []
    warnings: list[str] = []
    topologies: dict[Path, Any] = {}
    counted = 0  # every entry's names are counted before any is expanded
    for i, raw in enumerate(entries):
        expr = raw.get("name") if isinstance(raw, Mapping) else None
        if isinstance(expr, str) and _HOSTLIST_RE.match(expr):
            try:
                counted += hostlist.check_size(expr, max_nodes - counted)
            except HostlistError as exc:
                raise InventoryError(source, f"nodes[{i}].name", exc.reason, expr, has_value=True) from None
    for i, raw in enumerate(entries):
        entry = _Entry(source, i, raw, base, topologies)
        nodes.extend(entry.nodes())
        warnings.extend(entry.warnings)
    return Loaded(source, tuple(nodes), tuple(warnings), policy, nvlink, links)


MAX_BLOCK_SIZE = 65_536
MAX_NVLINK_DOMAINS = 65_536


def _parse_nvlink(source: str, raw: object) -> NvlinkConfig:
    def fail(where: str, reason: str, value: object) -> InventoryError:
        return InventoryError(source, f"nvlink{where[:80]}", reason, _Shown(value), has_value=True)

    if not isinstance(raw, Mapping):
        raise fail("", f"must be a mapping, not {type(raw).__name__}", raw)
    for key in raw:
        if key not in ("topology", "block_sizes", "domains"):
            raise fail(f".{_key(key)}", "unknown key (known: topology, block_sizes, domains)", key)
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
        return InventoryError(source, f"policy{where[:80]}", reason, _Shown(value), has_value=True)

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
        if key not in ("default", "partitions", "families", "plan"):
            raise fail(f".{_key(key)}", "unknown key", key)
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
                if not isinstance(value, str) or not _FAMILY_RE.match(value):
                    raise fail(f".families.{name}", "must be a feature glob such as 'torch-*'", value)
                out.append((name, value))
    plan = raw.get("plan")
    if plan is not None:
        from .cost import parse_plan  # the cost model's grammar, validated once here

        if not isinstance(plan, str):
            raise fail(".plan", "must be a string such as 'tp=8,pp=4,bytes=10G'", plan)
        try:
            parse_plan(plan)
        except InputError as exc:
            raise fail(".plan", str(exc)[:200], plan) from None
    return PolicyConfig(default, tuple(sorted(parts)), tuple(sorted(fams)), plan)


def load_inventory_file(path: str | Path, max_nodes: int = MAX_NODES) -> Loaded:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(str(path), "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_inventory(text, source=str(path), base=path.parent, max_nodes=max_nodes)


def _merge_same_trust(a: Node, b: Node) -> Node:
    if a.nvlink_domain and b.nvlink_domain and a.nvlink_domain != b.nvlink_domain:
        raise InventoryError(
            b.origin,
            "",
            f"node {b.name} is in NVLink domain {b.nvlink_domain} here but in {a.nvlink_domain} "
            f"in {a.origin} (both {a.source.label} records)",
        )
    if a.location != b.location:
        raise InventoryError(
            b.origin,
            "",
            f"node {b.name} is at {b.location.describe()} here but at {a.location.describe()} in {a.origin} "
            f"(both {a.source.label} records)",
        )
    return _fill(a, b)


def _fill(kept: Node, other: Node) -> Node:
    """Fill gaps of ``kept`` from ``other`` (never overriding a value ``kept`` has)."""
    slurm = dict(kept.slurm)
    for k, v in other.slurm:
        slurm.setdefault(k, v)
    features = kept.features + tuple(f for f in other.features if f not in kept.features)
    return replace(
        kept,
        features=features,
        gpus=kept.gpus if kept.gpus is not None else other.gpus,
        gpu_type=kept.gpu_type or other.gpu_type,
        gpu_topology=kept.gpu_topology if kept.gpu_topology is not None else other.gpu_topology,
        slurm=tuple((k, slurm[k]) for k in SLURM_NODE_KEYS if k in slurm),
        found_by=kept.found_by or other.found_by,
        notes=kept.notes + tuple(n for n in other.notes if n not in kept.notes),
        nvlink_domain=kept.nvlink_domain or other.nvlink_domain,
        nvlink_source=(
            kept.nvlink_source
            if kept.nvlink_domain or not other.nvlink_domain
            else (other.nvlink_source if other.nvlink_source is not None else other.source)
        ),
    )


def _fill_location(kept: Location, other: Location) -> Location:
    """Finer levels from a less trusted record, only below levels on which both agree."""
    values = {}
    for lvl in LEVELS:
        mine, theirs = kept.value(lvl), other.value(lvl)
        values[lvl] = mine if mine is not None else theirs
    return Location(**values)


def merge(loaded: Iterable[Loaded], extra_nodes: Sequence[str] = ()) -> Inventory:
    """Merge per-file records into one ``Inventory`` (ARCHITECTURE.md, "Trust")."""
    by_name: dict[str, list[Node]] = {}
    warnings: list[str] = []
    policy: PolicyConfig | None = None
    policy_source = ""
    nvlink: NvlinkConfig | None = None
    nvlink_source = ""
    links: Any = None
    links_source = ""
    for item in loaded:
        warnings.extend(item.warnings)
        if item.links is not None:
            if links is not None and item.links != links:
                raise InventoryError(
                    item.source, "links", f"differs from the links: in {links_source}; give links: once"
                )
            links, links_source = item.links, item.source
        if item.nvlink is not None:
            if nvlink is not None and item.nvlink != nvlink:
                raise InventoryError(
                    item.source,
                    "nvlink",
                    f"differs from the nvlink section in {nvlink_source}; give it in one inventory",
                )
            nvlink, nvlink_source = item.nvlink, item.source
        if item.policy is not None:
            if policy is not None and item.policy != policy:
                raise InventoryError(
                    item.source,
                    "policy",
                    f"differs from the policy in {policy_source}; give the policy in one inventory",
                )
            policy, policy_source = item.policy, item.source
        for node in item.nodes:
            by_name.setdefault(node.name, []).append(node)
    merged: list[Node] = []
    conflicts: list[Conflict] = []
    for name, records in by_name.items():
        records.sort(key=lambda n: -n.source)  # stable: file order within a trust level
        best = records[0]
        for other in records[1:]:
            if other.source == best.source:
                best = _merge_same_trust(best, other)
            elif best.location.covers(other.location) and other.location != NO_LOCATION:
                located_by = other.located_by if best.location.region is None else best.location_source
                best = replace(
                    _fill(best, other),
                    location=_fill_location(best.location, other.location),
                    location_source=located_by,
                )
            else:
                if other.location != NO_LOCATION:
                    other = replace(other, nvlink_domain=None)  # a record that is elsewhere says nothing here
                    conflicts.append(
                        Conflict(
                            name,
                            best.location,
                            best.source,
                            best.origin,
                            other.location,
                            other.source,
                            other.origin,
                        )
                    )
                best = _fill(best, other)
            if other.nvlink_domain and best.nvlink_domain != other.nvlink_domain:
                conflicts.append(
                    Conflict(
                        name,
                        best.location,
                        best.source,
                        best.origin,
                        best.location,
                        other.source,
                        other.origin,
                        best.nvlink_domain,
                        other.nvlink_domain,
                    )
                )
        merged.append(best)
    merged.sort(key=lambda n: natural_key(n.name))
    known = set(by_name)
    extra = tuple(sorted({n for n in extra_nodes if n not in known}, key=natural_key))
    return Inventory(
        nodes=tuple(merged),
        conflicts=tuple(conflicts),
        warnings=tuple(warnings),
        extra_nodes=extra,
        policy=policy,
        nvlink=nvlink,
        links=links,
    )


def load_inventories(paths: Sequence[str | Path], extra_nodes: Sequence[str] = ()) -> Inventory:
    """Load and merge inventory files; the first bad value raises ``InventoryError``."""
    loaded: list[Loaded] = []
    for p in paths:
        loaded.append(load_inventory_file(p, MAX_NODES - sum(len(x.nodes) for x in loaded)))
    return merge(loaded, extra_nodes)


# scontrol show node -o key -> NodeName= key (hardware only; location never comes from Slurm's own record).
_SCONTROL_KEYS = {
    "NodeAddr": "NodeAddr",
    "NodeHostName": "NodeHostname",
    "Port": "Port",
    "CPUTot": "CPUs",
    "Boards": "Boards",
    "Sockets": "Sockets",
    "CoresPerSocket": "CoresPerSocket",
    "ThreadsPerCore": "ThreadsPerCore",
    "RealMemory": "RealMemory",
    "TmpDisk": "TmpDisk",
    "Gres": "Gres",
    "Weight": "Weight",
}


def with_slurm_nodes(
    inventory: Inventory, records: Sequence[Mapping[str, str]], source: str = "scontrol show node"
) -> Inventory:
    """Take in the nodes Slurm knows (``scontrol show node -o`` records).

    Inventory nodes get the hardware attributes they lack (imported once, so the include can replace the
    admin's own ``NodeName=`` lines); nodes no inventory places become ``extra_nodes`` (the root's leaf).
    Every name is validated like an inventory name (they reach ``Nodes=`` and ``NodeName=``): a bad one raises
    ``InputError`` naming ``source``.
    """
    _check_slurm_names(records, source)
    by_name = {r["NodeName"]: r for r in records}
    nodes = []
    for node in inventory.nodes:
        rec = by_name.get(node.name)
        if rec is None:
            nodes.append(node)
            continue
        have = _hardware_merged(node, _taken_from(node, rec))
        nodes.append(replace(node, slurm=tuple((k, have[k]) for k in SLURM_NODE_KEYS if k in have)))
    known = {n.name for n in inventory.nodes}
    extra = tuple(sorted({*inventory.extra_nodes, *(n for n in by_name if n not in known)}, key=natural_key))
    return replace(inventory, nodes=tuple(nodes), extra_nodes=extra)


def _check_slurm_names(records: Sequence[Mapping[str, str]], source: str) -> None:
    """Slurm's node names, validated like an inventory's (they reach ``Nodes=`` and ``NodeName=``)."""
    if len(records) > MAX_NODES:
        raise InputError(f"{source}: {len(records)} nodes, over the limit of {MAX_NODES} nodes in all")
    for record in records:
        name = record.get("NodeName")
        if not isinstance(name, str) or not NODE_NAME_RE.match(name):
            raise InputError(
                f"{source}: node name {show_value(name)}: must be 1-64 characters from [A-Za-z0-9._-]"
            )
        if (run := oversized_number(name)) is not None:
            raise InputError(
                f"{source}: node name {show_value(name)}: number {run[:24]} is too large for Slurm's hostlist"
            )


def _taken_from(node: Node, rec: Mapping[str, str]) -> dict[str, str]:
    """The node's Slurm attributes with what Slurm's record adds: only attributes the node lacks, never its
    own name as an address, no Gres where the inventory counts GPUs, and only values Slurm would load again
    (a plain token, an integer where Slurm wants one)."""
    have = dict(node.slurm)
    for skey, key in _SCONTROL_KEYS.items():
        value = rec.get(skey)
        if key in have or value in (None, "", "(null)", "N/A"):
            continue
        if key in ("NodeAddr", "NodeHostname") and value == node.name:
            continue
        if key == "Gres" and node.gpus is not None:
            continue
        if (
            _SLURM_VALUE_RE.match(value)
            and (key not in SLURM_INT_KEYS or value.isdigit())
            and slurm_value_problem(key, value) is None
        ):
            have[key] = value
    return have


def _hardware_merged(node: Node, have: dict[str, str]) -> dict[str, str]:
    """Where the merge made a hardware combination slurmctld rejects (``Sockets=`` with
    ``SocketsPerBoard=``, counts whose product does not match ``CPUs=``): the inventory's own hardware
    keys, else none at all."""
    if hardware_problem(have) is None:
        return have
    given = dict(node.slurm)
    for key in HARDWARE_KEYS:
        if key in given:
            have[key] = given[key]
        else:
            have.pop(key, None)
    if hardware_problem(have) is not None:
        have = {k: v for k, v in have.items() if k not in HARDWARE_KEYS}
    return have
