--[[
job_submit.lua - slurm-topo's job_submit/lua script (Lua 5.1). Install beside slurm.conf together with the
slurm_topo_filter/ directory (the filter's modules) and the generated slurm_topo_data.lua, and set
JobSubmitPlugins=lua.

This wrapper only finds its neighbours and hands every job to the filter. It loads nothing that can fail at
the top level (an error here would stop slurmctld at start): the filter is required under pcall, and the data
file is read lazily inside the first submit call. Sites with their own job_submit.lua call the filter from it
instead (see slurm_topo_filter/init.lua's header).
]]

local here = string.match(debug.getinfo(1, "S").source, "^@(.*/)") or "./"
SLURM_TOPO_DATA = SLURM_TOPO_DATA or (here .. "slurm_topo_data.lua")

local loaded, filter = pcall(function()
  -- the directory first: a slurm_topo_filter.lua an older release left beside it is never loaded instead
  package.path = here .. "?/init.lua;" .. here .. "?.lua;" .. package.path
  -- slurmctld runs this script again when its mtime changes: every module of the filter is loaded afresh
  for name in pairs(package.loaded) do
    if type(name) == "string" and (name == "slurm_topo_filter" or string.sub(name, 1, 18) == "slurm_topo_filter.") then
      package.loaded[name] = nil
    end
  end
  local m = require("slurm_topo_filter")
  m.configure({ data = SLURM_TOPO_DATA })
  return m
end)
if not loaded then
  slurm.log_error("slurm-topo: cannot load slurm_topo_filter/ from %s: %s; jobs pass unchanged", here,
    tostring(filter))
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not loaded then return slurm.SUCCESS end
  return filter.submit(job_desc, part_list, submit_uid)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if not loaded then return slurm.SUCCESS end
  return filter.modify(job_desc, job_rec, part_list, modify_uid)
end

return slurm.SUCCESS
