import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor, DeserializationError, ExecutionAbortedError } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

describe('sweeper', () => {
  it('re-enqueues a run whose caller died mid-step; a worker finishes it, re-running only that step', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const ran: string[] = [];
    let hangOnce = true;
    const reactor = defineReactor({ name: 'sweepable' })
      .step('a', { run: () => (ran.push('a'), 'A') })
      .step('b', {
        waitFor: ['a'],
        run: () => {
          ran.push('b');
          if (hangOnce) {
            hangOnce = false;
            return new Promise<string>(() => undefined);
          }
          return 'B';
        },
      })
      .step('c', { waitFor: ['b'], run: () => (ran.push('c'), 'C') })
      .build();
    // The caller's own clock never advances: once it "dies" it stops renewing its lease.
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-1' });
    void caller.run(reactor, {});
    await expect.poll(() => ran).toEqual(['a', 'b']);

    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    expect(await operator.sweepOnce()).toBe(0); // the caller's lease is still live
    time.advance(5_001);
    expect(await operator.sweepOnce()).toBe(1);
    expect(queue.pending().map((j) => [j.actor?.id, j.event])).toEqual([['run-1', undefined]]);
    await operator.sweepOnce(); // same revision, same job id: the queue does not add it twice
    expect(queue.pending()).toHaveLength(1);

    const worker = createWorker({ store, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
    await queue.drain();
    expect(ran).toEqual(['a', 'b', 'b', 'c']);
    expect(await operator.awaitResult('run-1', { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    expect((await store.listActive(10)).ids).toEqual([]);
    await worker.close();
  });

  it('reaches a dead run behind more live runs than one sweep looks at: each sweep goes on where the last stopped', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const reactor = defineReactor({ name: 'long_running' })
      .step('a', { run: () => new Promise<string>(() => undefined) })
      .build();
    // Three live runs (their caller keeps renewing on the shared clock), then one whose caller died.
    const live = createRuntime({ store, queue, clock: time, logger, worker: false, leaseTtlMs: 5_000, reactors: [reactor] });
    for (let i = 0; i < 3; i++) void live.run(reactor, {});
    const dying = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'dead', reactors: [reactor] });
    void dying.run(reactor, {});
    await expect.poll(async () => (await store.listActive(10)).ids.length).toBe(4);
    for (let i = 0; i < 3; i++) time.advance(2_000);
    const operator = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    // Two entries per sweep: the first sweep sees only live runs, the second reaches the dead one.
    expect(await operator.sweepOnce({ limit: 2 })).toBe(0);
    expect(await operator.sweepOnce({ limit: 2 })).toBe(1);
    expect(queue.pending().map((j) => j.actor?.id)).toEqual(['dead']);
    // Then it starts over from the oldest.
    expect(await operator.sweepOnce({ limit: 2 })).toBe(0);
  });

  it('keeps listed a run a newer build wrote: a sweeper that cannot read it leaves it for one that can', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const reactor = defineReactor({ name: 'newer_build' })
      .step('a', { run: () => new Promise<string>(() => undefined) })
      .build();
    const caller = createRuntime({ store, queue, clock: createTestClock(), logger, worker: false, leaseTtlMs: 5_000, generateId: () => 'run-n', reactors: [reactor] });
    void caller.run(reactor, {});
    await expect.poll(async () => (await store.listActive(10)).ids).toEqual(['run-n']);
    // This build meets a machine version it does not know (as decodeEnvelope reports it: retryable).
    const olderBuild: Store = new Proxy(store, {
      get: (target, key, receiver) =>
        key === 'load'
          ? () => Promise.reject(new DeserializationError('stored execution snapshot has machine version 99; this build knows 5', { retryable: true }))
          : (Reflect.get(target, key, receiver) as unknown),
    });
    const older = createRuntime({ store: olderBuild, queue, clock: time, logger, worker: false, reactors: [] });
    time.advance(5_001);
    expect(await older.sweepOnce()).toBe(0);
    expect((await store.listActive(10)).ids).toEqual(['run-n']);
  });

  it('never resumes an aborted run', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const controller = new AbortController();
    const reactor = defineReactor({ name: 'abortable' })
      .step('a', { run: () => 'A' })
      .step('b', { waitFor: ['a'], run: () => (controller.abort(new Error('SIGINT')), new Promise<string>(() => undefined)) })
      .build();
    const runtime = createRuntime({ store, queue, clock: time, logger, worker: false, reactors: [reactor] });
    await expect(runtime.run(reactor, {}, { signal: controller.signal })).rejects.toBeInstanceOf(ExecutionAbortedError);
    time.advance(60_000);
    expect(await runtime.sweepOnce()).toBe(0);
    expect(queue.pending()).toEqual([]);
  });

  it('a scheduled sweep runs as a job: workers schedule it once under one id', async () => {
    const time = createTestClock();
    const store = createMemoryStore({ clock: time });
    const queue = createInProcessQueue({ mode: 'manual', clock: time });
    const worker = createWorker({ store, queue, clock: time, logger, reactors: [], sweepIntervalMs: 1_000 });
    await Promise.resolve();
    time.advance(1_000);
    await expect.poll(() => queue.pending().map((j) => j.kind)).toEqual(['sweep']);
    expect(await queue.drain()).toBe(1);
    await worker.close();
  });
});
