import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { Commit } from '../../src/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { createRedisStore } from '../../src/store/redis-store.js';
import { startRedisCluster } from '../support/redis-server.js';
import type { RedisClusterServer } from '../support/redis-server.js';
import { describeStoreContract } from './store-contract.js';
import { describeRedisRetentionContract } from './redis-retention-contract.js';
import type { TestClock } from '../../src/testing/test-clock.js';

let cluster: RedisClusterServer;
let prefixes = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
});
afterAll(async () => {
  await cluster?.stop();
});

const open = (contextTtlMs?: number, clock?: TestClock) => {
  const redis = new Cluster(cluster.nodes);
  const prefix = `c${process.pid}-${(prefixes += 1)}`;
  const store = createRedisStore({ redis, prefix, ...(contextTtlMs === undefined ? {} : { contextTtlMs }), ...(clock === undefined ? {} : { clock }) });
  return { redis, store, prefix, cleanup: async () => {
    await store.close();
    await redis.quit();
  } };
};

describeStoreContract('redis cluster', async () => open());
describeRedisRetentionContract('redis cluster', async (contextTtlMs, clock) => open(contextTtlMs, clock));

describe('redis cluster store', () => {
  it('refuses groupCommit: true, whose batches would cross hash slots, saying to leave it unset', async () => {
    const redis = new Cluster(cluster.nodes);
    try {
      expect(() => createRedisStore({ redis, groupCommit: true })).toThrow(/groupCommit is not available on a Redis Cluster.*leave groupCommit unset/);
      expect(() => createRedisStore({ redis, groupCommit: false })).not.toThrow();
    } finally {
      await redis.quit();
    }
  });

  it('spreads executions over several nodes, each execution\'s keys on one', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const ids = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
      for (const id of ids) {
        await store.create({
          id,
          reactor: 'r',
          input: { id },
          commit: {
            snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'p', context: {} },
            status: 'running',
            writes: { results: [['a', 1]], pushUndo: [{ position: 0, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
            outbox: [],
          },
        });
      }
      const perNode = await Promise.all(redis.nodes('master').map((node) => node.keys(`${prefix}:*`)));
      expect(perNode.filter((keys) => keys.length > 0).length).toBeGreaterThan(1);
      for (const id of ids) {
        const holding = perNode.filter((keys) => keys.some((key) => key.endsWith(`:${id}`)));
        expect(holding).toHaveLength(1);
        expect(holding[0]!.filter((key) => key.startsWith(`${prefix}:{${id}}:`))).toHaveLength(4);
      }
      for (const id of ids) expect(await store.readInput(id)).toEqual({ id });
    } finally {
      await cleanup();
    }
  });

  it('takes and releases the lease inside the execution\'s slot: acquireAndLoad over a foreign snapshot throws and leaves no lease', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const first: Commit = {
        snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'p', context: {} },
        status: 'running',
        writes: { results: [['a', 1]], pushUndo: [], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
        outbox: [],
      };
      await store.create({ id: 'foreign', reactor: 'r', input: {}, commit: first }, { lease: { owner: 'host-a', ttlMs: 60_000 } });
      const k = createKeyBuilder(prefix).executionKeys('foreign');
      for (const key of [k.execution, k.results, k.trace]) expect(await redis.pttl(key)).toBeGreaterThan(0);
      await redis.hset(k.execution, EXECUTION_FIELDS.snapshot, Buffer.from('{"json":"from another program"}'));
      await expect(store.acquireAndLoad('foreign', { owner: 'host-a', ttlMs: 60_000 })).rejects.toBeInstanceOf(DeserializationError);
      expect(await store.hasLease('foreign')).toBe(false);
    } finally {
      await cleanup();
    }
  });
});
