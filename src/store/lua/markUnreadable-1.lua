--[[
  markUnreadable-1.lua: records that an actor's stored data cannot be read (Store.markUnreadable),
  in one atomic step: its status becomes 'failed', the record goes in the `unreadable` field,
  and its revision goes up by one (when it is a whole number), so a commit computed before is
  refused as stale. Every other field (snapshot, outbox, input, iseq, parent, reactor) and every
  other key of the actor are left as they are. Reads before it writes: an unknown id is not
  created, and a key of another type is not touched. The caller removes the id from the active
  index after it (a global key, in another cluster slot).

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent, unreadable}

  ARGV[1]  the encoded record (msgpack { code, message })

  Returns
    {0}  recorded now
    {1}  recorded before; nothing written (the first record is kept)
    {2}  no such execution (no rev, snapshot nor outbox); nothing written
    {3}  the key holds a value of another type (foreign data); nothing written
]]
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return {2} end
if kind ~= 'hash' then return {3} end
local fields = redis.call('HMGET', KEYS[1], 'rev', 'snapshot', 'outbox', 'unreadable')
if not fields[1] and not fields[2] and not fields[3] then return {2} end
if fields[4] then return {1} end
-- HINCRBY refuses a value that is not a 64-bit integer: only a revision of at most 15 digits is raised.
if fields[1] and string.match(fields[1], '^%d+$') and #fields[1] <= 15 then redis.call('HINCRBY', KEYS[1], 'rev', 1) end
redis.call('HSET', KEYS[1], 'status', 'failed', 'unreadable', ARGV[1])
return {0}
