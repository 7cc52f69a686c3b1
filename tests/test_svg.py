"""The fleet picture (slurm_topo.reports.svg, `slurm-topo show --svg`): well-formed, complete, bounded at
scale.

The browser check (headless Chromium, screenshots) is ``benchmarks/svg_screenshot.py``."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.reports.capacity import NodeState, idle_states
from slurm_topo.reports.svg import COLOURS, SQUARES_MAX, render_svg

NS = "{http://www.w3.org/2000/svg}"
REAL = Path(__file__).parent / "fixtures/real/slurm-22.05"


def squares(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]


def fleet(groups: int, per_group: int, zones: int = 2) -> Inventory:
    nodes = [
        Node(f"g{g:04d}n{i:03d}", Location("r1", f"r1-{'abcd'[g % zones]}", f"leaf{g:04d}"), gpus=8)
        for g in range(groups)
        for i in range(per_group)
    ]
    return Inventory(tuple(nodes))


def test_one_square_per_node_coloured_by_state() -> None:
    inv = fleet(3, 4)
    states = idle_states(inv)
    states["g0000n000"] = NodeState("g0000n000", "drained", 8, 0, "IDLE+DRAIN")
    states["g0001n002"] = NodeState("g0001n002", "allocated", 8, 0, "ALLOCATED")
    svg = render_svg(inv, states)
    got = {r.find(f"{NS}title").text: r.get("fill") for r in squares(svg)}  # type: ignore[union-attr]
    assert set(got) == {n.name for n in inv.nodes}
    assert got["g0000n000"] == COLOURS["drained"] and got["g0001n002"] == COLOURS["allocated"]
    assert sum(v == COLOURS["free"] for v in got.values()) == 10
    assert "leaf0002" in svg and "region r1" in svg and "zone r1-a" in svg


def test_large_groups_are_counts_and_many_groups_become_zones() -> None:
    big = render_svg(fleet(2, SQUARES_MAX + 1), None)
    assert squares(big) == [] and f"{SQUARES_MAX + 1} nodes" in big
    many = render_svg(fleet(1501, 1, zones=4), None)
    root = ET.fromstring(many)
    cards = [g for g in root.iter(f"{NS}g")]
    assert len(cards) == 4 and "one card per zone" in many


def test_many_rows_of_groups_become_zones_only_where_there_are_zones() -> None:
    """More than ROWS_MAX rows of group cards: several zones get one card each (room at a glance, no
    scrolling), and a zone card's counts wrap inside the card; one zone gets cards of consecutive groups."""
    from slurm_topo.reports.svg import LINE_CHARS, PER_ROW, ROWS_MAX

    zoned = render_svg(fleet(2 * PER_ROW * (ROWS_MAX // 2 + 1), 1, zones=2), None)
    assert "one card per zone" in zoned
    assert len(list(ET.fromstring(zoned).iter(f"{NS}g"))) == 2
    fits = render_svg(fleet(PER_ROW * ROWS_MAX, 1, zones=1), None)
    assert "one card per" not in fits and len(list(ET.fromstring(fits).iter(f"{NS}g"))) == PER_ROW * ROWS_MAX
    one = render_svg(fleet(PER_ROW * ROWS_MAX + 1, 1, zones=1), None)
    assert "one card per zone" not in one and "one card per 2 consecutive groups" in one
    assert len(list(ET.fromstring(one).iter(f"{NS}g"))) == (PER_ROW * ROWS_MAX + 2) // 2
    inv = fleet(ROWS_MAX * PER_ROW + 1, 12, zones=4)  # zones of 183 nodes: counts, no squares
    kinds = [("free", 8), ("allocated", 0), ("drained", 0), ("allocated", 4)]  # the last: partly free
    states = {
        n.name: NodeState(n.name, kind, 8, free, kind.upper())
        for n, (kind, free) in zip(inv.nodes, kinds * len(inv.nodes), strict=False)
    }
    svg = render_svg(inv, states)
    texts = [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text") if t.get("font-size") == "10"]
    assert texts and all(len(t) <= LINE_CHARS for t in texts), texts
    assert len(texts) > len(list(ET.fromstring(svg).iter(f"{NS}g")))  # some zone card wrapped its counts


def test_ten_thousand_nodes_stay_bounded() -> None:
    inv = fleet(313, 32)
    svg = render_svg(inv, idle_states(inv))
    root = ET.fromstring(svg)
    assert sum(1 for _ in root.iter()) < 40_000
    assert len(svg) < 3_000_000
    assert f"{len(inv.nodes)} nodes" in svg


def test_no_states_says_so_and_names_are_escaped() -> None:
    inv = Inventory((Node("a&b", Location("r<1>", "z", "g'x"), gpus=1),))
    svg = render_svg(inv, None, title="t<&>")
    ET.fromstring(svg)  # well-formed despite the characters
    assert "no node states given" in svg


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_show_svg_cli(tmp_path: Path) -> None:
    out = tmp_path / "fleet.svg"
    res = run(
        "show", "-i", str(REAL / "inventory.yaml"), "--nodes-from", str(REAL / "scontrol-show-node-o.txt"),
        "--svg", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "svg: " in res.stdout and "with node states" in res.stdout and "fleet:" in res.stdout
    root = ET.fromstring(out.read_text())
    fills = [r.get("fill") for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(fills) == 12 and COLOURS["drained"] in fills and COLOURS["free"] in fills


def test_show_svg_unwritable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    res = run("show", "-i", str(REAL / "inventory.yaml"), "--svg", str(tmp_path / "file" / "x.svg"))
    assert res.returncode == 4 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_mixed_node_with_gpus_left_is_drawn_partly_free_and_headers_say_the_room() -> None:
    """MIXED, 8 GPUs, 6 free: its own colour (not the all-allocated blue), counted in the bar and the tooltip;
    region and zone headers say how many nodes and GPUs are free."""
    from slurm_topo.reports.svg import PARTLY

    inv = fleet(2, 2)
    states = idle_states(inv)
    states["g0000n000"] = NodeState("g0000n000", "allocated", 8, 6, "MIXED")
    states["g0000n001"] = NodeState("g0000n001", "allocated", 8, 0, "ALLOCATED")
    svg = render_svg(inv, states)
    got = {r.find(f"{NS}title").text: r.get("fill") for r in squares(svg)}  # type: ignore[union-attr]
    assert got["g0000n000"] == COLOURS[PARTLY] != COLOURS["allocated"]
    assert got["g0000n001"] == COLOURS["allocated"]
    assert "1 partly free (GPUs left)" in svg and "1 allocated" in svg
    assert "region r1: 4 nodes, 2 zones; 2 nodes free, 22 of 32 GPUs free" in svg, svg[:2000]
    assert "zone r1-a: 2 nodes, 1 network group; 0 nodes free, 6 of 16 GPUs free" in svg
