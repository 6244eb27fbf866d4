--[[
  Included by createExecution-5.lua and commitExecution-5.lua (`--- @include "actorKernel"`,
  after "actorKeys", "deliverSignal", "applyCommit" and "mapWrites"): the kernel section of a
  commit (inbox, awaits, signals, spawned actors), read, checked and applied. Mirrors the memory
  store (src/store/memory-store.ts) step for step.

  Kernel section: the root base '<prefix>:{<root>}:' comes before the commit (A[14] of
  commitExecution-5.lua, A[9] of createExecution-5.lua; '' = no kernel section: a commit with
  no consumed entries, awaits, signals, spawns, nor re-stamp, and nothing follows the commit).
  After the commit (from commitEnd):
    +0  actor id
    +1  the kernel tail (readKernel):
        nConsumed, then that many inbox seqs to delete
        nAwaits, then that many ids (the new awaits list); -1 = awaits unchanged (no ids follow)
        nSignals, then per signal: recipient id, dedupe key, mode ('1': cascade, '0': the
                recipient only, or the name of its condition: reportNew, mapSettled,
                rollbackReportNew, rolledBack; a conditional signal never cascades), entry bytes
        nSpawn, then per spawned actor: id, reactor, encoded input, flags (the sum of 1: take
                its lease, 2: detached, retainWithParent false: not in the parent's children
                set, its re-stamp does not climb to the parent; so '0' and '1' are an attached
                actor without and with its lease), lease owner ('' without), lease TTL ms (''
                without), its first commit (the layout of includes/applyCommit.lua), then its
                own kernel tail (nConsumed 0)
  After the tail, the map section of the step, when a commit of it has map writes (layout in
  includes/mapWrites.lua).
]]

-- Reads a kernel tail from A[i] (layout above). Returns it and the index after it.
local function readKernel(i)
  local k = { consumed = {}, awaits = nil, signals = {}, spawn = {} }
  local n = tonumber(A[i])
  for j = 1, n do k.consumed[j] = A[i + j] end
  i = i + n + 1
  n = tonumber(A[i])
  if n >= 0 then
    k.awaits = {}
    for j = 1, n do k.awaits[j] = A[i + j] end
    i = i + n
  end
  i = i + 1
  n = tonumber(A[i])
  for j = 1, n do
    local at = i + 1 + 4 * (j - 1)
    local mode = A[at + 2]
    k.signals[j] = { to = A[at], key = A[at + 1], cascade = mode == '1', condition = mode ~= '1' and mode ~= '0' and mode or nil, entry = A[at + 3] }
  end
  i = i + 4 * n + 1
  n = tonumber(A[i])
  i = i + 1
  for j = 1, n do
    local flags = tonumber(A[i + 3])
    local s = { id = A[i], reactor = A[i + 1], input = A[i + 2], lease = flags % 2 == 1, detached = flags >= 2, owner = A[i + 4], leaseTtl = A[i + 5] }
    s.commit = readCommit(i + 6)
    s.kernel, i = readKernel(commitEnd(s.commit))
    k.spawn[j] = s
  end
  return k, i
end

-- Checks the spawned actors of kernel tail `k`, depth first, before anything is written: each
-- id is new (not stored, not named before in this step: `seen`), its lease is free or its
-- owner's, its undo pushes leave no gap. Returns nil, or the refusal reply:
--   {6, id}                  the id exists
--   {4, id}                  another owner holds the lease the spawned actor was to take
--   {3, position, length, id} an undo push of the spawned actor would leave a gap
local function checkSpawns(base, k, seen)
  for _, s in ipairs(k.spawn) do
    if seen[s.id] or redis.call('HGET', keyOf(base, 'execution', s.id), 'rev') then return {6, s.id} end
    seen[s.id] = true
    if s.lease then
      local holder = redis.call('GET', keyOf(base, 'lease', s.id))
      if holder and holder ~= s.owner then return {4, s.id} end
    end
    local badPosition, length = checkUndo(s.commit, 0)
    if badPosition then return {3, badPosition, length, s.id} end
    local refused = checkSpawns(base, s.kernel, seen)
    if refused then return refused end
  end
  return nil
end

-- The parent an actor's re-stamp climbs to: its `parent` field, unless it was spawned detached
-- (field `detached`: its retention is its own).
local function retainingParent(base, id)
  local fields = redis.call('HMGET', keyOf(base, 'execution', id), 'parent', 'detached')
  if fields[2] then return nil end
  return fields[1]
end

-- Re-stamps every key of the ancestors of `id` (the parent chain its spawns recorded, up to the
-- first detached actor) and of its descendants (the children sets, breadth first), each actor
-- once, MAX_CASCADE_DEPTH levels each way.
local function restampTree(base, id, ttlMs)
  local seen = { [id] = true }
  local parent, depth = retainingParent(base, id), 0
  while parent and not seen[parent] and depth < MAX_CASCADE_DEPTH do
    seen[parent] = true
    stampActor(base, parent, ttlMs)
    parent, depth = retainingParent(base, parent), depth + 1
  end
  local level = { id }
  depth = 0
  while #level > 0 and depth < MAX_CASCADE_DEPTH do
    local nextLevel = {}
    for _, actor in ipairs(level) do
      for _, child in ipairs(redis.call('SMEMBERS', keyOf(base, 'children', actor))) do
        if not seen[child] then
          seen[child] = true
          stampActor(base, child, ttlMs)
          nextLevel[#nextLevel + 1] = child
        end
      end
    end
    level, depth = nextLevel, depth + 1
  end
end

local applyKernel

-- Creates spawned actor `s` of `parent` as createExecution-5.lua creates one (leftovers under the
-- id cleared, revision 1, input, first commit, every key stamped), records its parent (field
-- `parent`) and, unless it is detached (then field `detached` = '1'), adds it to the parent's
-- children set; takes its lease when asked, then applies its own kernel tail.
local function createSpawned(base, parent, s, ttlMs)
  local exec = keyOf(base, 'execution', s.id)
  local results, undo, trace = keyOf(base, 'results', s.id), keyOf(base, 'undo', s.id), keyOf(base, 'trace', s.id)
  redis.call('DEL', results, undo, trace, keyOf(base, 'inbox', s.id), keyOf(base, 'dedupe', s.id), keyOf(base, 'awaits', s.id), keyOf(base, 'children', s.id))
  if s.detached then
    redis.call('HSET', exec, 'reactor', s.reactor, 'input', s.input, 'parent', parent, 'detached', '1')
  else
    redis.call('HSET', exec, 'reactor', s.reactor, 'input', s.input, 'parent', parent)
    local children = keyOf(base, 'children', parent)
    redis.call('SADD', children, s.id)
    stampIfNew(children, ttlMs)
  end
  applyCommit(exec, results, undo, trace, s.commit, ttlMs, true, 1, 0)
  if s.lease then redis.call('SET', keyOf(base, 'lease', s.id), s.owner, 'PX', s.leaseTtl) end
  applyKernel(base, s.id, s.kernel, ttlMs, false)
end

-- Applies the writes of kernel tail `k` of actor `id` (after applyCommit): deletes the consumed
-- inbox entries, replaces the awaits list (stamping `ttlMs` on it), with `restamp` re-stamps the
-- actor's inbox, dedupe, awaits and children keys and every key of its ancestors and
-- descendants, then creates the spawned actors. Signals are delivered after, by deliverKernel.
applyKernel = function(base, id, k, ttlMs, restamp)
  if #k.consumed > 0 then callChunked('HDEL', keyOf(base, 'inbox', id), k.consumed) end
  if k.awaits then
    local awaits = keyOf(base, 'awaits', id)
    redis.call('DEL', awaits)
    if #k.awaits > 0 then
      callChunked('RPUSH', awaits, k.awaits)
      redis.call('PEXPIRE', awaits, ttlMs)
    end
  end
  if restamp then
    for _, kind in ipairs({ 'inbox', 'dedupe', 'awaits', 'children' }) do redis.call('PEXPIRE', keyOf(base, kind, id), ttlMs) end
    stampMap(base, id, ttlMs)
    restampTree(base, id, ttlMs)
  end
  for _, s in ipairs(k.spawn) do createSpawned(base, id, s, ttlMs) end
end

-- Delivers the signals of kernel tail `k` of actor `id`, then those of its spawned actors, depth
-- first: a conditional one only when its condition holds (`flags`: by actor id, from
-- applyMapWrites), its dedupe key then appended to `landed` if it landed. With `delivered`, each
-- landing of `k`'s own signals (not its spawned actors') is appended to it as three fields: the
-- signal's position in `k` (1-based), the actor it landed on and the seq it landed under.
local function deliverKernel(base, id, k, ttlMs, flags, landed, delivered)
  for i, s in ipairs(k.signals) do
    local reached = {}
    if not s.condition then
      reached = reachSignal(base, s.to, s.cascade)
    elseif conditionHolds(base, s, flags[id]) then
      reached = reachSignal(base, s.to, false)
    end
    for _, actor in ipairs(reached) do
      local seq = landSignal(base, actor.id, s.key, s.entry, ttlMs)
      if seq then
        if s.condition then landed[#landed + 1] = s.key end
        if delivered then
          delivered[#delivered + 1] = i
          delivered[#delivered + 1] = actor.id
          delivered[#delivered + 1] = seq
        end
      end
    end
  end
  for _, s in ipairs(k.spawn) do deliverKernel(base, s.id, s.kernel, ttlMs, flags, landed, nil) end
end
