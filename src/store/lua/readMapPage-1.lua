--[[
  readMapPage-1.lua: reads a window of a map's elements by index in one atomic step
  (Store.readMapPage): each position's outcome slot, the result of each completed element and the
  snapshot of each failed or halted element. Writes nothing.

  KEYS[1]  the map's stats hash   {target, buckets, ...}
  The outcome buckets of the map and the keys of its elements (`<map>.<index>`) are built from the
  root base ARGV[1] (includes/actorKeys.lua; bucket size from includes/mapWrites.lua): same hash
  tag, same slot as KEYS[1].

  ARGV[1]  root base '<prefix>:{<root>}:' of the map
  ARGV[2]  the map's id
  ARGV[3]  the first index of the window
  ARGV[4]  how many indexes
  ARGV[5]  '1': a completed element's result is that of step ARGV[6]; '0': every result (HGETALL)
  ARGV[6]  the step (read when ARGV[5] is '1')

  Returns
    {exists, target, entry...}   exists: '1' when the map has stats (else '0', and no entries);
                                 target: the stats' target (nil until set); one entry per index
                                 of the window: {letter, result, snapshot}, each nil when absent
                                 (letter: the slot's outcome letter; result: the step's bytes, or
                                 {step, bytes, ...} for every result; snapshot: envelope bytes)
]]
local A = ARGV
--- @include "actorKeys"
--- @include "mapWrites"
local fields = redis.call('HMGET', KEYS[1], 'batch', 'target')
if not fields[1] then return {'0', false} end
local base, map, from, count = A[1], A[2], tonumber(A[3]), tonumber(A[4])
local one = A[5] == '1'
local reply = {'1', fields[2]}
for index = from, from + count - 1 do
  -- %d: tostring() would print a large index in exponent form.
  local field = string.format('%d', index)
  local letter = redis.call('HGET', mapKeyOf(base, 'outcomes', map, math.floor(index / MAP_BUCKET_SIZE)), field)
  local result, snapshot = false, false
  local element = map .. '.' .. field
  if letter == 'c' then
    if one then
      result = redis.call('HGET', keyOf(base, 'results', element), A[6])
    elseif redis.call('EXISTS', keyOf(base, 'execution', element)) == 1 then
      result = redis.call('HGETALL', keyOf(base, 'results', element))
    end
  elseif letter == 'f' or letter == 'h' then
    snapshot = redis.call('HGET', keyOf(base, 'execution', element), 'snapshot')
  end
  reply[#reply + 1] = {letter, result, snapshot}
end
return reply
