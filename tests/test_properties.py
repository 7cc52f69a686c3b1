"""Property tests over generated fleets: each node once, a consistent tree, round-trip, byte-stable output."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.core import hostlist
from slurm_topo.slurmconfig.lint import lint_topology
from slurm_topo.slurmconfig.slurmconf import parse_topology_conf

# Few, short labels so that names collide across regions and zones (zone "a" in two regions, ...).
label = st.sampled_from(["a", "b", "r1", "r1-a", "x" * 62, "rack-1", "g.1", "europe-west1", "europe-west1-b"])
location = st.tuples(st.none() | label, st.none() | label, st.none() | label)
prefix = st.sampled_from(["n", "gpu-", "node-a", "x1y", "login"])


@st.composite
def fleets(draw: st.DrawFn) -> list[dict[str, object]]:
    entries = []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 12))):
        pre = draw(prefix)
        start = draw(st.integers(0, 120))
        count = draw(st.integers(1, 6))
        pad = draw(st.sampled_from([0, 2, 3]))
        names = [f"{pre}{i:0{pad}d}" for i in range(start, start + count)]
        names = [n for n in names if n not in used]
        if not names:
            continue
        used.update(names)
        region, zone, group = draw(location)
        entry: dict[str, object] = {"name": ",".join(names)}
        if region is not None and region != "europe-west1-b":
            entry["region"] = region
            if zone is not None:
                entry["zone"] = zone
            if group is not None:
                entry["network_group"] = group
        entries.append(entry)
    return entries


def to_yaml(entries: list[dict[str, object]]) -> str:
    lines = ["nodes:"]
    for e in entries:
        lines.append("  - " + "{" + ", ".join(f"{k}: '{v}'" for k, v in e.items()) + "}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.randoms(use_true_random=False))
def test_generated_fleets_render_consistently(entries: list[dict[str, object]], rnd: random.Random) -> None:
    """Every node is on exactly one leaf, every switch has one parent up to the root, the file parses back to
    the same tree and lints clean, node features name the node's own ancestors, and entry order does not
    matter."""
    inv = merge([parse_inventory(to_yaml(entries))])
    out = render_all(inv, (22, 5))
    parsed = parse_topology_conf(out["topology.conf"])
    assert lint_topology(parsed, known_nodes=inv.names()) == []

    leaves = [n for sw in parsed for n in (sw.nodes or ())]
    assert sorted(leaves) == sorted(inv.names())

    from slurm_topo import build_topology

    topo = build_topology(inv)
    assert {sw.name: (tuple(sw.switches or ()), tuple(sorted(sw.nodes or ()))) for sw in parsed} == {
        sw.name: (sw.switches, tuple(sorted(sw.nodes))) for sw in topo.switches
    }

    parent = {child: sw.name for sw in parsed for child in (sw.switches or ())}
    leaf_of = {n: sw.name for sw in parsed for n in (sw.nodes or ())}
    for node in inv.nodes:
        chain, cur = [], leaf_of[node.name]
        while cur in parent:
            chain.append(cur)
            cur = parent[cur]
        assert cur == "root"
        assert set(topo.node_features[node.name]) <= set(chain)

    shuffled = entries[:]
    rnd.shuffle(shuffled)
    again = render_all(merge([parse_inventory(to_yaml(shuffled))]), (22, 5))
    assert again == out


names_strategy = st.lists(
    st.builds(
        lambda p, n, w, s: f"{p}{n:0{w}d}{s}",
        st.sampled_from(["n", "gpu-", "a1b", "rack2-n"]),
        st.integers(0, 2000),
        st.sampled_from([0, 1, 3, 4]),
        st.sampled_from(["", "-ib", "x"]),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(names_strategy)
def test_compress_round_trips(names: list[str]) -> None:
    """compress() folds any set of names into one expression that expands back to exactly that set."""
    expr = hostlist.compress(names)
    assert sorted(hostlist.expand(expr)) == sorted(set(names))


rack_strategy = st.builds(
    lambda p, w, ns: [f"{p}{n:0{w}d}" for n in ns],
    st.sampled_from(["n", "gpu-", "a1b", "rack2-n", "r.1_x-", ""]),
    st.integers(1, 5),
    st.lists(st.integers(0, 99999), min_size=1, max_size=40),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(rack_strategy, names_strategy))
def test_a_racks_fold_without_clustershell_equals_clustershells(names: list[str]) -> None:
    """Names of one plain prefix and one number width (a rack's nodes) are folded without ClusterShell, into
    exactly what ClusterShell's NodeSet writes for them; any other set is left to ClusterShell."""
    folded = hostlist._one_prefix(tuple(names))
    prefixes = {hostlist._LAST_NUMBER.match(n)[1] if hostlist._LAST_NUMBER.match(n) else n for n in names}
    widths = {len(m[2]) for m in map(hostlist._LAST_NUMBER.match, names) if m}
    if len(prefixes) == 1 and len(widths) == 1 and all(map(hostlist._LAST_NUMBER.match, names)):
        assert folded is not None, names
    if folded is not None:
        assert folded == hostlist._clustershell_fold(tuple(names))
