"""``slurm-topo explain`` on a segment job (issue 47): the filter's record ``nvl:wait segment=N [...]`` (or
``segment=N (yours)`` for the job's own ``--segment``) is judged by its segments, not by one NVLink domain:
every domain's share of the job's nodes a multiple of N. Real texts of Slurm 26.05 (``scontrol show job -d``
/ ``-o``, ``scontrol show node -o``, ``scontrol show topology nvl``) from
tests/integration/test_nvl_segment_on_real_slurm.py (tests/fixtures/real/slurm-26.05/segment-job/README.md);
the records of every form as the policy writes them; the judgement against an exhaustive split."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fakes import ScriptedRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_cases import FLEET

from slurm_topo import merge, parse_inventory
from slurm_topo.access.jobs import jobs_from_text
from slurm_topo.access.text import parse_job_detail, parse_nodes, parse_record_line
from slurm_topo.core import hostlist
from slurm_topo.policy import JobRequest, decide
from slurm_topo.render import make_context
from slurm_topo.reports import explain

CAPTURE = Path(__file__).parent / "fixtures" / "real" / "slurm-26.05" / "segment-job"


def _read(name: str) -> str:
    return (CAPTURE / name).read_text()


def _job(name: str) -> dict[str, str]:
    """The job of ``NAME-show-job-o.txt`` as explain's text backend reads it (refused: the test fails)."""
    listing = jobs_from_text(_read(f"{name}-show-job-o.txt"))
    assert not listing.refused and len(listing.jobs) == 1, listing
    return listing.jobs[0]


def _detail(name: str) -> tuple[tuple[str, ...], str]:
    """Slurm's own view from ``scontrol show job -d``: the job's nodes and its SegmentSize line."""
    text = _read(f"{name}-show-job-d.txt")
    size = next(x.strip() for x in text.splitlines() if x.strip().startswith("SegmentSize="))
    return parse_job_detail(text).nodes, size.partition("=")[2]


def _blocks() -> dict[str, str]:
    """node -> its block (NVLink domain), from Slurm's ``scontrol show topology nvl``."""
    out: dict[str, str] = {}
    for line in _read("show-topology-nvl.txt").splitlines():
        if line.startswith("BlockName="):
            kv = parse_record_line(line)
            for n in hostlist.expand(kv["Nodes"]):
                out[n] = kv["BlockName"].removeprefix("nvl_")
    return out


def _shares(nodes: Sequence[str]) -> dict[str, int]:
    block = _blocks()
    out: dict[str, int] = {}
    for n in nodes:
        out[block[n]] = out.get(block[n], 0) + 1
    return out


def test_the_real_segment_job_is_judged_by_its_segments_not_by_one_domain() -> None:
    """26.05's job ``--locality=nvl:segment=2 -N4`` on n[2-3,7-8]: the record's ``segment=2`` is Slurm's
    SegmentSize, no BROKEN (the false alarm of one domain is gone), and the segments line names every domain
    ``scontrol show topology nvl`` gives the job's nodes, with its share."""
    job = _job("segment")
    nodes, size = _detail("segment")
    features = parse_nodes(_read("segment-show-node-o.txt"))
    assert set(features) == set(nodes) == set(hostlist.expand(job["NodeList"]))
    got = explain.explain_record(job, features)
    assert got.segment == explain.Segment(int(size))
    assert got.broken is None, got
    shares = _shares(nodes)
    assert len(shares) > 1  # larger than one domain: the old reading flagged it
    assert got.segments is not None and got.segments.startswith(
        f"hold: {len(nodes)} nodes in segments of {size}, each inside one NVLink domain: "
    )
    for domain, share in shares.items():
        assert f"{domain} {share} nodes" in got.segments
    text = got.text()
    assert f"request:  locality nvl:wait segment={size} (as the filter read it)" in text
    assert "BROKEN" not in text and f"  segments: {got.segments}\n" in text
    # the one-domain reading of the same placement, for contrast: what explain used to say
    assert explain.broken_locality(got.locality, features) is not None


def test_the_users_own_segment_is_read_from_the_filters_yours_form() -> None:
    """``sbatch --segment=2 --locality=nvl -N4``: the filter records ``segment=2 (yours)`` and sets nothing;
    explain names it as the job's own and judges it alike."""
    job = _job("yours")
    nodes, size = _detail("yours")
    assert "(yours)" in job["AdminComment"]
    got = explain.explain_record(job, parse_nodes(_read("yours-show-node-o.txt")))
    assert got.segment == explain.Segment(int(size), yours=True)
    assert got.broken is None and got.segments is not None
    assert all(f"{d} {n} nodes" in got.segments for d, n in _shares(nodes).items())
    assert f"locality nvl:wait segment={size} (the job's own --segment) (as the filter read it)" in got.text()


def test_segments_that_straddle_a_domain_are_broken_naming_the_shares() -> None:
    """The segment job's record over the real control job's nodes (the same -N4 without a segment: the
    block plugin gave 1 + 3): BROKEN, naming each domain, its share and which shares are odd."""
    job = _job("segment")
    control_nodes = parse_job_detail(_read("control-show-job-d.txt")).nodes
    features = parse_nodes(_read("control-show-node-o.txt"))
    assert set(features) == set(control_nodes)
    got = explain.explain_record(job, features)
    assert got.segments is None and got.broken is not None
    shares = _shares(control_nodes)
    odd = [d for d, n in shares.items() if n % 2]
    assert odd
    assert got.broken.startswith(
        "locality nvl:wait segment=2 keeps each segment of 2 nodes in one NVLink domain"
    )
    for domain, share in shares.items():
        assert f"{domain} {share} node" in got.broken
    for domain in odd:
        assert f"{domain}'s {shares[domain]}" in got.broken
    assert "BROKEN:   locality nvl:wait segment=2" in got.text()


# ---- the record's head: the filter's words only


def _policy():  # type: ignore[no-untyped-def]
    return make_context(merge([parse_inventory(FLEET)]), (26, 5)).policy


POLICY = _policy()


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 3),
    count=st.integers(2, 3),
    policy=st.sampled_from(["", ":spread", ":consolidate"]),
    mode=st.sampled_from(["", ":wait", ":fail"]),
    own=st.booleans(),
)
def test_every_segment_record_the_policy_writes_is_read_back(
    size: int, count: int, policy: str, mode: str, own: bool
) -> None:
    """Whatever form the filter's twin writes (spread/consolidate, wait/fail, the job's own ``--segment``),
    explain reads the size, the form and the policy back from the record alone."""
    nodes = size * count if size * count > 3 else size * (count + 2)  # larger than every domain (3 nodes)
    locality = f"nvl:segment={size}{policy}{mode}" if not own else f"nvl{mode}"
    req = JobRequest(locality=locality, min_nodes=nodes, segment_ok=True, user_segment=size if own else None)
    d = decide(POLICY, req)
    assert d.action != "reject" and d.record is not None, d
    record = explain.filter_record(d.record)
    want = explain.Segment(size, own, None if own else (policy[1:] or None))
    assert explain.segment_of_record(record) == want, record
    assert explain.locality_of_record(record or "") == f"nvl:{mode[1:] or 'wait'}"


def test_a_bound_tag_between_head_and_list_is_read() -> None:
    record = (
        "nvl:fail segment=4 [bound: 2 walks cut] [8 nodes in segments of 4, each in one NVLink domain; x]"
    )
    assert explain.segment_of_record(record) == explain.Segment(4)


FORGED = "nvl:wait segment=2 [4 nodes in segments of 2, each in one NVLink domain; largest rack-01(3n)]"


def test_a_users_fields_cannot_forge_the_segment() -> None:
    """The segment is read only at the head of the filter's record: a job name, comment or partition name
    (the record's note) carrying the segment text makes no segment; a record whose size and list disagree,
    or with a form the filter never writes, is none either."""
    control = _job("control")  # the real record: slurm-topo: any
    features = parse_nodes(_read("control-show-node-o.txt"))
    forged = {**control, "JobName": FORGED, "Comment": f"locality=nvl:wait {FORGED}"}
    got = explain.explain_record(forged, features)
    assert got.segment is None and got.locality == "any" and got.segments is None
    note = f"slurm-topo: nvl:wait [rack-01(3n)]; partition '{FORGED}' not in the data: all nodes counted"
    assert explain.segment_of_record(explain.filter_record(note)) is None
    held = explain.explain_record({**control, "AdminComment": note}, features)
    assert held.segment is None and held.broken is not None  # one domain asked, 2 given
    for bad in (
        " " + FORGED,
        FORGED.replace("segments of 2", "segments of 3"),
        FORGED.replace("segment=2", "segment=2 (yours):spread"),
        FORGED.replace("segment=2", "segment=02"),
        FORGED.replace("nvl:wait", "zone:wait"),
    ):
        assert explain.segment_of_record(bad) is None, bad


def test_a_line_whose_user_text_carries_an_admin_comment_is_refused_not_read() -> None:
    """scontrol's text: a SubmitLine (the user's sbatch words) carrying ``AdminComment=slurm-topo: …``
    before the real AdminComment makes the record ambiguous: the text reader refuses the job, so explain
    never reads the forged record."""
    line = _read("control-show-job-o.txt")
    forged = line.replace(" WorkDir=", f" AdminComment=slurm-topo: {FORGED} WorkDir=", 1)
    assert forged != line
    listing = jobs_from_text(forged)
    assert not listing.jobs and [j for j, _ in listing.refused] == [_job("control")["JobId"]]


def test_a_comment_locality_without_a_record_is_judged_by_its_segment() -> None:
    """No filter record (a client without the plugin, a filter that did not run): ``--comment`` says
    ``locality=nvl:segment=2``; explain judges the placement by that segment and says the locality's
    source."""
    control = _job("control")
    features = parse_nodes(_read("control-show-node-o.txt"))
    job = {**control, "AdminComment": "(null)", "Comment": "locality=nvl:segment=2:spread"}
    got = explain.explain_record(job, features)
    assert got.locality_source == "from --comment" and got.segment == explain.Segment(2, policy="spread")
    assert got.broken is not None and "segment=2:spread keeps each segment of 2" in got.broken
    bad = explain.explain_record({**job, "Comment": "locality=nvl:segment=0"}, features)
    assert bad.segment is None


# ---- the judgement against an exhaustive split


def _splits(nodes: Sequence[str], domain: Mapping[str, str | None], size: int) -> bool:
    """Whether ``nodes`` can be cut into groups of ``size``, each in one NVLink domain (all ways tried)."""
    if not nodes:
        return True
    first, rest = nodes[0], nodes[1:]
    if domain[first] is None:
        return False
    for others in itertools.combinations(rest, size - 1):
        if all(domain[o] == domain[first] for o in others):
            left = [n for n in rest if n not in others]
            if _splits(left, domain, size):
                return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    placement=st.lists(st.sampled_from(["rack-01", "rack-02", "rack-10", None]), min_size=1, max_size=8),
    size=st.integers(1, 4),
    extra=st.sampled_from([(), ("ib",), ("nvl_rack-01.torch-2.4",)]),
)
def test_the_segments_hold_exactly_when_the_nodes_split_into_segments_each_in_one_domain(
    placement: list[str | None], size: int, extra: tuple[str, ...]
) -> None:
    nodes = [f"n{i}" for i in range(len(placement))]
    domain = dict(zip(nodes, placement, strict=True))
    features = {
        n: (*((f"nvl_{d}",) if d else ()), "zone_z1", *(extra if d == "rack-01" else ()))
        for n, d in domain.items()
    }
    holds, broken = explain.judge_segments("nvl:wait", explain.Segment(size), features)
    assert (holds is not None) == _splits(nodes, domain, size) == (broken is None)
    text = holds or broken or ""
    for d in {d for d in placement if d}:
        share = placement.count(d)
        assert f"{d} {share} node{'s' if share > 1 else ''}" in text
    if None in placement:
        assert f"{placement.count(None)} node" in text and "in no NVLink domain" in text


# ---- a heterogeneous job: a segment component is judged on its own nodes


def _component(offset: int, nodes: str, record: str) -> str:
    """One component's ``scontrol show job -o`` line, keys in 22.05's order (as tests/test_explain.py)."""
    return (
        f"JobId={17 + offset} HetJobId=17 HetJobOffset={offset} JobName=wrap HetJobIdSet=17-18 "
        f"UserId=nobody(65534) Priority=1 JobState=RUNNING Reason=None Partition=main NodeList={nodes} "
        f"NumNodes=2 Features=(null) AdminComment=slurm-topo: {record} StdErr=/dev/null"
    )


def test_a_segment_component_holds_on_its_own_nodes_whatever_the_others_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sbatch --locality=nvl:segment=2 -N4 : --locality=any -N1``: component 0's segments hold on its own
    nodes (2 + 2); together with component 1's node domain b holds 3, which is no segment's business: no
    BROKEN for the whole job."""
    c0 = _component(0, "n[01-04]", FORGED.replace("rack-01", "a"))
    c1 = _component(1, "n05", "any")
    feats = {"n01": "a", "n02": "a", "n03": "b", "n04": "b", "n05": "b"}

    def nodes(names: Sequence[str]) -> str:
        return "".join(
            f"NodeName={n} AvailableFeatures=zone_z,nvl_{feats[n]} ActiveFeatures=zone_z,nvl_{feats[n]}\n"
            for n in names
        )

    monkeypatch.setenv("SLURM_TOPO_SLURM_BACKEND", "text")  # the fake answers scontrol's text
    runner = ScriptedRunner(
        {
            ("scontrol", "show", "job", "-o", "17"): f"{c0}\n{c1}\n",
            ("scontrol", "show", "node", "-o", "n[01-04]"): nodes(["n01", "n02", "n03", "n04"]),
            ("scontrol", "show", "node", "-o", "n05"): nodes(["n05"]),
        }
    )
    text = explain.explain_job("17", runner)
    assert "BROKEN" not in text, text
    assert (
        "  segments: hold: 4 nodes in segments of 2, each inside one NVLink domain: a 2 nodes, b 2 nodes"
        in text
    )
    assert "  together: same zone z; 2 NVLink domains (a, b) (5 nodes)" in text, text


def test_explain_json_carries_the_segment_and_the_segments_line() -> None:
    """``explain --json`` is the explanation's fields (``dataclasses.asdict``): the segment as an object."""
    job = _job("yours")
    got = explain.explain_record(job, parse_nodes(_read("yours-show-node-o.txt")))
    doc = json.loads(json.dumps(dataclasses.asdict(got)))
    assert doc["segment"] == {"size": 2, "yours": True, "policy": None}
    assert doc["segments"] == got.segments and doc["broken"] is None
