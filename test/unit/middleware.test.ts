import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRuntime, defineReactor, fail } from '../../src/index.js';
import type { Middleware } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';

function lifecycle(): { middleware: Middleware; seen: string[] } {
  const seen: string[] = [];
  const middleware: Middleware = {
    reactorStart: (e) => void seen.push(`reactorStart:${e.reactor}`),
    reactorComplete: (e) => void seen.push(`reactorComplete:${e.status}`),
    reactorFail: (e) => void seen.push(`reactorFail:${e.error.message}`),
    stepStart: (e) => void seen.push(`stepStart:${e.step}#${e.attempt}:${JSON.stringify(e.args)}`),
    stepComplete: (e) => void seen.push(`stepComplete:${e.step}:${e.outcome}`),
    stepFail: (e) => void seen.push(`stepFail:${e.step}:${e.error.message}`),
    retryAttempt: (e) => void seen.push(`retryAttempt:${e.step}#${e.attempt}->${e.nextAttempt}:${e.delayMs}`),
    compensateStart: (e) => void seen.push(`compensateStart:${e.step}`),
    compensateComplete: (e) => void seen.push(`compensateComplete:${e.step}`),
    compensateFail: (e) => void seen.push(`compensateFail:${e.step}`),
    undoStart: (e) => void seen.push(`undoStart:${e.step}`),
    undoComplete: (e) => void seen.push(`undoComplete:${e.step}`),
    undoFail: (e) => void seen.push(`undoFail:${e.step}:${e.error.message}`),
  };
  return { middleware, seen };
}

const reactor = defineReactor({ name: 'hooks' })
  .step('a', { args: ({ value }) => ({ n: value(1) }), run: ({ n }) => n + 1, undo: () => undefined })
  .step('b', {
    args: ({ result }) => ({ a: result('a') }),
    run: () => {
      throw new Error('cannot undo b');
    },
    undo: () => undefined,
  })
  .step('c', {
    waitFor: ['b'],
    retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 7 },
    run: () => fail(new Error('c failed')),
    compensate: () => {
      throw new Error('compensate c failed');
    },
  })
  .build();

describe('middleware', () => {
  it('sees every lifecycle event in order', async () => {
    const { middleware, seen } = lifecycle();
    const runtime = createRuntime({ clock: createTestClock(), middleware: [middleware], logger: pino({ level: 'silent' }) });
    const ok = defineReactor({ name: 'ok' }).step('a', { run: () => 1 }).build();
    await runtime.run(ok, {});
    expect(seen).toEqual(['reactorStart:ok', 'stepStart:a#1:{}', 'stepComplete:a:succeeded', 'reactorComplete:completed']);
  });

  it('reports retries, a final step failure, compensate and undo outcomes and the reactor failure', async () => {
    const { middleware, seen } = lifecycle();
    const flaky = defineReactor({ name: 'flaky' })
      .step('a', { run: () => 'A', undo: () => fail('nope') })
      .step('c', {
        waitFor: ['a'],
        retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 7 },
        run: () => fail(new Error('c failed')),
        compensate: () => {
          throw new Error('compensate c failed');
        },
      })
      .build();
    const runtime = createRuntime({ clock: createTestClock(), middleware: [middleware], logger: pino({ level: 'silent' }) });
    await runtime.run(flaky, {});
    expect(seen).toEqual([
      'reactorStart:flaky',
      'stepStart:a#1:{}',
      'stepComplete:a:succeeded',
      'stepStart:c#1:{}',
      'retryAttempt:c#1->2:7',
      'stepStart:c#2:{}',
      'stepFail:c:c failed',
      'compensateStart:c',
      'compensateFail:c',
      'undoStart:a',
      'undoFail:a:nope',
      'reactorFail:step "c" failed (c failed) and its compensate did not complete',
    ]);
  });

  it('a throwing or rejecting hook is logged and never breaks the run', async () => {
    const logged: unknown[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const runtime = createRuntime({
      clock: createTestClock(),
      logger,
      middleware: [
        {
          stepStart: () => {
            throw new Error('hook exploded');
          },
          stepComplete: () => Promise.reject(new Error('hook rejected')),
        },
      ],
    });
    const result = await runtime.run(reactor, {});
    await new Promise((resolve) => setImmediate(resolve));
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    const hooks = logged.map((l) => (l as { hook: string; event: string }).hook);
    expect(hooks).toContain('stepStart');
    expect(hooks).toContain('stepComplete');
    expect(logged.every((l) => (l as { event: string }).event === 'xreactor.middleware.failed')).toBe(true);
  });
});
