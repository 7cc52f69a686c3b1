"""``slurm-topo report --html FILE``: one self-contained page (no network, no script from elsewhere) of a
:class:`~slurm_topo.reports.report.Report`: the totals, the weekly GPU-hours lost (a bar chart drawn as inline
SVG), the spread of levels spanned, the summaries and the worst jobs with the ``slurm-topo explain`` line for
each. Every number on the page carries ``data-key``: tests read them back and compare with ``--json``. Every
text is escaped (a user or partition name is accounting's, but the page trusts nothing)."""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path

from ..plumbing.output import write_files
from .report import SPAN_LEVELS, SUMMARY_KEYS, Report

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}
.bar{fill:#c0392b}.axis{stroke:#888}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(key: str, value: float | int | None, fmt: str = "{:.2f}") -> str:
    shown = "–" if value is None else (str(value) if isinstance(value, int) else fmt.format(value))
    raw = "" if value is None else repr(value)
    return f'<span data-key="{_e(key)}" data-value="{_e(raw)}">{_e(shown)}</span>'


def _weekly_svg(weeks: list[tuple[str, float]]) -> str:
    if not weeks:
        return "<p>No finished multi-node jobs.</p>"
    top = max(v for _, v in weeks) or 1.0
    w, h, bw = 40 * len(weeks) + 40, 180, 28
    bars = []
    for i, (week, lost) in enumerate(weeks):
        bh = 140 * lost / top
        x = 30 + 40 * i
        bars.append(
            f'<rect class="bar" x="{x}" y="{150 - bh:.1f}" width="{bw}" height="{bh:.1f}">'
            f"<title>{_e(week)}: {lost:.2f} GPU-h lost</title></rect>"
            f'<text x="{x}" y="170" font-size="9">{_e(week[-3:])}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="GPU-hours lost per week"><line class="axis" x1="25" y1="150" x2="{w}" y2="150"/>'
        + "".join(bars)
        + "</svg>"
    )


def _table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    out = ["<table><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def render_html(report: Report, worst: int = 20) -> str:
    t = report.totals
    weeks = [(s.value, s.gpu_hours_lost) for s in report.summaries if s.key == "week"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>slurm-topo report</title><style>{STYLE}</style></head><body>",
        "<h1>What placement cost</h1><p>",
        f"Multi-node jobs {_num('totals.jobs', t['jobs'])}, ",
        f"predicted {_num('totals.predicted', t['predicted'])}; ",
        f"GPU-hours {_num('totals.gpu_hours', t['gpu_hours'])}, ",
        f"lost to placement {_num('totals.gpu_hours_lost', t['gpu_hours_lost'])}.</p>",
        "<h2>GPU-hours lost per week</h2>",
        _weekly_svg(weeks),
    ]
    spread: dict[str, int] = {}
    for r in report.rows:
        spread[r.level] = spread.get(r.level, 0) + 1
    parts.append("<h2>Levels spanned</h2>")
    parts.append(
        _table(
            ("level", "jobs"),
            ((_e(lv), _num(f"levels.{lv}", spread[lv])) for lv in SPAN_LEVELS if lv in spread),
        )
    )
    for key in SUMMARY_KEYS:
        rows = [s for s in report.summaries if s.key == key]
        if not rows:
            continue
        parts.append(f"<h2>By {_e(key)}</h2>")
        parts.append(
            _table(
                ("", "jobs", "predicted", "GPU-hours", "lost"),
                (
                    (
                        _e(s.value),
                        _num(f"summary.{key}.{s.value}.jobs", s.jobs),
                        _num(f"summary.{key}.{s.value}.predicted", s.predicted),
                        _num(f"summary.{key}.{s.value}.gpu_hours", s.gpu_hours),
                        _num(f"summary.{key}.{s.value}.gpu_hours_lost", s.gpu_hours_lost),
                    )
                    for s in rows
                ),
            )
        )
    bad = sorted((r for r in report.rows if r.gpu_hours_lost), key=lambda r: -(r.gpu_hours_lost or 0.0))[
        :worst
    ]
    parts.append("<h2>Worst jobs</h2>")
    parts.append(
        _table(
            ("job", "user", "nodes", "level", "slowdown", "GPU-h lost", "explain"),
            (
                (
                    _e(r.job_id),
                    _e(r.user),
                    _e(r.nodes),
                    _e(r.level),
                    _num(f"job.{r.job_id}.slowdown", r.slowdown, "{:.3f}"),
                    _num(f"job.{r.job_id}.gpu_hours_lost", r.gpu_hours_lost),
                    f"<code>slurm-topo explain {_e(r.job_id)}</code>",
                )
                for r in bad
            ),
        )
    )
    parts.append("</body></html>\n")
    return "".join(parts)


def write_html(path: str | os.PathLike[str], report: Report) -> None:
    """The page, written whole or not at all (:func:`slurm_topo.plumbing.output.write_files`)."""
    p = Path(path)
    write_files(p.parent if str(p.parent) else ".", {p.name: render_html(report)})
