/**
 * The world of the map property (test/property/map.test.ts), after the kernel's chaos harness
 * (test/property/kernel-chaos.test.ts): one memory store on a test clock, seen through a
 * recording wrapper; a manual in-process queue, seen through a probe of its enqueue calls; and
 * workers that die at their N-th commit, either right after it lands (before its outbox is
 * performed) or while it is sent (it never lands). A dead worker's job is delivered again (as
 * BullMQ delivers a stalled job) or fails for good (its stalled deliveries exhausted): then only a
 * sweep recovers the actor, and a map's lost element or rollback jobs only its stall redispatch.
 */
import pino from 'pino';
import { createMemoryStore, createRuntime, JobRejectedError } from '../../src/index.js';
import type { AnyReactorDefinition, Runtime, Store } from '../../src/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import type { EnqueueOptions, JobHandler, JobSpec } from '../../src/queue/queue.js';
import type { Commit, InboxEntry, SpawnActor } from '../../src/store/store.js';
import { createInProcessQueue, createTestClock, jobPurpose } from '../../src/testing/index.js';
import type { InProcessQueue, JobPurpose, TestClock } from '../../src/testing/index.js';
import { dyingStore } from './dying-store.js';
import type { CommitCrash, CommitDeath } from './dying-store.js';
import { recordingStore } from './recording-store.js';
import type { CommitLedger } from './recording-store.js';

export const silent = pino({ level: 'silent' });

/** Lease TTL of the workers that die: the clock moving past it lets their leases run out. */
export const DOOMED_LEASE_TTL_MS = 5_000;
/** A job whose handler threw (a dead worker's, or one refused as busy) comes back after this. */
const REDELIVERY_MS = 1_000;
/** A fan-out map waiting this long with nothing reported has its lost start jobs redispatched by a sweep. */
export const MAP_STALL_MS = 20_000;
/** Deaths per run at most. */
const MAX_CRASHES = 3;
/** Copies of jobs per run at most (a copy is never copied again). */
const MAX_COPIES = 24;
/**
 * Times one job is handled by two workers at once, at most. A real queue does that only when a
 * job's lock is lost, and the copy that finds the actor's lease held is refused as busy and
 * retried: the schedule must deliver it alone eventually (fairness), or a cycle of choices that
 * lands on `concurrent` at every redelivery keeps the two copies in lockstep forever.
 */
const MAX_CONCURRENT_PER_JOB = 2;

// ---------------------------------------------------------------------------
// What the store saw and what the queue was asked
// ---------------------------------------------------------------------------

/** One landed commit that spawned actors. */
export interface SpawnRecord {
  readonly actor: string;
  readonly revision: number;
  readonly spawned: readonly string[];
}

/** One `enqueue` call, with the revision the map had then (the map commit whose outbox it performs). */
export interface EnqueueRecord {
  readonly mapRevision: number | undefined;
  readonly jobs: readonly { readonly id: string; readonly purpose: JobPurpose }[];
}

/** Every landed commit's revision, spawns and consumed inbox entries, by actor. */
export class CommitBook implements CommitLedger {
  readonly revisions = new Map<string, number>();
  readonly spawns: SpawnRecord[] = [];
  /** Inbox entries consumed by landed commits, by actor. */
  readonly consumed = new Map<string, InboxEntry[]>();
  readonly enqueues: EnqueueRecord[] = [];

  created(actor: SpawnActor | { readonly id: string; readonly commit: Commit }): void {
    this.#landed(actor.id, 1, actor.commit, []);
  }

  landed(id: string, revision: number, commit: Commit, consumed: readonly InboxEntry[]): void {
    this.#landed(id, revision, commit, consumed);
  }

  #landed(id: string, revision: number, commit: Commit, consumed: readonly InboxEntry[]): void {
    this.revisions.set(id, revision);
    if (consumed.length > 0) this.consumed.set(id, [...(this.consumed.get(id) ?? []), ...consumed]);
    const spawn = commit.spawn ?? [];
    if (spawn.length > 0) this.spawns.push({ actor: id, revision, spawned: spawn.map((s) => s.id) });
    for (const child of spawn) this.created(child);
  }
}

/** The queue, recording each enqueue call with the map's revision at that moment. */
function probedQueue(inner: InProcessQueue, book: CommitBook, mapId: string): InProcessQueue {
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'enqueue') {
        return (jobs: readonly JobSpec[], options?: EnqueueOptions) => {
          book.enqueues.push({ mapRevision: book.revisions.get(mapId), jobs: jobs.map((job) => ({ id: job.id, purpose: jobPurpose(job) })) });
          return target.enqueue(jobs, options);
        };
      }
      const value = Reflect.get(target, key, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

// ---------------------------------------------------------------------------
// Workers that die
// ---------------------------------------------------------------------------

export interface CrashPlan extends CommitCrash {
  /** The crash waits for this many deliveries of the run (so that crashes reach its later phases too). */
  readonly notBefore: number;
  /** What becomes of the job the dead worker held: delivered again, or failed for good (then only a sweep recovers its actor). */
  readonly job: 'redelivered' | 'failed';
}

export interface Death extends CommitDeath {
  /** Whether that job failed for good. */
  readonly failed: boolean;
}


// ---------------------------------------------------------------------------
// Schedules
// ---------------------------------------------------------------------------

/** One scheduler step: something that happens first, then the due job `pick` (mod their number) runs. */
export interface Choice {
  readonly before: 'none' | 'sweep' | 'outlive' | 'tick';
  readonly pick: number;
  /**
   * `later`: a copy of the job is enqueued under another id; `concurrent`: a second worker handles
   * the same job at once; `parallel`: a second worker handles another due job at once (which stays
   * pending, so it is delivered again later).
   */
  readonly dup: 'none' | 'later' | 'concurrent' | 'parallel';
  readonly crash: CrashPlan | undefined;
}

// ---------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------

/** How a run's jobs are delivered: by the runtime's own worker in rounds, or by a schedule. */
export type Delivery = { readonly kind: 'rounds' } | { readonly kind: 'schedule'; readonly choices: readonly Choice[] };

export interface MapWorld {
  readonly id: string;
  readonly mapId: string;
  readonly time: TestClock;
  readonly store: Store;
  readonly queue: InProcessQueue;
  readonly book: CommitBook;
  readonly runtime: Runtime;
  readonly deaths: Death[];
  /** Deliveries and what happened, for a failure report. */
  readonly journal: string[];
  /** Drain every job as the delivery says (rounds, or the schedule from where it was left). */
  drain(): Promise<void>;
  close(): Promise<void>;
}

let worlds = 0;

export function createMapWorld(root: AnyReactorDefinition, delivery: Delivery, maxSteps: number): MapWorld {
  const time = createTestClock();
  const book = new CommitBook();
  const store = recordingStore(createMemoryStore({ clock: time }), book);
  worlds += 1;
  const id = `map-prop-${worlds}`;
  const mapId = `${id}.m`;
  const queue = probedQueue(createInProcessQueue({ mode: 'manual', clock: time, redeliveryDelayMs: () => REDELIVERY_MS, maxAttempts: 10_000 }), book, mapId);
  const reactors = [root];
  const deaths: Death[] = [];
  const journal: string[] = [];
  if (delivery.kind === 'rounds') {
    const runtime = createRuntime({ store, queue, clock: time, logger: silent, worker: true, reactors, mapStallMs: MAP_STALL_MS });
    const drain = async () => void (await queue.drainRounds({ delayed: 'as-due' }));
    return { id, mapId, time, store, queue, book, runtime, deaths, journal, drain, close: () => closeAll(runtime, queue) };
  }

  const runtime = createRuntime({ store, queue, clock: time, logger: silent, worker: false, reactors, mapStallMs: MAP_STALL_MS });
  const liveWorker = (): JobHandler => createJobHandler(createEngine({ store, queue, clock: time, logger: silent, reactors, mapStallMs: MAP_STALL_MS }));
  const workerA = liveWorker();
  const workerB = liveWorker();
  let handler: JobHandler = workerA;
  queue.consume((job, signal) => handler(job, signal));

  /** A worker that dies at its `plan.commit`-th commit handles `job`; the queue sees the job fail (stalled) if it did, and delivers it again. */
  const dyingWorker =
    (plan: CrashPlan): JobHandler =>
    async (job) => {
      let death: ((d: Death) => void) | undefined;
      const died = new Promise<Death>((resolve) => (death = resolve));
      const failed = plan.job === 'failed';
      const doomed = dyingStore(store, plan, job.id, (d) => death!({ ...d, failed }));
      const engine = createEngine({ store: doomed, queue, clock: createTestClock(time.now()), logger: silent, reactors, leaseTtlMs: DOOMED_LEASE_TTL_MS, mapStallMs: MAP_STALL_MS });
      const handled = createJobHandler(engine)(job, new AbortController().signal).then(
        () => ({ done: true as const }),
        (error: unknown) => ({ error }),
      );
      const out = await Promise.race([handled, died.then((d) => ({ death: d }))]);
      if ('death' in out) {
        deaths.push(out.death);
        journal.push(`  died at commit ${plan.commit} (${plan.mode}, job ${plan.job}, ${out.death.landed ? 'landed' : 'not landed'}) of ${out.death.id}: ${out.death.commit.status} ${JSON.stringify(out.death.commit.writes.trace.map((t) => `${t.type}:${t.step ?? ''}`))}`);
        if (failed) throw new JobRejectedError(`worker died handling ${job.id}; the job failed for good`);
        throw new Error(`worker died handling ${job.id}`);
      }
      if ('error' in out) throw out.error;
    };

  const due = () => queue.inspect().filter((p) => p.dueAt <= time.now());
  const nextDelayed = () => {
    const later = queue.inspect().filter((p) => p.dueAt > time.now());
    return later.length === 0 ? undefined : Math.min(...later.map((p) => p.dueAt));
  };
  const tick = () => {
    const at = nextDelayed();
    if (at !== undefined) time.advance(at - time.now());
  };
  const sweep = async (why: string) => journal.push(`${why} at ${time.now()}: ${await runtime.sweepOnce()} swept`);
  const { choices } = delivery;
  let step = 0;
  let copies = 0;
  let deliveries = 0;
  const concurrent = new Map<string, number>();

  const drain = async () => {
    let quiet = 0;
    for (;;) {
      if (step >= maxSteps) throw new Error(`the run did not settle and go quiet in ${maxSteps} scheduler steps`);
      const choice: Choice | undefined = choices.length === 0 ? undefined : choices[step % choices.length];
      step += 1;
      if (choice?.before === 'sweep') await sweep('sweep');
      else if (choice?.before === 'outlive') time.advance(DOOMED_LEASE_TTL_MS + 1);
      else if (choice?.before === 'tick') tick();
      const ready = due();
      if (ready.length > 0) {
        const run = choice ?? { pick: 0, dup: 'none' as const, crash: undefined };
        const job = ready[run.pick % ready.length]!.job;
        queue.reorder([job.id]);
        const crash = run.crash !== undefined && deaths.length < MAX_CRASHES && deliveries >= run.crash.notBefore ? run.crash : undefined;
        deliveries += 1;
        const spent = (run.dup === 'later' && (copies >= MAX_COPIES || job.id.includes('.dup'))) || (run.dup === 'concurrent' && (concurrent.get(job.id) ?? 0) >= MAX_CONCURRENT_PER_JOB);
        const dup = spent ? 'none' : run.dup;
        if (dup === 'later') copies += 1;
        if (dup === 'concurrent') concurrent.set(job.id, (concurrent.get(job.id) ?? 0) + 1);
        journal.push(`${time.now()}: ${job.id}${crash === undefined ? '' : ` (dies at commit ${crash.commit}, ${crash.mode}, job ${crash.job})`}${dup === 'none' ? '' : ` dup ${dup}`}`);
        if (dup === 'later') {
          const { delayMs: _delay, ...copy } = job;
          await queue.enqueue([{ ...copy, id: `${job.id}.dup${copies}` }]);
        }
        handler = crash === undefined ? workerA : dyingWorker(crash);
        const other = dup === 'parallel' ? ready.filter((p) => p.job.id !== job.id)[run.pick % Math.max(1, ready.length - 1)]?.job : undefined;
        if (other !== undefined) journal.push(`  and at once ${other.id}`);
        if (dup === 'concurrent' && crash === undefined) {
          await Promise.all([queue.runNext(), workerB(job, new AbortController().signal).catch(() => undefined)]);
        } else if (other !== undefined && crash === undefined) {
          await Promise.all([queue.runNext(), workerB(other, new AbortController().signal).catch(() => undefined)]);
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
      // Nothing pending: let every dead worker's lease run out, and a map that lost start jobs stall, and sweep. Quiet once a sweep finds nothing twice.
      time.advance(Math.max(DOOMED_LEASE_TTL_MS, MAP_STALL_MS) + 1);
      await sweep('final sweep');
      if (queue.inspect().length === 0) {
        quiet += 1;
        if (quiet >= 2) return;
      }
    }
  };
  return { id, mapId, time, store, queue, book, runtime, deaths, journal, drain, close: () => closeAll(runtime, queue) };
}

async function closeAll(runtime: Runtime, queue: InProcessQueue): Promise<void> {
  await runtime.close();
  await queue.close();
}
