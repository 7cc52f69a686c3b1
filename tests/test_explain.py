"""slurm_topo.reports.explain: parsing of scontrol's text and the phrasing of where a job landed (no Slurm
needed)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import ScriptedRunner

from slurm_topo.access import text as slurm_text
from slurm_topo.core.model import Inventory
from slurm_topo.cost import DEFAULT_TABLE, ring_allreduce_seconds
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.reports import explain

RUNNING = (
    "JobId=13 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901748 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Partition=main "
    "AllocNode:Sid=localhost:25828 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList=n[07-09] BatchHost=n07 NumNodes=3 NumCPUs=48 CPUs/Task=1 "
    "ReqB:S:C:T=0:0:*:* Features=[zone_us-west-2a|zone_us-east-1a] DelayBoot=00:00:00 "
    "AdminComment=slurm-topo: zone:wait [us-west-2a(3n),us-east-1a(4n)]  Comment=locality=zone "
    "StdErr=/dev/null StdIn=/dev/null "
    "Power= "
)
HELD = (
    "JobId=2 JobName=wrap Priority=0 JobState=PENDING Reason=JobHeldUser Dependency=(null) NodeList= "
    "Features=(null) AdminComment=slurm-topo: zone:wait: held; the largest is us-east-1a with 4 nodes "
    "(32 GPUs) StdErr=/dev/null"
)
NODES = "\n".join(
    f"NodeName={n} Arch=x86_64 CoresPerSocket=8 CPUAlloc=16 AvailableFeatures={f} ActiveFeatures={f} "
    "Gres=gpu:a100:4 NodeAddr=127.0.0.1 State=ALLOCATED"
    for n, f in (
        ("n07", "eth,nvme,region_us-west,zone_us-west-2a,ng_us-west-2a.rack-c1"),
        ("n08", "eth,nvme,region_us-west,zone_us-west-2a,ng_us-west-2a.rack-c1"),
        ("n09", "eth,region_us-west,zone_us-west-2a,ng_us-west-2a.rack-c2"),
    )
)


def test_record_line_keeps_values_with_spaces() -> None:
    kv = slurm_text.parse_record_line(RUNNING)
    assert kv["AdminComment"] == "slurm-topo: zone:wait [us-west-2a(3n),us-east-1a(4n)]"
    assert kv["Comment"] == "locality=zone"
    assert kv["AllocNode:Sid"] == "localhost:25828"
    assert kv["CPUs/Task"] == "1"
    assert kv["NodeList"] == "n[07-09]"
    assert kv["Power"] == ""


def test_nodes_features() -> None:
    nodes = slurm_text.parse_nodes(NODES)
    assert set(nodes) == {"n07", "n08", "n09"}
    assert "zone_us-west-2a" in nodes["n09"]
    assert slurm_text.parse_nodes("NodeName=x AvailableFeatures=(null) ActiveFeatures=(null)") == {"x": ()}


def test_landed_levels() -> None:
    assert explain.landed(slurm_text.parse_nodes(NODES)) == "same zone us-west-2a, 2 network groups"
    one_rack = {"a": ["region_r", "zone_z", "ng_z.g1"], "b": ["region_r", "zone_z", "ng_z.g1"]}
    assert explain.landed(one_rack) == "same network group z.g1"
    region = {
        "a": ["region_r", "zone_z1", "ng_z1.g"],
        "b": ["region_r", "zone_z2", "ng_z2.g"],
        "c": ["region_r", "zone_z3", "ng_z3.g"],
    }
    assert explain.landed(region) == "same region r, 3 zones"
    spread = {"a": ["region_r1", "zone_z1"], "b": ["region_r2", "zone_z2"]}
    assert explain.landed(spread) == "2 regions"
    assert explain.landed({"a": ["ib"], "b": []}) == "no location features on its nodes"
    assert explain.landed({"a": ["region_r"]}) == "same region r"


def test_landed_ignores_family_bucket_features() -> None:
    feats = [
        "torch-2.4",
        "region_r1",
        "zone_r1-b",
        "ng_r1-b.g3",
        "region_r1.torch-2.4",
        "zone_r1-b.torch-2.4",
        "ng_r1-b.g3.torch-2.4",
    ]
    assert explain.landed({"t6": feats, "t7": feats}) == "same network group r1-b.g3"


def test_locality_from_record_and_comment() -> None:
    assert explain.locality_of_record("zone:wait [us-west-2a(3n)]") == "zone:wait"
    assert explain.locality_of_record("zone:fail: rejected; the largest is x") == "zone:fail"
    auto = "zone:auto [us-west-2a(3n)]; slurm-topo-auto: zone limit=60s"
    assert explain.locality_of_record(auto) == "zone:auto"
    assert explain.locality_of_record("prefer network_group [a(3n)]") == "prefer"
    assert explain.locality_of_record("prefer: no group fits; topology/tree packs") == "prefer"
    assert explain.locality_of_record("any; regions region_us-west") == "any"
    assert explain.locality_of_record("rejected locality 'bogus'") is None
    assert explain.locality_of_comment("run 7 locality=zone:fail") == "zone:fail"
    assert explain.locality_of_comment("(null)") is None
    assert explain.filter_record("site note; slurm-topo: any") == "any"
    assert explain.filter_record("(null)") is None


@pytest.fixture(autouse=True)
def _text_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fakes here answer ``scontrol show job -o`` (the text backend); the JSON one has its own tests."""
    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "text")


FakeRunner = ScriptedRunner  # answers by whole command here


def test_explain_running_job() -> None:
    runner = FakeRunner(
        {
            ("scontrol", "show", "job", "-o", "13"): RUNNING + "\n",
            ("scontrol", "show", "node", "-o", "n[07-09]"): NODES + "\n",
        }
    )
    text = explain.explain_job("13", runner)
    assert text.splitlines()[0] == "job 13: RUNNING on n[07-09]"
    assert "locality zone:wait (as the filter read it)" in text
    assert "constraint [zone_us-west-2a|zone_us-east-1a]" in text
    assert "decision: zone:wait [us-west-2a(3n),us-east-1a(4n)]" in text
    assert "landed:   same zone us-west-2a, 2 network groups (3 nodes)" in text


def test_explain_held_job_gives_the_reason_and_the_record() -> None:
    runner = FakeRunner({("scontrol", "show", "job", "-o", "2"): HELD})
    text = explain.explain_job("2", runner)
    assert "job 2: PENDING" in text
    assert (
        "waiting:  Reason=JobHeldUser, held by the locality filter: the largest is us-east-1a with 4 nodes "
        "(32 GPUs)"
    ) in text
    assert runner.calls == [("scontrol", "show", "job", "-o", "2")], "no node query for a job without nodes"


def test_explain_job_without_record_falls_back_to_comment() -> None:
    line = "JobId=5 JobState=PENDING Reason=Resources NodeList= Features=(null) Comment=locality=zone:fail"
    text = explain.explain_job("5", FakeRunner({("scontrol", "show", "job", "-o", "5"): line}))
    assert "locality zone:fail (from --comment)" in text
    assert "decision: (none recorded)" in text
    assert "waiting:  Reason=Resources" in text


def test_landed_counts_nodes_without_a_network_group() -> None:
    """Three nodes of one zone, two in one network group and one in none: not "1 network group"."""
    feats = {
        "a": ["region_r", "zone_z", "ng_z.g1"],
        "b": ["region_r", "zone_z", "ng_z.g1"],
        "c": ["region_r", "zone_z"],
    }
    assert explain.landed(feats) == "same zone z, 1 network group + 1 node without one"
    feats["d"] = ["region_r", "zone_z"]
    feats["e"] = ["region_r", "zone_z", "ng_z.g2"]
    assert explain.landed(feats) == "same zone z, 2 network groups + 2 nodes without one"


def test_landed_counts_nodes_without_a_zone_or_region() -> None:
    feats = {
        "a": ["region_r", "zone_z1"],
        "b": ["region_r", "zone_z2"],
        "c": ["region_r"],
    }
    assert explain.landed(feats) == "same region r, 2 zones + 1 node without one"
    spread = {"a": ["region_r1"], "b": ["region_r2"], "c": []}
    assert explain.landed(spread) == "2 regions + 1 node without one"


def test_landed_plurals() -> None:
    one_region = {"a": ["region_r1", "zone_z1"], "b": ["region_r1", "zone_z2"]}
    assert explain.landed(one_region) == "same region r1, 2 zones"
    assert explain.landed({"a": ["region_r1"], "b": ["region_r2"]}) == "2 regions"


def _job(locality_record: str, nodes: str = "n[07-09]") -> str:
    return (
        f"JobId=21 JobState=RUNNING Reason=None NodeList={nodes} NumNodes=3 Features=(null) "
        f"AdminComment=slurm-topo: {locality_record} StdErr=/dev/null"
    )


SPREAD_NODES = {
    "n07": ("region_us-west", "zone_us-west-2a", "ng_us-west-2a.rack-c1"),
    "n08": ("region_us-west", "zone_us-west-2a", "ng_us-west-2a.rack-c1"),
    "n12": ("region_us-west", "zone_us-west-2c", "ng_us-west-2c.rack-e1"),
}


def test_explain_flags_a_placement_that_breaks_a_required_locality() -> None:
    job = slurm_text.parse_record_line(_job("zone:wait; fit not checked (--nodelist)", "n[07-08,12]"))
    text = explain.explain_record(job, SPREAD_NODES).text()
    assert (
        "  BROKEN:   locality zone:wait asks for one zone; the job's nodes are in 2 zones"
        in text.splitlines()
    ), text
    # the same nodes are fine for a region job, and prefer/any are never "broken"
    for record in ("region:fail [us-west(6n)]", "prefer zone [us-west-2a(3n)]", "any"):
        text = explain.explain_record(
            slurm_text.parse_record_line(_job(record, "n[07-08,12]")), SPREAD_NODES
        ).text()
        assert "BROKEN" not in text, (record, text)


def test_explain_flags_a_required_level_the_nodes_lack() -> None:
    nodes = {
        "n07": ("region_us-west", "zone_us-west-2a", "ng_us-west-2a.rack-c1"),
        "n08": ("region_us-west",),
    }
    job = slurm_text.parse_record_line(_job("network_group:wait [us-west-2a/rack-c1(2n)]", "n[07-08]"))
    text = explain.explain_record(job, nodes).text()
    assert (
        "  BROKEN:   locality network_group:wait asks for one network group; the job's nodes are in "
        "1 network group + 1 node without one"
    ) in text, text


def test_explain_locality_from_comment_is_checked_too() -> None:
    line = (
        "JobId=5 JobState=RUNNING Reason=None NodeList=n[07-08,12] Features=(null) "
        "Comment=locality=zone:fail AdminComment=(null)"
    )
    text = explain.explain_record(slurm_text.parse_record_line(line), SPREAD_NODES).text()
    assert "BROKEN:   locality zone:fail asks for one zone; the job's nodes are in 2 zones" in text, text


def test_explain_output_ends_with_one_newline() -> None:
    runner = FakeRunner({("scontrol", "show", "job", "-o", "2"): HELD})
    text = explain.explain_job("2", runner)
    assert text.endswith("\n") and not text.endswith("\n\n"), repr(text)
    assert explain.explain_job("77", FakeRunner({("scontrol", "show", "job", "-o", "77"): ""})).endswith(
        "slurmctld\n"
    )


# ---- the cost of the placement (plan from --plan or the comment, fleet from -i)

FLEET = Path(__file__).resolve().parents[1] / "docker-slurm" / "fleet.yaml"


def _fleet() -> Inventory:
    return merge([load_inventory_file(FLEET)])


def _states(allocated: Sequence[str] = ()) -> list[dict[str, str]]:
    """`scontrol -d show node -o` records of the fleet: ``allocated`` nodes busy, the rest idle."""
    return [
        {"NodeName": n.name, "State": "ALLOCATED" if n.name in allocated else "IDLE", "Gres": f"gpu:{n.gpus}"}
        for n in _fleet().nodes
    ]


def _placed(nodes: str, comment: str = "(null)", tres: str = "") -> str:
    return (
        f"JobId=31 JobState=RUNNING Reason=None NodeList={nodes} NumNodes=2 Features=(null) "
        f"AdminComment=(null) Comment={comment} StdErr=/dev/null {tres}"
    )


def _seconds(line: str, label: str) -> float:
    m = re.search(re.escape(label) + r": ([0-9.e+-]+) s per step", line)
    assert m, (label, line)
    return float(m.group(1))


def test_plan_from_the_comment_and_the_command_line() -> None:
    assert explain.plan_of_comment("locality=zone plan=tp=4,bytes=10G") == "tp=4,bytes=10G"
    assert explain.plan_of_comment("locality=zone") is None and explain.plan_of_comment("(null)") is None
    assert explain.job_plan("tp=2", "plan=tp=4", None) == ("tp=2", "from --plan")
    assert explain.job_plan(None, "plan=tp=4", None) == ("tp=4", "from the job's comment")
    assert explain.job_plan(None, None, _fleet()) == (None, None)  # the inventory's policy: has no plan (yet)


def test_gpus_per_node_from_the_jobs_tres() -> None:
    assert explain.job_gpus_per_node({"TresPerNode": "gres:gpu:2"}, 2) == 2
    assert explain.job_gpus_per_node({"TresPerNode": "gres/gpu:a100=3"}, 2) == 3
    assert explain.job_gpus_per_node({"AllocTRES": "cpu=32,mem=1G,node=2,billing=32,gres/gpu=6"}, 2) == 3
    assert explain.job_gpus_per_node({"AllocTRES": "cpu=32,gres/gpu=5"}, 2) is None  # uneven: ask the nodes
    assert explain.job_gpus_per_node({"TresPerNode": "(null)"}, 2) is None


def test_cost_of_a_job_across_two_zones_against_the_best_placements() -> None:
    """n07 (us-west-2a) + n10 (us-west-2b), 4 GPUs each, DP 8 over 10 GB: the ring's slowest hop is between
    zones of one region. On an idle fleet n07 + n08 share a network group; with n08, n11 and n06 busy the
    best free pair is n07 + n09 (one zone). The numbers are the model's ring formula for each level."""
    job = slurm_text.parse_record_line(_placed("n[07,10]", comment="plan=bytes=10G"))
    view = explain.predict_cost(job, _fleet(), _states(("n08", "n11", "n06")))
    head, actual, step, idle, now = view.lines[:5]
    assert head == "plan tp 1 × pp 1 × dp 8 on 2 nodes × 4 GPUs (from the job's comment: bytes=10G)", head
    ring = {lvl: ring_allreduce_seconds(8, 1e10, DEFAULT_TABLE[lvl]) for lvl in ("region", "zone")}
    ring["network_group"] = ring_allreduce_seconds(8, 1e10, DEFAULT_TABLE["network_group"])
    assert math.isclose(_seconds(actual, "predicted communication"), ring["region"], rel_tol=1e-3), actual
    assert "bottleneck: dp at region" in actual
    assert math.isclose(
        _seconds(idle, "best placement on an idle fleet"), ring["network_group"], rel_tol=1e-3
    )
    assert math.isclose(
        _seconds(now, "best placement free right now (with its own nodes)"), ring["zone"], rel_tol=1e-3
    ), now
    # the step: no compute= in the plan, so communication is the site default 25 % of the best step
    compute = ring["network_group"] * 3
    assert math.isclose(float(step.split()[2]), compute + ring["region"], rel_tol=1e-3), step
    assert "site default" in step and f"compute {compute:.4g} s" in step, step
    comm = round((ring["region"] / ring["network_group"] - 1) * 100)
    slower = round(((compute + ring["region"]) / (compute + ring["network_group"]) - 1) * 100)
    assert idle.endswith(
        f"(one network group); this placement's communication is {comm} % slower, its step {slower} % slower"
    ), idle
    assert view.nodes == ("n07", "n10") and view.best_now == ("n07", "n09")
    assert view.best_idle == ("n05", "n06")  # the first of the 2-node a100 network groups by name


def test_cost_lines_in_the_explanation_and_the_reasons_for_none() -> None:
    job_line = _placed("n[07,10]", comment="locality=prefer")
    nodes = "\n".join(
        f"NodeName={n} ActiveFeatures=region_us-west,zone_{z} State=ALLOCATED"
        for n, z in (("n07", "us-west-2a"), ("n10", "us-west-2b"))
    )
    answers = {
        ("scontrol", "show", "job", "-o", "31"): job_line,
        ("scontrol", "show", "node", "-o", "n[07,10]"): nodes,
        ("scontrol", "-d", "show", "node", "-o"): "\n".join(
            " ".join(f"{k}={v}" for k, v in r.items()) for r in _states()
        ),
    }
    text = explain.explain_job("31", FakeRunner(answers))
    assert "  cost:     no plan: pass --plan or submit with --comment=plan=" in text, text
    text = explain.explain_job("31", FakeRunner(answers), plan="bytes=10G")
    assert "  cost:     plan bytes=10G (from --plan); not predicted: give -i FILE" in text, text
    runner = FakeRunner(answers)
    text = explain.explain_job("31", runner, plan="bytes=10G", inventory=_fleet())
    lines = text.splitlines()
    i = lines.index("  cost:     plan tp 1 × pp 1 × dp 8 on 2 nodes × 4 GPUs (from --plan: bytes=10G)")
    assert lines[i + 1].startswith("            predicted communication: ") and text.endswith("% slower\n")
    assert ("scontrol", "-d", "show", "node", "-o") in runner.calls
    # a plan the model cannot use, a node the fleet lacks: one line each, no error
    text = explain.explain_job("31", FakeRunner(answers), plan="tp=3", inventory=_fleet())
    assert "not predicted: --tp 3 × --pp 1 = 3 does not divide the 8 GPUs" in text, text
    answers[("scontrol", "show", "job", "-o", "31")] = job_line.replace(
        "Comment=locality=prefer", "Comment=plan=tp=two"
    )
    text = explain.explain_job("31", FakeRunner(answers), inventory=_fleet())
    assert "  cost:     plan tp=two (from the job's comment); not predicted: plan tp='two'" in text, text
    answers[("scontrol", "show", "job", "-o", "31")] = job_line.replace("n[07,10]", "x[1-2]")
    answers[("scontrol", "show", "node", "-o", "x[1-2]")] = ""
    text = explain.explain_job("31", FakeRunner(answers), plan="bytes=1G", inventory=_fleet())
    assert "not predicted: node x1: not in the inventory" in text, text


def test_explain_svg_marks_the_jobs_nodes_and_the_best_placement(tmp_path: Path) -> None:
    job = slurm_text.parse_record_line(_placed("n[07,10]", comment="plan=bytes=10G"))
    view = explain.predict_cost(job, _fleet(), _states(("n08", "n11", "n06")))
    explanation = explain.explain_record(job, None)
    line = explain.write_overlay(_fleet(), explanation, view, str(tmp_path / "job.svg"))
    assert line.startswith(
        f"svg: {tmp_path / 'job.svg'} (job 31 on 2 nodes, best placement free right now (with its own nodes)"
    )
    root = ET.parse(tmp_path / "job.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    marked_job = {r.get("data-job") for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None}
    marked_best = {r.get("data-best") for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None}
    assert marked_job - {None} == {"n07", "n10"}
    assert marked_best - {None} == {"n07", "n09"} == set(view.best_now or ())
    # the cards (network groups) of those nodes are outlined and say so in their tooltip
    tips = [t.text or "" for g in root.iter(f"{ns}g") for t in g.findall(f"{ns}title")]
    assert sum("job 31: 1 node" in t for t in tips) == 2, tips
    both = [t for t in tips if t.startswith("rack-c1:")]
    assert both and both[0].endswith(
        "; job 31: 1 node; best placement free right now (with its own nodes): 1 node"
    ), both
    legend = [t.text for t in root.iter(f"{ns}text")][:2]
    assert legend[0] == "job 31: 2 nodes n[07,10]", legend


def test_cli_bad_plan_or_svg_without_fleet_is_one_line_before_slurm_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from slurm_topo.cli import main

    for argv, needle in (
        (["explain", "7", "--plan", "tp=x"], "plan tp='x': must be a whole number from 1"),
        (["explain", "7", "--svg", "out.svg"], "--svg needs the fleet: give -i FILE"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and needle in err, (argv, err)


def test_explain_svg_of_a_pending_job_marks_nothing_and_says_so(tmp_path: Path) -> None:
    pending = explain.explain_record(slurm_text.parse_record_line(HELD), None)
    line = explain.write_overlay(_fleet(), pending, None, str(tmp_path / "p.svg"))
    assert line == f"svg: {tmp_path / 'p.svg'} (job 2 has no nodes yet: nothing marked)"
    root = ET.parse(tmp_path / "p.svg").getroot()
    assert not [r for r in root.iter() if r.get("data-job") or r.get("data-best")]


def test_landed_names_the_nvlink_domains_and_an_nvl_split_is_broken() -> None:
    one = {
        "n1": ["region_r", "zone_r-a", "ng_r-a.ib-1", "nvl_rack-01"],
        "n2": ["region_r", "zone_r-a", "ng_r-a.ib-1", "nvl_rack-01"],
    }
    assert explain.landed(one) == "same network group r-a.ib-1; NVLink domain rack-01"
    assert explain.broken_locality("nvl:wait", one) is None
    split = {**one, "n4": ["region_r", "zone_r-a", "ng_r-a.ib-1", "nvl_rack-02"]}
    assert explain.landed(split) == "same network group r-a.ib-1; 2 NVLink domains (rack-01, rack-02)"
    assert explain.broken_locality("nvl", split) == (
        "locality nvl asks for one NVLink domain; the job's nodes are in 2 NVLink domains (rack-01, rack-02)"
    )
    partly = {**one, "c1": ["region_r", "zone_r-a", "ng_r-a.ib-1"]}
    assert explain.landed(partly).endswith("; NVLink domain rack-01 + 1 node in none")
    assert explain.broken_locality("nvl:fail", partly) is not None
    assert explain.landed({"c1": ["region_r"]}) == "same region r"  # no domains: nothing added


def test_explain_svg_without_a_plan_still_shows_the_node_states() -> None:
    """A job with no plan: no prediction, but the picture is drawn from the node states (not all grey)."""
    job = slurm_text.parse_record_line(_placed("n[07,10]"))
    view = explain.predict_cost(job, _fleet(), _states(("n08", "n11")))
    assert view.lines == (explain.NO_PLAN,)
    assert view.states is not None and view.states["n08"].kind == "allocated", view.states
    assert view.states["n01"].kind == "free"


def test_the_plan_of_sbatch_plan_comes_from_admin_comment_first() -> None:
    from slurm_topo.reports.explain import job_plan

    admin = "slurm-topo-plan: tp=2,dp=4,bytes=1G; slurm-topo: zone:wait [us-east-1a(4n)]"
    assert job_plan(None, "plan=bytes=9G", None, admin) == (
        "tp=2,dp=4,bytes=1G",
        "from the job's sbatch --plan",
    )
    assert job_plan("bytes=3G", "plan=bytes=9G", None, admin) == ("bytes=3G", "from --plan")
    assert job_plan(None, "plan=bytes=9G", None, "slurm-topo: zone:wait") == (
        "bytes=9G",
        "from the job's comment",
    )
    # only the filter's record counts: the words inside another record (an administrator's note) do not
    assert job_plan(None, None, None, "note slurm-topo-plan: bytes=5G") == (None, None)


# ---- heterogeneous jobs (sbatch A : B): every component, and where they landed together


def _component(job: int, offset: int, nodes: str, record: str, state: str = "RUNNING") -> str:
    """One component's ``scontrol show job -o`` line, keys in 22.05's order."""
    return (
        f"JobId={job + offset} HetJobId={job} HetJobOffset={offset} JobName=wrap HetJobIdSet={job}-{job + 1} "
        f"UserId=nobody(65534) Priority=1 JobState={state} Reason=None Partition=main NodeList={nodes} "
        f"NumNodes=2 Features=(null) AdminComment=slurm-topo: {record} StdErr=/dev/null"
    )


HET_RECORDS = ("zone:wait [us-west-2a(3n)]", "zone:wait [us-east-1a(4n)]")
"""A job bracketed component by component (before the filter refused a required level on one)."""
HET_NODES = {
    hosts: "\n".join(
        f"NodeName={n} AvailableFeatures={f} ActiveFeatures={f}"
        for n in names
        for f in (f"region_{region},zone_{zone},ng_{zone}.{rack}",)
    )
    for hosts, names, region, zone, rack in (
        ("n[07-08]", ("n07", "n08"), "us-west", "us-west-2a", "rack-c1"),
        ("n[01-02]", ("n01", "n02"), "us-east", "us-east-1a", "rack-a1"),
    )
}


def _het_answers() -> dict[tuple[str, ...], str]:
    c0 = _component(17, 0, "n[07-08]", HET_RECORDS[0])
    c1 = _component(17, 1, "n[01-02]", HET_RECORDS[1])
    return {
        ("scontrol", "show", "job", "-o", "17"): f"{c0}\n{c1}\n",
        ("scontrol", "show", "job", "-o", "17+1"): c1 + "\n",
        ("scontrol", "show", "job", "-o", "18"): c1 + "\n",
        **{("scontrol", "show", "node", "-o", k): v + "\n" for k, v in HET_NODES.items()},
    }


def test_explain_a_heterogeneous_job_shows_every_component_and_where_they_landed_together() -> None:
    """``explain 17`` of a heterogeneous job: one block per component (17+0, 17+1: its own request, decision
    and nodes), then, before them, where the components landed together; a required level the components
    break together is BROKEN although each component alone kept it."""
    text = explain.explain_job("17", FakeRunner(_het_answers()))
    lines = text.splitlines()
    assert lines[0] == (
        "job 17: heterogeneous, 2 components (17+0, 17+1), each placed on its own (Slurm matches a "
        "constraint per component)"
    ), text
    assert lines[1] == "  together: 2 regions (4 nodes)", text
    assert lines[2] == (
        "  BROKEN:   component 17+0: locality zone:wait asks for one zone; the components' nodes are in "
        "2 zones"
    ), text
    assert "job 17+0: RUNNING on n[07-08]" in lines and "job 17+1: RUNNING on n[01-02]" in lines, text
    assert "  decision: zone:wait [us-east-1a(4n)]" in lines, text
    assert "  landed:   same network group us-east-1a.rack-a1 (2 nodes)" in lines, text
    assert text.count("BROKEN") == 1, "each component alone is inside one zone"


def test_explain_a_component_by_name_or_by_its_own_id_shows_that_component() -> None:
    answers = _het_answers()
    one = explain.explain_job("17+1", FakeRunner(answers))
    assert one.splitlines()[0] == "job 17+1: RUNNING on n[01-02]" and "heterogeneous" not in one, one
    own = explain.explain_job("18", FakeRunner(answers))
    assert own.splitlines()[0] == "job 18: RUNNING on n[01-02]" and "heterogeneous" not in own, own


def _het_json(*offsets: int) -> str:
    """``squeue --json`` (v0.0.40+ numbers) listing components of the heterogeneous job 17."""
    import json

    places = {0: ("n[07-08]", HET_RECORDS[0]), 1: ("n[01-02]", HET_RECORDS[1])}
    num = {"set": True, "infinite": False}
    jobs = [
        {
            "job_id": 17 + k,
            "het_job_id": {**num, "number": 17},
            "het_job_offset": {**num, "number": k},
            "job_state": ["RUNNING"],
            "nodes": places[k][0],
            "admin_comment": f"slurm-topo: {places[k][1]}",
            "partition": "main",
        }
        for k in offsets
    ]
    return json.dumps({"jobs": jobs})


def test_explain_a_heterogeneous_job_read_as_json_asks_for_each_component(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``squeue --json`` records do not name the components: where squeue answers a name with that job
    alone, ``JOBID+1`` is asked for (only a component answers to it), then the next, until none answers;
    where it lists more (24.11 and later list every component; 22.05 every job) the access layer reads one
    job as scontrol's text from then on, and the job is read again so (the text names its components). No
    command that fails for a job without components is run."""
    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "json")
    squeue = ("squeue", "--json", "--states=all")
    one_by_one = {
        (*squeue, "--jobs=17"): _het_json(0),
        (*squeue, "--jobs=17+1"): _het_json(1),
        (*squeue, "--jobs=17+2"): _het_json(),
        **{k: v for k, v in _het_answers().items() if k[1] == "show" and k[2] == "node"},
    }
    every = {**_het_answers(), (*squeue, "--jobs=17"): _het_json(0, 1)}
    for answers in (one_by_one, every):
        runner = FakeRunner(answers)
        explanation, view = explain.explain_full("17", runner)
        assert [c.job_id for c in explanation.components] == ["17+0", "17+1"], runner.calls
        assert [c.nodes for c in explanation.components] == ["n[07-08]", "n[01-02]"]
        assert explanation.together == "2 regions (4 nodes)" and explanation.nodes == "n[07-08],n[01-02]"
        assert view is not None and view.lines == ()
        assert not any(c[-1].startswith(("17+", "--jobs=17+")) for c in runner.calls[1:] if "show" in c)
    # a job of one component: JOBID+1 answers nothing, and it is explained as ever
    single = '{"jobs": [{"job_id": 13, "job_state": ["PENDING"], "nodes": ""}]}'
    runner = FakeRunner({(*squeue, "--jobs=13"): single, (*squeue, "--jobs=13+1"): single})
    explanation, _ = explain.explain_full("13", runner)
    assert explanation.components == () and explanation.text().startswith("job 13: PENDING")


def test_explain_json_of_a_heterogeneous_job_nests_the_components(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from slurm_topo.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "SubprocessRunner", lambda: FakeRunner(_het_answers()))
    from slurm_topo.cli import main

    main(["explain", "--json", "17"])  # returns: exit 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["known"] is True and doc["job_id"] == "17" and doc["together"] == "2 regions (4 nodes)"
    assert [(c["job_id"], c["nodes"]) for c in doc["components"]] == [
        ("17+0", "n[07-08]"),
        ("17+1", "n[01-02]"),
    ]
