import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { JobSpec, Queue, Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import type { InProcessQueue } from '../../src/testing/index.js';

// Recovery of fan-out maps (docs/design/map.md §13): jobs lost for good are restarted by the
// sweeper's stall redispatch; a map or rollback actor left in a recoverable state by a dead
// process is taken up by a sweep job; a lost wake of the owner is delivered by a sweep.

const logger = pino({ level: 'silent' });
const LEASE_TTL_MS = 1_000;
const STALL_MS = 5 * LEASE_TTL_MS;
const input = z.object({ items: z.array(z.number()) });

/** A queue that loses (never enqueues) the jobs `lose` picks, once each. */
function lossyQueue(inner: InProcessQueue, lose: (job: JobSpec) => boolean): Queue {
  const lost = new Set<string>();
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (key !== 'enqueue') {
        const value = Reflect.get(target, key, receiver) as unknown;
        // Bound: the queue's methods read its private fields.
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      }
      return (jobs: readonly JobSpec[]) =>
        target.enqueue(
          jobs.filter((job) => {
            if (lost.has(job.id) || !lose(job)) return true;
            lost.add(job.id);
            return false;
          }),
        );
    },
  });
}

function world(lose: (job: JobSpec) => boolean) {
  const time = createTestClock();
  const store: Store = createMemoryStore({ clock: time });
  const inner = createInProcessQueue({ mode: 'manual', clock: time });
  const queue = lossyQueue(inner, lose);
  const runtime = createRuntime({ store, queue, clock: time, logger, worker: true, leaseTtlMs: LEASE_TTL_MS });
  return { time, store, inner, runtime };
}

function reactors(log: string[], failAt?: number) {
  const element = defineReactor({ name: 'recovered-element' })
    .step('e', {
      run: (i: unknown) => {
        log.push(`run:${String(i)}`);
        return i === failAt ? fail(new Error(`element ${String(i)} failed`)) : i;
      },
      undo: (_r: unknown, i: unknown) => void log.push(`undo:${String(i)}`),
    })
    .build();
  return defineReactor({ name: 'recovered', input }).map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 3 }).build();
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('fan-out map recovery', () => {
  it('element start jobs lost for good: after mapStallMs without a report, a sweep restarts the elements still queued, and the map completes', async () => {
    const log: string[] = [];
    const w = world((job) => job.id.endsWith('.m.1.start') || job.id.endsWith('.m.2.start'));
    const started = await w.runtime.run(reactors(log), { items: items(6) });
    await w.inner.drainRounds();
    // Element 0 ran; 1 and 2 (of throw 0) never got a job, so throw 1 never went out.
    expect(log).toEqual(['run:0']);
    expect(await w.runtime.sweepOnce()).toBe(0);
    w.time.advance(STALL_MS + 1);
    expect(await w.runtime.sweepOnce()).toBe(1);
    await w.inner.drainRounds();
    expect(w.inner.failed()).toEqual([]);
    expect(log.slice(1).sort()).toEqual(['run:1', 'run:2', 'run:3', 'run:4', 'run:5']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed' });
    expect((await w.store.listActive(100)).ids).toEqual([]);
  });

  it('a rollback job lost for good: the sweep restarts it and every completed element is undone', async () => {
    const log: string[] = [];
    const w = world((job) => job.id.endsWith('.m.rb-1.start'));
    const started = await w.runtime.run(reactors(log, 5), { items: items(6) });
    await w.inner.drainRounds();
    // Positions 0 (element 5, failed: not needed) and 2.. are done; position 1 (element 4) was lost.
    expect(log.filter((l) => l.startsWith('undo:')).sort()).toEqual(['undo:0', 'undo:1', 'undo:2', 'undo:3']);
    w.time.advance(STALL_MS + 1);
    expect(await w.runtime.sweepOnce()).toBe(1);
    await w.inner.drainRounds();
    expect(log.filter((l) => l.startsWith('undo:')).sort()).toEqual(['undo:0', 'undo:1', 'undo:2', 'undo:3', 'undo:4']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'm', message: 'element 5 failed', rollbackFailures: [] });
    expect((await w.store.listActive(100)).ids).toEqual([]);
  });

  it('the map start job lost: the map is recoverable (dispatching) and a sweep job throws', async () => {
    const log: string[] = [];
    const w = world((job) => job.id.endsWith('.m.start'));
    const started = await w.runtime.run(reactors(log), { items: items(4) });
    await w.inner.drainRounds();
    expect(log).toEqual([]);
    w.time.advance(LEASE_TTL_MS + 1);
    expect(await w.runtime.sweepOnce()).toBe(1);
    await w.inner.drainRounds();
    expect(log).toEqual(['run:0', 'run:1', 'run:2', 'run:3']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed' });
  });

  it('a map that is only slow is left alone before mapStallMs, and a restart of a job that was only slow runs nothing twice', async () => {
    const log: string[] = [];
    const w = world(() => false);
    const started = await w.runtime.run(reactors(log), { items: items(3) });
    await w.inner.drainRounds({ only: ['map-settle'] });
    expect(w.inner.pending({ purpose: 'map-element' })).toHaveLength(3);
    w.time.advance(STALL_MS - 1);
    expect(await w.runtime.sweepOnce()).toBe(0);
    w.time.advance(2);
    expect(await w.runtime.sweepOnce()).toBe(1);
    await w.inner.drainRounds();
    // The restarted jobs (`.start.r1`) and the originals both ran: each element ran once.
    expect(log.sort()).toEqual(['run:0', 'run:1', 'run:2']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed' });
    expect(w.inner.failed()).toEqual([]);
  });

  it('a worker dies after the throw commit and before its enqueue: a sweep performs the enqueue again (same job ids) and the map completes', async () => {
    const log: string[] = [];
    const w = world(() => false);
    const reactor = reactors(log);
    const started = await w.runtime.run(reactor, { items: items(3) });
    const [mapStart] = w.inner.pending({ purpose: 'map-settle' });
    expect(mapStart).toBeDefined();
    // The doomed worker's enqueue of the element jobs never returns, and its clock never moves (its lease runs out).
    const hanging = new Proxy(w.inner, {
      get(target, key, receiver) {
        if (key === 'enqueue') return (jobs: readonly JobSpec[]) => (jobs.some((j) => j.id.endsWith('.m.0.start')) ? new Promise(() => undefined) : target.enqueue(jobs));
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const doomed = createEngine({ store: w.store, queue: hanging, clock: createTestClock(), logger, reactors: [reactor], leaseTtlMs: LEASE_TTL_MS });
    void createJobHandler(doomed)(mapStart!, new AbortController().signal).catch(() => undefined);
    await expect.poll(async () => JSON.stringify((await w.store.load(`${started.executionId}.m`))?.snapshot.value)).toBe(JSON.stringify({ running: 'enqueuing' }));
    w.time.advance(LEASE_TTL_MS + 1);
    expect(await w.runtime.sweepOnce()).toBe(1);
    await w.inner.drainRounds({ only: ['execution-advance', 'map-settle', 'map-element'] });
    expect(log.sort()).toEqual(['run:0', 'run:1', 'run:2']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed' });
  });

  it('a sweep never hands an owner waiting on the map\'s rollback the map\'s forward failed end', async () => {
    const log: string[] = [];
    const w = world((job) => job.id.endsWith('.m.rb-0.start'));
    const started = await w.runtime.run(reactors(log, 2), { items: items(3) });
    await w.inner.drainRounds();
    const owner = await w.store.load(started.executionId);
    expect(owner?.snapshot.value).toEqual({ rolling_back: 'compensatingChild' });
    // The map failed forward and rolls back; its rollback job was lost. Sweeping the owner (its
    // lease long gone) must not deliver the map's `failed` as the end of its undo.
    w.time.advance(LEASE_TTL_MS + 1);
    const before = w.inner.pending().length;
    await w.runtime.sweepOnce();
    const ownerJobs = w.inner.pending().slice(before).filter((j) => j.actor?.id === started.executionId);
    expect(ownerJobs).toEqual([]);
    w.time.advance(STALL_MS);
    await w.runtime.sweepOnce();
    await w.inner.drainRounds();
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'm', message: 'element 2 failed' });
    expect(log.filter((l) => l.startsWith('undo:')).sort()).toEqual(['undo:0', 'undo:1']);
  });

  it('a worker dies after a rollback actor signalled its element and before the element applied it (the worker holding the element): a sweep of the rollback actor advances the element', async () => {
    const log: string[] = [];
    const w = world(() => false);
    const reactor = reactors(log, 1);
    const started = await w.runtime.run(reactor, { items: items(2) });
    await w.inner.drainRounds({ only: ['execution-advance', 'map-settle', 'map-element'] });
    const [rb0, rb1] = w.inner.pending({ purpose: 'element-rollback' });
    // Position 0 is element 1 (failed: not needed); position 1 is element 0, completed.
    expect([rb0?.actor?.id, rb1?.actor?.id]).toEqual([`${started.executionId}.m.rb-0`, `${started.executionId}.m.rb-1`]);
    w.inner.reorder([rb0!.id]);
    await w.inner.runNext();
    const element = `${started.executionId}.m.0`;
    // The doomed worker takes the element (its rollback actor's resolve) and signals it; the
    // element's commit applying the undo never returns (and the worker's clock never moves, so its
    // lease on the element is not renewed).
    const doomedStore = new Proxy(w.store, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (key === 'commit') return (id: string, ...rest: unknown[]) => (id === element ? new Promise(() => undefined) : (value as (...a: unknown[]) => unknown).call(target, id, ...rest));
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const pending = w.inner.pending({ purpose: 'element-rollback' });
    expect(pending.map((j) => j.actor?.id)).toEqual([`${started.executionId}.m.rb-1`]);
    const doomed = createEngine({ store: doomedStore, queue: w.inner, clock: createTestClock(), logger, reactors: [reactor], leaseTtlMs: LEASE_TTL_MS });
    void createJobHandler(doomed)(pending[0]!, new AbortController().signal).catch(() => undefined);
    await expect.poll(async () => (await w.store.load(`${started.executionId}.m.rb-1`))?.snapshot.value).toBe('undoing');
    expect(log).not.toContain('undo:0');
    // The signal waits in the element's inbox, the element held by the dead worker until its lease lapses.
    expect((await w.store.load(element))?.leased).toBe(true);
    expect((await w.store.readInbox(element)).entries.map((e) => e.event.type)).toEqual(['xreactor.operator.undo']);
    w.time.advance(LEASE_TTL_MS + 1);
    expect(await w.runtime.sweepOnce()).toBeGreaterThanOrEqual(1);
    await w.inner.drainRounds({ only: ['execution-advance', 'map-settle', 'map-element', 'element-rollback'] });
    expect(log.filter((l) => l.startsWith('undo:'))).toEqual(['undo:0']);
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'm', message: 'element 1 failed' });
  });

  it("a sweep's verdict read before the owner moved on is not applied to the state it moved to: the map's forward end, seen by a sweep, does not end the owner's later wait for the map's rollback", async () => {
    const log: string[] = [];
    const time = createTestClock();
    const memory = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const element = defineReactor({ name: 'late-verdict-element' })
      .step('e', { run: (i: unknown) => (log.push(`run:${String(i)}`), i), undo: (_r: unknown, i: unknown) => void log.push(`undo:${String(i)}`) })
      .build();
    const reactor = defineReactor({ name: 'late-verdict', input })
      .step('a', { run: () => 'A', undo: () => void log.push('undo:a') })
      .map('m', element, { waitFor: ['a'], source: ({ input }) => input('items'), fanOut: true, batchSize: 3 })
      .step('b', { waitFor: ['m'], run: () => fail(new Error('b failed')) })
      .build();
    const runtime = createRuntime({ store: memory, queue, clock: time, logger, worker: true, leaseTtlMs: LEASE_TTL_MS });
    const { executionId: owner } = await runtime.run(reactor, { items: items(3) });
    const mapId = `${owner}.m`;
    await queue.drainRounds({ only: ['map-settle'] });
    expect((await memory.load(owner))?.snapshot.value).toEqual({ running: 'awaiting' });
    // A sweeper reads the owner (awaiting the map, its lease free, nothing in its inbox) and then
    // the map: the map's forward end lands between the two reads (forced here).
    let reachedLook!: () => void;
    const lookReached = new Promise<void>((resolve) => (reachedLook = resolve));
    let releaseLook!: () => void;
    const lookReleased = new Promise<void>((resolve) => (releaseLook = resolve));
    let last = '';
    const sweeperStore: Store = {
      ...memory,
      load: async (id, options) => {
        if (id === mapId && last === owner) {
          reachedLook();
          await lookReleased;
        }
        last = id;
        return memory.load(id, options);
      },
    };
    const sweeper = createRuntime({ store: sweeperStore, queue, clock: time, logger, worker: false, leaseTtlMs: LEASE_TTL_MS });
    const sweeping = sweeper.sweepOnce();
    await lookReached;
    // Meanwhile the elements complete and the map ends; the owner is held by another process
    // then (a job that finds nothing to do), so it is woken by a job, not in the map's call.
    expect(await memory.acquireLease(owner, 'another-process', 60_000)).toBe(true);
    await queue.drainRounds({ only: ['map-element', 'map-settle'] });
    expect((await memory.load(mapId))?.snapshot.value).toBe('completed');
    releaseLook();
    await sweeping;
    await memory.releaseLease(owner, 'another-process');
    // The owner's wake comes first: b fails, the owner undoes the map and waits for its rollback;
    // then the sweep's job, with the map's forward end, finds the owner in that wait.
    expect(queue.pending({ purpose: 'execution-advance' }).map((j) => j.event?.type ?? 'wake')).toEqual(['wake', 'xreactor.child.settled']);
    await queue.drainRounds();
    expect(log.slice(0, 3).sort()).toEqual(['run:0', 'run:1', 'run:2']);
    expect(log.slice(3)).toEqual(['undo:2', 'undo:1', 'undo:0', 'undo:a']);
    expect(await runtime.awaitResult(owner, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
    expect(queue.failed()).toEqual([]);
    await Promise.all([runtime.close(), sweeper.close()]);
  });
});
