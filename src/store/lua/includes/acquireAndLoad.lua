--[[
  Included by acquireAndLoad-5.lua and acquireAndLoadBatch-5n.lua (`--- @include
  "acquireAndLoad"`): one actor's lease taken and its state read, with the five keys and four
  arguments (and the reply) acquireAndLoad-5.lua's header describes.
]]
local function acquireAndLoadOne(kExecution, kLease, kInbox, kUndo, kAsker, owner, ttl, undoTop, unlessExists)
  if unlessExists == '1' and redis.call('HEXISTS', kAsker, 'rev') == 1 then return {3} end
  local fields = redis.call('HMGET', kExecution, 'rev', 'snapshot', 'outbox', 'input', 'iseq')
  if not fields[1] and not fields[2] and not fields[3] then return {2} end
  local entries = fields[5] and redis.call('HGETALL', kInbox) or {}
  local holder = redis.call('GET', kLease)
  if holder and holder ~= owner then return {1} end
  local undoLength, top
  if undoTop == '1' then
    undoLength = redis.call('LLEN', kUndo)
    if undoLength > 0 then top = redis.call('LINDEX', kUndo, -1) end
  end
  redis.call('SET', kLease, owner, 'PX', ttl)
  if undoLength == nil then return {0, fields[1], fields[2], fields[3], fields[4], fields[5], entries} end
  return {0, fields[1], fields[2], fields[3], fields[4], fields[5], entries, undoLength, top or false}
end
