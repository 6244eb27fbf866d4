--[[
  createExecution-4.lua: creates an execution at revision 1 with its input and first commit,
  unless the id exists. Leftovers of an expired execution under the same id are cleared.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input}
  KEYS[2]  results hash     step -> encoded result
  KEYS[3]  undo list        encoded undo entries, oldest first
  KEYS[4]  trace list       encoded trace entries, oldest first

  ARGV[1]  TTL of every key of the execution, ms
  ARGV[2]  reactor name
  ARGV[3]  encoded input
  ARGV[4..] the first commit (layout in includes/applyCommit.lua, base 4)

  Returns
    {0, 1}                  created at revision 1
    {1, revision}           the id exists (at that revision); nothing written
    {3, position, length}   an undo push would leave a gap (position > stack length); nothing written
]]
--- @include "applyCommit"

local existing = redis.call('HGET', KEYS[1], 'rev')
if existing then return {1, tonumber(existing)} end

local commit = readCommit(4)
local badPosition, length = checkUndo(commit, 0)
if badPosition then return {3, badPosition, length} end

redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'reactor', ARGV[2], 'input', ARGV[3])
return {0, applyCommit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], commit, ARGV[1], 1, 0)}
