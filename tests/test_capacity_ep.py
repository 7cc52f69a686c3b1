"""`capacity` shapes with expert parallelism (issue 46, item 4): ``NxG:ep=E`` counts jobs whose every EP group
of E consecutive GPUs stays inside one NVLink domain where a domain of the fleet holds one, checked against an
exhaustive search over the jobs' node sets on seeded random fleets; the refusals; table, JSON and metrics."""

from __future__ import annotations

import functools
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.reports.capacity import (
    ALLOCATED,
    CAPACITY_LEVELS,
    EP_IN_DOMAIN,
    EP_IN_ISLAND,
    EP_LEAVES,
    FREE,
    NodeState,
    Shape,
    capacity,
    ep_block_nodes,
    format_capacity,
    idle_states,
    max_ep_jobs,
    parse_shape,
)
from slurm_topo.reports.metrics import Snapshot, exposition
from slurm_topo.sources.providers import import_listing

HERE = Path(__file__).parent / "fixtures"
TOPO = HERE / "real/topo"


def _capture(name: str) -> GpuTopology:
    return parse_topo_matrix((TOPO / name).read_text())


def _two_islands(sizes: tuple[int, ...]) -> GpuTopology:
    """A node whose GPUs form NVLink islands of ``sizes`` (NV4 inside, SYS between): as a down NVLink
    splits a board (health/effects.py), no capture of it here."""
    owner = [k for k, size in enumerate(sizes) for _ in range(size)]
    gpus = tuple(range(len(owner)))
    matrix = tuple(
        tuple("X" if i == j else ("NV4" if owner[i] == owner[j] else "SYS") for j in gpus) for i in gpus
    )
    return GpuTopology(gpus, matrix)


TOPOLOGIES: dict[int, list[GpuTopology | None]] = {
    8: [
        None,  # no link data: unknown, kept
        _capture("h800-8gpu-nv18-10nic-merged-affinity-numa.txt"),  # one island of 8
        _capture("rtx3090-8gpu-pcie-node-sys-dualsocket.txt"),  # no NVLink: 8 islands of 1
        _two_islands((4, 4)),
        _two_islands((2, 6)),
    ],
    4: [
        None,
        _capture("h100-4gpu-nv18-8nic-allphb-container.txt"),  # one island of 4
        _capture("t4-4gpu-1plus3-sys-node-nolegend.txt"),  # no NVLink
        _two_islands((2, 2)),
    ],
}


def _islands_by_hand(topo: GpuTopology) -> list[int]:
    """Island sizes: GPUs joined by an NV<n> link, searched breadth first."""
    seen: set[int] = set()
    sizes = []
    for start in range(len(topo.gpus)):
        if start in seen:
            continue
        todo, size = [start], 0
        seen.add(start)
        while todo:
            i = todo.pop()
            size += 1
            for j, cls in enumerate(topo.matrix[i]):
                if cls.startswith("NV") and j not in seen:
                    seen.add(j)
                    todo.append(j)
        sizes.append(size)
    return sizes


def _parts_by_hand(node: Node, g: int, ep: int) -> int | None:
    """Job parts of ``g`` GPUs whose EP groups of ``ep`` the node's islands hold; None: no link data."""
    if node.gpu_topology is None:
        return None
    groups = sum(size // ep for size in _islands_by_hand(node.gpu_topology))
    return groups // (g // ep)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


# ---- the reference: every job a set of nodes, searched exhaustively


def _group_key(node: Node, level: str) -> object:
    loc = node.location
    return {
        "network_group": (loc.region, loc.zone, loc.network_group),
        "zone": (loc.region, loc.zone),
        "region": loc.region,
        "any": "*",
    }[level]


def _block_by_definition(gpus: int, ep: int) -> int:
    """The fewest consecutive nodes whose GPUs end on an EP group boundary."""
    return next(k for k in range(1, ep + 1) if (k * gpus) % ep == 0)


def _most_jobs(slots: Sequence[int], nodes: int, fits: Callable[[tuple[int, ...]], bool]) -> int:
    """The most jobs, each ``nodes`` distinct nodes whose index set ``fits``, node ``i`` in at most
    ``slots[i]`` of them: depth-first over every node set, memoised on what is left."""

    @functools.cache
    def best(left: tuple[int, ...]) -> int:
        free = [i for i, s in enumerate(left) if s > 0]
        out = 0
        for chosen in itertools.combinations(free, nodes):
            if fits(chosen):
                after = list(left)
                for i in chosen:
                    after[i] -= 1
                out = max(out, 1 + best(tuple(after)))
        return out

    return best(tuple(slots))


def reference(inventory: Inventory, states: dict[str, NodeState], n: int, g: int, ep: int) -> dict[str, int]:
    """Jobs per level by exhaustive search. EP groups across nodes: with a domain of the fleet holding a
    block of them, a job's nodes in each domain a multiple of the block and none outside a domain. EP groups
    inside a node: with a node whose islands hold them (or without link data), each node hosting only the
    parts its islands hold. Else any ``n`` nodes."""
    block = _block_by_definition(g, ep)
    big = [m for m in inventory.nodes if states[m.name].gpus >= g]
    sizes: dict[str, int] = {}
    for node in big:
        if node.nvlink_domain is not None:
            sizes[node.nvlink_domain] = sizes.get(node.nvlink_domain, 0) + 1
    keep = block > 1 and any(c >= block for c in sizes.values())
    parts = {m.name: _parts_by_hand(m, g, ep) if ep > 1 and block == 1 else None for m in inventory.nodes}
    in_islands = any(parts[m.name] is None or parts[m.name] for m in big)
    out = {}
    for level in CAPACITY_LEVELS:
        groups: dict[object, list[Node]] = {}
        for node in inventory.nodes:
            groups.setdefault(_group_key(node, level), []).append(node)
        total = 0
        for members in groups.values():
            domains = [m.nvlink_domain for m in members]

            def fits(chosen: tuple[int, ...], domains: list[str | None] = domains) -> bool:
                if not keep:
                    return True
                picked = [domains[i] for i in chosen]
                return None not in picked and all(picked.count(d) % block == 0 for d in set(picked))

            slots = []
            for m in members:
                slot, cap = states[m.name].free_gpus // g, parts[m.name]
                slots.append(min(slot, cap) if in_islands and cap is not None else slot)
            total += _most_jobs(slots, n, fits)
        out[level] = total
    return out


@st.composite
def fleets(draw):  # type: ignore[no-untyped-def]
    nodes, states = [], {}
    for i in range(draw(st.integers(1, 10))):
        region = draw(st.sampled_from(["r1", "r2"]))
        zone = draw(st.sampled_from(["z1", "z2"]))
        group = draw(st.sampled_from(["g1", "g2"]))
        domain = draw(st.sampled_from([None, "d1", "d1", "d2", "d2", "d3"]))
        gpus = draw(st.sampled_from([4, 8]))
        free = draw(st.one_of(st.just(gpus), st.integers(0, gpus)))  # idle nodes often
        topo = draw(st.sampled_from(TOPOLOGIES[gpus]))
        name = f"n{i}"
        loc = Location(region, f"{region}-{zone}", group)
        nodes.append(Node(name, loc, gpus=gpus, nvlink_domain=domain, gpu_topology=topo))
        states[name] = NodeState(name, FREE if free == gpus else ALLOCATED, gpus, free)
    return Inventory(tuple(nodes)), states


@st.composite
def ep_shapes(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 4))
    g = draw(st.sampled_from([2, 4, 8]))
    divisors = [d for d in range(1, n * g + 1) if (n * g) % d == 0]
    across = [d for d in divisors if g % d]  # groups over node boundaries: the domains decide
    ep = draw(st.sampled_from(across) if across and draw(st.booleans()) else st.sampled_from(divisors))
    return n, g, ep


@settings(max_examples=300, deadline=None, derandomize=True)
@given(fleets(), ep_shapes())
def test_ep_capacity_equals_the_exhaustive_search(fleet, shape) -> None:  # type: ignore[no-untyped-def]
    inventory, states = fleet
    n, g, ep = shape
    cap = capacity(inventory, states, [Shape(n, g, ep)], levels=CAPACITY_LEVELS)
    (row,) = cap.shapes
    want = reference(inventory, states, n, g, ep)
    assert {lv.level: lv.jobs for lv in row.levels} == want
    for lv in row.levels:
        assert lv.stranded_gpus == cap.free_gpus - lv.jobs * n * g >= 0
    jobs = [lv.jobs for lv in row.levels]
    assert jobs == sorted(jobs)  # a wider level never holds fewer
    plain = capacity(inventory, states, [(n, g)], levels=CAPACITY_LEVELS).shapes[0]
    assert all(e.jobs <= p.jobs for e, p in zip(row.levels, plain.levels, strict=True))
    if row.ep_within in (None, EP_LEAVES):  # nothing to keep, or nothing can keep it: as without EP
        assert [lv.jobs for lv in row.levels] == [lv.jobs for lv in plain.levels]
    assert (row.ep_warning is not None) == (row.ep_within == EP_LEAVES)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=3),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_max_ep_jobs_equals_the_exhaustive_search(domains: list[list[int]], per_job: int, block: int) -> None:
    nodes = per_job * block
    slots = [s for d in domains for s in d]
    owner = [i for i, d in enumerate(domains) for _ in d]

    def fits(chosen: tuple[int, ...]) -> bool:
        picked = [owner[i] for i in chosen]
        return all(picked.count(d) % block == 0 for d in set(picked))

    assert max_ep_jobs(domains, nodes, block) == _most_jobs(slots, nodes, fits)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(1, 72), st.integers(1, 512))
def test_block_nodes_by_definition(gpus: int, ep: int) -> None:
    assert ep_block_nodes(gpus, ep) == _block_by_definition(gpus, ep)


# ---- by hand


def _fleet(domains: Sequence[str | None], gpus: int = 4) -> Inventory:
    return Inventory(
        tuple(
            Node(f"n{i}", Location("r", "z", "g"), gpus=gpus, nvlink_domain=d) for i, d in enumerate(domains)
        )
    )


def test_ep_blocks_stay_inside_domains() -> None:
    # two domains of 3 free nodes: 2x4:ep=8 ties both nodes of a job into one block, so each domain starts
    # one job (its third node is left); without EP a third job spans the domains
    inventory = _fleet(["a", "a", "a", "b", "b", "b", None])
    states = idle_states(inventory)
    ep, plain = capacity(inventory, states, [parse_shape("2x4:ep=8"), parse_shape("2x4")]).shapes
    assert ep.shape == "2x4:ep=8" and ep.ep_within == EP_IN_DOMAIN and ep.ep_warning is None
    assert [lv.jobs for lv in ep.levels] == [2, 2, 2, 2]
    assert [lv.jobs for lv in plain.levels] == [3, 3, 3, 3]
    assert ep.levels[0].stranded_gpus == 28 - 16


def test_ep_inside_a_node_and_ep_no_domain_holds() -> None:
    inventory = _fleet([None] * 4, gpus=8)
    states = idle_states(inventory)
    in_node, leaves = capacity(inventory, states, [parse_shape("2x8:ep=4"), parse_shape("2x8:ep=16")]).shapes
    assert in_node.ep_within == EP_IN_ISLAND and in_node.ep_warning is None
    assert leaves.ep_within == EP_LEAVES
    assert [lv.jobs for lv in leaves.levels] == [lv.jobs for lv in in_node.levels] == [2, 2, 2, 2]
    # the launcher's words (srun/plan._ep_warning)
    assert leaves.ep_warning is not None
    assert "leave one NVLink island or domain: their all-to-all crosses slower links" in leaves.ep_warning
    text = format_capacity(capacity(inventory, states, [parse_shape("2x8:ep=16")]))
    assert "EP groups" in text and "leave NVLink" in text and leaves.ep_warning in text
    # a domain too small for a block (2 nodes of 8 GPUs) is no domain that holds one
    small = _fleet(["a", "b", "c", "d"], gpus=8)
    (row,) = capacity(small, idle_states(small), [parse_shape("2x8:ep=16")]).shapes
    assert row.ep_within == EP_LEAVES and row.levels[0].jobs == 2


def test_ep_inside_node_islands() -> None:
    # 8-GPU nodes: one NVSwitch board (one island of 8, a real capture), one split in two islands of 4,
    # one without NVLink (a real PCIe capture)
    topos = [
        TOPOLOGIES[8][1],
        _two_islands((4, 4)),
        _capture("rtx3090-8gpu-pcie-node-sys-dualsocket.txt"),
    ]
    inventory = Inventory(
        tuple(Node(f"n{i}", Location("r", "z", "g"), gpus=8, gpu_topology=t) for i, t in enumerate(topos))
    )
    states = idle_states(inventory)
    shapes = [parse_shape(x) for x in ("1x8:ep=8", "1x8:ep=4", "1x4:ep=4", "1x8:ep=2", "1x8")]
    by = {s.shape: s for s in capacity(inventory, states, shapes).shapes}
    assert {k: (s.ep_within, s.levels[0].jobs) for k, s in by.items()} == {
        "1x8:ep=8": (EP_IN_ISLAND, 1),  # only the board of 8
        "1x8:ep=4": (EP_IN_ISLAND, 2),  # the two islands of 4 hold a group each
        "1x4:ep=4": (EP_IN_ISLAND, 4),  # two parts on each NVLink node, none on the PCIe one
        "1x8:ep=2": (EP_IN_ISLAND, 2),
        "1x8": (None, 3),
    }
    pcie = Inventory((Node("p", Location("r", "z", "g"), gpus=8, gpu_topology=topos[2]),))
    (row,) = capacity(pcie, idle_states(pcie), [parse_shape("1x8:ep=8")]).shapes
    assert row.ep_within == EP_LEAVES and row.levels[0].jobs == 1
    assert row.ep_warning is not None and "no node's NVLink islands hold 1 group of them" in row.ep_warning


def test_gcp_a4x_sub_blocks_hold_the_ep_blocks() -> None:
    # A4X sub-blocks are NVLink domains (docs/providers.md); the A3 nodes beside them are in none
    listing = (HERE / "providers/gcp-instances-physical-topology.json").read_text()
    inventory = merge([parse_inventory(import_listing("gcp", listing, source="gcp.json").text)])
    states = idle_states(inventory)
    for g in (1, 2, 4):
        for n in (1, 2, 3, 4):
            for ep in [d for d in range(2, n * g + 1) if (n * g) % d == 0]:
                (row,) = capacity(inventory, states, [Shape(n, g, ep)], levels=CAPACITY_LEVELS).shapes
                assert {lv.level: lv.jobs for lv in row.levels} == reference(inventory, states, n, g, ep)


# ---- refusals, the command, metrics


@pytest.mark.parametrize(
    "text",
    [
        "8x4:ep=0",
        "8x4:ep=3",  # does not divide 32 GPUs
        "8x4:ep=64",
        "8x4:ep=",
        "8x4:",
        "8x4:ep=x",
        "8x4:ep=-4",
        "8x4:ep=16:ep=16",
        "8x4:ep=16,cp=2",
        "8x4:cp=2",
        "8x4:ep 16",
        "8x4:ep=99999999",
        ":ep=4",
    ],
)
def test_bad_ep_shapes_are_refused(text: str) -> None:
    with pytest.raises(InputError, match=r"--shape .*(ep=|NODESxGPUS)"):
        parse_shape(text)


def test_good_ep_shapes() -> None:
    assert parse_shape("8x4:ep=16") == Shape(8, 4, 16) == (8, 4, 16)
    assert parse_shape(" 8x4 : EP = 16 ") == Shape(8, 4, 16)
    assert parse_shape("8x4") == Shape(8, 4, 1) and parse_shape("8x4:ep=1").ep == 1
    with pytest.raises(InputError, match="divide the shape's 8 × 4 = 32 GPUs"):
        parse_shape("8x4:ep=3")
    with pytest.raises(InputError, match="ep=3 must"):
        capacity(_fleet(["a"]), {}, [(8, 4, 3)])


def test_cli_json_table_and_refusal(tmp_path: Path) -> None:
    inv = tmp_path / "fleet.yaml"
    entry = (
        "{name: '%s[1-3]', region: r, zone: z, network_group: g, gpus: 4, nvlink_domain: %s, "
        "source: operator}"
    )
    inv.write_text(f"nodes:\n  - {entry % ('n', 'a')}\n  - {entry % ('m', 'b')}\n")
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("".join(f"NodeName={x}{i} State=IDLE Gres=gpu:4\n" for x in "nm" for i in (1, 2, 3)))
    base = ["capacity", "-i", str(inv), "--nodes-from", str(nodes)]
    out = run(*base, "--shape", "2x4:ep=8", "--shape", "2x4", "--json")
    assert out.returncode == 0, out.stderr
    ep, plain = json.loads(out.stdout)["shapes"]
    assert ep["shape"] == "2x4:ep=8" and ep["ep"] == 8 and ep["ep_block_nodes"] == 2
    assert ep["ep_within"] == EP_IN_DOMAIN and ep["ep_warning"] is None
    assert [lv["jobs"] for lv in ep["levels"]] == [2, 2, 2, 2]
    assert (
        plain["ep"] == 1 and plain["ep_within"] is None and [lv["jobs"] for lv in plain["levels"]] == [3] * 4
    )
    table = run(*base, "--shape", "2x4:ep=8")
    assert table.returncode == 0 and "2x4:ep=8" in table.stdout and "in NVLink domain" in table.stdout
    bad = run(*base, "--shape", "2x4:ep=3")
    assert bad.returncode == 2 and "ep=3" in bad.stderr and "Traceback" not in bad.stderr


def test_metrics_label_the_ep_shape() -> None:
    inventory = _fleet(["a", "a", "b", "b"])
    cap = capacity(inventory, idle_states(inventory), [parse_shape("2x4:ep=8")])
    text = exposition(Snapshot(0.0, capacity=cap)).decode()
    assert 'slurm_topo_capacity_jobs{level="network_group",shape="2x4:ep=8"} 2.0' in text
