--[[
slurm_topo_filter/request.lua - the request (slurm_topo/policy/request.py): what the filter reads from a
job_desc as job_submit/lua hands it (SPANK option, batch environment, comment, sizes, GPUs, node lists), each
field once, and the --plan text's check.
]]

local V = require("slurm_topo_filter.vocab")
local U = require("slurm_topo_filter.util")

local NO_VAL16, MAX_CONSTRAINT, MAX_FIELD = V.NO_VAL16, V.MAX_CONSTRAINT, V.MAX_FIELD
local SPANK_LOCALITY, SPANK_REGIONS, SPANK_PLAN = V.SPANK_LOCALITY, V.SPANK_REGIONS, V.SPANK_PLAN
local PLAN_KEYS = V.PLAN_KEYS
local split, to_int, to_str, is_label, is_digits = U.split, U.to_int, U.to_str, U.is_label, U.is_digits

local M = {}

local function oversize_of(features, prefer, partition, per_job, per_node, per_task)
  -- the first field longer than the filter reads, by its option name (policy/request.py _oversize)
  if type(features) == "string" and #features > MAX_CONSTRAINT then return "--constraint" end
  if type(prefer) == "string" and #prefer > MAX_CONSTRAINT then return "--prefer" end
  if type(partition) == "string" and #partition > MAX_FIELD then return "--partition" end
  if type(per_job) == "string" and #per_job > MAX_FIELD then return "--gpus" end
  if type(per_node) == "string" and #per_node > MAX_FIELD then return "--gpus-per-node" end
  if type(per_task) == "string" and #per_task > MAX_FIELD then return "--gpus-per-task" end
  return nil
end

function M.parse_gpu_tres(text)
  if type(text) ~= "string" or text == "" then return nil end
  for _, item in ipairs(split(text, ",")) do
    local head = string.sub(item, 1, 8)
    if head == "gres:gpu" or head == "gres/gpu" then
      local rest = string.sub(item, 9)
      if rest == "" then return nil, 1 end
      if string.sub(rest, 1, 1) == ":" then
        local parts = split(string.sub(rest, 2), ":")
        if #parts == 1 then
          if is_digits(parts[1]) then return nil, tonumber(parts[1]) end
          if is_label(parts[1]) then return parts[1], 1 end
        elseif #parts == 2 and is_label(parts[1]) and is_digits(parts[2]) then
          return parts[1], tonumber(parts[2])
        end
      end
    end
  end
  return nil, nil
end

function M.request(job, comment_override)
  -- comment_override: the comment an update would give the job (modify), in place of job.comment
  -- each field once (in slurmctld every read copies the value out of the job): hostile sizes are not scanned
  local features, prefer, partition = job.features, job.prefer, job.partition
  local per_job, per_node, per_task = job.tres_per_job, job.tres_per_node, job.tres_per_task
  if features ~= nil or prefer ~= nil or partition ~= nil or per_job ~= nil or per_node ~= nil or per_task ~= nil then
    local oversize = oversize_of(features, prefer, partition, per_job, per_node, per_task)
    if oversize then return { oversize = oversize } end
  end
  local locality, regions, plan
  local interactive = job.script == nil -- salloc/srun: no batch script, no batch environment
  local env = job.spank_job_env
  if type(env) == "table" then
    local i = 0
    while i < 1000 and env[i] ~= nil do -- 0-indexed, as slurmctld builds it
      local kv = env[i]
      i = i + 1
      if type(kv) == "string" and #kv <= MAX_FIELD then
        local k, v = string.match(kv, "^([^=]*)=(.*)$")
        if k == SPANK_LOCALITY and locality == nil then locality = v
        elseif k == SPANK_REGIONS and regions == nil then regions = v
        elseif k == SPANK_PLAN and plan == nil then plan = v end
      end
    end
  end
  -- The batch environment only when the SPANK entries say nothing (slurmctld logs a complaint for every
  -- srun/salloc job whose environment is read).
  local environment
  if locality == nil and not interactive then environment = job.environment end
  if type(environment) == "table" then
    locality = to_str(environment["SLURM_SPANK_" .. SPANK_LOCALITY])
    if regions == nil then regions = to_str(environment["SLURM_SPANK_" .. SPANK_REGIONS]) end
  end
  local comment = comment_override
  if comment == nil then comment = job.comment end
  if comment ~= nil then comment = to_str(comment) end
  if comment ~= nil and #comment <= MAX_FIELD then -- a longer comment is not read
    for token in string.gmatch(comment, "[^ \t\n\v\f\r]+") do
      local k, v = string.match(token, "^([^=]*)=(.*)$")
      if k == "locality" and locality == nil then locality = v
      elseif k == "locality-regions" and regions == nil then regions = v end
    end
  end
  -- (most fields are unset: a nil skips the helper call; what the submit path costs: results/submit.md)
  if regions ~= nil then regions = to_str(regions) end
  if regions ~= nil and #regions > MAX_FIELD then return { oversize = "--locality-regions" } end
  local gpu
  if per_job ~= nil or per_node ~= nil or per_task ~= nil then
    local scope, gtype, count = "job", M.parse_gpu_tres(per_job)
    if count == nil then scope, gtype, count = "node", M.parse_gpu_tres(per_node) end
    if count == nil then scope, gtype, count = "task", M.parse_gpu_tres(per_task) end
    if count ~= nil then gpu = { scope = scope, gpu_type = gtype, count = count } end
  end
  local unchecked
  local nodelist = job.req_nodes
  if nodelist ~= nil then nodelist = to_str(nodelist) end
  if nodelist ~= nil then
    unchecked = "--nodelist"
  else
    local exc = job.exc_nodes
    if exc ~= nil and to_str(exc) ~= nil then
      unchecked = "--exclude"
    else
      local resv = job.reservation
      if resv ~= nil and to_str(resv) ~= nil then unchecked = "--reservation" end
    end
  end
  local contiguous = job.contiguous
  if contiguous ~= nil then contiguous = to_int(contiguous) end
  if unchecked == nil and contiguous ~= nil and contiguous < NO_VAL16 then unchecked = "--contiguous" end
  local het, het_offset = job.het_job_offset, nil
  if het ~= nil and (het == 0 or to_int(het) ~= nil) then het_offset = math.floor(het) end
  -- the task count matters only to GPUs per task (needs): read only then (every field read costs slurmctld a
  -- lookup by name)
  local num_tasks
  if gpu ~= nil and gpu.scope == "task" then num_tasks = job.num_tasks end
  local min_nodes, time_limit = job.min_nodes, job.time_limit
  return { -- one constructor: the table is sized once
    locality = locality ~= nil and to_str(locality) or nil, regions = regions,
    features = features ~= nil and to_str(features) or nil, prefer = prefer ~= nil and to_str(prefer) or nil,
    partition = partition ~= nil and to_str(partition) or nil,
    min_nodes = min_nodes ~= nil and to_int(min_nodes) or nil,
    num_tasks = num_tasks ~= nil and to_int(num_tasks) or nil,
    gpu = gpu, unchecked = unchecked, het_offset = het_offset, interactive = interactive,
    nodelist = nodelist, time_limit = time_limit ~= nil and to_int(time_limit) or nil, plan = plan,
  }
end

-- sbatch --plan=KEY=VALUE,... (the SPANK option): only known keys and [A-Za-z0-9.%-] values, so the text cannot
-- carry a ';', a space or another record (the entry points copy it into AdminComment).
function M.valid_plan(text)
  if type(text) ~= "string" or #text == 0 or #text > 200 or string.sub(text, -1) == "," then return false end
  for item in string.gmatch(text, "[^,]*") do
    if item ~= "" then
      local k, v = string.match(item, "^([a-z_]+)=([A-Za-z0-9.%%%-]+)$")
      if k == nil or not PLAN_KEYS[k] then return false end
    end
  end
  return string.find(text, ",,", 1, true) == nil and string.sub(text, 1, 1) ~= ","
end

return M
