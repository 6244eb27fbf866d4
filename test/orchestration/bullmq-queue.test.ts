import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue as BullQueue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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
      await new Promise<void>((_resolve, reject) =>
        signal.addEventListener('abort', () => {
          reason = signal.reason;
          reject(signal.reason as Error);
        }),
      );
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
