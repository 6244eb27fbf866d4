--[[
  acquireAndLoadBatch-5n.lua: several actors' leases taken and their states read in one script
  call (a group load), each exactly as acquireAndLoad-5.lua takes and reads one, one after
  another in the order given. A load whose commands raise an error (a key of another type)
  changes nothing for the others.

  KEYS[5i-4 .. 5i]  the five keys of load i, as acquireAndLoad-5.lua's KEYS[1..5]
  ARGV[4i-3 .. 4i]  the four arguments of load i, as acquireAndLoad-5.lua's ARGV[1..4]

  Standalone Redis only: the keys of different actors live in different hash slots, which a
  Redis Cluster refuses in one script.

  Returns
    a list with one reply per load, the i-th being load i's: one of acquireAndLoad-5.lua's
    replies, or {-1, message} when one of its commands raised an error (message: the error's)
]]
--- @include "acquireAndLoad"

local replies = {}
for i = 1, #KEYS / 5 do
  local k, a = 5 * (i - 1), 4 * (i - 1)
  local ok, reply = pcall(acquireAndLoadOne, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
  if ok then
    replies[i] = reply
  else
    replies[i] = {-1, type(reply) == 'table' and (reply.err or tostring(reply)) or tostring(reply)}
  end
end
return replies
