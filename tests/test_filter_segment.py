"""``--locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]`` (issue 47, build item 3): an ``nvl`` job no
NVLink domain can hold runs in segments of N nodes, each inside one domain, where the release lets
job_submit/lua write ``segment_size`` (25.11.2+: the ``slurm`` table has ``CONSOLIDATE_SEGMENTS``), and is
refused with the release it needs before. The real Lua filter (lupa's Lua 5.1) against the Python twin
(``policy/``): the grammar over seeded strings, the decisions over seeded shapes on both kinds of release,
and what ``submit`` writes into the job_desc. Slurm's own side is
``tests/integration/test_nvl_segment_on_real_slurm.py``."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from luafilter import LuaFilter
from policy_cases import FLEET, PARTITIONS, job

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.core.errors import InputError, InventoryError
from slurm_topo.policy import NO_VAL16, JobRequest, Partition, decide, decide_modify, vocab
from slurm_topo.render import fingerprint, make_context

# Slurm 26.05's slurm.h: SPREAD_SEGMENTS SLURM_BIT(43), CONSOLIDATE_SEGMENTS SLURM_BIT(44); job_submit/lua
# registers both in the slurm table (25.11.0 only the first, 25.11.2 both)
RELEASE_26 = "slurm.SPREAD_SEGMENTS = 2^43; slurm.CONSOLIDATE_SEGMENTS = 2^44"
RELEASE_25_11_0 = "slurm.SPREAD_SEGMENTS = 2^43"  # segment_size is not writable yet: refused
SPREAD, CONSOLIDATE = 2**43, 2**44
POLICY = "policy: {default: prefer, partitions: {cpu: 'any', big: 'nvl:segment=3:consolidate:fail'}}\n"
SITE = "policy: {default: prefer, partitions: {cpu: 'any'}, nvl_segment: '2:spread'}\n"
PARTS = [*PARTITIONS, Partition("big", tuple(f"n{i:02d}" for i in range(1, 13)))]


def _twins(tmp_path: Path, policy: str, release: str | None) -> tuple[Any, LuaFilter, Any, Path]:
    inv = merge([parse_inventory(FLEET + policy)])
    path = tmp_path / f"data-{abs(hash((policy, release)))}.lua"
    path.write_text(render_all(inv, (26, 5), PARTS)["slurm_topo_data.lua"])
    lua = LuaFilter()
    if release:
        lua.lua.execute(release)
    return make_context(inv, (26, 5), PARTS).policy, lua, lua.load_data(path), path


# ------------------------------------------------------------------------------------------------ the grammar

_TOKENS = [
    "nvl",
    ":",
    "segment=",
    "nvl:segment=",
    "spread",
    "consolidate",
    "wait",
    "fail",
    "auto",
    "zone",
    "0",
    "1",
    "2",
    "18",
    "9999",
    "10000",
    "x",
    "=",
    " ",
    "Spread",
    "٣",
]


def _lua_parse(lua: LuaFilter, text: str) -> Any:
    got = lua.lua.eval('function(t) return { require("slurm_topo_filter.vocab").parse_segment(t) } end')(text)
    values = [got[i] for i in range(1, 4)]
    if values[0] is None:
        return None
    if values[0] is False:
        return False
    return int(values[0]), values[1], values[2]


def _python_parse(text: str) -> Any:
    if not text.startswith("nvl:segment="):
        return None
    try:
        _, mode, size, policy = vocab.parse_segment(text)
    except InputError:
        return False
    return size, policy, mode


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=7).map("".join))
def test_lua_and_python_read_the_same_segment_strings(text: str) -> None:
    lua = _GRAMMAR_LUA
    assert _lua_parse(lua, text) == _python_parse(text), text


_GRAMMAR_LUA = LuaFilter()


def test_the_grammar_reads_what_the_docs_show_and_nothing_near_it() -> None:
    assert vocab.parse_segment("nvl:segment=2") == ("nvl", "wait", 2, None)
    assert vocab.parse_segment("nvl:segment=18:consolidate:fail") == ("nvl", "fail", 18, "consolidate")
    assert vocab.parse_locality("nvl:segment=8:spread") == ("nvl", "wait")
    for bad in (
        "nvl:segment=0",
        "nvl:segment=02",
        "nvl:segment=10000",
        "nvl:segment=2:auto",
        "nvl:segment=2:",
        "nvl:segment=2:wait:spread",
        "nvl:segment=",
        "nvl:segment=2:spread:",
    ):
        with pytest.raises(InputError, match="nvl:segment=N"):
            vocab.parse_segment(bad)
        assert _lua_parse(_GRAMMAR_LUA, bad) is False, bad


# ------------------------------------------------------------------------------------- decisions, both twins


def _shape(rng: random.Random) -> dict[str, Any]:
    locality = rng.choice(
        [
            "nvl",
            "nvl:fail",
            "nvl:segment=1",
            "nvl:segment=2",
            "nvl:segment=3:spread",
            "nvl:segment=4:fail",
            "nvl:segment=2:consolidate:wait",
            "nvl:segment=7",
            "nvl:segment=0",
            "nvl:segment=2:x",
            None,
            "zone",
        ]
    )
    fields: dict[str, Any] = {"min_nodes": rng.choice([1, 2, 3, 4, 5, 6, 8, 9, 12, 14])}
    if rng.random() < 0.3:
        fields["segment_size"] = rng.choice([0, NO_VAL16, 1, 2, 3, 5])  # the job's own --segment
    if rng.random() < 0.3:
        fields["tres_per_node"] = rng.choice(["gres/gpu:4", "gres/gpu:8", "gres/gpu:a100:4"])
    if rng.random() < 0.3:
        fields["partition"] = rng.choice(["gpu", "east", "big", "cpu"])
    if rng.random() < 0.15:
        fields["features"] = rng.choice(["ib", "torch-2.4", "ib|torch-2.3"])
    if rng.random() < 0.1:
        fields["het_job_offset"] = 0
    if rng.random() < 0.2:
        fields["script"] = None  # salloc / srun
    # the SPANK option, or the same text in --comment / the batch environment (clients without the plugin)
    return job(locality, via=rng.choice(["spank", "spank", "comment", "environment"]), **fields)


@pytest.mark.parametrize("policy", [POLICY, SITE], ids=["asked", "site-default"])
@pytest.mark.parametrize("release", [RELEASE_26, RELEASE_25_11_0, None], ids=["26.05", "25.11.0", "22.05"])
def test_both_twins_decide_segment_requests_alike(tmp_path: Path, policy: str, release: str | None) -> None:
    """Seeded shapes (segment requests of every form, the job's own --segment, GPUs, partitions, one with a
    partition default of nvl:segment=…, het components, interactive jobs) through both twins, per release:
    the same action, constraint, record, message and segment."""
    data, lua, lua_data, _ = _twins(tmp_path, policy, release)
    segments = release == RELEASE_26
    rng = random.Random(4711)
    actions: set[tuple[str, Any]] = set()
    for _ in range(600):
        desc = _shape(rng)
        expected = decide(data, JobRequest.from_job_desc(desc, segments)).as_dict()
        assert lua.decide(lua_data, desc) == expected, desc
        actions.add((str(expected["action"]), expected["segment"]))
    if segments:  # not vacuous: segments set, refusals, holds and brackets all met
        assert {("amend", 2), ("reject", None), ("hold", None), ("amend", None)} <= actions, actions
    else:
        assert all(seg is None for _, seg in actions)


def test_a_segment_job_on_a_release_without_segment_size_is_refused_with_the_release(tmp_path: Path) -> None:
    data, lua, lua_data, _ = _twins(tmp_path, POLICY, RELEASE_25_11_0)
    d = lua.decide(lua_data, job("nvl:segment=2", min_nodes=4))
    assert d["action"] == "reject" and d["rejection"] == "request", d
    assert "needs Slurm 25.11.2" in d["record"] or "from Slurm 25.11.2" in d["message"], d
    assert "the largest is nvl-a with 3 nodes" in d["message"] and "sbatch --segment=2" in d["message"], d
    assert "24.05" in d["message"], d
    # a job one domain holds does not need the segment: its bracket, as nvl gives it
    small = lua.decide(lua_data, job("nvl:segment=2", min_nodes=2))
    assert small["action"] == "amend" and small["features"].startswith("[nvl_"), small


def test_refusals_name_both_numbers(tmp_path: Path) -> None:
    _, lua, lua_data, _ = _twins(tmp_path, POLICY, RELEASE_26)
    d = lua.decide(lua_data, job("nvl:segment=3", min_nodes=4))
    assert d["action"] == "reject" and "node count 4 is not a multiple of the segment size 3" in d["message"]
    d = lua.decide(lua_data, job("nvl:segment=4", min_nodes=8))
    assert d["action"] == "reject", d
    assert "segment size 4 is larger than the largest NVLink domain (nvl-a, 3 nodes)" in d["message"], d


# ----------------------------------------------------------------------------------------- what submit writes


def _submit(lua: LuaFilter, desc: dict[str, Any]) -> tuple[int, Any]:
    rc, t = lua.submit(desc)
    return rc, t


def test_submit_sets_segment_size_and_the_policy_flag_on_26_05(tmp_path: Path) -> None:
    _, lua, _, path = _twins(tmp_path, POLICY, RELEASE_26)
    lua.configure(path)
    rc, t = _submit(lua, job("nvl:segment=2:spread", min_nodes=4, bitflags=0))
    assert rc == 0
    assert t["segment_size"] == 2 and t["bitflags"] == SPREAD
    assert t["features"] is None  # no bracket: the segments may lie in different domains
    assert "nvl:wait segment=2:spread [4 nodes in segments of 2" in t["admin_comment"]
    assert any("segment=2:spread" in line for line in lua.messages("infos")), lua.messages("infos")
    # the job's own flag wins: consolidate stays, spread is not added
    rc, t = _submit(lua, job("nvl:segment=2:spread", min_nodes=4, bitflags=CONSOLIDATE + 8))
    assert rc == 0 and t["bitflags"] == CONSOLIDATE + 8 and t["segment_size"] == 2
    # a partition whose default is nvl:segment=3:consolidate:fail
    rc, t = _submit(lua, job(None, min_nodes=6, partition="big", bitflags=1))
    assert rc == 0 and t["segment_size"] == 3 and t["bitflags"] == CONSOLIDATE + 1


def test_the_jobs_own_segment_wins_and_is_not_rewritten(tmp_path: Path) -> None:
    _, lua, _, path = _twins(tmp_path, POLICY, RELEASE_26)
    lua.configure(path)
    rc, t = _submit(lua, job("nvl:segment=3", min_nodes=4, segment_size=2, bitflags=0))
    assert rc == 0 and t["segment_size"] == 2 and t["bitflags"] == 0
    assert "segment=2 (yours)" in t["admin_comment"], t["admin_comment"]
    # --segment with plain --locality=nvl: the job's segment, checked as the filter's would be
    rc, t = _submit(lua, job("nvl", min_nodes=6, segment_size=3))
    assert rc == 0 and t["segment_size"] == 3 and "segment=3 (yours)" in t["admin_comment"]


def test_on_22_05_submit_refuses_with_one_line(tmp_path: Path) -> None:
    _, lua, _, path = _twins(tmp_path, POLICY, None)
    lua.configure(path)
    rc, t = _submit(lua, job("nvl:segment=2", min_nodes=4, segment_size=2))
    assert rc == -1
    (msg,) = lua.messages()
    assert "\n" not in msg and "25.11.2" in msg and "sbatch --segment=2" in msg, msg
    assert t["segment_size"] == 2  # never written (22.05 has no such field; this one is the test's own)


def test_the_memo_keeps_releases_apart(tmp_path: Path) -> None:
    """One Lua state, the release's constants added between two identical submissions: the second decision
    is made again, not remembered from the first."""
    _, lua, _, path = _twins(tmp_path, POLICY, None)
    lua.configure(path)
    assert _submit(lua, job("nvl:segment=2", min_nodes=4))[0] == -1
    lua.lua.execute(RELEASE_26)
    rc, t = _submit(lua, job("nvl:segment=2", min_nodes=4))
    assert rc == 0 and t["segment_size"] == 2


def test_an_update_keeps_the_segment_the_job_has(tmp_path: Path) -> None:
    """A resize of a segment job is re-planned with the record's segment (set at submit) as the job's own:
    both twins agree, nothing rewrites it, and a size it does not divide is refused."""
    data, lua, lua_data, _ = _twins(tmp_path, POLICY, RELEASE_26)
    rec = job("nvl:segment=2", min_nodes=4, segment_size=2, job_id=7, priority=1000)
    rec["admin_comment"] = "slurm-topo: nvl:wait segment=2 [4 nodes in segments of 2]"
    for nodes, action in ((6, "apply"), (5, "reject")):
        upd = {"min_nodes": nodes}
        expected = decide_modify(data, rec, upd, False, segments=True).as_dict()
        got = lua.decide_modify(lua_data, rec, upd, False)
        assert got == {k: expected[k] for k in got}, (nodes, got, expected)
        assert got["action"] == action, got


# ------------------------------------------------------------------------------------- the site's default


def test_the_site_default_reaches_the_data_file_and_its_fingerprint() -> None:
    plain = merge([parse_inventory(FLEET + SITE.replace(", nvl_segment: '2:spread'", ""))])
    site = merge([parse_inventory(FLEET + SITE)])
    assert site.policy is not None and site.policy.nvl_segment == "2:spread"
    assert fingerprint(plain, (26, 5)) != fingerprint(site, (26, 5))  # the filter loads the new data
    assert 'nvl_segment="2:spread"' in render_all(site, (26, 5), PARTS)["slurm_topo_data.lua"]
    assert "nvl_segment" not in render_all(plain, (26, 5), PARTS)["slurm_topo_data.lua"]
    eight = merge([parse_inventory(FLEET + "policy: {nvl_segment: 8}\n")])
    assert eight.policy is not None and eight.policy.nvl_segment == "8"


@pytest.mark.parametrize(
    "value", ["0", "2:fail", "2:wait", "x", "true", "'nvl:segment=2'", "'2:spread:wait'"]
)
def test_a_bad_site_default_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(InventoryError, match="nvl_segment"):
        parse_inventory(FLEET + f"policy: {{nvl_segment: {value}}}\n")


_SEGMENT_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, NO_VAL16, NO_VAL16 - 1, 2**16, 1.5, "2", "", True]),
)
_FUZZ_LUA: dict[str, Any] = {}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    size=_SEGMENT_VALUES,
    # whole numbers a Lua number holds exactly (below 2^53, and powers of two above, where none is written)
    flags=st.one_of(
        st.none(),
        st.integers(min_value=-5, max_value=2**53 - 1),
        st.sampled_from([2.0**53, 2.0**60, 2.0**63, 2**44 + 2**43]),
        st.floats(),
        st.just("x"),
    ),
    locality=st.sampled_from(
        ["nvl:segment=2", "nvl:segment=3:spread", "nvl:segment=1:consolidate:fail", "nvl"]
    ),
    nodes=st.integers(min_value=1, max_value=20),
)
def test_hostile_segment_fields_never_break_the_filter(
    size: Any, flags: Any, locality: str, nodes: int
) -> None:
    """Whatever job_desc.segment_size and bitflags hold (negative, fractional, NaN, huge, a string), submit on
    26.05 ends in success or a refusal, never an internal error; the segment it writes is a whole number the
    request named, or the job's own value is left as it was; bitflags are only ever raised by one flag."""
    if "lua" not in _FUZZ_LUA:
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="segfuzz-"))
        _FUZZ_LUA["lua"] = _twins(tmp, POLICY, RELEASE_26)
        _FUZZ_LUA["lua"][1].configure(_FUZZ_LUA["lua"][3])
    lua: LuaFilter = _FUZZ_LUA["lua"][1]
    desc = job(locality, min_nodes=nodes)
    desc["segment_size"], desc["bitflags"] = size, flags
    rc, t = lua.submit(desc)
    assert rc in (0, -1)
    assert not any("internal error" in e for e in lua.messages("errors")), lua.messages("errors")
    written = t["segment_size"]
    assert written == size or (isinstance(written, (int, float)) and written in (1, 2, 3)), (size, written)
    after = t["bitflags"]
    if after != flags and not (isinstance(flags, float) and math.isnan(flags) and math.isnan(after)):
        # raised by one flag, from a whole number that held neither (never NaN, a fraction or past 2^53)
        assert isinstance(flags, int) and 0 <= flags < 2**53 and after - flags in (SPREAD, CONSOLIDATE)
        assert not flags & (SPREAD | CONSOLIDATE), (flags, after)


def test_an_update_that_would_need_a_new_segment_is_refused(tmp_path: Path) -> None:
    """A job nvl:segment=2 that one domain held at submit (its bracket, no segment) resized past every
    domain: Slurm cannot set a pending job's segment size (26.05: "Update of this parameter is not
    supported: SegmentSize"; job_modify's segment_size is not applied), so both twins refuse the update
    instead of stripping the bracket with no segment in its place."""
    data, lua, lua_data, _ = _twins(tmp_path, POLICY, RELEASE_26)
    rec = job(
        "nvl:segment=2", min_nodes=2, job_id=8, priority=1000, features="[nvl_nvl-c|nvl_nvl-a|nvl_nvl-b]"
    )
    rec["admin_comment"] = "slurm-topo: nvl:wait [nvl-c(2n),nvl-a(3n),nvl-b(3n)]"
    upd = {"min_nodes": 4}
    expected = decide_modify(data, rec, upd, False, segments=True).as_dict()
    got = lua.decide_modify(lua_data, rec, upd, False)
    assert got == {k: expected[k] for k in got}, (got, expected)
    assert got["action"] == "reject" and "resubmit it (--locality=nvl:segment=2" in got["log"], got


_DECIDE: dict[str, Any] = {}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    text=st.lists(
        st.sampled_from(_TOKENS + ["prefer", "network_group", "region"]), min_size=1, max_size=6
    ).map("".join),
    nodes=st.sampled_from([2, 4, 6]),
)
@example(text="nvl:segment=2", nodes=4)  # set: segment_size 2
@example(text="nvl:segment=2:consolidate:fail", nodes=6)
@example(text="zone:fail", nodes=2)  # a plain level: its bracket
@example(text="nvl:segment=2:auto", nodes=4)  # refused alike
def test_any_locality_text_is_accepted_or_refused_alike_by_both_twins(text: str, nodes: int) -> None:
    """Whole ``--locality`` texts (the segment form, the plain levels and near misses of both) through both
    twins' decisions on 26.05: the same decision, so the same texts accepted and the same refused."""
    if "twins" not in _DECIDE:
        import tempfile

        _DECIDE["twins"] = _twins(Path(tempfile.mkdtemp(prefix="segtext-")), POLICY, RELEASE_26)
    data, lua, lua_data, _ = _DECIDE["twins"]
    desc = job(text, min_nodes=nodes)
    assert lua.decide(lua_data, desc) == decide(data, JobRequest.from_job_desc(desc, True)).as_dict(), text
