"""slurm_topo.relaxer.relax: the auto budget from the cost model, its record, the relaxer's decision per job
and the constraint one level looser."""

from __future__ import annotations

from datetime import datetime

import pytest

from slurm_topo.access import ADMIN_COMMENT_WIDTH, SlurmAccess, jobs_from_text
from slurm_topo.access.jobs import SCONTROL_JOB_ORDER
from slurm_topo.access.text import busy_share, parse_record_line
from slurm_topo.core.errors import CommandError, InputError
from slurm_topo.core.model import Location, Node
from slurm_topo.cost import Fabric, parse_plan, score_placement
from slurm_topo.relaxer.relax import (
    MAX_BUSY,
    alternatives,
    auto_budget,
    auto_lines,
    budget_record,
    current_level,
    due,
    judge,
    level_slowdowns,
    level_step_seconds,
    load_factor,
    log_lines,
    parse_budget,
    parse_test_only,
    pass_load,
    plan_pass,
    queued_nodes,
    relax_record,
    relaxations,
    run_pass,
    split_bracket,
    unit_budgets,
    widen,
    will_run_argv,
)
from slurm_topo.reports.explain import explain_record

H100 = Node("t", gpus=8)
PLAN = "tp=8,bytes=20G,tp_bytes=2G"


def test_level_seconds_are_the_cost_models_for_a_placement_across_two_groups() -> None:
    # the README's fleet: dgx[01-04] on one leaf; dgx[01-02,05-06] across two zones of one region
    fleet = {
        f"dgx0{i}": Node(
            f"dgx0{i}", Location("us-east", "1a" if i <= 4 else "1b", "l1" if i <= 4 else "l7"), gpus=8
        )
        for i in range(1, 9)
    }
    spec = parse_plan(PLAN)
    steps = level_step_seconds(H100, 4, spec)
    fabric = Fabric(fleet)
    assert steps["network_group"] == pytest.approx(
        score_placement(fabric, ["dgx01", "dgx02", "dgx03", "dgx04"], spec).seconds
    )
    assert steps["region"] == pytest.approx(
        score_placement(fabric, ["dgx01", "dgx02", "dgx05", "dgx06"], spec).seconds
    )
    assert steps["network_group"] < steps["zone"] < steps["region"] < steps["any"]


def test_budget_is_limit_times_slowdown_difference() -> None:
    spec = parse_plan(PLAN)
    steps = level_step_seconds(H100, 4, spec)
    b = auto_budget("zone", 4, PLAN, 7200, H100, comm_fraction=0.25)
    for lvl in ("region", "any"):
        s = 1 + 0.25 * (steps[lvl] / steps["zone"] - 1)
        assert b.of(lvl) == round(7200 * (s - 1))
    assert b.of("network_group") is None and b.of("zone") is None
    assert b.of("region") < b.of("any")  # type: ignore[operator]
    # twice the communication share, about twice the budget; twice the limit, twice the budget
    assert auto_budget("zone", 4, PLAN, 7200, H100, comm_fraction=0.5).of("region") == pytest.approx(
        2 * b.of("region"),
        abs=1,  # type: ignore[operator]
    )
    assert auto_budget("zone", 4, PLAN, 14400, H100).of("any") == pytest.approx(2 * b.of("any"), abs=1)  # type: ignore[operator]


def test_one_node_job_never_gains_from_waiting() -> None:
    b = auto_budget("network_group", 1, "tp=8,bytes=10G", 3600, H100)
    assert dict(b.budgets) == {"zone": 0, "region": 0, "any": 0}
    assert level_slowdowns({"zone": 0.0, "region": 1.0, "any": 2.0}, "zone") == {
        "zone": 1.0,
        "region": 1.0,
        "any": 1.0,
    }


def test_record_round_trips_and_bad_records_are_not_auto() -> None:
    b = auto_budget("network_group", 8, "tp=8,bytes=10G", 3600, H100)
    rec = b.record()
    assert rec.startswith("slurm-topo-auto: network_group limit=3600s zone=")
    assert "slurm-topo: " not in rec  # explain keeps reading the filter's own record
    assert parse_budget(f"slurm-topo: zone:wait [a(3n)]; {rec}") == b
    assert parse_budget("slurm-topo: zone:wait [a(3n)]") is None
    assert parse_budget("slurm-topo-auto: zone limit=10s") is None  # no budget for region/any
    assert parse_budget("slurm-topo-auto: any limit=10s") is None
    assert parse_budget(None) is None and parse_budget("(null)") is None


@pytest.mark.parametrize(
    "kw",
    [
        {"level": "any"},
        {"comm_fraction": 0.0},
        {"comm_fraction": 1.5},
        {"limit_s": 0},
        {"plan": "tp=x"},
    ],
)
def test_bad_budget_input_is_one_clear_error(kw: dict[str, object]) -> None:
    args: dict[str, object] = {"level": "zone", "nodes": 2, "plan": PLAN, "limit_s": 60, "template": H100}
    args.update(kw)
    with pytest.raises(InputError):
        auto_budget(**args)  # type: ignore[arg-type]


def _job(**kw: str) -> dict[str, str]:
    base = {
        "JobId": "7",
        "JobState": "PENDING",
        "Reason": "Resources",
        "Priority": "4294901700",
        "SubmitTime": "2026-11-30T12:00:00",
        "Features": "gpu&[zone_a|zone_b]",
        "AdminComment": "slurm-topo-auto: zone limit=3600s region=300s any=1800s",
    }
    base.update(kw)
    return base


T0 = datetime.fromisoformat("2026-11-30T12:00:00").timestamp()


def test_judge_relaxes_after_the_budget_one_level_at_a_time() -> None:
    assert judge(_job(), T0 + 300).action == "skip"  # type: ignore[union-attr]
    d = judge(_job(), T0 + 301)
    assert d is not None and (d.action, d.level, d.target, d.waited_s, d.budget_s) == (
        "relax",
        "zone",
        "region",
        301,
        300,
    )
    # long past both budgets: still only one level per pass
    d = judge(_job(), T0 + 5000)
    assert d is not None and d.target == "region"
    relaxed = _job(AdminComment=_job()["AdminComment"] + "; " + relax_record(d, T0 + 5000))
    assert current_level(parse_budget(relaxed["AdminComment"]), relaxed["AdminComment"]) == "region"  # type: ignore[arg-type]
    d2 = judge(relaxed, T0 + 5001)
    assert d2 is not None and (d2.level, d2.target) == ("region", "any")
    done = _job(AdminComment=relaxed["AdminComment"] + "; " + relax_record(d2, T0 + 5001))
    assert relaxations(done["AdminComment"]) == [("zone", "region"), ("region", "any")]
    assert judge(done, T0 + 99999).action == "skip"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kw",
    [
        {"JobState": "RUNNING"},
        {"Reason": "JobHeldUser"},
        {"Reason": "JobHeldAdmin"},
        {"Priority": "0"},
        {"SubmitTime": "Unknown"},
    ],
)
def test_judge_never_touches_running_or_held_jobs(kw: dict[str, str]) -> None:
    d = judge(_job(**kw), T0 + 99999)
    assert d is not None and d.action == "skip"


def test_jobs_without_a_budget_are_not_auto() -> None:
    assert judge(_job(AdminComment="slurm-topo: zone:wait [a(3n)]"), T0 + 99999) is None
    assert judge(_job(AdminComment="(null)"), T0 + 99999) is None


NODES = {
    "n1": ("gpu", "region_r1", "zone_a", "ng_a1"),
    "n2": ("region_r1", "zone_b", "ng_b1"),
    "n3": ("region_r2", "zone_c", "ng_c1"),
    "n4": ("region_r3", "zone_d", "ng_d1"),
}


def test_widen_maps_each_group_to_its_parents() -> None:
    assert split_bracket("gpu&[zone_a|zone_b]") == ("gpu", ["zone_a", "zone_b"])
    assert split_bracket("[ng_a1]") == ("", ["ng_a1"])
    assert split_bracket("gpu") == ("gpu", [])
    assert widen("gpu&[zone_a|zone_c]", "region", NODES) == "gpu&[region_r1|region_r2]"
    assert widen("[ng_a1|ng_b1]", "zone", NODES) == "[zone_a|zone_b]"
    assert widen("gpu&[region_r1]", "any", NODES) == "gpu"
    assert widen("[region_r1]", "any", NODES) == ""
    assert widen("gpu", "region", NODES) is None  # no bracket: nothing of ours to widen
    assert widen("[zone_x]", "region", NODES) is None  # no node in the group


def test_plan_pass_reads_scontrol_lines() -> None:
    auto = "slurm-topo-auto: zone limit=3600s region=300s any=1800s"
    text = "\n".join(
        [
            f"JobId=1 JobName=a UserId=u(1) Priority=10 JobState=PENDING Reason=Resources SubmitTime="
            f"2026-11-30T12:00:00 Features=[zone_a|zone_b] AdminComment=slurm-topo: zone:wait [a]; {auto}",
            "JobId=2 JobName=b UserId=u(1) Priority=10 JobState=PENDING Reason=Resources SubmitTime="
            "2026-11-30T12:00:00 Features=(null) AdminComment=(null)",
            f"JobId=3 JobName=c UserId=u(1) Priority=10 JobState=RUNNING Reason=None SubmitTime="
            f"2026-11-30T12:00:00 Features=[zone_a] AdminComment={auto}",
        ]
    )
    p = plan_pass(jobs_from_text(text).jobs, T0 + 400)
    assert (p.pending, p.auto) == (2, 2)
    assert [(d.job, d.action) for d in p.decisions] == [("1", "relax"), ("3", "skip")]


def test_auto_lines_show_budget_wait_and_each_relaxation() -> None:
    job = _job()
    assert auto_lines(job, T0 + 100) == [
        "zone:auto, now zone; budget region 300 s, any 1800 s (limit 3600 s); waited 100 s"
    ]
    d = judge(job, T0 + 400)
    assert d is not None
    job = _job(AdminComment=job["AdminComment"] + "; " + relax_record(d, T0 + 400), JobState="RUNNING")
    lines = auto_lines(job, T0 + 500)
    assert lines[0] == "zone:auto, now region; budget region 300 s, any 1800 s (limit 3600 s)"
    assert lines[1].startswith("relaxed zone -> region after 400 s (budget 300 s) at ")
    assert auto_lines(_job(AdminComment="slurm-topo: zone:wait [a]"), T0) == []
    text = explain_record(job, None).text()
    assert "  auto:     zone:auto, now region;" in text and "            relaxed zone -> region" in text


def test_unit_budgets_give_the_filter_the_same_record() -> None:
    units = unit_budgets(H100, PLAN, 4)
    assert set(units) == {"network_group", "zone", "region"}
    assert units["zone"][1] == {"region": 0.0, "any": 0.0}
    for limit in (600, 7200, 86400):
        from_filter = budget_record("zone", limit, units["zone"][4])
        assert parse_budget(from_filter) is not None
        direct = auto_budget("zone", 4, PLAN, limit, H100)
        for lvl, sec in parse_budget(from_filter).budgets:  # type: ignore[union-attr]
            assert abs(sec - direct.of(lvl)) <= limit * 1e-4 + 1  # type: ignore[operator]


def test_load_aware_timer_stretches_budgets_on_a_busy_cluster() -> None:
    b = parse_budget("slurm-topo-auto: zone limit=3600s region=300s any=1800s")
    assert b is not None
    assert load_factor(0.0) == 1.0 and load_factor(0.5) == 4.0 and load_factor(0.9) == pytest.approx(100.0)
    assert load_factor(1.0) == pytest.approx(10_000.0)  # capped at MAX_BUSY
    assert due(b, "zone", 301) == "region"
    assert due(b, "zone", 301, busy=0.0) == "region"
    assert due(b, "zone", 1199, busy=0.5) is None and due(b, "zone", 1201, busy=0.5) == "region"
    d = judge(_job(), T0 + 1300, busy=0.5)
    assert d is not None and (d.action, d.factor) == ("relax", 4.0)
    assert " budget=300s load=x4.00 at=" in relax_record(d, T0 + 1300)
    job = _job(AdminComment=_job()["AdminComment"] + "; " + relax_record(d, T0 + 1300))
    assert auto_lines(job, T0 + 1400)[1].startswith(
        "relaxed zone -> region after 1300 s (budget 300 s × load 4.00)"
    )
    assert judge(_job(), T0 + 1100, busy=0.5).action == "skip"  # type: ignore[union-attr]


def test_an_overloaded_queue_holds_every_budget() -> None:
    jobs = [
        {"JobId": "1", "JobState": "PENDING", "NumNodes": "2-4", "Reason": "Resources"},
        {"JobId": "2", "JobState": "PENDING", "NumNodes": "3", "Reason": "Priority"},
        {"JobId": "3", "JobState": "PENDING", "NumNodes": "8", "Reason": "JobHeldUser"},  # held: no demand
        {"JobId": "4", "JobState": "RUNNING", "NumNodes": "8"},
        {"JobId": "5", "JobState": "PENDING", "NumNodes": ""},  # unreadable count: one node
        {"JobId": "6", "JobState": "PENDING", "NumNodes": "9", "Reason": "Dependency"},  # not for nodes
        {"JobId": "7", "JobState": "PENDING", "NumNodes": "9", "Reason": "BeginTime"},
        {"JobId": "8", "JobState": "PENDING", "NumNodes": "9", "Reason": "Priority", "Priority": "0"},
    ]
    assert queued_nodes(jobs) == 2 + 3 + 1
    assert pass_load(0.5, 6, 7) == 0.5  # less queued than the usable nodes: the busy share
    assert pass_load(0.5, 7, 7) == MAX_BUSY  # the queue asks for every node: hold
    assert pass_load(0.0, 3, 0) == 0.0  # no usable node: nothing to price
    b = parse_budget("slurm-topo-auto: zone limit=3600s region=300s any=1800s")
    assert b is not None and due(b, "zone", 3000, pass_load(0.5, 7, 7)) is None


def test_busy_share_counts_usable_nodes() -> None:
    text = "\n".join(
        [
            "NodeName=a1 Arch=x86_64 State=ALLOCATED ActiveFeatures=zone_a",
            "NodeName=a2 Arch=x86_64 State=MIXED ActiveFeatures=zone_a",
            "NodeName=a3 Arch=x86_64 State=IDLE ActiveFeatures=zone_a",
            "NodeName=a4 Arch=x86_64 State=IDLE+DRAIN ActiveFeatures=zone_a",
            "NodeName=a5 Arch=x86_64 State=DOWN* ActiveFeatures=zone_a",
        ]
    )
    assert busy_share(text) == pytest.approx(2 / 3)
    assert busy_share("") == 0.0


# ---- the start-estimate rule (sbatch --test-only)

NODE_TEXT = "\n".join(
    f"NodeName={n} Arch=x86_64 State=IDLE ActiveFeatures={','.join(f)}" for n, f in NODES.items()
)


def _line(job: str, submitted: str, budget: str = "region=300s any=1800s", **kw: str) -> str:
    fields = {
        "JobId": job,
        "JobName": f"j{job}",
        "UserId": "u(1)",
        "Priority": "10",
        "JobState": "PENDING",
        "Reason": "Resources",
        "SubmitTime": submitted,
        "Partition": "main",
        "TimeLimit": "01:00:00",
        "NumNodes": "2-2",
        "NumTasks": "2",
        "CPUs/Task": "1",
        "OverSubscribe": "NO",
        "TresPerNode": "gres:gpu:4",
        "Features": "gpu&[zone_a|zone_b]",
    }
    fields.update(kw)
    fields["AdminComment"] = (
        f"slurm-topo: zone:auto [a(2n),b(2n)]; slurm-topo-auto: zone limit=3600s {budget}"
    )
    return _render(fields)


def _render(fields: dict[str, str]) -> str:
    """A job line in scontrol's key order (what the text backend accepts)."""
    order = {k: i for i, k in enumerate(SCONTROL_JOB_ORDER)}
    return " ".join(f"{k}={v}" for k, v in sorted(fields.items(), key=lambda kv: order[kv[0]]))


class FakeSlurm:
    """Answers the relaxer's commands from a job listing; ``sbatch --test-only`` from ``starts``
    (constraint -> seconds after T0, or an exception to raise); records every call."""

    def __init__(self, lines: list[str], starts: dict[str, object]) -> None:
        self.fields = {line.split()[0][6:]: parse_record_line(line) for line in lines}
        self.starts = starts
        self.calls: list[list[str]] = []

    def run(self, argv: object, timeout: float = 30.0) -> str:
        args = [str(a) for a in argv]  # type: ignore[attr-defined]
        self.calls.append(args)
        if args[:4] == ["scontrol", "show", "node", "-o"]:
            return NODE_TEXT
        if args[:4] == ["scontrol", "show", "job", "-o"]:
            return "\n".join(self.lines.values()) if len(args) == 4 else self.lines[args[4]]
        if args[:3] == ["squeue", "--noheader", args[2]] and args[2].startswith("--jobs="):
            said = self.fields[args[2].split("=", 1)[1]].get("AdminComment", "")  # squeue pads to the width
            return said.ljust(ADMIN_COMMENT_WIDTH) + "\n"
        if args[:2] == ["scontrol", "update"]:
            job = args[2].split("=", 1)[1]
            for a in args[3:]:
                key, value = a.split("=", 1)
                self.fields[job][key] = value
            return ""
        assert args[:3] == ["sh", "-c", 'exec "$@" 2>&1'] and "--test-only" in args, args
        constraint = next(a.split("=", 1)[1] for a in args if a.startswith("--constraint="))
        start = self.starts[constraint]
        if isinstance(start, Exception):
            raise start
        at = datetime.fromtimestamp(T0 + float(start)).strftime("%Y-%m-%dT%H:%M:%S")  # type: ignore[arg-type]
        return f"sbatch: Job 99 to start at {at} using 2 processors on nodes n[1-2] in partition main\n"

    @property
    def lines(self) -> dict[str, str]:
        return {job: _render(f) for job, f in self.fields.items()}

    def test_only_calls(self) -> list[list[str]]:
        return [c for c in self.calls if "--test-only" in c]


def test_test_only_argv_asks_for_a_job_like_the_pending_one() -> None:
    job = parse_record_line(_line("5", "2026-11-30T12:00:00", MinMemoryNode="2000M"))
    argv = will_run_argv(job, "gpu&[region_r1]")
    assert argv is not None and argv[:4] == ["sh", "-c", 'exec "$@" 2>&1', "sh"]
    assert argv[4:] == [
        "sbatch",
        "--test-only",
        "--comment=locality=any",
        "--nodes=2-2",
        "--ntasks=2",
        "--cpus-per-task=1",
        "--partition=main",
        "--time=01:00:00",
        "--exclusive",
        "--gres=gpu:4",
        "--mem=2000M",
        "--constraint=gpu&[region_r1]",
        "--wrap",
        "true",
    ]
    assert will_run_argv({"NumNodes": "two"}, "x") is None
    newer = will_run_argv({"NumNodes": "1", "TresPerNode": "gres/gpu:h100:2,cpu:4"}, "") or []
    assert "--gres=gpu:h100:2" in newer and not any(a.startswith("--constraint") for a in newer)
    assert "--time=UNLIMITED" not in (will_run_argv({"NumNodes": "1", "TimeLimit": "UNLIMITED"}, "") or [])
    line = (
        "sbatch: Job 12 to start at 2026-11-30T12:10:00 using 2 processors on nodes a[3-4] in partition main"
    )
    assert parse_test_only(line) == T0 + 600
    assert parse_test_only("sbatch: error: Requested node configuration is not available") is None


def test_alternatives_ask_each_group_alone() -> None:
    assert alternatives("gpu&[zone_a|zone_b]") == ["gpu&zone_a", "gpu&zone_b"]
    assert alternatives("[region_r1]") == ["region_r1"]
    assert alternatives("gpu") == ["gpu"] and alternatives(None) == [""]


def test_estimate_rule_widens_a_job_whose_looser_start_saves_more_than_it_costs() -> None:
    """Job 1: 1 h to either zone, 10 s to its region, which costs 300 s: widened (long before its budget,
    at 60 s of waiting). Job 2: the region saves 200 s and costs 300 s: left."""
    slurm = FakeSlurm(
        [
            _line("1", "2026-11-30T12:00:00"),
            _line("2", "2026-11-30T12:00:30", Features="[zone_c]"),
        ],
        {"gpu&zone_a": 3660, "gpu&zone_b": 5000, "gpu&region_r1": 70, "zone_c": 260, "region_r2": 60},
    )
    p = run_pass(slurm, access=SlurmAccess(slurm, "text"), now=T0 + 60, load_aware=False, estimates=10)
    by = {d.job: d for d in p.decisions}
    assert (by["1"].action, by["1"].rule, by["1"].applied, by["1"].estimate) == (
        "relax",
        "estimate",
        True,
        (3600, 10, 300),
    )
    assert by["2"].action == "skip" and by["2"].estimate == (200, 0, 300), by["2"]
    assert "start estimate +200s here, +0s at region, costs 300s" in by["2"].why
    asked = [next(a for a in c if a.startswith("--constraint=")) for c in slurm.test_only_calls()]
    assert asked == [
        "--constraint=gpu&region_r1",
        "--constraint=gpu&zone_a",
        "--constraint=gpu&zone_b",
        "--constraint=region_r2",
        "--constraint=zone_c",
    ]
    updates = [c for c in slurm.calls if c[:2] == ["scontrol", "update"]]
    assert updates[0][2:4] == ["JobId=1", "Features=gpu&[region_r1]"]
    assert len(updates) == 1
    comment = parse_record_line(slurm.lines["1"])["AdminComment"]
    assert relaxations(comment) == [("zone", "region")]
    assert " waited=60s budget=300s start=+3600s looser=+10s cost=300s at=" in comment
    lines = auto_lines(parse_record_line(slurm.lines["1"]), T0 + 61)
    assert lines[1].startswith(
        "relaxed zone -> region after 60 s (start estimate +3600 s here, +10 s at region, which costs 300 s;"
    ), lines
    assert by["1"].as_dict()["estimate_start_s"] == 3600 and "fields" not in by["1"].as_dict()
    assert "start estimate +3600s here, +10s at region" in log_lines(p, False)[0]


def test_a_group_starting_soon_enough_ends_the_questions() -> None:
    """zone_a starts within the looser start + cost: zone_b is never asked, the job is left."""
    slurm = FakeSlurm([_line("1", "2026-11-30T12:00:00")], {"gpu&region_r1": 60, "gpu&zone_a": 300})
    p = run_pass(slurm, access=SlurmAccess(slurm, "text"), now=T0 + 60, load_aware=False, estimates=10)
    assert len(slurm.test_only_calls()) == 2 and p.decisions[0].action == "skip"
    assert p.decisions[0].estimate == (240, 0, 300)


def test_estimate_rule_is_off_by_default_and_never_used_for_a_job_already_due() -> None:
    slurm = FakeSlurm([_line("1", "2026-11-30T12:00:00")], {})
    p = run_pass(slurm, access=SlurmAccess(slurm, "text"), now=T0 + 60, load_aware=False)
    assert slurm.test_only_calls() == [] and p.decisions[0].action == "skip"
    slurm = FakeSlurm([_line("1", "2026-11-30T12:00:00")], {})
    p = run_pass(
        slurm, access=SlurmAccess(slurm, "text"), now=T0 + 400, load_aware=False, estimates=5
    )  # past the 300 s budget
    assert slurm.test_only_calls() == [] and p.decisions[0].rule == "budget" and p.decisions[0].applied


def test_a_failing_test_only_call_never_stops_the_pass_and_calls_are_bounded() -> None:
    """Three jobs not due, asked longest waiting first (3, 1, 2) with 4 calls in all: job 3's calls fail
    (a timeout and an error), job 1 is still widened with the other two; job 2 gets none."""
    slurm = FakeSlurm(
        [
            _line("1", "2026-11-30T12:00:20"),
            _line("2", "2026-11-30T12:00:50", Features="[zone_c]"),
            _line("3", "2026-11-30T12:00:00", Features="[zone_d]"),
        ],
        {
            "gpu&zone_a": 3660,
            "gpu&zone_b": 3660,
            "gpu&region_r1": 70,
            "region_r3": CommandError(["sbatch"], None, "timed out after 10 s"),
            "zone_c": 3660,
            "region_r2": 60,
        },
    )
    p = run_pass(
        slurm,
        access=SlurmAccess(slurm, "text"),
        now=T0 + 60,
        load_aware=False,
        estimates=4,
        estimate_timeout=10,
    )
    by = {d.job: d for d in p.decisions}
    asked = [next(a for a in c if a.startswith("--constraint=")) for c in slurm.test_only_calls()]
    assert asked == [
        "--constraint=region_r3",
        "--constraint=gpu&region_r1",
        "--constraint=gpu&zone_a",
        "--constraint=gpu&zone_b",
    ]
    assert by["3"].action == "skip" and "start estimate failed: " in by["3"].why and not by["3"].applied
    assert "timed out after 10 s" in by["3"].why
    assert by["1"].applied and by["1"].rule == "estimate"
    assert by["2"].action == "skip" and by["2"].estimate is None
    assert "--test-only calls are spent" in by["2"].why
    assert all(c[c.index("--test-only") - 1] == "sbatch" for c in slurm.test_only_calls())


def test_estimate_rule_respects_the_time_left_in_the_pass() -> None:
    slurm = FakeSlurm([_line("1", "2026-11-30T12:00:00")], {})
    p = run_pass(
        slurm,
        access=SlurmAccess(slurm, "text"),
        now=T0 + 60,
        load_aware=False,
        estimates=5,
        estimate_seconds=0.5,
    )
    assert slurm.test_only_calls() == []
    assert "--test-only calls are spent" in p.decisions[0].why
