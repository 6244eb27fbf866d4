--[[
  kernelCommit.lua: the kernel branch of a fenced commit (commitExecution-5.lua, and each commit
  of commitBatch-1n.lua that has a kernel section): the commit whose arguments start at A[o + 1]
  (layout in commitExecution-5.lua) and end at A[last], on its five keys k, checked by
  checkCommit already. Checks the map gates and the spawned actors, then writes the commit,
  applies the kernel tail (consumed entries, awaits, re-stamps, spawns), the map writes, the
  signals and the index section. Needs the includes actorKeys, deliverSignal, mapWrites,
  actorKernel and activeIndex before it.

  Returns revision, landed (dedupe keys of the conditional signals that landed), delivered
  (position, actor, seq of each landing of the commit's own signals); or nil, nil, nil, refusal
  (a gate or spawn refusal reply, nothing written).
]]
local function commitWithKernel(k, o, last, commit, stored, undoLength)
  local base, ttl, restamp = A[o + 14], A[o + 2], A[o + 3] == '1'
  local tail = commitEnd(commit)
  local id = A[tail]
  local kernel, after = readKernel(tail + 1)
  local activeKey, nList = A[after], tonumber(A[after + 1])
  local listed = {}
  for j = 1, nList do listed[j] = A[after + 1 + j] end
  local unlist = A[after + 2 + nList] == '1'
  local maps = readMapSection(after + 3 + nList, last)
  local gateClosed = checkMapGates(base, maps)
  if gateClosed then return nil, nil, nil, gateClosed end
  local spawnRefused = checkSpawns(base, kernel, { [id] = true })
  if spawnRefused then return nil, nil, nil, spawnRefused end
  local revision = applyCommit(k[1], k[2], k[3], k[4], commit, ttl, restamp, stored + 1, undoLength)
  applyKernel(base, id, kernel, ttl, restamp)
  local landed, delivered = {}, {}
  deliverKernel(base, id, kernel, ttl, applyMapWrites(base, maps, ttl), landed, delivered)
  if activeKey ~= '' then
    if nList > 0 then markActive(activeKey, listed) end
    if unlist then redis.call('ZREM', activeKey, id) end
  end
  return revision, landed, delivered
end

-- A committed commit's reply: {0, revision}, or with landings {0, revision, n, key1..keyn, (i, to, seq)...}.
local function committedReply(revision, landed, delivered)
  if not landed or (#landed == 0 and #delivered == 0) then return {0, revision} end
  local reply = {0, revision, #landed}
  for _, key in ipairs(landed) do reply[#reply + 1] = key end
  for _, field in ipairs(delivered) do reply[#reply + 1] = field end
  return reply
end
