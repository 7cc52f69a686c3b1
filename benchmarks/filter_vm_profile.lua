-- filter_vm_profile.lua DATA_FILE SHAPES_LUA SHAPES_TXT [FAMILY [INDEX]] - where the filter's first decisions
-- spend their Lua VM instructions (a count hook: debug.sethook(f, "", 1)), on a fleet and shapes written by
--   python benchmarks/bench_filter_world.py --seeds SEED --write-fleet DIR
--   lua5.1 benchmarks/filter_vm_profile.lua DIR/out/slurm_topo_data.lua DIR/shapes.lua DIR/shapes.txt
-- Each family runs on a freshly loaded data table, as in world_bench.lua. Prints the VM instructions per decision
-- (p50/p90/p99/max, and per family how many are over OVER, default 5 000: about 500 000 machine instructions at
-- the ~100 a VM instruction this Lua 5.1 spends on table code, benchmarks/results/filter_world.md), then the
-- functions and lines of the decisions over OVER by their share, then the costliest decisions. FAMILY (and
-- INDEX, 1-based within it) profile one family (one decision). The hook makes this slow (minutes): counts only.
-- FILTER_DIR (environment) names another job_submit/ folder; OVER another threshold; ALL a file to get every
-- decision's count (COUNT<TAB>FAMILY<TAB>request, cheapest first).
local data_path, shapes_path, text_path, only, only_index = arg[1], arg[2], arg[3], arg[4], tonumber(arg[5])
local filter_dir = os.getenv("FILTER_DIR") or (arg[0]:match("^(.*/)") .. "../job_submit")
package.path = filter_dir .. "/?.lua;" .. filter_dir .. "/?/init.lua;" .. package.path
slurm = { SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006, ESLURM_ACCESS_DENIED = 2002 }
function slurm.log_user() end
function slurm.log_info() end
function slurm.log_verbose() end
function slurm.log_error() end
local OVER = tonumber(os.getenv("OVER") or "5000")
local M = require("slurm_topo_filter")
local loader = package.loaded["slurm_topo_filter.data"]
local families = assert(loadfile(shapes_path))()
local texts = {}
for line in io.lines(text_path) do texts[#texts + 1] = line end

local getinfo, count, by_fn, by_line, one_fn, one_line = debug.getinfo, 0, {}, {}, {}, {}
local function hook()
  count = count + 1
  local i = getinfo(2, "Sl")
  if i then
    local src = string.match(i.short_src, "[^/]*$")
    local f, l = src .. ":" .. i.linedefined, src .. ":" .. i.currentline
    one_fn[f], one_line[l] = (one_fn[f] or 0) + 1, (one_line[l] or 0) + 1
  end
end

local decisions, total, start = {}, 0, 0
for _, f in ipairs(families) do
  if only == nil or f.name == only then
    M.configure({ data = data_path, recheck = 1e9 })
    collectgarbage("collect")
    assert(loader.load(), "the filter did not load the data file")
    for i = 1, #f.jobs do
      if only_index == nil or only_index == i then
        count, one_fn, one_line = 0, {}, {}
        debug.sethook(hook, "", 1)
        M.submit(f.jobs[i], {}, 0)
        debug.sethook()
        decisions[#decisions + 1] = { count, f.name, texts[start + i] }
        if count > OVER or only_index ~= nil then
          total = total + count
          for k, v in pairs(one_fn) do by_fn[k] = (by_fn[k] or 0) + v end
          for k, v in pairs(one_line) do by_line[k] = (by_line[k] or 0) + v end
        end
      end
    end
  end
  start = start + #f.jobs
end

table.sort(decisions, function(a, b) return a[1] < b[1] end)
local n = #decisions
local function at(q) return decisions[math.min(n, math.floor(n * q) + 1)][1] end
print(string.format("%d decisions: VM instructions p50 %d, p90 %d, p99 %d, max %d", n, at(0.5), at(0.9), at(0.99),
  decisions[n][1]))
local fam, names = {}, {}
for _, d in ipairs(decisions) do
  if fam[d[2]] == nil then fam[d[2]], names[#names + 1] = { 0, 0 }, d[2] end
  fam[d[2]][1] = fam[d[2]][1] + 1
  if d[1] > OVER then fam[d[2]][2] = fam[d[2]][2] + 1 end
end
table.sort(names)
for _, k in ipairs(names) do print(string.format("  %-14s %4d decisions, %4d over %d", k, fam[k][1], fam[k][2], OVER)) end
local function top(t, k, title)
  local a = {}
  for key, v in pairs(t) do a[#a + 1] = { key, v } end
  table.sort(a, function(x, y) return x[2] > y[2] or (x[2] == y[2] and x[1] < y[1]) end)
  print(title)
  for j = 1, math.min(k, #a) do print(string.format("  %5.1f %%  %s", 100 * a[j][2] / total, a[j][1])) end
end
if total > 0 then
  top(by_fn, 25, "functions (defined at file:line) of the decisions over " .. OVER)
  top(by_line, 25, "lines of the decisions over " .. OVER)
end
local all_path = os.getenv("ALL")
if all_path then -- every decision: COUNT<TAB>FAMILY<TAB>request, in cost order
  local out = assert(io.open(all_path, "w"))
  for _, d in ipairs(decisions) do out:write(d[1], "\t", d[2], "\t", d[3] or "?", "\n") end
  out:close()
end
print("costliest decisions:")
for j = n, math.max(1, n - 11), -1 do print(string.format("  %6d  %s", decisions[j][1], decisions[j][3] or "?")) end
