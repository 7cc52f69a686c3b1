"""`show --svg` and the `explain --svg` overlay at every fleet size (slurm_topo.reports.svg, svg_overlay).

A fleet is described by its shape: regions, each a list of zones, each a list of rack (network group) sizes.
The tests read the pictures back as a user would — each card's tooltip names what it holds (a network
group, a zone, or a bin ``first – last`` of consecutive network groups) and its counts — and check them
against the shape and the node states they were drawn from, never against the renderer's own tables.
"""

from __future__ import annotations

import random
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Collection
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from slurm_topo.core.model import Inventory, Location, Node, natural_key
from slurm_topo.reports.capacity import NodeState
from slurm_topo.reports.svg import BINS_MAX, FOCUS_MAX, PER_ROW, ROWS_MAX, render_svg
from slurm_topo.reports.svg_overlay import LEGEND_H, render_overlay

NS = "{http://www.w3.org/2000/svg}"
Shape = tuple[tuple[tuple[int, ...], ...], ...]
"""regions → zones → the node count of each rack (network group)."""
Pick = tuple[str, int, int] | tuple[str, tuple[int, ...]]
"""Nodes picked from a fleet: ``("run", start, length)`` consecutive nodes, or ``("at", indices)``."""
TOTAL = 3000
"""The most nodes a generated fleet has (each axis still reaches its extreme, one at a time)."""
LABEL_KIND = {
    "free": "free",
    "partly free (GPUs left)": "partly",
    "allocated": "allocated",
    "drained/down": "drained",
    "state unknown": "unknown",
}
TIP_COUNT = re.compile(r"(\d+) (" + "|".join(re.escape(k) for k in LABEL_KIND) + r")(?=,|;|$)")


class Fleet:
    """A fleet built from a shape: names, and which nodes each zone and network group holds."""

    def __init__(self, shape: Shape) -> None:
        nodes: list[Node] = []
        self.zone_of: dict[str, str] = {}
        self.group_of: dict[str, str] = {}
        self.groups: dict[str, list[str]] = {}  # zone -> its network groups, in natural order
        for r, zones in enumerate(shape):
            for z, racks in enumerate(zones):
                zone = f"r{r}-z{z}"
                self.groups[zone] = []
                for k, size in enumerate(racks):
                    group = f"{zone}-rack{k}"
                    self.groups[zone].append(group)
                    for _ in range(size):
                        node = Node(f"n{len(nodes)}", Location(f"r{r}", zone, group), gpus=8)
                        nodes.append(node)
                        self.zone_of[node.name] = zone
                        self.group_of[node.name] = group
        self.inventory = Inventory(tuple(nodes))
        self.names = [n.name for n in nodes]
        for zone, groups in self.groups.items():
            assert groups == sorted(groups, key=natural_key), zone

    def pick(self, pick: Pick | None) -> list[str] | None:
        if pick is None:
            return None
        if len(pick) == 3:  # ("run", start, length)
            start = pick[1] % len(self.names)
            return self.names[start : start + pick[2]]
        return sorted({self.names[i % len(self.names)] for i in pick[1]})

    def under(self, label: str) -> set[str]:
        """The nodes a card labelled ``label`` must hold: a network group's, a zone's, or a bin's."""
        if " – " in label:
            first, last = label.split(" – ")
            zone = next(z for z, gs in self.groups.items() if first in gs)
            groups = self.groups[zone]
            assert groups.index(first) < groups.index(last), label
            chosen = set(groups[groups.index(first) : groups.index(last) + 1])
            return {n for n, g in self.group_of.items() if g in chosen}
        if label in self.groups:
            return {n for n, z in self.zone_of.items() if z == label}
        held = {n for n, g in self.group_of.items() if g == label}
        assert held, f"no network group or zone {label!r}"
        return held


def seeded_states(fleet: Fleet, seed: int) -> tuple[dict[str, NodeState], Counter[str]]:
    """Node states picked at random from ``seed``, and how many of each kind a reader must count."""
    rnd = random.Random(seed)
    states: dict[str, NodeState] = {}
    kinds: Counter[str] = Counter()
    for name in fleet.names:
        kind = rnd.choice(("free", "allocated", "partly", "drained"))
        kinds[kind] += 1
        if kind == "partly":
            states[name] = NodeState(name, "allocated", 8, 3, "MIXED")
        else:
            states[name] = NodeState(name, kind, 8, 8 if kind == "free" else 0, kind.upper())
    return states, kinds


def cards(root: ET.Element) -> list[ET.Element]:
    """The cards: every ``<g>`` with a tooltip of its own."""
    return [g for g in root.iter(f"{NS}g") if g.find(f"{NS}title") is not None]


def tip(card: ET.Element) -> str:
    return card.findtext(f"{NS}title") or ""


def label(card: ET.Element) -> str:
    return tip(card).split(": ", 1)[0]


def nodes_on(card: ET.Element) -> int:
    m = re.search(r": (?:\d+ network groups?, )?(\d+) nodes?, ", tip(card))
    assert m, tip(card)
    return int(m.group(1))


def tip_counts(card: ET.Element) -> Counter[str]:
    # "…; 3 free, 1 allocated; 24 GPUs free (; job 7: 1 node)": the part after the node and GPU counts
    out: Counter[str] = Counter()
    for count, kind in TIP_COUNT.findall(tip(card).split("; ")[1] if "; " in tip(card) else ""):
        out[LABEL_KIND[kind]] += int(count)
    return out


def frame(card: ET.Element) -> ET.Element:
    """A card's outline: its first rectangle."""
    rect = card.find(f"{NS}rect")
    assert rect is not None
    return rect


def height(root: ET.Element) -> int:
    return int(root.get("height", "0"))


def check_pictures(
    fleet: Fleet, job: Collection[str], best: Collection[str] | None, states: dict[str, NodeState] | None
) -> tuple[ET.Element, ET.Element]:
    """Draw both pictures and check what a reader of them can check; return both roots."""
    show_root = ET.fromstring(render_svg(fleet.inventory, states))  # well-formed
    overlay_root = ET.fromstring(render_overlay(fleet.inventory, states, job, best, job_label="job 7"))
    n_zones = len(fleet.groups)
    for root in (show_root, overlay_root):
        drawn = cards(root)
        # every node on exactly one card, each card holding what its name says
        assert sum(nodes_on(c) for c in drawn) == len(fleet.names)
        held = [fleet.under(label(c)) for c in drawn]
        assert [len(h) for h in held] == [nodes_on(c) for c in drawn], [label(c) for c in drawn]
        assert set().union(*held) == set(fleet.names)
        if states is not None:
            total: Counter[str] = Counter()
            for c in drawn:
                total += tip_counts(c)
            want = Counter(
                "partly" if s.kind == "allocated" and 0 < s.free_gpus < s.gpus else s.kind
                for s in states.values()
            )
            assert total == want
    # a sensible size: as many cards as fit in ROWS_MAX rows, or one per zone
    assert len(cards(show_root)) <= max(ROWS_MAX * PER_ROW, n_zones)
    assert len(cards(overlay_root)) <= len(cards(show_root)) + 2 * FOCUS_MAX
    # the overlay marks every card holding the job's (the best placement's) nodes, with their number
    job_set, best_set = set(job), set(best or ())
    for c in cards(overlay_root):
        outline, under = frame(c), fleet.under(label(c))
        assert int(outline.get("data-job", "0")) == len(under & job_set), (label(c), outline.attrib)
        assert int(outline.get("data-best", "0")) == len(under & best_set), (label(c), outline.attrib)
        if under & job_set:
            assert "; job 7: " in tip(c) and outline.get("stroke") == "#000000"
    # a node drawn as a square is marked on its square too
    for square in overlay_root.iter(f"{NS}rect"):
        name = square.findtext(f"{NS}title")
        if name in fleet.group_of:
            assert (square.get("data-job") == name) == (name in job_set), name
            assert (square.get("data-best") == name) == (name in best_set), name
    legend = [t.text or "" for t in overlay_root.iter(f"{NS}text")][0]
    assert legend.startswith(f"job 7: {len(job_set)} node"), legend
    if len(cards(overlay_root)) == len(cards(show_root)):  # nothing split out: show's picture plus the legend
        assert height(overlay_root) == height(show_root) + LEGEND_H
    return show_root, overlay_root


@st.composite
def shapes(draw: st.DrawFn, regions_max: int = 10, zones_max: int = 50) -> Shape:
    """1-10 regions, 1-50 zones a region, 1-500 racks a zone, 1-200 nodes a rack, at most TOTAL nodes."""
    budget = TOTAL
    n_regions = draw(st.integers(1, regions_max))
    regions = []
    for r in range(n_regions):
        later_regions = n_regions - r - 1
        n_zones = draw(st.integers(1, min(zones_max, budget - later_regions)))
        zones = []
        for z in range(n_zones):
            room = budget - later_regions - (n_zones - z - 1)
            racks = draw(st.integers(1, min(500, room)))
            size = draw(st.integers(1, min(200, room // racks)))
            if draw(st.booleans()):  # racks of different sizes, up to ``size``
                rnd = random.Random(draw(st.integers(0, 2**32)))
                sizes = tuple(rnd.randint(1, size) for _ in range(racks))
            else:
                sizes = (size,) * racks
            budget -= sum(sizes)
            zones.append(sizes)
        regions.append(tuple(zones))
    return tuple(regions)


picks: st.SearchStrategy[Pick] = st.one_of(
    st.tuples(st.just("run"), st.integers(0, 10**6), st.integers(1, 64)),
    st.tuples(st.just("at"), st.lists(st.integers(0, 10**6), min_size=1, max_size=40).map(tuple)),
)


def one(n: int) -> tuple[int, ...]:
    return (1,) * n


@settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    shape=shapes() | shapes(1, 1) | shapes(2, 4),
    job=picks,
    best=st.none() | picks,
    seed=st.none() | st.integers(0, 2**32),
)
# the crash this test was written for: 4 zones of 20 racks, one card per zone in show, per group in explain
@example(shape=((one(20),) * 4,), job=("run", 0, 2), best=("run", 40, 2), seed=None)
@example(shape=((one(1),),) * 10, job=("at", (0, 9)), best=None, seed=1)  # 10 regions
@example(shape=((one(1),) * 50,), job=("at", (3, 49)), best=("run", 10, 1), seed=2)  # 50 zones
@example(shape=((one(500),),), job=("run", 250, 3), best=("run", 499, 1), seed=3)  # 500 racks, one zone
@example(shape=(((6,) * 500,),), job=("at", tuple(range(0, 3000, 50))), best=("run", 7, 9), seed=4)
@example(shape=(((200,),),), job=("run", 100, 64), best=("run", 0, 8), seed=5)  # 200 nodes a rack
@example(shape=((one(PER_ROW * ROWS_MAX + 1),),), job=("run", 0, 1), best=None, seed=6)  # just past the rows
@example(
    shape=((one(300), one(300)),), job=("run", 299, 2), best=("run", 0, 2), seed=None
)  # 2 zones, many racks
@example(shape=(((2,) * 10,) * 50,) * 2, job=("run", 500, 40), best=("run", 0, 4), seed=7)  # 100 zones
def test_show_and_explain_pictures_at_every_fleet_shape(
    shape: Shape, job: Pick, best: Pick | None, seed: int | None
) -> None:
    fleet = Fleet(shape)
    states = seeded_states(fleet, seed)[0] if seed is not None else None
    job_nodes = fleet.pick(job)
    assert job_nodes
    show_root, _ = check_pictures(fleet, job_nodes, fleet.pick(best), states)
    note = " ".join(t.text or "" for t in show_root.iter(f"{NS}text"))
    event("one card per zone" if "per zone" in note else "bins" if "consecutive" in note else "group cards")


# ---- 10 000 nodes in one zone


def one_zone(racks: int = 500, per_rack: int = 20) -> Fleet:
    return Fleet((((per_rack,) * racks,),))


def test_ten_thousand_nodes_in_one_zone_are_binned_into_rack_group_cards() -> None:
    """500 racks of 20 nodes in one zone: bins of consecutive racks, each with its counts by state, that
    cover the zone's racks in order; the picture stays a screenful or two."""
    fleet = one_zone()
    states, kinds = seeded_states(fleet, 42)
    svg = render_svg(fleet.inventory, states)
    root = ET.fromstring(svg)
    drawn = cards(root)
    assert 1 < len(drawn) <= BINS_MAX
    assert height(root) <= 2000 and sum(1 for _ in root.iter()) < 2500 and len(svg) < 300_000
    # the bins cover the racks in their order, each rack once
    covered: list[str] = []
    for card in drawn:
        first, last = label(card).split(" – ")
        groups = fleet.groups["r0-z0"]
        covered += groups[groups.index(first) : groups.index(last) + 1]
    assert covered == fleet.groups["r0-z0"]
    # what the card shows (its text, not only its tooltip): groups, nodes and nodes by state add up
    shown: Counter[str] = Counter()
    for card in drawn:
        texts = [t.text or "" for t in card.iter(f"{NS}text")]
        assert re.fullmatch(r"\d+ network groups", texts[2]), texts
        shown["groups"] += int(texts[2].split()[0])
        shown["nodes"] += int(texts[1].split()[0])
        for count, kind in re.findall(
            r"(\d+) (partly free|free|allocated|drained|unknown)", " ".join(texts[3:])
        ):
            shown[kind.split()[0]] += int(count)
    assert shown == Counter(groups=500, nodes=10_000, **kinds)
    assert "500 network groups in one zone: one card per 10 consecutive groups" in svg
    check_pictures(fleet, ["n2460", "n2461", "n2480", "n2481"], ["n8000", "n8001", "n8002", "n8003"], states)


def test_explain_in_one_huge_zone_draws_the_jobs_racks_node_by_node_in_place() -> None:
    """The job on racks 123 and 124, the best placement on rack 400: those three racks are cards of their
    own, with a square per node, where they belong among the bins; the other bins are as ``show`` drew them;
    the picture grows by a few cards only."""
    fleet = one_zone()
    states = seeded_states(fleet, 7)[0]
    job = ["n2460", "n2461", "n2480", "n2481"]  # racks 123 and 124 (20 nodes a rack)
    best = ["n8000", "n8001", "n8002", "n8003"]  # rack 400
    show_root, root = check_pictures(fleet, job, best, states)
    own = {label(c): c for c in cards(root) if " – " not in label(c)}
    assert set(own) == {"r0-z0-rack123", "r0-z0-rack124", "r0-z0-rack400"}
    assert frame(own["r0-z0-rack123"]).get("data-job") == "2" == frame(own["r0-z0-rack124"]).get("data-job")
    assert frame(own["r0-z0-rack400"]).get("data-best") == "4"
    rings = {r.get("data-job") for r in root.iter(f"{NS}rect")} - {None, "2"}
    assert rings == set(job)  # each of the job's nodes is a square of its own, marked
    order = [label(c) for c in cards(root)]
    assert order.index("r0-z0-rack120 – r0-z0-rack122") + 1 == order.index("r0-z0-rack123")
    assert order.index("r0-z0-rack124") + 1 == order.index("r0-z0-rack125 – r0-z0-rack129")
    assert order.index("r0-z0-rack400") + 1 == order.index("r0-z0-rack401 – r0-z0-rack409")
    focused = {fleet.group_of[n] for n in job + best}
    untouched = [label(c) for c in cards(show_root) if not focused & groups_on(fleet, c)]
    assert len(untouched) == len(cards(show_root)) - 2 and set(untouched) <= set(order)
    assert len(order) == len(untouched) + 6  # bin 120-129 in four cards, bin 400-409 in two
    assert height(root) <= height(show_root) + LEGEND_H + 400


def groups_on(fleet: Fleet, card: ET.Element) -> set[str]:
    return {fleet.group_of[n] for n in fleet.under(label(card))}


def test_a_job_over_many_racks_of_one_huge_zone_is_marked_on_its_bins() -> None:
    """A job on one node in each of 50 racks (more than FOCUS_MAX): no card of its own, the bins holding
    it are outlined with their share of the job, and the picture is the size of show's plus the legend."""
    fleet = one_zone()
    job = [f"n{20 * 10 * i}" for i in range(50)]  # the first node of racks 0, 10, 20, …: one a bin
    show_root, root = check_pictures(fleet, job, None, None)
    assert [label(c) for c in cards(root)] == [label(c) for c in cards(show_root)]
    assert sorted(frame(c).get("data-job", "") for c in cards(root)) == ["1"] * 50
    assert height(root) == height(show_root) + LEGEND_H


def test_explain_svg_cli_on_a_fleet_drawn_one_card_per_zone(tmp_path: Path) -> None:
    """The crash of ``explain JOBID -i FLEET --svg F`` (exit 70) where show draws one card per zone: one
    region, 4 zones of 20 racks of one node."""
    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import ScriptedRunner
    from test_cli import invoke

    from slurm_topo.cli import explain as explain_cli

    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        "nodes:\n"
        + "".join(
            f"  - {{name: n{z}{g:02d}, region: r1, zone: z{z}, network_group: rack{z}{g:02d}, gpus: 8}}\n"
            for z in range(4)
            for g in range(20)
        )
    )
    nodes = "".join(
        f"NodeName=n{z}{g:02d} State={'ALLOCATED' if z == 1 and g < 2 else 'IDLE'} Gres=gpu:8\n"
        for z in range(4)
        for g in range(20)
    )
    job = (
        "JobId=31 JobState=RUNNING Reason=None NodeList=n[100-101] NumNodes=2 Features=(null) "
        "AdminComment=(null) Comment=(null) StdErr=/dev/null"
    )
    fake = ScriptedRunner(
        {
            ("scontrol", "show", "job", "-o", "31"): job,
            ("scontrol", "show", "node", "-o", "n[100-101]"): "NodeName=n100 State=ALLOCATED Gres=gpu:8\n"
            "NodeName=n101 State=ALLOCATED Gres=gpu:8\n",
            ("scontrol", "-d", "show", "node", "-o"): nodes,
        }
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(explain_cli, "SubprocessRunner", lambda: fake)
        mp.setenv("SLURM_TOPO_SLURM_BACKEND", "text")
        picture = tmp_path / "job.svg"
        result = invoke("explain", "31", "-i", str(inventory), "--svg", str(picture))
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"svg: {picture} (job 31 on 2 nodes")
    root = ET.parse(picture).getroot()
    show_root = ET.fromstring(render_svg(Fleet(((one(20),) * 4,)).inventory))
    assert len(cards(show_root)) == 4  # show: one card per zone
    marked = {r.get("data-job") for r in root.iter(f"{NS}rect")} - {None}
    assert {"n100", "n101"} <= marked, marked
