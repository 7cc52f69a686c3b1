"""GPUs inside a node: nvidia-smi topo -m / NVML readers, the link model, NVLink islands and pick_devices."""

from .gpu_topology import GpuTopology
from .links import DEFAULT_BANDWIDTH, bandwidth_table, islands, link_bandwidth
from .nvidia_smi import parse_topo_matrix
from .pick import pick_devices, pick_exhaustive

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
