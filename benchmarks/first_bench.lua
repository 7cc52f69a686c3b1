-- first_bench.lua DATA_FILE [FAMILY [COUNT]] - the filter's *first* decision of request shapes (driven by
-- bench_filter.py --first). Every shape of a family is a size no earlier decision asked for (the memos key
-- on the size), so each decision is the first of its shape. Without FAMILY: CPU time (os.clock) of every
-- decision, printed per family (median, p95, worst and the worst shape). With FAMILY (and COUNT, default
-- all): only that family's first COUNT decisions, untimed, for instruction counts under callgrind; with
-- COUNT 0 the same process without them (the floor to subtract).
local data_path, only, count = arg[1], arg[2], tonumber(arg[3] or "")
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006 }
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_error(fmt, ...) io.stderr:write(string.format(fmt, ...) .. "\n") end
local M = require("slurm_topo_filter")
local data = assert(loadfile(data_path))()
if M.prepare then data = M.prepare(data) end
collectgarbage("collect") -- the load's garbage is the load's cost: decisions start from a collected heap

local SPANK = "_SLURM_SPANK_OPTION_locality_locality="
local function job(loc, fields)
  local j = { spank_job_env = { [0] = SPANK .. loc }, min_nodes = 4294967294, num_tasks = 4294967294,
              script = "#!/bin/sh\n" }
  for k, v in pairs(fields) do j[k] = v end
  return j
end

-- families: name, then a function of i (1..n) giving the i-th shape, and n
local families = {
  { "zone -N1..512", function(i) return job("zone", { min_nodes = i }) end, 512 },
  { "prefer -N1..512", function(i) return job("prefer", { min_nodes = i }) end, 512 },
  { "network_group:fail -N12..512 8xGPU/node", function(i)
      return job("network_group:fail", { min_nodes = 11 + i, tres_per_node = "gres:gpu:8" }) end, 501 },
  { "network_group -N1..512 --gpus-per-node h100:8", function(i)
      return job("network_group", { min_nodes = i, tres_per_node = "gres:gpu:h100:8" }) end, 512 },
  { "zone --gpus a100:8..4096", function(i)
      return job("zone", { tres_per_job = "gres/gpu:a100:" .. (8 * i) }) end, 512 },
  { "region --gpus h100:96..1024", function(i)
      return job("region", { tres_per_job = "gres/gpu:h100:" .. (94 + 2 * i) }) end, 465 },
  { "region:fail -N1000..100000", function(i)
      return job("region:fail", { min_nodes = 800 + 200 * i }) end, 497 },
  { "nvl -N1..40 --gpus-per-node 4", function(i)
      return job("nvl", { min_nodes = i, tres_per_node = "gres:gpu:4" }) end, 40 },
  { "prefer --gpus 1..512", function(i) return job("prefer", { tres_per_job = "gres/gpu:" .. i }) end, 512 },
}

local function run(template)
  local jd = {}
  for k, v in pairs(template) do jd[k] = v end
  return M.decide(data, M.request(jd))
end

if only then
  for _, f in ipairs(families) do
    if f[1] == only then
      local n = count or f[3]
      for i = 1, n do run(f[2](i)) end
      return
    end
  end
  error("no family " .. only)
end

for _, f in ipairs(families) do
  local times, worst, worst_i = {}, -1, 0
  for i = 1, f[3] do
    local template = f[2](i)
    local t = os.clock()
    run(template)
    local dt = (os.clock() - t) * 1e6
    times[i] = dt
    if dt > worst then worst, worst_i = dt, i end
  end
  table.sort(times)
  local n = #times
  io.write(string.format("family\t%s\t%d\t%.1f\t%.1f\t%.1f\t%d\n", f[1], n, times[math.ceil(n / 2)],
    times[math.ceil(0.95 * n)], worst, worst_i))
end
