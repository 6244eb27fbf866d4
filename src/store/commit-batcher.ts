/**
 * Group commit for the Redis store: the commits that several actors issue while one of the
 * store's calls is in flight share the next script call (`commitBatch-1n.lua`), so they share one
 * command's building, one socket write and one reply: per-step commits and those with a kernel
 * section (signals, spawns, map writes) alike. A worker advancing ten runs (or map elements) at
 * once gets their commits' replies in one read and issues their next commits together, and this
 * is where a step's client-side Redis cost goes.
 *
 * Every commit keeps its own fence (revision, inbox seq) and its own reply: the batch script
 * applies or refuses each exactly as `commitExecution-5.lua` would alone, in the order given.
 * When to send is {@link batchedCommits}' rule: at once while nothing is in flight; while a call is
 * in flight, with the next call, sent when that one is answered.
 */
import { commitBatchArgs, readBatchReplies } from './redis-scripts.js';
import type { CommitCall, ScriptRunner } from './redis-scripts.js';

interface Pending {
  readonly call: CommitCall;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Sends one commit call (`commitArgs`), batched with the others of its turn; resolves with its own reply. */
export type CommitSender = (call: CommitCall) => Promise<unknown>;

/** A sender that sends every commit on its own (Redis Cluster: executions live in different slots). */
export function unbatchedCommits(run: ScriptRunner): CommitSender {
  return (call) => run('commitExecution', call);
}

/**
 * A sender that groups commits into one script call at a time, as a database groups the commits
 * of concurrent transactions into one log write: a commit sent while none of this sender's calls
 * is in flight goes out at once, alone (an idle process, a lone run: nothing to wait for); one
 * sent while a call is in flight waits for that call's reply, and every commit that waited goes
 * out together, at the end of the turn the reply arrives in (`process.nextTick`, after the actors
 * that reply answered have issued their next commits). At most one call is in flight, so a busy
 * worker sends one call per round of its actors (ten runs at concurrency 10: one call for ten
 * commits) rather than one per turn; a commit waits at most one round trip longer.
 */
export function batchedCommits(run: ScriptRunner): CommitSender {
  let pending: Pending[] | undefined;
  let inFlight = false;
  const flush = () => {
    const batch = pending!;
    pending = undefined;
    const reply = batch.length === 1 ? run('commitExecution', batch[0]!.call) : run('commitBatch', commitBatchArgs(batch.map((p) => p.call)));
    send(reply);
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
  // The call in flight: when it is answered, the commits that waited for it go out (attached
  // before the commits' own handlers, so the flush is queued before their actors go on).
  const send = (reply: Promise<unknown>): void => {
    inFlight = true;
    const settled = () => {
      inFlight = false;
      if (pending !== undefined) process.nextTick(flush);
    };
    reply.then(settled, settled);
  };
  return (call) => {
    if (pending === undefined && !inFlight) {
      const reply = run('commitExecution', call);
      send(reply);
      return reply;
    }
    pending ??= [];
    return new Promise((resolve, reject) => pending!.push({ call, resolve, reject }));
  };
}
