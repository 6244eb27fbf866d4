/**
 * Group load for the Redis store: the `acquireAndLoad` calls several actors issue in one turn of
 * the event loop (a bundle of ten rollback actors each taking its element, a sweep taking the
 * actors it recovers) share one script call (`acquireAndLoadBatch-5n.lua`), so they share one
 * command's building, one socket write and one reply, as the commits of a turn share one
 * (`commit-batcher.ts`). Every load keeps its own reply and is taken or refused exactly as
 * `acquireAndLoad-5.lua` would take or refuse it alone, in the order issued.
 */
import { answerEach, MAX_GROUP_COMMIT } from './commit-batcher.js';
import type { Answerable } from './commit-batcher.js';
import { SCRIPTS } from './redis-scripts.js';
import type { ScriptCall, ScriptRunner } from './redis-scripts.js';

/** Sends one `acquireAndLoad` call (`acquireAndLoadArgs`, binary replies), grouped with the others of its turn; resolves with its own reply. */
export type LoadSender = (call: ScriptCall) => Promise<unknown>;

interface Pending extends Answerable {
  readonly call: ScriptCall;
}

/** A sender that sends every load on its own (Redis Cluster: actors live in different slots). */
export function unbatchedLoads(run: ScriptRunner): LoadSender {
  return (call) => run('acquireAndLoad', call, true);
}

/**
 * A sender that groups the loads of a turn: each waits for the end of the turn it is issued in
 * (`process.nextTick`, so loads issued from the promise continuations of one reply go together)
 * and goes out with every load issued meanwhile, as one call (a lone load alone, with the single
 * script); {@link MAX_GROUP_COMMIT} waiting loads go out at once. Unlike commits, loads are not
 * held back while others are in flight: a load is what an actor waits on before it can do
 * anything, and a turn rarely issues more than a bundle's worth.
 */
export function batchedLoads(run: ScriptRunner, maxBatch = MAX_GROUP_COMMIT): LoadSender {
  let pending: Pending[] | undefined;
  const send = (batch: readonly Pending[]): void => {
    let reply: Promise<unknown>;
    try {
      reply = batch.length === 1 ? run('acquireAndLoad', batch[0]!.call, true) : run('acquireAndLoadBatch', { keys: batch.flatMap((p) => p.call.keys), argv: batch.flatMap((p) => p.call.argv) }, true);
    } catch (error) {
      for (const p of batch) p.reject(error);
      return;
    }
    if (batch.length === 1) reply.then(batch[0]!.resolve, batch[0]!.reject);
    else answerEach(batch, reply, SCRIPTS.acquireAndLoadBatch.file);
  };
  const flush = (): void => {
    const batch = pending;
    pending = undefined;
    if (batch !== undefined) send(batch);
  };
  return (call) => {
    const waiting = (pending ??= []);
    if (waiting.length === 0) process.nextTick(flush);
    const reply = new Promise((resolve, reject) => waiting.push({ call, resolve, reject }));
    if (waiting.length >= maxBatch) {
      pending = undefined;
      send(waiting);
    }
    return reply;
  };
}
