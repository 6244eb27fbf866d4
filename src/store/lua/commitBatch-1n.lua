--[[
  commitBatch-1n.lua: several executions' fenced commits in one script call (a group commit),
  each applied or refused on its own exactly as commitExecution-5.lua would apply or refuse it
  alone, one after another in the order given. Only per-step fast-path commits are batched: no
  kernel section (argument 14 of each commit's arguments is ''), so no re-stamp either. A commit
  refused, or one whose commands raise an error (a key of another type), changes nothing for
  the others.

  Standalone Redis only: the keys of different executions live in different hash slots, which a
  Redis Cluster refuses in one script.

  KEYS[i]  the execution hash of commit i; its other four keys (results, undo, trace, lease) are
           built from the root base and id its arguments carry, as src/store/keys.ts builds them

  ARGV[1]  the packed arguments (packArgv in src/store/redis-scripts.ts: one msgpack array of
           strings, unpacked into A), per commit i (1..#KEYS) one after another:
             the number c of its commit arguments, its root base '<prefix>:{<root>}:', its id,
             then its c arguments: those of commitExecution-5.lua (its arguments 1..14 and the
             commit from 15, layout in includes/applyCommit.lua)

  Returns
    a list of #KEYS replies, the i-th being commit i's: one of commitExecution-5.lua's replies
    {0, revision} {1, actualRevision} {2, 0} {3, position, length} {4, 0} {5, revision, seq},
    or {-1, message} when one of its commands raised an error (message: the error's)
]]
local A = cmsgpack.unpack(ARGV[1])
--- @include "actorKeys"
--- @include "applyCommit"
--- @include "fencedCommit"

local function commitOne(k, o)
  if A[o + 14] ~= '' then return {-1, 'commitBatch-1n.lua takes fast-path commits only (no kernel section)'} end
  local refused, commit, stored, undoLength = checkCommit(k, o)
  if refused then return refused end
  local revision = applyCommit(k[1], k[2], k[3], k[4], commit, A[o + 2], A[o + 3] == '1', stored + 1, undoLength)
  finishCommit(k, o)
  return {0, revision}
end

local replies, o = {}, 0
for i = 1, #KEYS do
  local count, base, id = tonumber(A[o + 1]), A[o + 2], A[o + 3]
  local k = { KEYS[i], keyOf(base, 'results', id), keyOf(base, 'undo', id), keyOf(base, 'trace', id), keyOf(base, 'lease', id) }
  local ok, reply = pcall(commitOne, k, o + 3)
  if ok then
    replies[i] = reply
  else
    replies[i] = {-1, type(reply) == 'table' and (reply.err or tostring(reply)) or tostring(reply)}
  end
  o = o + 3 + count
end
return replies
