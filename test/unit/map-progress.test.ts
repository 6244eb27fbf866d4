import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { MapProgressHook, MapResults } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

// The mapProgress hook (docs/design/map.md §14): once per map commit that changes the map's
// progress, from the process advancing the map, with settled / total.

const logger = pino({ level: 'silent' });
const input = z.object({ items: z.array(z.number()) });

describe('mapProgress hook', () => {
  it('reports each throw, the forward end and the rollback of a fan-out map, with settled / total', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const seen: MapProgressHook[] = [];
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: true, middleware: [{ mapProgress: (e) => void seen.push(e) }] });
    const element = defineReactor({ name: 'progress-element' }).step('e', { run: (i: unknown) => (i === 4 ? fail(new Error('four')) : i), undo: () => undefined }).build();
    const reactor = defineReactor({ name: 'progress-owner', input }).map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 2 }).build();
    const started = await runtime.run(reactor, { items: [0, 1, 2, 3, 4, 5] });
    await queue.drainRounds();
    expect(await runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'm', message: 'four' });
    const id = started.executionId;
    expect(seen.every((e) => e.executionId === id && e.reactor === 'progress-owner' && e.step === 'm' && e.map === `${id}.m` && e.total === 6)).toBe(true);
    expect(seen.map(({ event, throw: t, dispatched, settled, outcome, rollback }) => ({ event, throw: t, dispatched, settled, outcome, rollback }))).toEqual([
      { event: 'throw', throw: 0, dispatched: 2, settled: 0, outcome: undefined, rollback: undefined },
      { event: 'throw', throw: 1, dispatched: 4, settled: 2, outcome: undefined, rollback: undefined },
      { event: 'throw', throw: 2, dispatched: 6, settled: 4, outcome: undefined, rollback: undefined },
      { event: 'settled', throw: undefined, dispatched: 6, settled: 6, outcome: 'failed', rollback: undefined },
      { event: 'rollback_started', throw: undefined, dispatched: 6, settled: 6, outcome: undefined, rollback: { total: 5, settled: 0 } },
      { event: 'rollback_throw', throw: 0, dispatched: 6, settled: 6, outcome: undefined, rollback: { total: 5, settled: 0 } },
      { event: 'rollback_throw', throw: 1, dispatched: 6, settled: 6, outcome: undefined, rollback: { total: 5, settled: 2 } },
      { event: 'rollback_throw', throw: 2, dispatched: 6, settled: 6, outcome: undefined, rollback: { total: 5, settled: 4 } },
      { event: 'rolled_back', throw: undefined, dispatched: 6, settled: 6, outcome: undefined, rollback: { total: 5, settled: 5 } },
    ]);
  });
});

describe('a fan-out map step\'s value, read after the run', () => {
  it('awaitResult and find give the map step\'s MapResults reader, as run() does for an inline map', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: true });
    const element = defineReactor({ name: 'value-element' }).step('double', { run: (i: unknown) => Number(i) * 2 }).returns('double').build();
    const reactor = defineReactor({ name: 'value-owner', input }).map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 2 }).build();
    const started = await runtime.run(reactor, { items: [1, 2, 3] });
    await queue.drainRounds();
    const result = await runtime.awaitResult(started.executionId, { timeoutMs: 10 });
    expect(result.status).toBe('completed');
    for (const value of [(result as { value: { m: MapResults<number> } }).value.m, ((await runtime.find(started.executionId)).result as { value: { m: MapResults<number> } }).value.m]) {
      expect(value.total).toBe(3);
      const seen: unknown[] = [];
      for await (const r of value) seen.push(r.status === 'completed' ? r.value : r.status);
      expect(seen).toEqual([2, 4, 6]);
    }
  });
});
