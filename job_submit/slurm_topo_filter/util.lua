--[[
slurm_topo_filter/util.lua - small helpers the rules share (Lua 5.1: no goto, no integer division, no utf8):
Python's str.split, the readers of job_desc values (a number Slurm did not set, an empty string, a token), and
numbers as text (remembered).
]]

local NO_VAL = require("slurm_topo_filter.vocab").NO_VAL

local function split(text, sep)
  -- plain split keeping empty fields, like Python's str.split(sep)
  local out, start = {}, 1
  while true do
    local i = string.find(text, sep, start, true)
    if not i then
      out[#out + 1] = string.sub(text, start)
      return out
    end
    out[#out + 1] = string.sub(text, start, i - 1)
    start = i + #sep
  end
end

local function to_int(v)
  if type(v) ~= "number" or v ~= v or v <= 0 or v >= NO_VAL then return nil end
  return math.floor(v)
end

local function to_str(v)
  if type(v) ~= "string" or v == "" then return nil end
  return v
end

local function is_token(s)
  return string.find(s, "^[%w%._=+%-]+$") ~= nil
end

local function is_label(s)
  return #s <= 63 and string.find(s, "^[%w%._%-]+$") ~= nil
end

-- Numbers as text, remembered (Lua 5.1 formats a number with sprintf("%.14g"): ~1 500 instructions, more than a
-- table lookup by far; the same few sizes recur in every decision's memo keys and records). The whole numbers
-- below 16 * NUMBER_TEXTS (4 096: node and GPU counts, budgets, limits) are kept for good, at most that many
-- (~0.3 MiB); the others bounded: started over past NUMBER_TEXTS entries.
local NUMBER_TEXTS = 256
local number_texts, number_count = {}, 0

local small_texts = {} -- the texts of the whole numbers below 16 * NUMBER_TEXTS, kept for the process's life

local function num(n)
  -- tostring(n), the same text as `"" .. n`
  local s = small_texts[n]
  if s ~= nil then return s end
  s = number_texts[n]
  if s == nil then
    s = tostring(n)
    if n >= 0 and n < NUMBER_TEXTS * 16 and n % 1 == 0 then -- never started over
      small_texts[n] = s
      return s
    end
    if number_count >= NUMBER_TEXTS then number_texts, number_count = {}, 0 end
    number_texts[n] = s
    number_count = number_count + 1
  end
  return s
end

local function is_digits(s)
  return #s <= 9 and string.find(s, "^[0-9]+$") ~= nil
end

return { split = split, to_int = to_int, to_str = to_str, is_token = is_token, is_label = is_label,
         is_digits = is_digits, num = num }
