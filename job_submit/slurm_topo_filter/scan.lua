--[[
slurm_topo_filter/scan.lua - a request's view of the data's groups (policy/decide.py _Scan, _groups,
_family_values, _cascade): which node classes count for it, how many of a group's nodes and GPUs it may use,
whether a group can ever hold it, and the per-level lists of groups that can, cut to Slurm's limits.

A scan is one table of plain fields and the functions below take it as their first argument: no closures per
request (this runs for every submission, under slurmctld's locks, and every allocation costs more once the data
table is resident). Nothing here remembers anything: slurm_topo_filter/memo.lua wraps `candidates` and
`largest` for the lists that repeat.
]]

local V = require("slurm_topo_filter.vocab")
local class_ok = require("slurm_topo_filter.constraint").class_ok

local MAX_ALTERNATIVES = V.MAX_ALTERNATIVES

local M = {}

function M.needs(req)
  -- (nodes, GPUs in all, GPUs a node must have, GPU type) of a request
  local nodes = req.min_nodes or 1
  local gpu = req.gpu
  if gpu == nil then return nodes, 0, 0, nil end
  if gpu.scope == "node" then return nodes, gpu.count * nodes, gpu.count, gpu.gpu_type end
  if gpu.scope == "task" then return nodes, gpu.count * (req.num_tasks or nodes), 1, gpu.gpu_type end
  return nodes, gpu.count, 1, gpu.gpu_type
end
local needs = M.needs

function M.new_scan(data, req, c, is_counted, area, wanted)
  local sc = { data = data, area = area, wanted = wanted, classes = data.classes }
  sc.nodes, sc.total_gpus, sc.per_node, sc.gpu_type = needs(req)
  sc.check = req.unchecked == nil and is_counted
  if c.kind == "none" and sc.per_node == 0 then -- the common case: every class counts (data.every, shared)
    local every = data.every
    sc.ok, sc.all_ok = every.ok, true
    sc.classes_key = every.flags .. tostring(sc.check)
    sc.signature = sc.classes_key .. ":" .. sc.nodes .. ":" .. sc.total_gpus .. ":"
    return sc
  end
  local ok, all_ok, flags = {}, true, {}
  for i, cls in ipairs(data.classes) do
    local good = class_ok(cls, c, is_counted)
    if good and sc.per_node > 0 then good = cls.g >= sc.per_node and (sc.gpu_type == nil or cls.t == sc.gpu_type) end
    ok[i] = good
    all_ok = all_ok and good
    flags[i] = good and "1" or "0"
  end
  sc.ok, sc.all_ok = ok, all_ok
  sc.classes_key = table.concat(flags) .. ":" .. tostring(sc.check) -- which nodes count, not how many are asked
  sc.signature = sc.classes_key .. ":" .. sc.nodes .. ":" .. sc.total_gpus .. ":"
  return sc
end

local function parent_of(g, up)
  -- the zone ("z") or region ("r") group holding g: pz/pr where the data gives them (family buckets), else the
  -- ancestor feature (g.u: the group's location, shared by the groups of one place)
  local u = g.u
  if up == "z" then return u.pz or u.zf end
  return u.pr or u.rf
end

function M.label_of(g)
  -- the group's label: the data writes it only where it is not the one its feature spells (ng_a.r1 -> a/r1:
  -- after the first "_", dots as slashes; filter_data.py _derived_label), else derived here once
  local l = g.l
  if l == nil then
    l = string.gsub(string.match(g.f, "^[^_]*_(.*)$"), "%.", "/")
    g.l = l
  end
  return l
end

function M.allowed(sc, g)
  local area = sc.area
  if area == nil then return true end
  local u = g.u
  if area[g.f] or (u.rf and area[u.rf]) or (u.zf and area[u.zf]) then return true end
  return u.z == nil and u.r ~= nil and sc.wanted[u.r] == true
end

function M.eligible(sc, g)
  if sc.all_ok then return g.n, g.g, g.m end -- every node counts: the group's own totals
  local n, gp, most = 0, 0, 0
  local counts, ok, classes = g.c, sc.ok, sc.classes
  for i = 1, #counts, 2 do
    local idx = counts[i]
    if ok[idx] then
      local count, cg = counts[i + 1], classes[idx].g
      n = n + count
      gp = gp + count * cg
      if cg > most then most = cg end
    end
  end
  return n, gp, most
end

local label_of, scan_allowed, scan_eligible = M.label_of, M.allowed, M.eligible

local function scan_fits(sc, g)
  local n, gp, most = scan_eligible(sc, g)
  if not sc.check then return true, n end
  local need, total = sc.nodes, sc.total_gpus
  if total > 0 then
    if most == 0 then return false, n end
    need = math.max(need, math.ceil(total / most))
  end
  return n >= need and gp >= total, n
end

-- The compiled cut (every node counts, no GPUs asked, no area, no user bracket, one partition): every group from
-- `start` on fits, so the bracket is groups[start..e], e the last within 64 alternatives and `budget` characters
-- (the list's running bracket length L, summed by M.prepare; binary search).
local function compiled_cut(groups, start, budget)
  local n, L = #groups, groups.L
  if start > n then return {}, false end
  local before = 0
  if start > 1 then before = L[start - 1] end
  local lo, hi = start, math.min(n, start + MAX_ALTERNATIVES - 1)
  if 1 + L[lo] - before > budget then return {}, true end
  while lo < hi do -- the last e with 2 + (L[e] - L[start-1] - 1) <= budget
    local mid = math.floor((lo + hi + 1) / 2)
    if 1 + L[mid] - before <= budget then lo = mid else hi = mid - 1 end
  end
  local kept = {}
  for i = start, lo do
    local g = groups[i]
    kept[i - start + 1] = g
    kept[start - i - 1] = g.n
  end
  return kept, lo < n
end

-- Whether a group of this size (data.lua: the first shape of its n, g, m and class counts) can hold the job: its
-- eligible nodes, or false; once per size and scan (`fit`: the scan's table of them)
local function size_fits(sc, fit, size)
  local f = fit[size]
  if f == nil then
    local good, n = scan_fits(sc, size)
    f = good and n
    fit[size] = f
  end
  return f
end

local function first_at_or_after(positions, start)
  local lo, hi = 1, #positions + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if positions[mid] < start then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- The positions from `start` on of the groups whose size can hold the job, ascending, as an iterator over
-- (position, eligible nodes): where those groups are sparse (under a quarter of the list), a merge of the
-- fitting sizes' position lists (data.lua at), so groups of other sizes are never visited; else the list in
-- order, each group looked up by its size.
local function fitting(sc, groups, start)
  local fit, lists, next_i, nodes, many = {}, {}, {}, {}, 0
  for _, size in ipairs(groups.sizes) do
    local f = size_fits(sc, fit, size)
    if f then
      local positions = groups.at[size]
      local i = first_at_or_after(positions, start)
      if i <= #positions then
        lists[#lists + 1], next_i[#lists + 1], nodes[#lists + 1] = positions, i, f
        many = many + #positions - i + 1
      end
    end
  end
  if 4 * many >= #groups - start + 1 then
    local i = start - 1
    return function()
      while true do
        i = i + 1
        local g = groups[i]
        if g == nil then return nil end
        local f = fit[g.z]
        if f then return i, f end
      end
    end
  end
  return function()
    local best, pos = 0, math.huge
    for j = 1, #lists do
      local p = lists[j][next_i[j]]
      if p ~= nil and p < pos then best, pos = j, p end
    end
    if best == 0 then return nil end
    next_i[best] = next_i[best] + 1
    return pos, nodes[best]
  end
end

-- Up to 64 fitting groups within `budget` characters of bracket, in the data's order: {kept, cut short}; the
-- eligible nodes of kept[i] at kept[-i] (one table per list, not one per group).
-- Groups are sorted by size, so the scan starts at the first group as large as the job (binary search);
-- `descending` (the family values, largest first): from the first. `inside` (a set of zone or region group
-- features, `up` = "z" or "r"): only groups inside one of them. Only the groups of sizes that can hold the job are visited (`fitting`), so a job no group fits costs a look
-- per size.
function M.candidates(sc, groups, budget, only, inside, up, descending)
  local start = 1
  if sc.check and not descending then
    local lo, hi, nodes = 1, #groups + 1, sc.nodes
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if groups[mid].n < nodes then lo = mid + 1 else hi = mid end
    end
    start = lo
  end
  if only == nil and inside == nil and sc.area == nil and sc.all_ok and sc.total_gpus == 0 and groups.big ~= nil then
    return compiled_cut(groups, start, budget)
  end
  local kept, count, length = {}, 0, 2
  local function take(g, n)
    -- false once the list is full (cut short)
    if (only == nil or only[g.f]) and scan_allowed(sc, g) and (inside == nil or inside[parent_of(g, up)]) then
      local extra = #g.f
      if count > 0 then extra = extra + 1 end
      if count == MAX_ALTERNATIVES or length + extra > budget then return false end
      count = count + 1
      kept[count] = g
      kept[-count] = n -- eligible nodes, beside the group (one table per scan, not one per group)
      length = length + extra
    end
    return true
  end
  if sc.check and groups.at ~= nil then
    for i, n in fitting(sc, groups, start) do
      if not take(groups[i], n) then return kept, true end
    end
    return kept, false
  end
  for i = start, #groups do -- a merged list (several partitions), or nothing checked
    local g = groups[i]
    local good, n = scan_fits(sc, g)
    if good and not take(g, n) then return kept, true end
  end
  return kept, false
end

-- One bracket from per-level lists given finest first ({kept, cut} each): within Slurm's limits (64
-- alternatives, `budget` characters of bracket) the coarsest lists are kept whole first, and what does not fit
-- is dropped from the tail of the finest ones (regions and family values keep the job off the plain tree).
-- The first `extra` lists (zone unions) come last in that order: they take only the room the levels leave;
-- `emit` (list indices) is the order of the lists in the bracket, else as given.
function M.cascade(lists, budget, extra, emit)
  extra = extra or 0
  local alternatives, room, cut, counts = MAX_ALTERNATIVES, budget - 1, false, {}
  local order = {}
  for j = #lists, extra + 1, -1 do order[#order + 1] = j end
  for j = 1, extra do order[#order + 1] = j end
  for _, j in ipairs(order) do
    local kept, n = lists[j][1], 0
    for i = 1, #kept do
      local cost = #kept[i].f + 1
      if n == alternatives or cost > room then break end
      room = room - cost
      n = n + 1
    end
    alternatives = alternatives - n
    cut = cut or lists[j][2] or n < #kept
    counts[j] = n
  end
  local out, k = {}, 0
  if emit == nil then
    emit = {}
    for j = 1, #lists do emit[j] = j end
  end
  for _, j in ipairs(emit) do
    local kept = lists[j][1]
    for i = 1, counts[j] do
      k = k + 1
      out[k] = kept[i]
      out[-k] = kept[-i]
    end
  end
  return out, cut
end

-- The largest group for this request (to name it when none can hold the job): compiled for the whole level
-- when every node counts; else the first group, in the data's order, with the most eligible nodes (then GPUs):
-- the largest of the list's sizes, then the first position of those that reach it; a whole-level scan with a
-- user bracket, an area, or a merged list.
function M.largest(sc, groups, only)
  if only == nil and sc.area == nil and sc.all_ok and groups.big ~= nil then
    local g = groups[groups.big]
    if g == nil then return nil end
    return g, g.n, g.g
  end
  if only == nil and sc.area == nil and groups.at ~= nil then
    local bn, bg, pos = -1, -1, nil
    for _, size in ipairs(groups.sizes) do
      local n, gp = scan_eligible(sc, size)
      local first = groups.at[size][1]
      if n > bn or (n == bn and gp > bg) or (n == bn and gp == bg and first < pos) then bn, bg, pos = n, gp, first end
    end
    if pos == nil then return nil end
    return groups[pos], bn, bg
  end
  local best, bn, bg
  for _, g in ipairs(groups) do
    if (only == nil or only[g.f]) and scan_allowed(sc, g) then
      local n, gp = scan_eligible(sc, g)
      if best == nil or n > bn or (n == bn and gp > bg) then best, bn, bg = g, n, gp end
    end
  end
  return best, bn, bg
end

M.NO_GROUPS = {} -- shared, read-only
local NO_GROUPS = M.NO_GROUPS

function M.level_groups(data, partitions, level)
  -- one partition: the compiled list; several: their groups merged (no compiled cut: `big` is absent)
  -- nvl: only where the fleet has NVLink domains
  if #partitions == 1 then return data.partitions[partitions[1]][level] or NO_GROUPS end
  local merged, list = {}, {}
  for _, p in ipairs(partitions) do
    for _, g in ipairs(data.partitions[p][level] or NO_GROUPS) do
      local have = merged[g.f]
      if have == nil or g.n > have.n then merged[g.f] = g end
    end
  end
  for _, g in pairs(merged) do list[#list + 1] = g end
  table.sort(list, function(a, b)
    if a.n ~= b.n then return a.n < b.n end
    return a.k < b.k
  end)
  return list
end

function M.family_values(data, partitions)
  -- the bare family values, largest first (with families only; nil when there are none, as Python's empty
  -- tuple); several partitions: merged
  if #partitions == 1 then
    local values = data.partitions[partitions[1]].values
    if values ~= nil and #values == 0 then return nil end
    return values
  end
  local merged, list, any = {}, {}, false
  for _, p in ipairs(partitions) do
    for _, g in ipairs(data.partitions[p].values or {}) do
      any = true
      local have = merged[g.f]
      if have == nil or g.n > have.n then merged[g.f] = g end
    end
  end
  if not any then return nil end
  for _, g in pairs(merged) do list[#list + 1] = g end
  table.sort(list, function(a, b)
    if a.n ~= b.n then return a.n > b.n end
    return a.k < b.k
  end)
  return list
end

return M
