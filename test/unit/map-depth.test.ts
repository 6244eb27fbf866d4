import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue, TestClock } from '../../src/testing/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Fan-out maps at compose depth (docs/design/map.md §17 step 10): the execution holding the map
// step goes on in a worker when the map settles, and its own settle wakes its parent, up to the
// root; the observable order is the inline one.

const logger = pino({ level: 'silent' });
const input = z.object({ items: z.array(z.number()) });

/** A small deterministic PRNG (mulberry32): the delivery order of one seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Run the jobs one at a time, choosing at random among the due ones which runs next; when none is due, move the clock to the next. */
async function drainShuffled(queue: InProcessQueue, clock: TestClock, random: () => number): Promise<number> {
  let jobs = 0;
  for (;;) {
    const pending = queue.inspect();
    if (pending.length === 0) return jobs;
    const due = pending.filter((p) => p.dueAt <= clock.now());
    if (due.length === 0) {
      clock.advance(Math.min(...pending.map((p) => p.dueAt)) - clock.now());
      continue;
    }
    queue.reorder([due[Math.floor(random() * due.length)]!.job.id]);
    await queue.runNext();
    jobs += 1;
  }
}

describe('fan-out maps at compose depth', () => {
  it('S-map-07 fanned out: the map is in a composed child; the child compensates it, undoes c0 and fails; the root undoes a', async () => {
    const h = seedHarness({ queue: 'manual' });
    const record = (kind: 'run' | 'compensate' | 'undo', label: string) => h.record(kind, label);
    const element = defineReactor({ name: 'depth07-element' })
      .step('e1', { run: (i: unknown) => void record('run', `e1[${String(i)}]`), undo: (_r: unknown, i: unknown) => void record('undo', `e1[${String(i)}]`) })
      .step('e2', {
        waitFor: ['e1'],
        run: (i: unknown) => {
          record('run', `e2[${String(i)}]`);
          return i === 2 ? fail(new Error('e2[2] failed')) : i;
        },
        compensate: (_e: unknown, i: unknown) => void record('compensate', `e2[${String(i)}]`),
        undo: (_r: unknown, i: unknown) => void record('undo', `e2[${String(i)}]`),
      })
      .build();
    const child = defineReactor({ name: 'depth07-child', input })
      .step('c0', { run: () => void record('run', 'child.c0'), undo: () => void record('undo', 'child.c0') })
      .map('m', element, { source: ({ input }) => input('items'), fanOut: true, waitFor: ['c0'] })
      .build();
    const reactor = defineReactor({ name: 'depth07', input })
      .step('a', { run: () => void record('run', 'a'), undo: () => void record('undo', 'a') })
      .compose('child', child, { waitFor: ['a'] })
      .build();
    const started = await h.runtime.run(reactor, { items: [0, 1, 2, 3] });
    expect(started).toMatchObject({ status: 'dispatched', reason: 'awaiting' });
    await h.queue!.drainRounds({ delayed: 'as-due' });
    const result = await h.runtime.awaitResult(started.executionId, { timeoutMs: 1_000 });
    const el = (i: number) => [`run:e1[${i}]`, `run:e2[${i}]`];
    expect(h.events).toEqual([
      'run:a',
      'run:child.c0',
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
      'undo:child.c0',
      'undo:a',
    ]);
    expect(result).toMatchObject({ status: 'failed', step: 'child', message: 'e2[2] failed' });
  });

  it('a fan-out map in a composed child of a background run resumes the root, under 100 seeded delivery orders', async () => {
    for (let seed = 1; seed <= 100; seed += 1) {
      const time = createTestClock();
      const store: Store = createMemoryStore({ clock: time });
      const queue = createInProcessQueue({ mode: 'manual', clock: time });
      const runtime = createRuntime({ store, queue, clock: time, logger, worker: true });
      const failing = seed % 3 === 0 ? 4 : -1;
      const ran = new Set<number>();
      const undone = new Set<number>();
      const element = defineReactor({ name: 'bg-element' })
        .step('e', {
          run: (i: unknown) => (ran.add(Number(i)), i === failing ? fail(new Error(`element ${String(i)} failed`)) : Number(i) * 10),
          undo: (_r: unknown, i: unknown) => void undone.add(Number(i)),
        })
        .build();
      const child = defineReactor({ name: 'bg-child', input }).map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 2 }).build();
      const reactor = defineReactor({ name: 'bg-root', input }).step('open', { run: () => 'opened' }).compose('child', child, { waitFor: ['open'] }).background({ all: true }).build();
      const started = await runtime.run(reactor, { items: [0, 1, 2, 3, 4, 5] });
      expect(started.status).toBe('dispatched');
      await drainShuffled(queue, time, prng(seed));
      const result = await runtime.awaitResult(started.executionId, { timeoutMs: 10 });
      if (failing < 0) {
        expect(result, `seed ${seed}`).toMatchObject({ status: 'completed' });
        expect(undone.size, `seed ${seed}`).toBe(0);
      } else {
        expect(result, `seed ${seed}`).toMatchObject({ status: 'failed', step: 'child', message: 'element 4 failed' });
        // Nothing left in place: every element that completed was undone.
        expect([...ran].filter((i) => i !== failing && !undone.has(i)), `seed ${seed}`).toEqual([]);
      }
      expect(queue.failed(), `seed ${seed}`).toEqual([]);
      expect((await store.listActive(100)).ids, `seed ${seed}`).toEqual([]);
      await runtime.close();
    }
  }, 60_000);

  it('a fan-out map inside the elements of a fan-out map', async () => {
    const time = createTestClock();
    const store: Store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: true });
    const leaf = defineReactor({ name: 'nested-leaf' }).step('v', { run: (v: unknown) => Number(v) }).returns('v').build();
    const inner = defineReactor({ name: 'nested-inner', input: z.object({ row: z.array(z.number()) }) })
      .map('cells', leaf, { source: ({ input }) => input('row'), fanOut: true, batchSize: 2, collect: async (results) => { let sum = 0; for await (const r of results) sum += r.status === 'completed' ? (r.value) : 0; return sum; } })
      .returns('cells')
      .build();
    const outer = defineReactor({ name: 'nested-outer', input: z.object({ rows: z.array(z.array(z.number())) }) })
      .map('rows', inner, { source: ({ input }) => input('rows'), args: ({ element }) => ({ row: element() }), fanOut: true, batchSize: 2, collect: async (results) => { const sums: number[] = []; for await (const r of results) sums.push(r.status === "completed" ? (r.value) : -1); return sums; } })
      .returns('rows')
      .build();
    const started = await runtime.run(outer, { rows: [[1, 2], [3, 4, 5], [], [6]] });
    expect(started.status).toBe('dispatched');
    await queue.drainRounds();
    expect(await runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: [3, 12, 0, 6] });
    expect(queue.failed()).toEqual([]);
    await runtime.close();
  });
});
