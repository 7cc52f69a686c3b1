--[[
slurm_topo_filter/scan.lua - a request's view of the data's groups, with a bound on the work of every decision
(slurm_topo/policy/scan.py, the specification; ARCHITECTURE.md "The work bound").

What depends on the fleet only is done before any decision: the generator sorts each partition's groups of
each level by (nodes, rank), ranks fleet-wide; data.lua's prepare decodes them into named fields and indexes
each list by feature, makes the class sets of GPU requests without a constraint, and lists each feature's
classes. A decision then walks:

  source   a level's lists for the job's partitions (several are merged while walked: each feature once, its
           largest copy, ties to the first partition named), or the groups a user's bracket names
  walk     one group a step, from the first group as large as the job (or from the largest), until Slurm's
           limits (64 alternatives, the characters left) or its looks run out: LOOKS_LIST (a level's list),
           LOOKS_FINER (a required zone's or region's finer --prefer), LOOKS_LARGEST (a refusal's largest group),
           UNION_ROWS (the zones prefer's unions are made of); every step is one look, whatever it finds
  bound    a walk stopped by its looks is counted in sc.bounded (the record says so); what it kept is right. A
           required level whose looks found nothing takes the next groups unchecked (walk.unchecked): still one
           group per alternative, so the job never runs across groups

A scan is one table of plain fields and the functions below take it as their first argument: no closures per
request (this runs for every submission, under slurmctld's locks). Nothing here remembers a decision.
]]

local V = require("slurm_topo_filter.vocab")

local MAX_ALTERNATIVES = V.MAX_ALTERNATIVES
local LOOKS_LIST, LOOKS_LARGEST = V.LOOKS_LIST, V.LOOKS_LARGEST
local SUMS_PAIRS = V.SUMS_PAIRS

local M = {}

-- The request ------------------------------------------------------------------------------------------------

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

-- Class sets: which node classes count for a request. Every class (no constraint, no GPU per node) is the
-- common case and needs no flags; GPU requests without a constraint use the sets made at load (M.gpu_sets); a
-- constraint's set is made per decision from its names' class lists (M.feature_classes: one look per class
-- it admits, not per class of the fleet) and kept, at most KEPT_SETS per data table.
local KEPT_SETS = 64

local function gpu_set_key(per_node, gpu_type)
  return (gpu_type or "") .. "\0" .. per_node
end

function M.gpu_sets(data)
  -- at load: the class set of each GPU type (and none) and each per-node GPU count a class has; a request's
  -- per-node count p uses the set of the smallest count >= p (the same classes)
  local classes, types, counts, seen = data.classes, { false }, {}, {}
  for _, cls in ipairs(classes) do
    if cls.gpu_type ~= nil and not seen[cls.gpu_type] then seen[cls.gpu_type] = true; types[#types + 1] = cls.gpu_type end
    if cls.gpus > 0 and not seen[cls.gpus] then seen[cls.gpus] = true; counts[#counts + 1] = cls.gpus end
  end
  table.sort(counts)
  local sets, empty = {}, {}
  for _, t in ipairs(types) do
    for _, p in ipairs(counts) do
      local ok, any = {}, false
      for i, cls in ipairs(classes) do
        ok[i] = cls.gpus >= p and (t == false or cls.gpu_type == t)
        any = any or ok[i]
      end
      sets[gpu_set_key(p, t or nil)] = ok
      if not any then empty[ok] = true end
    end
  end
  data.empty_sets = empty -- the sets that admit no class (a type none of whose classes has that many GPUs)
  local class_gpus = {} -- each class's GPUs a node, read by eligible
  for i = 1, #classes do class_gpus[i] = classes[i].gpus end
  data.gpu_sets, data.gpu_counts, data.made_sets, data.class_gpus = sets, counts, { count = 0 }, class_gpus
  data.gpu_types = types
end

function M.set_sums(data)
  -- at load, after gpu_sets: each GPU request set's sums per shape (shape_sums), the sets in gpu_sets' order
  -- while their class pairs fit SUMS_PAIRS in all (a set without sums is summed a group at a time: the same
  -- numbers)
  local shape_pairs, budget, sums = 0, SUMS_PAIRS, {}
  for _, shape in ipairs(data.shapes) do shape_pairs = shape_pairs + #shape.c / 2 end
  for _, t in ipairs(data.gpu_types) do
    for _, p in ipairs(data.gpu_counts) do
      local ok = data.gpu_sets[gpu_set_key(p, t or nil)]
      if not data.empty_sets[ok] and budget >= shape_pairs then
        sums[ok], budget = M.shape_sums(data, ok), budget - shape_pairs
      end
    end
  end
  data.set_sums = sums
end

function M.shape_sums(data, ok)
  -- at load, for a GPU request's class set: each group shape's eligible nodes and GPUs, at 2 * id - 1 and
  -- 2 * id of one array (id: the shape's number, on the class counts its groups share as g.counts), so a walk
  -- reads a group's counts with two look-ups instead of a loop over its classes
  local sc, g, out, at = { ok = ok, class_gpus = data.class_gpus }, {}, {}, 0 -- (g: each shape's counts in turn)
  for _, shape in ipairs(data.shapes) do
    g.counts = shape.c
    out[at + 1], out[at + 2] = M.eligible(sc, g)
    at = at + 2
  end
  return out
end

local function gpu_set(data, per_node, gpu_type)
  for _, p in ipairs(data.gpu_counts) do
    if p >= per_node then return data.gpu_sets[gpu_set_key(p, gpu_type)] end
  end
  return nil -- no class has that many GPUs: none counts
end

local NO_CLASS = {} -- read-only: no class counts

function M.feature_classes(data)
  -- at load: each node feature's classes, ascending (a constraint's set is made from the lists of its names)
  local index = {}
  for i, cls in ipairs(data.classes) do
    for f in pairs(cls.features) do
      local list = index[f]
      if list == nil then
        list = {}
        index[f] = list
      end
      list[#list + 1] = i
    end
  end
  data.feature_classes = index -- each list ascending: the classes are read in order
end

local function named_classes(data, c)
  -- the classes a counted constraint admits, from the feature lists: one of the names (or), every name (and, a
  -- bracket's names outside it); nil when the names admit every class (none, a bracket alone)
  local names, index, out = c.names, data.feature_classes, {}
  if #names == 0 then return nil end
  if c.kind == "or" then
    local seen = {}
    for i = 1, #names do
      local list = index[names[i]] or NO_CLASS
      for k = 1, #list do seen[list[k]] = true end
    end
    for i in pairs(seen) do out[#out + 1] = i end -- in any order: the caller makes a set of them
    return out
  end
  local shortest = index[names[1]] or NO_CLASS -- and: the classes of the rarest name having the others
  for i = 2, #names do
    local list = index[names[i]] or NO_CLASS
    if #list < #shortest then shortest = list end
  end
  local classes = data.classes
  for k = 1, #shortest do
    local idx, has = shortest[k], true
    local features = classes[idx].features
    for i = 1, #names do
      if not features[names[i]] then
        has = false
        break
      end
    end
    if has then out[#out + 1] = idx end
  end
  return out
end

local function constraint_set(sc, c, is_counted)
  -- the class flags of a request with a constraint (a class absent from the table does not count)
  local data = sc.data
  local made = data.made_sets
  local key = (c.text or "") .. "\0" .. tostring(is_counted) .. "\0" .. sc.per_node .. "\0" .. (sc.gpu_type or "")
  local ok = made[key]
  if ok ~= nil then return ok end
  local classes, per_node, gpu_type = data.classes, sc.per_node, sc.gpu_type
  local admitted = is_counted and named_classes(data, c) or nil
  ok = {}
  local last = admitted and #admitted or #classes
  for k = 1, last do
    local i = admitted and admitted[k] or k
    local cls = classes[i]
    if per_node == 0 or (cls.gpus >= per_node and (gpu_type == nil or cls.gpu_type == gpu_type)) then ok[i] = true end
  end
  if made.count >= KEPT_SETS then
    made = { count = 0 }
    data.made_sets = made
  end
  made[key], made.count = ok, made.count + 1
  return ok
end

function M.new_scan(data, req, c, is_counted, area, wanted)
  local nodes, total, per_node, gpu_type = needs(req)
  local sc = { data = data, class_gpus = data.class_gpus, nodes = nodes, total_gpus = total, per_node = per_node,
               gpu_type = gpu_type, check = req.unchecked == nil and is_counted, ok = false, area = area,
               wanted = wanted, bounded = 0 }
  if c.kind == "none" and per_node == 0 then return sc end -- every class counts: sc.ok stays false
  if c.kind == "none" then
    sc.ok = gpu_set(data, per_node, gpu_type) or NO_CLASS
    sc.sums = data.set_sums[sc.ok] -- (nil for NO_CLASS, and past SUMS_PAIRS)
  else
    sc.ok = constraint_set(sc, c, is_counted)
  end
  -- no class counts: no group holds a job of a node or a GPU (nothing_fits)
  sc.none = (sc.ok == NO_CLASS or data.empty_sets[sc.ok] or next(sc.ok) == nil) and (nodes >= 1 or total > 0)
  return sc
end

-- One group --------------------------------------------------------------------------------------------------

function M.eligible(sc, g)
  -- a group's nodes and GPUs of the classes that count (sc.ok: the class flags; false: every class counts;
  -- sc.class_gpus: each class's GPUs a node, data.class_gpus)
  local ok = sc.ok
  if not ok then return g.nodes, g.gpus end
  local sums = sc.sums -- a GPU request's set: its shapes' sums, made at load
  if sums then
    local at = 2 * g.counts.id
    return sums[at - 1], sums[at]
  end
  local class_gpus, n, gp, counts = sc.class_gpus, 0, 0, g.counts
  for i = 1, #counts, 2 do
    local idx = counts[i]
    if ok[idx] then
      local count = counts[i + 1]
      n, gp = n + count, gp + count * class_gpus[idx]
    end
  end
  return n, gp
end
local eligible = M.eligible

function M.allowed(sc, g)
  -- inside a --locality-regions area, or a region group holding one
  local area = sc.area
  if area == nil then return true end
  local loc = g.loc
  if area[g.feature] or (loc.region_feature and area[loc.region_feature])
    or (loc.zone_feature and area[loc.zone_feature]) then
    return true
  end
  return loc.zone == nil and loc.region ~= nil and sc.wanted[loc.region] == true
end
local allowed = M.allowed

-- the location's field naming the zone ("zone") or region ("region") group holding a group: a family bucket's
-- where the data gives it (data.lua decode_locations)
local HOLDER = { zone = "in_zone", region = "in_region" }

function M.label_of(g)
  -- the group's label: the data writes it only where it is not the one its feature spells (ng_a.r1 -> a/r1:
  -- after the first "_", dots as slashes; a family bucket ng_a.r1.V of value V -> a/r1/V; filter_data.py
  -- _derived_label), else derived here once
  local l = g.label
  if l == nil then
    local f, v = g.feature, g.loc.family
    if v ~= nil then f = string.sub(f, 1, #f - #v - 1) end
    l = string.sub(f, string.find(f, "_", 1, true) + 1)
    if string.find(l, ".", 1, true) then l = string.gsub(l, "%.", "/") end
    if v ~= nil then l = l .. "/" .. v end
    g.label = l
  end
  return l
end

-- Sources and their order ------------------------------------------------------------------------------------

local ORDERS = { ascending = true, values = true, largest = true }

local function before(a, b, order)
  -- whether a comes before b: ascending (nodes, rank), values (-nodes, rank), largest (-nodes, -rank)
  if a.nodes ~= b.nodes then
    if order == "ascending" then return a.nodes < b.nodes end
    return a.nodes > b.nodes
  end
  if order == "largest" then return a.rank > b.rank end
  return a.rank < b.rank
end

M.NO_GROUPS = { lists = { {} }, index = { {} }, order = "ascending" } -- shared, read-only
local NO_GROUPS = M.NO_GROUPS

local function source_of(data, partitions, key, order)
  -- a level's (or the values') lists for the partitions; one partition's source is made once per data table and
  -- kept (sources are read only: a walk's cursor keeps its own places)
  local one
  if #partitions == 1 then
    local kept = data.one_sources
    if kept == nil then
      kept = {}
      data.one_sources = kept
    end
    one = kept[partitions[1]]
    if one == nil then
      one = {}
      kept[partitions[1]] = one
    elseif one[key] ~= nil then
      return one[key]
    end
  end
  local lists, index = {}, {}
  for i = 1, #partitions do
    local list = data.partitions[partitions[i]][key] or NO_GROUPS.lists[1]
    lists[i], index[i] = list, list.index or NO_GROUPS.index[1]
  end
  local src = { lists = lists, index = index, order = order }
  if one ~= nil then -- kept: and what is read from it for a class set (decide.lua rows_of)
    src.kept = { count = 0 }
    one[key] = src
  end
  return src
end

function M.level_source(data, partitions, level)
  return source_of(data, partitions, level, "ascending")
end

function M.values_source(data, partitions)
  -- the bare family values (largest first), nil without families
  if not data.has_values then return nil end
  local src = source_of(data, partitions, "values", "values")
  for _, list in ipairs(src.lists) do
    if #list > 0 then return src end
  end
  return nil -- families declared, no value on the partitions' nodes: prefer as without families
end

function M.has(src, feature)
  for _, ix in ipairs(src.index) do
    if ix[feature] ~= nil then return true end
  end
  return false
end

function M.named_source(src, features)
  -- the groups of src a user's bracket (or --nodelist's one group) names, in the source's order: a look-up per
  -- name and partition, never a walk of the level
  local lists, order = {}, src.order
  for i, ix in ipairs(src.index) do
    local list, seen = {}, {}
    for _, f in ipairs(features) do
      local g = ix[f]
      if g ~= nil and not seen[f] then seen[f] = true; list[#list + 1] = g end
    end
    table.sort(list, function(a, b) return before(a, b, order) end)
    lists[i] = list
  end
  return { lists = lists, index = src.index, order = order }
end

-- A merged cursor's order as one number a group (the smaller first): (nodes, rank) ascending, (-nodes, rank) for
-- the family values, (-nodes, -rank) from the largest. A level's ranks are fewer than its groups, so fewer than
-- the fleet's nodes (V.MAX_NODES, 2^18): every key is an exact integer under 2^37 and orders as `before`; copies
-- of one group tie, to the first list
local RANK_UNIT = V.MAX_NODES
local PAST_END = math.huge

local KEY_SIGNS = { ascending = { 1, 1 }, values = { -1, 1 }, largest = { -1, -1 } } -- of (nodes, rank)

-- A cursor walks a source: cursor_next returns the next group, false for a step over another partition's
-- smaller copy of a feature, nil at the end.
local function lower_bound(list, nodes)
  -- the first group of list (ascending) with `nodes` or more: the first where every group has (most jobs are
  -- small), else a binary search
  local first = list[1]
  if first == nil or first.nodes >= nodes then return 1 end
  local a, b = 2, #list + 1
  while a < b do
    local mid = (a + b - (a + b) % 2) / 2 -- halved without a call (math.floor is one a step)
    if list[mid].nodes < nodes then a = mid + 1 else b = mid end
  end
  return a
end

local function cursor(sc, src, from_largest)
  local pos, step, order = {}, 1, src.order
  local lists = src.lists
  for i = 1, #lists do
    local list = lists[i]
    if from_largest then
      pos[i] = #list
    elseif order == "ascending" and sc.check then
      pos[i] = lower_bound(list, sc.nodes)
    else
      pos[i] = 1
    end
  end
  if from_largest then step, order = -1, "largest" end
  return { lists = src.lists, src = src, pos = pos, step = step, order = order }
end

local function key_of(g, order)
  if g == nil then return PAST_END end
  local signs = KEY_SIGNS[order]
  return signs[1] * g.nodes * RANK_UNIT + signs[2] * g.rank
end

local function merged_next(cur)
  -- cursor_next on several lists: each list's next key kept in cur.keys (made at the first step from the
  -- places, with the order's signs), the smallest taken; false where another list has a larger copy of its
  -- feature (ties to the first list)
  local lists, pos, keys = cur.lists, cur.pos, cur.keys
  if keys == nil then
    keys = {}
    for q = 1, #lists do keys[q] = key_of(lists[q][pos[q]], cur.order) end
    local signs = KEY_SIGNS[cur.order]
    cur.keys, cur.sn, cur.sr = keys, signs[1], signs[2]
  end
  local j, first = 0, PAST_END
  for q = 1, #lists do
    if keys[q] < first then j, first = q, keys[q] end
  end
  if j == 0 then return nil end
  local list, at, step = lists[j], pos[j], cur.step
  local g, nx = list[at], list[at + step]
  pos[j] = at + step
  keys[j] = PAST_END
  if nx ~= nil then keys[j] = cur.sn * nx.nodes * RANK_UNIT + cur.sr * nx.rank end -- key_of, inline
  local index, feature, nodes = cur.src.index, g.feature, g.nodes
  for q = 1, #index do
    local h = q ~= j and index[q][feature]
    if h and (h.nodes > nodes or (h.nodes == nodes and q < j)) then return false end
  end
  return g
end

local function cursor_next(cur)
  local lists, pos = cur.lists, cur.pos
  if #lists == 1 then
    local g = lists[1][pos[1]]
    if g ~= nil then pos[1] = pos[1] + cur.step end
    return g
  end
  return merged_next(cur)
end

-- Walks ------------------------------------------------------------------------------------------------------

local function take_unchecked_from(sc, walk, steps, at, budget)
  -- the unchecked groups of take_unchecked: steps[at] and on, at most 64 steps (false: a step over another
  -- partition's smaller copy), each kept while its characters fit (64 steps keep at most 64)
  local kept, length, count, area = walk.kept, walk.length, #walk.kept, sc.area
  for i = at, math.min(#steps, at + MAX_ALTERNATIVES - 1) do
    local g = steps[i]
    if g and (area == nil or allowed(sc, g)) then
      local extra = #g.feature
      if count > 0 then extra = extra + 1 end
      if length + extra > budget then break end
      count, length = count + 1, length + extra
      kept[count] = g
      walk.unchecked = walk.unchecked + 1
    end
  end
  walk.length = length
end

local function take_unchecked(sc, walk, g, cur, budget)
  -- a required level past its looks with nothing kept: the next groups inside the area (at most 64 steps from
  -- g, the group the looks stopped at), their fit not checked. One list is read in place; merged lists' steps
  -- are gathered first
  if #cur.lists == 1 then return take_unchecked_from(sc, walk, cur.lists[1], cur.pos[1] - 1, budget) end
  local steps = { g }
  for i = 2, MAX_ALTERNATIVES do
    local step = cursor_next(cur)
    if step == nil then break end
    steps[i] = step
  end
  return take_unchecked_from(sc, walk, steps, 1, budget)
end

local function out_of_looks(sc, walk, g, cur, budget, unchecked_after, limit)
  -- the looks ran out with groups left: cut; the bound (counted) only when short of what the walk may keep
  walk.cut = true
  if #walk.kept < limit then
    walk.bound, sc.bounded = true, sc.bounded + 1
    if unchecked_after and #walk.kept == 0 then take_unchecked(sc, walk, g, cur, budget) end
  end
  return walk
end

local function walked_length(length, used)
  -- a walk's bracket length after keeping groups that used `used` characters of room (feature + 1 each)
  if used == 0 then return length end
  return length + used - 1
end

local function walk_all_fit(sc, walk, cur, budget, left, limit, unchecked_after)
  -- one list whose every group from the cursor on holds the job (see all_fit): each step only keeps, within
  -- Slurm's limits and the looks; the same steps and the same walk as walk_one. room: the characters left for
  -- the kept groups' (feature + 1) each (the first has no separator: one more)
  local list, pos = cur.lists[1], cur.pos
  local kept, length = walk.kept, walk.length
  local first, last = pos[1], #list
  local looked = math.min(last, first + left - 1) -- the last group the looks reach
  local stop = math.min(looked, first + limit - 1) -- and the last Slurm's alternatives reach
  local room0 = budget - length + 1
  local room, count = room0, 0
  for i = first, stop do
    local g = list[i]
    local width = #g.feature + 1
    if width > room then break end
    room, count = room - width, count + 1
    kept[count] = g
  end
  walk.length = walked_length(length, room0 - room)
  if count < stop - first + 1 or stop < looked then -- the characters or the alternatives ran out
    walk.cut = true
    return walk
  end
  if looked < last then -- the looks ran out with groups left: the next one is where they stopped
    pos[1] = looked + 2
    return out_of_looks(sc, walk, list[looked + 1], cur, budget, unchecked_after, limit)
  end
  return walk
end

local function all_fit(sc, cur, inside)
  -- whether every group a one-list walk reaches holds the job: no area or enclosing group narrows it, and the fit
  -- is not checked, or every class counts, no GPUs are counted and the list ascends from the first group as large
  -- as the job (cursor)
  if inside ~= nil or sc.area ~= nil then return false end
  return not sc.check or (not sc.ok and sc.total_gpus == 0 and cur.order == "ascending")
end

local function walk_one(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
  -- one list (the common case, and a finer --prefer list inside the kept groups): a group's counts decide (read
  -- in place, without a call); the same steps as candidates' general loop
  local list, pos, need, total = cur.lists[1], cur.pos, sc.nodes, sc.total_gpus
  local ok, class_gpus, area, holder, sums = sc.ok, sc.class_gpus, sc.area, HOLDER[up], sc.sums
  if not sc.check then need, total, ok, sums = 0, 0, false, nil end -- every group inside fits: counts unread
  local kept, length, count = walk.kept, walk.length, 0
  local room0 = budget - length + 1 -- characters for the kept groups' (feature + 1) each (as walk_all_fit)
  local room = room0
  local i, last = pos[1], #list
  local looked = last -- the last group the looks reach
  if i + left - 1 < last then looked = i + left - 1 end
  while i <= looked do
    local g = list[i]
    i = i + 1
    if (inside == nil or inside[g.loc[holder]] == true) and (area == nil or allowed(sc, g)) then
      local n, gp
      if sums then -- a GPU request's set: its shapes' sums (shape_sums)
        local at = 2 * g.counts.id
        n, gp = sums[at - 1], sums[at]
      elseif ok then -- eligible, inline: with the call, 986 first decisions over instead of 952 (seed …3301)
        local counts = g.counts
        n, gp = 0, 0
        for k = 1, #counts, 2 do
          local idx = counts[k]
          if ok[idx] then
            local c = counts[k + 1]
            n, gp = n + c, gp + c * class_gpus[idx]
          end
        end
      else
        n, gp = g.nodes, g.gpus
      end
      -- holds: the nodes and the GPUs (a group's GPUs are at most its nodes times its most GPUs a node, so
      -- gp >= total also gives the ceil(total / most) nodes the GPUs need)
      if n >= need and gp >= total then
        local width = #g.feature + 1
        if count == limit or width > room then
          walk.cut, walk.length = true, walked_length(length, room0 - room)
          return walk
        end
        room, count = room - width, count + 1
        kept[count] = g
      end
    end
  end
  walk.length = walked_length(length, room0 - room)
  if i <= last then -- the looks ran out with groups left
    pos[1] = i + 1
    return out_of_looks(sc, walk, list[i], cur, budget, unchecked_after, limit)
  end
  return walk
end

local function kept_one(kept, count, room, g, limit)
  -- g kept after the `count` kept unless they are `limit` or its characters are past `room`: (count, room) after
  -- it, or nil (the walk is cut there). walk_one does the same in its loop, without the call
  local width = #g.feature + 1
  if count == limit or width > room then return nil end
  kept[count + 1] = g
  return count + 1, room - width
end

local function walk_merged(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
  -- several lists merged as they are walked (each feature once: its largest copy; a step over a smaller copy
  -- costs a look), forward from the cursor: merged_next's step, then the area, the enclosing group and the fit
  local check, area, holder, need, total = sc.check, sc.area, HOLDER[up], sc.nodes, sc.total_gpus
  local kept, length, count = walk.kept, walk.length, 0
  local room0 = budget - length + 1 -- characters for the kept groups' (feature + 1) each (as walk_one)
  local room = room0
  while true do
    local g = merged_next(cur)
    if g == nil then break end
    if left == 0 then
      walk.length = walked_length(length, room0 - room)
      return out_of_looks(sc, walk, g, cur, budget, unchecked_after, limit)
    end
    left = left - 1
    if g and (area == nil or allowed(sc, g)) and (inside == nil or inside[g.loc[holder]] == true) then
      local n, gp = 0, 0
      if check then n, gp = eligible(sc, g) end
      if not check or (n >= need and gp >= total) then
        local c, r = kept_one(kept, count, room, g, limit)
        if c == nil then
          walk.cut = true
          break
        end
        count, room = c, r
      end
    end
  end
  walk.length = walked_length(length, room0 - room)
  return walk
end

local function in_area(sc, g, inside, holder)
  -- whether g lies in the --locality-regions area and in the enclosing group (inside, read at g.loc[holder])
  return (sc.area == nil or allowed(sc, g)) and (inside == nil or inside[g.loc[holder]] == true)
end

local function walk_two(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
  -- walk_merged on two lists (most merged walks), its step inline: each list's next place in a local, a copy
  -- skipped (a look, as merged_next) where the other list has a larger one, ties to the first; the counts read in
  -- place as walk_one reads them
  local need, total, ok, class_gpus, sums = sc.nodes, sc.total_gpus, sc.ok, sc.class_gpus, sc.sums
  if not sc.check then need, total, ok, sums = 0, 0, false, nil end -- every group inside fits: counts unread
  local holder, pos, open = HOLDER[up], cur.pos, sc.area == nil and inside == nil
  local la, lb, xa, xb = cur.lists[1], cur.lists[2], cur.src.index[1], cur.src.index[2]
  local ia, ib, na, nb = pos[1], pos[2], #la, #lb
  local sign = KEY_SIGNS[cur.order][1]
  local pa, pb = key_of(la[ia], cur.order), key_of(lb[ib], cur.order)
  local kept, length, count = walk.kept, walk.length, 0
  local room0 = budget - length + 1
  local room = room0
  while true do
    local g, h
    if pa <= pb then
      g = la[ia]
      if g == nil then break end -- both lists ended
      ia = ia + 1
      pa = PAST_END
      if ia <= na then pa = sign * la[ia].nodes * RANK_UNIT + la[ia].rank end -- key_of, inline
      h = xb[g.feature]
      if h and h.nodes > g.nodes then g = false end
    else
      g = lb[ib]
      ib = ib + 1
      pb = PAST_END
      if ib <= nb then pb = sign * lb[ib].nodes * RANK_UNIT + lb[ib].rank end
      h = xa[g.feature]
      if h and h.nodes >= g.nodes then g = false end
    end
    if left == 0 then
      pos[1], pos[2] = ia, ib
      walk.length = walked_length(length, room0 - room)
      return out_of_looks(sc, walk, g, cur, budget, unchecked_after, limit)
    end
    left = left - 1
    if g and (open or in_area(sc, g, inside, holder)) then
      local n, gp
      if sums then
        local at = 2 * g.counts.id
        n, gp = sums[at - 1], sums[at]
      elseif ok then
        local counts = g.counts
        n, gp = 0, 0
        for k = 1, #counts, 2 do
          local idx = counts[k]
          if ok[idx] then
            local c = counts[k + 1]
            n, gp = n + c, gp + c * class_gpus[idx]
          end
        end
      else
        n, gp = g.nodes, g.gpus
      end
      if n >= need and gp >= total then
        local width = #g.feature + 1
        if count == limit or width > room then
          walk.cut = true
          break
        end
        room, count = room - width, count + 1
        kept[count] = g
      end
    end
  end
  pos[1], pos[2] = ia, ib
  walk.length = walked_length(length, room0 - room)
  return walk
end

local function nothing_fits(sc, src)
  -- whether no group of src can hold the job, known without a look: the request's classes are none of the
  -- fleet's (sc.none), or it asks for more GPUs than any group of the lists has (list.gpus_max: eligible GPUs are
  -- never more than a group's)
  if sc.none then return true end
  local total, lists = sc.total_gpus, src.lists
  if total == 0 then return false end
  for i = 1, #lists do
    local most = lists[i].gpus_max
    if most == nil or most >= total then return false end
  end
  return true
end

local function steps_left(cur)
  -- the steps a walk from the cursor takes to the end of its lists (a merged walk steps over every copy)
  local steps = 0
  for i = 1, #cur.lists do steps = steps + #cur.lists[i] - cur.pos[i] + 1 end
  return steps
end

local function walk_nothing(sc, walk, cur, left, limit, unchecked_after)
  -- the walk of a source none of whose groups can hold the job, as the walk ends without taking it: nothing kept;
  -- cut and counted in the bound when groups are left after its looks (out_of_looks). nil where that walk would
  -- take groups unchecked (a required level's): it is then walked
  if steps_left(cur) <= left then return walk end
  if unchecked_after then return nil end
  walk.cut = true
  if limit > 0 then walk.bound, sc.bounded = true, sc.bounded + 1 end
  return walk
end

function M.candidates(sc, src, budget, looks, inside, up, unchecked_after, limit)
  -- {kept, cut, bound, unchecked}: up to `limit` (64) groups of src that can hold the job within `budget`
  -- characters of bracket, looking at `looks` (LOOKS_LIST) groups at most; inside: the features of the zone or
  -- region (`up`) groups a group must lie in; unchecked_after: see take_unchecked
  local walk = { kept = {}, length = 2, cut = false, bound = false, unchecked = 0 }
  local cur = cursor(sc, src, false)
  local left = looks or LOOKS_LIST
  limit = limit or MAX_ALTERNATIVES
  local settled = sc.check and nothing_fits(sc, src) and walk_nothing(sc, walk, cur, left, limit, unchecked_after)
  if settled then return settled end
  if #src.lists == 1 and all_fit(sc, cur, inside) then
    return walk_all_fit(sc, walk, cur, budget, left, limit, unchecked_after)
  elseif #src.lists == 1 then
    return walk_one(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
  elseif #src.lists == 2 then
    return walk_two(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
  end
  return walk_merged(sc, walk, cur, budget, left, limit, unchecked_after, inside, up)
end

local function largest_first_one(sc, list, looks)
  -- largest_first on one list: read from its end in place (the same steps, no cursor_next call each)
  local out, n, area = {}, 0, sc.area
  for i = #list, math.max(1, #list - looks + 1), -1 do
    local g = list[i]
    if area == nil or allowed(sc, g) then
      n = n + 1
      out[n] = g
    end
  end
  return out
end

function M.largest_first(sc, src, looks)
  -- the groups of src inside the area from the largest down, at most `looks` steps: an array
  if #src.lists == 1 then return largest_first_one(sc, src.lists[1], looks) end
  local out, cur, left = {}, cursor(sc, src, true), looks
  while true do
    local g = cursor_next(cur)
    if g == nil then return out end
    if left == 0 then return out end -- by design (the largest are asked for): not counted in sc.bounded
    left = left - 1
    if g and (sc.area == nil or allowed(sc, g)) then out[#out + 1] = g end
  end
end

function M.largest(sc, src)
  -- the group with the most eligible (nodes, GPUs), from the largest down (LOOKS_LARGEST looks), none past a
  -- group smaller than the best found: group, nodes, GPUs (nil when there is none)
  -- (largest_first's steps, taken one at a time: none after the stop)
  local best, bn, bg
  local cur, left = cursor(sc, src, true), LOOKS_LARGEST
  while left > 0 do
    local g = cursor_next(cur)
    if g == nil then break end
    left = left - 1
    if g and (sc.area == nil or allowed(sc, g)) then
      if best ~= nil and g.nodes < bn then break end
      local n, gp = eligible(sc, g)
      if best == nil or n > bn or (n == bn and gp >= bg) then best, bn, bg = g, n, gp end -- ties: the first
    end
  end
  return best, bn, bg
end

-- The cascade ------------------------------------------------------------------------------------------------

function M.share(walk, alternatives, room)
  -- how many of a walk's kept groups the cascade takes with `alternatives` and `room` characters left, and the
  -- characters left; a walk that knows its length (its groups' (feature + 1) each, and one) is taken whole
  -- without a look at each where it fits
  local kept, length = walk.kept, walk.length
  local count = #kept
  if count == 0 then return 0, room end
  if length ~= nil and count <= alternatives and length - 1 <= room then return count, room - length + 1 end
  local last = math.min(#kept, alternatives)
  for i = 1, last do
    local width = #kept[i].feature + 1
    if width > room then return i - 1, room end
    room = room - width
  end
  return last, room
end
local share = M.share

function M.cascade(lists, left, extra, emit)
  -- policy/decide.py _cascade: one bracket from per-level walks given finest first, with left = {alternatives,
  -- room} (Slurm's limits less what comes before these lists); within them the coarsest are kept whole first, what
  -- does not fit dropped from the tail of the finest. A list whose share was counted as it was walked carries it
  -- (`taken`: prefer's levels, and `left` is then what remains after them). The first `extra` lists (zone unions)
  -- are counted last, in that order; emit: the lists' order in the bracket. (kept, cut)
  extra = extra or 0
  local alternatives, room, counts, cut = left.alternatives, left.room, {}, false
  for j = #lists, extra + 1, -1 do
    local n = lists[j].taken
    if n == nil then
      n, room = share(lists[j], alternatives, room)
      alternatives = alternatives - n
    end
    cut = cut or lists[j].cut or n < #lists[j].kept
    counts[j] = n
  end
  for j = 1, extra do
    local n
    n, room = share(lists[j], alternatives, room)
    alternatives = alternatives - n
    cut = cut or lists[j].cut or n < #lists[j].kept
    counts[j] = n
  end
  local out, n = {}, 0
  for i = 1, #lists do
    local j = emit and emit[i] or i
    local kept = lists[j].kept
    for k = 1, counts[j] do
      n = n + 1
      out[n] = kept[k]
    end
  end
  return out, cut
end

function M.bracket_text(kept)
  local names = {}
  for i = 1, #kept do names[i] = kept[i].feature end
  return "[" .. table.concat(names, "|") .. "]"
end

M.ORDERS = ORDERS
return M
