"""Topology-feasible capacity (slurm_topo.reports.capacity, `slurm-topo capacity`): real captured node list
and synthetic fleets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.access.text import parse_scontrol_nodes
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.reports.capacity import (
    ALLOCATED,
    DRAINED,
    FREE,
    UNKNOWN,
    NodeState,
    capacity,
    classify,
    idle_states,
    max_jobs,
    node_states,
    parse_shape,
)

REAL = Path(__file__).parent / "fixtures/real/slurm-22.05"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def real() -> tuple[Inventory, list[dict[str, str]]]:
    inventory = merge([load_inventory_file(REAL / "inventory.yaml")])
    return inventory, parse_scontrol_nodes((REAL / "scontrol-show-node-o.txt").read_text())


def test_states_of_the_real_node_list() -> None:
    inventory, records = real()
    states, extra = node_states(inventory, records)
    assert extra == ()
    by_state = {r["NodeName"]: r["State"] for r in records}
    for name, s in states.items():
        if by_state[name] == "IDLE":
            assert s.kind == FREE and s.free_gpus == s.gpus > 0
        elif "DRAIN" in by_state[name]:
            assert s.kind == DRAINED and s.free_gpus == 0
        else:  # MIXED with no GPU use reported: nothing counted free
            assert by_state[name] == "MIXED" and s.kind == ALLOCATED and s.free_gpus == 0


def test_capacity_of_the_real_fleet_by_hand() -> None:
    inventory, records = real()
    states, _ = node_states(inventory, records)
    free = {n.name: states[n.name].free_gpus for n in inventory.nodes}
    result = capacity(inventory, states, [(2, 8)])
    (shape,) = result.shapes
    assert result.free_gpus == sum(free.values())
    assert shape.naive_jobs == result.free_gpus // 16
    # expected by hand from the fixture: 8-GPU nodes with all 8 free, grouped per level
    for row in shape.levels:
        groups: dict[object, int] = {}
        for n in inventory.nodes:
            if free[n.name] >= 8:
                loc = n.location
                key = {
                    "network_group": (loc.region, loc.zone, loc.network_group),
                    "zone": (loc.region, loc.zone),
                    "region": loc.region,
                    "any": "*",
                }[row.level]
                groups[key] = groups.get(key, 0) + 1
        assert row.jobs == sum(c // 2 for c in groups.values())
        assert row.stranded_gpus == result.free_gpus - row.jobs * 16
    jobs = [row.jobs for row in shape.levels]
    assert jobs == sorted(jobs)  # a wider level never holds fewer


def test_cli_table_and_json_on_the_real_fleet() -> None:
    args = [
        "capacity",
        "-i",
        str(REAL / "inventory.yaml"),
        "--nodes-from",
        str(REAL / "scontrol-show-node-o.txt"),
    ]
    out = run(*args, "--shape", "2x8", "--shape", "1x4")
    assert out.returncode == 0, out.stderr
    assert "2x8" in out.stdout and "stranded" in out.stdout
    data = json.loads(run(*args, "--shape", "2x8", "--json").stdout)
    inventory, records = real()
    states, _ = node_states(inventory, records)
    assert data == capacity(inventory, states, [(2, 8)]).as_dict()
    assert [lv["level"] for lv in data["shapes"][0]["levels"]] == ["network_group", "zone", "region", "any"]


def test_synthetic_fragmentation() -> None:
    # two leaves of 3 free 4-GPU nodes each: 6 free nodes but no leaf holds a 4-node job
    nodes = [Node(f"a{i}", Location("r", "z", "g1"), gpus=4) for i in range(3)]
    nodes += [Node(f"b{i}", Location("r", "z", "g2"), gpus=4) for i in range(3)]
    inventory = Inventory(tuple(nodes))
    (shape,) = capacity(inventory, idle_states(inventory), [(4, 4)]).shapes
    by_level = {lv.level: lv for lv in shape.levels}
    assert shape.naive_jobs == 1
    assert by_level["network_group"].jobs == 0 and by_level["network_group"].stranded_gpus == 24
    assert by_level["zone"].jobs == 1 and by_level["zone"].stranded_gpus == 8


def test_partial_nodes_host_several_jobs() -> None:
    nodes = tuple(Node(f"n{i}", Location("r", "z", "g"), gpus=8) for i in range(2))
    inventory = Inventory(nodes)
    (shape,) = capacity(inventory, idle_states(inventory), [(2, 4)]).shapes
    assert [lv.jobs for lv in shape.levels] == [2, 2, 2, 2]


def test_mixed_nodes_with_gres_used() -> None:
    inventory = Inventory(
        (Node("x", Location("r", "z", "g"), gpus=8), Node("y", Location("r", "z", "g"), gpus=8))
    )
    records = [
        {"NodeName": "x", "State": "MIXED", "GresUsed": "gpu:h100:3(IDX:0-2)"},
        {"NodeName": "y", "State": "MIXED", "AllocTRES": "cpu=4,gres/gpu=8"},
        {"NodeName": "zz", "State": "IDLE"},
    ]
    states, extra = node_states(inventory, records)
    assert states["x"].free_gpus == 5 and states["x"].kind == ALLOCATED
    assert states["y"].free_gpus == 0
    assert extra == ("zz",)


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        ("IDLE", FREE),
        ("IDLE~", FREE),
        ("IDLE+DRAIN", DRAINED),
        ("IDLE*", DRAINED),
        ("DOWN*+DRAIN", DRAINED),
        ("ALLOCATED", ALLOCATED),
        ("MIXED+COMPLETING", ALLOCATED),
        ("IDLE+RESERVED", DRAINED),
        ("IDLE+MAINT", DRAINED),
        ("", UNKNOWN),
        ("WEIRD", UNKNOWN),
    ],
)
def test_classify(state: str, kind: str) -> None:
    assert classify(state) == kind


def test_shapes_and_bad_input() -> None:
    assert parse_shape("8x4") == (8, 4, 1) and parse_shape("2X8") == (2, 8, 1)
    for bad in ("8", "0x4", "8x0", "x4", "8x4x2", "-1x2"):
        with pytest.raises(InputError):
            parse_shape(bad)
    out = run("capacity", "-i", str(REAL / "inventory.yaml"), "--shape", "2x8")
    assert out.returncode == 2 and "--nodes-from" in out.stderr
    out = run(
        "capacity", "-i", str(REAL / "inventory.yaml"), "--nodes-from", "/nonexistent", "--shape", "2x8"
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=12), st.integers(1, 5))
def test_max_jobs_matches_brute_force(slots: list[int], n: int) -> None:
    best = 0
    for j in range(sum(slots) // n + 1):  # a greedy packing proves j jobs fit (always take the n fullest)
        left = sorted(slots, reverse=True)
        ok = True
        for _ in range(j):
            left.sort(reverse=True)
            if len(left) < n or left[n - 1] == 0:
                ok = False
                break
            for i in range(n):
                left[i] -= 1
        if ok:
            best = j
    assert max_jobs(slots, n) == best


@st.composite
def fleets(draw):  # type: ignore[no-untyped-def]
    nodes, states = [], {}
    for i in range(draw(st.integers(1, 30))):
        loc = Location(
            draw(st.sampled_from(["r1", "r2"])),
            draw(st.sampled_from(["z1", "z2", "z3"])),
            draw(st.sampled_from(["g1", "g2"])),
        )
        gpus = draw(st.sampled_from([4, 8]))
        free = draw(st.integers(0, gpus))
        nodes.append(
            Node(f"n{i}", Location(loc.region, f"{loc.region}-{loc.zone}", loc.network_group), gpus=gpus)
        )
        states[f"n{i}"] = NodeState(f"n{i}", FREE if free else ALLOCATED, gpus, free)
    return Inventory(tuple(nodes)), states


@settings(max_examples=100, deadline=None)
@given(fleets(), st.integers(1, 6), st.sampled_from([1, 2, 4, 8]))
def test_capacity_properties(fleet, n, g) -> None:  # type: ignore[no-untyped-def]
    inventory, states = fleet
    cap = capacity(inventory, states, [(n, g)])
    (shape,) = cap.shapes
    jobs = [lv.jobs for lv in shape.levels]
    assert jobs == sorted(jobs)  # a wider level never holds fewer
    for lv in shape.levels:
        assert lv.jobs <= shape.naive_jobs
        assert lv.stranded_gpus == cap.free_gpus - lv.jobs * n * g >= 0
