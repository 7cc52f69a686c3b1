--[[
slurm_topo_filter/vocab.lua - the filter's vocabulary, the Lua twin of slurm_topo/policy/vocab.py: Slurm's
limits and sentinels, the record prefixes, the levels and modes, the messages, and the small text helpers that
format them. Every constant here is defined once for the whole filter (the other modules take them from this
table); tests/test_lua_constants.py compares each with its Python twin.
]]

local NO_VAL = 4294967294
local NO_VAL16 = 65534
local INFINITE = 4294967295
local RECORD_PREFIX = "slurm-topo: "
local MAX_ALTERNATIVES = 64
local MAX_CONSTRAINT = 1024
local MAX_RECORD = 200
local MAX_FIELD = 4096 -- longest partition list, GPU request, regions, SPANK entry or comment read
local RECHECK_SECONDS = 10 -- how often the data file's first line is looked at again
local DATA_FORMAT = 9 -- slurm_topo/render/filter_data.py FORMAT
local DATA_DIGIT_ZERO = 63 -- the byte of the digit 0 in the data's digit strings (filter_data.py DIGIT_ZERO)
local DATA_DIGIT_WIDTH = 5 -- the most digits a value has there (filter_data.py DIGIT_WIDTH)
local DATA_PRESIZE = 7000 -- values string.byte/unpack return at once at load (under Lua's C stack of 8000)
local SUMS_PAIRS = 8192 -- class pairs of shapes summed at load for GPU requests' sets, in all (scan.lua gpu_sets)
local SPANK_LOCALITY = "_SLURM_SPANK_OPTION_locality_locality"
local SPANK_REGIONS = "_SLURM_SPANK_OPTION_locality_locality_regions"
local SPANK_PLAN = "_SLURM_SPANK_OPTION_locality_plan"
local LEVELS = { "network_group", "zone", "region" }
local LOCALITIES = { prefer = true, nvl = true, network_group = true, zone = true, region = true, any = true }
local MODES = { wait = true, fail = true, auto = true } -- auto: decided as wait, plus the budget record
-- policy/vocab.py: --locality=nvl:segment=N[:spread|:consolidate][:wait|:fail], for an nvl job larger than one
-- NVLink domain (segment_size, written from 25.11.2: the release with slurm.CONSOLIDATE_SEGMENTS)
local SEGMENT_KEY = "segment="
local SEGMENT_POLICIES = { spread = true, consolidate = true }
local MAX_SEGMENT = 9999
local SEGMENT_RELEASE = "25.11.2"
local SEGMENT_ADVICE = "--locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]: N a whole number from 1 to "
  .. MAX_SEGMENT .. " (the nodes of one segment, kept in one NVLink domain)"
local AUTO_LEVELS = { "network_group", "zone", "region", "any" } -- an auto job's budget levels, tightest first
local AUTO_INDEX = { network_group = 1, zone = 2, region = 3 }
local BUDGET_PREFIX = "slurm-topo-auto: " -- slurm_topo/relaxer/relax.py: the budget record an auto job carries
local RELAX_PREFIX = "slurm-topo-relax: " -- slurm_topo/relaxer/relax.py: one per relaxation
local PLAN_PREFIX = "slurm-topo-plan: " -- the --plan record, first in AdminComment (explain reads it)
local PLAN_KEYS = { tp = true, pp = true, dp = true, bytes = true, allreduce_bytes = true, tp_bytes = true,
  pp_bytes = true, order = true, gpus_per_node = true, compute = true, comm = true, overlap = true, ep = true,
  cp = true, ep_bytes = true, cp_bytes = true }
local AUTO_NO_LIMIT = "; auto: no time limit, no budget (waits as :wait)"
local AUTO_NO_PLAN = "; auto: no site plan, no budget (waits as :wait)"
local AUTO_NO_FIT = "; auto: the site plan does not fit this job, no budget (waits as :wait)"
local AUTO_WAITS = { -- what the submitter reads when an auto job gets no budget
  [AUTO_NO_LIMIT] = "no time limit (give --time)",
  [AUTO_NO_PLAN] = "no site plan in the filter's data",
  [AUTO_NO_FIT] = "the site plan does not fit this job",
}
local CONFLICT_NOTE = "; a required locality cannot be enforced with it: drop the brackets or counts, or use "
  .. "--locality=prefer"
local IMPLICIT_PARTITION = "*" -- the data was made without partitions
local NVL_NONE = "no node of the partition is in an NVLink domain"
local NVL_NONE_NOTE = "; no size can ever fit: use --locality=network_group or zone"
-- (the prefixes of the features slurm-topo makes are the data's `owned`: model.LEVEL_FEATURE_PREFIXES, one list)
local MAX_NAMED = 4096 -- policy/nodes.py: longest --nodelist read
local MAX_VISITS = 256 -- policy/nodes.py: most names one --nodelist may name (each one look-up)
local MAX_NAMED_DIGITS = 15 -- longest digit run of a --nodelist (Lua's numbers are exact to 2^53)
-- policy/decide.py: the prefer cascade's levels (NVLink domains first), the zones per region a union is made
-- from, and the order of the cascade's lists in the bracket (1-based here, 0-based there): nvl, ng, zone,
-- unions inside a region, region, unions across regions (with families: then the bare family values)
local PREFER_LEVELS = { "nvl", "network_group", "zone", "region" }
local UNION_ZONES = 8
local LOOKS_LIST = 64 -- policy/vocab.py: the work bound (scan.lua), groups one walk of a level's list looks at
local LOOKS_FINER = 32 -- each finer list of a required zone's or region's --prefer
local LOOKS_LARGEST = 32 -- the largest-group search of a refusal
local UNION_ROWS = 32 -- zones prefer's unions are made from (the largest)
local UNION_TRIES = 96 -- zone combinations prefer's unions try, in all
local MAX_MERGED = 16 -- most partitions of a -p list the filter merges
local MAX_NODES = 262144 -- core/model.py: the most nodes a fleet holds (a group's nodes and a level's ranks are fewer)
local UNION_EMIT = { 3, 4, 5, 1, 6, 2 }
local UNION_EMIT_FAMILIES = { 3, 4, 5, 1, 6, 2, 7 }
-- policy/modify.py _SIZE_FIELDS: what an update may change that the decision depends on
local SIZE_FIELDS = { "partition", "tres_per_node", "tres_per_job", "tres_per_task", "req_nodes", "exc_nodes",
  "reservation" }

local function record(text)
  -- a decision's AdminComment record: the prefix, cut at MAX_RECORD
  text = RECORD_PREFIX .. text
  if #text <= MAX_RECORD then return text end
  return string.sub(text, 1, MAX_RECORD - 3) .. "..."
end

local function safe(text)
  -- the user's string as it may appear in a message: first 40 bytes, ASCII word characters only
  return (string.gsub(string.sub(text, 1, 40), "[^%w%._:=,+%-]", "?"))
end

local function plural(n, word)
  if n == 1 then return n .. " " .. word end
  return n .. " " .. word .. "s"
end

local SEGMENT_HEAD = "nvl:" .. SEGMENT_KEY

local function parse_segment(text)
  -- policy/vocab.py parse_segment: "nvl:segment=2:spread:fail" -> 2, "spread", "fail"; nil for a text that is
  -- not the segment form; false for one that starts like it and does not parse
  if string.sub(text, 1, #SEGMENT_HEAD) ~= SEGMENT_HEAD then return nil end
  local digits, rest = string.match(text, "^nvl:segment=([^:]*)(.*)$")
  if not string.find(digits, "^[1-9][0-9]?[0-9]?[0-9]?$") then return false end
  local policy, mode = nil, "wait"
  local a, b = string.match(rest, "^:([^:]*)(.*)$")
  if a ~= nil and SEGMENT_POLICIES[a] then
    policy, rest = a, b
    a, b = string.match(rest, "^:([^:]*)(.*)$")
  end
  if a ~= nil then
    if b ~= "" or (a ~= "wait" and a ~= "fail") then return false end
    mode = a
  elseif rest ~= "" then
    return false
  end
  return tonumber(digits), policy, mode
end

local function without_record(text)
  -- an AdminComment without our record (always its last part: a new decision replaces it); nil when empty
  if type(text) ~= "string" then return nil end
  local i = string.find(text, RECORD_PREFIX, 1, true)
  if i == nil then return text end
  local rest = string.gsub(string.sub(text, 1, i - 1), "[; ]+$", "")
  if rest == "" then return nil end
  return rest
end

return {
  NO_VAL = NO_VAL, NO_VAL16 = NO_VAL16, INFINITE = INFINITE, RECORD_PREFIX = RECORD_PREFIX,
  MAX_ALTERNATIVES = MAX_ALTERNATIVES, MAX_CONSTRAINT = MAX_CONSTRAINT, MAX_RECORD = MAX_RECORD,
  MAX_FIELD = MAX_FIELD, RECHECK_SECONDS = RECHECK_SECONDS, DATA_FORMAT = DATA_FORMAT,
  DATA_DIGIT_ZERO = DATA_DIGIT_ZERO, DATA_DIGIT_WIDTH = DATA_DIGIT_WIDTH, DATA_PRESIZE = DATA_PRESIZE, SUMS_PAIRS = SUMS_PAIRS,
  SPANK_LOCALITY = SPANK_LOCALITY, SPANK_REGIONS = SPANK_REGIONS, SPANK_PLAN = SPANK_PLAN, LEVELS = LEVELS,
  LOCALITIES = LOCALITIES, MODES = MODES, AUTO_LEVELS = AUTO_LEVELS, AUTO_INDEX = AUTO_INDEX,
  BUDGET_PREFIX = BUDGET_PREFIX, RELAX_PREFIX = RELAX_PREFIX, PLAN_PREFIX = PLAN_PREFIX, PLAN_KEYS = PLAN_KEYS,
  AUTO_NO_LIMIT = AUTO_NO_LIMIT, AUTO_NO_PLAN = AUTO_NO_PLAN, AUTO_NO_FIT = AUTO_NO_FIT, AUTO_WAITS = AUTO_WAITS,
  CONFLICT_NOTE = CONFLICT_NOTE, IMPLICIT_PARTITION = IMPLICIT_PARTITION, NVL_NONE = NVL_NONE,
  NVL_NONE_NOTE = NVL_NONE_NOTE, PREFER_LEVELS = PREFER_LEVELS,
  UNION_ZONES = UNION_ZONES, LOOKS_LIST = LOOKS_LIST, LOOKS_FINER = LOOKS_FINER, LOOKS_LARGEST = LOOKS_LARGEST,
  UNION_ROWS = UNION_ROWS, UNION_TRIES = UNION_TRIES, MAX_MERGED = MAX_MERGED, MAX_NODES = MAX_NODES, UNION_EMIT = UNION_EMIT, UNION_EMIT_FAMILIES = UNION_EMIT_FAMILIES,
  SIZE_FIELDS = SIZE_FIELDS, MAX_NAMED = MAX_NAMED, MAX_VISITS = MAX_VISITS, MAX_NAMED_DIGITS = MAX_NAMED_DIGITS,
  SEGMENT_KEY = SEGMENT_KEY, SEGMENT_POLICIES = SEGMENT_POLICIES, MAX_SEGMENT = MAX_SEGMENT,
  SEGMENT_RELEASE = SEGMENT_RELEASE, SEGMENT_ADVICE = SEGMENT_ADVICE, parse_segment = parse_segment,
  record = record, safe = safe, plural = plural, without_record = without_record,
}
