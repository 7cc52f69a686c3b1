"""The canonical model: immutable value types every source produces and every renderer reads.

Nothing here touches the world. ``Inventory`` is the merged fleet (one ``Node`` per name, sorted); sources
(inventory files, self-reports, Slurm's node list) build it, renderers only translate it.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

LABEL_RE = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")
"""Region, zone, network-group and feature labels: validated, never rewritten."""

NODE_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")

LEVELS = ("region", "zone", "network_group")
"""Location levels, coarsest first. ``prefer`` and ``any`` are policies, not levels."""

MAX_NAME = 64
"""Slurm's HOST_NAME_MAX for switch names; feature names are kept to the same length."""

NVL_PREFIX = "nvl_"
"""Prefix of an NVLink domain's node feature and block name (``nvl_<domain>``)."""

SWITCH_PREFIX = "leaf_"
"""Prefix of the switches below a network group (``switches:``, the provider's deeper layers) and of the
extra leaves: ``leaf_<zone|region>.<label>`` is a switch and a node feature, ``leaf_<zone|region>`` the
zone's (region's) own leaf."""

LEVEL_FEATURE_PREFIXES = ("region_", "zone_", "ng_", SWITCH_PREFIX, NVL_PREFIX)
"""Feature prefixes the generator owns: location features (``region_*``, ``zone_*``, ``ng_*``), the bucket
features built on them (``zone_<z>.<family value>``), the switches below a network group and the extra
leaves (``leaf_*``) and NVLink domain features. No input may carry a feature with one of these prefixes: a
node's location is never its own say."""

MAX_SWITCH_LAYERS = 4
"""At most this many switch layers below a network group (``switches:``): AWS lists 3 network nodes (4 for
p6-b200/p6-b300), the top one being the network group; GCE a sub-block and a host below the block. With the
root, region, zone and group the tree stays far below the 20 passes Slurm's level resolution allows
(``lint``: ``too-deep``)."""

MAX_NODES = 262_144
"""At most this many nodes in all the inputs of one run (2**18). A hostlist expression is counted before it
is expanded, so ``n[1-1000000000]`` is refused at once instead of filling memory."""

SLURM_MAX_RANGE = 65_536
"""Slurm's hostlist reads at most this many hosts in one bracket range (``MAX_RANGE`` in hostlist.c;
``n[1-65537]`` is "Too many hosts in range"). Renderers split longer runs."""

SLURM_MAX_NODES = ((24, 11), 65_536)
"""From Slurm 24.11 on, slurmctld creates at most this many node records (``MAX_SLURM_NODES`` in slurm.h,
checked in node_conf.c ``create_node_record_at``): a larger fleet cannot be rendered for those releases.
22.05 to 24.05 have no such limit."""

SLURM_MAX_SUFFIX = 2**64 - 2
"""The largest number Slurm's hostlist reads back as written: it parses digit runs with ``strtoul`` (64 bits),
so 2**64 and above all read as 2**64-1, which itself marks an empty range (``scontrol show hostnames`` crashes
on ``n[18446744073709551614-18446744073709551615]``)."""

_DIGITS = re.compile(r"\d+")
_NATURAL = re.compile(r"(\d+)")
# A region spelled like a zone: GCP "europe-west1-b", AWS "us-east-1a".
_ZONE_SHAPED = (
    re.compile(r"^(?P<region>[a-z]+(?:-[a-z]+)+\d+)-[a-z]\Z"),
    re.compile(r"^(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)[a-z]\Z"),
)
# A cloud's own region name: GCP "europe-west1", AWS "us-east-1" (the regions of the zone shapes above).
_REGION_SHAPED = (re.compile(r"^[a-z]+(?:-[a-z]+)+\d+\Z"), re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+\Z"))


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders ``n2`` before ``n10`` (and, as a total order, ``n0`` before ``n00``)."""
    parts: list[Any] = _NATURAL.split(name)  # text, digits, text, ...: ints and strs never meet at one index
    parts[1::2] = map(int, parts[1::2])
    return (parts, name)


def region_of_zone(zone: str) -> str | None:
    """The region a zone-shaped name belongs to (``europe-west1-b`` -> ``europe-west1``), else None.

    The one zone -> region rule: inventories, node records, ``discover`` and ``import`` all use it."""
    for rx in _ZONE_SHAPED:
        m = rx.match(zone)
        if m:
            return m["region"]
    return None


def region_of_gce_zone(zone: str) -> str | None:
    """A GCE zone's region: the shape rule, else the name less its last ``-x`` (GCE zones are
    ``<region>-<x>``)."""
    return region_of_zone(zone) or (zone.rsplit("-", 1)[0] if "-" in zone else None)


def zone_in_region(zone: str, region: str) -> bool:
    """False only when both names are a cloud's own and disagree (``eu-west-1a`` is not in ``us-east-1``); an
    operator's own region name (``us-east``, ``hall``) may hold any zone, as may any region a free-form
    zone."""
    parent = region_of_zone(zone)
    return parent is None or parent == region or not any(rx.match(region) for rx in _REGION_SHAPED)


class PlacementError(ValueError):
    """A region/zone pair that ``place`` refuses; ``level`` names the field to blame."""

    def __init__(self, level: str, reason: str, value: str):
        super().__init__(reason)
        self.level, self.reason, self.value = level, reason, value


def place(region: str | None, zone: str | None) -> tuple[str | None, str | None, str | None]:
    """The one zone -> region rule, for inventories and ``discover`` alike: ``(region, zone, note)``.

    * a region spelled like a zone with no zone is read as that zone and its region (``note`` says so); with
    the
      same zone it becomes the zone's region; with another zone it is an error;
    * a zone with no region takes the region its name gives, else it is an error;
    * a cloud's zone name must be in a cloud region name given with it (``zone_in_region``).

    Raises ``PlacementError``."""
    note = None
    if region is not None and (parent := region_of_zone(region)) is not None:
        if zone is None:
            note = f"{region!r} looks like a zone; read as region {parent!r}, zone {region!r}"
            region, zone = parent, region
        elif zone == region:
            region = parent
        else:
            raise PlacementError("region", f"looks like a zone but zone is {zone!r}", region)
    if zone is not None and region is None:
        region = region_of_zone(zone)
        if region is None:
            raise PlacementError("zone", "needs a region (the zone name does not name one)", zone)
    if zone is not None and region is not None and not zone_in_region(zone, region):
        raise PlacementError("zone", f"is not in region {region!r}", zone)
    return region, zone, note


def hashed_name(candidate: str, key: str) -> str:
    """``candidate`` cut to 55 characters plus ``_<first 8 hex of sha1(key)>``: the one rule for names that
    are too long (over ``MAX_NAME``) or shared by two different keys (switch, feature and group names)."""
    return f"{candidate[: MAX_NAME - 9]}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def is_level_feature(feature: str) -> bool:
    """True for a feature name the generator reserves (``LEVEL_FEATURE_PREFIXES``)."""
    return feature.startswith(LEVEL_FEATURE_PREFIXES)


def oversized_number(name: str) -> str | None:
    """The first digit run in ``name`` that Slurm's hostlist would misread (over ``SLURM_MAX_SUFFIX``), else
    None."""
    if len(name) < 20:  # fast path: no room for a 20-digit run
        return None
    for match in _DIGITS.finditer(name):
        run = match.group()
        if len(run.lstrip("0")) >= 20 and int(run) > SLURM_MAX_SUFFIX:
            return run
    return None


class Source(enum.IntEnum):
    """Who said where a node is; a higher value is trusted more (ARCHITECTURE.md, "Trust")."""

    SELF = 0
    OPERATOR = 1
    PROVIDER = 2

    @classmethod
    def parse(cls, text: str) -> Source:
        return cls[text.upper()]

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Location:
    """Where a node is. A network group is scoped to its zone; a group with no zone hangs under its region."""

    region: str | None = None
    zone: str | None = None
    network_group: str | None = None

    def value(self, level: str) -> str | None:
        return getattr(self, level)  # type: ignore[no-any-return]

    @property
    def known(self) -> bool:
        return self.region is not None

    def describe(self) -> str:
        parts = [f"{lvl}={self.value(lvl)}" for lvl in LEVELS if self.value(lvl) is not None]
        return ", ".join(parts) if parts else "no location"

    def covers(self, other: Location) -> bool:
        """True when every level set here is set to the same value in ``other``."""
        return all(self.value(lvl) is None or self.value(lvl) == other.value(lvl) for lvl in LEVELS)


NO_LOCATION = Location()

# Node attributes rendered on the NodeName= line, in this order (slurm.conf(5) "NODE CONFIGURATION").
SLURM_NODE_KEYS = (
    "NodeHostname",
    "NodeAddr",
    "Port",
    "CPUs",
    "Boards",
    "Sockets",
    "SocketsPerBoard",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
    "TmpDisk",
    "CoreSpecCount",
    "CpuSpecList",
    "MemSpecLimit",
    "CpuBind",
    "Gres",
    "Weight",
    "State",
)
SLURM_INT_KEYS = frozenset(
    {
        "Port",
        "CPUs",
        "Boards",
        "Sockets",
        "SocketsPerBoard",
        "CoresPerSocket",
        "ThreadsPerCore",
        "RealMemory",
        "TmpDisk",
        "CoreSpecCount",
        "MemSpecLimit",
        "Weight",
    }
)
SLURM_PER_NODE_KEYS = frozenset({"NodeHostname", "NodeAddr", "Port"})
"""Keys that name one node each: on a multi-node entry they must be hostlists of the same length."""

SLURM_INT_RANGES: dict[str, tuple[int, int]] = {
    # slurm.conf's parser (parse_value.c) reads these as uint16/uint32/uint64 with strtoul(..., 0): a leading
    # 0 means octal and 0x hex, so only plain decimals are written. 0 is "invalid, reset to 1" for the
    # counts (read_config.c), 0xffff/0xfffe are INFINITE16/NO_VAL16, 0xffffffff/0xfffffffe INFINITE/NO_VAL.
    "Port": (1, 65_535),
    "CPUs": (1, 65_533),
    "Boards": (1, 65_533),
    "Sockets": (1, 65_533),
    "SocketsPerBoard": (1, 65_533),
    "CoresPerSocket": (1, 65_533),
    "ThreadsPerCore": (1, 65_533),
    "RealMemory": (0, 2**40),  # MB (uint64 in Slurm): up to 1 EiB per node
    "TmpDisk": (0, 2**32 - 3),  # MB, uint32
    "CoreSpecCount": (0, 65_533),  # uint16, cores set aside for Slurm's daemons
    "MemSpecLimit": (0, 2**40),  # MB (uint64), like RealMemory
    "Weight": (0, 2**32 - 2),  # uint32; Slurm itself turns INFINITE into 2**32-2
}
"""Accepted values of the integer ``NodeName=`` attributes (both ends included); the same in 22.05 to
25.11."""

SLURM_NODE_STATES = ("CLOUD", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "UNKNOWN")
"""``State=`` values of a NodeName= line (slurm.conf(5)); any other value is fatal to slurmctld
("Invalid state", node_conf.c). Compared without case, as Slurm does."""


@dataclass(frozen=True, slots=True)
class Node:
    """One Slurm node as the merged inventory knows it."""

    name: str
    location: Location = NO_LOCATION
    features: tuple[str, ...] = ()
    gpus: int | None = None
    gpu_type: str | None = None
    slurm: tuple[tuple[str, str], ...] = ()
    """NodeName= attributes as (key, value) pairs in ``SLURM_NODE_KEYS`` order."""
    source: Source = Source.OPERATOR
    origin: str = ""
    """Where the record came from (``FILE: nodes[3]``), for messages."""
    found_by: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    gpu_topology: Any = None
    """The node's GPU links (``slurm_topo.gpu.gpu_topology.GpuTopology``), from the entry's ``gpu_topology:``
    file."""
    location_source: Source | None = None
    """Who supplied the node's region when another record filled it in; None means ``source`` did."""
    nvlink_domain: str | None = None
    """The node's NVLink scale-up domain (an NVL72 rack, a fabric clique): a label, or None."""
    nvlink_source: Source | None = None
    """Who supplied ``nvlink_domain`` when another record filled it in; None means ``source`` did."""
    degraded: bool = False
    """Its links are degraded (a health record, ``slurm_topo.health.effects``): no location features, so no
    required locality and no filter group counts it."""
    net_ratio: float = 1.0
    """Its network ports' measured rate over the expected one (a health record; 1.0 when unknown or full):
    the cost model scales the node's network hops by it."""
    switches: tuple[str, ...] = ()
    """The switch layers below its network group, top first (``switches:``; a provider's sub-block and host,
    AWS's lower network nodes): labels, each scoped by the ones above it. Empty without a network group."""
    switches_source: Source | None = None
    """Who supplied ``switches`` when another record filled them in; None means ``source`` did."""

    @property
    def located_by(self) -> Source:
        return self.location_source if self.location_source is not None else self.source

    def slurm_attr(self, key: str) -> str | None:
        for k, v in self.slurm:
            if k == key:
                return v
        return None


_NODE_FIELDS = (
    "name",
    "location",
    "features",
    "gpus",
    "gpu_type",
    "slurm",
    "source",
    "origin",
    "found_by",
    "notes",
    "gpu_topology",
    "location_source",
    "nvlink_domain",
    "nvlink_source",
    "degraded",
    "net_ratio",
    "switches",
    "switches_source",
)
if Node.__slots__ != _NODE_FIELDS:  # pragma: no cover - a field added to Node must be added to nodes_alike
    raise AssertionError("model.nodes_alike sets every field of Node: update it with Node's fields")


def nodes_alike(
    names: Sequence[str],
    slurm: Sequence[tuple[tuple[str, str], ...]],
    *,
    location: Location,
    features: tuple[str, ...],
    gpus: int | None,
    gpu_type: str | None,
    source: Source,
    origin: str,
    found_by: tuple[tuple[str, str], ...],
    notes: tuple[str, ...],
    gpu_topology: Any,
    nvlink_domain: str | None,
    switches: tuple[str, ...] = (),
) -> list[Node]:
    """``[Node(name=names[i], slurm=slurm[i], location=location, ...) for i ...]``, equal to what the
    constructor makes (the other fields at their defaults), at 40 % of its CPU: one entry of an inventory
    makes thousands of nodes that differ only in name (and per-node ``slurm:`` values), and the frozen
    dataclass's ``__init__`` goes through ``object.__setattr__`` once per field. Here each field's slot is
    set through its descriptor directly."""
    new = object.__new__
    set_name, set_location, set_features = _SET["name"], _SET["location"], _SET["features"]
    set_gpus, set_gpu_type, set_slurm, set_source = (
        _SET["gpus"],
        _SET["gpu_type"],
        _SET["slurm"],
        _SET["source"],
    )
    set_origin, set_found_by, set_notes = _SET["origin"], _SET["found_by"], _SET["notes"]
    set_gpu_topology, set_location_source = _SET["gpu_topology"], _SET["location_source"]
    set_nvlink_domain, set_nvlink_source = _SET["nvlink_domain"], _SET["nvlink_source"]
    set_degraded, set_net_ratio = _SET["degraded"], _SET["net_ratio"]
    set_switches, set_switches_source = _SET["switches"], _SET["switches_source"]
    out: list[Node] = []
    append = out.append
    for name, attrs in zip(names, slurm, strict=True):
        node = new(Node)
        set_name(node, name)
        set_location(node, location)
        set_features(node, features)
        set_gpus(node, gpus)
        set_gpu_type(node, gpu_type)
        set_slurm(node, attrs)
        set_source(node, source)
        set_origin(node, origin)
        set_found_by(node, found_by)
        set_notes(node, notes)
        set_gpu_topology(node, gpu_topology)
        set_location_source(node, None)
        set_nvlink_domain(node, nvlink_domain)
        set_nvlink_source(node, None)
        set_degraded(node, False)
        set_net_ratio(node, 1.0)
        set_switches(node, switches)
        set_switches_source(node, None)
        append(node)
    return out


_SET = {name: getattr(Node, name).__set__ for name in _NODE_FIELDS}
"""Each field's slot setter (the member descriptor's ``__set__``): what ``nodes_alike`` writes with."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two sources of different trust disagree on where a node is; the trusted one is kept."""

    node: str
    kept: Location
    kept_source: Source
    kept_origin: str
    ignored: Location
    ignored_source: Source
    ignored_origin: str
    kept_domain: str | None = None
    ignored_domain: str | None = None
    """The NVLink domains, set only when the two records disagree on it."""
    kept_switches: tuple[str, ...] = ()
    ignored_switches: tuple[str, ...] = ()
    """The switch layers below the network group, set only when the two records disagree on them."""

    def message(self) -> str:
        fields = [lvl for lvl in LEVELS if self.kept.value(lvl) != self.ignored.value(lvl)]
        said = [(lvl, self.ignored.value(lvl), self.kept.value(lvl)) for lvl in fields]
        if self.kept_domain != self.ignored_domain:
            said.append(("nvlink_domain", self.ignored_domain, self.kept_domain))
        if self.kept_switches != self.ignored_switches:
            said.append(("switches", "/".join(self.ignored_switches), "/".join(self.kept_switches)))
        diff = "; ".join(
            f"{lvl}: {self.ignored_source.label} says {ignored or '(none)'}, "
            f"{self.kept_source.label} says {kept or '(none)'}"
            for lvl, ignored, kept in said
        )
        return (
            f"conflict: node {self.node}: {diff}; keeping the {self.kept_source.label} record "
            f"({self.kept_origin}) over {self.ignored_origin}"
        )


@dataclass(frozen=True, slots=True)
class Inventory:
    """The merged fleet: nodes sorted by name, each once; conflicts and warnings kept for the caller to
    report."""

    nodes: tuple[Node, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    warnings: tuple[str, ...] = ()
    extra_nodes: tuple[str, ...] = field(default=())
    """Nodes Slurm knows that no inventory places (``--nodes-from``/``--scontrol``): root leaf only."""
    policy: PolicyConfig | None = None
    nvlink: NvlinkConfig | None = None
    links: Any = field(default=None, repr=False, compare=False)
    """The inventory's ``links:`` table (``slurm_topo.cost.links.LinkTable``; None: the defaults): what the
    submit filter's ``:auto`` budgets are computed with."""

    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The ``policy:`` section of an operator inventory: defaults for the submit filter."""

    default: str = "prefer"
    partitions: tuple[tuple[str, str], ...] = ()
    """Partition name -> default locality (``zone:wait``) for jobs that ask for none."""
    families: tuple[tuple[str, str], ...] = ()
    """Compatibility family name -> glob over node features (``torch: 'torch-*'``): groups become buckets."""
    plan: str | None = field(default=None, repr=False, compare=True)
    """The site's default parallelism plan (``tp=8,pp=4,bytes=10G``): ``explain``'s cost prediction and the
    filter's ``:auto`` budgets. Not in ``repr``; ``render.fingerprint`` adds it only when set, so inventories
    without a plan keep their fingerprints."""
    nvl_segment: str | None = field(default=None, repr=False, compare=True)
    """The site's segment for ``nvl`` jobs larger than one NVLink domain (``2``, ``8:spread``): what
    ``--locality=nvl`` does as ``nvl:segment=…`` (the filter sets ``segment_size`` on 25.11.2+). Not in
    ``repr``; fingerprinted only when set, like ``plan``."""


NVLINK_TOPOLOGIES = ("auto", "tree", "block")


@dataclass(frozen=True, slots=True)
class NvlinkConfig:
    """The ``nvlink:`` section of an operator inventory: how NVLink domains become Slurm topology."""

    topology: str = "auto"
    """``auto``: a block topology where the release has one (topology.conf blocks on 23.11-24.11 when every
    node has a domain, topology.yaml beside the tree from 25.05); ``tree``: keep the network tree only (the
    domains are node features); ``block``: blocks, refused where the release has none."""
    block_sizes: tuple[int, ...] = ()
    """``BlockSizes`` (base block first); empty: derived from the domains."""
    domains: tuple[str, ...] = ()
    """The block order to keep: these domains first, in this order (a missing one keeps its slot as an
    empty placeholder block), then the others by name."""
