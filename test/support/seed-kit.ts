import pino from 'pino';
import { createRuntime } from '../../src/index.js';
import type { Middleware, Runtime } from '../../src/index.js';
import { createInProcessQueue, createTestClock, recordEvents } from '../../src/testing/index.js';
import type { InProcessQueue, TestClock } from '../../src/testing/index.js';

/** A runtime for seed scenarios: virtual clock, recorded middleware events, silent logs. */
export interface SeedHarness {
  readonly runtime: Runtime;
  readonly clock: TestClock;
  /** Events pushed by step handlers themselves (`run:a`, `compensate:b`, `undo:a`). */
  readonly events: string[];
  /** Events seen by the middleware recorder (`run:a`, `retry:b#1`, ...). */
  readonly hooks: string[];
  /** Handlers that record `<kind>:<step>` then return `value`. */
  readonly record: (kind: 'run' | 'compensate' | 'undo', step: string) => void;
  /** The runtime's queue: manual (drained with `drainRounds`, as the seeds' harness does) when asked for. */
  readonly queue: InProcessQueue | undefined;
}

/** Options of {@link seedHarness}. */
export interface SeedHarnessOptions {
  readonly middleware?: readonly Middleware[];
  /**
   * `manual`: jobs wait until the test drains them (`h.queue.drainRounds()`), consumed by the
   * runtime's embedded worker. `inline`: each enqueue runs its jobs before it resolves (the
   * seeds' "Sidekiq inline!" mode).
   */
  readonly queue?: 'manual' | 'inline';
}

export function seedHarness(options: readonly Middleware[] | SeedHarnessOptions = []): SeedHarness {
  const { middleware = [], queue: mode } = Array.isArray(options) ? { middleware: options as readonly Middleware[] } : (options as SeedHarnessOptions);
  const clock = createTestClock();
  const recorder = recordEvents();
  const events: string[] = [];
  const queue = mode === undefined ? undefined : createInProcessQueue({ mode, clock });
  const runtime = createRuntime({ clock, middleware: [recorder.middleware, ...middleware], logger: pino({ level: 'silent' }), ...(queue === undefined ? {} : { queue, worker: true }) });
  return { runtime, clock, events, hooks: recorder.events, record: (kind, step) => void events.push(`${kind}:${step}`), queue };
}
