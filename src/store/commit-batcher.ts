/**
 * Group commit for the Redis store: the commits that several actors issue in one turn of the
 * event loop, while the store's commit calls are in flight, share one script call
 * (`commitBatch-1n.lua`), so they share one command's building, one socket write and one reply:
 * per-step commits and those with a kernel section (signals, spawns, map writes) alike. A worker
 * advancing ten runs (or map elements) at once gets their commits' replies in a few reads and
 * issues their next commits together, and this is where a step's client-side Redis cost goes.
 *
 * Every commit keeps its own fence (revision, inbox seq) and its own reply: the batch script
 * applies or refuses each exactly as `commitExecution-5.lua` would alone, in the order given.
 * Calls go out on one connection, so Redis runs them in the order sent (short of ioredis sending
 * one again after a NOSCRIPT reply: harmless, as two calls in flight never carry commits of the
 * same actor, and each commit is fenced). When to send is {@link batchedCommits}' rule: at the end
 * of the turn while fewer than {@link MAX_CALLS_IN_FLIGHT} calls are in flight (as two calls when
 * none is and the turn issued at least {@link SPLIT_FROM_IDLE}); else with the next call, once one
 * of them is answered (or once {@link MAX_GROUP_COMMIT} commits wait).
 */
import { commitBatchArgs, readBatchReplies, SCRIPTS } from './redis-scripts.js';
import type { CommitCall, ScriptRunner } from './redis-scripts.js';

interface Pending {
  readonly call: CommitCall;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** An item of a group call, waiting for its own reply. */
export interface Answerable {
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Answer each item of a group call (`file`: its script) from the call's reply: its own reply, or
 * the error one of its commands raised; every item gets the error of a call that failed whole.
 */
export function answerEach(batch: readonly Answerable[], reply: Promise<unknown>, file: string): void {
  reply.then(
    (replies) => {
      let each: unknown[];
      try {
        each = readBatchReplies(replies, batch.length, file);
      } catch (error) {
        for (const p of batch) p.reject(error);
        return;
      }
      batch.forEach((p, i) => {
        const one = each[i];
        if (one instanceof Error) p.reject(one);
        else p.resolve(one);
      });
    },
    (error: unknown) => {
      for (const p of batch) p.reject(error);
    },
  );
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
 * How many group commit calls a sender keeps in flight: two, so that while Redis applies one
 * call's commits the process computes the next steps of the actors another call answered (double
 * buffering). With one, a busy worker alternated: it computed its ten runs' next steps while
 * Redis waited, then waited while Redis applied them (docs/performance.md, "Warm processes,
 * two commit calls in flight").
 */
export const MAX_CALLS_IN_FLIGHT = 2;

/**
 * From how many commits a turn's commits go out as two calls when no call is in flight. Sent as
 * one, the actors that issued them (a bundle's ten elements, started together) would all wait for
 * the same reply, then all compute their next steps while Redis waited, then all wait again:
 * in lockstep for as long as they run, so neither double buffering nor the second call in flight
 * could ever be used. As two halves, the first half's actors compute while Redis applies the
 * second half, and the two groups stay out of step (docs/performance.md, session 28). Fewer
 * commits than this go as one call: a group that small has little to overlap.
 */
export const SPLIT_FROM_IDLE = 4;

/**
 * A sender that groups commits into script calls, as a database groups the commits of concurrent
 * transactions into one log write. A commit waits for the end of the turn it is sent in
 * (`process.nextTick`: for commits issued from promise continuations, as an actor's are, after the
 * other actors answered in that turn have issued theirs) and goes out with every commit issued
 * meanwhile, as one call (a lone commit alone, with the single-commit script), while fewer than
 * `maxInFlight` calls are in flight; otherwise it waits until one of them is answered, and goes
 * out at the end of that turn with every other commit that waited. A full batch
 * ({@link MAX_GROUP_COMMIT}) goes out at once whatever is in flight. A busy worker thus sends one
 * call per group of runs a reply answered rather than one per commit: its runs split into groups
 * whose sizes follow when their replies arrive, and while Redis applies one group's commits the
 * worker computes another's steps. Commits go out in the order they were issued; the actors a
 * reply answers join the next call only when their next commit follows through microtasks (one
 * that first reads or subscribes joins a later one).
 *
 * An idle sender used to send a commit at once, alone: a worker taking a bundle of ten elements
 * from idle then sent the first element's commit alone and the other nine together, at both of
 * their commits. Waiting for the end of the turn costs a lone commit nothing measurable (the turn
 * ends in microseconds) and took the script calls of a forward fan-out element from 0.85 to 0.70
 * (docs/performance.md, session 27, with the paired figures). Sent from idle as one call, though,
 * a bundle's ten commits kept its ten elements in lockstep (see {@link SPLIT_FROM_IDLE}): a turn
 * with no call in flight and at least that many commits now sends them as two calls of halves.
 */
export function batchedCommits(run: ScriptRunner, maxBatch = MAX_GROUP_COMMIT, maxInFlight = MAX_CALLS_IN_FLIGHT): CommitSender {
  let pending: Pending[] | undefined;
  let scheduled = false;
  let inFlight = 0;
  // The commits waiting go out at the end of this turn, unless a flush is queued already.
  const flushAtTurnEnd = (): void => {
    if (scheduled) return;
    scheduled = true;
    process.nextTick(flush);
  };
  // A call in flight: once it is answered below the limit, the commits that waited go out at the
  // end of that turn, with the commits the actors it answered issue in the same turn.
  const track = (reply: Promise<unknown>): void => {
    inFlight++;
    const settled = () => {
      inFlight--;
      if (inFlight < maxInFlight && pending !== undefined) flushAtTurnEnd();
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
    answerEach(batch, reply, SCRIPTS.commitBatch.file);
  };
  function flush(): void {
    scheduled = false;
    // Full batches went out since this flush was queued: the rest waits for one (its settle queues the flush again).
    if (inFlight >= maxInFlight) return;
    const batch = pending;
    pending = undefined;
    if (batch === undefined) return;
    if (inFlight === 0 && maxInFlight > 1 && batch.length >= SPLIT_FROM_IDLE) {
      const half = Math.ceil(batch.length / 2);
      send(batch.slice(0, half));
      send(batch.slice(half));
      return;
    }
    send(batch);
  }
  return (call) => {
    const waiting = (pending ??= []);
    const reply = new Promise((resolve, reject) => waiting.push({ call, resolve, reject }));
    if (waiting.length >= maxBatch) {
      pending = undefined;
      send(waiting);
    } else if (inFlight < maxInFlight) {
      flushAtTurnEnd();
    }
    return reply;
  };
}
