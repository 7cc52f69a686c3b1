"""Parity: the Python policy (the specification) and the real Lua 5.1 filter decide every case identically."""

from __future__ import annotations

import pytest
from luafilter import LuaFilter
from policy_cases import PARTITIONS, cases, inventory, modify_cases

from slurm_topo import render_all
from slurm_topo.policy import JobRequest, decide, decide_modify
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
    for name, job in CASES:
        expected = decide(data, JobRequest.from_job_desc(job)).as_dict()
        got = lua.decide(lua_data, job)
        if got != expected:
            mismatches.append((name, expected, got))
    assert mismatches == [], f"{len(mismatches)} mismatches, first: {mismatches[0]}"


def test_case_table_covers_every_outcome(setup) -> None:  # type: ignore[no-untyped-def]
    """The table is not trivially passing: it reaches every action, and amends both features and prefer."""
    data, _, _ = setup
    decisions = [decide(data, JobRequest.from_job_desc(job)) for _, job in CASES]
    assert {d.action for d in decisions} == {"unchanged", "amend", "hold", "reject"}
    assert any(d.prefer for d in decisions) and any(d.features for d in decisions)
    # (Slurm's 64-alternative / 1024-character limits are exercised in test_policy.py, with larger fleets)


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
    assert actions == {"pass", "apply", "deny", "reject"}
