--[[
  readInbox-2.lua: reads an actor's inbox seq and unconsumed entries in one atomic step (what
  Store.readInbox returns). Writes nothing.

  KEYS[1]  execution hash   {rev, ..., iseq}
  KEYS[2]  inbox hash       seq -> encoded { event, dedupeKey }

  ARGV     none

  Returns
    {iseq, {seq, entry, ...}}   the highest seq assigned (nil: no signal ever landed, or no such
                                actor) and the entries as HGETALL lists them ({} without iseq)
]]
local seq = redis.call('HGET', KEYS[1], 'iseq')
if not seq then return {false, {}} end
return {seq, redis.call('HGETALL', KEYS[2])}
