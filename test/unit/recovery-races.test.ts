/**
 * Recovery when processes die or restart at awkward moments: a worker redoing a hand-off, runs
 * that become active again after the sweeper saw them idle, workers without a reactor, shutdown
 * of the embedded worker, a restarted worker's sweep schedule. Each race is forced with the test
 * clock, the manual in-process queue and stores whose calls never return.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRuntime, createWorker, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { serializeError } from '../../src/serialization/index.js';
import { createTestClock } from '../../src/testing/index.js';
import { handleInWorker, interruptJob, manualWorld, outliveLease, startDoomedWorker } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });
const tick = () => new Promise((r) => setImmediate(r));

describe('recovery at awkward moments', () => {
  it('a worker that redoes a run up to its cut carries on itself: its own job id does not swallow the hand-off', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const reactor = defineReactor({ name: 'after-a' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .step('b', { waitFor: ['a'], run: () => (ran.push('b'), 'B') })
      .background({ after: 'a' })
      .build();
    // The caller dies while its hand-off commit is in flight (the early-sent job is already queued).
    const dying: Store = new Proxy(store, {
      get: (t, k, r) =>
        k === 'commit'
          ? (id: string, rev: number, c: Parameters<Store['commit']>[2], o: Parameters<Store['commit']>[3]) =>
              c.outbox.some((e) => e.type === 'xreactor.effect.handOff') ? new Promise<number>(() => undefined) : t.commit(id, rev, c, o)
          : (Reflect.get(t, k, r) as unknown),
    });
    const caller = createRuntime({ store: dying, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-1', reactors: [reactor] });
    void caller.run(reactor, {});
    while (queue.pending().length === 0) await tick();
    outliveLease(world);
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    await queue.drain();
    await operator.sweepOnce(); // even the sweeper cannot help today
    await queue.drain();
    expect((await operator.find('run-1')).status).toBe('completed');
    expect(ran).toEqual(['a', 'a', 'b']);
    await worker.close();
  });

  it('a run continued after a sweep saw it paused is still recovered by the sweeper when its process dies', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const reactor = defineReactor({ name: 'approve' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .interrupt('approval', { waitFor: ['a'] })
      .step('b', { waitFor: ['approval'], run: () => (ran.push('b'), new Promise<string>(() => undefined)) })
      .build();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-1', reactors: [reactor] });
    await caller.run(reactor, {});
    await operator.sweepOnce(); // sees it paused
    void caller.continue('run-1', { step: 'approval', payload: {} });
    while (!ran.includes('b')) await tick();
    outliveLease(world); // the caller died inside b
    expect((await operator.find('run-1')).status).toBe('running');
    expect(await operator.sweepOnce()).toBe(1);
  });

  it('a sweep that drops a paused run while it is being continued lists it again: the run stays recoverable', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const reactor = defineReactor({ name: 'approve_race' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .interrupt('approval', { waitFor: ['a'] })
      .step('b', { waitFor: ['approval'], run: () => (ran.push('b'), new Promise<string>(() => undefined)) })
      .build();
    // The sweeper's removal of the index entry waits until the test lets it go.
    let letRemovalGo: () => void = () => undefined;
    const removalHeld = new Promise<void>((resolve) => (letRemovalGo = resolve));
    let removing = false;
    const sweeperStore: Store = new Proxy(store, {
      get: (target, key, receiver) =>
        key === 'markActive'
          ? async (id: string, active: boolean): Promise<void> => {
              if (!active) {
                removing = true;
                await removalHeld;
              }
              return target.markActive(id, active);
            }
          : (Reflect.get(target, key, receiver) as unknown),
    });
    const operator = createRuntime({ store: sweeperStore, queue, clock: time, logger, worker: false, reactors: [reactor] });
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-1', reactors: [reactor] });
    await caller.run(reactor, {});
    // The sweep has read the run paused and is about to drop it from the index...
    const sweep = operator.sweepOnce();
    while (!removing) await tick();
    // ...when the run is continued: committed running (and listed), then inside b.
    void caller.continue('run-1', { step: 'approval', payload: {} });
    while (!ran.includes('b')) await tick();
    letRemovalGo();
    expect(await sweep).toBe(0);
    // The caller dies inside b: its lease expires, and the sweeper still finds the run.
    outliveLease(world);
    expect(await operator.sweepOnce()).toBe(1);
  });

  it('an interrupt job delivered again after its worker died inside the next step performs that step again', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const reactor = defineReactor({ name: 'approve_job' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .interrupt('approval', { waitFor: ['a'] })
      .step('c', {
        waitFor: ['approval'],
        run: () => {
          ran.push('c');
          return hang ? new Promise<string>(() => undefined) : 'C';
        },
      })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'run-j', reactors: [reactor] });
    expect(await caller.run(reactor, {})).toMatchObject({ status: 'paused' });
    // A resume handed to a worker (as continue does when the run's lease is busy).
    const job = interruptJob('run-j.resume.approval', 'run-j', reactor, ['approval'], { payload: 'ok' });
    // The first worker applies it and dies inside c (its clock stands still, its lease expires).
    startDoomedWorker(world, [reactor], job);
    await expect.poll(() => ran).toEqual(['a', 'c']);
    outliveLease(world);
    hang = false;
    // The queue delivers the stalled job again to another worker: the run is no longer paused.
    await handleInWorker(world, [reactor], job);
    expect(ran).toEqual(['a', 'c', 'c']);
    expect((await caller.find('run-j')).status).toBe('completed');
  });

  it('a nested interrupt job delivered again after its worker died inside the child finishes the run', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const child = defineReactor({ name: 'nested_job_child' })
      .interrupt('approve', {})
      .step('c1', { waitFor: ['approve'], run: () => (ran.push('c1'), hang ? new Promise<string>(() => undefined) : 'C1') })
      .build();
    const parent = defineReactor({ name: 'nested_job_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .step('p2', { waitFor: ['sub'], run: () => (ran.push('p2'), 'P2') })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    expect(await caller.run(parent, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.resume.sub.approve', 'root', parent, ['sub', 'approve'], { payload: 'ok' });
    // The first worker resumes the child and dies inside c1, before the root picked that up.
    startDoomedWorker(world, [parent], job);
    await expect.poll(() => ran).toEqual(['p1', 'c1']);
    outliveLease(world);
    hang = false;
    // Delivered again: the root is still paused, the child refuses the resume (it moved on) and
    // the root must still pick up the child's new state.
    await handleInWorker(world, [parent], job);
    expect(ran).toEqual(['p1', 'c1', 'c1', 'p2']);
    expect((await caller.find('root')).status).toBe('completed');
  });

  it('an interrupt job two composed levels down, delivered again after its worker died in the middle reactor, finishes the run', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const leaf = defineReactor({ name: 'depth_leaf' })
      .interrupt('approve', {})
      .step('l1', { waitFor: ['approve'], run: () => (ran.push('l1'), 'L1') })
      .build();
    const middle = defineReactor({ name: 'depth_middle' })
      .compose('leafc', leaf, {})
      .step('m2', { waitFor: ['leafc'], run: () => (ran.push('m2'), hang ? new Promise<string>(() => undefined) : 'M2') })
      .build();
    const root = defineReactor({ name: 'depth_root' })
      .compose('midc', middle, {})
      .step('r2', { waitFor: ['midc'], run: () => (ran.push('r2'), 'R2') })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.resume.midc.leafc.approve', 'root', root, ['midc', 'leafc', 'approve'], { payload: 'ok' });
    startDoomedWorker(world, [root], job);
    await expect.poll(() => ran).toEqual(['l1', 'm2']);
    outliveLease(world);
    hang = false;
    await handleInWorker(world, [root], job);
    expect(ran).toEqual(['l1', 'm2', 'm2', 'r2']);
    expect((await caller.find('root')).status).toBe('completed');
  });

  it('an interrupt failure job delivered again after its worker died inside the child rollback ends the run failed', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const child = defineReactor({ name: 'fail_job_child' })
      .step('c0', { run: () => 'C0', undo: () => (ran.push('undo:c0'), hang ? new Promise<void>(() => undefined) : undefined) })
      .interrupt('approve', { waitFor: ['c0'] })
      .build();
    const root = defineReactor({ name: 'fail_job_root' })
      .compose('sub', child, {})
      .step('r2', { waitFor: ['sub'], run: () => 'R2' })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.timeout.sub.approve', 'root', root, ['sub', 'approve'], { error: serializeError(new Error('timed out')) });
    startDoomedWorker(world, [root], job);
    await expect.poll(() => ran).toEqual(['undo:c0']);
    outliveLease(world);
    hang = false;
    await handleInWorker(world, [root], job);
    expect(ran).toEqual(['undo:c0', 'undo:c0']);
    expect((await caller.find('root')).status).toBe('failed');
  });

  it('an undo whose process died is recovered by the sweeper', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    let hang = true;
    const reactor = defineReactor({ name: 'undoable' })
      .step('a', { run: () => 'A', undo: () => undefined })
      .step('b', { waitFor: ['a'], run: () => 'B', undo: () => (hang ? new Promise<void>(() => undefined) : undefined) })
      .build();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-1', reactors: [reactor] });
    await caller.run(reactor, {});
    void caller.undo('run-1');
    for (let i = 0; i < 20; i++) await tick();
    outliveLease(world);
    hang = false;
    expect((await operator.find('run-1')).status).toBe('rolling_back');
    expect(await operator.sweepOnce()).toBe(1);
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
    await queue.drain();
    expect((await operator.find('run-1')).status).toBe('cancelled');
    await worker.close();
  });

  it('a worker that does not know the reactor leaves the job and the run for a worker that does', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const reactor = defineReactor({ name: 'new-reactor' }).step('a', { run: () => 'A' }).background({ all: true }).build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'run-1', reactors: [reactor] });
    await caller.run(reactor, {});
    const old = createWorker({ store, queue, clock: time, logger, reactors: [], sweepIntervalMs: 0 });
    await queue.drain();
    await old.close();
    const fresh = createWorker({ store, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
    time.advance(120_000);
    await caller.sweepOnce();
    await queue.drain();
    expect((await caller.find('run-1')).status).toBe('completed');
    await fresh.close();
  });

  it('runtime.shutdown() interrupts a step of the embedded worker; close() does not wait for it', async () => {
    let sawAbort = false;
    let started = false;
    const reactor = defineReactor({ name: 'bg' })
      .step('slow', {
        run: (_a, ctx) =>
          new Promise<string>((_resolve, reject) => {
            started = true;
            ctx.signal.addEventListener('abort', () => ((sawAbort = true), reject(new Error('aborted', { cause: ctx.signal.reason }))));
          }),
      })
      .background({ all: true })
      .build();
    const runtime = createRuntime({ logger, reactors: [reactor] });
    await runtime.run(reactor, {});
    while (!started) await new Promise((r) => setTimeout(r, 5));
    runtime.shutdown('SIGTERM');
    const closed = await Promise.race([runtime.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('hung'), 1_000))]);
    expect({ closed, sawAbort }).toEqual({ closed: 'closed', sawAbort: true });
  });

  it('after shutdown() the embedded worker takes no new jobs (it would fail each one at once)', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    let attempts = 0;
    const reactor = defineReactor({ name: 'retry_after_shutdown' })
      .step('a', {
        retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 1000 },
        run: () => {
          attempts += 1;
          if (attempts === 1) throw new Error('once');
          return 'A';
        },
      })
      .background({ all: true })
      .build();
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: true, generateId: () => 'r', reactors: [reactor] });
    await runtime.run(reactor, {});
    await queue.drain();
    expect(queue.pending().map((job) => job.id)).toEqual(['r.timer.0.1']);
    runtime.shutdown('SIGTERM');
    time.advance(2_000);
    await queue.drain().catch(() => undefined);
    // The retry's timer job is left for a worker that runs: not burnt through its attempts here.
    expect(queue.failed()).toEqual([]);
    expect(queue.pending().map((job) => job.id)).toEqual(['r.timer.0.1']);
    expect(attempts).toBe(1);
  });

  it('a worker restarted on the same in-process queue still gets its scheduled sweeps', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const w1 = createWorker({ store, queue, clock: time, logger, reactors: [], sweepIntervalMs: 1_000 });
    await tick();
    time.advance(3_000);
    expect(await queue.drain()).toBe(3);
    await w1.close();
    expect(queue.pending()).toEqual([]); // (today the schedule outlives the worker)
    const w2 = createWorker({ store, queue, clock: time, logger, reactors: [], sweepIntervalMs: 1_000 });
    await tick();
    time.advance(3_000);
    expect(await queue.drain()).toBe(3);
    await w2.close();
  });
});
