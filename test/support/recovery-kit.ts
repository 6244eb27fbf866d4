/**
 * Shared set-up of the unit tests that kill processes at awkward moments: a memory store and a
 * manual in-process queue on one test clock, jobs that deliver interrupt events, and workers that
 * die (their clock never moves, so their lease is never renewed) or live (on the test clock).
 */
import pino from 'pino';
import { createMemoryStore } from '../../src/index.js';
import type { AnyReactorDefinition, JobSpec, Store } from '../../src/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue, TestClock } from '../../src/testing/index.js';

export const silent = pino({ level: 'silent' });

/** Lease TTL of a worker that is made to die: {@link outliveLease} lets it run out. */
export const DOOMED_LEASE_TTL_MS = 5_000;

export interface ManualWorld {
  readonly time: TestClock;
  readonly store: Store;
  readonly queue: InProcessQueue;
}

/** A memory store and a manual in-process queue on one test clock. */
export function manualWorld(): ManualWorld {
  const time = createTestClock();
  return { time, store: createMemoryStore({ clock: time }), queue: createInProcessQueue({ mode: 'manual', clock: time }) };
}

/**
 * A job delivering an interrupt resume or failure to the interrupt at `path` under root
 * `executionId`, as a continue left to a worker or an active timeout sends it: addressed to the
 * execution that owns the interrupt, delivered through its inbox under the interrupt's key.
 */
export function interruptJob(
  id: string,
  executionId: string,
  reactor: AnyReactorDefinition,
  path: readonly string[],
  outcome: { readonly payload: unknown } | { readonly error: unknown },
): JobSpec {
  const step = path[path.length - 1]!;
  const event = 'payload' in outcome ? { type: 'xreactor.interrupt.resume', at: 0, step, payload: outcome.payload } : { type: 'xreactor.interrupt.fail', at: 0, step, error: outcome.error };
  return { id, kind: 'advance', executionId: [executionId, ...path.slice(0, -1)].join('.'), reactor: reactor.name, event, dedupeKey: `interrupt.${step}` };
}

/** Handle `job` in a worker that dies in whatever step it hangs in (not awaited). `store` defaults to the world's. */
export function startDoomedWorker(world: ManualWorld, reactors: readonly AnyReactorDefinition[], job: JobSpec, store: Store = world.store): void {
  const engine = createEngine({ store, queue: world.queue, clock: createTestClock(), logger: silent, reactors: [...reactors], leaseTtlMs: DOOMED_LEASE_TTL_MS });
  void createJobHandler(engine)(job, new AbortController().signal).catch(() => undefined);
}

/** The doomed workers' leases run out. */
export function outliveLease(world: ManualWorld): void {
  world.time.advance(DOOMED_LEASE_TTL_MS + 1);
}

/** Handle `job` in a live worker on the world's clock (the queue delivering it again). */
export function handleInWorker(world: ManualWorld, reactors: readonly AnyReactorDefinition[], job: JobSpec, store: Store = world.store): Promise<void> {
  const engine = createEngine({ store, queue: world.queue, clock: world.time, logger: silent, reactors: [...reactors] });
  return createJobHandler(engine)(job, new AbortController().signal);
}
