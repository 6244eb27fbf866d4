/**
 * The actor-kernel half of the Store contract: inboxes, signals (in a commit and through
 * `Store.signal`), awaits, spawned actors, and the fence a pending signal puts on a commit. Part of
 * {@link describeStoreContract} (`store-contract.ts`), so every adapter runs it.
 */
import { describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION, InboxPendingError, SignalNotLandedError, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit, DeliveredSignal, Store } from '../../src/index.js';
import type { Signal } from '../../src/store/store.js';

const V = EXECUTION_MACHINE_VERSION;

const step = (value: string, extra: Partial<Commit> = {}): Commit => ({
  snapshot: { kind: 'execution', machineVersion: V, value, context: { n: value } },
  status: 'running',
  writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] },
  outbox: [],
  ...extra,
});

/** A commit that writes something of each kind, to show that a refused commit wrote none of it. */
const busyStep = (value: string, extra: Partial<Commit> = {}): Commit =>
  step(value, {
    writes: { results: [['a', 1]], pushUndo: [{ position: 0, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
    outbox: [{ type: 'enqueue', params: { job: 'j' } }],
    ...extra,
  });

const ping = (to: string, dedupeKey: string, extra: Partial<Signal> = {}): Signal => ({ to, event: { type: 'test.ping', from: dedupeKey, at: new Date(7) }, dedupeKey, ...extra });
const entry = (seq: number, to: string, dedupeKey: string) => ({ seq, event: ping(to, dedupeKey).event, dedupeKey });

const lease = { owner: 'host-a', ttlMs: 60_000 };

/** What a rejected promise rejected with. */
async function refusal(promise: Promise<unknown>): Promise<XreactorError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(XreactorError);
    return error as XreactorError;
  }
  throw new Error('expected a refusal');
}

/** Registers the actor-kernel contract for one adapter; `fresh` gives a new, empty store. */
export function describeActorKernelContract(fresh: () => Promise<Store>): void {
  /** A store holding `ids`, each created at revision 1 (status 'running', or the one given). */
  const holding = async (...ids: (string | [id: string, status: string])[]): Promise<Store> => {
    const store = await fresh();
    for (const spec of ids) {
      const [id, status] = typeof spec === 'string' ? [spec, 'running'] : spec;
      await store.create({ id, reactor: 'r', input: { id }, commit: { ...step('created'), status: status as Commit['status'] } });
    }
    return store;
  };

  describe('inbox and signals', () => {
    it('a signal lands once per dedupe key, in load, acquireAndLoad and readInbox alike, without changing the revision', async () => {
      const store = await holding('r');
      expect(await store.signal(ping('r', 'k1'))).toEqual({ landed: ['r'] });
      expect(await store.signal(ping('r', 'k1'))).toEqual({ landed: [] });
      expect(await store.signal(ping('r', 'k2'))).toEqual({ landed: ['r'] });
      const inbox = { entries: [entry(1, 'r', 'k1'), entry(2, 'r', 'k2')], seq: 2 };
      expect(await store.readInbox('r')).toEqual(inbox);
      const loaded = await store.load('r');
      expect(loaded?.inbox).toEqual(inbox);
      expect(loaded?.revision).toBe(1);
      expect((loaded?.inbox.entries[0]?.event['at'] as Date).getTime()).toBe(7);
      expect(await store.acquireAndLoad('r', { owner: 'host-a', ttlMs: 60_000 })).toMatchObject({ status: 'leased', execution: { revision: 1, inbox } });
    });

    it('a signal carried by a commit lands once per dedupe key, however often it is sent', async () => {
      const store = await holding('r', 'r.a');
      expect(await store.commit('r.a', 1, step('done', { signals: [ping('r', 'done'), ping('r', 'done')] }))).toBe(2);
      expect(await store.commit('r.a', 2, step('done', { signals: [ping('r', 'done'), ping('r', 'other')] }))).toBe(3);
      expect(await store.signal(ping('r', 'done'))).toEqual({ landed: [] });
      expect(await store.readInbox('r')).toEqual({ entries: [entry(1, 'r', 'done'), entry(2, 'r', 'other')], seq: 2 });
      expect((await store.load('r'))?.revision).toBe(1);
    });

    it("a commit's receipt (`delivered`) names each landing of its own signals with the entry the recipient's inbox holds: none for a key seen, each actor a cascade reached, none for a spawned actor's", async () => {
      const store = await holding('r', 'r.a', 'r.b');
      expect(await store.commit('r', 1, step('awaiting', { awaits: ['r.a'] }))).toBe(2);
      const delivered: DeliveredSignal[] = [];
      const spawn = [{ id: 'r.b.n', reactor: 'child', input: null, commit: step('created', { signals: [ping('r', 'from-spawned')] }) }];
      const signals = [ping('r', 'done'), ping('r', 'done'), ping('r', 'cancel', { cascade: true })];
      expect(await store.commit('r.b', 1, step('done', { signals, spawn }), { delivered })).toBe(2);
      expect(delivered).toEqual([
        { to: 'r', entry: entry(1, 'r', 'done') },
        { to: 'r', entry: entry(2, 'r', 'cancel') },
        { to: 'r.a', entry: entry(1, 'r.a', 'cancel') },
      ]);
      // Exactly what a read of the inbox gives (the spawned actor's signal landed after, unnamed).
      expect((await store.readInbox('r')).entries.slice(0, 2)).toEqual(delivered.slice(0, 2).map((d) => d.entry));
      expect((await store.readInbox('r')).entries.map((e) => e.dedupeKey)).toEqual(['done', 'cancel', 'from-spawned']);
      expect((await store.readInbox('r.a')).entries).toEqual([delivered[2]!.entry]);
      const again: DeliveredSignal[] = [];
      expect(await store.commit('r.b', 2, step('done', { signals: [ping('r', 'done')] }), { delivered: again })).toBe(3);
      expect(again).toEqual([]);
    });

    it('two commits of different actors racing to signal one recipient with one key leave exactly one entry', async () => {
      const store = await holding('r', 'r.a', 'r.b');
      const revisions = await Promise.all(['r.a', 'r.b'].map((id) => store.commit(id, 1, step('done', { signals: [ping('r', 'child-done')] }))));
      expect(revisions).toEqual([2, 2]);
      expect(await store.readInbox('r')).toEqual({ entries: [entry(1, 'r', 'child-done')], seq: 1 });
    });

    it('a signal to an actor that does not exist lands nowhere (and not in an actor created later under that id)', async () => {
      const store = await holding('r');
      expect(await store.commit('r', 1, step('running', { signals: [ping('r.nobody', 'k')] }))).toBe(2);
      expect(await store.signal(ping('nobody', 'k'))).toEqual({ landed: [] });
      expect(await store.signal(ping('nobody', 'k'), { refuseIn: ['running'] })).toEqual({ landed: [] });
      expect(await store.readInbox('r.nobody')).toEqual({ entries: [], seq: 0 });
      expect(await store.readInbox('nobody')).toEqual({ entries: [], seq: 0 });
      await store.create({ id: 'r.nobody', reactor: 'r', input: {}, commit: step('created') });
      expect((await store.load('r.nobody'))?.inbox).toEqual({ entries: [], seq: 0 });
      expect(await store.signal(ping('r.nobody', 'k'))).toEqual({ landed: ['r.nobody'] });
    });

    it('a commit may signal its own actor, and create delivers the signals of the first commit', async () => {
      const store = await holding('r');
      expect(await store.commit('r', 1, step('running', { signals: [ping('r', 'self')] }))).toBe(2);
      await expect(store.commit('r', 2, step('next'))).rejects.toBeInstanceOf(InboxPendingError);
      await store.create({ id: 'r.c', reactor: 'r', input: {}, commit: step('completed', { signals: [ping('r', 'c-done')] }) });
      expect(await store.readInbox('r')).toEqual({ entries: [entry(1, 'r', 'self'), entry(2, 'r', 'c-done')], seq: 2 });
    });
  });

  describe('the inbox fence', () => {
    it('refuses a commit while an entry it has not seen waits (InboxPendingError), writing nothing, delivering nothing, spawning nothing, taking no lease, announcing nothing', async () => {
      const store = await holding('r', 'r.x');
      expect(await store.signal(ping('r', 'cancel'))).toEqual({ landed: ['r'] });
      const waiting = store.waitSettled('r', 300).settled;
      const refused = await refusal(
        store.commit('r', 1, busyStep('running', { inboxSeen: 0, signals: [ping('r.x', 'k')], awaits: ['r.x'], spawn: [{ id: 'r.new', reactor: 'r', input: {}, commit: step('created'), lease: { owner: 'host-a', ttlMs: 60_000 } }] }), {
          takeLease: { owner: 'host-a', ttlMs: 60_000 },
          announce: true,
        }),
      );
      expect(refused).toBeInstanceOf(InboxPendingError);
      expect(refused).toBeInstanceOf(StaleRevisionError);
      expect(refused).toMatchObject({ code: 'inbox_pending', executionId: 'r', inboxSeq: 1 });
      expect(refused.message).toMatch(/actor r has a signal in its inbox \(entry 1\)/);
      // Without inboxSeen the commit counts as having seen nothing.
      await expect(store.commit('r', 1, step('running'))).rejects.toBeInstanceOf(InboxPendingError);
      expect(await waiting).toBe(false);
      expect(await store.hasLease('r')).toBe(false);
      expect(await store.load('r')).toMatchObject({ revision: 1, outbox: [], snapshot: { value: 'created' }, inbox: { entries: [entry(1, 'r', 'cancel')], seq: 1 } });
      expect(await store.readResults('r')).toEqual(new Map());
      expect(await store.readUndoStack('r')).toEqual([]);
      expect(await store.readTrace('r')).toEqual([]);
      expect(await store.readInbox('r.x')).toEqual({ entries: [], seq: 0 });
      expect(await store.load('r.new')).toBeUndefined();
      expect(await store.hasLease('r.new')).toBe(false);
      // The awaits were not stored: a cascade from r reaches r only.
      expect(await store.signal(ping('r', 'probe', { cascade: true }))).toEqual({ landed: ['r'] });
    });

    it('checks the inbox after the revision and the snapshot, before the undo positions and the lease', async () => {
      const store = await holding('r');
      await store.signal(ping('r', 'k'));
      expect((await refusal(store.commit('r', 7, step('x')))).code).toBe('stale_revision');
      expect((await refusal(store.commit('r', 1, step('x'), { ifSnapshot: new Uint8Array([1]) }))).code).toBe('stale_revision');
      const gap = step('x', { writes: { results: [], pushUndo: [{ position: 4, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [] } });
      expect((await refusal(store.commit('r', 1, gap))).code).toBe('inbox_pending');
      expect(await store.acquireLease('r', 'host-b', 60_000)).toBe(true);
      expect((await refusal(store.commit('r', 1, step('x'), { takeLease: { owner: 'host-a', ttlMs: 60_000 } }))).code).toBe('inbox_pending');
      expect((await refusal(store.commit('r', 1, { ...gap, inboxSeen: 1 }))).code).toBe('undo_position_invalid');
    });

    it('a commit that names the seq and consumes the entry removes it; the dedupe key stays recorded', async () => {
      const store = await holding('r');
      await store.signal(ping('r', 'cancel'));
      const loaded = await store.load('r');
      expect(loaded?.inbox.seq).toBe(1);
      expect(await store.commit('r', loaded!.revision, step('cancelling', { inboxSeen: loaded!.inbox.seq, consumed: [1] }))).toBe(2);
      expect(await store.readInbox('r')).toEqual({ entries: [], seq: 1 });
      expect((await store.load('r'))?.inbox).toEqual({ entries: [], seq: 1 });
      expect(await store.signal(ping('r', 'cancel'))).toEqual({ landed: [] });
      expect(await store.commit('r', 2, step('cancelled', { inboxSeen: 1 }))).toBe(3);
    });

    it('a commit computed ahead of a signal (`signalAhead`) applies right behind the commit that lands it, sent before that one is answered, and consumes it', async () => {
      const store = await holding('r', 'r.a');
      // Both sent in one turn: a batching store sends them in one call, in this order.
      const sender = store.commit('r.a', 1, step('asked', { signals: [ping('r', 'undo-1')] }));
      const ahead = store.commit('r', 1, step('undoing', { inboxSeen: 1, consumed: [1], signalAhead: 'undo-1' }));
      expect(await Promise.all([sender, ahead])).toEqual([2, 2]);
      expect(await store.load('r')).toMatchObject({ revision: 2, snapshot: { value: 'undoing' }, inbox: { entries: [], seq: 1 } });
      // Landed once: sent again, the signal lands nowhere.
      expect(await store.signal(ping('r', 'undo-1'))).toEqual({ landed: [] });
    });

    it('refuses a commit computed ahead of a signal that did not land under its seq (SignalNotLandedError), writing nothing, taking no lease, announcing nothing', async () => {
      const store = await holding('r', 'r.a');
      // The sender's commit refused (a stale revision): its signal never landed.
      const sender = store.commit('r.a', 7, step('asked', { signals: [ping('r', 'undo-1')] }));
      const ahead = store.commit('r', 1, busyStep('undoing', { inboxSeen: 1, consumed: [1], signalAhead: 'undo-1' }), { takeLease: lease, announce: true });
      const [first, second] = await Promise.allSettled([sender, ahead]);
      expect(first).toMatchObject({ status: 'rejected', reason: { code: 'stale_revision' } });
      expect(second.status).toBe('rejected');
      const refused = (second as PromiseRejectedResult).reason as XreactorError;
      expect(refused).toBeInstanceOf(SignalNotLandedError);
      expect(refused).toBeInstanceOf(StaleRevisionError);
      expect(refused).toMatchObject({ code: 'signal_not_landed', executionId: 'r' });
      expect(refused.message).toMatch(/inbox entry 1 was computed before that entry's signal landed/);
      expect(await store.hasLease('r')).toBe(false);
      expect(await store.load('r')).toMatchObject({ revision: 1, outbox: [], snapshot: { value: 'created' }, inbox: { entries: [], seq: 0 } });
      expect(await store.readResults('r')).toEqual(new Map());
      expect(await store.readUndoStack('r')).toEqual([]);
      expect(await store.readTrace('r')).toEqual([]);
    });

    it('a commit computed ahead applies only the signal it names, landed last: another one under its seq, or its own under an earlier seq, refuses it', async () => {
      const store = await holding('r', 'r.b');
      // Another signal took the seq it predicted.
      await store.signal(ping('r', 'other'));
      expect((await refusal(store.commit('r', 1, step('undoing', { inboxSeen: 1, consumed: [1], signalAhead: 'undo-1' })))).code).toBe('signal_not_landed');
      // Its own signal landed, then another: the inbox fence refuses it first.
      await store.signal(ping('r', 'undo-1'));
      await store.signal(ping('r', 'later'));
      expect((await refusal(store.commit('r', 1, step('undoing', { inboxSeen: 2, consumed: [2], signalAhead: 'undo-1' })))).code).toBe('inbox_pending');
      // Its own signal landed earlier than the seq it names (a duplicate sent again).
      expect((await refusal(store.commit('r', 1, step('undoing', { inboxSeen: 3, consumed: [3], signalAhead: 'undo-1' })))).code).toBe('signal_not_landed');
      expect(await store.load('r')).toMatchObject({ revision: 1, snapshot: { value: 'created' } });
      // Named right (the last to land, under its seq), it applies; the entry before it stays.
      await store.signal(ping('r.b', 'other'));
      await store.signal(ping('r.b', 'undo-1'));
      expect(await store.commit('r.b', 1, step('undoing', { inboxSeen: 2, consumed: [2], signalAhead: 'undo-1' }))).toBe(2);
      expect((await store.readInbox('r.b')).entries.map((e) => e.dedupeKey)).toEqual(['other']);
    });

    it('refuses a commit computed ahead of a signal that does not consume the seq it names (inbox_seq_invalid), and one that creates its actor (signal_not_landed)', async () => {
      const store = await holding('r');
      await store.signal(ping('r', 'undo-1'));
      expect((await refusal(store.commit('r', 1, step('undoing', { inboxSeen: 1, signalAhead: 'undo-1' })))).code).toBe('inbox_seq_invalid');
      expect((await refusal(store.commit('r', 1, step('undoing', { signalAhead: 'undo-1' })))).code).toBe('inbox_seq_invalid');
      const create = { reactor: 'r', input: null };
      expect((await refusal(store.commit('r.new', 0, step('undoing', { inboxSeen: 1, consumed: [1], signalAhead: 'undo-1', signals: [ping('r', 'x')] }), { create }))).code).toBe('signal_not_landed');
      expect(await store.load('r.new')).toBeUndefined();
    });

    it('entries seen but not consumed stay, and do not fence later commits that name their seq', async () => {
      const store = await holding('r');
      await store.signal(ping('r', 'a'));
      await store.signal(ping('r', 'b'));
      expect(await store.commit('r', 1, step('running', { inboxSeen: 2, consumed: [1] }))).toBe(2);
      expect(await store.readInbox('r')).toEqual({ entries: [entry(2, 'r', 'b')], seq: 2 });
      expect(await store.commit('r', 2, step('running', { inboxSeen: 2 }))).toBe(3);
      expect(await store.commit('r', 3, step('running', { inboxSeen: 2, consumed: [2, 1] }))).toBe(4);
      expect(await store.readInbox('r')).toEqual({ entries: [], seq: 2 });
      await store.signal(ping('r', 'c'));
      await expect(store.commit('r', 4, step('running', { inboxSeen: 2 }))).rejects.toMatchObject({ code: 'inbox_pending', inboxSeq: 3 });
    });

    it('an entry consumed by one commit cannot be consumed again: a second commit from the same load is refused by revision', async () => {
      const store = await holding('r');
      await store.signal(ping('r', 'cancel'));
      const loaded = (await store.load('r'))!;
      const consume = (value: string) => step(value, { inboxSeen: loaded.inbox.seq, consumed: [loaded.inbox.entries[0]!.seq] });
      expect(await store.commit('r', loaded.revision, consume('first'))).toBe(2);
      const second = await refusal(store.commit('r', loaded.revision, consume('second')));
      expect(second).toBeInstanceOf(StaleRevisionError);
      expect(second.code).toBe('stale_revision');
      expect(second.message).toMatch(/revision 2, not 1/);
      expect((await store.load('r'))?.snapshot.value).toBe('first');
    });
  });

  describe('awaits and cascading signals', () => {
    it('a cascading signal follows the awaits transitively, breadth first, each actor once, with dedupe per recipient', async () => {
      const store = await holding('r', 'r.a', 'r.b', 'r.a.x', 'r.b.y');
      expect(await store.commit('r', 1, step('awaiting', { awaits: ['r.b', 'r.a', 'r.ghost', 'r.b'] }))).toBe(2);
      expect(await store.commit('r.a', 1, step('awaiting', { awaits: ['r.a.x'] }))).toBe(2);
      // A cycle back to the root ends the walk.
      expect(await store.commit('r.a.x', 1, step('awaiting', { awaits: ['r'] }))).toBe(2);
      expect(await store.signal(ping('r', 'cancel', { cascade: true }))).toEqual({ landed: ['r', 'r.b', 'r.a', 'r.a.x'] });
      expect(await store.signal(ping('r', 'cancel', { cascade: true }))).toEqual({ landed: [] });
      // r.b awaits a new actor since: the same signal again reaches it, and only it.
      expect(await store.commit('r.b', 1, step('awaiting', { inboxSeen: 1, awaits: ['r.b.y'] }))).toBe(2);
      expect(await store.signal(ping('r', 'cancel', { cascade: true }))).toEqual({ landed: ['r.b.y'] });
      // Without cascade only the recipient; from the middle of the tree, its subtree.
      expect(await store.signal(ping('r', 'plain'))).toEqual({ landed: ['r'] });
      expect(await store.signal(ping('r.a', 'mid', { cascade: true }))).toEqual({ landed: ['r.a', 'r.a.x', 'r', 'r.b', 'r.b.y'] });
      const keysOf = async (id: string) => (await store.readInbox(id)).entries.map((e) => e.dedupeKey);
      expect(await keysOf('r')).toEqual(['cancel', 'plain', 'mid']);
      expect(await keysOf('r.a.x')).toEqual(['cancel', 'mid']);
      expect(await keysOf('r.b.y')).toEqual(['cancel', 'mid']);
    });

    it('a cascading signal in a commit lands in every actor reached, after the commit; awaits [] clears, undefined keeps', async () => {
      const store = await holding('r', 'r.a', 'r.b', 'r.c');
      expect(await store.commit('r', 1, step('awaiting', { awaits: ['r.a', 'r.b'] }))).toBe(2);
      expect(await store.commit('r.c', 1, step('cancelling', { signals: [ping('r', 'cancel', { cascade: true })] }))).toBe(2);
      for (const id of ['r', 'r.a', 'r.b']) expect(await store.readInbox(id)).toEqual({ entries: [entry(1, id, 'cancel')], seq: 1 });
      expect(await store.readInbox('r.c')).toEqual({ entries: [], seq: 0 });
      expect(await store.commit('r', 2, step('awaiting', { inboxSeen: 1 }))).toBe(3);
      expect(await store.signal(ping('r', 'again', { cascade: true }))).toEqual({ landed: ['r', 'r.a', 'r.b'] });
      expect(await store.commit('r', 3, step('alone', { inboxSeen: 2, awaits: [] }))).toBe(4);
      expect(await store.signal(ping('r', 'third', { cascade: true }))).toEqual({ landed: ['r'] });
    });

    it('refuseIn: when the recipient or an actor the cascade reaches has one of those statuses, nothing lands anywhere', async () => {
      const store = await holding('r', ['r.a', 'rolling_back'], 'r.b');
      expect(await store.commit('r', 1, step('awaiting', { awaits: ['r.b', 'r.a'] }))).toBe(2);
      expect(await store.signal(ping('r', 'cancel', { cascade: true }), { refuseIn: ['rolling_back', 'completed'] })).toEqual({ landed: [], refusedBy: { id: 'r.a', status: 'rolling_back' } });
      for (const id of ['r', 'r.a', 'r.b']) expect(await store.readInbox(id)).toEqual({ entries: [], seq: 0 });
      // The recipient itself refuses too; a refusal applies whether or not the key was seen.
      expect(await store.signal(ping('r.a', 'undo'), { refuseIn: ['rolling_back'] })).toEqual({ landed: [], refusedBy: { id: 'r.a', status: 'rolling_back' } });
      expect(await store.signal(ping('r', 'cancel'), { refuseIn: ['rolling_back'] })).toEqual({ landed: ['r'] });
      expect(await store.signal(ping('r', 'cancel', { cascade: true }), { refuseIn: [] })).toEqual({ landed: ['r.b', 'r.a'] });
      expect(await store.signal(ping('r', 'cancel', { cascade: true }), { refuseIn: ['rolling_back'] })).toEqual({ landed: [], refusedBy: { id: 'r.a', status: 'rolling_back' } });
    });
  });

  describe('spawn', () => {
    it('creates actors atomically with the commit, each at revision 1 with its input, first commit and lease; signals to them land', async () => {
      const store = await holding('r');
      const spawn = [
        { id: 'r.a', reactor: 'child', input: { x: 1 }, commit: busyStep('running'), lease },
        { id: 'r.b', reactor: 'child', input: { x: 2 }, commit: step('waiting', { awaits: ['r.a'] }) },
      ];
      expect(await store.commit('r', 1, step('awaiting', { awaits: ['r.a', 'r.b'], spawn, signals: [ping('r.a', 'hello')] }))).toBe(2);
      expect(await store.load('r.a')).toEqual({
        revision: 1,
        snapshot: { kind: 'execution', machineVersion: V, value: 'running', context: { n: 'running' } },
        outbox: [{ type: 'enqueue', params: { job: 'j' } }],
        inbox: { entries: [entry(1, 'r.a', 'hello')], seq: 1 },
        leased: true,
        marked: false,
      });
      expect(await store.readInput('r.a')).toEqual({ x: 1 });
      expect(await store.readResults('r.a')).toEqual(new Map([['a', 1]]));
      expect(await store.readUndoStack('r.a')).toEqual([{ step: 'a', args: null, result: 1 }]);
      expect(await store.readTrace('r.a')).toEqual([{ type: 'run', step: 'a', at: 1 }]);
      expect(await store.acquireLease('r.a', 'host-b', 60_000)).toBe(false);
      expect(await store.acquireLease('r.a', 'host-a', 60_000)).toBe(true);
      expect(await store.hasLease('r.b')).toBe(false);
      expect(await store.hasLease('r')).toBe(false);
      expect((await store.load('r.b'))?.revision).toBe(1);
      // A spawned actor is a full actor: it commits, and cascades follow its awaits.
      expect(await store.commit('r.a', 1, step('done', { inboxSeen: 1, consumed: [1] }))).toBe(2);
      expect(await store.signal(ping('r', 'cancel', { cascade: true }))).toEqual({ landed: ['r', 'r.a', 'r.b'] });
    });

    it('lands the signals of a spawned actor\'s first commit, in the spawning actor too, in order: the commit\'s, then each spawned actor\'s, depth first', async () => {
      const store = await holding('r', 'r.other');
      const grandchild = { id: 'r.a.x', reactor: 'child', input: null, commit: step('completed', { status: 'completed', signals: [ping('r.a', 'x-done'), ping('r', 'x-done')] }) };
      const spawn = [
        { id: 'r.a', reactor: 'child', input: null, commit: step('awaiting', { awaits: ['r.a.x'], spawn: [grandchild], signals: [ping('r', 'a-started')] }) },
        { id: 'r.b', reactor: 'child', input: null, commit: step('completed', { status: 'completed', signals: [ping('r', 'b-done')] }) },
      ];
      expect(await store.commit('r', 1, step('awaiting', { spawn, signals: [ping('r.other', 'first')] }))).toBe(2);
      expect((await store.readInbox('r')).entries.map((e) => e.dedupeKey)).toEqual(['a-started', 'x-done', 'b-done']);
      expect(await store.readInbox('r.a')).toEqual({ entries: [entry(1, 'r.a', 'x-done')], seq: 1 });
      expect(await store.readInbox('r.other')).toEqual({ entries: [entry(1, 'r.other', 'first')], seq: 1 });
      expect((await store.load('r.a.x'))?.revision).toBe(1);
      // The spawning actor's next commit must have seen what its children signalled.
      await expect(store.commit('r', 2, step('next'))).rejects.toMatchObject({ code: 'inbox_pending', inboxSeq: 3 });
      expect(await store.commit('r', 2, step('next', { inboxSeen: 3, consumed: [1, 2, 3] }))).toBe(3);
      // create spawns too.
      await store.create({ id: 'r.c', reactor: 'child', input: null, commit: step('awaiting', { spawn: [{ id: 'r.c.y', reactor: 'child', input: null, commit: step('completed', { signals: [ping('r.c', 'y-done')] }) }] }) });
      expect((await store.load('r.c'))?.inbox.entries.map((e) => e.dedupeKey)).toEqual(['y-done']);
    });

    it('is refused as a whole when a spawned id exists, is named twice or is the committing actor, writing nothing', async () => {
      const store = await holding('r', 'r.taken', 'r.x');
      const waiting = store.waitSettled('r', 300).settled;
      const cases: [string[], string][] = [
        [['r.new', 'r.taken'], 'r.taken'],
        [['r.twice', 'r.twice'], 'r.twice'],
        [['r'], 'r'],
      ];
      for (const [ids, named] of cases) {
        const spawn = ids.map((id) => ({ id, reactor: 'child', input: null, commit: step('created', { signals: [ping('r.x', `from ${id}`)] }), lease }));
        const refused = await refusal(store.commit('r', 1, busyStep('running', { spawn, signals: [ping('r.x', 'k')] }), { takeLease: lease, announce: true }));
        expect(refused.code).toBe('execution_exists');
        expect(refused.message).toBe(`execution ${named} already exists; execution ids must be unique`);
      }
      // Nested: a grandchild that exists refuses the whole commit too.
      const nested = [{ id: 'r.new', reactor: 'child', input: null, commit: step('created', { spawn: [{ id: 'r.taken', reactor: 'child', input: null, commit: step('created') }] }) }];
      expect((await refusal(store.commit('r', 1, step('running', { spawn: nested })))).message).toMatch(/execution r\.taken already exists/);
      // So does create.
      expect((await refusal(store.create({ id: 'r.c', reactor: 'r', input: {}, commit: step('created', { spawn: nested }) }))).code).toBe('execution_exists');
      expect(await store.load('r.c')).toBeUndefined();
      expect(await waiting).toBe(false);
      expect(await store.hasLease('r')).toBe(false);
      for (const id of ['r.new', 'r.twice']) {
        expect(await store.load(id)).toBeUndefined();
        expect(await store.hasLease(id)).toBe(false);
      }
      expect(await store.load('r')).toMatchObject({ revision: 1, outbox: [], inbox: { entries: [], seq: 0 } });
      expect(await store.readResults('r')).toEqual(new Map());
      expect(await store.readInbox('r.x')).toEqual({ entries: [], seq: 0 });
      expect((await store.load('r.taken'))?.revision).toBe(1);
    });

    it('is refused when another owner holds a spawned actor\'s lease, or its undo pushes leave a gap, naming it, writing nothing', async () => {
      const store = await holding('r');
      expect(await store.acquireLease('r.held', 'host-b', 60_000)).toBe(true);
      const held = await refusal(store.commit('r', 1, busyStep('running', { spawn: [{ id: 'r.free', reactor: 'c', input: null, commit: step('created') }, { id: 'r.held', reactor: 'c', input: null, commit: step('created'), lease }] })));
      expect(held).toMatchObject({ code: 'execution_busy', retryable: true });
      expect(held.message).toMatch(/execution r\.held was not written: another live process holds its lease/);
      const gapped = step('created', { writes: { results: [], pushUndo: [{ position: 2, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [] } });
      const gap = await refusal(store.commit('r', 1, busyStep('running', { spawn: [{ id: 'r.gap', reactor: 'c', input: null, commit: gapped }] })));
      expect(gap.code).toBe('undo_position_invalid');
      expect(gap.message).toMatch(/execution r\.gap: an undo entry pushed at position 2 would leave a gap in a stack of 0 entries/);
      for (const id of ['r.free', 'r.held', 'r.gap']) expect(await store.load(id)).toBeUndefined();
      expect(await store.acquireLease('r.held', 'host-a', 60_000)).toBe(false);
      expect(await store.hasLease('r.free')).toBe(false);
      expect((await store.load('r'))?.revision).toBe(1);
      // The holder of the lease may spawn with it (a renewal), as with create.
      expect(await store.commit('r', 1, step('running', { spawn: [{ id: 'r.held', reactor: 'c', input: null, commit: step('created'), lease: { owner: 'host-b', ttlMs: 60_000 } }] }))).toBe(2);
      expect((await store.load('r.held'))?.revision).toBe(1);
    });
  });

  describe('spawn: listing and kinds', () => {
    it('lists each spawned actor in the active index, at any depth, unless spawned with listed: false', async () => {
      const store = await holding('r');
      const spawn = [
        { id: 'r.a', reactor: 'child', input: null, commit: step('running', { spawn: [{ id: 'r.a.x', reactor: 'child', input: null, commit: step('running'), listed: false }] }) },
        { id: 'r.b', reactor: 'child', input: null, commit: step('queued', { spawn: [{ id: 'r.b.y', reactor: 'child', input: null, commit: step('running') }] }), listed: false },
        { id: 'r.c', reactor: 'child', input: null, commit: step('running'), listed: true },
      ];
      expect(await store.commit('r', 1, step('awaiting', { spawn }))).toBe(2);
      expect((await store.listActive(10)).ids).toEqual(['r.a', 'r.b.y', 'r.c']);
      for (const id of ['r.a', 'r.a.x', 'r.b', 'r.b.y', 'r.c']) expect((await store.load(id))?.revision).toBe(1);
      // So does create; the created actor itself is listed by its caller, not by the store.
      await store.create({ id: 'r.d', reactor: 'child', input: null, commit: step('running', { spawn: [{ id: 'r.d.z', reactor: 'child', input: null, commit: step('running'), listed: false }, { id: 'r.d.w', reactor: 'child', input: null, commit: step('running') }] }) });
      expect((await store.listActive(10)).ids).toEqual(['r.a', 'r.b.y', 'r.c', 'r.d.w']);
      // An unlisted actor lists itself when it starts.
      await store.markActive('r.b', true);
      expect((await store.listActive(10)).ids).toEqual(['r.a', 'r.b.y', 'r.c', 'r.d.w', 'r.b']);
    });

    it('refuses a spawn whose kind is not its snapshot\'s, writing nothing; a matching kind is accepted', async () => {
      const store = await holding('r');
      const other = { ...step('created'), snapshot: { kind: 'map', machineVersion: 1, value: 'x', context: {} } };
      const refused = await refusal(store.commit('r', 1, busyStep('running', { spawn: [{ id: 'r.m', reactor: 'r', input: null, commit: other, kind: 'execution' }] })));
      expect(refused.code).toBe('spawn_kind_mismatch');
      expect(refused.message).toMatch(/actor r spawns actor r\.m as kind "execution" with a first snapshot of kind "map", so nothing was written/);
      const nested = [{ id: 'r.a', reactor: 'r', input: null, commit: step('created', { spawn: [{ id: 'r.a.m', reactor: 'r', input: null, commit: step('created'), kind: 'map' }] }) }];
      expect((await refusal(store.create({ id: 'r.c', reactor: 'r', input: {}, commit: step('created', { spawn: nested }) }))).code).toBe('spawn_kind_mismatch');
      expect(await store.load('r')).toMatchObject({ revision: 1, outbox: [] });
      for (const id of ['r.m', 'r.a', 'r.a.m', 'r.c']) expect(await store.load(id)).toBeUndefined();
      expect(await store.commit('r', 1, step('running', { spawn: [{ id: 'r.e', reactor: 'r', input: null, commit: step('created'), kind: 'execution' }] }))).toBe(2);
      expect((await store.load('r.e'))?.snapshot.kind).toBe('execution');
    });

    it('a detached spawn (retainWithParent: false) is a full actor: it commits, signals and is signalled, and records its parent', async () => {
      const store = await holding('r');
      const spawn = [{ id: 'r.d', reactor: 'child', input: { x: 1 }, commit: step('running', { signals: [ping('r', 'd-started')] }), retainWithParent: false, listed: false, lease }];
      expect(await store.commit('r', 1, step('awaiting', { spawn }))).toBe(2);
      expect(await store.readInbox('r')).toEqual({ entries: [entry(1, 'r', 'd-started')], seq: 1 });
      expect(await store.acquireLease('r.d', 'host-b', 60_000)).toBe(false);
      expect(await store.readInput('r.d')).toEqual({ x: 1 });
      expect(await store.signal(ping('r.d', 'k'))).toEqual({ landed: ['r.d'] });
      expect(await store.commit('r.d', 1, step('completed', { status: 'completed', inboxSeen: 1, consumed: [1], signals: [ping('r', 'd-done')] }))).toBe(2);
      expect((await store.readInbox('r')).entries.map((e) => e.dedupeKey)).toEqual(['d-started', 'd-done']);
    });
  });

  describe('one root per atomic step', () => {
    it('refuses a commit or create that signals, awaits or spawns an actor of another root, before writing anything', async () => {
      const store = await holding('r', 'r.a', 'other');
      const waiting = store.waitSettled('r', 300).settled;
      const cases: [Partial<Commit>, string][] = [
        [{ signals: [ping('r.a', 'first'), ping('other', 'k')] }, 'signal'],
        [{ awaits: ['r.a', 'other.x'] }, 'await'],
        [{ spawn: [{ id: 'other.child', reactor: 'r', input: {}, commit: step('created') }] }, 'spawn'],
        [{ spawn: [{ id: 'r.child', reactor: 'r', input: {}, commit: step('created', { signals: [ping('other', 'k')] }) }] }, 'signal'],
      ];
      for (const [extra, verb] of cases) {
        const refused = await refusal(store.commit('r', 1, busyStep('running', extra), { takeLease: { owner: 'host-a', ttlMs: 60_000 }, announce: true }));
        expect(refused.code).toBe('signal_cross_root');
        expect(refused.message).toMatch(new RegExp(`actor r(\\.child)? cannot ${verb} actor other(\\.x|\\.child)?.*Cross-root signals go through a job.*Store\\.signal`));
      }
      expect(await waiting).toBe(false);
      expect(await store.hasLease('r')).toBe(false);
      expect(await store.load('r')).toMatchObject({ revision: 1, inbox: { entries: [], seq: 0 } });
      expect(await store.readResults('r')).toEqual(new Map());
      expect(await store.readInbox('r.a')).toEqual({ entries: [], seq: 0 });
      expect(await store.readInbox('other')).toEqual({ entries: [], seq: 0 });
      expect(await store.load('r.child')).toBeUndefined();
      await expect(store.create({ id: 'r.b', reactor: 'r', input: {}, commit: step('created', { signals: [ping('other', 'k')] }) })).rejects.toMatchObject({ code: 'signal_cross_root' });
      expect(await store.load('r.b')).toBeUndefined();
      // Store.signal crosses roots: it is how a job delivers them.
      expect(await store.signal(ping('other', 'k'))).toEqual({ landed: ['other'] });
    });
  });

  describe('actor kinds', () => {
    it('stores the kind and refuses a kind or a machine version this build does not know, as retryable', async () => {
      const store = await fresh();
      await store.create({ id: 'm', reactor: 'r', input: {}, commit: { ...step('created'), snapshot: { kind: 'lock', machineVersion: 1, value: 'x', context: {} } } });
      await store.create({ id: 'v', reactor: 'r', input: {}, commit: { ...step('created'), snapshot: { kind: 'execution', machineVersion: 99, value: 'x', context: {} } } });
      const kind = await refusal(store.load('m'));
      expect(kind).toBeInstanceOf(DeserializationError);
      expect(kind).toMatchObject({ retryable: true });
      // `map`, `element-rollback` and `unit` are kinds this build knows; `lock` is not yet.
      expect(kind.message).toMatch(/kind "lock", which this build does not know.*a build that knows kind "lock" must advance it/);
      await expect(store.acquireAndLoad('m', { owner: 'host-a', ttlMs: 60_000 })).rejects.toMatchObject({ retryable: true, code: 'deserialization_failed' });
      expect(await store.hasLease('m')).toBe(false);
      const version = await refusal(store.load('v'));
      expect(version).toBeInstanceOf(DeserializationError);
      expect(version).toMatchObject({ retryable: true });
      expect(version.message).toMatch(/machine version 99.*deploy a build that knows version 99/);
    });
  });
}
