--[[
slurm_topo_filter/data.lua - the data file (slurm_topo_data.lua, written by slurm_topo/render/filter_data.py):
loaded lazily inside the submit call, never at the script's top level; its first line (the fingerprint) looked
at again every `recheck` seconds; read whole, checked against its Adler-32 checksum and format, parsed by Lua
with no globals, and its columns made into the tables the decisions read (prepare). Anything wrong fails open:
the job passes unchanged and the reason is logged once per data fingerprint (log_once).
]]

local V = require("slurm_topo_filter.vocab")
local S = require("slurm_topo_filter.scan")

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

-- Digit strings (filter_data.py _ints): the data's integer columns, decoded once per load. Lua's parser costs
-- about 1 300 machine instructions a number literal and 50 a byte of a string, these loops about 200 a number.
local byte = string.byte
local Z1 = V.DATA_DIGIT_ZERO -- the byte of the digit 0 ('?'); Zw: w of them as one number
local Z2 = Z1 * 64 + Z1
local Z3 = Z2 * 64 + 63
local Z4 = Z3 * 64 + 63

local function ints_each(s, i, w, out, n)
  -- the values from byte i on, one string.byte call a digit (any width, any length)
  local len = #s
  while i <= len do
    local v = 0
    for j = i, i + w - 1 do v = v * 64 + byte(s, j) - Z1 end
    n = n + 1
    out[n] = v
    i = i + w
  end
  return out
end

local function ints_tail(s, i, w, out, n)
  -- the values from byte i on, fewer than a batch: their digits from one string.byte call
  local d = { byte(s, i, -1) }
  for j = 1, #d, w do
    local v = 0
    for x = j, j + w - 1 do v = v * 64 + d[x] - Z1 end
    n = n + 1
    out[n] = v
  end
  return out
end

local PRESIZE = V.DATA_PRESIZE -- values: what string.byte and unpack may return at once

local function ints1(s, out)
  -- width 1: 32 values a string.byte call, the rest from one call (ints_tail)
  local n, i, last = 0, 2, #s - 31
  while i <= last do
    local a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22,
      a23, a24, a25, a26, a27, a28, a29, a30, a31, a32 = byte(s, i, i + 31)
    out[n + 1] = a1 - Z1; out[n + 2] = a2 - Z1; out[n + 3] = a3 - Z1; out[n + 4] = a4 - Z1; out[n + 5] = a5 - Z1
    out[n + 6] = a6 - Z1; out[n + 7] = a7 - Z1; out[n + 8] = a8 - Z1; out[n + 9] = a9 - Z1; out[n + 10] = a10 - Z1
    out[n + 11] = a11 - Z1; out[n + 12] = a12 - Z1; out[n + 13] = a13 - Z1; out[n + 14] = a14 - Z1
    out[n + 15] = a15 - Z1; out[n + 16] = a16 - Z1; out[n + 17] = a17 - Z1; out[n + 18] = a18 - Z1
    out[n + 19] = a19 - Z1; out[n + 20] = a20 - Z1; out[n + 21] = a21 - Z1; out[n + 22] = a22 - Z1
    out[n + 23] = a23 - Z1; out[n + 24] = a24 - Z1; out[n + 25] = a25 - Z1; out[n + 26] = a26 - Z1
    out[n + 27] = a27 - Z1; out[n + 28] = a28 - Z1; out[n + 29] = a29 - Z1; out[n + 30] = a30 - Z1
    out[n + 31] = a31 - Z1; out[n + 32] = a32 - Z1
    n, i = n + 32, i + 32
  end
  return ints_tail(s, i, 1, out, n)
end

local function ints2(s, out)
  -- width 2: 16 values a string.byte call, the rest from one call (ints_tail)
  local n, i, last = 0, 2, #s - 31
  while i <= last do
    local a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7, a8, b8, a9, b9, a10, b10, a11, b11, a12, b12,
      a13, b13, a14, b14, a15, b15, a16, b16 = byte(s, i, i + 31)
    out[n + 1] = a1 * 64 + b1 - Z2; out[n + 2] = a2 * 64 + b2 - Z2; out[n + 3] = a3 * 64 + b3 - Z2
    out[n + 4] = a4 * 64 + b4 - Z2; out[n + 5] = a5 * 64 + b5 - Z2; out[n + 6] = a6 * 64 + b6 - Z2
    out[n + 7] = a7 * 64 + b7 - Z2; out[n + 8] = a8 * 64 + b8 - Z2; out[n + 9] = a9 * 64 + b9 - Z2
    out[n + 10] = a10 * 64 + b10 - Z2; out[n + 11] = a11 * 64 + b11 - Z2; out[n + 12] = a12 * 64 + b12 - Z2
    out[n + 13] = a13 * 64 + b13 - Z2; out[n + 14] = a14 * 64 + b14 - Z2; out[n + 15] = a15 * 64 + b15 - Z2
    out[n + 16] = a16 * 64 + b16 - Z2
    n, i = n + 16, i + 32
  end
  return ints_tail(s, i, 2, out, n)
end

local function ints3(s, out)
  -- width 3: 16 values a string.byte call, the rest from one call (ints_tail)
  local n, i, last = 0, 2, #s - 47
  while i <= last do
    local a1, b1, c1, a2, b2, c2, a3, b3, c3, a4, b4, c4, a5, b5, c5, a6, b6, c6, a7, b7, c7, a8, b8, c8, a9,
      b9, c9, a10, b10, c10, a11, b11, c11, a12, b12, c12, a13, b13, c13, a14, b14, c14, a15, b15, c15, a16,
      b16, c16 = byte(s, i, i + 47)
    out[n + 1] = (a1 * 64 + b1) * 64 + c1 - Z3; out[n + 2] = (a2 * 64 + b2) * 64 + c2 - Z3
    out[n + 3] = (a3 * 64 + b3) * 64 + c3 - Z3; out[n + 4] = (a4 * 64 + b4) * 64 + c4 - Z3
    out[n + 5] = (a5 * 64 + b5) * 64 + c5 - Z3; out[n + 6] = (a6 * 64 + b6) * 64 + c6 - Z3
    out[n + 7] = (a7 * 64 + b7) * 64 + c7 - Z3; out[n + 8] = (a8 * 64 + b8) * 64 + c8 - Z3
    out[n + 9] = (a9 * 64 + b9) * 64 + c9 - Z3; out[n + 10] = (a10 * 64 + b10) * 64 + c10 - Z3
    out[n + 11] = (a11 * 64 + b11) * 64 + c11 - Z3; out[n + 12] = (a12 * 64 + b12) * 64 + c12 - Z3
    out[n + 13] = (a13 * 64 + b13) * 64 + c13 - Z3; out[n + 14] = (a14 * 64 + b14) * 64 + c14 - Z3
    out[n + 15] = (a15 * 64 + b15) * 64 + c15 - Z3; out[n + 16] = (a16 * 64 + b16) * 64 + c16 - Z3
    n, i = n + 16, i + 48
  end
  return ints_tail(s, i, 3, out, n)
end

local function ints4(s, out)
  -- width 4: 12 values a string.byte call, the rest from one call (ints_tail)
  local n, i, last = 0, 2, #s - 47
  while i <= last do
    local a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3, a4, b4, c4, d4, a5, b5, c5, d5, a6, b6, c6, d6, a7,
      b7, c7, d7, a8, b8, c8, d8, a9, b9, c9, d9, a10, b10, c10, d10, a11, b11, c11, d11, a12, b12, c12,
      d12 = byte(s, i, i + 47)
    out[n + 1] = ((a1 * 64 + b1) * 64 + c1) * 64 + d1 - Z4; out[n + 2] = ((a2 * 64 + b2) * 64 + c2) * 64 + d2 - Z4
    out[n + 3] = ((a3 * 64 + b3) * 64 + c3) * 64 + d3 - Z4; out[n + 4] = ((a4 * 64 + b4) * 64 + c4) * 64 + d4 - Z4
    out[n + 5] = ((a5 * 64 + b5) * 64 + c5) * 64 + d5 - Z4; out[n + 6] = ((a6 * 64 + b6) * 64 + c6) * 64 + d6 - Z4
    out[n + 7] = ((a7 * 64 + b7) * 64 + c7) * 64 + d7 - Z4; out[n + 8] = ((a8 * 64 + b8) * 64 + c8) * 64 + d8 - Z4
    out[n + 9] = ((a9 * 64 + b9) * 64 + c9) * 64 + d9 - Z4
    out[n + 10] = ((a10 * 64 + b10) * 64 + c10) * 64 + d10 - Z4
    out[n + 11] = ((a11 * 64 + b11) * 64 + c11) * 64 + d11 - Z4
    out[n + 12] = ((a12 * 64 + b12) * 64 + c12) * 64 + d12 - Z4
    n, i = n + 12, i + 48
  end
  return ints_tail(s, i, 4, out, n)
end

local INTS = { ints1, ints2, ints3, ints4 }


function M.ints(s)
  -- a digit string -> its array of integers (its first character the width, 1-5 digits a value)
  if type(s) ~= "string" or #s == 0 then error("data: a number column is not a digit string") end
  local w = byte(s, 1) - Z1
  if w < 1 or w > V.DATA_DIGIT_WIDTH or (#s - 1) % w ~= 0 then error("data: a number column has a bad width") end
  local f, n = INTS[w], (#s - 1) / w
  if f == nil then return ints_each(s, 2, w, {}, 0) end
  -- a table of its final size at once where string.byte can return that many (Lua then grows it no more)
  return f(s, n <= PRESIZE and { byte(s, 2, n + 1) } or {})
end
local ints = M.ints

-- The data file writes the group lists by column, with what repeats written once and referred to by number
-- (strings, locations, shapes) and every number column as digits: its load runs inside slurmctld and costs
-- about its bytes. M.prepare decodes them once per load into the tables the decisions read, with named fields
-- (ARCHITECTURE.md "The work bound"):
--   group     {feature, rank, nodes, gpus, most (loaded, not read: a fit needs nodes and GPUs only), counts =
--             {class, nodes, ..., id = its shape's number} (its shape's, shared), loc (its location, shared),
--             label (where the data writes one; else derived on first display)}: 8
--             fields, so Lua 5.1 gives each a hash of 8 slots (a 9th would double it: 21 000 groups, 6.7 MB)
--   location  {region, zone, region_feature, zone_feature, zone_parent, region_parent, family, in_zone,
--             in_region (the zone and region groups holding it: the parents, else the zone and region)}
--   class     {features = {[name] = true}, gpus, gpu_type}
--   list      the groups in the filter's order (nodes, then rank), list.index = {[feature] = group},
--             list.gpus_max (the most GPUs any of them has)

local function decode_locations(v, strings)
  -- 7 string numbers a location (filter_data.py _Shared.location; 0: none) -> the locations
  if #v % 7 ~= 0 then error("data: the locations do not add up") end
  local out, n = {}, 0
  for j = 1, #v, 7 do
    n = n + 1
    local loc = { region = strings[v[j]], zone = strings[v[j + 1]], region_feature = strings[v[j + 2]],
                  zone_feature = strings[v[j + 3]], zone_parent = strings[v[j + 4]],
                  region_parent = strings[v[j + 5]], family = strings[v[j + 6]] }
    loc.in_zone = loc.zone_parent or loc.zone_feature -- the groups holding it (scan.lua HOLDER)
    loc.in_region = loc.region_parent or loc.region_feature
    out[n] = loc
  end
  return out
end

local function decode_shapes(v)
  -- nodes, GPUs, most GPUs on a node, c, then c (class, nodes) pairs a shape -> the shapes
  local out, n, j, len = {}, 0, 1, #v
  while j <= len do
    local c = v[j + 3]
    if c == nil or j + 3 + 2 * c > len then error("data: shape " .. (n + 1) .. " does not add up") end
    n = n + 1
    local counts = { unpack(v, j + 4, j + 3 + 2 * c) }
    counts.id = n -- the shape's number (scan.lua shape_sums)
    out[n] = { n = v[j], g = v[j + 1], m = v[j + 2], c = counts }
    j = j + 4 + 2 * c
  end
  return out
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

local function column(runs, values, step, count)
  -- a group column: its runs or its values (filter_data.py _column), count long
  if runs ~= nil then return run_values(ints(runs), step, count) end
  local out = ints(values)
  if #out ~= count then error("data: group columns do not match") end
  return out
end

local function group_list(col, data, made)
  -- a list's columns (f feature numbers and k ranks: runs rising by 1, or fv/kv values; s shape and u location
  -- numbers: runs of one, or sv/uv values; l labels where not derived) -> its groups in order, indexed by feature
  local fs, count = nil, 0
  if col.f ~= nil then
    local runs = ints(col.f)
    for j = 2, #runs, 2 do count = count + runs[j] end
    fs = run_values(runs, 1, count)
  else
    fs = ints(col.fv)
    count = #fs
  end
  local ks, ss, us = column(col.k, col.kv, 1, count), column(col.s, col.sv, 0, count), column(col.u, col.uv, 0, count)
  local features, shapes, locations, labels, index = data.features, data.shapes, data.locations, col.l, {}
  local list = count <= PRESIZE and { unpack(fs, 1, count) } or {} -- its size at once (each entry replaced)
  local gpus_max = 0
  -- made: another partition's group of the same feature, shape, location, rank and label is the same table
  -- (groups are read only but for label_of's cache: the same label)
  for i = 1, count do
    local s, loc, feature = shapes[ss[i]], locations[us[i]], features[fs[i]]
    if s == nil or loc == nil or feature == nil then error("data: group " .. i .. " does not add up") end
    local g, rank, label = made[feature], ks[i], labels[i]
    if g == nil or g.counts ~= s.c or g.loc ~= loc or g.rank ~= rank or g.label ~= label then
      g = { feature = feature, rank = rank, nodes = s.n, gpus = s.g, most = s.m, counts = s.c, loc = loc,
            label = label } -- 8 fields (see above)
      made[feature] = g
    end
    list[i] = g
    index[feature] = g
    if s.g > gpus_max then gpus_max = s.g end
  end
  list.index, list.gpus_max = index, gpus_max -- (the most GPUs of a group: scan.lua nothing_fits)
  return list
end

local function decode_ranges(nodes)
  -- the node index's runs (filter_data.py _node_index: its keys, then one digit string of each key's run count
  -- and {first, last, place} runs) -> runs, the array of those numbers, and ranges = {[key] = where its count
  -- is in runs} (nodes.lua reads both)
  local keys, runs, ranges, at = nodes.keys, ints(nodes.runs), {}, 1
  for _, key in ipairs(keys) do
    local n = runs[at]
    if n == nil then error("data: node ranges do not add up") end
    ranges[key] = at
    at = at + 1 + 3 * n
  end
  if at ~= #runs + 1 then error("data: node ranges do not add up") end
  nodes.ranges, nodes.runs, nodes.keys = ranges, runs, nil
end

function M.prepare(data)
  -- the loaded data file's table, ready for decide (in place, once); an error here is a broken data file (load
  -- fails open)
  if data.ready then return data end
  data.locations = decode_locations(ints(data.locations), data.features) -- digits -> tables (read by groups)
  data.shapes = decode_shapes(ints(data.shapes))
  for i, cls in ipairs(data.classes) do
    data.classes[i] = { features = cls.f, gpus = cls.g, gpu_type = cls.t }
  end
  local made = {} -- per feature, the last group made (group_list)
  for _, levels in pairs(data.partitions) do
    for key, col in pairs(levels) do levels[key] = group_list(col, data, made) end
  end
  if type(data.nodes) == "table" and data.nodes.keys ~= nil then
    decode_ranges(data.nodes)
    data.nodes.areas = ints(data.nodes.areas) -- (zone, region, nvl) string numbers a row (nodes.lua place_group)
  end
  S.gpu_sets(data) -- the class sets of GPU requests without a constraint
  S.set_sums(data) -- their sums per group shape
  S.feature_classes(data) -- each feature's classes: a constraint's set is made from its names' lists
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
