import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import type * as FixtureModule from './fixtures/reactors.js';

// A run paused in this process is continued from other processes, against a real Redis.

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONTINUE = fileURLToPath(new URL('./fixtures/continue.ts', import.meta.url));

let server: RedisServer;
let redis: Redis;
let runtime: Runtime;
let store: Store;
let fixtures: typeof FixtureModule;

async function continueFromAnotherProcess(id: string, by: string): Promise<{ ok: boolean; status?: string; value?: unknown; code?: string; message?: string }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', CONTINUE, server.url, id, by], {
    cwd: ROOT,
    env: { ...process.env, XREACTOR_TEST_REDIS_URL: server.url },
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { ok: boolean };
}

beforeAll(async () => {
  server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  fixtures = await import('./fixtures/reactors.js');
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
  runtime = createRuntime({
    store: (store = createRedisStore({ redis })),
    queue: createBullmqQueue({ connection: redis }),
    worker: false,
    reactors: [fixtures.approvalFlow],
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  await runtime?.close();
  await store?.close();
  fixtures?.recorder().disconnect();
  redis?.disconnect();
  await server?.stop();
});

describe('interrupts across processes', () => {
  it('a run paused here is continued from another process', async () => {
    const paused = await runtime.run(fixtures.approvalFlow, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: ['approval'] });
    expect(await continueFromAnotherProcess(paused.executionId, 'ann')).toEqual({ ok: true, status: 'completed', value: { quote: 'Q', approval: { by: 'ann' }, order: 'ordered by ann' } });
    expect(await runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 })).toMatchObject({ status: 'completed' });
  });

  it('two concurrent continues of the same interrupt: one wins, the other is refused', async () => {
    for (let round = 0; round < 3; round += 1) {
      const paused = await runtime.run(fixtures.approvalFlow, {});
      const outcomes = await Promise.all([continueFromAnotherProcess(paused.executionId, 'ann'), continueFromAnotherProcess(paused.executionId, 'bob')]);
      const winners = outcomes.filter((o) => o.ok);
      const losers = outcomes.filter((o) => !o.ok);
      expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
      expect(losers[0]?.code, JSON.stringify(outcomes)).toBe('invalid_state');
      expect(losers[0]?.message).toMatch(/already resumed/);
      const by = (winners[0]!.value as { approval: { by: string } }).approval.by;
      const result = await runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 });
      expect(result).toMatchObject({ status: 'completed', value: { order: `ordered by ${by}` } });
      expect(await redis.lrange(`events:${paused.executionId}`, 0, -1)).toEqual(['run:quote', 'run:order']);
    }
  });
});
