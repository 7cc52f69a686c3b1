"""slurm-topo: the shape of a GPU fleet, written as Slurm configuration.

Data flow (ARCHITECTURE.md): sources -> ``Inventory`` -> renderers -> files. Importing this package reads no
file, starts no process and configures no logging.
"""

from .errors import (
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
from .inventory import load_inventories, merge, parse_inventory
from .model import Conflict, Inventory, Location, Node, Source
from .render import RENDERERS, render_all
from .topology import Switch, Topology, build_topology
from .version import __version__

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
