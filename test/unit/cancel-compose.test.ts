/**
 * Cancelling a run that waits on a composed child. `cancel` is one signal from the root that
 * cascades, in one atomic step, to every actor the root awaits (the child it runs or is paused on);
 * then it is applied to each of them, fenced by revision. From the moment it lands, no commit of
 * any of them computed without it can land (it is refused for the signal it had not seen, and the
 * actor applies the cancel first), so no step starts after it and no rollback runs; the processes
 * that advance them learn it was cancelled. Races are forced deterministically with gates
 * (promises) around specific store calls of the caller, the operator and the worker, each seeing
 * the shared store through its own interceptor.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { AnyReactorDefinition, SignalReceipt, Store } from '../../src/index.js';
import { InboxPendingError, StaleRevisionError, XreactorError } from '../../src/errors/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { deferred, interceptStore, interruptJob, manualWorld } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

/** A store and a manual queue on one test clock, the store seen by each process through its own interceptor. */
function sharedWorld() {
  const time = createTestClock();
  return { time, inner: createMemoryStore({ clock: time }), queue: createInProcessQueue({ mode: 'manual', clock: time }) };
}

const statusOf = async (store: Store, id: string) => (await store.load(id))?.snapshot.value;

/**
 * A root awaits its child, which runs c1 (held); the operator's cancel looks at the root, then
 * waits while c1 ends and the child completes; then its signal lands. `operatorFirst`: the caller's
 * root reads its inbox (where the child's settle is) only after the cancel returned. Otherwise
 * the root reads the settle alone, and its commit of it waits for the cancel to land (refused);
 * the operator applies nothing until the run has settled.
 */
async function childFinishesWhileTheCancelReachesIt(operatorFirst: boolean) {
  const { time, inner, queue } = sharedWorld();
  const ran: string[] = [];
  const c1Started = deferred();
  const c1Go = deferred();
  const child = defineReactor({ name: 'fin_child' })
    .step('c1', { run: async () => (ran.push('c1'), c1Started.resolve(), await c1Go.promise, 'C1') })
    .build();
  const parent = defineReactor({ name: 'fin_parent' })
    .compose('sub', child, {})
    .step('p2', { waitFor: ['sub'], run: () => (ran.push('p2'), 'P2') })
    .build();
  const childCompleted = deferred();
  const rootReadInbox = deferred();
  const cancelLanded = deferred<SignalReceipt>();
  const cancelReturned = deferred();
  const runSettled = deferred();
  const rootRefusals: unknown[] = [];
  /** With the operator first: the refusal of the caller's commit of the handed settle (the operator moved the root). */
  const staleRefusals: unknown[] = [];
  let settleCommits = 0;
  const callerStore = interceptStore(inner, {
    commit: async (next, id, _revision, commit) => {
      // The root's first commit of an inbox entry (the child's settle, handed to it in the call):
      // the caller's waits until the cancel landed; with the operator first, until the cancel returned.
      if (id === 'root' && commit.consumed !== undefined && (settleCommits += 1) === 1) {
        if (operatorFirst) {
          await cancelReturned.promise;
          return next().catch((error: unknown) => {
            staleRefusals.push(error);
            throw error;
          });
        }
        rootReadInbox.resolve();
        await cancelLanded.promise;
        return next().catch((error: unknown) => {
          rootRefusals.push(error);
          throw error;
        });
      }
      const revision = await next();
      if (id === 'root.sub' && commit.status === 'completed') childCompleted.resolve();
      return revision;
    },
    // Were the settle not handed to it, the root would read its inbox again (with its snapshot, in one load): the same gates.
    load: async (next, id) => {
      if (id !== 'root') return next();
      if (operatorFirst) await cancelReturned.promise;
      const loaded = await next();
      rootReadInbox.resolve();
      return loaded;
    },
  });
  const lookedAt = deferred<unknown>();
  let rootLoads = 0;
  const operatorStore = interceptStore(inner, {
    load: async (next, id) => {
      if (id !== 'root') return next();
      const loaded = await next();
      if ((rootLoads += 1) === 1) {
        // The cancel has looked at the root: the child now completes (and, in the caller's case,
        // the root reads its inbox, finding the child's settle alone) before the cancel's signal.
        lookedAt.resolve(loaded?.snapshot.value);
        await (operatorFirst ? childCompleted : rootReadInbox).promise;
      }
      return loaded;
    },
    signal: async (next) => {
      const receipt = await next();
      cancelLanded.resolve(receipt);
      if (!operatorFirst) await runSettled.promise;
      return receipt;
    },
  });
  const caller = createRuntime({ store: callerStore, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
  const operator = createRuntime({ store: operatorStore, queue, clock: time, logger, worker: false, reactors: [parent] });
  const running = caller
    .run(parent, {})
    .catch((error: unknown) => error)
    .finally(() => runSettled.resolve());
  await c1Started.promise;
  const cancelled = operator
    .cancel('root', 'stop')
    .catch((error: unknown) => error)
    .finally(() => cancelReturned.resolve());
  const looked = await lookedAt.promise;
  c1Go.resolve();
  const [cancelOutcome, runOutcome, receipt] = await Promise.all([cancelled, running, cancelLanded.promise]);
  return { inner, ran, lookedAt: looked, receipt, cancelOutcome, runOutcome, rootRefusals, staleRefusals };
}

/**
 * How a caller learned that its run `root` was cancelled (reason `stop`): the cancelled result, or
 * the invalid_state error saying it was cancelled while the caller ran it. Anything else as it is.
 */
function asCancellation(outcome: unknown): unknown {
  if (outcome instanceof XreactorError) {
    return outcome.code === 'invalid_state' && /^execution root was cancelled while this process ran it \(stop\)/.test(outcome.message) ? 'cancelled (invalid_state)' : outcome;
  }
  const result = outcome as { status?: unknown; executionId?: unknown; reason?: unknown } | undefined;
  return result?.status === 'cancelled' && result.executionId === 'root' && result.reason === 'stop' ? 'cancelled (result)' : outcome;
}

describe('cancel with a composed child', () => {
  it('cancel of a root whose child is inside a step stops the child: none of its remaining steps run', async () => {
    const { time, store, queue } = manualWorld();
    const ran: string[] = [];
    let release: () => void = () => undefined;
    const child = defineReactor({ name: 'cc_child' })
      .step('c1', { run: () => (ran.push('c1'), new Promise<string>((resolve) => (release = () => resolve('C1')))) })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .step('c3', { waitFor: ['c2'], run: () => (ran.push('c3'), 'C3') })
      .build();
    const parent = defineReactor({ name: 'cc_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .step('p2', { waitFor: ['sub'], run: () => (ran.push('p2'), 'P2') })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [parent] });
    const running = caller.run(parent, {}).catch((error: unknown) => error);
    await expect.poll(() => ran).toEqual(['p1', 'c1']);
    expect(await operator.cancel('root', 'stop')).toMatchObject({ status: 'cancelled' });
    expect((await store.load('root.sub'))?.snapshot.value).toBe('cancelled');
    release();
    expect(await running).toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/was cancelled while this process ran it \(stop\)/) as string });
    expect(ran).toEqual(['p1', 'c1']);
    expect((await operator.find('root')).status).toBe('cancelled');
    expect((await store.load('root.sub'))?.snapshot.value).toBe('cancelled');
  });

  // The continue signals the child (`interrupt.approve`), takes the child's lease and applies it;
  // the cancel lands in the root's and the child's inboxes at once. Wherever the cancel lands
  // after the continue's signal, the child's inbox holds [resume, cancel]: whoever applies it
  // commits the resume and the cancel behind it supersedes the resume's work before it starts.
  it.each([
    {
      race: 'lands before the continue applies its signal (the operator applies both first)',
      continueMeetsIt: false,
    },
    {
      race: 'lands while the continue commits the resumed child (that commit is refused; the continue applies both)',
      continueMeetsIt: true,
    },
  ])('cancel racing a continue of the paused child: the cancel $race; no step starts, no rollback runs, the run ends cancelled', async ({ continueMeetsIt }) => {
    const { time, inner, queue } = sharedWorld();
    const ran: string[] = [];
    const child = defineReactor({ name: 'cr_child' })
      .interrupt('approve', {})
      .step('c1', { waitFor: ['approve'], run: () => (ran.push('c1'), 'C1'), undo: () => void ran.push('undo:c1') })
      .build();
    const parent = defineReactor({ name: 'cr_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1'), undo: () => void ran.push('undo:p1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .step('p2', { waitFor: ['sub'], run: () => (ran.push('p2'), 'P2') })
      .build();
    let armed = false;
    const continueHeld = deferred(); // the continue reached its gate, its signal landed
    const cancelLanded = deferred<SignalReceipt>();
    const operatorGo = deferred(); // the operator may apply the cancel (after the continue is done)
    const continueGo = deferred(); // the continue may go on (after the cancel is done)
    const refusals: unknown[] = [];
    const callerStore = interceptStore(inner, {
      acquireLease: async (next, id) => {
        if (armed && !continueMeetsIt && id === 'root.sub') {
          continueHeld.resolve();
          await continueGo.promise;
        }
        return next();
      },
      commit: async (next, id, _revision, commit) => {
        if (armed && continueMeetsIt && id === 'root.sub' && commit.status === 'running' && refusals.length === 0) {
          continueHeld.resolve();
          await cancelLanded.promise;
          return next().catch((error: unknown) => {
            refusals.push(error);
            throw error;
          });
        }
        return next();
      },
    });
    let signalled = false;
    const operatorStore = interceptStore(inner, {
      signal: async (next) => {
        const receipt = await next();
        signalled = true;
        cancelLanded.resolve(receipt);
        return receipt;
      },
      load: async (next) => {
        // Applying the landed cancel waits, in the second interleaving, until the continue is done.
        if (signalled && continueMeetsIt) await operatorGo.promise;
        return next();
      },
    });
    const caller = createRuntime({ store: callerStore, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    const operator = createRuntime({ store: operatorStore, queue, clock: time, logger, worker: false, reactors: [parent] });
    expect(await caller.run(parent, {})).toMatchObject({ status: 'paused', readyInterrupts: [['sub', 'approve']] });
    expect(ran).toEqual(['p1']);
    armed = true;
    const continued = caller.continue('root', { step: ['sub', 'approve'], payload: 'yes' }).catch((error: unknown) => error);
    await continueHeld.promise;
    const cancelled = operator.cancel('root', 'stop').catch((error: unknown) => error);
    // One signal, landed in the root and in the child it awaits.
    expect((await cancelLanded.promise).landed).toEqual(['root', 'root.sub']);
    let continueOutcome: unknown;
    if (continueMeetsIt) {
      continueOutcome = await continued;
      // The continue's commit of the resumed child was computed without the cancel: refused for it.
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toBeInstanceOf(InboxPendingError);
      operatorGo.resolve();
      expect(await cancelled).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    } else {
      expect(await cancelled).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
      continueGo.resolve();
      continueOutcome = await continued;
      expect(refusals).toEqual([]);
    }
    // The continue's signal was accepted before the cancel: its outcome is the run's, cancelled.
    expect(continueOutcome).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    // Neither c1 (the resume's work) nor p2 started, and nothing was undone.
    expect(ran).toEqual(['p1']);
    expect(await statusOf(inner, 'root')).toBe('cancelled');
    expect(await statusOf(inner, 'root.sub')).toBe('cancelled');
    expect(await inner.readResults('root.sub', ['c1'])).toEqual(new Map());
    expect((await inner.readTrace('root')).map((t) => t.type)).not.toContain('undo');
    expect((await caller.find('root')).status).toBe('cancelled');
  });

  it('a caller whose composed child is refused for the cancel, after the cancel was applied to the run and before it was applied to the child, learns the run was cancelled', async () => {
    const { time, inner, queue } = sharedWorld();
    const ran: string[] = [];
    const c1Started = deferred();
    const c1Go = deferred();
    const child = defineReactor({ name: 'cm_child' })
      .step('c1', { run: async () => (ran.push('c1'), c1Started.resolve(), await c1Go.promise, 'C1') })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const parent = defineReactor({ name: 'cm_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .build();
    const refusals: unknown[] = [];
    const callerStore = interceptStore(inner, {
      commit: (next, id) =>
        next().catch((error: unknown) => {
          if (id === 'root.sub') refusals.push(error);
          throw error;
        }),
    });
    // The operator applies the landed cancel to the root, then waits before applying it to the child.
    const atChild = deferred();
    const operatorGo = deferred();
    let signalled = false;
    const operatorStore = interceptStore(inner, {
      signal: async (next) => {
        const receipt = await next();
        signalled = true;
        return receipt;
      },
      load: async (next, id) => {
        if (signalled && id === 'root.sub') {
          atChild.resolve();
          await operatorGo.promise;
        }
        return next();
      },
    });
    const caller = createRuntime({ store: callerStore, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    const operator = createRuntime({ store: operatorStore, queue, clock: time, logger, worker: false, reactors: [parent] });
    const running = caller.run(parent, {}).catch((error: unknown) => error);
    await c1Started.promise;
    expect(ran).toEqual(['p1', 'c1']);
    const cancelled = operator.cancel('root', 'stop');
    await atChild.promise;
    expect(await statusOf(inner, 'root')).toBe('cancelled');
    expect(await statusOf(inner, 'root.sub')).toEqual({ running: 'executing' });
    c1Go.resolve(); // c1 ends: the child's commit of it is refused for the cancel it had not seen
    expect(await running).toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/^execution root was cancelled while this process ran it \(stop\)/) as string });
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toBeInstanceOf(InboxPendingError);
    // The caller's process applied the cancel to the child itself.
    expect(await statusOf(inner, 'root.sub')).toBe('cancelled');
    operatorGo.resolve();
    expect(await cancelled).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    expect(ran).toEqual(['p1', 'c1']);
    expect(await inner.readResults('root.sub', ['c1'])).toEqual(new Map());
    expect(await statusOf(inner, 'root.sub')).toBe('cancelled');
  });

  it('a continue whose run is cancelled under it fails with invalid_state', async () => {
    const { time, store, queue } = manualWorld();
    const ran: string[] = [];
    let release: () => void = () => undefined;
    const reactor = defineReactor({ name: 'cancel_under_continue' })
      .interrupt('approve', {})
      .step('b', { waitFor: ['approve'], run: () => (ran.push('b'), new Promise<string>((resolve) => (release = () => resolve('B')))) })
      .step('c', { waitFor: ['b'], run: () => (ran.push('c'), 'C') })
      .build();
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [reactor] });
    expect(await runtime.run(reactor, {})).toMatchObject({ status: 'paused' });
    const continuing = runtime.continue('root', { step: 'approve', payload: 1 }).catch((error: unknown) => error);
    await expect.poll(() => ran).toEqual(['b']);
    expect(await runtime.cancel('root', 'stop')).toMatchObject({ status: 'cancelled' });
    release();
    expect(await continuing).toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/root was cancelled while this process ran it \(stop\)/) as string });
    expect(ran).toEqual(['b']);
  });

  it.each([
    { what: 'the composed child the run waits on', path: ['sub'] },
    { what: 'a grandchild', path: ['mid', 'leaf'] },
  ])('cancel is refused while $what rolls back', async ({ path }) => {
    const { time, store, queue } = manualWorld();
    let releaseUndo: () => void = () => undefined;
    // The innermost reactor fails at c2 and rolls back, its undo of c1 held until released.
    let inner = defineReactor({ name: `rb_${path.join('_')}_0` })
      .step('c1', { run: () => 'C1', undo: () => new Promise<void>((resolve) => (releaseUndo = resolve)) })
      .step('c2', {
        waitFor: ['c1'],
        run: () => {
          throw new Error('c2 fails');
        },
      })
      .build() as AnyReactorDefinition;
    for (const [level, step] of path.slice(1).reverse().entries()) inner = defineReactor({ name: `rb_${path.join('_')}_${level + 1}` }).compose(step, inner, {}).build() as AnyReactorDefinition;
    const parent = defineReactor({ name: `rb_${path.join('_')}_root` })
      .step('p1', { run: () => 'P1' })
      .compose(path[0]!, inner, { waitFor: ['p1'] })
      .build();
    const descendant = ['root', ...path].join('.');
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    const running = caller.run(parent, {}).catch((error: unknown) => error);
    await expect.poll(async () => (await store.load(descendant))?.snapshot.value).toMatchObject({ rolling_back: expect.anything() as unknown });
    await expect(caller.cancel('root', 'stop')).rejects.toMatchObject({
      code: 'invalid_state',
      message: expect.stringContaining(`composed child ${descendant} is rolling back`) as string,
    });
    releaseUndo();
    await running;
    expect((await store.load('root'))?.snapshot.value).not.toBe('cancelled');
  });

  // The child's last commit lands after the cancel looked at the root and before its signal, and
  // the root has not picked up the child's settle yet: it still awaits the child, so the cascade
  // reaches a child that has completed. Its settled state does not accept the cancel (the entry
  // stays, declined); the root's inbox holds [child.settled, cancel]: whoever applies it commits
  // the settle, and the cancel behind it supersedes the next step (p2) before it starts.
  it.each([
    { who: "the caller's run (the operator's application waits)", operatorFirst: false },
    { who: 'the operator (the run reads its inbox after the cancel returned)', operatorFirst: true },
  ])('a child that finishes while the cancel reaches it does not make the cancel fail; the cancel is applied to the root by $who', async ({ operatorFirst }) => {
    const { inner, ran, lookedAt, receipt, cancelOutcome, runOutcome, rootRefusals, staleRefusals } = await childFinishesWhileTheCancelReachesIt(operatorFirst);
    // The cancel saw the root running, awaiting the child that ran c1; its cascade then reached the
    // root and the completed child, which the root still awaited.
    expect(lookedAt).toEqual({ running: 'awaiting' });
    expect(receipt.landed).toEqual(['root', 'root.sub']);
    expect(cancelOutcome).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    if (!operatorFirst) {
      // The run's commit of the settle, computed without the cancel, was refused; the run applied
      // both, and its caller learns the run was cancelled under it (run() reports that as invalid_state).
      expect(rootRefusals).toHaveLength(1);
      expect(rootRefusals[0]).toBeInstanceOf(InboxPendingError);
      expect(asCancellation(runOutcome)).toBe('cancelled (invalid_state)');
    } else {
      expect(rootRefusals).toEqual([]);
      // The settle was handed to the caller's root in its call; the operator moved the root first,
      // so that commit was refused as stale (not for the inbox), and the caller read the root then.
      expect(staleRefusals).toHaveLength(1);
      expect(staleRefusals[0]).toBeInstanceOf(StaleRevisionError);
      expect(staleRefusals[0]).not.toBeInstanceOf(InboxPendingError);
    }
    expect(ran).toEqual(['c1']);
    expect(await statusOf(inner, 'root')).toBe('cancelled');
    expect(await inner.readResults('root', ['p2'])).toEqual(new Map());
    // The child completed before the cancel reached it: it stays completed, with its result.
    expect(await statusOf(inner, 'root.sub')).toBe('completed');
    expect(await inner.readResults('root.sub', ['c1'])).toEqual(new Map([['c1', 'C1']]));
  });

  // The operator applies the child's settle and the cancel to the root while the caller's host holds
  // the root as awaiting: the caller's next read of the root (snapshot and inbox in one load) finds
  // it moved on, takes it on as stored, and learns it was cancelled.
  it('a caller whose root the operator cancelled while the caller was picking up its child settle learns the run was cancelled', async () => {
    const { runOutcome } = await childFinishesWhileTheCancelReachesIt(true);
    expect(asCancellation(runOutcome)).toBe('cancelled (invalid_state)');
  });

  it('a cancel whose look at the root came before the child was spawned still reaches the child: one cascade, the run and the child end cancelled', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    const c1Started = deferred();
    const c1Go = deferred();
    const child = defineReactor({ name: 'appear_child' })
      .step('c1', { run: async () => (ran.push('c1'), c1Started.resolve(), await c1Go.promise, 'C1') })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const root = defineReactor({ name: 'appear_root' }).interrupt('x', {}).compose('sub', child, { waitFor: ['x'] }).build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    // The cancel looks at the root (paused: no child yet), then waits while a worker resumes the
    // root, spawns the child with the root's awaiting commit and runs the child's first step.
    const lookedAt = deferred<{ readonly root: unknown; readonly childExists: boolean }>();
    let looks = 0;
    const receipts: SignalReceipt[] = [];
    const operatorStore = interceptStore(store, {
      load: async (next, id) => {
        const loaded = await next();
        if (id === 'root' && (looks += 1) === 1) {
          lookedAt.resolve({ root: loaded?.snapshot.value, childExists: (await store.load('root.sub')) !== undefined });
          await c1Started.promise;
        }
        return loaded;
      },
      signal: async (next) => {
        const receipt = await next();
        receipts.push(receipt);
        return receipt;
      },
    });
    const job = interruptJob('root.resume.x', 'root', root, ['x'], { payload: 1 });
    const operator = createRuntime({ store: operatorStore, queue, clock: time, logger, worker: false, reactors: [root] });
    const cancelled = operator.cancel('root', 'stop');
    expect(await lookedAt.promise).toEqual({ root: 'paused', childExists: false });
    const handled = createJobHandler(createEngine({ store, queue, clock: time, logger, reactors: [root] }))(job, new AbortController().signal).then(
      () => 'done',
      (error: unknown) => error,
    );
    expect(await cancelled).toMatchObject({ status: 'cancelled', executionId: 'root', reason: 'stop' });
    expect(receipts.map((r) => r.landed)).toEqual([['root', 'root.sub']]);
    c1Go.resolve(); // c1 ends in the worker: its commit is refused (the operator applied the cancel)
    expect(await handled).toBeInstanceOf(StaleRevisionError);
    expect(ran).toEqual(['c1']);
    expect(await statusOf(store, 'root')).toBe('cancelled');
    expect(await statusOf(store, 'root.sub')).toBe('cancelled');
    expect(await store.readResults('root.sub', ['c1'])).toEqual(new Map());
    // The job delivered again finds both cancelled and runs nothing.
    await createJobHandler(createEngine({ store, queue, clock: time, logger, reactors: [root] }))(job, new AbortController().signal);
    expect(ran).toEqual(['c1']);
    expect(await statusOf(store, 'root.sub')).toBe('cancelled');
    expect((await operator.find('root')).status).toBe('cancelled');
  });
});
