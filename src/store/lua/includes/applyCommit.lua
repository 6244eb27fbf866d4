--[[
  Included by createExecution-5.lua and commitExecution-5.lua (`--- @include "applyCommit"`):
  reads a commit laid out in the arguments A (the including script's, unpacked) from index `base`, checks it, and applies it. Its kernel
  section is read and applied by includes/actorKernel.lua.

  Commit layout in A, from `base`:
    +0  status          lifecycle status of the snapshot
    +1  snapshot        envelope bytes
    +2  outbox          msgpack bytes of the outbox
    +3  truncateUndoTo  entries kept on the undo stack before the pushes; -1 = no truncation
    +4  nResults        number of (step, value) pairs
    +5  nUndo           number of (position, entry) pairs
    +6  nTrace          number of trace entries
    +7  nResults pairs step, encoded result
        nUndo pairs    position, encoded undo entry
        nTrace         encoded trace entries
]]
local function readCommit(base)
  return {
    status = A[base],
    snapshot = A[base + 1],
    outbox = A[base + 2],
    truncate = tonumber(A[base + 3]),
    nResults = tonumber(A[base + 4]),
    nUndo = tonumber(A[base + 5]),
    nTrace = tonumber(A[base + 6]),
    first = base + 7,
  }
end

-- The index after commit `c` in A (where what follows it starts). Not part of readCommit: the
-- per-step fast path never needs it (measured: computing it costs a quarter of a microsecond).
local function commitEnd(c)
  return c.first + 2 * c.nResults + 2 * c.nUndo + c.nTrace
end

-- Scripts are not rolled back on error, so every push is checked before anything is written:
-- a push lands on an existing entry (replacing it) or directly after the last one.
-- `len` is the stack's current length. Returns nil, or the first offending position and the
-- stack length it met.
local function checkUndo(c, len)
  if c.truncate >= 0 and c.truncate < len then len = c.truncate end
  local i = c.first + 2 * c.nResults
  for _ = 1, c.nUndo do
    local pos = tonumber(A[i])
    if pos == nil or pos < 0 or pos > len then return A[i], len end
    if pos == len then len = len + 1 end
    i = i + 2
  end
  return nil
end

-- Writes results, undo truncation and pushes, trace, then snapshot, status, outbox and
-- `revision`. `len` is the undo stack's current length (only read when the commit pushes undo
-- entries). Returns `revision`.
--
-- Retention: with `restamp`, every key of the execution gets `ttlMs` (PEXPIRE; a no-op on a key
-- that does not exist). Without it, only the keys this commit creates get `ttlMs`, so every key
-- always carries a TTL:
--   results hash  created iff the fields HSET added equal HLEN afterwards (it held none before);
--   undo list     created iff an RPUSH returned 1 (an empty list does not exist; a truncation
--                 to 0 deletes it, and the next push creates it again);
--   trace list    created iff the first RPUSH returned 1.
-- (One command per value: measured, batching the values into one command through unpack()
-- cost more than it saved for the usual commit of one result and one trace entry.)
-- The execution hash exists before every commit (its revision is the fence).
local function applyCommit(execKey, resultsKey, undoKey, traceKey, c, ttlMs, restamp, revision, len)
  local i = c.first
  local added = 0
  for _ = 1, c.nResults do
    added = added + redis.call('HSET', resultsKey, A[i], A[i + 1])
    i = i + 2
  end
  local resultsCreated = not restamp and added > 0 and redis.call('HLEN', resultsKey) == added
  if c.truncate == 0 then
    redis.call('DEL', undoKey)
  elseif c.truncate > 0 then
    redis.call('LTRIM', undoKey, 0, c.truncate - 1)
  end
  if c.truncate >= 0 and c.truncate < len then len = c.truncate end
  local undoCreated, traceCreated = false, false
  for _ = 1, c.nUndo do
    local pos = tonumber(A[i])
    if pos == len then
      if redis.call('RPUSH', undoKey, A[i + 1]) == 1 then undoCreated = true end
      len = len + 1
    else
      redis.call('LSET', undoKey, pos, A[i + 1])
    end
    i = i + 2
  end
  for _ = 1, c.nTrace do
    if redis.call('RPUSH', traceKey, A[i]) == 1 then traceCreated = true end
    i = i + 1
  end
  redis.call('HSET', execKey, 'rev', revision, 'status', c.status, 'snapshot', c.snapshot, 'outbox', c.outbox)
  if restamp then
    redis.call('PEXPIRE', execKey, ttlMs)
    redis.call('PEXPIRE', resultsKey, ttlMs)
    redis.call('PEXPIRE', undoKey, ttlMs)
    redis.call('PEXPIRE', traceKey, ttlMs)
  else
    if resultsCreated then redis.call('PEXPIRE', resultsKey, ttlMs) end
    if undoCreated then redis.call('PEXPIRE', undoKey, ttlMs) end
    if traceCreated then redis.call('PEXPIRE', traceKey, ttlMs) end
  end
  return revision
end
