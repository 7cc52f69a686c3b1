"""slurm-topo: the shape of a GPU fleet, written as Slurm configuration.

Data flow (ARCHITECTURE.md): sources -> ``Inventory`` -> renderers -> files. Importing this package reads no
file, starts no process and configures no logging.
"""

from .errors import (
    CommandError,
    HostlistError,
    InputError,
    InventoryError,
    OutputError,
    ParseError,
    SlurmTopoError,
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
    "HostlistError",
    "InputError",
    "Inventory",
    "InventoryError",
    "Location",
    "Node",
    "OutputError",
    "ParseError",
    "SlurmTopoError",
    "Source",
    "Switch",
    "Topology",
    "__version__",
    "build_topology",
    "load_inventories",
    "merge",
    "parse_inventory",
    "render_all",
]
