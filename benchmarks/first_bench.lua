-- first_bench.lua DATA_FILE [each] - the filter's *first* decision of request shapes (driven by
-- bench_filter.py --first). Every shape of a family is a size no earlier decision asked for (the memos key on
-- the size), so each decision is the first of its shape; every family starts on a freshly loaded and prepared
-- data table (its memos empty, no label derived, no class set seen), so its first decision is also the first
-- after a data load. Without `each`: CPU time (os.clock) of every decision, printed per family (median, p95,
-- worst and the worst shape). With `each`, for callgrind: the same decisions, untimed, with a call of os.clock
-- (C's clock(), which nothing else calls) before the first decision of a family and after every decision, so
-- that `valgrind --tool=callgrind --dump-before=clock` writes one profile per decision; it first calls os.clock
-- CALIBRATE times back to back (the marker's own cost), and prints the families and their sizes in order.
local data_path, each = arg[1], arg[2] == "each"
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006 }
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_error(fmt, ...) io.stderr:write(string.format(fmt, ...) .. "\n") end
local M = require("slurm_topo_filter")

local function fresh_data()
  -- the data as the filter has it after a load (prepared), then a collected heap: the load's garbage is the
  -- load's cost, and a previous family's memos and labels are gone with its data table
  local data = assert(loadfile(data_path))()
  if M.prepare then data = M.prepare(data) end
  collectgarbage("collect")
  return data
end

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

local function copies(f)
  -- the family's job_desc tables, made before any decision (a decision is measured alone)
  local jds = {}
  for i = 1, f[3] do
    local jd = {}
    for k, v in pairs(f[2](i)) do jd[k] = v end
    jds[i] = jd
  end
  return jds
end

local decide, request, clock = M.decide, M.request, os.clock

if each then
  local CALIBRATE = 16
  io.write(string.format("calibrate\t%d\n", CALIBRATE))
  for f = 1, #families do io.write(string.format("family\t%s\t%d\n", families[f][1], families[f][3])) end
  io.flush()
  for _ = 1, CALIBRATE do clock() end
  for _, f in ipairs(families) do
    local data = fresh_data()
    local jds = copies(f)
    clock()
    for i = 1, #jds do
      decide(data, request(jds[i]))
      clock()
    end
  end
  return
end

for _, f in ipairs(families) do
  local data = fresh_data()
  local jds = copies(f)
  local times, worst, worst_i = {}, -1, 0
  for i = 1, #jds do
    local t = clock()
    decide(data, request(jds[i]))
    local dt = (clock() - t) * 1e6
    times[i] = dt
    if dt > worst then worst, worst_i = dt, i end
  end
  table.sort(times)
  local n = #times
  io.write(string.format("family\t%s\t%d\t%.1f\t%.1f\t%.1f\t%d\n", f[1], n, times[math.ceil(n / 2)],
    times[math.ceil(0.95 * n)], worst, worst_i))
end
