--[[
  markActive-1.lua: records an execution in the global active index, keeping the time it was
  first recorded. Scores are the server's clock in microseconds, raised above the newest
  score when needed, so the index lists executions strictly in the order they were marked.

  KEYS[1]  active sorted set (global slot)   execution id -> first-marked time, us

  ARGV[1]  execution id

  Returns
    1  recorded now
    0  already recorded; its score is kept
]]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local now = redis.call('TIME')
local score = tonumber(now[1]) * 1000000 + tonumber(now[2])
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) >= score then score = tonumber(newest[2]) + 1 end
-- %.0f: tostring() would print a 16-digit score in exponent form and lose digits.
redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', score), ARGV[1])
return 1
