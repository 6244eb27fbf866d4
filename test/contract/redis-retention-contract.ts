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
