import type { ExecutionContext } from '../../machines/execution-types.js';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

/** A reactor that pauses at "approve", then runs `after`; `steps` names what ran. */
function checkout(version: number, after: string, ran: string[]) {
  return defineReactor({ name: 'vcheckout', version })
    .step('reserve', { run: () => (ran.push(`v${version}:reserve`), 'R') })
    .interrupt('approve', { waitFor: ['reserve'] })
    .step(after, { waitFor: ['approve'], run: () => (ran.push(`v${version}:${after}`), 'D') })
    .build();
}

describe('reactor versions and plan fingerprints', () => {
  it('an execution resumes on the version it started with, while a newer version starts new runs', async () => {
    const ran: string[] = [];
    const v1 = checkout(1, 'charge', ran);
    const v2 = checkout(2, 'charge_v2', ran);
    const store = createMemoryStore();
    const first = createRuntime({ store, logger, generateId: () => 'old', reactors: [v1] });
    expect(await first.run(v1, {})).toMatchObject({ status: 'paused' });
    // A later build knows both versions; new runs use v2.
    const later = createRuntime({ store, logger, generateId: () => 'new', reactors: [v1, v2] });
    expect(await later.run(v2, {})).toMatchObject({ status: 'paused' });
    expect(await later.continue('old', { step: 'approve', payload: true })).toMatchObject({ status: 'completed' });
    expect(await later.continue('new', { step: 'approve', payload: true })).toMatchObject({ status: 'completed' });
    expect(ran).toEqual(['v1:reserve', 'v2:reserve', 'v1:charge', 'v2:charge_v2']);
  });

  it('a build whose plan differs for the same version refuses to resume it, naming both fingerprints; the execution stays as stored', async () => {
    const ran: string[] = [];
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const original = checkout(1, 'charge', ran);
    const first = createRuntime({ store, logger, clock: time, generateId: () => 'run1', reactors: [original] });
    expect(await first.run(original, {})).toMatchObject({ status: 'paused' });
    const changed = checkout(1, 'charge_renamed', ran);
    expect(changed.fingerprint).not.toBe(original.fingerprint);
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const other = createRuntime({ store, queue, logger, clock: time, reactors: [changed] });
    const refused = other.continue('run1', { step: 'approve', payload: true });
    await expect(refused).rejects.toMatchObject({ code: 'plan_mismatch', retryable: true });
    await expect(refused).rejects.toThrow(new RegExp(`reactor "vcheckout" version 1 was started with plan ${original.fingerprint}.*has plan ${changed.fingerprint}`));
    const view = await other.find('run1');
    expect({ status: view.status, revision: view.revision }).toEqual({ status: 'paused', revision: (await first.find('run1')).revision });
    // The original build still continues it.
    expect(await first.continue('run1', { step: 'approve', payload: true })).toMatchObject({ status: 'completed' });
    expect(ran).toEqual(['v1:reserve', 'v1:charge']);
  });

  it.each([6, 7, 8, 9])('an execution stored by execution machine version %i loads and resumes on version 10 (its context is grouped as it is read)', async (version) => {
    const ran: string[] = [];
    const v1 = checkout(1, 'charge', ran);
    const store = createMemoryStore();
    const id = `v${version}run`;
    const runtime = createRuntime({ store, logger, generateId: () => id, reactors: [v1] });
    expect(await runtime.run(v1, {})).toMatchObject({ status: 'paused' });
    // Rewrite it as that version wrote it: versions 6 to 9 keep `interrupts` and `undoBy` at the
    // top; 6 and 7 also `origin` and `ending`; 6 has no `map` and no `undoBy`.
    const loaded = (await store.load(id))!;
    expect(loaded.snapshot.machineVersion).toBe(10);
    const { origin, ending, interrupts, map, ...rest } = loaded.snapshot.context as ExecutionContext & Record<string, unknown>;
    expect(Object.keys(loaded.snapshot.context as object)).toHaveLength(16);
    expect({ map, undoBy: ending.undoBy }).toEqual({ map: null, undoBy: null });
    expect(interrupts.paused).not.toBeNull();
    const { undoBy, ...endingBefore10 } = ending;
    const stored = {
      ...rest,
      ...(version >= 8 ? { origin, ending: endingBefore10 } : { ...origin, ...endingBefore10 }),
      ...interrupts,
      ...(version === 6 ? {} : { map, undoBy }),
    };
    await store.commit(id, loaded.revision, {
      snapshot: { ...loaded.snapshot, machineVersion: version, context: stored },
      status: 'paused',
      writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] },
      outbox: loaded.outbox,
    });
    const reread = (await store.load(id))!;
    expect(reread.snapshot.machineVersion).toBe(version);
    // Read in the current shape: what every reader (find, awaitResult, the host) sees.
    expect(reread.snapshot.context).toEqual(loaded.snapshot.context);
    expect((await runtime.find(id)).createdAt).toBe(origin.createdAt);
    expect(await runtime.continue(id, { step: 'approve', payload: true })).toMatchObject({ status: 'completed' });
    expect(ran).toEqual(['v1:reserve', 'v1:charge']);
    const after = (await store.load(id))!;
    expect(after.snapshot.machineVersion).toBe(10);
    expect(after.snapshot.context).toMatchObject({ origin: { version: 1, path: [] }, ending: { cancelReason: null, undoBy: null }, interrupts: { paused: null, resumed: ['approve'], pauses: 1 }, map: null });
  });

  it('one version registered twice with different plans is refused when the runtime is built', () => {
    const ran: string[] = [];
    expect(() => createRuntime({ logger, reactors: [checkout(3, 'a', ran), checkout(3, 'b', ran)] })).toThrow(/reactor "vcheckout" version 3 is registered twice with different plans/);
  });
});
