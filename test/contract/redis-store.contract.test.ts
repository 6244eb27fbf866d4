import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { createRedisStore, retentionRefreshMs } from '../../src/store/redis-store.js';
import { MAX_GROUP_COMMIT } from '../../src/store/commit-batcher.js';
import { createTestClock } from '../../src/testing/test-clock.js';
import type { TestClock } from '../../src/testing/test-clock.js';
import { decode, encode } from '../../src/serialization/index.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import { describeStoreContract } from './store-contract.js';
import { describeRedisRetentionContract } from './redis-retention-contract.js';

let server: RedisServer;
let prefixes = 0;
const freshPrefix = () => `t${process.pid}-${(prefixes += 1)}`;

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const open = (prefix = freshPrefix(), contextTtlMs?: number, clock?: TestClock) => {
  const redis = new Redis(server.url);
  const store = createRedisStore({ redis, prefix, ...(contextTtlMs === undefined ? {} : { contextTtlMs }), ...(clock === undefined ? {} : { clock }) });
  return { redis, store, prefix, cleanup: async () => {
    await store.close();
    await redis.quit();
  } };
};

describeStoreContract('redis', async () => open());
describeRedisRetentionContract('redis', async (contextTtlMs, clock) => open(freshPrefix(), contextTtlMs, clock));

const first = (): Commit => ({
  snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'pending', context: {} },
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

  it('re-stamps the retention of every key of the execution on create and on a commit after the refresh window', async () => {
    const clock = createTestClock(1_000_000);
    const short = open(freshPrefix(), 60_000, clock);
    try {
      await short.store.create({ id: 'ttl', reactor: 'r', input: {}, commit: first() });
      const k = createKeyBuilder(short.prefix).executionKeys('ttl');
      for (const key of [k.execution, k.results, k.undo, k.trace]) {
        const ttl = await short.redis.pttl(key);
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
      }
      await short.redis.pexpire(k.results, 1_000_000_000);
      clock.advance(retentionRefreshMs(60_000));
      await short.store.commit('ttl', 1, { ...first(), writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] } });
      expect(await short.redis.pttl(k.results)).toBeLessThanOrEqual(60_000);
    } finally {
      await short.cleanup();
    }
  });

  describe('retention (TTL) stamping', () => {
    const empty = (): Commit => ({ ...first(), writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] } });
    const step = (i: number, extra: Partial<Commit['writes']> = {}): Commit => ({
      ...first(),
      writes: { results: [[`s${i}`, i]], pushUndo: [{ position: i, step: `s${i}`, args: null, result: i }], truncateUndoTo: undefined, trace: [{ type: 'run', step: `s${i}`, at: i }], ...extra },
    });
    const ttlOf = (r: Redis, keys: readonly string[]) => Promise.all(keys.map((key) => r.pttl(key)));

    it('gives a TTL to each key a later commit creates: every key of the execution always has one', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      try {
        await short.store.create({ id: 'later', reactor: 'r', input: {}, commit: empty() });
        const k = createKeyBuilder(short.prefix).executionKeys('later');
        expect(await short.redis.exists(k.results, k.undo, k.trace)).toBe(0);
        // Lower the execution hash's TTL: a commit that re-stamped everything would raise it again.
        await short.redis.pexpire(k.execution, 20_000);
        await short.store.commit('later', 1, { ...empty(), writes: { ...empty().writes, results: [['a', 1]] } });
        await short.store.commit('later', 2, { ...empty(), writes: { ...empty().writes, pushUndo: [{ position: 0, step: 'a', args: null, result: 1 }] } });
        await short.store.commit('later', 3, { ...empty(), writes: { ...empty().writes, trace: [{ type: 'run', step: 'a', at: 1 }, { type: 'run', step: 'b', at: 2 }] } });
        const [exec, results, undo, trace] = await ttlOf(short.redis, [k.execution, k.results, k.undo, k.trace]);
        expect(exec).toBeGreaterThan(0);
        expect(exec).toBeLessThanOrEqual(20_000);
        for (const ttl of [results, undo, trace]) {
          expect(ttl).toBeGreaterThan(50_000);
          expect(ttl).toBeLessThanOrEqual(60_000);
        }
        // An undo stack truncated to nothing is deleted; the push that creates it again stamps it.
        await short.redis.pexpire(k.undo, 20_000);
        await short.store.commit('later', 4, { ...empty(), writes: { ...empty().writes, truncateUndoTo: 0, pushUndo: [{ position: 0, step: 'b', args: null, result: 2 }] } });
        expect(await short.redis.pttl(k.undo)).toBeGreaterThan(50_000);
        expect(await short.store.readUndoStack('later')).toEqual([{ step: 'b', args: null, result: 2 }]);
      } finally {
        await short.cleanup();
      }
    });

    it('does not re-stamp within the refresh window, and re-stamps every key after it', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      try {
        await short.store.create({ id: 'window', reactor: 'r', input: {}, commit: first() });
        const k = createKeyBuilder(short.prefix).executionKeys('window');
        const all = [k.execution, k.results, k.undo, k.trace];
        for (const key of all) await short.redis.pexpire(key, 20_000);
        // Existing keys only: a new result field, a push on the existing stack, a trace entry.
        clock.advance(retentionRefreshMs(60_000) - 1);
        await short.store.commit('window', 1, step(1));
        for (const ttl of await ttlOf(short.redis, all)) {
          expect(ttl).toBeGreaterThan(0);
          expect(ttl).toBeLessThanOrEqual(20_000);
        }
        clock.advance(1);
        await short.store.commit('window', 2, step(2));
        for (const ttl of await ttlOf(short.redis, all)) {
          expect(ttl).toBeGreaterThan(50_000);
          expect(ttl).toBeLessThanOrEqual(60_000);
        }
        // The window starts again at that stamp.
        for (const key of all) await short.redis.pexpire(key, 20_000);
        clock.advance(retentionRefreshMs(60_000) / 2);
        await short.store.commit('window', 3, step(3));
        for (const ttl of await ttlOf(short.redis, all)) expect(ttl).toBeLessThanOrEqual(20_000);
        expect(await short.store.readResults('window')).toEqual(new Map([['a', 1], ['s1', 1], ['s2', 2], ['s3', 3]]));
      } finally {
        await short.cleanup();
      }
    });

    it('re-stamps on the first commit of a store that never stamped the execution (another process)', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      const other = open(short.prefix, 60_000, createTestClock(1_000_000));
      try {
        await short.store.create({ id: 'handed', reactor: 'r', input: {}, commit: first() });
        const k = createKeyBuilder(short.prefix).executionKeys('handed');
        for (const key of [k.execution, k.results, k.undo, k.trace]) await short.redis.pexpire(key, 20_000);
        await other.store.commit('handed', 1, step(1));
        for (const ttl of await ttlOf(short.redis, [k.execution, k.results, k.undo, k.trace])) expect(ttl).toBeGreaterThan(50_000);
      } finally {
        await other.cleanup();
        await short.cleanup();
      }
    });

    it('gives the inbox, dedupe and awaits keys a signal or commit creates the retention, and re-stamps them with the actor', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      try {
        await short.store.create({ id: 'kernel', reactor: 'r', input: {}, commit: empty() });
        await short.store.create({ id: 'kernel.c', reactor: 'r', input: {}, commit: empty() });
        const k = createKeyBuilder(short.prefix).executionKeys('kernel');
        await short.store.signal({ to: 'kernel', event: { type: 't' }, dedupeKey: 'a' });
        await short.store.commit('kernel.c', 1, { ...empty(), signals: [{ to: 'kernel', event: { type: 't' }, dedupeKey: 'b' }] });
        await short.store.commit('kernel', 1, { ...empty(), inboxSeen: 2, awaits: ['kernel.c'] });
        for (const ttl of await ttlOf(short.redis, [k.inbox, k.dedupe, k.awaits])) {
          expect(ttl).toBeGreaterThan(50_000);
          expect(ttl).toBeLessThanOrEqual(60_000);
        }
        // A later landing keeps the TTL the key has; a re-stamping commit raises it again.
        for (const key of [k.execution, k.inbox, k.dedupe, k.awaits]) await short.redis.pexpire(key, 20_000);
        await short.store.signal({ to: 'kernel', event: { type: 't' }, dedupeKey: 'c' });
        for (const ttl of await ttlOf(short.redis, [k.inbox, k.dedupe])) expect(ttl).toBeLessThanOrEqual(20_000);
        clock.advance(retentionRefreshMs(60_000));
        await short.store.commit('kernel', 2, { ...empty(), inboxSeen: 3 });
        for (const ttl of await ttlOf(short.redis, [k.execution, k.inbox, k.dedupe, k.awaits])) expect(ttl).toBeGreaterThan(50_000);
      } finally {
        await short.cleanup();
      }
    });

    it('a re-stamping commit of a child re-stamps its ancestors\' keys, and one of a parent its descendants\' keys', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      try {
        const kb = createKeyBuilder(short.prefix);
        await short.store.create({ id: 'tree', reactor: 'r', input: {}, commit: first() });
        const child = { id: 'tree.c', reactor: 'r', input: {}, commit: { ...first(), spawn: [{ id: 'tree.c.g', reactor: 'r', input: {}, commit: first() }] } };
        await short.store.commit('tree', 1, { ...empty(), spawn: [child], awaits: ['tree.c'] });
        // Spawn records the parent chain and the children sets.
        expect(await short.redis.hget(kb.executionKeys('tree.c').execution, EXECUTION_FIELDS.parent)).toBe('tree');
        expect(await short.redis.hget(kb.executionKeys('tree.c.g').execution, EXECUTION_FIELDS.parent)).toBe('tree.c');
        expect(await short.redis.smembers(kb.executionKeys('tree').children)).toEqual(['tree.c']);
        expect(await short.redis.smembers(kb.executionKeys('tree.c').children)).toEqual(['tree.c.g']);
        expect(await short.redis.hget(kb.executionKeys('tree').execution, EXECUTION_FIELDS.parent)).toBeNull();
        const retained = (id: string) => {
          const k = kb.executionKeys(id);
          return id === 'tree' ? [k.execution, k.results, k.undo, k.trace, k.children, k.awaits] : id === 'tree.c' ? [k.execution, k.results, k.undo, k.trace, k.children] : [k.execution, k.results, k.undo, k.trace];
        };
        for (const id of ['tree', 'tree.c', 'tree.c.g']) {
          for (const ttl of await ttlOf(short.redis, retained(id))) {
            expect(ttl).toBeGreaterThan(50_000);
            expect(ttl).toBeLessThanOrEqual(60_000);
          }
        }
        const lower = async () => {
          for (const id of ['tree', 'tree.c', 'tree.c.g']) for (const key of retained(id)) await short.redis.pexpire(key, 20_000);
        };
        // Within the refresh window the grandchild's commit re-stamps nothing.
        await lower();
        await short.store.commit('tree.c.g', 1, step(1));
        for (const id of ['tree', 'tree.c']) for (const ttl of await ttlOf(short.redis, retained(id))) expect(ttl).toBeLessThanOrEqual(20_000);
        // After it, the grandchild's commit keeps every ancestor alive.
        clock.advance(retentionRefreshMs(60_000));
        await short.store.commit('tree.c.g', 2, step(2));
        for (const id of ['tree', 'tree.c', 'tree.c.g']) for (const ttl of await ttlOf(short.redis, retained(id))) expect(ttl).toBeGreaterThan(50_000);
        // And the root's re-stamping commit keeps every descendant's undo data alive.
        await lower();
        clock.advance(retentionRefreshMs(60_000));
        await short.store.commit('tree', 2, empty());
        for (const id of ['tree', 'tree.c', 'tree.c.g']) for (const ttl of await ttlOf(short.redis, retained(id))) expect(ttl).toBeGreaterThan(50_000);
        // The middle one re-stamps up and down; a sibling tree under the same root is not touched.
        await short.store.create({ id: 'tree.other', reactor: 'r', input: {}, commit: first() });
        await short.redis.pexpire(kb.executionKeys('tree.other').execution, 20_000);
        await lower();
        clock.advance(retentionRefreshMs(60_000));
        await short.store.commit('tree.c', 1, empty());
        for (const id of ['tree', 'tree.c', 'tree.c.g']) for (const ttl of await ttlOf(short.redis, retained(id))) expect(ttl).toBeGreaterThan(50_000);
        expect(await short.redis.pttl(kb.executionKeys('tree.other').execution)).toBeLessThanOrEqual(20_000);
      } finally {
        await short.cleanup();
      }
    });

    it('a refused commit does not count as a stamp', async () => {
      const clock = createTestClock(1_000_000);
      const short = open(freshPrefix(), 60_000, clock);
      const other = open(short.prefix, 60_000, clock);
      try {
        await short.store.create({ id: 'refused', reactor: 'r', input: {}, commit: first() });
        const k = createKeyBuilder(short.prefix).executionKeys('refused');
        await expect(other.store.commit('refused', 7, step(1))).rejects.toBeInstanceOf(StaleRevisionError);
        await short.redis.pexpire(k.execution, 20_000);
        await other.store.commit('refused', 1, step(1));
        expect(await short.redis.pttl(k.execution)).toBeGreaterThan(50_000);
      } finally {
        await other.cleanup();
        await short.cleanup();
      }
    });
  });

  describe('inbox keys', () => {
    const ping = (to: string, dedupeKey: string) => ({ to, event: { type: 'test.ping' }, dedupeKey });

    it('keeps the inbox seq in the execution hash, the entries and dedupe keys in their own hashes, all under the root\'s hash tag', async () => {
      await store.create({ id: 'inboxed', reactor: 'r', input: {}, commit: first() });
      await store.create({ id: 'inboxed.child', reactor: 'r', input: {}, commit: first() });
      await store.signal(ping('inboxed', 'k1'));
      await store.commit('inboxed.child', 1, { ...first(), writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] }, signals: [ping('inboxed', 'k2')], awaits: ['inboxed'] });
      const k = keysOf('inboxed');
      expect(await redis.hget(k.execution, EXECUTION_FIELDS.inboxSeq)).toBe('2');
      expect(await redis.hgetall(k.dedupe)).toEqual({ k1: '1', k2: '2' });
      expect(Object.keys(await redis.hgetall(k.inbox))).toEqual(['1', '2']);
      expect(await redis.lrange(keysOf('inboxed.child').awaits, 0, -1)).toEqual(['inboxed']);
      const found = (await redis.keys(`${prefix}:*inboxed*`)).sort();
      expect(found.every((key) => key.startsWith(`${prefix}:{inboxed}:`))).toBe(true);
      expect(found).toEqual(expect.arrayContaining([k.inbox, k.dedupe, keysOf('inboxed.child').awaits]));
    });

    it('clears the inbox, dedupe and awaits an expired actor left under its id when the id is created again', async () => {
      await store.create({ id: 'reborn', reactor: 'r', input: {}, commit: { ...first(), awaits: ['reborn.x'] } });
      await store.signal(ping('reborn', 'k'));
      const k = keysOf('reborn');
      // The execution hash expired first; the other keys are still there.
      await redis.del(k.execution);
      await store.create({ id: 'reborn', reactor: 'r', input: {}, commit: first() });
      expect(await store.readInbox('reborn')).toEqual({ entries: [], seq: 0 });
      expect(await redis.exists(k.inbox, k.dedupe, k.awaits)).toBe(0);
      expect(await store.signal(ping('reborn', 'k'))).toEqual({ landed: ['reborn'] });
    });
  });

  describe('acquireAndLoad on unreadable data', () => {
    const lease = { owner: 'host-a', ttlMs: 60_000 };

    it('reports a foreign snapshot as a DeserializationError and releases the lease it took', async () => {
      await store.create({ id: 'aal-foreign', reactor: 'r', input: {}, commit: first() });
      await redis.hset(keysOf('aal-foreign').execution, EXECUTION_FIELDS.snapshot, Buffer.from('{"json":"from another program"}'));
      await expect(store.acquireAndLoad('aal-foreign', lease)).rejects.toBeInstanceOf(DeserializationError);
      expect(await store.hasLease('aal-foreign')).toBe(false);
      await redis.hset(keysOf('aal-foreign').execution, EXECUTION_FIELDS.snapshot, Buffer.from(encode({ not: 'an envelope' })));
      await expect(store.acquireAndLoad('aal-foreign', lease)).rejects.toThrow(/not an xreactor envelope/);
      expect(await store.hasLease('aal-foreign')).toBe(false);
    });

    it('reports a truncated snapshot as a DeserializationError and releases the lease it took', async () => {
      await store.create({ id: 'aal-truncated', reactor: 'r', input: {}, commit: first() });
      const bytes = await redis.hgetBuffer(keysOf('aal-truncated').execution, EXECUTION_FIELDS.snapshot);
      await redis.hset(keysOf('aal-truncated').execution, EXECUTION_FIELDS.snapshot, bytes!.subarray(0, bytes!.length - 3));
      await expect(store.acquireAndLoad('aal-truncated', lease)).rejects.toBeInstanceOf(DeserializationError);
      expect(await store.hasLease('aal-truncated')).toBe(false);
    });

    it('reports a renewal over unreadable data the same way: the lease is released', async () => {
      await store.create({ id: 'aal-renew', reactor: 'r', input: {}, commit: first() }, { lease });
      await redis.hset(keysOf('aal-renew').execution, EXECUTION_FIELDS.snapshot, Buffer.from('junk'));
      await expect(store.acquireAndLoad('aal-renew', lease)).rejects.toBeInstanceOf(DeserializationError);
      expect(await store.hasLease('aal-renew')).toBe(false);
    });

    it('reports an incomplete execution hash and a key of another type as a DeserializationError, taking no lease', async () => {
      await redis.hset(keysOf('aal-partial').execution, EXECUTION_FIELDS.revision, '3');
      await expect(store.acquireAndLoad('aal-partial', lease)).rejects.toThrow(/incomplete or foreign/);
      expect(await store.hasLease('aal-partial')).toBe(false);
      await store.create({ id: 'aal-noinput', reactor: 'r', input: {}, commit: first() });
      await redis.hdel(keysOf('aal-noinput').execution, EXECUTION_FIELDS.input);
      await expect(store.acquireAndLoad('aal-noinput', lease)).rejects.toThrow(/input missing/);
      expect(await store.hasLease('aal-noinput')).toBe(false);
      await redis.set(keysOf('aal-stringy').execution, 'written by someone else');
      await expect(store.acquireAndLoad('aal-stringy', lease)).rejects.toBeInstanceOf(DeserializationError);
      expect(await store.hasLease('aal-stringy')).toBe(false);
    });
  });

  it('refuses an undo push that would leave a gap without releasing the lease or announcing', async () => {
    await store.create({ id: 'gap-lease', reactor: 'r', input: {}, commit: first() }, { lease: { owner: 'host-a', ttlMs: 60_000 } });
    const gap: Commit = { ...first(), writes: { results: [], pushUndo: [{ position: 5, step: 'b', args: null, result: 2 }], truncateUndoTo: undefined, trace: [] } };
    const waiting = store.waitSettled('gap-lease', 300).settled;
    await expect(store.commit('gap-lease', 1, gap, { releaseLease: 'host-a', announce: true })).rejects.toMatchObject({ code: 'undo_position_invalid' });
    expect(await waiting).toBe(false);
    expect(await store.hasLease('gap-lease')).toBe(true);
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
      const waits = [closing.waitSettled('a', 60_000).settled, closing.waitSettled('b', 60_000).settled, closing.waitSettled('a', 60_000).settled];
      expect(created).toHaveLength(1);
      await closing.close();
      expect(await Promise.all(waits)).toEqual([false, false, false]);
      const subscriber = created[0]!;
      await new Promise<void>((resolve) => (subscriber.status === 'end' ? resolve() : subscriber.once('end', () => resolve())));
      // The store's own connection stays the caller's, open and usable.
      expect(await own.ping()).toBe('PONG');
      expect(await closing.waitSettled('a', 60_000).settled).toBe(false);
    } finally {
      await own.quit();
    }
  });

  it('wakes a waiter in one store when another store publishes', async () => {
    const other = open(prefix);
    try {
      await store.create({ id: 'cross', reactor: 'r', input: {}, commit: first() });
      const wait = store.waitSettled('cross', 10_000);
      // Once the waiter listens (its SUBSCRIBE is acknowledged), one publish from another process reaches it.
      await wait.listening;
      await other.store.publishSettled('cross');
      expect(await wait.settled).toBe(true);
    } finally {
      await other.cleanup();
    }
  });
});

describe('redis store: group commit', () => {
  const quiet = (): Commit => ({ ...first(), writes: { results: [['s', 1]], pushUndo: [], truncateUndoTo: undefined, trace: [{ type: 'run', step: 's', at: 2 }] } });
  /** EVALSHA / EVAL calls the server counted since the last RESETSTAT (scripts, whatever they are). */
  const scriptCalls = async (redis: Redis): Promise<number> => {
    const stats = await redis.info('commandstats');
    return [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  };
  const ten = Array.from({ length: 10 }, (_, i) => `batch-${i}`);

  it('sends the commits of an idle turn as two script calls at its end (halves: their actors fall out of step), each to its own keys', async () => {
    const { redis, store, cleanup } = open();
    try {
      for (const id of ten) await store.create({ id, reactor: 'r', input: {}, commit: first() });
      const traced = await Promise.all(ten.map(async (id) => (await store.readTrace(id)).length));
      await redis.config('RESETSTAT');
      expect(await Promise.all(ten.map((id) => store.commit(id, 1, quiet())))).toEqual(ten.map(() => 2));
      expect(await scriptCalls(redis)).toBe(2);
      // The script builds each commit's results, undo, trace and lease keys from its base and id.
      for (const [i, id] of ten.entries()) {
        expect(await store.readResults(id)).toEqual(new Map([['a', 1], ['s', 1]]));
        expect(await store.readTrace(id)).toHaveLength(traced[i]! + 1);
      }
    } finally {
      await cleanup();
    }
  });

  it('sends a commit issued from `sending` in the same script call as the commit before it, and applies it after that one (a plain commit, and one that announces and releases its lease)', async () => {
    const { redis, store, cleanup } = open();
    try {
      for (const id of ['p', 'p.a', 'q', 'q.a']) await store.create({ id, reactor: 'r', input: {}, commit: first() }, { lease: { owner: 'w', ttlMs: 60_000 } });
      const undo = (to: string) => ({ to, event: { type: 'test.undo', at: 3 }, dedupeKey: `undo:${to}` });
      const applying: Commit = { ...quiet(), inboxSeen: 1, consumed: [1], signalAhead: 'undo:p' };
      for (const [sender, recipient, options] of [
        ['p.a', 'p', {}],
        ['q.a', 'q', { announce: true, releaseLease: 'w' }],
      ] as const) {
        await redis.config('RESETSTAT');
        let ahead: Promise<number> | undefined;
        const sending = () => void (ahead = store.commit(recipient, 1, { ...applying, signalAhead: `undo:${recipient}` }));
        const sent = store.commit(sender, 1, { ...quiet(), signals: [undo(recipient)] }, { ...options, sending });
        expect(await sent).toBe(2);
        expect(ahead).toBeDefined();
        expect(await ahead).toBe(2);
        expect(await scriptCalls(redis)).toBe(1);
        expect(await store.load(recipient)).toMatchObject({ revision: 2, inbox: { entries: [], seq: 1 } });
      }
      expect(await store.hasLease('q.a')).toBe(false);
    } finally {
      await cleanup();
    }
  });

  it('sends the leases and loads of one turn in one script call, each taken or refused as alone; a key of another type fails only its own', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const undo = { step: 'a', args: null, result: 1 };
      for (const id of ['g-free', 'g-held', 'g-asked', 'g-asked.rb-0']) await store.create({ id, reactor: 'r', input: { id }, commit: first() });
      expect(await store.acquireLease('g-held', 'other', 60_000)).toBe(true);
      await redis.set(createKeyBuilder(prefix).executionKeys('g-foreign').execution, 'not a hash');
      const lease = { owner: 'w', ttlMs: 60_000 };
      await redis.config('RESETSTAT');
      const outcomes = await Promise.allSettled([
        store.acquireAndLoad('g-free', lease, { undoTop: true }),
        store.acquireAndLoad('g-held', lease),
        store.acquireAndLoad('g-asked', lease, { unlessExists: 'g-asked.rb-0' }),
        store.acquireAndLoad('g-missing', lease),
        store.acquireAndLoad('g-foreign', lease),
      ]);
      expect(await scriptCalls(redis)).toBe(1);
      expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value.status : (o.reason as Error).name))).toEqual(['leased', 'busy', 'exists', 'missing', 'DeserializationError']);
      expect(outcomes[0]).toMatchObject({ value: { execution: { revision: 1 }, input: { id: 'g-free' }, undoTop: { position: 0, entry: undo } } });
      expect([await store.hasLease('g-free'), await store.hasLease('g-asked'), await store.acquireLease('g-held', 'other', 60_000)]).toEqual([true, false, true]);
    } finally {
      await cleanup();
    }
  });

  /**
   * Creates `ids`, 'ahead' and 'ahead-2', then keeps the server busy with a script sent ahead on
   * the store's connection, so that no reply to the commits sent behind it can arrive before
   * `issue` has issued its commits: the commit of 'ahead' goes out at the end of its turn (nothing
   * was in flight), and with `twoAhead` the commit of 'ahead-2' goes out at the end of a later
   * turn, a second call in flight, behind a command that blocks the connection for a while:
   * 'ahead' is answered while 'ahead-2' is still in flight (answered in one turn, both would leave
   * nothing in flight, and a turn's commits would go out from idle, as two calls). Returns the
   * script calls the server counted (the busy script and the commits ahead included), once every
   * commit landed at revision 2.
   */
  const behindBusyCall = async (redis: Redis, store: Store, prefix: string, ids: readonly string[], issue: () => Promise<Promise<number>[]>, twoAhead = false): Promise<number> => {
    const aheadIds = twoAhead ? ['ahead', 'ahead-2'] : ['ahead'];
    for (const id of [...ids, ...aheadIds]) await store.create({ id, reactor: 'r', input: {}, commit: first() });
    await redis.config('RESETSTAT');
    const busy = [redis.eval('local i = 0 while i < 20000000 do i = i + 1 end return i', 0)];
    const ahead = [store.commit('ahead', 1, quiet())];
    if (twoAhead) {
      await new Promise((resolve) => setImmediate(resolve));
      busy.push(redis.blpop(`${prefix}:never`, 0.3));
      ahead.push(store.commit('ahead-2', 1, quiet()));
      await new Promise((resolve) => setImmediate(resolve));
    }
    const commits = await issue();
    expect(await Promise.all([...commits, ...ahead])).toEqual([...ids.map(() => 2), ...ahead.map(() => 2)]);
    await Promise.all(busy);
    return scriptCalls(redis);
  };

  it('while a commit is in flight, sends every commit of a turn in one script call', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const calls = await behindBusyCall(redis, store, prefix, ten, async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return ten.map((id) => store.commit(id, 1, quiet()));
      });
      expect(calls).toBe(3);
    } finally {
      await cleanup();
    }
  });

  it('while two calls are in flight, commits of several turns wait for a reply and go out together, as one call', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const calls = await behindBusyCall(
        redis,
        store,
        prefix,
        ten,
        async () => {
          // Half the commits in one turn, half in a later one: all behind the two calls in flight.
          const early = ten.slice(0, 5).map((id) => store.commit(id, 1, quiet()));
          await new Promise((resolve) => setImmediate(resolve));
          return [...early, ...ten.slice(5).map((id) => store.commit(id, 1, quiet()))];
        },
        true,
      );
      // The busy script, the two commits ahead, and one call for the ten commits of both turns.
      expect(calls).toBe(4);
      for (const id of ten) expect(await store.readResults(id)).toEqual(new Map([['a', 1], ['s', 1]]));
    } finally {
      await cleanup();
    }
  });

  it(`sends a batch at once when ${MAX_GROUP_COMMIT} commits have gathered, even while two calls are in flight`, async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      const many = Array.from({ length: MAX_GROUP_COMMIT + 2 }, (_, i) => `many-${i}`);
      const calls = await behindBusyCall(redis, store, prefix, many, () => Promise.resolve(many.map((id) => store.commit(id, 1, quiet()))), true);
      // The busy script, the two commits ahead, a full batch, and the two commits left over.
      expect(calls).toBe(5);
    } finally {
      await cleanup();
    }
  });

  it('sends a lone commit of an idle turn alone, with its lease taken', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      await store.create({ id: 'alone', reactor: 'r', input: {}, commit: first() });
      await redis.config('RESETSTAT');
      expect(await store.commit('alone', 1, quiet(), { takeLease: { owner: 'w1', ttlMs: 60_000 } })).toBe(2);
      expect(await scriptCalls(redis)).toBe(1);
      expect(await redis.get(createKeyBuilder(prefix).executionKeys('alone').lease)).toBe('w1');
    } finally {
      await cleanup();
    }
  });

  it('takes each batched commit\'s lease on its own key, and refuses the one whose lease another owner holds', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      for (const id of ten) await store.create({ id, reactor: 'r', input: {}, commit: first() });
      const k = createKeyBuilder(prefix);
      await redis.set(k.executionKeys('batch-3').lease, 'other', 'PX', 60_000);
      await redis.config('RESETSTAT');
      const outcomes = await Promise.allSettled(ten.map((id) => store.commit(id, 1, quiet(), { takeLease: { owner: `w-${id}`, ttlMs: 60_000 } })));
      // From idle: two calls of five.
      expect(await scriptCalls(redis)).toBe(2);
      outcomes.forEach((outcome, i) => expect(outcome.status, ten[i]).toBe(i === 3 ? 'rejected' : 'fulfilled'));
      for (const id of ten) expect(await redis.get(k.executionKeys(id).lease), id).toBe(id === 'batch-3' ? 'other' : `w-${id}`);
    } finally {
      await cleanup();
    }
  });

  it('with groupCommit: false sends every commit alone', async () => {
    const redis = new Redis(server.url);
    const store = createRedisStore({ redis, prefix: freshPrefix(), groupCommit: false });
    try {
      for (const id of ten) await store.create({ id, reactor: 'r', input: {}, commit: first() });
      await redis.config('RESETSTAT');
      await Promise.all(ten.map((id) => store.commit(id, 1, quiet())));
      expect(await scriptCalls(redis)).toBe(10);
    } finally {
      await store.close();
      await redis.quit();
    }
  });

  it('fails only the commit whose key holds another type of value; the others of its batch apply', async () => {
    const { redis, store, prefix, cleanup } = open();
    try {
      for (const id of ten) await store.create({ id, reactor: 'r', input: {}, commit: first() });
      await redis.del(createKeyBuilder(prefix).executionKeys('batch-4').results);
      await redis.set(createKeyBuilder(prefix).executionKeys('batch-4').results, 'foreign');
      await redis.config('RESETSTAT');
      const outcomes = await Promise.allSettled(ten.map((id) => store.commit(id, 1, quiet())));
      expect(await scriptCalls(redis)).toBe(2);
      outcomes.forEach((outcome, i) => {
        if (i === 4) expect(outcome).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/WRONGTYPE/) } });
        else expect(outcome, ten[i]).toEqual({ status: 'fulfilled', value: 2 });
      });
    } finally {
      await cleanup();
    }
  });

  it('commits with a kernel section (signals, spawns) share the group commit of their turn, each applied or refused as it would be alone, in order', async () => {
    const { redis, store, cleanup } = open();
    try {
      const children = ten.map((id) => `k.${id}`);
      for (const id of ['k', ...children, 'ahead']) await store.create({ id, reactor: 'r', input: {}, commit: first() });
      await redis.config('RESETSTAT');
      // A busy script ahead on the store's connection: the commit sent behind it (at the end of its turn) stays in flight while the turn below is issued.
      const busy = redis.eval('local i = 0 while i < 20000000 do i = i + 1 end return i', 0);
      const ahead = store.commit('ahead', 1, quiet());
      await new Promise((resolve) => setImmediate(resolve));
      // One turn: ten children signal their parent (the first also spawns an actor), then the parent commits without having seen them.
      const spawned = { id: 'k.new', reactor: 'r', input: null, commit: { ...first(), status: 'running' as const } };
      const signalled = children.map((id, i) => store.commit(id, 1, { ...quiet(), signals: [{ to: 'k', event: { type: 't', i }, dedupeKey: id }], ...(i === 0 ? { spawn: [spawned] } : {}) }));
      const parent = store.commit('k', 1, quiet());
      const outcomes = await Promise.allSettled([...signalled, parent, ahead]);
      await busy;
      // The busy script, the commit ahead, and one call for the eleven commits of the turn.
      expect(await scriptCalls(redis)).toBe(3);
      expect(outcomes.slice(0, 10)).toEqual(ten.map(() => ({ status: 'fulfilled', value: 2 })));
      expect(outcomes[10]).toMatchObject({ status: 'rejected', reason: { name: 'InboxPendingError' } });
      expect(outcomes[11]).toEqual({ status: 'fulfilled', value: 2 });
      const inbox = await store.readInbox('k');
      expect(inbox.entries.map((e) => e.dedupeKey).sort()).toEqual([...children].sort());
      expect((await store.load('k'))?.revision).toBe(1);
      expect((await store.load('k.new'))?.revision).toBe(1);
    } finally {
      await cleanup();
    }
  });
});

describe('redis store: marking unreadable data (markUnreadable-1.lua)', () => {
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
  const record = { code: 'deserialization_failed', message: 'truncated' };

  it('keeps every stored byte of a truncated snapshot and the retention; only status, rev and the unreadable field change', async () => {
    await store.create({ id: 'cut', reactor: 'r', input: { a: 1 }, commit: first() });
    const k = keysOf('cut');
    const bytes = await redis.hgetBuffer(k.execution, EXECUTION_FIELDS.snapshot);
    await redis.hset(k.execution, EXECUTION_FIELDS.snapshot, bytes!.subarray(0, bytes!.length - 3));
    const before = await redis.hgetallBuffer(k.execution);
    const ttl = await redis.pttl(k.execution);
    expect(await store.markUnreadable('cut', record)).toBe('marked');
    const after = await redis.hgetallBuffer(k.execution);
    expect(Object.keys(after).sort()).toEqual([...Object.keys(before), EXECUTION_FIELDS.unreadable].sort());
    for (const field of Object.keys(before).filter((f) => f !== EXECUTION_FIELDS.status && f !== EXECUTION_FIELDS.revision)) expect(after[field], field).toEqual(before[field]);
    expect(after[EXECUTION_FIELDS.status]?.toString()).toBe('failed');
    expect(after[EXECUTION_FIELDS.revision]?.toString()).toBe('2');
    expect(decode(after[EXECUTION_FIELDS.unreadable]!)).toEqual(record);
    const kept = await redis.pttl(k.execution);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(ttl);
    await expect(store.load('cut')).rejects.toBeInstanceOf(DeserializationError);
  });

  it('leaves a revision that is not a whole number as it is', async () => {
    await redis.hset(keysOf('oddrev').execution, EXECUTION_FIELDS.revision, 'three', EXECUTION_FIELDS.snapshot, 'x', EXECUTION_FIELDS.outbox, 'y');
    expect(await store.markUnreadable('oddrev', record)).toBe('marked');
    expect(await redis.hget(keysOf('oddrev').execution, EXECUTION_FIELDS.revision)).toBe('three');
    expect(await redis.hget(keysOf('oddrev').execution, EXECUTION_FIELDS.status)).toBe('failed');
  });

  it('writes nothing into a key of another type (foreign), and unlists the id', async () => {
    await redis.set(keysOf('stringy2').execution, 'written by someone else');
    await store.markActive('stringy2', true);
    expect(await store.markUnreadable('stringy2', record)).toBe('foreign');
    expect(await redis.get(keysOf('stringy2').execution)).toBe('written by someone else');
    expect((await store.listActive(100)).ids).not.toContain('stringy2');
    await expect(store.readUnreadable('stringy2')).rejects.toBeInstanceOf(DeserializationError);
  });

  it('creates no key for an unknown id, nor for a hash holding none of the execution fields', async () => {
    expect(await store.markUnreadable('nobody', record)).toBe('missing');
    expect(await redis.exists(keysOf('nobody').execution)).toBe(0);
    await redis.hset(keysOf('other-hash').execution, 'someone', 'else');
    expect(await store.markUnreadable('other-hash', record)).toBe('missing');
    expect(await redis.hgetall(keysOf('other-hash').execution)).toEqual({ someone: 'else' });
  });

  it('reports a record that is not { code, message } as a DeserializationError', async () => {
    await store.create({ id: 'badrec', reactor: 'r', input: {}, commit: first() });
    await redis.hset(keysOf('badrec').execution, EXECUTION_FIELDS.unreadable, Buffer.from(encode(['not', 'a', 'record'])));
    await expect(store.readUnreadable('badrec')).rejects.toThrow(/unreadable record of actor badrec is not \{ code, message \}/);
  });
});
