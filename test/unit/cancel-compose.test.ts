/**
 * Cancelling a run that waits on a composed child: the child stops too (running or paused), and a
 * cancel racing a continue of the child's interrupt never turns into a rollback. Races are forced
 * with gated steps and a store whose calls wait for the test.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { AnyReactorDefinition, JobSpec, Store } from '../../src/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { manualWorld } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

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

  it('cancel racing a continue of the paused child: no rollback runs', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    // The continue waits, lease in hand, until the cancel has cancelled the child; the cancel's
    // commit of the root waits until the continue is done.
    let beforeLease: (() => Promise<void>) | undefined;
    let beforeRootCancel: (() => Promise<void>) | undefined;
    let childCancelled: () => void = () => undefined;
    const childIsCancelled = new Promise<void>((resolve) => (childCancelled = resolve));
    const store: Store = new Proxy(inner, {
      get(target, key, receiver) {
        if (key === 'acquireLease') {
          return async (...args: Parameters<Store['acquireLease']>) => {
            const hold = beforeLease;
            beforeLease = undefined;
            if (hold !== undefined) await hold();
            return target.acquireLease(...args);
          };
        }
        if (key === 'commit') {
          return async (...args: Parameters<Store['commit']>) => {
            const [id, , commit] = args;
            const hold = id === 'root' && commit.status === 'cancelled' ? beforeRootCancel : undefined;
            if (hold !== undefined) {
              beforeRootCancel = undefined;
              await hold();
            }
            const revision = await target.commit(...args);
            if (id === 'root.sub' && commit.status === 'cancelled') childCancelled();
            return revision;
          };
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    const child = defineReactor({ name: 'cr_child' })
      .interrupt('approve', {})
      .step('c1', { waitFor: ['approve'], run: () => (ran.push('c1'), 'C1') })
      .build();
    const parent = defineReactor({ name: 'cr_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1'), undo: () => void ran.push('undo:p1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .build();
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    expect(await runtime.run(parent, {})).toMatchObject({ status: 'paused' });
    let continueHasChecked: () => void = () => undefined;
    const continueChecked = new Promise<void>((resolve) => (continueHasChecked = resolve));
    let continueFinished: () => void = () => undefined;
    const continueDone = new Promise<void>((resolve) => (continueFinished = resolve));
    beforeLease = async () => {
      continueHasChecked();
      await childIsCancelled;
    };
    beforeRootCancel = () => continueDone;
    const continued = runtime
      .continue('root', { step: ['sub', 'approve'], payload: 'yes' })
      .catch((error: unknown) => error)
      .finally(() => continueFinished());
    await continueChecked; // the continue has checked and claimed the interrupt
    const cancelled = runtime.cancel('root', 'stop').catch((error: unknown) => error);
    await continued;
    expect(await cancelled).toMatchObject({ status: 'cancelled' });
    expect(ran).toEqual(['p1']);
    expect((await runtime.find('root')).status).toBe('cancelled');
  });

  it('a caller whose composed child is refused between the cancel of the child and of the run still learns it was cancelled', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    let letRootCancelGo: () => void = () => undefined;
    const rootCancelHeld = new Promise<void>((resolve) => (letRootCancelGo = resolve));
    let childCancelled: () => void = () => undefined;
    const childIsCancelled = new Promise<void>((resolve) => (childCancelled = resolve));
    const store: Store = new Proxy(inner, {
      get(target, key, receiver) {
        if (key !== 'commit') return Reflect.get(target, key, receiver) as unknown;
        return async (...args: Parameters<Store['commit']>) => {
          if (args[0] === 'root' && args[2].status === 'cancelled') await rootCancelHeld;
          const revision = await target.commit(...args);
          if (args[0] === 'root.sub' && args[2].status === 'cancelled') childCancelled();
          return revision;
        };
      },
    });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    let release: () => void = () => undefined;
    const child = defineReactor({ name: 'cm_child' })
      .step('c1', { run: () => (ran.push('c1'), new Promise<string>((resolve) => (release = () => resolve('C1')))) })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const parent = defineReactor({ name: 'cm_parent' })
      .step('p1', { run: () => (ran.push('p1'), 'P1') })
      .compose('sub', child, { waitFor: ['p1'] })
      .build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    const running = caller.run(parent, {}).catch((error: unknown) => error);
    await expect.poll(() => ran).toEqual(['p1', 'c1']);
    const cancelled = caller.cancel('root', 'stop');
    await childIsCancelled;
    release(); // c1 ends while the run itself is not cancelled yet: the child's commit is refused
    expect(await running).toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/root\.sub was cancelled/) as string });
    letRootCancelGo();
    expect(await cancelled).toMatchObject({ status: 'cancelled' });
    expect(ran).toEqual(['p1', 'c1']);
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

  it('a child that finishes while the cancel reaches it does not make the cancel fail', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    let cancelling = false;
    let release: () => void = () => undefined;
    let whenChildLoaded: (() => Promise<void>) | undefined;
    const store: Store = new Proxy(inner, {
      get(target, key, receiver) {
        if (key !== 'load') return Reflect.get(target, key, receiver) as unknown;
        return async (id: string) => {
          const loaded = await target.load(id);
          const hook = cancelling && id === 'root.sub' ? whenChildLoaded : undefined;
          if (hook !== undefined) {
            whenChildLoaded = undefined;
            await hook();
          }
          return loaded;
        };
      },
    });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    const child = defineReactor({ name: 'fin_child' })
      .step('c1', { run: () => (ran.push('c1'), new Promise<string>((resolve) => (release = () => resolve('C1')))) })
      .build();
    const parent = defineReactor({ name: 'fin_parent' })
      .compose('sub', child, {})
      .step('p2', { waitFor: ['sub'], run: () => (ran.push('p2'), new Promise<string>(() => undefined)) })
      .build();
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [parent] });
    void runtime.run(parent, {}).catch(() => undefined);
    await expect.poll(() => ran).toEqual(['c1']);
    // The cancel has read the child running; the child then completes before it is cancelled.
    whenChildLoaded = async () => {
      release();
      await expect.poll(async () => (await inner.load('root.sub'))?.snapshot.value).toBe('completed');
    };
    cancelling = true;
    expect(await runtime.cancel('root', 'stop')).toMatchObject({ status: 'cancelled' });
    expect((await inner.load('root.sub'))?.snapshot.value).toBe('completed');
  });

  it('a cancel whose child appears between its two looks still cancels the run (and does not fail)', async () => {
    const { time, store, queue } = manualWorld();
    const defer = () => {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => (resolve = r));
      return { promise, resolve };
    };
    const ran: string[] = [];
    const c1Go = defer();
    const child = defineReactor({ name: 'appear_child' })
      .step('c1', { run: async () => (ran.push('c1'), await c1Go.promise, 'C1') })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const root = defineReactor({ name: 'appear_root' }).interrupt('x', {}).compose('sub', child, { waitFor: ['x'] }).build();
    const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await caller.run(root, {})).toMatchObject({ status: 'paused' });
    // The worker resuming the root waits to create the child until the cancel has looked for it once.
    const atCreate = defer();
    const mayCreate = defer();
    const workerStore: Store = new Proxy(store, {
      get: (target, key, receiver) =>
        key === 'create'
          ? async (...args: Parameters<Store['create']>) => {
              if (args[0].id === 'root.sub') {
                atCreate.resolve();
                await mayCreate.promise;
              }
              return target.create(...args);
            }
          : (Reflect.get(target, key, receiver) as unknown),
    });
    let childLooks = 0;
    const cancelStore: Store = new Proxy(store, {
      get: (target, key, receiver) =>
        key === 'load'
          ? async (id: string) => {
              const loaded = await target.load(id);
              if (id === 'root.sub' && (childLooks += 1) === 1) mayCreate.resolve();
              return loaded;
            }
          : (Reflect.get(target, key, receiver) as unknown),
    });
    const job: JobSpec = {
      id: 'root.resume.x',
      kind: 'advance',
      executionId: 'root',
      reactor: root.name,
      event: { type: 'xreactor.interrupt.resume', at: time.now(), step: 'x', payload: 1, path: ['x'] },
    };
    const handled = createJobHandler(createEngine({ store: workerStore, queue, clock: time, logger, reactors: [root] }))(job, new AbortController().signal).catch(() => undefined);
    await atCreate.promise;
    const operator = createRuntime({ store: cancelStore, queue, clock: time, logger, worker: false, reactors: [root] });
    const cancelled = operator.cancel('root', 'stop');
    c1Go.resolve();
    expect(await cancelled).toMatchObject({ status: 'cancelled' });
    await handled;
    expect((await operator.find('root')).status).toBe('cancelled');
    const childStatus = (await store.load('root.sub'))?.snapshot.value;
    // Cancelled, or completed by steps already under way before the cancel landed: never left running.
    expect(['cancelled', 'completed']).toContain(childStatus);
  });
});
