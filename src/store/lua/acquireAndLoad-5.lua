--[[
  acquireAndLoad-5.lua: takes an execution's liveness lease (or renews it for the same owner)
  and reads its revision, snapshot, outbox, input and inbox, in one atomic step; asked to, also
  the top entry of its undo stack (what its rollback undoes first), and asked to, only while
  another actor (the one asking, not created yet) does not exist. Reads before it writes: an
  unknown id takes no lease, and a key of another type fails (WRONGTYPE) before the lease is
  touched.

  KEYS[1]  execution hash   {rev, status, reactor, snapshot, outbox, input, iseq, parent}
  KEYS[2]  lease string     the owner, with the lease TTL
  KEYS[3]  inbox hash       seq -> encoded { event, dedupeKey }
  KEYS[4]  undo list        encoded undo entries, oldest first
  KEYS[5]  asker hash       with ARGV[4] = '1': the actor whose existence makes this call take
                            nothing (a rollback actor's duplicate start job finds it created);
                            else unused (the caller passes KEYS[1] again)

  ARGV[1]  owner
  ARGV[2]  lease TTL, ms
  ARGV[3]  '1': read the undo stack's top entry too; '0' (or absent): do not
  ARGV[4]  '1': take nothing when KEYS[5] holds a created actor (a revision); '0' (or absent): no such check

  Returns
    {0, rev, snapshot, outbox, input, iseq, {seq, entry, ...}, undoLength, topEntry}
                                        the owner holds the lease for ARGV[2] ms from now; the
                                        fields as stored (nil when absent: the caller checks them),
                                        the inbox entries as HGETALL lists them ({} without iseq),
                                        and with ARGV[3] = '1' the undo stack's length and its
                                        last entry (0 and nil for an empty stack; both absent
                                        without ARGV[3])
    {1}                                 another owner holds the lease; nothing written
    {2}                                 no such execution (no rev, snapshot nor outbox); nothing written
    {3}                                 ARGV[4] = '1' and the asker exists; nothing read nor written
]]
--- @include "acquireAndLoad"
return acquireAndLoadOne(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
