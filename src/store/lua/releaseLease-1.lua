--[[
  releaseLease-1.lua: releases an execution's liveness lease if the owner holds it.

  KEYS[1]  lease string     the owner, with the lease TTL

  ARGV[1]  owner

  Returns
    1  released
    0  not held by ARGV[1] (free, expired, or another owner's); nothing written
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
