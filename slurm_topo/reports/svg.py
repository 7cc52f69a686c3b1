"""The fleet as a picture (SVG, plain template, pure): regions → zones → network groups → nodes.

Each region is a band, each zone a row of cards. A card shows its name, node and GPU counts, a bar of free /
allocated / drained nodes when node states are given, and one square per node for cards of up to
``SQUARES_MAX`` nodes (larger cards show counts only, so 10 000 nodes stay a few thousand shapes). Every card
has a ``<title>`` tooltip. Colours stay apart for the common colour-vision deficiencies (blue/orange, plus
grey).

What a card is — the drawing mode — is chosen in one place, :func:`layout`, which ``show --svg`` and the
``explain --svg`` overlay (:mod:`slurm_topo.reports.svg_overlay`) both draw from:

* ``network groups``: one card per network group, while all of them fit in ``ROWS_MAX`` rows of cards;
* ``zones``: past that, in a fleet of several zones, one card per zone (which zone has room must show at a
  glance, not after scrolling; 422 nodes in 30 zones: 1 240 × 1 316 px, not 3 476);
* ``rack groups``: past that, in a fleet of one zone, the zone's network groups in their natural order are
  binned into cards of ``bin_size`` consecutive groups (the smallest of 1, 2, 5, 10, 20, 50, … that keeps
  the zone to ``ROWS_MAX`` rows); a bin card is titled with its first and last group and always shows how
  many groups it holds and its nodes by state (free, partly free, allocated, drained, unknown). 10 000 nodes
  in 500 groups of one zone: 50 cards of 10 groups in 10 rows, 1 240 × 1 152 px.

``focus`` (the overlay's job and best nodes) matters only to ``rack groups``: when the focused nodes lie in
at most ``FOCUS_MAX`` network groups, each of those groups is drawn as its own card, in its place inside its
bin (the bin splits around it), so the job's racks show node by node and the picture grows by at most
``2 × FOCUS_MAX`` cards; more groups than that and only their bins are marked. Bin boundaries never move with
the focus: a bin holds the same groups in ``show`` and in every ``explain``. Each node is on exactly one card.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from ..core.model import Inventory, Node, natural_key
from ..plumbing.text import counted
from .capacity import ALLOCATED, DRAINED, FREE, UNKNOWN, NodeState

SQUARES_MAX = 128
ROWS_MAX = 12
"""More rows of group cards than this (about two screens) and the picture is drawn one card per zone (several
zones) or one card per bin of consecutive network groups (one zone): see :func:`layout`."""
GROUPS, ZONES, BINS = "network groups", "zones", "rack groups"
"""The drawing modes (what one card is); :func:`layout` picks one."""
BIN_STEPS = (1, 2, 5)
"""Bin sizes are these times a power of ten: bins of 10 or 20 groups read better than bins of 13."""
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
BINS_MAX = ROWS_MAX * PER_ROW
"""The most bin cards a zone is drawn with (``rack groups``)."""
FOCUS_MAX = 2 * PER_ROW
"""The most network groups ``focus`` draws on their own cards inside bins (``rack groups``)."""


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


@dataclass(frozen=True)
class Card:
    """One card of the picture: its title, its nodes and the network groups it draws (a zone card: the
    zone's; a bin card: several consecutive ones, ``binned``)."""

    title: str
    nodes: tuple[Node, ...]
    groups: tuple[str, ...]
    binned: bool = False


@dataclass(frozen=True)
class Section:
    """A row of cards under one header: a zone's (``zone`` set), or in ``zones`` mode a region's zone
    cards."""

    zone: str | None
    nodes: tuple[Node, ...]
    groups: int
    cards: tuple[Card, ...]


@dataclass(frozen=True)
class Band:
    """A region: its nodes, how many zones, and its sections in drawing order."""

    region: str
    nodes: tuple[Node, ...]
    zones: int
    sections: tuple[Section, ...]


@dataclass(frozen=True)
class Layout:
    """What :func:`render_svg` draws, card by card, and in which mode (``GROUPS``, ``ZONES`` or ``BINS``)."""

    mode: str
    groups: int
    zones: int
    bin_size: int
    bands: tuple[Band, ...]

    def cards(self) -> list[Card]:
        """Every card, in the order the picture draws them (each a direct ``<g>`` of the document)."""
        return [c for b in self.bands for s in b.sections for c in s.cards]


def bin_size(groups: int) -> int:
    """The fewest consecutive network groups a card (1, 2, 5, 10, 20, …) so that ``groups`` fit in
    ``BINS_MAX`` cards."""
    scale = 1
    while True:
        for step in BIN_STEPS:
            if -(-groups // (step * scale)) <= BINS_MAX:
                return step * scale
        scale *= 10


def layout(inventory: Inventory, focus: Collection[str] = ()) -> Layout:
    """The drawing mode and the cards, the one place both are decided (see the module docstring): one card
    per network group while they fit in ``ROWS_MAX`` rows; else one per zone in a fleet of several zones;
    else bins of consecutive network groups, with the groups of ``focus`` nodes on their own cards."""
    tree = _tree(inventory)
    n_groups = sum(len(gs) for zs in tree.values() for gs in zs.values())
    n_zones = sum(len(zs) for zs in tree.values())
    rows = sum(-(-len(gs) // PER_ROW) for zs in tree.values() for gs in zs.values())
    mode = GROUPS if rows <= ROWS_MAX else ZONES if n_zones > 1 else BINS
    size = bin_size(n_groups) if mode == BINS else 1
    wanted = frozenset(focus)
    bands: list[Band] = []
    for region in _sorted(list(tree)):
        zones = tree[region]
        sections = [_section(mode, zone, zones[zone], size, wanted) for zone in _sorted(list(zones))]
        r_nodes = tuple(n for sec in sections for n in sec.nodes)
        if mode == ZONES:  # the region's zone cards in one row, under the region's header only
            zone_cards = tuple(c for sec in sections for c in sec.cards)
            sections = [Section(None, r_nodes, sum(sec.groups for sec in sections), zone_cards)]
        bands.append(Band(region, r_nodes, len(zones), tuple(sections)))
    return Layout(mode, n_groups, n_zones, size, tuple(bands))


def _section(mode: str, zone: str, groups: Mapping[str, _Group], size: int, focus: frozenset[str]) -> Section:
    """One zone's cards in ``mode``: the zone itself, each network group, or bins of ``size`` groups."""
    names = _sorted(list(groups))
    z_nodes = tuple(n for g in names for n in groups[g].nodes)
    if mode == ZONES:
        cards: tuple[Card, ...] = (Card(zone, z_nodes, tuple(names)),)
    elif mode == GROUPS:
        cards = tuple(Card(g, tuple(groups[g].nodes), (g,)) for g in names)
    else:
        focused = {g for g in names if any(n.name in focus for n in groups[g].nodes)}
        cards = _bins(groups, names, size, focused if len(focused) <= FOCUS_MAX else set())
    return Section(zone, z_nodes, len(groups), cards)


def _bins(
    groups: Mapping[str, _Group], names: Sequence[str], size: int, focused: set[str]
) -> tuple[Card, ...]:
    """Bins of ``size`` consecutive groups, each focused group split out onto its own card in its place; a
    card left with one group is a plain group card."""
    out: list[Card] = []

    def flush(run: list[str]) -> None:
        if run:
            nodes = tuple(n for g in run for n in groups[g].nodes)
            title = run[0] if len(run) == 1 else _span(run[0], run[-1])
            out.append(Card(title, nodes, tuple(run), binned=len(run) > 1))
            run.clear()

    for start in range(0, len(names), size):
        run: list[str] = []
        for g in names[start : start + size]:
            if g in focused:
                flush(run)
                run.append(g)
                flush(run)
            else:
                run.append(g)
        flush(run)
    return tuple(out)


def _span(first: str, last: str) -> str:
    """``leaf0001–0010``: the last name without the part, up to its number, that it shares with the first."""
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    while common and first[common - 1].isdigit():
        common -= 1
    return (
        f"{first}–{last[common:]}" if 0 < common < len(last) and last[common].isdigit() else f"{first}–{last}"
    )


def _count_lines(card: Card, counts: Mapping[str, int]) -> list[str]:
    """A counts-only card's lines: how many groups (a bin), then the nodes by state, wrapped at
    ``LINE_CHARS``."""
    out = [counted(len(card.groups), "network group")] if card.binned else []
    first = len(out)
    for part in (f"{counts[k]} {SHORT[k]}" for k in KINDS if counts[k]):
        if len(out) > first and len(out[-1]) + 2 + len(part) <= LINE_CHARS:
            out[-1] += ", " + part
        else:
            out.append(part)
    return out


def _tip(card: Card, counts: Mapping[str, int], gpus: int, free_gpus: int | None) -> str:
    """A card's tooltip: its full name (a bin's first and last group), counts, and nodes by state."""
    named = f"{card.groups[0]} – {card.groups[-1]}" if card.binned else card.title
    tip = f"{named}: " + (f"{counted(len(card.groups), 'network group')}, " if card.binned else "")
    tip += f"{counted(len(card.nodes), 'node')}, {counted(gpus, 'GPU')}"
    if free_gpus is not None:
        tip += "; " + ", ".join(f"{counts[k]} {LABELS[k]}" for k in KINDS if counts[k])
        tip += f"; {free_gpus} GPUs free"
    return tip


def _card(x: int, y: int, card: Card, states: Mapping[str, NodeState] | None) -> tuple[list[str], int]:
    title, nodes = card.title, card.nodes
    counts = dict.fromkeys(KINDS, 0)
    for n in nodes:
        counts[_kind(n, states)] += 1
    gpus = sum(n.gpus or 0 for n in nodes)
    free_gpus = (
        sum(states[n.name].free_gpus for n in nodes if n.name in states) if states is not None else None
    )
    squares = len(nodes) <= SQUARES_MAX and not card.binned
    rows = -(-len(nodes) // SQ_PER_ROW) if squares else 0
    count_lines = [] if squares else _count_lines(card, counts)
    height = 52 + (rows * (SQ + SQ_GAP) + 4 if squares else 2 + 12 * max(1, len(count_lines)))
    shown = title if len(title) <= 30 else title[:29] + "…"
    tip = _tip(card, counts, gpus, free_gpus)
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
    inventory: Inventory,
    states: Mapping[str, NodeState] | None = None,
    title: str = "fleet",
    focus: Collection[str] = (),
) -> str:
    """The whole picture as an SVG document (``focus``: see :func:`layout`)."""
    return render_layout(layout(inventory, focus), inventory, states, title)


def render_layout(
    plan: Layout, inventory: Inventory, states: Mapping[str, NodeState] | None = None, title: str = "fleet"
) -> str:
    """The picture of ``plan`` (from :func:`layout` of the same ``inventory``) as an SVG document."""
    body: list[str] = []
    y = MARGIN + 56
    for band in plan.bands:
        y = _band(body, y, band, states)
    head = _legend(inventory, title, plan, states)
    height = y + MARGIN
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
        f"viewBox='0 0 {WIDTH} {height}' role='img' aria-label={quoteattr(title)}>\n"
        f"<rect width='{WIDTH}' height='{height}' fill='#f8f9fa'/>\n" + "\n".join(head + body) + "\n</svg>\n"
    )


def _band(body: list[str], y: int, band: Band, states: Mapping[str, NodeState] | None) -> int:
    """One region: its header, then its zone cards, or each zone's header and cards."""
    header = (
        f"region {band.region}: {counted(len(band.nodes), 'node')}, {counted(band.zones, 'zone')}"
        + _room(band.nodes, states)
    )
    body.append(
        f"<text x='{MARGIN}' y='{y + 14}' font-size='15' font-weight='bold' {FONT}>{escape(header)}</text>"
    )
    y += 24
    for section in band.sections:
        if section.zone is None:
            y = _row_of_cards(body, y, section.cards, states, MARGIN + 10) + 8
            continue
        label = (
            f"zone {section.zone}: {counted(len(section.nodes), 'node')}, "
            f"{counted(section.groups, 'network group')}" + _room(section.nodes, states)
        )
        body.append(
            f"<text x='{MARGIN + 10}' y='{y + 12}' font-size='12' fill='#343a40' {FONT}>"
            f"{escape(label)}</text>"
        )
        y += 18
        y = _row_of_cards(body, y, section.cards, states, MARGIN + 20) + 6
    return y + (8 if band.sections and band.sections[-1].zone is not None else 0)


def _legend(
    inventory: Inventory, title: str, plan: Layout, states: Mapping[str, NodeState] | None
) -> list[str]:
    """The title line (nodes, GPUs, regions, groups), the colour legend, and what a card is when it is not
    one network group."""
    total_gpus = sum(n.gpus or 0 for n in inventory.nodes)
    head = [
        f"<text x='{MARGIN}' y='{MARGIN + 14}' font-size='18' font-weight='bold' {FONT}>"
        f"{escape(title)}: {counted(len(inventory.nodes), 'node')}, {counted(total_gpus, 'GPU')}, "
        f"{counted(len(plan.bands), 'region')}, {counted(plan.groups, 'network group')}</text>"
    ]
    lx = MARGIN
    kinds = KINDS if states is not None else (UNKNOWN,)
    for kind in kinds:
        label = LABELS[kind] if states is not None else "no node states given"
        head.append(f"<rect x='{lx}' y='{MARGIN + 26}' width='12' height='12' fill='{COLOURS[kind]}'/>")
        head.append(f"<text x='{lx + 16}' y='{MARGIN + 36}' font-size='12' {FONT}>{escape(label)}</text>")
        lx += 30 + 7 * len(label)
    note = ""
    if plan.mode == ZONES:
        note = f"({plan.groups} network groups in {plan.zones} zones: one card per zone)"
    elif plan.mode == BINS:
        note = f"({plan.groups} network groups in one zone: one card per {plan.bin_size} consecutive groups)"
    if note:
        head.append(
            f"<text x='{lx + 10}' y='{MARGIN + 36}' font-size='12' fill='#495057' {FONT}>"
            f"{escape(note)}</text>"
        )
    return head


def _row_of_cards(
    body: list[str], y: int, cards: Sequence[Card], states: Mapping[str, NodeState] | None, x0: int
) -> int:
    for start in range(0, len(cards), PER_ROW):
        row_h = 0
        for i, card in enumerate(cards[start : start + PER_ROW]):
            parts, h = _card(x0 + i * (CARD_W + CARD_GAP), y, card, states)
            body.extend(parts)
            row_h = max(row_h, h)
        y += row_h + CARD_GAP
    return y
