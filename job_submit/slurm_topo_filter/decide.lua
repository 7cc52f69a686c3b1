--[[
slurm_topo_filter/decide.lua - the decision (slurm_topo/policy/decide.py): the steps in order (hostile sizes,
the locality, the constraint, the regions, then prefer or a required level), the prefer cascade with its zone
unions, a required level's bracket and --prefer, named nodes, and what is said when no group can hold the job.

The steps that repeat for a repeated request (a level's candidate list, the largest group, the prefer cascade,
a required level's finer --prefer, and the formatting of a shared list) are called through M.steps, which
slurm_topo_filter/memo.lua wraps; the rules here remember nothing.
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
local record, safe, plural = V.record, V.safe, V.plural
local parse_constraint, counted, compose = C.parse_constraint, C.counted, C.compose
local needs, new_scan, label_of, scan_allowed, scan_eligible = S.needs, S.new_scan, S.label_of, S.allowed, S.eligible
local cascade, level_groups, family_values, NO_GROUPS = S.cascade, S.level_groups, S.family_values, S.NO_GROUPS
local any_fits, nodes_of, taken, wanted = S.any_fits, S.nodes_of, S.taken, S.wanted

local M = {}

-- The steps memo.lua wraps, each called as steps.NAME (filled in below, after the functions they name).
local steps = {}
M.steps = steps

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

function steps.bracket(kept)
  -- "[f1|f2|...]" of a list (scan.lua bracket_text: runs of a compiled list are pieces of its joined text)
  return S.bracket_text(kept)
end

function steps.shown(kept, cut, sc)
  -- the record is cut at 200 characters: stop formatting once past that (same text after the cut); the nodes
  -- shown are those that count for the scan sc (kept comes from it, so the memo by kept holds)
  local parts, length = {}, 0
  local cs = sc.cs -- a group's text depends on the classes that count only: kept per class set (S.shown_texts)
  local texts = cs and S.shown_texts(cs)
  for i, g in ipairs(kept) do
    if length > MAX_RECORD then break end
    local part = texts and texts[g]
    if part == nil then
      part = label_of(g) .. "(" .. num(nodes_of(sc, g)) .. "n)"
      if texts and g.sp == nil then -- a zone union is made per decision: not kept
        texts[g] = part
        texts.count = texts.count + 1
      end
    end
    parts[i] = part
    length = length + #part + 1
  end
  local text = "[" .. table.concat(parts, ",") .. "]"
  if cut then text = "first " .. #kept .. " kept (Slurm's limits) " .. text end
  return text
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
  if not LOCALITIES[level] or not MODES[mode] or (level == "nvl" and mode == "auto") then
    local advice = "unknown locality '" .. safe(locality) .. "' (use prefer|nvl|network_group|zone|"
      .. "region|any, optionally :wait, :fail or :auto; nvl takes :wait or :fail)"
    if locality == "nvl:auto" then -- policy/vocab.py locality_advice
      advice = "--locality=nvl:auto: an NVLink domain has no looser level to relax to; use nvl (waits) or "
        .. "nvl:fail, or LEVEL:auto with LEVEL network_group, zone or region"
    end
    return nil, nil, { action = "reject", locality = safe(locality), message = "slurm-topo: " .. advice,
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

local decide_inner, decide_prefer, decide_required, nothing_holds, named_nodes, required_prefer
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
  local level, mode, rejected = locality_of(data, req, names)
  if rejected then return rejected end
  local loc = LOC[level][mode]
  if level == "any" and req.regions == nil then
    return { action = "unchanged", locality = loc, record = RECORD_ANY }
  end
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
                note = note, restrict = restrict, scan = new_scan(data, req, c, is_counted, area_features, wanted) }
  if level == "prefer" or level == "any" then return decide_prefer(job) end
  return decide_required(job)
end

-- Zone unions (policy/decide.py _zone_unions): alternatives "(zone_a|zone_b[|zone_c])" of 2-3 zones that can
-- ever hold the job; Slurm reads a parenthesised OR inside a matching-OR bracket as one alternative. Made from the
-- UNION_ZONES zones with the most eligible nodes per region (unions inside one region, never all of its zones:
-- that is the region's own alternative) and across regions; each list by (regions, zones, size, features).
local function before(n, g, b)
  -- the order of the zone rows: most eligible nodes first, then the smaller zone, then the data's rank (a zone g
  -- with n eligible nodes against row b)
  if n ~= b.n then return n > b.n end
  if g.n ~= b.g.n then return g.n < b.g.n end
  return g.k < b.g.k
end

local function keep_top(list, r)
  -- list: the first UNION_ZONES rows seen so far in row order; r goes in where it belongs (no whole sort)
  local m = #list
  if m == UNION_ZONES then
    list[m] = nil
    m = m - 1
  end
  local j = m
  while j >= 1 and before(r.n, r.g, list[j]) do
    list[j + 1] = list[j]
    j = j - 1
  end
  list[j + 1] = r
end

local function makes_top(list, n, g)
  return #list < UNION_ZONES or before(n, g, list[UNION_ZONES])
end

local function add_unions(sc, rows, cross, out, k)
  local m = #rows
  if not cross and k >= m then return end
  local function try(combo)
    local n, gp, most, regions, spread = 0, 0, 0, {}, 0
    for _, r in ipairs(combo) do
      n, gp = n + r.n, gp + r.gp
      if r.most > most then most = r.most end
      local region = r.g.u.r or false
      if not regions[region] then
        regions[region] = true
        spread = spread + 1
      end
    end
    if cross and spread < 2 then return end
    local need, total = sc.nodes, sc.total_gpus
    if total > 0 then
      if most == 0 then return end
      need = math.max(need, math.ceil(total / most))
    end
    if n < need or gp < total then return end
    local fs, ls = {}, {}
    for i, r in ipairs(combo) do fs[i], ls[i] = r.g.f, label_of(r.g) end
    local label = table.concat(ls, "+")
    out[#out + 1] = { sp = spread, k = #combo, n = n, f = "(" .. table.concat(fs, "|") .. ")", l = label, g = gp,
                      m = most } -- shown as label(n): shown_text
  end
  if k == 2 then
    for a = 1, m do
      for b = a + 1, m do try({ rows[a], rows[b] }) end
    end
    return
  end
  for a = 1, m do
    for b = a + 1, m do
      for c = b + 1, m do try({ rows[a], rows[b], rows[c] }) end
    end
  end
end

local function union_order(a, b)
  if a.sp ~= b.sp then return a.sp < b.sp end
  if a.k ~= b.k then return a.k < b.k end
  if a.n ~= b.n then return a.n < b.n end
  return a.f < b.f
end

local function as_kept(list)
  table.sort(list, union_order)
  return list
end

function steps.zone_rows(sc, zones)
  -- {by_region, names, by_family, values, lead}: the zones with eligible nodes, each kept in its region's and its
  -- family value's first UNION_ZONES in row order (policy/decide.py sorts them all; only these and the first row
  -- are read), per family value its zones and regions; what nodes count decides it, not the job's size (the
  -- memo's key: the zone list and the scan's classes)
  local by_region, names, by_family, values, lead = {}, {}, {}, {}, nil
  for _, g in ipairs(zones) do
    local n, gp, most = 0, 0, 0
    if scan_allowed(sc, g) then n, gp, most = scan_eligible(sc, g) end
    if n > 0 then
      local u = g.u
      local fv, region = u.fv or false, u.rk
      if region == nil then -- (region, family values), once per location: no label holds a NUL
        region = (u.r or "") .. "\0" .. tostring(fv)
        u.rk = region
      end
      local list = by_region[region]
      if list == nil then
        list = {}
        by_region[region] = list
        names[#names + 1] = region
      end
      local fam = by_family[fv]
      if fam == nil then
        fam = { top = {}, regions = {}, spread = 0, zones = 0 }
        by_family[fv] = fam
        values[#values + 1] = fv
      end
      local first, in_region, in_family = lead == nil or before(n, g, lead), makes_top(list, n, g),
        makes_top(fam.top, n, g)
      if first or in_region or in_family then
        local r = { g = g, n = n, gp = gp, most = most }
        if first then lead = r end
        if in_region then keep_top(list, r) end
        if in_family then keep_top(fam.top, r) end
      end
      fam.zones = fam.zones + 1
      local key = u.r or false
      if not fam.regions[key] then
        fam.regions[key] = true
        fam.spread = fam.spread + 1
      end
    end
  end
  return { by_region, names, by_family, values, lead }
end

local function zone_unions(sc, zones, room, families)
  -- room: the alternatives the level lists leave; unions that could never be kept are not made (and without
  -- families, whose spans the rows give, no zone row is read: no union, so no lead either). With families
  -- the zones are family buckets and a union joins one value's buckets only (u.fv): prefer never mixes versions
  if not sc.check or (room <= 0 and not families) then return NO_GROUPS, NO_GROUPS, nil, NO_GROUPS end
  local rows = steps.zone_rows(sc, zones)
  local by_region, names, by_family, values, lead = rows[1], rows[2], rows[3], rows[4], rows[5]
  local inside, across = {}, {}
  for k = 2, 3 do
    if #inside >= room then break end
    for _, region in ipairs(names) do add_unions(sc, by_region[region], false, inside, k) end
  end
  -- per family value (one, false, without families): its zones in two regions or more; a union of all of them is
  -- the bare value's (the plain tree's) own alternative and is not made
  local tops = {}
  for _, fv in ipairs(values) do
    local fam = by_family[fv]
    if fam.spread >= 2 then tops[#tops + 1] = fam end
  end
  for k = 2, 3 do
    if #tops == 0 or #inside + #across >= room then break end
    for _, fam in ipairs(tops) do
      if k < fam.zones then add_unions(sc, fam.top, true, across, k) end
    end
  end
  -- what each family value's eligible zones span (by_spread; a union carries its own, sp and k)
  local spans = {}
  for _, fv in ipairs(values) do
    if fv then spans[fv] = { by_family[fv].spread, by_family[fv].zones } end
  end
  return as_kept(inside), as_kept(across), lead, spans
end

local function span_of(alt, spans)
  -- (regions, zones) of an alternative of the bracket's tail: a union across regions, or a bare family value
  if alt.sp ~= nil then
    if alt.sp >= 2 then return alt.sp, alt.k end
    return nil
  end
  local fam = spans[alt.f]
  if fam ~= nil then return fam[1], fam[2] end
  return nil
end

local function by_spread(kept, spans)
  -- policy/decide.py _by_spread: the bracket's tail (unions across regions, then the bare family values) by
  -- the (regions, zones) each spans, unions before a value of the same span; a new list (kept may be remembered)
  local start = #kept + 1
  for i = 1, #kept do
    if span_of(kept[i], spans) ~= nil then
      start = i
      break
    end
  end
  local tail = {}
  for i = start, #kept do
    local r, z = span_of(kept[i], spans)
    tail[#tail + 1] = { g = kept[i], r = r or MAX_ALTERNATIVES, z = z or MAX_ALTERNATIVES, i = i }
  end
  table.sort(tail, function(a, b)
    if a.r ~= b.r then return a.r < b.r end
    if a.z ~= b.z then return a.z < b.z end
    return a.i < b.i
  end)
  local out = {}
  for i = 1, start - 1 do out[i] = kept[i] end
  for j, t in ipairs(tail) do
    local i = start - 1 + j
    out[i] = t.g
  end
  return out
end

-- A bracket must not start with a union (policy/decide.py _lead): 22.05's submit check narrows the usable nodes
-- to the union's first zone and rejects a job that zone cannot hold; the largest zone leads instead (too small
-- for the job: Slurm passes over it), the last alternatives giving way when that breaks the limits.
local function lead_bracket(kept, lead, budget)
  if #kept == 0 or string.sub(kept[1].f, 1, 1) ~= "(" or lead == nil then return kept, false end
  local out = { lead.g }
  for i = 1, #kept do
    out[i + 1] = kept[i]
  end
  local length = 1
  for i = 1, #out do length = length + #out[i].f + 1 end
  local cut = false
  while #out > MAX_ALTERNATIVES or length > budget do
    -- the last union goes first: a region bucket or a bare family value keeps the job off the plain tree
    local n, k = #out, #out
    for i = n, 2, -1 do
      if string.sub(out[i].f, 1, 1) == "(" then
        k = i
        break
      end
    end
    length = length - #out[k].f - 1
    for i = k, n - 1 do out[i] = out[i + 1] end
    out[n] = nil
    cut = true
  end
  return out, cut
end

function steps.prefer_cascade(job, first, budget)
  -- {kept, cut, levels used}: the prefer bracket's groups, `first` the network-group list (the memo's key).
  -- The lists are asked for coarsest first (the family values, regions, zones, network groups, NVLink domains:
  -- the order the cascade keeps them in), each for at most what the cascade can still take + 1 (S.taken): the
  -- same bracket, cut flag and union room as from whole lists, without scanning what would be dropped
  local data, partitions, sc = job.data, job.partitions, job.scan
  local lists, used = {}, {}
  local values = family_values(data, partitions)
  local alternatives, room = MAX_ALTERNATIVES, budget - 1
  if values ~= nil then -- with families: the bare values after the region buckets, largest first
    local fkept, fcut, flength, fitn, fitlen = steps.candidates(sc, values, budget, nil, nil, nil, true,
      wanted(alternatives), room)
    local n, left, after = taken(fkept, alternatives, room, flength, fitn, fitlen)
    lists[#PREFER_LEVELS + 1] = { fkept, fcut, n, room - after }
    alternatives, room = left, after
  end
  for i = #PREFER_LEVELS, 1, -1 do
    local groups = first
    if i == 1 and values ~= nil then
      groups = NO_GROUPS -- not with families: a domain is no family bucket, and prefer never mixes versions
    elseif i ~= 2 then
      groups = level_groups(data, partitions, PREFER_LEVELS[i])
    end
    local kept, cut, length, fitn, fitlen = steps.candidates(sc, groups, budget, nil, nil, nil, nil,
      wanted(alternatives), room)
    local n, left, after = taken(kept, alternatives, room, length, fitn, fitlen)
    lists[i] = { kept, cut, n, room - after }
    alternatives, room = left, after
  end
  for i, lvl in ipairs(PREFER_LEVELS) do
    if #lists[i][1] > 0 then used[#used + 1] = lvl end
  end
  local emit = UNION_EMIT
  if values ~= nil then
    if #lists[#lists][1] > 0 then used[#used + 1] = "family" end
    emit = UNION_EMIT_FAMILIES
  end
  -- zone unions (of one value's buckets with families) between the zones and the regions, and after the regions:
  -- in the alternatives the whole lists leave (none when a list stopped at its limit: they fill the bracket)
  local left = MAX_ALTERNATIVES
  for _, l in ipairs(lists) do left = left - #l[1] end
  if left < 0 then left = 0 end
  local inside, across, lead, spans = zone_unions(sc, level_groups(data, partitions, "zone"), left, values ~= nil)
  if #inside > 0 or #across > 0 then used[#used + 1] = "unions" end
  local parts = { { inside, false }, { across, false } }
  for _, l in ipairs(lists) do parts[#parts + 1] = l end
  local kept, cut = cascade(parts, budget, 2, emit)
  if values ~= nil then kept = by_spread(kept, spans) end
  local led_cut
  kept, led_cut = lead_bracket(kept, lead, budget)
  cut = cut or led_cut
  return { kept, cut, table.concat(used, "+") }
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
    -- the cascade: every level's groups that can ever hold the job, finest level first, smallest first within a
    -- level (with families: then the bare family values, largest first); 22.05 tries a matching OR alternative
    -- by alternative, so the job lands in the finest group with room now
    local probe = compose_with(c, restrict, "[]")
    local budget = MAX_CONSTRAINT - #probe + 2
    local first = level_groups(job.data, job.partitions, LEVELS[1])
    local hit = steps.prefer_cascade(job, first, budget)
    local kept, cut = hit[1], hit[2]
    if #kept > 0 then
      return { action = "amend", locality = loc, features = base,
               prefer = compose_with(c, restrict, steps.bracket(kept)),
               record = record("prefer " .. hit[3] .. " " .. steps.shown(kept, cut, job.scan) .. job.note),
               kept = kept }
    end
    why = "no group fits; topology/tree packs"
  end
  local action = "unchanged"
  if base then action = "amend" end
  return { action = action, locality = loc, features = base, record = record("prefer: " .. why) }
end

decide_required = function(job)
  -- nvl / network_group / zone / region: the matching-OR bracket of the groups that can ever hold the job
  local level, loc, mode, c = job.level, job.loc, job.mode, job.c
  local groups = level_groups(job.data, job.partitions, level)
  local only
  if c.kind == "bracket" then
    local level_features = {}
    for _, g in ipairs(groups) do level_features[g.f] = true end
    only = {}
    for _, x in ipairs(c.inside) do
      if not level_features[x] then
        return conflict(loc, mode, "bracket", "slurm-topo: --locality=" .. level .. ": the brackets in your "
          .. "constraint are not all " .. level .. " groups (Slurm allows one bracket set)")
      end
      only[x] = true
    end
  end
  local probe = compose_with(c, job.restrict, "[]")
  if probe == nil then
    return conflict(loc, mode, "constraint", "slurm-topo: --locality=" .. level .. ": your constraint cannot be "
      .. "combined with a " .. level .. " bracket")
  end
  if #probe >= MAX_CONSTRAINT then
    return conflict(loc, mode, "length", "slurm-topo: --locality=" .. level .. ": your constraint leaves no room for a "
      .. level .. " bracket (Slurm's " .. MAX_CONSTRAINT .. "-character limit)")
  end
  local rejected, named, within = named_nodes(job)
  if rejected then return rejected end
  if within ~= nil and (only == nil or only[within]) then
    for _, g in ipairs(groups) do
      if g.f == within then -- the named nodes are in one group: the job's other nodes come from it too
        only = { [within] = true }
        break
      end
    end
  end
  local budget = MAX_CONSTRAINT - #probe + 2
  local kept, cut, length = steps.candidates(job.scan, groups, budget, only)
  job.kept_length = length -- the finer --prefer's cascade takes the kept list at once (S.taken)
  -- every group of the level that holds the job is kept (no cut, no user bracket, no area): a finer group that
  -- holds the job lies inside one of them (its parent has at least its nodes and GPUs), so `inside` need not
  -- be looked at (steps.finer)
  job.kept_whole = not cut and only == nil and job.scan.area == nil
  if #kept > 0 then
    return { action = "amend", locality = loc, features = compose_with(c, job.restrict, steps.bracket(kept)),
             prefer = required_prefer(job, groups, kept, budget, only),
             message = named, record = record(loc .. " " .. steps.shown(kept, cut, job.scan) .. job.note), kept = kept }
  end
  return nothing_holds(job, groups, only)
end

local LEVEL_INDEX = { network_group = 1, zone = 2, region = 3 }
local UP = { zone = "z", region = "r" }

function steps.finer(job, kept, budget)
  -- "[finer groups inside the kept ones...|the kept ones]", or false when nothing finer can hold the job (the
  -- memo's key: the level list and the user's bracket kept was made from, passed after budget)
  local level, sc = job.level, job.scan
  local levels, any = {}, false
  for i = 1, LEVEL_INDEX[level] - 1 do
    levels[i] = level_groups(job.data, job.partitions, LEVELS[i])
    any = any or any_fits(sc, levels[i])
  end
  if not any then return false end -- no finer group can hold the job anywhere: the set below is not built
  local inside -- the kept groups' features, made when a list needs them (kept_whole: none does)
  -- coarsest first, each finer list for at most what the cascade can still take + 1 (as prefer_cascade)
  local taken_kept, alternatives, room = taken(kept, MAX_ALTERNATIVES, budget - 1, job.kept_length)
  local kept_chars = budget - 1 - room
  local lists, finer = {}, false
  for i = #levels, 1, -1 do
    local within, rooted = nil, levels[i].rooted -- a merged list (several partitions) says nothing
    if not (job.kept_whole and rooted and rooted[UP[level]]) then -- kept_whole: implied by fitting
      if inside == nil then
        inside = {}
        for j = 1, #kept do inside[kept[j].f] = true end
      end
      within = inside
    end
    local k, cut, length, fitn, fitlen = steps.candidates(sc, levels[i], budget, nil, within, UP[level], nil,
      wanted(alternatives), room)
    local n, left, after = taken(k, alternatives, room, length, fitn, fitlen)
    lists[i] = { k, cut, n, room - after }
    finer = finer or #k > 0
    alternatives, room = left, after
  end
  if not finer then return false end
  lists[#lists + 1] = { kept, false, taken_kept, kept_chars }
  -- the kept list whole is the level's own bracket, formatted already (steps.bracket, remembered): its text
  return S.bracket_text((cascade(lists, budget)), kept, string.sub(steps.bracket(kept), 2, -2))
end

required_prefer = function(job, groups, kept, budget, only)
  -- a required zone or region also gets --prefer=<hard>&[finer groups inside the kept ones...|the kept ones]:
  -- every alternative lies inside one group of the level; nil with the user's own --prefer, or when nothing
  -- finer can hold the job (the --prefer would repeat the constraint).
  if job.req.prefer ~= nil or UP[job.level] == nil then return nil end -- network_group, nvl: nothing finer inside
  local b = steps.finer(job, kept, budget, groups, only)
  if not b then return nil end
  return compose_with(job.c, job.restrict, b)
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

nothing_holds = function(job, groups, only)
  -- no group of the level can ever hold the job: :fail and interactive allocations are rejected, :wait held
  local level, loc = job.level, job.loc
  local best, bn, bg = steps.largest(job.scan, groups, only)
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

steps.candidates, steps.largest = S.candidates, S.largest

return M
