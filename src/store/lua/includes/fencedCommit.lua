--[[
  Included by commitExecution-5.lua and commitBatch-1n.lua (`--- @include "fencedCommit"`, after
  "applyCommit"): the checks that fence one commit, and what runs after it is applied (lease,
  announcement). Works on one commit's five keys `k` and its arguments from A[o + 1] (A: the
  including script's arguments, unpacked, in the layout of commitExecution-5.lua's header; the
  batch script lays several such commits out one after another).
]]

-- Every check of one commit, before its first write: the execution exists (a creating commit:
-- it does not), the revision, the snapshot (when asked), the inbox (and the signal a commit was
-- computed ahead of), the undo positions, the lease to take. Returns the refusal,
-- or nil with the commit read from A, the stored revision and the undo stack's length.
-- The inbox seen (A[o + 13]): the seq alone, or, for a commit computed ahead of the signal it
-- applies (Commit.signalAhead), the seq, NUL, the actor's dedupe hash, NUL, the signal's dedupe
-- key. Returns the seq, and the dedupe hash and key when given.
local function inboxSeen(arg)
  local cut = string.find(arg, '\0', 1, true)
  if not cut then return tonumber(arg) end
  local second = string.find(arg, '\0', cut + 1, true)
  return tonumber(string.sub(arg, 1, cut - 1)), string.sub(arg, cut + 1, second - 1), string.sub(arg, second + 1)
end

local function checkCommit(k, o)
  local checkSnapshot = A[o + 11] == '1'
  local fields = checkSnapshot and redis.call('HMGET', k[1], 'rev', 'iseq', 'snapshot') or redis.call('HMGET', k[1], 'rev', 'iseq')
  local stored = fields[1]
  if not stored then
    -- A creating commit (expected revision 0, with a kernel section: its index section carries
    -- the creation, see includes/kernelCommit.lua) is fenced by the actor's absence.
    if A[o + 1] ~= '0' or A[o + 14] == '' then return {2, 0} end
    -- A new actor has no inbox: no signal it was computed ahead of has landed.
    local seen, dedupe = inboxSeen(A[o + 13])
    if dedupe then return {8, 0, seen} end
    local commit = readCommit(o + 15)
    local badPosition, length = checkUndo(commit, 0)
    if badPosition then return {3, badPosition, length} end
    if A[o + 8] == '1' then
      local holder = redis.call('GET', k[5])
      if holder and holder ~= A[o + 9] then return {4, 0} end
    end
    return nil, commit, 0, 0
  end
  stored = tonumber(stored)
  if stored ~= tonumber(A[o + 1]) then return {1, stored} end
  if checkSnapshot and fields[3] ~= A[o + 12] then return {1, stored} end
  local seen, dedupe, signal = inboxSeen(A[o + 13])
  if fields[2] and tonumber(fields[2]) > seen then return {5, stored, tonumber(fields[2])} end
  -- Computed ahead of the signal it applies: that signal landed under the seq it names (so, with
  -- the check above, it is the last that landed).
  if dedupe and tonumber(redis.call('HGET', dedupe, signal) or '0') ~= seen then return {8, stored, seen} end

  local commit = readCommit(o + 15)
  local undoLength = commit.nUndo > 0 and redis.call('LLEN', k[3]) or 0
  local badPosition, length = checkUndo(commit, undoLength)
  if badPosition then return {3, badPosition, length} end

  if A[o + 8] == '1' then
    local holder = redis.call('GET', k[5])
    if holder and holder ~= A[o + 9] then return {4, 0} end
  end
  return nil, commit, stored, undoLength
end

-- The settled notification's message. A[o + 7] is the execution id, optionally followed by NUL and
-- the names of the results to announce, NUL-separated (none: "id\0"). With the NUL the message is a
-- notice of the state the commit wrote (layout in src/store/settled-notice.ts: "\0xr1", the
-- revision and the snapshot's length as 32-bit big-endian integers, the snapshot, the number of
-- results (16-bit), then each result's name (16-bit length) and bytes (32-bit length), a result
-- the hash lacks left out), so the waiter needs no read; past NOTICE_MAX bytes, the id alone.
-- A notice goes only to a channel someone subscribes to: nil (nothing published) when none does.
-- That loses nothing: a waiter subscribes, then reads, so one whose SUBSCRIBE comes after this
-- script reads what it wrote. Notices are asked for on a standalone server only (the store sends
-- no result names on a Cluster, where PUBSUB NUMSUB would count one node's subscribers); most
-- settling actors (a map's elements, rollback actors) have no waiter, and their notice (the
-- snapshot and results, about a kilobyte) was built and published for no one.
local NOTICE_MAX = 65536
local function settledMessage(k, o)
  local spec = A[o + 7]
  local cut = string.find(spec, '\0', 1, true)
  if not cut then return spec end
  if redis.call('PUBSUB', 'NUMSUB', A[o + 6])[2] == 0 then return nil end
  local snapshot = A[o + 16]
  local size = 14 + #snapshot
  local results = {}
  for name in string.gmatch(string.sub(spec, cut + 1), '[^%z]+') do
    local value = redis.call('HGET', k[2], name)
    if value then
      results[#results + 1] = struct.pack('>I2', #name) .. name .. struct.pack('>I4', #value) .. value
      size = size + 6 + #name + #value
    end
  end
  if size > NOTICE_MAX then return string.sub(spec, 1, cut - 1) end
  return '\0xr1' .. struct.pack('>I4I4', tonumber(A[o + 1]) + 1, #snapshot) .. snapshot .. struct.pack('>I2', #results) .. table.concat(results)
end

-- After the commit is applied: take the lease, release it, publish the settled notification
-- (in that order, each when asked).
local function finishCommit(k, o)
  if A[o + 8] == '1' then redis.call('SET', k[5], A[o + 9], 'PX', A[o + 10]) end
  if A[o + 4] == '1' and redis.call('GET', k[5]) == A[o + 5] then redis.call('DEL', k[5]) end
  if A[o + 6] ~= '' then
    local message = settledMessage(k, o)
    if message then redis.call('PUBLISH', A[o + 6], message) end
  end
end
