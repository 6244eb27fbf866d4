/**
 * Retention and key placement the Store port cannot observe (TTLs, children sets, hash slots),
 * for every Redis deployment: run on a single server and on a Redis Cluster.
 */
import type { Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { retentionRefreshMs } from '../../src/store/redis-store.js';
import { createTestClock } from '../../src/testing/test-clock.js';
import type { TestClock } from '../../src/testing/test-clock.js';

/** A Redis store under test with its connection. */
export interface RedisUnderTest {
  readonly redis: Redis | Cluster;
  readonly store: Store;
  readonly prefix: string;
  readonly cleanup: () => Promise<void>;
}

const TTL_MS = 60_000;

const empty = (): Commit => ({
  snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'running', context: {} },
  status: 'running',
  writes: { results: [], pushUndo: [], truncateUndoTo: undefined, trace: [] },
  outbox: [],
});
/** A commit that creates the results, undo and trace keys. */
const full = (): Commit => ({
  ...empty(),
  writes: { results: [['a', 1]], pushUndo: [{ position: 0, step: 'a', args: null, result: 1 }], truncateUndoTo: undefined, trace: [{ type: 'run', step: 'a', at: 1 }] },
});

/** Registers the Redis retention contract; `open` gives a store with a fresh prefix, `contextTtlMs` and `clock`. */
export function describeRedisRetentionContract(name: string, open: (contextTtlMs: number, clock: TestClock) => Promise<RedisUnderTest>): void {
  describe(`Redis retention contract: ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    const fresh = async (clock: TestClock): Promise<RedisUnderTest> => {
      const made = await open(TTL_MS, clock);
      cleanups.push(made.cleanup);
      return made;
    };
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    it('a detached spawn (retainWithParent: false) is not in its parent\'s children set; its re-stamp does not reach the parent, nor the parent\'s it', async () => {
      const clock = createTestClock(1_000_000);
      const { redis, store, prefix } = await fresh(clock);
      const kb = createKeyBuilder(prefix);
      await store.create({ id: 'det', reactor: 'r', input: {}, commit: full() });
      await store.commit('det', 1, { ...empty(), spawn: [{ id: 'det.m', reactor: 'r', input: {}, commit: full() }] });
      // The map-like actor spawns a detached element, which spawns an attached child of its own.
      const element = { id: 'det.m.0', reactor: 'e', input: {}, commit: { ...full(), spawn: [{ id: 'det.m.0.k', reactor: 'k', input: {}, commit: full() }] }, retainWithParent: false, listed: false };
      await store.commit('det.m', 1, { ...empty(), spawn: [element] });
      const fields = (id: string) => redis.hmget(kb.executionKeys(id).execution, EXECUTION_FIELDS.parent, EXECUTION_FIELDS.detached);
      expect(await fields('det.m')).toEqual(['det', null]);
      expect(await fields('det.m.0')).toEqual(['det.m', '1']);
      expect(await fields('det.m.0.k')).toEqual(['det.m.0', null]);
      expect(await redis.smembers(kb.executionKeys('det').children)).toEqual(['det.m']);
      expect(await redis.exists(kb.executionKeys('det.m').children)).toBe(0);
      expect(await redis.smembers(kb.executionKeys('det.m.0').children)).toEqual(['det.m.0.k']);
      const retained = (id: string) => {
        const k = kb.executionKeys(id);
        return [k.execution, k.results, k.undo, k.trace, ...(id === 'det' || id === 'det.m.0' ? [k.children] : [])];
      };
      const ids = ['det', 'det.m', 'det.m.0', 'det.m.0.k'];
      const ttls = async (id: string) => Promise.all(retained(id).map((key) => redis.pttl(key)));
      for (const id of ids) for (const ttl of await ttls(id)) expect(ttl, id).toBeGreaterThan(50_000);
      const lower = async () => {
        for (const id of ids) for (const key of retained(id)) await redis.pexpire(key, 20_000);
      };
      const stampedNow = async (stamped: readonly string[]) => {
        for (const id of ids) {
          for (const ttl of await ttls(id)) {
            if (stamped.includes(id)) expect(ttl, id).toBeGreaterThan(50_000);
            else expect(ttl, id).toBeLessThanOrEqual(20_000);
          }
        }
      };
      // The element's re-stamp keeps itself and its own child alive, not the map nor the root.
      await lower();
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('det.m.0', 1, empty());
      await stampedNow(['det.m.0', 'det.m.0.k']);
      // Its child's re-stamp climbs to the element and stops there.
      await lower();
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('det.m.0.k', 1, empty());
      await stampedNow(['det.m.0', 'det.m.0.k']);
      // The map's re-stamp climbs to the root and does not reach the element; the root's reaches the map only.
      await lower();
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('det.m', 2, empty());
      await stampedNow(['det', 'det.m']);
      await lower();
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('det', 2, empty());
      await stampedNow(['det', 'det.m']);
    });

    /** Every key under `prefix`, on every node (a Cluster's masters), with the node it is on. */
    const allKeys = async (redis: Redis | Cluster, prefix: string): Promise<{ readonly node: number; readonly key: string }[]> => {
      const nodes = (redis as Cluster).isCluster === true ? (redis as Cluster).nodes('master') : [redis as Redis];
      const perNode = await Promise.all(nodes.map((node) => node.keys(`${prefix}:*`)));
      return perNode.flatMap((keys, node) => keys.map((key) => ({ node, key })));
    };

    /** The map `m.map` of root `m`, spawned by it with its stats and a source. */
    const spawnMap = async (store: Store) => {
      await store.create({ id: 'm', reactor: 'r', input: {}, commit: empty() });
      const map = { init: { total: null, batchSize: 2, atomic: true, mode: 'fanOut' as const }, source: ['a', 'b'] };
      await store.commit('m', 1, { ...empty(), spawn: [{ id: 'm.map', reactor: 'r', input: {}, commit: { ...empty(), writes: { ...empty().writes, map } } }] });
    };
    /** Elements and rollback actors of `m.map` write every kind of map key, buckets 0 and 1 included. */
    const busyMapWrites = async (store: Store) => {
      const failure = { step: 'e', kind: 'undo' as const, reason: 'raised' as const, error: { name: 'Error', message: 'no' } };
      for (const [index, outcome] of [[0, 'completed'], [1500, 'aborted']] as const) {
        const id = `m.map.${index}`;
        const started = { ...full(), writes: { ...full().writes, map: { started: { map: 'm.map', index } } } };
        await store.commit('m.map', (await store.load('m.map'))!.revision, { ...empty(), spawn: [{ id, reactor: 'e', input: {}, commit: started, retainWithParent: false, listed: false }] });
        await store.commit(id, 1, { ...empty(), status: outcome, writes: { ...empty().writes, map: { report: { map: 'm.map', index, outcome, stops: outcome === 'aborted', at: 1 } } } });
      }
      for (const position of [0, 1100]) {
        const id = `m.map.rb-${position}`;
        await store.create({ id, reactor: 'rb', input: {}, commit: empty() });
        await store.commit(id, 1, { ...empty(), writes: { ...empty().writes, map: { rollbackReport: { map: 'm.map', position, outcome: 'failed', failures: [failure] } } } });
      }
    };
    /** Every map key `m.map` has after {@link busyMapWrites}. */
    const mapKeysOf = (prefix: string) => {
      const mk = createKeyBuilder(prefix).mapKeys('m.map');
      return [mk.stats, mk.source, mk.started, mk.aborted, mk.rollbackFailures, mk.outcomes(0), mk.outcomes(1), mk.rollbackOutcomes(0), mk.rollbackOutcomes(1)];
    };

    it('every key of a map, its elements and rollback actors is under the root\'s hash tag, in one slot', async () => {
      const { redis, store, prefix } = await fresh(createTestClock(1_000_000));
      await spawnMap(store);
      await busyMapWrites(store);
      // Every key but the global active index (which lists the spawned map).
      const keys = (await allKeys(redis, prefix)).filter((k) => k.key !== createKeyBuilder(prefix).active);
      expect(keys.map((k) => k.key)).toEqual(expect.arrayContaining(mapKeysOf(prefix)));
      for (const { key } of keys) expect(key.startsWith(`${prefix}:{m}:`), key).toBe(true);
      expect(new Set(keys.map((k) => k.node)).size).toBe(1);
    });

    it('map keys get the map\'s retention when created, and are re-stamped, buckets included, with the map and with its owner, never by an element', async () => {
      const clock = createTestClock(1_000_000);
      const { redis, store, prefix } = await fresh(clock);
      const mapKeys = mapKeysOf(prefix);
      const [stats, source] = mapKeys as [string, string];
      await spawnMap(store);
      for (const key of [stats, source]) {
        const ttl = await redis.pttl(key);
        expect(ttl, key).toBeGreaterThan(50_000);
        expect(ttl, key).toBeLessThanOrEqual(TTL_MS);
      }
      // Keys created later by other actors get what the map has left, not a fresh retention.
      await redis.pexpire(stats, 20_000);
      await busyMapWrites(store);
      for (const key of mapKeys.slice(2)) {
        const ttl = await redis.pttl(key);
        expect(ttl, key).toBeGreaterThan(0);
        expect(ttl, key).toBeLessThanOrEqual(20_000);
      }
      // An element's re-stamp does not reach the map (it is detached).
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('m.map.0', 2, empty());
      expect(await redis.pttl(stats)).toBeLessThanOrEqual(20_000);
      // The map's re-stamp reaches every map key; the owner's too.
      await store.commit('m.map', (await store.load('m.map'))!.revision, empty());
      for (const key of mapKeys) expect(await redis.pttl(key), key).toBeGreaterThan(50_000);
      for (const key of mapKeys) await redis.pexpire(key, 20_000);
      clock.advance(retentionRefreshMs(TTL_MS));
      await store.commit('m', 2, empty());
      for (const key of mapKeys) expect(await redis.pttl(key), key).toBeGreaterThan(50_000);
    });

    it('a commit whose caller knows when the keys were last stamped (stampedAt: a carried creation) re-stamps only once the window has passed since then', async () => {
      const clock = createTestClock(1_000_000);
      const { redis, store, prefix } = await fresh(clock);
      const key = createKeyBuilder(prefix).executionKeys('st').execution;
      await store.create({ id: 'st', reactor: 'r', input: {}, commit: full() });
      const window = retentionRefreshMs(TTL_MS);
      clock.advance(window);
      await redis.pexpire(key, 20_000);
      // Due by this process's own record, but stamped (elsewhere) just now: not re-stamped.
      await store.commit('st', 1, empty(), { stampedAt: clock.now() });
      expect(await redis.pttl(key)).toBeLessThanOrEqual(20_000);
      // A window after that stamp it is.
      clock.advance(window);
      await store.commit('st', 2, empty(), { stampedAt: clock.now() - window });
      expect(await redis.pttl(key)).toBeGreaterThan(50_000);
    });

    it('a detached spawn gets the retention on every key it creates, and the parent keeps no children set for it', async () => {
      const clock = createTestClock(1_000_000);
      const { redis, store, prefix } = await fresh(clock);
      const kb = createKeyBuilder(prefix);
      await store.create({ id: 'own', reactor: 'r', input: {}, commit: empty() });
      await store.commit('own', 1, { ...empty(), spawn: [{ id: 'own.0', reactor: 'e', input: {}, commit: full(), retainWithParent: false }] });
      const k = kb.executionKeys('own.0');
      for (const key of [k.execution, k.results, k.undo, k.trace]) {
        const ttl = await redis.pttl(key);
        expect(ttl, key).toBeGreaterThan(50_000);
        expect(ttl, key).toBeLessThanOrEqual(TTL_MS);
      }
      expect(await redis.exists(kb.executionKeys('own').children)).toBe(0);
    });
  });
}
