import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, paged } from '../../src/index.js';
import type { MapResults } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

function world() {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const runtime = createRuntime({ clock, store, logger });
  return { clock, store, runtime };
}

const input = z.object({ items: z.array(z.number()) });

/** An element reactor doubling its item, recording runs and undos. */
function doubler(log: string[], name = 'double', failAt?: number) {
  return defineReactor({ name })
    .step('twice', {
      run: (item: unknown) => {
        log.push(`run:${String(item)}`);
        if (item === failAt) throw new Error(`element ${String(item)} broke`);
        return Number(item) * 2;
      },
      undo: (_result: unknown, item: unknown) => void log.push(`undo:${String(item)}`),
    })
    .returns('twice')
    .build();
}

/** No inbox entry left on any actor of the run. */
async function expectNoInboxLeft(store: ReturnType<typeof createMemoryStore>, ids: readonly string[]) {
  for (const id of ids) {
    const loaded = await store.load(id);
    expect(loaded?.inbox.entries ?? [], id).toEqual([]);
  }
}

describe('inline map', () => {
  it('find(id).maps reports each started map step\'s progress: settled of total, by outcome', async () => {
    const { runtime } = world();
    const log: string[] = [];
    const ok = defineReactor({ name: 'progress_ok', input }).map('m', doubler(log, 'double_ok'), { source: ({ input }) => input('items') }).build();
    const done = await runtime.run(ok, { items: [1, 2, 3] });
    expect((await runtime.find(done.executionId)).maps).toEqual([
      {
        step: 'm',
        id: `${done.executionId}.m`,
        mode: 'inline',
        batchSize: 50,
        atomic: true,
        total: 3,
        dispatched: 3,
        started: 3,
        settled: 3,
        outcomes: { completed: 3, failed: 0, halted: 0, aborted: 0, skipped: 0, cancelled: 0 },
      },
    ]);
    const broken = defineReactor({ name: 'progress_failed', input }).map('m', doubler(log, 'double_failing', 2), { source: ({ input }) => input('items') }).build();
    const failed = await runtime.run(broken, { items: [1, 2, 3] });
    expect(failed.status).toBe('failed');
    const maps = (await runtime.find(failed.executionId)).maps;
    expect(maps).toHaveLength(1);
    // Atomic: dispatch stopped after the failing element (2 of 3); both started elements rolled back (1 undone, the failed one not needed).
    expect(maps[0]).toMatchObject({ step: 'm', started: 2, dispatched: 2, outcomes: { completed: 1, failed: 1 }, rollback: { total: 2, settled: 2, undone: 1, notNeeded: 1 } });
    const plain = defineReactor({ name: 'progress_none' }).step('a', { run: () => 1 }).build();
    expect((await runtime.find((await runtime.run(plain, undefined as never)).executionId)).maps).toEqual([]);
  });

  it('an empty source completes the map at once, and a later step reads its empty results', async () => {
    const { runtime, store } = world();
    const log: string[] = [];
    const reactor = defineReactor({ name: 'empty', input })
      .map('m', doubler(log), { source: ({ input }) => input('items') })
      .step('count', {
        args: ({ result }) => ({ results: result('m') }),
        run: async ({ results }) => {
          const all = [];
          for await (const r of results as MapResults<number>) all.push(r);
          return { total: (results as MapResults<number>).total, seen: all.length };
        },
      })
      .returns('count')
      .build();
    const result = await runtime.run(reactor, { items: [] });
    expect(result).toMatchObject({ status: 'completed', value: { total: 0, seen: 0 } });
    expect(log).toEqual([]);
    await expectNoInboxLeft(store, [result.executionId, `${result.executionId}.m`]);
  });

  it('a paged source is read one page of batchSize per batchSize elements; count is asked once', async () => {
    const { runtime } = world();
    const log: string[] = [];
    const pages: [number, number][] = [];
    let counts = 0;
    const data = [10, 11, 12, 13, 14];
    const withCount = defineReactor({ name: 'paged-count' })
      .map('m', doubler(log, 'double-count'), {
        batchSize: 2,
        source: paged({
          page: (offset, limit) => {
            pages.push([offset, limit]);
            return data.slice(offset, offset + limit);
          },
          count: () => {
            counts += 1;
            return data.length;
          },
        }),
      })
      .build();
    expect(await runtime.run(withCount, {})).toMatchObject({ status: 'completed' });
    expect(log).toEqual(['run:10', 'run:11', 'run:12', 'run:13', 'run:14']);
    expect(pages).toEqual([
      [0, 2],
      [2, 2],
      [4, 1],
    ]);
    expect(counts).toBe(1);

    pages.length = 0;
    log.length = 0;
    const withoutCount = defineReactor({ name: 'paged-nocount' })
      .map('m', doubler(log, 'double-nocount'), { batchSize: 2, source: paged({ page: (offset, limit) => (pages.push([offset, limit]), data.slice(offset, offset + limit)) }) })
      .build();
    expect(await runtime.run(withoutCount, {})).toMatchObject({ status: 'completed' });
    expect(log).toEqual(['run:10', 'run:11', 'run:12', 'run:13', 'run:14']);
    // The short third page ends the collection: no fourth call.
    expect(pages).toEqual([
      [0, 2],
      [2, 2],
      [4, 2],
    ]);
  });

  it("collect's value is the step's result, read by a later step and returned by run", async () => {
    const { runtime } = world();
    const log: string[] = [];
    const reactor = defineReactor({ name: 'collected', input })
      .map('m', doubler(log, 'double-collect'), {
        source: ({ input }) => input('items'),
        collect: async (results) => {
          let sum = 0;
          for await (const v of results.successes()) sum += Number(v);
          const first = await results.page(0, 2);
          return { sum, first: first.map((r) => r.status) };
        },
      })
      .step('after', { args: ({ result }) => ({ m: result('m') }), run: ({ m }) => m })
      .returns('after')
      .build();
    expect(await runtime.run(reactor, { items: [1, 2, 3] })).toMatchObject({ status: 'completed', value: { sum: 12, first: ['completed', 'completed'] } });
  });

  it('collect throwing fails the map step and undoes every completed element, newest first', async () => {
    const { runtime, store } = world();
    const log: string[] = [];
    const reactor = defineReactor({ name: 'collect-throws', input })
      .map('m', doubler(log, 'double-throws'), {
        source: ({ input }) => input('items'),
        collect: () => {
          throw new Error('cannot collect');
        },
      })
      .build();
    const result = await runtime.run(reactor, { items: [1, 2, 3] });
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'cannot collect' });
    expect(log).toEqual(['run:1', 'run:2', 'run:3', 'undo:3', 'undo:2', 'undo:1']);
    const m = `${result.executionId}.m`;
    await expectNoInboxLeft(store, [result.executionId, m, `${m}.0`, `${m}.1`, `${m}.2`, `${m}.rb-0`, `${m}.rb-1`, `${m}.rb-2`]);
    expect((await store.readMapStats(m))?.rollback).toMatchObject({ target: 3, settled: 3, undone: 3 });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await store.listActive(100)).ids).toEqual([]);
  });

  it('undoAll replaces the per-element undos: called once with the completed elements in index order', async () => {
    const { runtime } = world();
    const log: string[] = [];
    const calls: { index: number; value: unknown }[][] = [];
    const reactor = defineReactor({ name: 'undo-all', input })
      .map('m', doubler(log, 'double-undoall'), {
        source: ({ input }) => input('items'),
        undoAll: async (completed) => {
          const seen = [];
          for await (const c of completed) seen.push(c);
          calls.push(seen);
        },
      })
      .step('boom', {
        waitFor: ['m'],
        run: () => {
          throw new Error('boom');
        },
      })
      .build();
    const result = await runtime.run(reactor, { items: [1, 2, 3] });
    expect(result).toMatchObject({ status: 'failed', step: 'boom' });
    expect(log).toEqual(['run:1', 'run:2', 'run:3']);
    expect(calls).toEqual([
      [
        { index: 0, value: 2 },
        { index: 1, value: 4 },
        { index: 2, value: 6 },
      ],
    ]);
  });

  it('an element whose input cannot be built fails before its first step (atomic: the map fails, completed elements are undone)', async () => {
    const { runtime } = world();
    const log: string[] = [];
    const picky = defineReactor({ name: 'picky', input: z.object({ n: z.number() }) })
      .step('use', {
        run: ({ n }: { n: number }) => void log.push(`run:${n}`),
        undo: (_r: unknown, { n }: { n: number }) => void log.push(`undo:${n}`),
      })
      .build();
    const reactor = defineReactor({ name: 'bad-input', input })
      .map('m', picky, {
        source: ({ input }) => input('items'),
        args: ({ element }) => ({
          n: element().transform((n) => {
            if (n === 2) throw new Error('two is not allowed');
            return n;
          }),
        }),
      })
      .build();
    const result = await runtime.run(reactor, { items: [1, 2, 3] });
    expect(result).toMatchObject({ status: 'failed', step: 'm' });
    expect((result as { message: string }).message).toMatch(/element 1: argument "n" from element\(\) cannot be resolved: two is not allowed/);
    expect(log).toEqual(['run:1', 'undo:1']);
  });

  it('an element rejected by its input schema fails; with atomic false the map completes and its results hold the failure', async () => {
    const { runtime } = world();
    const log: string[] = [];
    const picky = defineReactor({ name: 'picky-schema', input: z.object({ n: z.number().max(2) }) })
      .step('use', { run: ({ n }: { n: number }) => (log.push(`run:${n}`), n) })
      .returns('use')
      .build();
    const reactor = defineReactor({ name: 'bad-schema', input })
      .map('m', picky, {
        source: ({ input }) => input('items'),
        atomic: false,
        args: ({ element }) => ({ n: element() }),
        collect: async (results) => (await results.page(0)).map((r) => (r.status === 'completed' ? r.value : r.status)),
      })
      .build();
    const result = await runtime.run(reactor, { items: [1, 3, 2] });
    expect(result).toMatchObject({ status: 'completed', value: { m: [1, 'failed', 2] } });
    expect(log).toEqual(['run:1', 'run:2']);
  });
});
