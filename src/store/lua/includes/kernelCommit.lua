--[[
  kernelCommit.lua: the kernel branch of a fenced commit (commitExecution-5.lua, and each commit
  of commitBatch-1n.lua that has a kernel section): the commit whose arguments start at A[o + 1]
  (layout in commitExecution-5.lua) and end at A[last], on its five keys k, checked by
  checkCommit already (stored 0: a creating commit, the actor absent). Creates the actor when the
  commit is a creating one, checks the map gates and the spawned actors, then writes the commit,
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
  local creating = A[after + 3 + nList] == '1'
  -- Checked by checkCommit: stored 0 is an absent actor, which only a creating commit may write.
  if stored == 0 and not creating then return nil, nil, nil, {2, 0} end
  local mapsAt = creating and after + 7 + nList or after + 4 + nList
  local maps = readMapSection(mapsAt, last)
  local gateClosed = checkMapGates(base, maps)
  if gateClosed then return nil, nil, nil, gateClosed end
  local spawnRefused = checkSpawns(base, kernel, { [id] = true })
  if spawnRefused then return nil, nil, nil, spawnRefused end
  if creating then
    -- As createSpawned (includes/actorKernel.lua) creates a detached actor: leftovers of an
    -- expired one under the id cleared, its parent recorded, its retention its own.
    local at = after + 3 + nList
    redis.call('DEL', k[2], k[3], k[4], keyOf(base, 'inbox', id), keyOf(base, 'dedupe', id), keyOf(base, 'awaits', id), keyOf(base, 'children', id))
    if A[at + 3] == '' then
      redis.call('HSET', k[1], 'reactor', A[at + 1], 'input', A[at + 2])
    else
      redis.call('HSET', k[1], 'reactor', A[at + 1], 'input', A[at + 2], 'parent', A[at + 3], 'detached', '1')
    end
  end
  local revision = applyCommit(k[1], k[2], k[3], k[4], commit, ttl, restamp, stored + 1, undoLength)
  if creating then redis.call('PEXPIRE', k[1], ttl) end
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
