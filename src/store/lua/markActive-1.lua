--[[
  markActive-1.lua: records executions in the global active index, keeping the time each was
  first recorded (includes/activeIndex.lua).

  KEYS[1]  active sorted set (global slot)   execution id -> first-marked time, us

  ARGV[1]  execution id
  ARGV[2..] more execution ids (Store.markActiveMany), each recorded as ARGV[1] is

  Returns
    the number of ids recorded now (for one id: 1 recorded now, 0 already recorded, its score kept)
]]
--- @include "activeIndex"
return markActive(KEYS[1], ARGV)
