"""Switch layers below the network group (issue 47 item 1): the ``switches:`` key of a node entry, its
validation and merge by trust, the tree and the features it makes, the fingerprint, the rendered files and
``lint``'s check of Slurm's level-resolution passes."""

from __future__ import annotations

import random

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import InventoryError, merge, parse_inventory, render_all
from slurm_topo.core import hostlist
from slurm_topo.core.model import (
    LEVEL_FEATURE_PREFIXES,
    MAX_NAME,
    MAX_SWITCH_LAYERS,
    Source,
    is_level_feature,
)
from slurm_topo.core.topology import build_topology
from slurm_topo.render import fingerprint
from slurm_topo.slurmconfig.lint import SLURM_LEVEL_PASSES, lint_file, lint_topology
from slurm_topo.slurmconfig.slurmconf import SwitchLine, logical_lines, parse_topology_conf, split_pairs


def _inv(*entries: dict[str, object]):  # type: ignore[no-untyped-def]
    return merge([parse_inventory(yaml.safe_dump({"nodes": list(entries)}), source="inv.yaml")])


# ----------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("tor-1", "must be a non-empty list"),
        ([], "must be a non-empty list"),
        (["a", "b c"], r"\[1\]: must be 1-63 characters"),
        (["a", "x" * 64], r"\[1\]: must be 1-63 characters"),
        (["a", 3], r"\[1\]: must be a string"),
        (["a", "b", "a"], "names switch a twice"),
        ([f"s{i}" for i in range(MAX_SWITCH_LAYERS + 1)], f"at most {MAX_SWITCH_LAYERS} layers"),
    ],
)
def test_a_bad_switches_value_is_refused_by_its_key(value: object, reason: str) -> None:
    with pytest.raises(InventoryError, match=rf"inv\.yaml: nodes\[0\]\.switches.*{reason}"):
        _inv({"name": "n1", "zone": "us-east-1a", "network_group": "g", "switches": value})


def test_switches_need_a_network_group() -> None:
    with pytest.raises(InventoryError, match=r"nodes\[0\]\.switches: needs a network_group"):
        _inv({"name": "n1", "zone": "us-east-1a", "switches": ["tor-1"]})


def test_a_switch_label_that_is_a_level_feature_is_still_only_a_label() -> None:
    """The label is scoped by the generator's prefix: a switch labelled ``ng_x`` is ``leaf_<zone>.ng_x``."""
    t = build_topology(_inv({"name": "n1", "zone": "us-east-1a", "network_group": "g", "switches": ["ng_x"]}))
    assert t.node_features["n1"][-1] == "leaf_us-east-1a.ng_x"
    assert "leaf_" in LEVEL_FEATURE_PREFIXES and is_level_feature("leaf_us-east-1a.ng_x")


def test_a_node_cannot_claim_a_switch_feature() -> None:
    with pytest.raises(InventoryError, match=r"features\[0\].*made by slurm-topo"):
        _inv({"name": "n1", "zone": "us-east-1a", "features": ["leaf_us-east-1a.tor-1"]})


# ------------------------------------------------------------------------------------------ merge by trust


def _two(first: dict[str, object], second: dict[str, object]):  # type: ignore[no-untyped-def]
    a = parse_inventory(yaml.safe_dump({"nodes": [first]}), source="a.yaml")
    b = parse_inventory(yaml.safe_dump({"nodes": [second]}), source="b.yaml")
    return merge([a, b])


PROVIDER = {
    "name": "n1",
    "zone": "us-east-1a",
    "network_group": "g",
    "switches": ["s1", "t1"],
    "source": "provider",
}


def test_a_less_trusted_record_never_moves_a_provider_node_to_other_switches() -> None:
    for source in ("operator", "self"):
        inv = _two(PROVIDER, dict(PROVIDER, switches=["s9", "t9"], source=source))
        (node,) = inv.nodes
        assert node.switches == ("s1", "t1") and node.switches_source is None
        (conflict,) = inv.conflicts
        assert conflict.kept_switches == ("s1", "t1") and conflict.ignored_switches == ("s9", "t9")
        assert f"switches: {source} says s9/t9, provider says s1/t1" in conflict.message()


def test_a_less_trusted_record_fills_switches_only_under_the_same_group() -> None:
    bare = {k: v for k, v in PROVIDER.items() if k != "switches"}
    inv = _two(bare, dict(PROVIDER, source="operator"))
    (node,) = inv.nodes
    assert node.switches == ("s1", "t1") and node.switches_source == Source.OPERATOR
    assert inv.conflicts == ()
    inv = _two(bare, dict(PROVIDER, network_group="other", source="operator"))  # elsewhere: says nothing here
    (node,) = inv.nodes
    assert node.switches == () and node.location.network_group == "g"
    assert len(inv.conflicts) == 1 and inv.conflicts[0].ignored.network_group == "other"


def test_same_trust_records_must_agree_on_the_switches() -> None:
    with pytest.raises(InventoryError, match="under switches s1/t2 here but under s1/t1"):
        _two(PROVIDER, dict(PROVIDER, switches=["s1", "t2"]))
    bare = {k: v for k, v in PROVIDER.items() if k != "switches"}
    (node,) = _two(bare, PROVIDER).nodes
    assert node.switches == ("s1", "t1")


# ------------------------------------------------------------------------------- the tree, over many fleets

_labels = st.sampled_from(["a", "b", "c", "x" * 63])


@st.composite
def fleets(draw: st.DrawFn) -> list[dict[str, object]]:
    """Random fleets: nodes in 1-2 zones and 1-2 groups, each with 0-4 switch layers from a small alphabet
    (so paths share prefixes, differ in depth, and labels repeat under different parents)."""
    entries = []
    for i in range(draw(st.integers(1, 12))):
        entry: dict[str, object] = {
            "name": f"n{i}",
            "zone": draw(st.sampled_from(["us-east-1a", "us-east-1b"])),
            "network_group": draw(st.sampled_from(["g1", "g2"])),
        }
        depth = draw(st.integers(0, MAX_SWITCH_LAYERS))
        path = draw(st.lists(_labels, min_size=depth, max_size=depth, unique=True))
        if path:
            entry["switches"] = path
        entries.append(entry)
    return entries


@settings(max_examples=150, deadline=None)
@given(fleets())
def test_every_fleet_gives_a_tree_that_follows_the_switches(entries: list[dict[str, object]]) -> None:
    inv = _inv(*entries)
    t = build_topology(inv)
    by_name = {sw.name: sw for sw in t.switches}
    parent = {c: sw.name for sw in t.switches for c in sw.switches}
    leaf_of = {n: sw.name for sw in t.switches for n in sw.nodes}
    assert sorted(leaf_of) == sorted(n.name for n in inv.nodes)  # each node on exactly one leaf
    assert sum(len(sw.nodes) for sw in t.switches) == len(inv.nodes)
    assert all(bool(sw.nodes) != bool(sw.switches) for sw in t.switches)  # nodes or switches, never both
    assert len(by_name) == len(t.switches) and all(len(name) <= MAX_NAME for name in by_name)
    for node in inv.nodes:
        chain = [leaf_of[node.name]]  # the node's ancestors, leaf first
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        assert chain[-1] == "root"
        kinds = [by_name[s].kind for s in reversed(chain)]
        below = [by_name[s] for s in reversed(chain) if by_name[s].kind == "switch"]
        assert [sw.label for sw in below] == list(node.switches)
        assert kinds[:4] == ["root", "region", "zone", "network_group"]
        assert t.node_features[node.name][3:] == tuple(sw.name for sw in below)
        assert all(f.startswith("leaf_") for f in t.node_features[node.name][3:])
    # two nodes share a switch below the group exactly when their paths share that prefix in one group
    for a in inv.nodes:
        for b in inv.nodes:
            for depth in range(1, MAX_SWITCH_LAYERS + 1):
                same = (
                    a.location == b.location
                    and len(a.switches) >= depth
                    and len(b.switches) >= depth
                    and a.switches[:depth] == b.switches[:depth]
                )
                fa, fb = (
                    t.node_features[a.name][2 + depth : 3 + depth],
                    t.node_features[b.name][2 + depth : 3 + depth],
                )
                assert (bool(fa) and fa == fb) == same


@settings(max_examples=60, deadline=None)
@given(fleets(), st.sampled_from([(22, 5), (24, 11), (26, 5)]))
def test_the_rendered_tree_lints_clean_and_resolves_in_one_pass(
    entries: list[dict[str, object]], version: tuple[int, int]
) -> None:
    inv = _inv(*entries)
    files = render_all(inv, version)
    text = files["topology.conf"]
    lines = parse_topology_conf(text)
    assert lint_topology(lines) == []
    seen: set[str] = set()
    for line in lines:  # children before parents: Slurm resolves every level in its first pass
        assert all(c in seen for c in line.switches or ()), line.name
        seen.add(line.name)
    assert lint_file(text, slurm_version=version) == []
    t = build_topology(inv)
    written: dict[str, tuple[str, ...]] = {}  # NodeName= lines read back: the features each node gets
    for _, line in logical_lines(files["slurm-topo-nodes.conf"]):
        pairs = split_pairs(line)
        for name in hostlist.expand(pairs["NodeName"]):
            written[name] = tuple(pairs["Features"].split(","))
    assert written == {n.name: t.node_features[n.name] for n in inv.nodes}


def test_mixed_depths_under_one_switch_get_a_leaf_of_their_own() -> None:
    t = build_topology(
        _inv(
            {"name": "n[1-2]", "zone": "us-east-1a", "network_group": "g", "switches": ["s1", "t1"]},
            {"name": "n3", "zone": "us-east-1a", "network_group": "g", "switches": ["s1"]},
            {"name": "n4", "zone": "us-east-1a", "network_group": "g"},
        )
    )
    sw = {s.name: (s.switches, s.nodes) for s in t.switches}
    assert sw["ng_us-east-1a.g"] == (("leaf_us-east-1a.g.nodes", "leaf_us-east-1a.s1"), ())
    assert sw["leaf_us-east-1a.s1"] == (("leaf_us-east-1a.s1.nodes", "leaf_us-east-1a.t1"), ())
    assert sw["leaf_us-east-1a.s1.nodes"] == ((), ("n3",))
    assert sw["leaf_us-east-1a.g.nodes"] == ((), ("n4",))
    assert t.node_features["n3"][-1] == "leaf_us-east-1a.s1"  # the extra leaf is no feature
    assert t.node_features["n4"] == ("region_us-east-1", "zone_us-east-1a", "ng_us-east-1a.g")


def test_a_label_under_two_parents_is_two_switches_with_hashed_names() -> None:
    t = build_topology(
        _inv(
            {"name": "n1", "zone": "us-east-1a", "network_group": "g", "switches": ["s1", "tor"]},
            {"name": "n2", "zone": "us-east-1a", "network_group": "g", "switches": ["s2", "tor"]},
        )
    )
    a, b = t.node_features["n1"][-1], t.node_features["n2"][-1]
    assert a != b and a.startswith("leaf_us-east-1a.tor_") and b.startswith("leaf_us-east-1a.tor_")


def test_degraded_nodes_keep_their_switch_but_no_switch_feature() -> None:
    from dataclasses import replace

    inv = _inv({"name": "n[1-2]", "zone": "us-east-1a", "network_group": "g", "switches": ["s1"]})
    inv = replace(inv, nodes=(replace(inv.nodes[0], degraded=True), inv.nodes[1]))
    t = build_topology(inv)
    assert t.node_features["n1"] == () and t.node_features["n2"][-1] == "leaf_us-east-1a.s1"
    assert {n for sw in t.switches if sw.kind == "switch" for n in sw.nodes} == {"n1", "n2"}


@settings(max_examples=60, deadline=None)
@given(fleets(), st.randoms(use_true_random=False))
def test_the_fingerprint_changes_with_the_switches_and_only_then(
    entries: list[dict[str, object]], rnd: random.Random
) -> None:
    inv = _inv(*entries)
    plain = _inv(*({k: v for k, v in e.items() if k != "switches"} for e in entries))
    same_plain = _inv(*({k: v for k, v in e.items() if k != "switches"} for e in reversed(entries)))
    assert fingerprint(plain, (24, 11)) == fingerprint(same_plain, (24, 11))  # entry order does not count
    has = [i for i, e in enumerate(entries) if "switches" in e]
    assert (fingerprint(inv, (24, 11)) == fingerprint(plain, (24, 11))) == (not has)
    if has:
        i = rnd.choice(has)
        moved = [dict(e) for e in entries]
        moved[i]["switches"] = [*moved[i]["switches"][:-1], "moved"]  # type: ignore[index]
        assert fingerprint(_inv(*moved), (24, 11)) != fingerprint(inv, (24, 11))


def test_topology_yaml_carries_the_switches_below_the_group() -> None:
    inv = merge(
        [
            parse_inventory(
                yaml.safe_dump(
                    {
                        "nodes": [
                            {
                                "name": "n[1-2]",
                                "zone": "us-east-1a",
                                "network_group": "g",
                                "switches": ["s1", "t1"],
                                "nvlink_domain": "d1",
                            }
                        ]
                    }
                )
            )
        ]
    )
    text = render_all(inv, (26, 5))["topology.yaml"]
    doc = yaml.safe_load(text)
    tree = {sw["switch"]: sw for sw in doc[0]["tree"]["switches"]}
    assert tree["leaf_us-east-1a.t1"]["nodes"] == "n[1-2]"
    assert tree["leaf_us-east-1a.s1"]["children"] == "leaf_us-east-1a.t1"
    assert tree["ng_us-east-1a.g"]["children"] == "leaf_us-east-1a.s1"
    assert lint_file(text, source="topology.yaml", slurm_version=(26, 5)) == []


# ------------------------------------------------------------------------------------ lint: level passes


def _chain(depth: int, parents_first: bool) -> list[SwitchLine]:
    """root -> s1 -> ... -> s<depth-1> -> leaf: ``depth`` switches with switches, one leaf."""
    names = ["root", *(f"s{i}" for i in range(1, depth))]
    lines = [
        SwitchLine(n, None, (names[i + 1] if i + 1 < len(names) else "leaf",), 0) for i, n in enumerate(names)
    ]
    lines.append(SwitchLine("leaf", ("n1",), None, 0))
    if not parents_first:
        lines.reverse()
    return [SwitchLine(sw.name, sw.nodes, sw.switches, i + 1) for i, sw in enumerate(lines)]


@pytest.mark.parametrize("depth", [1, 2, 20, SLURM_LEVEL_PASSES, SLURM_LEVEL_PASSES + 1, 40])
def test_too_deep_counts_slurms_passes(depth: int) -> None:
    """Written parents first, a chain of N switches above the leaf needs N passes (one level a pass);
    children first, one pass whatever the depth."""
    problems = [p.code for p in lint_topology(_chain(depth, parents_first=True))]
    assert ("too-deep" in problems) == (depth > SLURM_LEVEL_PASSES)
    assert lint_topology(_chain(depth, parents_first=False)) == []


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.randoms(use_true_random=False))
def test_too_deep_only_when_a_pass_order_needs_more_than_slurm_allows(depth: int, rnd: random.Random) -> None:
    """Any order of a chain: the passes are one plus the number of times a parent line comes before the
    line of its child (each such inversion costs a pass), counted independently here."""
    lines = _chain(depth, parents_first=True)
    rnd.shuffle(lines)
    at = {sw.name: i for i, sw in enumerate(lines)}
    inversions = sum(1 for sw in lines for c in sw.switches or () if c != "leaf" and at[c] > at[sw.name])
    assert ("too-deep" in [p.code for p in lint_topology(lines)]) == (1 + inversions > SLURM_LEVEL_PASSES)
