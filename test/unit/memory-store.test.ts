import { describe, expect, it } from 'vitest';
import { createMemoryStore, DeserializationError, EXECUTION_MACHINE_VERSION, StaleRevisionError } from '../../src/index.js';
import { createTestClock } from '../../src/testing/test-clock.js';
import type { Commit } from '../../src/index.js';

const commit = (value: string, extra: Partial<Commit['writes']> = {}): Commit => ({
  snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value, context: { n: value } },
  status: 'running',
  writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [], ...extra },
  outbox: [],
});

describe('memory store', () => {
  it('creates at revision 1 and refuses a duplicate id', async () => {
    const store = createMemoryStore();
    expect(await store.create({ id: 'e1', reactor: 'r', input: { a: 1 }, commit: commit('pending') })).toBe(1);
    await expect(store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') })).rejects.toThrow(/already exists/);
    expect(await store.readInput('e1')).toEqual({ a: 1 });
  });

  it('refuses a stale writer and keeps the newer progress', async () => {
    const store = createMemoryStore();
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') });
    const hostA = await store.load('e1');
    const hostB = await store.load('e1');
    expect(hostA?.revision).toBe(1);
    expect(await store.commit('e1', hostA!.revision, commit('running', { results: [['a', 'from A']] }))).toBe(2);
    await expect(store.commit('e1', hostB!.revision, commit('failed', { results: [['a', 'from B']] }))).rejects.toBeInstanceOf(StaleRevisionError);
    const now = await store.load('e1');
    expect(now).toEqual({ revision: 2, snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'running', context: { n: 'running' } }, outbox: [], inbox: { entries: [], seq: 0 }, leased: false, marked: false });
    expect(await store.readResults('e1')).toEqual(new Map([['a', 'from A']]));
  });

  it('keeps results, undo entries and trace outside the snapshot, and pops undone entries', async () => {
    const store = createMemoryStore();
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') });
    await store.commit(
      'e1',
      1,
      commit('running', {
        results: [['a', { id: 1 }]],
        pushUndo: [{ position: 0, step: 'a', args: { x: 1 }, result: { id: 1 } }],
        trace: [{ type: 'run', step: 'a', at: 5 }],
      }),
    );
    await store.commit('e1', 2, commit('running', { pushUndo: [{ position: 1, step: 'b', args: {}, result: 2 }] }));
    expect(await store.readUndoStack('e1')).toEqual([
      { step: 'a', args: { x: 1 }, result: { id: 1 } },
      { step: 'b', args: {}, result: 2 },
    ]);
    await store.commit('e1', 3, commit('rolling_back', { truncateUndoTo: 1 }));
    expect(await store.readUndoStack('e1')).toEqual([{ step: 'a', args: { x: 1 }, result: { id: 1 } }]);
    expect(await store.readUndoEntry('e1', 0)).toEqual({ step: 'a', args: { x: 1 }, result: { id: 1 } });
    expect(await store.readTrace('e1')).toEqual([{ type: 'run', step: 'a', at: 5 }]);
  });

  it('returns copies: mutating what was read never changes what is stored', async () => {
    const store = createMemoryStore();
    const result = { nested: { n: 1 } };
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending', { results: [['a', result]] }) });
    result.nested.n = 2;
    const read = (await store.readResults('e1', ['a'])).get('a') as typeof result;
    read.nested.n = 3;
    expect((await store.readResults('e1', ['a'])).get('a')).toEqual({ nested: { n: 1 } });
  });

  it('reports a snapshot of an unknown machine version as a DeserializationError naming the version', async () => {
    const store = createMemoryStore();
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: { ...commit('pending'), snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION + 1, value: 'x', context: {} } } });
    await expect(store.load('e1')).rejects.toBeInstanceOf(DeserializationError);
    await expect(store.load('e1')).rejects.toThrow(new RegExp(String(EXECUTION_MACHINE_VERSION + 1)));
  });

  it('lets create and acquireAndLoad take a lease whose other owner let it expire', async () => {
    const clock = createTestClock();
    const store = createMemoryStore({ clock });
    expect(await store.acquireLease('e1', 'host-b', 1_000)).toBe(true);
    await expect(store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') }, { lease: { owner: 'host-a', ttlMs: 1_000 } })).rejects.toMatchObject({ code: 'execution_busy' });
    clock.advance(1_000);
    expect(await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') }, { lease: { owner: 'host-a', ttlMs: 1_000 } })).toBe(1);
    expect(await store.acquireAndLoad('e1', { owner: 'host-b', ttlMs: 1_000 })).toEqual({ status: 'busy' });
    clock.advance(999);
    expect(await store.acquireAndLoad('e1', { owner: 'host-b', ttlMs: 1_000 })).toEqual({ status: 'busy' });
    clock.advance(1);
    expect(await store.acquireAndLoad('e1', { owner: 'host-b', ttlMs: 1_000 })).toMatchObject({ status: 'leased', execution: { revision: 1 } });
    expect(await store.acquireLease('e1', 'host-a', 1_000)).toBe(false);
  });

  it('renews the lease for the full TTL on acquireAndLoad by the same owner', async () => {
    const clock = createTestClock();
    const store = createMemoryStore({ clock });
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') }, { lease: { owner: 'host-a', ttlMs: 1_000 } });
    clock.advance(900);
    expect((await store.acquireAndLoad('e1', { owner: 'host-a', ttlMs: 1_000 })).status).toBe('leased');
    clock.advance(900);
    expect(await store.hasLease('e1')).toBe(true);
    clock.advance(100);
    expect(await store.hasLease('e1')).toBe(false);
  });

  it('announces a commit only after applying it: a waiter woken by it loads the new revision', async () => {
    const store = createMemoryStore();
    await store.create({ id: 'e1', reactor: 'r', input: {}, commit: commit('pending') });
    const seen = store.waitSettled('e1', 10_000).settled.then(async () => (await store.load('e1'))?.revision);
    await store.commit('e1', 1, commit('completed'), { announce: true });
    expect(await seen).toBe(2);
  });
});
