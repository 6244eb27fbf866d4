/**
 * Shared set-up of the fan-out map unit tests: a memory store and a manual in-process queue on
 * one test clock, consumed by the runtime's embedded worker, with probes on both. The queue probe
 * records every `enqueue` call (and the handler run it came from); the store probe records the
 * map's commits, so a test can say what one map commit enqueued.
 */
import pino from 'pino';
import { expect } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { AnyReactorDefinition, JobHandler, JobSpec, Queue, RollbackFailureReport, Runtime, RuntimeOptions, Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock, jobPurpose } from '../../src/testing/index.js';
import type { InProcessQueue, JobPurpose, TestClock } from '../../src/testing/index.js';
import { interceptStore } from './recovery-kit.js';
import type { StoreIntercepts } from './recovery-kit.js';

export const silent = pino({ level: 'silent' });

/** One `enqueue` call: the jobs it carried and the job whose handler made it (undefined: a caller). */
export interface EnqueueCall {
  readonly during: string | undefined;
  readonly jobs: readonly JobSpec[];
}

/** A queue seen through a probe: every `enqueue` call recorded, every handler run observed. */
export interface ProbedQueue {
  readonly queue: InProcessQueue;
  readonly calls: EnqueueCall[];
  /** Handler runs, by job id, in the order they ran. */
  readonly ran: string[];
  /** Called after each handler run (before the next job is taken). */
  afterJob: ((job: JobSpec) => Promise<void>) | undefined;
}

/** `inner` with its `enqueue` calls recorded and its consumer's handler runs observed. */
export function probeQueue(inner: InProcessQueue, timeline?: TimelineEntry[]): ProbedQueue {
  const calls: EnqueueCall[] = [];
  const ran: string[] = [];
  let current: string | undefined;
  const overrides: Partial<Queue> = {
    enqueue: (jobs, options) => {
      const call = { during: current, jobs: [...jobs] };
      calls.push(call);
      timeline?.push({ type: 'enqueue', ...call });
      return inner.enqueue(jobs, options);
    },
    consume: (handler: JobHandler, options) =>
      inner.consume(async (job, signal) => {
        const outer = current;
        current = job.id;
        try {
          await handler(job, signal);
        } finally {
          current = outer;
          ran.push(job.id);
        }
        await probe.afterJob?.(job);
      }, options),
  };
  const queue = new Proxy(inner, {
    get(target, key) {
      const own = (overrides as Record<string | symbol, unknown>)[key];
      if (own !== undefined) return own;
      const value = Reflect.get(target, key, target) as unknown;
      // The in-process queue keeps its state in private fields: call its methods on itself.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  const probe: ProbedQueue = { queue, calls, ran, afterJob: undefined };
  return probe;
}

/** How many jobs of `purpose` each call carried (calls without any left out). */
export function jobsPerCall(calls: readonly EnqueueCall[], purpose: JobPurpose): number[] {
  return calls.map((call) => call.jobs.filter((job) => jobPurpose(job) === purpose).length).filter((n) => n > 0);
}

/** What a fan-out test runs on. */
export interface FanOutWorld {
  readonly clock: TestClock;
  /** The memory store underneath (not intercepted). */
  readonly memory: Store;
  /** The store the runtime uses (intercepted when asked). */
  readonly store: Store;
  readonly probe: ProbedQueue;
  readonly queue: InProcessQueue;
  readonly runtime: Runtime;
  /** Commits that landed and enqueue calls, in the order they happened. */
  readonly timeline: TimelineEntry[];
}

/** A commit that landed (`id`), or an enqueue call. */
export type TimelineEntry = { readonly type: 'commit'; readonly id: string; readonly spawned: readonly string[]; readonly starts: number } | ({ readonly type: 'enqueue' } & EnqueueCall);

export interface FanOutWorldOptions {
  readonly intercepts?: StoreIntercepts;
  readonly reactors?: readonly AnyReactorDefinition[];
  /** More runtime options (`lockSnoozeMaxAttempts`, ...). */
  readonly runtime?: Pick<RuntimeOptions, 'lockSnoozeMaxAttempts' | 'lockSnoozeDelayMs' | 'mapStallMs' | 'leaseTtlMs'>;
  /** Share this world's clock, memory store and timeline. */
  readonly sharing?: FanOutWorld;
}

/** A runtime consuming a manual queue (its embedded worker), on a memory store, on a test clock. */
export function fanOutWorld(options: FanOutWorldOptions = {}): FanOutWorld {
  const clock = options.sharing?.clock ?? createTestClock();
  const memory = options.sharing?.memory ?? createMemoryStore({ clock });
  const timeline = options.sharing?.timeline ?? [];
  const store = interceptStore(memory, {
    ...options.intercepts,
    commit: (next, id, revision, commit, ...rest) => {
      const own = options.intercepts?.commit;
      const done = own === undefined ? next() : own(next, id, revision, commit, ...rest);
      return done.then((landed) => {
        timeline.push({ type: 'commit', id, spawned: (commit.spawn ?? []).map((actor) => actor.id), starts: commit.writes.map?.starts?.starts.length ?? 0 });
        return landed;
      });
    },
  });
  const probe = probeQueue(createInProcessQueue({ mode: 'manual', clock }), timeline);
  const runtime = createRuntime({ ...options.runtime, clock, store, queue: probe.queue, worker: true, logger: silent, reactors: [...(options.reactors ?? [])] });
  return { clock, memory, store, probe, queue: probe.queue, runtime, timeline };
}

/**
 * The jobs of `purpose` each commit of `actorId` enqueued: those of the enqueue calls after that
 * commit landed and before the next commit of any actor (a commit's outbox is performed right
 * after it, before anything else commits in that call; the tests handle one job at a time). Wake
 * jobs (`<actor>.wake.<at>`, which the kernel enqueues for a recipient it finds busy) are not a
 * commit's own and are not counted. Commits that enqueued none are left out.
 */
export function jobsPerCommitOf(world: FanOutWorld, actorId: string, purpose: JobPurpose): number[] {
  const counts: number[] = [];
  let open = false;
  for (const entry of world.timeline) {
    if (entry.type === 'commit') {
      open = entry.id === actorId;
      if (open) counts.push(0);
      continue;
    }
    if (open) counts[counts.length - 1]! += entry.jobs.filter((job) => jobPurpose(job) === purpose && !/\.wake\.\d+$/.test(job.id)).length;
  }
  return counts.filter((n) => n > 0);
}

/** The actors each commit of `actorId` spawned, for the commits that spawned any. */
export function spawnsPerCommitOf(world: FanOutWorld, actorId: string): (readonly string[])[] {
  return world.timeline.flatMap((entry) => (entry.type === 'commit' && entry.id === actorId && entry.spawned.length > 0 ? [entry.spawned] : []));
}

/** How many fan-out element start payloads each commit of `actorId` wrote, for the commits that wrote any (its throws). */
export function startsPerCommitOf(world: FanOutWorld, actorId: string): number[] {
  return world.timeline.flatMap((entry) => (entry.type === 'commit' && entry.id === actorId && entry.starts > 0 ? [entry.starts] : []));
}

/** The most jobs of `purpose` one handler run enqueued (a caller's calls count as one run). */
export function mostJobsPerRun(calls: readonly EnqueueCall[], purpose: JobPurpose): number {
  const perRun = new Map<string | undefined, number>();
  for (const call of calls) perRun.set(call.during, (perRun.get(call.during) ?? 0) + call.jobs.filter((job) => jobPurpose(job) === purpose).length);
  return Math.max(0, ...perRun.values());
}

export type Behaviour = 'ok' | 'fail' | 'undo-fails' | 'compensate-fails';

/**
 * An element reactor `e1 → e2` over numbers that records `run:e1[i]`, `undo:e1[i]` etc. in `log`.
 * `e1(i)` / `e2(i)` say how each step behaves for element `i`: `fail` fails its run, `undo-fails`
 * makes its undo throw.
 */
export function recordingElement(log: string[], name: string, behaviour: { e1?: (i: number) => Behaviour; e2?: (i: number) => Behaviour } = {}) {
  const step = (label: 'e1' | 'e2') => {
    const how = behaviour[label] ?? (() => 'ok');
    return {
      run: (item: unknown) => {
        const i = Number(item);
        log.push(`run:${label}[${i}]`);
        if (how(i) === 'fail') return fail(new Error(`${label}[${i}] failed`));
        return i * 10;
      },
      compensate: (_error: unknown, item: unknown) => {
        const i = Number(item);
        log.push(`compensate:${label}[${i}]`);
        if (how(i) === 'compensate-fails') throw new Error(`compensate ${label}[${i}] broke`);
      },
      undo: (_result: unknown, item: unknown) => {
        const i = Number(item);
        log.push(`undo:${label}[${i}]`);
        if (how(i) === 'undo-fails') throw new Error(`undo ${label}[${i}] broke`);
      },
    };
  };
  return defineReactor({ name })
    .step('e1', step('e1'))
    .step('e2', { waitFor: ['e1'], ...step('e2') })
    .returns('e2')
    .build();
}

/** No inbox entry left on any of these actors. */
export async function expectNoInboxLeft(store: Store, ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    const loaded = await store.load(id);
    expect(loaded?.inbox.entries ?? [], id).toEqual([]);
  }
}

/** A rollback failure as comparable data: the error by name, code and message. */
export function failureKey(f: RollbackFailureReport): string {
  const code = (f.error as { code?: string }).code;
  return JSON.stringify({ step: f.step, path: f.path, kind: f.kind, reason: f.reason, map: f.map ?? null, error: { name: f.error.name, code: code ?? null, message: f.message } });
}

/** Rollback failures as a sorted list of keys (a set). */
export function failureSet(failures: readonly RollbackFailureReport[]): string[] {
  return failures.map(failureKey).sort();
}
