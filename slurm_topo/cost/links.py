"""Link levels and their constants: where two ranks meet, and what a byte costs there.

Two GPUs meet at the lowest level they share (fastest first):

==============  =======================================================================================
level           meaning
==============  =======================================================================================
nvlink          same NVLink island in one node (``NV<n>`` in the node's ``gpu_topology``), or two nodes of
                one multi-node NVLink domain (an NVL72 rack)
node            same node, no link data (``gpu_topology`` absent)
pcie            same node, different islands, through PCIe switches or one CPU (PIX, PXB, PHB, NODE)
sys             same node, across the CPU sockets (SYS)
switch          different nodes under one switch below their network group (the entry's ``switches:``: a
                provider's sub-block or host, AWS's lower network nodes; ``leaf_<zone>.<label>`` in the tree)
network_group   different nodes under one leaf (the inventory's network group)
zone            different network groups of one zone (through the spine)
region          different zones of one region
any             different regions, or a node with no location
==============  =======================================================================================

Each level has a bandwidth (GB/s per GPU, one direction; 1 GB = 1e9 bytes) and a per-hop latency (µs). The
defaults below cite their source (``docs`` = the project's fact sheet on α/β constants per level, which
quotes NCCL's ``src/graph/topo.h`` / ``tuning.cc`` and the cloud providers' own pages). Measure your fleet
and override them in the inventory's ``links:`` mapping (:func:`parse_links`); rank *ratios* matter more
than the absolute figures.

Rails (``links: {rails: …}``): on a rail-optimised fabric (DGX SuperPOD) NIC ``k`` of every node of a leaf
group goes to rail switch ``k``, and traffic between two rails goes through the spine. ``rails`` maps the
compute NICs (``nvidia-smi topo -m``'s names, ``mlx5_0``) to their rail (a number or a label); NICs left out
(storage, management) carry no job traffic. ``rails: gpu_index`` says the fabric is rail-optimised with GPU
``k`` on rail ``k`` without naming NICs. The model (:mod:`.model`) then counts a hop between two nodes of one
network group whose GPUs sit on different rails as a ``zone`` hop.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..core.errors import InputError, show_value
from ..gpu.gpu_topology import GpuTopology
from ..gpu.nccl_rings import LinkSpeeds, RingPlan, plan_rings

LINK_LEVELS: tuple[str, ...] = (
    "nvlink",
    "node",
    "pcie",
    "sys",
    "switch",
    "network_group",
    "zone",
    "region",
    "any",
)
"""Every level, fastest first (inside a node, then the network from the deepest switch up)."""

NODE_LEVELS: tuple[str, ...] = ("nvlink", "node", "pcie", "sys")
NETWORK_LEVELS: tuple[str, ...] = ("network_group", "zone", "region", "any")
"""The levels between nodes that ``calibrate`` measures and keeps in order (a pair under one switch is
measured as its network group's: the ``switch`` level then follows it, :meth:`LinkTable.__getitem__`)."""
FABRIC_LEVELS: tuple[str, ...] = ("switch", *NETWORK_LEVELS)
"""Every level between nodes, the deepest first: none may be faster or nearer than the one inside it."""

SWITCH_SAVING_US = 0.8
"""What the ``switch`` level saves over ``network_group`` in every profile, a choice: two switch traversals
fewer (up to the group's spine and down again) at the 0.4 µs a switch hop the ``network_group`` default
cites (NCCL's NET latency, switch hop 0.13-0.4 µs). No provider publishes a figure: GCE says only that
"instances in the same sub-block experience lower network latency than instances in the same block", AWS
that the fewer the hops between network nodes, the closer the instances. The bandwidth stays the group's
(no source gives another)."""


def _switch(group: Link) -> Link:
    """The ``switch`` level of a table whose ``network_group`` is ``group`` (:data:`SWITCH_SAVING_US`)."""
    return Link(group.bandwidth, max(0.0, group.latency_us - SWITCH_SAVING_US))


@dataclass(frozen=True, slots=True)
class Link:
    """One level's constants: ``bandwidth`` in GB/s per GPU per direction, ``latency_us`` per hop."""

    bandwidth: float
    latency_us: float

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth * 1e9

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


# Defaults (GB/s per GPU, one direction; µs per hop).
DEFAULT_LINKS: Mapping[str, Link] = MappingProxyType(
    {
        # NVLink 4 (H100) through NVSwitch: 18 links; 900 GB/s both directions = 450 one way (NVIDIA H100
        # datasheet; the topology-aware scheduling concept uses 450). NCCL's own figure is 18 × 20.6 = 371
        # (topo.h SM90_NVLINK_BW 20.6). Latency: NCCL hwLat NVLINK ring Simple 3.4 µs, LL 0.6 -> 1 µs.
        "nvlink": Link(450.0, 1.0),
        # Same node without link data: assumed to be the common 8-GPU SXM board with NVSwitch (as nvlink).
        # Give the node a gpu_topology (or override `node:`) for PCIe-only machines.
        "node": Link(450.0, 1.0),
        # PCIe Gen5 x16: NCCL kvDictPciGen 60 per lane × 16 / 20 = 48 GB/s (topo.cc: width × GT/s-code / 80;
        # Gen4 24, Gen3 12). Latency: NCCL hwLat PCI ring 1.0/2.5/5.7 µs (LL/LL128/Simple) -> 2 µs.
        "pcie": Link(48.0, 2.0),
        # Across CPU sockets: NCCL topo.h inter-CPU bandwidth: Intel SPR UPI 22, ERP 40, AMD 16, SKL QPI 10;
        # 22 (Sapphire Rapids) as the default. Latency: PCI latency plus one socket hop -> 3 µs.
        "sys": Link(22.0, 3.0),
        # Under one switch below the network group (a provider's sub-block, AWS's lower network nodes): the
        # group's bandwidth, two switch hops fewer (SWITCH_SAVING_US, a choice) -> 50 GB/s, 4.2 µs.
        "switch": _switch(Link(50.0, 5.0)),
        # Same leaf: one 400 Gb/s NDR port per GPU = 50 GB/s (line rate / 8; the concept's 17.5/50 = 0.35 s);
        # NCCL hwLat NET ring LL/LL128/Simple 2.7/4.0/14.0 µs, switch hop 0.13-0.4 µs -> 5 µs.
        "network_group": Link(50.0, 5.0),
        # Different leaves of one zone: through the spine; a 2:1 oversubscribed spine halves the per-GPU share
        # (rail-optimised SuperPODs are 1:1 inside a scalable unit, cross-SU traffic shares the spine) -> 25.
        # GCP: "round-trip network latencies of <1ms in the 95th percentile" within a region; in one zone
        # ~100 µs.
        "zone": Link(25.0, 100.0),
        # Different zones of one region: AWS AZs are "up to 60 miles (~100 km) ... single-digit millisecond
        # latency" (Fault Isolation Boundaries whitepaper); VM egress tier bandwidth -> 12 GB/s, 1 ms.
        "region": Link(12.0, 1000.0),
        # Different regions: AWS "to other Regions <= 50 % of [instance bandwidth] ... or 5 Gbps";
        # ~1 ms RTT per 100 km of fiber -> tens of ms one way across a continent; a training job
        # measured 56.2 s across europe-west1 + europe-west4 against 45.0-48.6 s inside one region.
        # 5 GB/s, 10 ms.
        "any": Link(5.0, 10_000.0),
    }
)

# A cloud fabric: Google Cloud VMs talking over the VPC (TCP; gloo, or NCCL over sockets without GPUDirect).
# Bandwidth is the VM's egress cap, the same to a VM of the same zone, another zone or another region
# ("Network bandwidth", cloud.google.com/compute/docs/network-bandwidth: 2 Gbps per vCPU, 16 Gbps for an
# 8-vCPU N2, up to 32 Gbps without Tier_1); one gloo flow per ring hop gets it -> 2 GB/s. Latency (one way,
# half the round trip): one zone ~100 µs RTT -> 50 µs; zones of one region "<1ms in the 95th percentile"
# ("Best practices for Compute Engine regions selection") -> 250 µs; across regions the round trip of the
# pair (europe-west1 Belgium <-> europe-west4 Netherlands ~7 ms, GCP's inter-region latency dashboard)
# -> 3.5 ms, and one TCP flow is window-bound: Linux's default 6 MiB tcp_rmem maximum over 7 ms ≈ 0.9 GB/s
# -> 0.75 GB/s. Inside a VM (several ranks of one machine) the defaults stay. The ADR's measurement (two
# zones as fast as one, two regions 1.2× the step) is the regression test of this profile
# (tests/test_cost_step.py, examples/adr-gcp-locality.yaml).
GCP_LINKS: Mapping[str, Link] = MappingProxyType(
    {
        **DEFAULT_LINKS,
        # a GCE sub-block below its block: "lower network latency than instances in the same block" (no
        # figure): the block's bandwidth, two switch hops fewer (SWITCH_SAVING_US, a choice)
        "switch": _switch(Link(2.0, 50.0)),
        "network_group": Link(2.0, 50.0),
        "zone": Link(2.0, 50.0),
        "region": Link(2.0, 250.0),
        "any": Link(0.75, 3500.0),
    }
)

# AWS GPU instances (p5: 8 H100) with EFA, as NCCL runs on them (aws-ofi-nccl). Figures and choices:
# * switch / network_group (under one lower network node of `describe-instance-topology`, or one top node or
#   cluster placement group): EFA. p5.48xlarge has 3200 Gbps of EFA for its 8 GPUs ("Amazon EC2 P5
#   instances") = 400 Gb/s a GPU -> 50 GB/s, the default's NDR figure; latency the default's (NCCL's NET
#   figure: AWS publishes no EFA latency), the lower layer two switch hops nearer (SWITCH_SAVING_US, a
#   choice: "the fewer the hops between network nodes, the closer the instances", "How Amazon EC2 topology
#   works").
# * zone (one AZ, different top network nodes / placement groups): EFA still reaches every instance of the
#   subnet ("low-latency network communications with other instances on the same subnet", ParallelCluster
#   "Elastic Fabric Adapter"); AWS gives no figure for the spine between them: the default's 2:1 choice,
#   25 GB/s, 100 µs.
# * region (different AZs): "Elastic Fabric Adapter (EFA) isn't supported over different availability
#   zones" (ParallelCluster), so NCCL falls back to TCP sockets over ENA, and "bandwidth for single-flow
#   traffic is limited to 5 Gbps when instances are not in the same cluster placement group" ("Amazon EC2
#   instance network bandwidth"): one flow per ring hop -> 0.625 GB/s (a choice: one flow; NCCL may open
#   several). Latency: AZs are "single-digit millisecond" apart -> the default's 1 ms.
# * any (different Regions): "up to 50% of the network bandwidth available" to the instance in aggregate, a
#   flow still 5 Gbps -> 0.625 GB/s; the default's 10 ms.
AWS_LINKS: Mapping[str, Link] = MappingProxyType(
    {
        **DEFAULT_LINKS,
        "switch": _switch(Link(50.0, 5.0)),
        "network_group": Link(50.0, 5.0),
        "zone": Link(25.0, 100.0),
        "region": Link(0.625, 1000.0),
        "any": Link(0.625, 10_000.0),
    }
)

# Azure ND H100 v5 VMs (8 H100). Figures and choices:
# * switch / network_group (one proximity placement group, as `import azure` reads it; a VM scale set):
#   "Each GPU within the VM is provided with its own dedicated, topology-agnostic 400 Gb/s NVIDIA Quantum-2
#   CX7 InfiniBand connection. These connections are automatically configured between VMs occupying the same
#   virtual machine scale set" ("ND H100 v5 series") -> 50 GB/s a GPU; latency the default's NDR figure,
#   the lower switch two hops nearer (SWITCH_SAVING_US, a choice). That the group is one scale set is a
#   choice: a proximity group does not itself give InfiniBand.
# * zone, region (outside the InfiniBand of one scale set): the VM's Ethernet, "Network: 8 NICs, 80000
#   Mbps" (ND H100 v5 specifications) shared by its 8 GPUs -> 10 Gb/s = 1.25 GB/s a GPU (the sharing a
#   choice). Latency: in one zone no figure is published -> 50 µs (the gcp profile's in-zone figure, a
#   choice); zones are "connected by a high-performance network with a round-trip latency of less than
#   2ms" ("What are availability zones?") -> 1 ms one way.
# * any (another region): no bandwidth figure below the VM's own: 1.25 GB/s; the default's 10 ms.
AZURE_LINKS: Mapping[str, Link] = MappingProxyType(
    {
        **DEFAULT_LINKS,
        "switch": _switch(Link(50.0, 5.0)),
        "network_group": Link(50.0, 5.0),
        "zone": Link(1.25, 50.0),
        "region": Link(1.25, 1000.0),
        "any": Link(1.25, 10_000.0),
    }
)


@dataclass(frozen=True, slots=True)
class Generation:
    """A GPU generation's links inside a node: ``per_link`` GB/s one direction per bonded NVLink, ``links``
    per GPU (what an NVSwitch gives every pair; a bridged PCIe card: its bridge's links), ``pcie`` GB/s of
    its host link (None: the table's), ``source``: where the figures come from (NCCL's own constants, which
    its ring search plans with), ``sm``: the compute capability × 10 (``90`` = sm90) that picks NCCL's
    constant. A GPU without NVLink (``nvlink=False``: T4, L40S, RTX 4090) meets another over PCIe only:
    its one "link" is its host link (``links`` 1 × ``per_link`` = ``pcie``). ``assumed``: not a generation
    the model knows but the stated default for a ``gpu_type`` it cannot read (:data:`UNKNOWN_GENERATION`)."""

    name: str
    per_link: float
    links: int
    pcie: float | None
    source: str
    sm: int = 0
    nvlink_capable: bool = True
    assumed: bool = False

    @property
    def nvlink(self) -> float:
        """GB/s of a GPU's whole NVLink (through an NVSwitch, or a pair bonded over every link); without
        NVLink, its PCIe host link."""
        return self.per_link * self.links

    def describe(self) -> str:
        if self.assumed:
            return (
                f"{self.name}: {self.links} × {self.per_link:g} GB/s, PCIe {self.pcie:g} GB/s ({self.source})"
            )
        if not self.nvlink_capable:
            return f"{self.name} (sm{self.sm}, no NVLink: PCIe {self.per_link:g} GB/s; {self.source})"
        return f"{self.name} (sm{self.sm}, {self.links} × {self.per_link:g} GB/s; {self.source})"


# NCCL's per-link NVLink bandwidth by compute capability (NCCL 2.30.7, src/graph/topo.h SMxx_NVLINK_BW and
# ncclTopoNVLinkBw: cc >= 100 SM100 40.1, >= 90 SM90 20.6, == 86 SM86 12.0, >= 80 SM80 20.0, >= 70 SM70 20.0,
# >= 60 SM60 18.0, below: SM80's), GB/s one way: what NCCL's ring search plans with, below the datasheets'
# link rates and nearer what is measured (an A100 NV12 pair ~208 GB/s in nccl-tests, 240 here, 300 nominal).
SM_NVLINK_BW: Mapping[int, float] = MappingProxyType(
    {100: 40.1, 90: 20.6, 86: 12.0, 80: 20.0, 70: 20.0, 60: 18.0}
)
NCCL_FALLBACK_NVLINK_BW = 20.0
"""ncclTopoNVLinkBw's answer below sm60 (and NCCL's choice for a GPU it cannot place): SM80_NVLINK_BW."""
# PCIe x16 per generation as NCCL reads it (src/graph/topo.cc: width × kvDictPciGen / 80; 8 GT/s 60,
# 16 GT/s 120, 32 GT/s 240 per lane; a speed it cannot read: 60, i.e. Gen3).
PCIE_GEN: Mapping[int, float] = MappingProxyType({3: 12.0, 4: 24.0, 5: 48.0})
NCCL_SOURCE = "NCCL 2.30.7 topo.h"


def nvlink_bw(sm: int) -> float:
    """NCCL's ``ncclTopoNVLinkBw(cudaCompCap)`` (GB/s per link, one way)."""
    if sm >= 100:
        return SM_NVLINK_BW[100]
    if sm >= 90:
        return SM_NVLINK_BW[90]
    if sm == 86:
        return SM_NVLINK_BW[86]
    for floor in (80, 70, 60):
        if sm >= floor:
            return SM_NVLINK_BW[floor]
    return NCCL_FALLBACK_NVLINK_BW


def _nv(name: str, sm: int, links: int, gen: int | None) -> Generation:
    """An NVLink part: ``links`` per GPU (datasheet), NCCL's per-link constant for ``sm``, PCIe ``gen``."""
    const = "SM100" if sm >= 100 else "SM90" if sm >= 90 else "SM86" if sm == 86 else f"SM{sm // 10 * 10}"
    pcie = PCIE_GEN[gen] if gen is not None else None
    host = f"; PCIe Gen{gen} x16" if gen is not None else ""
    return Generation(
        name, nvlink_bw(sm), links, pcie, f"{NCCL_SOURCE} {const}_NVLINK_BW {nvlink_bw(sm):g}{host}", sm
    )


def _pcie_only(name: str, sm: int, gen: int) -> Generation:
    """A part without NVLink: two of them meet over their PCIe host links (NCCL topo.cc kvDictPciGen)."""
    bw = PCIE_GEN[gen]
    return Generation(
        name, bw, 1, bw, f"PCIe Gen{gen} x16, NCCL topo.cc kvDictPciGen", sm, nvlink_capable=False
    )


# Per GPU part: compute capability (CUDA's table), NVLinks per GPU (NVIDIA's datasheets: P100 SXM2 4, V100
# SXM2 6, A100 SXM4 12, A800 8 (400 GB/s), H100/H200/H20 SXM 18, H800 8 (400 GB/s), B200/B300 18; bridged
# PCIe cards: the links one bridge set gives a pair, A100/H100 PCIe 12, A30 4, A6000/A40/A5000/RTX 3090 4
# (112.5 GB/s both ways), TITAN RTX/RTX 2080 Ti/Quadro RTX 2), and the host link's PCIe generation.
GENERATIONS: Mapping[str, Generation] = MappingProxyType(
    {
        "k40": _pcie_only("K40 (Kepler)", 35, 3),
        "k80": _pcie_only("K80 (Kepler)", 37, 3),
        "m60": _pcie_only("M60 (Maxwell)", 52, 3),
        "p100": _nv("P100 NVLink 1", 60, 4, 3),
        "p100-pcie": _pcie_only("P100 PCIe", 60, 3),
        "p40": _pcie_only("P40 (Pascal)", 61, 3),
        "v100": _nv("V100 NVLink 2", 70, 6, 3),
        "v100-pcie": _pcie_only("V100 PCIe", 70, 3),
        "t4": _pcie_only("T4 (Turing)", 75, 3),
        "rtx2080ti": _nv("RTX 2080 Ti NVLink bridge", 75, 2, 3),
        "titanrtx": _nv("TITAN RTX NVLink bridge", 75, 2, 3),
        "a100": _nv("A100 NVLink 3", 80, 12, 4),
        "a100-pcie": _nv("A100 PCIe NVLink bridge", 80, 12, 4),
        "a800": _nv("A800 NVLink 3 (8 links)", 80, 8, 4),
        "a30": _nv("A30 NVLink bridge", 80, 4, 4),
        "a6000": _nv("RTX A6000 NVLink bridge", 86, 4, 4),
        "a40": _nv("A40 NVLink bridge", 86, 4, 4),
        "a5000": _nv("RTX A5000 NVLink bridge", 86, 4, 4),
        "rtx3090": _nv("RTX 3090 NVLink bridge", 86, 4, 4),
        "a10": _pcie_only("A10 (Ampere)", 86, 4),
        "l40s": _pcie_only("L40S (Ada)", 89, 4),
        "l40": _pcie_only("L40 (Ada)", 89, 4),
        "l4": _pcie_only("L4 (Ada)", 89, 4),
        "rtx4090": _pcie_only("RTX 4090 (Ada)", 89, 4),
        "rtx6000ada": _pcie_only("RTX 6000 Ada", 89, 4),
        "h100": _nv("H100 NVLink 4", 90, 18, 5),
        "h100-pcie": _nv("H100 PCIe/NVL NVLink bridge", 90, 12, 5),
        "h200": _nv("H200 NVLink 4", 90, 18, 5),
        "h20": _nv("H20 NVLink 4", 90, 18, 5),
        "h800": _nv("H800 NVLink 4 (8 links)", 90, 8, 5),
        "gh200": _nv("GH200 NVLink 4", 90, 18, 5),
        "b200": _nv("B200 NVLink 5", 100, 18, None),
        "gb200": _nv("GB200 NVLink 5", 100, 18, None),
        "b300": _nv("B300 NVLink 5", 103, 18, None),
        "gb300": _nv("GB300 NVLink 5", 103, 18, None),
        "rtx5090": _pcie_only("RTX 5090 (Blackwell)", 120, 5),
        "rtxpro6000": _pcie_only("RTX PRO 6000 Blackwell", 120, 5),
    }
)
"""GPU parts whose NVLink and PCIe figures the model knows, by the inventory's ``gpu_type`` (read by
:func:`generation_of`: ``h100``, ``nvidia_h100_80gb_hbm3``, ``A100-SXM4-80GB``, ``NVIDIA-B300-SXM6-AC``,
``Tesla-K40m``, ``NVIDIA RTX A6000``). A level the site's ``links:`` sets (or ``slurm-topo calibrate``
measured) wins over them."""
UNKNOWN_GENERATION = Generation(
    "unknown GPU type",
    NCCL_FALLBACK_NVLINK_BW,
    12,
    PCIE_GEN[3],
    "stated default, NCCL's own fallbacks: ncclTopoNVLinkBw below sm60 = SM80_NVLINK_BW 20 × the pair's "
    "bonds, at most an sm80 part's 12 (12 without a capture), PCIe Gen3 x16 12 GB/s = kvDictPciGen's "
    "fallback; name the part in gpu_type",
    0,
    assumed=True,
)
"""What a ``gpu_type`` the model cannot read is costed as (never H100's figures): NCCL's own choices for a GPU
it cannot place. ``cost`` and ``explain`` say so in their notes."""
GENERATION_LEVELS = frozenset(("nvlink", "node", "pcie", "sys"))
"""The levels a GPU generation decides (inside a node, and across one multi-node NVLink domain); ``sys``
only as far as no faster than the generation's PCIe (a path across the sockets crosses PCIe too)."""

# (pattern over the gpu_type lowered with every run of other characters made one space, part), the most
# specific first: a family is a whole word or followed by a letter (``k40m``, ``a10g``, ``v100s``), never by
# a digit (``h20`` is not ``h200``); the form factor (``pcie``, ``nvl``) picks the bridged part.
_PARTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), part)
    for pattern, part in (
        (r"\bgb300(?![0-9])", "gb300"),
        (r"\bb300(?![0-9])", "b300"),
        (r"\bgb200(?![0-9])", "gb200"),
        (r"\bb[12]00(?![0-9])", "b200"),
        (r"\bgh200(?![0-9])", "gh200"),
        (r"\bh100(?![0-9]).*\b(pcie|nvl)\b|\bh100 ?(pcie|nvl)\b", "h100-pcie"),
        (r"\bh100(?![0-9])", "h100"),
        (r"\bh200(?![0-9])", "h200"),
        (r"\bh800(?![0-9])", "h800"),
        (r"\bh20(?![0-9])", "h20"),
        (r"\ba100(?![0-9]).*\bpcie\b|\ba100 ?pcie\b", "a100-pcie"),
        (r"\ba100(?![0-9])", "a100"),
        (r"\ba800(?![0-9])", "a800"),
        (r"\ba30(?![0-9])", "a30"),
        (r"\ba40(?![0-9])", "a40"),
        (r"\ba10(?![0-9])", "a10"),
        (r"\b(rtx ?)?a6000(?![0-9])", "a6000"),
        (r"\b(rtx ?)?a5000(?![0-9])", "a5000"),
        (r"\brtx ?6000 ?ada\b", "rtx6000ada"),
        (r"\brtx ?pro ?6000\b", "rtxpro6000"),
        (r"\bl40s\b", "l40s"),
        (r"\bl40(?![0-9])", "l40"),
        (r"\bl4(?![0-9])", "l4"),
        (r"\b(rtx ?)?5090(?![0-9])", "rtx5090"),
        (r"\b(rtx ?)?4090(?![0-9])", "rtx4090"),
        (r"\b(rtx ?)?3090(?![0-9])", "rtx3090"),
        (r"\b(rtx ?)?2080 ?ti\b", "rtx2080ti"),
        (r"\btitan ?rtx\b", "titanrtx"),
        (r"\bt4(?![0-9])", "t4"),
        (r"\bv100(?![0-9]).*\bpcie\b|\bv100s? ?pcie\b", "v100-pcie"),
        (r"\bv100(?![0-9])", "v100"),
        (r"\bp100(?![0-9]).*\bpcie\b|\bp100 ?pcie\b", "p100-pcie"),
        (r"\bp100(?![0-9])", "p100"),
        (r"\bp40(?![0-9])", "p40"),
        (r"\bm60(?![0-9])", "m60"),
        (r"\bk80(?![0-9])", "k80"),
        (r"\bk40(?![0-9])", "k40"),
    )
)
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def part_of(gpu_type: str | None) -> str | None:
    """The key in :data:`GENERATIONS` a ``gpu_type`` names, or None."""
    if not gpu_type:
        return None
    text = _SEPARATORS.sub(" ", gpu_type.lower()).strip()
    for pattern, part in _PARTS:
        if pattern.search(text):
            return part
    return None


@functools.lru_cache(maxsize=1024)
def generation_of(gpu_type: str | None) -> Generation | None:
    """The generation of a ``gpu_type``: the part it names (:data:`GENERATIONS`); for a name the model cannot
    read, the stated default :data:`UNKNOWN_GENERATION` under that name (never H100's figures); None when the
    node gives no ``gpu_type`` (the table's figures apply)."""
    if not gpu_type:
        return None
    part = part_of(gpu_type)
    if part is not None:
        return GENERATIONS[part]
    return dataclasses.replace(UNKNOWN_GENERATION, name=f"unknown GPU type {show_value(gpu_type[:40])}")


PROFILES: Mapping[str, Mapping[str, Link]] = MappingProxyType(
    {"default": DEFAULT_LINKS, "gcp": GCP_LINKS, "aws": AWS_LINKS, "azure": AZURE_LINKS}
)
"""``links: {profile: …}``: the table a site's own figures go over. ``default``: one InfiniBand/NVLink
fabric (DGX-style nodes, the constants above); ``gcp``: Google Cloud VMs over the VPC (:data:`GCP_LINKS`);
``aws``: EC2 GPU instances with EFA inside an AZ, TCP over ENA across AZs (:data:`AWS_LINKS`); ``azure``: ND
H100 v5 VMs, InfiniBand inside a scale set, the VM's Ethernet outside it (:data:`AZURE_LINKS`)."""
PROFILE_KEY = "profile"

MEASURED_KEY = "measured"
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]{1,15}(?:Z|[+-][0-9:]{1,5})?)?\Z")


@dataclass(frozen=True, slots=True)
class Calibration:
    """A table's ``measured:`` record, as ``cost``/``explain`` name it."""

    date: str
    probe: str
    levels: tuple[str, ...]

    def text(self) -> str:
        return (
            f"links measured by slurm-topo calibrate ({self.probe}, {self.date}): "
            f"{', '.join(self.levels) or 'no level'}; other levels: the base figures"
        )


def parse_measured(raw: object, source: str) -> Calibration:
    """Validate a ``links.measured`` record (what :func:`render` writes)."""
    where = f"{source}.{MEASURED_KEY}"
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: must be a mapping (date, probe, levels), not {show_value(raw)}")
    date, probe, levels = raw.get("date"), raw.get("probe"), raw.get("levels", {})
    if isinstance(date, (datetime.date, datetime.datetime)):  # YAML reads an unquoted timestamp as one
        date = date.isoformat()
    # both reach generated files (the submit-filter data's header): one token of a closed alphabet, so no
    # value can start another line there
    if not isinstance(date, str) or not _DATE_RE.match(date):
        raise InputError(f"{where}.date: must be a date (2026-12-02T17:00:00Z), not {show_value(date)}")
    if not isinstance(probe, str) or not _NAME_RE.match(probe):
        raise InputError(f"{where}.probe: must be the probe's name ([A-Za-z0-9._-]), not {show_value(probe)}")
    if not isinstance(levels, Mapping):
        raise InputError(f"{where}.levels: must be a mapping level -> record, not {show_value(levels)}")
    bad = [k for k in levels if k not in LINK_LEVELS]
    if bad:
        raise InputError(f"{where}.levels: {show_value(bad[0])} is not a level ({', '.join(LINK_LEVELS)})")
    return Calibration(date, probe, tuple(lvl for lvl in LINK_LEVELS if lvl in levels))


LINK_KEYS = frozenset({"bandwidth", "latency_us"})
_ALIASES = {"network-group": "network_group", "ng": "network_group", "domain": "nvlink", "island": "nvlink"}


@dataclass(frozen=True, slots=True)
class LinkTable:
    """The constants of every level (``LINK_LEVELS``); build one with :func:`parse_links`."""

    links: Mapping[str, Link] = field(default_factory=lambda: DEFAULT_LINKS)
    rails: Mapping[str, str] | None = None
    """NIC name -> rail (``links: {rails: …}``); empty: rail-optimised, GPU ``k`` on rail ``k``
    (``rails: gpu_index``); None: no rails (one leaf switch per network group)."""
    measured: Calibration | None = None
    """Where the figures came from when ``slurm-topo calibrate`` wrote them (``links.measured``)."""
    given: frozenset[str] = frozenset()
    """The levels the site set itself (its ``links:`` keys, calibrate's measured ones): a GPU generation's
    figures (:data:`GENERATIONS`) never replace them."""

    def __getitem__(self, level: str) -> Link:
        """A level's figures. A ``switch`` level the site left out follows the ``network_group`` it set (or
        calibrate measured): the group's bandwidth, :data:`SWITCH_SAVING_US` nearer — so a table written
        before the level existed keeps its cost between groups, and the level under a switch is never
        slower than the group above it."""
        if level == "switch" and "switch" not in self.given and "network_group" in self.given:
            return _switch(self.links["network_group"])
        return self.links[level]

    def with_link(self, level: str, link: Link) -> LinkTable:
        return LinkTable(
            MappingProxyType({**self.links, level: link}), self.rails, self.measured, self.given | {level}
        )

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            lvl: {"bandwidth": self[lvl].bandwidth, "latency_us": self[lvl].latency_us} for lvl in self.links
        }


DEFAULT_TABLE = LinkTable()


def profile_of(table: LinkTable) -> str | None:
    """The name of the profile ``table`` is, unchanged (``links: {profile: NAME}`` and nothing else, what
    ``slurm-topo import`` writes: no level the site set, no rails, no calibration); None for any other
    table."""
    if table.given or table.rails is not None or table.measured is not None:
        return None
    return next((name for name, links in PROFILES.items() if dict(table.links) == dict(links)), None)


def slowest(tables: Sequence[LinkTable]) -> LinkTable:
    """Per level the slower of ``tables``: the lowest bandwidth and the highest latency — the conservative
    cost of a job that may span all of them (two providers' imports merged into one fleet). For tables of
    :func:`profile_of`: no level is the site's, so GPU generations still apply inside a node. Network levels
    that do not get faster going out in each table do not in the result either (checked)."""
    links = {
        level: Link(min(t[level].bandwidth for t in tables), max(t[level].latency_us for t in tables))
        for level in LINK_LEVELS
    }
    _check_monotone(links, "links")
    return LinkTable(MappingProxyType(links))


def _number(where: str, raw: object, *, positive: bool) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise InputError(f"{where}: must be a number, not {show_value(raw)}")
    try:
        value = float(raw)
    except OverflowError:
        raise InputError(f"{where}: too large ({show_value(raw)})") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(f"{where}: must be {'above' if positive else 'at least'} 0, not {show_value(raw)}")
    return value


RAILS_KEY = "rails"
GPU_INDEX_RAILS = "gpu_index"
MAX_RAILS = 1024
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")  # the inventory's label alphabet (model.LABEL_RE)


def parse_rails(raw: object, *, source: str = "links.rails") -> Mapping[str, str]:
    """Validate ``links.rails``: ``gpu_index``, or a mapping NIC name -> rail (a whole number 0-65535 or a
    label); the rails as strings. Raises :class:`InputError` with one clear line."""
    if raw == GPU_INDEX_RAILS:
        return MappingProxyType({})
    if not isinstance(raw, Mapping) or not raw:
        raise InputError(
            f"{source}: must be a mapping NIC -> rail ({{mlx5_0: 0, mlx5_1: 1}}) or {GPU_INDEX_RAILS!r}, "
            f"not {show_value(raw)}"
        )
    if len(raw) > MAX_RAILS:
        raise InputError(f"{source}: {len(raw)} NICs, more than {MAX_RAILS}")
    out: dict[str, str] = {}
    for nic, rail in raw.items():
        if not isinstance(nic, str) or not _NAME_RE.match(nic):
            raise InputError(
                f"{source}: NIC name {show_value(nic)} must be 1-63 characters from [A-Za-z0-9._-] "
                "(as nvidia-smi topo -m names it, e.g. mlx5_0)"
            )
        if isinstance(rail, int) and not isinstance(rail, bool) and 0 <= rail <= 65535:
            out[nic] = str(rail)
        elif isinstance(rail, str) and _NAME_RE.match(rail):
            out[nic] = rail
        else:
            raise InputError(
                f"{source}.{nic}: rail must be a whole number 0-65535 or a label of 1-63 characters from "
                f"[A-Za-z0-9._-], not {show_value(rail)}"
            )
    return MappingProxyType(out)


def parse_links(mapping: object, *, source: str = "links", base: LinkTable | None = None) -> LinkTable:
    """Validate an inventory's ``links:`` mapping (level -> ``{bandwidth: GB/s, latency_us: µs}``, and
    ``rails``: :func:`parse_rails`; ``profile``: a named table, :data:`PROFILES`, that replaces ``base``
    before the levels given apply) into a :class:`LinkTable` over ``base`` (default: the defaults). Raises
    :class:`InputError` with one clear line.

    A level may give either key (the other keeps its default). ``network-group``/``ng`` are read as
    ``network_group``, ``domain``/``island`` as ``nvlink``. The network levels must not get faster going
    out: bandwidth ``switch >= network_group >= zone >= region >= any`` and latency the other way round (a
    table that breaks this would make a tighter placement look worse; a ``switch`` the site left out follows
    its ``network_group``: :meth:`LinkTable.__getitem__`)."""
    if mapping is None:
        return base or DEFAULT_TABLE
    if not isinstance(mapping, Mapping):
        raise InputError(
            f"{source}: must be a mapping of level -> {{bandwidth, latency_us}}, not {type(mapping).__name__}"
        )
    table = dict((base or DEFAULT_TABLE).links)
    rails = (base or DEFAULT_TABLE).rails
    measured = (base or DEFAULT_TABLE).measured
    given = set((base or DEFAULT_TABLE).given)
    if PROFILE_KEY in mapping:
        name = mapping[PROFILE_KEY]
        if not isinstance(name, str) or name not in PROFILES:
            raise InputError(
                f"{source}.{PROFILE_KEY}: {show_value(name)} is not a known profile "
                f"(known: {', '.join(PROFILES)})"
            )
        table = dict(PROFILES[name])
        given = set()  # the profile replaces the base table: none of its levels is the site's any more
    seen: dict[str, str] = {}
    for key, raw in mapping.items():
        if key == PROFILE_KEY:
            continue
        if key == RAILS_KEY:
            rails = parse_rails(raw, source=f"{source}.{RAILS_KEY}")
            continue
        if key == MEASURED_KEY:
            measured = parse_measured(raw, source)
            continue
        level = _level_of(key, source, seen)
        table[level] = _link(f"{source}.{key}", raw, table[level])
        given.add(level)
    if MEASURED_KEY in mapping and measured is not None:
        # calibrate writes every level, measured or not: the site's own are the measured ones (and the base's)
        given = set((base or DEFAULT_TABLE).given) | set(measured.levels)
    out = LinkTable(MappingProxyType(table), rails, measured, frozenset(given))
    _check_monotone({lvl: out[lvl] for lvl in table}, source)
    return out


def _level_of(key: object, source: str, seen: dict[str, str]) -> str:
    """A ``links:`` key -> its level (aliases read), refusing an unknown level or one given twice."""
    if not isinstance(key, str):
        raise InputError(f"{source}: level {show_value(key)} must be a string")
    level = _ALIASES.get(key, key)
    if level not in DEFAULT_LINKS:
        raise InputError(
            f"{source}.{key[:40]}: unknown level (known: {', '.join(LINK_LEVELS)}; and {RAILS_KEY}, "
            f"{PROFILE_KEY}, {MEASURED_KEY})"
        )
    if level in seen:
        raise InputError(f"{source}.{key[:40]}: the same level as {seen[level]!r}")
    seen[level] = key
    return level


def _link(where: str, raw: object, old: Link) -> Link:
    """One level's ``{bandwidth, latency_us}`` over its ``old`` figures (a key left out keeps them)."""
    if not isinstance(raw, Mapping):
        raise InputError(
            f"{where}: must be a mapping {{bandwidth: GB/s, latency_us: µs}}, not {show_value(raw)}"
        )
    unknown = sorted(str(k) for k in raw if k not in LINK_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0][:40]!r} (known: bandwidth, latency_us)")
    if not raw:
        raise InputError(f"{where}: give bandwidth (GB/s per GPU, one direction) and/or latency_us")
    bandwidth = (
        _number(f"{where}.bandwidth", raw["bandwidth"], positive=True)
        if "bandwidth" in raw
        else old.bandwidth
    )
    latency = (
        _number(f"{where}.latency_us", raw["latency_us"], positive=False)
        if "latency_us" in raw
        else old.latency_us
    )
    return Link(bandwidth, latency)


def _check_monotone(table: Mapping[str, Link], source: str) -> None:
    """The network levels must not get faster (bandwidth) or nearer (latency) going out."""
    for inner, outer in zip(FABRIC_LEVELS, FABRIC_LEVELS[1:], strict=False):
        a, b = table[inner], table[outer]
        if a.bandwidth < b.bandwidth:
            raise InputError(
                f"{source}: {outer} bandwidth ({b.bandwidth:g}) is above {inner} ({a.bandwidth:g}); a level "
                "further out must not be faster"
            )
        if a.latency_us > b.latency_us:
            raise InputError(
                f"{source}: {outer} latency_us ({b.latency_us:g}) is below {inner} ({a.latency_us:g}); "
                "a level further out must not be nearer"
            )


def link_speeds(gen: Generation | None, table: LinkTable = DEFAULT_TABLE) -> LinkSpeeds:
    """What a node's links carry for NCCL's ring plan (:mod:`slurm_topo.gpu.nccl_rings`): the GPU part's
    NVLink and PCIe (:func:`generation_of`), the table's where the node names none or the site set the level
    (``nvlink``: a GPU's whole NVLink, split over the part's links), and the table's ``sys`` across the
    sockets, never above PCIe."""
    per_link, links, sm = DEFAULT_LINKS["nvlink"].bandwidth / 18, 18, 90  # the table's: an H100 board
    pcie = table["pcie"].bandwidth
    if gen is not None:
        per_link, links, sm = gen.per_link, gen.links, gen.sm
        if gen.pcie is not None and "pcie" not in table.given:
            pcie = gen.pcie
    if "nvlink" in table.given or gen is None:
        per_link = table["nvlink"].bandwidth / links
    return LinkSpeeds(per_link, links, pcie, min(table["sys"].bandwidth, pcie), sm)


def node_plan(
    topology: GpuTopology | None,
    gpus: Sequence[int],
    gpu_type: str | None,
    table: LinkTable = DEFAULT_TABLE,
    *,
    closed: bool = True,
) -> RingPlan | None:
    """NCCL's plan of rings over ``gpus`` of one node (:func:`slurm_topo.gpu.nccl_rings.plan_rings`) with the
    node's GPU part's figures: its ``bandwidth`` is what a collective over them moves per GPU at once
    (several rings, not one ring's slowest hop); None without link data."""
    return plan_rings(topology, gpus, link_speeds(generation_of(gpu_type), table), closed=closed)
