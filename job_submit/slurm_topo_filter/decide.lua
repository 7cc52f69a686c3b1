--[[
slurm_topo_filter/decide.lua - the decision (slurm_topo/policy/decide.py): the steps in order (hostile sizes,
the locality, the constraint, the regions, then prefer or a required level), the prefer cascade with its zone
unions, a required level's bracket and --prefer, named nodes, and what is said when no group can hold the job.

Every list is looked at through scan.lua's bounded walks (ARCHITECTURE.md "The work bound"); the rules here
remember nothing (memo.lua remembers whole decisions by the request's shape).
]]

local V = require("slurm_topo_filter.vocab")
local C = require("slurm_topo_filter.constraint")
local S = require("slurm_topo_filter.scan")
local N = require("slurm_topo_filter.nodes")
local place_named, PLACE_INDEX = N.place_named, N.PLACE_INDEX
local U = require("slurm_topo_filter.util")
local split, num = U.split, U.num

local MAX_ALTERNATIVES, MAX_CONSTRAINT, MAX_RECORD = V.MAX_ALTERNATIVES, V.MAX_CONSTRAINT, V.MAX_RECORD
local MAX_NAMED, MAX_VISITS = V.MAX_NAMED, V.MAX_VISITS
local LEVELS, LOCALITIES, MODES = V.LEVELS, V.LOCALITIES, V.MODES
local AUTO_LEVELS, AUTO_INDEX, BUDGET_PREFIX = V.AUTO_LEVELS, V.AUTO_INDEX, V.BUDGET_PREFIX
local AUTO_NO_LIMIT, AUTO_NO_PLAN, AUTO_NO_FIT, AUTO_WAITS = V.AUTO_NO_LIMIT, V.AUTO_NO_PLAN, V.AUTO_NO_FIT,
  V.AUTO_WAITS
local CONFLICT_NOTE, IMPLICIT_PARTITION, NVL_NONE, NVL_NONE_NOTE = V.CONFLICT_NOTE, V.IMPLICIT_PARTITION,
  V.NVL_NONE, V.NVL_NONE_NOTE
local PREFER_LEVELS, UNION_ZONES, UNION_EMIT, UNION_EMIT_FAMILIES = V.PREFER_LEVELS, V.UNION_ZONES, V.UNION_EMIT,
  V.UNION_EMIT_FAMILIES
local LOOKS_LIST, LOOKS_FINER, UNION_ROWS, UNION_TRIES, MAX_MERGED = V.LOOKS_LIST, V.LOOKS_FINER, V.UNION_ROWS,
  V.UNION_TRIES, V.MAX_MERGED
local record, safe, plural = V.record, V.safe, V.plural
local parse_constraint, counted, compose = C.parse_constraint, C.counted, C.compose
local needs, new_scan, label_of, eligible = S.needs, S.new_scan, S.label_of, S.eligible
local candidates, largest_first, cascade, bracket_text, share = S.candidates, S.largest_first, S.cascade,
  S.bracket_text, S.share
local level_source, values_source, named_source, has, NO_GROUPS = S.level_source, S.values_source, S.named_source,
  S.has, S.NO_GROUPS

local M = {}

local function describe_request(req)
  local nodes, gpus, _, gtype = needs(req)
  local text = plural(nodes, "node")
  if gpus > 0 then
    local t = ""
    if gtype then t = gtype .. " " end
    text = text .. " with " .. gpus .. " " .. t .. "GPU"
    if gpus ~= 1 then text = text .. "s" end
  end
  return text
end

local function union_label(u)
  -- a union's label for the record: its zones' labels joined by "+"
  local label = (u.ga.label or label_of(u.ga)) .. "+" .. (u.gb.label or label_of(u.gb))
  if u.gc then label = label .. "+" .. (u.gc.label or label_of(u.gc)) end
  return label
end

local function shown(sc, kept, cut)
  -- the record's list, label(Nn) each (N: the eligible nodes, a union's its own): formatting stops once past
  -- the record's 200 characters (same text after the cut)
  local parts, length = {}, 0
  for i = 1, #kept do
    if length > MAX_RECORD then break end
    local g = kept[i]
    local n, label = g.nodes, g.label
    if g.union then
      label = union_label(g)
    else
      n, label = eligible(sc, g), label or label_of(g)
    end
    local part = label .. "(" .. num(n) .. "n)"
    parts[i] = part
    length = length + #part + 1
  end
  local text = "[" .. table.concat(parts, ",") .. "]"
  if cut then text = "first " .. #kept .. " kept (Slurm's limits) " .. text end
  return text
end

local function bound_tag(sc, unchecked)
  -- the record's word on the work bound, before its list (the record is cut at 200 characters): how many walks
  -- of this decision stopped at their looks, and whether a required level's bracket was taken unchecked
  if sc.bounded == 0 then return "" end
  local s, fit = "s", ""
  if sc.bounded == 1 then s = "" end
  if unchecked and unchecked > 0 then fit = "; fit not checked" end
  return " [bound: " .. sc.bounded .. " walk" .. s .. " cut" .. fit .. "]"
end

local function terms(...)
  local out = {}
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if t then out[#out + 1] = t end
  end
  return out
end

local function compose_with(c, restrict, bracket_text)
  -- compose(c, terms(restrict, bracket_text)) without the tables when there is nothing to compose with
  if c.kind == "none" and not restrict then return bracket_text end
  return compose(c, terms(restrict, bracket_text))
end

local function conflict(loc, mode, what, msg)
  -- the user's constraint and a required locality cannot be combined: refused at submit in every mode (a
  -- required level is a promise: never passed through unenforced); prefer never gets here
  return { action = "reject", locality = loc, message = msg .. CONFLICT_NOTE, record = record(loc .. ": rejected, "
    .. what .. " conflict"), rejection = "request" }
end

local function locality_of(data, req, names)
  -- (level, mode): the job's own, else its partition's default, else the cluster's; a bad one is rejected
  local locality = req.locality
  if locality == nil then
    for _, p in ipairs(names) do
      if data.partition_defaults[p] then
        locality = data.partition_defaults[p]
        break
      end
    end
    locality = locality or data.default
  end
  local level, mode = string.match(locality, "^([^:]*):(.*)$")
  if level == nil then level, mode = locality, "wait" end -- "zone:" is refused, as the SPANK plugin refuses it
  if level == "nvl" and not MODES[mode] then -- nvl:segment=N...: read only here (every decision comes by)
    local size, policy, smode = V.parse_segment(locality)
    if size then return "nvl", smode, size, policy end
    if size == false then
      return nil, nil, nil, nil, { action = "reject", locality = safe(locality), message = "slurm-topo: "
               .. V.SEGMENT_ADVICE, record = record("rejected locality '" .. safe(locality) .. "'"),
               rejection = "request" }
    end
  end
  if not LOCALITIES[level] or not MODES[mode] or (level == "nvl" and mode == "auto") then
    local advice = "unknown locality '" .. safe(locality) .. "' (use prefer|nvl|network_group|zone|"
      .. "region|any, optionally :wait, :fail or :auto; nvl takes :wait or :fail)"
    if locality == "nvl:auto" then -- policy/vocab.py locality_advice
      advice = "--locality=nvl:auto: an NVLink domain has no looser level to relax to; use nvl (waits) or "
        .. "nvl:fail, or LEVEL:auto with LEVEL network_group, zone or region"
    end
    return nil, nil, nil, nil, { action = "reject", locality = safe(locality), message = "slurm-topo: " .. advice,
             record = record("rejected locality '" .. safe(locality) .. "'"), rejection = "request" }
  end
  return level, mode
end

local function partition_names(data, req)
  -- (the job's partitions as named, the data's partitions counted for them, the first name the data does not
  -- know: counted as every node, never a silent no-op)
  local names
  if req.partition then
    names = split(req.partition, ",")
  else
    names = data.default_names -- { default partition } (data.lua prepare; shared, read-only)
  end
  if #names == 1 and data.partitions[names[1]] ~= nil then return names, names, nil end -- the common case
  local unknown
  local resolved, seen = {}, {}
  for _, p in ipairs(names) do
    if data.partitions[p] == nil then
      unknown = unknown or p
      p = data.everywhere
    end
    if not seen[p] then
      seen[p] = true
      resolved[#resolved + 1] = p
    end
  end
  return names, resolved, unknown
end

local function unknown_feature(data, c, is_counted)
  -- the first feature of the user's constraint that no node has (Slurm rejects it: say so)
  if not is_counted or (c.kind ~= "and" and c.kind ~= "or" and c.kind ~= "bracket") then return nil end
  local known = data.known
  for _, n in ipairs(c.names) do
    if not known[n] then return safe(n) end
  end
  return nil
end

local function area_of(data, req, loc)
  -- --locality-regions: the term ANDed in, the area's features, its regions; unknown names are rejected
  if req.regions == nil then return nil, nil, nil end
  local names, seen = {}, {}
  for _, r in ipairs(split(req.regions, ",")) do
    if r ~= "" and not seen[r] then
      seen[r] = true
      names[#names + 1] = r
    end
  end
  local bad
  for _, r in ipairs(names) do
    if data.areas[r] == nil then
      bad = r
      break
    end
  end
  if bad ~= nil or #names == 0 then
    local s = safe(bad or req.regions)
    return nil, nil, nil, { action = "reject", locality = loc,
             message = "slurm-topo: --locality-regions: '" .. s .. "' is not a region or zone of this cluster",
             record = record(loc .. ": unknown region '" .. s .. "'"), rejection = "request" }
  end
  local feats, fseen, area_features, wanted = {}, {}, {}, {}
  for _, r in ipairs(names) do
    for _, f in ipairs(data.areas[r].f) do
      if not fseen[f] then
        fseen[f] = true
        feats[#feats + 1] = f
        area_features[f] = true
      end
    end
    for region in pairs(data.areas[r].r) do wanted[region] = true end
  end
  if #feats == 1 then return feats[1], area_features, wanted end
  return "(" .. table.concat(feats, "|") .. ")", area_features, wanted
end

local decide_inner, decide_prefer, decide_required, nothing_holds, named_nodes, required_prefer, segments

local function many_partitions(loc, level, count)
  -- a -p list of more partitions than the filter merges: prefer leaves the job alone, a required level is refused
  if level == "prefer" then
    return { action = "unchanged", locality = loc,
             record = record("prefer: " .. count .. " partitions (over " .. MAX_MERGED .. "); unchanged") }
  end
  return { action = "reject", locality = loc, rejection = "request",
           message = "slurm-topo: --locality=" .. loc .. ": the job names " .. count .. " partitions; slurm-topo "
             .. "checks a " .. level .. " over at most " .. MAX_MERGED .. ": name fewer partitions, or use "
             .. "--locality=prefer",
           record = record(loc .. ": rejected; " .. count .. " partitions (over " .. MAX_MERGED .. ")") }
end
local LOC = {} -- "level:mode", built once
for level in pairs(LOCALITIES) do
  LOC[level] = { wait = level .. ":wait", fail = level .. ":fail", auto = level .. ":auto" }
end
local RECORD_ANY = record("any")

function M.budget_record(level, limit, units)
  -- an auto job's budget record from its time limit (seconds) and its data row (policy/vocab.py budget_record)
  local parts = { BUDGET_PREFIX .. level .. " limit=" .. limit .. "s" }
  local at = AUTO_INDEX[level]
  for i = at + 1, #AUTO_LEVELS do
    parts[#parts + 1] = AUTO_LEVELS[i] .. "=" .. math.floor(limit * units[i - at] + 0.5) .. "s"
  end
  return table.concat(parts, " ")
end

local function with_budget(data, req, d)
  -- LEVEL:auto decides as :wait; a job given its level's bracket also gets the budget record (docs/relax.md)
  local level, mode = string.match(d.locality or "", "^([%a_]+):(%a+)$")
  if mode ~= "auto" or not AUTO_INDEX[level] or d.action ~= "amend" then return d end
  local why
  if req.time_limit == nil then
    why = AUTO_NO_LIMIT
  elseif data.auto_units == nil or data.auto_units[level] == nil then
    why = AUTO_NO_PLAN
  else
    local units = data.auto_units[level][math.min(req.min_nodes or 1, data.auto_max)]
    if units then
      d.record = d.record .. "; " .. M.budget_record(level, req.time_limit * 60, units)
    else
      why = AUTO_NO_FIT
    end
  end
  if why ~= nil then -- no budget: the record says why, and so does the submitter's stderr
    d.record = d.record .. why
    local note = "slurm-topo: --locality=" .. level .. ":auto: " .. AUTO_WAITS[why] .. ", so no budget: the job "
      .. "waits as " .. level .. ":wait"
    d.message = d.message == nil and note or (d.message .. "; " .. note)
  end
  return d
end

function M.decide(data, req)
  -- the job's decision: {action = amend|hold|reject|unchanged, locality, features, prefer, message, record,
  -- rejection, kept}
  local d = decide_inner(data, req)
  if req.het_offset ~= nil and d.action ~= "unchanged" then
    local note = " [het+" .. req.het_offset .. ": components are placed separately]"
    local rec = d.record
    if #rec + #note > MAX_RECORD then rec = string.sub(rec, 1, MAX_RECORD - #note - 3) .. "..." end
    d.record = rec .. note
  end
  return with_budget(data, req, d)
end

decide_inner = function(data, req)
  -- the steps in order: hostile sizes, the locality, the constraint, the regions, then prefer or a required
  -- level; each step returns a decision when it settles the job
  local oversize = req.oversize
  if oversize == nil and req.features ~= nil and #req.features > MAX_CONSTRAINT then
    oversize = "--constraint" -- a request not read from a job_desc (an update's merge)
  end
  if oversize ~= nil then
    return { action = "unchanged", locality = "", record = record("request too large (" .. oversize
      .. "); unchanged") }
  end
  local names, partitions, unknown = partition_names(data, req)
  local level, mode, size, policy, rejected = locality_of(data, req, names)
  if rejected then return rejected end
  if level == "nvl" and size == nil and data.nvl_segment then -- the site's segment for nvl jobs
    size, policy = V.parse_segment("nvl:" .. V.SEGMENT_KEY .. data.nvl_segment)
  end
  local loc = LOC[level][mode]
  if level == "any" and req.regions == nil then
    return { action = "unchanged", locality = loc, record = RECORD_ANY }
  end
  if #partitions > MAX_MERGED and level ~= "any" then return many_partitions(loc, level, #partitions) end
  local c = parse_constraint(req.features)
  if c.kind == "invalid" then
    return { action = "unchanged", locality = loc, record = record(loc .. ": constraint not understood; unchanged") }
  end
  local is_counted = counted(c, data.owned) -- a feature slurm-topo makes is known, never counted
  local missing = unknown_feature(data, c, is_counted)
  if missing then
    return { action = "unchanged", locality = loc,
             message = "slurm-topo: --constraint: no node of this cluster has the feature '" .. missing
               .. "' (Slurm rejects it); --locality=" .. level .. " not applied",
             record = record(loc .. ": unknown feature '" .. missing .. "'; unchanged") }
  end
  local restrict, area_features, wanted, bad_area = area_of(data, req, loc)
  if bad_area then return bad_area end
  local note = ""
  if req.unchecked then
    note = "; fit not checked (" .. req.unchecked .. ")"
  elseif not is_counted then
    note = "; fit not checked (constraint)"
  end
  if unknown ~= nil and level ~= "prefer" and level ~= "any" and data.default_partition ~= IMPLICIT_PARTITION then
    -- the data knows the partitions, not this one: a bracket from every node could name groups outside it
    return { action = "reject", locality = loc, rejection = "request",
             message = "slurm-topo: --locality=" .. loc .. ": partition '" .. safe(unknown) .. "' is not in "
               .. "slurm-topo's data (created after its last run?), so its " .. level .. "s cannot be checked; "
               .. "the next `slurm-topo apply` learns it (an administrator can run it now), or submit to another "
               .. "partition",
             record = record(loc .. ": rejected; partition '" .. safe(unknown) .. "' not in the data") }
  end
  if unknown ~= nil then note = note .. "; partition '" .. safe(unknown) .. "' not in the data: all nodes counted" end
  local job = { data = data, req = req, c = c, loc = loc, level = level, mode = mode, partitions = partitions,
                note = note, restrict = restrict, scan = new_scan(data, req, c, is_counted, area_features, wanted),
                size = size, policy = policy }
  if level == "prefer" or level == "any" then return decide_prefer(job) end
  return decide_required(job)
end

-- Zone unions (policy/decide.py _zone_unions): alternatives "(zone_a|zone_b[|zone_c])" of 2-3 zones that can
-- ever hold the job; Slurm reads a parenthesised OR inside a matching-OR bracket as one alternative. Made from the
-- UNION_ROWS largest zones with eligible nodes, the UNION_ZONES with the most per region (unions inside one region,
-- never all of its zones: that is the region's own alternative) and per family value across regions; at most
-- UNION_TRIES combinations in all; each list by (regions, zones, size, features).

local function row_before(a, b)
  -- the rows' order: most eligible nodes first, then the smaller zone, then the data's rank
  if a.n ~= b.n then return a.n > b.n end
  if a.g.nodes ~= b.g.nodes then return a.g.nodes < b.g.nodes end
  return a.g.rank < b.g.rank
end

local function zone_rows(sc, zones)
  -- the UNION_ROWS largest zones with eligible nodes, in row order
  local rows, down = {}, largest_first(sc, zones, UNION_ROWS)
  for i = 1, #down do
    local g = down[i]
    local n, gp = eligible(sc, g)
    if n > 0 then rows[#rows + 1] = { g = g, n = n, gp = gp, region = g.loc.region or false } end
  end
  table.sort(rows, row_before)
  return rows
end

local function too_large_for_unions(sc, zones)
  -- whether the job has more nodes than any three zones together (the three largest of each partition's list
  -- bound every union's nodes): then no union is tried and no row read (policy/decide.py)
  local top = {}
  for _, list in ipairs(zones.lists) do
    for i = math.max(1, #list - 2), #list do top[#top + 1] = list[i].nodes end
  end
  table.sort(top)
  local sum = 0
  for i = math.max(1, #top - 2), #top do sum = sum + top[i] end
  return sum < sc.nodes
end

local function too_large_for_rows(sc, rows)
  -- whether no union of the rows can hold the job: more nodes or GPUs than the three rows with the most of them
  -- (a union's eligible counts are its rows' sums); then no combination is tried
  local top_n, g1, g2, g3 = 0, 0, 0, 0
  for i = 1, #rows do
    local r = rows[i]
    if i <= 3 then top_n = top_n + r.n end -- rows come most eligible nodes first
    local gp = r.gp
    if gp > g1 then g1, g2, g3 = gp, g1, g2 elseif gp > g2 then g2, g3 = gp, g2 elseif gp > g3 then g3 = gp end
  end
  return top_n < sc.nodes or g1 + g2 + g3 < sc.total_gpus
end

local function grouped(rows)
  -- the rows by (region, family value) and by family value, each key in the order of its first row; and each
  -- value's regions (a new (region, value) list is one more region of the value)
  local regions, by_region, values, by_family, spread = {}, {}, {}, {}, {}
  for i = 1, #rows do
    local r = rows[i]
    local loc = r.g.loc
    local fv = loc.family or false
    local per = by_region[loc.region or false]
    if per == nil then
      per = {}
      by_region[loc.region or false] = per
    end
    local list = per[fv]
    if list == nil then
      list = {}
      per[fv] = list
      regions[#regions + 1] = list
      spread[fv] = (spread[fv] or 0) + 1
    end
    list[#list + 1] = r
    local fam = by_family[fv]
    if fam == nil then
      fam = {}
      by_family[fv] = fam
      values[#values + 1] = fv
    end
    fam[#fam + 1] = r
  end
  return regions, by_family, values, spread
end

local ALL_CLASSES = {} -- the rows' key where every class counts (sc.ok false)
local KEPT_ROWS = 32 -- class sets whose rows one source keeps (then it starts over)

local function rows_of(sc, zones)
  -- zone_rows and their grouping: the same for every request of one source and class set where no area narrows
  -- them, so a source kept per data table (one partition's: scan.lua source_of) keeps them per set (read only)
  local kept = sc.area == nil and zones.kept
  local set = sc.ok or ALL_CLASSES
  local r = kept and kept[set]
  if not r then
    local rows = zone_rows(sc, zones)
    local regions, by_family, values, spread = grouped(rows)
    r = { rows, regions, by_family, values, spread }
    if kept then
      if kept.count >= KEPT_ROWS then
        kept = { count = 0 }
        zones.kept = kept
      end
      kept[set], kept.count = r, kept.count + 1
    end
  end
  return r[1], r[2], r[3], r[4], r[5]
end

local function add_union(sc, out, cross, a, b, c)
  -- the union of rows a, b (and c) when it holds the job (its rows' sums: the nodes and the GPUs, as holds);
  -- across regions only when it spans two or more. Every union that holds is counted (out.made); it is made
  -- (a table and its text) only where the bracket could take it (out.cap, union_cap): a list's pairs come before
  -- its triples (sort_unions: by span), so triples are not made once its pairs are more than the cap, and with
  -- a cap of 0 one union stands for all (the record says unions held; the bracket takes none). Its label is made
  -- only if the record shows it (union_label)
  local ra, rb = a.region, b.region -- (a row's region: zone_rows)
  local spread = (ra == rb) and 1 or 2
  local n, gp = a.n + b.n, a.gp + b.gp
  if c ~= nil then
    local rc = c.region
    if rc ~= ra and rc ~= rb then spread = spread + 1 end
    n, gp = n + c.n, gp + c.gp
  end
  if (cross and spread < 2) or n < sc.nodes or gp < sc.total_gpus then return end
  out.made = out.made + 1
  local cap = out.cap
  if #out > 0 and (cap == 0 or (c ~= nil and out.pairs > cap)) then return end -- counted, not made
  local feature, gc
  if c ~= nil then
    feature, gc = "(" .. a.g.feature .. "|" .. b.g.feature .. "|" .. c.g.feature .. ")", c.g
  else
    feature, out.pairs = "(" .. a.g.feature .. "|" .. b.g.feature .. ")", out.pairs + 1
  end
  -- union: its span (regions, zones) as one number, regions * 4 + zones (sort_unions, spread_key)
  out[#out + 1] = { union = spread * 4 + (c and 3 or 2), nodes = n, feature = feature, ga = a.g, gb = b.g, gc = gc }
end

local function add_unions(sc, rows, cross, k, out, tries)
  -- unions of k of rows (the first UNION_ZONES) that can hold the job, in itertools.combinations order; each
  -- combination takes one try
  local m = math.min(#rows, UNION_ZONES)
  if not cross and k >= m then return end
  for i = 1, m do
    for j = i + 1, m do
      if k == 2 then
        if tries.left == 0 then return end
        tries.left = tries.left - 1
        add_union(sc, out, cross, rows[i], rows[j])
      else
        for l = j + 1, m do
          if tries.left == 0 then return end
          tries.left = tries.left - 1
          add_union(sc, out, cross, rows[i], rows[j], rows[l])
        end
      end
    end
  end
end

-- sort_unions' and spread_key's digits: an index into a list (kept: at most 64; a union list: at most
-- UNION_TRIES, under INDEX_UNIT: tests/test_lua_constants.py) and a union's eligible nodes (a fleet holds at most 262 144 nodes, under 2^21); every key stays an
-- exact integer under 2^53
local INDEX_UNIT = MAX_ALTERNATIVES * 2
local SIZE_UNIT = INDEX_UNIT * INDEX_UNIT * INDEX_UNIT

local function by_feature(list, i, j)
  -- list[i..j] (unions of one span and size) by feature: insertion, the runs are short
  for a = i + 1, j do
    local u, b = list[a], a - 1
    while b >= i and u.feature < list[b].feature do
      list[b + 1] = list[b]
      b = b - 1
    end
    list[b + 1] = u
  end
end

local function sort_unions(list, families)
  -- policy/decide.py _union_order: by span (regions, zones), then size (the largest first with families), then
  -- feature. Each union's span, size and place as one number, sorted by table.sort's own comparison (a Lua
  -- comparator's call costs more than the rest of the sort), then runs of one span and size by feature
  local n = #list
  local keys = {}
  for i = 1, n do
    local u = list[i]
    keys[i] = (u.union * SIZE_UNIT + (families and SIZE_UNIT - u.nodes or u.nodes)) * INDEX_UNIT + i
  end
  table.sort(keys)
  local from = { unpack(list, 1, n) }
  for i = 1, n do list[i] = from[keys[i] % INDEX_UNIT] end
  local i = 1
  while i < n do
    local j, u = i, list[i]
    while j < n and list[j + 1].union == u.union and list[j + 1].nodes == u.nodes do j = j + 1 end
    if j > i then by_feature(list, i, j) end
    i = j + 1
  end
end

local function as_walk(list, families)
  sort_unions(list, families)
  return { kept = list, cut = false }
end

local function region_spans(spans, regions)
  -- the region buckets' spans (one region, its zones with eligible nodes among the rows: policy/decide.py
  -- _spans; a union's span is its own spread and k)
  for _, list in ipairs(regions) do
    local parent = list[1].g.loc.region_parent
    if parent then spans[parent] = { 1, #list } end
  end
end

local EMPTY_WALK = { kept = {}, cut = false } -- shared, read-only

local function union_cap(rows, left)
  -- the most unions the cascade can take (scan.lua cascade: the unions are counted last, with the alternatives
  -- and characters the level lists left): each is at least "(a|b)" of the two shortest zone features, and one
  -- separator
  local shortest = math.huge
  for i = 1, #rows do
    local w = #rows[i].g.feature
    if w < shortest then shortest = w end
  end
  local width = 2 * shortest + 4
  return math.min(left.alternatives, (left.room - left.room % width) / width)
end

local function zone_unions(sc, zones, room, left)
  -- (unions inside one region, unions across regions, the lead row, the spans by feature); room: the
  -- alternatives the level walks left (a union list is not grown past it); left: what the cascade leaves them
  if not sc.check or room <= 0 or too_large_for_unions(sc, zones) then -- no union could be kept
    return EMPTY_WALK, EMPTY_WALK, nil, {}
  end
  local rows, regions, by_family, values, spread = rows_of(sc, zones)
  local cap = union_cap(rows, left)
  local tries = { left = UNION_TRIES }
  local inside, across = { made = 0, pairs = 0, cap = cap }, { made = 0, pairs = 0, cap = cap }
  local unite = not too_large_for_rows(sc, rows) -- else no union holds it: none is tried (the spans still are)
  for k = 2, 3 do
    if not unite or inside.made >= room then break end
    for _, list in ipairs(regions) do add_unions(sc, list, false, k, inside, tries) end
  end
  -- per family value (one, false, without families): its zones in two regions or more; a union of all of them is
  -- the bare value's (the plain tree's) own alternative and is not made
  local tops = {}
  for _, fv in ipairs(values) do
    if spread[fv] >= 2 then tops[#tops + 1] = by_family[fv] end
  end
  for k = 2, 3 do
    if not unite or #tops == 0 or inside.made + across.made >= room then break end
    for _, top in ipairs(tops) do
      if k < #top then add_unions(sc, top, true, k, across, tries) end
    end
  end
  local spans = {}
  for _, fv in ipairs(values) do
    if fv then spans[fv] = { spread[fv], #by_family[fv] } end
  end
  local families = values[1] ~= false or values[2] ~= nil
  if families then region_spans(spans, regions) end -- spans are read with families only
  local lead = rows[1] and rows[1].g
  return as_walk(inside, families), as_walk(across, families), lead, spans
end

local function spread_key(g, spans, i)
  -- policy/decide.py _spread_key as one number (sorted without a comparator): (regions, zones) — a union's its
  -- own, a region bucket or value's from spans, a region bucket no row counted (1, 64), else (64, 64) —, unions
  -- before the rest, a union's size, then the order they came in (i)
  local r, z, u, size = MAX_ALTERNATIVES, MAX_ALTERNATIVES, 1, 0
  local span = g.union
  if span then
    r, z, u, size = (span - span % 4) / 4, span % 4, 0, g.nodes
  elseif spans[g.feature] then
    r, z = spans[g.feature][1], spans[g.feature][2]
  elseif g.loc and g.loc.region and not g.loc.zone then
    r = 1
  end
  return (((r * INDEX_UNIT + z) * 2 + u) * SIZE_UNIT + size) * INDEX_UNIT + i
end

local function by_spread(kept, spans)
  -- policy/decide.py _by_spread: the bracket's tail (unions inside a region, region buckets, unions across
  -- regions, the bare family values) by the (regions, zones) each spans, unions before a bucket or value of the
  -- same span, smallest first
  local start = #kept + 1
  for i = 1, #kept do
    if kept[i].union or spans[kept[i].feature] ~= nil then
      start = i
      break
    end
  end
  local keys, gs = {}, {}
  for i = start, #kept do keys[#keys + 1] = spread_key(kept[i], spans, i) end
  table.sort(keys)
  for j = 1, #keys do gs[j] = kept[keys[j] % INDEX_UNIT] end
  for j = 1, #gs do kept[start - 1 + j] = gs[j] end
end

local function bracket_length(kept)
  local length = 1
  for i = 1, #kept do length = length + #kept[i].feature + 1 end
  return length
end

local function lead_bracket(kept, lead, budget)
  -- policy/decide.py _lead: a bracket must not start with a union (22.05's submit check narrows the usable nodes
  -- to the union's first zone); the largest zone leads instead, the last unions (then the last alternatives)
  -- giving way when that breaks the limits
  if #kept == 0 or not kept[1].union or lead == nil then return kept, false end
  table.insert(kept, 1, lead)
  local cut = false
  while #kept > MAX_ALTERNATIVES or bracket_length(kept) > budget do
    local last = #kept
    for i = #kept, 2, -1 do
      if kept[i].union then
        last = i
        break
      end
    end
    table.remove(kept, last)
    cut = true
  end
  return kept, cut
end

local function prefer_walks(job, budget)
  -- the walks of the cascade (given finest first), walked coarsest first (the order the cascade keeps them in),
  -- each for at most what the cascade can still take and one more (policy/decide.py _coarsest_first); their
  -- names, and whether the fleet has families
  local data, partitions, sc = job.data, job.partitions, job.scan
  local values = values_source(data, partitions)
  local sources, names = {}, {}
  for i, lvl in ipairs(PREFER_LEVELS) do
    sources[i], names[i] = NO_GROUPS, lvl
    if not (lvl == "nvl" and values) then sources[i] = level_source(data, partitions, lvl) end
  end
  if values then sources[#sources + 1], names[#names + 1] = values, "family" end
  local walks, alternatives, room = {}, MAX_ALTERNATIVES, budget - 1
  for j = #sources, 1, -1 do
    walks[j] = candidates(sc, sources[j], budget, LOOKS_LIST, nil, nil, false, alternatives + 1)
    local n
    n, room = share(walks[j], alternatives, room)
    walks[j].taken, alternatives = n, alternatives - n
  end
  return walks, names, values ~= nil, { alternatives = alternatives, room = room }
end

local function levels_used(walks, names)
  local used, seen = {}, {}
  for i, w in ipairs(walks) do
    if #w.kept > 0 and not seen[names[i]] then
      seen[names[i]] = true
      used[#used + 1] = names[i]
    end
  end
  return used
end

local function prefer_cascade(job, budget)
  -- kept, cut, levels used ("nvl+network_group+..."): the prefer bracket's alternatives
  local sc = job.scan
  local walks, names, families, left = prefer_walks(job, budget)
  local room = MAX_ALTERNATIVES
  for _, w in ipairs(walks) do room = room - #w.kept end
  if room < 0 then room = 0 end
  local inside, across, lead, spans = zone_unions(sc, level_source(job.data, job.partitions, "zone"), room, left)
  local parts = { inside, across }
  for _, w in ipairs(walks) do parts[#parts + 1] = w end
  -- the level lists' shares are the walks' own (taken, left): only the unions are counted here
  local kept, cut = cascade(parts, left, 2, families and UNION_EMIT_FAMILIES or UNION_EMIT)
  if families then by_spread(kept, spans) end
  local led_cut
  kept, led_cut = lead_bracket(kept, lead, budget)
  walks[#walks + 1], names[#names + 1] = inside, "unions"
  walks[#walks + 1], names[#names + 1] = across, "unions"
  return kept, cut or led_cut, table.concat(levels_used(walks, names), "+")
end

decide_prefer = function(job)
  -- prefer (and any with regions): never delays the job; --prefer at the finest level some group fits
  local c, loc, restrict, req = job.c, job.loc, job.restrict, job.req
  local base
  if restrict then
    base = compose(c, { restrict })
    if base == nil then
      return { action = "unchanged", locality = loc,
               message = "slurm-topo: --locality-regions cannot be combined with your constraint; job left "
                 .. "unchanged",
               record = record(loc .. ": regions conflict; unchanged") }
    end
  end
  if job.level == "any" then
    return { action = "amend", locality = loc, features = base, record = record("any; regions " .. restrict) }
  end
  local why
  if req.prefer ~= nil then
    why = "your --prefer kept"
  elseif c.kind == "bracket" or c.kind == "complex" then
    why = "constraint has brackets or parentheses"
  else
    local probe = compose_with(c, restrict, "[]")
    local kept, cut, used = prefer_cascade(job, MAX_CONSTRAINT - #probe + 2)
    if #kept > 0 then
      return { action = "amend", locality = loc, features = base,
               prefer = compose_with(c, restrict, bracket_text(kept)),
               record = record("prefer " .. used .. bound_tag(job.scan) .. " " .. shown(job.scan, kept, cut) .. job.note),
               kept = kept }
    end
    why = "no group fits; topology/tree packs"
  end
  local action = "unchanged"
  if base then action = "amend" end
  return { action = action, locality = loc, features = base, record = record("prefer: " .. why) }
end

local function user_bracket(job, src)
  -- the names of the user's own bracket, all groups of the level, or a conflict
  local c, level = job.c, job.level
  if c.kind ~= "bracket" then return nil end
  local only, seen = {}, {}
  for _, x in ipairs(c.inside) do
    if not has(src, x) then
      return nil, conflict(job.loc, job.mode, "bracket", "slurm-topo: --locality=" .. level .. ": the brackets in "
        .. "your constraint are not all " .. level .. " groups (Slurm allows one bracket set)")
    end
    if not seen[x] then
      seen[x] = true
      only[#only + 1] = x
    end
  end
  return only
end

local function probe_conflict(job, probe)
  local level = job.level
  if probe == nil then
    return conflict(job.loc, job.mode, "constraint", "slurm-topo: --locality=" .. level .. ": your constraint cannot "
      .. "be combined with a " .. level .. " bracket")
  end
  if #probe >= MAX_CONSTRAINT then
    return conflict(job.loc, job.mode, "length", "slurm-topo: --locality=" .. level .. ": your constraint leaves no "
      .. "room for a " .. level .. " bracket (Slurm's " .. MAX_CONSTRAINT .. "-character limit)")
  end
  return nil
end

local function within_only(only, within)
  if only == nil then return true end
  for _, x in ipairs(only) do
    if x == within then return true end
  end
  return false
end

decide_required = function(job)
  -- nvl / network_group / zone / region: the matching-OR bracket of the groups that can ever hold the job
  local level, loc = job.level, job.loc
  local src = level_source(job.data, job.partitions, level)
  local only, bad = user_bracket(job, src)
  if bad then return bad end
  local probe = compose_with(job.c, job.restrict, "[]")
  bad = probe_conflict(job, probe)
  if bad then return bad end
  local rejected, named, within = named_nodes(job)
  if rejected then return rejected end
  if within ~= nil and within_only(only, within) and has(src, within) then
    only = { within } -- the named nodes are in one group: the job's other nodes come from it too
  end
  local walked = src
  if only ~= nil then walked = named_source(src, only) end
  local budget = MAX_CONSTRAINT - #probe + 2
  local w = candidates(job.scan, walked, budget, LOOKS_LIST, nil, nil, true)
  if #w.kept == 0 and level == "nvl" and (job.size or job.req.user_segment) then return segments(job, walked) end
  if #w.kept == 0 then return nothing_holds(job, walked) end
  local kept_text = bracket_text(w.kept)
  local prefer = required_prefer(job, w.kept, kept_text, budget) -- before the record: its walks count there
  return { action = "amend", locality = loc, features = compose_with(job.c, job.restrict, kept_text),
           prefer = prefer, message = named,
           record = record(loc .. bound_tag(job.scan, w.unchecked) .. " " .. shown(job.scan, w.kept, w.cut) .. job.note),
           kept = w.kept }
end

local LEVEL_INDEX = { network_group = 1, zone = 2, region = 3 }
local UP = { zone = "zone", region = "region" }

required_prefer = function(job, kept, kept_text, budget)
  -- a required zone or region also gets --prefer=<hard>&[finer groups inside the kept ones...|the kept ones]:
  -- every alternative lies inside one group of the level; nil with the user's own --prefer, or when nothing finer
  -- can hold the job (the --prefer would repeat the constraint). Each finer list looks at LOOKS_FINER groups.
  -- The cascade keeps the kept groups whole (their bracket, kept_text, fits the same budget: every one is taken,
  -- the coarsest list first), then what of the finer lists fits; the bracket lists the finest first and the kept
  -- groups last.
  local level = job.level
  if job.req.prefer ~= nil or UP[level] == nil then return nil end -- network_group, nvl: nothing finer inside
  local inside = {}
  for i = 1, #kept do inside[kept[i].feature] = true end
  local lists, finer = {}, false
  for i = 1, LEVEL_INDEX[level] - 1 do
    lists[i] = candidates(job.scan, level_source(job.data, job.partitions, LEVELS[i]), budget, LOOKS_FINER, inside,
      UP[level])
    finer = finer or #lists[i].kept > 0
  end
  if not finer then return nil end
  -- what the kept groups leave: alternatives, and characters (theirs are #kept_text - 1, of budget - 1)
  local taken = cascade(lists, { alternatives = MAX_ALTERNATIVES - #kept, room = budget - #kept_text })
  if #taken == 0 then return compose_with(job.c, job.restrict, kept_text) end
  local text = "[" .. string.sub(bracket_text(taken), 2, -2) .. "|" .. string.sub(kept_text, 2, -2) .. "]"
  return compose_with(job.c, job.restrict, text)
end

-- Why a --nodelist cannot be checked (nodes.lua place_named): the message's words and the record's
-- (policy/decide.py _NAMED_PROBLEMS)
local NAMED_PROBLEMS = {
  long = { "is longer than %s bytes", "too long" },
  unread = { "is not a node list slurm-topo reads (names and name[lo-hi,n] ranges, separated by commas or spaces)",
             "not read" },
  many = { "names more nodes than slurm-topo checks (%s: the cluster's nodes, at most " .. MAX_VISITS .. ")",
           "too many" },
  unknown = { "names %s, which is not in slurm-topo's data", "node not in the data" },
}

local function refused(job, why, short)
  -- a --nodelist refused with a required level (every mode: the request itself)
  return { action = "reject", locality = job.loc, rejection = "request",
           message = "slurm-topo: --locality=" .. job.loc .. ": " .. why,
           record = record(job.loc .. ": rejected; " .. short) }
end

named_nodes = function(job)
  -- --nodelist / --exclude with a required level: (a refusal, a note for the user, the one group the named nodes
  -- are in). Refused when the named nodes are in two groups of the level, when one is in none, and when the list
  -- cannot be checked (read, counted or placed): a required level is never passed unchecked
  local level, loc, req = job.level, job.loc, job.req
  if req.nodelist == nil then
    if req.unchecked == "--exclude" then
      return nil, "slurm-topo: --locality=" .. loc .. ": with --exclude, whether a " .. level
        .. " can still hold the job is not checked"
    end
    return nil, nil
  end
  local groups, homeless, problem, name, limit = place_named(job.data, req.nodelist, PLACE_INDEX[level])
  if #groups > 1 then
    return refused(job, "the nodes of --nodelist are in more than one " .. level .. " (" .. groups[1] .. ", "
      .. groups[2] .. "); the job would run across them", "--nodelist spans " .. level .. "s")
  end
  if homeless then
    return refused(job, "--nodelist names a node that is in no " .. level, "--nodelist node in no " .. level)
  end
  if problem ~= nil then
    local words = NAMED_PROBLEMS[problem]
    local what = words[1]
    if problem == "long" then
      what = string.format(what, MAX_NAMED)
    elseif problem == "many" then
      what = string.format(what, limit)
    elseif problem == "unknown" then
      what = string.format(what, "'" .. safe(name) .. "'")
    end
    return refused(job, "--nodelist " .. what .. ", so whether its nodes share one " .. level .. " cannot be "
      .. "checked; a required " .. level .. " is never left unchecked", "--nodelist not checked (" .. words[2] .. ")")
  end
  return nil, nil, groups[1]
end

local function segment_refused(job, why, short)
  return { action = "reject", locality = job.loc, message = "slurm-topo: " .. why,
           record = record(job.loc .. ": rejected; " .. short), rejection = "request" }
end

segments = function(job, src)
  -- policy/decide.py _segments: an nvl job no NVLink domain can hold, with a segment (nvl:segment=N, or the
  -- job's own --segment, which wins): segment_size on 25.11.2+, refused before; N divides the node count and
  -- fits the largest domain
  local req = job.req
  local best, most = S.largest(job.scan, src)
  if best == nil then return nothing_holds(job, src) end
  local nodes = needs(req)
  local size, policy = req.user_segment or job.size, job.policy
  local label = label_of(best)
  local asked = "--locality=nvl:segment=" .. size
  if not req.segment_ok then
    return segment_refused(job, asked .. ": " .. plural(nodes, "node") .. " is larger than any NVLink domain "
      .. "(the largest is " .. label .. " with " .. plural(most, "node") .. "); the filter sets the segment size "
      .. "from Slurm " .. V.SEGMENT_RELEASE .. " (job_submit/lua cannot before); from Slurm 24.05 `sbatch "
      .. "--segment=" .. size .. "` without --locality=nvl places each segment in one block itself",
      "segment needs Slurm " .. V.SEGMENT_RELEASE)
  end
  if nodes % size ~= 0 then
    return segment_refused(job, asked .. ": the node count " .. nodes .. " is not a multiple of the segment size "
      .. size, nodes .. " nodes not a multiple of segment " .. size)
  end
  if size > most then
    return segment_refused(job, asked .. ": the segment size " .. size .. " is larger than the largest NVLink "
      .. "domain (" .. label .. ", " .. plural(most, "node") .. ")", "segment " .. size .. " over the largest "
      .. "domain (" .. most .. ")")
  end
  local own = req.user_segment ~= nil
  local shown = "segment=" .. size
  if own then
    shown, policy = shown .. " (yours)", nil
  elseif policy then
    shown = shown .. ":" .. policy
  end
  local features
  if job.restrict then features = compose_with(job.c, job.restrict, nil) end
  local seg
  if not own then seg = size end
  return { action = "amend", locality = job.loc, features = features, segment = seg, segment_policy = policy,
           record = record(job.loc .. " " .. shown .. bound_tag(job.scan) .. " [" .. nodes .. " nodes in segments of "
             .. size .. ", each in one NVLink domain; largest " .. label .. "(" .. most .. "n)]" .. job.note) }
end

nothing_holds = function(job, src)
  -- no group of the level can ever hold the job: :fail and interactive allocations are rejected, :wait held
  local level, loc = job.level, job.loc
  local best, bn, bg = S.largest(job.scan, src)
  local why
  if best == nil and level == "nvl" then -- no size can ever fit: refused at submit whatever the mode
    return { action = "reject", locality = loc, message = "slurm-topo: --locality=" .. loc .. ": " .. NVL_NONE
               .. NVL_NONE_NOTE, record = record(loc .. ": rejected; " .. NVL_NONE), rejection = "request" }
  elseif best == nil then
    why = "no node of the partition has a " .. level
  else
    why = "the largest is " .. label_of(best) .. " with " .. plural(bn, "node") .. " (" .. bg .. " GPUs)"
  end
  local msg = "slurm-topo: --locality=" .. loc .. ": no " .. level .. " can ever hold " .. describe_request(job.req)
    .. "; " .. why
  if job.mode == "fail" then
    return { action = "reject", locality = loc, message = msg, record = record(loc .. ": rejected; " .. why),
             rejection = "size" }
  end
  if job.req.interactive then
    return { action = "reject", locality = loc, message = msg .. job.data.messages.interactive,
             record = record(loc .. ": rejected (interactive); " .. why), rejection = "size" }
  end
  return { action = "hold", locality = loc, message = msg .. job.data.messages.hold,
           record = record(loc .. ": held; " .. why) }
end


return M
