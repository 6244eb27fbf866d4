--[[
  loadExecution-4.lua: reads an execution's revision, snapshot, outbox and inbox, whether its
  lease is held and whether it is marked unreadable, in one atomic step (what Store.load
  returns); and, when asked and the stored status is `completed`, results of its steps (a
  settled run's outcome in the same read). Writes nothing.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  inbox hash       seq -> encoded { event, dedupeKey }
  KEYS[3]  lease            owner, with its TTL (absent when no live lease)
  KEYS[4]  results hash     step -> encoded result (read only as ARGV[1] asks)

  ARGV[1]  '' (no results), 'some' (the steps ARGV[2..] names) or 'all' (every step's)
  ARGV[2..] step names (with 'some')

  Returns
    {rev, snapshot, outbox, iseq, {seq, entry, ...}, leased, marked, results}
                            the fields as stored (nil when absent: the caller checks them); the
                            inbox entries as HGETALL lists them ({} without iseq); leased 1 or 0;
                            marked 1 when the execution hash has an `unreadable` record, else 0;
                            results: 0 when not read (not asked, or the status is not
                            `completed`), else {step, value, ...} of the results present
]]
local fields = redis.call('HMGET', KEYS[1], 'rev', 'snapshot', 'outbox', 'iseq', 'status')
local entries = fields[4] and redis.call('HGETALL', KEYS[2]) or {}
local results = 0
if ARGV[1] ~= '' and fields[5] == 'completed' then
  if ARGV[1] == 'all' then
    results = redis.call('HGETALL', KEYS[4])
  elseif #ARGV > 1 then
    results = {}
    local values = redis.call('HMGET', KEYS[4], unpack(ARGV, 2))
    for i = 2, #ARGV do
      if values[i - 1] then
        results[#results + 1] = ARGV[i]
        results[#results + 1] = values[i - 1]
      end
    end
  else
    results = {}
  end
end
return {fields[1], fields[2], fields[3], fields[4], entries, redis.call('EXISTS', KEYS[3]), redis.call('HEXISTS', KEYS[1], 'unreadable'), results}
