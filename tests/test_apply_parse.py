"""What apply reads (slurm_topo/apply/parse.py, topology_file.py): the node lines, gres ``Cores=``, headers,
the topology file's kind and placement, and the verification's differences — checked on what real
slurmctlds printed for the files they ran on (tests/fixtures/real/), so "no difference" is Slurm's word."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.apply import (
    features_difference,
    has_header,
    parse_gres_cores,
    parse_node_lines,
    topology_difference,
)
from slurm_topo.apply import topology_file as topo
from slurm_topo.apply.base import TOPOLOGY, TOPOLOGY_YAML
from slurm_topo.apply.parse import future_nodes
from slurm_topo.core import hostlist
from slurm_topo.core.errors import ParseError
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import render_all
from slurm_topo.slurmconfig.lint import parse_block_topologies

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
RELEASES = ("slurm-22.05", "slurm-24.11", "slurm-26.05")
BLOCKS = REAL / "topology-blocks-26.05"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def real(release: str, name: str) -> str:
    return (REAL / release / name).read_text()


def example(name: str, version: tuple[int, int]) -> dict[str, str]:
    return render_all(merge([load_inventory_file(EXAMPLES / name)]), version)


# --------------------------------------------------------------------------------------------------
# headers


@pytest.mark.parametrize("name", ["topology.conf", "slurm-topo-nodes.conf", "slurm_topo_data.lua"])
def test_the_files_slurm_topo_wrote_carry_its_header(name: str) -> None:
    assert has_header(real("slurm-22.05", name).encode())


def test_a_hand_written_file_has_no_header() -> None:
    assert not has_header(real("slurm-22.05", "gres.conf").encode())  # the test cluster's own gres.conf
    assert not has_header(b"")


def test_a_header_counts_only_within_the_first_six_lines() -> None:
    header = real("slurm-22.05", "topology.conf").splitlines()[0] + "\n"
    assert has_header(("# local note\n" * 5 + header).encode())
    assert not has_header(("# local note\n" * 6 + header).encode())
    assert not has_header(("SwitchName=s Nodes=n1 # " + header).encode()), "only a line that starts with it"


# --------------------------------------------------------------------------------------------------
# node lines


@pytest.mark.parametrize("release", RELEASES)
def test_the_real_node_lines_parse_to_their_nodes_and_features(release: str) -> None:
    nodes = parse_node_lines(real(release, "slurm-topo-nodes.conf"))
    assert sorted(nodes) == [f"n{i:02d}" for i in range(1, 13)]
    assert nodes["n04"] == {"ib", "region_us-east", "zone_us-east-1a", "ng_us-east-1a.rack-a2"}
    assert nodes["n12"] == {"eth", "region_us-west", "zone_us-west-2c", "ng_us-west-2c.rack-e1"}


def test_node_lines_expand_hostlists_and_a_node_without_features_has_none() -> None:
    nodes = parse_node_lines("NodeName=a[1-3] Features=x,y\nnodename=b1 CPUs=2\n")
    assert nodes == {"a1": {"x", "y"}, "a2": {"x", "y"}, "a3": {"x", "y"}, "b1": frozenset()}


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("NodeName=n1\nPartitionName=p Nodes=ALL\n", 2, "expected only NodeName= lines"),
        ("NodeName=DEFAULT CPUs=4\n", 1, "NodeName=DEFAULT would leak"),
        ("NodeName=nodedefault\nNodeName=default\n", 2, "NodeName=DEFAULT would leak"),
        ("NodeName=n[1-3]\nNodeName=n3\n", 2, "node n3 is defined twice"),
        ("NodeName=n[3-1]\n", 1, ""),
    ],
)
def test_bad_node_lines_name_their_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_node_lines(text, source="new slurm-topo-nodes.conf")
    assert err.value.lineno == line and err.value.source == "new slurm-topo-nodes.conf"
    assert reason in err.value.reason


def test_future_nodes_are_the_state_future_lines_in_any_case() -> None:
    text = "NodeName=n[1-2] Features=a\nNodeName=f[1-3] State=FUTURE\nNodeName=g1 state=future\n"
    assert future_nodes(text) == {"f1", "f2", "f3", "g1"}
    assert future_nodes(real("slurm-22.05", "slurm-topo-nodes.conf")) == frozenset()
    with pytest.raises(ParseError):
        future_nodes("NodeName=f[2-1] State=FUTURE\n")


def test_the_24_11_block_rendering_lists_its_empty_slot_as_future_nodes() -> None:
    """nvl72-racks keeps rack-03 as an empty NVLink slot: on 24.x the block needs placeholder nodes, which
    slurmctld knows but `scontrol show node` never lists (so the verification must not expect them)."""
    out = example("nvl72-racks.yaml", (24, 11))
    future = future_nodes(out["slurm-topo-nodes.conf"])
    real_nodes = set(parse_node_lines(out["slurm-topo-nodes.conf"])) - future
    assert len(real_nodes) == 72 and future and not (future & real_nodes)
    assert future <= topo.placed_nodes(TOPOLOGY, out[TOPOLOGY].encode())  # type: ignore[operator]


def test_gres_cores_per_node_in_file_order_and_empty_where_absent() -> None:
    text = (
        "AutoDetect=off\nNodeName=n[1-2] Name=gpu File=/dev/nvidia0 Cores=0-7\n"
        "NodeName=n1 Name=gpu File=/dev/nvidia1\nNodeName=n2 Name=gpu File=/dev/nvidia1 Cores=8-15\n"
        "NodeName=n3 Name=mps Count=100 Cores=0\n"
    )
    assert parse_gres_cores(text) == {"n1": ("0-7", ""), "n2": ("0-7", "8-15")}
    assert set(parse_gres_cores(real("slurm-24.11", "gres.conf"))) == {f"n{i:02d}" for i in range(1, 13)}


# --------------------------------------------------------------------------------------------------
# the verification's differences: empty on what the real controllers showed for their own files


@pytest.mark.parametrize("release", RELEASES)
def test_a_real_topology_conf_equals_what_its_slurmctld_showed(release: str) -> None:
    assert (
        topology_difference(real(release, "topology.conf"), real(release, "scontrol-show-topology.txt")) == []
    )


@pytest.mark.parametrize("release", RELEASES)
def test_real_node_lines_equal_the_features_their_slurmctld_showed(release: str) -> None:
    written = parse_node_lines(real(release, "slurm-topo-nodes.conf"))
    assert features_difference(written, real(release, "scontrol-show-node-o.txt")) == []


def test_a_node_on_another_leaf_in_slurmctld_is_a_difference_on_both_leaves() -> None:
    shown = real("slurm-22.05", "scontrol-show-topology.txt")
    moved = shown.replace(
        "rack-a1 Level=0 LinkSpeed=1 Nodes=n[01-03]", "rack-a1 Level=0 LinkSpeed=1 Nodes=n[01-02]"
    )
    moved = moved.replace(
        "rack-a2 Level=0 LinkSpeed=1 Nodes=n04", "rack-a2 Level=0 LinkSpeed=1 Nodes=n[03-04]"
    )
    assert moved != shown
    assert topology_difference(real("slurm-22.05", "topology.conf"), moved) == [
        "switch ng_us-east-1a.rack-a1: nodes n[01-02] in slurmctld, written n[01-03]",
        "switch ng_us-east-1a.rack-a2: nodes n[03-04] in slurmctld, written n04",
    ]


def test_missing_extra_and_rewired_switches_are_named() -> None:
    written = "SwitchName=l1 Nodes=a[1-2]\nSwitchName=l2 Nodes=a3\nSwitchName=top Switches=l1,l2\n"
    shown = (
        "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=a[1-2]\n"
        "SwitchName=l9 Level=0 LinkSpeed=1 Nodes=a3\n"
        "SwitchName=top Level=1 LinkSpeed=1 Nodes=a[1-3] Switches=l1,l9\n"
    )
    assert topology_difference(written, shown) == [
        "switch l2 missing in slurmctld",
        "switch l9 in slurmctld but not written",
        "switch top: switches l[1,9] in slurmctld, written l1,l2",
    ]
    assert topology_difference(written, "") == [
        f"switch {s} missing in slurmctld" for s in ("l1", "l2", "top")
    ]


def test_features_difference_names_unknown_nodes_and_changed_features() -> None:
    shown = "NodeName=a1 AvailableFeatures=x,y State=IDLE\nNodeName=a2 AvailableFeatures=(null) State=IDLE\n"
    assert features_difference({"a1": frozenset({"y", "x"}), "a2": frozenset()}, shown) == []
    assert features_difference(
        {"a1": frozenset({"x"}), "a2": frozenset({"z"}), "a3": frozenset()}, shown
    ) == [
        "node a1: features x,y in slurmctld, written x",
        "node a2: features - in slurmctld, written z",
        "node a3 unknown to slurmctld",
    ]


leaf_names = st.lists(st.sampled_from([f"leaf{i}" for i in range(6)]), min_size=1, max_size=6, unique=True)


@settings(max_examples=60, deadline=None)
@given(leaves=leaf_names, data=st.data())
def test_a_tree_shown_as_written_has_no_difference_and_one_moved_node_has_one(
    leaves: list[str], data: st.DataObject
) -> None:
    """Round trip: a tree written, shown the way slurmctld prints it (leaves with nodes, the top switch with
    every node and its children), compares equal; moving one node to another leaf shows up on both."""
    members = {leaf: [f"{leaf}n{j}" for j in range(data.draw(st.integers(1, 4)))] for leaf in leaves}
    written = "".join(f"SwitchName={leaf} Nodes={','.join(ns)}\n" for leaf, ns in members.items())
    written += f"SwitchName=top Switches={','.join(leaves)}\n"

    def shown(m: dict[str, list[str]]) -> str:
        lines = [
            f"SwitchName={leaf} Level=0 LinkSpeed=1 Nodes={hostlist.compress(sorted(ns))}"
            for leaf, ns in m.items()
            if ns
        ]
        every = sorted(n for ns in m.values() for n in ns)
        lines.append(
            f"SwitchName=top Level=1 LinkSpeed=1 Nodes={hostlist.compress(every)} Switches={','.join(m)}"
        )
        return "\n".join(lines) + "\n"

    assert topology_difference(written, shown(members)) == []
    if len(leaves) > 1:
        src, dst = data.draw(st.sampled_from([(a, b) for a in leaves for b in leaves if a != b]))
        if len(members[src]) > 1:
            moved = {k: list(v) for k, v in members.items()}
            moved[dst].append(moved[src].pop())
            diff = topology_difference(written, shown(moved))
            assert [d.split(":")[0] for d in diff] == sorted([f"switch {src}", f"switch {dst}"])


# --------------------------------------------------------------------------------------------------
# the topology file: kind, which one Slurm reads, what it places


def test_kind_of_each_topology_file() -> None:
    tree = real("slurm-22.05", "topology.conf").encode()
    block = example("nvl72-racks.yaml", (24, 11))[TOPOLOGY].encode()
    assert topo.kind(TOPOLOGY, tree) == "tree" and topo.kind(TOPOLOGY, block) == "block"
    assert topo.kind(TOPOLOGY_YAML, (BLOCKS / "topology.yaml").read_bytes()) == "yaml"
    assert topo.kind(TOPOLOGY, None) is None


def test_topology_yaml_wins_from_25_05_and_is_ignored_before() -> None:
    files = {TOPOLOGY: b"conf", TOPOLOGY_YAML: b"yaml"}
    assert topo.active(files) == (TOPOLOGY_YAML, b"yaml")
    assert topo.active(files, (25, 5)) == (TOPOLOGY_YAML, b"yaml")
    assert topo.active(files, (24, 11)) == (TOPOLOGY, b"conf")
    assert topo.active({TOPOLOGY: None, TOPOLOGY_YAML: b"yaml"}, (24, 11)) is None
    assert topo.active({TOPOLOGY_YAML: None, TOPOLOGY: b"conf"}) == (TOPOLOGY, b"conf")
    assert topo.active_kind({}) is None


def test_placed_nodes_of_a_tree_a_block_file_and_a_yaml() -> None:
    tree = real("slurm-26.05", "topology.conf").encode()
    assert topo.placed_nodes(TOPOLOGY, tree) == {f"n{i:02d}" for i in range(1, 13)}
    block = example("nvl72-racks.yaml", (24, 11))
    nodes = parse_node_lines(block["slurm-topo-nodes.conf"])
    assert topo.placed_nodes(TOPOLOGY, block[TOPOLOGY].encode()) == set(nodes)
    # the yaml's cluster default (the tree fabric) places g01-g04, whatever the other topologies hold
    assert topo.placed_nodes(TOPOLOGY_YAML, (BLOCKS / "topology.yaml").read_bytes()) == {
        "g01",
        "g02",
        "g03",
        "g04",
    }


def test_placed_nodes_of_a_yaml_without_a_default_a_flat_one_and_a_broken_one() -> None:
    blocks_first = "- topology: b\n  block:\n    blocks:\n      - block: x\n        nodes: a[1-2]\n"
    tree_second = "- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: a3\n"
    assert topo.placed_nodes(TOPOLOGY_YAML, (blocks_first + tree_second).encode()) == {"a1", "a2"}
    assert topo.placed_nodes(TOPOLOGY_YAML, b"- topology: f\n  cluster_default: true\n  flat: true\n") is None
    default_second = tree_second.replace("  tree:", "  cluster_default: true\n  tree:")
    assert topo.placed_nodes(TOPOLOGY_YAML, (blocks_first + default_second).encode()) == {"a3"}
    assert topo.placed_nodes(TOPOLOGY_YAML, b"- topology: [unclosed\n") is None
    assert topo.placed_nodes(TOPOLOGY, b"SwitchName=s Nodes=a[3-1]\n") is None


def test_slurm_conf_plugin_is_the_last_setting_in_any_case() -> None:
    assert topo.slurm_conf_plugin("ClusterName=c\n") is None
    conf = "TopologyPlugin=topology/tree\n#TopologyPlugin=topology/none\n  topologyplugin = topology/block\n"
    assert topo.slurm_conf_plugin(conf) == "topology/block"
    assert (
        topo.slurm_conf_plugin("TopologyPlugin=topology/block\nTopologyPlugin=topology/tree\n")
        == "topology/tree"
    )


def test_lint_problems_of_a_good_and_of_a_broken_topology_file() -> None:
    good = example("bare-metal-racks.yaml", (22, 5))[TOPOLOGY].encode()
    assert topo.lint_problems(TOPOLOGY, good, (22, 5)) == []
    problems = topo.lint_problems(TOPOLOGY, good + b"SwitchName=orphan Nodes=zz1\n", (22, 5))
    assert problems and all(p.startswith("topology.conf: ") for p in problems)
    assert any("orphan" in p for p in problems)
    unparsable = topo.lint_problems(TOPOLOGY_YAML, b"- topology: [unclosed\n", (26, 5))
    assert len(unparsable) == 1 and "topology.yaml" in unparsable[0]


# --------------------------------------------------------------------------------------------------
# blocks: what slurmctld shows, their order


def test_the_real_26_05_yaml_equals_both_topologies_slurmctld_showed() -> None:
    shown = {
        "fabric": (BLOCKS / "show-topology-fabric.txt").read_text(),
        "nvl": (BLOCKS / "show-topology-nvl.txt").read_text(),
    }
    asked: list[str | None] = []

    def show(name: str | None) -> str:
        asked.append(name)
        return shown[name] if name else ""

    assert topo.difference({TOPOLOGY_YAML: (BLOCKS / "topology.yaml").read_bytes()}, show) == []
    assert asked == ["fabric", "nvl"]


def test_a_node_scontrol_took_out_of_its_block_is_a_difference() -> None:
    """The capture's README: `scontrol update NodeName=g02 Topology=fabric:…` left block nvl_rack-01 with
    Nodes=g01 — what apply's verification must report."""
    nvl = (
        (BLOCKS / "show-topology-nvl.txt")
        .read_text()
        .replace("BlockIndex=0 Nodes=g[01-02]", "BlockIndex=0 Nodes=g01")
    )
    fabric = (BLOCKS / "show-topology-fabric.txt").read_text()
    diff = topo.difference(
        {TOPOLOGY_YAML: (BLOCKS / "topology.yaml").read_bytes()}, lambda n: nvl if n == "nvl" else fabric
    )
    assert diff == ["topology nvl: block nvl_rack-01: nodes g01 in slurmctld, written g[01-02]"]


def test_shown_blocks_skip_slurms_aggregates_and_keep_the_index() -> None:
    shown = topo.shown_blocks((BLOCKS / "show-topology-nvl.txt").read_text())
    assert shown == [
        ("nvl_rack-01", 0, frozenset({"g01", "g02"})),
        ("nvl_rack-02", 1, frozenset({"g03", "g04"})),
    ]
    assert topo.shown_blocks("BlockName=empty BlockIndex=3 Nodes=(null) BlockSize=2\n") == [
        ("empty", 3, frozenset())
    ]


def test_blocks_shown_in_another_order_are_a_difference() -> None:
    written = parse_block_topologies("BlockName=b1 Nodes=a[1-2]\nBlockName=b2 Nodes=a[3-4]\n")[0]
    swapped = "BlockName=b2 BlockIndex=0 Nodes=a[3-4]\nBlockName=b1 BlockIndex=1 Nodes=a[1-2]\n"
    assert topo.block_difference(written, swapped) == ["blocks in slurmctld: b2,b1; written: b1,b2"]
    listed_out_of_order = "BlockName=b2 BlockIndex=1 Nodes=a[3-4]\nBlockName=b1 BlockIndex=0 Nodes=a[1-2]\n"
    assert topo.block_difference(written, listed_out_of_order) == []


def test_moved_blocks_between_two_renderings_of_an_nvl72_fleet() -> None:
    before = example("nvl72-racks.yaml", (26, 5))[TOPOLOGY_YAML].encode()
    assert topo.moved_blocks((TOPOLOGY_YAML, before), (TOPOLOGY_YAML, before)) == []
    swapped = before.replace(b"nvl_rack-01", b"nvl_rack-XX").replace(b"nvl_rack-02", b"nvl_rack-01")
    swapped = swapped.replace(b"nvl_rack-XX", b"nvl_rack-02")
    moved = topo.moved_blocks((TOPOLOGY_YAML, before), (TOPOLOGY_YAML, swapped))
    assert any("block nvl_rack-01 moved from position 0 to 1" in m for m in moved), moved
    tree = (TOPOLOGY, real("slurm-22.05", "topology.conf").encode())
    assert topo.moved_blocks(tree, (TOPOLOGY_YAML, before)) == []
    assert topo.moved_blocks(None, (TOPOLOGY_YAML, before)) == []


def test_the_blocks_of_a_24_11_topology_conf_are_compared_with_the_yaml_that_replaces_it() -> None:
    """topology.conf's block topology is unnamed ('default'), the yaml's is 'nvl': one block topology on each
    side is the same one."""
    conf = (TOPOLOGY, example("nvl72-racks.yaml", (24, 11))[TOPOLOGY].encode())
    yml = example("nvl72-racks.yaml", (26, 5))[TOPOLOGY_YAML].encode()
    assert topo.moved_blocks(conf, (TOPOLOGY_YAML, yml)) == []
    swapped = yml.replace(b"nvl_rack-01", b"nvl_rack-XX").replace(b"nvl_rack-02", b"nvl_rack-01")
    moved = topo.moved_blocks(conf, (TOPOLOGY_YAML, swapped.replace(b"nvl_rack-XX", b"nvl_rack-02")))
    assert any("block nvl_rack-01 moved from position 0 to 1" in m for m in moved), moved
