"""The filter on a heterogeneous job's components and on the release of a hold an owner's update made (issue
43, items 4 and 5): the real Lua (lupa) and, for updates, the Python twin (slurm_topo/policy/modify.py) case
by case. Slurm's side of both is tests/integration/test_het_and_resize_non_root.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from luafilter import LuaFilter
from policy_cases import PARTITIONS, inventory, job, job_record

from slurm_topo import render_all
from slurm_topo.policy import INFINITE, NO_VAL, decide_modify
from slurm_topo.render import make_context

HET = "a heterogeneous job cannot be kept in one"


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "slurm_topo_data.lua"
    path.write_text(render_all(inventory(), (22, 5), PARTITIONS)["slurm_topo_data.lua"])
    return path


@pytest.fixture(scope="module")
def data() -> Any:
    return make_context(inventory(), (22, 5), PARTITIONS).policy


def _filter(data_file: Path) -> LuaFilter:
    f = LuaFilter()
    f.configure(data_file)
    return f


@pytest.mark.parametrize(
    ("locality", "fields", "word"),
    [
        ("zone", {"min_nodes": 2}, "zone"),
        ("zone", {"min_nodes": 9}, "zone"),  # would be held: refused, not held
        ("region:fail", {"min_nodes": 2}, "region"),
        ("network_group", {"min_nodes": 1}, "network group"),
        ("zone:auto", {"min_nodes": 2, "time_limit": 60}, "zone"),
        ("nvl", {"min_nodes": 2}, "NVLink domain"),
        (None, {"min_nodes": 2, "partition": "strict"}, "zone"),  # a partition's default counts too
    ],
)
def test_a_required_level_on_a_heterogeneous_component_is_refused_at_submit(
    data_file: Path, locality: str | None, fields: dict[str, Any], word: str
) -> None:
    """Slurm hands the filter one component at a time (``het_job_offset`` 0, 1, …) and places each on its
    own, a matching-OR bracket included: a required level cannot hold for the whole job, so every component
    asking for one is refused (Slurm then rejects the whole job), saying why and what to do."""
    f = _filter(data_file)
    for offset in (0, 1, 3):
        rc, desc = f.submit(job(locality, het_job_offset=offset, **fields))
        assert rc == -1, (locality, offset)  # slurm.ERROR: the request, not Slurm's node count message
        said = f.messages()[-1]
        assert f"{HET} {word}" in said and "Slurm places each component on its own" in said, said
        assert "submit it as one job" in said and "--locality=prefer or --locality=any" in said, said
        assert desc["priority"] is None, "refused, never held"


@pytest.mark.parametrize(
    ("locality", "fields"),
    [
        ("prefer", {"min_nodes": 2}),
        (None, {"min_nodes": 2}),  # the default, prefer
        ("any", {"min_nodes": 2}),
        ("any", {"min_nodes": 2, "regions": "us-west"}),  # every node in us-west: holds for the whole job
        ("zone", {"min_nodes": 2, "features": "nosuch"}),  # unchanged (Slurm rejects the feature)
    ],
)
def test_prefer_any_and_unchanged_decisions_pass_for_a_heterogeneous_component(
    data_file: Path, locality: str | None, fields: dict[str, Any]
) -> None:
    f = _filter(data_file)
    rc, desc = f.submit(job(locality, het_job_offset=1, **fields))
    assert rc == 0, f.messages()
    assert not any(HET in m for m in f.messages())
    assert desc["priority"] is None


def test_the_refusal_does_not_reach_the_same_request_of_a_plain_job(data_file: Path) -> None:
    """Decisions are remembered per request shape, the het offset part of it: a plain job of the same shape
    before and after a refused component still gets its bracket."""
    f = _filter(data_file)
    for offset in (NO_VAL, 0, NO_VAL, 1, NO_VAL):
        rc, desc = f.submit(job("zone", min_nodes=2, het_job_offset=offset))
        if offset == NO_VAL:
            assert rc == 0 and desc["features"].startswith("[zone_"), desc["features"]
        else:
            assert rc == -1 and HET in f.messages()[-1]


# ---- updates (decide_modify in Python and in Lua)


def _both(data: Any, f: LuaFilter, lua_data: Any, rec: dict[str, Any], upd: dict[str, Any], admin: bool):  # type: ignore[no-untyped-def]
    python = decide_modify(data, rec, upd, admin).as_dict()
    assert f.decide_modify(lua_data, rec, upd, admin) == python, (rec, upd, admin)
    return python


@pytest.fixture(scope="module")
def lua(data_file: Path) -> tuple[LuaFilter, Any]:
    f = LuaFilter()
    return f, f.load_data(data_file)


def test_a_hold_an_owners_update_made_is_released_by_an_update_that_fits(data, lua) -> None:  # type: ignore[no-untyped-def]
    """An owner's resize past every zone holds the job (priority 0), but Slurm refuses AdminComment from an
    owner: the record still says ``zone:wait [...]``, not ``held;``. The update that makes it fit again
    releases it (it stayed JobHeldUser, priority 0: issue 43 item 5); so does a constraint that fits again."""
    f, lua_data = lua
    rec = job_record(data, job("zone", min_nodes=2))
    assert rec["admin_comment"].startswith("slurm-topo: zone:wait [")
    held = _both(data, f, lua_data, rec, {"min_nodes": 7}, False)
    assert held["action"] == "apply" and held["priority"] == 0 and held["admin_comment"] is None
    after = {**rec, "min_nodes": 7, "priority": 0}  # what slurmctld holds now: the same AdminComment
    back = _both(data, f, lua_data, after, {"min_nodes": 2}, False)
    assert (
        back["action"] == "apply" and back["priority"] == INFINITE and back["features"].startswith("[zone_")
    )
    # by the constraint: ib&torch-2.3 has one node (n04): -N2 fits no zone; ib fits us-east-1a again
    rec = job_record(data, job("zone", min_nodes=2))
    held = _both(data, f, lua_data, rec, {"features": "ib&torch-2.3"}, False)
    assert held["priority"] == 0
    after = {**rec, "features": "ib&torch-2.3", "priority": 0}
    back = _both(data, f, lua_data, after, {"features": "ib"}, False)
    assert back["priority"] == INFINITE and back["features"].startswith("ib&[zone_"), back


def test_an_owners_own_hold_of_a_job_that_fits_is_kept(data, lua) -> None:  # type: ignore[no-untyped-def]
    """``sbatch -H`` (or ``scontrol hold``) of a job that fits: an update re-plans it and leaves the hold; so
    after a filter hold was released by a resize (the old ``held;`` record stays in AdminComment: only an
    administrator's update rewrites it) and the owner then held the job."""
    f, lua_data = lua
    own = {**job_record(data, job("zone", min_nodes=2)), "priority": 0}
    for upd in ({"features": "ib"}, {"min_nodes": 3}, {"features": ""}):
        m = _both(data, f, lua_data, own, upd, False)
        assert m["action"] == "apply" and m["priority"] is None, (upd, m)
    stale = job_record(data, job("zone", min_nodes=7))
    assert ": held;" in stale["admin_comment"]
    stale.update(min_nodes=2, priority=0)  # resized to 2 (released), then held by its owner
    m = _both(data, f, lua_data, stale, {"min_nodes": 3}, False)
    assert m["action"] == "apply" and m["priority"] is None, m
    # a submit-time hold is still released by a resize that fits, and its owner's release is still refused
    held = job_record(data, job("zone", min_nodes=7))
    assert _both(data, f, lua_data, held, {"min_nodes": 3}, False)["priority"] == INFINITE
    assert _both(data, f, lua_data, held, {"priority": INFINITE}, False)["action"] == "deny"


def test_updates_of_a_heterogeneous_component(data, lua) -> None:  # type: ignore[no-untyped-def]
    """A component (``het_job_id`` set in its record): an owner's resize is re-planned as prefer; a re-plan
    that would give it a required level (an administrator's ``Comment=locality=zone``, a legacy component
    with a bracket) is refused, as at submit; ``any`` is allowed."""
    f, lua_data = lua
    het = {"het_job_id": 17, "het_job_offset": 1}
    prefer = {**job_record(data, job("prefer", via="comment", min_nodes=2, het_job_offset=1)), **het}
    m = _both(data, f, lua_data, prefer, {"min_nodes": 3}, False)
    assert m["action"] == "apply" and m["prefer"] and m["features"] is None, m
    m = _both(data, f, lua_data, prefer, {"comment": "locality=zone"}, False)
    assert m["action"] == "deny" and m["log"] == "the locality is fixed at submit; update refused"
    m = _both(data, f, lua_data, prefer, {"comment": "locality=zone"}, True)
    assert m["action"] == "deny" and "job 17+1 is a component of a heterogeneous job" in m["log"], m
    assert "zone:wait cannot be enforced across its components" in m["log"]
    m = _both(data, f, lua_data, prefer, {"comment": "locality=any"}, True)
    assert m["action"] == "apply", m
    legacy = {**job_record(data, job("zone", min_nodes=2)), **het}  # bracketed before the filter refused it
    for upd in ({"min_nodes": 3}, {"features": ""}):
        m = _both(data, f, lua_data, legacy, upd, False)
        assert m["action"] == "deny" and "heterogeneous" in m["log"], (upd, m)
    assert _both(data, f, lua_data, legacy, {"time_limit": 60}, False)["action"] == "pass"
    plain = {**job_record(data, job("zone", min_nodes=2)), "het_job_id": 0, "het_job_offset": 0}
    assert _both(data, f, lua_data, plain, {"min_nodes": 3}, False)["action"] == "apply"
