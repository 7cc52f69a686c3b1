"""The canonical model: immutable value types every source produces and every renderer reads.

Nothing here touches the world. ``Inventory`` is the merged fleet (one ``Node`` per name, sorted); sources
(inventory files, self-reports, Slurm's node list) build it, renderers only translate it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

LABEL_RE = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")
"""Region, zone, network-group and feature labels: validated, never rewritten."""

NODE_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")

LEVELS = ("region", "zone", "network_group")
"""Location levels, coarsest first. ``prefer`` and ``any`` are policies, not levels."""


class Source(enum.IntEnum):
    """Who said where a node is; a higher value is trusted more (DESIGN D3)."""

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
        "Weight",
    }
)
SLURM_PER_NODE_KEYS = frozenset({"NodeHostname", "NodeAddr", "Port"})
"""Keys that name one node each: on a multi-node entry they must be hostlists of the same length."""


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
    """The node's GPU links (``slurm_topo.gpu.model.GpuTopology``), from the entry's ``gpu_topology:`` file."""
    location_source: Source | None = None
    """Who supplied the node's region when another record filled it in; None means ``source`` did."""

    @property
    def located_by(self) -> Source:
        return self.location_source if self.location_source is not None else self.source

    def slurm_attr(self, key: str) -> str | None:
        for k, v in self.slurm:
            if k == key:
                return v
        return None


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

    def message(self) -> str:
        fields = [lvl for lvl in LEVELS if self.kept.value(lvl) != self.ignored.value(lvl)]
        diff = "; ".join(
            f"{lvl}: {self.ignored_source.label} says {self.ignored.value(lvl) or '(none)'}, "
            f"{self.kept_source.label} says {self.kept.value(lvl) or '(none)'}"
            for lvl in fields
        )
        return (
            f"conflict: node {self.node}: {diff}; keeping the {self.kept_source.label} record "
            f"({self.kept_origin}) over {self.ignored_origin}"
        )


@dataclass(frozen=True, slots=True)
class Inventory:
    """The merged fleet: nodes sorted by name, each once; conflicts and warnings kept for the caller to report."""

    nodes: tuple[Node, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    warnings: tuple[str, ...] = ()
    extra_nodes: tuple[str, ...] = field(default=())
    """Nodes Slurm knows that no inventory places (``--nodes-from``/``--scontrol``): root leaf only."""
    policy: PolicyConfig | None = None

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
