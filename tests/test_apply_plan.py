"""What a run would change and why it refuses (slurm_topo/apply/plan.py), without files or a controller:
``draft`` on rendered fleets (tests/test_apply.py's ``fleet``) and on examples/, the ``check_*`` rules at
their boundaries, and ``finish``'s choice of when the data file goes live (docs/apply.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_apply import fleet, render

from slurm_topo.apply import DATA, GRES, NODES, TOPOLOGY, TOPOLOGY_YAML, ApplyOptions, Refusal
from slurm_topo.apply.base import _Deferred
from slurm_topo.apply.plan import (
    _Draft,
    check_interval,
    check_node_set,
    check_pending,
    check_topology_switch,
    check_unplaced,
    draft,
    finish,
)
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import render_all

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def as_bytes(files: dict[str, str]) -> dict[str, bytes | None]:
    return {k: v.encode() for k, v in files.items()}


def options(tmp: Path, **kw: object) -> ApplyOptions:
    return ApplyOptions(slurm_dir=tmp / "etc", state_dir=tmp / "state", **kw)  # type: ignore[arg-type]


def plan_of(
    tmp: Path, old: dict[str, str], new: dict[str, str], state: dict[str, object] | None = None, **kw: object
) -> _Draft | None:
    return draft(options(tmp, **kw), as_bytes(new), as_bytes(old), state or {})


# --------------------------------------------------------------------------------------------------
# draft: what changes


def test_nothing_differs_and_nothing_is_owed_is_no_plan(tmp_path: Path) -> None:
    files = render(tmp_path, fleet())
    assert plan_of(tmp_path, files, files) is None
    assert plan_of(tmp_path, files, files, {"reconfigure_owed": True}, no_reconfigure=True) is None


def test_a_reconfigure_owed_by_an_earlier_run_is_a_plan_without_changed_files(tmp_path: Path) -> None:
    files = render(tmp_path, fleet())
    d = plan_of(tmp_path, files, files, {"reconfigure_owed": True})
    assert d is not None and d.changed == {} and d.reconfigure and d.owed_before and not d.config_changed


def test_only_the_files_that_differ_are_changed_in_rename_order(tmp_path: Path) -> None:
    old, new = render(tmp_path, fleet()), render(tmp_path, fleet({"n1": "rack-b"}))
    d = plan_of(tmp_path, old, new)
    assert d is not None and list(d.changed) == [TOPOLOGY, NODES, DATA] and d.reconfigure
    assert d.details == []  # a moved node: nothing added, removed, no feature gone
    only_data = dict(old, **{DATA: old[DATA] + "-- x\n"})
    d = plan_of(tmp_path, old, only_data)
    assert d is not None and list(d.changed) == [DATA] and not d.config_changed and not d.reconfigure


def test_an_output_apply_does_not_manage_is_refused(tmp_path: Path) -> None:
    files = render(tmp_path, fleet())
    with pytest.raises(Refusal, match="unknown output 'slurm.conf': apply manages only topology.yaml"):
        plan_of(tmp_path, files, dict(files, **{"slurm.conf": "ClusterName=c\n"}))


def test_writing_one_topology_file_retires_the_other_live_one(tmp_path: Path) -> None:
    inv = merge([load_inventory_file(EXAMPLES / "nvl72-racks.yaml")])
    conf, yml = render_all(inv, (24, 11)), render_all(inv, (26, 5))
    d = plan_of(tmp_path, conf, yml, force=True)
    assert (
        d is not None
        and d.changed[TOPOLOGY] is None
        and d.changed[TOPOLOGY_YAML] == yml[TOPOLOGY_YAML].encode()
    )
    assert list(d.changed)[:2] == [TOPOLOGY_YAML, TOPOLOGY]
    assert (d.kind_before, d.kind_after) == ("block", "yaml")
    assert "topology: block -> yaml; topology.conf retired (its copy stays in the set's old/)" in d.details
    back = plan_of(tmp_path, yml, conf, force=True)
    assert (
        back is not None
        and back.changed[TOPOLOGY_YAML] is None
        and (back.kind_before, back.kind_after) == ("yaml", "block")
    )


def test_node_and_feature_changes_are_listed(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    new = render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)}, extra_group="rack-x"))
    d = plan_of(tmp_path, old, new)
    assert d is not None
    assert d.added == {"x1"} and d.removed == set()
    assert d.gone_feats == {"ng_z1.rack-a"}
    assert d.details == ["nodes added: x1", "features removed: ng_z1.rack-a"]


def test_foreign_live_node_lines_say_nothing_about_removals(tmp_path: Path) -> None:
    """The live node lines without slurm-topo's header (adopted): no old nodes, so no removal share."""
    old = render(tmp_path, fleet(nodes=8))
    old[NODES] = "NodeName=n[1-8] CPUs=4\n"
    d = plan_of(tmp_path, old, render(tmp_path, fleet(nodes=2)), adopt=True)
    assert d is not None and d.old_nodes == {} and d.removed == set()


# --------------------------------------------------------------------------------------------------
# draft: refusals that need no controller


def test_the_removal_share_is_refused_only_above_max_removal(tmp_path: Path) -> None:
    old = render(tmp_path, fleet(nodes=10))
    assert plan_of(tmp_path, old, render(tmp_path, fleet(nodes=8))) is not None  # 2 of 10 = 20 %: allowed
    with pytest.raises(Refusal, match=r"3 of 10 nodes would disappear \(30% > --max-removal 20%\)") as err:
        plan_of(tmp_path, old, render(tmp_path, fleet(nodes=7)))
    assert err.value.details == ["removed: n[8-10]"]
    assert plan_of(tmp_path, old, render(tmp_path, fleet(nodes=7)), max_removal=0.3) is not None
    assert plan_of(tmp_path, old, render(tmp_path, fleet(nodes=1)), force=True) is not None


def test_a_new_set_with_no_node_lines_is_refused(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    header = old[NODES].splitlines()[0] + "\n"
    with pytest.raises(Refusal, match="slurm-topo-nodes.conf: no NodeName= lines"):
        plan_of(tmp_path, old, dict(old, **{NODES: header}), force=True)


def test_a_foreign_file_is_named_and_adopt_takes_it(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    old[TOPOLOGY] = "SwitchName=s Nodes=n[1-8]\n"
    new = render(tmp_path, fleet())
    with pytest.raises(
        Refusal, match=r"^topology.conf in .*etc not written by slurm-topo \(no header\); --adopt"
    ):
        plan_of(tmp_path, old, new)
    assert plan_of(tmp_path, old, new, adopt=True) is not None
    assert draft(options(tmp_path), as_bytes(new), as_bytes(old), {}, checks=False) is not None


@pytest.mark.parametrize(
    ("plugin", "refused"),
    [
        ("TopologyPlugin=topology/block\n", False),
        ("TopologyPlugin=topology/tree\n", True),
        ("", True),
    ],
)
def test_a_block_topology_conf_needs_the_block_plugin_in_slurm_conf(
    tmp_path: Path, plugin: str, refused: bool
) -> None:
    inv = merge([load_inventory_file(EXAMPLES / "nvl72-racks.yaml")])
    new = as_bytes(render_all(inv, (24, 11)))
    conf = f"ClusterName=c\n{plugin}".encode()
    if refused:
        have = re.escape(plugin.strip().split("=")[1] if plugin else "(unset)")
        with pytest.raises(
            Refusal,
            match=f"in block syntax but .* has TopologyPlugin={have}: set TopologyPlugin=topology/block",
        ):
            draft(options(tmp_path), new, {}, {}, slurm_conf=conf)
    else:
        assert draft(options(tmp_path), new, {}, {}, slurm_conf=conf) is not None
    assert draft(options(tmp_path), new, {}, {}, slurm_conf=None) is not None  # configless: Slurm decides


@pytest.mark.parametrize(
    ("plugin", "refused"),
    [("", False), ("TopologyPlugin=topology/tree\n", False), ("TopologyPlugin=topology/block\n", True)],
)
def test_a_tree_topology_conf_must_not_meet_the_block_plugin(
    tmp_path: Path, plugin: str, refused: bool
) -> None:
    new = as_bytes(render(tmp_path, fleet()))
    conf = f"ClusterName=c\n{plugin}".encode()
    if refused:
        with pytest.raises(Refusal, match="is in tree syntax but .* has TopologyPlugin=topology/block"):
            draft(options(tmp_path), new, {}, {}, slurm_conf=conf)
    else:
        assert draft(options(tmp_path), new, {}, {}, slurm_conf=conf) is not None


def test_a_cores_change_on_a_node_in_both_files_is_refused_a_new_node_is_not(tmp_path: Path) -> None:
    head = "# gres.conf: generated by slurm-topo 0.1.0 for Slurm 22.05\n"
    base = render(tmp_path, fleet())
    old = dict(base, **{GRES: head + "NodeName=n1 Name=gpu File=/dev/nvidia0 Cores=0-3\n"})
    added = dict(base, **{GRES: old[GRES] + "NodeName=n2 Name=gpu File=/dev/nvidia0 Cores=4-7\n"})
    assert plan_of(tmp_path, old, added) is not None
    assert (
        plan_of(tmp_path, old, dict(base, **{GRES: head})) is not None
    )  # n1's GPU line gone: not a Cores change
    moved = dict(base, **{GRES: head + "NodeName=n[1-2] Name=gpu File=/dev/nvidia0 Cores=0-1\n"})
    with pytest.raises(Refusal, match=r"restart required: gres.conf Cores= changes on n1 \(slurmctld reads"):
        plan_of(tmp_path, old, moved)
    with pytest.raises(Refusal, match="gres.conf: "):
        plan_of(tmp_path, old, dict(base, **{GRES: head + "NodeName=n[2-1] Name=gpu File=/dev/nvidia0\n"}))


# --------------------------------------------------------------------------------------------------
# the checks that need the controller's answers


def drafted(
    tmp: Path, old: dict[str, str], new: dict[str, str], state: dict[str, object] | None = None, **kw: object
) -> _Draft:
    d = plan_of(tmp, old, new, state, **kw)
    assert d is not None
    return d


def test_the_node_set_may_change_from_23_11_and_hand_defined_nodes_stay(tmp_path: Path) -> None:
    d = drafted(tmp_path, render(tmp_path, fleet()), render(tmp_path, fleet(extra_group="rack-x")))
    known = {f"n{i}" for i in range(1, 9)} | {"login1"}  # login1: defined in slurm.conf by the admin
    assert check_node_set(d, known, (23, 11)) == known | {"x1"}
    with pytest.raises(Refusal, match=r"Slurm 23.02 < 23.11 would die on a reconfigure; nodes to add: x1$"):
        check_node_set(d, known, (23, 2))
    with pytest.raises(Refusal, match=r"Slurm \? < 23.11") as err:
        check_node_set(d, known, None)
    assert err.value.details == ["nodes to add: x1"]


def test_an_unchanged_node_set_passes_on_any_release(tmp_path: Path) -> None:
    d = drafted(tmp_path, render(tmp_path, fleet()), render(tmp_path, fleet({"n1": "rack-b"})))
    known = {f"n{i}" for i in range(1, 9)}
    assert check_node_set(d, known, None) == known


def test_a_controller_that_lost_a_node_is_a_removal_before_23_11(tmp_path: Path) -> None:
    d = drafted(tmp_path, render(tmp_path, fleet()), render(tmp_path, fleet({"n1": "rack-b"})))
    with pytest.raises(Refusal, match="nodes to add: n8"):
        check_node_set(d, {f"n{i}" for i in range(1, 8)}, (22, 5))


def test_unplaced_nodes_are_named_per_topology_kind(tmp_path: Path) -> None:
    tree = render(tmp_path, fleet())
    d = drafted(tmp_path, tree, render(tmp_path, fleet({"n1": "rack-b"})))
    check_unplaced(d.topology, {f"n{i}" for i in range(1, 9)})
    with pytest.raises(
        Refusal,
        match=r"^2 nodes Slurm knows would be on no switch \(node a1 is on no switch of topology.conf\)",
    ) as err:
        check_unplaced(d.topology, {"n1", "a1", "b1"})
    assert err.value.details == ["node a1 is on no switch", "node b1 is on no switch"]
    block = render_all(merge([load_inventory_file(EXAMPLES / "nvl72-racks.yaml")]), (24, 11))
    with pytest.raises(Refusal, match="1 nodes Slurm knows would be in no block"):
        check_unplaced((TOPOLOGY, block[TOPOLOGY].encode()), {"gb001", "login1"})
    check_unplaced(None, {"anything"})


def test_pending_jobs_are_matched_by_whole_feature_names(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    d = drafted(tmp_path, old, render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)})))
    assert d.gone_feats == {"ng_z1.rack-a"}
    check_pending(d, [("1", "ng_z1.rack-ab"), ("2", "(null)"), ("3", "xng_z1.rack-a"), ("4", "")])
    with pytest.raises(Refusal, match="^3 pending jobs name a group about to disappear") as err:
        check_pending(
            d, [("5", "ng_z1.rack-a&ib"), ("6", "[ng_z1.rack-b*2|ng_z1.rack-a*2]"), ("7", "ng_z1.rack-a")]
        )
    assert err.value.details == [
        "job 5: ng_z1.rack-a&ib",
        "job 6: [ng_z1.rack-b*2|ng_z1.rack-a*2]",
        "job 7: ng_z1.rack-a",
    ]


def test_min_interval_defers_strictly_inside_the_interval(tmp_path: Path) -> None:
    d = drafted(tmp_path, render(tmp_path, fleet()), render(tmp_path, fleet({"n1": "rack-b"})))
    o = options(tmp_path, min_interval=60)
    with pytest.raises(_Deferred, match=r"last reconfigure 59s ago \(--min-interval 60s\); 3 files left"):
        check_interval(o, d, {"last_reconfigure": 1000.0}, 1059.0)
    check_interval(o, d, {"last_reconfigure": 1000.0}, 1060.0)
    check_interval(o, d, {}, 1_800_000_000.0)  # never reconfigured: any real clock is past the interval
    check_interval(o, d, {"last_reconfigure": None}, 1_800_000_000.0)


def test_a_last_reconfigure_in_the_future_does_not_defer_and_says_so(tmp_path: Path) -> None:
    """The clock was set back: the last reconfigure counts as long ago, never as a wait until the clock
    passes it (also with --min-interval 0, where no detail is worth a line)."""
    d = drafted(tmp_path, render(tmp_path, fleet()), render(tmp_path, fleet({"n1": "rack-b"})))
    said = check_interval(options(tmp_path, min_interval=60), d, {"last_reconfigure": 5000.0}, 1400.0)
    assert said == [
        "last reconfigure recorded 3600s in the future (the clock was set back?): not deferred by "
        "--min-interval"
    ]
    assert check_interval(options(tmp_path, min_interval=0), d, {"last_reconfigure": 1000.5}, 1000.0) == []
    assert check_interval(options(tmp_path, min_interval=60), d, {"last_reconfigure": 1000.0}, 1060.0) == []


def test_switching_topology_file_against_the_running_release_and_plugin(tmp_path: Path) -> None:
    inv = merge([load_inventory_file(EXAMPLES / "nvl72-racks.yaml")])
    tree = render_all(merge([load_inventory_file(EXAMPLES / "bare-metal-racks.yaml")]), (24, 11))
    to_yaml = drafted(tmp_path, render_all(inv, (24, 11)), render_all(inv, (26, 5)), force=True)
    with pytest.raises(Refusal, match=r"Slurm \? does not read topology.yaml \(25.05\+\)"):
        check_topology_switch(to_yaml, None, None)
    with pytest.raises(Refusal, match="Slurm 25.04 does not read"):
        check_topology_switch(to_yaml, "topology/block", (25, 4))
    assert check_topology_switch(to_yaml, "topology/block", (25, 5)) == []
    to_block = drafted(tmp_path, tree, render_all(inv, (24, 11)), force=True, adopt=True)
    assert check_topology_switch(to_block, None, (24, 5)) == []  # plugin unknown: nothing to compare
    assert check_topology_switch(to_block, "topology/block", (24, 5)) == []
    assert check_topology_switch(to_block, "topology/tree", (24, 11)) == [
        "TopologyPlugin topology/tree -> topology/block: switched by the reconfigure (24.11+ re-executes)"
    ]
    with pytest.raises(
        Refusal, match="restart required: slurmctld runs TopologyPlugin=topology/tree, the new"
    ):
        check_topology_switch(to_block, "topology/tree", (24, 5))
    to_tree = drafted(tmp_path, render_all(inv, (24, 11)), tree, force=True, adopt=True)
    assert check_topology_switch(to_tree, "topology/none", (22, 5)) == []
    with pytest.raises(Refusal, match="needs topology/tree and Slurm 23.11 < 24.11"):
        check_topology_switch(to_tree, "topology/block", (23, 11))


# --------------------------------------------------------------------------------------------------
# finish: when the data file goes live


def test_the_data_file_goes_first_only_when_groups_are_only_removed(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    o = options(tmp_path)
    removed = drafted(tmp_path, old, render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)})))
    assert finish(o, removed, {}).data_first
    moved = drafted(tmp_path, old, render(tmp_path, fleet({"n1": "rack-b"})))
    assert finish(o, moved, {}).data_first  # same groups: nothing the controller lacks
    added = drafted(tmp_path, old, render(tmp_path, fleet({"n1": "rack-c"})))
    assert not finish(o, added, {}).data_first
    owed = drafted(tmp_path, old, render(tmp_path, fleet({"n1": "rack-b"})), {"reconfigure_owed": True})
    assert not finish(o, owed, {}).data_first  # the live files do not tell what slurmctld knows


def test_a_first_apply_publishes_the_data_file_last(tmp_path: Path) -> None:
    d = draft(options(tmp_path), as_bytes(render(tmp_path, fleet())), {}, {})
    assert d is not None and d.old_nodes == {}
    plan = finish(options(tmp_path), d, {})
    assert not plan.data_first and DATA in plan.new and plan.old[DATA] is None


def test_no_reconfigure_holds_back_a_data_file_with_new_groups_only(tmp_path: Path) -> None:
    old = render(tmp_path, fleet())
    o = options(tmp_path, no_reconfigure=True)
    added = drafted(tmp_path, old, render(tmp_path, fleet({"n1": "rack-c"})), no_reconfigure=True)
    plan = finish(o, added, {TOPOLOGY: {"mode": 0o640, "uid": 0, "gid": 0}})
    assert DATA not in plan.new and list(plan.new) == [TOPOLOGY, NODES] and not plan.reconfigure
    assert plan.meta == {TOPOLOGY: {"mode": 0o640, "uid": 0, "gid": 0}, NODES: None}
    assert plan.details[-1].startswith(f"{DATA} held back until slurmctld is reconfigured")
    removed = drafted(
        tmp_path, old, render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)})), no_reconfigure=True
    )
    plan = finish(o, removed, {})
    assert DATA in plan.new and plan.data_first
    only_data = dict(old, **{DATA: old[DATA] + "-- x\n"})
    plan = finish(o, drafted(tmp_path, old, only_data, no_reconfigure=True), {})
    assert list(plan.new) == [DATA] and not plan.data_first  # nothing owed: the data goes live as it is
