"""One job over the fleet picture (``explain JOBID --svg FILE``): where it landed and where the best placement
was, drawn over :func:`slurm_topo.reports.svg.render_svg` (pure).

The fleet is drawn from the same :func:`slurm_topo.reports.svg.layout` as ``show --svg`` (one function picks
the drawing mode for both: a card per network group, per zone, or per bin of consecutive network groups), with
the job's and the best placement's nodes as its ``focus``; then, on that document:

* every node square of the job gets a black ring, every square of the best placement a wider dashed purple
  one (a node in both gets both);
* every card (network group, zone, or bin of groups) that holds such nodes gets the same outline and its
  tooltip the counts (``job: 2 nodes; best placement: 2 nodes``), so a card drawn as counts only (more than
  ``SQUARES_MAX`` nodes, or a bin) is marked too;
* a legend line on top says what is marked and names the nodes.

Centred on the job: in a fleet of one zone too large for a card per network group (``rack groups``), the
network groups holding the job's or the best placement's nodes (up to ``svg.FOCUS_MAX`` of them) are drawn as
their own cards, node by node, in their place among the bins of the other groups; the rest stay binned as in
``show``, so the picture stays the size of ``show``'s plus a few cards. A job spread over more groups than
that is marked on the bins that hold it.

Marks are attributes (``data-job``, ``data-best``) as well as strokes, so a test or a script finds them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Collection, Mapping

from ..core.hostlist import compress
from ..core.model import Inventory
from ..plumbing.text import counted
from . import svg
from .capacity import NodeState

NS = "http://www.w3.org/2000/svg"
JOB_COLOUR = "#000000"
BEST_COLOUR = "#ae3ec9"
LEGEND_H = 44


def _q(tag: str) -> str:
    return f"{{{NS}}}{tag}"


def _outline(rect: ET.Element, colour: str, width: str, dashed: bool) -> None:
    rect.set("stroke", colour)
    rect.set("stroke-width", width)
    if dashed:
        rect.set("stroke-dasharray", "4 2")


def _ring(parent: ET.Element, rect: ET.Element, inset: float, colour: str, width: str, dashed: bool) -> None:
    """An unfilled ring around ``rect``: inside it for ``inset`` > 0, outside for < 0."""
    x, y = float(rect.get("x", "0")), float(rect.get("y", "0"))
    w, h = float(rect.get("width", "0")), float(rect.get("height", "0"))
    ring = ET.SubElement(parent, _q("rect"))
    for key, value in (
        ("x", x + inset),
        ("y", y + inset),
        ("width", max(w - 2 * inset, 1)),
        ("height", max(h - 2 * inset, 1)),
    ):
        ring.set(key, f"{value:g}")
    ring.set("fill", "none")
    ring.set("pointer-events", "none")
    _outline(ring, colour, width, dashed)


def render_overlay(
    inventory: Inventory,
    states: Mapping[str, NodeState] | None,
    job_nodes: Collection[str],
    best_nodes: Collection[str] | None,
    *,
    job_label: str = "job",
    best_label: str = "best placement",
    title: str = "fleet",
) -> str:
    """The fleet picture with ``job_nodes`` and ``best_nodes`` marked (see the module docstring)."""
    job, best = set(job_nodes), set(best_nodes or ())
    ET.register_namespace("", NS)
    plan = svg.layout(inventory, job | best)
    root = ET.fromstring(svg.render_layout(plan, inventory, states, title=title).split("\n", 1)[1])
    for card, drawn in zip([g for g in root if g.tag == _q("g")], plan.cards(), strict=True):
        names = {n.name for n in drawn.nodes}
        in_job, in_best = len(names & job), len(names & best)
        if not in_job and not in_best:
            continue
        tip = card.find(_q("title"))
        if tip is not None:
            marks = [f"{job_label}: {counted(in_job, 'node')}"] if in_job else []
            marks += [f"{best_label}: {counted(in_best, 'node')}"] if in_best else []
            tip.text = f"{tip.text or ''}; {'; '.join(marks)}"
        frame = card.find(_q("rect"))
        if frame is not None:
            if in_job:
                _outline(frame, JOB_COLOUR, "3", False)
                frame.set("data-job", str(in_job))
            if in_best and not in_job:
                _outline(frame, BEST_COLOUR, "3", True)
            if in_best:
                frame.set("data-best", str(in_best))
                if in_job:
                    _ring(card, frame, 4, BEST_COLOUR, "2", True)
        for square in card.findall(_q("rect")):
            label = square.find(_q("title"))
            name = label.text if label is not None else None
            if name is None or (name not in job and name not in best):
                continue
            if name in job:
                square.set("data-job", name)
                _ring(card, square, -1.5, JOB_COLOUR, "2", False)
            if name in best:
                square.set("data-best", name)
                _ring(card, square, -4, BEST_COLOUR, "1.5", True)
    _legend(root, job, best, job_label, best_label)
    return "<?xml version='1.0' encoding='UTF-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def _legend(root: ET.Element, job: set[str], best: set[str], job_label: str, best_label: str) -> None:
    """Move the picture down by ``LEGEND_H`` and say on top what the outlines mean."""
    width, height = root.get("width", str(svg.WIDTH)), int(float(root.get("height", "0"))) + LEGEND_H
    root.set("height", str(height))
    root.set("viewBox", f"0 0 {width} {height}")
    body = list(root)
    background = body[0] if body and body[0].tag == _q("rect") else None
    if background is not None:
        background.set("height", str(height))
    moved = ET.Element(_q("g"), {"transform": f"translate(0,{LEGEND_H})"})
    for child in body:
        if child is not background:
            root.remove(child)
            moved.append(child)
    y = svg.MARGIN
    items = [(JOB_COLOUR, False, f"{job_label}: {counted(len(job), 'node')} {compress(sorted(job))}")]
    if best:
        same = " (the same nodes)" if best == job else ""
        items.append(
            (BEST_COLOUR, True, f"{best_label}: {counted(len(best), 'node')} {compress(sorted(best))}{same}")
        )
    else:
        items.append((BEST_COLOUR, True, f"{best_label}: none known"))
    legend = ET.SubElement(root, _q("g"), {"data-legend": "1"})
    for i, (colour, dashed, text) in enumerate(items):
        box = ET.SubElement(
            legend, _q("rect"), {"x": str(svg.MARGIN), "y": str(y + i * 20), "width": "12", "height": "12"}
        )
        box.set("fill", "none")
        _outline(box, colour, "2", dashed)
        label = ET.SubElement(
            legend,
            _q("text"),
            {
                "x": str(svg.MARGIN + 18),
                "y": str(y + i * 20 + 10),
                "font-size": "12",
                "font-family": "DejaVu Sans, Arial, sans-serif",
            },
        )
        label.text = text
    root.append(moved)
