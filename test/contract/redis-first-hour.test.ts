import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, createWorker, DefinitionError, defineReactor } from '../../src/index.js';
import { connectRedis, createRedisStore } from '../../src/redis.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

// The first-hour items of issue 11 that need no second process, on a real Redis: a retried start
// (3), reading outcomes without the reactor (5), and a Redis store without a queue (6).

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const logger = pino({ level: 'silent' });
let runs = 0;
const counted = defineReactor({ name: 'first_hour_counted' })
  .step('a', { run: () => ((runs += 1), { n: runs }) })
  .returns('a')
  .build();
const later = defineReactor({ name: 'first_hour_later' }).step('a', { run: () => 'A' }).background({ all: true }).returns('a').build();
const approval = defineReactor({ name: 'first_hour_paused' }).step('a', { run: () => 1 }).interrupt('approve', {}).build();

describe('on Redis', () => {
  it('a retried start with the same id and input returns the stored outcome and runs nothing again; another input is refused', async () => {
    const backend = connectRedis({ url: server.url, prefix: 'fh3' });
    const runtime = createRuntime({ logger, backend, reactors: [counted] });
    try {
      const first = await runtime.run(counted, undefined as never, { executionId: 'order-7' });
      expect(first).toMatchObject({ status: 'completed', value: { n: 1 } });
      expect(await runtime.run(counted, undefined as never, { executionId: 'order-7' })).toMatchObject({ status: 'completed', value: { n: 1 } });
      expect(runs).toBe(1);
      await expect(runtime.run(counted, { other: true } as never, { executionId: 'order-7' })).rejects.toMatchObject({ code: 'execution_exists', message: expect.stringContaining('already exists with another input') as string });
    } finally {
      await runtime.close();
    }
  });

  it('a process without the reactor awaits and finds completed and paused runs', async () => {
    const backend = connectRedis({ url: server.url, prefix: 'fh5' });
    const owner = createRuntime({ logger, backend, worker: true, reactors: [later, approval] });
    const readerBackend = connectRedis({ url: server.url, prefix: 'fh5' });
    const reader = createRuntime({ logger, backend: readerBackend });
    try {
      const done = await owner.run(later, undefined as never);
      expect(await reader.awaitResult(done.executionId, { timeoutMs: 10_000 })).toMatchObject({ status: 'completed', value: 'A' });
      const paused = await owner.run(approval, undefined as never);
      expect(await reader.awaitResult(paused.executionId, { timeoutMs: 10_000 })).toEqual({ status: 'paused', executionId: paused.executionId, readyInterrupts: ['approve'] });
      expect((await reader.find(done.executionId)).status).toBe('completed');
    } finally {
      await reader.close();
      await owner.close();
    }
  });

  it('a Redis store with no queue is refused, naming how to opt in', async () => {
    const backend = connectRedis({ url: server.url, prefix: 'fh6' });
    try {
      expect(() => createRuntime({ logger, store: createRedisStore({ redis: backend.redis }) })).toThrow(DefinitionError);
      expect(() => createWorker({ logger, store: createRedisStore({ redis: backend.redis }) } as never)).toThrow(/give the queue to consume/);
    } finally {
      await backend.close();
    }
  });

  it('connectRedis passes storeOptions and queueOptions through, its own options winning', async () => {
    const backend = connectRedis({ url: server.url, storeOptions: { prefix: 'via-store-options', groupCommit: false }, queueOptions: { queueName: 'via-queue-options' } });
    const runtime = createRuntime({ logger, backend, reactors: [counted] });
    try {
      await runtime.run(counted, undefined as never, { executionId: 'passthrough' });
      expect(await backend.redis.exists('via-store-options:{passthrough}:exec:passthrough')).toBe(1);
      expect(backend.queue.name).toBe('via-queue-options');
      const own = connectRedis({ url: server.url, queueName: 'mine', queueOptions: { queueName: 'theirs' } });
      expect(own.queue.name).toBe('mine');
      await own.close();
    } finally {
      await runtime.close();
    }
  });
});
