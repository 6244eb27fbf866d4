import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineReactor, fail, InvalidStateError } from '../../src/index.js';
import type { AnyReactorDefinition, RollbackFailureReport } from '../../src/index.js';
import { decodeRollbackStart } from '../../src/runtime/element-start.js';
import { createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue, JobPurpose } from '../../src/testing/index.js';
import { expectNoInboxLeft, failureSet, fanOutWorld, jobsPerCommitOf, mostJobsPerRun, recordingElement, silent, spawnsPerCommitOf } from '../support/map-kit.js';
import type { Behaviour, FanOutWorld } from '../support/map-kit.js';

// Fan-out maps rolling back (docs/design/map.md §10, §11, §17 step 8): one element-rollback
// actor per started element (`<map>.rb-<position>`, position 0 = newest-started), thrown
// batchSize at a time and run by `element-rollback` jobs; a held element lease parks the actor
// on a delayed job, up to lockSnoozeMaxAttempts lease checks. Manual queue, virtual clock.

const input = z.object({ items: z.array(z.number()) });
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
/** The forward purposes: everything but the rollback actors' jobs. */
const FORWARD: readonly JobPurpose[] = ['execution-advance', 'map-element', 'map-settle'];
/** A lease a test takes on an element, as another process would. */
const INTRUDER = 'another-process';
const LONG_MS = 60 * 60 * 1_000;

function plainStep(log: string[], label: string, behaviour: 'ok' | 'fail' = 'ok') {
  return {
    run: () => {
      log.push(`run:${label}`);
      return behaviour === 'fail' ? fail(new Error(`${label} failed`)) : label;
    },
    compensate: () => void log.push(`compensate:${label}`),
    undo: () => void log.push(`undo:${label}`),
  };
}

interface ReactorOptions {
  readonly fanOut?: boolean;
  readonly batchSize?: number;
  /** `b` runs after the map and fails: the map's entry is undone. */
  readonly after?: 'ok' | 'fail';
  readonly e1?: (i: number) => Behaviour;
  readonly e2?: (i: number) => Behaviour;
}

/** `a → m (e1 → e2 per item) → b`, recording every run, compensate and undo in `log`. */
function mapReactor(log: string[], name: string, options: ReactorOptions = {}): AnyReactorDefinition {
  const { fanOut = true, batchSize, after = 'fail', e1, e2 } = options;
  return defineReactor({ name, input })
    .step('a', plainStep(log, 'a'))
    .map('m', recordingElement(log, `${name}-element`, { ...(e1 === undefined ? {} : { e1 }), ...(e2 === undefined ? {} : { e2 }) }), {
      source: ({ input }) => input('items'),
      fanOut,
      ...(batchSize === undefined ? {} : { batchSize }),
      waitFor: ['a'],
    })
    .step('b', { waitFor: ['m'], ...plainStep(log, 'b', after) })
    .build();
}

const undone = (i: number) => [`undo:e2[${i}]`, `undo:e1[${i}]`];

/** Run to the dispatch and check it. */
async function dispatch(world: FanOutWorld, reactor: AnyReactorDefinition, items: readonly number[]) {
  const started = await world.runtime.run(reactor, { items });
  expect(started).toEqual({ status: 'dispatched', executionId: started.executionId, reason: 'awaiting' });
  return { id: started.executionId, mapId: `${started.executionId}.m` };
}

/** Deliver the element start jobs, always the pending one of the highest index first; returns the start order. */
async function startHighestFirst(queue: InProcessQueue): Promise<number[]> {
  const order: number[] = [];
  for (;;) {
    await queue.drainRounds({ only: ['map-settle', 'execution-advance'] });
    const elements = queue.pending({ purpose: 'map-element' });
    if (elements.length === 0) return order;
    const indexOf = (id: string) => Number(/\.m\.(\d+)\.start$/.exec(id)![1]);
    const next = elements.reduce((best, job) => (indexOf(job.id) > indexOf(best.id) ? job : best));
    order.push(indexOf(next.id));
    queue.reorder([next.id]);
    await queue.runNext();
  }
}

/** The element and rollback-actor ids of a map. */
const actorsOf = (mapId: string, n: number) => [...range(n).map((i) => `${mapId}.${i}`), ...range(n).map((p) => `${mapId}.rb-${p}`)];

describe('fan-out map rollback: throws', () => {
  it('enqueues at most batchSize rollback jobs per map commit, and undoes newest-started first (position order)', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-bound', { batchSize: 5 }), range(12));
    await world.queue.drainRounds({ only: ['map-settle'] });
    const started = await startHighestFirst(world.queue);
    expect(started).toEqual([4, 9, 11, 10, 8, 7, 6, 5, 3, 2, 1, 0]);
    expect(log.slice(-2)).toEqual(['run:b', 'compensate:b']);
    log.length = 0;

    // The rollback's first throw is pending: positions 0..4, i.e. the five elements started last.
    // The throw persisted no rollback actor: each start job carries its actor's start payload.
    const firstThrow = world.queue.pending({ purpose: 'element-rollback' });
    expect(firstThrow.map((job) => job.id)).toEqual(range(5).map((p) => `${mapId}.rb-${p}.start`));
    for (const [p, job] of firstThrow.entries()) {
      expect(await world.store.load(`${mapId}.rb-${p}`)).toBeUndefined();
      expect([job.start?.map, job.start?.index]).toEqual([mapId, p]);
      expect(decodeRollbackStart(job.actor!.id, job.start!.payload!)).toEqual({ reactor: 'rb-bound', step: 'm', index: started[started.length - 1 - p], throw: 0, lastOfThrow: p === 4 });
    }

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);
    expect(jobsPerCommitOf(world, mapId, 'element-rollback')).toEqual([5, 5, 2]);
    expect(spawnsPerCommitOf(world, mapId).filter((ids) => ids[0]!.includes('.rb-'))).toEqual([]);
    // Each start job created its actor, at its position, for the element started at it.
    for (const p of range(12)) {
      const context = (await world.store.load(`${mapId}.rb-${p}`))?.snapshot.context as { position: number; index: number; throw: number; lastOfThrow: boolean };
      expect([context.position, context.index, context.throw, context.lastOfThrow]).toEqual([p, started[started.length - 1 - p], Math.floor(p / 5), p % 5 === 4 || p === 11]);
    }
    const throws = world.probe.calls.filter((call) => call.jobs.some((job) => job.id.endsWith('.start') && job.actor?.kind === 'element-rollback'));
    expect(throws.map((call) => call.jobs.map((job) => job.id))).toEqual([range(5), range(5, 5), range(2, 10)].map((ps) => ps.map((p) => `${mapId}.rb-${p}.start`)));
    const newestFirst = [...started].reverse();
    expect(log).toEqual([...newestFirst.flatMap(undone), 'undo:a']);

    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
    expect((await world.runtime.find(id)).maps[0]?.rollback).toEqual({ total: 12, settled: 12, undone: 12, failed: 0, notNeeded: 0, inFlight: 0, unavailable: 0 });
    await expectNoInboxLeft(world.store, [id, mapId, ...actorsOf(mapId, 12)]);
  });

  // Regression: every rollback job also enqueued a wake job for the rollback actor it was itself
  // advancing (`<rb>.wake.<now>`, found busy: its own lease): the rollback actor's `undoing`
  // commit performed its signal's wake of the element after awaitChild had advanced it. Wakes are
  // now noted before the effects that may advance their recipient.
  it('each rollback position takes exactly one job, and no job enqueues more than batchSize element-rollback jobs', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-burst', { batchSize: 5 }), range(12));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    const forward = world.probe.ran.length;
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    expect(world.probe.ran.slice(forward)).toEqual(range(12).map((p) => `${mapId}.rb-${p}.start`));
    expect(mostJobsPerRun(world.probe.calls, 'element-rollback')).toBe(5);
  });
});

describe('fan-out map rollback: rollback actors created by their start jobs', () => {
  /**
   * A fan-out world whose store records the calls naming a rollback actor (`<map>.rb-<position>`):
   * its reads, its lease calls, and its commits with the lease they take or release; and, apart,
   * each `acquireAndLoad` of an element, with what it found (`elementTakes`). The run is
   * dispatched and its forward phase drained.
   */
  const recordedWorld = async (name: string, items: readonly number[], options: ReactorOptions) => {
    const calls: string[] = [];
    const elementTakes: string[] = [];
    const rollbackActor = (id: string) => /\.rb-\d+$/.test(id);
    const record = (method: string) => (next: () => Promise<unknown>, id: string) => (rollbackActor(id) && calls.push(`${method} ${id}`), next());
    const world = fanOutWorld({
      intercepts: {
        load: record('load'),
        acquireAndLoad: async (next: () => Promise<{ status: string }>, id: string) => {
          if (rollbackActor(id)) {
            calls.push(`acquireAndLoad ${id}`);
            return next();
          }
          const found = await next();
          if (/\.\d+$/.test(id)) elementTakes.push(`${id} ${found.status}`);
          return found;
        },
        acquireLease: record('acquireLease'),
        releaseLease: record('releaseLease'),
        commit: (next: () => Promise<unknown>, id: string, _revision: number, commit: { status: string }, commitOptions?: { takeLease?: unknown; releaseLease?: unknown }) => {
          if (rollbackActor(id)) calls.push(`commit ${id} ${commit.status}${commitOptions?.takeLease === undefined ? '' : ' take'}${commitOptions?.releaseLease === undefined ? '' : ' release'}`);
          return next();
        },
      } as never,
    });
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, name, options), items);
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    /** The recorded calls other than commits (reads and lease calls). */
    const reads = () => calls.filter((c) => !c.startsWith('commit '));
    return { world, log, id, mapId, calls, reads, elementTakes };
  };

  it('each rollback actor is created by its start job: its first commit creates it and takes the lease, nothing of it is read', async () => {
    const { world, log, id, mapId, calls, reads } = await recordedWorld('rb-carried', range(7), { batchSize: 3 });
    const starts = world.queue.pending({ purpose: 'element-rollback' });
    expect(starts.map((job) => [job.id, job.start?.index, job.start?.payload !== undefined, job.handoff])).toEqual(range(3).map((p) => [`${mapId}.rb-${p}.start`, p, true, undefined]));
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    expect(log.filter((l) => l.startsWith('undo:e'))).toEqual(range(7).flatMap((i) => undone(6 - i)));
    expect(reads()).toEqual([]);
    // Two commits each: the creating one (undoing its element, lease taken), then its report (lease given back).
    for (const p of range(7)) expect(calls.filter((c) => c.startsWith(`commit ${mapId}.rb-${p} `))).toEqual([`commit ${mapId}.rb-${p} running take`, `commit ${mapId}.rb-${p} completed release`]);
    for (const p of range(7)) {
      const actor = await world.store.load(`${mapId}.rb-${p}`);
      expect(actor?.revision).toBe(2);
      expect(actor?.leased).toBe(false);
    }
  });

  it('a rollback actor takes its element with the undo stack\'s top entry: the element\'s first undo reads nothing, the ones below it read their entry', async () => {
    const undoReads: string[] = [];
    const takes: string[] = [];
    const world = fanOutWorld({
      intercepts: {
        readUndoEntry: (next: () => Promise<unknown>, id: string, position: number) => (undoReads.push(`${id} ${position}`), next()),
        acquireAndLoad: (next: () => Promise<unknown>, id: string, _lease: unknown, options?: { undoTop?: boolean }) => (options?.undoTop === true && takes.push(id), next()),
      } as never,
    });
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-undo-top', { batchSize: 2 }), range(3));
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    // Each element: e2 (position 1) undone from the entry read with the take, e1 (position 0) read as before.
    expect(log.filter((l) => l.startsWith('undo:e'))).toEqual(range(3).flatMap((i) => undone(2 - i)));
    expect(takes.sort()).toEqual(range(3).map((p) => `${mapId}.${p}`));
    expect(undoReads.filter((r) => r.startsWith(`${mapId}.`)).sort()).toEqual(range(3).map((p) => `${mapId}.${p} 0`));
  });

  it('a rollback actor that settles in its first commit (its element failed: not needed) takes and gives back its lease in that one commit', async () => {
    // Element 1 fails; the map fails, and its started elements are rolled back, newest first.
    const { world, id, mapId, calls, reads } = await recordedWorld('rb-settle-first', range(3), { batchSize: 3, after: 'ok', e2: (i) => (i === 1 ? 'fail' : 'ok') });
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    // No separate read or lease call for any rollback actor; the one whose element failed settles in one commit that takes and releases.
    expect(reads()).toEqual([]);
    expect(calls.filter((c) => c.endsWith('take release'))).toEqual([expect.stringMatching(new RegExp(`^commit ${mapId}\\.rb-\\d completed take release$`))]);
    // (Rollback actors exist for the started elements only.)
    for (const p of range(3)) {
      const actor = await world.store.load(`${mapId}.rb-${p}`);
      if (actor !== undefined) expect(actor.leased).toBe(false);
    }
  });

  it('a duplicate start job finds its rollback actor created before it takes the element, and reads the store instead (nothing is done twice)', async () => {
    const { world, log, id, mapId, calls, reads, elementTakes } = await recordedWorld('rb-stale', range(2), { batchSize: 2 });
    const [first] = world.queue.pending({ purpose: 'element-rollback' });
    expect(first?.start).toBeDefined();
    await world.queue.runNext();
    expect(reads()).toEqual([]);
    // Position 0 is the newest-started element, 1; its rollback took it with its lease.
    expect(elementTakes).toEqual([`${mapId}.1 leased`]);
    // The same job delivered again: its resolve learns, in the one call that would take the
    // element, that the actor exists, so the element's lease is not taken (a live rollback of it
    // would otherwise find it held and snooze); nothing is committed for it, and the job reads
    // the store (taking the actor's lease with the read), finds it reported and lets the lease go.
    const before = (await world.store.load(`${mapId}.rb-0`))?.revision;
    calls.length = 0;
    elementTakes.length = 0;
    await world.queue.enqueue([{ ...first!, id: `${first!.id}.again` }]);
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(elementTakes.filter((t) => t.startsWith(`${mapId}.1 `))).toEqual([`${mapId}.1 exists`]);
    expect(reads()).toEqual([`acquireAndLoad ${mapId}.rb-0`, `releaseLease ${mapId}.rb-0`]);
    expect(calls.filter((c) => c.startsWith(`commit ${mapId}.rb-0 `))).toEqual([]);
    expect((await world.store.load(`${mapId}.rb-0`))?.revision).toBe(before);
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('failed');
    expect(log.filter((l) => l.startsWith('undo:e'))).toEqual([...undone(1), ...undone(0)]);
  });
});

describe('fan-out map rollback: element leases', () => {
  it('an element whose lease is held is retried on delayed jobs and undone once it frees, without element_in_flight', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-lease-frees'), range(3));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    const held = `${mapId}.1`;
    expect(await world.store.acquireLease(held, INTRUDER, LONG_MS)).toBe(true);
    log.length = 0;

    await world.queue.drainRounds({ delayed: 'hold' });
    // Positions 0 (element 2) and 2 (element 0) are undone; position 1 (element 1) parks on a 5 s timer.
    expect(log).toEqual([...undone(2), ...undone(0)]);
    const rb = `${mapId}.rb-1`;
    for (const attempt of [1, 2, 3]) {
      const timers = world.queue.inspect();
      expect(timers.map((t) => [t.job.id, t.dueAt - world.clock.now()])).toEqual([[`${rb}.timer.${attempt}`, 5_000]]);
      world.clock.advance(5_000);
      await world.queue.drainRounds({ delayed: 'hold' });
    }
    expect(log).toEqual([...undone(2), ...undone(0)]);
    expect(((await world.store.load(rb))?.snapshot.context as { contended: number }).contended).toBe(4);

    await world.store.releaseLease(held, INTRUDER);
    world.clock.advance(5_000);
    await world.queue.drainRounds({ delayed: 'hold' });
    expect(world.queue.pending()).toEqual([]);
    expect(log).toEqual([...undone(2), ...undone(0), ...undone(1), 'undo:a']);
    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'b', rollbackFailures: [] });
    expect((await world.runtime.find(id)).maps[0]?.rollback).toEqual({ total: 3, settled: 3, undone: 3, failed: 0, notNeeded: 0, inFlight: 0, unavailable: 0 });
  });

  it('a failed element whose lease is held still needs nothing: not_needed at once, no snooze (its rollback takes no lease it cannot have)', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-lease-failed', { e1: (i) => (i === 1 ? 'fail' : 'ok') }), range(3));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    const held = `${mapId}.1`;
    // The owner is rolling back, its map's rollback actors queued.
    expect((await world.runtime.find(id)).status).toBe('rolling_back');
    expect(await world.store.acquireLease(held, INTRUDER, LONG_MS)).toBe(true);
    await world.queue.drainRounds({ delayed: 'hold' });
    // No rollback actor parked on a timer: the held element had failed, so nothing waits for its lease.
    expect(world.queue.inspect()).toEqual([]);
    expect(world.queue.pending()).toEqual([]);
    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'm', rollbackFailures: [] });
    expect((await world.runtime.find(id)).maps[0]?.rollback).toMatchObject({ total: 2, settled: 2, undone: 1, notNeeded: 1, inFlight: 0 });
    await world.store.releaseLease(held, INTRUDER);
  });

  it('an element whose lease stays held for lockSnoozeMaxAttempts (20) checks is reported element_in_flight and left untouched; the rest are undone', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-lease-held'), range(3));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    const held = `${mapId}.1`;
    expect(await world.store.acquireLease(held, INTRUDER, LONG_MS)).toBe(true);
    log.length = 0;
    const startedAt = world.clock.now();

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);
    const rb = `${mapId}.rb-1`;
    // 20 checks: the first at once, 19 after a 5 s timer each.
    expect(world.probe.ran.filter((job) => job.startsWith(`${rb}.`))).toEqual([`${rb}.start`, ...range(19, 1).map((n) => `${rb}.timer.${n}`)]);
    expect(world.clock.now() - startedAt).toBe(19 * 5_000);
    expect(log).toEqual([...undone(2), ...undone(0), 'undo:a']);

    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed' });
    const failures = (result as { rollbackFailures: readonly RollbackFailureReport[] }).rollbackFailures;
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({
      step: 'm',
      kind: 'undo',
      reason: 'raised',
      path: [],
      map: { step: 'm', index: 1 },
      message: `element 1 of map "m" (${held}) is still held by another process after 20 lease checks; it was not undone (raise lockSnoozeMaxAttempts, or undo the run again once it is free)`,
    });
    expect((failures[0]!.error as { code?: string }).code).toBe('element_in_flight');
    // Untouched: still completed, its undo stack whole, its lease still the other process's.
    const element = await world.store.load(held);
    expect(element?.snapshot.value).toBe('completed');
    expect((await world.store.readUndoStack(held)).map((entry) => entry.step)).toEqual(['e1', 'e2']);
    expect(await world.store.hasLease(held)).toBe(true);
    expect((await world.runtime.find(id)).maps[0]?.rollback).toEqual({ total: 3, settled: 3, undone: 2, failed: 0, notNeeded: 0, inFlight: 1, unavailable: 0 });
  });
  it('lockSnoozeMaxAttempts and lockSnoozeDelayMs of the runtime apply: 3 checks 250 ms apart, then element_in_flight', async () => {
    const world = fanOutWorld({ runtime: { lockSnoozeMaxAttempts: 3, lockSnoozeDelayMs: 250 } });
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-lease-options'), range(2));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    const held = `${mapId}.0`;
    expect(await world.store.acquireLease(held, INTRUDER, LONG_MS)).toBe(true);
    log.length = 0;
    const startedAt = world.clock.now();
    await world.queue.drainRounds({ delayed: 'wait' });
    expect(world.queue.pending()).toEqual([]);
    const rb = `${mapId}.rb-1`;
    expect(world.probe.ran.filter((job) => job.startsWith(`${rb}.`))).toEqual([`${rb}.start`, `${rb}.timer.1`, `${rb}.timer.2`]);
    expect(world.clock.now() - startedAt).toBe(500);
    expect(log).toEqual([...undone(1), 'undo:a']);
    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    const failures = (result as { rollbackFailures: readonly RollbackFailureReport[] }).rollbackFailures;
    expect(failures.map((f) => [f.map, (f.error as { code?: string }).code, f.message])).toEqual([
      [{ step: 'm', index: 0 }, 'element_in_flight', `element 0 of map "m" (${held}) is still held by another process after 3 lease checks; it was not undone (raise lockSnoozeMaxAttempts, or undo the run again once it is free)`],
    ]);
    expect((await world.store.load(held))?.snapshot.value).toBe('completed');
  });
});

describe('fan-out map rollback: a gone element', () => {
  it('an element gone from the store is reported context_unavailable once, with its index; the rest are undone', async () => {
    // The memory store has no expiry: the element is made to vanish as an expired Redis key does.
    const gone = new Set<string>();
    const world = fanOutWorld({
      intercepts: {
        load: (next, id) => (gone.has(id) ? Promise.resolve(undefined) : next()),
        acquireAndLoad: (next, id) => (gone.has(id) ? Promise.resolve({ status: 'missing' as const }) : next()),
      },
    });
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-gone', { batchSize: 2 }), range(4));
    await world.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    gone.add(`${mapId}.1`);
    log.length = 0;

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);
    expect(log).toEqual([...undone(3), ...undone(2), ...undone(0), 'undo:a']);
    const result = await world.runtime.awaitResult(id, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'b' });
    const failures = (result as { rollbackFailures: readonly RollbackFailureReport[] }).rollbackFailures;
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({
      step: 'm',
      kind: 'undo',
      reason: 'raised',
      map: { step: 'm', index: 1 },
      message: `element 1 of map "m" (${mapId}.1) is gone: its retention expired; its steps cannot be undone`,
    });
    expect((failures[0]!.error as { code?: string }).code).toBe('context_unavailable');
    expect((await world.runtime.find(id)).maps[0]?.rollback).toEqual({ total: 4, settled: 4, undone: 3, failed: 0, notNeeded: 0, inFlight: 0, unavailable: 1 });
  });
});

describe('fan-out map rollback: undo and cancel', () => {
  it('undo(id) of a completed run with a fan-out map returns dispatched; awaitResult then gives cancelled, every element undone', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id, mapId } = await dispatch(world, mapReactor(log, 'rb-undo', { batchSize: 3, after: 'ok' }), range(7));
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect((await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).status).toBe('completed');
    log.length = 0;

    const undoing = await world.runtime.undo(id);
    expect(undoing).toEqual({ status: 'dispatched', executionId: id, reason: 'awaiting' });
    expect(log).toEqual(['undo:b']);
    expect((await world.runtime.find(id)).status).toBe('rolling_back');
    expect(world.queue.pending({ purpose: 'element-rollback' }).map((job) => job.id)).toEqual(range(3).map((p) => `${mapId}.rb-${p}.start`));

    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).toEqual({ status: 'cancelled', executionId: id, reason: 'undo', rollbackFailures: [] });
    expect(log).toEqual(['undo:b', ...range(7).reverse().flatMap(undone), 'undo:a']);
    expect((await world.runtime.find(id)).undoStack).toEqual([]);
    expect(jobsPerCommitOf(world, mapId, 'element-rollback')).toEqual([3, 3, 1]);
    await expectNoInboxLeft(world.store, [id, mapId, ...actorsOf(mapId, 7)]);
  });

  it('undo and cancel are refused while the run rolls back (an undo in progress, a compensation in progress), naming the rollback', async () => {
    const world = fanOutWorld();
    const log: string[] = [];
    const { id } = await dispatch(world, mapReactor(log, 'rb-refuse-undo', { after: 'ok' }), range(3));
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(await world.runtime.undo(id)).toMatchObject({ status: 'dispatched' });
    await expect(world.runtime.undo(id)).rejects.toThrow(InvalidStateError);
    await expect(world.runtime.undo(id)).rejects.toThrow(/rolling back/);
    await expect(world.runtime.cancel(id, 'stop')).rejects.toThrow(InvalidStateError);
    await expect(world.runtime.cancel(id, 'stop')).rejects.toThrow(/rolling back/);
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(await world.runtime.awaitResult(id, { timeoutMs: 1_000 })).toMatchObject({ status: 'cancelled', rollbackFailures: [] });

    // The map step failed (atomic): the owner compensates it, rolling back.
    const failing = fanOutWorld();
    const failingLog: string[] = [];
    const run = await dispatch(failing, mapReactor(failingLog, 'rb-refuse-compensate', { e2: (i) => (i === 2 ? 'fail' : 'ok') }), range(4));
    await failing.queue.drainRounds({ only: FORWARD, delayed: 'as-due' });
    expect((await failing.runtime.find(run.id)).status).toBe('rolling_back');
    expect(failing.queue.pending({ purpose: 'element-rollback' })).toHaveLength(3);
    await expect(failing.runtime.undo(run.id)).rejects.toThrow(/rolling back/);
    await expect(failing.runtime.cancel(run.id, 'stop')).rejects.toThrow(/rolling back/);
    await failing.queue.drainRounds({ delayed: 'as-due' });
    expect(await failing.runtime.awaitResult(run.id, { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'm', message: 'e2[2] failed', rollbackFailures: [] });
    expect(failingLog.filter((e) => e.startsWith('undo:'))).toEqual(['undo:e1[2]', ...undone(1), ...undone(0), 'undo:a']);
  });
});

describe('fan-out map rollback: the same outcome as inline (I-7)', () => {
  /** Run `reactor` inline (the map's elements in the caller). */
  async function inlineOutcome(reactor: AnyReactorDefinition, items: readonly number[]) {
    const clock = createTestClock();
    const runtime = createRuntime({ clock, logger: silent });
    return runtime.run(reactor, { items });
  }

  /** Run `reactor` fanned out, delivering every job in order. */
  async function fanOutOutcome(reactor: AnyReactorDefinition, items: readonly number[]) {
    const world = fanOutWorld();
    const { id } = await dispatch(world, reactor, items);
    await world.queue.drainRounds({ delayed: 'as-due' });
    expect(world.queue.pending()).toEqual([]);
    return world.runtime.awaitResult(id, { timeoutMs: 1_000 });
  }

  const shape = (result: unknown) => {
    const r = result as { status: string; step?: string; message?: string; rollbackFailures?: readonly RollbackFailureReport[] };
    return { status: r.status, step: r.step, message: r.message, rollbackFailures: failureSet(r.rollbackFailures ?? []) };
  };
  const undos = (log: readonly string[]) => log.filter((e) => e.startsWith('undo:') || e.startsWith('compensate:')).sort();

  const scenarios: { readonly name: string; readonly options: ReactorOptions; readonly failures: number; readonly step: string }[] = [
    {
      // Element 4's e2 fails (atomic); its own e1 undo throws (a failure of its self-rollback), and so do
      // element 1's e1 undo and element 3's e2 undo, undone by the map's rollback.
      name: 'an atomic element failure with element undo failures',
      options: { e2: (i) => (i === 4 ? 'fail' : i === 3 ? 'undo-fails' : 'ok'), e1: (i) => (i === 1 || i === 4 ? 'undo-fails' : 'ok') },
      failures: 3,
      step: 'm',
    },
    {
      // b fails after the map; elements 2 (e2) and 5 (e1) fail to undo.
      name: 'a later step failing, with element undo failures',
      options: { after: 'fail', e2: (i) => (i === 2 ? 'undo-fails' : 'ok'), e1: (i) => (i === 5 ? 'undo-fails' : 'ok') },
      failures: 2,
      step: 'b',
    },
  ];

  for (const scenario of scenarios) {
    it(`${scenario.name}: the final failure and rollbackFailures (as a set) equal the inline run's`, async () => {
      const items = range(6);
      const inlineLog: string[] = [];
      const fanOutLog: string[] = [];
      const key = scenario.step === 'm' ? 'i7-atomic' : 'i7-later';
      const inline = await inlineOutcome(mapReactor(inlineLog, key, { ...scenario.options, fanOut: false }), items);
      const fanned = await fanOutOutcome(mapReactor(fanOutLog, key, { ...scenario.options, fanOut: true, batchSize: 2 }), items);
      expect(shape(inline).status).toBe('failed');
      expect(shape(inline).step).toBe(scenario.step);
      expect(shape(inline).rollbackFailures).toHaveLength(scenario.failures);
      expect(shape(fanned)).toEqual(shape(inline));
      expect(undos(fanOutLog)).toEqual(undos(inlineLog));
    });
  }
});
