--[[
slurm_topo_filter/nodes.lua - named nodes (--nodelist): where they are, from the data's node index
(slurm_topo/policy/nodes.py; the index string is written by slurm_topo/render/filter_data.py _node_index).
]]

local V = require("slurm_topo_filter.vocab")
local split = require("slurm_topo_filter.util").split

local MAX_NAMED, MAX_VISITS = V.MAX_NAMED, V.MAX_VISITS

local M = {}


local function split_name(name)
  -- "n007" -> "n", 7, 3; nil for a name without a numeric suffix of at most 9 digits
  local prefix, digits = string.match(name, "^(.-)(%d+)$")
  if prefix == nil or #digits > 9 then return nil end
  return prefix, tonumber(digits), #digits
end

local function hostlist_items(text)
  -- top-level comma items (commas inside brackets stay)
  local out, depth, start = {}, 0, 1
  for i = 1, #text do
    local ch = string.sub(text, i, i)
    if ch == "[" then depth = depth + 1
    elseif ch == "]" then depth = depth - 1
    elseif ch == "," and depth == 0 then
      out[#out + 1] = string.sub(text, start, i - 1)
      start = i + 1
    end
  end
  out[#out + 1] = string.sub(text, start)
  return out
end

local function requested(text)
  -- numbered ranges (flat: prefix, first, last, width), bare names, whether some part was not understood
  local numbered, bare, odd = {}, {}, false
  for _, item in ipairs(hostlist_items(text)) do
    local prefix, inner = string.match(item, "^([^%[%]]*)%[([^%[%]]*)%]$")
    if prefix == nil then
      if item == "" or string.find(item, "[%[%]]") then
        odd = true
      else
        local p, n, w = split_name(item)
        if p == nil then bare[#bare + 1] = item else
          numbered[#numbered + 1] = { p, n, n, w }
        end
      end
    else
      for _, piece in ipairs(split(inner, ",")) do
        local a, b = string.match(piece, "^(%d+)%-(%d+)$")
        if a == nil then a = string.match(piece, "^(%d+)$"); b = a end
        if a == nil or #a > 9 or #b > 9 or tonumber(b) < tonumber(a) then odd = true else
          numbered[#numbered + 1] = { prefix, tonumber(a), tonumber(b), #a }
        end
      end
    end
  end
  return numbered, bare, odd
end

function M.node_index(data)
  -- where each node is, from the data's node index string (filter_data.py _node_index), read on the first
  -- --nodelist after a load and kept with the data: the places stay in the string (fixed width, read where
  -- needed: place_group), ranges map "prefix/width" to their runs (kept as text until first looked up)
  local index = data.node_index
  if index then return index end
  local w1, w2, places, a_text, r_text, b_text = string.match(data.nodes,
    "^(%d+),(%d+)#(%d*)#([^#]*)#([^#]*)#([^#]*)$")
  local features, areas, ranges, bare, prev = data.features, {}, {}, {}, ""
  for z, r in string.gmatch(a_text, "(%d+),(%d+);") do
    areas[#areas + 1] = { features[tonumber(z)] or false, features[tonumber(r)] or false }
  end
  for common, rest, runs in string.gmatch(r_text, "(%d+)|([^|;]*)|([%d,]*);") do
    local key = string.sub(prev, 1, tonumber(common)) .. rest
    ranges[key] = runs
    prev = key
  end
  for name, place in string.gmatch(b_text, "([^|;]*)|(%d+);") do bare[name] = tonumber(place) end
  index = { features = features, places = places, w1 = tonumber(w1), w = tonumber(w1) + tonumber(w2),
            areas = areas, ranges = ranges, bare = bare }
  data.node_index = index
  return index
end

local function place_group(index, idx, li)
  -- place idx's group feature at level index li (false: none), from its fixed-width record
  local at, w1 = (idx - 1) * index.w, index.w1
  if li == 1 then return index.features[tonumber(string.sub(index.places, at + 1, at + w1))] or false end
  return index.areas[tonumber(string.sub(index.places, at + w1 + 1, at + index.w))][li - 1]
end

local function range_runs(index, key)
  -- {first,last,place,...} of a "prefix/width" key, nil when none
  local runs = index.ranges[key]
  if type(runs) == "string" then
    local list = {}
    for v in string.gmatch(runs, "%d+") do list[#list + 1] = tonumber(v) end
    index.ranges[key] = list
    runs = list
  end
  return runs
end

function M.place_named(data, text, li)
  -- where the nodes of `text` are at level index li: the distinct groups met (stops at the second), whether a
  -- node is in no group of the level, whether some names could not be placed
  if #text > MAX_NAMED then return {}, false, true end
  local numbered, bare, unchecked = requested(text)
  local seen, homeless = {}, false
  local index = M.node_index(data)
  local function note(idx)
    local group = place_group(index, idx, li)
    if not group then
      homeless = true
    elseif seen[1] ~= group and seen[2] ~= group then
      seen[#seen + 1] = group
    end
    return #seen > 1 or homeless
  end
  for _, name in ipairs(bare) do
    local idx = index.bare[name]
    if idx == nil then unchecked = true
    elseif note(idx) then return seen, homeless, unchecked end
  end
  local visits = 0
  for _, r in ipairs(numbered) do
    local lo, hi = r[2], r[3]
    local runs = range_runs(index, r[1] .. "/" .. r[4]) or {}
    local n = #runs / 3
    local a, b = 1, n -- the last run starting at or before lo
    local i = 1
    while a <= b do
      local mid = math.floor((a + b) / 2)
      if runs[mid * 3 - 2] <= lo then i = mid; a = mid + 1 else b = mid - 1 end
    end
    local covered = 0
    while i <= n and runs[i * 3 - 2] <= hi do
      visits = visits + 1
      if visits > MAX_VISITS then return seen, homeless, true end
      local first, last, idx = runs[i * 3 - 2], runs[i * 3 - 1], runs[i * 3]
      i = i + 1
      if last >= lo then
        covered = covered + math.min(last, hi) - math.max(first, lo) + 1
        if note(idx) then return seen, homeless, unchecked end
      end
    end
    if covered < hi - lo + 1 then unchecked = true end
  end
  return seen, homeless, unchecked
end

return M
