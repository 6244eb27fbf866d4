/**
 * Group commit for the Redis store: the fast-path commits that several executions issue in the
 * same turn of the event loop share one script call (`commitBatch-5n.lua`), so they share one
 * command's building, one socket write and one reply. A worker advancing ten runs at once issues
 * their next commits together (their previous commits' replies arrive in one read), and this is
 * where a step's client-side Redis cost goes.
 *
 * Every commit keeps its own fence (revision, inbox seq) and its own reply: the batch script
 * applies or refuses each exactly as `commitExecution-5.lua` would alone, in the order given.
 * The first commit of a turn goes out at once, alone, so a single run (an inline `run()`) pays
 * no delay; the commits that follow it in the same turn wait until the turn's microtasks are done
 * (`process.nextTick`) and go out as one call.
 */
import { commitBatchArgs, isBatchable, readBatchReplies } from './redis-scripts.js';
import type { ScriptCall, ScriptRunner } from './redis-scripts.js';

interface Pending {
  readonly call: ScriptCall;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Sends one commit call (`commitArgs`), batched with the others of its turn when it is on the fast path; resolves with its own reply. */
export type CommitSender = (call: ScriptCall) => Promise<unknown>;

/** A sender that sends every commit on its own (Redis Cluster: executions live in different slots). */
export function unbatchedCommits(run: ScriptRunner): CommitSender {
  return (call) => run('commitExecution', call);
}

/** A sender that groups the fast-path commits of one turn of the event loop into one script call. */
export function batchedCommits(run: ScriptRunner): CommitSender {
  let pending: Pending[] | undefined;
  const flush = () => {
    const batch = pending!;
    pending = undefined;
    if (batch.length === 0) return;
    if (batch.length === 1) {
      run('commitExecution', batch[0]!.call).then(batch[0]!.resolve, batch[0]!.reject);
      return;
    }
    run('commitBatch', commitBatchArgs(batch.map((p) => p.call))).then(
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
    if (!isBatchable(call)) return run('commitExecution', call);
    if (pending === undefined) {
      pending = [];
      process.nextTick(flush);
      return run('commitExecution', call);
    }
    return new Promise((resolve, reject) => pending!.push({ call, resolve, reject }));
  };
}
