import { describe, expect, it } from 'vitest';
import { DeprecatedOptionError, defineReactor, fail, halt } from '../../src/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001 §2.2 and §3.2: compose. Handlers record `kind:path` themselves.

type H = ReturnType<typeof seedHarness>;

/** A step that records run/compensate/undo under `label` and fails or halts when told. */
function step(h: H, label: string, behaviour: 'ok' | 'fail' | 'halt' | 'undo-raises' = 'ok') {
  return {
    run: () => {
      h.record('run', label);
      if (behaviour === 'fail') return fail(new Error(`${label} failed`));
      if (behaviour === 'halt') return halt(`${label} halted`);
      return label.toUpperCase();
    },
    compensate: () => h.record('compensate', label),
    undo: () => {
      h.record('undo', label);
      if (behaviour === 'undo-raises') throw new Error(`cannot undo ${label}`);
    },
  };
}

function child(h: H, prefix: string, c1: Parameters<typeof step>[2] = 'ok', c2: Parameters<typeof step>[2] = 'ok', name = `${prefix}-reactor`) {
  return defineReactor({ name })
    .step('c1', step(h, `${prefix}.c1`, c1))
    .step('c2', { waitFor: ['c1'], ...step(h, `${prefix}.c2`, c2) })
    .build();
}

describe('seed 3.2 compose', () => {
  it('S-compose-01: the child fails: it rolls itself back, then the parent undoes a; b never runs', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'compose01' })
      .step('a', step(h, 'a'))
      .compose('child', child(h, 'child', 'ok', 'fail'), { waitFor: ['a'] })
      .step('b', { waitFor: ['child'], ...step(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'compensate:child.c2', 'undo:child.c1', 'undo:a']);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'child', message: 'child.c2 failed' });
  });

  it('S-compose-02: b fails after the child: the child is undone at its position, newest first', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'compose02' })
      .step('a', step(h, 'a'))
      .compose('child', child(h, 'child'), { waitFor: ['a'] })
      .step('b', { waitFor: ['child'], ...step(h, 'b', 'fail') })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'run:b', 'compensate:b', 'undo:child.c2', 'undo:child.c1', 'undo:a']);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    const view = await h.runtime.find(result.executionId);
    expect(view.undoStack).toEqual([]);
    expect((await h.runtime.find(`${result.executionId}.child`)).status).toBe('cancelled');
  });

  it('S-compose-03: compose x then compose y; y2 fails: y rolls back, then x is undone', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'compose03' })
      .compose('x', defineReactor({ name: 'x-reactor' }).step('x1', step(h, 'x.x1')).step('x2', { waitFor: ['x1'], ...step(h, 'x.x2') }).build())
      .compose('y', defineReactor({ name: 'y-reactor' }).step('y1', step(h, 'y.y1')).step('y2', { waitFor: ['y1'], ...step(h, 'y.y2', 'fail') }).build(), {
        waitFor: ['x'],
      })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:x.x1', 'run:x.x2', 'run:y.y1', 'run:y.y2', 'compensate:y.y2', 'undo:y.y1', 'undo:x.x2', 'undo:x.x1']);
    expect(result).toMatchObject({ status: 'failed', step: 'y' });
  });

  it('S-compose-04: depth 2: inner fails, everything above rolls back in order', async () => {
    const h = seedHarness();
    const inner = defineReactor({ name: 'inner-reactor' }).step('i1', step(h, 'inner.i1')).step('i2', { waitFor: ['i1'], ...step(h, 'inner.i2', 'fail') }).build();
    const outer = defineReactor({ name: 'outer-reactor' }).step('o1', step(h, 'outer.o1')).compose('inner', inner, { waitFor: ['o1'] }).build();
    const reactor = defineReactor({ name: 'compose04' }).step('a', step(h, 'a')).compose('outer', outer, { waitFor: ['a'] }).build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:outer.o1', 'run:inner.i1', 'run:inner.i2', 'compensate:inner.i2', 'undo:inner.i1', 'undo:outer.o1', 'undo:a']);
    // The recorder names steps by their full path from the root.
    expect(h.hooks).toEqual(['run:a', 'run:outer.o1', 'run:outer.inner.i1', 'run:outer.inner.i2', 'compensate:outer.inner.i2', 'undo:outer.inner.i1', 'undo:outer.o1', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'outer' });
  });

  it('S-compose-05: retries on a compose are rejected when the reactor is defined', () => {
    const h = seedHarness();
    const build = () =>
      defineReactor({ name: 'compose05' })
        .compose('child', child(h, 'child'), { retries: { maxAttempts: 2 } } as never)
        .build();
    expect(build).toThrow(DeprecatedOptionError);
    expect(build).toThrow(/option "retries" was removed; a composed reactor is never retried as a whole; declare retries on the child's steps/);
  });

  it("S-compose-05b: the child's own step retries inside the child; a later parent failure undoes the child", async () => {
    // The seed's retry event names the child's step without its path: record it from the hook.
    let log: string[] = [];
    const h = seedHarness([{ retryAttempt: (e) => void log.push(`retry:${e.step}#${e.attempt}`) }]);
    log = h.events;
    let attempts = 0;
    const kid = defineReactor({ name: 'retrying-child' })
      .step('c1', step(h, 'child.c1'))
      .step('c2', {
        waitFor: ['c1'],
        retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 10 },
        run: () => {
          h.record('run', 'child.c2');
          attempts += 1;
          return attempts === 1 ? fail(new Error('c2 flaked')) : 'C2';
        },
        undo: () => h.record('undo', 'child.c2'),
      })
      .build();
    const reactor = defineReactor({ name: 'compose05b' })
      .compose('child', kid)
      .step('b', { waitFor: ['child'], ...step(h, 'b', 'fail') })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:child.c1', 'run:child.c2', 'retry:c2#1', 'run:child.c2', 'run:b', 'compensate:b', 'undo:child.c2', 'undo:child.c1']);
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
  });

  it('S-compose-07: a child undo raises: the rollback goes on, the failure is reported flattened into the parent', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'compose07' })
      .step('a', step(h, 'a'))
      .compose('child', child(h, 'child', 'undo-raises', 'fail'), { waitFor: ['a'] })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'compensate:child.c2', 'undo:child.c1', 'undo:a']);
    expect(result.status).toBe('failed');
    if (result.status !== 'failed') return;
    expect(result.step).toBe('child');
    expect(result.rollbackFailures.map((f) => [f.step, f.kind, f.reason, f.message])).toEqual([['c1', 'undo', 'raised', 'cannot undo child.c1']]);
  });

  it("S-compose-08: the child halts: the parent continues and succeeds", async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'compose08' })
      .step('a', step(h, 'a'))
      .compose('child', child(h, 'child', 'ok', 'halt'), { waitFor: ['a'] })
      .step('b', { waitFor: ['child'], ...step(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, {});
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'run:b']);
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', child: undefined, b: 'B' } });
  });

  it("the compose step's result is the child's value, and args become the child's input", async () => {
    const h = seedHarness();
    const { z } = await import('zod');
    const pricing = defineReactor({ name: 'pricing-child', input: z.object({ cents: z.number() }) })
      .step('tax', { args: ({ input }) => ({ cents: input('cents') }), run: ({ cents }) => Math.round(cents * 0.2) })
      .step('total', { args: ({ input, result }) => ({ cents: input('cents'), tax: result('tax') }), run: ({ cents, tax }) => ({ total: cents + tax }) })
      .returns('total')
      .build();
    const reactor = defineReactor({ name: 'checkout-compose', input: z.object({ cents: z.number() }) })
      .compose('price', pricing, { args: ({ input }) => ({ cents: input('cents') }) })
      .step('charge', { args: ({ result }) => ({ total: result('price', 'total') }), run: ({ total }) => `charged ${total}` })
      .returns('charge')
      .build();
    expect(await h.runtime.run(reactor, { cents: 1000 })).toMatchObject({ status: 'completed', value: 'charged 1200' });
  });
});
