import { Cluster } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import type { Fixtures } from '../support/orchestration-env.js';
import { startRedis, startRedisCluster } from '../support/redis-server.js';
import type { RedisClusterServer, RedisServer } from '../support/redis-server.js';
import { startWorkerProcess } from '../support/worker-process.js';
import type { WorkerProcess } from '../support/worker-process.js';

// The production shape on a Redis Cluster: a caller and `xreactor worker --cluster` processes on a
// real 3-node cluster started by the test, with the store's keys spread over the nodes and
// BullMQ's under one hash tag. The fixtures record their side effects on a separate plain Redis.

let cluster: RedisClusterServer;
let recorderServer: RedisServer;
let redis: Cluster;
let store: Store;
let runtime: Runtime;
let fixtures: Fixtures;
const workers: WorkerProcess[] = [];

const QUEUE_PREFIX = '{xreactor}';

beforeAll(async () => {
  [cluster, recorderServer] = await Promise.all([startRedisCluster(), startRedis()]);
  process.env['XREACTOR_TEST_REDIS_URL'] = recorderServer.url;
  fixtures = await import('./fixtures/reactors.js');
  redis = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: null } });
  store = createRedisStore({ redis });
  runtime = createRuntime({
    store,
    queue: createBullmqQueue({ connection: redis, prefix: QUEUE_PREFIX }),
    worker: false,
    reactors: [fixtures.backgroundAll, fixtures.backgroundAfterA, fixtures.backgroundCompose],
    logger: pino({ level: 'silent' }),
  });
  const seeds = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  for (let i = 0; i < 2; i += 1) {
    const worker = startWorkerProcess({
      redisUrl: recorderServer.url,
      modules: ['test/orchestration/fixtures/reactors.ts'],
      args: ['--cluster', seeds],
      env: { XREACTOR_TEST_REDIS_URL: recorderServer.url },
    });
    workers.push(worker);
    await worker.ready;
    if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
  }
}, 60_000);

afterAll(async () => {
  for (const worker of workers) worker.child.kill('SIGKILL');
  await runtime?.close();
  await store?.close();
  fixtures?.recorder().disconnect();
  redis?.disconnect();
  await Promise.all([cluster?.stop(), recorderServer?.stop()]);
});

const events = (id: string) => fixtures.recorder().lrange(`events:${id}`, 0, -1);

describe('on a Redis Cluster, with worker processes', () => {
  it('runs background reactors to the end in worker processes, on executions spread over every node', async () => {
    const dispatched = await Promise.all(Array.from({ length: 12 }, () => runtime.run(fixtures.backgroundAll, {})));
    expect(dispatched.every((d) => d.status === 'dispatched')).toBe(true);
    for (const { executionId } of dispatched) {
      expect(await runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
      expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:c']);
    }
    // The executions' hash tags put them on more than one node.
    const slots = await Promise.all(dispatched.map(async ({ executionId }) => Number(await redis.cluster('KEYSLOT', `xr:{${executionId}}:exec:${executionId}`))));
    const nodesHolding = new Set(slots.map((slot) => redis.slots[slot]?.[0]));
    expect(nodesHolding.size).toBeGreaterThan(1);
  });

  it('rolls back across the caller and a worker: after: a fails at c, undoing b then a', async () => {
    const dispatched = await runtime.run(fixtures.backgroundAfterA, { failAt: 'c' });
    expect(dispatched.status).toBe('dispatched');
    // a ran here, before the hand-off (its undo, later, runs in a worker).
    expect(await fixtures.recorder().get(`pid:${dispatched.executionId}:a`)).toBe(String(process.pid));
    expect(await runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'failed', step: 'c' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    expect(await fixtures.recorder().get(`pid:${dispatched.executionId}:b`)).not.toBe(String(process.pid));
  });

  it('runs a composed child in a worker; the child\'s keys share the root\'s slot', async () => {
    const dispatched = await runtime.run(fixtures.backgroundCompose, {});
    expect(await runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b']);
    const view = await runtime.find(dispatched.executionId);
    expect(view.status).toBe('completed');
    const root = dispatched.executionId;
    const childKey = `xr:{${root}}:exec:${root}.child`;
    expect(await redis.exists(childKey)).toBe(1);
    expect(await redis.cluster('KEYSLOT', childKey)).toBe(await redis.cluster('KEYSLOT', `xr:{${root}}:exec:${root}`));
    expect((await runtime.find(`${root}.child`)).status).toBe('completed');
  });
});
