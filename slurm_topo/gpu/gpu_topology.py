"""Value types for the GPUs inside one node.

A :class:`GpuTopology` is what ``nvidia-smi topo -m`` prints (or what NVML answers), normalised: GPU indices
in PCI-bus order, the GPU×GPU link classes, the NIC columns, and the affinity columns. It is immutable (style
§10): pickers take ``(topology, free)`` and return a new selection; nothing mutates a topology.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: PCIe link classes, fastest first. ``SOC`` (old drivers) is normalised to ``SYS``.
PCIE_CLASSES: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True, slots=True)
class GpuTopology:
    """The GPUs of one node and the links between them.

    ``matrix[i][j]`` is the link class between ``gpus[i]`` and ``gpus[j]``: ``"X"`` on the diagonal,
    ``"NV<n>"`` (n bonded NVLinks), ``"PIX"``, ``"PXB"``, ``"PHB"``, ``"NODE"`` or ``"SYS"``. An empty matrix
    means "no link data" (pickers then fall back to the lowest free indices).

    ``nics`` names the NIC columns in printed order (the NIC legend's device name when there is one, e.g.
    ``mlx5_gdr_0``, else the column label); ``nic_matrix[i][c]`` is the class between GPU ``i`` and NIC ``c``.
    ``cpu_affinity``, ``numa_affinity`` and ``gpu_numa_id`` are per GPU, as printed (``"0-11,24-35"``),
    ``None`` when empty, ``N/A`` or unknown. ``minors`` are the ``/dev/nvidiaN`` minor numbers where NVML told
    us. ``nvswitch`` holds the GPUs whose NVLinks end at an NVSwitch (NVML only). ``warnings`` lists what was
    guessed or dropped (best-effort cells); ``source`` names where it came from.
    """

    gpus: tuple[int, ...]
    matrix: tuple[tuple[str, ...], ...]
    nics: tuple[str, ...] = ()
    nic_matrix: tuple[tuple[str, ...], ...] = ()
    cpu_affinity: tuple[str | None, ...] = ()
    numa_affinity: tuple[str | None, ...] = ()
    gpu_numa_id: tuple[str | None, ...] = ()
    minors: tuple[int | None, ...] = ()
    nvswitch: frozenset[int] = field(default_factory=frozenset)
    warnings: tuple[str, ...] = ()
    source: str = ""

    def link(self, a: int, b: int) -> str:
        """The link class between GPU ``a`` and GPU ``b`` (by GPU index)."""
        return self.matrix[self.gpus.index(a)][self.gpus.index(b)]

    @property
    def has_links(self) -> bool:
        """True when the GPU×GPU matrix is known."""
        return bool(self.matrix)
