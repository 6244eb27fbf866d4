--[[
  commitBatch-5n.lua: several executions' fenced commits in one script call (a group commit),
  each applied or refused on its own exactly as commitExecution-5.lua would apply or refuse it
  alone, one after another in the order given. Only per-step fast-path commits are batched: no
  kernel section (ARGV[14] of each commit's arguments is ''), so no re-stamp either. A commit
  refused, or one whose commands raise an error (a key of another type), changes nothing for
  the others.

  Standalone Redis only: the keys of different executions live in different hash slots, which a
  Redis Cluster refuses in one script.

  KEYS[5i-4 .. 5i]  the five keys of commit i, as KEYS[1..5] of commitExecution-5.lua
                    (execution hash, results hash, undo list, trace list, lease string)

  ARGV[1]  n, the number of commits
  then, per commit i (1..n):
           the number of its arguments, then its arguments: those of commitExecution-5.lua
           (ARGV[1..14] and the commit from ARGV[15], layout in includes/applyCommit.lua)

  Returns
    a list of n replies, the i-th being commit i's: one of commitExecution-5.lua's replies
    {0, revision} {1, actualRevision} {2, 0} {3, position, length} {4, 0} {5, revision, seq},
    or {-1, message} when one of its commands raised an error (message: the error's)
]]
--- @include "applyCommit"
--- @include "fencedCommit"

local function commitOne(k, o)
  if ARGV[o + 14] ~= '' then return {-1, 'commitBatch-5n.lua takes fast-path commits only (no kernel section)'} end
  local refused, commit, stored, undoLength = checkCommit(k, o)
  if refused then return refused end
  local revision = applyCommit(k[1], k[2], k[3], k[4], commit, ARGV[o + 2], ARGV[o + 3] == '1', stored + 1, undoLength)
  finishCommit(k, o)
  return {0, revision}
end

local replies, o = {}, 1
for i = 1, tonumber(ARGV[1]) do
  local k = { KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1], KEYS[5 * i] }
  local count = tonumber(ARGV[o + 1])
  local ok, reply = pcall(commitOne, k, o + 1)
  if ok then
    replies[i] = reply
  else
    replies[i] = {-1, type(reply) == 'table' and (reply.err or tostring(reply)) or tostring(reply)}
  end
  o = o + 1 + count
end
return replies
