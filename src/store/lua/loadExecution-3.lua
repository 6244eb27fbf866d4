--[[
  loadExecution-3.lua: reads an execution's revision, snapshot, outbox and inbox, whether its
  lease is held and whether it is marked unreadable, in one atomic step (what Store.load
  returns). Writes nothing.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  inbox hash       seq -> encoded { event, dedupeKey }
  KEYS[3]  lease            owner, with its TTL (absent when no live lease)

  ARGV     none

  Returns
    {rev, snapshot, outbox, iseq, {seq, entry, ...}, leased, marked}
                            the fields as stored (nil when absent: the caller checks them); the
                            inbox entries as HGETALL lists them ({} without iseq); leased 1 or 0;
                            marked 1 when the execution hash has an `unreadable` record, else 0
]]
local fields = redis.call('HMGET', KEYS[1], 'rev', 'snapshot', 'outbox', 'iseq')
local entries = fields[4] and redis.call('HGETALL', KEYS[2]) or {}
return {fields[1], fields[2], fields[3], fields[4], entries, redis.call('EXISTS', KEYS[3]), redis.call('HEXISTS', KEYS[1], 'unreadable')}
