/**
 * The schedule driver of the chaos property tests (test/property/kernel-chaos.test.ts,
 * test/property/async-units.test.ts): a manual in-process queue on a test clock, and a fast-check
 * schedule that decides which due job runs next, which deliveries are duplicated (a copy enqueued
 * under another id, or the same job handled at once by a second worker), when a sweep runs and
 * when time moves on; and which deliveries are handled by a worker that dies at its N-th commit,
 * either right after the commit lands (before its outbox is performed) or while it is being sent
 * (it never lands). A dead worker's job is delivered again (as BullMQ does with a stalled job) or
 * fails for good (then only a sweep recovers the actor). Once the schedule is used up, due jobs
 * run in order, time moves to each delayed job, and when nothing is pending the clock passes every
 * dead worker's lease and a sweep runs, until sweeps find nothing.
 *
 * Each test keeps its own world (store, reactors, engines) and its checks.
 */
import fc from 'fast-check';
import { JobRejectedError } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import type { Engine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import type { JobHandler } from '../../src/queue/queue.js';
import type { InProcessQueue, TestClock } from '../../src/testing/index.js';
import { dyingStore } from './dying-store.js';
import type { CommitCrash, CommitDeath } from './dying-store.js';

/** Lease TTL of the workers that die: the clock moving past it (`outlive`) lets their leases run out. */
export const DOOMED_LEASE_TTL_MS = 5_000;
/** A job whose handler threw (a dead worker's, or one refused as busy) comes back after this (the queue's `redeliveryDelayMs`). */
export const REDELIVERY_MS = 1_000;

// ---------------------------------------------------------------------------
// Schedules
// ---------------------------------------------------------------------------

export interface CrashPlan extends CommitCrash {
  /**
   * What becomes of the job the dead worker held: `redelivered` (as BullMQ delivers a stalled job
   * again), or `failed` for good (its stalled deliveries exhausted): then only a sweep recovers the
   * actor; any job may fail for good (timer and sweep jobs included).
   */
  readonly job: 'redelivered' | 'failed';
}

/** One scheduler step. */
export type Choice =
  | {
      readonly kind: 'run';
      /** Which due job (mod their number). */
      readonly pick: number;
      /** `later`: a copy of the job is enqueued under another id; `concurrent`: a second worker handles the same job at once. */
      readonly dup: 'none' | 'later' | 'concurrent';
      readonly crash: CrashPlan | undefined;
    }
  | { readonly kind: 'sweep' }
  /** Time passes beyond a dead worker's lease. */
  | { readonly kind: 'outlive' }
  /** Time passes to the next delayed job. */
  | { readonly kind: 'tick' };

export interface ScheduleArbOptions {
  /** The latest commit a worker may die at (most deliveries after the first make a few commits; the first may make dozens). */
  readonly maxCommit: number;
  /** What becomes of a dead worker's job. */
  readonly job: fc.Arbitrary<CrashPlan['job']>;
  /** The weight of a delivery without a crash, against 1 for a delivery with one. */
  readonly noCrashWeight: number;
}

/** Schedules of up to 40 steps: mostly deliveries, some sweeps, some time passing. */
export function chaosScheduleArb(options: ScheduleArbOptions): fc.Arbitrary<Choice[]> {
  const crashArb: fc.Arbitrary<CrashPlan> = fc.record({
    commit: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 1, max: 4 }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: 12 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: options.maxCommit }) },
    ),
    mode: fc.constantFrom<'after' | 'before'>('after', 'before'),
    job: options.job,
  });
  const choiceArb: fc.Arbitrary<Choice> = fc.oneof(
    {
      weight: 10,
      arbitrary: fc.record({
        kind: fc.constant('run' as const),
        pick: fc.nat({ max: 7 }),
        dup: fc.oneof({ weight: 6, arbitrary: fc.constant('none' as const) }, { weight: 1, arbitrary: fc.constant('later' as const) }, { weight: 1, arbitrary: fc.constant('concurrent' as const) }),
        crash: fc.oneof({ weight: options.noCrashWeight, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: crashArb }),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'sweep' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'outlive' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
  );
  return fc.array(choiceArb, { maxLength: 40 });
}

// ---------------------------------------------------------------------------
// Driving a world by a schedule
// ---------------------------------------------------------------------------

/** The engine of a worker that is to die, and what to stop the moment it dies (its timers, say). */
export interface DoomedEngine {
  readonly engine: Engine;
  readonly stop?: () => void;
}

/** What the driver drives: one queue on one clock, with its store and its runtime (for sweeps). */
export interface ChaosWorld {
  readonly time: TestClock;
  /** The store the workers share; a dying worker sees it through a `dyingStore`. */
  readonly store: Store;
  /** A manual queue with no consumer yet: the driver is its one consumer. */
  readonly queue: InProcessQueue;
  readonly runtime: Runtime;
  /** Each death, in order. */
  readonly deaths: CommitDeath[];
  /** Deliveries and what happened, for a failure report. */
  readonly journal: string[];
}

export interface DriveOptions {
  /** The first handles every delivery the schedule does not crash; the second the same job at once in a `concurrent` duplicate. */
  readonly workers: readonly [JobHandler, JobHandler];
  /** Builds, for each delivery the schedule crashes, the engine of the worker that dies, on `store` (the store as that process sees it; leaseTtlMs {@link DOOMED_LEASE_TTL_MS}). */
  readonly doomedEngine: (store: Store) => DoomedEngine;
  /** The world described, for the error of a run that does not go quiet. */
  readonly describe: () => Promise<string>;
  /** Scheduler steps before a run that has not settled and gone quiet is declared stuck. */
  readonly maxSteps: number;
  /** Deaths per run at most (a crash the schedule plans after that is not carried out). */
  readonly maxCrashes: number;
  /** How far the clock moves before each final sweep, once nothing is pending: past every dead worker's lease, and whatever else must run out. */
  readonly settleMs: number;
  /**
   * When the run is quiet: after two final sweeps that found nothing (nothing requeued, nothing
   * pending), `in-a-row` (one that found something starts the count again) or `since-delivery`
   * (only a delivery starts it again).
   */
  readonly quiet: 'in-a-row' | 'since-delivery';
}

/** A worker that dies at its `plan.commit`-th commit handles `job`; the queue sees the job fail (stalled) if it did. */
function dyingWorker(world: ChaosWorld, doomedEngine: DriveOptions['doomedEngine'], plan: CrashPlan): JobHandler {
  const { store, deaths, journal } = world;
  return async (job) => {
    let death: ((d: CommitDeath) => void) | undefined;
    const died = new Promise<CommitDeath>((resolve) => (death = resolve));
    const doomed: DoomedEngine = doomedEngine(
      dyingStore(store, plan, job.id, (d) => {
        doomed.stop?.();
        death!(d);
      }),
    );
    const handled = createJobHandler(doomed.engine)(job, new AbortController().signal).then(
      () => ({ done: true as const }),
      (error: unknown) => ({ error }),
    );
    const out = await Promise.race([handled, died.then((d) => ({ death: d }))]);
    if ('death' in out) {
      deaths.push(out.death);
      journal.push(`  died at commit ${plan.commit} (${plan.mode}, job ${plan.job}, ${out.death.landed ? 'landed' : 'not landed'}) of ${out.death.id}: ${out.death.commit.status} ${JSON.stringify(out.death.commit.writes.trace.map((t) => `${t.type}:${t.step ?? ''}`))}`);
      if (plan.job === 'failed') throw new JobRejectedError(`worker died handling ${job.id}; the job failed for good`);
      throw new Error(`worker died handling ${job.id}`);
    }
    if ('error' in out) throw out.error;
  };
}

/** Delivers the world's jobs as `schedule` says, then until the run is quiet (see {@link DriveOptions.quiet}). */
export async function driveSchedule(world: ChaosWorld, schedule: readonly Choice[], options: DriveOptions): Promise<void> {
  const { time, queue, runtime, deaths, journal } = world;
  const [workerA, workerB] = options.workers;

  // The queue's one consumer hands each delivery to the worker the schedule chose for it.
  let handler: JobHandler = workerA;
  queue.consume((job, signal) => handler(job, signal));

  const due = () => queue.inspect().filter((p) => p.dueAt <= time.now());
  const nextDelayed = () => {
    const later = queue.inspect().filter((p) => p.dueAt > time.now());
    return later.length === 0 ? undefined : Math.min(...later.map((p) => p.dueAt));
  };
  const tick = () => {
    const at = nextDelayed();
    if (at !== undefined) time.advance(at - time.now());
  };
  let dups = 0;
  let quiet = 0;
  for (let step = 0; ; step++) {
    if (step >= options.maxSteps) throw new Error(`the run did not settle and go quiet in ${options.maxSteps} scheduler steps:\n${await options.describe()}`);
    const choice: Choice | undefined = schedule[step];
    if (choice?.kind === 'sweep') {
      journal.push(`sweep at ${time.now()}: ${await runtime.sweepOnce()}`);
      continue;
    }
    if (choice?.kind === 'outlive') {
      time.advance(DOOMED_LEASE_TTL_MS + 1);
      continue;
    }
    if (choice?.kind === 'tick') {
      tick();
      continue;
    }
    const ready = due();
    if (ready.length > 0) {
      const run = choice?.kind === 'run' ? choice : { pick: 0, dup: 'none' as const, crash: undefined };
      const job = ready[run.pick % ready.length]!.job;
      queue.reorder([job.id]);
      const crash = run.crash !== undefined && deaths.length < options.maxCrashes ? run.crash : undefined;
      journal.push(`${time.now()}: ${job.id}${crash === undefined ? '' : ` (dies at commit ${crash.commit}, ${crash.mode}, job ${crash.job})`}${run.dup === 'none' ? '' : ` dup ${run.dup}`}`);
      if (run.dup === 'later') {
        const { delayMs: _delay, ...copy } = job;
        await queue.enqueue([{ ...copy, id: `${job.id}.dup${(dups += 1)}` }]);
      }
      handler = crash === undefined ? workerA : dyingWorker(world, options.doomedEngine, crash);
      if (run.dup === 'concurrent' && crash === undefined) {
        await Promise.all([queue.runNext(), workerB(job, new AbortController().signal).catch(() => undefined)]);
      } else {
        await queue.runNext();
      }
      handler = workerA;
      quiet = 0;
      continue;
    }
    if (nextDelayed() !== undefined) {
      tick();
      continue;
    }
    // Nothing pending: let every dead worker's lease run out (and whatever else `settleMs` covers) and sweep.
    time.advance(options.settleMs);
    const requeued = await runtime.sweepOnce();
    journal.push(`final sweep at ${time.now()}: ${requeued}`);
    if (requeued === 0 && queue.inspect().length === 0) {
      quiet += 1;
      if (quiet >= 2) return;
    } else if (options.quiet === 'in-a-row') quiet = 0;
  }
}

/** The queue's pending and failed jobs and the journal, the end of a failure report. */
export function scheduleReport(world: ChaosWorld): string[] {
  return [
    `pending: ${JSON.stringify(world.queue.inspect().map((p) => [p.job.id, p.dueAt]))} at ${world.time.now()}`,
    `failed jobs: ${JSON.stringify(world.queue.failed().map((f) => [f.job.id, String(f.error)]))}`,
    ...world.journal,
  ];
}

// ---------------------------------------------------------------------------
// Checking what a crash may repeat
// ---------------------------------------------------------------------------

/**
 * Whether `actual` is `expected` with, for each of `repeats`, at most one extra copy of it right
 * after itself (a handler whose outcome commit a crash cut off may run once more).
 */
export function equalsWithRepeats(actual: readonly string[], expected: readonly string[], repeats: readonly string[]): boolean {
  if (actual.length === expected.length && actual.every((e, i) => e === expected[i])) return true;
  if (repeats.length === 0 || actual.length <= expected.length) return false;
  const [first, ...rest] = repeats;
  if (equalsWithRepeats(actual, expected, rest)) return true;
  for (let i = 0; i + 1 < actual.length; i++) {
    if (actual[i] === first && actual[i + 1] === first && equalsWithRepeats([...actual.slice(0, i + 1), ...actual.slice(i + 2)], expected, rest)) return true;
  }
  return false;
}
