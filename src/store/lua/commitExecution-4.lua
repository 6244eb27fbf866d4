--[[
  commitExecution-4.lua: the fenced commit of an execution's next snapshot with its writes, in
  one atomic step. Applies only if the stored revision equals the expected one; otherwise
  changes nothing.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input}
  KEYS[2]  results hash     step -> encoded result
  KEYS[3]  undo list        encoded undo entries, oldest first
  KEYS[4]  trace list       encoded trace entries, oldest first

  ARGV[1]  expected revision
  ARGV[2]  TTL of every key of the execution, ms (re-stamped on each commit)
  ARGV[3..] the commit (layout in includes/applyCommit.lua, base 3)

  Returns
    {0, revision}           committed; the new revision
    {1, actualRevision}     stale: the stored revision differs from ARGV[1]; nothing written
    {2, 0}                  no such execution (unknown id, or its retention expired)
    {3, position, length}   an undo push would leave a gap (position > stack length); nothing written
]]
--- @include "applyCommit"

local stored = redis.call('HGET', KEYS[1], 'rev')
if not stored then return {2, 0} end
if tonumber(stored) ~= tonumber(ARGV[1]) then return {1, tonumber(stored)} end

local commit = readCommit(3)
local undoLength = commit.nUndo > 0 and redis.call('LLEN', KEYS[3]) or 0
local badPosition, length = checkUndo(commit, undoLength)
if badPosition then return {3, badPosition, length} end

return {0, applyCommit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], commit, ARGV[2], tonumber(stored) + 1, undoLength)}
