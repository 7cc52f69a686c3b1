"""``slurm-topo report``: the accounting reader on real ``sacct`` of every release
(tests/fixtures/real/sacct/), the report built from it, the cached predictor against
:func:`slurm_topo.cost.predict`, hostile job fields, and the HTML page's numbers against ``--json``."""

from __future__ import annotations

import json
import random
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fakes import ScriptedRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.access import argv
from slurm_topo.access.accounting import (
    FinishedJob,
    finished_from_json,
    finished_from_text,
    job_from_sacct_line,
    load_finished,
)
from slurm_topo.cli import main
from slurm_topo.core import hostlist
from slurm_topo.core.errors import CommandError
from slurm_topo.cost import Fabric, parse_plan, predict, span_level
from slurm_topo.inventory import load_inventories
from slurm_topo.reports.report import Predictor, build_report, locality_mode
from slurm_topo.reports.report_html import render_html

REPO = Path(__file__).resolve().parents[1]
SACCT = REPO / "tests" / "fixtures" / "real" / "sacct"
RELEASES = ("slurm-22.05", "slurm-24.11", "slurm-26.05")
FLEET = REPO / "docker-slurm" / "fleet-filter.yaml"
PLAN = "tp=2,pp=1,bytes=1G"
SINCE, UNTIL = "2026-01-01", "now"


def capture(release: str) -> dict[str, object]:
    return json.loads((SACCT / release / "capture.json").read_text())


def scripted(release: str, json_answer: object = None) -> ScriptedRunner:
    folder = SACCT / release
    answers: dict[object, object] = {
        "sacct --json": json_answer if json_answer is not None else (folder / "sacct-json.txt").read_text(),
        tuple(argv.sacct_text(SINCE, UNTIL)): (folder / "sacct-text.txt").read_text(),
    }
    for path in folder.glob("sacct-*-*.txt"):
        _, field, jid = path.stem.split("-")
        answers[tuple(argv.sacct_field(jid, field))] = path.read_text()
    return ScriptedRunner(answers)


@pytest.mark.parametrize("release", RELEASES)
def test_json_and_text_read_the_same_finished_jobs(release: str) -> None:
    folder = SACCT / release
    by_json = finished_from_json((folder / "sacct-json.txt").read_text())
    by_text = finished_from_text((folder / "sacct-text.txt").read_text())
    assert by_json.refused == by_text.refused == []
    ids = sorted(capture(release)["jobs"].values(), key=int)  # type: ignore[union-attr]
    assert [j.job_id for j in by_json.jobs] == [j.job_id for j in by_text.jobs] == ids
    for a, b in zip(by_json.jobs, by_text.jobs, strict=True):
        assert (a.nodes, a.gpus, a.start, a.end, a.elapsed, a.partition, a.state) == (
            b.nodes,
            b.gpus,
            b.start,
            b.end,
            b.elapsed,
            b.partition,
            b.state,
        )
        assert a.user == b.user or a.user == "(unknown)"  # 22.05's JSON: user null without an association
        # the text reader's one-field reads give what the JSON string holds
        for field, value in (("AdminComment", a.admin_comment), ("Comment", a.comment)):
            raw = (folder / f"sacct-{field}-{a.job_id}.txt").read_text()
            assert raw[:-1] == value or (value == "" and raw.strip() == "")


@pytest.mark.parametrize("release", RELEASES)
def test_the_loader_falls_back_to_the_strict_text_form(release: str) -> None:
    no_json = CommandError(["sacct", "--json"], 1, "sacct: unrecognized option '--json'")
    runner = scripted(release, no_json)
    got = load_finished(runner.run, SINCE, UNTIL)
    assert got.backend == "text" and got.refused == []
    want = finished_from_json((SACCT / release / "sacct-json.txt").read_text())
    multi = {j.job_id: (j.admin_comment, j.comment) for j in want.jobs if len(j.nodes) > 1}
    assert {j.job_id: (j.admin_comment, j.comment) for j in got.jobs if len(j.nodes) > 1} == multi
    asked = [c for c in runner.calls if any(a.startswith("--jobs=") for a in c)]
    assert len(asked) == 2 * len(multi)  # one field of one job a call, multi-node jobs only
    assert load_finished(scripted(release).run, SINCE, UNTIL).backend == "json"


@pytest.mark.parametrize("release", RELEASES)
def test_a_text_line_that_does_not_fit_is_refused_never_guessed(release: str) -> None:
    lines = (SACCT / release / "sacct-text.txt").read_text().splitlines()
    rnd = random.Random(48)
    for line in lines:
        fields = line.split("|")
        assert job_from_sacct_line(line) is not None
        broken = [
            line + "|extra",
            "|".join(fields[:-1]),
            "|".join(["x1", *fields[1:]]),
            "|".join([*fields[:4], "12/06-10:55:07", *fields[5:]]),
            "|".join([*fields[:8], "7", *fields[9:]]),
            "|".join([*fields[:9], "n[05-", *fields[10:]]),
            "|".join([fields[0], "evil user", *fields[2:]]),
        ]
        for bad in rnd.sample(broken, len(broken)):
            with pytest.raises(ValueError):
                job_from_sacct_line(bad)
    text = "\n".join([*lines, "garbage|1", ""])
    got = finished_from_text(text)
    assert len(got.jobs) == len(lines) and got.refused[0][0] == f"line {len(lines) + 1}"


@pytest.mark.parametrize("release", RELEASES)
def test_the_report_of_real_accounting_and_the_hostile_job(release: str) -> None:
    facts = capture(release)
    jobs = facts["jobs"]
    assert isinstance(jobs, dict)
    listing = finished_from_json((SACCT / release / "sacct-json.txt").read_text())
    inv = load_inventories([FLEET])
    fabric = Fabric.of(inv)
    report = build_report(listing.jobs, inv)
    rows = {r.job_id: r for r in report.rows}
    assert set(rows) == {jobs[t] for t in ("zone", "region_plan", "plain", "hostile")}
    assert report.single_node_jobs == 1
    for job in listing.jobs:
        if job.job_id in rows:  # the levels from the nodes sacct names, through the cost model's one rule
            assert rows[job.job_id].nodes == hostlist.compress(job.nodes)
            assert rows[job.job_id].level == span_level(fabric, job.nodes)
    assert rows[jobs["zone"]].locality == "zone:wait"
    assert (
        rows[jobs["region_plan"]].plan == PLAN
        and rows[jobs["region_plan"]].plan_source == "from the job's comment"
    )
    hostile = rows[jobs["hostile"]]
    # its comment forges sacct lines and a filter record: the record is AdminComment's, the user accounting's,
    # and its plan=… token (its own request) does not parse: a note on its own row, nothing else
    assert hostile.locality != "zone:wait" and hostile.user in ("nobody", "(unknown)")
    assert hostile.note.startswith("not predicted") and hostile.gpu_hours_lost is None
    assert sum(s.jobs for s in report.summaries if s.key == "user") == len(rows)
    assert not any(s.value in ("99", "98") for s in report.summaries)


def test_gpu_hours_lost_is_elapsed_times_gpus_times_one_minus_one_over_slowdown() -> None:
    listing = finished_from_json((SACCT / "slurm-24.11" / "sacct-json.txt").read_text())
    inv = load_inventories([FLEET])
    rnd = random.Random(7)
    stretched = [
        FinishedJob(
            str(100 + i),
            "u",
            "main",
            "COMPLETED",
            0,
            1,
            10**6,
            rnd.randrange(60, 10**6),
            j.nodes,
            4 * len(j.nodes),
        )
        for i, j in enumerate(listing.jobs)
    ]
    report = build_report(stretched, inv, plan=PLAN)
    assert report.rows and all(r.slowdown is not None for r in report.rows)
    for r in report.rows:
        assert r.gpu_hours == pytest.approx(r.elapsed_s * r.gpus / 3600)
        assert r.gpu_hours_lost == pytest.approx(r.gpu_hours * (1 - 1 / r.slowdown))  # type: ignore[operator]
    assert report.totals["gpu_hours_lost"] == pytest.approx(sum(r.gpu_hours_lost or 0 for r in report.rows))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_the_cached_predictor_equals_predict_for_every_job(data: st.DataObject) -> None:
    inv = load_inventories([FLEET])
    fabric = Fabric.of(inv)
    names = [n.name for n in inv.nodes]
    predictor = Predictor(fabric)
    for _ in range(6):
        nodes = data.draw(st.lists(st.sampled_from(names), min_size=2, max_size=5, unique=True))
        spec = parse_plan(
            data.draw(st.sampled_from(["tp=4,bytes=1G", "tp=2,pp=2,bytes=4G", "pp=2,bytes=100M"]))
        )
        got, want = predictor(nodes, spec), predict(fabric, nodes, spec)
        assert got.slowdown == pytest.approx(want.slowdown)
        assert got.best_level == want.best_level


@pytest.mark.parametrize(
    ("admin", "comment", "mode"),
    [
        ("slurm-topo: zone:wait [a(2n)]", "locality=region:fail", "zone:wait"),
        ("slurm-topo: not applied: no data file", "", "not applied"),
        ("", "locality=zone:fail", "comment:zone:fail"),
        ("", "locality=zone JobState=X slurm-topo: region:wait", "comment:zone"),
        ("", "locality=<script>", "none"),
        ("", "slurm-topo: zone:wait [x(9n)]", "none"),
    ],
)
def test_the_locality_mode_comes_from_the_record_first(admin: str, comment: str, mode: str) -> None:
    job = FinishedJob("1", "u", "p", "COMPLETED", 0, 1, 2, 1, ("a", "b"), 0, admin, comment)
    assert locality_mode(job)[0] == mode


class _Numbers(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "data-key" in a:
            self.values[str(a["data-key"])] = str(a.get("data-value"))


def test_the_cli_json_and_the_html_page_carry_the_same_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    try:
        main(
            [
                "report",
                "-i",
                str(FLEET),
                "--sacct-json",
                str(SACCT / "slurm-26.05" / "sacct-json.txt"),
                "--plan",
                PLAN,
                "--json",
                "--html",
                str(page),
            ]
        )
    except SystemExit as done:
        assert done.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    parser = _Numbers()
    parser.feed(page.read_text())
    got = parser.values
    for key in ("jobs", "predicted", "gpu_hours", "gpu_hours_lost"):
        assert float(got[f"totals.{key}"]) == pytest.approx(doc["totals"][key])
    for s in doc["summaries"]:
        assert float(got[f"summary.{s['key']}.{s['value']}.gpu_hours_lost"]) == pytest.approx(
            s["gpu_hours_lost"]
        )
        assert int(got[f"summary.{s['key']}.{s['value']}.jobs"]) == s["jobs"]
    assert "http" not in page.read_text().replace("http-equiv", "").replace("http://www.w3.org/2000/svg", "")


def test_the_page_escapes_every_text() -> None:
    job = FinishedJob("1", "u", "main", "COMPLETED", 0, 1, 2, 3600, ("n01", "n12"), 8, "", "")
    inv = load_inventories([FLEET])
    report = build_report([job], inv, plan=PLAN)
    html_text = render_html(report)
    assert "<script" not in html_text.lower()
