"""Fuzzing the real job_submit Lua (Lua 5.1 via lupa) with hostile job_desc tables, job updates and data
files.

Seeded and bounded: the job_desc fuzzer runs 100 000 submissions and 20 000 updates in about half a minute on
this project's CI machine kind (two vCPUs); every call runs under an instruction budget, so a hang is a
failure, not a stuck test. A larger run: ``SLURM_TOPO_FUZZ_JOBS=1000000 pytest tests/test_fuzz_job_desc.py``.
"""

from __future__ import annotations

import os
import random
import time
import zlib
from pathlib import Path

import pytest
from luafilter import LuaFilter
from policy_cases import PARTITIONS, inventory, job

from slurm_topo import render_all
from slurm_topo.policy import MAX_CONSTRAINT, MAX_FIELD
from slurm_topo.render.filter_data import checksum

JOBS = int(os.environ.get("SLURM_TOPO_FUZZ_JOBS", "100000"))
SEED = int(os.environ.get("SLURM_TOPO_FUZZ_SEED", "1234"))

# Every call gets at most BUDGET Lua VM instructions (a debug count hook raises past it): a normal submission
# takes a few thousand, the hostile sizes below are capped before they are scanned.
FUZZ_DRIVER = r"""
local M, data, n, seed, budget = ...
math.randomseed(seed)
local big_or = string.rep("feat|", 25000) .. "x"
local many_parts = string.rep("p,", 20000) .. "gpu"
local pools = {
  features = { nil, "", "ib", "a&b", "a|b", "[zone_us-east-1a|zone_us-west-2a]", "(a|b)&c", "x*2", "[", "]",
               "&&", "a b", string.rep("f", 3000), "zone_us-east-1a", "ng_us-east-1a.rack-a1&ib", "\0\1\2",
               "[|]", big_or, string.rep("a&", 511) .. "b", "ib,torch-2.4" },
  locality = { "prefer", "zone", "zone:fail", "region:wait", "network_group", "any", "bogus", "", ":",
               "zone:x",
               string.rep("z", 500), "zone\n", "\255\254", "zone:", string.rep("zone:fail", 1000) },
  tres = { nil, "", "gres:gpu:2", "gres/gpu:h100:8", "gres:gpu", "gres/gpu:", "gres:gpu:x:y:z",
           "gres:gpu:99999999999", "gres:nic:1,gres:gpu:a100:4", "cpu=4", "gres/gpu:-1",
           string.rep("gres:gpu:1,", 200), string.rep("gres:nic:1,", 5000) },
  num = { nil, 0, 1, 2, 3, 7, 13, 65534, 4294967294, 4294967295, -1, 0/0, 1/0, -1/0, 2.5, 1e300 },
  str = { nil, "", "x", "n[01-03]", string.rep("y", 2000), string.rep("n1,", 30000) },
  part = { nil, "", "gpu", "east", "cpu", "strict", "gpu,east", ",", "nowhere", "main", string.rep("p,", 300),
           many_parts, "gpu,gpu,gpu" },
  comment = { nil, "", "locality=zone", "locality=zone:", "locality=any", "locality-regions=us-east x",
              string.rep("w ", 3000) .. "locality=zone", "locality=" .. string.rep("q", 10000) },
}
local function pick(pool) return pool[math.random(1, #pool + 1)] end
local function over_budget() error("instruction budget exceeded (a hang)") end
local function env_table()
  local env, k = {}, 0
  if math.random() < 0.7 then
    env[k] = "_SLURM_SPANK_OPTION_locality_locality=" .. (pick(pools.locality) or ""); k = k + 1
  end
  if math.random() < 0.2 then
    env[k] = "_SLURM_SPANK_OPTION_locality_locality_regions=" .. (pick(pools.str) or "us-east"); k = k + 1
  end
  if math.random() < 0.05 then env[k] = string.rep("=", 100000); k = k + 1 end
  if math.random() < 0.1 then env[k] = 42 end
  return env
end
local function job_desc()
  local comment = pick(pools.comment)
  if math.random() < 0.3 then comment = "locality=" .. (pick(pools.locality) or "") end
  return {
    spank_job_env = (math.random() < 0.9) and env_table() or "not a table",
    features = pick(pools.features), prefer = pick(pools.features), partition = pick(pools.part),
    min_nodes = pick(pools.num), num_tasks = pick(pools.num), contiguous = pick(pools.num),
    tres_per_job = pick(pools.tres), tres_per_node = pick(pools.tres), tres_per_task = pick(pools.tres),
    req_nodes = pick(pools.str), exc_nodes = pick(pools.str), reservation = pick(pools.str),
    comment = comment, het_job_offset = pick(pools.num), priority = pick(pools.num),
    environment = (math.random() < 0.1) and { ["SLURM_SPANK__SLURM_SPANK_OPTION_locality_locality"] = "zone" }
      or nil,
    admin_comment = (math.random() < 0.3) and "slurm-topo: zone:wait: held; x" or pick(pools.str),
    script = (math.random() < 0.7) and "#!/bin/sh\n" or nil,
  }
end
local errors, first, submits, updates = 0, nil, 0, 0
local function check(ok, rc, what)
  if not ok or type(rc) ~= "number" then
    errors = errors + 1
    first = first or (what .. ": " .. tostring(rc))
  end
end
for i = 1, n do
  local jd = job_desc()
  -- submit runs request + decide under its own pcall: an error or a hang there is logged (asserted below)
  debug.sethook(over_budget, "", budget)
  local ok, err = pcall(M.submit, jd, {}, 0)
  debug.sethook()
  check(ok, err, "submit")
  submits = submits + 1
  if i % 5 == 0 then
    local rec, upd = job_desc(), job_desc()
    if math.random() < 0.5 then rec.priority = 0 end
    for _, k in ipairs({ "spank_job_env", "script", "environment", "admin_comment" }) do
      if math.random() < 0.7 then upd[k] = nil end
    end
    debug.sethook(over_budget, "", budget)
    ok, err = pcall(M.modify, upd, (math.random() < 0.95) and rec or nil, {}, math.random(0, 1) * 1000)
    debug.sethook()
    check(ok, err, "modify")
    updates = updates + 1
  end
end
return errors, first, submits, updates
"""


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "slurm_topo_data.lua"
    path.write_text(render_all(inventory(), (22, 5), PARTITIONS)["slurm_topo_data.lua"])
    return path


def test_fuzz_100k_job_descs_no_error_escapes(data_file: Path) -> None:
    """100 000 random job_desc tables (nil fields, NO_VAL and NO_VAL16, NaN, hostile sizes: a 125 kB OR
    constraint, a 20 000-entry partition list, 100 kB SPANK entries) and 20 000 updates, each under an
    instruction budget: no error escapes, no call hangs, no internal error is logged, and submit and modify
    always return a Slurm code."""
    f = LuaFilter(data_file)
    driver = f.lua.execute("return function(...) " + FUZZ_DRIVER + " end")
    t0 = time.monotonic()
    errors, first, submits, updates = driver(f.mod, f.load_data(data_file), JOBS, SEED, 2_000_000)
    took = time.monotonic() - t0
    assert errors == 0, first
    assert f.messages("errors") == [], "no internal error was logged"
    assert submits == JOBS >= 100_000 and updates == JOBS // 5
    print(f"\nfuzz: {submits} submissions + {updates} updates in {took:.1f} s")


COST_DRIVER = r"""
-- The work of one request, counted (deterministic, unlike CPU time on a shared machine): Lua VM instructions
-- (a count hook on every instruction) and the bytes handed to the string library (its C functions are one
-- instruction each, so a scan of a long field would show only here).
local M, jd = ...
local instructions, bytes = 0, 0
local wrapped = {}
for _, name in ipairs({ "find", "match", "gmatch", "gsub", "sub", "byte", "len", "lower", "upper", "rep",
                        "format" }) do
  local f = string[name]
  wrapped[name] = f
  string[name] = function(s, ...)
    if type(s) == "string" then bytes = bytes + #s end
    return f(s, ...)
  end
end
local concat = table.concat
table.concat = function(t, ...)
  for _, v in ipairs(t) do if type(v) == "string" then bytes = bytes + #v end end
  return concat(t, ...)
end
debug.sethook(function() instructions = instructions + 1 end, "", 1)
local ok, err = pcall(function() return M.decide(M.data, M.request(jd)) end)
debug.sethook()
for name, f in pairs(wrapped) do string[name] = f end
table.concat = concat
assert(ok, err)
return instructions, bytes
"""


@pytest.mark.parametrize(
    "hostile",
    [
        {"features": "|".join(f"f{i}" for i in range(20000))},  # 125 kB matching-OR
        {"partition": ",".join(f"p{i}" for i in range(20000))},
        {"tres_per_node": ",".join("gres:nic:1" for _ in range(5000))},
        {"comment": "w " * 3000 + "locality=zone"},
        {"regions": ",".join(f"r{i}" for i in range(5000))},
    ],
    ids=["or-constraint", "partition-list", "tres-list", "comment", "regions-list"],
)
def test_hostile_sizes_cost_about_a_normal_request(data_file: Path, hostile: dict[str, str]) -> None:
    """A request with a field far beyond the filter's limits is not scanned: deciding it costs at most twice a
    normal `--locality=zone -N3` request, counted in Lua VM instructions and in bytes handed to the string
    library (deterministic counts; CPU times are measured in benchmarks/bench_filter.py), and the job passes
    unchanged with the reason in its record."""
    f = LuaFilter(data_file)
    f.mod.data = f.load_data(data_file)
    cost = f.lua.execute("return function(...) " + COST_DRIVER + " end")
    normal = cost(f.mod, f.table(job("zone", min_nodes=3)))
    fields = dict(hostile)
    regions = fields.pop("regions", None)
    desc = job("zone", min_nodes=3, **fields) if regions is None else job("zone", min_nodes=3)
    if regions is not None:
        desc["environment"] = {"SLURM_SPANK__SLURM_SPANK_OPTION_locality_locality_regions": regions}
        desc["spank_job_env"] = {}
        desc["comment"] = "locality=zone"
    big = cost(f.mod, f.table(desc))
    assert normal[0] > 100 and normal[1] > 0, normal  # the counters count
    assert big[0] <= 2 * normal[0], f"hostile {big[0]} Lua instructions vs normal {normal[0]}"
    assert big[1] <= 2 * normal[1], f"hostile {big[1]} bytes through the string library vs normal {normal[1]}"
    d = f.decide(f.mod.data, desc)
    if "comment" in hostile:  # a comment longer than the filter reads is not read: its locality is not seen
        desc = job(None, via="comment", min_nodes=3, comment=hostile["comment"])
        assert f.decide(f.mod.data, desc)["record"].startswith("slurm-topo: prefer "), d
    else:
        assert d["action"] == "unchanged" and "request too large" in d["record"], d
    assert max(len(v.encode()) for v in hostile.values()) > max(MAX_FIELD, MAX_CONSTRAINT)


def _corruptions(body: bytes, rng: random.Random, n: int) -> list[tuple[str, bytes]]:
    """n content-changing corruptions of ``body``: byte flips, deletions, insertions, swaps, duplicated and
    dropped chunks, a truncation."""
    out: list[tuple[str, bytes]] = []
    while len(out) < n:
        i = rng.randrange(len(body))
        j = min(len(body), i + rng.randint(1, 64))
        kind = rng.choice(["flip", "delete", "insert", "swap", "duplicate", "drop", "truncate", "case"])
        if kind == "flip":
            new = body[:i] + bytes([body[i] ^ (1 << rng.randrange(8))]) + body[i + 1 :]
        elif kind == "delete":
            new = body[:i] + body[i + 1 :]
        elif kind == "insert":
            new = body[:i] + bytes([rng.randrange(32, 127)]) + body[i:]
        elif kind == "swap" and j > i + 1:
            new = body[:i] + body[j - 1 : j] + body[i + 1 : j - 1] + body[i : i + 1] + body[j:]
        elif kind == "duplicate":
            new = body[:j] + body[i:j] + body[j:]
        elif kind == "drop":
            new = body[:i] + body[j:]
        elif kind == "truncate":
            new = body[:i]
        else:
            new = body[:i] + body[i:j].swapcase() + body[j:]
        if new != body:
            out.append((kind, new))
    return out


def test_every_content_change_of_the_data_file_fails_open_once(tmp_path: Path, data_file: Path) -> None:
    """600 seeded content-changing corruptions of the data file (after its two header lines): none is loaded.
    Each fails open — the job passes unchanged — with one `fails its checksum` error logged."""
    text = data_file.read_bytes()
    head_end = text.index(b"\n", text.index(b"\n") + 1) + 1
    head, body = text[:head_end], text[head_end:]
    path = tmp_path / "slurm_topo_data.lua"
    for n, (kind, new) in enumerate(_corruptions(body, random.Random(SEED), 600)):
        path.write_bytes(head + new)
        f = LuaFilter(path)
        rc, desc = f.submit(job("zone:fail", min_nodes=3))
        assert rc == 0 and desc["features"] is None, f"corruption {n} ({kind}) was loaded"
        errors = f.messages("errors")
        assert len(errors) == 1 and "fails its checksum" in errors[0], (n, kind, errors)


def test_python_and_lua_compute_the_same_checksum(data_file: Path) -> None:
    """The generator's checksum line is the Lua filter's Adler-32 of the bytes after it (zlib's adler32)."""
    text = data_file.read_bytes()
    lines = text.split(b"\n", 2)
    assert lines[1].decode() == f"-- slurm-topo-checksum {checksum(lines[2].decode())}"
    f = LuaFilter()
    lua_sum = f.mod.adler32(text, len(lines[0]) + len(lines[1]) + 3)
    assert lua_sum == f"{zlib.adler32(lines[2]):08x}"
    for size in (0, 1, 63, 64, 65, 1000):
        blob = bytes(random.Random(size).randrange(256) for _ in range(size))
        assert f.mod.adler32(blob, 1) == f"{zlib.adler32(blob):08x}"
