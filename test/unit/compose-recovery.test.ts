/**
 * Operator undo and cancel racing the recovery of a composed run, on the actor kernel.
 *
 * Undo is a signal to the root, applied in landing order with the signals already in its inbox.
 * A child that moved on by itself (resumed by a worker that died, rolling back, cancelled) has told
 * its parent so in the same commit (`child.resumed`, `child.settled`), so the root never acts on
 * a stale view of it: the old refusal of an undo "until a job delivers the child again" is gone.
 * The root first follows its child (it awaits it again, or collects its end), and the undo applies
 * once the root is in a state that accepts it; when the child's end fails the root, the root rolls
 * itself back and the undo is superseded (discarded).
 *
 * Cancel is one cascading signal from the root: a cancel that meets the root just moving into a
 * compose step either lands before the commit that spawns the child (that commit is refused, no
 * child is ever created) or after it, and then reaches the child through the root's `awaits`.
 *
 * Races are forced with gates (promises) around specific store calls of each process, and with
 * workers that die inside a step (their lease runs out on the test clock).
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRuntime, defineReactor } from '../../src/index.js';
import type { SignalReceipt, Store } from '../../src/index.js';
import { InboxPendingError, StaleRevisionError, XreactorError } from '../../src/errors/index.js';
import { serializeError } from '../../src/serialization/index.js';
import { deferred, handleInWorker, interceptStore, interruptJob, manualWorld, outliveLease, startDoomedWorker } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

const statusOf = async (store: Store, id: string) => (await store.load(id))?.snapshot.value;
const inboxOf = async (store: Store, id: string) => (await store.readInbox(id)).entries.map((e) => e.event.type);

/** What an undo call gave: its value and the root's stored status right then, or its error. */
type Undone = { readonly value: unknown; readonly stored: unknown } | { readonly error: unknown };

const undoOutcome = (store: Store, undo: Promise<unknown>): Promise<Undone> =>
  undo.then(
    async (value) => ({ value, stored: await statusOf(store, 'root') }),
    (error: unknown) => ({ error }),
  );

/**
 * A root paused on its child at `approve`; a live worker delivers the continue and runs the
 * child's next step (held); the operator's undo comes meanwhile; then the step ends.
 */
async function undoWhileALiveWorkerRunsTheChild() {
  const world = manualWorld();
  const { time, store, queue } = world;
  const ran: string[] = [];
  const c1Started = deferred();
  const c1Go = deferred();
  const child = defineReactor({ name: 'ul_child' })
    .step('c0', { run: () => 'C0', undo: () => void ran.push('undo:c0') })
    .interrupt('approve', { waitFor: ['c0'] })
    .step('c1', { waitFor: ['approve'], run: async () => (ran.push('c1'), c1Started.resolve(), await c1Go.promise, 'C1'), undo: () => void ran.push('undo:c1') })
    .build();
  const root = defineReactor({ name: 'ul_root' })
    .step('p0', { run: () => 'P0', undo: () => void ran.push('undo:p0') })
    .compose('sub', child, { waitFor: ['p0'] })
    .build();
  const operator = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
  expect(await operator.run(root, {})).toMatchObject({ status: 'paused' });
  const job = interruptJob('root.resume.sub.approve', 'root', root, ['sub', 'approve'], { payload: 'ok' });
  const handled = handleInWorker(world, [root], job);
  await c1Started.promise;
  const undone = await undoOutcome(store, operator.undo('root'));
  c1Go.resolve();
  await handled;
  return { store, ran, undone };
}

/**
 * A root paused on its child at `approve`; the interrupt times out in a worker that dies inside
 * the child's rollback (its undo of c0 never returns). Then either the operator's undo or the
 * timeout job delivered again comes first, the other after it.
 */
async function undoWhileTheChildRollsBackByItself(first: 'undo' | 'job') {
  const world = manualWorld();
  const { time, store, queue } = world;
  const ran: string[] = [];
  let undos = 0;
  const rollbackStarted = deferred();
  const child = defineReactor({ name: 'ur_child' })
    .step('c0', { run: () => 'C0', undo: () => (ran.push('undo:c0'), rollbackStarted.resolve(), (undos += 1) === 1 ? new Promise<void>(() => undefined) : undefined) })
    .interrupt('approve', { waitFor: ['c0'] })
    .build();
  const root = defineReactor({ name: 'ur_root' })
    .step('p0', { run: () => 'P0', undo: () => void ran.push('undo:p0') })
    .compose('sub', child, { waitFor: ['p0'] })
    .build();
  const operator = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
  expect(await operator.run(root, {})).toMatchObject({ status: 'paused' });
  const job = interruptJob('root.timeout.sub.approve', 'root', root, ['sub', 'approve'], { error: serializeError(new Error('timed out')) });
  startDoomedWorker(world, [root], job);
  await rollbackStarted.promise;
  outliveLease(world); // the worker died inside the child's undo of c0
  // The root is still stored paused; the child's commit that left its pause told it so.
  const before = { root: await statusOf(store, 'root'), child: await statusOf(store, 'root.sub'), inbox: await inboxOf(store, 'root') };
  let undone: Undone;
  if (first === 'undo') {
    undone = await undoOutcome(store, operator.undo('root'));
    await handleInWorker(world, [root], job);
  } else {
    await handleInWorker(world, [root], job);
    undone = await undoOutcome(store, operator.undo('root'));
  }
  return { store, operator, ran, undone, before };
}

/**
 * A root paused on its child at `ok`; the operator cancels the child itself. `raced`: the cancel's
 * wake of the root (which would pick up the child's settle) waits until the operator's undo of
 * the root is done, so the undo meets the root still paused with the settle in its inbox.
 */
async function undoAfterTheChildWasCancelledByItself(raced: boolean) {
  const world = manualWorld();
  const { time, store, queue } = world;
  const ran: string[] = [];
  const child = defineReactor({ name: 'uc_child' })
    .step('c0', { run: () => 'C0', undo: () => void ran.push('undo:c0') })
    .interrupt('ok', { waitFor: ['c0'] })
    .build();
  const root = defineReactor({ name: 'uc_root' })
    .step('r0', { run: () => 'R0', undo: () => void ran.push('undo:r0') })
    .compose('sub', child, { waitFor: ['r0'] })
    .build();
  let armed = false;
  const wakeHeld = deferred();
  const undoDone = deferred();
  const cancelStore = interceptStore(store, {
    acquireAndLoad: async (next, id) => {
      if (armed && raced && id === 'root') {
        wakeHeld.resolve();
        await undoDone.promise;
      }
      return next();
    },
  });
  const runtime = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
  const canceller = createRuntime({ store: cancelStore, queue, clock: time, logger, worker: false, reactors: [root] });
  expect(await runtime.run(root, {})).toMatchObject({ status: 'paused', readyInterrupts: [['sub', 'ok']] });
  armed = true;
  const cancelled = canceller.cancel('root.sub', 'operator');
  if (raced) await wakeHeld.promise;
  else await cancelled;
  const before = { root: await statusOf(store, 'root'), child: await statusOf(store, 'root.sub'), inbox: await inboxOf(store, 'root'), ran: [...ran] };
  const undone = await undoOutcome(store, runtime.undo('root'));
  undoDone.resolve();
  const cancelOutcome = await cancelled;
  return { store, runtime, ran, undone, before, cancelOutcome };
}

describe('undo and cancel while a composed run is being recovered', () => {
  it("undo of a root paused on a child its dead worker had resumed: the undo lets the run finish (the dead worker's step runs again), then undoes it all, child first", async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let attempts = 0;
    const c1Started = deferred();
    const child = defineReactor({ name: 'ud_child' })
      .step('c0', { run: () => 'C0', undo: () => void ran.push('undo:c0') })
      .interrupt('approve', { waitFor: ['c0'] })
      .step('c1', {
        waitFor: ['approve'],
        run: () => (ran.push('c1'), c1Started.resolve(), (attempts += 1) === 1 ? new Promise<string>(() => undefined) : 'C1'),
        undo: () => void ran.push('undo:c1'),
      })
      .build();
    const root = defineReactor({ name: 'ud_root' })
      .step('p0', { run: () => 'P0', undo: () => void ran.push('undo:p0') })
      .compose('sub', child, { waitFor: ['p0'] })
      .build();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await operator.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.resume.sub.approve', 'root', root, ['sub', 'approve'], { payload: 'ok' });
    startDoomedWorker(world, [root], job);
    await c1Started.promise;
    outliveLease(world); // the worker died inside c1; its job will be delivered again
    // The root is stored paused, but the child's resume told it so: the signal waits in its inbox.
    expect(await statusOf(store, 'root')).toBe('paused');
    expect(await statusOf(store, 'root.sub')).toEqual({ running: 'executing' });
    expect(await inboxOf(store, 'root')).toEqual(['xreactor.child.resumed']);
    // The undo lands behind it: the root awaits its child again (a running root does not accept
    // the undo, which stays in its inbox), advances the child here (its lease ran out: c1 again),
    // collects its end, completes, and then applies the undo: the child undoes c1 and c0, then
    // the root undoes p0. Nothing refuses it any more: nothing is stale in the root's view.
    expect(await operator.undo('root')).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'undo', rollbackFailures: [] });
    expect(ran).toEqual(['c1', 'c1', 'undo:c1', 'undo:c0', 'undo:p0']);
    expect(await statusOf(store, 'root')).toBe('cancelled');
    expect(await statusOf(store, 'root.sub')).toBe('cancelled');
    expect(await store.readUndoStack('root')).toEqual([]);
    expect(await store.readUndoStack('root.sub')).toEqual([]);
    // The job delivered again: its signal lands nowhere (same key), and nothing runs.
    await handleInWorker(world, [root], job);
    expect(ran).toEqual(['c1', 'c1', 'undo:c1', 'undo:c0', 'undo:p0']);
    expect(await statusOf(store, 'root')).toBe('cancelled');
  });

  it('undo of a root paused on a child a live worker is running: the worker finishes the run and applies the undo waiting in the root inbox, child first', async () => {
    const { store, ran } = await undoWhileALiveWorkerRunsTheChild();
    expect(ran).toEqual(['c1', 'undo:c1', 'undo:c0', 'undo:p0']);
    expect(await statusOf(store, 'root')).toBe('cancelled');
    expect(await statusOf(store, 'root.sub')).toBe('cancelled');
    expect(await store.readInbox('root')).toMatchObject({ entries: [] });
  });

  // The root applies the child's resume and awaits the child, which another live process runs: the
  // undo waits in the root's inbox, and undo() says so (invalid_state) instead of a result.
  it('undo of a root paused on a child a live worker is running does not resolve without a result', async () => {
    const { undone } = await undoWhileALiveWorkerRunsTheChild();
    if ('error' in undone) expect(undone.error).toBeInstanceOf(XreactorError);
    else expect(undone).toEqual({ value: expect.objectContaining({ status: 'cancelled', reason: 'undo' }) as unknown, stored: 'cancelled' });
  });

  it.each(['undo', 'job'] as const)(
    'undo of a root paused on a child rolling back by itself (its worker died in the rollback), the %s first: the child finishes its rollback, its failure rolls the root back, the run ends failed',
    async (first) => {
      const { store, operator, ran, undone, before } = await undoWhileTheChildRollsBackByItself(first);
      expect(before).toEqual({ root: 'paused', child: { rolling_back: 'undoingEntry' }, inbox: ['xreactor.child.resumed'] });
      // The child's undo of c0 is re-run (cut off by the dead worker), then the root undoes p0:
      // once each, whichever of the undo and the delivered job comes first.
      expect(ran).toEqual(['undo:c0', 'undo:c0', 'undo:p0']);
      expect(await statusOf(store, 'root.sub')).toBe('failed');
      expect(await statusOf(store, 'root')).toBe('failed');
      expect((await operator.find('root')).result).toMatchObject({ status: 'failed', step: 'sub', message: 'timed out', rollbackFailures: [] });
      expect(await store.readUndoStack('root')).toEqual([]);
      if (first === 'job') {
        // The run had failed (rolled back) before the undo: refused, nothing left to undo.
        expect(undone).toEqual({ error: expect.objectContaining({ code: 'invalid_state', message: expect.stringMatching(/^execution root is failed/) as unknown }) as unknown });
      } else {
        // The undo landed behind the child's resume: the root followed the child into its failure
        // and rolled back by itself; the undo found a failed run and was discarded.
        expect((await operator.find('root')).trace.filter((t) => t.type === 'signal_discarded')).toMatchObject([{ signal: 'xreactor.operator.undo' }]);
      }
    },
  );

  // The cancel is forced to meet the root's commit that moves into the compose step (awaiting
  // the child, spawning it): landing before it (refused: no child is ever created) or right after
  // it (the cascade reaches the new child through the root's awaits); applied either by the worker
  // advancing the root, which meets it at its next commit, or by the operator's cancel itself.
  it.each([
    { lands: 'before', applier: 'worker' },
    { lands: 'before', applier: 'operator' },
    { lands: 'after', applier: 'worker' },
    { lands: 'after', applier: 'operator' },
  ] as const)('a cancel that lands $lands the root moves into a compose step, applied by the $applier, also stops the child created under it', async ({ lands, applier }) => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const child = defineReactor({ name: 'nc_child' })
      .step('c1', { run: () => (ran.push('c1'), 'C1') })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const root = defineReactor({ name: 'nc_root' }).interrupt('x', {}).compose('sub', child, { waitFor: ['x'] }).build();
    const rt = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await rt.run(root, {})).toMatchObject({ status: 'paused' });
    const atSpawn = deferred();
    const cancelLanded = deferred<SignalReceipt>();
    const cancelReturned = deferred();
    const jobDone = deferred();
    const spawnCommits: unknown[] = [];
    const workerStore = interceptStore(store, {
      commit: async (next, id, _revision, commit) => {
        if (id !== 'root' || commit.spawn === undefined || spawnCommits.length > 0) return next();
        const proceed = applier === 'worker' ? cancelLanded.promise : cancelReturned.promise;
        if (lands === 'before') {
          atSpawn.resolve();
          await proceed;
        }
        try {
          const revision = await next();
          spawnCommits.push('landed');
          if (lands === 'after') {
            atSpawn.resolve();
            await proceed;
          }
          return revision;
        } catch (error) {
          spawnCommits.push(error);
          throw error;
        }
      },
    });
    const operatorStore = interceptStore(store, {
      signal: async (next) => {
        const receipt = await next();
        cancelLanded.resolve(receipt);
        if (applier === 'worker') await jobDone.promise;
        return receipt;
      },
    });
    const job = interruptJob('root.resume.x', 'root', root, ['x'], { payload: 1 });
    const handled = handleInWorker(world, [root], job, workerStore)
      .then(
        () => 'done',
        (error: unknown) => error,
      )
      .finally(() => jobDone.resolve());
    await atSpawn.promise;
    const operator = createRuntime({ store: operatorStore, queue, clock: time, logger, worker: false, reactors: [root] });
    const cancelled = operator
      .cancel('root', 'stop')
      .catch((error: unknown) => error)
      .finally(() => cancelReturned.resolve());
    const receipt = await cancelLanded.promise;
    const jobOutcome = await handled;
    expect(await cancelled).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    expect(await statusOf(store, 'root')).toBe('cancelled');
    if (lands === 'before') {
      // The cancel landed in the root alone; the commit spawning the child was refused for it (by
      // its inbox fence when the worker met it, by its revision when the operator applied it first).
      expect(receipt.landed).toEqual(['root']);
      expect(spawnCommits).toHaveLength(1);
      expect(spawnCommits[0]).toBeInstanceOf(applier === 'worker' ? InboxPendingError : StaleRevisionError);
      expect(await store.load('root.sub')).toBeUndefined();
      expect(ran).toEqual([]);
    } else {
      // The cascade reached the child through the root's awaits.
      expect(receipt.landed).toEqual(['root', 'root.sub']);
      expect(spawnCommits).toEqual(['landed']);
      expect(await statusOf(store, 'root.sub')).toBe('cancelled');
      // c1 was the child's first work, committed with its creation before the cancel landed: like
      // any step whose start was committed, it may run; its outcome never lands and nothing after it starts.
      expect(ran).not.toContain('c2');
      expect(await store.readResults('root.sub')).toEqual(new Map());
    }
    // The worker met the cancel at a commit and applied it (its job ends), or had a commit refused
    // for the operator's (the job fails and is retried).
    if (applier === 'worker') expect(jobOutcome).toBe('done');
    else expect(jobOutcome).toBeInstanceOf(StaleRevisionError);
    const ranBefore = [...ran];
    await handleInWorker(world, [root], job);
    expect(ran).toEqual(ranBefore);
    expect((await rt.find('root')).status).toBe('cancelled');
  });

  it.each([
    { when: 'after the root picked up its end', raced: false },
    { when: 'while its settle still waits in the root inbox', raced: true },
  ])("undo of a root whose paused child was cancelled by itself, $when: the child's end fails the root's compose step, the root rolls back once and ends failed", async ({ raced }) => {
    const { store, runtime, ran, undone, before, cancelOutcome } = await undoAfterTheChildWasCancelledByItself(raced);
    expect(cancelOutcome).toMatchObject({ status: 'cancelled', executionId: 'root.sub', reason: 'operator' });
    if (raced) expect(before).toEqual({ root: 'paused', child: 'cancelled', inbox: ['xreactor.child.settled'], ran: [] });
    else expect(before).toEqual({ root: 'failed', child: 'cancelled', inbox: [], ran: ['undo:r0'] });
    expect(ran).toEqual(['undo:r0']);
    expect(await statusOf(store, 'root')).toBe('failed');
    expect(await statusOf(store, 'root.sub')).toBe('cancelled');
    expect((await runtime.find('root')).result).toMatchObject({ status: 'failed', step: 'sub', error: { code: 'child_cancelled' } });
    if (!raced) {
      expect(undone).toEqual({ error: expect.objectContaining({ code: 'invalid_state', message: expect.stringMatching(/^execution root is failed/) as unknown }) as unknown });
    } else {
      expect((await runtime.find('root')).trace.filter((t) => t.type === 'signal_discarded')).toMatchObject([{ signal: 'xreactor.operator.undo' }]);
    }
  });

  // An undo landing behind a child's signal that makes the root fail and roll back by itself is
  // discarded, and undo() refuses (invalid_state, naming the failed run) as it does when it comes after.
  it.each([
    { what: 'rolling back by itself', outcome: () => undoWhileTheChildRollsBackByItself('undo') },
    { what: 'cancelled by itself', outcome: () => undoAfterTheChildWasCancelledByItself(true) },
  ])('undo of a root whose paused child was $what, landing behind its signal, does not report the failed run as undone', async ({ outcome }) => {
    const { undone } = await outcome();
    expect(undone).toEqual({ error: expect.objectContaining({ code: 'invalid_state', message: expect.stringMatching(/root.*failed/) as unknown }) as unknown });
  });
});
