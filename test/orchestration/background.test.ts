import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { createBullmqQueue } from '../../src/queue/bullmq-queue.js';
import { createRedisStore } from '../../src/store/redis-store.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import { startWorkerProcess } from '../support/worker-process.js';
import type * as FixtureModule from './fixtures/reactors.js';

type Fixtures = typeof FixtureModule;
import type { WorkerProcess } from '../support/worker-process.js';

// Real Redis, real BullMQ, workers in child processes started with the `xreactor worker` CLI.
// The caller (this process) runs background reactors and gets `dispatched`; workers finish them.

const MODULES = ['test/orchestration/fixtures/reactors.ts'];
const FAST_RECOVERY = ['--lease-ttl-ms', '1000', '--lock-duration-ms', '1000', '--stalled-interval-ms', '500'];

let server: RedisServer;
let redis: Redis;
let runtime: Runtime;
let store: Store;
let fixtures: Fixtures;
const workers = new Set<WorkerProcess>();

async function spawnWorker(): Promise<WorkerProcess> {
  const worker = startWorkerProcess({ redisUrl: server.url, modules: MODULES, args: FAST_RECOVERY, env: { XREACTOR_TEST_REDIS_URL: server.url } });
  workers.add(worker);
  void worker.exited.then(() => workers.delete(worker));
  await worker.ready;
  if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
  return worker;
}

const events = (id: string) => redis.lrange(`events:${id}`, 0, -1);
const count = async (id: string, kind: string, step: string) => Number((await redis.get(`count:${id}:${kind}:${step}`)) ?? 0);

beforeAll(async () => {
  server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  fixtures = await import('./fixtures/reactors.js');
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
  runtime = createRuntime({
    store: (store = createRedisStore({ redis })),
    queue: createBullmqQueue({ connection: redis }),
    reactors: Object.values(fixtures).filter((v) => typeof v === 'object'),
    logger: pino({ level: 'silent' }),
  });
  await spawnWorker();
});

afterAll(async () => {
  for (const worker of workers) worker.child.kill('SIGKILL');
  await runtime?.close();
  await store?.close();
  fixtures?.recorder().disconnect();
  redis?.disconnect();
  await server?.stop();
});

describe('background reactors across processes', () => {
  it('S-bg-01: all: dispatched in the caller, run and rolled back by a worker process', async () => {
    const dispatched = await runtime.run(fixtures.backgroundAll, { failAt: 'c' });
    expect(dispatched.status).toBe('dispatched');
    const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'c', message: 'c failed' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
  });

  it('S-bg-02: after: a runs a in the caller; the worker process undoes it too', async () => {
    const dispatched = await runtime.run(fixtures.backgroundAfterA, { failAt: 'c' });
    expect(dispatched.status).toBe('dispatched');
    expect(await redis.get(`pid:${dispatched.executionId}:a`)).toBe(String(process.pid));
    const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'c' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    expect(await redis.get(`pid:${dispatched.executionId}:b`)).not.toBe(String(process.pid));
  });

  it('S-bg-03: worker retries are delayed jobs; compensated once after the last attempt', async () => {
    const { executionId } = await runtime.run(fixtures.backgroundRetryExhausted, {});
    expect(await runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'failed', step: 'b', message: 'b failed #3' });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:b', 'run:b', 'compensate:b', 'undo:a']);
  });

  it('S-bg-04: a worker retry that succeeds continues the run', async () => {
    const { executionId } = await runtime.run(fixtures.backgroundRetryOnce, {});
    expect(await runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
  });

  it('find(id) works from another process: the caller reads what the worker committed', async () => {
    const { executionId } = await runtime.run(fixtures.backgroundAll, {});
    await runtime.awaitResult(executionId, { timeoutMs: 20_000 });
    const view = await runtime.find(executionId);
    expect(view.status).toBe('completed');
    expect(view.undoStack.map((e) => e.step)).toEqual(['a', 'b', 'c']);
  });

  it('chaos: a worker killed with SIGKILL inside b; another worker finishes; only b runs twice (x20)', async () => {
    await spawnWorker();
    for (let round = 0; round < 20; round += 1) {
      const { executionId } = await runtime.run(fixtures.backgroundAll, { slowMs: 1_500 });
      await expect.poll(() => events(executionId), { timeout: 20_000, interval: 20 }).toContain('run:b');
      const victim = Number(await redis.get(`pid:${executionId}:b`));
      const dying = [...workers].find((w) => w.pid === victim);
      expect(dying, `round ${round}: b ran in an unknown process ${victim}`).toBeDefined();
      dying!.child.kill('SIGKILL');
      await dying!.exited;
      const replacement = spawnWorker();
      const result = await runtime.awaitResult(executionId, { timeoutMs: 30_000 });
      expect(result, `round ${round}`).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
      expect(await events(executionId), `round ${round}`).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
      expect([await count(executionId, 'run', 'a'), await count(executionId, 'run', 'b'), await count(executionId, 'run', 'c')]).toEqual([1, 2, 1]);
      await replacement;
    }
  }, 600_000);
});
