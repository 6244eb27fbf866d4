/**
 * Operator undo and cancel racing the recovery of a composed run: undo of a root paused on a child
 * that moved on (its process died before the root picked it up) is refused until a job delivers
 * it again; a cancel that meets the root just moving into a compose step also stops the child
 * created under it. Races are forced with stores whose calls wait for the test.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import { serializeError } from '../../src/serialization/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { handleInWorker, interruptJob, manualWorld, outliveLease, startDoomedWorker } from '../support/recovery-kit.js';

const logger = pino({ level: 'silent' });

describe('undo and cancel while a composed run is being recovered', () => {
  it('undo of a root paused on a child its dead worker had resumed is refused until the job delivers it again; then it undoes the child too', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const child = defineReactor({ name: 'ud_child' })
      .step('c0', { run: () => 'C0', undo: () => void ran.push('undo:c0') })
      .interrupt('approve', { waitFor: ['c0'] })
      .step('c1', { waitFor: ['approve'], run: () => (ran.push('c1'), hang ? new Promise<string>(() => undefined) : 'C1'), undo: () => void ran.push('undo:c1') })
      .build();
    const root = defineReactor({ name: 'ud_root' })
      .step('p0', { run: () => 'P0', undo: () => void ran.push('undo:p0') })
      .compose('sub', child, { waitFor: ['p0'] })
      .build();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await operator.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.resume.sub.approve', 'root', root, ['sub', 'approve'], { payload: 'ok' });
    startDoomedWorker(world, [root], job);
    await expect.poll(() => ran).toEqual(['c1']);
    outliveLease(world); // the worker died inside c1; its job will be delivered again
    await expect(operator.undo('root')).rejects.toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/composed child root\.sub is running and has not been picked up yet/) as string });
    hang = false;
    await handleInWorker(world, [root], job);
    expect((await operator.find('root')).status).toBe('completed');
    expect(await operator.undo('root')).toMatchObject({ status: 'cancelled' });
    expect(ran).toEqual(['c1', 'c1', 'undo:c1', 'undo:c0', 'undo:p0']);
  });

  it('undo of a root paused on a child rolling back by itself is refused; the delivered job finishes the rollback', async () => {
    const world = manualWorld();
    const { time, store, queue } = world;
    const ran: string[] = [];
    let hang = true;
    const child = defineReactor({ name: 'ur_child' })
      .step('c0', { run: () => 'C0', undo: () => (ran.push('undo:c0'), hang ? new Promise<void>(() => undefined) : undefined) })
      .interrupt('approve', { waitFor: ['c0'] })
      .build();
    const root = defineReactor({ name: 'ur_root' }).compose('sub', child, {}).build();
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await operator.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.timeout.sub.approve', 'root', root, ['sub', 'approve'], { error: serializeError(new Error('timed out')) });
    startDoomedWorker(world, [root], job);
    await expect.poll(() => ran).toEqual(['undo:c0']);
    outliveLease(world);
    hang = false;
    await expect(operator.undo('root')).rejects.toMatchObject({ code: 'invalid_state' });
    await handleInWorker(world, [root], job);
    expect((await store.load('root.sub'))?.snapshot.value).toBe('failed');
    expect((await operator.find('root')).status).toBe('failed');
  });

  it('a cancel that meets the root just moving into a compose step also stops the child created under it', async () => {
    const time = createTestClock();
    const inner = createMemoryStore({ clock: time });
    const ran: string[] = [];
    let cancelDone: () => void = () => undefined;
    const afterCancel = new Promise<void>((r) => (cancelDone = r));
    let createCalled: () => void = () => undefined;
    const atCreate = new Promise<void>((r) => (createCalled = r));
    const store: Store = new Proxy(inner, {
      get: (t, k, r) =>
        k === 'create'
          ? async (...a: Parameters<Store['create']>) => {
              if (a[0].id === 'root.sub') {
                createCalled();
                await afterCancel;
              }
              return t.create(...a);
            }
          : (Reflect.get(t, k, r) as unknown),
    });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const child = defineReactor({ name: 'nc_child' })
      .step('c1', { run: () => (ran.push('c1'), 'C1') })
      .step('c2', { waitFor: ['c1'], run: () => (ran.push('c2'), 'C2') })
      .build();
    const root = defineReactor({ name: 'nc_root' }).interrupt('x', {}).compose('sub', child, { waitFor: ['x'] }).build();
    const rt = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'root', reactors: [root] });
    expect(await rt.run(root, {})).toMatchObject({ status: 'paused' });
    const job = interruptJob('root.resume.x', 'root', root, ['x'], { payload: 1 });
    const handled = createJobHandler(createEngine({ store, queue, clock: time, logger, reactors: [root] }))(job, new AbortController().signal).catch((e: Error) => e.message);
    await atCreate;
    expect(await rt.cancel('root', 'stop')).toMatchObject({ status: 'cancelled' });
    cancelDone();
    await handled;
    expect(ran).toEqual([]);
    expect((await inner.load('root.sub'))?.snapshot.value).toBe('cancelled');
    expect((await rt.find('root')).status).toBe('cancelled');
  });

  it('undo of a root paused on a child cancelled by itself is not refused: nothing will pick that child up', async () => {
    const ran: string[] = [];
    const child = defineReactor({ name: 'uc_child' })
      .step('c0', { run: () => 'C0', undo: () => void ran.push('undo:c0') })
      .interrupt('ok', { waitFor: ['c0'] })
      .build();
    const root = defineReactor({ name: 'uc_root' })
      .step('r0', { run: () => 'R0', undo: () => void ran.push('undo:r0') })
      .compose('sub', child, { waitFor: ['r0'] })
      .build();
    const runtime = createRuntime({ logger, reactors: [root] });
    expect(await runtime.run(root, {}, { executionId: 'root' })).toMatchObject({ status: 'paused' });
    expect(await runtime.cancel('root.sub', 'operator')).toMatchObject({ status: 'cancelled' });
    expect(await runtime.undo('root')).toMatchObject({ status: 'cancelled' });
    expect(ran).toEqual(['undo:r0']);
    await runtime.close();
  });
});
