--[[
slurm_topo_filter/constraint.lua - the user's constraint (slurm_topo/policy/constraint.py): its kind (none,
and, or, bracket, complex, invalid), whether its names can be counted against the data's node classes, and how
a locality's terms are composed with it.
]]

local U = require("slurm_topo_filter.util")

local split, is_token = U.split, U.is_token

local M = {}

local function all_tokens(list)
  for _, x in ipairs(list) do
    if not is_token(x) then return false end
  end
  return true
end

local NO_CONSTRAINT = { kind = "none", names = {} } -- shared, read-only

local function parse_bracket(t, text, open, close, complex)
  -- "a&[x|y]&b": the names outside (ANDed) and inside the one bracket; complex when it is anything else
  if not (open and close) or close < open or string.find(t, "[", open + 1, true)
    or string.find(t, "]", close + 1, true) or string.find(t, "(", 1, true) or string.find(t, "*", 1, true) then
    return complex
  end
  local pre, inner, post = string.sub(t, 1, open - 1), string.sub(t, open + 1, close - 1), string.sub(t, close + 1)
  if (pre ~= "" and string.sub(pre, -1) ~= "&") or (post ~= "" and string.sub(post, 1, 1) ~= "&") then
    return complex
  end
  local outside = {}
  if pre ~= "" then
    for _, x in ipairs(split(string.sub(pre, 1, -2), "&")) do outside[#outside + 1] = x end
  end
  if post ~= "" then
    for _, x in ipairs(split(string.sub(post, 2), "&")) do outside[#outside + 1] = x end
  end
  local inside = split(inner, "|")
  if not all_tokens(outside) or not all_tokens(inside) then return complex end
  return { kind = "bracket", names = outside, inside = inside, text = text }
end

function M.parse_constraint(text)
  if text == nil then return NO_CONSTRAINT end
  local t = string.gsub(text, ",", "&")
  if string.find(t, "[ \t\n]") then return { kind = "invalid", text = text, names = {} } end
  local complex = { kind = "complex", text = text, names = {} }
  local open, close = string.find(t, "[", 1, true), string.find(t, "]", 1, true)
  if open or close then return parse_bracket(t, text, open, close, complex) end
  if string.find(t, "[()*]") or (string.find(t, "|", 1, true) and string.find(t, "&", 1, true)) then
    return complex
  end
  local sep, kind = "&", "and"
  if string.find(t, "|", 1, true) then sep, kind = "|", "or" end
  local names = split(t, sep)
  if not all_tokens(names) then return { kind = "invalid", text = text, names = {} } end
  return { kind = kind, names = names, text = text }
end

function M.counted(c, owned)
  -- whether node classes can be matched against it: not when it names a feature slurm-topo makes (owned: the data's
  -- prefixes, model.LEVEL_FEATURE_PREFIXES), which are the groups' own (policy/constraint.py Constraint.counted)
  if c.kind == "complex" or c.kind == "invalid" then return false end
  for _, n in ipairs(c.names) do
    for _, p in ipairs(owned) do
      if string.sub(n, 1, #p) == p then return false end
    end
  end
  return true
end

local function has_top_level_or(text)
  local depth = 0
  for i = 1, #text do
    local ch = string.sub(text, i, i)
    if ch == "(" then depth = depth + 1 elseif ch == ")" then depth = depth - 1 end
    if ch == "|" and depth == 0 then return true end
  end
  return false
end

function M.compose(c, terms)
  local parts = {}
  if c.kind == "none" then
    -- nothing of the user's
  elseif c.kind == "and" then
    parts[1] = c.text
  elseif c.kind == "or" then
    parts[1] = "(" .. c.text .. ")"
  elseif c.kind == "bracket" then
    for _, n in ipairs(c.names) do parts[#parts + 1] = n end
  elseif c.kind == "complex" and not string.find(c.text, "[", 1, true) and not has_top_level_or(c.text) then
    parts[1] = c.text
  else
    return nil
  end
  for _, t in ipairs(terms) do parts[#parts + 1] = t end
  return table.concat(parts, "&")
end

return M
