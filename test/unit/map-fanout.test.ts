import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineReactor, paged } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue } from '../../src/testing/index.js';
import { expectNoInboxLeft, fanOutWorld, jobsPerCall, jobsPerCommitOf, mostJobsPerRun, recordingElement, silent, spawnsPerCommitOf, startsPerCommitOf } from '../support/map-kit.js';
import type { FanOutWorld } from '../support/map-kit.js';
import { deferred } from '../support/recovery-kit.js';

// Fan-out maps forward (docs/design/map.md §9.3, §11.2, §17 step 7): a caller's run is dispatched,
// the map throws in its `map-settle` start job, elements are started (or skipped) by their own
// `map-element` start jobs, and the next throw goes out when the last position of the previous
// one settled. Every test runs on a manual queue drained by hand, on a virtual clock.

const input = z.object({ items: z.array(z.number()) });
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
const startJob = (mapId: string, index: number) => `${mapId}.${index}.start`;

/** Deliver the job `id` now (ahead of every other due job), then whatever map wake it left behind. */
async function deliver(queue: InProcessQueue, id: string): Promise<void> {
  queue.reorder([id]);
  expect(await queue.runNext()).toBe(true);
  await queue.drainRounds({ only: ['map-settle'] });
}

/** Ids of the pending element start jobs. */
const pendingElements = (queue: InProcessQueue) => queue.pending({ purpose: 'map-element' }).map((job) => job.id);

/** A fan-out reactor `m` over `items` with element reactor `e1 → e2`. */
function fanOutReactor(world: { log: string[] }, name: string, options: { batchSize?: number; atomic?: boolean; e2?: (i: number) => 'ok' | 'fail' } = {}) {
  const { e2, ...rest } = options;
  return defineReactor({ name, input })
    .map('m', recordingElement(world.log, `${name}-element`, e2 === undefined ? {} : { e2 }), { source: ({ input }) => input('items'), fanOut: true, ...rest })
    .build();
}

/** Run `reactor` to its dispatch (a fan-out map from a caller) and return the map's id. */
async function dispatch(world: FanOutWorld, reactor: Parameters<FanOutWorld['runtime']['run']>[0], value: unknown, executionId?: string) {
  const started = await world.runtime.run(reactor, value, executionId === undefined ? {} : { executionId });
  expect(started).toEqual({ status: 'dispatched', executionId: started.executionId, reason: 'awaiting' });
  return { id: started.executionId, mapId: `${started.executionId}.m` };
}

describe('fan-out map: throws', () => {
  it('enqueues at most batchSize element jobs per map commit, in one enqueue call per throw: 23 elements, batchSize 5', async () => {
    const world = { ...fanOutWorld(), log: [] as string[] };
    const reactor = fanOutReactor(world, 'bound23', { batchSize: 5 });
    const { id, mapId } = await dispatch(world, reactor, { items: range(23) });
    // The caller enqueued the map's start job and nothing else.
    expect(world.probe.calls.map((call) => call.jobs.map((job) => job.id))).toEqual([[`${mapId}.start`]]);
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);

    expect(jobsPerCommitOf(world, mapId, 'map-element')).toEqual([5, 5, 5, 5, 3]);
    // A throw creates no element: it writes their start payloads, and each start job creates its element.
    expect(startsPerCommitOf(world, mapId)).toEqual([5, 5, 5, 5, 3]);
    expect(spawnsPerCommitOf(world, mapId)).toEqual([]);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([5, 5, 5, 5, 3]);
    // Each throw's jobs, in index order, came from the job of the previous throw's last position.
    const throws = world.probe.calls.filter((call) => call.jobs.some((job) => job.id !== `${mapId}.start`));
    expect(throws.map((call) => [call.during, call.jobs.map((job) => job.id)])).toEqual([
      [`${mapId}.start`, range(5).map((i) => startJob(mapId, i))],
      [startJob(mapId, 4), range(5, 5).map((i) => startJob(mapId, i))],
      [startJob(mapId, 9), range(5, 10).map((i) => startJob(mapId, i))],
      [startJob(mapId, 14), range(5, 15).map((i) => startJob(mapId, i))],
      [startJob(mapId, 19), range(3, 20).map((i) => startJob(mapId, i))],
    ]);
    // No handler run enqueued more than batchSize element jobs either.
    expect(mostJobsPerRun(world.probe.calls, 'map-element')).toBe(5);
    // One job per element, one for the map's start: no other job ran.
    expect(world.probe.ran).toEqual([`${mapId}.start`, ...range(23).map((i) => startJob(mapId, i))]);

    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result.status).toBe('completed');
    expect(world.log).toEqual(range(23).flatMap((i) => [`run:e1[${i}]`, `run:e2[${i}]`]));
    expect((await world.runtime.find(id)).maps[0]).toMatchObject({ mode: 'fanOut', batchSize: 5, total: 23, dispatched: 23, started: 23, settled: 23 });
  });

  it('throws the next batch only once the last position of the previous throw settled: earlier positions settling throw nothing', async () => {
    const world = { ...fanOutWorld(), log: [] as string[] };
    const { id, mapId } = await dispatch(world, fanOutReactor(world, 'lastfirst-a', { batchSize: 3 }), { items: range(6) });
    await world.queue.drainRounds({ only: ['map-settle'] });
    expect(pendingElements(world.queue)).toEqual(range(3).map((i) => startJob(mapId, i)));

    await deliver(world.queue, startJob(mapId, 0));
    await deliver(world.queue, startJob(mapId, 1));
    // Positions 0 and 1 settled; position 2 (the last of throw 0) is still queued: no throw 1.
    expect(pendingElements(world.queue)).toEqual([startJob(mapId, 2)]);
    expect(await world.store.load(`${mapId}.3`)).toBeUndefined();
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3]);

    await deliver(world.queue, startJob(mapId, 2));
    expect(pendingElements(world.queue)).toEqual(range(3, 3).map((i) => startJob(mapId, i)));
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3, 3]);

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
  });

  it('throws the next batch as soon as the last position of the previous throw settled, while earlier positions are still queued', async () => {
    const world = { ...fanOutWorld(), log: [] as string[] };
    const { id, mapId } = await dispatch(world, fanOutReactor(world, 'lastfirst-b', { batchSize: 3 }), { items: range(7) });
    await world.queue.drainRounds({ only: ['map-settle'] });

    await deliver(world.queue, startJob(mapId, 2));
    expect(world.log).toEqual(['run:e1[2]', 'run:e2[2]']);
    // Throw 1 went out although positions 0 and 1 have not even started.
    expect(pendingElements(world.queue)).toEqual([startJob(mapId, 0), startJob(mapId, 1), ...range(3, 3).map((i) => startJob(mapId, i))]);

    // Settling the rest of throw 0, and the non-last positions of throw 1, throws nothing.
    for (const index of [0, 1, 3, 4]) await deliver(world.queue, startJob(mapId, index));
    expect(pendingElements(world.queue)).toEqual([startJob(mapId, 5)]);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3, 3]);

    await deliver(world.queue, startJob(mapId, 5));
    expect(pendingElements(world.queue)).toEqual([startJob(mapId, 6)]);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3, 3, 1]);

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
    expect(world.log).toEqual([2, 0, 1, 3, 4, 5, 6].flatMap((i) => [`run:e1[${i}]`, `run:e2[${i}]`]));
  });

  it("uses the batchSize and atomic stored with the map when the definition changed between throws (they are not in the plan's fingerprint)", async () => {
    // Process A starts the map with batchSize 2, atomic; process B, on the same store, knows the
    // same reactor (same name, version and plan) with batchSize 5, not atomic, and runs the rest.
    const logA: string[] = [];
    const logB: string[] = [];
    const atomicTwo = defineReactor({ name: 'changed', input })
      .map('m', recordingElement(logA, 'changed-element', { e2: (i) => (i === 3 ? 'fail' : 'ok') }), { source: ({ input }) => input('items'), fanOut: true, batchSize: 2 })
      .build();
    const lenientFive = defineReactor({ name: 'changed', input })
      .map('m', recordingElement(logB, 'changed-element', { e2: (i) => (i === 3 ? 'fail' : 'ok') }), { source: ({ input }) => input('items'), fanOut: true, batchSize: 5, atomic: false })
      .build();
    expect(lenientFive.fingerprint).toBe(atomicTwo.fingerprint);

    const a = fanOutWorld();
    const { id, mapId } = await dispatch(a, atomicTwo, { items: range(8) });
    await a.queue.drainRounds({ only: ['map-settle'] });
    const handedOver = a.queue.pending();
    expect(handedOver.map((job) => job.id)).toEqual([startJob(mapId, 0), startJob(mapId, 1)]);

    const b = fanOutWorld({ sharing: a, reactors: [lenientFive] });
    await b.queue.enqueue(handedOver);
    b.probe.calls.length = 0;
    await b.queue.drainRounds({ delayed: 'as-due' });
    expect(b.queue.pending()).toEqual([]);

    // Throws of 2 (stored), and the failure at 3 stopped dispatch (stored atomic): 4..7 never dispatched.
    expect(jobsPerCall(b.probe.calls, 'map-element')).toEqual([2]);
    expect(logA).toEqual([]);
    expect(logB).toEqual(['run:e1[0]', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'run:e1[2]', 'run:e2[2]', 'run:e1[3]', 'run:e2[3]', 'compensate:e2[3]', 'undo:e1[3]', 'undo:e2[2]', 'undo:e1[2]', 'undo:e2[1]', 'undo:e1[1]', 'undo:e2[0]', 'undo:e1[0]']);
    expect(await b.store.load(`${mapId}.4`)).toBeUndefined();
    const result = await b.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'm', message: 'e2[3] failed', rollbackFailures: [] });
    expect((await b.runtime.find(id)).maps[0]).toMatchObject({ batchSize: 2, atomic: true, dispatched: 4, started: 4, outcomes: { completed: 3, failed: 1 } });
  });
});

describe('fan-out map: reads ahead of the commit', () => {
  /** A world recording the state value of every commit of the map `m` of its runs. */
  function recordingWorld() {
    const states: string[] = [];
    const world = fanOutWorld({
      intercepts: {
        commit: (next, id, _revision, commit) => {
          if (id.endsWith('.m')) {
            const value = commit.snapshot.value as string | Record<string, string>;
            states.push(typeof value === 'string' ? value : Object.entries(value).map(([top, sub]) => `${top}.${sub}`)[0]!);
          }
          return next();
        },
      },
    });
    return { world, states, log: [] as string[] };
  }

  it('a throw over a stored source reads its window and the gate before its commit: one commit per throw before the enqueue, none of `dispatching` or `concluding`', async () => {
    const { world, states, log } = recordingWorld();
    const reactor = fanOutReactor({ log }, 'ahead-forward', { batchSize: 5 });
    const { id } = await dispatch(world, reactor, { items: range(23) });
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
    // The first throw is the map start job's (the map was created dispatching); each later one is
    // read ahead of the commit its signal leads to, and so is the conclusion.
    expect(states).toEqual([
      'running.enqueuing',
      'running.awaiting',
      ...range(4).flatMap(() => ['running.enqueuing', 'running.awaiting']),
      'running.awaiting',
      'completed',
    ]);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([5, 5, 5, 5, 3]);
  });

  it('a rollback reads its counters and each throw its started positions before their commits', async () => {
    const { world, states, log } = recordingWorld();
    const reactor = fanOutReactor({ log }, 'ahead-rollback', { batchSize: 5, e2: (i) => (i === 12 ? 'fail' : 'ok') });
    const { id } = await dispatch(world, reactor, { items: range(23) });
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    expect(states.filter((s) => s === 'running.dispatching' || s === 'running.concluding' || s === 'rolling_back.starting' || s === 'rolling_back.throwing')).toEqual([]);
    // Elements 0 … 12 started (13 and 14 were skipped once 12 failed): 3 rollback throws of at
    // most 5, each one commit before its enqueue; 0 … 11 undone, 12 rolled itself back.
    expect(states.filter((s) => s === 'rolling_back.enqueuing')).toHaveLength(3);
    expect(log.filter((e) => e.startsWith('undo:')).sort()).toEqual([...range(12).flatMap((i) => [`undo:e1[${i}]`, `undo:e2[${i}]`]), 'undo:e1[12]'].sort());
  });

  it('a throw over a paging function commits its dispatching state before it calls the function', async () => {
    const { world, states, log } = recordingWorld();
    const reactor = defineReactor({ name: 'ahead-paged' })
      .map('m', recordingElement(log, 'ahead-paged-element'), { fanOut: true, batchSize: 3, source: paged({ page: (offset, limit) => range(7).slice(offset, offset + limit), count: () => 7 }) })
      .build();
    const { id } = await dispatch(world, reactor, {});
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
    expect(states.filter((s) => s === 'running.dispatching')).toHaveLength(2);
  });
});

describe('fan-out map: cancel', () => {
  it('cancel(id) while awaiting the map: no further throw, the element in flight finishes, queued ones skip themselves, nothing is undone', async () => {
    const released: string[] = [];
    const world = fanOutWorld({ intercepts: { releaseLease: (next: () => Promise<unknown>, id: string) => (released.push(id), next()) } as never });
    const log: string[] = [];
    const entered = deferred();
    const release = deferred();
    const element = defineReactor({ name: 'cancel-element' })
      .step('work', {
        run: async (item: unknown) => {
          const i = Number(item);
          log.push(`run:${i}`);
          if (i === 1) {
            entered.resolve();
            await release.promise;
            log.push(`finished:${i}`);
          }
          return i;
        },
        undo: (_result: unknown, item: unknown) => void log.push(`undo:${Number(item)}`),
      })
      .build();
    const reactor = defineReactor({ name: 'cancel-fanout', input })
      .map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 3 })
      .step('after', { waitFor: ['m'], run: () => void log.push('run:after'), undo: () => void log.push('undo:after') })
      .build();
    const { id, mapId } = await dispatch(world, reactor, { items: range(6) });
    await world.queue.drainRounds({ only: ['map-settle'] });
    await deliver(world.queue, startJob(mapId, 0));

    world.queue.reorder([startJob(mapId, 1)]);
    const inFlight = world.queue.runNext();
    await entered.promise;
    const cancelled = await world.runtime.cancel(id, 'operator said stop');
    expect(cancelled).toEqual({ status: 'cancelled', executionId: id, reason: 'operator said stop', rollbackFailures: [] });
    expect(await world.store.readMapGate(mapId)).toEqual({ status: 'cancelled', stop: undefined });

    release.resolve();
    await inFlight;
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);
    expect(world.queue.failed()).toEqual([]);

    expect(log).toEqual(['run:0', 'run:1', 'finished:1']);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3]);
    expect(await world.store.load(`${mapId}.3`)).toBeUndefined();
    const states = await Promise.all(range(3).map(async (i) => (await world.store.load(`${mapId}.${i}`))?.snapshot.value));
    expect(states).toEqual(['completed', 'completed', 'cancelled']);
    // The queued element skipped itself in the first commit of its carried start: that commit
    // took its lease and gave it back, so no release call followed (and no lease is left).
    expect(released.filter((actor) => actor === `${mapId}.2`)).toEqual([]);
    expect((await world.store.load(`${mapId}.2`))?.leased).toBe(false);
    expect(await world.store.readMapStats(mapId)).toMatchObject({ started: 2, settled: 3, completed: 2, skipped: 1, rollback: { target: null } });
    expect((await world.runtime.find(id)).status).toBe('cancelled');
    expect(await world.store.readUndoStack(`${mapId}.0`)).toHaveLength(1);
    await expectNoInboxLeft(world.store, [id, mapId, ...range(3).map((i) => `${mapId}.${i}`)]);
  });
});

describe('fan-out map: inbox', () => {
  /**
   * Run a 500-element fan-out map (batchSize 20) delivering its jobs with `deliverAll`, and return
   * the sizes of the map's inbox sampled after every commit, every signal and every job.
   */
  async function inboxSizesOf(name: string, deliverAll: (queue: InProcessQueue) => Promise<void>): Promise<number[]> {
    const mapId = `${name}.m`;
    const sizes: number[] = [];
    const made: { world?: FanOutWorld } = {};
    const sample = async () => {
      if (made.world !== undefined) sizes.push((await made.world.memory.readInbox(mapId)).entries.length);
    };
    const world = (made.world = fanOutWorld({
      intercepts: {
        commit: (next) => next().then(async (landed) => (await sample(), landed)),
        signal: (next) => next().then(async (receipt) => (await sample(), receipt)),
      },
    }));
    world.probe.afterJob = sample;
    const log: string[] = [];
    const reactor = defineReactor({ name, input })
      .map('m', recordingElement(log, `${name}-element`), { source: ({ input }) => input('items'), fanOut: true, batchSize: 20 })
      .build();
    await dispatch(world, reactor, { items: range(500) }, name);
    await deliverAll(world.queue);
    expect(world.queue.pending()).toEqual([]);
    expect((await world.runtime.awaitResult(name, { timeoutMs: 1_000 })).status).toBe('completed');
    expect(log).toHaveLength(1_000);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual(range(25).map(() => 20));
    expect((await world.memory.readInbox(mapId)).entries).toEqual([]);
    expect(sizes.length).toBeGreaterThan(1_000);
    return sizes;
  }

  it("the map's inbox never holds more than 2 entries at once in a 500-element run, in order (2 at the end: the last throw's signal and settled) or in a random order", async () => {
    const inOrder = await inboxSizesOf('inbox500-in-order', async (queue) => void (await queue.drainRounds({ delayed: 'as-due' })));
    expect(Math.max(...inOrder)).toBe(2);
    // Deliver due jobs in a seeded random order, one at a time.
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    const shuffled = await inboxSizesOf('inbox500-random', async (queue) => {
      for (let jobs = 0; jobs < 2_000; jobs += 1) {
        const due = queue.pending();
        if (due.length === 0) return;
        queue.reorder([due[Math.floor(random() * due.length)]!.id]);
        await queue.runNext();
      }
    });
    expect(Math.max(...shuffled)).toBeGreaterThan(0);
    expect(Math.max(...shuffled)).toBeLessThanOrEqual(2);
  });
});

describe('fan-out map: queue modes', () => {
  it('with an inline queue (mode inline, embedded worker) run() runs a fan-out map to its outcome', async () => {
    const clock = createTestClock();
    const queue = createInProcessQueue({ mode: 'inline', clock });
    const runtime = createRuntime({ clock, queue, worker: true, logger: silent });
    const log: string[] = [];
    const reactor = defineReactor({ name: 'inline-queue', input })
      .map('m', recordingElement(log, 'inline-queue-element'), {
        source: ({ input }) => input('items'),
        fanOut: true,
        batchSize: 2,
        collect: async (results) => {
          const values: unknown[] = [];
          for await (const value of results.successes()) values.push(value);
          return values;
        },
      })
      .returns('m')
      .build();
    const result = await runtime.run(reactor, { items: range(5) });
    expect(result).toEqual({ status: 'completed', executionId: result.executionId, value: [0, 10, 20, 30, 40] });
    expect(log).toEqual(range(5).flatMap((i) => [`run:e1[${i}]`, `run:e2[${i}]`]));
    expect(queue.pending()).toEqual([]);
    expect((await runtime.find(result.executionId)).maps[0]).toMatchObject({ mode: 'fanOut', batchSize: 2, settled: 5, outcomes: { completed: 5 } });
  });
});

describe('fan-out map: sources and results', () => {
  it('an empty source completes the map without an element job; a later step reads its empty results', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const reactor = defineReactor({ name: 'fanout-empty', input })
      .map('m', recordingElement(log, 'fanout-empty-element'), { source: ({ input }) => input('items'), fanOut: true })
      .step('count', {
        args: ({ result }) => ({ results: result('m') }),
        run: async ({ results }) => {
          let seen = 0;
          for await (const _ of results) seen += 1;
          return { total: results.total, seen };
        },
      })
      .returns('count')
      .build();
    const { id, mapId } = await dispatch(world, reactor, { items: [] });
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).toEqual({ status: 'completed', executionId: id, value: { total: 0, seen: 0 } });
    expect(log).toEqual([]);
    expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([]);
    expect((await world.runtime.find(id)).maps[0]).toMatchObject({ total: 0, dispatched: 0, started: 0, settled: 0 });
    await expectNoInboxLeft(world.store, [id, mapId]);
  });

  it('a paged source is read once per throw (count asked once); without count a short page ends it', async () => {
    const data = range(7, 100);
    for (const withCount of [true, false]) {
      const world = fanOutWorld();
      const log: string[] = [];
      const pages: [number, number][] = [];
      let counts = 0;
      const reactor = defineReactor({ name: `fanout-paged-${String(withCount)}` })
        .map('m', recordingElement(log, `fanout-paged-element-${String(withCount)}`), {
          fanOut: true,
          batchSize: 3,
          source: paged({
            page: (offset, limit) => {
              pages.push([offset, limit]);
              return data.slice(offset, offset + limit);
            },
            ...(withCount
              ? {
                  count: () => {
                    counts += 1;
                    return data.length;
                  },
                }
              : {}),
          }),
        })
        .build();
      const { id } = await dispatch(world, reactor, {});
      await world.queue.drainRounds({ delayed: 'as-due' });
      expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
      expect(log.filter((e) => e.startsWith('run:e1'))).toEqual(data.map((i) => `run:e1[${i}]`));
      expect(jobsPerCall(world.probe.calls, 'map-element')).toEqual([3, 3, 1]);
      expect(pages).toEqual(
        withCount
          ? [
              [0, 3],
              [3, 3],
              [6, 1],
            ]
          : [
              [0, 3],
              [3, 3],
              [6, 3],
            ],
      );
      expect(counts).toBe(withCount ? 1 : 0);
    }
  });

  it("atomic false: a failed element rolls itself back, the others run, and collect's value is the step's result", async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const reactor = defineReactor({ name: 'fanout-lenient', input })
      .map('m', recordingElement(log, 'fanout-lenient-element', { e2: (i) => (i === 2 ? 'fail' : 'ok') }), {
        source: ({ input }) => input('items'),
        fanOut: true,
        atomic: false,
        batchSize: 2,
        collect: async (results) => (await results.page(0)).map((r) => (r.status === 'completed' ? r.value : r.status === 'failed' ? `failed: ${r.error.message}` : r.status)),
      })
      .step('after', { args: ({ result }) => ({ m: result('m') }), run: ({ m }) => m })
      .returns('after')
      .build();
    const { id } = await dispatch(world, reactor, { items: range(5) });
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).toEqual({ status: 'completed', executionId: id, value: [0, 10, 'failed: e2[2] failed', 30, 40] });
    expect(log).toEqual(['run:e1[0]', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'run:e1[2]', 'run:e2[2]', 'compensate:e2[2]', 'undo:e1[2]', 'run:e1[3]', 'run:e2[3]', 'run:e1[4]', 'run:e2[4]']);
    expect((await world.runtime.find(id)).maps[0]).toMatchObject({ atomic: false, dispatched: 5, settled: 5, outcomes: { completed: 4, failed: 1, skipped: 0 } });
  });
});

