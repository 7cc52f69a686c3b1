--[[
slurm_topo_filter/modify.lua - an update of a pending job (slurm_topo/policy/modify.py, which says what an owner
may change): the request after the update, decided again, and what the update may then set (its constraint,
--prefer, priority, AdminComment), or a refusal.
]]

local V = require("slurm_topo_filter.vocab")
local U = require("slurm_topo_filter.util")
local request = require("slurm_topo_filter.request").request
local decide = require("slurm_topo_filter.decide").decide

local INFINITE, MAX_FIELD, RECORD_PREFIX = V.INFINITE, V.MAX_FIELD, V.RECORD_PREFIX
local BUDGET_PREFIX, RELAX_PREFIX, AUTO_INDEX, SIZE_FIELDS = V.BUDGET_PREFIX, V.RELAX_PREFIX, V.AUTO_INDEX,
  V.SIZE_FIELDS
local without_record = V.without_record
local to_int, to_str = U.to_int, U.to_str

local M = {}

local PASS = { action = "pass" }

-- the levels a job is promised (policy/modify.py REQUIRED_LEVELS): prefer and any never delay a job
local REQUIRED_LEVELS = { network_group = true, zone = true, region = true, nvl = true }
M.REQUIRED_LEVELS = REQUIRED_LEVELS
local EMPTY = {}

function M.strip_bracket(features)
  -- the job's constraint without the matching-OR bracket a previous decision appended ("X&[..]" or "[..]")
  if features == nil then return nil end
  local base = string.match(features, "^(.*)&%[[^%[%]]*%]$")
  if base then return base end
  if string.find(features, "^%[[^%[%]]*%]$") then return nil end
  return features
end

local function ours_of(rec)
  local text = to_str(rec.admin_comment)
  if text == nil then return nil end
  local i = string.find(text, RECORD_PREFIX, 1, true)
  if i == nil then return nil end
  return string.sub(text, i + #RECORD_PREFIX)
end

local function contradicts(comment, req)
  -- the comment names a locality (or regions) other than the job keeps (policy/modify.py _contradicts): a
  -- --locality=zone job (the SPANK option wins over the comment) given Comment=locality=any
  if #comment > MAX_FIELD then return false end
  local locality, regions
  for token in string.gmatch(comment, "[^ \t\n\v\f\r]+") do
    local k, v = string.match(token, "^([^=]*)=(.*)$")
    if k == "locality" and locality == nil then locality = v
    elseif k == "locality-regions" and regions == nil then regions = v end
  end
  return (locality ~= nil and locality ~= req.locality) or (regions ~= nil and regions ~= req.regions)
end

local function changes(upd)
  if to_int(upd.min_nodes) ~= nil or type(upd.features) == "string" then return true end
  for _, k in ipairs(SIZE_FIELDS) do
    if to_str(upd[k]) ~= nil then return true end
  end
  return false
end

local function our_prefer(rec, ours)
  -- a required level's --prefer added by an earlier decision: the same hard part as the constraint, with a
  -- bracket (the decision re-plans it)
  local prefer = to_str(rec.prefer)
  if ours == nil or string.find(ours, "^prefer") or string.find(ours, "^any") or prefer == nil
    or string.sub(prefer, -1) ~= "]" then
    return false
  end
  return M.strip_bracket(prefer) == M.strip_bracket(to_str(rec.features))
end

local function merged(rec, upd, new, base, ours)
  -- the request after the update (`new`, read from it): its fields over the record's, the locality from `base`,
  -- and the record's constraint without the bracket an earlier decision added
  local features
  if type(upd.features) == "string" then
    features = to_str(upd.features)
  elseif ours ~= nil and not string.find(ours, "^prefer") and not string.find(ours, "^any") then
    features = M.strip_bracket(to_str(rec.features))
  else
    features = to_str(rec.features)
  end
  local prefer = new.prefer
  if prefer == nil and not (ours ~= nil and string.find(ours, "^prefer ")) and not our_prefer(rec, ours) then
    prefer = to_str(rec.prefer)
  end
  return {
    locality = base.locality, regions = base.regions, features = features, prefer = prefer,
    partition = new.partition or to_str(rec.partition),
    min_nodes = new.min_nodes or to_int(rec.min_nodes),
    num_tasks = to_int(upd.num_tasks) or to_int(rec.num_tasks), -- request() reads it only for GPUs per task
    gpu = new.gpu or base.gpu, unchecked = new.unchecked or base.unchecked, interactive = false,
    nodelist = new.nodelist or base.nodelist, time_limit = new.time_limit or base.time_limit,
    segment_ok = base.segment_ok, user_segment = base.user_segment,
  }
end

local function trail(text, new_record)
  -- the relaxer's records after ours in an AdminComment (budget, relaxations), each with its "; ": kept when
  -- a new decision replaces our record (the budget ones only when the new record carries no budget)
  if type(text) ~= "string" then return "" end
  local i = string.find(text, RECORD_PREFIX, 1, true)
  if i == nil then return "" end
  local keep_budget = string.find(new_record, BUDGET_PREFIX, 1, true) == nil
  local out, n = {}, #text
  while i <= n do
    local j = string.find(text, "; ", i, true) or n + 1
    local part = string.sub(text, i, j - 1)
    if string.sub(part, 1, #RELAX_PREFIX) == RELAX_PREFIX
      or (keep_budget and string.sub(part, 1, #BUDGET_PREFIX) == BUDGET_PREFIX) then
      out[#out + 1] = "; " .. part
    end
    i = j + 2
  end
  return table.concat(out)
end

local function is_auto(ours)
  local level = ours and string.match(ours, "^([%a_]+):auto")
  return level ~= nil and AUTO_INDEX[level] ~= nil
end

local function required(d)
  return REQUIRED_LEVELS[string.match(d.locality or "", "^([%a_]+):") or ""] ~= nil
end

local function outcome(d, req, rec, upd, admin, release, releasable)
  if d.action == "reject" then return { action = "reject", log = d.record } end
  if d.segment ~= nil then
    -- a resize past every NVLink domain needs a segment the job does not have, and Slurm cannot give a
    -- pending job one (policy/modify.py segment_update_refusal)
    return { action = "reject", log = "slurm-topo: --locality=" .. d.locality .. ": the update makes the job "
      .. "larger than any NVLink domain, and Slurm cannot give a pending job a segment size: resubmit it "
      .. "(--locality=nvl:segment=" .. d.segment .. ", -N a multiple of " .. d.segment .. ")" }
  end
  local het = to_int(rec.het_job_id)
  if het ~= nil and required(d) and (d.action == "amend" or d.action == "hold") then
    -- a component of a heterogeneous job: placed on its own, so a required level cannot be kept (refused at
    -- submit; init.lua het_refusal): no re-plan gives it one
    return { action = "deny", log = "job " .. het .. "+" .. (to_int(rec.het_job_offset) or 0) .. " is a "
      .. "component of a heterogeneous job: " .. d.locality .. " cannot be enforced across its components "
      .. "(Slurm places each on its own); update refused" }
  end
  local give_back
  if upd.features == nil and req.features ~= to_str(rec.features) then give_back = req.features or "" end
  local features, priority
  if d.action == "hold" then
    if release and not admin then return { action = "deny", log = d.record } end
    features = give_back
    if rec.priority ~= 0 then priority = 0 end
  else
    features = d.features
    if features == nil then features = give_back end
    if releasable then priority = INFINITE end
  end
  local comment
  if admin then
    local old = without_record(rec.admin_comment)
    if old then comment = old .. "; " .. d.record else comment = d.record end
    comment = comment .. trail(rec.admin_comment, d.record)
  end
  return { action = "apply", features = features, prefer = d.prefer, priority = priority, admin_comment = comment,
           log = d.record }
end

local function releasable(data, d, rec, orig, ours, held, release)
  -- Whether the update (re-planned as d) releases a held job (policy/modify.py _releasable): its release, or an
  -- update that fits a job the filter holds. The hold is the filter's when the job as it stands (before this
  -- update) is one no group can ever hold, whoever's update put it there. An owner's update cannot write
  -- AdminComment, so a hold made by one (a resize past every group) leaves no "held;" record, and an old
  -- record outlives the release it led to: the record is not the judge. A job its owner held while it fitted
  -- keeps the owner's hold.
  if not held or release then return held end
  if d.action == "hold" or d.action == "reject" then return false end
  return decide(data, merged(rec, EMPTY, EMPTY, orig, ours)).action == "hold"
end

function M.decide_modify(data, rec, upd, admin)
  if rec == nil then return PASS end
  local prio = upd.priority
  local release = to_int(prio) ~= nil or prio == INFINITE
  local held = rec.priority == 0
  if type(upd.comment) ~= "string" and not changes(upd) and not (release and held) then return PASS end
  -- an administrator's Features= update of an auto job passes: that is how the relaxer widens it
  if admin and type(upd.features) == "string" and is_auto(ours_of(rec)) then return PASS end
  local orig = request(rec)
  if orig.oversize ~= nil then return PASS end -- hostile sizes are not scanned (as at submit)
  local base, relocated = orig, false
  if type(upd.comment) == "string" then
    local again = request(rec, upd.comment)
    local moved = again.locality ~= orig.locality or again.regions ~= orig.regions
    if not admin and (moved or contradicts(upd.comment, again)) then
      return { action = "deny", log = "the locality is fixed at submit; update refused" }
    end
    if moved then base, relocated = again, true end
  end
  local changed = changes(upd) or relocated
  if not changed and not (release and held) then return PASS end
  if not changed and admin then return PASS end -- an administrator's release
  local new = request(upd)
  if new.oversize ~= nil then return PASS end -- hostile sizes are not scanned (as at submit)
  local ours = ours_of(rec)
  local req = merged(rec, upd, new, base, ours)
  local d = decide(data, req)
  return outcome(d, req, rec, upd, admin, release, releasable(data, d, rec, orig, ours, held, release))
end

return M
