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
local num = require("slurm_topo_filter.util").num

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
  local nodes, total, per_node, gpu_type = needs(req)
  -- every field in the constructor: the table is made at its size, not grown twice (a scan per decision)
  local sc = { data = data, area = area, wanted = wanted, classes = data.classes, nodes = nodes, total_gpus = total,
               per_node = per_node, gpu_type = gpu_type, check = req.unchecked == nil and is_counted, ok = false,
               all_ok = false, cs = false, classes_key = false, signature = false }
  if c.kind == "none" and sc.per_node == 0 then -- the common case: every class counts (data.every, shared)
    local every = data.every
    sc.ok, sc.all_ok, sc.cs = every.ok, true, every
    sc.classes_key = every.flags .. ":" .. tostring(sc.check)
    sc.signature = sc.classes_key .. ":" .. num(sc.nodes) .. ":" .. num(sc.total_gpus) .. ":"
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
  local key = table.concat(flags) -- which nodes count, not how many are asked
  sc.ok, sc.all_ok = ok, all_ok
  sc.cs = M.class_set(data, key, ok, all_ok)
  sc.classes_key = key .. ":" .. tostring(sc.check)
  sc.signature = sc.classes_key .. ":" .. num(sc.nodes) .. ":" .. num(sc.total_gpus) .. ":"
  return sc
end

-- A class set: the node classes a request lets count (ok[i]), with each size's eligible nodes and GPUs (n, gp:
-- keyed by size, data.lua; filled on first look) and, per group list, its index
-- (lists: M.list_index). The sets of GPU requests without a constraint (a GPU type or none, a per-node count)
-- and the set of every class are made with the data (M.prepare_class_sets: every size counted, every list
-- indexed), so no decision after a load counts sizes class by class for them; a set a constraint makes is
-- made on first use, and a data table keeps at most KEPT_CLASS_SETS of those (then starts over).
local KEPT_CLASS_SETS = 64

local function new_class_set(ok, all_ok, flags)
  return { ok = ok, all_ok = all_ok, flags = flags, n = {}, gp = {}, lists = {} }
end

function M.class_set(data, key, ok, all_ok)
  local cs = data.class_sets[key]
  if cs ~= nil then return cs end
  local made = data.made_sets
  if made == nil or made.count >= KEPT_CLASS_SETS then
    made = { count = 0 }
    data.made_sets = made
  end
  cs = made[key]
  if cs == nil then
    cs = new_class_set(ok, all_ok, key)
    made[key] = cs
    made.count = made.count + 1
  end
  return cs
end

function M.shown_texts(cs)
  -- a class set's record texts of groups, label(Nn) (decide.lua steps.shown), started over past 1 024
  local texts = cs.texts
  if texts == nil or texts.count > 1024 then
    texts = { count = 0 }
    cs.texts = texts
  end
  return texts
end

local function eligible_counts(g, ok, all_ok, classes)
  -- a group's (or a size's) nodes, GPUs and most GPUs on a node of the classes that count (ok)
  if all_ok then return g.n, g.g, g.m end -- every node counts: the group's own totals
  local n, gp, most = 0, 0, 0
  local counts = g.c
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

local function count_size(cs, classes, size)
  -- a size's eligible nodes and GPUs for the class set, kept in it
  local n, gp = eligible_counts(size, cs.ok, cs.all_ok, classes)
  cs.n[size], cs.gp[size] = n, gp
  return n, gp
end

local function size_nodes(sc, size)
  -- the eligible nodes of a size (a group's shape's first of its kind), from the scan's class set
  local cs = sc.cs
  return cs.n[size] or (count_size(cs, sc.classes, size))
end

local function by_count(sizes, counts)
  -- the list's sizes ordered by count, most first (then the list's order), those counts, each size's rank
  local m, keys = #sizes + 1, {}
  for i = 1, #sizes do keys[i] = -(counts[sizes[i]] * m + (m - i)) end
  table.sort(keys) -- as numbers, in C
  local order, values, rank = {}, {}, {}
  for i = 1, #sizes do
    local key = -keys[i]
    local at = key % m
    local size = sizes[m - at]
    order[i], values[i], rank[size] = size, (key - at) / m, i
  end
  return order, values, rank
end

local RUN = MAX_ALTERNATIVES + 1 -- the positions a run holds: what a scan keeps, and one to tell it was cut
local RUN_SIZES = MAX_ALTERNATIVES * 4 -- a list of more sizes has no runs (their room: sizes times RUN)

local function prefix_runs(order, at)
  -- runs[r]: the first RUN positions of the groups of sizes order[1..r], ascending (one table shared by the
  -- prefixes that add none of those)
  local runs, prev = {}, {}
  for r = 1, #order do
    local add = at[order[r]]
    local out, i, j, n = prev, 1, 1, 0
    if #prev < RUN or add[1] < prev[RUN] then
      out = {}
      local a, b = prev[1], add[1]
      while n < RUN and (a or b) do
        n = n + 1
        if b == nil or (a ~= nil and a < b) then
          out[n], i = a, i + 1
          a = prev[i]
        else
          out[n], j = b, j + 1
          b = add[j]
        end
      end
    end
    runs[r], prev = out, out
  end
  return runs
end

local function at_least(counts, want)
  -- how many of the counts (descending) are at least `want`
  local lo, hi = 0, #counts
  while lo < hi do
    local mid = lo + hi + 1
    mid = (mid - mid % 2) / 2 -- floor((lo + hi + 1) / 2) without a call
    if counts[mid] >= want then lo = mid else hi = mid - 1 end
  end
  return lo
end

local BLOCK = 8 -- positions a block of a list's ranks covers (block_max)

local function block_max(groups, rank)
  -- per block of BLOCK positions, the highest rank of its groups' sizes
  local out, b = {}, 0
  for i = 1, #groups, BLOCK do
    local most = 0
    for j = i, math.min(i + BLOCK - 1, #groups) do
      local r = rank[groups[j].z]
      if r > most then most = r end
    end
    b = b + 1
    out[b] = most
  end
  return out
end

local function fitting_end(groups, ix, start, cap, wg, wn)
  -- the first position from `start` through `cap` whose group does not fit, else cap + 1: a block whose
  -- highest ranks are within both prefixes is passed over at once
  local rg, rn, blg, bln = ix.rg, ix.rn, ix.blg, ix.bln
  local i = start
  while i <= cap do
    local r = (i - 1) % BLOCK
    local b = (i - 1 - r) / BLOCK + 1
    if r == 0 and blg[b] <= wg and bln[b] <= wn then
      i = i + BLOCK
    else
      local z = groups[i].z
      if rg[z] > wg or rn[z] > wn then return i end
      i = i + 1
    end
  end
  return cap + 1
end

-- A list's index for a class set: its sizes by eligible GPUs (og, gps, rg: order, counts, ranks) and by
-- eligible nodes (on, ns, rn), the most eligible nodes among the first i by GPUs (pmax), and the position of
-- the largest group (big: most nodes, then GPUs, then first in the list). A size holds a job exactly when it
-- has the GPUs and the nodes asked (fits_counts: its GPUs are at most its nodes times its most GPUs on a node,
-- so enough GPUs means enough nodes to hold them), so the sizes that fit are those ranked within both
-- prefixes: M.fit_bounds, one binary search each. Made with the data (with_runs), a list of sizes nearly as many
-- as groups (zones, regions) also keeps the highest ranks per block of positions (blg, bln: block_max), so a
-- scan finds how far the groups from its start all fit without a look at each; a list of many groups a size
-- (racks) keeps, per prefix of each order, the first positions of its sizes' groups (gruns, nruns:
-- prefix_runs), so a scan walks those instead of merging the sizes' position lists.
function M.list_index(cs, groups, classes, with_runs)
  local ix = cs.lists[groups]
  if ix ~= nil then return ix end
  local sizes = groups.sizes
  local ns, gps = cs.n, cs.gp
  local bn, bg, big = -1, -1, nil
  for _, size in ipairs(sizes) do
    local n, gp = ns[size], gps[size]
    if n == nil then n, gp = count_size(cs, classes, size) end
    local first = groups.at[size][1]
    if n > bn or (n == bn and gp > bg) or (n == bn and gp == bg and first < big) then bn, bg, big = n, gp, first end
  end
  local og, gv, rg = by_count(sizes, gps)
  local on, nv, rn = by_count(sizes, ns)
  local pmax, most = {}, 0
  for i = 1, #og do
    local n = ns[og[i]]
    if n > most then most = n end
    pmax[i] = most
  end
  ix = { og = og, gps = gv, rg = rg, on = on, ns = nv, rn = rn, pmax = pmax, big = big, bn = bn, bg = bg,
         some = at_least(nv, 1) }
  if with_runs and #sizes <= RUN_SIZES and 4 * #sizes < #groups then -- many groups a size (racks)
    ix.gruns, ix.nruns = prefix_runs(og, groups.at), prefix_runs(on, groups.at)
  elseif with_runs then -- sizes nearly as many as groups (zones, regions)
    ix.blg, ix.bln = block_max(groups, rg), block_max(groups, rn)
  end
  cs.lists[groups] = ix
  return ix
end
local list_index = M.list_index

function M.prepare_class_sets(data)
  -- at load (data.lua prepare): the set of every class and those of GPU requests without a constraint (each
  -- GPU type and none, each per-node count a class has), every size counted and every list indexed
  local classes = data.classes
  local types, per_node, seen_t, seen_g = { false }, {}, {}, {}
  for _, cls in ipairs(classes) do
    if cls.t ~= nil and not seen_t[cls.t] then seen_t[cls.t] = true; types[#types + 1] = cls.t end
    if cls.g > 0 and not seen_g[cls.g] then seen_g[cls.g] = true; per_node[#per_node + 1] = cls.g end
  end
  local sets = {}
  local function add(ok, all_ok, flags)
    local key = table.concat(flags)
    if sets[key] == nil then
      sets[key] = new_class_set(ok, all_ok, key)
    end
    return sets[key]
  end
  local every_ok, every_flags = {}, {}
  for i = 1, #classes do every_ok[i], every_flags[i] = true, "1" end
  local every = add(every_ok, true, every_flags)
  for _, t in ipairs(types) do
    for _, p in ipairs(per_node) do
      local ok, all_ok, flags, any = {}, true, {}, false
      for i, cls in ipairs(classes) do
        local good = cls.g >= p and (t == false or cls.t == t)
        ok[i], flags[i] = good, good and "1" or "0"
        all_ok, any = all_ok and good, any or good
      end
      if any then add(ok, all_ok, flags) end
    end
  end
  for _, cs in pairs(sets) do
    for _, levels in pairs(data.partitions) do
      for _, list in pairs(levels) do
        if type(list) == "table" and list.at ~= nil then list_index(cs, list, classes, true) end
      end
    end
  end
  data.class_sets, data.every = sets, every
end

local PARENT = { z = { "pz", "zf" }, r = { "pr", "rf" } } -- parent_of's keys in g.u: a bucket's, else the feature

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
  if l == nil then -- plain finds: a pattern costs more than the rest of a first display
    local f = g.f
    l = string.sub(f, string.find(f, "_", 1, true) + 1)
    if string.find(l, ".", 1, true) then l = string.gsub(l, "%.", "/") end
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
  return eligible_counts(g, sc.ok, sc.all_ok, sc.classes)
end

local label_of, scan_allowed, scan_eligible = M.label_of, M.allowed, M.eligible

function M.nodes_of(sc, g)
  -- the nodes of a kept alternative that count for the scan (what its record shows): a zone union carries its
  -- own (sp: the regions it spans), a group's are its eligible ones (its own when every node counts)
  if g.sp ~= nil or sc.all_ok then return g.n end
  return size_nodes(sc, g.z)
end

local function fits_counts(sc, n, gp, most)
  if not sc.check then return true, n end
  local need, total = sc.nodes, sc.total_gpus
  if total > 0 then
    if most == 0 then return false, n end
    need = math.max(need, math.ceil(total / most))
  end
  return n >= need and gp >= total, n
end

local function scan_fits(sc, g)
  return fits_counts(sc, scan_eligible(sc, g))
end

-- The compiled cut (every node counts, no GPUs asked, no area, no user bracket, one partition): every group from
-- `start` on fits, so the bracket is groups[start..e], e the last within 64 alternatives and `budget` characters
-- (the list's running bracket length L, summed by M.prepare; binary search).
local function compiled_cut(groups, start, budget, limit, room)
  local n, L = #groups, groups.L
  if start > n then return {}, false, 1, 0, 0 end
  local before = 0
  if start > 1 then before = L[start - 1] end
  local lo, hi = start, math.min(n, start + limit - 1)
  if 1 + L[lo] - before > budget then return {}, true, 1, 0, 0 end
  while lo < hi do -- the last e with 2 + (L[e] - L[start-1] - 1) <= budget
    local mid = lo + hi + 1
    mid = (mid - mid % 2) / 2
    if 1 + L[mid] - before <= budget then lo = mid else hi = mid - 1 end
  end
  local kept = { unpack(groups, start, lo) } -- one copy in C (at most 64 values)
  kept.src, kept.from = groups, start -- a run of the list: its bracket text is a piece of groups.joined
  -- what of it fits in a cascade's `room` (M.taken): the last e with L[e] - L[start-1] <= room
  local e, top = start - 1, lo
  while e < top do
    local mid = e + top + 1
    mid = (mid - mid % 2) / 2
    if L[mid] - before <= room then e = mid else top = mid - 1 end
  end
  local fitlen = 0
  if e >= start then fitlen = L[e] - before end
  return kept, lo < n, 1 + L[lo] - before, e - start + 1, fitlen
end

local function first_at_or_after(positions, start)
  if start <= 1 or positions[1] >= start then return 1 end -- the common case: from the list's first group
  local lo, hi = 1, #positions + 1
  while lo < hi do
    local mid = lo + hi
    mid = (mid - mid % 2) / 2
    if positions[mid] < start then lo = mid + 1 else hi = mid end
  end
  return lo
end

function M.fit_bounds(sc, ix)
  -- (wg, wn): a size of the indexed list holds the job exactly when ix.rg[size] <= wg and ix.rn[size] <= wn
  local wg, total, nodes = #ix.gps, sc.total_gpus, sc.nodes
  if total > 0 then wg = at_least(ix.gps, total) end
  if nodes == 1 then return wg, ix.some end -- the common case: the sizes with a node that counts
  return wg, at_least(ix.ns, nodes)
end
local fit_bounds = M.fit_bounds

local function index_of(sc, groups)
  return list_index(sc.cs, groups, sc.classes)
end

-- The position lists (data.lua at) of the sizes that hold the job, each from its first position at or after
-- `start`: {positions, index, positions, index, ...}, and how many positions they hold in all. The sizes are
-- looked for in the shorter of the index's two prefixes (ranked within wg by GPUs, or within wn by nodes).
local function fitting_lists(groups, start, ix, wg, wn)
  local lists, many = {}, 0
  local order, within, other, bound = ix.og, wg, ix.rn, wn
  if wn < wg then order, within, other, bound = ix.on, wn, ix.rg, wg end
  local at = groups.at
  for r = 1, within do
    local size = order[r]
    if other[size] <= bound then
      local positions = at[size]
      local i = first_at_or_after(positions, start)
      if i <= #positions then
        lists[#lists + 1] = positions
        lists[#lists + 1] = i
        many = many + #positions - i + 1
      end
    end
  end
  return lists, many
end

local function first_large(sc, groups)
  -- the first position whose group has as many nodes as the job asks for (groups are sorted by size)
  local nodes, first = sc.nodes, groups[1]
  if first ~= nil and first.n >= nodes then return 1 end -- the common case: every group is large enough
  local lo, hi = 1, #groups + 1
  while lo < hi do
    local mid = lo + hi
    mid = (mid - mid % 2) / 2
    if groups[mid].n < nodes then lo = mid + 1 else hi = mid end
  end
  return lo
end

function M.any_fits(sc, groups)
  -- false when no group of the (sorted, compiled) list can hold the job, whatever else restricts the scan: two
  -- binary searches in the list's index (a size with the GPUs asked and, among those, the most nodes), so a
  -- caller can skip what it would build for the scan (true where it cannot tell cheaply)
  if not sc.check or groups.at == nil then return true end
  if #groups == 0 then return false end
  local ix = index_of(sc, groups)
  if sc.total_gpus > 0 then
    local wg = at_least(ix.gps, sc.total_gpus)
    return wg > 0 and ix.pmax[wg] >= sc.nodes
  end
  return ix.ns[1] >= sc.nodes
end

local function head_in(kept, count, length, room)
  -- how many of kept[1..count] fit in `room` characters of a cascade (each group's and its "|"), and those
  -- characters: from the end, as the room rarely leaves out more than a few
  local n, used = count, length - 1
  while n > 0 and used > room do
    used = used - #kept[n].f - 1
    n = n - 1
  end
  return n, used
end

local function admitted(sc, g, only, inside, up)
  -- a user bracket (only), an area, groups inside others (inside)
  return (only == nil or only[g.f]) and scan_allowed(sc, g) and (inside == nil or inside[parent_of(g, up)])
end

local function as_run(kept, count, groups, first, last)
  -- kept as a run of the list when its groups are one (positions first..last, none left out): its bracket text
  -- is then a piece of the list's joined text (M.run_text), not joined again
  if count > 0 and last - first + 1 == count then kept.src, kept.from = groups, first end
  return kept
end

local FEW_POSITIONS = MAX_ALTERNATIVES * 2 -- sorted at once (in C) rather than merged list by list

-- Up to 64 fitting groups within `budget` characters of bracket, in the data's order: (kept, cut short, length:
-- 1 + each kept group's characters and "|", so its bracket is length + 1 characters); kept is a plain
-- array (what a record shows of a group's eligible nodes is asked again of the scan: M.nodes_of).
-- Groups are sorted by size, so the scan starts at the first group as large as the job (binary search);
-- `descending` (the family values, largest first): from the first. `inside` (a set of zone or region group
-- features, `up` = "z" or "r"): only groups inside one of them. Which sizes hold the job comes from the list's
-- index for the scan's class set (M.list_index, M.fit_bounds: a rank test per size, nothing counted). Only the
-- groups of those sizes are visited: one size's position list in order; few positions, sorted; most of the
-- list, or sizes nearly as many as groups, the list in order; else a merge of the position lists. A job no
-- group fits costs two binary searches. Each way is its own loop with the step to keep a group written out (no
-- call per group). `limit` (at most 64, the default): the most groups wanted, for a cascade that can take no
-- more (M.taken); past it the list is cut short.
function M.candidates(sc, groups, budget, only, inside, up, descending, limit, room)
  limit, room = limit or MAX_ALTERNATIVES, room or budget
  local start = 1
  if sc.check and not descending then start = first_large(sc, groups) end
  local filtered = only ~= nil or inside ~= nil or sc.area ~= nil
  if not filtered and sc.all_ok and sc.total_gpus == 0 and groups.big ~= nil then
    return compiled_cut(groups, start, budget, limit, room)
  end
  -- length: the bracket's characters with the next group's "|" counted ("[" + "]" - one "|" to start)
  local kept, count, length = {}, 0, 1
  if not sc.check or groups.at == nil then
    for i = start, #groups do -- a merged list (several partitions), or nothing checked
      local g = groups[i]
      if scan_fits(sc, g) and (not filtered or admitted(sc, g, only, inside, up)) then
        local extra = #g.f + 1
        if count == limit or length + extra > budget then
          return kept, true, length, head_in(kept, count, length, room)
        end
        count = count + 1
        kept[count] = g
        length = length + extra
      end
    end
    return kept, false, length, head_in(kept, count, length, room)
  end
  if start > #groups then return kept, false, length, 0, 0 end
  local ix = index_of(sc, groups)
  local wg, wn = fit_bounds(sc, ix)
  local rg, rn = ix.rg, ix.rn
  local sub = groups.sub
  if sub ~= nil and not filtered then -- few sizes: the sublist of the sizes that fit (data.lua), cut as compiled
    local mask, bit = 0, 1
    for _, size in ipairs(groups.sizes) do
      if rg[size] <= wg and rn[size] <= wn then mask = mask + bit end
      bit = bit + bit
    end
    local part = sub[mask]
    if part == nil then return kept, false, length, 0, 0 end -- no size fits
    local from = 1
    if not descending then from = first_large(sc, part) end
    return compiled_cut(part, from, budget, limit, room)
  end
  local within = wg
  if wn < within then within = wn end
  if within == 0 then return kept, false, length, 0, 0 end -- no size fits
  local pk, fk -- groups inside others, nothing else restricting: the parent's key in g.u, looked up in place
  if inside ~= nil and only == nil and sc.area == nil then pk, fk = PARENT[up][1], PARENT[up][2] end
  local first, last = 0, 0 -- the positions of the first and last kept groups (as_run)
  if ix.blg ~= nil and not filtered then -- the groups from start that all fit (fitting_end): a compiled cut,
    -- or kept at once before the scan goes on past the first that does not fit
    local cap = math.min(#groups, start + limit)
    local e = fitting_end(groups, ix, start, cap, wg, wn)
    if e > cap then return compiled_cut(groups, start, budget, limit, room) end
    if e > start then
      local L, before = groups.L, 0
      if start > 1 then before = L[start - 1] end
      if 1 + L[e - 1] - before > budget then return compiled_cut(groups, start, budget, limit, room) end
      kept = { unpack(groups, start, e - 1) }
      count, length, first, last = e - start, 1 + L[e - 1] - before, start, e - 1
    end
    start = e + 1
  end
  local run, other, bound -- the first positions of the sizes within one prefix (M.list_index runs)
  if sc.total_gpus > 0 then
    run, other, bound = ix.gruns, rn, wn
    if run ~= nil then run = run[wg] end
  else
    run, other, bound = ix.nruns, rg, wg
    if run ~= nil then run = run[wn] end
  end
  if run ~= nil then -- the groups of the sizes within the prefix, in order: the other rank tested per group
    -- (a group that passes both has the eligible nodes asked, so it lies at or past `start`)
    for j = 1, #run do
      local p = run[j]
      local g = groups[p]
      if other[g.z] <= bound
        and (not filtered or (pk and inside[g.u[pk] or g.u[fk]]) or (not pk and admitted(sc, g, only, inside, up))) then
        local extra = #g.f + 1
        if count == limit or length + extra > budget then
          return as_run(kept, count, groups, first, last), true, length, head_in(kept, count, length, room)
        end
        count = count + 1
        kept[count] = g
        length = length + extra
        if count == 1 then first = p end
        last = p
      end
    end
    if #run < RUN then -- the prefix's groups, all of them
      return as_run(kept, count, groups, first, last), false, length, head_in(kept, count, length, room)
    end
    if run[#run] + 1 > start then start = run[#run] + 1 end -- the rest: from past the run, as below
  end
  local sizes, span = #groups.sizes, #groups - start + 1
  local lists, many
  if 4 * within < sizes or 4 * sizes < span then -- few sizes can fit, or few sizes for many groups: which
    lists, many = fitting_lists(groups, start, ix, wg, wn)
  end
  local positions, from -- one size fits: its positions; few positions: sorted (in C)
  if lists ~= nil then
    if #lists == 0 then
      return as_run(kept, count, groups, first, last), false, length, head_in(kept, count, length, room)
    end
    if #lists == 2 then
      positions, from = lists[1], lists[2]
    elseif many <= FEW_POSITIONS then
      positions, from = {}, 1
      for j = 1, #lists, 2 do
        local list = lists[j]
        for i = lists[j + 1], #list do positions[#positions + 1] = list[i] end
      end
      table.sort(positions)
    end
  end
  if positions ~= nil then -- in order
    for j = from, #positions do
      local p = positions[j]
      local g = groups[p]
      if not filtered or (pk and inside[g.u[pk] or g.u[fk]]) or (not pk and admitted(sc, g, only, inside, up)) then
        local extra = #g.f + 1
        if count == limit or length + extra > budget then
          return as_run(kept, count, groups, first, last), true, length, head_in(kept, count, length, room)
        end
        count = count + 1
        kept[count] = g
        length = length + extra
        if count == 1 then first = p end
        last = p
      end
    end
    return as_run(kept, count, groups, first, last), false, length, head_in(kept, count, length, room)
  end
  -- the list in order, a rank test per group (~8 Lua instructions a position), or a merge of the position
  -- lists (~5 a list, and 15, per fitting group): in order when sizes are nearly as many as groups, or the
  -- fitting groups dense enough for the lists they come in
  local k = lists and #lists / 2
  if lists == nil or 8 * span < (5 * k + 15) * many then
    for i = start, #groups do
      local g = groups[i]
      local z = g.z
      if rg[z] <= wg and rn[z] <= wn
        and (not filtered or (pk and inside[g.u[pk] or g.u[fk]]) or (not pk and admitted(sc, g, only, inside, up))) then
        local extra = #g.f + 1
        if count == limit or length + extra > budget then
          return as_run(kept, count, groups, first, last), true, length, head_in(kept, count, length, room)
        end
        count = count + 1
        kept[count] = g
        length = length + extra
        if count == 1 then first = i end
        last = i
      end
    end
    return as_run(kept, count, groups, first, last), false, length, head_in(kept, count, length, room)
  end
  local heads, at = {}, {} -- each list's next position (math.huge once done) and its index in the list
  for j = 1, k do
    local list, i = lists[2 * j - 1], lists[2 * j]
    heads[j], at[j] = list[i], i
  end
  local huge = math.huge
  while true do -- a merge of the fitting sizes' positions
    local best, p = 0, huge
    for j = 1, k do
      local h = heads[j]
      if h < p then best, p = j, h end
    end
    if best == 0 then
      return as_run(kept, count, groups, first, last), false, length, head_in(kept, count, length, room)
    end
    local i = at[best] + 1
    at[best] = i
    heads[best] = lists[2 * best - 1][i] or huge
    local g = groups[p]
    if not filtered or (pk and inside[g.u[pk] or g.u[fk]]) or (not pk and admitted(sc, g, only, inside, up)) then
      local extra = #g.f + 1
      if count == limit or length + extra > budget then
        return as_run(kept, count, groups, first, last), true, length, head_in(kept, count, length, room)
      end
      count = count + 1
      kept[count] = g
      length = length + extra
      if count == 1 then first = p end
      last = p
    end
  end
end

function M.run_text(kept, count)
  -- the features of kept[1..count] joined by "|": a piece of the list's joined text where kept is a run of it
  -- (a compiled cut), else joined here
  if count == 0 then return "" end
  local src = kept.src
  if src ~= nil then
    local L, from = src.L, kept.from
    local before = 0
    if from > 1 then before = L[from - 1] end
    return string.sub(src.joined, before + 1, L[from + count - 1] - 1)
  end
  local names = {}
  for i = 1, count do names[i] = kept[i].f end
  return table.concat(names, "|")
end

function M.bracket_text(kept, known, known_text)
  -- "[f1|f2|...]" of a list: a cascade's (its runs, `parts`) or a level's; a run of the whole list `known` is
  -- known_text (its text, made already)
  local parts = kept.parts
  if parts == nil then return "[" .. M.run_text(kept, #kept) .. "]" end
  if #parts == 2 then return "[" .. M.run_text(parts[1], parts[2]) .. "]" end
  local texts = {}
  for j = 1, #parts, 2 do
    local list, count = parts[j], parts[j + 1]
    if list == known and count == #list then
      texts[#texts + 1] = known_text
    else
      texts[#texts + 1] = M.run_text(list, count)
    end
  end
  return "[" .. table.concat(texts, "|") .. "]"
end

function M.taken(kept, alternatives, room, length, fitn, fitlen)
  -- what M.cascade takes of one list with `alternatives` and `room` characters left: (count, alternatives left,
  -- room left). A cascade's caller asks each list, coarsest first, for at most the alternatives left + 1 (one
  -- more tells whether the list was cut), which gives the same cascade as the whole lists would. `length`
  -- (M.candidates' third value: 1 + the characters of each group and its "|"): the whole list at once when
  -- it fits; fitn and fitlen (its fourth and fifth, asked with this room): what of it fits, counted by the scan
  local count = #kept
  if length ~= nil and count <= alternatives and length - 1 <= room then
    return count, alternatives - count, room - (length - 1)
  end
  if fitn ~= nil then -- the scan counted what fits in this room: fitn groups, fitlen characters
    if fitn <= alternatives then return fitn, alternatives - fitn, room - fitlen end
    -- one group more than the alternatives fits (asked for alternatives + 1): all but the last
    return alternatives, 0, room - fitlen + #kept[fitn].f + 1
  end
  local n = 0
  for i = 1, #kept do
    local cost = #kept[i].f + 1
    if n == alternatives or cost > room then break end
    room = room - cost
    n = n + 1
  end
  return n, alternatives - n, room
end

function M.wanted(alternatives)
  -- the limit to ask a list for when the cascade can take `alternatives` more (nil: no limit below 64)
  if alternatives + 1 >= MAX_ALTERNATIVES then return nil end
  return alternatives + 1
end

-- One bracket from per-level lists given finest first ({kept, cut} each): within Slurm's limits (64
-- alternatives, `budget` characters of bracket) the coarsest lists are kept whole first, and what does not fit
-- is dropped from the tail of the finest ones (regions and family values keep the job off the plain tree).
-- The first `extra` lists (zone unions) come last in that order: they take only the room the levels leave;
-- `emit` (list indices) is the order of the lists in the bracket, else as given. A list given as {kept, cut,
-- count, characters} was taken already (M.taken, first in that order): its count is not looked for again.
function M.cascade(lists, budget, extra, emit)
  extra = extra or 0
  local alternatives, room, cut, counts = MAX_ALTERNATIVES, budget - 1, false, {}
  local order = {}
  for j = #lists, extra + 1, -1 do order[#order + 1] = j end
  for j = 1, extra do order[#order + 1] = j end
  for _, j in ipairs(order) do
    local kept, n = lists[j][1], lists[j][3]
    if n ~= nil then -- taken already (M.taken, in this order): its count and characters
      room = room - lists[j][4]
    else
      n = 0
      for i = 1, #kept do
        local cost = #kept[i].f + 1
        if n == alternatives or cost > room then break end
        room = room - cost
        n = n + 1
      end
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
  local parts = {} -- the lists' runs in bracket order (M.run_text): {kept, count, kept, count...}
  for _, j in ipairs(emit) do
    local kept = lists[j][1]
    if counts[j] > 0 then
      parts[#parts + 1] = kept
      parts[#parts + 1] = counts[j]
    end
    if k == 0 and counts[j] > 0 then -- the first part: one copy in C
      out = { unpack(kept, 1, counts[j]) }
      k = counts[j]
    else
      for i = 1, counts[j] do
        k = k + 1
        out[k] = kept[i]
      end
    end
  end
  out.parts = parts
  return out, cut
end

-- The largest group for this request (to name it when none can hold the job): compiled for the whole level
-- when every node counts; else the first group, in the data's order, with the most eligible nodes (then GPUs),
-- from the list's index (M.list_index); a whole-level scan with a user bracket, an area, or a merged list.
function M.largest(sc, groups, only)
  if only == nil and sc.area == nil and sc.all_ok and groups.big ~= nil then
    local g = groups[groups.big]
    if g == nil then return nil end
    return g, g.n, g.g
  end
  if only == nil and sc.area == nil and groups.at ~= nil then
    local ix = index_of(sc, groups)
    if ix.big == nil then return nil end
    return groups[ix.big], ix.bn, ix.bg
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
