import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION, XreactorError } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { createRedisStore } from '../../src/store/redis-store.js';
import { encode } from '../../src/serialization/index.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import { describeStoreContract } from './store-contract.js';

let server: RedisServer;
let prefixes = 0;
const freshPrefix = () => `t${process.pid}-${(prefixes += 1)}`;

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const open = (prefix = freshPrefix(), contextTtlMs?: number) => {
  const redis = new Redis(server.url);
  const store = createRedisStore({ redis, prefix, ...(contextTtlMs === undefined ? {} : { contextTtlMs }) });
  return { redis, store, prefix, cleanup: async () => {
    await store.close();
    await redis.quit();
  } };
};

describeStoreContract('redis', async () => open());

const first = (): Commit => ({
  snapshot: { machineVersion: EXECUTION_MACHINE_VERSION, value: 'pending', context: {} },
  status: 'pending',
  writes: { results: [['a', 1]], pushUndo: [{ position: 0, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
  outbox: [],
});

describe('redis store: stored data', () => {
  let redis: Redis;
  let store: Store;
  let prefix: string;
  let cleanup: () => Promise<void>;
  beforeAll(() => {
    ({ redis, store, prefix, cleanup } = open());
  });
  afterAll(async () => {
    await cleanup();
  });
  const keysOf = (id: string) => createKeyBuilder(prefix).executionKeys(id);

  it('reports foreign bytes under an execution\'s snapshot as a DeserializationError', async () => {
    await store.create({ id: 'foreign', reactor: 'r', input: {}, commit: first() });
    await redis.hset(keysOf('foreign').execution, EXECUTION_FIELDS.snapshot, Buffer.from('{"json":"from another program"}'));
    await expect(store.load('foreign')).rejects.toBeInstanceOf(DeserializationError);
    await redis.hset(keysOf('foreign').execution, EXECUTION_FIELDS.snapshot, Buffer.from(encode({ not: 'an envelope' })));
    await expect(store.load('foreign')).rejects.toThrow(/not an xreactor envelope/);
  });

  it('reports a truncated snapshot as a DeserializationError', async () => {
    await store.create({ id: 'truncated', reactor: 'r', input: {}, commit: first() });
    const bytes = await redis.hgetBuffer(keysOf('truncated').execution, EXECUTION_FIELDS.snapshot);
    await redis.hset(keysOf('truncated').execution, EXECUTION_FIELDS.snapshot, bytes!.subarray(0, bytes!.length - 3));
    await expect(store.load('truncated')).rejects.toBeInstanceOf(DeserializationError);
  });

  it('reports a key of another type under an execution\'s key as a DeserializationError', async () => {
    await redis.set(keysOf('stringy').execution, 'written by someone else');
    await expect(store.load('stringy')).rejects.toBeInstanceOf(DeserializationError);
    await expect(store.readInput('stringy')).rejects.toBeInstanceOf(DeserializationError);
  });

  it('reports an execution hash with a revision but no snapshot as a DeserializationError', async () => {
    await redis.hset(keysOf('partial').execution, EXECUTION_FIELDS.revision, '3');
    await expect(store.load('partial')).rejects.toBeInstanceOf(DeserializationError);
  });

  it('refuses an undo push that would leave a gap, writing nothing', async () => {
    await store.create({ id: 'gap', reactor: 'r', input: {}, commit: first() });
    const gap: Commit = { ...first(), writes: { results: [['b', 2]], pushUndo: [{ position: 5, step: 'b', args: null, result: 2 }], truncateUndoTo: undefined, trace: [] } };
    await expect(store.commit('gap', 1, gap)).rejects.toMatchObject({ code: 'undo_position_invalid' });
    await expect(store.commit('gap', 1, gap)).rejects.toBeInstanceOf(XreactorError);
    expect((await store.load('gap'))?.revision).toBe(1);
    expect(await store.readResults('gap')).toEqual(new Map([['a', 1]]));
    expect(await store.readUndoStack('gap')).toHaveLength(1);
  });

  it('re-stamps the retention of every key of the execution on create and commit', async () => {
    const short = open(freshPrefix(), 60_000);
    try {
      await short.store.create({ id: 'ttl', reactor: 'r', input: {}, commit: first() });
      const k = createKeyBuilder(short.prefix).executionKeys('ttl');
      for (const key of [k.execution, k.results, k.undo, k.trace]) {
        const ttl = await short.redis.pttl(key);
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
      }
      await short.redis.pexpire(k.results, 1_000_000_000);
      await short.store.commit('ttl', 1, { ...first(), writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] } });
      expect(await short.redis.pttl(k.results)).toBeLessThanOrEqual(60_000);
    } finally {
      await short.cleanup();
    }
  });

  it('keeps every key of an execution under the hash tag of its id', async () => {
    await store.create({ id: 'tagged', reactor: 'r', input: {}, commit: first() });
    const found = await redis.keys(`${prefix}:*tagged*`);
    expect(found.sort()).toEqual([`${prefix}:{tagged}:exec:tagged`, `${prefix}:{tagged}:results:tagged`, `${prefix}:{tagged}:trace:tagged`, `${prefix}:{tagged}:undo:tagged`]);
  });

  it('shares one subscriber connection between waiters, and on close resolves them false and quits it', async () => {
    const created: Redis[] = [];
    const own = new Redis(server.url);
    const closing = createRedisStore({
      redis: own,
      prefix,
      subscriber: () => {
        const connection = new Redis(server.url);
        created.push(connection);
        return connection;
      },
    });
    try {
      const waits = [closing.waitSettled('a', 60_000), closing.waitSettled('b', 60_000), closing.waitSettled('a', 60_000)];
      expect(created).toHaveLength(1);
      await closing.close();
      expect(await Promise.all(waits)).toEqual([false, false, false]);
      const subscriber = created[0]!;
      await new Promise<void>((resolve) => (subscriber.status === 'end' ? resolve() : subscriber.once('end', () => resolve())));
      expect(own.status).toBe('ready');
      expect(await closing.waitSettled('a', 60_000)).toBe(false);
    } finally {
      await own.quit();
    }
  });

  it('wakes a waiter in one store when another store publishes', async () => {
    const other = open(prefix);
    try {
      await store.create({ id: 'cross', reactor: 'r', input: {}, commit: first() });
      const waiting = store.waitSettled('cross', 10_000);
      // The waiter's SUBSCRIBE must be acknowledged before another process publishes: publish until it wakes.
      let woke = false;
      void waiting.then(() => (woke = true));
      while (!woke) await other.store.publishSettled('cross');
      expect(await waiting).toBe(true);
    } finally {
      await other.cleanup();
    }
  });
});
