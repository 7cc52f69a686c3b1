"""One ``nodes:`` entry: its keys, labels, location, hardware and ``slurm:`` values checked against what
slurm.conf's parser accepts, expanded into :class:`~slurm_topo.core.model.Node` records.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core import hostlist
from ..core.errors import HostlistError, InputError, InventoryError, show_value
from ..core.model import (
    LABEL_RE,
    LEVEL_FEATURE_PREFIXES,
    LEVELS,
    MAX_NAME,
    MAX_SWITCH_LAYERS,
    NODE_NAME_RE,
    SLURM_INT_KEYS,
    SLURM_INT_RANGES,
    SLURM_NODE_KEYS,
    SLURM_NODE_STATES,
    SLURM_PER_NODE_KEYS,
    Location,
    Node,
    PlacementError,
    Source,
    is_level_feature,
    nodes_alike,
    oversized_number,
    place,
)
from .yaml_safe import Shown, key_text

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
        "switches",
    }
)

FAMILY_RE = re.compile(r"^[A-Za-z0-9._*?-]{1,63}\Z")

LABEL_KEYS = {
    "gpulayer.dev/network-group": "network_group",
    "gpulayer.dev/zone": "zone",
    "gpulayer.dev/region": "region",
    "topology.kubernetes.io/zone": "zone",
    "topology.kubernetes.io/region": "region",
    "gpulayer.dev/nvlink-domain": "nvlink_domain",
    "nvidia.com/gpu.clique": "nvlink_domain",  # GPU feature discovery: <cluster UUID>.<clique id>
}

SLURM_VALUE_RE = re.compile(r"^[A-Za-z0-9._:/+,-]{1,256}\Z")

_ADDRESS_RE = re.compile(r"^[A-Za-z0-9._:-]{1,255}\Z")  # a host name, an IPv4 or IPv6 address: one node

HOSTLIST_RE = re.compile(r"^[A-Za-z0-9._,\[\]-]{1,65536}\Z")  # Slurm's hostlist alphabet, no spaces

# Gres=<name>[:<type>][:no_consume][:<count>[KMGTP]], comma-separated (slurm.conf(5) "Gres").
_GRES_ITEM_RE = re.compile(
    r"^[A-Za-z][A-Za-z0-9_]{0,63}(?::[A-Za-z0-9_.-]{1,64})?(?::no_consume)?(?::(?P<count>\d{1,19})[KMGTP]?)?\Z"
)

_STATES = frozenset(SLURM_NODE_STATES)

# CpuSpecList=<abstract CPU ids>: numbers and ranges, comma-separated (slurm.conf(5) "CpuSpecList").
_CPU_LIST_RE = re.compile(r"^\d{1,5}(?:-\d{1,5})?(?:,\d{1,5}(?:-\d{1,5})?){0,1023}\Z")

CPU_BIND_VALUES = ("none", "boards", "ldoms", "sockets", "cores", "threads")
"""``CpuBind=`` values of a NodeName= line (slurm.conf(5); Slurm also reads the singular forms)."""
_CPU_BINDS = frozenset(CPU_BIND_VALUES) | {v[:-1] for v in CPU_BIND_VALUES if v != "none"}

_DIGITS_AT_BRACKET = re.compile(r"\d\[|\]\d|\d{20}")


class Entry:
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
        self.ordered = False
        """Its nodes come out in natural order (:func:`slurm_topo.core.hostlist.naturally_ordered`): set by
        :meth:`names`."""

    def fail(
        self, key: str | None, reason: str, value: object = None, *, has_value: bool = True
    ) -> InventoryError:
        where = f"{self.where}.{key}" if key else self.where
        shown = value if isinstance(value, (str, int, float, type(None))) else Shown(value)
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
                raise self.fail(key_text(key), "unknown key", key)
        expr, names = self.names(raw)
        location = self.location(raw)
        domain = self.nvlink_domain(raw)
        switches = self.switches(raw.get("switches"), location)
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
        return nodes_alike(
            names,
            per_node,
            location=location,
            features=features,
            gpus=gpus,
            gpu_type=gpu_type,
            source=source,
            origin=f"{self.source}: {self.where}",
            found_by=found_by,
            notes=notes,
            gpu_topology=topology,
            nvlink_domain=domain,
            switches=switches,
        )

    def switches(self, raw: object, location: Location) -> tuple[str, ...]:
        """``switches:``: the switch layers below the network group, top first (1 to ``MAX_SWITCH_LAYERS``
        labels, none twice); only with a network group to hang under."""
        if raw is None:
            return ()
        if not isinstance(raw, list) or not raw:
            raise self.fail("switches", "must be a non-empty list of switch labels, top first", raw)
        if len(raw) > MAX_SWITCH_LAYERS:
            raise self.fail(
                "switches", f"at most {MAX_SWITCH_LAYERS} layers below the network group, not {len(raw)}", raw
            )
        labels = tuple(self.label(f"switches[{i}]", item) for i, item in enumerate(raw))
        if len(set(labels)) != len(labels):
            twice = next(x for x, n in Counter(labels).items() if n > 1)
            raise self.fail("switches", f"names switch {twice} twice on one path", twice)
        if location.network_group is None:
            raise self.fail("switches", "needs a network_group to hang under", labels[0])
        return labels

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
            from ..gpu.nvidia_smi import (
                parse_topo_matrix,
            )  # the GPU parser is only needed when a node points at one

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
                        f"labels.{key_text(key)}",
                        f"unknown label (known: {', '.join(sorted(LABEL_KEYS))})",
                        key,
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
        if not HOSTLIST_RE.match(expr):
            raise self.fail(
                "name",
                "node names must be 1-64 characters from [A-Za-z0-9._-], in a hostlist (no spaces or breaks)",
                expr,
            )
        try:
            # Slurm's reading, in its order (per-node values pair with it); counted first (parse_inventory
            # counted every entry already)
            names = hostlist.expand_keep_duplicates(expr)
        except HostlistError as exc:
            raise self.fail("name", exc.reason, expr) from None
        self.ordered = hostlist.naturally_ordered(expr)
        if not self.ordered and len(set(names)) != len(names):
            twice = next(name for name, n in Counter(names).items() if n > 1)
            raise self.fail(
                "name", f"names node {twice} twice (slurmctld refuses a node defined twice)", expr
            )
        # A name's digit runs are the expression's own unless digits touch a bracket (n9[99]): only then, or
        # when the expression itself has a 20-digit run, is every name checked.
        long_numbers = _DIGITS_AT_BRACKET.search(expr) is not None or oversized_number(expr) is not None
        if self.ordered and not long_numbers and names and max(len(names[0]), len(names[-1])) <= MAX_NAME:
            # prefix[ranges]suffix of the alphabet HOSTLIST_RE let through, no brackets or commas left: every
            # name is valid if the longest is, and the ranges ascend and never narrow, so the longest is the
            # last
            return expr, names
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
                    f"slurm.{key_text(key)}",
                    f"unknown node attribute (known: {', '.join(SLURM_NODE_KEYS)})",
                    key,
                )
            text = self.slurm_text(key, value)
            values = self.per_node(key, text, count) if key in SLURM_PER_NODE_KEYS else [text] * count
            for v in dict.fromkeys(values):  # each distinct value once
                if not SLURM_VALUE_RE.match(v) or (key in SLURM_INT_KEYS and not v.isdigit()):
                    raise self.fail(f"slurm.{key}", "not a valid value for a NodeName= line", v)
                self.slurm_value(key, v)
            columns[key] = values
        order = [k for k in SLURM_NODE_KEYS if k in columns]
        if count and not any(k in SLURM_PER_NODE_KEYS for k in order):  # every node the same: one row, shared
            rows = [tuple((k, columns[k][0]) for k in order)] * count
        else:
            rows = [tuple((k, columns[k][i]) for k in order) for i in range(count)]
        if rows:  # the hardware keys are none of the per-node keys: one combination for every node
            hardware = {k: v for k, v in rows[0] if k in HARDWARE_KEYS}
            problem = hardware_problem(hardware)
            if problem is not None:
                raise self.fail("slurm", problem, hardware)
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
        if not HOSTLIST_RE.match(value.replace(":", "")):
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
if (
    HARDWARE_KEYS & SLURM_PER_NODE_KEYS
):  # pragma: no cover - Entry.slurm_attrs checks one combination an entry
    raise AssertionError("a per-node hardware key: Entry.slurm_attrs must check each node's combination")

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
        if key == "RealMemory":
            # 0 loads, but MemSpecLimit (0 unless given) must be below it: `error: NodeNames=a1
            # MemSpecLimit=0 is invalid, reset to 0` on 22.05, 24.11 and 26.05; 1 loads without a word
            lo = max(lo, 1)
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
    elif key in ("CpuSpecList", "CpuBind"):
        return _cpu_value_problem(key, value)
    elif key in ("NodeAddr", "NodeHostname"):
        if not _ADDRESS_RE.match(value):
            return "must be one host name or address per node"
        if (run := oversized_number(value)) is not None:
            return f"number {run[:24]} is too large for Slurm's hostlist"
    return None


def _cpu_value_problem(key: str, value: str) -> str | None:
    """``CpuSpecList=`` (abstract CPU ids and ranges) and ``CpuBind=`` as slurm.conf's parser reads them."""
    if key == "CpuBind":
        return None if value.lower() in _CPU_BINDS else f"must be one of {', '.join(CPU_BIND_VALUES)}"
    if not _CPU_LIST_RE.match(value):
        return "must be CPU ids and ranges, comma-separated (0,1 or 0-3)"
    for part in value.split(","):
        first, _, last = part.partition("-")
        if int(last or first) < int(first) or int(last or first) >= MAX_NODE_CPUS:
            return f"{part}: not a range of CPU ids below {MAX_NODE_CPUS}"
    return None
