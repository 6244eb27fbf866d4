import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue as BullQueue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobRejectedError } from '../../src/errors/index.js';
import { bundleJobId, bundleSizes } from '../../src/queue/bullmq-bundles.js';
import { createBullmqQueue, decodeJobId, encodeJobId } from '../../src/queue/bullmq-queue.js';
import type { BullmqQueue, BullmqQueueOptions } from '../../src/queue/bullmq-queue.js';
import type { Consumer, JobHandler, JobSpec } from '../../src/queue/queue.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/bullmq-consumer.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

let redis: RedisServer;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await redis?.stop();
});

const job = (id: string, extra: Partial<JobSpec> & { readonly executionId?: string } = {}): JobSpec => {
  const { executionId, ...rest } = extra;
  return { id, kind: 'advance', actor: { kind: 'execution', id: executionId ?? 'e1' }, ...rest };
};

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}

/** Rejects with the signal's reason once it aborts (at once when it has already). */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

/** A handler that holds part `r.m.0.start` until its signal aborts (resolving `started` as it begins) and handles every other job at once. */
function holdingFirstPart(started: { resolve: () => void }): JobHandler {
  return async (j, signal) => {
    if (j.id !== 'r.m.0.start') return;
    started.resolve();
    await untilAborted(signal);
  };
}

/** A fresh queue (own name and key prefix) on the test Redis, closed after the test. */
function newQueue(options: Partial<BullmqQueueOptions> = {}): BullmqQueue & { readonly prefix: string } {
  const prefix = `t-${randomUUID().slice(0, 8)}`;
  const queue = createBullmqQueue({ connection: { host: '127.0.0.1', port: redis.port }, prefix, ...options });
  cleanups.push(() => queue.close());
  return Object.assign(queue, { prefix });
}

/** Records handled jobs and resolves `until(n)` once n jobs were handled. */
function recording(extra?: (job: JobSpec) => Promise<void>) {
  const handled: JobSpec[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const handler: JobHandler = async (j) => {
    await extra?.(j);
    handled.push(j);
    for (const waiter of waiters.filter((w) => handled.length >= w.n)) waiter.resolve();
  };
  const until = (n: number) =>
    handled.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve }));
  return { handled, handler, until };
}

function consume(queue: BullmqQueue, handler: JobHandler, concurrency = 1): Consumer {
  const consumer = queue.consume(handler, { concurrency });
  cleanups.push(() => consumer.close({ force: true }));
  return consumer;
}

describe('job id encoding', () => {
  it('escapes ":" and "%" and marks integer-like ids, reversibly and without collisions', () => {
    const ids = ['e1:step:3', 'e1-step-3', 'e1%3Astep', '42', '-7', '%i42', 'plain', '0x1f', ''];
    const encoded = ids.map(encodeJobId);
    expect(encoded).toEqual(['e1%3Astep%3A3', 'e1-step-3', 'e1%253Astep', '%i42', '%i-7', '%25i42', 'plain', '0x1f', '']);
    expect(new Set(encoded).size).toBe(ids.length);
    expect(encoded.map(decodeJobId)).toEqual(ids);
    for (const id of encoded) {
      expect(id).not.toContain(':');
      expect(String(parseInt(id, 10)) === id).toBe(false);
    }
  });
});

describe('bullmq queue', () => {
  it('delivers an enqueued job to the consumer with its data intact', async () => {
    const queue = newQueue();
    const { handled, handler, until } = recording();
    consume(queue, handler);
    const specs = [
      job('e1:advance:1', { event: { type: 'xreactor.step.succeeded', at: new Date(1234), big: 10n ** 20n, nested: { u: undefined, list: [1, 'two'] } } }),
      job('42', { executionId: 'e2' }),
    ];
    await queue.enqueue(specs);
    await until(2);
    expect(handled).toEqual(specs);
    const stored = await queue.bullQueue.getJob(encodeJobId('e1:advance:1'));
    expect(stored?.data).toMatchObject({ actor: 'execution:e1' });
  });

  it('adds a job id once, while it waits and after it completed', async () => {
    const queue = newQueue();
    const { handled, handler, until } = recording();
    await queue.enqueue([job('dup'), job('dup')]);
    await queue.enqueue([job('dup')]);
    consume(queue, handler);
    await until(1);
    await queue.enqueue([job('dup'), job('sentinel')]);
    await until(2);
    expect(handled.map((j) => j.id)).toEqual(['dup', 'sentinel']);
    expect(await queue.bullQueue.getJobState(encodeJobId('dup'))).toBe('completed');
  });

  it('does not deliver a delayed job before its delay', async () => {
    const queue = newQueue();
    const seen: [string, number][] = [];
    const { handler, until } = recording(async (j) => void seen.push([j.id, Date.now()]));
    consume(queue, handler);
    const start = Date.now();
    await queue.enqueue([job('later', { delayMs: 700 }), job('now')]);
    await until(2);
    expect(seen.map(([id]) => id)).toEqual(['now', 'later']);
    expect(seen[1]![1] - start).toBeGreaterThanOrEqual(700);
  });

  it('delivers a job again after its handler throws', async () => {
    let attempts = 0;
    const errors: string[] = [];
    const q = newQueue({ backoffMs: 10, onError: (error, j) => errors.push(`${j?.id}: ${error.message}`) });
    const { handler, until } = recording(async () => {
      attempts += 1;
      if (attempts < 3) throw new Error(`transient ${attempts}`);
    });
    consume(q, handler);
    await q.enqueue([job('flaky')]);
    await until(1);
    expect(attempts).toBe(3);
    expect(errors).toEqual(['flaky: transient 1', 'flaky: transient 2']);
  });

  it('handles as many jobs at once as the consumer concurrency', async () => {
    const queue = newQueue();
    const release = deferred();
    const allStarted = deferred();
    let running = 0;
    let peak = 0;
    const { handler, until } = recording(async () => {
      running += 1;
      peak = Math.max(peak, running);
      if (running === 4) allStarted.resolve();
      await release.promise;
      running -= 1;
    });
    consume(queue, handler, 4);
    await queue.enqueue(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => job(id)));
    await allStarted.promise;
    expect(running).toBe(4);
    release.resolve();
    await until(6);
    expect(peak).toBe(4);
  });

  it('fires the job signal on a forced close and delivers the job to the next consumer', async () => {
    const queue = newQueue({ backoffMs: 10 });
    const started = deferred();
    let reason: unknown;
    const first = queue.consume(async (_j, signal) => {
      started.resolve();
      await untilAborted(signal).catch((error: unknown) => {
        reason = error;
        throw error;
      });
    });
    await queue.enqueue([job('long')]);
    await started.promise;
    await first.close({ force: true });
    expect(reason).toMatchObject({ code: 'consumer_closed' });
    const { handled, handler, until } = recording();
    consume(queue, handler);
    await until(1);
    expect(handled.map((j) => j.id)).toEqual(['long']);
  });

  it('delivers again a job whose worker process died, after the stalled interval', async () => {
    const worker = { lockDurationMs: 1000, stalledIntervalMs: 500 };
    const queue = newQueue({ queueName: 'crash', worker });
    const child = spawnConsumer({ url: redis.url, queueName: 'crash', prefix: queue.prefix, ...worker });
    cleanups.push(() => killChild(child.process));
    await child.line('ready');
    await queue.enqueue([job('e1:advance:7')]);
    await child.line('handling e1:advance:7');
    await killChild(child.process);
    const killedAt = Date.now();

    const { handled, handler, until } = recording();
    consume(queue, handler);
    await until(1);
    expect(handled.map((j) => j.id)).toEqual(['e1:advance:7']);
    // The lock had to expire before the stalled checker could hand the job over.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(500);
  });

  it('refuses an ioredis instance whose maxRetriesPerRequest is not null when consuming', async () => {
    const { Redis } = await import('ioredis');
    const client = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: true });
    const queue = createBullmqQueue({ connection: client, prefix: `t-${randomUUID().slice(0, 8)}` });
    cleanups.push(async () => {
      await queue.close();
      client.disconnect();
    });
    expect(() => queue.consume(async () => undefined)).toThrow(/maxRetriesPerRequest 20; BullMQ workers need null/);
  });
});

describe('bundles: the sibling jobs of one throw', () => {
  const throwOf = (n: number, prefix = 'r.m') => Array.from({ length: n }, (_, i) => job(`${prefix}.${i}.start`, { executionId: `${prefix}.${i}` }));
  /** The BullMQ jobs the queue holds, by id, with their part counts. */
  /** The id of the bundle of `r.m.<from>.start` … `r.m.<from + parts - 1>.start`. */
  const bundleOf = (from: number, parts: number, prefix = 'r.m') => bundleJobId(Array.from({ length: parts }, (_, i) => `${prefix}.${from + i}.start`));
  const stored = async (queue: BullmqQueue) =>
    (await queue.bullQueue.getJobs(['waiting', 'active', 'completed', 'delayed', 'failed'], 0, -1)).map((j) => [j.id, j.data.parts ?? 1] as const).sort();

  it('cuts a throw into bundles of at most bundleSize, sizes differing by at most one, in order', () => {
    expect(bundleSizes(50, 5)).toEqual([5, 5, 5, 5, 5, 5, 5, 5, 5, 5]);
    expect(bundleSizes(7, 5)).toEqual([4, 3]);
    expect(bundleSizes(11, 5)).toEqual([4, 4, 3]);
    expect(bundleSizes(1, 5)).toEqual([1]);
    expect(bundleSizes(0, 5)).toEqual([]);
    expect(bundleSizes(3, 1)).toEqual([1, 1, 1]);
  });

  it('carries a throw in bundles, hands every part over once with its data intact, and adds nothing twice when the call is made again', async () => {
    // Sent by a consumer with eagerBundle, the call made again would run its first bundle here again (see below).
    const queue = newQueue({ bundleSize: 5, eagerBundle: false });
    const jobs = throwOf(12).map((j, i) => (i === 3 ? { ...j, event: { type: 'xreactor.element.start', at: new Date(7), big: 2n ** 70n } } : j));
    await queue.enqueue(jobs, { bundle: true });
    await queue.enqueue(jobs, { bundle: true });
    expect(await stored(queue)).toEqual([
      [bundleOf(0, 4), 4],
      [bundleOf(4, 4), 4],
      [bundleOf(8, 4), 4],
    ].sort());
    expect(bundleOf(0, 4)).toMatch(/^%b4-[0-9a-f]{12}\.r\.m\.0\.start$/);
    expect((await queue.bullQueue.getJob(bundleOf(0, 4)))?.data.actor).toBe('execution:r.m.0 +3');
    const { handled, handler, until } = recording();
    consume(queue, handler, 4);
    await until(12);
    await queue.enqueue(jobs, { bundle: true });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(handled.map((j) => j.id).sort()).toEqual(jobs.map((j) => j.id).sort());
    expect(handled.find((j) => j.id === jobs[3]!.id)).toEqual(jobs[3]);
  });

  it('without a bundleSize, bundles by 10, and once the queue consumes, by no more than its highest consumer concurrency', async () => {
    const sender = newQueue();
    await sender.enqueue(throwOf(20, 'a.m'), { bundle: true });
    expect((await stored(sender)).map(([, parts]) => parts)).toEqual([10, 10]);
    const worker = newQueue({ eagerBundle: false });
    consume(worker, recording().handler, 2);
    await worker.enqueue(throwOf(4, 'b.m'), { bundle: true });
    expect((await stored(worker)).filter(([id]) => String(id).includes('b.m.')).map(([, parts]) => parts)).toEqual([2, 2]);
    // A second consumer at 3: the highest counts; once it is closed, the first one's again.
    const second = consume(worker, recording().handler, 3);
    await worker.enqueue(throwOf(6, 'c.m'), { bundle: true });
    expect((await stored(worker)).filter(([id]) => String(id).includes('c.m.')).map(([, parts]) => parts)).toEqual([3, 3]);
    await second.close();
    await worker.enqueue(throwOf(6, 'd.m'), { bundle: true });
    expect((await stored(worker)).filter(([id]) => String(id).includes('d.m.')).map(([, parts]) => parts)).toEqual([2, 2, 2]);
  });

  it('gives a list that differs in any part another id: a re-dispatch computed again from moved state is not dropped as a duplicate', async () => {
    const queue = newQueue({ bundleSize: 5 });
    const [a, b, c, d] = throwOf(4);
    await queue.enqueue([a!, b!, c!], { bundle: true });
    await queue.enqueue([a!, c!, d!], { bundle: true });
    expect((await stored(queue)).map(([, parts]) => parts)).toEqual([3, 3]);
    const { handled, handler, until } = recording();
    consume(queue, handler, 6);
    await until(6);
    expect(handled.map((j) => j.id).sort()).toEqual([a, a, b, c, c, d].map((j) => j!.id).sort());
  });

  it('reports a bundle that cannot be decoded once, as its own error, and fails it at once', async () => {
    const errors: string[] = [];
    const queue = newQueue({ bundleSize: 5, onError: (error, j) => errors.push(`${j?.id ?? '-'}: ${error.message}`) });
    await queue.bullQueue.add('bundle', { actor: 'execution:x +1', spec: Buffer.from('not msgpack at all').toString('base64'), parts: 2 }, { jobId: '%b2-000000000000.x' });
    const { handler } = recording();
    consume(queue, handler, 2);
    for (let i = 0; i < 100 && (await queue.bullQueue.getJobState('%b2-000000000000.x')) !== 'failed'; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await queue.bullQueue.getJobState('%b2-000000000000.x')).toBe('failed');
    expect(errors).toEqual([expect.stringMatching(/^-: BullMQ job "%b2-000000000000.x" .* does not hold an xreactor job spec/)]);
  });

  it('adds every failed part again alone even when the onError callback throws', async () => {
    let failures = 0;
    const queue = newQueue({
      bundleSize: 5,
      backoffMs: 10,
      onError: () => {
        throw new Error('a broken error callback');
      },
    });
    const { handled, handler, until } = recording(async (j) => {
      if ((j.id === 'r.m.1.start' || j.id === 'r.m.3.start') && failures < 2) {
        failures += 1;
        throw new Error('transient');
      }
    });
    await queue.enqueue(throwOf(5), { bundle: true });
    consume(queue, handler, 5);
    await until(5);
    expect(handled.map((j) => j.id).sort()).toEqual(throwOf(5).map((j) => j.id).sort());
    expect(await queue.bullQueue.getJobState(bundleOf(0, 5))).toBe('completed');
  });

  it('sends one BullMQ job per spec without the option, with bundleSize 1, and when a job of the call is delayed', async () => {
    const plain = newQueue({ bundleSize: 5 });
    await plain.enqueue(throwOf(3, 'a.m'));
    await plain.enqueue(throwOf(2, 'b.m').map((j, i) => (i === 1 ? { ...j, delayMs: 60_000 } : j)), { bundle: true });
    const off = newQueue({ bundleSize: 1 });
    await off.enqueue(throwOf(3, 'c.m'), { bundle: true });
    expect((await stored(plain)).map(([id]) => id)).toEqual(['a.m.0.start', 'a.m.1.start', 'a.m.2.start', 'b.m.0.start', 'b.m.1.start']);
    expect((await stored(off)).map(([id]) => id)).toEqual(['c.m.0.start', 'c.m.1.start', 'c.m.2.start']);
  });

  it('runs no more handlers at once than the consumer concurrency, bundle parts and single jobs together', async () => {
    const queue = newQueue({ bundleSize: 5 });
    let running = 0;
    let peak = 0;
    const { handler, until } = recording(async () => {
      running += 1;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setTimeout(resolve, 15));
      running -= 1;
    });
    await queue.enqueue(throwOf(20), { bundle: true });
    await queue.enqueue([job('single-1'), job('single-2')]);
    consume(queue, handler, 3);
    await until(22);
    expect(peak).toBe(3);
  });

  it('adds a part whose handler threw again alone, reports it with its spec, and hands no other part over twice', async () => {
    const errors: string[] = [];
    const queue = newQueue({ bundleSize: 5, backoffMs: 10, onError: (error, j) => errors.push(`${j?.id}: ${error.message}`) });
    let failures = 0;
    const { handled, handler, until } = recording(async (j) => {
      if (j.id === 'r.m.2.start' && failures < 2) {
        failures += 1;
        throw new Error(`transient ${failures}`);
      }
    });
    await queue.enqueue(throwOf(5), { bundle: true });
    consume(queue, handler, 5);
    await until(5);
    expect(handled.map((j) => j.id).sort()).toEqual(throwOf(5).map((j) => j.id).sort());
    expect(errors).toEqual(['r.m.2.start: transient 1', 'r.m.2.start: transient 2']);
    // The bundle completed; the part went on as a job of its own (its second failure retried by BullMQ).
    expect(await queue.bullQueue.getJobState(bundleOf(0, 5))).toBe('completed');
    expect(await queue.bullQueue.getJobState('r.m.2.start')).toBe('completed');
  });

  it('reports a rejected part with its spec and drops it; the bundle and its other parts complete', async () => {
    const errors: string[] = [];
    const queue = newQueue({ bundleSize: 5, onError: (error, j) => errors.push(`${j?.id}: ${error.constructor.name}`) });
    const { handled, handler, until } = recording(async (j) => {
      if (j.id === 'r.m.1.start') throw new JobRejectedError('its actor is gone');
    });
    await queue.enqueue(throwOf(3), { bundle: true });
    consume(queue, handler, 2);
    await until(2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(handled.map((j) => j.id)).toEqual(['r.m.0.start', 'r.m.2.start']);
    expect(errors).toEqual(['r.m.1.start: JobRejectedError']);
    expect(await queue.bullQueue.getJobState(bundleOf(0, 3))).toBe('completed');
    expect(await queue.bullQueue.getJob('r.m.1.start')).toBeUndefined();
  });

  it('delivers a bundle whose consumer was closed with force again, whole, to the next consumer', async () => {
    const queue = newQueue({ bundleSize: 5, backoffMs: 10, eagerBundle: false });
    const started = deferred();
    const first = queue.consume(holdingFirstPart(started), { concurrency: 5 });
    await queue.enqueue(throwOf(3), { bundle: true });
    await started.promise;
    await first.close({ force: true });
    const { handled, handler, until } = recording();
    consume(queue, handler, 5);
    await until(3);
    expect(handled.map((j) => j.id).sort()).toEqual(['r.m.0.start', 'r.m.1.start', 'r.m.2.start']);
    expect(await queue.bullQueue.getJob('r.m.0.start')).toBeUndefined();
  });

  describe('eager: a throw sent by a process that consumes the queue', () => {
    /** Another queue object on the same BullMQ queue (another process's), closed after the test. */
    const twin = (queue: BullmqQueue & { readonly prefix: string }, options: Partial<BullmqQueueOptions> = {}) => {
      const other = createBullmqQueue({ connection: { host: '127.0.0.1', port: redis.port }, prefix: queue.prefix, queueName: queue.name, ...options });
      cleanups.push(() => other.close());
      return other;
    };
    const waitFor = async (what: string, check: () => Promise<boolean>) => {
      for (let i = 0; i < 200; i++) {
        if (await check()) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error(`timed out waiting for ${what}`);
    };

    it('runs the first bundle here at once, its job delayed by the lock duration meanwhile, removes the job once its parts were handled, and sends the rest through BullMQ', async () => {
      const queue = newQueue({ bundleSize: 3, worker: { lockDurationMs: 60_000 } });
      const gate = deferred();
      const { handled, handler, until } = recording(async (j) => {
        if (j.id === 'r.m.0.start') await gate.promise;
      });
      consume(queue, handler, 6);
      await queue.enqueue(throwOf(6), { bundle: true });
      // The first bundle's parts run here before BullMQ could have delivered it: its job waits, delayed.
      await waitFor('the eager parts', async () => handled.length >= 2);
      const first = await queue.bullQueue.getJob(bundleOf(0, 3));
      expect(await first?.getState()).toBe('delayed');
      expect(first!.delay).toBe(60_000);
      expect(await queue.bullQueue.getJobState(bundleOf(3, 3))).not.toBe('delayed');
      gate.resolve();
      await until(6);
      await waitFor('the removal of the eager bundle', async () => (await queue.bullQueue.getJob(bundleOf(0, 3))) === undefined);
      await waitFor('the second bundle to complete', async () => (await queue.bullQueue.getJobState(bundleOf(3, 3))) === 'completed');
      expect(handled.map((j) => j.id).sort()).toEqual(throwOf(6).map((j) => j.id).sort());
      expect(await queue.bullQueue.getDelayedCount()).toBe(0);
    });

    it('starts the first bundle\'s parts before it encodes and adds the bundles: their first work overlaps the add', async () => {
      const queue = newQueue({ bundleSize: 3, worker: { lockDurationMs: 60_000 } });
      const order: string[] = [];
      const addBulk = queue.bullQueue.addBulk.bind(queue.bullQueue);
      queue.bullQueue.addBulk = (jobs) => {
        order.push(`addBulk(${jobs.length})`);
        return addBulk(jobs);
      };
      const { handler, until } = recording(async (j) => {
        order.push(`part ${j.id}`);
      });
      consume(queue, handler, 6);
      await queue.enqueue(throwOf(6), { bundle: true });
      await until(6);
      // The three eager parts ran before the one addBulk (the eager bundle delayed, and the second);
      // the second bundle's parts came through BullMQ after it.
      expect(order.slice(0, 4)).toEqual(['part r.m.0.start', 'part r.m.1.start', 'part r.m.2.start', 'addBulk(2)']);
    });

    it('renews the delay while the parts run: a part that outlasts the lock duration is not delivered to another worker', async () => {
      const queue = newQueue({ bundleSize: 2, worker: { lockDurationMs: 200 } });
      const { handled, handler, until } = recording(async (j) => {
        if (j.id === 'r.m.0.start') await new Promise((resolve) => setTimeout(resolve, 800));
      });
      consume(queue, handler, 2);
      const elsewhere = recording();
      consume(twin(queue), elsewhere.handler, 2);
      await queue.enqueue(throwOf(2), { bundle: true });
      await until(2);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(handled.map((j) => j.id).sort()).toEqual(['r.m.0.start', 'r.m.1.start']);
      expect(elsewhere.handled).toEqual([]);
      expect(await queue.bullQueue.getJob(bundleOf(0, 2))).toBeUndefined();
    });

    it('leaves the delayed job of parts cut off by a forced close: another worker gets the bundle when the delay runs out', async () => {
      const queue = newQueue({ bundleSize: 3, backoffMs: 10, worker: { lockDurationMs: 300 } });
      const started = deferred();
      const consumer = queue.consume(holdingFirstPart(started), { concurrency: 3 });
      await queue.enqueue(throwOf(3), { bundle: true });
      await started.promise;
      await consumer.close({ force: true });
      expect(await queue.bullQueue.getJobState(bundleOf(0, 3))).toBe('delayed');
      const elsewhere = recording();
      consume(twin(queue), elsewhere.handler, 3);
      await elsewhere.until(3);
      expect(elsewhere.handled.map((j) => j.id).sort()).toEqual(['r.m.0.start', 'r.m.1.start', 'r.m.2.start']);
    });

    it('delivers the bundle a killed worker process was running eagerly to another worker once its delay runs out', async () => {
      const worker = { lockDurationMs: 1000, stalledIntervalMs: 500 };
      const queue = newQueue({ queueName: 'eager-crash', worker, bundleSize: 2 });
      const child = spawnConsumer({ url: redis.url, queueName: 'eager-crash', prefix: queue.prefix, ...worker, throwOf: 4, bundleSize: 2 });
      cleanups.push(() => killChild(child.process));
      await child.line('ready');
      await queue.enqueue([job('trigger')]);
      // The child sends the throw and runs its first bundle itself: both parts are in its hands.
      await child.line('thrown');
      await child.line('handling r.m.0.start');
      await child.line('handling r.m.1.start');
      expect(await queue.bullQueue.getJobState(bundleOf(0, 2))).toBe('delayed');
      await killChild(child.process);
      const killedAt = Date.now();
      const at = new Map<string, number>();
      const { handled, handler, until } = recording(async (j) => void at.set(j.id, Date.now() - killedAt));
      consume(queue, handler, 4);
      // The trigger (and the other bundle, if the child had fetched it) after their locks expired; the eager bundle when its delay runs out.
      await until(5);
      expect(handled.map((j) => j.id).sort()).toEqual(['r.m.0.start', 'r.m.1.start', 'r.m.2.start', 'r.m.3.start', 'trigger']);
      expect(at.get('r.m.0.start')!).toBeGreaterThanOrEqual(500);
    });

    it('adds a part that threw again alone and still removes the bundle; a graceful close waits for the parts', async () => {
      const errors: string[] = [];
      const queue = newQueue({ bundleSize: 3, backoffMs: 10, worker: { lockDurationMs: 60_000 }, onError: (error, j) => errors.push(`${j?.id}: ${error.message}`) });
      let failures = 0;
      const slow = deferred();
      const { handled, handler, until } = recording(async (j) => {
        if (j.id === 'r.m.1.start' && failures === 0) {
          failures += 1;
          throw new Error('transient');
        }
        if (j.id === 'r.m.2.start') await slow.promise;
      });
      const consumer = consume(queue, handler, 3);
      await queue.enqueue(throwOf(3), { bundle: true });
      await waitFor('the first part', async () => handled.length >= 1);
      let closed = false;
      const closing = consumer.close().then(() => void (closed = true));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(closed).toBe(false);
      slow.resolve();
      await closing;
      expect(errors).toEqual(['r.m.1.start: transient']);
      expect(await queue.bullQueue.getJob(bundleOf(0, 3))).toBeUndefined();
      // Added again alone, after the first backoff.
      expect(['delayed', 'waiting']).toContain(await queue.bullQueue.getJobState('r.m.1.start'));
      consume(queue, handler, 3);
      await until(3);
      expect(handled.map((j) => j.id).sort()).toEqual(['r.m.0.start', 'r.m.1.start', 'r.m.2.start']);
    });

    it('sends the bundle through BullMQ when this consumer has no room for half of it now', async () => {
      const queue = newQueue({ bundleSize: 4, worker: { lockDurationMs: 60_000 } });
      const busy = deferred();
      const started = deferred();
      // Three of its four permits are held: room for one part, less than half the bundle.
      const here = recording(async (j) => {
        if (j.id.startsWith('busy')) {
          started.resolve();
          await busy.promise;
        }
      });
      consume(queue, here.handler, 4);
      // Released however the test ends, so the consumer can close.
      cleanups.push(async () => busy.resolve());
      await queue.enqueue([job('busy-1'), job('busy-2'), job('busy-3')]);
      await started.promise;
      await waitFor('three busy jobs', async () => (await queue.bullQueue.getActiveCount()) === 3);
      await queue.enqueue(throwOf(4), { bundle: true });
      // Sent through BullMQ, not delayed: whichever worker has a free slot takes it (this one too: its parts then take turns on its one free permit).
      expect(await queue.bullQueue.getDelayedCount()).toBe(0);
      expect(await queue.bullQueue.getJobState(bundleOf(0, 4))).not.toBe('delayed');
      const elsewhere = recording();
      consume(twin(queue), elsewhere.handler, 4);
      busy.resolve();
      await waitFor('every part', async () => [...here.handled, ...elsewhere.handled].filter((j) => j.id.startsWith('r.m.')).length === 4);
      expect([...here.handled, ...elsewhere.handled].filter((j) => j.id.startsWith('r.m.')).map((j) => j.id).sort()).toEqual(throwOf(4).map((j) => j.id).sort());
    });

    it('is off with eagerBundle false, and for a queue that only sends', async () => {
      const off = newQueue({ bundleSize: 2, eagerBundle: false });
      consume(off, (_j, signal) => untilAborted(signal), 1);
      await off.enqueue(throwOf(4, 'a.m'), { bundle: true });
      const sender = newQueue({ bundleSize: 2 });
      await sender.enqueue(throwOf(4, 'b.m'), { bundle: true });
      expect(await off.bullQueue.getDelayedCount()).toBe(0);
      expect(await sender.bullQueue.getDelayedCount()).toBe(0);
      expect((await stored(sender)).map(([, parts]) => parts)).toEqual([2, 2]);
    });
  });
});

describe('bare BullMQ baseline', () => {
  it('measures add -> process latency of a bare job (median of 50)', async () => {
    const connection = { host: '127.0.0.1', port: redis.port };
    const prefix = `t-${randomUUID().slice(0, 8)}`;
    const queue = new BullQueue('latency', { connection, prefix });
    let processed: (() => void) | undefined;
    const worker = new Worker(
      'latency',
      async () => {
        processed?.();
      },
      { connection, prefix },
    );
    cleanups.push(async () => {
      await worker.close();
      await queue.close();
    });
    await worker.waitUntilReady();
    const samples: number[] = [];
    for (let i = 0; i < 55; i += 1) {
      const done = new Promise<void>((resolve) => (processed = resolve));
      const start = performance.now();
      await queue.add('bare', { i }, { jobId: `bare-${i}`, removeOnComplete: true });
      await done;
      if (i >= 5) samples.push(performance.now() - start);
    }
    const adapter = newQueue({ queueName: 'latency-adapter' });
    let adapterProcessed: (() => void) | undefined;
    consume(adapter, async () => adapterProcessed?.());
    const adapterSamples: number[] = [];
    for (let i = 0; i < 55; i += 1) {
      const done = new Promise<void>((resolve) => (adapterProcessed = resolve));
      const start = performance.now();
      await adapter.enqueue([job(`adapter-${i}`)]);
      await done;
      if (i >= 5) adapterSamples.push(performance.now() - start);
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    console.log(
      `add -> process latency, median of 50: bare BullMQ ${median(samples).toFixed(2)} ms, ` +
        `xreactor adapter ${median(adapterSamples).toFixed(2)} ms`,
    );
    expect(samples).toHaveLength(50);
  });
});

interface ChildConsumer {
  readonly process: ChildProcess;
  /** Resolves when the child prints this exact line. */
  line(text: string): Promise<void>;
}

function spawnConsumer(config: Record<string, unknown>): ChildConsumer {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, XREACTOR_FIXTURE: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: { text: string; resolve: () => void }[] = [];
  let stderr = '';
  let buffer = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    for (const text of parts) {
      lines.push(text);
      for (const waiter of waiters.filter((w) => w.text === text)) waiter.resolve();
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<never>((_resolve, reject) =>
    child.once('exit', (code, signal) => reject(new Error(`consumer process exited (${code ?? signal}) before the line: ${stderr}`))),
  );
  exited.catch(() => undefined);
  return {
    process: child,
    line: (text) =>
      lines.includes(text) ? Promise.resolve() : Promise.race([new Promise<void>((resolve) => waiters.push({ text, resolve })), exited]),
  };
}

async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}
