--[[
slurm_topo_filter/data.lua - the data file (slurm_topo_data.lua, written by slurm_topo/render/filter_data.py):
loaded lazily inside the submit call, never at the script's top level; its first line (the fingerprint) looked
at again every `recheck` seconds; read whole, checked against its Adler-32 checksum and format, parsed by Lua
with no globals, and its columns made into the tables the decisions read (prepare). Anything wrong fails open:
the job passes unchanged and the reason is logged once per data fingerprint (log_once).
]]

local V = require("slurm_topo_filter.vocab")
local S = require("slurm_topo_filter.scan")
local label_of = S.label_of

local DATA_FORMAT = V.DATA_FORMAT

local M = {}

local config = { data = nil, recheck = V.RECHECK_SECONDS }
local state = { data = nil, fingerprint = nil, why = nil, checked = -math.huge, logged = {} }

function M.configure(opts)
  -- opts.data: the data file's path; opts.recheck: seconds between looks at its first line
  for k, v in pairs(opts or {}) do config[k] = v end
  state.data, state.fingerprint, state.checked = nil, nil, -math.huge
end

function M.fingerprint()
  -- the loaded data's fingerprint (nil before a load, or after a failed one)
  return state.fingerprint
end

function M.log_once(key, fmt, ...)
  -- slurm.log_error, once per key (keys name the data's fingerprint where the reason depends on it)
  if state.logged[key] then return end
  state.logged[key] = true
  if slurm and slurm.log_error then slurm.log_error(fmt, ...) end
end
local log_error_once = M.log_once

local function first_line(path)
  local f = io.open(path, "r")
  if f == nil then return nil end
  local line = f:read("*l")
  f:close()
  return line
end

function M.adler32(s, from)
  -- Adler-32 of s from byte `from` on (zlib's, as slurm_topo/render/filter_data.py writes it). Lua 5.1 has no bit
  -- operations: 64 bytes per string.byte call, sums only, the modulo once per 64 bytes (every value stays exact)
  local a, b, n, i = 1, 0, #s, from
  local byte = string.byte
  while i + 63 <= n do
    local c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23,
      c24, c25, c26, c27, c28, c29, c30, c31, c32, c33, c34, c35, c36, c37, c38, c39, c40, c41, c42, c43, c44, c45,
      c46, c47, c48, c49, c50, c51, c52, c53, c54, c55, c56, c57, c58, c59, c60, c61, c62, c63,
      c64 = byte(s, i, i + 63)
    a = a + c1; b = b + a; a = a + c2; b = b + a; a = a + c3; b = b + a; a = a + c4; b = b + a;
    a = a + c5; b = b + a; a = a + c6; b = b + a; a = a + c7; b = b + a; a = a + c8; b = b + a;
    a = a + c9; b = b + a; a = a + c10; b = b + a; a = a + c11; b = b + a; a = a + c12; b = b + a;
    a = a + c13; b = b + a; a = a + c14; b = b + a; a = a + c15; b = b + a; a = a + c16; b = b + a;
    a = a + c17; b = b + a; a = a + c18; b = b + a; a = a + c19; b = b + a; a = a + c20; b = b + a;
    a = a + c21; b = b + a; a = a + c22; b = b + a; a = a + c23; b = b + a; a = a + c24; b = b + a;
    a = a + c25; b = b + a; a = a + c26; b = b + a; a = a + c27; b = b + a; a = a + c28; b = b + a;
    a = a + c29; b = b + a; a = a + c30; b = b + a; a = a + c31; b = b + a; a = a + c32; b = b + a;
    a = a + c33; b = b + a; a = a + c34; b = b + a; a = a + c35; b = b + a; a = a + c36; b = b + a;
    a = a + c37; b = b + a; a = a + c38; b = b + a; a = a + c39; b = b + a; a = a + c40; b = b + a;
    a = a + c41; b = b + a; a = a + c42; b = b + a; a = a + c43; b = b + a; a = a + c44; b = b + a;
    a = a + c45; b = b + a; a = a + c46; b = b + a; a = a + c47; b = b + a; a = a + c48; b = b + a;
    a = a + c49; b = b + a; a = a + c50; b = b + a; a = a + c51; b = b + a; a = a + c52; b = b + a;
    a = a + c53; b = b + a; a = a + c54; b = b + a; a = a + c55; b = b + a; a = a + c56; b = b + a;
    a = a + c57; b = b + a; a = a + c58; b = b + a; a = a + c59; b = b + a; a = a + c60; b = b + a;
    a = a + c61; b = b + a; a = a + c62; b = b + a; a = a + c63; b = b + a; a = a + c64; b = b + a;
    a = a % 65521
    b = b % 65521
    i = i + 64
  end
  while i <= n do
    a = (a + byte(s, i)) % 65521
    b = (b + a) % 65521
    i = i + 1
  end
  return string.format("%08x", b * 65536 + a)
end

local function read_all(path)
  local f = io.open(path, "rb")
  if f == nil then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

-- The data file writes the group lists by column, with what repeats written once and referred to by number
-- (shapes, locations, features): its load runs inside slurmctld and costs about its bytes. M.prepare decodes
-- them once per load into the tables the decisions read, with named fields (ARCHITECTURE.md "The work bound"):
--   group     {feature, rank, nodes, gpus, most, counts = {class, nodes, ...} (its shape's, shared), loc (its
--             location, shared), label (where the data writes one; else derived on first display), chars (the
--             feature's length and a separator: what it costs a bracket)}
--   location  {region, zone, region_feature, zone_feature, zone_parent, region_parent, family}
--   class     {features = {[name] = true}, gpus, gpu_type}
--   list      the groups in the filter's order (nodes, then rank), list.index = {[feature] = group}

local LOCATION_FIELDS = { r = "region", z = "zone", rf = "region_feature", zf = "zone_feature",
                          pz = "zone_parent", pr = "region_parent", fv = "family" }

local function decode_location(u)
  local loc = {}
  for short, name in pairs(LOCATION_FIELDS) do loc[name] = u[short] end
  return loc
end

local function run_values(runs, step, count)
  -- {first, length, ...} runs of values rising by step (0: repeated) -> an array of count values
  local out, n = {}, 0
  for j = 1, #runs, 2 do
    local v = runs[j]
    for _ = 1, runs[j + 1] do
      n = n + 1
      out[n] = v
      v = v + step
    end
  end
  if n ~= count then error("data: group columns do not match") end
  return out
end

local function group_list(col, features, shapes)
  -- a list's columns (f feature indices and k ranks: runs rising by 1; s shape indices: runs of one; l labels
  -- where not derived) -> its groups in order, indexed by feature
  local count = 0
  for j = 2, #col.f, 2 do count = count + col.f[j] end
  local fs, ks, ss = run_values(col.f, 1, count), run_values(col.k, 1, count), run_values(col.s, 0, count)
  local list, index = {}, {}
  for i = 1, count do
    local s = shapes[ss[i]]
    if s == nil then error("data: group " .. i .. " has no shape") end
    local feature = features[fs[i]]
    local g = { feature = feature, rank = ks[i], nodes = s.n, gpus = s.g, most = s.m, counts = s.c, loc = s.u,
                label = col.l[i], chars = #feature + 1 }
    list[i] = g
    index[g.feature] = g
  end
  list.index = index
  return list
end

function M.prepare(data)
  -- the loaded data file's table, ready for decide (in place, once); an error here is a broken data file (load
  -- fails open)
  if data.ready then return data end
  local features, locations, shapes = data.features, data.locations, data.shapes
  for i, u in ipairs(locations) do locations[i] = decode_location(u) end
  for i, s in ipairs(shapes) do
    s.u = locations[s.u]
    if type(s.u) ~= "table" then error("data: shape " .. i .. " has no location") end
  end
  for i, cls in ipairs(data.classes) do
    data.classes[i] = { features = cls.f, gpus = cls.g, gpu_type = cls.t }
  end
  for _, levels in pairs(data.partitions) do
    for key, col in pairs(levels) do levels[key] = group_list(col, features, shapes) end
  end
  S.gpu_sets(data) -- the class sets of GPU requests without a constraint
  data.has_values = #data.families > 0
  data.default_names = { data.default_partition } -- a job that names no partition
  data.ready = true
  return data
end

local function fail_open(why, key, fmt, ...)
  log_error_once(key, fmt, ...)
  state.data, state.fingerprint, state.why = nil, nil, why
  return nil
end

function M.why()
  -- why the last load found no data (the filter then lets jobs through and tells each that asked for a
  -- locality); nil once data loaded
  return state.why
end

local function checksum_ok(text)
  -- the file's second line "-- slurm-topo-checksum adler32:SUM:LEN" against the bytes after it
  local line = string.match(text, "^([^\n]*)\n") or ""
  local sum_at = #line + 2
  local sum_line_end = string.find(text, "\n", sum_at, true)
  if not sum_line_end then return false end
  local want_sum, want_len = string.match(string.sub(text, sum_at, sum_line_end - 1),
    "^%-%- slurm%-topo%-checksum adler32:(%x%x%x%x%x%x%x%x):(%d+)$")
  return want_sum ~= nil and tonumber(want_len) == #text - sum_line_end
    and M.adler32(text, sum_line_end + 1) == want_sum
end

local function table_of(text, path, fp)
  -- the data table of a checked text: loaded without globals, its format and fingerprint checked, prepared;
  -- (nil, why, key, message) when it does not load
  local chunk, err = loadstring(text, "=" .. path)
  local ok, data = false, err
  if chunk then
    setfenv(chunk, {}) -- the data file is a table literal: it gets no globals at all
    ok, data = pcall(chunk)
  end
  if ok and type(data) == "table" and data.format ~= DATA_FORMAT then
    return nil, "format", "slurm-topo: data file %s has format %s, this filter reads %s: regenerate it with the "
      .. "matching slurm-topo; jobs pass unchanged", tostring(data.format)
  end
  if ok and type(data) == "table" and data.fingerprint == fp and type(data.partitions) == "table" then
    ok, data = pcall(M.prepare, data) -- a table whose columns do not add up is broken too
  end
  if not ok or type(data) ~= "table" or data.fingerprint ~= fp or type(data.partitions) ~= "table" then
    return nil, "broken", "slurm-topo: data file %s (fingerprint %s) does not load: %s; jobs pass unchanged",
      tostring(data)
  end
  return data
end

function M.load()
  -- the data to decide with, nil (fail open) when there is none that loads
  local now = os.time()
  if state.data ~= nil and now - state.checked < config.recheck then return state.data end
  state.checked = now
  local path = config.data
  local line = first_line(path)
  local fp = line and string.match(line, "^%-%- slurm%-topo%-data (%x+)$")
  if fp == nil then
    return fail_open("data file " .. path .. " missing or without its header line", "missing:" .. tostring(line), "slurm-topo: data file %s missing or without its header line; "
      .. "jobs pass unchanged", path)
  end
  if fp == state.fingerprint and state.data ~= nil then return state.data end
  local text = read_all(path) or ""
  line = string.match(text, "^([^\n]*)\n") or "" -- the file may have been replaced since its first line was read
  fp = string.match(line, "^%-%- slurm%-topo%-data (%x+)$") or fp
  if not checksum_ok(text) then
    return fail_open("data file " .. path .. " fails its checksum", "checksum:" .. fp, "slurm-topo: data file %s (fingerprint %s) fails its checksum or has none "
      .. "(corrupted, truncated, edited, or written by an older slurm-topo): regenerate it; jobs pass unchanged", path, fp)
  end
  local data, why, message, detail = table_of(text, path, fp)
  if data == nil then
    if why == "format" then
      return fail_open("data file " .. path .. " has another format", "format:" .. fp, message, path, detail, tostring(DATA_FORMAT))
    end
    return fail_open("data file " .. path .. " does not load", "broken:" .. fp, message, path, fp, detail)
  end
  state.data, state.fingerprint, state.why = data, fp, nil
  return data
end

return M
