--[[
  Included by the scripts that reach actors beyond their KEYS (`--- @include "actorKeys"`): the
  keys of any actor of the script's root, built exactly as src/store/keys.ts builds them
  (KEY_KINDS, and MAP_KEY_KINDS for a map's keys): base .. kind .. ':' .. id, where base is
  '<prefix>:{<root>}:' (an argument). Every such key shares the hash tag of the script's KEYS, so it is
  in their cluster slot.
]]
local KIND = { execution = 'exec', results = 'results', undo = 'undo', trace = 'trace', lease = 'lease', inbox = 'inbox', dedupe = 'dedupe', awaits = 'awaits', children = 'children' }

local function keyOf(base, kind, id)
  return base .. KIND[kind] .. ':' .. id
end

-- The keys a map operation has beside its actor keys, as src/store/keys.ts builds them
-- (MAP_KEY_KINDS): base .. kind .. ':' .. map, and .. ':' .. bucket for the bucketed outcome hashes.
local MAP_KIND = { stats = 'mapstat', source = 'mapsrc', outcomes = 'mapout', started = 'mapstarted', aborted = 'mapaborted', rollbackOutcomes = 'rbout', rollbackFailures = 'rbfail', starts = 'mapstarts' }

local function mapKeyOf(base, kind, map, bucket)
  if bucket then return base .. MAP_KIND[kind] .. ':' .. map .. ':' .. bucket end
  return base .. MAP_KIND[kind] .. ':' .. map
end

-- Stamps the retention on every map key of actor `id`, when it is a map (it has stats): the
-- lists, and the outcome buckets its stats count.
local function stampMap(base, id, ttl)
  local stats = mapKeyOf(base, 'stats', id)
  if redis.call('PEXPIRE', stats, ttl) == 0 then return end
  for _, kind in ipairs({ 'source', 'started', 'aborted', 'rollbackFailures' }) do redis.call('PEXPIRE', mapKeyOf(base, kind, id), ttl) end
  for bucket = 0, tonumber(redis.call('HGET', stats, 'buckets') or '0') - 1 do
    redis.call('PEXPIRE', mapKeyOf(base, 'outcomes', id, bucket), ttl)
    redis.call('PEXPIRE', mapKeyOf(base, 'rollbackOutcomes', id, bucket), ttl)
    redis.call('PEXPIRE', mapKeyOf(base, 'starts', id, bucket), ttl)
  end
end

-- The keys that carry the actor's retention (the lease has its own TTL).
local RETAINED = { 'execution', 'results', 'undo', 'trace', 'inbox', 'dedupe', 'awaits', 'children' }

-- Stamps the retention on every key of actor `id`, its map keys included (PEXPIRE: a no-op on a
-- key that does not exist).
local function stampActor(base, id, ttl)
  for _, kind in ipairs(RETAINED) do redis.call('PEXPIRE', keyOf(base, kind, id), ttl) end
  stampMap(base, id, ttl)
end

-- Gives `key` the retention unless it has a TTL already: for a key the caller may just have created.
local function stampIfNew(key, ttl)
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ttl) end
end

-- Gives a map key the caller may just have created the map's remaining retention (that of its
-- stats hash, `ttl` when it has none), unless it has a TTL already: a map key never outlives the
-- map's stats, so a map created again under the id finds no leftover beside them.
local function stampLikeMap(key, stats, ttl)
  if redis.call('PTTL', key) ~= -1 then return end
  local left = redis.call('PTTL', stats)
  redis.call('PEXPIRE', key, left > 0 and left or ttl)
end

-- Runs `command` on `key` with `list` as its trailing arguments, at most 1000 per call (unpack
-- has a stack limit).
local function callChunked(command, key, list)
  for from = 1, #list, 1000 do
    redis.call(command, key, unpack(list, from, math.min(from + 999, #list)))
  end
end
