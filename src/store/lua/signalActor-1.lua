--[[
  signalActor-1.lua: delivers one signal from outside any commit (Store.signal), in one atomic
  step: to the recipient and, with cascade, to every actor it awaits, transitively (see
  includes/deliverSignal.lua), each at most once per dedupe key. With refuse statuses, nothing
  lands anywhere when an actor reached has one of them. A recipient that does not exist: nothing
  lands.

  KEYS[1]  the recipient's execution hash   {rev, status, ..., iseq}
  The recipient's inbox, dedupe and awaits keys, and those of the actors the cascade reaches, are
  built from ARGV[1] (includes/actorKeys.lua): same hash tag, same slot as KEYS[1].

  ARGV[1]  root base '<prefix>:{<root>}:' of the recipient
  ARGV[2]  retention (TTL) for an inbox or dedupe hash the signal creates, ms
  ARGV[3]  the recipient's id
  ARGV[4]  dedupe key
  ARGV[5]  '1': cascade along awaits; '0': the recipient only
  ARGV[6]  entry bytes (encoded { event, dedupeKey })
  ARGV[7]  number of refuse statuses, then that many statuses

  Returns
    {0, id, ...}          delivered; the ids it landed in, in delivery order (none: a duplicate
                          everywhere, or no such actor)
    {1, id, status}       refused: actor id has the refuse status `status`; nothing written
]]
local A = ARGV
--- @include "actorKeys"
--- @include "deliverSignal"

local base, ttl = A[1], A[2]
local reached = reachSignal(base, A[3], A[5] == '1')
local refuse = {}
for j = 1, tonumber(A[7]) do refuse[A[7 + j]] = true end
for _, actor in ipairs(reached) do
  if actor.status and refuse[actor.status] then return {1, actor.id, actor.status} end
end
local landed = {0}
for _, actor in ipairs(reached) do
  if landSignal(base, actor.id, A[4], A[6], ttl) then landed[#landed + 1] = actor.id end
end
return landed
