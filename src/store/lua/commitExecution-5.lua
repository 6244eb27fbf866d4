--[[
  commitExecution-5.lua: the fenced commit of an execution's next snapshot with its writes, in
  one atomic step. Applies only if the stored revision equals the expected one (and, when asked,
  the stored snapshot is exactly the expected bytes) and no signal landed in the actor's inbox
  after the seq the commit was computed with; otherwise changes nothing (no lease taken or
  released, no signal delivered, no announcement either). Every check runs before the first
  write, in this order: the execution exists, the revision, the snapshot, the inbox, the undo
  positions, the lease to take, then each spawned actor (exists, lease, undo positions; depth
  first). On success it writes the commit, deletes the consumed inbox entries, replaces the
  awaits list, re-stamps (when asked) the actor's keys and those of its ancestors and
  descendants, creates the spawned actors, applies the map writes of the step, delivers the
  signals (the commit's, then each spawned actor's; a conditional one only when its condition
  holds), and may take the execution's lease, release it, and publish its settled notification
  (in that order).

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  results hash     step -> encoded result
  KEYS[3]  undo list        encoded undo entries, oldest first
  KEYS[4]  trace list       encoded trace entries, oldest first
  KEYS[5]  lease string     the owner, with the lease TTL
  The actor's inbox, dedupe, awaits and children keys, and the keys of the actors its signals
  reach, it spawns, or it re-stamps, are built from the root base of the kernel section
  (includes/actorKeys.lua): same hash tag, same slot.

  Arguments come packed (packArgv in src/store/redis-scripts.ts): ARGV[1] is one msgpack array
  of strings, unpacked into A; ARGV[i] below means A[i].

  ARGV[1]  expected revision
  ARGV[2]  retention (TTL) of the execution's keys, ms
  ARGV[3]  '1': re-stamp ARGV[2] on every key of the execution; '0': only on the keys this
           commit creates (see includes/applyCommit.lua)
  ARGV[4]  '1': release the lease if ARGV[5] holds it (after the commit, and after taking it
           with ARGV[8]); '0': do not release
  ARGV[5]  lease owner to release (read when ARGV[4] is '1')
  ARGV[6]  settled channel to PUBLISH ARGV[7] on after the commit; '' = no announcement
  ARGV[7]  the execution id, then NUL and a step name for each result to announce with the state
           (the message published: see settledMessage in includes/fencedCommit.lua)
  ARGV[8]  '1': take (or renew) the lease for ARGV[9]; refuse if another owner holds it;
           '0': do not take it
  ARGV[9]  lease owner to take it for (read when ARGV[8] is '1'; '' otherwise)
  ARGV[10] lease TTL, ms (read when ARGV[8] is '1'; '' otherwise)
  ARGV[11] '1': apply only if the stored snapshot is byte-for-byte ARGV[12]; '0': no snapshot check
  ARGV[12] the expected snapshot envelope bytes (read when ARGV[11] is '1'; '' otherwise)
  ARGV[13] inbox seen: refuse if the stored inbox seq (iseq) is higher; for a commit computed
           ahead of the signal it applies (Commit.signalAhead), followed by NUL, the actor's
           dedupe hash key, NUL and the signal's dedupe key: refuse (reply {8, rev, seen}) unless
           that hash records the signal under exactly the seq seen
  ARGV[14] root base '<prefix>:{<root>}:' of the kernel section; '' = none (the per-step fast
           path: nothing follows the commit). Never '' when ARGV[3] is '1'
  ARGV[15..] the commit (layout in includes/applyCommit.lua, base 15), then, with a root base,
           the actor id and the kernel tail (layout in includes/actorKernel.lua), then the index
           section, then the map section when the step has map writes (layout in
           includes/mapWrites.lua)

  Index section (with a root base): the active index key ('' = none: the store lists around
  the script, a Redis Cluster, where the index is in another slot), nList, then that many ids to
  record in it with the commit (CommitOptions.list), then '1' to remove the committing actor from
  it (CommitOptions.unlist: it settled) or '0', then '1' followed by the reactor name, the
  encoded input and the parent id ('' = none) when the commit creates the actor
  (CommitOptions.create, expected revision 0: applied only if the actor does not exist; it is
  created detached at revision 1, the commit its first), or '0'. Applied only when the commit
  applies.

  Returns
    {0, revision}           committed, with no signal landed (always on the per-step fast path)
    {0, revision, n, key1..keyn, (i, to, seq)...}
                            committed; the new revision, the dedupe keys of the n conditional
                            signals that landed, then each landing of the commit's own signals
                            (not its spawned actors'): the signal's position (1-based), the
                            actor it landed on and its inbox seq there
    {1, actualRevision}     stale: the stored revision differs from ARGV[1], or the stored
                            snapshot from ARGV[12]; nothing written
    {2, 0}                  no such execution (unknown id, or its retention expired); a
                            creating commit is refused {1, revision} instead when the actor exists
    {3, position, length}   an undo push would leave a gap (position > stack length); nothing written
    {4, 0}                  another owner holds the lease ARGV[8] asked to take; nothing written
    {5, revision, seq}      the inbox holds a signal the commit has not seen (stored seq > ARGV[13]); nothing written
    {6, id}                 a spawned actor's id exists (or is named twice); nothing written
    {4, id}                 another owner holds the lease of spawned actor `id`; nothing written
    {3, position, length, id}  an undo push of spawned actor `id` would leave a gap; nothing written
    {7, map, why}           a gated start (MapWrites.started.gate) of an element whose map no
                            longer dispatches; nothing written
]]
local A = cmsgpack.unpack(ARGV[1])
--- @include "applyCommit"
--- @include "fencedCommit"

local refused, commit, stored, undoLength = checkCommit(KEYS, 0)
if refused then return refused end

local revision, landed, delivered
if A[14] == '' then
  -- The per-step fast path: no kernel section (and no re-stamp). The kernel code of the other
  -- branch is not run, so not even its functions are created.
  revision = applyCommit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], commit, A[2], A[3] == '1', stored + 1, undoLength)
  finishCommit(KEYS, 0)
  return {0, revision}
end
--- @include "actorKeys"
--- @include "deliverSignal"
--- @include "mapWrites"
--- @include "actorKernel"
--- @include "activeIndex"
--- @include "kernelCommit"
local refusal
revision, landed, delivered, refusal = commitWithKernel(KEYS, 0, #A, commit, stored, undoLength)
if refusal then return refusal end
finishCommit(KEYS, 0)
return committedReply(revision, landed, delivered)
