--[[
  Included by the scripts that deliver signals (`--- @include "deliverSignal"`, after
  "actorKeys"): who a signal reaches, and landing it in one inbox with per-recipient dedupe.
  Mirrors the memory store (src/store/memory-store.ts) step for step.
]]
-- MAX_CASCADE_DEPTH of src/store/store.ts.
local MAX_CASCADE_DEPTH = 64

-- The existing actors a signal to `to` reaches: `to`, and with `cascade` the actors it awaits,
-- transitively; breadth first in the order each actor's awaits list names them, each actor once,
-- at most MAX_CASCADE_DEPTH levels below `to`. Returns a list of { id = ..., status = ... }.
local function reachSignal(base, to, cascade)
  local reached, seen, level, depth = {}, { [to] = true }, { to }, 0
  while #level > 0 do
    local nextLevel = {}
    for _, id in ipairs(level) do
      local fields = redis.call('HMGET', keyOf(base, 'execution', id), 'rev', 'status')
      if fields[1] then
        reached[#reached + 1] = { id = id, status = fields[2] }
        if cascade and depth < MAX_CASCADE_DEPTH then
          for _, awaited in ipairs(redis.call('LRANGE', keyOf(base, 'awaits', id), 0, -1)) do
            if not seen[awaited] then
              seen[awaited] = true
              nextLevel[#nextLevel + 1] = awaited
            end
          end
        end
      end
    end
    level, depth = nextLevel, depth + 1
  end
  return reached
end

-- Lands the entry in the inbox of existing actor `id` unless it has seen `dedupeKey`: the next
-- inbox seq (field iseq of its execution hash), the entry under it, the key recorded. The inbox
-- and dedupe hashes get `ttl` when this creates them. Returns the seq it landed under, or false.
local function landSignal(base, id, dedupeKey, entry, ttl)
  local dedupe = keyOf(base, 'dedupe', id)
  if redis.call('HEXISTS', dedupe, dedupeKey) == 1 then return false end
  local seq = redis.call('HINCRBY', keyOf(base, 'execution', id), 'iseq', 1)
  local inbox = keyOf(base, 'inbox', id)
  redis.call('HSET', inbox, seq, entry)
  redis.call('HSET', dedupe, dedupeKey, seq)
  stampIfNew(inbox, ttl)
  stampIfNew(dedupe, ttl)
  return seq
end
