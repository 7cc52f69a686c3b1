-- filter_bench.lua DATA_FILE ITERATIONS [CASE] - time the slurm-topo filter in plain Lua 5.1 (driven by
-- bench_filter.py). With CASE (1-based), only that case's decision is run ITERATIONS times, untimed (for
-- instruction counts under callgrind); with submit:CASE the whole submit() hook on a fresh job_desc copy,
-- with trivial:CASE the same copy handed to a hook that only returns slurm.SUCCESS (the trivial filter the
-- submit overhead is measured against); with load, only the data file's load in the first submission.
-- FILTER_DIR (environment) names another job_submit/ folder.
local data_path, iterations = arg[1], tonumber(arg[2] or "20000")
local mode, case_arg = string.match(arg[3] or "", "^(%a+):(%d+)$")
local only_case = tonumber(case_arg or arg[3] or "")
mode = mode or "decide"
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006 }
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_error(fmt, ...) io.stderr:write(string.format(fmt, ...) .. "\n") end
local M = require("slurm_topo_filter")

-- the data file's load as the filter does it (read, checksum, load), inside the first submission
M.configure({ data = data_path, recheck = 1e9 })
local t0 = os.clock()
M.submit({ min_nodes = 1, script = "#!/bin/sh\n" }, {}, 0)
local load_s = os.clock() - t0
if arg[3] == "load" then -- the load alone (bench_filter.py --load-only)
  io.write(string.format("load_s %.6f\n", load_s))
  return
end
local data = assert(loadfile(data_path))()
if M.prepare then data = M.prepare(data) end -- format 5: the group lists from its columns

local SPANK = "_SLURM_SPANK_OPTION_locality_locality="
local function job(loc, fields)
  local j = { spank_job_env = { [0] = SPANK .. loc }, min_nodes = 4294967294, num_tasks = 4294967294,
              script = "#!/bin/sh\n" } -- a batch job
  for k, v in pairs(fields) do j[k] = v end
  return j
end
local cases = {
  { "zone -N4", job("zone", { min_nodes = 4 }) },
  { "prefer -N2", job("prefer", { min_nodes = 2 }) },
  { "network_group:fail -N8 8xGPU/node", job("network_group:fail", { min_nodes = 8, tres_per_node = "gres:gpu:8" }) },
  { "region --gpus h100:64", job("region", { tres_per_job = "gres/gpu:h100:64" }) },
  { "zone -C ib -N4", job("zone", { min_nodes = 4, features = "ib" }) },
  { "zone:fail impossible -N100000", job("zone:fail", { min_nodes = 100000 }) },
  { "any", job("any", {}) },
  { "zone -N1 (bench_submit's job)", job("zone", { min_nodes = 1 }) },
}
local function trivial_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
if only_case then
  local template = cases[only_case][2]
  if mode == "decide" then
    for _ = 1, iterations do M.decide(data, M.request(template)) end
  else
    local hook = mode == "submit" and M.submit or trivial_submit
    for _ = 1, iterations do
      local jd = {}
      for k, v in pairs(template) do jd[k] = v end
      hook(jd, {}, 0)
    end
  end
  return
end
io.write(string.format("load_s %.6f\n", load_s))
for _, case in ipairs(cases) do
  local name, template = case[1], case[2]
  local samples = {}
  for r = 1, 5 do
    local t = os.clock()
    for i = 1, iterations do
      local jd = {}
      for k, v in pairs(template) do jd[k] = v end
      M.submit(jd, {}, 0)
    end
    samples[r] = (os.clock() - t) / iterations * 1e6
  end
  table.sort(samples)
  local decide = {}
  for r = 1, 5 do -- the decision alone: read the job and decide, nothing written back
    local t = os.clock()
    for i = 1, iterations do M.decide(data, M.request(template)) end
    decide[r] = (os.clock() - t) / iterations * 1e6
  end
  table.sort(decide)
  io.write(string.format("case\t%s\t%.2f\t%.2f\t%.2f\t%.2f\n", name, samples[3], samples[1], samples[5],
    decide[3]))
end
