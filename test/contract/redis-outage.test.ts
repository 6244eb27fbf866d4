import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, defineReactor, RedisUnavailableError } from '../../src/index.js';
import { connectRedis } from '../../src/redis.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

// Redis stopped and started again under a live runtime: calls fail in bounded time with an
// error naming the server (and, for a start, that the run may exist); once Redis is back the
// same runtime works again.

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const logger = pino({ level: 'silent' });
const inline = defineReactor({ name: 'outage_inline' }).step('a', { run: () => 'A' }).returns('a').build();
const background = defineReactor({ name: 'outage_bg' }).step('a', { run: () => 'A' }).background({ all: true }).returns('a').build();

describe('Redis down and up again', () => {
  it('run, find and awaitResult reject within the timeout naming the server; after it is back, they work', async () => {
    const errors: Error[] = [];
    const runtime = createRuntime({ logger, backend: connectRedis({ url: server.url, timeoutMs: 500, onError: (e) => void errors.push(e) }), reactors: [inline, background] });
    try {
      expect(await runtime.run(inline, undefined as never, { executionId: 'before' })).toMatchObject({ status: 'completed' });
      await server.down();

      const started = Date.now();
      const refused = await runtime.run(inline, undefined as never, { executionId: 'during' }).catch((error: unknown) => error);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(refused).toBeInstanceOf(RedisUnavailableError);
      expect(refused).toMatchObject({ code: 'redis_unavailable', retryable: true, executionId: 'during' });
      expect((refused as Error).message).toContain(`Redis at 127.0.0.1:${server.port} did not answer store.create within 500 ms`);
      expect((refused as Error).message).toContain('execution during may exist');
      await expect(runtime.find('before')).rejects.toThrow(/Redis at 127\.0\.0\.1:\d+ did not answer store\.load within 500 ms/);
      await expect(runtime.awaitResult('before', { timeoutMs: 2_000 })).rejects.toBeInstanceOf(RedisUnavailableError);
      // The outage is reported once, not once per reconnection attempt.
      expect(errors.length).toBeGreaterThan(0);
      expect(new Set(errors.map((e) => e.message)).size).toBe(errors.length);

      await server.up();
      // The same runtime reconnects; the retried start (same id, same input) runs it now.
      const retried = await runUntilConnected(() => runtime.run(inline, undefined as never, { executionId: 'during' }));
      expect(retried).toMatchObject({ status: 'completed', value: 'A' });
    } finally {
      await server.up();
      await runtime.close();
    }
  }, 30_000);
});

/** Retries while ioredis has not reconnected yet (its retry delay grows to 2 s). */
async function runUntilConnected<T>(work: () => Promise<T>): Promise<T> {
  for (const deadline = Date.now() + 15_000; ; ) {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof RedisUnavailableError) || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
