import type { Clock } from '../internal/clock.js';

/** A virtual clock: `sleep` returns at once and moves virtual time forward; `every` fires as virtual time passes. */
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
  const intervals = new Set<{ ms: number; next: number; fn: () => void }>();
  const advanceTo = (target: number) => {
    for (;;) {
      let due: { ms: number; next: number; fn: () => void } | undefined;
      for (const i of intervals) if (i.next <= target && (due === undefined || i.next < due.next)) due = i;
      if (due === undefined) break;
      now = due.next;
      due.next += due.ms;
      due.fn();
    }
    now = target;
  };
  return {
    sleeps,
    now: () => now,
    advance(ms) {
      advanceTo(now + ms);
    },
    every(ms, fn) {
      const interval = { ms, next: now + ms, fn };
      intervals.add(interval);
      return () => void intervals.delete(interval);
    },
    async sleep(ms, signal) {
      if (signal?.aborted) throw signal.reason;
      sleeps.push(ms);
      advanceTo(now + ms);
    },
  };
}
