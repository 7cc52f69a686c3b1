--[[
slurm_topo_filter/memo.lua - what the filter remembers, per data load: whole decisions by the request's shape
(decide_memo around decide.decide). The memo is bounded (a flood of odd requests only costs what it costs
without it) and keyed weakly by the data it belongs to, so a new data load starts empty. What it hands out is
shared and read-only. A decision itself is bounded without it (scan.lua): the memo saves repeats, not tails.
]]

local decide = require("slurm_topo_filter.decide").decide

local M = {}

-- Whole decisions, remembered per data load by the request's shape: a decision depends only on the data and on
-- the request's fields, and most submissions repeat a few shapes (the same sbatch line, array tasks, sweeps), so
-- a repeated shape costs one key instead of a decision. Bounded in entries and key length (a flood of odd
-- requests only costs what it costs without the memo); decisions are shared and read-only once remembered.
local DECISION_ENTRIES, DECISION_KEY = 256, 512
local decision_memo = setmetatable({}, { __mode = "k" })

-- the numbers a decision depends on, after the GPU count: each present one is a level of the memo below the
-- key; which are present (and the interactive flag) is the key's last character
local NUMBERS = { "min_nodes", "num_tasks", "time_limit", "het_offset", "user_segment" }
local PRESENT = {} -- 0-127 -> one character
for m = 0, 127 do PRESENT[m] = string.char(32 + m) end

local function shape_of(req)
  -- the request's strings joined by NUL (a C string never holds one; "" and nil decide alike) and the character
  -- of its present numbers; the numbers themselves are nested keys below it (no number is ever formatted: that
  -- costs more than the rest)
  if req.oversize ~= nil then return nil end
  local gpu = req.gpu
  local mask, bit = 0, 4
  if req.interactive then mask = 1 end
  if gpu and gpu.count ~= nil then mask = mask + 2 end
  for i = 1, #NUMBERS do
    if req[NUMBERS[i]] ~= nil then mask = mask + bit end
    bit = bit + bit
  end
  local key = table.concat({
    req.locality or "", req.regions or "", req.features or "", req.prefer or "", req.partition or "",
    req.unchecked or "", req.nodelist or "", gpu and gpu.scope or "", gpu and gpu.gpu_type or "",
    req.segment_ok and "s" or "", PRESENT[mask],
  }, "\0")
  if #key > DECISION_KEY then return nil end
  return key
end

local function memo_path(memo, key, req)
  -- the table holding the decision for this request's numbers (grown on the way), and its last key: one level
  -- per present number (the key says which), true where none is
  local path = memo.by[key]
  if path == nil then
    path = {}
    memo.by[key] = path
  end
  local gpu = req.gpu
  local k = gpu and gpu.count -- (a number or nil: gpu is a table or nil)
  for i = 1, #NUMBERS do
    local v = req[NUMBERS[i]]
    if v ~= nil then
      if k ~= nil then
        local child = path[k]
        if child == nil then
          child = {}
          path[k] = child
        end
        path = child
      end
      k = v
    end
  end
  if k == nil then k = true end
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
