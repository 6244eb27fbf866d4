--[[
  Included by markActive-1.lua and commitExecution-5.lua (`--- @include "activeIndex"`): records
  actors in the global active index, keeping the time each was first recorded. Scores are the
  server's clock in microseconds, raised above the newest score when needed, so the index lists
  actors strictly in the order they were marked (the ids of one call in the order given).
]]

-- Records `ids[1..n]` in sorted set `active` (ZADD NX). Returns how many were recorded now.
local function markActive(active, ids)
  local score, recorded = nil, 0
  for i = 1, #ids do
    if not redis.call('ZSCORE', active, ids[i]) then
      if not score then
        -- Read the clock and the newest score only when an id is new (the usual call lists one already listed).
        local now = redis.call('TIME')
        score = tonumber(now[1]) * 1000000 + tonumber(now[2])
        local newest = redis.call('ZRANGE', active, -1, -1, 'WITHSCORES')
        if newest[2] and tonumber(newest[2]) >= score then score = tonumber(newest[2]) + 1 end
      else
        score = score + 1
      end
      -- %.0f: tostring() would print a 16-digit score in exponent form and lose digits.
      redis.call('ZADD', active, 'NX', string.format('%.0f', score), ids[i])
      recorded = recorded + 1
    end
  end
  return recorded
end
