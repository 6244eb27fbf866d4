import { describe, expect, it } from 'vitest';
import { defineReactor, fail } from '../../src/index.js';
import type { AsyncOutcome } from '../../src/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001 §2.5, §2.6 and the async table (S-async-01 … 08): `asyncStep` and `asyncReactor`.
// "inline + StepWorker / Worker" is the manual queue drained after run() returns; "Sidekiq
// inline!" is the inline queue (an enqueue runs its jobs before it resolves). Handlers record
// `kind:step` themselves; the recorder must agree (and adds the retry events F-12 omitted).

type H = ReturnType<typeof seedHarness>;

function plain(h: H, name: string, behaviour: 'ok' | 'fail' = 'ok') {
  return {
    run: () => {
      h.record('run', name);
      return behaviour === 'fail' ? fail(new Error(`${name} failed`)) : name.toUpperCase();
    },
    compensate: () => h.record('compensate', name),
    undo: () => h.record('undo', name),
  };
}

/** An async step's body and compensate (it takes no undo). */
function unit(h: H, name: string, behaviour: 'ok' | 'fail' = 'ok') {
  return {
    run: () => {
      h.record('run', name);
      return behaviour === 'fail' ? fail(new Error(`${name} failed`)) : `${name}-value`;
    },
    compensate: () => h.record('compensate', name),
  };
}

/** A reader's body that fails when the unit it reads did not complete (the seed's "r fails on it"). */
function readUnit(h: H, u: AsyncOutcome<unknown>) {
  h.record('run', 'r');
  return u.status === 'completed' ? u.value : fail(new Error(`r: the unit ${u.status}`));
}

function child(h: H, c2: 'ok' | 'fail') {
  return defineReactor({ name: 'child' })
    .step('c1', { run: () => (h.record('run', 'child.c1'), 'C1'), undo: () => h.record('undo', 'child.c1') })
    .step('c2', {
      waitFor: ['c1'],
      run: () => (h.record('run', 'child.c2'), c2 === 'fail' ? fail(new Error('c2 failed')) : 'C2'),
      compensate: () => h.record('compensate', 'child.c2'),
      undo: () => h.record('undo', 'child.c2'),
    })
    .returns('c2')
    .build();
}

describe('seed 001 §3.4: async_step and async_reactor', () => {
  it('S-async-01: a unit that fails with no reader compensates itself in its job; the run succeeds', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-01' })
      .step('a', plain(h, 'a'))
      .asyncStep('u', { waitFor: ['a'], ...unit(h, 'u', 'fail') })
      .step('b', { waitFor: ['a'], ...plain(h, 'b') })
      .build();
    const result = await h.runtime.run(r, {});
    // The unit is complete for scheduling only: no value of it in the run's.
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B' } });
    expect(Object.keys((result as { value: object }).value)).toEqual(['a', 'b']);
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:u', 'compensate:u']);
    expect(h.hooks).toEqual(h.events);
    // Left in place: a and b (nobody read the unit).
    expect(await h.runtime.find(result.executionId)).toMatchObject({ status: 'completed' });
  });

  it('S-async-02: a reader gets the unit failure and fails on it: the reader is compensated, the unit is not again', async () => {
    const h = seedHarness({ queue: 'inline' });
    const r = defineReactor({ name: 'async-02' })
      .step('a', plain(h, 'a'))
      .asyncStep('u', { waitFor: ['a'], ...unit(h, 'u', 'fail') })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => readUnit(h, u), compensate: () => h.record('compensate', 'r') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(h.events).toEqual(['run:a', 'run:u', 'compensate:u', 'run:r', 'compensate:r', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'r', message: 'r: the unit failed' });
  });

  it('S-async-03: a failing owner does not stop or undo its unit, which runs after the rollback', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-03' })
      .step('a', plain(h, 'a'))
      .asyncStep('u', { waitFor: ['a'], ...unit(h, 'u') })
      .step('b', { waitFor: ['a'], ...plain(h, 'b', 'fail') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a', 'run:u']);
  });

  it('S-async-04: an async reactor with no reader rolls itself back in its worker; the owner succeeds', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-04' })
      .step('a', plain(h, 'a'))
      .asyncReactor('child', child(h, 'fail'), { waitFor: ['a'] })
      .step('b', { waitFor: ['a'], ...plain(h, 'b') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B' } });
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:child.c1', 'run:child.c2', 'compensate:child.c2', 'undo:child.c1']);
    expect(h.hooks).toEqual(h.events);
    // The child is an execution of its own, addressable by id.
    expect(await h.runtime.find(`${result.executionId}.child`)).toMatchObject({ status: 'failed', reactor: 'child' });
  });

  it('S-async-05: a reader of an async reactor gets its real failure after the child rolled itself back', async () => {
    const h = seedHarness({ queue: 'inline' });
    const r = defineReactor({ name: 'async-05' })
      .step('a', plain(h, 'a'))
      .asyncReactor('child', child(h, 'fail'), { waitFor: ['a'] })
      .step('r', {
        args: ({ result }) => ({ u: result('child') }),
        run: ({ u }) => {
          h.record('run', 'r');
          return u.status === 'completed' ? u.value : fail(u.status === 'failed' ? u.error : new Error(u.status));
        },
        compensate: () => h.record('compensate', 'r'),
      })
      .build();
    const result = await h.runtime.run(r, {});
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'compensate:child.c2', 'undo:child.c1', 'run:r', 'compensate:r', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'r', message: 'c2 failed' });
  });

  it('S-async-06: a failing owner never undoes a completed async reactor; a queued one runs after the rollback', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-06' })
      .step('a', plain(h, 'a'))
      .asyncReactor('child', child(h, 'ok'), { waitFor: ['a'] })
      .step('b', { waitFor: ['a'], ...plain(h, 'b', 'fail') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'run:b', 'compensate:b', 'undo:a', 'run:child.c1', 'run:child.c2']);
    expect(await h.runtime.find(`${result.executionId}.child`)).toMatchObject({ status: 'completed' });
  });

  it('S-async-07: a unit retries in its job and compensates once after the last attempt; nobody reads it, the run succeeds', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-07' })
      .step('a', plain(h, 'a'))
      .asyncStep('u', { waitFor: ['a'], retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 100 }, ...unit(h, 'u', 'fail') })
      .step('b', { waitFor: ['a'], ...plain(h, 'b') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(result).toMatchObject({ status: 'completed' });
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:u', 'run:u', 'run:u', 'compensate:u']);
    // The retries loop inside the unit's job (its backoffs are sleeps there, not delayed jobs);
    // unlike the gem (F-12), each retry is reported.
    expect(h.hooks).toEqual(['run:a', 'run:b', 'run:u', 'retry:u#1', 'run:u', 'retry:u#2', 'run:u', 'compensate:u']);
    expect(h.clock.sleeps).toEqual([100, 100]);
  });

  it('S-async-08: a reader whose wait times out fails before its body; the unit runs after the rollback', async () => {
    const h = seedHarness({ queue: 'manual' });
    const r = defineReactor({ name: 'async-08' })
      .step('a', plain(h, 'a'))
      .asyncStep('u', { waitFor: ['a'], ...unit(h, 'u', 'fail') })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => readUnit(h, u), compensate: () => h.record('compensate', 'r') })
      .build();
    const result = await h.runtime.run(r, {});
    expect(result).toMatchObject({ status: 'failed', step: 'r' });
    const failure = result as { error: Error & { code?: string; cause?: { code?: string } } };
    expect(failure.error.code).toBe('argument_unresolved');
    expect(failure.error.cause?.code).toBe('async_wait_timeout');
    expect(h.clock.sleeps).toEqual([30_000]);
    await h.queue!.drainRounds();
    expect(h.events).toEqual(['run:a', 'undo:a', 'run:u', 'compensate:u']);
  });
});
