--[[
  commitBatch-1n.lua: several actors' fenced commits in one script call (a group commit), each
  applied or refused on its own exactly as commitExecution-5.lua would apply or refuse it alone,
  one after another in the order given: per-step commits and commits with a kernel section
  (signals, spawns, map writes, listing; includes/kernelCommit.lua) alike. A commit refused, or
  one whose commands raise an error (a key of another type), changes nothing for the others; a
  signal of one commit lands before the commits after it are checked, as it would alone.

  Standalone Redis only: the keys of different executions live in different hash slots, which a
  Redis Cluster refuses in one script.

  KEYS[i]  the execution hash of commit i; its other four keys (results, undo, trace, lease) are
           built from the root base and id its arguments carry, as src/store/keys.ts builds them

  ARGV[1]  the packed arguments (packArgv in src/store/redis-scripts.ts: one msgpack array of
           strings, unpacked into A), per commit i (1..#KEYS) one after another:
             the number c of its commit arguments, its root base '<prefix>:{<root>}:', its id,
             then its c arguments: exactly those of commitExecution-5.lua

  Returns
    a list of #KEYS replies, the i-th being commit i's: one of commitExecution-5.lua's replies,
    or {-1, message} when one of its commands raised an error (message: the error's)
]]
local A = cmsgpack.unpack(ARGV[1])
--- @include "actorKeys"
--- @include "applyCommit"
--- @include "fencedCommit"
--- @include "deliverSignal"
--- @include "mapWrites"
--- @include "actorKernel"
--- @include "activeIndex"
--- @include "kernelCommit"

local function commitOne(k, o, last)
  local refused, commit, stored, undoLength = checkCommit(k, o)
  if refused then return refused end
  if A[o + 14] == '' then
    local revision = applyCommit(k[1], k[2], k[3], k[4], commit, A[o + 2], A[o + 3] == '1', stored + 1, undoLength)
    finishCommit(k, o)
    return {0, revision}
  end
  local revision, landed, delivered, refusal = commitWithKernel(k, o, last, commit, stored, undoLength)
  if refusal then return refusal end
  finishCommit(k, o)
  return committedReply(revision, landed, delivered)
end

local replies, o = {}, 0
for i = 1, #KEYS do
  local count, base, id = tonumber(A[o + 1]), A[o + 2], A[o + 3]
  local k = { KEYS[i], keyOf(base, 'results', id), keyOf(base, 'undo', id), keyOf(base, 'trace', id), keyOf(base, 'lease', id) }
  local ok, reply = pcall(commitOne, k, o + 3, o + 3 + count)
  if ok then
    replies[i] = reply
  else
    replies[i] = {-1, type(reply) == 'table' and (reply.err or tostring(reply)) or tostring(reply)}
  end
  o = o + 3 + count
end
return replies
