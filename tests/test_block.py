"""NVLink domains: the inventory key, nvl_ features, block order, per-release rendering, lint of blocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo import InputError, InventoryError, merge, parse_inventory, render_all
from slurm_topo.core.model import Source
from slurm_topo.core.topology import build_topology, domain_order
from slurm_topo.slurmconfig.lint import lint_file, parse_block_topologies

REPO = Path(__file__).resolve().parents[1]


def load(*docs: str):  # type: ignore[no-untyped-def]
    return merge(parse_inventory(d, source=f"f{i}.yaml") for i, d in enumerate(docs))


def fleet(domains: dict[str, str], extra: str = "", **rack: str) -> str:
    """An inventory: one entry per (hostlist, domain); ``extra`` is prepended (an nvlink: section)."""
    lines = [extra, "nodes:"]
    for i, (names, domain) in enumerate(domains.items()):
        lines.append(
            f"  - {{name: '{names}', region: dc1, zone: dc1-a, network_group: r{i}, nvlink_domain: {domain}}}"
        )
    return "\n".join(lines) + "\n"


FOUR = {"g[01-04]": "rack-01", "g[05-08]": "rack-02", "g[09-12]": "rack-03", "g[13-16]": "rack-04"}


# ------------------------------------------------------------------------------------------------ inventory


def test_nvlink_domain_key_and_labels_are_read() -> None:
    """``nvlink_domain:``, ``gpulayer.dev/nvlink-domain`` and GFD's ``nvidia.com/gpu.clique`` all set it."""
    inv = load(
        "nodes:\n"
        "  - {name: a1, region: r, nvlink_domain: rack-07}\n"
        "  - {name: a2, region: r, labels: {gpulayer.dev/nvlink-domain: rack-07}}\n"
        "  - {name: a3, region: r, labels: {nvidia.com/gpu.clique: 3f1c1bd0-2b3a-4c1e-9f00-aa11bb22cc33.7}}\n"
        "  - {name: a4, region: r}\n"
    )
    assert [n.nvlink_domain for n in inv.nodes] == [
        "rack-07",
        "rack-07",
        "3f1c1bd0-2b3a-4c1e-9f00-aa11bb22cc33.7",
        None,
    ]


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ("{name: a, region: r, nvlink_domain: 'rack 7'}", "nodes[0].nvlink_domain"),
        ("{name: a, region: r, nvlink_domain: [x]}", "nodes[0].nvlink_domain"),
        ("{name: a, region: r, nvlink_domain: 'a=b'}", "nodes[0].nvlink_domain"),
        (
            "{name: a, region: r, nvlink_domain: x, labels: {gpulayer.dev/nvlink-domain: y}}",
            "nodes[0].labels.gpulayer.dev/nvlink-domain",
        ),
        ("{name: a, region: r, features: [nvl_x]}", "nodes[0].features[0]"),
    ],
)
def test_bad_domain_is_refused_naming_the_key(entry: str, where: str) -> None:
    with pytest.raises(InventoryError) as err:
        load(f"nodes:\n  - {entry}\n")
    assert where in str(err.value)


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ("nvlink: {topology: mesh}", "nvlink.topology"),
        ("nvlink: {block_sizes: [18, 0]}", "nvlink.block_sizes[1]"),
        ("nvlink: {block_sizes: [true]}", "nvlink.block_sizes[0]"),
        ("nvlink: {domains: [a, a]}", "nvlink.domains[1]"),
        ("nvlink: {domains: ['a b']}", "nvlink.domains[0]"),
        ("nvlink: {order: [a]}", "nvlink.order"),
        ("nvlink: [a]", "nvlink"),
    ],
)
def test_bad_nvlink_section_is_refused(section: str, where: str) -> None:
    with pytest.raises(InventoryError) as err:
        load(f"{section}\nnodes:\n  - {{name: a, region: r}}\n")
    assert where in str(err.value)


def test_domain_trust_rules_are_those_of_the_location() -> None:
    """Same trust: two domains are an error. Across trust: the trusted record keeps its domain (a conflict is
    reported), a self record fills a missing one, and a self record placed elsewhere fills nothing."""
    with pytest.raises(InventoryError, match="NVLink domain"):
        load(
            "nodes:\n  - {name: a, region: r, nvlink_domain: x}\n",
            "nodes:\n  - {name: a, nvlink_domain: y}\n",
        )
    op = "nodes:\n  - {name: a, region: r, zone: r-z, nvlink_domain: x}\n"
    inv = load(op, "nodes:\n  - {name: a, nvlink_domain: y, source: self}\n")
    assert inv.nodes[0].nvlink_domain == "x"
    assert (
        len(inv.conflicts) == 1
        and "nvlink_domain: self says y, operator says x" in inv.conflicts[0].message()
    )
    filled = load(
        "nodes:\n  - {name: a, region: r, zone: r-z}\n",
        "nodes:\n  - {name: a, nvlink_domain: y, source: self}\n",
    )
    assert filled.nodes[0].nvlink_domain == "y" and filled.nodes[0].nvlink_source == Source.SELF
    elsewhere = load(
        "nodes:\n  - {name: a, region: r, zone: r-z}\n",
        "nodes:\n  - {name: a, region: q, nvlink_domain: y, source: self}\n",
    )
    assert elsewhere.nodes[0].nvlink_domain is None and len(elsewhere.conflicts) == 1


# ------------------------------------------------------------------------------------------- order, features


def test_block_order_fills_numbered_gaps_and_keeps_listed_order() -> None:
    assert domain_order({"rack-01", "rack-02", "rack-04"}) == ["rack-01", "rack-02", "rack-03", "rack-04"]
    assert domain_order({"b", "a", "rack-9"}) == ["a", "b", "rack-9"]
    assert domain_order({"rack-01", "rack-40"}) == ["rack-01", "rack-40"]  # too sparse: no 38 fillers
    assert domain_order({"x", "rack-02"}, ("x", "gone")) == ["x", "gone", "rack-02"]


def test_a_domain_keeps_its_block_position_when_an_earlier_rack_empties() -> None:
    """Regenerating without rack-02's nodes keeps rack-03 and rack-04 at positions 2 and 3 (placeholder)."""
    full = build_topology(load(fleet(FOUR)))
    less = build_topology(load(fleet({k: v for k, v in FOUR.items() if v != "rack-02"})))
    assert [b.name for b in full.blocks] == [b.name for b in less.blocks]
    assert [b.nodes for b in less.blocks][1] == ()


def test_nvl_feature_is_written_on_every_release_and_absent_without_domains() -> None:
    inv = load(fleet(FOUR))
    for version in ((22, 5), (23, 11), (24, 11), (26, 5)):
        nodes_conf = render_all(inv, version)["slurm-topo-nodes.conf"]
        assert "NodeName=g[01-04] Features=region_dc1,zone_dc1-a,ng_dc1-a.r0,nvl_rack-01\n" in nodes_conf
    plain = load("nodes:\n  - {name: 'g[01-04]', region: dc1, zone: dc1-a}\n")
    rendered = render_all(plain, (26, 5))
    data = rendered.pop("slurm_topo_data.lua")
    assert "nvl_" not in "".join(rendered.values())
    # the filter's data names nvl_ once: among the prefixes of the features slurm-topo makes (owned)
    assert data.count("nvl_") == 1 and '"leaf_","nvl_"}' in data


def test_without_domains_the_output_is_the_tree_on_every_release() -> None:
    """No node has a domain: topology.conf (tree) only, the same bytes whatever the topology section says."""
    plain = "nodes:\n  - {name: 'g[01-04]', region: dc1, zone: dc1-a}\n"
    for version in ((22, 5), (24, 11), (26, 5)):
        out = render_all(load(plain), version)
        assert "topology.yaml" not in out and "SwitchName=root" in out["topology.conf"]


# ---------------------------------------------------------------------------------------------- renderers


def test_release_picks_the_block_syntax() -> None:
    inv = load(fleet(FOUR))
    old = render_all(inv, (22, 5))
    assert "SwitchName=" in old["topology.conf"] and "topology.yaml" not in old
    v2311 = render_all(inv, (23, 11))["topology.conf"]
    assert "BlockLevels=0,1,2\n" in v2311 and "BlockSizes" not in v2311
    v2411 = render_all(inv, (24, 11))
    assert v2411["topology.conf"].splitlines()[4:] == [
        "BlockName=nvl_rack-01 Nodes=g[01-04]",
        "BlockName=nvl_rack-02 Nodes=g[05-08]",
        "BlockName=nvl_rack-03 Nodes=g[09-12]",
        "BlockName=nvl_rack-04 Nodes=g[13-16]",
        "BlockSizes=4,8,16",
    ]
    v2605 = render_all(inv, (26, 5))
    assert "topology.conf" not in v2605
    yaml_text = v2605["topology.yaml"]
    assert "- topology: fabric\n  cluster_default: true\n  tree:" in yaml_text
    assert "- topology: nvl\n  cluster_default: false\n  block:\n    block_sizes: [4, 8, 16]" in yaml_text
    assert lint_file(yaml_text, source="topology.yaml", slurm_version=(26, 5)) == []
    assert lint_file(v2411["topology.conf"], slurm_version=(24, 11)) == []


def test_placeholders_only_where_the_release_takes_them() -> None:
    """24.11 stops on an empty block ("hasn't got nodes"): the gap is a block of State=FUTURE placeholders
    there (slurm-topo-nodes.conf defines them, no slurmd); 23.11 leaves it out; 25.05+ keeps it empty."""
    inv = load(fleet({k: v for k, v in FOUR.items() if v != "rack-02"}))
    out = render_all(inv, (24, 11))
    conf = out["topology.conf"]
    assert "BlockName=nvl_rack-02 Nodes=nvl_rack-02-future[1-4]\n" in conf and "BlockSizes=4,8,16\n" in conf
    assert out["slurm-topo-nodes.conf"].endswith("NodeName=nvl_rack-02-future[1-4] State=FUTURE\n")
    assert lint_file(conf, slurm_version=(24, 11)) == []
    old = render_all(inv, (23, 11))["topology.conf"]
    assert "nvl_rack-02" not in old and "BlockLevels=0,1\n" in old
    assert "future" not in render_all(inv, (23, 11))["slurm-topo-nodes.conf"]
    yaml_text = render_all(inv, (26, 5))["topology.yaml"]
    assert "      - block: nvl_rack-02\n      - block: nvl_rack-03\n" in yaml_text
    assert "block_sizes: [4, 8, 16]" in yaml_text


def test_mixed_fleet_before_25_05_needs_a_choice() -> None:
    """Some nodes without a domain: 24.11 has one topology per cluster, so generate refuses (naming them)
    unless the inventory keeps the tree; 25.05+ writes both."""
    doc = fleet({"g[01-04]": "rack-01"}) + "  - {name: login1, region: dc1}\n"
    with pytest.raises(InputError, match=r"1 node\(s\) have no nvlink_domain \(login1\)"):
        render_all(load(doc), (24, 11))
    kept = render_all(load("nvlink: {topology: tree}\n" + doc), (24, 11))
    assert "SwitchName=root" in kept["topology.conf"]
    assert "nvl_rack-01" in kept["slurm-topo-nodes.conf"]
    assert "topology.yaml" in render_all(load(doc), (26, 5))


@pytest.mark.parametrize(
    ("sizes", "version", "problem"),
    [
        ("[4, 12]", (26, 5), "12 is not a power of two times 4"),
        ("[2, 4]", (26, 5), "smaller than domain rack-01"),
        ("[4, 8, 32]", (26, 5), "more than all 4 blocks"),
        ("[8]", (23, 11), "not 8: on Slurm 23.11"),
    ],
)
def test_bad_block_sizes_are_refused_before_writing(
    sizes: str, version: tuple[int, int], problem: str
) -> None:
    with pytest.raises(InputError, match=problem):
        render_all(load(fleet(FOUR, f"nvlink: {{block_sizes: {sizes}}}")), version)


def test_a_partly_filled_rack_is_padded_on_24_x_and_left_short_from_25_05() -> None:
    """A 4-node base with one rack of 3: 24.11 gets one placeholder in that rack's block; 26.05 none."""
    doc = fleet({"g[01-04]": "rack-01", "g[05-07]": "rack-02", "g[09-12]": "rack-03"})
    out = render_all(load(doc), (24, 11))
    assert "BlockName=nvl_rack-02 Nodes=g[05-07],nvl_rack-02-future1\n" in out["topology.conf"]
    assert "NodeName=nvl_rack-02-future1 State=FUTURE\n" in out["slurm-topo-nodes.conf"]
    assert "1 State=FUTURE placeholders" in out["topology.conf"]
    new = render_all(load(doc), (26, 5))
    assert "future" not in new["topology.yaml"] + new["slurm-topo-nodes.conf"]


def test_sizes_24_x_accepts_are_accepted() -> None:
    """24.11 takes a base block smaller than a rack (only shorter blocks are fatal, padded here); 26.05
    refuses it (the base block holds the largest domain)."""
    doc = fleet(FOUR, "nvlink: {block_sizes: [2, 4]}")
    assert "BlockSizes=2,4\n" in render_all(load(doc), (24, 11))["topology.conf"]
    with pytest.raises(InputError, match="smaller than domain rack-01"):
        render_all(load(doc), (26, 5))


def test_a_node_named_like_a_placeholder_is_refused() -> None:
    doc = fleet({"g[01-04]": "rack-01", "g[05-07]": "rack-02", "nvl_rack-02-future1": "rack-03"})
    with pytest.raises(InputError, match="named like a placeholder"):
        render_all(load(doc), (24, 11))


def test_block_topology_before_23_11_is_refused_when_asked_for() -> None:
    with pytest.raises(InputError, match="needs Slurm 23.11"):
        render_all(load(fleet(FOUR, "nvlink: {topology: block}")), (23, 2))


def test_partitions_that_can_use_the_blocks_are_named(tmp_path: Path) -> None:
    from slurm_topo.policy import Partition

    out = render_all(load(fleet(FOUR)), (26, 5), [Partition("gb", ("g01", "g16")), Partition("all", ("x1",))])
    assert "(gb have a domain on every node)" in out["topology.yaml"]


# ---------------------------------------------------------------------------------------------------- lint


def test_lint_finds_bad_sizes_moves_and_empty_topologies() -> None:
    good = render_all(load(fleet(FOUR)), (26, 5))["topology.yaml"]
    assert lint_file(good, source="topology.yaml", slurm_version=(26, 5)) == []
    bad = good.replace("[4, 8, 16]", "[4, 12]")
    assert [p.code for p in lint_file(bad, source="topology.yaml")] == ["bad-block-sizes"]
    swapped = (
        good.replace("nvl_rack-01", "TMP").replace("nvl_rack-02", "nvl_rack-01").replace("TMP", "nvl_rack-02")
    )
    codes = [p.code for p in lint_file(swapped, source="topology.yaml", previous_text=good)]
    assert codes == ["block-moved", "block-moved"]
    assert lint_file(good, source="topology.yaml", previous_text=good) == []
    assert [p.code for p in lint_file("---\n[]\n", source="topology.yaml")] == ["empty"]
    conf = render_all(load(fleet(FOUR)), (24, 11))["topology.conf"]
    dropped = "".join(line for line in conf.splitlines(keepends=True) if "rack-02" not in line)
    codes = [p.code for p in lint_file(dropped, previous_text=conf, slurm_version=(24, 11))]
    assert codes == ["bad-block-sizes", "block-removed", "block-moved", "block-moved"]
    empty = "BlockName=b1\nBlockSizes=4\n"
    assert [p.code for p in lint_file(empty)] == ["empty-block-topology"]
    assert [p.code for p in lint_file("BlockName=b1 Nodes=n1\nBlockName=b2\n", slurm_version=(24, 11))] == [
        "empty-block"
    ]


def test_block_parser_reads_both_files() -> None:
    conf = "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockSizes=2,4\n"
    (topo,) = parse_block_topologies(conf)
    assert topo.sizes == (2, 4) and [b.nodes for b in topo.blocks] == [("n1", "n2"), ("n3", "n4")]
    yaml_text = (
        "---\n- topology: t\n  block:\n    block_sizes: [2]\n    blocks:\n"
        "      - block: b1\n        nodes: n[1-2]\n"
    )
    (topo,) = parse_block_topologies(yaml_text, source="topology.yaml")
    assert topo.name == "t" and topo.sizes == (2,)


def test_lint_cli_reads_a_block_topology_conf(tmp_path: Path) -> None:
    """`slurm-topo lint` reads a block topology.conf (no traceback): a good one is ok, a bad BlockSizes is a
    problem line and exit 1."""
    f = tmp_path / "topology.conf"
    f.write_text("BlockName=b1 Nodes=n1\n")
    p = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", "--topology", str(f)], capture_output=True, text=True
    )
    assert "Traceback" not in p.stderr and p.returncode == 0 and p.stdout.endswith(": ok\n"), p
    f.write_text("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,12\n")
    p = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "lint", "--topology", str(f)], capture_output=True, text=True
    )
    assert "Traceback" not in p.stderr and p.returncode == 1 and "bad-block-sizes" in p.stdout, p
