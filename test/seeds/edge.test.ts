import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineReactor, ExecutionAbortedError, InputValidationError } from '../../src/index.js';
import { seedHarness } from '../support/seed-kit.js';

class CustomFault extends Error {
  override name = 'CustomFault';
  readonly code = 'E_CUSTOM';
}

describe('seed edge cases', () => {
  it('S-edge-03: b throws a custom error class: compensated, a undone, failure keeps the class name', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'edge03' })
      .step('a', { run: () => void h.record('run', 'a'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        run: () => {
          h.record('run', 'b');
          throw new CustomFault('custom failure');
        },
        compensate: (error) => {
          h.record('compensate', 'b');
          expect(error.name).toBe('CustomFault');
        },
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'custom failure' });
    if (result.status === 'failed') expect(result.error.name).toBe('CustomFault');
  });

  it('S-edge-03b: the run is interrupted inside b: no rollback, stored aborted, undo(id) rolls back later', async () => {
    const h = seedHarness();
    const controller = new AbortController();
    const reactor = defineReactor({ name: 'edge03b' })
      .step('a', { run: () => (h.record('run', 'a'), 'A'), undo: () => h.record('undo', 'a') })
      .step('b', {
        args: ({ result }) => ({ a: result('a') }),
        run: async (_args, ctx) => {
          h.record('run', 'b');
          controller.abort(new Error('SIGINT'));
          expect(ctx.signal.aborted).toBe(true);
          return new Promise<string>(() => undefined);
        },
        compensate: () => h.record('compensate', 'b'),
        undo: () => h.record('undo', 'b'),
      })
      .build();
    const rejection = await h.runtime.run(reactor, {}, { signal: controller.signal }).catch((e: unknown) => e);
    expect(rejection).toBeInstanceOf(ExecutionAbortedError);
    expect(h.events).toEqual(['run:a', 'run:b']);
    const id = (rejection as ExecutionAbortedError).executionId;
    const view = await h.runtime.find(id);
    expect(view.status).toBe('aborted');
    expect(view.undoStack).toEqual([{ step: 'a', args: {}, result: 'A' }]);

    const undone = await h.runtime.undo(id);
    expect(h.events).toEqual(['run:a', 'run:b', 'undo:a']);
    expect(undone).toMatchObject({ status: 'cancelled', reason: 'undo', rollbackFailures: [] });
    expect((await h.runtime.find(id)).status).toBe('cancelled');
  });

  it('an interruption that cuts off the failing step compensate is re-run first by undo(id)', async () => {
    const h = seedHarness();
    const controller = new AbortController();
    let compensations = 0;
    const reactor = defineReactor({ name: 'cutCompensate' })
      .step('a', { run: () => (h.record('run', 'a'), 'A'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        run: () => (h.record('run', 'b'), Promise.reject(new Error('b failed'))),
        compensate: () => {
          h.record('compensate', 'b');
          compensations += 1;
          if (compensations === 1) {
            controller.abort(new Error('SIGTERM'));
            return new Promise(() => undefined);
          }
          return undefined;
        },
      })
      .build();
    const rejection = await h.runtime.run(reactor, {}, { signal: controller.signal }).catch((e: unknown) => e);
    expect(rejection).toBeInstanceOf(ExecutionAbortedError);
    const id = (rejection as ExecutionAbortedError).executionId;
    expect((await h.runtime.find(id)).pendingCompensation).toEqual({ step: 'b' });
    await h.runtime.undo(id);
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'compensate:b', 'undo:a']);
    expect((await h.runtime.find(id)).status).toBe('cancelled');
  });

  it('runtime.shutdown() interrupts runs in progress like an aborted signal', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'shutdown' })
      .step('a', { run: () => (h.record('run', 'a'), 'A'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        run: () => {
          h.record('run', 'b');
          h.runtime.shutdown('SIGTERM');
          return new Promise<string>(() => undefined);
        },
      })
      .build();
    await expect(h.runtime.run(reactor, {})).rejects.toBeInstanceOf(ExecutionAbortedError);
    expect(h.events).toEqual(['run:a', 'run:b']);
  });

  it('S-edge-05: b arguments violate its input contract: b never runs, a undone', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'edge05', input: z.object({ amount: z.unknown() }) })
      .step('a', { run: () => void h.record('run', 'a'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        retries: { maxAttempts: 3, baseDelayMs: 1 },
        input: z.object({ amount: z.number().int().positive() }),
        run: ({ amount }) => (h.record('run', 'b'), amount),
        compensate: () => h.record('compensate', 'b'),
      })
      .build();
    const result = await h.runtime.run(reactor, { amount: 'ten' });
    expect(h.events).toEqual(['run:a', 'undo:a']);
    expect(h.clock.sleeps).toEqual([]);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    if (result.status !== 'failed') return;
    expect(result.error).toBeInstanceOf(InputValidationError);
    expect(result.validationErrors).toHaveProperty('amount');
  });

  it('S-edge-06: reactor input invalid: failure with field errors before any step', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'edge06', input: z.object({ email: z.email(), age: z.number().min(18) }) })
      .step('a', { run: () => void h.record('run', 'a') })
      .build();
    const result = await h.runtime.run(reactor, { email: 'not-an-email', age: 12 });
    expect(h.events).toEqual([]);
    expect(result).toMatchObject({ status: 'failed', step: undefined });
    if (result.status !== 'failed') return;
    expect(result.error).toBeInstanceOf(InputValidationError);
    expect(Object.keys(result.validationErrors ?? {}).sort()).toEqual(['age', 'email']);
    expect((await h.runtime.find(result.executionId)).status).toBe('failed');
  });
});
