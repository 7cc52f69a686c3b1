--[[
slurm_topo_filter/nodes.lua - named nodes (--nodelist, an owner's ReqNodeList=): read as Slurm reads a hostlist,
and where they are, from the data's node index (slurm_topo/policy/nodes.py, whose reader is slurm_topo/core/hostlist.py;
the index string is written by slurm_topo/render/filter_data.py _node_index).

A list is read as Slurm's hostlist_create reads it: names and bracket groups (n[01-04,07], digits before a bracket
h1[8], padding n[001-3], several brackets r[1-2]n[01-04], text after the last bracket) separated by commas, spaces,
tabs or newlines, every name in Slurm's order. It is counted before anything is expanded, and each name is then one
look-up in the index: the work is bounded by the cluster's node count and MAX_VISITS, whatever the text. What is not
read (another character, whitespace inside a bracket, a number of more than MAX_NAMED_DIGITS digits, n[1-], an
unclosed bracket) is said to be so: a required level refuses it (decide.lua named_nodes).
]]

local V = require("slurm_topo_filter.vocab")

local MAX_NAMED, MAX_VISITS, MAX_NAMED_DIGITS, LEVELS = V.MAX_NAMED, V.MAX_VISITS, V.MAX_NAMED_DIGITS, V.LEVELS

local M = {}

-- a level's position in a place (policy/nodes.py PLACE_LEVELS): the tree's levels, then the NVLink domain
local PLACE_INDEX = { nvl = #LEVELS + 1 }
for i, level in ipairs(LEVELS) do PLACE_INDEX[level] = i end
M.PLACE_INDEX = PLACE_INDEX

local unreadable = "[^A-Za-z0-9%._%-%[%], \t\n]" -- node-name characters (model.NODE_NAME_RE), brackets, separators
local long_number = string.rep("%d", MAX_NAMED_DIGITS + 1)
local special = "[%[%] \t\n,]" -- a bracket, or one of Slurm's hostlist separators (comma, space, tab, newline)

local function ranges_of(content)
  -- a bracket's "1-4,07,10" -> {lo, hi, format, ...} (format: zero-padded to LO's width as written) and how many
  -- numbers; nil unless every item is N or LO-HI with LO <= HI (slurm_topo/core/hostlist.py _ranges)
  local out, count, start = {}, 0, 1
  while true do
    local comma = string.find(content, ",", start, true)
    local piece = string.sub(content, start, comma and comma - 1 or -1)
    local a, b = string.match(piece, "^(%d+)%-(%d+)$")
    if a == nil then
      a = string.match(piece, "^(%d+)$")
      b = a
    end
    if a == nil then return nil end
    local lo, hi = tonumber(a), tonumber(b)
    if hi < lo then return nil end
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = lo, hi, "%0" .. #a .. "d"
    count = count + hi - lo + 1
    if comma == nil then return out, count end
    start = comma + 1
  end
end

local function parse(text)
  -- the list's items {texts = {t1, ..., tk+1}, brackets = {{r = ranges, n = count}, ... k}}, as slurm_topo/core/hostlist.py
  -- _parse reads it (empty items skipped); nil when it is not read
  if string.find(text, unreadable) or string.find(text, long_number) then return nil end
  local items, texts, brackets, i, n = {}, { "" }, {}, 1, #text
  while i <= n do
    local j = string.find(text, special, i)
    if j == nil then
      texts[#texts] = texts[#texts] .. string.sub(text, i)
      break
    end
    if j > i then texts[#texts] = texts[#texts] .. string.sub(text, i, j - 1) end
    local ch = string.sub(text, j, j)
    if ch == "[" then
      local k = string.find(text, "]", j + 1, true)
      if k == nil then return nil end -- an unclosed bracket
      local content = string.sub(text, j + 1, k - 1)
      if string.find(content, "[^%d,%-]") then return nil end -- whitespace, a letter or a bracket inside
      local r, count = ranges_of(content)
      if r == nil then return nil end
      brackets[#brackets + 1] = { r = r, n = count }
      texts[#texts + 1] = ""
      i = k + 1
    elseif ch == "]" then
      return nil -- a stray ']'
    else
      if #brackets > 0 or texts[1] ~= "" then items[#items + 1] = { texts = texts, brackets = brackets } end
      texts, brackets = { "" }, {}
      i = j + 1
    end
  end
  if #brackets > 0 or texts[1] ~= "" then items[#items + 1] = { texts = texts, brackets = brackets } end
  return items
end

local function count_of(items, limit)
  -- how many names the items make (duplicates counted), without expanding them; limit + 1 once past limit
  local total = 0
  for _, item in ipairs(items) do
    local n = 1
    for _, b in ipairs(item.brackets) do
      n = n * b.n
      if n > limit then return limit + 1 end
    end
    total = total + n
    if total > limit then return limit + 1 end
  end
  return total
end

local function each_name(items, visit)
  -- visit(name) for every name in Slurm's order (core/hostlist.py _expand_item: the brackets before the last vary from
  -- the next-to-last, slowest, to the first; the last bracket fastest); stops when visit returns true
  local format = string.format
  for _, item in ipairs(items) do
    local texts, brackets = item.texts, item.brackets
    local nb = #brackets
    if nb == 0 then
      if visit(texts[1]) then return true end
    else
      local ri, v = {}, {} -- the outer brackets' odometer: each one's range (offset in r) and number
      for j = 1, nb - 1 do ri[j], v[j] = 1, brackets[j].r[1] end
      local last, tail = brackets[nb].r, texts[nb + 1]
      while true do
        local parts = { texts[1] }
        for j = 1, nb - 1 do
          local r = brackets[j].r
          parts[#parts + 1] = format(r[ri[j] + 2], v[j])
          parts[#parts + 1] = texts[j + 1]
        end
        local head = table.concat(parts)
        for k = 1, #last, 3 do
          local fmt = last[k + 2]
          for x = last[k], last[k + 1] do
            if visit(head .. format(fmt, x) .. tail) then return true end
          end
        end
        local j = 1 -- the next outer combination: the first bracket fastest
        while j < nb do
          local r = brackets[j].r
          v[j] = v[j] + 1
          if v[j] <= r[ri[j] + 1] then break end
          ri[j] = ri[j] + 3
          if ri[j] <= #r then
            v[j] = r[ri[j]]
            break
          end
          ri[j], v[j] = 1, r[1]
          j = j + 1
        end
        if j >= nb then break end
      end
    end
  end
  return false
end

function M.read_nodelist(text, limit)
  -- the names of a node list in Slurm's order (duplicates kept), or the count when past limit, or nil when it is not
  -- read (policy/nodes.py read_nodelist; tests compare the two)
  local items = parse(text)
  if items == nil then return nil end
  local count = count_of(items, limit)
  if count > limit then return count end
  if count == 0 then return nil end
  local names = {}
  each_name(items, function(name) names[#names + 1] = name end)
  return names
end

function M.node_index(data)
  -- where each node is, from the data's node index (filter_data.py _node_index), read on the first --nodelist
  -- after a load and kept with the data: the places stay in the head string (fixed width, read where needed:
  -- place_group); the areas (3 numbers a row), the ranges (each key's start in one array of runs) and bare names
  -- are arrays and tables made at load
  local index = data.node_index
  if index then return index end
  local raw = data.nodes
  local w1, w2, total, places = string.match(raw.head, "^(%d+),(%d+),(%d+)#(%d*)$")
  index = { features = data.features, places = places, w1 = tonumber(w1), w = tonumber(w1) + tonumber(w2),
            areas = raw.areas, ranges = raw.ranges, runs = raw.runs, bare = raw.bare, nodes = tonumber(total) }
  data.node_index = index
  return index
end

local function place_group(index, idx, li)
  -- place idx's group feature at level index li (false: none), from its fixed-width record
  local at, w1 = (idx - 1) * index.w, index.w1
  if li == 1 then return index.features[tonumber(string.sub(index.places, at + 1, at + w1))] or false end
  local area = tonumber(string.sub(index.places, at + w1 + 1, at + index.w)) -- its (zone, region, nvl) row
  return index.features[index.areas[area * 3 + li - 4]] or false
end

local function range_runs(index, key)
  -- where a "prefix/width" key's runs start in index.runs ({count, first, last, place, ...} a key, sorted), nil
  -- when none
  return index.ranges[key]
end

local function place_of(index, name, hint)
  -- the place of one node name (policy/nodes.py place_of), nil when the index does not have it; hint: the run the
  -- last name was in (a list's names mostly follow one another: no search then)
  local prefix, digits = string.match(name, "^(.-)(%d+)$")
  if prefix == nil or #digits > 9 then return index.bare[name] end
  local key, number = prefix .. "/" .. #digits, tonumber(digits)
  local runs, at, i = index.runs, hint.at, hint.i
  if key == hint.key then
    if i > 0 and runs[at + i * 3 - 2] <= number and runs[at + i * 3 - 1] >= number then return runs[at + i * 3] end
  else
    at = range_runs(index, key)
    if at == nil then return nil end
    hint.key, hint.at = key, at
  end
  local a, b = 1, runs[at] -- the last run starting at or before number
  i = 0
  while a <= b do
    local mid = a + b
    mid = (mid - mid % 2) / 2
    if runs[at + mid * 3 - 2] <= number then
      i = mid
      a = mid + 1
    else
      b = mid - 1
    end
  end
  hint.i = i
  if i > 0 and runs[at + i * 3 - 1] >= number then return runs[at + i * 3] end
  return nil
end

function M.place_named(data, text, li)
  -- where the nodes of `text` are at level index li (PLACE_INDEX), in Slurm's order: the distinct groups met (stops
  -- at the second), whether a node is in no group of the level, and why the list cannot be checked (nil, or "long",
  -- "unread", "many", "unknown") with the name not in the data and the most names checked
  if #text > MAX_NAMED then return {}, false, "long" end
  local index = M.node_index(data)
  local limit = math.min(index.nodes, MAX_VISITS)
  local items = parse(text)
  if items == nil then return {}, false, "unread" end
  local count = count_of(items, limit)
  if count > limit then return {}, false, "many", nil, limit end
  if count == 0 then return {}, false, "unread" end
  local seen, homeless, unknown, hint, group_of = {}, false, nil, { i = 0 }, {}
  each_name(items, function(name)
    local idx = place_of(index, name, hint)
    if idx == nil then
      unknown = name
      return true
    end
    local group = group_of[idx]
    if group == nil then
      group = place_group(index, idx, li)
      group_of[idx] = group
    end
    if not group then
      homeless = true
      return true
    end
    if seen[1] ~= group then
      seen[#seen + 1] = group
      return #seen > 1
    end
    return false
  end)
  if unknown ~= nil then return seen, false, "unknown", unknown end
  return seen, homeless, nil
end

return M
