--[[
  commitExecution-5.lua: the fenced commit of an execution's next snapshot with its writes, in
  one atomic step. Applies only if the stored revision equals the expected one; otherwise
  changes nothing (no lease release, no announcement either). On success it may also release
  the execution's lease and publish its settled notification.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input}
  KEYS[2]  results hash     step -> encoded result
  KEYS[3]  undo list        encoded undo entries, oldest first
  KEYS[4]  trace list       encoded trace entries, oldest first
  KEYS[5]  lease string     the owner, with the lease TTL

  ARGV[1]  expected revision
  ARGV[2]  retention (TTL) of the execution's keys, ms
  ARGV[3]  '1': re-stamp ARGV[2] on every key of the execution; '0': only on the keys this
           commit creates (see includes/applyCommit.lua)
  ARGV[4]  '1': release the lease if ARGV[5] holds it; '0': leave the lease alone
  ARGV[5]  lease owner to release (read when ARGV[4] is '1')
  ARGV[6]  settled channel to PUBLISH ARGV[7] on after the commit; '' = no announcement
  ARGV[7]  the execution id (the message published)
  ARGV[8..] the commit (layout in includes/applyCommit.lua, base 8)

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

local commit = readCommit(8)
local undoLength = commit.nUndo > 0 and redis.call('LLEN', KEYS[3]) or 0
local badPosition, length = checkUndo(commit, undoLength)
if badPosition then return {3, badPosition, length} end

local revision = applyCommit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], commit, ARGV[2], ARGV[3] == '1', tonumber(stored) + 1, undoLength)
if ARGV[4] == '1' and redis.call('GET', KEYS[5]) == ARGV[5] then redis.call('DEL', KEYS[5]) end
if ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[6], ARGV[7]) end
return {0, revision}
