/**
 * An actor failed in the store for unreadable data (`Store.markUnreadable`) whose snapshot still
 * decodes: on Redis, a worker's `acquireAndLoad` also reads the input, which can be missing or
 * truncated while the snapshot is whole. Such an actor is failed everywhere: `find` and
 * `awaitResult` report it failed with the recorded error (never running), its parent's compose
 * step fails with it, and the sweeper stops listing it. (The truncated snapshot itself, on a real
 * Redis, is test/contract/redis-unreadable.test.ts.)
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor, DeserializationError, fail, JobRejectedError } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });
const BACKOFF_MS = 60_000;
const INPUT_MISSING = 'execution run1.sub is incomplete or foreign (input missing): discard it';

function world() {
  const ran: string[] = [];
  const child = defineReactor({ name: 'ud_child' })
    .step('c0', { run: (_a, ctx) => (ran.push(`${ctx.executionId}/c0`), 'C0') })
    .step('c1', {
      waitFor: ['c0'],
      retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: BACKOFF_MS },
      run: (_a, ctx) => (ran.push(`${ctx.executionId}/c1#${ctx.attempt}`), ctx.attempt === 1 ? fail(new Error('not yet')) : 'C1'),
    })
    .build();
  const root = defineReactor({ name: 'ud_root' })
    .step('p0', { run: (_a, ctx) => (ran.push(`${ctx.executionId}/p0`), 'P0'), undo: (_r, _a, ctx) => void ran.push(`${ctx.executionId}/undo:p0`) })
    .compose('sub', child, { waitFor: ['p0'] })
    .step('p1', { waitFor: ['sub'], run: (_a, ctx) => (ran.push(`${ctx.executionId}/p1`), 'P1') })
    .background({ all: true })
    .build();
  const time = createTestClock();
  const inner = createMemoryStore({ clock: time });
  const broken = new Set<string>();
  // What the Redis store throws when the input it read with the lease is missing.
  const store: Store = new Proxy(inner, {
    get: (target, key, receiver) =>
      key === 'acquireAndLoad'
        ? (id: string, lease: Parameters<Store['acquireAndLoad']>[1]) => (broken.has(id) ? Promise.reject(new DeserializationError(INPUT_MISSING)) : target.acquireAndLoad(id, lease))
        : (Reflect.get(target, key, receiver) as unknown),
  });
  const queue = createInProcessQueue({ mode: 'manual', clock: time, maxAttempts: 3, redeliveryDelayMs: () => 0 });
  let ids = 0;
  const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => `run${(ids += 1)}`, reactors: [root] });
  const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
  return { ran, root, time, store, broken, queue, caller, worker };
}

describe('an actor marked unreadable whose snapshot still decodes', () => {
  it('is failed with the recorded error for find and awaitResult, fails its parent\'s compose step, and is not swept; the other tree completes', async () => {
    const { ran, root, time, store, broken, queue, caller, worker } = world();
    await caller.run(root, {});
    await caller.run(root, {});
    await queue.drain();
    expect((await caller.find('run1.sub')).waiting).toMatchObject({ on: 'time' });

    broken.add('run1.sub');
    time.advance(BACKOFF_MS);
    await queue.drain();

    expect(queue.failed().map((f) => [f.job.actor?.id, f.attempts, f.error instanceof JobRejectedError])).toEqual([['run1.sub', 1, true]]);
    expect(await store.readUnreadable('run1.sub')).toEqual({ code: 'deserialization_failed', message: INPUT_MISSING });
    // Its snapshot still says it waits for its retry; the store says failed, and so does every report.
    expect((await store.load('run1.sub'))?.snapshot.value).toBeDefined();
    const view = await caller.find('run1.sub');
    expect(view).toMatchObject({ status: 'failed', waiting: undefined, result: { status: 'failed', message: INPUT_MISSING } });
    expect(view.result?.status === 'failed' && view.result.error).toBeInstanceOf(DeserializationError);
    expect(await caller.awaitResult('run1.sub', { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', message: INPUT_MISSING });
    // The parent's compose step failed with the recorded error; the parent rolled back.
    expect(await caller.awaitResult('run1', { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'sub', message: INPUT_MISSING });
    expect(ran.filter((l) => l.startsWith('run1'))).toEqual(['run1/p0', 'run1.sub/c0', 'run1.sub/c1#1', 'run1/undo:p0']);
    expect(await caller.awaitResult('run2', { timeoutMs: 1_000 })).toMatchObject({ status: 'completed', value: { p0: 'P0', sub: { c0: 'C0', c1: 'C1' }, p1: 'P1' } });
    expect((await store.listActive(10)).ids).toEqual([]);

    // Listed again (a signal landed on it, say), it is not swept into another job: it is unlisted.
    await store.markActive('run1.sub', true);
    expect(await caller.sweepOnce()).toBe(0);
    expect(queue.pending()).toEqual([]);
    expect((await store.listActive(10)).ids).toEqual([]);
    await worker.close();
    await caller.close();
  });
});
