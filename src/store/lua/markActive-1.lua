--[[
  markActive-1.lua: records executions in the global active index, keeping the time each was
  first recorded. Scores are the server's clock in microseconds, raised above the newest
  score when needed, so the index lists executions strictly in the order they were marked (the
  ids of one call in the order given).

  KEYS[1]  active sorted set (global slot)   execution id -> first-marked time, us

  ARGV[1]  execution id
  ARGV[2..] more execution ids (Store.markActiveMany), each recorded as ARGV[1] is

  Returns
    the number of ids recorded now (for one id: 1 recorded now, 0 already recorded, its score kept)
]]
local score, recorded = nil, 0
for i = 1, #ARGV do
  if not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    if not score then
      -- Read the clock and the newest score only when an id is new (the usual call lists one already listed).
      local now = redis.call('TIME')
      score = tonumber(now[1]) * 1000000 + tonumber(now[2])
      local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
      if newest[2] and tonumber(newest[2]) >= score then score = tonumber(newest[2]) + 1 end
    else
      score = score + 1
    end
    -- %.0f: tostring() would print a 16-digit score in exponent form and lose digits.
    redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', score), ARGV[i])
    recorded = recorded + 1
  end
end
return recorded
