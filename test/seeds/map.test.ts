import { describe, expect, it } from 'vitest';
import { defineReactor, fail, halt } from '../../src/index.js';
import { z } from 'zod';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001 §2.x and the map table (S-map-*), inline maps: element reactor e1 → e2 (both with
// compensate/undo), items [0, 1, 2, 3]. Handlers record `kind:label[i]` themselves; the
// recorder names element steps the same way (`e1[2]`).

type H = ReturnType<typeof seedHarness>;
type Behaviour = 'ok' | 'fail' | 'halt' | 'fail-once';

/** A step of an element that records run/compensate/undo as `<label>[i]` and behaves as `behaviour(i)` says. */
function elementStep(h: H, label: string, behaviour: (i: number) => Behaviour = () => 'ok') {
  const attempts = new Map<number, number>();
  return {
    run: (item: unknown) => {
      const i = Number(item);
      h.record('run', `${label}[${i}]`);
      const b = behaviour(i);
      const n = (attempts.get(i) ?? 0) + 1;
      attempts.set(i, n);
      if (b === 'fail') return fail(new Error(`${label}[${i}] failed`));
      if (b === 'fail-once' && n === 1) throw new Error(`${label}[${i}] failed once`);
      if (b === 'halt') return halt(`${label}[${i}] halted`);
      return `${label}:${i}`;
    },
    compensate: (_error: unknown, item: unknown) => h.record('compensate', `${label}[${Number(item)}]`),
    undo: (_result: unknown, item: unknown) => h.record('undo', `${label}[${Number(item)}]`),
  };
}

function plainStep(h: H, label: string, behaviour: 'ok' | 'fail' = 'ok') {
  return {
    run: () => {
      h.record('run', label);
      if (behaviour === 'fail') return fail(new Error(`${label} failed`));
      return label.toUpperCase();
    },
    compensate: () => h.record('compensate', label),
    undo: () => h.record('undo', label),
  };
}

function elementReactor(h: H, name: string, e2: (i: number) => Behaviour = () => 'ok', e2Options: Record<string, unknown> = {}) {
  return defineReactor({ name })
    .step('e1', elementStep(h, 'e1'))
    .step('e2', { waitFor: ['e1'], ...e2Options, ...elementStep(h, 'e2', e2) })
    .build();
}

const items = [0, 1, 2, 3];
const input = z.object({ items: z.array(z.number()) });
const el = (i: number, steps = ['e1', 'e2']) => steps.map((s) => `run:${s}[${i}]`);

// Seed 001's map table gives S-map-04 and S-map-01, S-map-05 and S-map-02, S-map-06 and S-map-03
// the same events: one array each.
/** S-map-01 / S-map-04: element 2 fails (atomic); it rolls itself back, then 1 and 0 are undone newest first, then a. */
const S_MAP_01_EVENTS = [
  'run:a',
  ...el(0),
  ...el(1),
  'run:e1[2]',
  'run:e2[2]',
  'compensate:e2[2]',
  'undo:e1[2]',
  'undo:e2[1]',
  'undo:e1[1]',
  'undo:e2[0]',
  'undo:e1[0]',
  'undo:a',
];
/** S-map-02 / S-map-05: atomic false: element 2 fails and rolls itself back, the map completes, b runs. */
const S_MAP_02_EVENTS = ['run:a', ...el(0), ...el(1), 'run:e1[2]', 'run:e2[2]', 'compensate:e2[2]', 'undo:e1[2]', ...el(3), 'run:b'];
/** S-map-03 / S-map-06: b fails after the map: the map entry is undone, positions 3, 2, 1, 0, then a. */
const S_MAP_03_EVENTS = [
  'run:a',
  ...el(0),
  ...el(1),
  ...el(2),
  ...el(3),
  'run:b',
  'compensate:b',
  'undo:e2[3]',
  'undo:e1[3]',
  'undo:e2[2]',
  'undo:e1[2]',
  'undo:e2[1]',
  'undo:e1[1]',
  'undo:e2[0]',
  'undo:e1[0]',
  'undo:a',
];

describe('seed: inline maps', () => {
  it('S-map-01: atomic, element 2 fails: it rolls itself back, then elements 1, 0 are undone newest first, then a; element 3 never runs', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'map01', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map01-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, { items });
    expect(h.events).toEqual(S_MAP_01_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[2] failed', rollbackFailures: [] });
    expect((await h.runtime.find(`${result.executionId}.m`)).status).toBe('undone');
  });

  it('S-map-02: atomic false: element 2 fails and rolls itself back, the map completes, b runs', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'map02', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map02-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), atomic: false, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, { items });
    expect(h.events).toEqual(S_MAP_02_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'completed' });
  });

  it('S-map-03: b fails after the map: the map entry is undone, positions 3, 2, 1, 0, then a', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'map03', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map03-element'), { source: ({ input }) => input('items'), waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b', 'fail') })
      .build();
    const result = await h.runtime.run(reactor, { items });
    expect(h.events).toEqual(S_MAP_03_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
    expect((await h.runtime.find(result.executionId)).undoStack).toEqual([]);
  });

  it('S-map-07: the map is in a composed child: the child compensates its map, undoes c0 and fails; the root undoes a', async () => {
    const h = seedHarness();
    const child = defineReactor({ name: 'map07-child', input })
      .step('c0', plainStep(h, 'child.c0'))
      .map('m', elementReactor(h, 'map07-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), waitFor: ['c0'] })
      .build();
    const reactor = defineReactor({ name: 'map07', input })
      .step('a', plainStep(h, 'a'))
      .compose('child', child, { waitFor: ['a'] })
      .build();
    const result = await h.runtime.run(reactor, { items });
    const inChild = (i: number) => [`run:e1[${i}]`, `run:e2[${i}]`];
    expect(h.events).toEqual([
      'run:a',
      'run:child.c0',
      ...inChild(0),
      ...inChild(1),
      'run:e1[2]',
      'run:e2[2]',
      'compensate:e2[2]',
      'undo:e1[2]',
      'undo:e2[1]',
      'undo:e1[1]',
      'undo:e2[0]',
      'undo:e1[0]',
      'undo:child.c0',
      'undo:a',
    ]);
    expect(h.hooks).toEqual(h.events.map((e) => e.replace(/^(\w+):(e\d\[\d\])$/, '$1:child.$2')));
    expect(result).toMatchObject({ status: 'failed', step: 'child', message: 'e2[2] failed' });
  });

  it("S-map-08: a compose inside each element: element 2's e2 fails, its k is undone in its own rollback; elements 1, 0 undo e2, k.k1, e1", async () => {
    const h = seedHarness();
    const k = defineReactor({ name: 'map08-k' }).step('k1', elementStep(h, 'k.k1')).build();
    const element = defineReactor({ name: 'map08-element' })
      .step('e1', elementStep(h, 'e1'))
      .compose('k', k, { waitFor: ['e1'] })
      .step('e2', { waitFor: ['k'], ...elementStep(h, 'e2', (i) => (i === 2 ? 'fail' : 'ok')) })
      .build();
    const reactor = defineReactor({ name: 'map08', input }).map('m', element, { source: ({ input }) => input('items') }).build();
    const result = await h.runtime.run(reactor, { items });
    const ran = (i: number) => [`run:e1[${i}]`, `run:k.k1[${i}]`, `run:e2[${i}]`];
    const undone = (i: number) => [`undo:e2[${i}]`, `undo:k.k1[${i}]`, `undo:e1[${i}]`];
    expect(h.events).toEqual([...ran(0), ...ran(1), ...ran(2), 'compensate:e2[2]', 'undo:k.k1[2]', 'undo:e1[2]', ...undone(1), ...undone(0)]);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[2] failed' });
  });

  it('S-map-10: every e2 fails once with retries 2: in a caller the backoff sleeps in place, element after element', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'map10', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map10-element', () => 'fail-once', { retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 10 } }), {
        source: ({ input }) => input('items'),
        waitFor: ['a'],
      })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, { items: [0, 1] });
    expect(h.events).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'run:e2[1]', 'run:b']);
    expect(h.hooks).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'retry:e2[0]#1', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'retry:e2[1]#1', 'run:e2[1]', 'run:b']);
    expect(result).toMatchObject({ status: 'completed' });
  });

  it('S-map-11: element 1 halts: the map halts, the owner halts at m, nothing is rolled back', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'map11', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map11-element', (i) => (i === 1 ? 'halt' : 'ok')), { source: ({ input }) => input('items'), waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await h.runtime.run(reactor, { items });
    expect(h.events).toEqual(['run:a', ...el(0), ...el(1)]);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'halted', step: 'm', reason: 'e2[1] halted' });
  });
});

// Fan-out maps (seed 001 §2.4): the root's caller gets `dispatched`; the map's start job, its
// elements' start jobs and its rollback actors' jobs are drained in rounds by purpose, as the
// seeds' harness does (execution advance → map element → map settle → element rollback).
describe('seed: fan-out maps', () => {
  /** Run `reactor` to its dispatch, drain the queue (after `arrange`, given the element jobs of the first throw), and return the root's outcome. */
  async function runFannedOut(h: H, reactor: Parameters<H['runtime']['run']>[0], value: unknown, arrange?: (queue: NonNullable<H['queue']>) => void) {
    const started = await h.runtime.run(reactor, value);
    expect(started).toMatchObject({ status: 'dispatched', reason: 'awaiting' });
    const queue = h.queue!;
    if (arrange !== undefined) {
      await queue.drainRounds({ only: ['map-settle'] });
      arrange(queue);
    }
    await queue.drainRounds({ delayed: 'as-due' });
    expect(queue.pending()).toEqual([]);
    return h.runtime.awaitResult(started.executionId, { timeoutMs: 1_000 });
  }

  it('S-map-04: atomic, element jobs in order 0..3: element 2 fails, 3 skips itself; 1 and 0 are undone by rollback jobs, then a', async () => {
    const h = seedHarness({ queue: 'manual' });
    const reactor = defineReactor({ name: 'map04', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map04-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), fanOut: true, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await runFannedOut(h, reactor, { items });
    expect(h.events).toEqual(S_MAP_01_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[2] failed', rollbackFailures: [] });
    const view = await h.runtime.find(result.executionId);
    expect(view.maps).toEqual([
      {
        step: 'm',
        id: `${result.executionId}.m`,
        mode: 'fanOut',
        batchSize: 50,
        atomic: true,
        total: 4,
        dispatched: 4,
        started: 3,
        settled: 4,
        outcomes: { completed: 2, failed: 1, halted: 0, aborted: 0, skipped: 1, cancelled: 0 },
        rollback: { total: 3, settled: 3, undone: 2, failed: 0, notNeeded: 1, inFlight: 0, unavailable: 0 },
      },
    ]);
  });

  it('S-map-04b: element jobs performed 3, 2, 1, 0: 3 completes, 2 fails, 1 and 0 skip; 3 is undone, then a', async () => {
    const h = seedHarness({ queue: 'manual' });
    const reactor = defineReactor({ name: 'map04b', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map04b-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), fanOut: true, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await runFannedOut(h, reactor, { items }, (queue) => {
      const elements = queue.pending({ purpose: 'map-element' });
      expect(elements).toHaveLength(4);
      queue.reorder(elements.map((job) => job.id).reverse());
    });
    expect(h.events).toEqual(['run:a', ...el(3), 'run:e1[2]', 'run:e2[2]', 'compensate:e2[2]', 'undo:e1[2]', 'undo:e2[3]', 'undo:e1[3]', 'undo:a']);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[2] failed', rollbackFailures: [] });
  });

  it('S-map-05: atomic false: element 2 fails and rolls itself back, the map completes, b runs', async () => {
    const h = seedHarness({ queue: 'manual' });
    const reactor = defineReactor({ name: 'map05', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map05-element', (i) => (i === 2 ? 'fail' : 'ok')), { source: ({ input }) => input('items'), fanOut: true, atomic: false, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await runFannedOut(h, reactor, { items });
    expect(h.events).toEqual(S_MAP_02_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'completed' });
  });

  it('S-map-06: b fails after the map: the map entry is undone by rollback jobs, positions 3, 2, 1, 0, then a', async () => {
    const h = seedHarness({ queue: 'manual' });
    const reactor = defineReactor({ name: 'map06', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map06-element'), { source: ({ input }) => input('items'), fanOut: true, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b', 'fail') })
      .build();
    const result = await runFannedOut(h, reactor, { items });
    expect(h.events).toEqual(S_MAP_03_EVENTS);
    expect(h.hooks).toEqual(h.events);
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
    expect((await h.runtime.find(result.executionId)).undoStack).toEqual([]);
  });

  it('S-map-09: every e2 fails once with retries 2: a retry re-enqueues the element job, so the other element runs in between', async () => {
    const h = seedHarness({ queue: 'manual' });
    const reactor = defineReactor({ name: 'map09', input })
      .step('a', plainStep(h, 'a'))
      .map('m', elementReactor(h, 'map09-element', () => 'fail-once', { retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 10 } }), {
        source: ({ input }) => input('items'),
        fanOut: true,
        waitFor: ['a'],
      })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const result = await runFannedOut(h, reactor, { items: [0, 1] });
    expect(h.events).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'run:e2[0]', 'run:e2[1]', 'run:b']);
    expect(h.hooks).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'retry:e2[0]#1', 'run:e1[1]', 'run:e2[1]', 'retry:e2[1]#1', 'run:e2[0]', 'run:e2[1]', 'run:b']);
    expect(result).toMatchObject({ status: 'completed' });
  });
});

describe('seed: maps with async units', () => {
  it("S-map-12: element 1 fails; elements roll back, then a; both elements' async units run after (units are independent)", async () => {
    const h = seedHarness({ queue: 'manual' });
    const element = defineReactor({ name: 'map12-element' })
      .step('e1', elementStep(h, 'e1'))
      .asyncStep('u', {
        waitFor: ['e1'],
        run: (item: unknown) => {
          h.record('run', `u[${Number(item)}]`);
          return `u:${Number(item)}`;
        },
        compensate: (_error: unknown, item: unknown) => h.record('compensate', `u[${Number(item)}]`),
      })
      .step('e2', { waitFor: ['e1'], ...elementStep(h, 'e2', (i) => (i === 1 ? 'fail' : 'ok')) })
      .build();
    const reactor = defineReactor({ name: 'map12', input })
      .step('a', plainStep(h, 'a'))
      .map('m', element, { source: ({ input }) => input('items'), fanOut: true, waitFor: ['a'] })
      .step('b', { waitFor: ['m'], ...plainStep(h, 'b') })
      .build();
    const started = await h.runtime.run(reactor, { items: [0, 1] });
    expect(started).toMatchObject({ status: 'dispatched', reason: 'awaiting' });
    await h.queue!.drainRounds({ delayed: 'as-due' });
    expect(h.queue!.pending()).toEqual([]);
    expect(h.events).toEqual([
      'run:a',
      'run:e1[0]',
      'run:e2[0]',
      'run:e1[1]',
      'run:e2[1]',
      'compensate:e2[1]',
      'undo:e1[1]',
      'undo:e2[0]',
      'undo:e1[0]',
      'undo:a',
      'run:u[0]',
      'run:u[1]',
    ]);
    expect(h.hooks).toEqual(h.events);
    const result = await h.runtime.awaitResult(started.executionId, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[1] failed', rollbackFailures: [] });
  });
});
