"""The locality policy's behaviour, case by case (the Python reference; parity with Lua is tested
separately)."""

from __future__ import annotations

import pytest
from policy_cases import PARTITIONS, inventory, job, job_record

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.policy import (
    MAX_ALTERNATIVES,
    JobRequest,
    Partition,
    decide,
    decide_modify,
    parse_constraint,
    parse_gpu_tres,
)
from slurm_topo.render import make_context


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    return make_context(inventory(), (22, 5), PARTITIONS).policy


def run(data, **kw):  # type: ignore[no-untyped-def]
    locality = kw.pop("locality", None)
    return decide(data, JobRequest.from_job_desc(job(locality, **kw)))


def test_zone_required_lists_fitting_zones_smallest_first(data) -> None:  # type: ignore[no-untyped-def]
    """zone with 3 nodes: every zone of >= 3 nodes, smallest first, as one matching-OR bracket."""
    d = run(data, locality="zone", min_nodes=3)
    assert d.action == "amend"
    assert d.features == "[zone_us-west-2a|zone_us-east-1a]"
    # ... and a --prefer whose alternatives all lie inside one of those zones: finer groups first
    assert d.prefer == "[ng_us-east-1a.rack-a1|zone_us-west-2a|zone_us-east-1a]"


def test_required_region_prefers_finer_groups_inside_the_regions_it_allows(data) -> None:  # type: ignore[no-untyped-def]
    """region with 2 nodes: the constraint keeps the region bracket (smallest first); the --prefer lists the
    racks, then the zones, then the regions, each inside one region of the bracket and with the same hard
    part."""
    d = run(data, locality="region", min_nodes=2, features="torch-2.4|ib")
    assert d.features == "(torch-2.4|ib)&[region_us-east|region_us-west]"
    assert d.prefer == (
        "(torch-2.4|ib)&[ng_us-east-1b.rack-b1|ng_us-west-2a.rack-c1|ng_us-west-2b.rack-d1|"
        "ng_us-east-1a.rack-a1|zone_us-east-1b|zone_us-west-2b|zone_us-west-2a|zone_us-east-1a|region_us-east|"
        "region_us-west]"
    )
    # a region outside the bracket never appears: the east partition has only us-east
    d = run(data, locality="region", min_nodes=2, partition="east")
    assert d.features == "[region_us-east]"
    assert d.prefer is not None and "west" not in d.prefer and d.prefer.endswith("|region_us-east]")
    # the user's own --prefer is kept; a network_group has nothing finer
    assert run(data, locality="region", min_nodes=2, prefer="ib").prefer is None
    assert run(data, locality="network_group", min_nodes=2).prefer is None


def test_user_and_constraint_is_kept_in_front(data) -> None:  # type: ignore[no-untyped-def]
    """An &-list constraint is ANDed in front, and only nodes with those features are counted."""
    d = run(data, locality="zone", min_nodes=2, features="ib&torch-2.4")
    assert d.features == "ib&torch-2.4&[zone_us-east-1a]"  # n01-n03 are the only ib+torch-2.4 nodes


def test_user_or_constraint_is_parenthesised(data) -> None:  # type: ignore[no-untyped-def]
    """A |-list is wrapped in parentheses before the bracket."""
    d = run(data, locality="region", min_nodes=2, features="ib|torch-2.3")
    assert d.features == "(ib|torch-2.3)&[region_us-east]"


def test_impossible_fail_rejects_naming_level_request_and_largest(data) -> None:  # type: ignore[no-untyped-def]
    """zone:fail for 7 nodes: rejected, naming the level, the request and the largest zone with its size."""
    d = run(data, locality="zone:fail", min_nodes=7)
    assert d.action == "reject"
    assert d.message == (
        "slurm-topo: --locality=zone:fail: no zone can ever hold 7 nodes; the largest is "
        "us-east-1a with 4 nodes (32 GPUs)"
    )


def test_impossible_wait_holds_with_the_same_reason(data) -> None:  # type: ignore[no-untyped-def]
    """zone:wait for 7 nodes: held, never given a bracket Slurm would reject, reason sent and recorded."""
    d = run(data, locality="zone", min_nodes=7)
    assert d.action == "hold" and d.features is None
    assert "no zone can ever hold 7 nodes" in (d.message or "") and "held" in d.record


def test_gpu_request_counts_only_nodes_of_that_type(data) -> None:  # type: ignore[no-untyped-def]
    """16 h100 GPUs need 2 h100 nodes in one zone: only us-east-1a has them."""
    d = run(data, locality="zone:fail", tres_per_job="gres/gpu:h100:16")
    assert d.features == "[zone_us-east-1a]"
    d = run(data, locality="zone:fail", tres_per_job="gres:gpu:a100:12")
    assert d.features == "[zone_us-west-2a]"  # 3 a100 nodes x 4; us-east-1b has only 8 a100 GPUs


def test_per_node_gpus_exclude_smaller_nodes(data) -> None:  # type: ignore[no-untyped-def]
    """--gpus-per-node 8 on 2 nodes: only nodes with 8 GPUs count."""
    d = run(data, locality="network_group:fail", tres_per_node="gres:gpu:8", min_nodes=2)
    assert d.features == "[ng_us-east-1a.rack-a1]"


def test_prefer_cascades_over_every_level_that_fits_and_never_sets_features(data) -> None:  # type: ignore[no-untyped-def]
    """prefer for 4 nodes: no rack holds 4, so the cascade starts at zone level (smallest first), then the
    unions of zones of one region that hold 4 (us-west: 2a+2c = 4 nodes, 2a+2b = 5; us-east's 1a+1b is the
    whole region, its own alternative), then the regions, then unions across regions: in prefer only, so the
    job lands on the fewest regions, then zones, that have room now."""
    d = run(data, locality="prefer", min_nodes=4)
    assert d.features is None
    assert d.prefer is not None and d.prefer.startswith(
        "[zone_us-east-1a|(zone_us-west-2a|zone_us-west-2c)|(zone_us-west-2a|zone_us-west-2b)|region_us-east|"
        "region_us-west|("
    )
    size = {"us-east-1a": 4, "us-east-1b": 2, "us-west-2a": 3, "us-west-2b": 2, "us-west-2c": 1}
    across = d.prefer[d.prefer.index("region_us-west|") + len("region_us-west|") : -1].split(")|(")
    for union in across:
        zones = [z.removeprefix("zone_") for z in union.strip("()").split("|")]
        assert {z[:7] for z in zones} == {"us-east", "us-west"} and sum(size[z] for z in zones) >= 4, union
    spans = [union.count("|") + 1 for union in across]
    assert spans == sorted(spans)  # fewest zones first
    assert d.level == "zone" and d.record.startswith("slurm-topo: prefer zone+region+unions [us-east-1a(4n),")
    d = run(data, locality="prefer", min_nodes=2, features="ib")
    # only us-east-1a has ib; its NVLink domain nvl-a (n01-n03) first: prefer tries one domain first
    assert d.prefer == "ib&[nvl_nvl-a|ng_us-east-1a.rack-a1|zone_us-east-1a|region_us-east]"
    assert d.level == "nvl" and d.record.startswith("slurm-topo: prefer nvl+network_group+zone+region ")
    d = run(data, locality="prefer", min_nodes=6)
    assert d.prefer is not None and d.prefer.startswith("[region_us-east|region_us-west|(zone_us-east-1a|")


def test_prefer_cascade_with_families_ends_with_the_bare_values_largest_first() -> None:
    """With families: each level's buckets (finest first) with unions of one value's zone buckets between the
    zones and the regions (inside one region) and after the regions (across regions), then the bare family
    values, largest first: a job that no bucket can hold now keeps one torch version and still lands on the
    fewest regions, then zones, of that version."""
    ctx = make_context(inventory(families=True), (22, 5), PARTITIONS)
    d = decide(ctx.policy, JobRequest(locality="prefer", min_nodes=3))
    assert d.prefer is not None
    alts = _alternatives(d.prefer)
    assert alts[:2] == ["ng_us-east-1a.rack-a1.torch-2.4", "zone_us-east-1a.torch-2.4"]
    r_east, r_west = alts.index("region_us-east.torch-2.4"), alts.index("region_us-west.torch-2.4")
    assert r_west == r_east + 1 and alts[-1] == "torch-2.4"
    # us-west's torch-2.4 zones: 2a (n07, n08), 2b (n10, n11), 2c (n12); unions of two that hold 3, fewest
    # nodes first (a cut keeps the largest, they are listed smallest first); us-east's 1a+1b is the whole
    # region (its own alternative): no union
    assert alts[2:r_east] == [
        "(zone_us-west-2a.torch-2.4|zone_us-west-2c.torch-2.4)",
        "(zone_us-west-2b.torch-2.4|zone_us-west-2c.torch-2.4)",
        "(zone_us-west-2a.torch-2.4|zone_us-west-2b.torch-2.4)",
    ]
    across = alts[r_west + 1 : -1]
    assert across and "kept" in d.record  # 1,024 characters: the across tail is cut, never the bare value
    spans = []
    for union in across:
        zones = union.strip("()").split("|")
        assert all(z.startswith("zone_") and z.endswith(".torch-2.4") for z in zones), union
        assert {z[5:12] for z in zones} == {"us-east", "us-west"}, union
        spans.append(len(zones))
    assert spans == sorted(spans)  # fewest zones first
    assert d.record.startswith("slurm-topo: prefer network_group+zone+region+family+unions ")
    d = decide(ctx.policy, JobRequest(locality="prefer", min_nodes=2, partition="east"))
    assert d.prefer == (
        "[ng_us-east-1b.rack-b1.torch-2.4|ng_us-east-1a.rack-a1.torch-2.4|zone_us-east-1b.torch-2.4|"
        "zone_us-east-1a.torch-2.4|region_us-east.torch-2.4|torch-2.4]"
    )
    d = decide(ctx.policy, JobRequest(locality="prefer", min_nodes=1, features="torch-2.3"))
    assert d.prefer == (
        "torch-2.3&[ng_us-east-1a.rack-a2.torch-2.3|ng_us-west-2a.rack-c2.torch-2.3|zone_us-east-1a.torch-2.3|"
        "zone_us-west-2a.torch-2.3|region_us-east.torch-2.3|region_us-west.torch-2.3|torch-2.3]"
    )
    # one torch-2.3 node per region: only the bare value holds 2 (a union of both zones would be the same
    # nodes: not made)
    d = decide(ctx.policy, JobRequest(locality="prefer", min_nodes=2, features="torch-2.3"))
    assert d.prefer == "torch-2.3&[torch-2.3]"
    d = decide(ctx.policy, JobRequest(locality="prefer", min_nodes=11))  # no version has 11 nodes
    assert d.action == "unchanged" and d.prefer is None


def test_family_unions_never_join_two_values() -> None:
    """A zone holding both versions: its torch-2.3 and torch-2.4 buckets are never in one union, inside a
    region or across."""
    doc = (
        "nodes:\n"
        + "".join(
            f"  - {{name: n{i:02d}, region: r{i // 6}, zone: r{i // 6}-{'ab'[i // 3 % 2]}, "
            f"features: [torch-2.{3 + i % 2}]}}\n"
            for i in range(12)
        )
        + "policy: {families: {torch: 'torch-*'}}\n"
    )
    data = make_context(merge([parse_inventory(doc)]), (22, 5)).policy
    for n in (2, 3, 4, 5):
        d = decide(data, JobRequest(locality="prefer", min_nodes=n))
        assert d.prefer is not None, n
        unions = [a for a in _alternatives(d.prefer) if a.startswith("(")]
        assert unions, n
        for union in unions:
            values = {z.rsplit(".", 1)[1] for z in union.strip("()").split("|")}
            assert len(values) == 1, union


TWO_VALUES = [
    ("us", "us-1a", "torch-2.4", 8),
    ("eu", "eu-1a", "torch-2.4", 4),
    ("eu", "eu-1b", "torch-2.4", 2),
    ("ap", "ap-1a", "torch-2.4", 3),
    ("eu", "eu-1a", "torch-2.3", 3),
    ("eu", "eu-1b", "torch-2.3", 2),
    ("eu", "eu-1c", "torch-2.3", 3),
    ("us", "us-1b", "torch-2.3", 3),
]
"""The uneven benchmark fleet's values: torch-2.4 on three regions, torch-2.3 (smaller) on two."""


def two_values_doc() -> str:
    rows, i = [], 0
    for region, zone, value, n in TWO_VALUES:
        for _ in range(n):
            rows.append(f"  - {{name: n{i:02d}, region: {region}, zone: {zone}, features: [{value}]}}\n")
            i += 1
    return "nodes:\n" + "".join(rows) + "policy: {families: {torch: 'torch-*'}}\n"


def test_a_value_on_two_regions_comes_before_another_values_unions_of_three() -> None:
    """The bracket's tail (unions across regions, the bare values) goes by the regions, then zones, each
    spans: torch-2.3, all of it on two regions, before torch-2.4's unions of three regions; torch-2.4 itself
    (three regions, four zones) after its 3-zone unions (placement.md, "Families", the 8-node misses)."""
    data = make_context(merge([parse_inventory(two_values_doc())]), (22, 5)).policy
    region_of = {zone: region for region, zone, _, _ in TWO_VALUES}
    d = decide(data, JobRequest(locality="prefer", min_nodes=8))
    assert d.prefer is not None
    alts = _alternatives(d.prefer)
    spans = {"torch-2.3": (2, 4), "torch-2.4": (3, 4)}
    for a in alts:
        if a.startswith("("):
            zones = [z.split(".")[0].removeprefix("zone_") for z in a.strip("()").split("|")]
            spans[a] = (len({region_of[z] for z in zones}), len(zones))
    tail = alts[alts.index(next(a for a in alts if a in spans and spans[a][0] >= 2)) :]
    assert tail[-1] == "torch-2.4" and "torch-2.3" in tail, d.prefer
    assert [spans[a] for a in tail] == sorted(spans[a] for a in tail), d.prefer
    three = [a for a in tail if a.startswith("(") and spans[a][0] == 3]
    assert three and tail.index("torch-2.3") < tail.index(three[0]), d.prefer


def _alternatives(prefer: str) -> list[str]:
    """The matching-OR bracket's alternatives, a parenthesised union as one."""
    out, depth, cur = [], 0, ""
    for ch in prefer[prefer.index("[") + 1 : prefer.rindex("]")]:
        if ch == "|" and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return [*out, cur]


def test_prefer_cascade_at_slurms_limits_drops_the_finest_tail_and_keeps_the_regions() -> None:
    """100 racks of 2 in 2 zones of 2 regions: the cascade is cut to 64 alternatives by dropping racks from
    the tail; every zone and region stays, in order, and the record says it was cut."""
    doc = "nodes:\n" + "".join(
        f"  - {{name: 'x{i:03d}-[1-2]', region: r{i % 2}, zone: r{i % 2}-a, network_group: g{i:03d}}}\n"
        for i in range(100)
    )
    data = make_context(merge([parse_inventory(doc)]), (22, 5)).policy
    d = decide(data, JobRequest(locality="prefer", min_nodes=2))
    assert d.prefer is not None
    alts = d.prefer[1:-1].split("|")
    assert len(alts) == MAX_ALTERNATIVES and len(d.prefer) <= 1024 and "kept" in d.record
    assert alts[-4:] == ["zone_r0-a", "zone_r1-a", "region_r0", "region_r1"]
    assert all(a.startswith("ng_") for a in alts[:-4])
    # long names: the 1,024-character limit cuts racks, never the regions
    doc = "nodes:\n" + "".join(
        f"  - {{name: 'y{i:02d}', region: 'r{i % 3}{'q' * 50}', zone: 'z{i:02d}{'q' * 55}', features: [a]}}\n"
        for i in range(40)
    )
    data = make_context(merge([parse_inventory(doc)]), (22, 5)).policy
    d = decide(data, JobRequest(locality="prefer", features="a"))
    assert d.prefer is not None and len(d.prefer) <= 1024 and "kept" in d.record
    assert sum(a.startswith("region_") for a in d.prefer[3:-1].split("|")) == 3


def test_prefer_larger_than_every_group_is_left_alone(data) -> None:  # type: ignore[no-untyped-def]
    """prefer for 13 nodes: no group can ever hold it, so prefer is not touched (Slurm would reject it)."""
    d = run(data, locality="prefer", min_nodes=13)
    assert d.action == "unchanged" and d.prefer is None


@pytest.mark.parametrize(
    "kw",
    [
        {"prefer": "ib"},
        {"features": "[zone_us-east-1a|zone_us-west-2a]"},
        {"features": "(ib|torch-2.3)&torch-2.4"},
    ],
    ids=["user prefer", "brackets", "parens"],
)
def test_prefer_leaves_complex_jobs_alone(data, kw) -> None:  # type: ignore[no-untyped-def]
    """prefer does not touch a job with its own --prefer, brackets or parentheses."""
    assert run(data, locality="prefer", min_nodes=2, **kw).action == "unchanged"


def test_any_leaves_the_job_alone(data) -> None:  # type: ignore[no-untyped-def]
    """any: unchanged whatever the size."""
    assert run(data, locality="any", min_nodes=50).action == "unchanged"


def test_user_bracket_of_the_same_level_is_intersected(data) -> None:  # type: ignore[no-untyped-def]
    """zone with the user's own zone bracket: only the user's zones that fit, in our order."""
    d = run(data, locality="zone", min_nodes=3, features="[zone_us-east-1b|zone_us-east-1a|zone_us-west-2a]")
    assert d.features == "[zone_us-west-2a|zone_us-east-1a]"


def test_user_bracket_of_another_level_conflicts(data) -> None:  # type: ignore[no-untyped-def]
    """zone with a bracket over racks, or Slurm's count syntax: a required level cannot be enforced with it,
    so every mode refuses at submit saying why (never passed through unenforced); prefer passes it."""
    feats = "[ng_us-east-1a.rack-a1|ng_us-west-2a.rack-c1]"
    for loc in ("zone", "zone:fail", "zone:auto"):
        d = run(data, locality=loc, features=feats)
        assert (d.action, d.rejection) == ("reject", "request") and "not all zone groups" in (d.message or "")
        assert (d.message or "").endswith(
            "; a required locality cannot be enforced with it: drop the brackets or counts, or use "
            "--locality=prefer"
        ), d.message
    counts = "[zone_us-east-1a*2&zone_us-west-2a*2]"
    for loc in ("zone", "region:wait", "zone:auto", "network_group:fail", "nvl"):
        d = run(data, locality=loc, features=counts, min_nodes=4)
        assert d.action == "reject" and "cannot be combined" in (d.message or ""), (loc, d)
    assert run(data, locality="prefer", features=counts, min_nodes=4).action != "reject"


def test_partition_default_and_membership(data) -> None:  # type: ignore[no-untyped-def]
    """Partition defaults apply when the job names none; only the partition's nodes count."""
    assert run(data, partition="cpu").record == "slurm-topo: any"
    d = run(data, partition="strict", min_nodes=5)
    assert d.action == "reject"  # strict's default is zone:fail
    d = run(data, locality="zone", partition="east", min_nodes=2)
    assert d.features == "[zone_us-east-1b|zone_us-east-1a]"


def test_a_partition_an_inventory_only_data_set_does_not_know_counts_every_node() -> None:
    """`-p main` when the data file knows no partitions at all (generated from the inventory alone): every
    node counts, the locality applies, and the record says why. Never a no-op."""
    data = make_context(inventory(), (22, 5), None).policy
    d = run(data, locality="zone", partition="main", min_nodes=3)
    assert d.action == "amend" and d.features == "[zone_us-west-2a|zone_us-east-1a]", d
    assert "partition 'main' not in the data: all nodes counted" in d.record
    d = run(data, locality="zone:fail", partition="main", min_nodes=5)
    assert d.action == "reject" and "the largest is us-east-1a with 4 nodes" in (d.message or "")
    d = run(data, locality="zone", partition="gpu,main", min_nodes=3)
    assert d.features == "[zone_us-west-2a|zone_us-east-1a]", d


def test_a_partition_created_after_the_data_gets_a_slurm_topo_message_never_a_bracket() -> None:
    """The data knows the partitions, not 'main' (created after the last apply): a required level is refused
    with a message naming the partition and what to do, never a bracket of groups that may lie outside it
    (Slurm's generic "Requested node configuration is not available"); prefer and any pass as before."""
    data = make_context(inventory(), (22, 5), PARTITIONS).policy
    for loc in ("zone", "zone:fail", "region:auto", "network_group"):
        d = run(data, locality=loc, partition="main", min_nodes=3)
        assert (d.action, d.rejection, d.features) == ("reject", "request", None), d
        assert "partition 'main' is not in slurm-topo's data" in (d.message or "") and "apply" in (
            d.message or ""
        )
    d = run(data, locality="zone", partition="gpu,main", min_nodes=3)
    assert d.action == "reject", d
    assert run(data, locality="prefer", partition="main", min_nodes=3).action != "reject"
    assert run(data, locality="any", partition="main", min_nodes=3).action != "reject"


def test_check_with_an_unknown_partition_applies_the_locality(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`slurm-topo check -p main` on an inventory-only data set: the bracket, not a silent no-op."""
    from click.testing import CliRunner
    from policy_cases import FLEET, POLICY

    from slurm_topo.cli import cli

    inv = tmp_path / "fleet.yaml"
    inv.write_text(FLEET + POLICY)
    r = CliRunner().invoke(cli, ["check", "-i", str(inv), "--locality", "zone", "-N", "3", "-p", "main"])
    assert r.exit_code == 0, r.output
    assert "features: [zone_us-west-2a|zone_us-east-1a]" in r.output
    assert "partition 'main' not in the data: all nodes counted" in r.output


def test_fit_is_not_checked_with_a_nodelist(data) -> None:  # type: ignore[no-untyped-def]
    """With --nodelist the fit is not checked (the record says so), and the bracket is the one group the named
    nodes are in: the job's other nodes come from it too (Slurm would otherwise take another alternative
    beside the named nodes)."""
    d = run(data, locality="zone", min_nodes=9, req_nodes="n[01-04]")
    assert d.action == "amend" and d.features == "[zone_us-east-1a]", d
    assert "fit not checked (--nodelist)" in d.record and d.message is None
    d = run(data, locality="region", min_nodes=9, req_nodes="n[01-04]")
    assert d.features == "[region_us-east]" and d.prefer and d.prefer.endswith("|region_us-east]"), d
    # named nodes outside the partition: the bracket is left whole (Slurm refuses the nodes itself)
    assert (
        run(data, locality="zone", min_nodes=2, req_nodes="n01", partition="cpu").features
        != "[zone_us-east-1a]"
    )


@pytest.mark.parametrize("mode", ["wait", "fail"])
def test_nodelist_that_already_breaks_the_level_is_refused(data, mode: str) -> None:  # type: ignore[no-untyped-def]
    """`--locality=zone -N2 --nodelist=n01,n12`: the named nodes are in two zones (and two regions), so the
    job would run across them: refused at submit, naming both. Within one zone it is accepted; --exclude gets
    a note that the level is not checked for it."""
    d = run(data, locality=f"zone:{mode}", min_nodes=2, req_nodes="n01,n12")
    assert d.action == "reject" and d.rejection == "request", d
    assert "in more than one zone (zone_us-east-1a, zone_us-west-2c)" in (d.message or "")
    d = run(data, locality=f"region:{mode}", min_nodes=2, req_nodes="n[05-06],n01")
    assert d.action == "amend" and d.message is None, d
    d = run(data, locality=f"network_group:{mode}", min_nodes=2, req_nodes="n[01-02],n12")
    assert d.action == "reject" and "in no network_group" in (d.message or ""), d
    d = run(data, locality=f"zone:{mode}", min_nodes=2, exc_nodes="n01")
    assert d.action == "amend" and "with --exclude" in (d.message or ""), d
    assert run(data, locality="prefer", min_nodes=2, req_nodes="n01,n12").action == "amend"


# Every hostlist form Slurm reads for a node list (issue 43: ``h1[8],h0[2]`` and the like escaped): read as
# Slurm reads it, so nodes of two zones are refused whatever the spelling.
ACROSS_ZONES = [
    "n01,n12",
    "n01 n12",
    "n01\tn12",
    "n01\nn12",
    "n01, n12",
    " n01 ,, n12 ",
    "n0[1],n1[2]",
    "n0[1-1],n12",
    "n01,n1[2]",
    "n[01,12]",
    "n[01-02,12]",
    "n[1-1][2-2],n01",  # two brackets: n12
    "n[0-1][1-2]",  # n01 n02 n11 n12
    "n[01],n[12]",
    "n1[2],n0[1]",
    "n[01-01,12-12]",
]
"""Spellings of n01 (us-east-1a) and n12 (us-west-2c)."""


@pytest.mark.parametrize("nodes", ACROSS_ZONES)
@pytest.mark.parametrize("level", ["zone", "region:fail", "nvl"])
def test_every_hostlist_form_across_the_level_is_refused(data, nodes: str, level: str) -> None:  # type: ignore[no-untyped-def]
    d = run(data, locality=level, min_nodes=2, req_nodes=nodes)
    assert d.action == "reject" and d.rejection == "request", (nodes, d)
    name = level.split(":")[0]
    if name == "nvl":  # n12 is in no NVLink domain
        assert "in no nvl" in (d.message or "") or "more than one nvl" in (d.message or ""), d
    else:
        assert f"in more than one {name}" in (d.message or ""), d


@pytest.mark.parametrize(
    ("nodes", "why"),
    [
        ("n99", "names 'n99', which is not in slurm-topo's data"),
        ("n01,gpu-x7", "names 'gpu-x7', which is not in slurm-topo's data"),
        ("n[1-]", "is not a node list slurm-topo reads"),
        ("n[01-02", "is not a node list slurm-topo reads"),
        ("n[01- 02]", "is not a node list slurm-topo reads"),
        ("n[ 1]", "is not a node list slurm-topo reads"),
        ("n01;n02", "is not a node list slurm-topo reads"),
        ("n01\rn02", "is not a node list slurm-topo reads"),
        ("n[02-01]", "is not a node list slurm-topo reads"),
        ("n[+1]", "is not a node list slurm-topo reads"),
        ("n]01", "is not a node list slurm-topo reads"),
        (",", "is not a node list slurm-topo reads"),
        ("n[0000000000000001-2]", "is not a node list slurm-topo reads"),
        (
            "n[1-999999999]",
            "names more nodes than slurm-topo checks (13: the cluster's nodes, at most 256)",
        ),
        ("n[1-9][1-9][1-9][1-9][1-9][1-9]", "names more nodes than slurm-topo checks"),
        ("n01," * 1100, "is longer than 4096 bytes"),
    ],
)
def test_a_nodelist_that_cannot_be_checked_is_refused_with_a_required_level(
    data, nodes: str, why: str
) -> None:  # type: ignore[no-untyped-def]
    """Where the list cannot be read, counted or placed, a required level refuses it with the reason (it was
    a note, and the job ran unchecked); prefer takes it as it is."""
    for level in ("zone", "network_group:fail", "nvl"):
        d = run(data, locality=level, min_nodes=2, req_nodes=nodes)
        assert d.action == "reject" and d.rejection == "request", (nodes, d)
        assert why in (d.message or "") and "is never left unchecked" in (d.message or ""), d
        assert "--nodelist not checked" in d.record, d
    assert run(data, locality="prefer", min_nodes=2, req_nodes=nodes).action != "reject"


def test_locality_regions_restricts_and_filters(data) -> None:  # type: ignore[no-untyped-def]
    """--locality-regions: a plain OR of the named areas is ANDed in; only overlapping groups are
    candidates."""
    d = run(data, locality="zone", regions="us-west", min_nodes=2)
    assert d.features == "region_us-west&[zone_us-west-2b|zone_us-west-2a]"
    d = run(data, locality="any", regions="us-east,us-west-2b")
    assert d.features == "(region_us-east|zone_us-west-2b)"
    assert run(data, locality="zone", regions="mars-1").action == "reject"


def test_comment_is_the_fallback_transport(data) -> None:  # type: ignore[no-untyped-def]
    """Without the SPANK option, --comment=locality=... is read."""
    d = decide(data, JobRequest.from_job_desc(job("zone:fail", via="comment", min_nodes=7)))
    assert d.action == "reject"


def test_record_is_bounded(data) -> None:  # type: ignore[no-untyped-def]
    """The AdminComment record never exceeds 200 characters."""
    d = run(data, locality="prefer")
    assert d.record.startswith("slurm-topo: ") and len(d.record) <= 200


def test_slurm_limits_cut_the_bracket_to_64_alternatives() -> None:
    """With 100 qualifying racks the bracket keeps the first 64 and the record says so."""
    doc = "nodes:\n" + "".join(
        f"  - {{name: 'x{i:03d}-[1-2]', region: r, zone: r-a, network_group: g{i:03d}}}\n" for i in range(100)
    )
    data = make_context(merge([parse_inventory(doc)]), (22, 5)).policy
    d = decide(data, JobRequest(locality="network_group", min_nodes=2))
    assert d.features is not None and d.features.count("|") == MAX_ALTERNATIVES - 1
    assert len(d.features) <= 1024
    assert "first 64 kept" in d.record


def test_long_names_cut_the_bracket_to_1024_characters() -> None:
    """Long feature names: the bracket stops before 1024 characters, whatever the count."""
    doc = "nodes:\n" + "".join(
        f"  - {{name: 'y{i:02d}', region: r, zone: 'z{i:02d}{'q' * 55}', features: [a, b]}}\n"
        for i in range(40)
    )
    data = make_context(merge([parse_inventory(doc)]), (22, 5)).policy
    d = decide(data, JobRequest(locality="zone", features="a&b"))
    assert d.features is not None and len(d.features) <= 1024 and d.features.startswith("a&b&[")
    assert d.features.count("|") < 39 and "kept" in d.record


def test_families_make_buckets_of_version_and_location() -> None:
    """With families declared, a zone request keeps one torch version and one zone (bucket features)."""
    inv = inventory(families=True)
    ctx = make_context(inv, (22, 5), PARTITIONS)
    d = decide(ctx.policy, JobRequest(locality="zone", min_nodes=3))
    assert d.features == "[zone_us-east-1a.torch-2.4]"  # us-west-2a has 3 nodes, but two torch versions
    d = decide(ctx.policy, JobRequest(locality="zone", min_nodes=4))
    assert d.action == "hold" and "us-east-1a/torch-2.4 with 3 nodes" in (d.message or "")
    nodes_conf = render_all(inv, (22, 5), PARTITIONS)["slurm-topo-nodes.conf"]
    assert "zone_us-east-1a.torch-2.3" in nodes_conf and "zone_us-east-1a.torch-2.4" in nodes_conf
    d = decide(ctx.policy, JobRequest(locality="zone:fail", min_nodes=4, features="torch-2.3"))
    assert d.action == "reject"  # torch-2.3 nodes: n04 and n09, never 4 in one zone


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (None, "none"),
        ("a", "and"),
        ("a&b", "and"),
        ("a,b", "and"),
        ("a|b", "or"),
        ("a&[x|y]", "bracket"),
        ("(a|b)&c", "complex"),
        ("a*2", "complex"),
        ("a|b&c", "complex"),
        ("a b", "invalid"),
        ("[x|y][z]", "complex"),
        ("&[x]", "complex"),
    ],
)
def test_constraint_grammar(text, kind) -> None:  # type: ignore[no-untyped-def]
    """The user's constraint is classified by the grammar rules."""
    assert parse_constraint(text).kind == kind


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gres:gpu:2", (None, 2)),
        ("gres/gpu:2", (None, 2)),
        ("gres:gpu:h100:2", ("h100", 2)),
        ("gres/gpu:h100:2", ("h100", 2)),
        ("gres/gpu", (None, 1)),
        ("gres:nic:1,gres:gpu:3", (None, 3)),
        ("gres:gpu:h100", ("h100", 1)),
        ("gres:gpux:2", None),
        (None, None),
    ],
)
def test_gpu_tres_both_spellings(text, want) -> None:  # type: ignore[no-untyped-def]
    """tres strings of 22.05-23.02 (gres:gpu) and 23.11+ (gres/gpu), typed or not."""
    assert parse_gpu_tres(text) == want


def test_partition_default_flag_picks_the_default_partition() -> None:
    """Without --partition the partition marked Default=YES is used."""
    inv = inventory()
    data = make_context(inv, (22, 5), [Partition("a", ("n01",)), Partition("b", ("n05", "n06"), True)]).policy
    assert data.default_partition == "b"
    assert decide(data, JobRequest(locality="zone", min_nodes=2)).features == "[zone_us-east-1b]"


def test_unknown_feature_is_named_not_blamed_on_the_size(data) -> None:  # type: ignore[no-untyped-def]
    """`-C nosuch --locality=zone`: no node has 'nosuch' (Slurm rejects it); the filter says the feature is
    unknown and leaves the job to Slurm, instead of holding it because "the largest zone has 0 nodes"."""
    for loc in ("zone", "zone:fail", "prefer"):
        d = run(data, locality=loc, min_nodes=3, features="ib&nosuch")
        assert d.action == "unchanged" and "held" not in d.record, d
        assert "no node of this cluster has the feature 'nosuch'" in (d.message or ""), d
    assert run(data, locality="zone", min_nodes=3, features="ib").action == "amend"


def test_bad_locality_values_are_refused_alike_on_every_transport(data) -> None:  # type: ignore[no-untyped-def]
    """`zone:` (nothing after the colon) is refused from the comment as the SPANK plugin refuses it; a bad
    value
    is a rejection of the request (Slurm's generic error), not a node-count error."""
    for via in ("spank", "comment"):
        for value in ("zone:", "zome", "zone:later"):
            d = run(data, locality=value, via=via, min_nodes=2)
            assert d.action == "reject" and d.rejection == "request", (via, value, d)
            assert f"unknown locality '{value}'" in (d.message or "")
    assert run(data, locality="zone:fail", min_nodes=7).rejection == "size"


def test_a_resize_re_plans_the_prefer_a_required_level_added_but_keeps_the_users(data) -> None:  # type: ignore[no-untyped-def]
    """A region job's --prefer (finer groups inside its regions) was the filter's: a resize re-plans it for
    the new size; a --prefer the user gave stays theirs."""
    rec = job_record(data, job("region", min_nodes=2))
    assert rec["prefer"].startswith("[ng_")
    m = decide_modify(data, rec, {"min_nodes": 4}, False)
    assert m.action == "apply" and m.features == "[region_us-east|region_us-west]"
    assert m.prefer == "[zone_us-east-1a|region_us-east|region_us-west]"
    rec = job_record(data, job("region", min_nodes=2, prefer="ib"))
    assert rec.get("prefer") == "ib"
    m = decide_modify(data, rec, {"min_nodes": 4}, False)
    assert m.action == "apply" and m.prefer is None  # untouched: Slurm keeps "ib"


def test_check_shows_the_prefer_cascade_and_its_candidates_of_every_level() -> None:
    """`slurm-topo check --locality prefer` prints the --prefer string the filter writes and lists the
    cascade's candidates (zones, then regions), not one level's survey."""
    import subprocess
    import sys
    from pathlib import Path

    fleet = Path(__file__).resolve().parents[1] / "examples" / "benchmark-five-zones.yaml"
    p = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "check", "-i", str(fleet), "-N", "6", "--locality", "prefer"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    zones = "zone_us-central1-a|zone_us-central1-b|zone_us-central1-c|zone_us-east1-b|zone_us-east1-c"
    unions = (
        "(zone_us-central1-a|zone_us-central1-b)|(zone_us-central1-a|zone_us-central1-c)|"
        "(zone_us-central1-b|zone_us-central1-c)"
    )
    prefer = next(line for line in lines if line.startswith("prefer: "))
    assert prefer.startswith(f"prefer: [{zones}|{unions}|region_us-east1|region_us-central1|("), p.stdout
    candidates = next(line for line in lines if line.startswith("candidates: "))
    assert (
        "us-central1-b+us-central1-c (12 nodes, 72 GPUs), us-east1 (12 nodes, 48 GPUs), "
        "us-central1 (18 nodes, 120 GPUs), us-central1-a+us-east1-b" in candidates
    ), candidates


# ---- LEVEL:auto: decided as :wait, plus the budget record (docs/relax.md)


def _budget_of(record: str):  # type: ignore[no-untyped-def]
    from slurm_topo.relaxer.relax import parse_budget

    return parse_budget(record)


def test_auto_decides_as_wait_and_records_the_cost_models_budget(data) -> None:  # type: ignore[no-untyped-def]
    """zone:auto gets zone:wait's bracket and prefer; its record carries the budget the relaxer reads, equal
    (within a second) to the cost model's own for the site plan on the cluster's most common node."""
    from slurm_topo.relaxer.relax import auto_budget

    inv = inventory()
    plan = inv.policy.plan
    template = next(n for n in inv.nodes if n.gpus == 4)  # 8 of the 12 GPU nodes: 4x a100
    for nodes, minutes in ((2, 120), (4, 600), (4, 7), (2, 1)):
        wait = run(data, locality="zone", min_nodes=nodes)
        auto = run(data, locality="zone:auto", min_nodes=nodes, time_limit=minutes)
        assert (auto.action, auto.features, auto.prefer, auto.candidates) == (
            wait.action,
            wait.features,
            wait.prefer,
            wait.candidates,
        )
        assert auto.record.startswith(
            wait.record.replace("zone:wait", "zone:auto") + "; slurm-topo-auto: zone "
        )
        got = _budget_of(auto.record)
        want = auto_budget("zone", nodes, plan, minutes * 60, template)
        assert got is not None and got.level == "zone" and got.limit_s == minutes * 60
        assert [k for k, _ in got.budgets] == ["region", "any"]
        for level, sec in got.budgets:
            assert abs(sec - (want.of(level) or 0)) <= 1, (nodes, level, sec, want)
    for odd in (1, 3, 13):  # tp=4 x pp=2 does not fit an odd number of 4-GPU nodes
        one = run(data, locality="zone:auto", min_nodes=odd, time_limit=60)
        assert one.action in ("amend", "hold") and _budget_of(one.record) is None
    one = run(data, locality="zone:auto", min_nodes=3, time_limit=60)
    assert one.record.endswith("; auto: the site plan does not fit this job, no budget (waits as :wait)")
    two = _budget_of(run(data, locality="zone:auto", min_nodes=4, time_limit=60).record)
    assert two is not None and 0 < (two.of("region") or 0) < (two.of("any") or 0)
    ng = _budget_of(run(data, locality="network_group:auto", min_nodes=2, time_limit=60).record)
    assert ng is not None and [k for k, _ in ng.budgets] == ["zone", "region", "any"]


def test_auto_without_time_limit_or_site_plan_says_so_and_carries_no_budget(data) -> None:  # type: ignore[no-untyped-def]
    for limit in (None, 0xFFFFFFFF):  # not given; --time=UNLIMITED
        d = run(data, locality="region:auto", min_nodes=2, **({} if limit is None else {"time_limit": limit}))
        assert d.action == "amend" and d.record.endswith("; auto: no time limit, no budget (waits as :wait)")
        assert _budget_of(d.record) is None
        assert d.message == (  # the submitter reads it on stderr
            "slurm-topo: --locality=region:auto: no time limit (give --time), so no budget: the job waits as "
            "region:wait"
        ), d.message
    families = make_context(inventory(families=True), (22, 5), PARTITIONS).policy  # no plan: in policy
    assert families.auto_units == {}
    d = decide(families, JobRequest.from_job_desc(job("zone:auto", min_nodes=2, time_limit=60)))
    assert (
        d.record.endswith("; auto: no site plan, no budget (waits as :wait)") and _budget_of(d.record) is None
    )


def test_auto_held_and_prefer_auto_carry_no_budget(data) -> None:  # type: ignore[no-untyped-def]
    held = run(data, locality="zone:auto", min_nodes=7, time_limit=60)
    assert held.action == "hold" and "slurm-topo-auto" not in held.record
    assert "--locality=zone:auto: no zone can ever hold 7 nodes" in (held.message or "")
    prefer = run(data, locality="prefer:auto", min_nodes=2, time_limit=60)
    assert prefer.action == "amend" and "slurm-topo-auto" not in prefer.record
    assert run(data, locality="zone:auto", min_nodes=7, time_limit=60, script=None).action == "reject"


def test_a_partition_may_default_to_auto(data) -> None:  # type: ignore[no-untyped-def]
    d = run(data, partition="timed", min_nodes=4, time_limit=60)
    assert d.locality == "zone:auto" and d.features is not None and _budget_of(d.record) is not None
    assert run(data, locality="zone:auto", via="comment", min_nodes=4, time_limit=60).record == d.record


def test_large_jobs_use_the_largest_row(data) -> None:  # type: ignore[no-untyped-def]
    assert data.auto_max == 13  # the fleet's 13 nodes (at most 32)
    assert all(len(rows) == 13 for rows in data.auto_units.values())
    rows = data.auto_units["region"]
    assert all((r is None) == (n % 2 == 1) for n, r in enumerate(rows, 1))
    assert all(len(r) == 1 for r in rows if r is not None)


def test_administrators_features_update_of_an_auto_job_passes_and_the_trail_is_kept(data) -> None:  # type: ignore[no-untyped-def]
    """The relaxer widens an auto job with an administrator's Features= update: it passes untouched. Any other
    re-plan by an administrator keeps the relaxer's records after the filter's own."""
    rec = job_record(data, job("zone:auto", min_nodes=2, time_limit=120))
    assert _budget_of(rec["admin_comment"]) is not None
    relax = "slurm-topo-relax: zone->region waited=900s budget=612s at=2026-11-30T12:00:00Z"
    rec["admin_comment"] = "note; " + rec["admin_comment"] + "; " + relax
    upd = {"features": "[region_us-east|region_us-west]", "admin_comment": "x"}
    assert decide_modify(data, rec, upd, admin=True).action == "pass"
    owner = decide_modify(data, rec, {"features": ""}, admin=False)  # an owner cannot strip the level
    assert owner.action == "apply" and owner.features is not None and "zone_" in owner.features
    wait_rec = job_record(data, job("zone", min_nodes=2))
    # :wait jobs stay re-planned: a region bracket cannot be enforced as a zone, so even an administrator's
    # is refused (an administrator changes the level itself with Comment=locality=region)
    assert decide_modify(data, wait_rec, upd, admin=True).action == "reject"
    assert decide_modify(data, wait_rec, {"features": "nvme"}, admin=True).action == "apply"
    m = decide_modify(data, rec, {"min_nodes": 4}, admin=True)
    assert m.admin_comment is not None and m.admin_comment.startswith("note; slurm-topo: zone:auto [")
    assert m.admin_comment.endswith("; " + relax) and m.admin_comment.count("slurm-topo-auto:") == 1
    assert _budget_of(m.admin_comment) == _budget_of(m.log or "")
    held = decide_modify(data, rec, {"min_nodes": 7}, admin=True)
    assert held.priority == 0 and held.admin_comment is not None
    assert held.admin_comment.endswith(relax) and _budget_of(held.admin_comment) == _budget_of(
        rec["admin_comment"]
    )


def test_an_owners_release_of_a_held_auto_job_is_re_planned(data) -> None:  # type: ignore[no-untyped-def]
    rec = job_record(data, job("zone:auto", min_nodes=7, time_limit=60))
    assert rec["priority"] == 0
    resized = decide_modify(data, rec, {"min_nodes": 4}, admin=False)
    assert resized.priority == 0xFFFFFFFF and resized.features is not None
    assert "slurm-topo-auto: zone limit=3600s" in (resized.log or "")


def test_nvl_requires_one_nvlink_domain_smallest_first(data) -> None:  # type: ignore[no-untyped-def]
    """--locality=nvl: the nvl_<domain> features of the domains that can hold the job, smallest first; a
    domain across two zones is still one domain; no --prefer of finer groups (none is known to lie inside)."""
    d = run(data, locality="nvl", min_nodes=3)
    assert (d.action, d.features, d.prefer, d.level) == ("amend", "[nvl_nvl-a|nvl_nvl-b]", None, "nvl"), d
    d = run(data, locality="nvl", min_nodes=2)
    assert d.features == "[nvl_nvl-c|nvl_nvl-a|nvl_nvl-b]", d
    d = run(data, locality="nvl", tres_per_node="gres:gpu:8")
    assert d.features == "[nvl_nvl-a|nvl_nvl-b]", d  # nvl-b holds one 8-GPU node (n04)


def test_nvl_that_no_domain_holds_is_held_or_rejected(data) -> None:  # type: ignore[no-untyped-def]
    d = run(data, locality="nvl:fail", min_nodes=4)
    assert d.action == "reject" and d.message == (
        "slurm-topo: --locality=nvl:fail: no nvl can ever hold 4 nodes; the largest is nvl-a with 3 nodes "
        "(24 GPUs)"
    )
    assert run(data, locality="nvl", min_nodes=4).action == "hold"
    bad = run(data, locality="nvl:auto", min_nodes=2)
    assert bad.action == "reject" and bad.message == (
        "slurm-topo: --locality=nvl:auto: an NVLink domain has no looser level to relax to; use nvl (waits) "
        "or nvl:fail, or LEVEL:auto with LEVEL network_group, zone or region"
    )
    assert "nvl takes :wait or :fail" in (run(data, locality="nvl:soon").message or "")


def test_nvl_on_a_fleet_without_domains_says_so() -> None:
    plain = make_context(
        merge([parse_inventory("nodes:\n  - {name: 'm[1-4]', region: r1, zone: z1}\n")]), (22, 5)
    )
    for given, loc in (("nvl:fail", "nvl:fail"), ("nvl", "nvl:wait")):  # refused at submit, never held
        d = decide(plain.policy, JobRequest(locality=given, min_nodes=2))
        assert (d.action, d.rejection) == ("reject", "request") and d.message == (
            f"slurm-topo: --locality={loc}: no node of the partition is in an NVLink domain; no size can "
            "ever fit: use --locality=network_group or zone"
        ), d


def test_nvl_checks_a_nodelist_as_the_other_required_levels(data) -> None:  # type: ignore[no-untyped-def]
    """--locality=nvl with a node list: nodes of two domains (n01 in nvl-a, n05 in nvl-b) are refused, as is a
    node in no domain; nodes of one domain get that domain's bracket (it only had a note, and ran on two
    racks)."""
    d = run(data, locality="nvl", min_nodes=2, req_nodes="n01,n05")
    assert d.action == "reject" and "in more than one nvl (nvl_nvl-a, nvl_nvl-b)" in (d.message or ""), d
    d = run(data, locality="nvl:fail", min_nodes=2, req_nodes="n0[1],n0[9]")
    assert d.action == "reject" and "names a node that is in no nvl" in (d.message or ""), d
    d = run(data, locality="nvl", min_nodes=3, req_nodes="n0[2-3]")
    assert (d.action, d.features, d.message) == ("amend", "[nvl_nvl-a]", None), d
    d = run(data, locality="nvl", min_nodes=3, req_nodes="n04 n06")  # nvl-b spans two zones: one domain
    assert (d.action, d.features) == ("amend", "[nvl_nvl-b]"), d


@pytest.mark.parametrize("level", ["zone", "region:fail", "network_group", "nvl", "zone:auto"])
@pytest.mark.parametrize(
    "constraint", ["nvl_nvl-a|nvl_nvl-c", "nvl_nvl-a", "nvl_nvl-b&ib", "zone_us-east-1a|zone_us-west-2a"]
)
def test_a_constraint_naming_features_slurm_topo_makes_keeps_the_required_level(  # type: ignore[no-untyped-def]
    data, level: str, constraint: str
) -> None:
    """``-C 'nvl_a|nvl_c'`` (the generator's own features, model.LEVEL_FEATURE_PREFIXES) is combined with the
    level's bracket, its fit not counted; it was called unknown and the level was not applied."""
    d = run(data, locality=level, min_nodes=4, features=constraint, time_limit=60)
    name = level.split(":")[0]
    prefix = {"network_group": "ng"}.get(name, name)
    assert d.action == "amend" and d.message is None, d
    assert d.features is not None and f"&[{prefix}_" in d.features, d
    assert d.features.startswith(f"({constraint})&[" if "|" in constraint else f"{constraint}&["), d
    assert "unknown" not in d.record and "fit not checked (constraint)" in d.record, d


def test_a_bracket_of_another_level_is_refused_not_passed(data) -> None:  # type: ignore[no-untyped-def]
    """A user bracket of NVLink domains with a required zone cannot be combined (Slurm allows one bracket):
    refused with the reason, as for any other level's bracket."""
    d = run(data, locality="zone", min_nodes=2, features="[nvl_nvl-a|nvl_nvl-c]")
    assert d.action == "reject" and "are not all zone groups" in (d.message or ""), d
    d = run(data, locality="nvl", min_nodes=2, features="[nvl_nvl-a|nvl_nvl-c]")
    assert d.features == "[nvl_nvl-c|nvl_nvl-a]", d
