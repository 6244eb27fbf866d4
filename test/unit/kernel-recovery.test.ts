/**
 * The kernel's recovery paths with a composed child: a process that dies between a child's
 * settle commit (which lands the signal in its parent's inbox) and the parent applying it, or
 * right after both (the parent's commit sent ahead of the signal, right behind the child's); an
 * awaited child that is gone. Each death is forced with a store whose commit never returns.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor, fail } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

/**
 * A store whose process dies right after the commit of `id` into `status` lands (nothing after it
 * runs: not even a commit the kernel sends right behind it, `CommitOptions.sending`, unless
 * `pair` lets that one go out first).
 */
function dyingAfter(store: Store, id: string, status: string, pair = false): Store {
  return new Proxy(store, {
    get: (t, k, r) =>
      k === 'commit'
        ? async (...[actor, revision, commit, options]: Parameters<Store['commit']>) => {
            const dies = actor === id && commit.status === status;
            const committed = await t.commit(actor, revision, commit, dies && !pair && options !== undefined ? { ...options, sending: undefined } : options);
            if (dies) return new Promise<number>(() => undefined);
            return committed;
          }
        : (Reflect.get(t, k, r) as unknown),
  });
}

function tree(ran: string[]) {
  const child = defineReactor({ name: 'kr_child' })
    .step('c1', { run: () => (ran.push('c1'), 'C1'), undo: () => void ran.push('undo:c1') })
    .build();
  return defineReactor({ name: 'kr_root' })
    .step('a', { run: () => (ran.push('a'), 'A'), undo: () => void ran.push('undo:a') })
    .compose('sub', child, { waitFor: ['a'] })
    .step('b', { waitFor: ['sub'], run: () => (ran.push('b'), 'B') })
    .build();
}

/** A caller (lease TTL 5 s) that runs `root` as r1 and dies once r1.sub's settle lands (with the parent's commit sent right behind it, with `pair`). */
function callerDying(root: ReturnType<typeof tree>, pair: boolean) {
  const time = createTestClock();
  const store = createMemoryStore({ clock: time });
  const queue = createInProcessQueue({ mode: 'manual', clock: time });
  const caller = createRuntime({ store: dyingAfter(store, 'r1.sub', 'completed', pair), queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'r1' });
  void caller.run(root, {});
  return { time, store, queue };
}

/** Once the dead caller's lease expired: a sweep and a worker finish r1 as without the death, nothing runs twice, a second sweep finds nothing, and nothing is left listed. */
async function recoveredBySweep({ time, store, queue }: ReturnType<typeof callerDying>, root: ReturnType<typeof tree>, ran: string[]): Promise<void> {
  time.advance(5_001);
  const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [root] });
  expect(await operator.sweepOnce()).toBeGreaterThanOrEqual(1);
  const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
  await queue.drain();
  expect(await operator.awaitResult('r1', { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
  expect(ran).toEqual(['a', 'c1', 'b']);
  expect((await store.load('r1'))?.inbox.entries).toEqual([]);
  // A second sweep finds nothing to do, and the index is empty once the settled actors are dropped.
  await operator.sweepOnce();
  await queue.drain();
  expect(ran).toEqual(['a', 'c1', 'b']);
  expect((await store.listActive(10)).ids).toEqual([]);
  await worker.close();
}

describe('kernel recovery', () => {
  it('a process that dies between the child settle commit and the parent applying it: the sweeper wakes the parent, which applies the signal exactly once', async () => {
    const ran: string[] = [];
    const root = tree(ran);
    const dead = callerDying(root, false);
    const { store } = dead;
    await expect.poll(async () => (await store.load('r1.sub'))?.snapshot.value).toBe('completed');
    const parent = await store.load('r1');
    expect({ value: parent?.snapshot.value, inbox: parent?.inbox.entries.map((e) => e.event.type) }).toEqual({ value: { running: 'awaiting' }, inbox: ['xreactor.child.settled'] });
    await recoveredBySweep(dead, root, ran);
  });

  it("a process that dies once the child settle commit and the parent's commit applying it (sent right behind) both landed: the sweeper recovers the parent from its outbox, and nothing runs twice", async () => {
    const ran: string[] = [];
    const root = tree(ran);
    const dead = callerDying(root, true);
    const { store } = dead;
    await expect.poll(async () => (await store.load('r1.sub'))?.snapshot.value).toBe('completed');
    const parent = await store.load('r1');
    // The signal applied (the entry consumed) in the same store step as the child's settle.
    expect({ value: parent?.snapshot.value, inbox: parent?.inbox.entries, seq: parent?.inbox.seq }).toEqual({ value: { running: 'executing' }, inbox: [], seq: 1 });
    expect(ran).toEqual(['a', 'c1']);
    await recoveredBySweep(dead, root, ran);
  });

  it('an awaiting parent whose child is gone is woken by the sweeper: the compose step fails with context_unavailable and the parent rolls back', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    const root = tree(ran);
    // The caller dies as the child is created; then the child's data is lost (as if it expired).
    let lost = false;
    const store: Store = new Proxy(inner, {
      get: (t, k, r) => {
        if (k === 'commit') {
          return async (...args: Parameters<Store['commit']>) => {
            const revision = await t.commit(...args);
            if (args[0] === 'r2' && args[2].spawn !== undefined) return new Promise<number>(() => undefined);
            return revision;
          };
        }
        if (k === 'load' || k === 'acquireAndLoad') {
          return async (id: string, ...rest: unknown[]) => (lost && id === 'r2.sub' ? (k === 'load' ? undefined : { status: 'missing' }) : (Reflect.get(t, k, r) as (...a: unknown[]) => unknown)(id, ...rest));
        }
        return Reflect.get(t, k, r) as unknown;
      },
    });
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'r2' });
    void caller.run(root, {});
    await expect.poll(async () => (await inner.load('r2'))?.snapshot.value).toEqual({ running: 'awaiting' });
    lost = true;
    time.advance(5_001);
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [root] });
    await operator.sweepOnce();
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.drain();
    const result = await operator.awaitResult('r2', { timeoutMs: 10 });
    expect(result).toMatchObject({ status: 'failed', step: 'sub' });
    if (result.status === 'failed') expect(result.error).toMatchObject({ code: 'context_unavailable' });
    expect(ran).toEqual(['a', 'undo:a']);
    await worker.close();
  });

  it('a child that settled in a call woken by its grandchild, then undone by its root in that call: the undo runs under its lease again, and a sweep meanwhile does not run it twice', async () => {
    // root: a → sub → b (fails); sub: c1 → grand → c2; grand: g1 → g2 (fails once, parks on its
    // backoff). The backoff's delayed job wakes the grandchild in a worker; its end wakes the
    // child, whose end wakes the root, whose failure undoes the child: all in that one job.
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    // The caller, which also sweeps (its reactors: those it runs).
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'r3' });
    let swept = -1;
    const grand = defineReactor({ name: 'kl_grand' })
      .step('g1', { run: () => (ran.push('g1'), 'G1') })
      .step('g2', { waitFor: ['g1'], retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 100 }, run: (_a, ctx) => (ran.push(`g2#${ctx.attempt}`), ctx.attempt === 1 ? fail(new Error('once')) : 'G2') })
      .build();
    const sub = defineReactor({ name: 'kl_sub' })
      .step('c1', { run: () => (ran.push('c1'), 'C1'), undo: () => void ran.push('undo:c1') })
      .compose('grand', grand, { waitFor: ['c1'] })
      .step('c2', {
        waitFor: ['grand'],
        run: () => (ran.push('c2'), 'C2'),
        // A sweep while the child is being undone: the child must be held, so the sweep leaves it be.
        undo: async () => {
          ran.push('undo:c2');
          time.advance(10_000);
          swept = await operator.sweepOnce();
        },
      })
      .build();
    const root = defineReactor({ name: 'kl_root' })
      .step('a', { run: () => (ran.push('a'), 'A'), undo: () => void ran.push('undo:a') })
      .compose('sub', sub, { waitFor: ['a'] })
      .step('b', { waitFor: ['sub'], run: () => (ran.push('b'), fail(new Error('b failed'))) })
      .background({ all: true })
      .build();
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], leaseTtlMs: 5_000, sweepIntervalMs: 0 });
    expect(await operator.run(root, {})).toMatchObject({ status: 'dispatched' });
    await queue.drain({ includeDelayed: true });
    expect(await operator.awaitResult('r3', { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'b' });
    expect(swept).toBe(0);
    expect(ran).toEqual(['a', 'c1', 'g1', 'g2#1', 'g2#2', 'c2', 'b', 'undo:c2', 'undo:c1', 'undo:a']);
    await worker.close();
  });

  it('a late async unit settle consumed by another process keeps the owner\'s pending work: the step it was about to run still runs', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    const root = defineReactor({ name: 'kr_units' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .asyncStep('u', { waitFor: ['a'], run: () => (ran.push('u'), 'U') })
      .step('b', { waitFor: ['a'], run: () => (ran.push('b'), 'B') })
      .returns('b')
      .build();
    // The caller dies right after the commit that dispatches u: its outbox (dispatch u, run b) is not performed.
    const dying: Store = new Proxy(store, {
      get: (t, k, r) =>
        k === 'commit'
          ? async (...args: Parameters<Store['commit']>) => {
              const revision = await t.commit(...args);
              if (args[0] === 'r4' && args[2].spawn !== undefined) return new Promise<number>(() => undefined);
              return revision;
            }
          : (Reflect.get(t, k, r) as unknown),
    });
    const caller = createRuntime({ store: dying, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'r4' });
    void caller.run(root, {});
    await expect.poll(async () => (await store.load('r4.u'))?.snapshot.value).toBe('queued');
    expect((await store.load('r4'))?.outbox.map((e) => e.type)).toEqual(['xreactor.effect.dispatchUnit', 'xreactor.effect.runStep']);
    // The caller's lease runs out; the unit is run elsewhere, and its settle wakes the owner there.
    time.advance(5_001);
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
    await queue.enqueue([{ id: 'start-u', kind: 'advance', actor: { kind: 'unit', id: 'r4.u' } }]);
    await queue.drain();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [root] });
    expect(await operator.awaitResult('r4', { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: 'B' });
    expect(ran).toEqual(['a', 'u', 'b']);
    expect((await store.load('r4'))?.inbox.entries).toEqual([]);
    await worker.close();
  });
});
