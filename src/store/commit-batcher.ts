/**
 * Group commit for the Redis store: the commits that several actors issue while one of the
 * store's commit calls is in flight share the next script call (`commitBatch-1n.lua`), so they share one
 * command's building, one socket write and one reply: per-step commits and those with a kernel
 * section (signals, spawns, map writes) alike. A worker advancing ten runs (or map elements) at
 * once gets their commits' replies in one read and issues their next commits together, and this
 * is where a step's client-side Redis cost goes.
 *
 * Every commit keeps its own fence (revision, inbox seq) and its own reply: the batch script
 * applies or refuses each exactly as `commitExecution-5.lua` would alone, in the order given.
 * When to send is {@link batchedCommits}' rule: at once while no commit call is in flight; while
 * calls are in flight, with the next call, sent once they are answered (or once 128 commits wait).
 */
import { commitBatchArgs, readBatchReplies } from './redis-scripts.js';
import type { CommitCall, ScriptRunner } from './redis-scripts.js';

interface Pending {
  readonly call: CommitCall;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Sends one commit call (`commitArgs`), batched with the others that wait with it; resolves with its own reply. */
export type CommitSender = (call: CommitCall) => Promise<unknown>;

/** A sender that sends every commit on its own (Redis Cluster: executions live in different slots). */
export function unbatchedCommits(run: ScriptRunner): CommitSender {
  return (call) => run('commitExecution', call);
}

/**
 * The most commits one group commit call carries: a batch this full goes out at once, even while
 * another call is in flight, so no single script holds the server for long (a commit costs it
 * some tens of microseconds) and a process with thousands of actors keeps several calls going.
 */
export const MAX_GROUP_COMMIT = 128;

/**
 * A sender that groups commits into one script call at a time, as a database groups the commits
 * of concurrent transactions into one log write: a commit sent while none of this sender's calls
 * is in flight goes out at once, alone (an idle process, a lone run: nothing to wait for); one
 * sent while a call is in flight waits for the calls in flight to be answered, and every commit
 * that waited goes out together, at the end of the turn the last reply arrives in
 * (`process.nextTick`, after the actors that reply answered have issued their next commits), or
 * at once when {@link MAX_GROUP_COMMIT} have gathered. A busy worker thus sends one call per
 * round of its actors (ten runs at concurrency 10: one call for ten commits) rather than one per
 * turn. A commit waits for the calls ahead of it (one round trip while Redis answers) and goes
 * out in the order it was issued; the actors a reply answers join the next call only when their
 * next commit follows through microtasks (one that first reads or subscribes joins a later one).
 */
export function batchedCommits(run: ScriptRunner, maxBatch = MAX_GROUP_COMMIT): CommitSender {
  let pending: Pending[] | undefined;
  let scheduled = false;
  let inFlight = 0;
  // A call in flight: once every call is answered, the commits that waited go out (attached
  // before the commits' own handlers, so the flush is queued before their actors go on).
  const track = (reply: Promise<unknown>): void => {
    inFlight++;
    const settled = () => {
      inFlight--;
      if (inFlight === 0 && pending !== undefined && !scheduled) {
        scheduled = true;
        process.nextTick(flush);
      }
    };
    reply.then(settled, settled);
  };
  const send = (batch: readonly Pending[]): void => {
    let reply: Promise<unknown>;
    try {
      reply = batch.length === 1 ? run('commitExecution', batch[0]!.call) : run('commitBatch', commitBatchArgs(batch.map((p) => p.call)));
    } catch (error) {
      for (const p of batch) p.reject(error);
      return;
    }
    track(reply);
    if (batch.length === 1) {
      reply.then(batch[0]!.resolve, batch[0]!.reject);
      return;
    }
    reply.then(
      (reply) => {
        let replies: unknown[];
        try {
          replies = readBatchReplies(reply, batch.length);
        } catch (error) {
          for (const p of batch) p.reject(error);
          return;
        }
        batch.forEach((p, i) => {
          const one = replies[i];
          if (one instanceof Error) p.reject(one);
          else p.resolve(one);
        });
      },
      (error: unknown) => {
        for (const p of batch) p.reject(error);
      },
    );
  };
  function flush(): void {
    scheduled = false;
    // A full batch went out since this flush was queued: the rest waits for it (its settle queues the flush again).
    if (inFlight > 0) return;
    const batch = pending;
    pending = undefined;
    if (batch !== undefined) send(batch);
  }
  return (call) => {
    if (pending === undefined && inFlight === 0 && !scheduled) {
      const reply = run('commitExecution', call);
      track(reply);
      return reply;
    }
    const waiting = (pending ??= []);
    const reply = new Promise((resolve, reject) => waiting.push({ call, resolve, reject }));
    if (waiting.length >= maxBatch) {
      pending = undefined;
      send(waiting);
    }
    return reply;
  };
}
