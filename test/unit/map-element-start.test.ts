import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineReactor, ExecutionNotFoundError } from '../../src/index.js';
import { decodeElementStart } from '../../src/runtime/element-start.js';
import { fanOutWorld, recordingElement, spawnsPerCommitOf } from '../support/map-kit.js';

// A fan-out element is created by its start job's first commit (docs/design/map.md §19): the map's
// throw writes start payloads and stores no element.

const input = z.object({ items: z.array(z.number()) });
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

function fanOut(log: string[], name: string, options: { batchSize?: number; atomic?: boolean; e2?: (i: number) => 'ok' | 'fail' } = {}) {
  const { e2, ...rest } = options;
  return defineReactor({ name, input })
    .map('m', recordingElement(log, `${name}-element`, e2 === undefined ? {} : { e2 }), { source: ({ input }) => input('items'), fanOut: true, ...rest })
    .build();
}

describe('fan-out elements created by their start jobs', () => {
  it('no element exists before its start job ran: the throw wrote start payloads, which the jobs carry', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const started = await world.runtime.run(fanOut(log, 'starts-carried', { batchSize: 3 }), { items: range(4) });
    const mapId = `${started.executionId}.m`;
    await world.queue.drainRounds({ only: ['map-settle'] });
    const pending = world.queue.pending({ purpose: 'map-element' });
    expect(pending.map((job) => job.id)).toEqual(range(3).map((i) => `${mapId}.${i}.start`));
    for (const [i, job] of pending.entries()) {
      expect(job.start).toMatchObject({ map: mapId, index: i });
      const payload = decodeElementStart(job.actor!.id, job.start!.payload!);
      expect(payload).toMatchObject({ element: { reactor: 'starts-carried-element' }, path: ['m', String(i)], map: { id: mapId, index: i, throw: 0, lastOfThrow: i === 2, fanOut: true, atomic: true }, spawn: { index: i, input: i } });
      expect(await world.store.load(`${mapId}.${i}`)).toBeUndefined();
      await expect(world.runtime.find(`${mapId}.${i}`)).rejects.toBeInstanceOf(ExecutionNotFoundError);
    }
    // The same payloads are kept in the store, for a start job enqueued again.
    expect((await world.store.readMapStarts(mapId, 0, 4)).map((b) => b !== undefined)).toEqual([true, true, true, false]);
    expect(spawnsPerCommitOf(world, mapId)).toEqual([]);
    await world.queue.drainRounds();
    expect(await world.runtime.awaitResult(started.executionId, { timeoutMs: 100 })).toMatchObject({ status: 'completed', value: { m: { total: 4 } } });
    expect((await world.runtime.find(`${mapId}.1`)).status).toBe('completed');
    // The forward phase ended: the payloads went with the source.
    expect(await world.store.readMapStarts(mapId, 0, 4)).toEqual([undefined, undefined, undefined, undefined]);
    expect(world.queue.failed()).toEqual([]);
  });

  it('a start job delivered again after its element ran is refused by the store and reads it: nothing runs twice', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const started = await world.runtime.run(fanOut(log, 'starts-twice', { batchSize: 2 }), { items: range(2) });
    const mapId = `${started.executionId}.m`;
    await world.queue.drainRounds({ only: ['map-settle'] });
    const [first] = world.queue.pending({ purpose: 'map-element' });
    await world.queue.drainRounds();
    expect(await world.runtime.awaitResult(started.executionId, { timeoutMs: 100 })).toMatchObject({ status: 'completed' });
    // A copy of the first start job (a redelivery) under another id.
    await world.queue.enqueue([{ ...first!, id: `${first!.id}.again` }]);
    await world.queue.drainRounds();
    expect(world.queue.failed()).toEqual([]);
    expect(log.filter((line) => line === 'run:e1[0]')).toHaveLength(1);
    expect((await world.store.load(`${mapId}.0`))?.snapshot.value).toBe('completed');
  });

  it('two start jobs of one element delivered before either ran: one creates it, the other finds it and runs nothing', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const started = await world.runtime.run(fanOut(log, 'starts-racing', { batchSize: 1 }), { items: range(1) });
    await world.queue.drainRounds({ only: ['map-settle'] });
    const [job] = world.queue.pending({ purpose: 'map-element' });
    await world.queue.enqueue([{ ...job!, id: `${job!.id}.again` }]);
    expect(world.queue.pending({ purpose: 'map-element' })).toHaveLength(2);
    await world.queue.drainRounds();
    expect(world.queue.failed()).toEqual([]);
    expect(log).toEqual(['run:e1[0]', 'run:e2[0]']);
    expect(await world.runtime.awaitResult(started.executionId, { timeoutMs: 100 })).toMatchObject({ status: 'completed', value: { m: { total: 1 } } });
  });

  it('an input over the carried size is not carried: the start job reads the payload from the store', async () => {
    const world = fanOutWorld();
    const seen: number[] = [];
    const big = defineReactor({ name: 'big-element', input: z.object({ blob: z.string(), i: z.number() }) })
      .step('use', { run: ({ blob, i }: { blob: string; i: number }) => (seen.push(blob.length), i) })
      .returns('use')
      .build();
    const reactor = defineReactor({ name: 'big-map', input })
      .map('m', big, { source: ({ input }) => input('items'), fanOut: true, args: ({ element, value }) => ({ blob: value('x'.repeat(20_000)), i: element() }), collect: async (results) => (await results.page(0)).map((r) => (r.status === 'completed' ? r.value : r.status)) })
      .build();
    const started = await world.runtime.run(reactor, { items: [7, 8] });
    await world.queue.drainRounds({ only: ['map-settle'] });
    expect(world.queue.pending({ purpose: 'map-element' }).map((job) => job.start?.payload)).toEqual([undefined, undefined]);
    await world.queue.drainRounds();
    expect(seen).toEqual([20_000, 20_000]);
    expect(await world.runtime.awaitResult(started.executionId, { timeoutMs: 100 })).toMatchObject({ status: 'completed', value: { m: [7, 8] } });
  });

  it('an element whose input its schema rejects is created failed by its start job; atomic, the map fails with it and the rest skip', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const picky = defineReactor({ name: 'picky-fanout', input: z.object({ n: z.number().max(2) }) })
      .step('use', { run: ({ n }: { n: number }) => (log.push(`run:${n}`), n) })
      .returns('use')
      .build();
    const reactor = defineReactor({ name: 'picky-map', input })
      .map('m', picky, { source: ({ input }) => input('items'), fanOut: true, batchSize: 5, args: ({ element }) => ({ n: element() }) })
      .build();
    const started = await world.runtime.run(reactor, { items: [1, 3, 2] });
    const mapId = `${started.executionId}.m`;
    // Element 1 starts first: it fails at its creation, and closes the gate for the others.
    await world.queue.drainRounds({ only: ['map-settle'] });
    const jobs = world.queue.pending({ purpose: 'map-element' });
    world.queue.reorder([jobs[1]!.id, jobs[0]!.id, jobs[2]!.id]);
    await world.queue.drainRounds();
    expect(log).toEqual([]);
    const result = await world.runtime.awaitResult(started.executionId, { timeoutMs: 100 });
    expect(result).toMatchObject({ status: 'failed', step: 'm' });
    expect((result as { message?: string }).message).toMatch(/input is invalid/);
    expect((await world.store.load(`${mapId}.1`))?.snapshot.value).toBe('failed');
    // The others were created by their skip commits.
    for (const i of [0, 2]) expect((await world.store.load(`${mapId}.${i}`))?.snapshot.value).toBe('cancelled');
    expect(await world.store.readMapStats(mapId)).toMatchObject({ started: 0, failed: 1, skipped: 2, settled: 3 });
    expect(world.queue.failed()).toEqual([]);
  });
});
