import pino from 'pino';
import { createRuntime } from '../../src/index.js';
import type { Middleware, Runtime } from '../../src/index.js';
import { createTestClock, recordEvents } from '../../src/testing/index.js';
import type { TestClock } from '../../src/testing/index.js';

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
}

export function seedHarness(middleware: readonly Middleware[] = []): SeedHarness {
  const clock = createTestClock();
  const recorder = recordEvents();
  const events: string[] = [];
  const runtime = createRuntime({ clock, middleware: [recorder.middleware, ...middleware], logger: pino({ level: 'silent' }) });
  return { runtime, clock, events, hooks: recorder.events, record: (kind, step) => void events.push(`${kind}:${step}`) };
}
