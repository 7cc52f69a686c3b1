--[[
slurm_topo_filter/memo.lua - what the filter remembers, per data load, wrapped around the rules: whole decisions
by the request's shape (decide_memo around decide.decide), and the steps decide.lua calls through its `steps`
table (a level's candidate list, the largest group, the prefer cascade, a required level's finer --prefer, a
shared list's formatting). Every memo is bounded (a flood of odd requests only costs what it costs without
them) and keyed weakly by the data or the group list it belongs to, so a new data load starts empty: every
allocation costs more while the data table is resident, since Lua 5.1's collector walks it. What a memo hands
out is shared and read-only.
]]

local decide = require("slurm_topo_filter.decide").decide
local num = require("slurm_topo_filter.util").num

local M = {}

-- Step results per group list: a table per list, started over past 128 entries (a table's hash part is
-- rebuilt whole each time it doubles: at 256 entries, ~50 000 instructions per table in one decision, and a
-- decision grows several lists' tables at once).
local SCAN_ENTRIES = 128
local scan_memo = setmetatable({}, { __mode = "k" })

local function memo_of(groups)
  local memo = scan_memo[groups]
  if memo == nil or memo.size > SCAN_ENTRIES then
    memo = { size = 0 }
    scan_memo[groups] = memo
  end
  return memo
end

local function remember(memo, key, value)
  memo[key] = value
  memo.size = memo.size + 1
end

local function candidates(raw)
  -- a level's whole list for what the request lets count (scan.signature) and the room left: not with a user
  -- bracket (only), an area, or inside other groups, which are per request
  return function(sc, groups, budget, only, inside, up, descending, limit, room)
    if only ~= nil or inside ~= nil or sc.area ~= nil then
      return raw(sc, groups, budget, only, inside, up, descending, limit, room)
    end
    local memo, key = memo_of(groups), sc.signature .. num(budget)
    if descending then key = key .. "d" end -- a list scanned from its first group: another start
    if limit ~= nil then key = key .. "<" .. num(limit) end -- at most limit groups: another list
    local hit = memo[key]
    if hit then return hit[1], hit[2], hit[3] end -- what fits in a room (fourth and fifth) is counted again
    local kept, cut, length, fitn, fitlen = raw(sc, groups, budget, only, inside, up, descending, limit, room)
    remember(memo, key, { kept, cut, length })
    return kept, cut, length, fitn, fitlen
  end
end

local function largest(raw)
  -- the largest group of a level for what the request lets count (compiled, so not remembered, when every
  -- node counts: the data names it)
  return function(sc, groups, only)
    if only ~= nil or sc.area ~= nil or (sc.all_ok and groups.big ~= nil) then return raw(sc, groups, only) end
    local memo, key = memo_of(groups), "largest:" .. sc.signature
    local hit = memo[key]
    if hit then return hit[1], hit[2], hit[3] end
    local best, bn, bg = raw(sc, groups, only)
    remember(memo, key, { best, bn, bg })
    return best, bn, bg
  end
end

local function prefer_cascade(raw)
  -- the prefer bracket's lists, by the first level's list (job.partitions) and the room left
  return function(job, first, budget)
    local sc = job.scan
    if sc.area ~= nil then return raw(job, first, budget) end
    local memo, key = memo_of(first), "cascade:" .. sc.signature .. num(budget)
    local hit = memo[key]
    if hit == nil then
      hit = raw(job, first, budget)
      remember(memo, key, hit)
    end
    return hit
  end
end

local function zone_rows(raw)
  -- the zone rows of the prefer unions, by the zone list and the classes that count (not with an area)
  return function(sc, zones)
    if sc.area ~= nil then return raw(sc, zones) end
    local memo, key = memo_of(zones), "rows:" .. sc.classes_key
    local hit = memo[key]
    if hit == nil then
      hit = raw(sc, zones)
      remember(memo, key, hit)
    end
    return hit
  end
end

local function finer(raw)
  -- a required zone's or region's finer bracket depends on what its kept list does: the same key as that list
  return function(job, kept, budget, groups, only)
    if only ~= nil or job.scan.area ~= nil then return raw(job, kept, budget) end
    local memo, key = memo_of(groups), "finer:" .. job.scan.signature .. num(budget)
    local b = memo[key]
    if b == nil then
      b = raw(job, kept, budget)
      remember(memo, key, b) -- false (nothing finer) is remembered too
    end
    return b
  end
end

local function weak_texts()
  -- texts by list, weakly (a list no memo holds takes its text with it), and how many were put in
  return { by = setmetatable({}, { __mode = "k" }), size = 0 }
end

local function put_text(memo, kept, text)
  -- bounded as the step memos are: a weak table only shrinks once a collection has passed, so a run of new
  -- lists would grow it, and rebuild it whole at each doubling, between two collections
  if memo.size > SCAN_ENTRIES then memo.by, memo.size = setmetatable({}, { __mode = "k" }), 0 end
  memo.by[kept] = text
  memo.size = memo.size + 1
end

local function formatted(raw)
  -- a list's text, once per list (remembered lists are shared)
  local texts = weak_texts()
  return function(kept)
    local text = texts.by[kept]
    if text == nil then
      text = raw(kept)
      put_text(texts, kept, text)
    end
    return text
  end
end

local function shown(raw)
  -- a list's record text, once per list and cut flag (a list is made for one set of classes that count, the
  -- scan's, so the nodes it shows are the same whichever scan asks again)
  local plain, cut_short = weak_texts(), weak_texts()
  return function(kept, cut, sc)
    local texts = cut and cut_short or plain
    local text = texts.by[kept]
    if text == nil then
      text = raw(kept, cut, sc)
      put_text(texts, kept, text)
    end
    return text
  end
end

function M.wrap(steps)
  -- decide.lua's steps through their memos (once: the entry module calls it when it loads)
  if steps.memoised then return end
  steps.candidates = candidates(steps.candidates)
  steps.largest = largest(steps.largest)
  steps.prefer_cascade = prefer_cascade(steps.prefer_cascade)
  steps.finer = finer(steps.finer)
  steps.zone_rows = zone_rows(steps.zone_rows)
  steps.bracket = formatted(steps.bracket)
  steps.shown = shown(steps.shown)
  steps.memoised = true
end

-- Whole decisions, remembered per data load by the request's shape: a decision depends only on the data and on
-- the request's fields, and most submissions repeat a few shapes (the same sbatch line, array tasks, sweeps), so
-- a repeated shape costs one key instead of a decision. Bounded in entries and key length (a flood of odd
-- requests only costs what it costs without the memo); decisions are shared and read-only once remembered.
local DECISION_ENTRIES, DECISION_KEY = 256, 512
local decision_memo = setmetatable({}, { __mode = "k" })

local function shape_of(req)
  -- the request's strings joined by NUL (a C string never holds one; "" and nil decide alike), and its numbers
  -- and flag as nested keys below it (no number is ever formatted: that costs more than the rest)
  if req.oversize ~= nil then return nil end
  local gpu = req.gpu
  local key = table.concat({
    req.locality or "", req.regions or "", req.features or "", req.prefer or "", req.partition or "",
    req.unchecked or "", req.nodelist or "", gpu and gpu.scope or "", gpu and gpu.gpu_type or "",
  }, "\0")
  if #key > DECISION_KEY then return nil end
  return key
end

local NUMBERS = { "min_nodes", "num_tasks", "time_limit", "het_offset", "interactive" }

local function memo_path(memo, key, req)
  -- the table holding the decision for this request's numbers (grown on the way), and its last key
  local path = memo.by[key]
  if path == nil then
    path = {}
    memo.by[key] = path
  end
  -- one level per number (and the interactive flag), false standing for nil (a table key cannot be nil)
  local gpu = req.gpu
  local k = gpu and gpu.count or false
  for i = 1, #NUMBERS do
    local child = path[k]
    if child == nil then
      child = {}
      path[k] = child
    end
    path = child
    k = req[NUMBERS[i]]
    if k == nil then k = false end
  end
  return path, k
end

function M.decide_memo(data, req)
  -- decide.decide through the memo (the submit path; tests compare the two)
  local key = shape_of(req)
  if key == nil then return decide(data, req) end
  local memo = decision_memo[data]
  if memo == nil then
    memo = { size = 0, by = {} }
    decision_memo[data] = memo
  end
  local path, k = memo_path(memo, key, req)
  local d = path[k]
  if d == nil then
    d = decide(data, req)
    if memo.size >= DECISION_ENTRIES then -- full: start over (the next shapes are remembered again)
      memo.size, memo.by = 0, {}
      path, k = memo_path(memo, key, req)
    end
    path[k] = d
    memo.size = memo.size + 1
  end
  return d
end

return M
