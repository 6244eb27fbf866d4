/**
 * The Store contract: one suite every adapter passes. Each test gets a fresh store from
 * `makeStore` (for Redis: a fresh key prefix) and cleans it up.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION, ExecutionNotFoundError, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit, CommitWrites, LoadedActor, LoadedExecution, Store } from '../../src/index.js';
import { encodeSnapshot } from '../../src/store/snapshot-codec.js';
import type { OutboxEffect } from '../../src/store/store.js';
import { describeActorKernelContract } from './actor-kernel-contract.js';
import { describeMapStoreContract } from './map-store-contract.js';
import { describeUnreadableContract } from './unreadable-contract.js';

/** A store under test and how to dispose of it. */
export interface StoreUnderTest {
  readonly store: Store;
  readonly cleanup: () => Promise<void>;
}

/** The machine version both adapters load by default. */
const V = EXECUTION_MACHINE_VERSION;
/** The inbox of an actor no signal ever reached. */
const NO_INBOX = { entries: [], seq: 0 };

/** A load as other reads return it: without `leased` and `marked` (which only `load` says). */
function withoutLeased(loaded: LoadedActor | undefined): LoadedExecution | undefined {
  if (loaded === undefined) return undefined;
  const { leased: _leased, marked: _marked, results: _results, ...rest } = loaded;
  return rest;
}

const commit = (value: string, writes: Partial<CommitWrites> = {}, outbox: readonly OutboxEffect[] = []): Commit => ({
  snapshot: { kind: 'execution', machineVersion: V, value, context: { n: value } },
  status: 'running',
  writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [], ...writes },
  outbox,
});

const undoEntry = (step: string, position: number) => ({ position, step, args: { of: step }, result: { done: step } });
const stored = (step: string) => ({ step, args: { of: step }, result: { done: step } });

/** Registers the Store contract suite for one adapter. */
export function describeStoreContract(name: string, makeStore: () => Promise<StoreUnderTest>): void {
  describe(`Store contract: ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    const fresh = async (): Promise<Store> => {
      const made = await makeStore();
      cleanups.push(made.cleanup);
      return made.store;
    };
    const created = async (id = 'e1'): Promise<Store> => {
      const store = await fresh();
      await store.create({ id, reactor: 'checkout', input: { order: 7 }, commit: commit('pending') });
      return store;
    };
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    describe('create and load', () => {
      it('create with list records the execution in the active index with it; without, it does not; a refused create lists nothing', async () => {
        const store = await fresh();
        await store.markActive('before', true);
        expect(await store.create({ id: 'listed', reactor: 'r', input: null, commit: commit('pending') }, { list: true })).toBe(1);
        expect(await store.create({ id: 'unlisted', reactor: 'r', input: null, commit: commit('pending') })).toBe(1);
        expect((await store.listActive(10)).ids).toEqual(['before', 'listed']);
        await store.markActive('listed', false);
        await expect(store.create({ id: 'listed', reactor: 'r', input: null, commit: commit('pending') }, { list: true })).rejects.toMatchObject({ code: 'execution_exists' });
        // In the create's atomic step nothing is listed for a refused create; on a Cluster the entry
        // is written beside the script (the index is in another slot), and a sweep drops it.
        expect((await store.listActive(10)).ids).toEqual(name === 'redis cluster' ? ['before', 'listed'] : ['before']);
      });

      it('creates at revision 1, loads that snapshot, and refuses a duplicate id', async () => {
        const store = await fresh();
        expect(await store.create({ id: 'e1', reactor: 'r', input: { a: 1 }, commit: commit('pending') })).toBe(1);
        expect(await store.load('e1')).toEqual({ revision: 1, snapshot: { kind: 'execution', machineVersion: V, value: 'pending', context: { n: 'pending' } }, outbox: [], inbox: NO_INBOX, leased: false, marked: false });
        const duplicate = store.create({ id: 'e1', reactor: 'r', input: { a: 2 }, commit: commit('other') });
        await expect(duplicate).rejects.toBeInstanceOf(XreactorError);
        await expect(duplicate).rejects.toMatchObject({ code: 'execution_exists' });
        expect(await store.readInput('e1')).toEqual({ a: 1 });
        expect((await store.load('e1'))?.snapshot.value).toBe('pending');
      });

      it('loads undefined for an unknown id and refuses to commit or read one', async () => {
        const store = await fresh();
        expect(await store.load('nope')).toBeUndefined();
        await expect(store.commit('nope', 1, commit('x'))).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readInput('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readResults('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readResults('nope', ['a'])).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readUndoEntry('nope', 0)).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readUndoStack('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
        await expect(store.readTrace('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
      });

      it('applies the writes of the first commit at create', async () => {
        const store = await fresh();
        await store.create({
          id: 'e1',
          reactor: 'r',
          input: null,
          commit: commit('running', { results: [['a', 1]], pushUndo: [undoEntry('a', 0)], trace: [{ type: 'run', step: 'a', at: 1 }] }, [{ type: 'enqueue', params: { job: 'j1' } }]),
        });
        expect(await store.readResults('e1')).toEqual(new Map([['a', 1]]));
        expect(await store.readUndoStack('e1')).toEqual([stored('a')]);
        expect(await store.readTrace('e1')).toEqual([{ type: 'run', step: 'a', at: 1 }]);
        expect((await store.load('e1'))?.outbox).toEqual([{ type: 'enqueue', params: { job: 'j1' } }]);
      });

      it('round-trips the input, Dates and nested values included', async () => {
        const store = await fresh();
        const input = { at: new Date('2024-02-29T12:34:56.789Z'), nested: { list: [1, 'two', { three: [3n, null, undefined] }], tags: new Set(['a']) } };
        await store.create({ id: 'e1', reactor: 'r', input, commit: commit('pending') });
        const read = (await store.readInput('e1')) as typeof input;
        expect(read).toEqual(input);
        expect(read.at).toBeInstanceOf(Date);
      });

      it('refuses to load a snapshot of a machine version this build does not know, naming the version', async () => {
        const store = await fresh();
        await store.create({ id: 'e1', reactor: 'r', input: {}, commit: { ...commit('pending'), snapshot: { kind: 'execution', machineVersion: 99, value: 'x', context: {} } } });
        const load = store.load('e1');
        await expect(load).rejects.toBeInstanceOf(DeserializationError);
        await expect(load).rejects.toThrow(/machine version 99/);
      });
    });

    describe('fenced commit', () => {
      it('advances the revision by one per commit and stores the next snapshot and outbox', async () => {
        const store = await created();
        const outbox = [{ type: 'enqueue', params: { id: 'job-1', at: new Date(5) } }, { type: 'publish', params: null }];
        expect(await store.commit('e1', 1, commit('running', {}, outbox))).toBe(2);
        expect(await store.commit('e1', 2, commit('completed', {}, outbox))).toBe(3);
        expect(await store.load('e1')).toEqual({ revision: 3, snapshot: { kind: 'execution', machineVersion: V, value: 'completed', context: { n: 'completed' } }, outbox, inbox: NO_INBOX, leased: false, marked: false });
        expect(await store.commit('e1', 3, commit('completed'))).toBe(4);
        expect((await store.load('e1'))?.outbox).toEqual([]);
      });

      it('refuses the second of two writers that loaded the same revision, and keeps the first one\'s progress', async () => {
        const store = await created();
        const hostA = await store.load('e1');
        const hostB = await store.load('e1');
        expect(hostA?.revision).toBe(1);
        expect(hostB?.revision).toBe(1);
        const writesOf = (who: string): Partial<CommitWrites> => ({
          results: [['a', `from ${who}`], [`only-${who}`, who]],
          pushUndo: [undoEntry(`a-${who}`, 0)],
          trace: [{ type: 'run', step: who, at: 1 }],
        });
        expect(await store.commit('e1', hostA!.revision, commit('by A', writesOf('A'), [{ type: 'x', params: 'A' }]))).toBe(2);

        const stale = store.commit('e1', hostB!.revision, commit('by B', { ...writesOf('B'), truncateUndoTo: 0 }, [{ type: 'x', params: 'B' }]));
        await expect(stale).rejects.toBeInstanceOf(StaleRevisionError);
        await expect(stale).rejects.toThrow(/revision 2, not 1/);

        expect(await store.load('e1')).toEqual({ revision: 2, snapshot: { kind: 'execution', machineVersion: V, value: 'by A', context: { n: 'by A' } }, outbox: [{ type: 'x', params: 'A' }], inbox: NO_INBOX, leased: false, marked: false });
        expect(await store.readResults('e1')).toEqual(new Map([['a', 'from A'], ['only-A', 'A']]));
        expect(await store.readUndoStack('e1')).toEqual([stored('a-A')]);
        expect(await store.readTrace('e1')).toEqual([{ type: 'run', step: 'A', at: 1 }]);
      });

      it('refuses an expected revision ahead of the stored one', async () => {
        const store = await created();
        await expect(store.commit('e1', 5, commit('x'))).rejects.toBeInstanceOf(StaleRevisionError);
        expect((await store.load('e1'))?.revision).toBe(1);
      });

      // A store may send the commits of one turn of the event loop together (the Redis store's
      // group commit): each is still fenced and answered on its own, as if sent alone in order.
      it('answers commits issued in the same turn each on its own: applied, stale, inbox pending, unknown, gap', async () => {
        const store = await fresh();
        const ids = ['g1', 'g2', 'g3', 'g4', 'g5', 'g6'];
        for (const id of ids) await store.create({ id, reactor: 'r', input: null, commit: commit('pending') }, id === 'g6' ? { lease: { owner: 'me', ttlMs: 60_000 } } : undefined);
        await store.signal({ to: 'g4', event: { type: 'test.ping' }, dedupeKey: 'k' });
        const waiting = store.waitSettled('g6', 10_000);
        await waiting.listening;
        const outcomes = await Promise.allSettled([
          store.commit('g1', 1, commit('one', { results: [['a', 1]], pushUndo: [undoEntry('a', 0)], trace: [{ type: 'run', step: 'a', at: 1 }] })),
          store.commit('g2', 7, commit('stale')),
          store.commit('g3', 1, commit('three', { results: [['b', 3]] })),
          store.commit('g4', 1, commit('unseen inbox')),
          store.commit('nope', 1, commit('unknown')),
          store.commit('g5', 1, commit('gap', { pushUndo: [undoEntry('z', 4)] })),
          store.commit('g6', 1, commit('done'), { releaseLease: 'me', announce: true }),
          store.commit('g1', 1, commit('second writer of g1')),
        ]);
        const [one, stale, three, inbox, unknown, gap, done, second] = outcomes;
        expect(one).toEqual({ status: 'fulfilled', value: 2 });
        expect(stale).toMatchObject({ status: 'rejected', reason: expect.any(StaleRevisionError) });
        expect(three).toEqual({ status: 'fulfilled', value: 2 });
        expect(inbox).toMatchObject({ status: 'rejected', reason: { name: 'InboxPendingError' } });
        expect(unknown).toMatchObject({ status: 'rejected', reason: expect.any(ExecutionNotFoundError) });
        expect(gap).toMatchObject({ status: 'rejected', reason: { code: 'undo_position_invalid' } });
        expect(done).toEqual({ status: 'fulfilled', value: 2 });
        expect(second).toMatchObject({ status: 'rejected', reason: expect.any(StaleRevisionError) });
        expect(await waiting.settled).toBe(true);
        expect(await store.hasLease('g6')).toBe(false);
        expect((await store.load('g1'))?.snapshot.value).toBe('one');
        expect(await store.readResults('g1')).toEqual(new Map([['a', 1]]));
        expect(await store.readUndoStack('g1')).toEqual([stored('a')]);
        expect(await store.readTrace('g1')).toEqual([{ type: 'run', step: 'a', at: 1 }]);
        expect(await store.readResults('g3')).toEqual(new Map([['b', 3]]));
        for (const id of ['g2', 'g4', 'g5']) expect((await store.load(id))?.revision, id).toBe(1);
        expect(await store.load('nope')).toBeUndefined();
      });
    });

    describe('results, undo stack and trace', () => {
      it('keeps results outside the snapshot, overwriting a step\'s result on a later commit', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', { results: [['a', { id: 1 }], ['b', [1, 2]]] }));
        await store.commit('e1', 2, commit('running', { results: [['a', { id: 2 }], ['c', undefined]] }));
        expect(await store.readResults('e1')).toEqual(new Map<string, unknown>([['a', { id: 2 }], ['b', [1, 2]], ['c', undefined]]));
        expect(await store.readResults('e1', ['b', 'missing', 'a'])).toEqual(new Map<string, unknown>([['b', [1, 2]], ['a', { id: 2 }]]));
        expect(await store.readResults('e1', [])).toEqual(new Map());
        expect((await store.load('e1'))?.snapshot.context).toEqual({ n: 'running' });
      });

      it('pushes undo entries by position, oldest first, and reads one entry', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', { pushUndo: [undoEntry('a', 0)] }));
        await store.commit('e1', 2, commit('running', { pushUndo: [undoEntry('b', 1), undoEntry('c', 2)] }));
        expect(await store.readUndoStack('e1')).toEqual([stored('a'), stored('b'), stored('c')]);
        expect(await store.readUndoEntry('e1', 1)).toEqual(stored('b'));
        expect(await store.readUndoEntry('e1', 3)).toBeUndefined();
      });

      it('replaces the entry at an existing position', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', { pushUndo: [undoEntry('a', 0), undoEntry('b', 1)] }));
        await store.commit('e1', 2, commit('running', { pushUndo: [undoEntry('b2', 1)] }));
        expect(await store.readUndoStack('e1')).toEqual([stored('a'), stored('b2')]);
      });

      it('truncates then pushes in one commit', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', { pushUndo: [undoEntry('a', 0), undoEntry('b', 1), undoEntry('c', 2)] }));
        await store.commit('e1', 2, commit('running', { truncateUndoTo: 1, pushUndo: [undoEntry('d', 1)] }));
        expect(await store.readUndoStack('e1')).toEqual([stored('a'), stored('d')]);
        await store.commit('e1', 3, commit('rolling_back', { truncateUndoTo: 0 }));
        expect(await store.readUndoStack('e1')).toEqual([]);
        expect(await store.readUndoEntry('e1', 0)).toBeUndefined();
        await store.commit('e1', 4, commit('running', { truncateUndoTo: 5, pushUndo: [undoEntry('e', 0)] }));
        expect(await store.readUndoStack('e1')).toEqual([stored('e')]);
      });

      it('appends trace entries in order across commits', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', { trace: [{ type: 'run', step: 'a', attempt: 1, at: 10 }] }));
        await store.commit('e1', 2, commit('running', { trace: [{ type: 'retry', step: 'a', attempt: 2, at: 20, delayMs: 5 }, { type: 'run', step: 'b', at: 30 }] }));
        expect(await store.readTrace('e1')).toEqual([
          { type: 'run', step: 'a', attempt: 1, at: 10 },
          { type: 'retry', step: 'a', attempt: 2, at: 20, delayMs: 5 },
          { type: 'run', step: 'b', at: 30 },
        ]);
      });

      it('returns copies: mutating what was written or read never changes what is stored', async () => {
        const store = await created();
        const result = { nested: { n: 1 } };
        const context = { deep: { list: [1] } };
        await store.commit('e1', 1, {
          ...commit('running', { results: [['a', result]], pushUndo: [{ position: 0, step: 'a', args: { x: [1] }, result }] }),
          snapshot: { kind: 'execution', machineVersion: V, value: 'running', context },
        });
        result.nested.n = 2;
        context.deep.list.push(2);
        const read = (await store.readResults('e1')).get('a') as typeof result;
        read.nested.n = 3;
        const entry = await store.readUndoEntry('e1', 0);
        (entry!.args as { x: number[] }).x.push(9);
        const loaded = await store.load('e1');
        (loaded!.snapshot.context as typeof context).deep.list.push(3);
        expect((await store.readResults('e1')).get('a')).toEqual({ nested: { n: 1 } });
        expect(await store.readUndoEntry('e1', 0)).toEqual({ step: 'a', args: { x: [1] }, result: { nested: { n: 1 } } });
        expect((await store.load('e1'))?.snapshot.context).toEqual({ deep: { list: [1] } });
      });

      it('round-trips Dates and nested values in snapshots, results, undo entries and trace', async () => {
        const store = await created();
        const at = new Date('2030-01-02T03:04:05.006Z');
        const value = { at, nested: [{ when: at, big: 2n ** 70n, n: null, u: undefined, f: 1.5, s: 'ü' }] };
        await store.commit('e1', 1, {
          ...commit('running', { results: [['a', value]], pushUndo: [{ position: 0, step: 'a', args: value, result: value }], trace: [{ type: 'run', step: 'a', at: at.getTime() }] }),
          snapshot: { kind: 'execution', machineVersion: V, value: { running: 'a' }, context: value },
        });
        const loaded = await store.load('e1');
        expect(loaded?.snapshot).toEqual({ kind: 'execution', machineVersion: V, value: { running: 'a' }, context: value });
        expect((loaded?.snapshot.context as typeof value).nested[0]!.when).toBeInstanceOf(Date);
        expect((await store.readResults('e1')).get('a')).toEqual(value);
        expect(await store.readUndoEntry('e1', 0)).toEqual({ step: 'a', args: value, result: value });
        expect(await store.readTrace('e1')).toEqual([{ type: 'run', step: 'a', at: at.getTime() }]);
      });
    });

    describe('leases', () => {
      it('lets one owner hold a lease, renew it, and release it; another owner is refused meanwhile', async () => {
        const store = await created();
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        await store.releaseLease('e1', 'host-b');
        expect(await store.hasLease('e1')).toBe(true);
        await store.releaseLease('e1', 'host-a');
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
      });

      it('load reads results with the snapshot when asked and the execution is completed (the steps asked, or all), none otherwise', async () => {
        const store = await created();
        await store.commit('e1', 1, { ...commit('running', { results: [['a', { n: 1 }], ['b', 'two']] }), inboxSeen: 0 });
        // Not completed: no results are read, whatever is asked.
        expect((await store.load('e1', { results: ['a'] }))?.results).toBeUndefined();
        expect((await store.load('e1', { results: 'all' }))?.results).toBeUndefined();
        await store.commit('e1', 2, { ...commit('completed', { results: [['c', null]] }), status: 'completed', inboxSeen: 0 });
        const loaded = await store.load('e1', { results: ['b', 'missing'] });
        expect(loaded?.results).toEqual(new Map([['b', 'two']]));
        expect(loaded?.revision).toBe(3);
        expect(withoutLeased(loaded)).toEqual(withoutLeased(await store.load('e1')));
        expect((await store.load('e1'))?.results).toBeUndefined();
        expect((await store.load('e1', { results: 'all' }))?.results).toEqual(new Map<string, unknown>([['a', { n: 1 }], ['b', 'two'], ['c', null]]));
        expect((await store.load('e1', { results: [] }))?.results).toEqual(new Map());
        expect(await store.load('unknown', { results: 'all' })).toBeUndefined();
      });

      it('load says whether a lease is live, read with the rest (held, released, expired)', async () => {
        const store = await created();
        expect((await store.load('e1'))?.leased).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        expect((await store.load('e1'))?.leased).toBe(true);
        await store.releaseLease('e1', 'host-a');
        expect((await store.load('e1'))?.leased).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 50)).toBe(true);
        await vi.waitFor(async () => expect((await store.load('e1'))?.leased).toBe(false), { timeout: 5_000, interval: 10 });
      });

      it('expires a lease that is not renewed, after which another owner takes it', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-a', 50)).toBe(true);
        await vi.waitFor(async () => expect(await store.hasLease('e1')).toBe(false), { timeout: 5_000, interval: 10 });
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(false);
      });

      it('extends the lease when the same owner renews it', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-a', 50)).toBe(true);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        // A witness lease taken after the renewal, with the first TTL: once it expires, so would have the first.
        expect(await store.acquireLease('witness', 'host-a', 50)).toBe(true);
        await vi.waitFor(async () => expect(await store.hasLease('witness')).toBe(false), { timeout: 5_000, interval: 10 });
        expect(await store.hasLease('e1')).toBe(true);
      });
    });

    describe('lease and announcement in the same step as create and commit', () => {
      const lease = (owner: string) => ({ owner, ttlMs: 60_000 });
      const busy = { code: 'execution_busy' };

      it('create with a lease takes it for that owner', async () => {
        const store = await fresh();
        expect(await store.create({ id: 'e1', reactor: 'r', input: { a: 1 }, commit: commit('pending') }, { lease: lease('host-a') })).toBe(1);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        expect(await store.readInput('e1')).toEqual({ a: 1 });
      });

      it('create with a lease another owner holds throws execution_busy and writes nothing', async () => {
        const store = await fresh();
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        const refused = store.create({ id: 'e1', reactor: 'r', input: { a: 1 }, commit: commit('pending', { results: [['a', 1]] }) }, { lease: lease('host-a'), announce: true });
        await expect(refused).rejects.toBeInstanceOf(XreactorError);
        await expect(refused).rejects.toMatchObject(busy);
        await expect(refused).rejects.toThrow(/execution e1 .*another live process holds/);
        expect(await store.load('e1')).toBeUndefined();
        await expect(store.readInput('e1')).rejects.toBeInstanceOf(ExecutionNotFoundError);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(false);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        // The holder itself may create with its lease (a renewal).
        expect(await store.create({ id: 'e1', reactor: 'r', input: { a: 2 }, commit: commit('pending') }, { lease: lease('host-b') })).toBe(1);
        expect(await store.readInput('e1')).toEqual({ a: 2 });
      });

      it('create of an existing id with a lease throws execution_exists, checked before the lease', async () => {
        const store = await created();
        const again = store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('other') }, { lease: lease('host-a') });
        await expect(again).rejects.toMatchObject({ code: 'execution_exists' });
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        await expect(store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('other') }, { lease: lease('host-a') })).rejects.toMatchObject({ code: 'execution_exists' });
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(false);
        expect((await store.load('e1'))?.snapshot.value).toBe('pending');
      });

      it('commit with releaseLease frees the lease of its holder and leaves another owner\'s', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        expect(await store.commit('e1', 1, commit('running'), { releaseLease: 'host-b' })).toBe(2);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect(await store.commit('e1', 2, commit('completed', { results: [['a', 1]] }), { releaseLease: 'host-a' })).toBe(3);
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.readResults('e1')).toEqual(new Map([['a', 1]]));
        // Releasing a free lease is a no-op.
        expect(await store.commit('e1', 3, commit('completed'), { releaseLease: 'host-a' })).toBe(4);
        expect(await store.hasLease('e1')).toBe(false);
      });

      it('a stale commit neither releases the lease nor announces', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        const waiting = store.waitSettled('e1', 300).settled;
        const stale = store.commit('e1', 5, commit('completed'), { releaseLease: 'host-a', announce: true });
        await expect(stale).rejects.toBeInstanceOf(StaleRevisionError);
        expect(await waiting).toBe(false);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect((await store.load('e1'))?.revision).toBe(1);
      });

      it('commit with announce wakes a waitSettled waiter; without it no one is woken', async () => {
        const store = await created();
        const quiet = store.waitSettled('e1', 300).settled;
        expect(await store.commit('e1', 1, commit('running'))).toBe(2);
        expect(await store.commit('e1', 2, commit('running'), { releaseLease: 'nobody' })).toBe(3);
        expect(await quiet).toBe(false);
        const waiting = store.waitSettled('e1', 10_000).settled;
        const other = store.waitSettled('e2', 300).settled;
        expect(await store.commit('e1', 3, commit('completed'), { announce: true })).toBe(4);
        expect(await Promise.all([waiting, other])).toEqual([true, false]);
        expect((await store.load('e1'))?.snapshot.value).toBe('completed');
      });

      it('create with announce wakes a waitSettled waiter; without it no one is woken', async () => {
        const store = await fresh();
        const quiet = store.waitSettled('e1', 300).settled;
        await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') }, { lease: lease('host-a') });
        expect(await quiet).toBe(false);
        const waiting = store.waitSettled('e2', 10_000).settled;
        expect(await store.create({ id: 'e2', reactor: 'r', input: {}, commit: commit('completed') }, { announce: true })).toBe(1);
        expect(await waiting).toBe(true);
      });
    });

    describe('commit with takeLease and ifSnapshot (a handed-off run\'s first commit)', () => {
      const lease = (owner: string) => ({ owner, ttlMs: 60_000 });
      /** The bytes a job carries: the envelope of the snapshot it was handed. */
      const bytesOf = (value: string) => encodeSnapshot(commit(value).snapshot);

      it('takeLease on a free lease takes it for that owner and applies the commit', async () => {
        const store = await created();
        expect(await store.commit('e1', 1, commit('running', { results: [['a', 1]] }), { takeLease: lease('host-a') })).toBe(2);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        expect((await store.load('e1'))?.snapshot.value).toBe('running');
        expect(await store.readResults('e1')).toEqual(new Map([['a', 1]]));
      });

      it('takeLease while another owner holds it throws execution_busy, writes nothing and leaves the lease', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        const waiting = store.waitSettled('e1', 300).settled;
        const refused = store.commit('e1', 1, commit('running', { results: [['a', 1]], pushUndo: [undoEntry('a', 0)], trace: [{ type: 'run', step: 'a', at: 1 }] }), {
          takeLease: lease('host-a'),
          releaseLease: 'host-b',
          announce: true,
        });
        await expect(refused).rejects.toBeInstanceOf(XreactorError);
        await expect(refused).rejects.toMatchObject({ code: 'execution_busy', retryable: true });
        await expect(refused).rejects.toThrow(/execution e1 .*another live process holds its lease/);
        expect(await waiting).toBe(false);
        expect(await store.load('e1')).toEqual({ revision: 1, snapshot: { kind: 'execution', machineVersion: V, value: 'pending', context: { n: 'pending' } }, outbox: [], inbox: NO_INBOX, leased: true, marked: false });
        expect(await store.readResults('e1')).toEqual(new Map());
        expect(await store.readUndoStack('e1')).toEqual([]);
        expect(await store.readTrace('e1')).toEqual([]);
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(false);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
      });

      it('takeLease by the holder renews it and applies the commit', async () => {
        const store = await created();
        expect(await store.acquireLease('e1', 'host-a', 50)).toBe(true);
        expect(await store.commit('e1', 1, commit('running'), { takeLease: lease('host-a') })).toBe(2);
        // A witness lease taken after the renewal, with the first TTL: once it expires, so would have the first.
        expect(await store.acquireLease('witness', 'host-a', 50)).toBe(true);
        await vi.waitFor(async () => expect(await store.hasLease('witness')).toBe(false), { timeout: 5_000, interval: 10 });
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
        expect((await store.load('e1'))?.revision).toBe(2);
      });

      it('takeLease with releaseLease of the same owner, and with announce: taken, released, announced', async () => {
        const store = await created();
        const waiting = store.waitSettled('e1', 10_000).settled;
        expect(await store.commit('e1', 1, commit('completed'), { takeLease: lease('host-a'), releaseLease: 'host-a', announce: true })).toBe(2);
        expect(await waiting).toBe(true);
        expect(await store.hasLease('e1')).toBe(false);
      });

      it('ifSnapshot equal to the stored snapshot\'s envelope bytes applies, as created or as loaded', async () => {
        const store = await created();
        expect(await store.commit('e1', 1, commit('running'), { ifSnapshot: bytesOf('pending') })).toBe(2);
        const loaded = await store.load('e1');
        expect(await store.commit('e1', 2, commit('completed'), { ifSnapshot: encodeSnapshot(loaded!.snapshot), takeLease: lease('host-a') })).toBe(3);
        expect((await store.load('e1'))?.snapshot.value).toBe('completed');
        expect(await store.hasLease('e1')).toBe(true);
      });

      it('ifSnapshot that differs throws StaleRevisionError naming the stored revision; nothing written, no lease taken, nothing announced', async () => {
        const store = await created();
        const waiting = store.waitSettled('e1', 300).settled;
        const refused = store.commit('e1', 1, commit('running', { results: [['a', 1]], trace: [{ type: 'run', step: 'a', at: 1 }] }), {
          ifSnapshot: bytesOf('something else'),
          takeLease: lease('host-a'),
          announce: true,
        });
        await expect(refused).rejects.toBeInstanceOf(StaleRevisionError);
        await expect(refused).rejects.toThrow(/execution e1 is at revision 1/);
        expect(await waiting).toBe(false);
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.load('e1')).toEqual({ revision: 1, snapshot: { kind: 'execution', machineVersion: V, value: 'pending', context: { n: 'pending' } }, outbox: [], inbox: NO_INBOX, leased: false, marked: false });
        expect(await store.readResults('e1')).toEqual(new Map());
        expect(await store.readTrace('e1')).toEqual([]);
        // A prefix of the stored bytes, or the bytes with one more, is not the stored snapshot either.
        const same = bytesOf('pending');
        await expect(store.commit('e1', 1, commit('running'), { ifSnapshot: same.subarray(0, same.length - 1) })).rejects.toBeInstanceOf(StaleRevisionError);
        await expect(store.commit('e1', 1, commit('running'), { ifSnapshot: Buffer.concat([same, Buffer.from([0])]) })).rejects.toBeInstanceOf(StaleRevisionError);
        expect((await store.load('e1'))?.revision).toBe(1);
      });

      it('ifSnapshot equal but a stale revision throws StaleRevisionError, writing nothing and taking no lease', async () => {
        const store = await created();
        expect(await store.commit('e1', 1, commit('pending'))).toBe(2);
        // The stored snapshot has the same bytes as at revision 1; the revision fence still refuses.
        const stale = store.commit('e1', 1, commit('running'), { ifSnapshot: bytesOf('pending'), takeLease: lease('host-a') });
        await expect(stale).rejects.toBeInstanceOf(StaleRevisionError);
        await expect(stale).rejects.toThrow(/revision 2, not 1/);
        expect(await store.hasLease('e1')).toBe(false);
        expect((await store.load('e1'))?.revision).toBe(2);
        expect((await store.load('e1'))?.snapshot.value).toBe('pending');
      });

      it('a commit to an unknown id with takeLease throws ExecutionNotFoundError and takes no lease', async () => {
        const store = await fresh();
        await expect(store.commit('nope', 1, commit('x'), { takeLease: lease('host-a'), ifSnapshot: bytesOf('x') })).rejects.toBeInstanceOf(ExecutionNotFoundError);
        expect(await store.hasLease('nope')).toBe(false);
      });

      it('an undo push that would leave a gap is refused before the lease: no lease taken, and reported before busy', async () => {
        const store = await created();
        const gap = commit('running', { pushUndo: [undoEntry('b', 3)] });
        await expect(store.commit('e1', 1, gap, { takeLease: lease('host-a') })).rejects.toMatchObject({ code: 'undo_position_invalid' });
        expect(await store.hasLease('e1')).toBe(false);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(true);
        await expect(store.commit('e1', 1, gap, { takeLease: lease('host-a') })).rejects.toMatchObject({ code: 'undo_position_invalid' });
        expect((await store.load('e1'))?.revision).toBe(1);
        expect(await store.readUndoStack('e1')).toEqual([]);
      });
    });

    describe('acquireAndLoad', () => {
      const lease = (owner: string) => ({ owner, ttlMs: 60_000 });

      it('takes the lease and reads what load and readInput read', async () => {
        const store = await created();
        await store.commit('e1', 1, commit('running', {}, [{ type: 'enqueue', params: { at: new Date(5) } }]));
        const found = await store.acquireAndLoad('e1', lease('host-a'));
        expect(found).toEqual({ status: 'leased', execution: withoutLeased(await store.load('e1')), input: await store.readInput('e1') });
        expect(found.status === 'leased' && found.execution.revision).toBe(2);
        expect(await store.hasLease('e1')).toBe(true);
        expect(await store.acquireLease('e1', 'host-b', 60_000)).toBe(false);
      });

      it('renews for the same owner, and reports busy to another owner, taking nothing', async () => {
        const store = await created();
        expect((await store.acquireAndLoad('e1', lease('host-a'))).status).toBe('leased');
        expect(await store.acquireAndLoad('e1', lease('host-a'))).toMatchObject({ status: 'leased', input: { order: 7 } });
        expect(await store.acquireAndLoad('e1', lease('host-b'))).toEqual({ status: 'busy' });
        expect(await store.acquireLease('e1', 'host-a', 60_000)).toBe(true);
        await store.releaseLease('e1', 'host-a');
        expect(await store.acquireAndLoad('e1', lease('host-b'))).toMatchObject({ status: 'leased' });
      });

      it('with undoTop, reads the undo stack\'s last entry and its position; without it, or on an empty stack, none', async () => {
        const store = await created();
        expect(await store.acquireAndLoad('e1', lease('host-a'), { undoTop: true })).not.toHaveProperty('undoTop');
        await store.commit('e1', 1, commit('running', { pushUndo: [undoEntry('a', 0), undoEntry('b', 1), undoEntry('c', 2)] }));
        const found = await store.acquireAndLoad('e1', lease('host-a'), { undoTop: true });
        expect(found).toMatchObject({ status: 'leased', undoTop: { position: 2, entry: await store.readUndoEntry('e1', 2) } });
        expect(found.status === 'leased' && found.undoTop?.entry).toEqual(stored('c'));
        expect(await store.acquireAndLoad('e1', lease('host-a'))).not.toHaveProperty('undoTop');
        // An undo stack cut by a rollback: the entry below the cut.
        await store.commit('e1', 2, commit('rolling', { truncateUndoTo: 1 }));
        expect(await store.acquireAndLoad('e1', lease('host-a'), { undoTop: true })).toMatchObject({ undoTop: { position: 0, entry: stored('a') } });
        // Busy: nothing is read, nothing taken.
        expect(await store.acquireAndLoad('e1', lease('host-b'), { undoTop: true })).toEqual({ status: 'busy' });
      });

      it('with unlessExists, takes and reads nothing while the actor it names exists (a duplicate start of that actor), before it looks at the lease', async () => {
        const store = await created();
        // The asker not created yet: taken and read as without the option.
        expect(await store.acquireAndLoad('e1', lease('host-a'), { unlessExists: 'e1.rb-0' })).toMatchObject({ status: 'leased', input: { order: 7 } });
        await store.releaseLease('e1', 'host-a');
        await store.create({ id: 'e1.rb-0', reactor: 'r', input: null, commit: commit('running') });
        expect(await store.acquireAndLoad('e1', lease('host-b'), { unlessExists: 'e1.rb-0', undoTop: true })).toEqual({ status: 'exists' });
        expect(await store.hasLease('e1')).toBe(false);
        // Another owner's lease does not hide it: the asker's existence is checked first.
        expect(await store.acquireLease('e1', 'host-c', 60_000)).toBe(true);
        expect(await store.acquireAndLoad('e1', lease('host-b'), { unlessExists: 'e1.rb-0' })).toEqual({ status: 'exists' });
        // Without the option, as before.
        expect(await store.acquireAndLoad('e1', lease('host-b'))).toEqual({ status: 'busy' });
      });

      it('reports an unknown id as missing, taking no lease', async () => {
        const store = await fresh();
        expect(await store.acquireAndLoad('nope', lease('host-a'))).toEqual({ status: 'missing' });
        expect(await store.hasLease('nope')).toBe(false);
      });

      it('releases the lease it took when the snapshot cannot be read, then throws DeserializationError', async () => {
        const store = await fresh();
        await store.create({ id: 'e1', reactor: 'r', input: {}, commit: { ...commit('pending'), snapshot: { kind: 'execution', machineVersion: 99, value: 'x', context: {} } } });
        const found = store.acquireAndLoad('e1', lease('host-a'));
        await expect(found).rejects.toBeInstanceOf(DeserializationError);
        await expect(store.acquireAndLoad('e1', lease('host-a'))).rejects.toThrow(/machine version 99/);
        expect(await store.hasLease('e1')).toBe(false);
      });
    });

    describe('active index', () => {
      it('lists active executions oldest first, up to the limit, keeping the first mark\'s place', async () => {
        const store = await fresh();
        for (const id of ['c', 'a', 'b', 'd']) await store.markActive(id, true);
        await store.markActive('c', true);
        expect((await store.listActive(10)).ids).toEqual(['c', 'a', 'b', 'd']);
        expect((await store.listActive(2)).ids).toEqual(['c', 'a']);
        expect((await store.listActive(0)).ids).toEqual([]);
        await store.markActive('a', false);
        await store.markActive('never-marked', false);
        expect((await store.listActive(10)).ids).toEqual(['c', 'b', 'd']);
        await store.markActive('a', true);
        expect((await store.listActive(10)).ids).toEqual(['c', 'b', 'd', 'a']);
      });

      it('lists page by page from a cursor, past entries removed since, and says when the last entry is listed', async () => {
        const store = await fresh();
        for (const id of ['a', 'b', 'c', 'd', 'e']) await store.markActive(id, true);
        const first = await store.listActive(2);
        expect(first.ids).toEqual(['a', 'b']);
        expect(first.next).toBeDefined();
        // The page's last entry leaves the index: the next page still starts after it.
        await store.markActive('b', false);
        const second = await store.listActive(2, first.next);
        expect(second.ids).toEqual(['c', 'd']);
        await store.markActive('f', true);
        const third = await store.listActive(2, second.next);
        expect(third).toEqual({ ids: ['e', 'f'], next: undefined });
        expect(await store.listActive(10)).toEqual({ ids: ['a', 'c', 'd', 'e', 'f'], next: undefined });
        expect((await store.listActive(0, first.next)).ids).toEqual([]);
      });

      it('markActiveMany lists several in the order given, keeping the place of one listed already (and of a repeat), and forgets several', async () => {
        const store = await fresh();
        await store.markActive('b', true);
        await store.markActiveMany(['c', 'a', 'b', 'd', 'c'], true);
        expect((await store.listActive(10)).ids).toEqual(['b', 'c', 'a', 'd']);
        await store.markActive('e', true);
        await store.markActiveMany(['f', 'e'], true);
        expect((await store.listActive(10)).ids).toEqual(['b', 'c', 'a', 'd', 'e', 'f']);
        await store.markActiveMany([], true);
        await store.markActiveMany(['a', 'never-marked', 'e'], false);
        await store.markActiveMany([], false);
        expect((await store.listActive(10)).ids).toEqual(['b', 'c', 'd', 'f']);
        // A page cursor keeps working across them.
        const first = await store.listActive(2);
        await store.markActiveMany(['a', 'g'], true);
        expect((await store.listActive(10, first.next)).ids).toEqual(['d', 'f', 'a', 'g']);
      });

      it('a commit lists the actors it names (CommitOptions.list) with it, and unlists the committing actor (unlist) with it', async () => {
        const store = await created();
        await store.markActive('z', true);
        // Listed with the commit, in the order named, a repeat and one listed already keeping their place.
        expect(await store.commit('e1', 1, { ...commit('running'), inboxSeen: 0 }, { list: ['e1', 'e1.c', 'z', 'e1'] })).toBe(2);
        expect((await store.listActive(10)).ids).toEqual(['z', 'e1', 'e1.c']);
        // Settling: off the index with the commit; another actor named with it is listed.
        await store.commit('e1', 2, { ...commit('completed'), status: 'completed', inboxSeen: 0 }, { unlist: true, list: ['e1.d'] });
        expect((await store.listActive(10)).ids).toEqual(['z', 'e1.c', 'e1.d']);
        // Unlisting an actor that is not listed changes nothing else.
        await store.commit('e1', 3, { ...commit('completed'), status: 'completed', inboxSeen: 0 }, { unlist: true });
        expect((await store.listActive(10)).ids).toEqual(['z', 'e1.c', 'e1.d']);
      });
    });

    describe('settled notifications', () => {
      it('listening resolves; a notification published after it reaches the waiter', async () => {
        const store = await created();
        const wait = store.waitSettled('e1', 10_000);
        await wait.listening;
        await store.commit('e1', 1, commit('completed'), { announce: true });
        expect(await wait.settled).toBe(true);
      });

      it('wakes a waiter when the execution settles', async () => {
        const store = await created();
        const waiting = store.waitSettled('e1', 10_000).settled;
        await store.publishSettled('e1');
        expect(await waiting).toBe(true);
      });

      it('wakes every waiter of that execution and no other', async () => {
        const store = await created();
        const first = store.waitSettled('e1', 10_000).settled;
        const second = store.waitSettled('e1', 10_000).settled;
        const other = store.waitSettled('e2', 100).settled;
        await store.publishSettled('e1');
        expect(await Promise.all([first, second, other])).toEqual([true, true, false]);
      });

      it('gives false after the timeout when nothing settles', async () => {
        const store = await created();
        expect(await store.waitSettled('e1', 30).settled).toBe(false);
      });

      it('gives false when the signal aborts, already or later', async () => {
        const store = await created();
        expect(await store.waitSettled('e1', 10_000, AbortSignal.abort()).settled).toBe(false);
        const controller = new AbortController();
        const waiting = store.waitSettled('e1', 10_000, controller.signal).settled;
        controller.abort();
        expect(await waiting).toBe(false);
      });

      it('wakes a new waiter after an earlier one timed out', async () => {
        const store = await created();
        expect(await store.waitSettled('e1', 20).settled).toBe(false);
        const waiting = store.waitSettled('e1', 10_000).settled;
        await store.publishSettled('e1');
        expect(await waiting).toBe(true);
      });
    });

    describe('actor kernel', () => {
      describeActorKernelContract(fresh);
    });

    describe('maps', () => {
      describeMapStoreContract(fresh);
    });

    describe('unreadable data', () => {
      describeUnreadableContract(fresh);
    });

    describe('claims and counters', () => {
      it('the first writer of a claim wins; later writers read its value', async () => {
        const store = await fresh();
        expect(await store.readClaim('interrupt:e1:approval')).toBeUndefined();
        expect(await store.claim('interrupt:e1:approval', 'first', 60_000)).toBe('first');
        expect(await store.claim('interrupt:e1:approval', 'second', 60_000)).toBe('first');
        expect(await store.readClaim('interrupt:e1:approval')).toBe('first');
        const racing = await Promise.all(['a', 'b', 'c', 'd'].map((v) => store.claim('race', v, 60_000)));
        expect(new Set(racing).size).toBe(1);
      });

      it('a claim expires after its ttl', async () => {
        const store = await fresh();
        await store.claim('short', 'v', 30);
        await expect.poll(() => store.readClaim('short'), { timeout: 5_000, interval: 10 }).toBeUndefined();
        expect(await store.claim('short', 'w', 60_000)).toBe('w');
      });

      it('counters count from 1', async () => {
        const store = await fresh();
        expect(await store.increment('attempts:e1:approval', 60_000)).toBe(1);
        expect(await store.increment('attempts:e1:approval', 60_000)).toBe(2);
        expect(await Promise.all([1, 2, 3].map(() => store.increment('attempts:e1:other', 60_000)))).toEqual(expect.arrayContaining([1, 2, 3]));
      });
    });
  });
}
