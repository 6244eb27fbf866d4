--[[
  acquireAndLoad-3.lua: takes an execution's liveness lease (or renews it for the same owner)
  and reads its revision, snapshot, outbox, input and inbox, in one atomic step. Reads before it
  writes: an unknown id takes no lease, and a key of another type fails (WRONGTYPE) before the
  lease is touched.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  lease string     the owner, with the lease TTL
  KEYS[3]  inbox hash       seq -> encoded { event, dedupeKey }

  ARGV[1]  owner
  ARGV[2]  lease TTL, ms

  Returns
    {0, rev, snapshot, outbox, input, iseq, {seq, entry, ...}}
                                        the owner holds the lease for ARGV[2] ms from now; the
                                        fields as stored (nil when absent: the caller checks them)
                                        and the inbox entries as HGETALL lists them ({} without iseq)
    {1}                                 another owner holds the lease; nothing written
    {2}                                 no such execution (no rev, snapshot nor outbox); nothing written
]]
local fields = redis.call('HMGET', KEYS[1], 'rev', 'snapshot', 'outbox', 'input', 'iseq')
if not fields[1] and not fields[2] and not fields[3] then return {2} end
local entries = fields[5] and redis.call('HGETALL', KEYS[3]) or {}
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {1} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {0, fields[1], fields[2], fields[3], fields[4], fields[5], entries}
