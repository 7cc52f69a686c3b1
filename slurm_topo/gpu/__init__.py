"""GPUs inside a node: nvidia-smi topo -m / NVML readers, the link model, NVLink islands and pick_devices."""

from .links import DEFAULT_BANDWIDTH, bandwidth_table, islands, link_bandwidth
from .model import GpuTopology
from .pick import pick_devices, pick_exhaustive
from .topo import parse_topo_matrix

__all__ = [
    "DEFAULT_BANDWIDTH",
    "GpuTopology",
    "bandwidth_table",
    "islands",
    "link_bandwidth",
    "parse_topo_matrix",
    "pick_devices",
    "pick_exhaustive",
]
