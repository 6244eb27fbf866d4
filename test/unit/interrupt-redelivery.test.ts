/**
 * Interrupt jobs and continues that meet a run whose process died at an awkward moment: a link
 * above the interrupt's execution is `running` only to pick up a sibling interrupt (it pauses on
 * this one again), or a caller's continue died inside the child. Each race is forced with stores
 * whose commits never return.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRuntime, createWorker, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';
import { interruptJob, manualWorld, outliveLease, startDoomedWorker } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

/** A store whose commit of `id` into `status` never returns (the process dies there). */
function dyingAt(store: Store, id: string, status: string, before?: () => Promise<void>): Store {
  let gate = before;
  return new Proxy(store, {
    get: (t, k, r) =>
      k === 'commit'
        ? async (...args: Parameters<Store['commit']>) => {
            if (args[0] === id && args[2].status === status) return new Promise<number>(() => undefined);
            if (gate !== undefined && args[0] !== id) {
              const g = gate;
              gate = undefined;
              await g();
            }
            return t.commit(...args);
          }
        : (Reflect.get(t, k, r) as unknown),
  });
}

describe('an interrupt delivered while a link is picking up a sibling interrupt', () => {
  it('a job for "x" that meets the root running to pick up "a" applies x once the root pauses on it again', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const child = defineReactor({ name: 'rf_child' })
      .interrupt('a', {})
      .interrupt('x', {})
      .step('c1', { waitFor: ['a', 'x'], run: () => (ran.push('c1'), 'C1') })
      .build();
    const root = defineReactor({ name: 'rf_root' })
      .compose('sub', child, {})
      .step('r2', { waitFor: ['sub'], run: () => (ran.push('r2'), 'R2') })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused', readyInterrupts: [['sub', 'a'], ['sub', 'x']] });
    // W1 applies the resume of "a" (a job), holding the root's lease; it dies after committing the
    // root `running` (compose step re-run), before the root's `paused` commit.
    let w1AtChild: () => void = () => undefined;
    const atChild = new Promise<void>((r) => (w1AtChild = r));
    let letW1Go: () => void = () => undefined;
    const w1Go = new Promise<void>((r) => (letW1Go = r));
    const w1Store = dyingAt(store, 'root', 'paused', async () => {
      w1AtChild();
      await w1Go;
    });
    const jobA = interruptJob('root.resume.sub.a', 'root', root, ['sub', 'a'], { payload: 'A' });
    startDoomedWorker(world, [root], jobA, w1Store);
    await atChild;
    // Meanwhile x is continued: checked and claimed, the lease is busy, so it becomes a job.
    expect(await caller.continue('root', { step: ['sub', 'x'], payload: 'X' })).toMatchObject({ status: 'dispatched' });
    letW1Go();
    await expect.poll(async () => (await store.load('root'))?.snapshot.value).toMatchObject({ running: expect.anything() as unknown });
    outliveLease(world); // W1 is dead; its lease expires
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.drain();
    await worker.close();
    const view = await caller.find('root');
    // x is applied once the root pauses on it again: the run completes, nothing is left pending.
    expect({ status: view.status, ran, pending: queue.pending().length }).toEqual({ status: 'completed', ran: ['c1', 'r2'], pending: 0 });
  });

  it('root -> mid -> leaf: a job for "x" that meets mid running to pick up "a" applies x', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const leaf = defineReactor({ name: 'rf3_leaf' })
      .interrupt('a', {})
      .interrupt('x', {})
      .step('l1', { waitFor: ['a', 'x'], run: () => (ran.push('l1'), 'L1') })
      .build();
    const mid = defineReactor({ name: 'rf3_mid' }).compose('leafc', leaf, {}).build();
    const root = defineReactor({ name: 'rf3_root' })
      .compose('midc', mid, {})
      .step('r2', { waitFor: ['midc'], run: () => (ran.push('r2'), 'R2') })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    let w1AtLeaf: () => void = () => undefined;
    const atLeaf = new Promise<void>((r) => (w1AtLeaf = r));
    let letW1Go: () => void = () => undefined;
    const w1Go = new Promise<void>((r) => (letW1Go = r));
    const w1Store = dyingAt(store, 'root.midc', 'paused', async () => {
      w1AtLeaf();
      await w1Go;
    });
    const jobA = interruptJob('root.resume.midc.leafc.a', 'root', root, ['midc', 'leafc', 'a'], { payload: 'A' });
    startDoomedWorker(world, [root], jobA, w1Store);
    await atLeaf;
    expect(await caller.continue('root', { step: ['midc', 'leafc', 'x'], payload: 'X' })).toMatchObject({ status: 'dispatched' });
    letW1Go();
    await expect.poll(async () => (await store.load('root.midc'))?.snapshot.value).toMatchObject({ running: expect.anything() as unknown });
    outliveLease(world);
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.drain();
    await worker.close();
    const view = await caller.find('root');
    expect({ status: view.status, ran }).toEqual({ status: 'completed', ran: ['l1', 'r2'] });
  });

  it('the active timeout of "x" that fires while the root picks up "a" is not lost', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const child = defineReactor({ name: 'rft_child' })
      .interrupt('a', {})
      .interrupt('x', { timeout: { ms: 10_000, strategy: 'active' } })
      .step('c1', { waitFor: ['a', 'x'], run: () => 'C1' })
      .build();
    const root = defineReactor({ name: 'rft_root' }).compose('sub', child, {}).build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    expect(queue.pending().map((j) => j.id)).toEqual(['root.sub.timeout.x']);
    // A caller continues "a" and dies after committing the root running, before its paused commit.
    const dying = createRuntime({ store: dyingAt(store, 'root', 'paused'), queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, reactors: [root] });
    void dying.continue('root', { step: ['sub', 'a'], payload: 'A' });
    await expect.poll(async () => (await store.load('root'))?.snapshot.value).toMatchObject({ running: expect.anything() as unknown });
    time.advance(10_001); // the lease expired and x's deadline passed: the timeout job is due
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.drain();
    await worker.close();
    // The timeout of x is applied once the root pauses on it again: the run fails.
    expect({ status: (await caller.find('root')).status, pending: queue.pending().map((j) => j.id) }).toEqual({ status: 'failed', pending: [] });
  });
});
describe('continue when its process dies, or after one that died', () => {
  it('a continue of "x" that gets the lease after a continue of "a" died mid-pickup still applies x', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const child = defineReactor({ name: 'rc_child' })
      .interrupt('a', {})
      .interrupt('x', {})
      .step('c1', { waitFor: ['a', 'x'], run: () => (ran.push('c1'), 'C1') })
      .build();
    const root = defineReactor({ name: 'rc_root' }).compose('sub', child, {}).step('r2', { waitFor: ['sub'], run: () => (ran.push('r2'), 'R2') }).build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    // Continue of x: checked and claimed now (root paused); its lease is taken only when we let it.
    let letLease: () => void = () => undefined;
    const leaseGo = new Promise<void>((r) => (letLease = r));
    let holding = true;
    const xStore: Store = new Proxy(store, {
      get: (t, k, r) =>
        k === 'acquireLease'
          ? async (...a: Parameters<Store['acquireLease']>) => {
              if (holding) {
                holding = false;
                await leaseGo;
              }
              return t.acquireLease(...a);
            }
          : (Reflect.get(t, k, r) as unknown),
    });
    const xCaller = createRuntime({ store: xStore, queue, clock: time, logger, worker: false, reactors: [root] });
    const xDone = xCaller.continue('root', { step: ['sub', 'x'], payload: 'X' }).catch((e: unknown) => e);
    await expect.poll(() => holding).toBe(false);
    // Continue of a dies after the root's running commit.
    const dyingStore: Store = new Proxy(store, {
      get: (t, k, r) =>
        k === 'commit'
          ? (...a: Parameters<Store['commit']>) => (a[0] === 'root' && a[2].status === 'paused' ? new Promise<number>(() => undefined) : t.commit(...a))
          : (Reflect.get(t, k, r) as unknown),
    });
    const aCaller = createRuntime({ store: dyingStore, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, reactors: [root] });
    void aCaller.continue('root', { step: ['sub', 'a'], payload: 'A' });
    await expect.poll(async () => (await store.load('root'))?.snapshot.value).toMatchObject({ running: expect.anything() as unknown });
    outliveLease(world);
    letLease();
    await xDone;
    // Whatever x's continue returns, the sweeper then recovers the root: it re-pauses on x, claimed.
    await caller.sweepOnce();
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.drain();
    await worker.close();
    expect({ status: (await caller.find('root')).status, ran }).toEqual({ status: 'completed', ran: ['c1', 'r2'] });
  });
});
