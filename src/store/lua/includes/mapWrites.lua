--[[
  Included by createExecution-5.lua and commitExecution-5.lua (`--- @include "mapWrites"`, after
  "actorKeys" and before "actorKernel"): the map writes of a step (MapWrites in
  src/store/store.ts), read from the map section, applied after the step's own writes and
  spawns, and the conditions of its conditional signals, evaluated when they are delivered.
  Mirrors the memory store (src/store/memory-maps.ts) step for step; the outcome tables mirror
  src/store/map-writes.ts (a unit test compares them).

  Map section: at the end of A, after the kernel tail (absent when no commit of the step has
  map writes):
    nActors, then per actor with map writes (the committing actor, then its spawned actors,
    depth first): actor id, nOps, then its ops, in this order, each when present:
      'init'       total ('' = unknown), batch size, atomic ('1'/'0'), mode
      'source'     nItems, then that many encoded items
      'starts'     from, nStarts, then that many start payloads (positions from, from + 1, ...)
      'started'    map, index, gate ('1': the commit applies only while the map dispatches)
      'report'     map, index, outcome, stops ('1'/'0'), at
      'target'     target
      'rbtarget'   target
      'rbreport'   map, position, outcome, nFailures, then that many encoded failures
      'dropsource'
  `init`, `source`, `starts`, `target`, `rbtarget` and `dropsource` write the actor's own map keys; the
  others those of the map they name. A write to a map without stats (never initialised, or
  expired) is skipped: nothing is created.
]]

-- ELEMENT_OUTCOME_LETTERS of src/store/map-writes.ts: the letter of each element outcome in its
-- slot (its counter in the stats is the outcome's name).
local ELEMENT_LETTER = { completed = 'c', failed = 'f', halted = 'h', aborted = 'a', skipped = 's', cancelled = 'x' }

-- ROLLBACK_OUTCOMES of src/store/map-writes.ts: the letter and the stats counter of each rollback outcome.
local ROLLBACK_OUTCOME = {
  undone = { letter = 'u', counter = 'rb.undone' },
  failed = { letter = 'f', counter = 'rb.failed' },
  not_needed = { letter = 'n', counter = 'rb.notNeeded' },
  element_in_flight = { letter = 'i', counter = 'rb.inFlight' },
  context_unavailable = { letter = 'g', counter = 'rb.unavailable' },
}

-- MAP_BUCKET_SIZE of src/store/map-writes.ts.
local MAP_BUCKET_SIZE = 1024

-- The op arities after the op name, for the ops of fixed length.
local MAP_OP_ARITY = { init = 4, started = 3, report = 5, target = 1, rbtarget = 1, dropsource = 0 }

-- Reads the map section from A[i] (none past A[last], default the end of A: a group commit's
-- commit ends before the next one's arguments). Returns a list of
-- { id = actor, ops = { { op = name, at = index of its first argument, n = its count }, ... } }.
local function readMapSection(i, last)
  local section = {}
  if i > (last or #A) then return section end
  local nActors = tonumber(A[i])
  i = i + 1
  for a = 1, nActors do
    local actor = { id = A[i], ops = {} }
    local nOps = tonumber(A[i + 1])
    i = i + 2
    for o = 1, nOps do
      local op = A[i]
      local fixed = MAP_OP_ARITY[op]
      if fixed then
        actor.ops[o] = { op = op, at = i + 1 }
        i = i + 1 + fixed
      elseif op == 'source' then
        local n = tonumber(A[i + 1])
        actor.ops[o] = { op = op, at = i + 2, n = n }
        i = i + 2 + n
      elseif op == 'starts' then
        local n = tonumber(A[i + 2])
        actor.ops[o] = { op = op, at = i + 1, n = n }
        i = i + 3 + n
      elseif op == 'rbreport' then
        local n = tonumber(A[i + 4])
        actor.ops[o] = { op = op, at = i + 1, n = n }
        i = i + 5 + n
      else
        error('mapWrites.lua: unknown map write ' .. tostring(op))
      end
    end
    section[a] = actor
  end
  return section
end

-- A gated start (a fan-out element's): refused unless its map dispatches, its stored status
-- `running` and no report stopped it (mapGateClosedWhy in src/store/map-writes.ts). Returns the
-- refusal {7, map, why}, or nil. Checked before the step's first write.
local function checkMapGates(base, section)
  for _, actor in ipairs(section) do
    for _, w in ipairs(actor.ops) do
      if w.op == 'started' and A[w.at + 2] == '1' then
        local map = A[w.at]
        local stop = redis.call('HGET', mapKeyOf(base, 'stats', map), 'stop')
        if stop then return {7, map, 'stopped by ' .. stop} end
        local status = redis.call('HGET', keyOf(base, 'execution', map), 'status')
        if not status then return {7, map, 'gone'} end
        if status ~= 'running' then return {7, map, status} end
      end
    end
  end
  return nil
end

-- The items A[from .. from + n - 1] as a list.
local function argvList(from, n)
  local list = {}
  for j = 1, n do list[j] = A[from + j - 1] end
  return list
end

-- Records that `stats` counts `bucket`, so a re-stamp of the map reaches that bucket's keys.
local function countBucket(stats, bucket)
  if bucket + 1 > tonumber(redis.call('HGET', stats, 'buckets') or '0') then redis.call('HSET', stats, 'buckets', bucket + 1) end
end

-- Creates the stats of map `id` (clearing what an expired map left under the id).
local function initMap(base, id, w, ttl)
  local stats = mapKeyOf(base, 'stats', id)
  local old = { stats, mapKeyOf(base, 'source', id), mapKeyOf(base, 'started', id), mapKeyOf(base, 'aborted', id), mapKeyOf(base, 'rollbackFailures', id) }
  for bucket = 0, tonumber(redis.call('HGET', stats, 'buckets') or '0') - 1 do
    old[#old + 1] = mapKeyOf(base, 'outcomes', id, bucket)
    old[#old + 1] = mapKeyOf(base, 'rollbackOutcomes', id, bucket)
    old[#old + 1] = mapKeyOf(base, 'starts', id, bucket)
  end
  redis.call('DEL', unpack(old))
  redis.call('HSET', stats, 'batch', A[w.at + 1], 'atomic', A[w.at + 2], 'mode', A[w.at + 3])
  if A[w.at] ~= '' then redis.call('HSET', stats, 'total', A[w.at]) end
  redis.call('PEXPIRE', stats, ttl)
end

-- Records element report `w` in the map it names, first writer of its slot only. Returns whether it was the first.
local function reportElement(base, w, ttl)
  local map, index, outcome = A[w.at], A[w.at + 1], A[w.at + 2]
  local stats = mapKeyOf(base, 'stats', map)
  if redis.call('EXISTS', stats) == 0 then return false end
  local bucket = math.floor(tonumber(index) / MAP_BUCKET_SIZE)
  local slot = mapKeyOf(base, 'outcomes', map, bucket)
  if redis.call('HSETNX', slot, index, ELEMENT_LETTER[outcome]) == 0 then return false end
  stampLikeMap(slot, stats, ttl)
  redis.call('HINCRBY', stats, 'settled', 1)
  redis.call('HINCRBY', stats, outcome, 1)
  redis.call('HSET', stats, 'lastReportAt', A[w.at + 4])
  countBucket(stats, bucket)
  if A[w.at + 3] == '1' then redis.call('HSETNX', stats, 'stop', outcome .. ':' .. index) end
  if outcome == 'aborted' then
    local aborted = mapKeyOf(base, 'aborted', map)
    redis.call('RPUSH', aborted, index)
    stampLikeMap(aborted, stats, ttl)
  end
  return true
end

-- Records rollback report `w` in the map it names, first writer of its slot only. Returns whether it was the first.
local function reportRollback(base, w, ttl)
  local map, position, outcome = A[w.at], A[w.at + 1], ROLLBACK_OUTCOME[A[w.at + 2]]
  local stats = mapKeyOf(base, 'stats', map)
  if redis.call('EXISTS', stats) == 0 then return false end
  local bucket = math.floor(tonumber(position) / MAP_BUCKET_SIZE)
  local slot = mapKeyOf(base, 'rollbackOutcomes', map, bucket)
  if redis.call('HSETNX', slot, position, outcome.letter) == 0 then return false end
  stampLikeMap(slot, stats, ttl)
  redis.call('HINCRBY', stats, 'rb.settled', 1)
  redis.call('HINCRBY', stats, outcome.counter, 1)
  countBucket(stats, bucket)
  if w.n > 0 then
    local failures = mapKeyOf(base, 'rollbackFailures', map)
    callChunked('RPUSH', failures, argvList(w.at + 4, w.n))
    stampLikeMap(failures, stats, ttl)
  end
  return true
end

-- Applies the map writes of `section` in order. Returns, by actor id, what its conditional
-- signals read: { reportNew = ..., rollbackReportNew = ... }.
local function applyMapWrites(base, section, ttl)
  local flags = {}
  for _, actor in ipairs(section) do
    local id, f = actor.id, { reportNew = false, rollbackReportNew = false }
    local own = mapKeyOf(base, 'stats', id)
    for _, w in ipairs(actor.ops) do
      if w.op == 'init' then
        initMap(base, id, w, ttl)
      elseif w.op == 'source' then
        if redis.call('EXISTS', own) == 1 and w.n > 0 then
          local source = mapKeyOf(base, 'source', id)
          callChunked('RPUSH', source, argvList(w.at, w.n))
          stampLikeMap(source, own, ttl)
        end
      elseif w.op == 'starts' then
        if redis.call('EXISTS', own) == 1 and w.n > 0 then
          local from = tonumber(A[w.at])
          for j = 0, w.n - 1 do
            local bucket = math.floor((from + j) / MAP_BUCKET_SIZE)
            local hash = mapKeyOf(base, 'starts', id, bucket)
            redis.call('HSET', hash, from + j, A[w.at + 2 + j])
            if j == 0 or (from + j) % MAP_BUCKET_SIZE == 0 then
              stampLikeMap(hash, own, ttl)
              countBucket(own, bucket)
            end
          end
        end
      elseif w.op == 'started' then
        local stats = mapKeyOf(base, 'stats', A[w.at])
        if redis.call('EXISTS', stats) == 1 then
          local started = mapKeyOf(base, 'started', A[w.at])
          redis.call('RPUSH', started, A[w.at + 1])
          stampLikeMap(started, stats, ttl)
          redis.call('HINCRBY', stats, 'started', 1)
        end
      elseif w.op == 'report' then
        f.reportNew = reportElement(base, w, ttl)
      elseif w.op == 'target' or w.op == 'rbtarget' then
        if redis.call('EXISTS', own) == 1 then redis.call('HSET', own, w.op == 'target' and 'target' or 'rb.target', A[w.at]) end
      elseif w.op == 'rbreport' then
        f.rollbackReportNew = reportRollback(base, w, ttl)
      elseif w.op == 'dropsource' then
        local dropped = { mapKeyOf(base, 'source', id) }
        for bucket = 0, tonumber(redis.call('HGET', own, 'buckets') or '0') - 1 do dropped[#dropped + 1] = mapKeyOf(base, 'starts', id, bucket) end
        redis.call('DEL', unpack(dropped))
      end
    end
    flags[id] = f
  end
  return flags
end

-- Whether conditional signal `s` (condition s.condition) lands, after every write of the step;
-- `f` is its sender's flags from applyMapWrites (nil: the sender wrote no map write).
local function conditionHolds(base, s, f)
  local c = s.condition
  if c == 'reportNew' then return f ~= nil and f.reportNew end
  if c == 'rollbackReportNew' then return f ~= nil and f.rollbackReportNew end
  local target, settled = 'target', 'settled'
  if c == 'rolledBack' then target, settled = 'rb.target', 'rb.settled' end
  local fields = redis.call('HMGET', mapKeyOf(base, 'stats', s.to), target, settled)
  return fields[1] ~= false and tonumber(fields[1]) == tonumber(fields[2] or '0')
end
