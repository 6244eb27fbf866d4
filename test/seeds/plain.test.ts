import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CompensationError, defineReactor, fail, halt, OutputValidationError, ArgumentResolutionError, skip } from '../../src/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001, section 3.1: plain steps. Events are recorded by the handlers themselves.

function abc(h: ReturnType<typeof seedHarness>, failAt: 'b' | 'c', how: 'return' | 'throw', undoB: 'ok' | 'throws' = 'ok') {
  const body = (name: string) => () => {
    h.record('run', name);
    if (name === failAt) {
      if (how === 'throw') throw new Error(`${name} exploded`);
      return fail(new Error(`${name} failed`));
    }
    return `${name}-result`;
  };
  return defineReactor({ name: 'abc' })
    .step('a', { run: body('a'), compensate: () => h.record('compensate', 'a'), undo: () => h.record('undo', 'a') })
    .step('b', {
      args: ({ result }) => ({ a: result('a') }),
      run: body('b'),
      compensate: () => h.record('compensate', 'b'),
      undo: () => {
        h.record('undo', 'b');
        if (undoB === 'throws') throw new Error('cannot undo b');
      },
    })
    .step('c', {
      args: ({ result }) => ({ b: result('b') }),
      run: body('c'),
      compensate: () => h.record('compensate', 'c'),
      undo: () => h.record('undo', 'c'),
    })
    .build();
}

describe('seed 3.1 plain steps', () => {
  it('S-plain-01: b returns a failure: b compensated, a undone, c never runs', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abc(h, 'b', 'return'), {});
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
  });

  it('S-plain-02: b throws: same order as a returned failure', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abc(h, 'b', 'throw'), {});
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b exploded' });
  });

  it('S-plain-03: b fails and its compensate fails: rollback continues, error is a CompensationError naming b', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain03' })
      .step('a', { run: () => void h.record('run', 'a'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        run: () => {
          h.record('run', 'b');
          return fail(new Error('b failed'));
        },
        compensate: () => {
          h.record('compensate', 'b');
          return fail(new Error('compensate b failed'));
        },
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(result.status).toBe('failed');
    if (result.status !== 'failed') return;
    expect(result.error).toBeInstanceOf(CompensationError);
    expect(result.step).toBe('b');
    expect((result.error as CompensationError).step).toBe('b');
    expect(result.rollbackFailures.map((f) => [f.step, f.kind, f.reason, f.message])).toEqual([
      ['b', 'compensate', 'returned_failure', 'compensate b failed'],
    ]);
  });

  it('S-plain-04: c fails and b undo raises: a is still undone, b reported', async () => {
    const h = seedHarness();
    const result = await h.runtime.run(abc(h, 'c', 'return', 'throws'), {});
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'c' });
    if (result.status !== 'failed') return;
    expect(result.rollbackFailures.map((f) => [f.step, f.kind, f.reason, f.message])).toEqual([['b', 'undo', 'raised', 'cannot undo b']]);
  });

  it('S-plain-05: b halts: no rollback, a and b stay, c never runs', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain05' })
      .step('a', { run: () => void h.record('run', 'a'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        run: () => {
          h.record('run', 'b');
          return halt('nothing to do');
        },
        compensate: () => h.record('compensate', 'b'),
      })
      .step('c', { waitFor: ['b'], run: () => void h.record('run', 'c') })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b']);
    expect(result).toMatchObject({ status: 'halted', step: 'b', reason: 'nothing to do' });
    const view = await h.runtime.find(result.executionId);
    expect(view.status).toBe('halted');
    expect(view.undoStack.map((e) => e.step)).toEqual(['a']);
  });

  it('S-plain-06: b skipped, c fails: b is never undone', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain06' })
      .step('a', { run: () => (h.record('run', 'a'), 1), undo: () => h.record('undo', 'a') })
      .step('b', { args: ({ result }) => ({ a: result('a') }), run: () => (h.record('run', 'b'), skip(2)), undo: () => h.record('undo', 'b') })
      .step('c', {
        args: ({ result }) => ({ b: result('b') }),
        run: ({ b }) => {
          h.record('run', 'c');
          expect(b).toBe(2);
          return fail(new Error('c failed'));
        },
        compensate: () => h.record('compensate', 'c'),
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'c' });
  });

  it('S-plain-07: b argument transform raises: b never started, not compensated, a undone', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain07' })
      .step('a', { run: () => (h.record('run', 'a'), { id: 1 }), undo: () => h.record('undo', 'a') })
      .step('b', {
        retries: { maxAttempts: 3, baseDelayMs: 10 },
        args: ({ result }) =>
          ({
            id: result('a', 'id').transform(() => {
              throw new Error('bad transform');
            }),
          }),
        run: () => void h.record('run', 'b'),
        compensate: () => h.record('compensate', 'b'),
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'undo:a']);
    expect(h.clock.sleeps).toEqual([]);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    if (result.status !== 'failed') return;
    expect(result.error).toBeInstanceOf(ArgumentResolutionError);
    expect(result.message).toContain('step "b"');
  });

  it('S-plain-08: b output fails validation: b is compensated (its body ran), a undone', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain08' })
      .step('a', { run: () => void h.record('run', 'a'), undo: () => h.record('undo', 'a') })
      .step('b', {
        waitFor: ['a'],
        output: z.object({ id: z.string() }),
        run: () => (h.record('run', 'b'), { id: 42 }),
        compensate: () => h.record('compensate', 'b'),
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    if (result.status !== 'failed') return;
    expect(result.error).toBeInstanceOf(OutputValidationError);
    expect(result.validationErrors).toHaveProperty('id');
  });

  it('S-plain-09: a, b -> c -> d, d fails: undo newest-first across branches', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'plain09' })
      .step('a', { run: () => (h.record('run', 'a'), 'A'), undo: () => h.record('undo', 'a') })
      .step('b', { run: () => (h.record('run', 'b'), 'B'), undo: () => h.record('undo', 'b') })
      .step('c', {
        args: ({ result }) => ({ a: result('a'), b: result('b') }),
        run: ({ a, b }) => (h.record('run', 'c'), a + b),
        undo: () => h.record('undo', 'c'),
      })
      .step('d', {
        args: ({ result }) => ({ c: result('c') }),
        run: () => (h.record('run', 'd'), fail(new Error('d failed'))),
        compensate: () => h.record('compensate', 'd'),
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c', 'run:d', 'compensate:d', 'undo:c', 'undo:b', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'd' });
    const view = await h.runtime.find(result.executionId);
    expect(view.status).toBe('failed');
    expect(view.undoStack).toEqual([]);
  });
});
