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
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { Commit, Store, XreactorError } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';
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
