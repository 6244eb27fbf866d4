/**
 * Group commit for the Redis store: the commits that several actors issue in the same turn of
 * the event loop share one script call (`commitBatch-1n.lua`), so they share one command's
 * building, one socket write and one reply: per-step commits and those with a kernel section
 * (signals, spawns, map writes) alike. A worker advancing ten runs (or map elements) at once
 * issues their next commits together (their previous commits' replies arrive in one read), and
 * this is where a step's client-side Redis cost goes.
 *
 * Every commit keeps its own fence (revision, inbox seq) and its own reply: the batch script
 * applies or refuses each exactly as `commitExecution-5.lua` would alone, in the order given.
 * When to send is {@link batchedCommits}' rule: at once while nothing is in flight, at the end of
 * the turn while something is.
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
 * A sender that groups the commits of one turn of the event loop into one script call,
 * as Nagle's algorithm groups a socket's small writes: a commit sent while none of this sender's
 * is in flight goes out at once, alone (an idle process, a lone run: nothing to wait for); one
 * sent while others are in flight waits for the end of the turn (`process.nextTick`), and the
 * turn's waiting commits go out together. A busy worker always has commits in flight, so its
 * commits go out one call per turn.
 */
export function batchedCommits(run: ScriptRunner): CommitSender {
  let pending: Pending[] | undefined;
  let inFlight = 0;
  const send = <T>(reply: Promise<T>): Promise<T> => {
    inFlight++;
    const settled = () => void inFlight--;
    reply.then(settled, settled);
    return reply;
  };
  const flush = () => {
    const batch = pending!;
    pending = undefined;
    if (batch.length === 1) {
      send(run('commitExecution', batch[0]!.call)).then(batch[0]!.resolve, batch[0]!.reject);
      return;
    }
    send(run('commitBatch', commitBatchArgs(batch.map((p) => p.call)))).then(
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
  return (call) => {
    if (pending === undefined && inFlight === 0) return send(run('commitExecution', call));
    if (pending === undefined) {
      pending = [];
      process.nextTick(flush);
    }
    return new Promise((resolve, reject) => pending!.push({ call, resolve, reject }));
  };
}
