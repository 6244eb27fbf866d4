/**
 * Commits sent ahead of their signals (docs/actor-kernel.md, "Commits sent ahead of their
 * signals"): when a commit signals an actor the same call holds and that waits for exactly that
 * signal, the recipient's commit for it goes right behind the sender's, before either is
 * answered (`Commit.signalAhead`), and its turn takes the outcome up. Refused (the signal did not
 * land under the seq it predicted), it goes for nothing and the entry is applied as before.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, createWorker, defineReactor, fail } from '../../src/index.js';
import type { Commit, Store, XreactorError } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { fanOutWorld, recordingElement } from '../support/map-kit.js';
import { interceptStore } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

/** A commit sent ahead, as the store answered it: the actor, the status it commits, and 'landed' or the refusal's code. */
interface AheadRecord {
  readonly id: string;
  readonly status: string;
  readonly outcome: string;
}

/** Records the commits sent ahead of their signals and their outcomes. */
function recordAhead(commit: (next: () => Promise<number>, id: string, revision: number, c: Commit) => Promise<number>, records: AheadRecord[]) {
  return (next: () => Promise<number>, id: string, revision: number, c: Commit): Promise<number> => {
    const done = commit(next, id, revision, c);
    if (c.signalAhead === undefined) return done;
    return done.then(
      (landed) => (records.push({ id, status: c.status, outcome: 'landed' }), landed),
      (error: unknown) => {
        records.push({ id, status: c.status, outcome: (error as XreactorError).code });
        throw error;
      },
    );
  };
}

/** `a → sub (c1, which runs `during`) → b`. */
function tree(name: string, during: () => Promise<void>) {
  const child = defineReactor({ name: `${name}_child` })
    .step('c1', { run: async () => (await during(), 'C1') })
    .build();
  return defineReactor({ name })
    .step('a', { run: () => 'A' })
    .compose('sub', child, { waitFor: ['a'] })
    .step('b', { waitFor: ['sub'], run: () => 'B' })
    .build();
}

function world(id: string) {
  const inner = createMemoryStore({ clock: createTestClock() });
  const ahead: AheadRecord[] = [];
  const store: Store = interceptStore(inner, { commit: recordAhead((next) => next(), ahead) });
  const runtime = createRuntime({ store, logger, generateId: () => id });
  return { inner, store, runtime, ahead };
}

describe('commits sent ahead of their signals', () => {
  it("a composed child's settle: its parent's commit applying it goes right behind and lands, and the run ends as before", async () => {
    const { store, runtime, ahead } = world('s1');
    expect(await runtime.run(tree('sa_plain', async () => undefined), {})).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(ahead).toEqual([{ id: 's1', status: 'running', outcome: 'landed' }]);
    expect((await store.load('s1'))?.inbox).toEqual({ entries: [], seq: 1 });
  });

  it('a signal the parent had not seen landed before the settle: the commit sent ahead is refused (inbox_pending), and the parent applies both as before', async () => {
    const w = world('s2');
    const noise = async () => void (await w.inner.signal({ to: 's2', event: { type: 'test.noise', at: 0 }, dedupeKey: 'noise' }));
    expect(await w.runtime.run(tree('sa_noise', noise), {})).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(w.ahead).toEqual([{ id: 's2', status: 'running', outcome: 'inbox_pending' }]);
    // The settle (seq 2) consumed; the noise no state accepts is left (its parent ended completed, so it is discarded).
    expect((await w.store.load('s2'))?.inbox.seq).toBe(2);
  });

  it("the child's settle refused (a signal it had not seen): the parent's commit sent ahead is refused (signal_not_landed), then the settle goes again and the parent applies it as before", async () => {
    const w = world('s3');
    // While c1 runs, a signal lands in the child's own inbox: its settle commit is refused once.
    const noise = async () => void (await w.inner.signal({ to: 's3.sub', event: { type: 'test.noise', at: 0 }, dedupeKey: 'noise' }));
    expect(await w.runtime.run(tree('sa_refused', noise), {})).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    // One sent ahead of the refused settle (refused with it); the second settle's signal is applied in the parent's turn.
    expect(w.ahead).toEqual([{ id: 's3', status: 'running', outcome: 'signal_not_landed' }]);
    expect((await w.store.load('s3'))?.inbox).toEqual({ entries: [], seq: 1 });
  });

  it('its entry not handed to it (a store that gives no receipt): the commit sent ahead that landed is taken up before the inbox is read, and the run ends as before', async () => {
    const inner = createMemoryStore({ clock: createTestClock() });
    const ahead: AheadRecord[] = [];
    const ran: string[] = [];
    // The receipt the kernel asks for stays empty: nothing is handed over in the call.
    const stripped = interceptStore(inner, { commit: (_next, id, revision, c, options) => inner.commit(id, revision, c, options === undefined ? undefined : { ...options, delivered: undefined }) });
    const noReceipt = interceptStore(stripped, { commit: recordAhead((next) => next(), ahead) });
    const runtime = createRuntime({ store: noReceipt, logger, generateId: () => 's4' });
    const reactor = tree('sa_no_receipt', async () => void ran.push('c1'));
    expect(await runtime.run(reactor, {})).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(ahead).toEqual([{ id: 's4', status: 'running', outcome: 'landed' }]);
    expect(ran).toEqual(['c1']);
    expect((await inner.load('s4'))?.inbox).toEqual({ entries: [], seq: 1 });
  });

  it('its answer lost (a timeout: the outcome unknown): the error is thrown as for any commit, and the run is recovered from what the store holds, nothing run twice', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    const ran: string[] = [];
    const lost = interceptStore(inner, {
      commit: (next, _id, _revision, c) => (c.signalAhead === undefined ? next() : next().then(() => Promise.reject(new Error('store.commit timed out: outcome unknown')))),
    });
    const reactor = defineReactor({ name: 'sa_lost' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .compose('sub', defineReactor({ name: 'sa_lost_child' }).step('c1', { run: () => (ran.push('c1'), 'C1') }).build(), { waitFor: ['a'] })
      .step('b', { waitFor: ['sub'], run: () => (ran.push('b'), 'B') })
      .build();
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const caller = createRuntime({ store: lost, queue, clock: time, logger, worker: false, leaseTtlMs: 5_000, generateId: () => 's5' });
    await expect(caller.run(reactor, {})).rejects.toThrow('outcome unknown');
    // The parent's commit landed: it applied the settle, and its next step is its pending work.
    expect(await inner.load('s5')).toMatchObject({ snapshot: { value: { running: 'executing' } }, inbox: { entries: [], seq: 1 }, leased: false });
    time.advance(5_001);
    const operator = createRuntime({ store: inner, queue, clock: time, logger, worker: false, reactors: [reactor] });
    expect(await operator.sweepOnce()).toBeGreaterThanOrEqual(1);
    const worker = createWorker({ store: inner, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
    await queue.drain();
    expect(await operator.awaitResult('s5', { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(ran).toEqual(['a', 'c1', 'b']);
    await worker.close();
  });

  it('a run handed off after its composed child: the settle is applied ahead, the hand-off goes out from the later commit that asks for it, and the worker completes the run', async () => {
    // On the runtime's own clock: its embedded worker takes the hand-off.
    const inner = createMemoryStore();
    const ahead: AheadRecord[] = [];
    const store = interceptStore(inner, { commit: recordAhead((next) => next(), ahead) });
    const child = defineReactor({ name: 'sa_handoff_child' }).step('c1', { run: () => 'C1' }).build();
    const reactor = defineReactor({ name: 'sa_handoff' })
      .step('a', { run: () => 'A' })
      .compose('sub', child, { waitFor: ['a'] })
      .step('b', { waitFor: ['sub'], run: () => 'B' })
      .background({ after: 'sub' })
      .build();
    const runtime = createRuntime({ store, logger, worker: true, reactors: [reactor], generateId: () => 's6' });
    const started = await runtime.run(reactor, {});
    expect(started.status).toBe('dispatched');
    expect(await runtime.awaitResult('s6', { timeoutMs: 1_000 })).toMatchObject({ status: 'completed', value: { a: 'A', sub: { c1: 'C1' }, b: 'B' } });
    expect(ahead).toEqual([{ id: 's6', status: 'running', outcome: 'landed' }]);
    expect((await store.load('s6'))?.inbox.entries).toEqual([]);
    await runtime.close();
  });

  it('a fan-out map rolled back: each undone element applies its undo, and its rollback actor its end, in commits sent ahead that all land; every element undone once', async () => {
    const log: string[] = [];
    const ahead: AheadRecord[] = [];
    const w = fanOutWorld({ intercepts: { commit: recordAhead((next) => next(), ahead) } });
    const reactor = defineReactor({ name: 'sa_map', input: z.object({ items: z.array(z.number()) }) })
      .map('m', recordingElement(log, 'sa_map_element'), { source: ({ input }) => input('items'), fanOut: true, batchSize: 3 })
      .step('b', { waitFor: ['m'], run: () => fail(new Error('b failed')) })
      .build();
    const started = await w.runtime.run(reactor, { items: [0, 1, 2, 3, 4] });
    expect(started.status).toBe('dispatched');
    await w.queue.drain();
    const outcome = await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 });
    expect(outcome).toMatchObject({ status: 'failed', error: { message: 'b failed' } });
    for (const i of [0, 1, 2, 3, 4]) expect(log.filter((line) => line === `undo:e1[${i}]` || line === `undo:e2[${i}]`)).toEqual([`undo:e2[${i}]`, `undo:e1[${i}]`]);
    // Per element: its commit applying the undo (rolling back), and its rollback actor's applying its end.
    const byKind = (pattern: RegExp) => ahead.filter((r) => pattern.test(r.id)).map((r) => `${r.status}:${r.outcome}`);
    expect(byKind(/\.m\.\d+$/)).toEqual(Array.from({ length: 5 }, () => 'rolling_back:landed'));
    expect(byKind(/\.m\.rb-\d+$/)).toEqual(Array.from({ length: 5 }, () => 'completed:landed'));
    expect(ahead).toHaveLength(10);
  });
});
