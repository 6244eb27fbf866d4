--[[
  Included by the scripts that reach actors beyond their KEYS (`--- @include "actorKeys"`): the
  keys of any actor of the script's root, built exactly as src/store/keys.ts builds them
  (KEY_KINDS): base .. kind .. ':' .. id, where base is '<prefix>:{<root>}:' (ARGV). Every such
  key shares the hash tag of the script's KEYS, so it is in their cluster slot.
]]
local KIND = { execution = 'exec', results = 'results', undo = 'undo', trace = 'trace', lease = 'lease', inbox = 'inbox', dedupe = 'dedupe', awaits = 'awaits', children = 'children' }

local function keyOf(base, kind, id)
  return base .. KIND[kind] .. ':' .. id
end

-- The keys that carry the actor's retention (the lease has its own TTL).
local RETAINED = { 'execution', 'results', 'undo', 'trace', 'inbox', 'dedupe', 'awaits', 'children' }

-- Stamps the retention on every key of actor `id` (PEXPIRE: a no-op on a key that does not exist).
local function stampActor(base, id, ttl)
  for _, kind in ipairs(RETAINED) do redis.call('PEXPIRE', keyOf(base, kind, id), ttl) end
end

-- Gives `key` the retention unless it has a TTL already: for a key the caller may just have created.
local function stampIfNew(key, ttl)
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ttl) end
end

-- Runs `command` on `key` with `list` as its trailing arguments, at most 1000 per call (unpack
-- has a stack limit).
local function callChunked(command, key, list)
  for from = 1, #list, 1000 do
    redis.call(command, key, unpack(list, from, math.min(from + 999, #list)))
  end
end
