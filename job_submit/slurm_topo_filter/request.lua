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

local function spank_values(env)
  -- the SPANK entries (policy/request.py _spank_values): locality, regions, plan; 0-indexed, as slurmctld builds
  -- the list, at most 1 000 entries read
  local locality, regions, plan
  if type(env) ~= "table" then return nil end
  local i = 0
  while i < 1000 and env[i] ~= nil do
    local kv = env[i]
    i = i + 1
    if type(kv) == "string" and #kv <= MAX_FIELD then
      local k, v = string.match(kv, "^([^=]*)=(.*)$")
      if k == SPANK_LOCALITY and locality == nil then locality = v
      elseif k == SPANK_REGIONS and regions == nil then regions = v
      elseif k == SPANK_PLAN and plan == nil then plan = v end
    end
  end
  return locality, regions, plan
end

local function environment_values(job, locality, regions)
  -- the batch environment, only when the SPANK entries name no locality (slurmctld logs a complaint for every
  -- srun/salloc job whose environment is read)
  local environment = job.environment
  if type(environment) ~= "table" then return locality, regions end
  locality = to_str(environment["SLURM_SPANK_" .. SPANK_LOCALITY])
  if regions == nil then regions = to_str(environment["SLURM_SPANK_" .. SPANK_REGIONS]) end
  return locality, regions
end

local function comment_values(comment, locality, regions)
  -- locality= and locality-regions= in the job's comment (policy/request.py _comment_values); a comment longer
  -- than the filter reads is not read
  if comment ~= nil then comment = to_str(comment) end
  if comment == nil or #comment > MAX_FIELD then return locality, regions end
  for token in string.gmatch(comment, "[^ \t\n\v\f\r]+") do
    local k, v = string.match(token, "^([^=]*)=(.*)$")
    if k == "locality" and locality == nil then locality = v
    elseif k == "locality-regions" and regions == nil then regions = v end
  end
  return locality, regions
end

local function gpu_of(per_job, per_node, per_task)
  -- the GPU request (policy/request.py _gpu): per job, else per node, else per task
  if per_job == nil and per_node == nil and per_task == nil then return nil end
  local scope, gtype, count = "job", M.parse_gpu_tres(per_job)
  if count == nil then scope, gtype, count = "node", M.parse_gpu_tres(per_node) end
  if count == nil then scope, gtype, count = "task", M.parse_gpu_tres(per_task) end
  if count == nil then return nil end
  return { scope = scope, gpu_type = gtype, count = count }
end

local function set(value) return value ~= nil and to_str(value) ~= nil end

local function unchecked_of(job, nodelist)
  -- why the fit is not checked (policy/request.py _unchecked): named or excluded nodes, a reservation, contiguous
  local contiguous = job.contiguous -- read whatever comes first (the field reads stay the same for every job)
  if contiguous ~= nil then contiguous = to_int(contiguous) end
  if nodelist ~= nil then return "--nodelist" end
  if set(job.exc_nodes) then return "--exclude" end
  if set(job.reservation) then return "--reservation" end
  if contiguous ~= nil and contiguous < NO_VAL16 then return "--contiguous" end
  return nil
end

local function het_offset_of(het)
  if het ~= nil and (het == 0 or to_int(het) ~= nil) then return math.floor(het) end
  return nil
end

local function segment_of(job)
  -- (whether the release takes segment_size from job_submit/lua, the job's own --segment): 25.11.2+ is the
  -- release with slurm.CONSOLIDATE_SEGMENTS (policy/request.py segment_ok); segment_size is read only there,
  -- 0 and NO_VAL16 meaning not given
  if slurm == nil or slurm.CONSOLIDATE_SEGMENTS == nil then return false, nil end
  local n = to_int(job.segment_size)
  if n ~= nil and n >= NO_VAL16 then n = nil end
  return true, n
end

local function maybe(convert, value)
  if value == nil then return nil end
  return convert(value)
end

function M.request(job, comment_override)
  -- what a job_desc asks for (policy/request.py JobRequest.from_job_desc), each field read once (in slurmctld
  -- every read copies the value out of the job): hostile sizes are not scanned. comment_override: the comment
  -- an update would give the job (modify), in place of job.comment
  local features, prefer, partition = job.features, job.prefer, job.partition
  local per_job, per_node, per_task = job.tres_per_job, job.tres_per_node, job.tres_per_task
  local oversize = oversize_of(features, prefer, partition, per_job, per_node, per_task)
  if oversize then return { oversize = oversize } end
  local interactive = job.script == nil -- salloc/srun: no batch script, no batch environment
  local locality, regions, plan = spank_values(job.spank_job_env)
  if locality == nil and not interactive then locality, regions = environment_values(job, locality, regions) end
  local comment = comment_override
  if comment == nil then comment = job.comment end
  locality, regions = comment_values(comment, locality, regions)
  regions = maybe(to_str, regions)
  if regions ~= nil and #regions > MAX_FIELD then return { oversize = "--locality-regions" } end
  local gpu = gpu_of(per_job, per_node, per_task)
  local nodelist = maybe(to_str, job.req_nodes)
  -- the task count matters only to GPUs per task: read only then (every field read costs slurmctld a lookup)
  local num_tasks
  if gpu ~= nil and gpu.scope == "task" then num_tasks = job.num_tasks end
  local segment_ok, user_segment = segment_of(job)
  local r = { -- one constructor: the table is sized once
    locality = maybe(to_str, locality), regions = regions, features = maybe(to_str, features),
    prefer = maybe(to_str, prefer), partition = maybe(to_str, partition), min_nodes = maybe(to_int, job.min_nodes),
    num_tasks = maybe(to_int, num_tasks), gpu = gpu, unchecked = unchecked_of(job, nodelist),
    het_offset = het_offset_of(job.het_job_offset), interactive = interactive, nodelist = nodelist,
    time_limit = maybe(to_int, job.time_limit), plan = plan,
  }
  if segment_ok then r.segment_ok, r.user_segment = true, user_segment end -- 25.11.2+ only: nothing before
  return r
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
