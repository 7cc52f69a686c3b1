"""The wait budgets (`cost/budget.py`) of a fleet whose nodes carry the provider's switch layers: every budget
level is a group level, so a template with `switches:` budgets exactly as the same template without them
(before, its copies all sat under its one switch and `network_group` was costed at `switch`)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import Fabric, parse_plan, score_placement
from slurm_topo.cost.budget import auto_budget, level_costs, level_step_seconds, unit_budgets
from slurm_topo.cost.links import DEFAULT_TABLE, PROFILES, LinkTable, parse_links
from slurm_topo.policy.vocab import AUTO_LEVELS
from slurm_topo.sources.providers import Companion, import_listing

PROV = Path(__file__).parent / "fixtures" / "providers"
PLANS = ("tp=8,bytes=20G,tp_bytes=2G", "tp=8,pp=2,bytes=10G,pp_bytes=1G", "tp=4,bytes=4G")


def _imported(provider: str) -> Inventory:
    if provider == "gcp":
        text = import_listing("gcp", (PROV / "gcp-instances-physical-topology.json").read_text()).text
    else:
        topo = Companion((PROV / "aws-account-a-describe-instance-topology.json").read_text(), "topo-a.json")
        listing = (PROV / "aws-account-a-describe-instances.json").read_text()
        text = import_listing("aws", listing, topology=topo).text
    inv = merge([parse_inventory(text)])
    return dataclasses.replace(inv, nodes=tuple(dataclasses.replace(n, gpus=8) for n in inv.nodes))


def _table(inv: Inventory) -> LinkTable:
    return inv.links if inv.links is not None else DEFAULT_TABLE


def _under_one_switch(template: Node, nodes: int, plan: str, table: LinkTable) -> float:
    """What the budgets costed ``network_group`` at before: ``nodes`` copies under the template's switch."""
    fleet = {
        f"x{k}": dataclasses.replace(template, name=f"x{k}", location=Location("r", "z", "g"))
        for k in range(nodes)
    }
    return score_placement(Fabric(fleet), list(fleet), parse_plan(plan), table).seconds


@pytest.mark.parametrize("provider", ["gcp", "aws"])
def test_an_imported_fleets_budgets_equal_the_stripped_fleets(provider: str) -> None:
    inv = _imported(provider)
    table = _table(inv)
    layered = [n for n in inv.nodes if n.switches]
    assert layered and table != DEFAULT_TABLE  # the import's profile, nodes under its switches
    for template in layered:
        bare = dataclasses.replace(template, switches=(), switches_source=None)
        for plan in PLANS:
            for nodes in (2, 4, 8):
                spec = parse_plan(plan)
                assert level_costs(template, nodes, spec, table) == level_costs(bare, nodes, spec, table)
                steps = level_step_seconds(template, nodes, spec, table)
                # the group level is the group's, and a placement under one switch costs less
                assert _under_one_switch(template, nodes, plan, table) < steps["network_group"]
                for level in AUTO_LEVELS[:-1]:
                    assert auto_budget(level, nodes, plan, 7200, template, table=table) == auto_budget(
                        level, nodes, plan, 7200, bare, table=table
                    )
            if "pp=" not in plan:  # every node count 1..8 holds it
                assert unit_budgets(template, plan, 8, table=table) == unit_budgets(
                    bare, plan, 8, table=table
                )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(PROFILES)),
    st.lists(st.sampled_from(["s0", "s1", "sub-a", "host-7"]), min_size=1, max_size=3),
    st.integers(1, 16),
    st.sampled_from(PLANS),
    st.sampled_from([4, 8]),
)
def test_switches_never_change_a_budget(
    profile: str, switches: list[str], nodes: int, plan: str, gpus: int
) -> None:
    table = parse_links({"profile": profile})
    template = Node("t", Location("r", "z", "g"), gpus=gpus, switches=tuple(switches))
    bare = Node("t", Location("r", "z", "g"), gpus=gpus)
    spec = parse_plan(plan)
    try:
        want = level_costs(bare, nodes, spec, table)
    except InputError as exc:  # a plan these nodes cannot hold: the same refusal either way
        with pytest.raises(InputError, match=re.escape(str(exc))):
            level_costs(template, nodes, spec, table)
        return
    got = level_costs(template, nodes, spec, table)
    assert got == want
    assert [got[lvl].seconds for lvl in AUTO_LEVELS] == sorted(got[lvl].seconds for lvl in AUTO_LEVELS)
