-- family_bench.lua DATA NODES ITERATIONS [PARTITION] - ITERATIONS prefer decisions of NODES nodes (M.decide),
-- for instruction counts under callgrind (benchmarks/results/family_target.md). FILTER_DIR (environment): the
-- job_submit/ folder to run, this tree's by default.
local data_path, nodes, iterations, part = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4]
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006 }
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_error(fmt, ...) io.stderr:write(string.format(fmt, ...) .. "\n") end
local M = require("slurm_topo_filter")
M.configure({ data = data_path, recheck = 1e9 })
M.submit({ min_nodes = 1, script = "#!/bin/sh\n" }, {}, 0)
local data = assert(loadfile(data_path))()
if M.prepare then data = M.prepare(data) end
local j = { spank_job_env = { [0] = "_SLURM_SPANK_OPTION_locality_locality=prefer" }, min_nodes = nodes,
            num_tasks = 4294967294, script = "#!/bin/sh\n", partition = part }
for _ = 1, iterations do M.decide(data, M.request(j)) end
