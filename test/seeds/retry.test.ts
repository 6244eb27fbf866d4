import { describe, expect, it } from 'vitest';
import { defineReactor, fail } from '../../src/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001, section 3.6 (S-retry-*) and section 5: inline retries wait through the
// injected clock; the failing step is compensated once, after the last attempt.

function abRetry(h: ReturnType<typeof seedHarness>, b: { maxAttempts: number; failures: number; veto?: boolean; raise?: boolean }, withC = false) {
  let attempts = 0;
  const builder = defineReactor({ name: 'retry' })
    .step('a', { run: () => (h.record('run', 'a'), 'A'), undo: () => h.record('undo', 'a') })
    .step('b', {
      retries: { maxAttempts: b.maxAttempts, backoff: 'exponential', baseDelayMs: 100 },
      args: ({ result }) => ({ a: result('a') }),
      run: () => {
        h.record('run', 'b');
        attempts += 1;
        if (attempts > b.failures) return 'B';
        if (b.raise) throw new Error(`b raised #${attempts}`);
        return fail(new Error(`b failed #${attempts}`), b.veto ? { retry: false } : {});
      },
      compensate: () => h.record('compensate', 'b'),
      undo: () => h.record('undo', 'b'),
    });
  if (!withC) return builder.build();
  return builder.step('c', { args: ({ result }) => ({ b: result('b') }), run: () => (h.record('run', 'c'), 'C'), undo: () => h.record('undo', 'c') }).build();
}

describe('seed retries', () => {
  it('S-retry-01: b always fails with 3 attempts: retried twice, compensated once, a undone', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abRetry(h, { maxAttempts: 3, failures: Infinity }), {});
    expect(h.hooks).toEqual(['run:a', 'run:b', 'retry:b#1', 'run:b', 'retry:b#2', 'run:b', 'compensate:b', 'undo:a']);
    expect(h.events).toEqual(['run:a', 'run:b', 'run:b', 'run:b', 'compensate:b', 'undo:a']);
    expect(h.clock.sleeps).toEqual([100, 200]);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed #3' });
  });

  it('S-retry-02: fail(e, { retry: false }) vetoes retries', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abRetry(h, { maxAttempts: 3, failures: Infinity, veto: true }), {});
    expect(h.hooks).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(h.clock.sleeps).toEqual([]);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
  });

  it('S-retry-03: b fails once with 2 attempts: retried, then c runs, success with no compensation', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abRetry(h, { maxAttempts: 2, failures: 1 }, true), {});
    expect(h.hooks).toEqual(['run:a', 'run:b', 'retry:b#1', 'run:b', 'run:c']);
    expect(h.clock.sleeps).toEqual([100]);
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    const view = await h.runtime.find(result.executionId);
    expect(view.trace.filter((t) => t.type === 'retry').map((t) => [t.step, t.attempt, t.delayMs])).toEqual([['b', 1, 100]]);
  });

  it('S-retry-04: b raises with 2 attempts: retried once, compensated once, a undone', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abRetry(h, { maxAttempts: 2, failures: Infinity, raise: true }), {});
    expect(h.hooks).toEqual(['run:a', 'run:b', 'retry:b#1', 'run:b', 'compensate:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b raised #2' });
  });

  it('an error with retryable: false is not retried', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'notRetryable' })
      .step('b', {
        retries: { maxAttempts: 5, backoff: 'fixed', baseDelayMs: 1 },
        run: () => {
          h.record('run', 'b');
          throw Object.assign(new Error('card declined'), { retryable: false });
        },
        compensate: () => h.record('compensate', 'b'),
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:b', 'compensate:b']);
    expect(result.status).toBe('failed');
  });

  it('linear and fixed backoff delays follow the policy', async () => {
    for (const [backoff, expected] of [
      ['linear', [50, 100, 150]],
      ['fixed', [50, 50, 50]],
    ] as const) {
      const h = seedHarness();
      const reactor = defineReactor({ name: `backoff-${backoff}` })
        .step('b', { retries: { maxAttempts: 4, backoff, baseDelayMs: 50 }, run: () => fail(new Error('no')) })
        .build();
      await h.runtime.run(reactor, {});
      expect(h.clock.sleeps).toEqual(expected);
    }
  });
});
