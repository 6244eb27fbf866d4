/**
 * The Store contract of unreadable data (`markUnreadable`, `readUnreadable`): an actor whose data
 * no build can read is failed in the store, its data kept as it is, and it leaves the active
 * index. Registered by `describeStoreContract` for every adapter.
 */
import { expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION, StaleRevisionError } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';

const commit = (value: string, machineVersion = EXECUTION_MACHINE_VERSION): Commit => ({
  snapshot: { kind: 'execution', machineVersion, value, context: { n: value } },
  status: 'running',
  writes: { results: [['a', { id: 1 }]], pushUndo: [{ position: 0, step: 'a', args: { x: 1 }, result: { id: 1 } }], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
  outbox: [{ type: 'enqueue', params: { job: 'j1' } }],
});

const truncated = { code: 'deserialization_failed', message: 'stored value ends in the middle of a msgpack value after 40 bytes (truncated write or partial read): restore a complete copy or discard it' };
const foreign = { code: 'deserialization_failed', message: 'another message' };

/** The stored status of `id`, as a signal refused in that status reports it (nothing lands). */
async function storedStatus(store: Store, id: string): Promise<string | undefined> {
  const receipt = await store.signal({ to: id, event: { type: 'probe' }, dedupeKey: 'probe' }, { refuseIn: ['pending', 'running', 'failed', 'completed'] });
  return receipt.refusedBy?.status;
}

/** Everything a reader can see of an actor but its revision. */
async function contents(store: Store, id: string) {
  const loaded = await store.load(id);
  return {
    snapshot: loaded?.snapshot,
    outbox: loaded?.outbox,
    inbox: loaded?.inbox,
    input: await store.readInput(id),
    results: await store.readResults(id),
    undo: await store.readUndoStack(id),
    trace: await store.readTrace(id),
  };
}

/** Registers the unreadable-data contract on stores made by `fresh`. */
export function describeUnreadableContract(fresh: () => Promise<Store>): void {
  it('marks the actor failed with the error, keeps its data, raises its revision once and unlists it', async () => {
    const store = await fresh();
    await store.create({ id: 'u1', reactor: 'r', input: { order: 7 }, commit: commit('running') });
    await store.signal({ to: 'u1', event: { type: 'ping' }, dedupeKey: 'k1' });
    await store.markActive('u1', true);
    await store.markActive('other', true);
    const before = await contents(store, 'u1');
    expect(await store.readUnreadable('u1')).toBeUndefined();
    expect((await store.load('u1'))?.marked).toBe(false);

    expect(await store.markUnreadable('u1', truncated)).toBe('marked');
    // Its snapshot still reads: load says it is marked (the record is readUnreadable's).
    expect((await store.load('u1'))?.marked).toBe(true);

    expect(await storedStatus(store, 'u1')).toBe('failed');
    expect(await store.readUnreadable('u1')).toEqual(truncated);
    expect(await contents(store, 'u1')).toEqual(before);
    expect((await store.load('u1'))?.revision).toBe(2);
    expect((await store.listActive(10)).ids).toEqual(['other']);
    // A commit computed before the mark is refused: it cannot write a status over it.
    await expect(store.commit('u1', 1, commit('completed'))).rejects.toBeInstanceOf(StaleRevisionError);
  });

  it('keeps snapshot bytes it cannot read exactly as they are', async () => {
    const store = await fresh();
    await store.create({ id: 'u2', reactor: 'r', input: {}, commit: commit('x', 99) });
    expect(await store.markUnreadable('u2', truncated)).toBe('marked');
    const load = store.load('u2');
    await expect(load).rejects.toBeInstanceOf(DeserializationError);
    await expect(load).rejects.toThrow(/machine version 99/);
    expect(await storedStatus(store, 'u2')).toBe('failed');
  });

  it('is idempotent: a second mark changes nothing but the listing, and the first error stays', async () => {
    const store = await fresh();
    await store.create({ id: 'u3', reactor: 'r', input: {}, commit: commit('running') });
    expect(await store.markUnreadable('u3', truncated)).toBe('marked');
    const once = await store.load('u3');
    // Listed again (a signal landed on it): marking again unlists it.
    await store.markActive('u3', true);
    expect(await store.markUnreadable('u3', foreign)).toBe('already');
    expect(await store.load('u3')).toEqual(once);
    expect(await store.readUnreadable('u3')).toEqual(truncated);
    expect(await storedStatus(store, 'u3')).toBe('failed');
    expect((await store.listActive(10)).ids).toEqual([]);
  });

  it('does not create an actor that does not exist, nor touch anything of it', async () => {
    const store = await fresh();
    await store.markActive('ghost', true);
    expect(await store.markUnreadable('ghost', truncated)).toBe('missing');
    expect(await store.load('ghost')).toBeUndefined();
    expect(await store.readUnreadable('ghost')).toBeUndefined();
    expect((await store.signal({ to: 'ghost', event: { type: 'ping' }, dedupeKey: 'k' })).landed).toEqual([]);
    expect((await store.listActive(10)).ids).toEqual(['ghost']);
    // The id is free: a create after it is a new actor, with no mark.
    expect(await store.create({ id: 'ghost', reactor: 'r', input: {}, commit: commit('running') })).toBe(1);
    expect(await store.readUnreadable('ghost')).toBeUndefined();
    expect(await storedStatus(store, 'ghost')).toBe('running');
  });

  it('marks a composed child alone: its parent and siblings are untouched', async () => {
    const store = await fresh();
    const child = (id: string) => ({ id, reactor: 'c', input: { of: id }, commit: commit('running') });
    await store.create({ id: 'p', reactor: 'r', input: {}, commit: { ...commit('running'), spawn: [child('p.a'), child('p.b')], awaits: ['p.a', 'p.b'] } });
    const parent = await store.load('p');
    const sibling = await store.load('p.b');
    expect(await store.markUnreadable('p.a', truncated)).toBe('marked');
    expect(await storedStatus(store, 'p.a')).toBe('failed');
    expect(await store.load('p')).toEqual(parent);
    expect(await store.load('p.b')).toEqual(sibling);
    expect(await storedStatus(store, 'p')).toBe('running');
    expect(await store.readUnreadable('p')).toBeUndefined();
    expect(await store.readUnreadable('p.b')).toBeUndefined();
  });
}
