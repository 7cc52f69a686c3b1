"""The real job_submit Lua (Lua 5.1 via lupa): failing open on bad data files, what it does to a job (fuzzing:
tests/test_fuzz_job_desc.py)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from luafilter import JOB_SUBMIT, LuaFilter
from policy_cases import PARTITIONS, inventory, job

from slurm_topo import load_inventories, render_all
from slurm_topo.policy import NO_VAL, SPANK_LOCALITY, JobRequest, decide
from slurm_topo.render import make_context
from slurm_topo.render.filter_data import FORMAT, checksum


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "slurm_topo_data.lua"
    path.write_text(render_all(inventory(), (22, 5), PARTITIONS)["slurm_topo_data.lua"])
    return path


def test_random_jobs_agree_with_python(data_file: Path) -> None:
    """2 000 random jobs built in Python get the same decision from the Lua filter and the Python
    reference."""
    rng = random.Random(7)
    data = make_context(inventory(), (22, 5), PARTITIONS).policy
    f = LuaFilter()
    lua_data = f.load_data(data_file)
    locs = ["prefer", "zone", "zone:fail", "region", "network_group:fail", "any", None]
    feats = [None, "ib", "torch-2.4", "ib|torch-2.3", "ib&torch-2.4", "[zone_us-east-1a|zone_us-west-2a]"]
    tres = [None, "gres:gpu:4", "gres/gpu:h100:8", "gres:gpu:a100:2", "gres/gpu:16"]
    for _ in range(2000):
        fields = {
            "min_nodes": rng.choice([NO_VAL, 1, 2, 3, 4, 5, 6, 8, 12]),
            "partition": rng.choice([None, "gpu", "east", "gpu,east", "strict"]),
            rng.choice(["tres_per_job", "tres_per_node", "tres_per_task"]): rng.choice(tres),
            "num_tasks": rng.choice([NO_VAL, 4, 8]),
        }
        feature = rng.choice(feats)
        if feature:
            fields["features"] = feature
        if rng.random() < 0.2:
            fields["regions"] = rng.choice(["us-east", "us-west-2a", "us-west,us-east-1b"])
        desc = job(rng.choice(locs), **{k: v for k, v in fields.items() if v is not None})
        assert f.decide(lua_data, desc) == decide(data, JobRequest.from_job_desc(desc)).as_dict(), desc


def test_remembered_decisions_equal_fresh_ones(data_file: Path) -> None:
    """The submit path remembers whole decisions by request shape (decide_memo): over 3 000 jobs drawn from a
    small space (so most shapes repeat) every remembered decision equals a fresh M.decide and the Python
    reference, a repeat returns the remembered decision itself, and requests differing in one number, the
    interactive flag or a GPU count never share one."""
    rng = random.Random(11)
    data = make_context(inventory(), (22, 5), PARTITIONS).policy
    f = LuaFilter()
    lua_data = f.load_data(data_file)
    same = f.lua.eval("function(a, b) return rawequal(a, b) end")
    fields_of = ("action", "locality", "features", "prefer", "message", "record")
    for _ in range(3000):
        fields = {
            "min_nodes": rng.choice([NO_VAL, 1, 2, 3, 4, 7]),
            "num_tasks": rng.choice([NO_VAL, 8]),
            "partition": rng.choice([None, "gpu", "east"]),
            rng.choice(["tres_per_job", "tres_per_node"]): rng.choice([None, "gres:gpu:4", "gres:gpu:2"]),
            "time_limit": rng.choice([None, 60, 120]),
            "het_job_offset": rng.choice([None, None, 0, 1]),
        }
        desc = job(rng.choice(["prefer", "zone", "zone:auto", "region", "zone:fail", None]), **fields)
        desc = {k: v for k, v in desc.items() if v is not None}
        if rng.random() < 0.3:
            del desc["script"]  # salloc/srun: no batch script
        req = f.mod.request(f.table(desc))
        remembered = f.mod.decide_memo(lua_data, req)
        again = f.mod.decide_memo(lua_data, f.mod.request(f.table(desc)))
        assert same(remembered, again)
        fresh = f.mod.decide(lua_data, req)
        assert {k: remembered[k] for k in fields_of} == {k: fresh[k] for k in fields_of}, desc
        python = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert {k: remembered[k] for k in fields_of} == {k: python[k] for k in fields_of}, desc


def test_a_kept_zone_source_keeps_rows_for_at_most_32_class_sets_and_decides_as_a_fresh_load(
    data_file: Path,
) -> None:
    """prefer's zone rows kept per class set on one partition's source (decide.lua rows_of): 64 requests of
    distinct class-flag tables (scan.lua keeps one per constraint text, GPUs a node and type: 8 texts, two
    pairs of them admitting the same classes, times 1-8 GPUs) on one data table decide as each does on a
    freshly loaded table, and the source never keeps rows of more than 32 sets (it starts over)."""
    f = LuaFilter()
    lua_data = f.load_data(data_file)
    texts = [
        "ib",
        "ib|torch-2.3",
        "torch-2.3|ib",
        "ib|torch-2.4",
        "torch-2.4|ib",
        "ib&torch-2.4",
        "ib&torch-2.3",
        "torch-2.3|torch-2.4",
    ]
    counts = []
    for gpus in range(1, 9):
        for text in texts:
            desc = job(
                "prefer", min_nodes=2, features=text, partition="gpu", tres_per_node=f"gres:gpu:{gpus}"
            )
            kept = f.mod.decide(lua_data, f.mod.request(f.table(desc)))
            fresh = f.mod.decide(f.load_data(data_file), f.mod.request(f.table(desc)))
            fields = ("action", "locality", "features", "prefer", "message", "record")
            assert {k: kept[k] for k in fields} == {k: fresh[k] for k in fields}, desc
            counts.append(lua_data["one_sources"]["gpu"]["zone"]["kept"]["count"])
    assert max(counts) == 32 and any(b < a for a, b in zip(counts, counts[1:], strict=False)), (
        counts
    )  # filled, started over
    assert all(0 < c <= 32 for c in counts), counts


PROXY = """
function(fields)
  -- a job_desc as job_submit/lua hands it over: every read and write goes through the metatable (in slurmctld
  -- a lookup by field name in C); counts the reads per field
  local reads, writes = {}, {}
  local job = setmetatable({}, {
    __index = function(_, k) reads[k] = (reads[k] or 0) + 1; return fields[k] end,
    __newindex = function(_, k, v) writes[k] = v end,
  })
  return job, reads, writes
end
"""


@pytest.mark.parametrize(
    ("fields", "extra"),
    [
        ({}, set()),
        (
            {"tres_per_task": "gres/gpu:1", "num_tasks": 8},
            {"num_tasks"},
        ),  # the task count only for GPUs per task
        ({"req_nodes": "n01,n02"}, set()),
    ],
)
def test_submit_reads_each_job_field_once_and_only_those_it_needs(
    data_file: Path, fields: dict[str, object], extra: set[str]
) -> None:
    """Every job_desc read costs slurmctld a lookup by name (results/submit.md: the reads alone are most of
    the filter's cost per submission): a batch job is read field by field once, and only what its decision
    needs."""
    f = _fresh(data_file)
    desc = job("zone", min_nodes=2, **fields)
    jd, reads, writes = f.lua.eval(PROXY)(f.table(desc))
    assert f.mod.submit(jd, f.lua.table(), 1000) == 0
    read = dict(reads.items())
    assert all(n == 1 for n in read.values()), read
    needed = {
        "features",
        "prefer",
        "partition",
        "tres_per_job",
        "tres_per_node",
        "tres_per_task",
        "script",
        "spank_job_env",
        "comment",
        "req_nodes",
        "contiguous",
        "het_job_offset",
        "min_nodes",
        "time_limit",
        "admin_comment",
    }
    if "req_nodes" not in fields:
        needed |= {"exc_nodes", "reservation"}
    assert set(read) == needed | extra
    assert writes["features"].startswith("[zone_") and "admin_comment" in dict(writes.items())
    assert "job from uid 1000: slurm-topo: zone:wait" in f.messages("infos")[-1]


def _fresh(data_path: Path) -> LuaFilter:
    f = LuaFilter()
    f.configure(data_path)
    return f


@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "empty",
        "truncated",
        "syntax",
        "not a table",
        "wrong fingerprint",
        "hostile",
        "older format",
    ],
)
def test_bad_data_file_fails_open_and_logs_once(tmp_path: Path, data_file: Path, damage: str) -> None:
    """A missing, empty, truncated, broken or hostile data file: every job passes unchanged, one error is
    logged."""
    path = tmp_path / "slurm_topo_data.lua"
    text = data_file.read_text()
    first = text.splitlines()[0]
    if damage != "missing":
        path.write_text(
            {
                "empty": "",
                "truncated": text[: len(text) // 2],
                "syntax": first + "\nreturn {{{\n",
                "not a table": first + "\nreturn 42\n",
                "wrong fingerprint": first + "\nreturn {fingerprint='0', partitions={}}\n",
                "hostile": first + "\nos.execute('touch " + str(tmp_path / "pwned") + "')\nreturn {}\n",
                "older format": text.replace(f"format={FORMAT},", f"format={FORMAT - 1},", 1),
            }[damage]
        )
    f = _fresh(path)
    for _ in range(3):
        rc, desc = f.submit(job("zone:fail", min_nodes=50, admin_comment="site note"))
        assert rc == 0
        assert desc["features"] is None and desc["priority"] is None
        # never silent: the record says the locality was not applied, and why
        assert desc["admin_comment"].startswith(f"site note; slurm-topo: not applied: data file {path} ")
    assert len(f.messages("errors")) == 1
    told = f.messages("user_msgs")
    assert len(told) == 3 and all(
        m.startswith("slurm-topo: --locality=zone:fail NOT enforced: ") for m in told
    )
    assert all(str(path) in m for m in told)
    # a job that asked for nothing (or for any) hears nothing
    for quiet in (job(None, min_nodes=2), job("any", min_nodes=2)):
        rc, desc = f.submit(quiet)
        assert rc == 0 and desc["admin_comment"] is None
    assert len(f.messages("user_msgs")) == 3
    assert not (tmp_path / "pwned").exists()


def test_no_data_note_carries_no_user_text(tmp_path: Path) -> None:
    """The note for a job whose locality was not applied quotes the request cut and made plain: a comment
    cannot write a line or a record into the message or AdminComment."""
    f = _fresh(tmp_path / "absent.lua")
    rc, desc = f.submit(job(None, comment="locality=zone;x%n\r" + "y" * 80, min_nodes=2))
    assert rc == 0
    (told,) = f.messages("user_msgs")
    assert "%" not in told and ";" not in told.split(" NOT enforced")[0] and "y" * 40 not in told
    assert (
        desc["admin_comment"]
        == f"slurm-topo: not applied: data file {tmp_path / 'absent.lua'} missing or without its header line"
    )


def test_submit_applies_the_decision_to_the_job(data_file: Path) -> None:
    """amend sets features and appends the record to AdminComment; hold sets priority 0; reject returns an
    error code with the reason for the user; the user's comment is never touched."""
    f = _fresh(data_file)
    rc, desc = f.submit(job("zone", min_nodes=3, admin_comment="site note", comment="mine"))
    assert rc == 0
    assert desc["features"] == "[zone_us-west-2a|zone_us-east-1a]"
    assert desc["admin_comment"] == "site note; slurm-topo: zone:wait [us-west-2a(3n),us-east-1a(4n)]"
    assert desc["comment"] == "mine"
    rc, desc = f.submit(job("zone", min_nodes=7))
    assert rc == 0 and desc["priority"] == 0 and desc["features"] is None
    assert "no zone can ever hold 7 nodes" in f.messages()[-1]
    rc, desc = f.submit(job("zone:fail", min_nodes=7))
    assert rc == 2006  # slurm.ESLURM_INVALID_NODE_COUNT on 22.05 (no TOPO_CONFIG constant there)
    assert f.messages()[-1].startswith("slurm-topo: --locality=zone:fail: no zone can ever hold 7 nodes")


def test_data_file_is_reloaded_only_when_its_fingerprint_changes(tmp_path: Path, data_file: Path) -> None:
    """A new data file is picked up on the next check; an unchanged first line means no reload."""
    path = tmp_path / "slurm_topo_data.lua"
    shutil.copy(data_file, path)
    f = _fresh(path)
    _, desc = f.submit(job("zone", min_nodes=3))
    assert desc["features"] == "[zone_us-west-2a|zone_us-east-1a]"
    smaller = render_all(
        inventory(),
        (22, 5),
        [p for p in PARTITIONS if p.name != "gpu"]
        + [type(PARTITIONS[0])("gpu", ("n01", "n02", "n03", "n04"), True)],
    )["slurm_topo_data.lua"]
    path.write_text(smaller)
    _, desc = f.submit(job("zone", min_nodes=3))
    assert desc["features"] == "[zone_us-east-1a]"


def test_job_submit_lua_wrapper_runs_the_filter(tmp_path: Path, data_file: Path) -> None:
    """The shipped job_submit.lua finds the filter and the data file beside itself and defines both hooks."""
    shutil.copy(JOB_SUBMIT / "job_submit.lua", tmp_path / "job_submit.lua")
    shutil.copytree(JOB_SUBMIT / "slurm_topo_filter", tmp_path / "slurm_topo_filter")
    shutil.copy(data_file, tmp_path / "slurm_topo_data.lua")
    f = LuaFilter()
    assert f.lua.eval(f'dofile("{tmp_path / "job_submit.lua"}")') == 0
    g = f.lua.globals()
    desc = f.table(job("region:fail", min_nodes=2))
    assert g.slurm_job_submit(desc, f.lua.table(), 0) == 0
    assert desc["features"] == "[region_us-east|region_us-west]"
    assert g.slurm_job_modify(f.table({"min_nodes": NO_VAL}), f.lua.table(), f.lua.table(), 0) == 0


def test_a_changed_module_is_loaded_again_when_slurmctld_reruns_the_wrapper(
    tmp_path: Path, data_file: Path
) -> None:
    """slurmctld runs job_submit.lua again when its mtime changes: every module of the filter is then loaded
    afresh from its file (not the copy package.loaded kept), vocab.lua as much as the entry module."""
    shutil.copy(JOB_SUBMIT / "job_submit.lua", tmp_path / "job_submit.lua")
    shutil.copytree(JOB_SUBMIT / "slurm_topo_filter", tmp_path / "slurm_topo_filter")
    shutil.copy(data_file, tmp_path / "slurm_topo_data.lua")
    f = LuaFilter()
    g = f.lua.globals()
    assert f.lua.eval(f'dofile("{tmp_path / "job_submit.lua"}")') == 0
    desc = f.table(job("region:fail", min_nodes=2))
    assert g.slurm_job_submit(desc, f.lua.table(), 0) == 0
    assert desc["admin_comment"].startswith("slurm-topo: region:fail ")
    vocab = tmp_path / "slurm_topo_filter" / "vocab.lua"
    text = vocab.read_text()
    assert text.count('local RECORD_PREFIX = "slurm-topo: "') == 1
    vocab.write_text(
        text.replace('local RECORD_PREFIX = "slurm-topo: "', 'local RECORD_PREFIX = "reloaded: "')
    )
    assert f.lua.eval(f'dofile("{tmp_path / "job_submit.lua"}")') == 0
    desc = f.table(job("region:fail", min_nodes=2))
    assert g.slurm_job_submit(desc, f.lua.table(), 0) == 0
    assert desc["admin_comment"].startswith("reloaded: region:fail "), desc["admin_comment"]


def test_the_filter_directory_wins_over_a_leftover_single_file(tmp_path: Path, data_file: Path) -> None:
    """An upgrade that leaves an older release's slurm_topo_filter.lua beside the directory still runs the
    directory's modules (job_submit.lua looks for DIR/?/init.lua first)."""
    shutil.copy(JOB_SUBMIT / "job_submit.lua", tmp_path / "job_submit.lua")
    shutil.copytree(JOB_SUBMIT / "slurm_topo_filter", tmp_path / "slurm_topo_filter")
    shutil.copy(data_file, tmp_path / "slurm_topo_data.lua")
    (tmp_path / "slurm_topo_filter.lua").write_text(
        "return { configure = function() end, submit = function() error('the old file ran') end }\n"
    )
    f = LuaFilter()
    assert f.lua.eval(f'dofile("{tmp_path / "job_submit.lua"}")') == 0
    desc = f.table(job("region:fail", min_nodes=2))
    assert f.lua.globals().slurm_job_submit(desc, f.lua.table(), 0) == 0
    assert desc["features"] == "[region_us-east|region_us-west]"
    assert not f.messages("errors")


# The walk's oracle: a linear scan of the merged, sorted list (20 lines of Lua, written apart from
# scan.lua), against scan.lua's merged walk on random lists. Each list is one partition's groups of a level:
# features shared across partitions with other sizes, ranks unique per feature (fleet-wide), random sizes,
# needs, looks and limits.
WALK_ORACLE = """
return function(lists, need, looks, limit, budget)
  local best = {}
  for j, list in ipairs(lists) do
    for _, g in ipairs(list) do
      local b = best[g.feature]
      if b == nil or g.nodes > b.g.nodes then best[g.feature] = { g = g, j = j } end
    end
  end
  local merged = {}
  for _, b in pairs(best) do merged[#merged + 1] = b.g end
  table.sort(merged, function(a, b) return a.nodes < b.nodes or (a.nodes == b.nodes and a.rank < b.rank) end)
  local kept, length, seen = {}, 2, 0
  for _, g in ipairs(merged) do
    if g.nodes >= need then
      seen = seen + 1
      if seen > looks then return kept, true end
      local extra = #g.feature + (#kept > 0 and 1 or 0)
      if #kept == limit or length + extra > budget then return kept, true end
      kept[#kept + 1], length = g.feature, length + extra
    end
  end
  return kept, false
end
"""


_WALK_FILTER = LuaFilter()
_WALK_LUA = _WALK_FILTER.lua
_SCAN = _WALK_LUA.eval('require("slurm_topo_filter.scan")')
_ORACLE = _WALK_LUA.execute(WALK_ORACLE)
_ELIGIBLE = _WALK_LUA.eval(
    'function(sc, g) local n, gp = require("slurm_topo_filter.scan").eligible(sc, g) return {n, gp} end'
)


def _walk_source(lists: list[list[dict[str, Any]]]) -> tuple[list[Any], Any]:
    """Each partition's groups (sorted as the generator sorts them) as a Lua list indexed by feature, and the
    ascending source of them all: (the Lua lists, the source)."""
    lua = _WALK_LUA
    luas = []
    for groups in lists:
        lst = lua.table_from([lua.table_from(g) for g in groups])
        index = lua.table()
        for i in range(1, len(lst) + 1):
            index[lst[i]["feature"]] = lst[i]
        lst["index"] = index
        luas.append(lst)
    src = lua.table_from(
        {
            "lists": lua.table_from(luas),
            "index": lua.table_from([x["index"] for x in luas]),
            "order": "ascending",
        }
    )
    return luas, src


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12)), max_size=30, unique_by=lambda x: x[0]),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 13),
    st.integers(1, 40),
    st.integers(1, 20),
    st.sampled_from([1024, 60, 12]),
)
def test_the_merged_walk_equals_a_linear_scan_of_the_merged_list(
    parts: list[list[tuple[int, int]]], need: int, looks: int, limit: int, budget: int
) -> None:
    """scan.lua's walk (per-partition lists merged as they are walked, each feature once: its largest copy)
    keeps what a linear scan of the whole merged, sorted list keeps, with the same cut, when a step over
    another partition's smaller copy costs no look (one partition) — and never more groups than the scan when
    it does. Features are ``g<rank>`` so ranks are unique per feature, as the generator ranks them."""
    lua = _WALK_LUA
    lists = []
    for part in parts:
        groups = sorted(
            (
                {"feature": f"g{r}", "rank": r, "nodes": n, "gpus": 0, "most": 0, "chars": len(f"g{r}") + 1}
                for r, n in part
            ),
            key=lambda g: (g["nodes"], g["rank"]),
        )
        lists.append(groups)
    to_lua = lua.table_from
    luas, src = _walk_source(lists)
    sc = lua.table_from({"check": True, "nodes": need, "total_gpus": 0, "ok": False, "bounded": 0})
    walk = _SCAN.candidates(sc, src, budget, looks, None, None, False, limit)
    got = [walk["kept"][i]["feature"] for i in range(1, len(walk["kept"]) + 1)]
    want, want_cut = _ORACLE(to_lua(luas), need, looks, limit, budget)
    want = [want[i] for i in range(1, len(want) + 1)]
    if len(lists) == 1:
        assert (got, bool(walk["cut"])) == (want, bool(want_cut))
    else:
        # a step over a smaller copy costs a look: the walk keeps a prefix of the scan's list
        assert got == want[: len(got)]
        assert len(got) == len(want) or walk["cut"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(0, 64)),
            max_size=30,
            unique_by=lambda x: x[0],
        ),
        min_size=1,
        max_size=3,
    ),
    st.integers(1, 13),
    st.integers(1, 40),
    st.integers(0, 20),
    st.booleans(),
    st.booleans(),
)
def test_a_walk_nothing_can_fit_ends_as_the_full_walk_does(
    parts: list[list[tuple[int, int, int]]], need: int, looks: int, limit: int, no_class: bool, required: bool
) -> None:
    """A source none of whose groups can hold the job (more GPUs than any group has: each list's gpus_max;
    or a request no class counts for) is not walked: what candidates returns (nothing kept, the cut, the
    bound and sc.bounded, a required level's groups taken unchecked) equals the walk itself, made to look at
    every group by lists that carry no gpus_max."""
    lua = _WALK_LUA

    def source(with_max: bool):  # type: ignore[no-untyped-def]
        luas = []
        for part in parts:
            groups = sorted(
                (
                    {"feature": f"g{r}", "rank": r, "nodes": n, "gpus": gp, "most": min(gp, 8)}
                    for r, n, gp in part
                ),
                key=lambda g: (g["nodes"], g["rank"]),
            )
            lst = lua.table_from([lua.table_from(g) for g in groups])
            index = lua.table()
            for i in range(1, len(lst) + 1):
                index[lst[i]["feature"]] = lst[i]
                lst[i]["counts"] = lua.table()  # no class of the request's: none counts
            lst["index"] = index
            if with_max:
                lst["gpus_max"] = max((g["gpus"] for g in groups), default=0)
            luas.append(lst)
        return lua.table_from(
            {
                "lists": lua.table_from(luas),
                "index": lua.table_from([x["index"] for x in luas]),
                "order": "ascending",
            }
        )

    most = max((gp for part in parts for _, _, gp in part), default=0)
    total = 0 if no_class else most + 1  # more GPUs than any group has

    def walk(with_max: bool):  # type: ignore[no-untyped-def]
        sc = lua.table_from(
            {
                "check": True,
                "nodes": need,
                "total_gpus": total,
                "ok": lua.table() if no_class else False,
                "none": no_class,
                "bounded": 0,
                "class_gpus": lua.table(),
            }
        )
        w = _SCAN.candidates(sc, source(with_max), 1024, looks, None, None, required, limit)
        kept = [w["kept"][i]["feature"] for i in range(1, len(w["kept"]) + 1)]
        return kept, bool(w["cut"]), bool(w["bound"]), w["unchecked"], w["length"], sc["bounded"]

    assert walk(True) == walk(False)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 120), st.integers(1, 12)), max_size=90, unique_by=lambda x: x[0]),
        min_size=1,
        max_size=3,
    ),
    st.integers(1, 13),
    st.integers(1, 40),
    st.sampled_from([1024, 200, 12]),
)
# lists longer than the looks and 64 steps: the 64th step's group is the last taken
@example(parts=[[(r, 5) for r in range(150)]], need=1, looks=10, budget=1024)
@example(
    parts=[[(r, 5) for r in range(0, 150, 2)], [(r, 6) for r in range(0, 150, 3)]],
    need=1,
    looks=7,
    budget=1024,
)
def test_a_required_walk_past_its_looks_takes_the_next_steps_unchecked(
    parts: list[list[tuple[int, int]]], need: int, looks: int, budget: int
) -> None:
    """A required level whose looks find nothing (no group has the job's GPUs; no gpus_max, so it is walked)
    takes the groups of the next 64 steps unchecked, from the step its looks stopped at, while their
    characters fit: as a linear scan of every partition's copies in the walk's order says (nodes, rank, then
    the partition; a step over another partition's smaller copy of a feature is a step and keeps nothing)."""
    lua = _WALK_LUA
    copies = []  # (nodes, rank, list index, feature)
    lists = []
    for j, part in enumerate(parts):
        groups = sorted(
            ({"feature": f"g{r}", "rank": r, "nodes": n, "gpus": 0, "most": 0} for r, n in part),
            key=lambda g: (g["nodes"], g["rank"]),
        )
        lists.append(groups)
        copies += [(g["nodes"], g["rank"], j, g["feature"]) for g in groups if g["nodes"] >= need]
    largest: dict[str, tuple[int, int]] = {}
    for nodes, _, j, feature in copies:
        if feature not in largest or nodes > largest[feature][0]:
            largest[feature] = (nodes, j)
    steps = sorted(copies)
    want: list[str] = []
    length = 2
    if len(steps) > looks:
        for nodes, _, j, feature in steps[looks : looks + 64]:
            if largest[feature] != (nodes, j):
                continue  # another partition's smaller copy (ties: the first partition's)
            extra = len(feature) + (1 if want else 0)
            if length + extra > budget:
                break
            want.append(feature)
            length += extra
    _, src = _walk_source(lists)
    sc = lua.table_from(
        {"check": True, "nodes": need, "total_gpus": 1, "ok": False, "bounded": 0, "class_gpus": lua.table()}
    )
    w = _SCAN.candidates(sc, src, budget, looks, None, None, True, 64)
    got = [w["kept"][i]["feature"] for i in range(1, len(w["kept"]) + 1)]
    assert got == want
    assert w["unchecked"] == len(want)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from([None, "h", "l"])),
        min_size=1,
        max_size=10,
    ),
    st.lists(
        st.lists(st.tuples(st.integers(0, 9), st.integers(1, 72)), min_size=1, max_size=6),
        min_size=1,
        max_size=20,
    ),
    st.integers(1, 13),
    st.integers(0, 40),
)
def test_the_sums_made_at_load_for_a_gpu_request_equal_a_group_summed_step_by_step(
    classes: list[tuple[int, str | None]], shapes: list[list[tuple[int, int]]], need: int, total: int
) -> None:
    """set_sums sums every group shape's eligible nodes and GPUs once per GPU request's class set, at
    load (scan.lua shape_sums, read through g.counts.id). For every set and shape, eligible with those sums
    equals eligible summing the shape's classes; and a walk over groups of those shapes keeps the same
    groups, with the same cut, either way."""
    lua = _WALK_LUA
    n_cls = len(classes)
    cls_tables = [lua.table_from({"features": lua.table(), "gpus": g, "gpu_type": t}) for g, t in classes]
    shape_tables = []
    for i, pairs in enumerate(shapes, start=1):
        seen: dict[int, int] = {}
        for idx, count in pairs:
            seen[idx % n_cls + 1] = count  # one count a class
        flat = [x for kv in sorted(seen.items()) for x in kv]
        counts = lua.table_from(flat)
        counts["id"] = i
        nodes = sum(seen.values())
        gpus = sum(c * classes[k - 1][0] for k, c in seen.items())
        most = max(classes[k - 1][0] for k in seen)
        shape_tables.append(lua.table_from({"n": nodes, "g": gpus, "m": most, "c": counts}))
    data = lua.table_from({"classes": lua.table_from(cls_tables), "shapes": lua.table_from(shape_tables)})
    _SCAN.gpu_sets(data)
    _SCAN.set_sums(data)
    groups = sorted(
        (
            {
                "feature": f"g{i}",
                "rank": i,
                "nodes": sh["n"],
                "gpus": sh["g"],
                "most": sh["m"],
                "counts": sh["c"],
            }
            for i, sh in enumerate(shape_tables, start=1)
        ),
        key=lambda g: (g["nodes"], g["rank"]),
    )
    lst = lua.table_from([lua.table_from(g) for g in groups])
    index = lua.table()
    for k in range(1, len(lst) + 1):
        index[lst[k]["feature"]] = lst[k]
    lst["index"] = index
    src = {"lists": lua.table_from([lst]), "index": lua.table_from([index]), "order": "ascending"}

    def scan(ok: Any, sums: Any) -> Any:
        fields = {"check": True, "nodes": need, "total_gpus": total, "ok": ok, "sums": sums, "bounded": 0}
        return lua.table_from({**fields, "class_gpus": data["class_gpus"]})

    def walk(sc: Any) -> tuple[list[str], bool]:
        w = _SCAN.candidates(sc, lua.table_from(src), 1024, 64, None, None, False, 64)
        return [w["kept"][k]["feature"] for k in range(1, len(w["kept"]) + 1)], bool(w["cut"])

    for ok in data["gpu_sets"].values():
        sums = data["set_sums"][ok]
        # every set that admits a class has its sums (these shapes are far under SUMS_PAIRS)
        assert sums is not None or data["empty_sets"][ok]
        for k in range(1, len(lst) + 1):
            with_sums, summed = _ELIGIBLE(scan(ok, sums), lst[k]), _ELIGIBLE(scan(ok, None), lst[k])
            assert tuple(with_sums.values()) == tuple(summed.values())
        assert walk(scan(ok, sums)) == walk(scan(ok, None))


# The class set's oracle: every class asked in turn (what scan.lua did before the feature index), against
# the set scan.lua makes from each feature's classes, on random classes and constraints.
CLASS_ORACLE = """
return function(classes, c, per_node, gpu_type)
  local out = {}
  for i, cls in ipairs(classes) do
    local ok = c.kind == "or" and #c.names == 0
    for _, n in ipairs(c.names) do
      if c.kind == "or" and cls.features[n] then ok = true end
    end
    if c.kind ~= "or" then
      ok = true
      for _, n in ipairs(c.names) do ok = ok and cls.features[n] == true end
    end
    local gpus_ok = cls.gpus >= per_node and (gpu_type == nil or cls.gpu_type == gpu_type)
    if per_node > 0 and not gpus_ok then ok = false end
    if ok then out[#out + 1] = i end
  end
  return out
end
"""
_CLASS_ORACLE = _WALK_LUA.execute(CLASS_ORACLE)
_PARSE = _WALK_LUA.eval('require("slurm_topo_filter.constraint").parse_constraint')
_FEATURES = ["a", "b", "c", "d", "e"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.sets(st.sampled_from(_FEATURES), min_size=1),
            st.sampled_from([0, 1, 4, 8]),
            st.sampled_from(["h", "l"]),
        ),
        min_size=2,
        max_size=12,
    ),
    st.lists(st.sampled_from([*_FEATURES, "nosuch"]), min_size=1, max_size=3, unique=True),
    st.sampled_from([0, 1, 2, 8]),
    st.sampled_from([None, "h", "l"]),
)
def test_a_constraints_class_set_equals_asking_every_class(
    classes: list[tuple[set[str], int, str]], names: list[str], per_node: int, gpu_type: str | None
) -> None:
    """scan.lua's class set of a constraint, made from each feature's classes (the rarest name's for and and a
    bracket's names, the union for or), holds exactly the classes that a check of every class admits, with the
    GPU filter of a per-node request; each drawn fleet and names asked as a&b, a|b and a&[x|y]."""
    lua = _WALK_LUA
    gpu = (
        None if per_node == 0 else lua.table_from({"scope": "node", "count": per_node, "gpu_type": gpu_type})
    )
    for text, kind in (
        ("&".join(names), "and"),
        ("|".join(names), "or" if len(names) > 1 else "and"),
        ("&".join(names) + "&[x|y]", "bracket"),
    ):
        c = _PARSE(text)
        assert c["kind"] == kind
        data = lua.table_from(
            {
                "classes": lua.table_from(
                    [
                        lua.table_from(
                            {
                                "features": lua.table_from({f: True for f in fs}),
                                "gpus": g,
                                "gpu_type": t if g else None,
                            }
                        )
                        for fs, g, t in classes
                    ]
                ),
            }
        )
        _SCAN.gpu_sets(data)  # as data.lua's prepare: the GPU sets, made_sets, class_gpus
        _SCAN.feature_classes(data)
        sc = _SCAN.new_scan(data, lua.table_from({"min_nodes": 1, "gpu": gpu}), c, True, None, None)
        got = sorted(k for k, v in sc["ok"].items() if v)
        want = list(_CLASS_ORACLE(data["classes"], c, per_node, gpu_type if per_node else None).values())
        assert got == want, text
        assert bool(sc["none"]) == (not want), text  # no class counts: no group can hold a job of one node


def test_a_required_level_past_its_looks_takes_the_next_groups_unchecked(tmp_path: Path) -> None:
    """A fleet of many one-node groups where only the largest hold a GPU job: a required network group's walk
    stops at its looks, and the bracket is the next groups of the level (each one group: the job still never
    runs across groups), the record saying so — in Python and in the Lua alike."""
    rows = [f"  - {{name: c{i:04d}, region: r, zone: z, network_group: g{i:04d}}}\n" for i in range(300)]
    rows.append(
        "  - {name: 'a[0001-0002]', region: r, zone: z, network_group: big, gpus: 8, gpu_type: h100}\n"
    )
    inv = tmp_path / "fleet.yaml"
    inv.write_text("nodes:\n" + "".join(rows))
    data_text = render_all(load_inventories([inv]), (24, 11))["slurm_topo_data.lua"]
    (tmp_path / "data.lua").write_text(data_text)
    f = LuaFilter()
    lua_data = f.load_data(tmp_path / "data.lua")
    desc = job("network_group", min_nodes=1, tres_per_node="gres:gpu:8")
    got = f.decide(lua_data, desc)
    assert got["action"] == "amend"
    assert got["record"].startswith("slurm-topo: network_group:wait [bound: 1 walk cut; fit not checked] ")
    alternatives = got["features"].strip("[]").split("|")
    assert 0 < len(alternatives) <= 64 and all(a.startswith("ng_") for a in alternatives)
    data = make_context(load_inventories([inv]), (24, 11)).policy
    assert decide(data, JobRequest.from_job_desc(desc)).as_dict() == got


def test_modify_replans_from_the_job_record(data_file: Path) -> None:
    """An update of a pending zone job's size re-plans its bracket from the job's own record; a size no zone
    can ever hold is refused for :fail; an update that changes nothing the decision uses passes untouched."""
    f = _fresh(data_file)
    _, submitted = f.submit(job("zone:fail", min_nodes=2, features="ib"))
    assert submitted["features"] == "ib&[zone_us-east-1a]"
    record = {
        "spank_job_env": {0: f"{SPANK_LOCALITY}=zone:fail"},
        "features": submitted["features"],
        "admin_comment": submitted["admin_comment"],
        "min_nodes": 2,
        "partition": "gpu",
    }
    update = f.table({"min_nodes": 3})
    assert f.mod.modify(update, f.table(record), f.lua.table(), 0) == 0
    assert update["features"] == "ib&[zone_us-east-1a]"
    assert update["admin_comment"].count("slurm-topo:") == 1
    update = f.table({"min_nodes": 5})
    said = len(f.messages())
    assert f.mod.modify(update, f.table(record), f.lua.table(), 0) == 2006
    assert "refused: slurm-topo: zone:fail: rejected; the largest is us-east-1a" in f.messages("infos")[-1]
    assert len(f.messages()) == said, "no log_user in job_modify (22.05 discards it with an error line)"
    untouched = f.table({"time_limit": 60})
    assert f.mod.modify(untouched, f.table(record), f.lua.table(), 0) == 0
    assert untouched["features"] is None and untouched["admin_comment"] is None


def test_wrapper_without_the_filter_lets_jobs_pass(tmp_path: Path) -> None:
    """job_submit.lua alone (filter file missing): it loads, logs the problem, and every job passes
    unchanged."""
    shutil.copy(JOB_SUBMIT / "job_submit.lua", tmp_path / "job_submit.lua")
    f = LuaFilter()
    f.lua.execute(f'package.path = "{tmp_path}/?.lua"')
    f.lua.execute('package.loaded["slurm_topo_filter"] = nil')
    assert f.lua.eval(f'dofile("{tmp_path / "job_submit.lua"}")') == 0
    desc = f.table(job("zone:fail", min_nodes=50))
    assert f.lua.globals().slurm_job_submit(desc, f.lua.table(), 0) == 0
    assert desc["features"] is None
    assert len(f.messages("errors")) == 1


def test_release_of_a_filter_hold_is_refused_for_users(data_file: Path) -> None:
    """Slurm records the filter's priority 0 as a user hold: a user's `scontrol release` (priority update) is
    refused while the record says held; an administrator (uid 0) may release it."""
    f = _fresh(data_file)
    _, held = f.submit(job("zone", min_nodes=7))
    assert held["priority"] == 0
    record = {
        "spank_job_env": {0: f"{SPANK_LOCALITY}=zone"},
        "admin_comment": held["admin_comment"],
        "min_nodes": 7,
    }
    record["priority"] = 0
    release = f.table({"priority": 0xFFFFFFFF})
    said = len(f.messages())
    assert f.mod.modify(release, f.table(record), f.lua.table(), 1000) != 0
    assert "refused: slurm-topo: zone:wait: held;" in f.messages("infos")[-1]
    assert len(f.messages()) == said and f.messages("errors") == [], "denied quietly"
    assert f.mod.modify(f.table({"priority": 0xFFFFFFFF}), f.table(record), f.lua.table(), 0) == 0
    _, placed = f.submit(job("zone", min_nodes=2))
    record.update(admin_comment=placed["admin_comment"], features=placed["features"], min_nodes=2)
    release = f.table({"priority": 0xFFFFFFFF})
    assert f.mod.modify(release, f.table(record), f.lua.table(), 1000) == 0  # the owner's own hold
    assert release["features"] == placed["features"] and release["admin_comment"] is None


def test_request_rejections_use_a_generic_code_size_rejections_the_node_count_one(data_file: Path) -> None:
    """A bad locality value returns slurm.ERROR (sbatch then says no "Node count specification invalid"); a
    size no group can hold returns the node-count code."""
    f = _fresh(data_file)
    rc, _ = f.submit(job("zone:", via="comment", min_nodes=2))
    assert rc == -1 and "unknown locality 'zone:'" in f.messages()[-1]
    rc, _ = f.submit(job("zone:fail", min_nodes=7))
    assert rc == 2006


def test_submit_of_an_auto_job_writes_the_budget_and_the_relaxers_update_passes(data_file: Path) -> None:
    """zone:auto through the real filter: the bracket :wait gives, and AdminComment = the site's note, the
    filter's record and the budget record the relaxer reads; the relaxer's update (uid 0: Features= and
    AdminComment=) passes untouched; a later administrator's resize keeps the relaxation in the trail."""
    from slurm_topo.relaxer.relax import parse_budget, relaxations

    f = _fresh(data_file)
    _, wait = f.submit(job("zone", min_nodes=4))
    rc, desc = f.submit(job("zone:auto", min_nodes=4, time_limit=120, admin_comment="site note"))
    assert rc == 0 and desc["features"] == wait["features"] and desc["prefer"] == wait["prefer"]
    comment = desc["admin_comment"]
    assert comment.startswith("site note; slurm-topo: zone:auto [us-east-1a(4n)]; ")
    budget = parse_budget(comment)
    assert budget is not None and budget.level == "zone" and budget.limit_s == 7200
    assert 0 < (budget.of("region") or 0) < (budget.of("any") or 0) < 7200 * 3
    assert comment.endswith("; " + budget.record())
    record = {
        "spank_job_env": {0: f"{SPANK_LOCALITY}=zone:auto"},
        "features": desc["features"],
        "admin_comment": comment,
        "min_nodes": 4,
        "time_limit": 120,
        "partition": "gpu",
    }
    trail = comment + "; slurm-topo-relax: zone->region waited=2000s budget=1900s at=2026-11-30T12:00:00Z"
    widen = f.table({"features": "[region_us-east|region_us-west]", "admin_comment": trail})
    assert f.mod.modify(widen, f.table(record), f.lua.table(), 0) == 0
    assert widen["features"] == "[region_us-east|region_us-west]" and widen["admin_comment"] == trail
    owner = f.table({"features": ""})  # an owner's update is re-planned: the zone bracket again
    assert f.mod.modify(owner, f.table(record), f.lua.table(), 1000) == 0
    assert owner["features"] == wait["features"]
    resize = f.table({"min_nodes": 2})  # the plan fits 2 nodes: a new budget in place of the old one
    assert f.mod.modify(resize, f.table({**record, "admin_comment": trail}), f.lua.table(), 0) == 0
    assert relaxations(resize["admin_comment"]) == [("zone", "region")]
    assert resize["admin_comment"].count("slurm-topo-auto:") == 1


def _signed(body: str) -> str:
    """A data file whose checksum line matches its (edited) body: what the loader itself must refuse."""
    return f"-- slurm-topo-data 0123456789abcdef\n-- slurm-topo-checksum {checksum(body)}\n{body}"


def test_data_file_whose_columns_do_not_add_up_fails_open(tmp_path: Path, data_file: Path) -> None:
    """A data file that passes its checksum and loads as a table but whose group columns do not make groups
    (here: no shapes) is broken: jobs pass unchanged, one error is logged."""
    body = data_file.read_text().split("\n", 2)[2]
    body = body.replace('fingerprint="', 'fingerprint="0123456789abcdef", old="', 1)
    assert "\nshapes=[=[" in body
    path = tmp_path / "slurm_topo_data.lua"
    path.write_text(_signed(body.replace("\nshapes=[=[", "\nshapes=[=[@]=],\nunused=[=[", 1)))
    f = _fresh(path)
    for _ in range(2):
        rc, desc = f.submit(job("zone:fail", min_nodes=3))
        assert rc == 0 and desc["features"] is None
    assert len(f.messages("errors")) == 1 and "does not load" in f.messages("errors")[0]
    path.write_text(_signed(body))  # the same file with its shapes: used
    f = _fresh(path)
    _, desc = f.submit(job("zone:fail", min_nodes=3))
    assert desc["features"] == "[zone_us-west-2a|zone_us-east-1a]" and f.messages("errors") == []


def test_data_file_of_another_format_fails_open_even_with_a_good_checksum(
    tmp_path: Path, data_file: Path
) -> None:
    """A well-formed data file of the previous format (checksum right) is not read: jobs pass unchanged and
    the log says which format the filter reads."""
    body = data_file.read_text().split("\n", 2)[2]
    body = body.replace('fingerprint="', 'fingerprint="0123456789abcdef", old="', 1)
    path = tmp_path / "slurm_topo_data.lua"
    path.write_text(_signed(body.replace(f"\nformat={FORMAT},\n", f"\nformat={FORMAT - 1},\n", 1)))
    f = _fresh(path)
    rc, desc = f.submit(job("zone:fail", min_nodes=3))
    assert rc == 0 and desc["features"] is None
    assert f.messages("errors") == [
        f"slurm-topo: data file {path} has format {FORMAT - 1}, this filter reads {FORMAT}: regenerate it "
        "with the matching slurm-topo; jobs pass unchanged"
    ]


def test_data_file_of_small_racks_stays_small(tmp_path: Path) -> None:
    """The data file's size is what its load inside slurmctld costs (read, checksum and Lua's parser go by its
    bytes; benchmarks/bench_filter.py --load-only times it): 2 000 nodes in racks of 10 (200 network groups,
    places and node ranges) take under 4 KiB of header and legend plus 7 bytes per node (format 8 writes the
    node ranges as a Lua table, each key in full, so that no decision parses them: 6.5 bytes per node here;
    format 7's one prefix-compressed string took under 6). Format 4, a table per group with its location
    strings and a table per place, took about 30 bytes per node (60 219 bytes)."""
    lines = ["nodes:"]
    for rack in range(200):
        r, z = rack % 2, (rack // 2) % 3
        lines.append(
            f"  - {{name: 'gpu-r{r}z{z}k{rack:05d}-[000-009]', region: region{r}, "
            f"zone: region{r}-{'abc'[z]}, network_group: rack-{rack:05d}, gpus: {8 if rack % 3 else 4}, "
            "gpu_type: h100}"
        )
    (tmp_path / "fleet.yaml").write_text("\n".join(lines) + "\n")
    text = render_all(load_inventories([tmp_path / "fleet.yaml"]), (22, 5))["slurm_topo_data.lua"]
    assert f"\nformat={FORMAT},\n" in text
    assert len(text.encode()) < 4096 + 7 * 2000, len(text.encode())
    f = LuaFilter()
    data = f.load_data(_write(tmp_path / "data.lua", text))
    assert f.decide(data, job("network_group:fail", min_nodes=10))["features"].startswith("[ng_region")
    named = f.decide(data, job("zone:fail", min_nodes=2, req_nodes="gpu-r0z0k00000-[000-001]"))
    assert named["action"] == "amend", named


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


SPANK_PLAN = "_SLURM_SPANK_OPTION_locality_plan"


def _with_plan(locality: str, plan: str, **fields: object) -> dict[str, object]:
    desc = job(locality, **fields)
    desc["spank_job_env"] = {0: f"{SPANK_LOCALITY}={locality}", 1: f"{SPANK_PLAN}={plan}"}
    return desc


def test_sbatch_plan_is_the_first_admin_comment_record_and_survives_a_new_decision(data_file: Path) -> None:
    """``sbatch --plan=…`` (the SPANK option) lands in AdminComment before the filter's record; an update
    that re-plans the job replaces only the slurm-topo: record; the decision is the one without a plan."""
    f = _fresh(data_file)
    _, plain = f.submit(job("zone:fail", min_nodes=2, features="ib"))
    _, planned = f.submit(
        _with_plan("zone:fail", "dp=8,bytes=10G,compute=450ms,comm=30%", min_nodes=2, features="ib")
    )
    assert (
        planned["admin_comment"]
        == "slurm-topo-plan: dp=8,bytes=10G,compute=450ms,comm=30%; " + plain["admin_comment"]
    )
    assert planned["features"] == plain["features"]
    record = {
        "spank_job_env": {0: f"{SPANK_LOCALITY}=zone:fail", 1: f"{SPANK_PLAN}=dp=8,bytes=10G"},
        "features": planned["features"],
        "admin_comment": planned["admin_comment"],
        "min_nodes": 2,
        "partition": "gpu",
    }
    update = f.table({"min_nodes": 3})
    assert f.mod.modify(update, f.table(record), f.lua.table(), 0) == 0
    assert update["admin_comment"].startswith(
        "slurm-topo-plan: dp=8,bytes=10G,compute=450ms,comm=30%; slurm-topo: "
    )
    assert update["admin_comment"].count("slurm-topo-plan:") == 1


@pytest.mark.parametrize(
    "plan",
    [
        "dp=8; slurm-topo: any",  # another record smuggled in
        "dp=8,bytes=10G x=1",
        "dp=8,,bytes=1G",
        "dp=8,",
        "hack=1",
        "dp=" + "9" * 300,
        "dp=8\nslurm-topo: any",
    ],
)
def test_a_plan_that_is_not_one_is_left_out_and_logged_once(data_file: Path, plan: str) -> None:
    f = _fresh(data_file)
    _, plain = f.submit(job("zone", min_nodes=2))
    _, bad = f.submit(_with_plan("zone", plan, min_nodes=2))
    _, again = f.submit(_with_plan("zone", plan + "x", min_nodes=2))
    assert bad["admin_comment"] == plain["admin_comment"] == again["admin_comment"]
    said = [m for m in f.messages("errors") if "--plan" in m]
    assert len(said) == 1 and "\n" not in said[0] and "is not a plan; not recorded" in said[0]


# ---- named nodes (--nodelist, ReqNodeList=): every hostlist form Slurm reads, bounded (issue 43)

NAME_TEXT = "abhnrxAZ-._0190"
"""Text around brackets: digits before a bracket (``h1[8]``) and between brackets, and the name characters."""
SEPARATORS = [",", ",", ",", " ", "\t", "\n", ", ", " ,", ",,", "  "]
"""Slurm's hostlist separators (comma, space, tab, newline), alone and in runs (an empty item is skipped)."""
BAD = [
    "[",
    "]",
    "[1-]",
    "[ 1]",
    "[1 ]",
    "[5-3]",
    "[]",
    "[+1]",
    "[1,,2]",
    "[-1]",
    "[1[2]]",
    ";",
    "\r",
    "é",
    "@",
    "[0000000000000001]",
    "9999999999999999",
    "[1-2",
    "[a]",
    "[1-2-3]",
]
"""What is not read: every one makes the list refused (not one of these is read by both sides)."""


def _number(rng: random.Random) -> str:
    value = rng.choice([0, 1, 2, 7, 8, 9, 10, 11, 12, 18, 99, 100, rng.randint(0, 130)])
    return str(value).zfill(rng.choice([0, 0, 0, 1, 2, 3, 4]))


def _range(rng: random.Random) -> str:
    lo = _number(rng)
    if rng.random() < 0.4:
        return lo
    hi = str(int(lo) + rng.randint(0, 9)).zfill(rng.choice([0, 0, 1, 2, 3]))
    return f"{lo}-{hi}"


def _text(rng: random.Random, least: int = 0) -> str:
    return "".join(rng.choice(NAME_TEXT) for _ in range(rng.randint(least, 4)))


def _item(rng: random.Random) -> str:
    """A plain name, or text with one to three brackets of N and LO-HI items, now and then text after the
    last."""
    groups = rng.choice([0, 1, 1, 1, 2, 2, 3])
    if not groups:
        return _text(rng, least=1)
    width = {1: 4, 2: 2, 3: 1}[groups]
    out = _text(rng)
    for i in range(groups):
        out += "[" + ",".join(_range(rng) for _ in range(rng.randint(1, width))) + "]"
        if i < groups - 1 or rng.random() < 0.1:
            out += _text(rng)
    return out


def nodelists(rng: random.Random, n: int) -> list[str]:
    """``n`` node lists of one to four items joined by Slurm's separators, a few with something not read."""
    out = []
    for _ in range(n):
        text = "".join(_item(rng) + rng.choice(SEPARATORS) for _ in range(rng.randint(1, 4)))[:-1]
        if rng.random() < 0.1:
            text = rng.choice(SEPARATORS) + text + rng.choice(SEPARATORS)
        if rng.random() < 0.12:
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(BAD) + text[at:]
        out.append(text)
    return out


def _lua_reading(read: Any, text: str, limit: int) -> tuple[str, ...] | str | None:
    got = read(text, limit)
    if got is None or isinstance(got, (int, float)):
        return None if got is None else "many"
    return tuple(got[i] for i in range(1, len(got) + 1))


def _python_reading(text: str, limit: int) -> tuple[str, ...] | str | None:
    from slurm_topo.policy.nodes import read_nodelist

    got = read_nodelist(text, limit)
    return "many" if isinstance(got, int) else got


def test_the_filter_reads_node_lists_as_slurm_topo_hostlist_expands_them() -> None:
    """Hypothesis (derandomized): 60 seeds of 200 generated node lists each (12 000): brackets with ranges and
    lists, padding, digits before and between brackets, several brackets, text after the last, commas,
    spaces, tabs and newlines as separators, empty items, and now and then something not read. nodes.lua's
    reader gives the names of slurm_topo.core.hostlist.expand_keep_duplicates (Slurm's reading) in Slurm's
    order, or counts past the limit before expanding, or refuses, exactly where the Python reference does."""
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from slurm_topo.core import hostlist

    read = LuaFilter().lua.eval('require("slurm_topo_filter.nodes").read_nodelist')
    seen = {"names": 0, "refused": 0, "many": 0, "spaces": 0, "brackets": 0}

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(st.integers(0, 2**32 - 1))
    def check(seed: int) -> None:
        rng = random.Random(seed)
        for text in nodelists(rng, 200):
            limit = rng.choice([3, 40, 10000])
            lua, python = _lua_reading(read, text, limit), _python_reading(text, limit)
            assert lua == python, (text, limit, lua, python)
            if isinstance(lua, tuple):
                comma = re.sub(r"[ \t\n]", ",", text)
                assert lua == tuple(hostlist.expand_keep_duplicates(comma)), text
                seen["names"] += 1
                seen["spaces"] += bool(re.search(r"\w[ \t\n]+\w", text))
                seen["brackets"] += text.count("[") > 1
            else:
                seen["refused" if lua is None else "many"] += 1

    check()
    assert sum(seen.values()) >= 12000 - seen["spaces"] - seen["brackets"]
    assert min(seen.values()) > 300, seen


TRICKY_FLEET = """
nodes:
  - {name: "h[01-04]", region: r1, zone: r1-a, network_group: ga, nvlink_domain: d1}
  - {name: "h[05-08]", region: r1, zone: r1-b, network_group: gb, nvlink_domain: d1}
  - {name: "h[09-12]", region: r2, zone: r2-a, network_group: gc, nvlink_domain: d2}
  - {name: "h[13-20]", region: r2, zone: r2-b, network_group: gd}
  - {name: "gpu[1-9]", region: r1, zone: r1-a, network_group: ge, nvlink_domain: d3}
  - {name: "gpu10", region: r2, zone: r2-a, network_group: gf, nvlink_domain: d2}
  - {name: "gpu18", region: r2, zone: r2-a, network_group: gf, nvlink_domain: d2}
  - {name: "gpu19", region: r1, zone: r1-b, network_group: gb}
  - {name: "gpu110", region: r2, zone: r2-b, network_group: gd}
  - {name: "gpu111", region: r1, zone: r1-a, network_group: ga, nvlink_domain: d1}
  - {name: "n[001-003]", region: r1, zone: r1-b, network_group: gg, nvlink_domain: d4}
  - {name: "n[01-03]", region: r2, zone: r2-a, network_group: gh, nvlink_domain: d4}
  - {name: "n1-ib", region: r1, zone: r1-a, network_group: gi}
  - {name: "login", region: r2, zone: r2-b, network_group: gj}
  - {name: "spare1"}
"""
"""Names whose digits begin before a bracket (gpu1 8, gpu1 10), two paddings of one prefix (n001, n01), a name
with text after its digits, names without digits, a node with no location, an NVLink domain across zones."""


def _spelled(rng: random.Random, name: str) -> str:
    """One name in a form Slurm reads as that name: plain, or its digits cut into one or two brackets (h1[8],
    h[1][8], gpu[1]1[0])."""
    digits = len(name) - len(name.rstrip("0123456789"))
    if not digits or rng.random() < 0.25:
        return name
    head, tail = name[: len(name) - digits], name[len(name) - digits :]
    cut = rng.randint(0, digits - 1)
    if cut and rng.random() < 0.3:  # two brackets
        return (
            f"{head}[{tail[:cut]}]{tail[cut : cut + 1]}[{tail[cut + 1 :]}]"
            if cut + 1 < digits
            else (f"{head}[{tail[:cut]}][{tail[cut:]}]")
        )
    return f"{head}{tail[:cut]}[{tail[cut:]}]"


def test_named_nodes_are_placed_alike_in_every_spelling(tmp_path: Path) -> None:
    """2 000 node lists over a fleet of tricky names (digits before a bracket, two paddings of one prefix, a
    name with text after its digits, a node with no location), each name spelled one of the ways Slurm reads
    it and joined by any separator, now and then a name the data does not have: Python and Lua decide alike
    for every required level, and every list they accept lies in one group of the level (the inventory's own
    say), every list across two groups is refused."""
    from slurm_topo import merge, parse_inventory
    from slurm_topo.core.model import NVL_PREFIX

    inv = merge([parse_inventory(TRICKY_FLEET)])
    data = make_context(inv, (22, 5)).policy
    path = tmp_path / "data.lua"
    path.write_text(render_all(inv, (22, 5))["slurm_topo_data.lua"])
    f = LuaFilter()
    lua_data = f.load_data(path)
    where = {
        n.name: {
            "network_group": n.location.network_group and f"{n.location.zone}/{n.location.network_group}",
            "zone": n.location.zone,
            "region": n.location.region,
            "nvl": n.nvlink_domain and NVL_PREFIX + n.nvlink_domain,
        }
        for n in inv.nodes
    }
    names = sorted(where)
    rng = random.Random(43)
    outcomes: dict[str, int] = {}
    for _ in range(2000):
        chosen = rng.sample(names, rng.randint(1, 3))
        if rng.random() < 0.1:
            chosen.append(rng.choice(["h21", "gpu11", "n1", "n0001", "gpu1-ib"]))
        text = rng.choice(SEPARATORS).join(_spelled(rng, n) for n in chosen)
        level = rng.choice(["zone", "region:fail", "network_group", "nvl:fail"])
        desc = job(level, min_nodes=len(chosen), req_nodes=text)
        expected = decide(data, JobRequest.from_job_desc(desc)).as_dict()
        assert f.decide(lua_data, desc) == expected, (text, expected)
        name = level.split(":")[0]
        groups = {where[n][name] if n in where else "?" for n in chosen}
        if expected["action"] == "amend":
            assert len(groups) == 1 and None not in groups and "?" not in groups, (text, expected)
            outcomes["one group"] = outcomes.get("one group", 0) + 1
        else:
            assert expected["action"] == "reject" and (len(groups) > 1 or groups & {None, "?"}), (
                text,
                expected,
            )
            outcomes[str(expected["record"]).split("; ")[-1]] = (
                outcomes.get(str(expected["record"]).split("; ")[-1], 0) + 1
            )
    assert len(outcomes) >= 8 and min(outcomes.values()) > 5, outcomes


COUNT_HOOK = r"""
local place_named, data, text, li = ...
local count = 0
debug.sethook(function() count = count + 1 end, "", 1)
local groups, homeless, problem = place_named(data, text, li)
debug.sethook()
return count, problem, #groups
"""


def test_a_node_list_costs_what_its_names_cost_never_what_its_ranges_say(tmp_path: Path) -> None:
    """A list is counted before it is expanded: a range of 10^15 names, more names than the cluster has, or
    ten thousand bracket products are refused after the count (a few thousand Lua instructions); a list of
    the cluster's own nodes is one look-up a name (at most MAX_VISITS = 256 of them)."""
    lines = ["nodes:"] + [
        f"  - {{name: 'c{z}n[{r * 50:05d}-{r * 50 + 49:05d}]', region: r, zone: z{z}, "
        f"network_group: g{z}-{r}}}"
        for z in range(2)
        for r in range(120)
    ]
    inv = merge_doc("\n".join(lines) + "\n")
    path = tmp_path / "data.lua"
    path.write_text(render_all(inv, (22, 5))["slurm_topo_data.lua"])
    f = LuaFilter()
    lua_data = f.load_data(path)
    counted = f.lua.execute("return function(...) " + COUNT_HOOK + " end")
    place_named = f.lua.eval('require("slurm_topo_filter.nodes").place_named')
    hostile = {
        "c0n[1-999999999999999]": "many",
        "c0n[00000-05999],c0n[00000-05999]": "many",  # 12 000 names > MAX_VISITS
        "c0n[1-9][0-9][0-9][0-9][0-9][0-9]": "many",
        ",".join(["c0n[1-9][1-9][1-9][1-9]"] * 150): "many",
        "c0n0000[" + ",".join(["1"] * 2000) + "]": "many",  # 2 000 names of one node: counted, refused
        "c0n0000[" + ",".join(["1"] * 250) + "]": None,  # 250 names, one node: read, looked up
        "x" * 4097: "long",
    }
    for text, problem in hostile.items():
        cost, got, _ = counted(place_named, lua_data, text, 2)
        assert got == problem, (text[:60], got)
        assert cost < (400_000 if problem is None else 150_000), (text[:60], cost)  # a text of 4 KiB at most
    cost, got, groups = counted(place_named, lua_data, "c0n[00000-00255]", 2)  # 256 nodes of one zone
    assert (got, groups) == (None, 1) and cost < 40_000, cost
    print(f"\n256 named nodes of one zone: {cost} Lua instructions")
    cost, got, groups = counted(place_named, lua_data, "c0n[00000-00199] c1n00000", 2)
    assert (got, groups) == (None, 2), got


def merge_doc(doc: str) -> Any:
    from slurm_topo import merge, parse_inventory

    return merge([parse_inventory(doc)])


def test_the_features_slurm_topo_makes_are_one_list_the_data_carries(data_file: Path) -> None:
    """The prefixes of the features the generator owns (region_, zone_, ng_, leaf_, nvl_: model
    LEVEL_FEATURE_PREFIXES) reach the filter in the data file; the filter has no list of its own, and a
    constraint naming one keeps a required level (``-C 'nvl_a|nvl_c'`` was 'unknown, not applied')."""
    from slurm_topo.core.model import LEVEL_FEATURE_PREFIXES
    from slurm_topo.policy.vocab import LOCATION_PREFIXES

    assert LOCATION_PREFIXES is LEVEL_FEATURE_PREFIXES and "nvl_" in LEVEL_FEATURE_PREFIXES
    f = LuaFilter(data_file)
    lua_data = f.load_data(data_file)
    assert tuple(lua_data.owned[i] for i in range(1, len(lua_data.owned) + 1)) == LEVEL_FEATURE_PREFIXES
    for path in (JOB_SUBMIT / "slurm_topo_filter").glob("*.lua"):
        text = path.read_text()
        assert not any(f'"{p}"' in text for p in LEVEL_FEATURE_PREFIXES), path.name
    rc, desc = f.submit(job("zone", min_nodes=4, features="nvl_nvl-a|nvl_nvl-c"))
    assert rc == 0 and str(desc["features"]).startswith("(nvl_nvl-a|nvl_nvl-c)&[zone_"), desc["features"]
    assert not [m for m in f.messages() if "not applied" in m or "unknown" in m]
