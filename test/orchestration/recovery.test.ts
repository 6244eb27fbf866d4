import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import { startWorkerProcess } from '../support/worker-process.js';
import type { WorkerProcess } from '../support/worker-process.js';
import type * as FixtureModule from './fixtures/reactors.js';

// Recovery across processes: graceful SIGTERM, the sweeper resuming a run whose caller died,
// and unreadable stored data that fails one execution without stopping the worker.

const MODULES = ['test/orchestration/fixtures/reactors.ts'];
const CALLER = fileURLToPath(new URL('./fixtures/caller.ts', import.meta.url));

let server: RedisServer;
let redis: Redis;
let runtime: Runtime;
let store: Store;
let fixtures: typeof FixtureModule;
const workers = new Set<WorkerProcess>();

async function spawnWorker(args: readonly string[] = []): Promise<WorkerProcess> {
  const worker = startWorkerProcess({
    redisUrl: server.url,
    modules: MODULES,
    args: ['--lease-ttl-ms', '1000', '--lock-duration-ms', '1000', '--stalled-interval-ms', '500', ...args],
    env: { XREACTOR_TEST_REDIS_URL: server.url },
  });
  workers.add(worker);
  void worker.exited.then(() => workers.delete(worker));
  await worker.ready;
  return worker;
}

const events = (id: string) => redis.lrange(`events:${id}`, 0, -1);

beforeAll(async () => {
  server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  fixtures = await import('./fixtures/reactors.js');
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
  runtime = createRuntime({
    store: (store = createRedisStore({ redis })),
    queue: createBullmqQueue({ connection: redis }),
    reactors: [fixtures.backgroundAll, fixtures.inlineSlow, fixtures.backgroundCompose],
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  for (const worker of workers) worker.child.kill('SIGKILL');
  await runtime?.close();
  await store?.close();
  fixtures?.recorder().disconnect();
  redis?.disconnect();
  await server?.stop();
});

describe('recovery across processes', () => {
  it('SIGTERM: the worker finishes the step in progress (and its job), then exits 0', async () => {
    const worker = await spawnWorker(['--sweep-interval-ms', '0']);
    const { executionId } = await runtime.run(fixtures.backgroundAll, { slowMs: 1_000 });
    await expect.poll(() => events(executionId), { timeout: 20_000, interval: 20 }).toContain('run:b');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(await runtime.awaitResult(executionId, { timeoutMs: 5_000 })).toMatchObject({ status: 'completed' });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:c']);
    expect(worker.output()).toContain('xreactor.worker.stopped');
  });

  it('the sweeper resumes a run whose caller process died mid-step; only that step runs twice', async () => {
    const id = randomUUID();
    const caller = spawn(process.execPath, ['--import', 'tsx', CALLER, server.url, id, '5000'], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      env: { ...process.env, XREACTOR_TEST_REDIS_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const callerExit = new Promise((resolve) => caller.once('exit', resolve));
    await expect.poll(() => events(id), { timeout: 20_000, interval: 20 }).toEqual(['run:a', 'run:b']);
    caller.kill('SIGKILL');
    await callerExit;
    expect((await runtime.find(id)).status).toBe('running');
    await spawnWorker(['--sweep-interval-ms', '500']);
    // b sleeps 5 s per attempt: the recovered attempt sleeps too.
    expect(await runtime.awaitResult(id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    expect(await events(id)).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
  }, 60_000);

  it('a worker killed inside a composed child step resumes without re-running completed child steps', async () => {
    await spawnWorker(['--sweep-interval-ms', '0']);
    const { executionId } = await runtime.run(fixtures.backgroundCompose, { slowMs: 1_500 });
    const childId = `${executionId}.child`;
    await expect.poll(() => events(childId), { timeout: 20_000, interval: 20 }).toEqual(['run:c1', 'run:c2']);
    // Kill the worker that is running c2 (other tests' workers may be alive too).
    const victim = Number(await redis.get(`pid:${childId}:c2`));
    const running = [...workers].find((w) => w.pid === victim);
    expect(running, `c2 ran in an unknown process ${victim}`).toBeDefined();
    running!.child.kill('SIGKILL');
    await running!.exited;
    await spawnWorker(['--sweep-interval-ms', '0']);
    expect(await runtime.awaitResult(executionId, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', value: { a: 'A', child: { c1: 'C1', c2: 'C2' }, b: 'B' } });
    expect(await events(executionId)).toEqual(['run:a', 'run:b']);
    expect(await events(childId)).toEqual(['run:c1', 'run:c2', 'run:c2']);
  });

  it('unreadable stored data fails that execution with a clear error; the worker keeps running', async () => {
    const worker = workers.size > 0 ? [...workers][0]! : await spawnWorker();
    const { executionId } = await runtime.run(fixtures.backgroundAll, {});
    await runtime.awaitResult(executionId, { timeoutMs: 20_000 });
    const keys = createKeyBuilder().executionKeys(executionId);
    await redis.hset(keys.execution, EXECUTION_FIELDS.snapshot, Buffer.from('definitely not msgpack'));
    const view = await runtime.find(executionId);
    expect(view.status).toBe('failed');
    expect(view.result).toMatchObject({ status: 'failed' });
    expect(view.result?.status === 'failed' && view.result.message).toMatch(/snapshot|foreign|truncated|envelope/i);
    // A job for it reaches the worker: reported, dropped, and the worker goes on with other work.
    const queue = createBullmqQueue({ connection: redis });
    await queue.enqueue([{ id: `${executionId}.poke`, kind: 'advance', executionId, reactor: 'orch-bg-all' }]);
    await expect.poll(() => worker.output(), { timeout: 10_000 }).toContain('xreactor.execution.unreadable');
    const next = await runtime.run(fixtures.backgroundAll, {});
    expect(await runtime.awaitResult(next.executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
    await queue.close();
  });
});
