--[[
  createExecution-5.lua: creates an execution at revision 1 with its input and first commit,
  unless the id exists; optionally takes its lease and publishes its settled notification in the
  same atomic step. Leftovers of an expired execution under the same id (results, undo, trace,
  inbox, dedupe, awaits, children) are cleared. Every key gets the retention TTL. The first
  commit's awaits are stored, its spawned actors created (as commitExecution-5.lua creates
  them) and its signals delivered (the commit's, then each spawned actor's) after its writes.
  Checks, before the first write: the id exists, the lease, the undo positions, then each
  spawned actor (exists, lease, undo positions; depth first).

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  results hash     step -> encoded result
  KEYS[3]  undo list        encoded undo entries, oldest first
  KEYS[4]  trace list       encoded trace entries, oldest first
  KEYS[5]  lease string     the owner, with the lease TTL
  The actor's inbox, dedupe, awaits and children keys, and the keys of the actors its signals
  reach or it spawns, are built from the root base of the kernel section (includes/actorKeys.lua).

  Arguments come packed (packArgv in src/store/redis-scripts.ts): ARGV[1] is one msgpack array
  of strings, unpacked into A; ARGV[i] below means A[i].

  ARGV[1]  retention (TTL) of every key of the execution, ms
  ARGV[2]  reactor name
  ARGV[3]  encoded input
  ARGV[4]  '1': take (or renew) the lease for ARGV[5]; refuse if another owner holds it; '0': leave it alone
  ARGV[5]  lease owner (read when ARGV[4] is '1')
  ARGV[6]  lease TTL, ms (read when ARGV[4] is '1')
  ARGV[7]  settled channel to PUBLISH ARGV[8] on after the create; '' = no announcement
  ARGV[8]  the execution id (the message published)
  ARGV[9]  root base '<prefix>:{<root>}:' of the kernel section (always present)
  ARGV[10] the active index key to record the execution in with the create
           (CreateOptions.list); '' = none (the store lists beside the script: a Redis Cluster,
           where the index is in another slot)
  ARGV[11..] the first commit (layout in includes/applyCommit.lua, base 11), then the id and the
           kernel tail (layout in includes/actorKernel.lua; no consumed entries), then the map
           section when the step has map writes (layout in includes/mapWrites.lua)

  Returns
    {0, 1, key...}          created at revision 1, then the dedupe keys of the conditional
                            signals that landed
    {1, revision}           the id exists (at that revision); nothing written
    {3, position, length}   an undo push would leave a gap (position > stack length); nothing written
    {4, 0}                  another owner holds the lease; nothing written
    {6, id}                 a spawned actor's id exists (or is named twice); nothing written
    {4, id}                 another owner holds the lease of spawned actor `id`; nothing written
    {3, position, length, id}  an undo push of spawned actor `id` would leave a gap; nothing written
]]
local A = cmsgpack.unpack(ARGV[1])
--- @include "actorKeys"
--- @include "deliverSignal"
--- @include "applyCommit"
--- @include "mapWrites"
--- @include "actorKernel"
--- @include "activeIndex"

local existing = redis.call('HGET', KEYS[1], 'rev')
if existing then return {1, tonumber(existing)} end

local takeLease = A[4] == '1'
if takeLease then
  local holder = redis.call('GET', KEYS[5])
  if holder and holder ~= A[5] then return {4, 0} end
end

local commit = readCommit(11)
local base, tail = A[9], commitEnd(commit)
local id = A[tail]
local kernel, after = readKernel(tail + 1)
local maps = readMapSection(after)
local badPosition, length = checkUndo(commit, 0)
if badPosition then return {3, badPosition, length} end
local refused = checkSpawns(base, kernel, { [id] = true })
if refused then return refused end

redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], keyOf(base, 'inbox', id), keyOf(base, 'dedupe', id), keyOf(base, 'awaits', id), keyOf(base, 'children', id))
redis.call('HSET', KEYS[1], 'reactor', A[2], 'input', A[3])
local revision = applyCommit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], commit, A[1], true, 1, 0)
applyKernel(base, id, kernel, A[1], false)
local landed = {}
deliverKernel(base, id, kernel, A[1], applyMapWrites(base, maps, A[1]), landed)
if takeLease then redis.call('SET', KEYS[5], A[5], 'PX', A[6]) end
if A[10] ~= '' then markActive(A[10], { id }) end
if A[7] ~= '' then redis.call('PUBLISH', A[7], A[8]) end
local reply = {0, revision}
for _, key in ipairs(landed) do reply[#reply + 1] = key end
return reply
