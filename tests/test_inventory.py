"""Inventory loading and merging: labels, zone-shaped regions, trust, gap filling, Slurm's node list."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo import InventoryError, Location, Source, merge, parse_inventory
from slurm_topo.access.text import parse_scontrol_nodes
from slurm_topo.inventory import load_inventories, region_of_zone, with_slurm_nodes


def load(*docs: str):  # type: ignore[no-untyped-def]
    return merge(parse_inventory(d, source=f"f{i}.yaml") for i, d in enumerate(docs))


def test_hostlist_entry_expands_to_one_node_each() -> None:
    """One entry with a hostlist covers every node it names, each with the entry's location."""
    inv = load("nodes:\n  - {name: 'gpu-[01-03]', region: r1, zone: r1-a, network_group: rack-3, gpus: 8}\n")
    assert inv.names() == ("gpu-01", "gpu-02", "gpu-03")
    assert {n.location for n in inv.nodes} == {Location("r1", "r1-a", "rack-3")}


def test_network_group_label_is_accepted() -> None:
    """The operator label gpulayer.dev/network-group is read as the network group."""
    inv = load(
        "nodes:\n  - {name: n1, region: r1, zone: r1-a, labels: {gpulayer.dev/network-group: rack-3}}\n"
    )
    assert inv.nodes[0].location.network_group == "rack-3"


@pytest.mark.parametrize(
    ("zone", "region"),
    [("europe-west1-b", "europe-west1"), ("us-east-1a", "us-east-1"), ("hall-a", None), ("dc1", None)],
)
def test_region_of_zone(zone: str, region: str | None) -> None:
    """GCP and AWS zone names name their region; other names do not."""
    assert region_of_zone(zone) == region


def test_zone_shaped_region_is_split_with_one_warning() -> None:
    """region: europe-west1-b with no zone becomes region europe-west1, zone europe-west1-b, and one
    warning."""
    inv = load("nodes:\n  - {name: n1, region: europe-west1-b}\n")
    assert inv.nodes[0].location == Location("europe-west1", "europe-west1-b")
    assert len(inv.warnings) == 1 and "looks like a zone" in inv.warnings[0]


def test_zone_implies_region_when_it_names_one() -> None:
    """zone: europe-west4-a alone places the node in region europe-west4."""
    inv = load("nodes:\n  - {name: n1, zone: europe-west4-a}\n")
    assert inv.nodes[0].location == Location("europe-west4", "europe-west4-a")


def test_same_trust_duplicate_with_same_location_merges() -> None:
    """A node listed twice at one trust level with the same location is one node; gaps are filled."""
    inv = load(
        "nodes:\n  - {name: n1, region: r1, gpus: 8}\n", "nodes:\n  - {name: n1, region: r1, features: [a]}\n"
    )
    assert len(inv.nodes) == 1
    assert inv.nodes[0].gpus == 8 and inv.nodes[0].features == ("a",)
    assert inv.conflicts == ()


def test_same_trust_disagreement_is_an_error() -> None:
    """Two operator records placing a node differently are an error naming both."""
    with pytest.raises(
        InventoryError, match=r"f1.yaml: nodes\[0\]: node n1 is at region=r2 here but at region=r1"
    ):
        load("nodes:\n  - {name: n1, region: r1}\n", "nodes:\n  - {name: n1, region: r2}\n")


def test_trusted_record_wins_and_conflict_is_reported() -> None:
    """Across trust levels the provider's location is kept and the self-report is a conflict."""
    inv = load(
        "nodes:\n  - {name: n1, region: r1, zone: r1-a, source: self}\n",
        "nodes:\n  - {name: n1, region: r2, zone: r2-b, source: provider}\n",
    )
    assert inv.nodes[0].location == Location("r2", "r2-b")
    assert inv.nodes[0].source == Source.PROVIDER
    assert len(inv.conflicts) == 1
    msg = inv.conflicts[0].message()
    assert msg == (
        "conflict: node n1: region: self says r1, provider says r2; zone: self says r1-a, provider says "
        "r2-b; keeping the provider record (f1.yaml: nodes[0]) over f0.yaml: nodes[0]"
    )


def test_self_report_fills_a_gap_below_agreeing_levels() -> None:
    """A self-report may add the zone and group under the region the trusted record gives, never change it."""
    inv = load(
        "nodes:\n  - {name: n1, region: r1, zone: r1-a, network_group: g7, source: self, gpus: 4}\n",
        "nodes:\n  - {name: n1, region: r1}\n",
    )
    assert inv.nodes[0].location == Location("r1", "r1-a", "g7")
    assert inv.nodes[0].gpus == 4
    assert inv.conflicts == ()


def test_per_node_addresses_pair_with_names() -> None:
    """NodeAddr/Port hostlists pair up with the entry's node names in order."""
    inv = load("nodes:\n  - {name: 'n[1-3]', slurm: {NodeAddr: '10.0.0.[11-13]', Port: '[7001-7003]'}}\n")
    assert [(n.slurm_attr("NodeAddr"), n.slurm_attr("Port")) for n in inv.nodes] == [
        ("10.0.0.11", "7001"),
        ("10.0.0.12", "7002"),
        ("10.0.0.13", "7003"),
    ]


def test_slurm_node_list_fills_hardware_and_adds_unknown_nodes() -> None:
    """`scontrol show node -o` fills missing hardware attributes and lists nodes no inventory places."""
    text = (
        "NodeName=n1 Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 CPUTot=16 AvailableFeatures=zone_old,big "
        "Gres=gpu:h100:8 NodeAddr=10.1.1.1 NodeHostName=n1 OS=Linux 6.1.0-18-amd64 #1 SMP Debian "
        "RealMemory=64000 Sockets=2 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1\n"
        "NodeName=login9 CPUTot=4 RealMemory=8000\n"
    )
    records = parse_scontrol_nodes(text)
    inv = with_slurm_nodes(load("nodes:\n  - {name: n1, region: r1, slurm: {CPUs: 32}}\n"), records)
    node = inv.nodes[0]
    assert node.slurm_attr("CPUs") == "32", "the inventory's own value wins"
    assert node.slurm_attr("RealMemory") == "64000"
    assert node.slurm_attr("NodeAddr") == "10.1.1.1"
    assert node.slurm_attr("NodeHostname") is None, "equal to the node name: nothing to carry"
    assert node.slurm_attr("Gres") == "gpu:h100:8"
    assert inv.extra_nodes == ("login9",)


def test_entry_with_no_location_is_a_warning_line() -> None:
    """An entry with no region or zone still loads (its nodes go to the root's leaf) but says so, once."""
    loaded = parse_inventory("nodes:\n  - {name: 'n[1-3]'}\n  - {name: m1, region: r1}\n", source="f.yaml")
    assert loaded.warnings == (
        "f.yaml: nodes[0]: 'n[1-3]' has no region or zone; placed in the root's leaf switch (no locality)",
    )


def test_valid_slurm_values_at_slurms_limits_are_kept() -> None:
    """The edges of what Slurm accepts pass unchanged; one past them is refused (tests/test_bad_input.py)."""
    doc = """
nodes:
  - name: n1
    slurm: {Port: 65535, CPUs: 65533, RealMemory: 1099511627776, TmpDisk: 4294967293, Weight: 4294967294,
            State: future, Gres: 'gpu:h100:no_consume:8,mps:400,shard:2K', NodeAddr: 'fe80::1'}
"""
    node = parse_inventory(doc).nodes[0]
    assert dict(node.slurm) == {
        "Port": "65535",
        "CPUs": "65533",
        "RealMemory": "1099511627776",
        "TmpDisk": "4294967293",
        "Weight": "4294967294",
        "State": "future",
        "Gres": "gpu:h100:no_consume:8,mps:400,shard:2K",
        "NodeAddr": "fe80::1",
    }
    with pytest.raises(InventoryError, match="slurm.NodeAddr: has 2 values for 3 nodes"):
        parse_inventory("nodes:\n  - {name: 'n[1-3]', slurm: {NodeAddr: 'a1,a2'}}\n")
    pairs = parse_inventory("nodes:\n  - {name: 'n[1-2]', slurm: {NodeAddr: 'b2,b1'}}\n").nodes
    assert [(n.name, n.slurm_attr("NodeAddr")) for n in pairs] == [("n1", "b2"), ("n2", "b1")]


def test_yaml_anchors_within_the_bound_still_work() -> None:
    """Aliases are legitimate YAML (one hardware block for many entries); only their expansion is bounded."""
    doc = "nodes:\n  - {name: a1, region: r1, slurm: &hw {CPUs: 8}}\n  - {name: a2, region: r1, slurm: *hw}\n"
    assert [n.slurm for n in parse_inventory(doc).nodes] == [(("CPUs", "8"),)] * 2


def test_slurm_node_list_values_slurm_would_refuse_are_not_imported() -> None:
    """A saved `scontrol show node -o` can be edited: values outside what slurm.conf accepts are left out, as
    values that are not plain tokens always were; the node itself is still known."""
    inv = merge([parse_inventory("nodes:\n  - {name: n1, region: r1}\n")])
    records = parse_scontrol_nodes(
        "NodeName=n1 CPUTot=99999999 RealMemory=1000 Port=0 Weight=99999999999 TmpDisk=010 Boards=1\n"
    )
    node = with_slurm_nodes(inv, records).nodes[0]
    assert dict(node.slurm) == {"Boards": "1", "RealMemory": "1000"}


def test_one_node_budget_across_files_is_counted_before_expansion(tmp_path: Path) -> None:
    """The node limit is for all inputs together: a second file is refused from its counted size, before
    anything of it is expanded, naming what is left."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("nodes:\n  - {name: 'n[1-4]', region: r1}\n")
    second.write_text("nodes:\n  - {name: 'm[1-262141]', region: r1}\n")
    with pytest.raises(
        InventoryError, match=r"b.yaml: nodes\[0\].name: names 262141 hosts, .* \(262140 left\)"
    ):
        load_inventories([first, second])
    assert len(load_inventories([first]).nodes) == 4


def test_links_rails_are_validated_at_load_and_generate_writes_nothing(tmp_path: Path) -> None:
    """links: {rails: …} (NIC -> rail, for the cost model) is checked when the inventory loads: a bad rail is
    one line naming the file and key, exit 2, and `generate` writes nothing; a good map loads."""
    import subprocess
    import sys

    base = "nodes:\n  - {name: 'n[1-2]', region: r, zone: z, network_group: g, gpus: 8}\n"
    good = tmp_path / "good.yaml"
    good.write_text(base + "links:\n  rails: {mlx5_0: 0, mlx5_1: rail-b}\n")
    assert [n.name for n in load_inventories([good]).nodes] == ["n1", "n2"]
    for i, bad_rails in enumerate(["{mlx5_0: 1.5}", "{'mlx5 0': 0}", "[mlx5_0]", "{mlx5_0: 'a,b'}"]):
        bad = tmp_path / f"bad{i}.yaml"
        bad.write_text(base + f"links:\n  rails: {bad_rails}\n")
        out = tmp_path / f"out{i}"
        proc = subprocess.run(
            [sys.executable, "-m", "slurm_topo", "generate", "-i", str(bad), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{bad}: links.rails" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert not out.exists() or not any(out.iterdir())


# ---- the loader's fast paths give what the plain paths give


def _random_expression(rng) -> str:  # type: ignore[no-untyped-def]
    alphabet = "a9.-_9x"

    def number() -> str:
        width = rng.choice([1, 1, 2, 3])
        value = rng.randint(0, 10**width - 1) if rng.random() < 0.8 else rng.randint(0, 130)
        return str(value).zfill(width) if rng.random() < 0.6 else str(value)

    def item() -> str:
        return number() if rng.random() < 0.3 else f"{number()}-{number()}"

    prefix = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
    suffix = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
    if rng.random() < 0.1:
        return prefix + number() + suffix
    return f"{prefix}[{','.join(item() for _ in range(rng.randint(1, 3)))}]{suffix}"


def test_naturally_ordered_expansions_are_sorted_and_unique() -> None:
    """What hostlist.naturally_ordered declares in natural order (the loader then skips sorting the entry's
    nodes) is: on 20 000 generated expressions (padding, mixed widths, digits touching a bracket, ranges out
    of order, overlapping items) the expansion is sorted by natural_key, each name once, the last the longest;
    and expand gives Slurm's reading less its repeats (test_hostlist_slurm.py compares that with Slurm)."""
    import random

    from slurm_topo.core import hostlist
    from slurm_topo.core.errors import HostlistError
    from slurm_topo.core.model import natural_key

    rng = random.Random(2026)
    taken = 0
    for _ in range(20_000):
        expr = _random_expression(rng)
        try:
            slurm = hostlist.expand_keep_duplicates(expr)
        except HostlistError:
            assert not hostlist.naturally_ordered(expr), expr
            continue
        mine = hostlist.expand(expr)
        assert mine == list(dict.fromkeys(slurm)), expr
        if not hostlist.naturally_ordered(expr):
            continue
        taken += 1
        assert mine == slurm == sorted(set(slurm), key=natural_key), expr
        assert len(mine[-1]) == max(map(len, mine)), expr
    assert taken > 5_000  # most of them are in order, and the rest are sorted by the loader


def test_digits_at_a_bracket_are_slurms_prefix() -> None:
    """Digits before a bracket are the prefix's, as Slurm reads them (ClusterShell made ``n9[8-10]`` the range
    n98-n910); such a name is still in natural order, so the loader keeps it without sorting."""
    from slurm_topo.core import hostlist

    assert hostlist.expand("n9[8-10]") == ["n98", "n99", "n910"]
    assert hostlist.naturally_ordered("n9[8-10]")
    for expr in ("n[01-3,1]", "n[1-3,02]", "n9[008,9]", "a[1-2],b[1-2]", "r[1-2]n[1-2]"):
        assert not hostlist.naturally_ordered(expr), expr


def test_nodes_alike_equals_the_constructor() -> None:
    """model.nodes_alike makes the nodes Node(...) makes: equal, same hash, same repr, every field set."""
    import dataclasses

    from slurm_topo.core.model import Node, nodes_alike

    loc = Location("r1", "r1-a", "rack-3")
    common = dict(
        location=loc,
        features=("ib",),
        gpus=8,
        gpu_type="h100",
        source=Source.PROVIDER,
        origin="f.yaml: nodes[2]",
        found_by=(("dmi", "x"),),
        notes=("n",),
        gpu_topology=None,
        nvlink_domain="nvl-1",
    )
    slurm = [(("CPUs", "64"),), (("CPUs", "64"), ("Weight", "3"))]
    made = nodes_alike(["a1", "a2"], slurm, **common)  # type: ignore[arg-type]
    plain = [Node(name=n, slurm=s, **common) for n, s in zip(["a1", "a2"], slurm, strict=True)]  # type: ignore[arg-type]
    assert made == plain
    assert [hash(n) for n in made] == [hash(n) for n in plain]
    assert [repr(n) for n in made] == [repr(n) for n in plain]
    for node in made:
        assert {f.name for f in dataclasses.fields(node)} == set(Node.__slots__)
        for f in dataclasses.fields(node):
            getattr(node, f.name)  # every slot set (an unset slot raises AttributeError)


FLEET = "".join(  # racks in three orders (rack 7 before rack 1), one-name entries, a comma list, a plain name
    f"  - {{name: '{expr}', region: r{i % 2}, zone: r{i % 2}-a, network_group: g{i}, gpus: 8, "
    f"slurm: {{CPUs: 64}}}}\n"
    for i, expr in enumerate(
        [
            "gpu-k07-[000-039]",
            "gpu-k01-[000-039]",
            "gpu-k10-[0-9]",
            "gpu-k02-[1-3,5,7-8]",
            "login9",
            "gpu-k02-4",
            "gpu-k03-[1-3]-ib",
            "gpu-k02-[6,10-12]",
            "cpu[5,1-3],cpu[4,7]",
        ]
    )
)


def _loaded_plainly(docs: list[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The same documents with a sort of every node: the loader without its fast path."""
    from slurm_topo.core import hostlist
    from slurm_topo.core.model import natural_key

    with monkeypatch.context() as m:
        m.setattr(hostlist, "naturally_ordered", lambda expr: False)
        inv = load(*docs)
    assert list(inv.names()) == sorted(inv.names(), key=natural_key)
    return inv


def test_loader_gives_what_the_plain_loader_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries in any order, interleaved (k02's entries interleave: the stretches overlap and every node is
    sorted), a comma list of two brackets and duplicates across files: the same Inventory, field for field
    and in the same order, as with a sort of every node."""
    docs = [
        "nodes:\n" + FLEET,
        "nodes:\n  - {name: 'gpu-k07-[000-003]', region: r0, zone: r0-a, network_group: g0, source: self}\n",
    ]
    fast = load(*docs)
    plain = _loaded_plainly(docs, monkeypatch)
    assert fast == plain
    assert fast.names() == plain.names()
    assert [(n.origin, n.source, n.slurm) for n in fast.nodes] == [
        (n.origin, n.source, n.slurm) for n in plain.nodes
    ]
    assert "gpu-k02-4" in fast.names() and fast.names().index("gpu-k02-4") < fast.names().index("gpu-k02-5")


def test_loader_orders_separate_racks_without_sorting_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Racks that do not interleave are ordered by their first names: natural_key is computed twice a rack,
    not once a node, and the order is the natural one."""
    import importlib

    from slurm_topo.core import model

    merge_mod = importlib.import_module(
        "slurm_topo.inventory.merge"
    )  # the module (the package exports merge)

    doc = "nodes:\n" + "".join(
        f"  - {{name: 'gpu-k{k:02d}-[000-039]', region: r, zone: r-a, network_group: g{k}}}\n"
        for k in (9, 3, 12)
    )
    calls: list[str] = []
    real = model.natural_key

    def counting(name: str):  # type: ignore[no-untyped-def]
        calls.append(name)
        return real(name)

    monkeypatch.setattr(merge_mod, "natural_key", counting)
    inv = load(doc)
    assert inv.names() == tuple(f"gpu-k{k:02d}-{i:03d}" for k in (3, 9, 12) for i in range(40))
    assert len(calls) == 6
    monkeypatch.undo()
    assert inv == _loaded_plainly([doc], monkeypatch)
