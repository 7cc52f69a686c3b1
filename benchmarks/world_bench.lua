-- world_bench.lua DATA_FILE SHAPES_FILE [each] - the filter's first decisions on generated request shapes
-- (driven by bench_filter_world.py). SHAPES_FILE returns { {name = FAMILY, jobs = {job_desc, ...}}, ... }.
-- Every family runs on a freshly loaded data table: the filter is configured anew, the previous table is
-- collected, and the filter's own loader reads, checks, loads and prepares the file (as in slurmctld after
-- a new data file), then each job goes through the whole submit() hook once (job_desc tables made before any
-- decision; a decision is measured alone).
--
-- Without `each`: CPU time (os.clock) of every load ("load\tFAMILY\tSECONDS") and decision
-- ("d\tFAMILY\tI\tOUTCOME\tMICROSECONDS\tRAISED"), where OUTCOME is what submit() did to the job (reject,
-- hold, required: --constraint written, prefer: only --prefer written, pass) and RAISED 1 when the decision
-- raised inside the filter (submit fails open; checked on a copy of the job with the filter's own request
-- and decide, where it exports them).
--
-- With `each`, for callgrind: the same loads and decisions, untimed, with a call of os.clock (C's clock(),
-- which the filter never calls) before and after each load, after the collection that follows it, and after
-- every decision, so that `valgrind --tool=callgrind --dump-before=clock` writes one profile per load and per
-- decision; it first calls os.clock CALIBRATE times in a loop of the same shape with a hook that does nothing
-- (the marker's own cost), and prints the families and their sizes in order.
-- FILTER_DIR (environment) names another job_submit/ folder. COLLECTOR=stopped (environment, with `each`) stops
-- Lua's collector after each load's collection: the decisions' instructions without the collector's steps
-- (python benchmarks/bench_filter_world.py passes the environment on; label such a run as such).
local data_path, shapes_path, each = arg[1], arg[2], arg[3] == "each"
local STOPPED = os.getenv("COLLECTOR") == "stopped"
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006, ESLURM_ACCESS_DENIED = 2002 }
local logged = {}
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_verbose() end
function slurm.log_error(fmt, ...) logged[#logged + 1] = string.format(fmt, ...) end
local M = require("slurm_topo_filter")
local loader = package.loaded["slurm_topo_filter.data"]
local families = assert(loadfile(shapes_path))()
local clock, submit, collect = os.clock, M.submit, collectgarbage
local PART_LIST = {}

local function forget()
  -- the filter configured anew: it forgets its loaded table (collected before the next load is measured)
  M.configure({ data = data_path, recheck = 1e9 })
end

local function fresh_load()
  -- the filter's own load; its data table, or true where the filter keeps no loader module of that name (then a
  -- first submission of a job that asks for nothing loads it)
  if loader ~= nil and loader.load ~= nil then return loader.load() end
  submit({ script = "#!/bin/sh\n", min_nodes = 1 }, PART_LIST, 0)
  return true
end

local function check_loaded(loaded, name)
  if loaded == nil then
    io.stderr:write("the filter did not load the data file (it fails open): " .. tostring(loader and loader.why and
      loader.why()) .. "\n" .. table.concat(logged, "\n") .. "\n")
    os.exit(3)
  end
  if #logged > 0 then io.stderr:write(name .. ": " .. table.concat(logged, "\n") .. "\n") end
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do
    if type(v) == "table" then v = copy(v) end
    c[k] = v
  end
  return c
end

if each then
  local CALIBRATE = 16
  io.write(string.format("calibrate\t%d\n", CALIBRATE))
  for _, f in ipairs(families) do io.write(string.format("family\t%s\t%d\n", f.name, #f.jobs)) end
  io.flush()
  local function noop() return 0 end
  local rcs, dummy = {}, {}
  for i = 1, CALIBRATE do
    rcs[i] = noop(dummy, PART_LIST, 0)
    clock()
  end
  for _, f in ipairs(families) do
    local jobs = f.jobs
    forget() -- the previous table out of reach: its collection is not this family's load
    collect("collect")
    clock()
    local loaded = fresh_load()
    clock()
    collect("collect") -- the load's garbage, before the first decision (first_bench.lua does the same)
    if STOPPED then collect("stop") end -- the collector's share of the decisions, for comparison
    clock()
    for i = 1, #jobs do
      rcs[i] = submit(jobs[i], PART_LIST, 0)
      clock()
    end
    check_loaded(loaded, f.name)
  end
  return
end

local function outcome(rc, job, before)
  if rc ~= 0 then return "reject" end
  if job.priority == 0 then return "hold" end
  if job.features ~= before.features then return "required" end
  if job.prefer ~= before.prefer then return "prefer" end
  return "pass"
end

for _, f in ipairs(families) do
  local jobs = f.jobs
  local originals = {}
  for i = 1, #jobs do originals[i] = copy(jobs[i]) end
  forget()
  collect("collect")
  local t = clock()
  local data = fresh_load()
  local load_s = clock() - t
  check_loaded(data, f.name)
  collect("collect")
  io.write(string.format("load\t%s\t%.6f\n", f.name, load_s))
  local times, rcs = {}, {}
  for i = 1, #jobs do
    local t0 = clock()
    rcs[i] = submit(jobs[i], PART_LIST, 0)
    times[i] = (clock() - t0) * 1e6
  end
  for i = 1, #jobs do
    local raised = 0
    if type(data) == "table" and M.decide ~= nil and M.request ~= nil then
      local ok = pcall(function() return M.decide(data, M.request(copy(originals[i]))) end)
      if not ok then raised = 1 end
    end
    io.write(string.format("d\t%s\t%d\t%s\t%.1f\t%d\n", f.name, i, outcome(rcs[i], jobs[i], originals[i]),
      times[i], raised))
  end
end
