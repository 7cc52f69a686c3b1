"""The fleet as a picture (SVG, plain template, pure): regions → zones → network groups → nodes.

Each region is a band, each zone a row of group cards. A card shows the group's name, node and GPU counts,
a bar of free / allocated / drained nodes when node states are given, and one square per node for groups of
up to ``SQUARES_MAX`` nodes (larger groups show counts only, so 10 000 nodes stay a few thousand shapes).
Past ``CARDS_MAX`` groups, or past ``ROWS_MAX`` rows of group cards in a fleet of several zones, the cards
are zones instead of groups (422 nodes in 30 zones: 1 240 × 1 316 px, not 3 476). Every card has a
``<title>`` tooltip. Colours stay apart for the common colour-vision deficiencies (blue/orange, plus grey).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from .capacity import ALLOCATED, DRAINED, FREE, UNKNOWN, NodeState
from .model import Inventory, Node, natural_key
from .text import counted

SQUARES_MAX = 128
CARDS_MAX = 1500
ROWS_MAX = 12
"""More rows of group cards than this (about two screens) and a fleet of several zones is drawn one card per
zone: which zone has room must show at a glance, not after scrolling."""
PARTLY = "partly"
"""A node in use with GPUs still free (Slurm's MIXED with free GPUs): its own colour, never drawn as full."""
KINDS = (FREE, PARTLY, ALLOCATED, DRAINED, UNKNOWN)
"""The picture's node kinds, in the bars' order: capacity's kinds with ``partly`` after free."""
COLOURS = {FREE: "#2b8a3e", PARTLY: "#94d82d", ALLOCATED: "#1c5fb8", DRAINED: "#e8590c", UNKNOWN: "#adb5bd"}
LABELS = {
    FREE: "free",
    PARTLY: "partly free (GPUs left)",
    ALLOCATED: "allocated",
    DRAINED: "drained/down",
    UNKNOWN: "state unknown",
}

SHORT = {FREE: "free", PARTLY: "partly free", ALLOCATED: "allocated", DRAINED: "drained", UNKNOWN: "unknown"}
"""The kinds in a card's count lines (the legend explains them)."""
LINE_CHARS = 34
"""What fits on one 10 px line of a card (DejaVu Sans, 206 px): count lines wrap there."""

WIDTH = 1240
MARGIN = 20
CARD_W = 222
CARD_GAP = 10
PER_ROW = (WIDTH - 2 * MARGIN - 20 + CARD_GAP) // (CARD_W + CARD_GAP)
SQ = 10
SQ_GAP = 2
SQ_PER_ROW = (CARD_W - 16 + SQ_GAP) // (SQ + SQ_GAP)
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"


@dataclass
class _Group:
    name: str
    nodes: list[Node] = field(default_factory=list)

    def states(self, states: Mapping[str, NodeState] | None) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for n in self.nodes:
            out[_kind(n, states)] += 1
        return out


def _kind(node: Node, states: Mapping[str, NodeState] | None) -> str:
    if states is None:
        return UNKNOWN
    s = states.get(node.name)
    if s is None:
        return UNKNOWN
    if s.kind == ALLOCATED and 0 < s.free_gpus < s.gpus:
        return PARTLY
    return s.kind


def _tree(inventory: Inventory) -> dict[str, dict[str, dict[str, _Group]]]:
    tree: dict[str, dict[str, dict[str, _Group]]] = {}
    for node in inventory.nodes:
        loc = node.location
        region = loc.region or "(no location)"
        zone = loc.zone or ("(no zone)" if loc.region else "-")
        group = loc.network_group or "(no network group)"
        tree.setdefault(region, {}).setdefault(zone, {}).setdefault(group, _Group(group)).nodes.append(node)
    return tree


def _sorted(keys: Sequence[str]) -> list[str]:
    return sorted(keys, key=lambda k: (k.startswith("(") or k == "-", natural_key(k)))


def _bar(x: int, y: int, w: int, counts: Mapping[str, int], total: int) -> list[str]:
    out = [f"<rect x='{x}' y='{y}' width='{w}' height='8' fill='#e9ecef'/>"]
    pos = float(x)
    for kind in KINDS:
        if counts[kind] and total:
            width = w * counts[kind] / total
            out.append(f"<rect x='{pos:.1f}' y='{y}' width='{width:.1f}' height='8' fill='{COLOURS[kind]}'/>")
            pos += width
    return out


def _room(nodes: Sequence[Node], states: Mapping[str, NodeState] | None) -> str:
    """A region's or zone's room at a glance: "; 12 nodes free, 40 of 96 GPUs free" (nothing without
    states)."""
    if states is None:
        return ""
    free_nodes = sum(1 for n in nodes if _kind(n, states) == FREE)
    gpus = sum(n.gpus or 0 for n in nodes)
    free_gpus = sum(states[n.name].free_gpus for n in nodes if n.name in states)
    return f"; {counted(free_nodes, 'node')} free, {free_gpus} of {counted(gpus, 'GPU')} free"


def _card(
    x: int, y: int, title: str, nodes: Sequence[Node], states: Mapping[str, NodeState] | None
) -> tuple[list[str], int]:
    counts = dict.fromkeys(KINDS, 0)
    for n in nodes:
        counts[_kind(n, states)] += 1
    gpus = sum(n.gpus or 0 for n in nodes)
    free_gpus = (
        sum(states[n.name].free_gpus for n in nodes if n.name in states) if states is not None else None
    )
    squares = len(nodes) <= SQUARES_MAX
    rows = -(-len(nodes) // SQ_PER_ROW) if squares else 0
    count_lines: list[str] = []
    if not squares:
        for part in (f"{counts[k]} {SHORT[k]}" for k in KINDS if counts[k]):
            if count_lines and len(count_lines[-1]) + 2 + len(part) <= LINE_CHARS:
                count_lines[-1] += ", " + part
            else:
                count_lines.append(part)
    height = 52 + (rows * (SQ + SQ_GAP) + 4 if squares else 2 + 12 * max(1, len(count_lines)))
    shown = title if len(title) <= 30 else title[:29] + "…"
    tip = f"{title}: {counted(len(nodes), 'node')}, {counted(gpus, 'GPU')}"
    if states is not None:
        tip += "; " + ", ".join(f"{counts[k]} {LABELS[k]}" for k in KINDS if counts[k])
        tip += f"; {free_gpus} GPUs free"
    out = [
        f"<g><title>{escape(tip)}</title>",
        f"<rect x='{x}' y='{y}' width='{CARD_W}' height='{height}' rx='4' fill='#ffffff' stroke='#ced4da'/>",
        f"<text x='{x + 8}' y='{y + 16}' font-size='12' font-weight='bold' {FONT}>{escape(shown)}</text>",
    ]
    line = f"{counted(len(nodes), 'node')}, {counted(gpus, 'GPU')}"
    if free_gpus is not None:
        line += f", {free_gpus} free"
    out.append(f"<text x='{x + 8}' y='{y + 31}' font-size='11' fill='#495057' {FONT}>{escape(line)}</text>")
    out += _bar(x + 8, y + 38, CARD_W - 16, counts, len(nodes))
    if squares:
        for i, n in enumerate(nodes):
            sx = x + 8 + (i % SQ_PER_ROW) * (SQ + SQ_GAP)
            sy = y + 52 + (i // SQ_PER_ROW) * (SQ + SQ_GAP)
            out.append(
                f"<rect x='{sx}' y='{sy}' width='{SQ}' height='{SQ}' fill='{COLOURS[_kind(n, states)]}'>"
                f"<title>{escape(n.name)}</title></rect>"
            )
    else:
        for i, text in enumerate(count_lines):
            out.append(
                f"<text x='{x + 8}' y='{y + 60 + 12 * i}' font-size='10' fill='#495057' {FONT}>"
                f"{escape(text)}</text>"
            )
    out.append("</g>")
    return out, height


def render_svg(
    inventory: Inventory, states: Mapping[str, NodeState] | None = None, title: str = "fleet"
) -> str:
    """The whole picture as an SVG document."""
    tree = _tree(inventory)
    n_groups = sum(len(gs) for zs in tree.values() for gs in zs.values())
    n_zones = sum(len(zs) for zs in tree.values())
    rows = sum(-(-len(gs) // PER_ROW) for zs in tree.values() for gs in zs.values())
    by_zone = n_groups > CARDS_MAX or (rows > ROWS_MAX and n_zones > 1)
    body: list[str] = []
    y = MARGIN + 56
    for region in _sorted(list(tree)):
        y = _region(body, y, region, tree[region], states, by_zone)
    head = _legend(inventory, title, tree, states, n_groups, n_zones, by_zone)
    height = y + MARGIN
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
        f"viewBox='0 0 {WIDTH} {height}' role='img' aria-label={quoteattr(title)}>\n"
        f"<rect width='{WIDTH}' height='{height}' fill='#f8f9fa'/>\n" + "\n".join(head + body) + "\n</svg>\n"
    )


def _region(
    body: list[str],
    y: int,
    region: str,
    zones: Mapping[str, Mapping[str, _Group]],
    states: Mapping[str, NodeState] | None,
    by_zone: bool,
) -> int:
    """One region: its header, then a card per zone (``by_zone``) or per network group under each zone."""
    r_nodes = [n for gs in zones.values() for g in gs.values() for n in g.nodes]
    header = f"region {region}: {counted(len(r_nodes), 'node')}, {counted(len(zones), 'zone')}" + _room(
        r_nodes, states
    )
    body.append(
        f"<text x='{MARGIN}' y='{y + 14}' font-size='15' font-weight='bold' {FONT}>{escape(header)}</text>"
    )
    y += 24
    if by_zone:
        cards = [(z, [n for g in zones[z].values() for n in g.nodes]) for z in _sorted(list(zones))]
        return _row_of_cards(body, y, cards, states, MARGIN + 10) + 8
    for zone in _sorted(list(zones)):
        groups = zones[zone]
        z_list = [n for g in groups.values() for n in g.nodes]
        label = (
            f"zone {zone}: {counted(len(z_list), 'node')}, {counted(len(groups), 'network group')}"
            + _room(z_list, states)
        )
        body.append(
            f"<text x='{MARGIN + 10}' y='{y + 12}' font-size='12' fill='#343a40' {FONT}>"
            f"{escape(label)}</text>"
        )
        y += 18
        cards = [(g, groups[g].nodes) for g in _sorted(list(groups))]
        y = _row_of_cards(body, y, cards, states, MARGIN + 20) + 6
    return y + 8


def _legend(
    inventory: Inventory,
    title: str,
    tree: Mapping[str, Mapping[str, Mapping[str, _Group]]],
    states: Mapping[str, NodeState] | None,
    n_groups: int,
    n_zones: int,
    by_zone: bool,
) -> list[str]:
    """The title line (nodes, GPUs, regions, groups) and the colour legend."""
    total_gpus = sum(n.gpus or 0 for n in inventory.nodes)
    head = [
        f"<text x='{MARGIN}' y='{MARGIN + 14}' font-size='18' font-weight='bold' {FONT}>"
        f"{escape(title)}: {counted(len(inventory.nodes), 'node')}, {counted(total_gpus, 'GPU')}, "
        f"{counted(len(tree), 'region')}, {counted(n_groups, 'network group')}</text>"
    ]
    lx = MARGIN
    kinds = KINDS if states is not None else (UNKNOWN,)
    for kind in kinds:
        label = LABELS[kind] if states is not None else "no node states given"
        head.append(f"<rect x='{lx}' y='{MARGIN + 26}' width='12' height='12' fill='{COLOURS[kind]}'/>")
        head.append(f"<text x='{lx + 16}' y='{MARGIN + 36}' font-size='12' {FONT}>{escape(label)}</text>")
        lx += 30 + 7 * len(label)
    if by_zone:
        head.append(
            f"<text x='{lx + 10}' y='{MARGIN + 36}' font-size='12' fill='#495057' {FONT}>"
            f"({n_groups} network groups in {n_zones} zones: one card per zone)</text>"
        )
    return head


def _row_of_cards(
    body: list[str],
    y: int,
    cards: Sequence[tuple[str, Sequence[Node]]],
    states: Mapping[str, NodeState] | None,
    x0: int,
) -> int:
    for start in range(0, len(cards), PER_ROW):
        row_h = 0
        for i, (name, nodes) in enumerate(cards[start : start + PER_ROW]):
            parts, h = _card(x0 + i * (CARD_W + CARD_GAP), y, name, nodes, states)
            body.extend(parts)
            row_h = max(row_h, h)
        y += row_h + CARD_GAP
    return y
