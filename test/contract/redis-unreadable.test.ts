/**
 * Unreadable stored data on Redis, end to end: a worker (and a sweeper) meeting a truncated
 * snapshot fails that actor in the store (`Store.markUnreadable`: status `failed`, the error
 * recorded, the bytes kept, unlisted), fails the job (not completed, not retried), signals the
 * parent of a composed child, and every other actor goes on. Real Redis store and worker; a manual
 * in-process queue on a test clock, so the parked child's wake is delivered when the test says.
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, createWorker, defineReactor, DeserializationError, fail, JobRejectedError } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { createRedisStore } from '../../src/redis.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { decode } from '../../src/serialization/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue, TestClock } from '../../src/testing/index.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

const logger = pino({ level: 'silent' });
/** The child's retry backoff: long, so only the test's `advance` makes its wake due. */
const BACKOFF_MS = 60_000;

let server: RedisServer;
let prefixes = 0;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const ran: string[] = [];
const child = defineReactor({ name: 'tomb_child' })
  .step('c0', { run: (_a, ctx) => (ran.push(`${ctx.executionId}/c0`), 'C0'), undo: (_r, _a, ctx) => void ran.push(`${ctx.executionId}/undo:c0`) })
  .step('c1', {
    waitFor: ['c0'],
    retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: BACKOFF_MS },
    run: (_a, ctx) => (ran.push(`${ctx.executionId}/c1#${ctx.attempt}`), ctx.attempt === 1 ? fail(new Error('not yet')) : 'C1'),
  })
  .build();
const root = defineReactor({ name: 'tomb_root' })
  .step('p0', { run: (_a, ctx) => (ran.push(`${ctx.executionId}/p0`), 'P0'), undo: (_r, _a, ctx) => void ran.push(`${ctx.executionId}/undo:p0`) })
  .compose('sub', child, { waitFor: ['p0'] })
  .step('p1', { waitFor: ['sub'], run: (_a, ctx) => (ran.push(`${ctx.executionId}/p1`), 'P1') })
  .background({ all: true })
  .build();

interface World {
  readonly redis: Redis;
  readonly prefix: string;
  readonly time: TestClock;
  readonly store: Store;
  readonly queue: InProcessQueue;
  readonly caller: Runtime;
}

const worlds: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of worlds.splice(0)) await close();
  ran.length = 0;
});

/** A Redis store, a manual queue and a test clock; a caller runtime and a worker on them. */
function world(): World {
  const redis = new Redis(server.url);
  const prefix = `unreadable-${process.pid}-${(prefixes += 1)}`;
  const time = createTestClock();
  const store = createRedisStore({ redis, prefix, clock: time });
  const queue = createInProcessQueue({ mode: 'manual', clock: time, maxAttempts: 3, redeliveryDelayMs: () => 0 });
  let ids = 0;
  const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => `run${(ids += 1)}`, reactors: [root] });
  const worker = createWorker({ store, queue, clock: time, logger, reactors: [root], sweepIntervalMs: 0 });
  worlds.push(async () => {
    await worker.close();
    await caller.close();
    await store.close();
    await redis.quit();
  });
  return { redis, prefix, time, store, queue, caller };
}

/** Cut the last bytes off an actor's stored snapshot; returns the bytes left. */
async function truncateSnapshot(w: World, id: string): Promise<Buffer> {
  const key = createKeyBuilder(w.prefix).executionKeys(id).execution;
  const bytes = (await w.redis.hgetBuffer(key, EXECUTION_FIELDS.snapshot))!;
  const cut = bytes.subarray(0, bytes.length - 3);
  await w.redis.hset(key, EXECUTION_FIELDS.snapshot, cut);
  return cut;
}

async function storedFields(w: World, id: string) {
  const fields = await w.redis.hgetallBuffer(createKeyBuilder(w.prefix).executionKeys(id).execution);
  const unreadable = fields[EXECUTION_FIELDS.unreadable];
  return { status: fields[EXECUTION_FIELDS.status]?.toString(), snapshot: fields[EXECUTION_FIELDS.snapshot], unreadable: unreadable === undefined ? undefined : decode(unreadable) };
}

async function allActive(store: Store): Promise<string[]> {
  return (await store.listActive(100)).ids;
}

describe('unreadable stored data on Redis', () => {
  it('a worker meeting a truncated composed child fails it in the store and fails the job; the parent fails with the error; the other tree completes', async () => {
    const w = world();
    expect(await w.caller.run(root, {})).toMatchObject({ status: 'dispatched', executionId: 'run1' });
    expect(await w.caller.run(root, {})).toMatchObject({ status: 'dispatched', executionId: 'run2' });
    await w.queue.drain();
    // Both children parked on c1's backoff; both roots await them.
    expect((await w.caller.find('run1.sub')).waiting).toMatchObject({ on: 'time' });
    expect((await w.caller.find('run1')).waiting).toEqual({ on: 'actors', step: 'sub', actors: ['run1.sub'] });
    const wake = w.queue.inspect({ actorId: 'run1.sub' }).map((p) => p.job.id);
    expect(wake).toHaveLength(1);

    const cut = await truncateSnapshot(w, 'run1.sub');
    w.time.advance(BACKOFF_MS);
    await w.queue.drain();

    // The job: failed at once, not completed, not retried.
    const failed = w.queue.failed();
    expect(failed.map((f) => [f.job.id, f.attempts])).toEqual([[wake[0], 1]]);
    expect(failed[0]!.error).toBeInstanceOf(JobRejectedError);
    expect(String((failed[0]!.error as Error).message)).toMatch(/^execution run1\.sub cannot be advanced: stored snapshot could not be decoded: stored value ends in the middle/);
    // The actor: failed in the store with the error, its bytes as they were, unlisted.
    const stored = await storedFields(w, 'run1.sub');
    expect(stored).toEqual({ status: 'failed', snapshot: cut, unreadable: { code: 'deserialization_failed', message: expect.stringMatching(/^stored snapshot could not be decoded: stored value ends in the middle/) as string } });
    expect(await allActive(w.store)).not.toContain('run1.sub');
    const view = await w.caller.find('run1.sub');
    expect(view.status).toBe('failed');
    expect(view.result).toMatchObject({ status: 'failed', error: expect.any(DeserializationError) as Error, message: (stored.unreadable as { message: string }).message });
    // The parent was signalled: its compose step failed with the error and it rolled back.
    const parent = await w.caller.awaitResult('run1', { timeoutMs: 1_000 });
    expect(parent).toMatchObject({ status: 'failed', step: 'sub', message: expect.stringMatching(/ends in the middle/) as string });
    expect(await allActive(w.store)).not.toContain('run1');
    // The other tree went on.
    expect(await w.caller.awaitResult('run2', { timeoutMs: 1_000 })).toMatchObject({ status: 'completed', value: { p0: 'P0', sub: { c0: 'C0', c1: 'C1' }, p1: 'P1' } });
    const of = (root: string) => ran.filter((label) => label.split(/[./]/)[0] === root);
    expect(of('run1')).toEqual(['run1/p0', 'run1.sub/c0', 'run1.sub/c1#1', 'run1/undo:p0']);
    expect(of('run2')).toEqual(['run2/p0', 'run2.sub/c0', 'run2.sub/c1#1', 'run2.sub/c1#2', 'run2/p1']);
  });

  it('a sweep meeting a truncated child fails it in the store and stops listing it; the parent awaiting it is failed', async () => {
    const w = world();
    await w.caller.run(root, {});
    await w.queue.drain();
    expect(await allActive(w.store)).toEqual(['run1', 'run1.sub']);
    const cut = await truncateSnapshot(w, 'run1.sub');
    // The root awaits a child the sweep cannot read: the sweep marks the child and sends the root its failure.
    expect(await w.caller.sweepOnce()).toBe(1);
    expect(await storedFields(w, 'run1.sub')).toMatchObject({ status: 'failed', snapshot: cut, unreadable: { code: 'deserialization_failed' } });
    expect(await allActive(w.store)).toEqual(['run1']);
    expect(w.queue.pending().map((j) => [j.actor?.id, (j.event as { type?: string } | undefined)?.type])).toEqual([
      ['run1', 'xreactor.step.failed'],
      ['run1.sub', 'xreactor.timer.fired'],
    ]);
    await w.queue.drain();
    expect(await w.caller.awaitResult('run1', { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'sub', message: expect.stringMatching(/composed execution run1\.sub is gone/) as string });
    expect(await allActive(w.store)).toEqual([]);
    expect(await w.caller.sweepOnce()).toBe(0);
    // The child's own wake comes later: its job fails at once, and the mark stays as it was.
    w.time.advance(BACKOFF_MS);
    await w.queue.drain();
    expect(w.queue.failed().map((f) => [f.job.actor?.id, f.attempts, f.error instanceof JobRejectedError])).toEqual([['run1.sub', 1, true]]);
    expect(await storedFields(w, 'run1.sub')).toMatchObject({ status: 'failed', snapshot: cut });
    expect(await allActive(w.store)).toEqual([]);
  });
});
