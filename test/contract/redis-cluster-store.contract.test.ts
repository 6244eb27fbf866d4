import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import { createRedisStore } from '../../src/store/redis-store.js';
import { startRedisCluster } from '../support/redis-server.js';
import type { RedisClusterServer } from '../support/redis-server.js';
import { describeStoreContract } from './store-contract.js';

let cluster: RedisClusterServer;
let prefixes = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
});
afterAll(async () => {
  await cluster?.stop();
});

const open = () => {
  const redis = new Cluster(cluster.nodes);
  const prefix = `c${process.pid}-${(prefixes += 1)}`;
  const store = createRedisStore({ redis, prefix });
  return { redis, store, prefix, cleanup: async () => {
    await store.close();
    await redis.quit();
  } };
};

describeStoreContract('redis cluster', async () => open());

describe('redis cluster store', () => {
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
            snapshot: { machineVersion: EXECUTION_MACHINE_VERSION, value: 'p', context: {} },
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
});
