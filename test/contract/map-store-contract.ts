/**
 * The map half of the Store contract: map writes (stats, source, started list, reports, targets,
 * rollback reports), the conditional signals decided where they land, the commit's receipt of
 * them (`landedSignals`), and the map reads. Part of {@link describeStoreContract}
 * (`store-contract.ts`), so every adapter runs it.
 */
import { describe, expect, it } from 'vitest';
import { ExecutionNotFoundError, EXECUTION_MACHINE_VERSION, MapGateClosedError, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import type { CommitOptions, ElementOutcome, MapWrites, RollbackOutcome, Signal, SignalCondition } from '../../src/store/store.js';
import type { RollbackFailure } from '../../machines/execution-types.js';

const V = EXECUTION_MACHINE_VERSION;

const step = (value: string, extra: Partial<Commit> = {}, map?: MapWrites, results: readonly (readonly [string, unknown])[] = []): Commit => ({
  snapshot: { kind: 'execution', machineVersion: V, value, context: { n: value } },
  status: 'running',
  writes: { results, pushUndo: [], truncateUndoTo: undefined, trace: [], ...(map === undefined ? {} : { map }) },
  outbox: [],
  ...extra,
});

const INIT = { total: 4, batchSize: 2, atomic: true, mode: 'fanOut' } as const;

/** A conditional signal to the map. */
const when = (to: string, dedupeKey: string, condition: SignalCondition): Signal => ({ to, event: { type: `test.${dedupeKey}` }, dedupeKey, condition });

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

/** Registers the map contract for one adapter; `fresh` gives a new, empty store. */
export function describeMapStoreContract(fresh: () => Promise<Store>): void {
  /** A store with root `r` and its map `r.m` (spawned by `r` with `init` and a source), both at revision 1. */
  const withMap = async (init: NonNullable<MapWrites['init']> = INIT, source?: readonly unknown[]): Promise<Store> => {
    const store = await fresh();
    await store.create({ id: 'r', reactor: 'owner', input: {}, commit: step('running') });
    const map = { id: 'r.m', reactor: 'owner', input: {}, commit: step('dispatching', {}, { init, ...(source === undefined ? {} : { source }) }), kind: 'execution' };
    await store.commit('r', 1, step('awaiting', { spawn: [map] }));
    return store;
  };
  /** Commits `commit` of actor `id` at its stored revision, having seen its inbox. */
  const commitOf = async (store: Store, id: string, commit: Commit, options?: CommitOptions): Promise<number> => {
    const loaded = await store.load(id);
    return store.commit(id, loaded!.revision, { ...commit, inboxSeen: loaded!.inbox.seq }, options);
  };
  /** A commit of actor `by` (created when missing, detached and unlisted, as an element) that writes `map` and sends `signals`; returns the receipt. */
  const writeBy = async (store: Store, by: string, map: MapWrites, signals: readonly Signal[] = [], results: readonly (readonly [string, unknown])[] = [], value = 'completed'): Promise<string[]> => {
    if ((await store.load(by)) === undefined) await store.create({ id: by, reactor: 'element', input: {}, commit: step('running') });
    const landedSignals: string[] = [];
    await commitOf(store, by, step(value, { status: value === 'completed' ? 'completed' : 'running', ...(signals.length === 0 ? {} : { signals }) }, map, results), { landedSignals });
    return landedSignals;
  };
  const report = (store: Store, index: number, outcome: ElementOutcome, signals: readonly Signal[] = [], stops = false, at = 100 + index, by = `r.m.${index}`) =>
    writeBy(store, by, { report: { map: 'r.m', index, outcome, stops, at } }, signals);
  const rollbackReport = (store: Store, position: number, outcome: RollbackOutcome, failures: readonly RollbackFailure[], signals: readonly Signal[] = [], by = `r.m.rb-${position}`) =>
    writeBy(store, by, { rollbackReport: { map: 'r.m', position, outcome, failures } }, signals);
  /** A commit of the map itself. */
  const mapWrites = async (store: Store, map: MapWrites, signals: readonly Signal[] = []): Promise<string[]> => {
    const landedSignals: string[] = [];
    await commitOf(store, 'r.m', step('awaiting', signals.length === 0 ? {} : { signals }, map), { landedSignals });
    return landedSignals;
  };
  const keysIn = async (store: Store, id: string) => (await store.readInbox(id)).entries.map((e) => e.dedupeKey);

  describe('map writes', () => {
    it('init creates the stats with zero counters; the source reads back a window at a time until dropped', async () => {
      const items = ['a', { b: new Date(2) }, 'c', 'd', 'e'];
      const store = await withMap({ total: 5, batchSize: 2, atomic: false, mode: 'inline' }, items);
      expect(await store.readMapStats('r.m')).toEqual({
        total: 5,
        batchSize: 2,
        atomic: false,
        mode: 'inline',
        target: null,
        started: 0,
        settled: 0,
        completed: 0,
        failed: 0,
        halted: 0,
        aborted: 0,
        skipped: 0,
        cancelled: 0,
        stop: null,
        lastReportAt: null,
        rollback: { target: null, settled: 0, undone: 0, failed: 0, notNeeded: 0, inFlight: 0, unavailable: 0 },
      });
      expect(await store.readMapSource('r.m', 1, 2)).toEqual([{ b: new Date(2) }, 'c']);
      expect(await store.readMapSource('r.m', 4, 10)).toEqual(['e']);
      expect(await store.readMapSource('r.m', 9, 1)).toEqual([]);
      expect(await store.readMapSource('r.m', 0, 0)).toEqual([]);
      expect(await store.readMapGate('r.m')).toEqual({ status: 'running', stop: undefined });
      await mapWrites(store, { dropSource: true });
      expect(await store.readMapSource('r.m', 0, 5)).toEqual([]);
      // A map of unknown total, created by create.
      await store.create({ id: 'r.n', reactor: 'owner', input: {}, commit: step('dispatching', {}, { init: { total: null, batchSize: 50, atomic: true, mode: 'fanOut' } }) });
      expect(await store.readMapStats('r.n')).toMatchObject({ total: null, batchSize: 50, atomic: true, mode: 'fanOut' });
    });

    it('an unknown map has no stats, no gate, no source, no page, no started entries and no failures; writes naming it are ignored', async () => {
      const store = await withMap();
      expect(await store.readMapStats('r.nomap')).toBeUndefined();
      expect(await store.readMapGate('r.nomap')).toEqual({ status: undefined, stop: undefined });
      expect(await store.readMapSource('r.nomap', 0, 10)).toEqual([]);
      expect(await store.readMapStarted('r.nomap', 3, 0, 3)).toEqual([]);
      expect(await store.readMapPage('r.nomap', 0, 3, null)).toEqual([]);
      expect(await store.readRollbackFailures('r.nomap')).toEqual([]);
      const landed = await writeBy(store, 'r.x', { started: { map: 'r.nomap', index: 0 }, report: { map: 'r.nomap', index: 0, outcome: 'completed', stops: false, at: 1 } }, [when('r.m', 'throw.0', 'reportNew'), when('r.nomap', 'settled', 'mapSettled')]);
      expect(landed).toEqual([]);
      expect(await store.readMapStats('r.nomap')).toBeUndefined();
      expect(await store.readInbox('r.m')).toEqual({ entries: [], seq: 0 });
      // An actor that is not a map has no stats either: its own target and source writes are ignored.
      await writeBy(store, 'r.y', { source: ['a'], target: { target: 1 }, rollbackTarget: { target: 1 } });
      expect(await store.readMapStats('r.y')).toBeUndefined();
      expect(await store.readMapSource('r.y', 0, 1)).toEqual([]);
    });

    it('a report is first writer wins and counted once; a stopping report closes the gate, and the first stop is kept', async () => {
      const store = await withMap();
      await report(store, 0, 'completed');
      await report(store, 1, 'failed', [], true, 150);
      // The same index again, by the same element and by another actor: neither counts.
      await report(store, 1, 'halted', [], true, 160);
      await report(store, 1, 'completed', [], false, 170, 'r.m.other');
      expect(await store.readMapGate('r.m')).toEqual({ status: 'running', stop: 'failed:1' });
      await report(store, 2, 'halted', [], true, 180);
      await report(store, 3, 'aborted', [], true, 190);
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 4, completed: 1, failed: 1, halted: 1, aborted: 1, skipped: 0, cancelled: 0, stop: { kind: 'failed', index: 1 }, lastReportAt: 190 });
      expect(await store.readMapGate('r.m')).toEqual({ status: 'running', stop: 'failed:1' });
      expect((await store.readMapPage('r.m', 0, 4, null)).map((e) => e.outcome)).toEqual(['completed', 'failed', 'halted', 'aborted']);
    });

    it('a gated start applies while the map dispatches, and is refused (nothing written) once a report stopped it or the map left running', async () => {
      const store = await withMap();
      await store.create({ id: 'r.m.0', reactor: 'element', input: {}, commit: step('queued') });
      await store.create({ id: 'r.m.1', reactor: 'element', input: {}, commit: step('queued') });
      const started = (index: number) => ({ started: { map: 'r.m', index, gate: true } });
      await commitOf(store, 'r.m.0', step('running', {}, started(0)));
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 1 });
      await report(store, 2, 'failed', [], true);
      const refused = await refusal(commitOf(store, 'r.m.1', step('running', {}, started(1))));
      expect(refused).toBeInstanceOf(MapGateClosedError);
      expect(refused).toMatchObject({ code: 'map_gate_closed', map: 'r.m', why: 'stopped by failed:2' });
      expect((await store.load('r.m.1'))?.revision).toBe(1);
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 1 });
      expect(await store.readMapStarted('r.m', 1, 0, 5)).toEqual([0]);
      // A map that is no longer running (cancelled) refuses a gated start too; an ungated one applies.
      const other = await withMap();
      await commitOf(other, 'r.m', { ...step('cancelled'), status: 'cancelled' });
      await other.create({ id: 'r.m.3', reactor: 'element', input: {}, commit: step('queued') });
      expect(await refusal(commitOf(other, 'r.m.3', step('running', {}, started(3))))).toMatchObject({ code: 'map_gate_closed', why: 'cancelled' });
      await commitOf(other, 'r.m.3', step('running', {}, { started: { map: 'r.m', index: 3 } }));
      expect(await other.readMapStats('r.m')).toMatchObject({ started: 1 });
    });

    it('refuses a report that stops with an outcome that cannot stop, invalid positions, and a map of another root, writing nothing', async () => {
      const store = await withMap();
      await store.create({ id: 'r.e', reactor: 'element', input: {}, commit: step('running') });
      const cases: [MapWrites, string, RegExp][] = [
        [{ report: { map: 'r.m', index: 0, outcome: 'completed', stops: true, at: 1 } }, 'map_write_invalid', /a report with outcome completed cannot stop the map/],
        [{ report: { map: 'r.m', index: -1, outcome: 'failed', stops: false, at: 1 } }, 'map_write_invalid', /report index -1 is not a whole number/],
        [{ report: { map: 'r.m', index: 0, outcome: 'lost' as ElementOutcome, stops: false, at: 1 } }, 'map_write_invalid', /report outcome "lost" is not an element outcome/],
        [{ started: { map: 'r.m', index: 1.5 } }, 'map_write_invalid', /started index 1.5/],
        [{ rollbackReport: { map: 'r.m', position: 0, outcome: 'gone' as RollbackOutcome, failures: [] } }, 'map_write_invalid', /rollback report outcome "gone"/],
        [{ init: { total: 1, batchSize: 0, atomic: true, mode: 'inline' } }, 'map_write_invalid', /init batchSize 0/],
        [{ report: { map: 'other.m', index: 0, outcome: 'completed', stops: false, at: 1 } }, 'signal_cross_root', /actor r\.e cannot report to actor other\.m/],
      ];
      for (const [map, code, message] of cases) {
        const refused = await refusal(store.commit('r.e', 1, step('completed', {}, map)));
        expect(refused.code, JSON.stringify(map)).toBe(code);
        expect(refused.message).toMatch(message);
      }
      // In a spawned actor's first commit too.
      const spawned = [{ id: 'r.e.s', reactor: 'e', input: {}, commit: step('running', {}, { started: { map: 'r.m', index: -2 } }) }];
      expect((await refusal(store.commit('r.e', 1, step('running', { spawn: spawned })))).code).toBe('map_write_invalid');
      expect((await store.load('r.e'))?.revision).toBe(1);
      expect(await store.load('r.e.s')).toBeUndefined();
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 0, started: 0 });
    });

    it('a second init clears the map: counters, slots, lists and source', async () => {
      const store = await withMap(INIT, ['a', 'b']);
      await writeBy(store, 'r.m.0', { started: { map: 'r.m', index: 0 } });
      await report(store, 0, 'aborted', [], true);
      await rollbackReport(store, 0, 'failed', [{ step: 'e1', kind: 'undo', reason: 'raised', error: { name: 'Error', message: 'no', code: 'x' } }]);
      await mapWrites(store, { init: { total: 1, batchSize: 1, atomic: false, mode: 'inline' }, target: { target: 1 } });
      expect(await store.readMapStats('r.m')).toMatchObject({ total: 1, batchSize: 1, atomic: false, target: 1, started: 0, settled: 0, aborted: 0, stop: null, rollback: { settled: 0, failed: 0 } });
      expect(await store.readMapSource('r.m', 0, 2)).toEqual([]);
      expect(await store.readMapStarted('r.m', 1, 0, 1)).toEqual([]);
      expect(await store.readRollbackFailures('r.m')).toEqual([]);
      expect(await store.readMapPage('r.m', 0, 1, null)).toEqual([{ index: 0, outcome: undefined }]);
      await report(store, 0, 'completed');
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 1, completed: 1 });
    });
  });

  describe('start payloads and creating commits', () => {
    const bytesOf = (n: number) => Uint8Array.from([n, n + 1, 0, 255]);
    const startOf = (index: number, extra: Partial<Commit> = {}): Commit => step('running', extra, { started: { map: 'r.m', index, gate: true } });
    const creating = (input: unknown = { n: 1 }, extra: CommitOptions = {}): CommitOptions => ({ create: { reactor: 'element', input, parent: 'r.m' }, ...extra });

    it('keeps a throw\'s start payloads by position, across buckets, until the forward phase ends (dropSource)', async () => {
      const store = await withMap({ total: 2000, batchSize: 50, atomic: true, mode: 'fanOut' });
      await mapWrites(store, { starts: { from: 2, starts: [bytesOf(2), bytesOf(3)] } });
      await mapWrites(store, { starts: { from: 1023, starts: [bytesOf(7), bytesOf(8)] } });
      expect(await store.readMapStarts('r.m', 0, 5)).toEqual([undefined, undefined, bytesOf(2), bytesOf(3), undefined]);
      expect((await store.readMapStarts('r.m', 1022, 3)).map((b) => b && [...b])).toEqual([undefined, [...bytesOf(7)], [...bytesOf(8)]]);
      expect(await store.readMapStarts('r.m', 0, 0)).toEqual([]);
      expect(await store.readMapStarts('r.nomap', 0, 2)).toEqual([undefined, undefined]);
      await mapWrites(store, { dropSource: true });
      expect(await store.readMapStarts('r.m', 0, 5)).toEqual([undefined, undefined, undefined, undefined, undefined]);
      expect(await store.readMapStarts('r.m', 1023, 2)).toEqual([undefined, undefined]);
    });

    it('a creating commit creates the actor at revision 1 with its reactor, input and first commit, its gated start and its lease in the same step', async () => {
      const store = await withMap();
      const revision = await store.commit('r.m.0', 0, startOf(0, { signals: [{ to: 'r', event: { type: 'test.hello' }, dedupeKey: 'hello' }] }), creating({ n: 1, at: new Date(3) }, { takeLease: { owner: 'w1', ttlMs: 5000 } }));
      expect(revision).toBe(1);
      const loaded = await store.load('r.m.0');
      expect(loaded).toMatchObject({ revision: 1, snapshot: { value: 'running' }, leased: true });
      expect(await store.readInput('r.m.0')).toEqual({ n: 1, at: new Date(3) });
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 1 });
      expect(await store.readMapStarted('r.m', 1, 0, 5)).toEqual([0]);
      expect(await keysIn(store, 'r')).toEqual(['hello']);
      expect(await store.acquireLease('r.m.0', 'w2', 5000)).toBe(false);
      // Its next commits are plain ones.
      expect(await commitOf(store, 'r.m.0', step('completed', { status: 'completed' }))).toBe(2);
    });

    it('refuses a creating commit of an actor that exists (a duplicate start) as stale, naming its revision, and writes nothing', async () => {
      const store = await withMap();
      await store.commit('r.m.1', 0, startOf(1), creating());
      const refused = await refusal(store.commit('r.m.1', 0, startOf(1, { status: 'failed' }), creating({ n: 2 })));
      expect(refused).toBeInstanceOf(StaleRevisionError);
      expect(refused).toMatchObject({ code: 'stale_revision', executionId: 'r.m.1' });
      expect(refused.message).toMatch(/at revision 1, not 0/);
      expect(await store.readInput('r.m.1')).toEqual({ n: 1 });
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 1 });
    });

    it('refuses a creating commit whose map no longer dispatches, or whose lease another owner holds, creating nothing', async () => {
      const store = await withMap();
      await report(store, 3, 'failed', [], true);
      const closed = await refusal(store.commit('r.m.0', 0, startOf(0), creating()));
      expect(closed).toBeInstanceOf(MapGateClosedError);
      expect(closed).toMatchObject({ map: 'r.m', why: 'stopped by failed:3' });
      expect(await store.load('r.m.0')).toBeUndefined();
      // The skip that follows creates it settled, reporting to its slot.
      await store.commit('r.m.0', 0, step('cancelled', { status: 'cancelled' }, { report: { map: 'r.m', index: 0, outcome: 'skipped', stops: false, at: 5 } }), creating());
      expect(await store.readMapStats('r.m')).toMatchObject({ skipped: 1, settled: 2 });

      const other = await withMap();
      expect(await other.acquireLease('r.m.1', 'w2', 5000)).toBe(true);
      expect(await refusal(other.commit('r.m.1', 0, startOf(1), creating({ n: 1 }, { takeLease: { owner: 'w1', ttlMs: 5000 } })))).toMatchObject({ code: 'execution_busy' });
      expect(await other.load('r.m.1')).toBeUndefined();
      expect(await other.readMapStats('r.m')).toMatchObject({ started: 0 });
    });

    it('refuses a creation that expects another revision or names ifSnapshot; a commit at revision 0 without one finds no actor', async () => {
      const store = await withMap();
      expect(await refusal(store.commit('r.m.0', 1, startOf(0), creating()))).toMatchObject({ code: 'commit_create_invalid' });
      expect(await refusal(store.commit('r.m.0', 0, startOf(0), creating({}, { ifSnapshot: Uint8Array.from([1]) })))).toMatchObject({ code: 'commit_create_invalid' });
      expect(await refusal(store.commit('r.m.0', 0, startOf(0)))).toBeInstanceOf(ExecutionNotFoundError);
      expect(await store.load('r.m.0')).toBeUndefined();
    });

    it('creating commits sent together land each on its own: the duplicates refused, the others created', async () => {
      const store = await withMap({ total: 40, batchSize: 40, atomic: true, mode: 'fanOut' });
      await store.commit('r.m.5', 0, startOf(5), creating({ n: 5 }));
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => store.commit(`r.m.${i}`, 0, startOf(i), creating({ n: i }))));
      expect(results.map((r) => r.status)).toEqual(Array.from({ length: 20 }, (_, i) => (i === 5 ? 'rejected' : 'fulfilled')));
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 20 });
      expect(await Promise.all(Array.from({ length: 20 }, (_, i) => store.readInput(`r.m.${i}`)))).toEqual(Array.from({ length: 20 }, (_, i) => ({ n: i })));
    });
  });

  describe('conditional signals', () => {
    it('throw.<k> lands only for a new report that is last of its throw; landedSignals lists exactly the conditional keys that landed', async () => {
      const store = await withMap();
      // Not the last of its throw: no signal.
      expect(await report(store, 0, 'completed')).toEqual([]);
      const plain: Signal = { to: 'r', event: { type: 'test.plain' }, dedupeKey: 'plain' };
      expect(await report(store, 1, 'completed', [when('r.m', 'throw.0', 'reportNew'), plain])).toEqual(['throw.0']);
      expect(await keysIn(store, 'r.m')).toEqual(['throw.0']);
      expect(await keysIn(store, 'r')).toEqual(['plain']);
      // A report of an index reported already is not new: its signal does not land, and its key stays unseen.
      expect(await report(store, 1, 'failed', [when('r.m', 'throw.9', 'reportNew')], false, 200, 'r.m.dup')).toEqual([]);
      expect(await keysIn(store, 'r.m')).toEqual(['throw.0']);
      expect(await report(store, 3, 'completed', [when('r.m', 'throw.9', 'reportNew')])).toEqual(['throw.9']);
      // A new report whose key landed before: the condition holds, the key does not land twice.
      expect(await report(store, 2, 'completed', [when('r.m', 'throw.0', 'reportNew')])).toEqual([]);
      expect(await keysIn(store, 'r.m')).toEqual(['throw.0', 'throw.9']);
    });

    it('settled lands exactly once when the last report comes after the target, also with a duplicate report', async () => {
      const store = await withMap();
      expect(await mapWrites(store, { target: { target: 2 } }, [when('r.m', 'settled', 'mapSettled')])).toEqual([]);
      expect(await report(store, 0, 'completed', [when('r.m', 'settled', 'mapSettled')])).toEqual([]);
      expect(await report(store, 1, 'completed', [when('r.m', 'throw.0', 'reportNew'), when('r.m', 'settled', 'mapSettled')])).toEqual(['throw.0', 'settled']);
      expect(await report(store, 1, 'failed', [when('r.m', 'settled', 'mapSettled')], false, 300, 'r.m.dup')).toEqual([]);
      expect(await keysIn(store, 'r.m')).toEqual(['throw.0', 'settled']);
      expect(await store.readMapStats('r.m')).toMatchObject({ target: 2, settled: 2, completed: 2, failed: 0 });
    });

    it('settled lands exactly once when the target comes after the last report; with target 0 at once', async () => {
      const store = await withMap();
      expect(await report(store, 0, 'completed', [when('r.m', 'settled', 'mapSettled')])).toEqual([]);
      expect(await report(store, 1, 'skipped', [when('r.m', 'settled', 'mapSettled')])).toEqual([]);
      expect(await keysIn(store, 'r.m')).toEqual([]);
      // The map's own commit writes the target and signals itself: its next commit must have seen it.
      expect(await mapWrites(store, { target: { target: 2 } }, [when('r.m', 'settled', 'mapSettled')])).toEqual(['settled']);
      expect(await mapWrites(store, { target: { target: 2 } }, [when('r.m', 'settled', 'mapSettled')])).toEqual([]);
      expect(await keysIn(store, 'r.m')).toEqual(['settled']);
      const empty = await withMap({ total: 0, batchSize: 5, atomic: true, mode: 'inline' });
      expect(await mapWrites(empty, { target: { target: 0 } }, [when('r.m', 'settled', 'mapSettled')])).toEqual(['settled']);
    });

    it('conditions read every write of the step: a spawned actor\'s signal sees the spawning map\'s target, and the started write of its creation', async () => {
      const store = await withMap();
      const element = { id: 'r.m.0', reactor: 'element', input: {}, commit: step('running', { signals: [when('r.m', 'settled', 'mapSettled')] }, { started: { map: 'r.m', index: 0 }, report: { map: 'r.m', index: 0, outcome: 'cancelled', stops: false, at: 5 } }), retainWithParent: false, listed: false };
      const landedSignals: string[] = [];
      await commitOf(store, 'r.m', step('awaiting', { spawn: [element] }, { target: { target: 1 } }), { landedSignals });
      expect(landedSignals).toEqual(['settled']);
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 1, settled: 1, cancelled: 1, target: 1 });
      expect(await keysIn(store, 'r.m')).toEqual(['settled']);
    });

    it('refuses a conditional signal that cascades, a reportNew without a report, an unknown condition, writing nothing', async () => {
      const store = await withMap();
      await store.create({ id: 'r.e', reactor: 'element', input: {}, commit: step('running') });
      const reportWrite: MapWrites = { report: { map: 'r.m', index: 0, outcome: 'completed', stops: false, at: 1 } };
      const cases: [Signal, MapWrites | undefined, RegExp][] = [
        [{ ...when('r.m', 'throw.0', 'reportNew'), cascade: true }, reportWrite, /a conditional signal cannot cascade/],
        [when('r.m', 'throw.0', 'reportNew'), undefined, /the commit has no report/],
        [when('r.m', 'rbthrow.0', 'rollbackReportNew'), reportWrite, /the commit has no rollback report/],
        [when('r.m', 'x', 'later' as SignalCondition), reportWrite, /not a condition/],
      ];
      for (const [signal, map, message] of cases) {
        const refused = await refusal(store.commit('r.e', 1, step('completed', { signals: [signal] }, map)));
        expect(refused.code).toBe('signal_condition_invalid');
        expect(refused.message).toMatch(message);
      }
      expect((await store.load('r.e'))?.revision).toBe(1);
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 0 });
      expect(await store.readInbox('r.m')).toEqual({ entries: [], seq: 0 });
    });
  });

  describe('started list', () => {
    it('reads positions from the tail, anchored at the total while a late start arrives', async () => {
      const store = await withMap();
      for (const index of [0, 2, 1, 3]) await writeBy(store, `r.m.${index}`, { started: { map: 'r.m', index } }, [], [], 'running');
      expect(await store.readMapStats('r.m')).toMatchObject({ started: 4 });
      expect(await store.readMapStarted('r.m', 4, 0, 2)).toEqual([3, 1]);
      expect(await store.readMapStarted('r.m', 4, 2, 5)).toEqual([2, 0]);
      // An element starting after the rollback read the total does not shift its positions.
      await writeBy(store, 'r.m.4', { started: { map: 'r.m', index: 4 } }, [], [], 'running');
      expect(await store.readMapStarted('r.m', 4, 0, 2)).toEqual([3, 1]);
      expect(await store.readMapStarted('r.m', 4, 3, 1)).toEqual([0]);
      expect(await store.readMapStarted('r.m', 4, 4, 1)).toEqual([]);
      expect(await store.readMapStarted('r.m', 4, 0, 0)).toEqual([]);
      expect(await store.readMapStarted('r.m', 5, 0, 1)).toEqual([4]);
      expect(await store.readMapStarted('r.m', 0, 0, 3)).toEqual([]);
    });
  });

  describe('rollback reports', () => {
    const failure = (step: string): RollbackFailure => ({ step, kind: 'undo', reason: 'raised', error: { name: 'Error', message: `undo of ${step} failed`, detail: { at: new Date(3) } }, path: ['m', '1'] });

    it('are first writer wins, counted by outcome; failures are kept in report order; rbthrow.<k> and rolledback land once', async () => {
      const store = await withMap();
      expect(await mapWrites(store, { rollbackTarget: { target: 4 } }, [when('r.m', 'rolledback', 'rolledBack')])).toEqual([]);
      expect(await rollbackReport(store, 0, 'undone', [], [when('r.m', 'rbthrow.0', 'rollbackReportNew')])).toEqual(['rbthrow.0']);
      expect(await rollbackReport(store, 1, 'failed', [failure('e2'), failure('e1')], [when('r.m', 'rolledback', 'rolledBack')])).toEqual([]);
      // The same position again: not counted, its failures not kept, its signal not landed.
      expect(await rollbackReport(store, 1, 'undone', [failure('again')], [when('r.m', 'rbthrow.1', 'rollbackReportNew')], 'r.m.rb-dup')).toEqual([]);
      expect(await rollbackReport(store, 2, 'not_needed', [], [when('r.m', 'rolledback', 'rolledBack')])).toEqual([]);
      expect(await rollbackReport(store, 3, 'context_unavailable', [failure('gone')], [when('r.m', 'rbthrow.1', 'rollbackReportNew'), when('r.m', 'rolledback', 'rolledBack')])).toEqual(['rbthrow.1', 'rolledback']);
      expect(await keysIn(store, 'r.m')).toEqual(['rbthrow.0', 'rbthrow.1', 'rolledback']);
      expect((await store.readMapStats('r.m'))?.rollback).toEqual({ target: 4, settled: 4, undone: 1, failed: 1, notNeeded: 1, inFlight: 0, unavailable: 1 });
      expect(await store.readRollbackFailures('r.m')).toEqual([failure('e2'), failure('e1'), failure('gone')]);
      expect((await store.readRollbackFailures('r.m'))[0]?.error.detail).toEqual({ at: new Date(3) });
      // Forward counters are untouched.
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 0, target: null });
    });

    it('a rollback without failures records none; an empty rollback lands rolledback with its target', async () => {
      const store = await withMap();
      await rollbackReport(store, 0, 'element_in_flight', []);
      await rollbackReport(store, 1, 'undone', []);
      expect(await store.readRollbackFailures('r.m')).toEqual([]);
      expect((await store.readMapStats('r.m'))?.rollback).toMatchObject({ settled: 2, inFlight: 1, undone: 1, target: null });
      expect(await mapWrites(store, { rollbackTarget: { target: 2 } }, [when('r.m', 'rolledback', 'rolledBack')])).toEqual(['rolledback']);
      const none = await withMap();
      expect(await mapWrites(none, { rollbackTarget: { target: 0 } }, [when('r.m', 'rolledback', 'rolledBack')])).toEqual(['rolledback']);
    });
  });

  describe('map pages', () => {
    it('reads each position\'s outcome with a completed element\'s result, a failed or halted element\'s snapshot; positions past the target are skipped', async () => {
      const store = await withMap({ total: 8, batchSize: 8, atomic: false, mode: 'fanOut' });
      await writeBy(store, 'r.m.0', { report: { map: 'r.m', index: 0, outcome: 'completed', stops: false, at: 1 } }, [], [['e1', 1], ['e2', { x: [2] }]]);
      await writeBy(store, 'r.m.1', { report: { map: 'r.m', index: 1, outcome: 'failed', stops: false, at: 2 } }, [], [], 'failed');
      await writeBy(store, 'r.m.2', { report: { map: 'r.m', index: 2, outcome: 'halted', stops: false, at: 3 } }, [], [], 'halted');
      await writeBy(store, 'r.m.3', { report: { map: 'r.m', index: 3, outcome: 'skipped', stops: false, at: 4 } }, [], [], 'cancelled');
      // A completed element that is gone (reported by another actor here): its result is unknown.
      await writeBy(store, 'r.other', { report: { map: 'r.m', index: 5, outcome: 'completed', stops: false, at: 5 } });
      await mapWrites(store, { target: { target: 6 } });
      const snapshotOf = (value: string) => ({ kind: 'execution', machineVersion: V, value, context: { n: value } });
      expect(await store.readMapPage('r.m', 0, 8, 'e2')).toEqual([
        { index: 0, outcome: 'completed', result: { x: [2] } },
        { index: 1, outcome: 'failed', snapshot: snapshotOf('failed') },
        { index: 2, outcome: 'halted', snapshot: snapshotOf('halted') },
        { index: 3, outcome: 'skipped' },
        { index: 4, outcome: undefined },
        { index: 5, outcome: 'completed' },
        { index: 6, outcome: 'skipped' },
        { index: 7, outcome: 'skipped' },
      ]);
      expect(await store.readMapPage('r.m', 0, 1, null)).toEqual([{ index: 0, outcome: 'completed', result: new Map<string, unknown>([['e1', 1], ['e2', { x: [2] }]]) }]);
      expect(await store.readMapPage('r.m', 0, 1, 'nope')).toEqual([{ index: 0, outcome: 'completed' }]);
      expect(await store.readMapPage('r.m', 4, 2, null)).toEqual([{ index: 4, outcome: undefined }, { index: 5, outcome: 'completed' }]);
      expect(await store.readMapPage('r.m', 2, 0, null)).toEqual([]);
    });

    it('reads positions past the first bucket of 1,024', async () => {
      const store = await withMap({ total: 3000, batchSize: 50, atomic: true, mode: 'fanOut' });
      await report(store, 1023, 'completed');
      await report(store, 1024, 'failed', [], true);
      await report(store, 2500, 'aborted');
      await report(store, 1024, 'completed', [], false, 1, 'r.m.dup');
      expect((await store.readMapPage('r.m', 1022, 4, null)).map((e) => e.outcome)).toEqual([undefined, 'completed', 'failed', undefined]);
      expect((await store.readMapPage('r.m', 2500, 1, null)).map((e) => e.outcome)).toEqual(['aborted']);
      expect(await store.readMapStats('r.m')).toMatchObject({ settled: 3, completed: 1, failed: 1, aborted: 1, stop: { kind: 'failed', index: 1024 } });
    });
  });
}
