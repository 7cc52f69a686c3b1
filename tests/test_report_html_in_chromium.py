"""``slurm-topo report --html`` in a real browser: Debian's Chromium, headless, one browser for the module
(``chromium_cdp``: the DevTools protocol over a pipe). Each page renders with nothing on its console (no
error, no uncaught exception, no Content-Security-Policy refusal), requests nothing but itself, and every
number it shows (the ``data-key`` spans as laid out, the weekly bars' titles) equals the ``--json`` of the
same run: on the real ``sacct`` of every release (tests/fixtures/real/sacct/) and on seeded accounting built
from a real job record. Copies of a page with an error, a blocked load or a wrong number injected prove
that the checks fail. CI installs chromium (.ci/run); without it this skips here and fails in CI."""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium_cdp import Chromium, Page, chromium_path
from hypothesis import given, settings
from hypothesis import strategies as st
from preconditions import unavailable
from test_cli import invoke

from slurm_topo.core import hostlist
from slurm_topo.inventory import load_inventories

REPO = Path(__file__).resolve().parents[1]
SACCT = REPO / "tests" / "fixtures" / "real" / "sacct"
FLEET = REPO / "docker-slurm" / "fleet-filter.yaml"
PLAN = "tp=2,pp=1,bytes=1G"
WORST = 20  # report_html.render_html's worst jobs

READ_PAGE = """JSON.stringify({
  numbers: [...document.querySelectorAll('[data-key]')].map(
    e => [e.dataset.key, e.dataset.value, e.innerText, e.getBoundingClientRect().width > 0]),
  bars: [...document.querySelectorAll('svg rect.bar')].map(r => r.querySelector('title').textContent),
  title: document.title,
  headings: [...document.querySelectorAll('h2')].map(h => h.innerText),
})"""
"""What the page shows once laid out: each number's key, raw value, the text a person sees and whether it has
a box; the weekly bars' titles."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    if chromium_path() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    with Chromium(tmp_path_factory.mktemp("chromium")) as b:
        yield b


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the pages (module scope: the seeded test writes one a example)."""
    return tmp_path_factory.mktemp("pages")


# ---- what the page must show, from --json


def _worst(doc: dict[str, Any]) -> list[dict[str, Any]]:
    lost = [r for r in doc["jobs"] if r["gpu_hours_lost"]]
    return sorted(lost, key=lambda r: -r["gpu_hours_lost"])[:WORST]


def expected_numbers(doc: dict[str, Any]) -> dict[str, int | float | None]:
    """Every number the page shows, by its data-key, from the ``--json`` object alone."""
    want: dict[str, int | float | None] = {f"totals.{k}": v for k, v in doc["totals"].items()}
    for r in doc["jobs"]:
        want[f"levels.{r['level']}"] = int(want.get(f"levels.{r['level']}") or 0) + 1
    for s in doc["summaries"]:
        for field in ("jobs", "predicted", "gpu_hours", "gpu_hours_lost"):
            want[f"summary.{s['key']}.{s['value']}.{field}"] = s[field]
    for r in _worst(doc):
        want[f"job.{r['job_id']}.slowdown"] = r["slowdown"]
        want[f"job.{r['job_id']}.gpu_hours_lost"] = r["gpu_hours_lost"]
    return want


def _shown(text: str, value: int | float | None) -> bool:
    """The text a person sees is ``value``: an int exactly, a float to the decimals shown."""
    if value is None:
        return text == "–"
    if isinstance(value, int):
        return text == str(value)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    try:
        return abs(float(text) - value) <= 0.5 * 10.0**-decimals + 1e-12
    except ValueError:
        return False


def number_mismatches(doc: dict[str, Any], seen: dict[str, Any]) -> list[str]:
    """How the rendered page differs from ``--json``: keys missing or extra, a raw value or a shown text
    that is not the JSON number, a number without a box, a weekly bar that is not a week's loss."""
    want = expected_numbers(doc)
    got = {key: (raw, text, boxed) for key, raw, text, boxed in seen["numbers"]}
    bad = [f"{key} shown twice" for key in got if [n[0] for n in seen["numbers"]].count(key) > 1]
    bad += [f"{key}: missing from the page" for key in sorted(set(want) - set(got))]
    bad += [f"{key}: on the page, not in --json" for key in sorted(set(got) - set(want))]
    for key in sorted(set(want) & set(got)):
        raw, text, boxed = got[key]
        value = want[key]
        if (raw == "" and value is not None) or (raw != "" and (value is None or float(raw) != value)):
            bad.append(f"{key}: data-value {raw!r}, --json {value!r}")
        if not _shown(text, value):
            bad.append(f"{key}: shows {text!r}, --json {value!r}")
        if not boxed:
            bad.append(f"{key}: not laid out")
    weeks = [(s["value"], s["gpu_hours_lost"]) for s in doc["summaries"] if s["key"] == "week"]
    bars = [title.removesuffix(" GPU-h lost").split(": ", 1) for title in seen["bars"]]
    if len(bars) != len(weeks) or any(
        len(bar) != 2 or bar[0] != week or not _shown(bar[1], lost)
        for bar, (week, lost) in zip(bars, weeks, strict=False)
    ):
        bad.append(f"weekly bars {seen['bars']}, --json {weeks}")
    return bad


def render(browser: Chromium, page_path: Path) -> tuple[Page, dict[str, Any]]:
    page = browser.load(page_path)
    return page, json.loads(browser.evaluate(page, READ_PAGE))


def assert_clean_and_equal(browser: Chromium, page_path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    page, seen = render(browser, page_path)
    assert page.errors == [], page.errors
    assert page.requests == [page.url], page.requests  # self-contained: nothing else fetched
    assert seen["title"] == "slurm-topo report"
    assert number_mismatches(doc, seen) == []
    return seen


def report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", "report", "-i", str(FLEET), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ),
    )


# ---- the real accounting of every release


@pytest.mark.parametrize("release", ["slurm-22.05", "slurm-24.11", "slurm-26.05"])
def test_the_page_of_real_accounting_renders_clean_with_the_numbers_of_json(
    browser: Chromium, pages: Path, release: str
) -> None:
    page_path = pages / f"{release}.html"
    p = report_cli(
        "--sacct-json",
        str(SACCT / release / "sacct-json.txt"),
        "--plan",
        PLAN,
        "--json",
        "--html",
        str(page_path),
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["totals"]["jobs"] == 4 and doc["totals"]["predicted"] == 4  # the capture's multi-node jobs
    seen = assert_clean_and_equal(browser, page_path, doc)
    assert {"Levels spanned", "By user", "By week", "Worst jobs"} <= set(seen["headings"])


# ---- seeded accounting: many jobs, weeks, users, partitions, records and comments

TEMPLATE = json.loads((SACCT / "slurm-26.05" / "sacct-json.txt").read_text())["jobs"][1]
"""A real 26.05 record (the region job with a plan comment); the seeded jobs vary its fields."""
HARDWARE: dict[str, list[str]] = {"any": []}
GPUS: dict[str, int] = {}
for _node in load_inventories([FLEET]).nodes:
    GPUS[_node.name] = _node.gpus or 0
    HARDWARE.setdefault(f"{_node.gpu_type}x{_node.gpus}", []).append(_node.name)
    HARDWARE["any"].append(_node.name)
RECORDS = [
    "",
    "slurm-topo: zone:wait [us-east-1a(4n)]",
    "slurm-topo: region:wait [us-east(6n),us-west(6n)]",
    "slurm-topo: not applied: data file missing",
    "slurm-topo: prefer network_group+zone [us-east-1a/rack-a1(3n)]",
    "slurm-topo: any",
]
COMMENTS = ["", f"plan={PLAN}", "plan=tp=4,bytes=4G locality=zone", "locality=region:fail", "plan=tp=x"]
SEEDED = itertools.count()
BASE = int(time.mktime(time.strptime("2026-09-07", "%Y-%m-%d")))


@st.composite
def accounting(draw: st.DrawFn) -> dict[str, Any]:
    jobs = []
    for i in range(draw(st.integers(0, 40))):
        j = copy.deepcopy(TEMPLATE)
        kind = draw(st.sampled_from(sorted(HARDWARE)))  # mostly one kind of node: a predicted slowdown
        nodes = draw(st.lists(st.sampled_from(HARDWARE[kind]), min_size=1, max_size=6, unique=True))
        start = BASE + draw(st.integers(0, 12 * 7 * 86400))
        elapsed = draw(st.integers(1, 3 * 86400))
        per_node = min(GPUS[n] for n in nodes)
        gpus = draw(st.sampled_from([0, per_node // 2, per_node])) * len(nodes)
        j["job_id"] = 100 + i
        j["user"] = draw(st.sampled_from(["alice", "bob", "carol", "root"]))
        j["partition"] = draw(st.sampled_from(["main", "gpu", "debug"]))
        j["nodes"] = hostlist.compress(nodes)
        j["time"].update(start=start, end=start + elapsed, elapsed=elapsed, submission=start - 60)
        j["tres"]["allocated"] = [t for t in j["tres"]["allocated"] if t["type"] != "gres"]
        if gpus:
            j["tres"]["allocated"].append({"type": "gres", "name": "gpu", "id": 1001, "count": gpus})
        j["comment"] = {
            "administrator": draw(st.sampled_from(RECORDS)),
            "job": draw(st.sampled_from(COMMENTS)),
            "system": "",
        }
        jobs.append(j)
    return {"jobs": jobs, "meta": {}, "errors": [], "warnings": []}


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    doc=accounting(),
    plan=st.sampled_from([None, PLAN, "tp=8,pp=2,bytes=10G"]),
    split_week=st.none() | st.integers(0, 12),
    partition=st.none() | st.sampled_from(["main", "gpu"]),
)
def test_seeded_accounting_renders_clean_with_the_numbers_of_json(
    browser: Chromium,
    pages: Path,
    doc: dict[str, Any],
    plan: str | None,
    split_week: int | None,
    partition: str | None,
) -> None:
    n = next(SEEDED)
    listing, page_path = pages / f"sacct-{n}.json", pages / f"seeded-{n}.html"
    listing.write_text(json.dumps(doc))
    args = ["report", "-i", str(FLEET), "--sacct-json", str(listing), "--json", "--html", str(page_path)]
    args += ["--plan", plan] if plan else []
    args += ["--partition", partition] if partition else []
    if split_week is not None:
        args += ["--split-at", time.strftime("%Y-%m-%d", time.localtime(BASE + split_week * 7 * 86400))]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert_clean_and_equal(browser, page_path, json.loads(result.stdout))


# ---- the checks fail where they must


def _injected(page: Path, out: Path, old: str, new: str) -> Path:
    text = page.read_text()
    assert text.count(old) >= 1, old
    out.write_text(text.replace(old, new, 1))
    return out


CSP = "content=\"default-src 'none'; style-src 'unsafe-inline'\""
LOOSE_CSP = "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\""


def test_an_injected_error_or_load_or_wrong_number_fails_the_checks(browser: Chromium, pages: Path) -> None:
    page_path = pages / "good.html"
    p = report_cli(
        "--sacct-json",
        str(SACCT / "slurm-24.11" / "sacct-json.txt"),
        "--plan",
        PLAN,
        "--json",
        "--html",
        str(page_path),
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert_clean_and_equal(browser, page_path, doc)
    body = "</body>"
    broken = {  # copy name -> (what replaced, by what, what the console must say)
        "inline-script": (body, "<script>1</script>" + body, "Content Security Policy"),
        "throws": (body, "<script>throw new Error('injected')</script>" + body, "injected"),
        "console-error": (body, "<script>console.error('injected')</script>" + body, "injected"),
        "image": (body, '<img src="logo.png">' + body, "logo.png"),
    }
    for name, (old, new, said) in broken.items():
        text = page_path.read_text()
        if name in ("throws", "console-error"):  # a script the page's policy lets run
            text = text.replace(CSP, LOOSE_CSP, 1)
        copy_path = pages / f"bad-{name}.html"
        copy_path.write_text(text)
        _injected(copy_path, copy_path, old, new)
        page, seen = render(browser, copy_path)
        assert any(said in e for e in page.errors), (name, page.errors)
        assert number_mismatches(doc, seen) == []  # the numbers are still right: the console tells
    page, _ = render(browser, pages / "bad-image.html")
    assert page.requests != [page.url], page.requests  # and the load shows as a request

    key = f'data-key="totals.gpu_hours_lost" data-value="{doc["totals"]["gpu_hours_lost"]!r}">'
    shown = f"{doc['totals']['gpu_hours_lost']:.2f}</span>"
    wrong_text = _injected(page_path, pages / "bad-text.html", key + shown, key + "9.99</span>")
    wrong_raw = _injected(
        page_path, pages / "bad-raw.html", key, key.replace('data-value="', 'data-value="1')
    )
    hidden = _injected(
        page_path, pages / "bad-hidden.html", "<style>", "<style>[data-key^=levels]{display:none}"
    )
    no_bar = _injected(page_path, pages / "bad-bar.html", '<rect class="bar"', '<rect class="nobar"')
    for copy_path, why in (
        (wrong_text, "shows '9.99'"),
        (wrong_raw, "data-value"),
        (hidden, "not laid out"),
        (no_bar, "weekly bars"),
    ):
        page, seen = render(browser, copy_path)
        assert page.errors == [], page.errors
        found = number_mismatches(doc, seen)
        assert any(why in m for m in found), (copy_path.name, found)
