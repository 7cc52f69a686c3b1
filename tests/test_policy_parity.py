"""Parity: the Python policy (the specification) and the real Lua 5.1 filter decide every case identically."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from luafilter import LuaFilter
from policy_cases import PARTITIONS, cases, inventory, job, modify_cases

from slurm_topo import load_inventories, merge, parse_inventory, render_all
from slurm_topo.policy import JobRequest, Partition, decide, decide_modify
from slurm_topo.render import make_context

CASES = cases()


@pytest.fixture(scope="module", params=[False, True], ids=["locations", "families"])
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    inv = inventory(families=request.param)
    ctx = make_context(inv, (22, 5), PARTITIONS)
    path = tmp_path_factory.mktemp("data") / "slurm_topo_data.lua"
    path.write_text(render_all(inv, (22, 5), PARTITIONS)["slurm_topo_data.lua"])
    lua = LuaFilter()
    return ctx.policy, lua, lua.load_data(path)


def test_parity_over_the_case_table(setup) -> None:  # type: ignore[no-untyped-def]
    """Every case of the table gets the same action, features, prefer, message and record from Python and
    Lua."""
    data, lua, lua_data = setup
    assert len(CASES) > 1000
    mismatches = []
    for name, desc in CASES:
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        got = lua.decide(lua_data, desc)
        if got != expected:
            mismatches.append((name, expected, got))
    assert mismatches == [], f"{len(mismatches)} mismatches, first: {mismatches[0]}"


def test_case_table_covers_every_outcome(setup) -> None:  # type: ignore[no-untyped-def]
    """The table is not trivially passing: it reaches every action, and amends both features and prefer."""
    data, _, _ = setup
    decisions = [decide(data, JobRequest.from_job_desc(job)) for _, job in CASES]
    assert {d.action for d in decisions} == {"unchanged", "amend", "hold", "reject"}
    assert any(d.prefer for d in decisions) and any(d.features for d in decisions)
    budgets = [d for d in decisions if "; slurm-topo-auto: " in d.record]
    notes = [d for d in decisions if "; auto: " in d.record]
    assert notes and (budgets or not data.auto_units)
    assert any(d.action == "hold" and d.locality.endswith(":auto") for d in decisions)
    # (Slurm's 64-alternative / 1024-character limits are exercised in test_policy.py, with larger fleets)


ESCAPED = [
    "n01 n12",
    "n01\tn12",
    "n01\nn12",
    " n01 , n12 ",
    "n0[1],n1[2]",
    "n0[1-1],n12",
    "n01,n1[2]",
    "n[0-1][1-2]",
    "n[01-01,12-12]",
    "n[1-]",
    "n[ 1]",
    "n[01-02",
    "n01;n02",
    "n99",
]
"""Node lists of the case table that name nodes of two zones (n01: us-east-1a, n12: us-west-2c, in no rack or
NVLink domain) in the forms that escaped (issue 43), or that cannot be read or placed."""


def test_the_forms_that_escaped_are_refused_alike_by_both(setup) -> None:  # type: ignore[no-untyped-def]
    """The case table's node lists in the forms that escaped a required level, and its constraints naming
    the features slurm-topo makes: Python and Lua both refuse the lists (every required level, nvl too), and
    both keep the level's bracket with the constraint (they were 'unknown, not applied')."""
    data, lua, lua_data = setup
    refused = kept = 0
    for name, desc in CASES:
        words = name.split(" ", 2)
        if words[0] == "nodelist" and words[1] != "prefer" and words[2] in ESCAPED:
            got = lua.decide(lua_data, desc)
            assert got["action"] == "reject" and got["rejection"] == "request", (name, got)
            assert decide(data, JobRequest.from_job_desc(desc)).as_dict() == got, name
            refused += 1
        elif words[0] == "generated" and words[1] != "prefer" and not words[2].startswith("["):
            got = lua.decide(lua_data, desc)
            assert got["action"] == "amend" and "&[" in str(got["features"]), (name, got)
            assert "unknown" not in str(got["record"]), (name, got)
            assert decide(data, JobRequest.from_job_desc(desc)).as_dict() == got, name
            kept += 1
    assert refused == 4 * len(ESCAPED) and kept >= 30, (refused, kept)


def test_modify_parity_over_the_case_table(setup) -> None:  # type: ignore[no-untyped-def]
    """Every update of the modify table (size, features, comment, release, partition, GPUs; by the owner and
    by an administrator) gets the same answer from decide_modify in Python and in Lua."""
    data, lua, lua_data = setup
    table = modify_cases(data)
    assert len(table) > 500
    mismatches = []
    for name, rec, upd, admin in table:
        expected = decide_modify(data, rec, upd, admin).as_dict()
        got = lua.decide_modify(lua_data, rec, upd, admin)
        if got != expected:
            mismatches.append((name, expected, got))
    assert mismatches == [], f"{len(mismatches)} mismatches, first: {mismatches[0]}"
    actions = {decide_modify(data, rec, upd, admin).action for _, rec, upd, admin in table}
    trails = [
        m.admin_comment
        for name, rec, upd, admin in table
        if name.startswith("relaxed") and (m := decide_modify(data, rec, upd, admin)).admin_comment
    ]
    assert trails and all(
        t.endswith("; slurm-topo-relax: zone->region waited=900s budget=612s at=2026-11-30T12:00:00Z")
        for t in trails
    )
    assert actions == {"pass", "apply", "deny", "reject"}


def test_parity_at_slurms_limits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Fleets past Slurm's limits (100 racks: the 64-alternative cut; long zone names: the 1,024-character
    cut):
    Lua's compiled cut and largest group agree with Python's scan for sizes, constraints, GPUs and
    partitions."""
    racks = "".join(
        f"  - {{name: 'x{i:03d}-[1-{1 + i % 4}]', region: r{i % 2}, zone: 'r{i % 2}-{i % 30}{'q' * 40}', "
        f"network_group: g{i:03d}, gpus: {4 * (1 + i % 2)}, features: [{'ib' if i % 3 else 'eth'}]}}\n"
        for i in range(100)
    )
    inv = merge([parse_inventory("nodes:\n" + racks)])
    parts = [
        Partition("all", tuple(n.name for n in inv.nodes), True),
        Partition("half", ("x000-1", "x001-1")),
    ]
    lua = LuaFilter()
    cuts = 0
    for partitions in (None, parts):
        data = make_context(inv, (22, 5), partitions).policy
        path = tmp_path / "data.lua"
        path.write_text(render_all(inv, (22, 5), partitions)["slurm_topo_data.lua"])
        lua_data = lua.load_data(path)
        for loc, nodes, extra in itertools.product(
            ["network_group", "zone:fail", "region", "prefer"],
            [1, 2, 3, 4, 5, 9, 400],
            [
                {},
                {"features": "ib"},
                {"tres_per_node": "gres:gpu:8"},
                {"partition": "half"},
                {"partition": "x,all"},
            ],
        ):
            desc = job(loc, min_nodes=nodes, **extra)
            expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
            assert lua.decide(lua_data, desc) == expected, desc
            cuts += "kept (Slurm's limits)" in str(expected["record"])
    assert cuts > 10, "the limits were reached"


def test_parity_of_the_prefer_cascade_with_families_at_slurms_limits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Families on a fleet past Slurm's limits: the cascade (buckets of every level, then the bare values)
    and a required level's --prefer are cut alike in Python and Lua, and the cut keeps regions and values."""
    racks = "".join(
        f"  - {{name: 'x{i:03d}-[1-{1 + i % 3}]', region: r{i % 2}, zone: 'r{i % 2}-{i % 6}', "
        f"network_group: g{i:03d}, gpus: 8, features: [torch-2.{i % 3}, {'ib' if i % 4 else 'eth'}]}}\n"
        for i in range(120)
    )
    inv = merge([parse_inventory("nodes:\n" + racks + "policy: {families: {torch: 'torch-*'}}\n")])
    parts = [
        Partition("all", tuple(n.name for n in inv.nodes), True),
        Partition("some", tuple(n.name for n in inv.nodes[:40])),
    ]
    lua = LuaFilter()
    cuts = values = 0
    for partitions in (None, parts):
        data = make_context(inv, (22, 5), partitions).policy
        path = tmp_path / "data.lua"
        path.write_text(render_all(inv, (22, 5), partitions)["slurm_topo_data.lua"])
        lua_data = lua.load_data(path)
        for loc, nodes, extra in itertools.product(
            ["prefer", "zone", "region:fail"],
            [1, 2, 3, 7, 40, 90],
            [{}, {"features": "ib"}, {"partition": "some"}, {"partition": "some,all"}, {"regions": "r1"}],
        ):
            desc = job(loc, min_nodes=nodes, **extra)
            expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
            assert lua.decide(lua_data, desc) == expected, desc
            prefer = str(expected["prefer"])
            cuts += "kept (Slurm's limits)" in str(expected["record"]) and "region_" in prefer
            values += prefer.endswith("|torch-2.0]") or prefer.endswith("|torch-2.1]")
    assert cuts > 5 and values > 5, (cuts, values)


def _twins(tmp_path, doc: str, version: tuple[int, int] = (22, 5)):  # type: ignore[no-untyped-def]
    """The policy data of an inventory document and the real Lua filter with the data file rendered from
    it: (Python's data, the filter, the filter's data)."""
    inv = merge([parse_inventory(doc)])
    path = tmp_path / "data.lua"
    path.write_text(render_all(inv, version)["slurm_topo_data.lua"])
    lua = LuaFilter()
    return make_context(inv, version).policy, lua, lua.load_data(path)


def test_parity_of_family_unions_on_an_uneven_fleet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Three uneven regions, zones holding both torch versions: prefer's unions of one value's zone buckets
    (inside a region, across regions) are made, ordered and cut alike in Python and Lua, and never join two
    values."""
    sizes = [(0, "a", 5), (0, "b", 4), (0, "c", 3), (1, "a", 4), (1, "b", 3), (2, "a", 3)]
    rows, i = [], 0
    for region, zone, n in sizes:
        for k in range(n):
            value = "torch-2.4" if (i * 7 + k) % 3 else "torch-2.3"
            rows.append(
                f"  - {{name: n{i:02d}, region: r{region}, zone: r{region}-{zone}, network_group: g{i // 2}, "
                f"gpus: {4 + 4 * (i % 2)}, features: [{value}{', ib' if i % 4 else ''}]}}\n"
            )
            i += 1
    data, lua, lua_data = _twins(
        tmp_path, "nodes:\n" + "".join(rows) + "policy: {families: {torch: 'torch-*'}}\n"
    )
    unions = across = 0
    for nodes, extra in itertools.product(
        [1, 2, 3, 4, 5, 6, 8, 10, 14],
        [
            {},
            {"features": "ib"},
            {"features": "torch-2.3"},
            {"tres_per_node": "gres:gpu:8"},
            {"regions": "r0,r1"},
        ],
    ):
        desc = job("prefer", min_nodes=nodes, **extra)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
        prefer = str(expected["prefer"])
        for union in prefer.partition("[")[2].split("(")[1:]:  # the bracket's unions
            zones = union.split(")")[0].split("|")
            assert len({z.rsplit(".", 1)[1] for z in zones}) == 1, prefer
            unions += 1
            across += len({z.split("-")[0] for z in zones}) > 1
    assert unions > 20 and across > 5, (unions, across)


def test_parity_of_the_bracket_tail_ordered_by_spread(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The unions across regions and the bare values, ordered by the regions and zones each spans, come
    out alike in Python and Lua (two values, one on three regions, one on two)."""
    from tests.test_policy import _alternatives, two_values_doc

    data, lua, lua_data = _twins(tmp_path, two_values_doc())
    moved = 0
    for nodes, extra in itertools.product(
        [2, 4, 6, 8, 9, 10, 12, 15], [{}, {"features": "torch-2.3"}, {"regions": "eu,us"}]
    ):
        desc = job("prefer", min_nodes=nodes, **extra)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
        alts = _alternatives(str(expected["prefer"])) if expected["prefer"] else []
        # a bare value (the whole alternative) before a union: the tail reordered, never so before
        moved += any(
            a in ("torch-2.3", "torch-2.4") and any(b.startswith("(") for b in alts[i + 1 :])
            for i, a in enumerate(alts)
        )
    assert moved >= 2, moved


def test_a_bracket_led_by_its_largest_zone_drops_unions_not_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A prefer bracket that would start with a union is led by the largest zone; when that breaks Slurm's
    limits the last unions go, never a bare family value (which keeps the job on one version), alike in
    Python and Lua."""
    rows, i = [], 0
    for value in ("torch-2.4", "torch-2.3"):
        for region in ("us", "eu", "ap"):
            for z in range(4 if value == "torch-2.4" else 1):
                for _ in range(2):
                    rows.append(
                        f"  - {{name: n{i:03d}, region: {region}, zone: {region}-{z}, features: [{value}]}}\n"
                    )
                    i += 1
    data, lua, lua_data = _twins(
        tmp_path, "nodes:\n" + "".join(rows) + "policy: {families: {torch: 'torch-*'}}\n"
    )
    led = 0
    for nodes in (3, 4, 5, 6, 7, 9):
        desc = job("prefer", min_nodes=nodes)
        expected = decide(data, JobRequest.from_job_desc(desc))
        assert lua.decide(lua_data, desc) == expected.as_dict(), desc
        prefer = expected.prefer or ""
        alternatives = prefer.strip("[]").split("|")
        values = {"torch-2.3", "torch-2.4"}
        if "first" in expected.record and "kept" in expected.record:  # cut at Slurm's limits
            led += 1
            assert values <= set(alternatives), prefer
    assert led >= 1, led


def test_parity_with_families_declared_and_no_value_on_any_node(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Families declared but no node has a value: no bare values, so prefer tries an NVLink domain first as
    without families, alike in Python and Lua."""
    rows = [
        f"  - {{name: n{i:02d}, region: r{i // 6}, zone: r{i // 6}-{'ab'[i // 3 % 2]}, "
        f"nvlink_domain: nvl{i // 3}, features: [x]}}\n"
        for i in range(12)
    ]
    doc = "nodes:\n" + "".join(rows) + "policy: {families: {torch: 'torch-*'}}\n"
    data, lua, lua_data = _twins(tmp_path, doc, (24, 11))
    for nodes in (2, 3, 4, 6):
        desc = job("prefer", min_nodes=nodes)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
    assert "nvl_" in str(decide(data, JobRequest(locality="prefer", min_nodes=2)).prefer)


def test_parity_of_the_prefer_cascade_when_characters_run_out_before_alternatives(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Long region and zone names use up the 1 024 characters before the 64 alternatives: the cascade then
    still fills free alternatives from the finer lists with short names. Lua and Python keep the same ones (a
    cascade that asked each level only for the alternatives the coarser ones left kept fewer)."""
    names = [a + b for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]
    regions = ["r0" + "q" * 30, "r1" + "q" * 30]
    rows = [
        f"  - {{name: 'a{z:02d}-[1-2]', region: '{regions[z % 2]}', zone: '{names[z]}', network_group: g}}\n"
        for z in range(53)
    ]
    rows += [
        f"  - {{name: 'b{z:02d}-[1-3]', region: '{regions[z % 2]}', zone: 'L{z:02d}{'q' * 60}', "
        "network_group: g}\n"
        for z in range(9)
    ]
    data, lua, lua_data = _twins(tmp_path, "nodes:\n" + "".join(rows))
    for nodes in (1, 2, 3):
        desc = job("prefer", min_nodes=nodes)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert "first 64 kept" in str(expected["record"]) or nodes != 2, expected["record"]
        assert lua.decide(lua_data, desc) == expected, desc


def _irregular_fleet(
    seed: int, racks: int = 90, sizes: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 9, 12), mixed: bool = False
) -> str:
    """Racks of random kinds (CPU, H100, A100, L40S with 4 GPUs, GB200 NVLink domains) and sizes in zones
    of uneven make-up: nearly every zone and region a size of its own, and more rack sizes than the compiled
    sublists take (the filter's indexes per class set: scan.lua list_index)."""
    import random

    rng = random.Random(seed)
    kinds = [
        ("cpu", 0, ""),
        ("h100", 8, "h100"),
        ("a100", 8, "a100"),
        ("l40s", 4, "l40s"),
        ("gb200", 4, "gb200"),
    ]
    lines = ["nodes:"]
    for rack in range(racks):
        kind, gpus, gtype = rng.choice(kinds)
        r = rng.randrange(3)
        zone = f"r{r}-z{rng.randrange(2 + 3 * r)}"
        size = rng.choice(sizes)
        extra = f", gpus: {gpus}, gpu_type: {gtype}" if gpus else ""
        if kind == "gb200":
            extra += f", nvlink_domain: nvl{rack:03d}"
        feature = rng.choice(["ib", "eth"])
        if mixed and gpus and rng.random() < 0.3:  # a rack with CPU nodes too: fewer of its nodes count
            lines.append(
                f"  - {{name: 'cpu{rack:03d}x-[1-{rng.choice([1, 2])}]', region: r{r}, zone: {zone}, "
                f"network_group: g{rack:03d}, features: [{feature}]}}"
            )
        lines.append(
            f"  - {{name: '{kind}{rack:03d}-[1-{size}]', region: r{r}, zone: {zone}, "
            f"network_group: g{rack:03d}{extra}, features: [{feature}]}}"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parity_on_an_irregular_fleet_with_many_sizes(tmp_path, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Zones and racks of many sizes, GPU totals and types, per-node GPUs, node counts, constraints and a
    partition, decided one after the other on one loaded data table (the filter keeps counts per class set
    and indexes of sizes by GPUs and nodes across decisions): Python and Lua agree on every decision, and the
    requests reach kept lists, cuts and rejections alike."""
    _decide_one_after_another(tmp_path, _irregular_fleet(seed), seed, 600)


def test_parity_of_union_rows_among_zones_of_one_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Twelve and ten zones of three nodes in two regions (more than the eight a region's unions are made
    from), some with fewer eligible nodes: the union rows tie on (eligible nodes, nodes) and their order comes
    from the zones' ranks alone (decide.lua row_key, Python's sort); which zones the unions join, and in what
    order, are the same in both."""
    rows = []
    for region, count in (("r0", 12), ("r1", 10)):
        for z in range(count):
            for k in range(3):
                gpus = 8 if (z + k) % 4 else 4
                rows.append(
                    f"  - {{name: {region}z{z:02d}n{k}, region: {region}, zone: {region}-z{z:02d}, "
                    f"network_group: {region}-g{z:02d}, gpus: {gpus}, gpu_type: h100}}\n"
                )
    data, lua, lua_data = _twins(tmp_path, "nodes:\n" + "".join(rows))
    unions = 0
    for nodes, extra in itertools.product(
        [4, 5, 6, 7, 8, 9], [{}, {"tres_per_node": "gres:gpu:8"}, {"partition": "nosuch,gpu"}]
    ):
        desc = job("prefer", min_nodes=nodes, **extra)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
        unions += str(expected["prefer"]).count("(")
    assert unions > 50, unions


@pytest.mark.parametrize("racks", [700, 1500])
@pytest.mark.parametrize("seed", [1, 2])
def test_parity_on_many_racks_of_few_sizes(tmp_path, seed: int, racks: int) -> None:  # type: ignore[no-untyped-def]
    """Hundreds of racks of few sizes (three node counts, some racks with CPU nodes beside their GPU nodes):
    the rack list keeps, per class set and prefix of its sizes by GPUs or nodes, the first positions of their
    racks (scan.lua prefix_runs), and a scan that needs more than those (groups inside others, a node count
    the run's racks do not reach) goes on past them, in order or merging the sizes' racks; Python and Lua
    agree on every decision."""
    fleet = _irregular_fleet(seed, racks=racks, sizes=(2, 4, 8), mixed=True)
    _decide_one_after_another(tmp_path, fleet, seed, 400)


def _zones_at_the_limits(seed: int) -> str:
    """55-80 zones of long names (Slurm's 1 024 characters cut the bracket before its 64 alternatives, or
    just after) and random make-up in 1-3 regions: runs of zones that all fit end at the limits, or one
    short of them."""
    import random

    rng = random.Random(seed)
    kinds = [("cpu", 0, ""), ("h100", 8, "h100"), ("a100", 8, "a100"), ("l40s", 4, "l40s")]
    lines = ["nodes:"]
    for z in range(rng.randint(55, 80)):
        zone = f"z{z:02d}-" + "x" * rng.randint(2, 24)
        region = f"r{rng.randrange(3)}"
        for rack in range(rng.randint(1, 2)):
            kind, gpus, gtype = rng.choices(kinds, [1, 6, 2, 1])[0]
            extra = f", gpus: {gpus}, gpu_type: {gtype}" if gpus else ""
            lines.append(
                f"  - {{name: '{kind}{z:02d}{rack}-[1-{rng.choice([1, 2, 4, 8])}]', region: {region}, "
                f"zone: {zone}, network_group: g{z:02d}{rack}{extra}, "
                f"features: [{rng.choice(['ib', 'eth'])}]}}"
            )
    return "\n".join(lines) + "\n"


def _sixty_four_and_one(name: int) -> str:
    """64 zones of GPU nodes, each a size of its own, then (the largest, so last in the zone list) one of CPU
    nodes only: a GPU request's fitting zones are the list's first 64, Slurm's limit of alternatives; names
    of `name` characters (long ones reach the 1 024-character limit first, and the racks of the zones past
    the cut lead the rack list)."""
    lines = ["nodes:"]
    for z in range(64):
        zone = f"z{z:02d}" + "x" * (name - 3)
        where = f"region: r{z % 3}, zone: {zone}"
        lines.append(
            f"  - {{name: 'h{z:02d}-[1-{1 + z}]', {where}, network_group: g{z:02d}, "
            "gpus: 8, gpu_type: h100, features: [ib]}"
        )
        # and a rack of one node, named so that the largest zones' come first in the rack list
        lines.append(
            f"  - {{name: 'o{z:02d}', {where}, network_group: b{63 - z:02d}, gpus: 8, gpu_type: h100, "
            "features: [ib]}"
        )
    lines.append("  - {name: 'c-[1-80]', region: r0, zone: zcpu, network_group: gcpu, features: [ib]}")
    return "\n".join(lines) + "\n"


def _regions_cut_by_characters() -> str:
    """40 regions of 30-character names (a region bracket is cut by Slurm's 1 024 characters, leaving room for
    a zone or two), each of a zone of its own size and a one-node zone; the one-node zones of the largest
    regions, past the cut, lead the zone list."""
    lines = ["nodes:"]
    for r in range(40):
        region = f"r{r:02d}" + "x" * 27
        for zone, count in ((f"a{r:02d}", 1 + r), (f"b{39 - r:02d}", 1)):
            lines.append(
                f"  - {{name: '{zone}n-[1-{count}]', region: {region}, zone: {zone}, network_group: g{zone}, "
                "gpus: 8, gpu_type: h100, features: [ib]}"
            )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "fleet", ["random 1", "random 2", "random 3", "random 4", "64+1 short", "64+1 long", "regions cut"]
)
def test_parity_where_fitting_zones_meet_slurms_limits(tmp_path, fleet: str) -> None:  # type: ignore[no-untyped-def]
    """Zone lists of 55-80 long names, and 64 GPU zones before a CPU one: the filter takes the zones from a
    scan's start that all fit at once (scan.lua fitting_end) and cuts them to 64 alternatives and 1 024
    characters, or keeps them and goes on past the first that does not fit; Python and Lua agree on every
    decision."""
    kind, arg = fleet.split()
    first: list[dict[str, object]] = []
    if kind == "random":
        text = _zones_at_the_limits(int(arg))
    elif kind == "regions":
        text = _regions_cut_by_characters()
        # the regions kept are cut, so the --prefer's zones are only those inside them
        first = [job(loc, tres_per_job="gres/gpu:1") for loc in ("region", "region:fail")]
    else:
        text = _sixty_four_and_one(4 if arg == "short" else 30)
        # every GPU zone and none else, from the list's first: exactly Slurm's 64 alternatives, not cut
        first = [
            job(loc, **{field: value})
            for loc in ("zone", "zone:fail", "region", "prefer")
            for field, value in (
                ("tres_per_job", "gres/gpu:1"),
                ("tres_per_job", "gres/gpu:h100:8"),
                ("tres_per_node", "gres:gpu:1"),
            )
        ]
    _decide_one_after_another(tmp_path, text, len(fleet), 300, first)


def _decide_one_after_another(  # type: ignore[no-untyped-def]
    tmp_path, fleet: str, seed: int, count: int, first: list[dict[str, object]] | None = None
) -> None:
    """`first` (job_desc tables), then `count` seeded requests, decided one after the other on one loaded data
    table by Python and Lua alike."""
    import random

    inv = merge([parse_inventory(fleet)])
    parts = [Partition("all", tuple(n.name for n in inv.nodes), True), Partition("some", inv.names()[::3])]
    data = make_context(inv, (22, 5), parts).policy
    path = tmp_path / "data.lua"
    path.write_text(render_all(inv, (22, 5), parts)["slurm_topo_data.lua"])
    lua = LuaFilter()
    lua_data = lua.load_data(path)
    for desc in first or []:
        assert lua.decide(lua_data, desc) == decide(data, JobRequest.from_job_desc(desc)).as_dict(), desc
    rng = random.Random(seed)
    actions = set()
    for _ in range(count):
        loc = rng.choice(
            ["network_group", "zone", "region", "prefer", "zone:fail", "region:fail", "nvl", "any"]
        )
        fields: dict[str, object] = {}
        if rng.random() < 0.6:
            fields["min_nodes"] = rng.choice([1, 2, 3, 4, 6, 9, 12, 20, 40, 100])
        gpu = rng.random()
        gtype = rng.choice(["", "h100:", "a100:", "l40s:", "gb200:", "v100:"])
        if gpu < 0.45:
            fields["tres_per_job"] = (
                f"gres/gpu:{gtype}{rng.choice([1, 4, 8, 12, 16, 24, 32, 48, 64, 96, 200])}"
            )
        elif gpu < 0.7:
            fields["tres_per_node"] = f"gres:gpu:{gtype}{rng.choice([1, 2, 4, 8])}"
        if rng.random() < 0.2:
            fields["features"] = rng.choice(["ib", "eth", "ib|eth"])
        if rng.random() < 0.2:
            fields["partition"] = "some"
        desc = job(loc, **fields)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
        actions.add(expected["action"])
    assert {"amend", "reject"} <= actions


def _world(seed: int, nodes: int):  # type: ignore[no-untyped-def]
    """A fleet and request shapes from benchmarks/bench_filter_world.py's seeded generators (overlapping
    partitions, families, NVLink racks, CPU nodes in GPU racks, irregular names, every field the filter
    reads), as the benchmark draws them."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_filter_world as world

    fleet = world.make_fleet(world.draw_spec(seed, nodes))
    return world, fleet


@pytest.mark.parametrize("seed", [11, 23, 37, 51, 64])
def test_parity_on_seeded_world_fleets(tmp_path, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Python and Lua decide alike on fleets and shapes drawn by the world benchmark's generators (not the
    case table's fixed fleet): 400 shapes a fleet, each field of the request space, the partitions as
    `scontrol show partition -o` prints them."""
    from slurm_topo.access.text import parse_scontrol_partitions

    world, fleet = _world(seed, 800 + 97 * seed)
    inv_path = tmp_path / "fleet.yaml"
    inv_path.write_text(world.inventory_yaml(fleet))
    text = world.partitions_text(fleet)
    parts = (
        [Partition(n, tuple(nodes), d) for n, nodes, d in parse_scontrol_partitions(text) if n != "*"]
        if text
        else None
    )
    inv = load_inventories([inv_path])
    data_path = tmp_path / "data.lua"
    data_path.write_text(render_all(inv, (22, 5), parts)["slurm_topo_data.lua"])
    data = make_context(inv, (22, 5), parts).policy
    lua = LuaFilter()
    lua_data = lua.load_data(data_path)
    shapes = world.make_shapes(fleet, 400, seed)
    mismatches = []
    for shape in shapes:
        expected = decide(data, JobRequest.from_job_desc(shape.job)).as_dict()
        got = lua.decide(lua_data, shape.job)
        if got != expected:
            mismatches.append((shape.text, expected, got))
    assert mismatches == [], f"{len(mismatches)} of {len(shapes)}, first: {mismatches[0]}"
