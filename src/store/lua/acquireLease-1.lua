--[[
  acquireLease-1.lua: takes an execution's liveness lease, or renews it for the same owner.

  KEYS[1]  lease string     the owner, with the lease TTL

  ARGV[1]  owner
  ARGV[2]  lease TTL, ms

  Returns
    1  the owner holds the lease for ARGV[2] ms from now
    0  another owner holds it; nothing written
]]
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
