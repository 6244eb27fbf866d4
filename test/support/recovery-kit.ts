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
  return { id, kind: 'advance', actor: { kind: 'execution', id: [executionId, ...path.slice(0, -1)].join('.') }, event, dedupeKey: `interrupt.${step}` };
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

/** A promise and the function that resolves it: the gates a test holds store calls on. */
export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

type StoreMethod = { [K in keyof Store]-?: Store[K] extends (...args: never[]) => unknown ? K : never }[keyof Store];

/**
 * How a test wraps store methods: each gets `next` (the wrapped store's method, called with the
 * same arguments) and the arguments, and decides when to call it and what to do with its outcome.
 */
export type StoreIntercepts = {
  readonly [K in StoreMethod]?: (next: () => ReturnType<Store[K]>, ...args: Parameters<Store[K]>) => ReturnType<Store[K]>;
};

/** `inner` seen through `intercepts`: what one process (a caller, an operator, a worker) sees of a shared store. */
export function interceptStore(inner: Store, intercepts: StoreIntercepts): Store {
  return new Proxy(inner, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      const intercept = (intercepts as Record<string | symbol, ((next: () => unknown, ...args: unknown[]) => unknown) | undefined>)[key];
      if (intercept === undefined || typeof value !== 'function') return value;
      return (...args: unknown[]) => intercept(() => (value as (...a: unknown[]) => unknown).apply(target, args), ...args);
    },
  });
}
