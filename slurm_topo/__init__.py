"""slurm-topo: the shape of a GPU fleet, written as Slurm configuration.

Data flow (ARCHITECTURE.md): sources -> ``Inventory`` -> renderers -> files. Importing this package reads no
file, starts no process and configures no logging.
"""

from typing import TYPE_CHECKING

from .core.errors import (
    CommandError,
    ExitCode,
    HostlistError,
    InputError,
    InventoryError,
    OutputError,
    ParseError,
    PlacementError,
    SlurmTopoError,
    UsageError,
    exit_code_for,
)
from .core.model import Conflict, Inventory, Location, Node, Source
from .core.topology import Switch, Topology, build_topology
from .plumbing.version import __version__
from .render import RENDERERS, render_all

if TYPE_CHECKING:
    from .inventory import load_inventories, merge, parse_inventory


def __getattr__(name: str) -> object:
    """The YAML loader is imported on first use only: the pure core (model, policy, cost, render) never
    imports it (``import slurm_topo.policy`` leaves PyYAML unloaded)."""
    if name in ("load_inventories", "merge", "parse_inventory"):
        from . import inventory

        return getattr(inventory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RENDERERS",
    "CommandError",
    "Conflict",
    "ExitCode",
    "HostlistError",
    "InputError",
    "Inventory",
    "InventoryError",
    "Location",
    "Node",
    "OutputError",
    "ParseError",
    "PlacementError",
    "SlurmTopoError",
    "Source",
    "Switch",
    "Topology",
    "UsageError",
    "__version__",
    "build_topology",
    "exit_code_for",
    "load_inventories",
    "merge",
    "parse_inventory",
    "render_all",
]
