import type { Clock } from '../runtime/clock.js';

/** A virtual clock: `sleep` returns at once and moves virtual time forward. */
export interface TestClock extends Clock {
  /** Every delay slept, in order. */
  readonly sleeps: readonly number[];
  /** Move virtual time forward. */
  advance(ms: number): void;
}

/**
 * A clock for tests: retries and backoffs complete without real waiting, and
 * the delays asked for are recorded so tests can assert them.
 * @example
 * const clock = createTestClock();
 * const runtime = createRuntime({ clock });
 * await runtime.run(reactor, input);
 * expect(clock.sleeps).toEqual([1000, 2000]);
 */
export function createTestClock(start = 0): TestClock {
  let now = start;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    advance(ms) {
      now += ms;
    },
    async sleep(ms, signal) {
      if (signal?.aborted) throw signal.reason;
      sleeps.push(ms);
      now += ms;
    },
  };
}
