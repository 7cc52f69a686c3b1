"""The communication cost of one training step on a placement (pure: no I/O).

A ring all-reduce of ``n`` bytes over ``p`` ranks costs ``2(p−1)·α + 2(p−1)/p · n/B`` (the topology-aware
scheduling concept; NCCL ``tuning.cc`` has the same shape), with ``B`` the slowest link of the ring and
``α`` that link's per-hop latency. A parallelism plan TP × PP × DP over a placement gives three terms:

* ``tp``: each TP group all-reduces ``tp_bytes`` (ring over its TP ranks);
* ``pp``: each pipeline sends ``pp_bytes`` between consecutive stages (``α + n/B`` per stage boundary, the
  boundaries one after the other; one pipeline per TP index and DP replica);
* ``dp``: each DP group all-reduces its share of the gradient: ``allreduce_bytes / (TP·PP)`` (every rank
  holds ``1/(TP·PP)`` of the model), ring over the DP replicas (with CP: over the ``dp × cp`` ranks of
  Megatron's ``dp-cp`` group, which reduces the weight gradients of the CP ranks too);
* ``ep`` (expert parallelism, :func:`all_to_all_seconds`): each EP group exchanges ``ep_bytes`` per rank in
  all-to-alls: ``(p−1)·α + (p−1)/p · n/B`` at the group's bottleneck link (any two of its ranks exchange, so
  the slowest pair sets the pace);
* ``cp`` (context parallelism, :func:`cp_ring_seconds`): each CP group passes KV chunks around a ring in CP
  rank order (Megatron's ring attention sends to the next CP rank): ``p−1`` steps of ``α + n/B`` with
  ``n = cp_bytes``, the slowest hop of the ring setting the pace.

Groups of one term run at the same time, so a term costs what its slowest group costs; the terms are added
(no overlap of communication with computation: an upper bound, and the same bound for every placement, so
ratios between placements are what to read). Which rank runs where is what ``gpulayer-srun`` computes
(:func:`slurm_topo.srun.plan.plan_srun`): the same TP groups on the best-connected GPUs, the same pipelines in
the smallest subtree, the same rank order.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.allocation import Allocation, SwitchTree
from ..core.errors import InputError
from ..core.model import Inventory, Node
from ..gpu.gpu_topology import GpuTopology
from ..gpu.links import nvlink_count
from ..gpu.pick import pick_devices
from ..gpu.rings import gpu_level, gpu_order
from ..srun.plan import DEFAULT_ORDER, plan_srun
from .links import (
    DEFAULT_TABLE,
    GENERATION_LEVELS,
    LINK_LEVELS,
    Generation,
    Link,
    LinkTable,
    generation_of,
    node_plan,
)

Position = tuple[str, int]
"""Where one rank runs: (node, GPU index)."""


# ---- where two GPUs meet


@dataclass(frozen=True)
class Fabric:
    """What the model needs to know about the fleet: each node (location, GPUs, link data) and, where known,
    the multi-node NVLink domain of a node (an NVL72 rack: two nodes of one domain meet at ``nvlink``).

    ``rail_optimised``: GPU ``k`` of every node reaches its leaf through NIC ``k`` on rail ``k`` (DGX
    SuperPOD), so a hop between two nodes of one network group on different local GPU indices crosses rails
    through the spine and counts as a ``zone`` hop (NCCL keeps a ring on one rail only when every node uses
    the same GPUs). The inventory's ``links: {rails: …}`` (the link table's ``rails``) turns the same rule
    on, with each GPU's rail read from its closest NIC where the node's ``gpu_topology`` prints NIC columns
    (:func:`gpu_rails`)."""

    nodes: Mapping[str, Node]
    domains: Mapping[str, str] = field(default_factory=dict)
    rail_optimised: bool = False

    @classmethod
    def of(
        cls, inventory: Inventory, domains: Mapping[str, str] | None = None, rail_optimised: bool = False
    ) -> Fabric:
        """The fleet of ``inventory``; NVLink domains from the nodes' ``nvlink_domain``, then ``domains``."""
        found = {n.name: n.nvlink_domain for n in inventory.nodes if n.nvlink_domain is not None}
        return cls({n.name: n for n in inventory.nodes}, {**found, **(domains or {})}, rail_optimised)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise InputError(f"node {name}: not in the inventory") from None

    def scale(self, a: str, b: str, level: str) -> float:
        """The measured share of a network hop's bandwidth between nodes ``a`` and ``b``: the smaller of
        their ``net_ratio`` (a port below its expected rate, from the health records); 1 inside a node or an
        NVLink domain."""
        if a == b or level not in NETWORK_LEVELS:
            return 1.0
        return min(self.node(a).net_ratio, self.node(b).net_ratio)


NETWORK_LEVELS = frozenset(("switch", "network_group", "zone", "region", "any"))
"""The levels whose hops go through a node's network ports."""


def network_level(
    a: Node, b: Node, domains: Mapping[str, str] | None = None, *, switches: bool = False
) -> str:
    """The level at which two different nodes meet: ``nvlink`` (one NVLink domain), with ``switches``
    ``switch`` (one switch below their network group: the first of their ``switches`` alike, a provider's
    sub-block or lower network node), ``network_group``, ``zone``, ``region`` or ``any`` (different
    regions, or a node with no location). The hops the model costs ask with ``switches``; the group
    levels (``calibrate``'s pairs, a placement's span) without."""
    if domains:
        da, db = domains.get(a.name), domains.get(b.name)
        if da is not None and da == db:
            return "nvlink"
    la, lb = a.location, b.location
    if la.region is None or la.region != lb.region:
        return "any"
    if la.zone is None or la.zone != lb.zone:
        return "region"
    if la.network_group is None or la.network_group != lb.network_group:
        return "zone"
    if switches and a.switches and b.switches and a.switches[0] == b.switches[0]:
        return "switch"  # labels are scoped by the ones above: the first alike = one switch in the group
    return "network_group"


LEAF_LEVELS = frozenset(("switch", "network_group"))
"""The levels whose hops stay below the spine: on a rail-optimised fabric a hop there between two rails goes
up through the spine (``zone``)."""


# ---- rails

_NEAR_NIC = ("PIX", "PXB")  # a GPU's own NIC: behind the same PCIe switch (one or several bridges)
_RAIL_CACHE: dict[tuple[int, int], tuple[GpuTopology, Mapping[str, str], Mapping[int, str]]] = {}


def gpu_rails(topo: GpuTopology, rails: Mapping[str, str]) -> Mapping[int, str]:
    """GPU index -> rail, from ``nvidia-smi topo -m``'s NIC columns: each GPU's closest NIC among those
    ``rails`` names (``PIX`` before ``PXB``; farther NICs are not its own), and that NIC's rail. Where
    several are as close (two GPUs and two NICs behind one switch, DGX A100), GPUs in index order take the
    first one no earlier GPU took. GPUs with no such NIC are left out (the caller assumes rail = index)."""
    key = (id(topo), id(rails))
    hit = _RAIL_CACHE.get(key)
    if hit is not None and hit[0] is topo and hit[1] is rails:
        return hit[2]
    out: dict[int, str] = {}
    taken: set[str] = set()
    for row, gpu in enumerate(topo.gpus):
        cells = topo.nic_matrix[row] if row < len(topo.nic_matrix) else ()
        for cls in _NEAR_NIC:
            near = [nic for nic, c in zip(topo.nics, cells, strict=False) if c == cls and nic in rails]
            if near:
                nic = next((x for x in near if x not in taken), near[0])
                taken.add(nic)
                out[gpu] = rails[nic]
                break
    if len(_RAIL_CACHE) > 4096:
        _RAIL_CACHE.clear()
    _RAIL_CACHE[key] = (topo, rails, out)
    return out


def rails_on(fabric: Fabric, table: LinkTable | None) -> bool:
    """True on a rail-optimised fabric: ``Fabric.rail_optimised`` or the link table's ``rails``."""
    return fabric.rail_optimised or (table is not None and table.rails is not None)


def gpu_rail(fabric: Fabric, table: LinkTable | None, pos: Position) -> str:
    """The rail of one GPU: from its closest named NIC (:func:`gpu_rails`) where the node's capture shows
    one, else its index (GPU ``k`` on rail ``k``)."""
    rails = table.rails if table is not None else None
    if rails:
        topo = fabric.node(pos[0]).gpu_topology
        if topo is not None and topo.nics:
            got = gpu_rails(topo, rails).get(pos[1])
            if got is not None:
                return got
    return str(pos[1])


def pair_level(fabric: Fabric, a: Position, b: Position, table: LinkTable | None = None) -> str:
    """The level of one point-to-point hop (a rail-optimised fabric: GPUs on different rails meet at the
    spine, ``zone``)."""
    if a[0] == b[0]:
        return gpu_level(fabric.node(a[0]).gpu_topology, a[1], b[1])
    level = network_level(fabric.node(a[0]), fabric.node(b[0]), fabric.domains, switches=True)
    if (
        level in LEAF_LEVELS
        and rails_on(fabric, table)
        and gpu_rail(fabric, table, a) != gpu_rail(fabric, table, b)
    ):
        return "zone"  # across rails: through the spine
    return level


# ---- collectives


@dataclass(frozen=True, slots=True)
class Hop:
    """The slowest hop of a ring or a chain: its level and constants (``generation``: the GPU generation
    whose figures they are, None for the table's)."""

    level: str
    link: Link
    generation: Generation | None = None


def hop_link(
    fabric: Fabric, table: LinkTable, level: str, a: Position, b: Position
) -> tuple[Link, Generation | None]:
    """One hop's constants: the table's, except at the levels a GPU generation decides (inside a node, and
    across one NVLink domain) and the site did not set: there the nodes' generation (the slower of the two)
    gives NVLink as per-link × the pair's bonded links (``NV<n>`` in the node's ``gpu_topology``, else every
    link: an NVSwitch), and PCIe as its host link (``links.GENERATIONS``)."""
    base = table[level]
    if level not in GENERATION_LEVELS or level in table.given:
        return base, None
    ga, gb = generation_of(fabric.node(a[0]).gpu_type), generation_of(fabric.node(b[0]).gpu_type)
    if ga is None or gb is None:
        return base, None
    gen = ga if ga.nvlink <= gb.nvlink else gb
    if level == "sys":  # across the sockets, and through PCIe on both sides: never faster than PCIe
        if gen.pcie is not None and "pcie" not in table.given and gen.pcie < base.bandwidth:
            return Link(gen.pcie, base.latency_us), gen
        return base, None
    if level == "pcie":
        return (Link(gen.pcie, base.latency_us) if gen.pcie is not None else base), gen
    links = gen.links
    topology = fabric.node(a[0]).gpu_topology if a[0] == b[0] and a[1] != b[1] else None
    if level == "nvlink" and topology is not None and topology.matrix:
        links = min(nvlink_count(topology.link(a[1], b[1])) or links, links)
    return Link(links * gen.per_link, base.latency_us), gen


def slowest_hop(hops: Iterable[tuple[str, Link, Generation | None]], cost: Callable[[Link], float]) -> Hop:
    """The hop that sets the pace: the one whose own constants (:func:`hop_link`) make ``cost`` highest
    (then the level further out). Its ``link`` is the pace of the whole ring: the lowest bandwidth and the
    highest latency of all its hops (every step of a ring waits for the slowest hop)."""
    seen = list(hops)
    if not seen:
        raise ValueError("no hops")
    level, _, gen = max(seen, key=lambda h: (cost(h[1]), LINK_LEVELS.index(h[0])))
    pace = Link(min(h[1].bandwidth for h in seen), max(h[1].latency_us for h in seen))
    gens = [h[2] for h in seen if h[2] is not None and h[1].bandwidth == pace.bandwidth]
    return Hop(level, pace, gen or (gens[0] if gens else None))


def ring_allreduce_seconds(p: int, nbytes: float, link: Link) -> float:
    """``2(p−1)·α + 2(p−1)/p · n/B``; 0 for one rank."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * link.latency_s + 2 * (p - 1) / p * nbytes / link.bytes_per_s


def ring_positions(
    fabric: Fabric, ring: Sequence[Position], table: LinkTable | None = None
) -> list[tuple[str, Position, Position]]:
    """Every hop of a ring (last back to first) as (level, position, next position), built as NCCL builds one:
    through all the ring's GPUs of a node one after the other, nodes in the order they first appear. On a
    rail-optimised fabric the ring stays on one rail only when every node takes part with GPUs on the same
    rails (the same local GPUs where rails follow indices); otherwise its hops between nodes of one network
    group cross rails (``zone``)."""
    if len(ring) < 2:
        return []
    per_node: dict[str, list[int]] = {}
    for node, gpu in ring:
        per_node.setdefault(node, []).append(gpu)
    closed = len(per_node) == 1
    ordered = [
        (node, gpu)
        for node, gpus in per_node.items()
        for gpu in gpu_order(fabric.node(node).gpu_topology, gpus, closed)
    ]
    same_rails = True
    if rails_on(fabric, table) and len(per_node) > 1:
        same_rails = (
            len({tuple(sorted(gpu_rail(fabric, table, (n, g)) for g in gs)) for n, gs in per_node.items()})
            == 1
        )
    hops = []
    for k, a in enumerate(ordered):
        b = ordered[(k + 1) % len(ordered)]
        if a[0] == b[0]:
            hops.append((gpu_level(fabric.node(a[0]).gpu_topology, a[1], b[1]), a, b))
            continue
        level = network_level(fabric.node(a[0]), fabric.node(b[0]), fabric.domains, switches=True)
        if level in LEAF_LEVELS and not same_rails:
            level = "zone"  # across rails: through the spine
        hops.append((level, a, b))
    return hops


def _measured(fabric: Fabric, hops: Sequence[tuple[str, str, str]], table: LinkTable, hop: Hop) -> Hop:
    """``hop`` with the pace of the measured rates: where a node's port runs below its expected rate
    (``Node.net_ratio``), its network hops are that much slower, and the slowest of them may set the pace."""
    worst = hop
    for level, a, b in hops:
        s = fabric.scale(a, b, level)
        if s < 1.0 and table[level].bandwidth * s < worst.link.bandwidth:
            worst = Hop(
                level, Link(table[level].bandwidth * s, max(worst.link.latency_us, table[level].latency_us))
            )
    return worst


def ring_allreduce(
    fabric: Fabric, ring: Sequence[Position], nbytes: float, table: LinkTable
) -> tuple[float, Hop]:
    """Seconds of a ring all-reduce of ``nbytes`` over ``ring`` and its slowest hop."""
    placed = ring_positions(fabric, ring, table)
    if not placed:
        return 0.0, Hop("nvlink", table["nvlink"])
    p = len(ring)
    links = [(level, *hop_link(fabric, table, level, a, b)) for level, a, b in placed]
    hop = slowest_hop(links, lambda link: ring_allreduce_seconds(p, nbytes, link))
    hop = _measured(fabric, [(level, a[0], b[0]) for level, a, b in placed], table, hop)
    hop = _planned(fabric, ring, table, hop)
    return ring_allreduce_seconds(p, nbytes, hop.link), hop


def _planned(fabric: Fabric, ring: Sequence[Position], table: LinkTable, hop: Hop) -> Hop:
    """``hop`` with NCCL's intra-node plan where the whole ring is inside one node: several link-disjoint
    rings at once (:func:`.links.node_plan`), so the bandwidth is ``rings × speed`` over the GPUs' link
    graph, not one ring's slowest pair (a DGX-1's 8 GPUs: 6 rings × 20 = 120 GB/s, not 20). Only at the
    levels a GPU generation decides and the site did not set (a calibrated or given figure stands), and
    only where the plan is faster (a plan never lowers the pace the hops give)."""
    nodes = {pos[0] for pos in ring}
    if len(nodes) == 1 and hop.level in ("nvlink", "pcie", "sys") and hop.level not in table.given:
        node = fabric.node(next(iter(nodes)))
        plan = node_plan(node.gpu_topology, [g for _, g in ring], node.gpu_type, table)
        if plan is not None and plan.bandwidth > hop.link.bandwidth:
            return Hop(hop.level, Link(plan.bandwidth, hop.link.latency_us), hop.generation)
    return hop


# ---- a plan over a placement


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A parallelism plan and its traffic per step. ``dp`` None: as many replicas as the GPUs hold.
    ``gpus_per_node`` None: the placement's smallest GPU count. Bytes: ``allreduce_bytes`` is the model's
    gradient (each DP ring reduces ``1/(tp·pp)`` of it), ``tp_bytes`` what each TP group all-reduces per
    step, ``pp_bytes`` what one stage sends the next per step (per TP rank). ``compute_s``/``comm_share``/
    ``overlap``: the step around the communication (:mod:`.step`)."""

    tp: int = 1
    pp: int = 1
    dp: int | None = None
    gpus_per_node: int | None = None
    allreduce_bytes: float = 0.0
    tp_bytes: float | None = None
    pp_bytes: float | None = None
    order: str = DEFAULT_ORDER
    compute_s: float | None = None
    """Seconds of computation per step (``compute=``; :mod:`.step`)."""
    comm_share: float | None = None
    """Exposed communication's share of the step on the best placement (``comm=``; :mod:`.step`)."""
    overlap: float = 0.0
    """The share of the compute during which DP's all-reduce runs (``overlap=``; :mod:`.step`)."""
    ep: int = 1
    """Expert-parallel size (``ep=``): divides ``cp × dp`` (Megatron-LM: :mod:`slurm_topo.srun.plan`)."""
    cp: int = 1
    """Context-parallel size (``cp=``): a factor of the world, as TP, PP and DP."""
    ep_bytes: float | None = None
    """Bytes each rank of an EP group exchanges per step in its all-to-alls (``ep_bytes=``): the tokens it
    dispatches to and combines from the experts, summed over the MoE layers and micro-batches of a step —
    about ``2 (dispatch + combine) × 2 (forward + backward) × tokens per rank × top-k × hidden × bytes per
    element × MoE layers on the stage``."""
    cp_bytes: float | None = None
    """Bytes one rank passes its ring neighbour per ring step of context parallelism (``cp_bytes=``): its
    chunk's K and V, summed over the layers and micro-batches of a step (forward and backward)."""


@dataclass(frozen=True, slots=True)
class Rank:
    rank: int
    node: str
    gpu: int
    tp: int
    pp: int
    dp: int
    cp: int = 0
    ep: int = 0  # expert-parallel rank
    edp: int = 0  # expert data-parallel index: one EP group = the ranks sharing (tp, pp, edp)


@dataclass(frozen=True, slots=True)
class Term:
    """One kind of traffic: ``groups`` groups of ``ranks`` ranks each; the slowest group's ``seconds``."""

    kind: str  # tp | cp | ep | pp | dp
    groups: int
    ranks: int
    bytes: float
    level: str
    bandwidth: float
    latency_us: float
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ranks": self.ranks,
            "groups": self.groups,
            "bytes": self.bytes,
            "level": self.level,
            "bandwidth": self.bandwidth,
            "latency_us": self.latency_us,
            "seconds": self.seconds,
        }


@dataclass(frozen=True, slots=True)
class StepCost:
    """Predicted communication seconds per step: the terms, their sum, and where the time goes."""

    nodes: tuple[str, ...]
    ranks: tuple[Rank, ...]
    terms: tuple[Term, ...]
    notes: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.terms)

    @property
    def bottleneck(self) -> Term | None:
        """The term that costs most (None without terms)."""
        return max(self.terms, key=lambda t: t.seconds, default=None)

    @property
    def sizes(self) -> dict[str, int]:
        """tp, pp and dp; cp and ep too when above 1."""
        out = {
            "tp": max((r.tp for r in self.ranks), default=0) + 1,
            "pp": max((r.pp for r in self.ranks), default=0) + 1,
            "dp": max((r.dp for r in self.ranks), default=0) + 1,
        }
        for key in ("cp", "ep"):
            size = max((getattr(r, key) for r in self.ranks), default=0) + 1
            if size > 1:
                out[key] = size
        return out


def switch_tree(nodes: Iterable[Node]) -> SwitchTree:
    """The inventory's tree as Slurm would have it (the switches below a network group, deepest first, then
    the network group, zone, region, one root), for ``plan_srun``'s pipeline placement. Levels count from the
    deepest switch of the nodes given (0): a network group is at the depth of the most ``switches`` any of
    them has, so nodes without switches get the tree they always had (leaf = network group at 0)."""
    listed = list(nodes)
    depth = max((len(n.switches) for n in listed if n.location.network_group is not None), default=0)
    leaf: dict[str, str] = {}
    parent: dict[str, str] = {}
    level: dict[str, int] = {"/": depth + 3}
    for n in listed:
        chain = _chain(n, depth)
        leaf[n.name] = chain[0][0]
        for (sw, lvl), (up, _) in zip(chain, chain[1:], strict=False):
            parent[sw] = up
            level[sw] = lvl
    return SwitchTree(leaf, parent, level)


def _chain(n: Node, depth: int) -> list[tuple[str, int]]:
    """A node's switches from its own leaf up to the root, with their levels (:func:`switch_tree`)."""
    loc = n.location
    chain: list[tuple[str, int]] = []
    if loc.region is not None:
        if loc.zone is not None:
            if loc.network_group is not None:
                group = f"ng:{loc.region}/{loc.zone}/{loc.network_group}"
                below = n.switches
                for k in range(len(below), 0, -1):  # deepest first; a label is scoped by the ones above
                    chain.append((f"sw:{group}/" + "/".join(below[:k]), depth - k))
                chain.append((group, depth))
            chain.append((f"zone:{loc.region}/{loc.zone}", depth + 1))
        chain.append((f"region:{loc.region}", depth + 2))
    chain.append(("/", depth + 3))
    return chain


def node_gpus(node: Node, count: int, cache: dict[int, tuple[int, ...]] | None = None) -> tuple[int, ...]:
    """The ``count`` GPUs a job would use on ``node``: the best-connected set (``pick_devices``) when the node
    has link data, else the lowest indices. Cached per link table (nodes of one model share one)."""
    topo = node.gpu_topology
    if topo is None or not topo.has_links:
        return tuple(range(count))
    key = id(topo) * 1024 + count
    if cache is not None and key in cache:
        return cache[key]
    chosen = tuple(sorted(pick_devices(topo, list(topo.gpus), count)))
    if cache is not None:
        cache[key] = chosen
    return chosen


def _same_gpus(
    nodes: Sequence[Node], count: int, cache: dict[int, tuple[int, ...]] | None
) -> dict[str, tuple[int, ...]]:
    """Each node's ``count`` GPUs (:func:`node_gpus`), a later node taking a set an earlier node took when
    that is as good (``pick_devices`` rule 3a; without link data every set is): the same local GPUs on
    every node, as ``gpulayer-srun`` lays a job out."""
    out: dict[str, tuple[int, ...]] = {}
    seen: list[tuple[int, ...]] = []
    for node in nodes:
        chosen = node_gpus(node, count, cache)
        if seen and chosen not in seen:
            topo = node.gpu_topology
            if topo is not None and topo.has_links:
                chosen = tuple(sorted(pick_devices(topo, list(topo.gpus), count, prefer=seen)))
            elif node.gpus is not None:
                chosen = next((x for x in seen if x[-1] < node.gpus), chosen)
        if chosen not in seen:
            seen.append(chosen)
        out[node.name] = chosen
    return out


def gpus_per_node(fabric: Fabric, nodes: Sequence[str], given: int | None) -> int:
    """``given``, checked against every node's GPU count, else the smallest count of ``nodes``."""
    counts = {n: fabric.node(n).gpus for n in nodes}
    unknown = [n for n, c in counts.items() if c is None]
    if given is not None:
        if given < 1:
            raise InputError(f"--gpus-per-node {given}: must be at least 1")
        short = [n for n, c in counts.items() if c is not None and c < given]
        if short:
            raise InputError(
                f"node {short[0]} has {counts[short[0]]} GPUs, fewer than --gpus-per-node {given}"
            )
        return given
    if unknown:
        raise InputError(
            f"node {unknown[0]}: GPU count unknown (no gpus: in the inventory); give --gpus-per-node"
        )
    return min(c for c in counts.values() if c is not None)


def place_ranks(
    fabric: Fabric, nodes: Sequence[str], spec: PlanSpec, cache: dict[int, tuple[int, ...]] | None = None
) -> tuple[Rank, ...]:
    """Rank -> (node, GPU) as ``gpulayer-srun`` lays the plan out on ``nodes`` (``gpus_per_node`` each)."""
    if not nodes:
        raise InputError("no nodes to place the plan on")
    if len(set(nodes)) != len(nodes):
        raise InputError("a node is named twice")
    g = gpus_per_node(fabric, nodes, spec.gpus_per_node)
    node_objs = [fabric.node(n) for n in nodes]
    alloc = Allocation("cost", tuple(nodes), _same_gpus(node_objs, g, cache))
    topologies = {n.name: n.gpu_topology for n in node_objs if n.gpu_topology is not None}
    model = spec.tp * spec.pp * spec.cp
    if spec.dp is None and (len(nodes) * g) % model:
        cp = f" × --cp {spec.cp}" if spec.cp > 1 else ""
        raise InputError(
            f"--tp {spec.tp} × --pp {spec.pp}{cp} = {model} does not divide the "
            f"{len(nodes) * g} GPUs of {len(nodes)} nodes × {g}: give --dp"
        )
    plan = plan_srun(
        alloc,
        tp=spec.tp,
        pp=spec.pp,
        dp=spec.dp,
        order=spec.order,
        topologies=topologies,
        tree=switch_tree(node_objs),
        ntasks=len(nodes) * g,
        domains={n: d for n in nodes if (d := fabric.domains.get(n)) is not None},
        cp=spec.cp,
        ep=spec.ep,
    )
    return tuple(Rank(r.rank, r.node, r.gpus[0], r.tp, r.pp, r.dp, r.cp, r.ep, r.edp) for r in plan.rows)


def layout_reads_locations(spec: PlanSpec) -> bool:
    """Whether :func:`place_ranks`'s layout can depend on where the nodes are (their switch tree and NVLink
    domains), not only on each node's GPUs in order: with one stage (``pp`` 1) and no EP/CP blocks
    ``plan_srun`` gives each replica one slot in slot order and aligns replicas by GPUs alone (its tree and
    domains then reach only the per-rank table's ``pipe_level`` and warnings, no :class:`Rank` field).
    tests/test_report_structure.py checks it over random fleets."""
    return spec.pp > 1 or spec.cp > 1 or spec.ep > 1


def _term(
    kind: str, groups: int, ranks: int, nbytes: float, worst: tuple[float, Hop], notes: list[str]
) -> Term:
    """The term of the slowest group; ``notes`` gets where its figures come from when a GPU generation's
    (not the table's) set its pace."""
    seconds, hop = worst
    if hop.generation is not None:
        note = f"{hop.level} at {hop.link.bandwidth:g} GB/s: {hop.generation.describe()}"
        if note not in notes:
            notes.append(note)
    return Term(kind, groups, ranks, nbytes, hop.level, hop.link.bandwidth, hop.link.latency_us, seconds)


def pipeline_chain(
    fabric: Fabric, table: LinkTable, stages: Sequence[tuple[Position, Position]], nbytes: float
) -> tuple[float, Hop]:
    """Seconds of one pipeline's sends of ``nbytes`` from each stage to the next, one after the other
    (``α + n/B`` per boundary, at each hop's own constants and measured rate), and its slowest hop."""
    hops = [pair_level(fabric, a, b, table) for a, b in stages]
    links = [(h, *hop_link(fabric, table, h, a, b)) for h, (a, b) in zip(hops, stages, strict=True)]
    scales = [fabric.scale(a[0], b[0], h) for (a, b), h in zip(stages, hops, strict=True)]
    seconds = sum(
        link.latency_s + nbytes / (link.bytes_per_s * k)
        for (_, link, _), k in zip(links, scales, strict=True)
    )
    own = max(links, key=lambda h: (h[1].latency_s + nbytes / h[1].bytes_per_s, LINK_LEVELS.index(h[0])))
    ends = [(h, a[0], b[0]) for (a, b), h in zip(stages, hops, strict=True)]
    return seconds, _measured(fabric, ends, table, Hop(*own))


def all_to_all_seconds(p: int, nbytes: float, link: Link) -> float:
    """``(p−1)·α + (p−1)/p · n/B``: an all-to-all of ``n`` bytes per rank over ``p`` ranks as ``p−1`` pairwise
    exchanges of ``n/p`` bytes (the pairwise-exchange algorithm of Thakur, Rabenseifner and Gropp,
    "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; NCCL's all-to-all is the
    same ``p−1`` send/receive pairs per rank); 0 for one rank."""
    if p <= 1:
        return 0.0
    return (p - 1) * link.latency_s + (p - 1) / p * nbytes / link.bytes_per_s


def cp_ring_seconds(p: int, nbytes: float, link: Link) -> float:
    """``(p−1)·(α + n/B)``: ring attention's KV pass, ``p−1`` steps in which every rank sends its neighbour
    one chunk of ``n`` bytes (Liu et al., "Ring Attention with Blockwise Transformers", 2023; Megatron-LM's
    ``cp_comm_type=p2p``); 0 for one rank."""
    if p <= 1:
        return 0.0
    return (p - 1) * (link.latency_s + nbytes / link.bytes_per_s)


def all_to_all(
    fabric: Fabric, group: Sequence[Position], nbytes: float, table: LinkTable
) -> tuple[float, Hop]:
    """Seconds of an all-to-all of ``nbytes`` per rank over ``group`` and its bottleneck: every pair of its
    ranks exchanges, so the slowest pair (its own constants, :func:`hop_link`, and measured rate) sets the
    pace (:func:`all_to_all_seconds`)."""
    p = len(group)
    if p < 2:
        return 0.0, Hop("nvlink", table["nvlink"])
    seen: dict[tuple[Position, Position], tuple[str, Link, Generation | None]] = {}
    for i, a in enumerate(group):
        for b in group[i + 1 :]:
            level = pair_level(fabric, a, b, table)
            seen[(a, b)] = (level, *hop_link(fabric, table, level, a, b))
    hop = slowest_hop(seen.values(), lambda link: all_to_all_seconds(p, nbytes, link))
    hop = _measured(fabric, [(h[0], a[0], b[0]) for (a, b), h in seen.items()], table, hop)
    return all_to_all_seconds(p, nbytes, hop.link), hop


def cp_ring(fabric: Fabric, ring: Sequence[Position], nbytes: float, table: LinkTable) -> tuple[float, Hop]:
    """Seconds of the CP ring's KV pass over ``ring`` (in CP rank order, last back to first) and its slowest
    hop (:func:`cp_ring_seconds`)."""
    p = len(ring)
    if p < 2:
        return 0.0, Hop("nvlink", table["nvlink"])
    pairs = [(ring[k], ring[(k + 1) % p]) for k in range(p)]
    levels = [pair_level(fabric, a, b, table) for a, b in pairs]
    links = [(lvl, *hop_link(fabric, table, lvl, a, b)) for lvl, (a, b) in zip(levels, pairs, strict=True)]
    hop = slowest_hop(links, lambda link: cp_ring_seconds(p, nbytes, link))
    hop = _measured(
        fabric, [(lvl, a[0], b[0]) for lvl, (a, b) in zip(levels, pairs, strict=True)], table, hop
    )
    return cp_ring_seconds(p, nbytes, hop.link), hop


def _slowest(results: Iterable[tuple[float, Hop]]) -> tuple[float, Hop]:
    return max(results, key=lambda x: (x[0], -x[1].link.bandwidth))


@dataclass(frozen=True, slots=True)
class _Grid:
    """Placed ranks by (tp, cp, dp, pp), and the sizes."""

    by_coord: Mapping[tuple[int, int, int, int], Rank]
    tp: int
    cp: int
    dp: int
    pp: int

    def pos(self, t: int, c: int, d: int, p: int) -> Position:
        r = self.by_coord[(t, c, d, p)]
        return (r.node, r.gpu)

    def groups(self, fixed: str) -> list[list[Position]]:
        """The groups of one dimension (``tp``, ``cp``, ``dp`` with cp folded in, or ``pp``): positions in
        that dimension's order, one list per combination of the others."""
        out: dict[tuple[int, ...], list[tuple[int, Position]]] = {}
        for (t, c, d, p), r in self.by_coord.items():
            coord = {"tp": t, "cp": c, "dp": d + self.dp * c, "pp": p}[fixed]
            key = {"tp": (p, d, c), "cp": (t, p, d), "dp": (t, p), "pp": (t, d, c)}[fixed]
            out.setdefault(key, []).append((coord, (r.node, r.gpu)))
        return [[x for _, x in sorted(v)] for _, v in sorted(out.items())]


def _grid(ranks: Sequence[Rank]) -> _Grid:
    by_coord = {(r.tp, r.cp, r.dp, r.pp): r for r in ranks}
    tp, cp = 1 + max(r.tp for r in ranks), 1 + max(r.cp for r in ranks)
    dp, pp = 1 + max(r.dp for r in ranks), 1 + max(r.pp for r in ranks)
    if len(by_coord) != tp * cp * dp * pp or len(ranks) != len(by_coord):
        what = "TP × CP × PP × DP" if cp > 1 else "TP × PP × DP"
        raise InputError(f"the ranks do not form a whole {what} grid")
    return _Grid(by_coord, tp, cp, dp, pp)


def score_ranks(
    fabric: Fabric, ranks: Sequence[Rank], spec: PlanSpec, table: LinkTable = DEFAULT_TABLE
) -> StepCost:
    """The step's terms for ranks already placed (see the module docstring)."""
    grid = _grid(ranks)
    tp, cp, dp, pp = grid.tp, grid.cp, grid.dp, grid.pp
    terms: list[Term] = []
    notes: list[str] = []
    if tp > 1:
        if spec.tp_bytes is None:
            notes.append("no --tp-bytes: tensor-parallel traffic not counted")
        else:
            worst = _slowest(ring_allreduce(fabric, g, spec.tp_bytes, table) for g in grid.groups("tp"))
            terms.append(_term("tp", cp * pp * dp, tp, spec.tp_bytes, worst, notes))
    if cp > 1:
        if spec.cp_bytes is None:
            notes.append("no cp_bytes: context-parallel (KV ring) traffic not counted")
        else:
            worst = _slowest(cp_ring(fabric, g, spec.cp_bytes, table) for g in grid.groups("cp"))
            terms.append(_term("cp", tp * pp * dp, cp, spec.cp_bytes, worst, notes))
    ep_groups = _ep_groups(ranks)
    if ep_groups and len(ep_groups[0]) > 1:
        if spec.ep_bytes is None:
            notes.append("no ep_bytes: expert-parallel (all-to-all) traffic not counted")
        else:
            worst = _slowest(all_to_all(fabric, g, spec.ep_bytes, table) for g in ep_groups)
            terms.append(_term("ep", len(ep_groups), len(ep_groups[0]), spec.ep_bytes, worst, notes))
    if pp > 1:
        if spec.pp_bytes is None:
            notes.append("no --pp-bytes: pipeline traffic not counted")
        else:
            chains = [
                pipeline_chain(fabric, table, list(zip(g, g[1:], strict=False)), spec.pp_bytes)
                for g in grid.groups("pp")
            ]
            terms.append(_term("pp", tp * cp * dp, pp, spec.pp_bytes, _slowest(chains), notes))
    if dp * cp > 1:
        share = spec.allreduce_bytes / (tp * pp)
        worst = _slowest(ring_allreduce(fabric, g, share, table) for g in grid.groups("dp"))
        terms.append(_term("dp", tp * pp, dp * cp, share, worst, notes))
    nodes = tuple(dict.fromkeys(r.node for r in sorted(ranks, key=lambda r: r.rank)))
    return StepCost(nodes, tuple(ranks), tuple(terms), tuple(notes))


def _ep_groups(ranks: Sequence[Rank]) -> list[list[Position]]:
    """The EP groups: ranks sharing (tp, pp, edp), in EP rank order."""
    out: dict[tuple[int, int, int], list[tuple[int, Position]]] = {}
    for r in ranks:
        out.setdefault((r.tp, r.pp, r.edp), []).append((r.ep, (r.node, r.gpu)))
    return [[x for _, x in sorted(v)] for _, v in sorted(out.items())]


def score_placement(
    fabric: Fabric,
    nodes: Sequence[str],
    spec: PlanSpec,
    table: LinkTable = DEFAULT_TABLE,
    cache: dict[int, tuple[int, ...]] | None = None,
) -> StepCost:
    """Predicted communication seconds per step of ``spec`` on ``nodes`` (in that order, as Slurm lists
    them): the call ``explain`` and the pickers make. A plan of fewer ranks than the placement has GPUs
    (``dp`` given smaller) is costed on the GPUs its ranks take, and a note says which and how many."""
    return score_placed(fabric, nodes, place_ranks(fabric, nodes, spec, cache), spec, table)


def score_placed(
    fabric: Fabric,
    nodes: Sequence[str],
    ranks: Sequence[Rank],
    spec: PlanSpec,
    table: LinkTable = DEFAULT_TABLE,
) -> StepCost:
    """:func:`score_placement` of ``ranks`` already laid out on ``nodes`` (:func:`place_ranks`'s, or the same
    layout carried over from a placement of one structure: :class:`slurm_topo.reports.report.Predictor`)."""
    cost = score_ranks(fabric, ranks, spec, table)
    g = gpus_per_node(fabric, nodes, spec.gpus_per_node)
    if len(ranks) < len(nodes) * g:
        used = sorted({r.node for r in ranks}, key=list(nodes).index)
        idle = [n for n in nodes if n not in set(used)]
        what = f"{len(ranks)} ranks (tp {spec.tp} × pp {spec.pp} × dp {spec.dp})"
        note = (
            f"assumed: the plan's {what} use {len(ranks)} of the placement's {len(nodes) * g} GPUs "
            f"({len(nodes)} × {g}); costed on {', '.join(used)}"
        )
        if idle:
            shown = ", ".join(idle[:8]) + (" …" if len(idle) > 8 else "")
            note += f"; {shown} {'hold' if len(idle) > 1 else 'holds'} no rank"
        cost = dataclasses.replace(cost, notes=(note, *cost.notes))
    return cost


# ---- sizes with units

_BYTES_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)(i?)[bB]?\s*\Z")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_bytes(text: str, what: str = "bytes") -> float:
    """``10G``, ``10GB``, ``1e10``, ``512MiB`` -> bytes (``G`` = 1e9, ``Gi`` = 2**30)."""
    m = _BYTES_RE.match(str(text))
    if not m:
        raise InputError(f"{what} {str(text)[:40]!r}: expected a size such as 10G, 1e10, 512MiB")
    value = float(m.group(1))
    power = _POWERS[m.group(2).lower()]
    out = value * float(1024**power if m.group(3) else 1000**power)
    if not math.isfinite(out):
        raise InputError(f"{what} {str(text)[:40]!r}: out of range")
    return out


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(s|ms|us|µs|min)?\s*\Z")
_DURATION_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60.0}
MAX_COMPUTE_S = 86_400.0


def parse_duration(text: str, what: str = "compute") -> float:
    """``0.45``, ``0.45s``, ``450ms``, ``2min`` -> seconds (at most a day: a step is not longer)."""
    m = _DURATION_RE.match(str(text))
    if not m:
        raise InputError(f"{what} {str(text)[:40]!r}: expected seconds such as 0.45, 0.45s, 450ms")
    out = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if not math.isfinite(out) or out > MAX_COMPUTE_S:
        raise InputError(f"{what} {str(text)[:40]!r}: out of range (at most {MAX_COMPUTE_S:g} s)")
    return out


def parse_share(text: str, what: str, *, zero: bool) -> float:
    """``0.3`` or ``30%`` -> 0.3, in (0, 1] (``zero``: [0, 1])."""
    raw = str(text).strip()
    scale = 100.0 if raw.endswith("%") else 1.0
    try:
        value = float(raw[:-1] if scale == 100.0 else raw) / scale
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value > 1 or value < 0 or (value == 0 and not zero):
        lo = "0" if zero else "above 0"
        raise InputError(f"{what} {raw[:40]!r}: expected a share from {lo} to 1 (0.3 or 30%)")
    return value


PLAN_KEYS = frozenset(
    (
        "tp",
        "pp",
        "dp",
        "bytes",
        "allreduce_bytes",
        "tp_bytes",
        "pp_bytes",
        "order",
        "gpus_per_node",
        "compute",
        "comm",
        "overlap",
        "ep",
        "cp",
        "ep_bytes",
        "cp_bytes",
    )
)
"""The keys a job's ``--plan`` may give: the filter's vocab.lua PLAN_KEYS and the SPANK plugin's
``plan_keys[]`` check its text against the same set (tests/test_lua_constants.py,
tests/test_locality_c.py)."""

MOE_PLAN_KEYS = frozenset(("ep", "cp", "ep_bytes", "cp_bytes"))
"""Expert and context parallelism's keys (part of :data:`PLAN_KEYS`)."""


def parse_plan(text: str) -> PlanSpec:
    """``tp=8,pp=4,dp=2,bytes=10G,tp_bytes=1G,pp_bytes=100M,order=tp-pp-dp,compute=0.4s,overlap=0.5``
    (and ``ep=8,ep_bytes=2G,cp=2,cp_bytes=500M``) ->
    :class:`PlanSpec` (a SPANK ``--plan`` value or a site default; ``bytes`` is the gradient all-reduced
    across DP; ``compute`` the seconds a step computes, or ``comm`` the share of the step that is
    communication on the best placement, ``overlap`` the share of compute DP's all-reduce hides behind:
    :mod:`.step`)."""
    fields: dict[str, str] = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or key in fields:
            raise InputError(f"plan {text[:60]!r}: expected key=value pairs, each once (tp=8,pp=4,bytes=10G)")
        fields[key] = value.strip()
    known = PLAN_KEYS
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InputError(
            f"plan {text[:60]!r}: unknown key {unknown[0][:20]!r} (known: {', '.join(sorted(known))})"
        )

    def count(key: str) -> int | None:
        if key not in fields:
            return None
        if not fields[key].isdigit() or int(fields[key]) < 1 or int(fields[key]) > 1 << 20:
            raise InputError(f"plan {key}={fields[key][:20]!r}: must be a whole number from 1")
        return int(fields[key])

    if "compute" in fields and "comm" in fields:
        raise InputError(f"plan {text[:60]!r}: give compute= or comm=, not both (one fixes the other)")
    grad = fields.get("bytes", fields.get("allreduce_bytes"))
    return PlanSpec(
        tp=count("tp") or 1,
        pp=count("pp") or 1,
        dp=count("dp"),
        gpus_per_node=count("gpus_per_node"),
        allreduce_bytes=parse_bytes(grad, "plan bytes") if grad is not None else 0.0,
        tp_bytes=parse_bytes(fields["tp_bytes"], "plan tp_bytes") if "tp_bytes" in fields else None,
        pp_bytes=parse_bytes(fields["pp_bytes"], "plan pp_bytes") if "pp_bytes" in fields else None,
        order=fields.get("order", DEFAULT_ORDER),
        compute_s=parse_duration(fields["compute"], "plan compute") if "compute" in fields else None,
        comm_share=parse_share(fields["comm"], "plan comm", zero=False) if "comm" in fields else None,
        overlap=parse_share(fields["overlap"], "plan overlap", zero=True) if "overlap" in fields else 0.0,
        ep=count("ep") or 1,
        cp=count("cp") or 1,
        ep_bytes=parse_bytes(fields["ep_bytes"], "plan ep_bytes") if "ep_bytes" in fields else None,
        cp_bytes=parse_bytes(fields["cp_bytes"], "plan cp_bytes") if "cp_bytes" in fields else None,
    )
