/**
 * The group commit against commits sent one by one: random turns of commits of one root's actors
 * (per-step writes, signals with colliding dedupe keys, spawns with colliding ids, stale
 * revisions, unseen inbox entries) are issued in one turn against a store that batches them
 * (`commitBatch-1n.lua`, forced into one call by a busy script ahead on its connection) and, in
 * the same order, one at a time against a store that does not (`groupCommit: false`). Each
 * commit's outcome and every actor's stored state must be the same.
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { Commit, Store } from '../../src/index.js';
import { createRedisStore } from '../../src/redis.js';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

const ACTORS = ['g', 'g.a', 'g.b', 'g.c'] as const;
const SPAWNED = ['g.n1', 'g.n2'] as const;

const base = (value: string, n: number): Commit => ({
  snapshot: { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value, context: { n } },
  status: 'running',
  writes: { results: [[`s${n}`, n]], pushUndo: [], truncateUndoTo: undefined, trace: [{ type: 'run', step: `s${n}`, at: n }] },
  outbox: [],
});

interface Planned {
  readonly actor: (typeof ACTORS)[number];
  readonly kind: 'plain' | 'signal' | 'spawn';
  readonly to: (typeof ACTORS)[number];
  readonly key: string;
  readonly spawn: (typeof SPAWNED)[number];
  readonly inboxSeen: number;
  readonly stale: boolean;
}

const planned: fc.Arbitrary<Planned> = fc.record({
  actor: fc.constantFrom(...ACTORS),
  kind: fc.constantFrom('plain' as const, 'signal' as const, 'spawn' as const),
  to: fc.constantFrom(...ACTORS),
  key: fc.constantFrom('k1', 'k2', 'k3'),
  spawn: fc.constantFrom(...SPAWNED),
  inboxSeen: fc.integer({ min: 0, max: 3 }),
  stale: fc.boolean(),
});

/** The commits of a plan, with the revision each expects (the count of earlier commits of its actor, one less when stale). */
function commitsOf(plan: readonly Planned[]): { id: string; revision: number; commit: Commit }[] {
  const issued = new Map<string, number>();
  return plan.map((p, i) => {
    const earlier = issued.get(p.actor) ?? 0;
    issued.set(p.actor, earlier + 1);
    const commit: Commit = {
      ...base(`v${i}`, i),
      inboxSeen: p.inboxSeen,
      ...(p.kind === 'signal' && p.to !== p.actor ? { signals: [{ to: p.to, event: { type: 't', i }, dedupeKey: p.key }] } : {}),
      ...(p.kind === 'spawn' ? { spawn: [{ id: p.spawn, reactor: 'r', input: { i }, commit: base('created', i) }] } : {}),
    };
    return { id: p.actor, revision: 1 + earlier - (p.stale ? 1 : 0), commit };
  });
}

const outcomeOf = (settled: PromiseSettledResult<number>) => (settled.status === 'fulfilled' ? { revision: settled.value } : { error: (settled.reason as Error).name });

/** What a store holds of every actor of the root. */
async function stateOf(store: Store): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const id of [...ACTORS, ...SPAWNED]) {
    const loaded = await store.load(id);
    if (loaded === undefined) {
      out[id] = null;
      continue;
    }
    out[id] = {
      revision: loaded.revision,
      value: loaded.snapshot.value,
      context: loaded.snapshot.context,
      inbox: { seq: loaded.inbox.seq, entries: loaded.inbox.entries.map((e) => ({ seq: e.seq, dedupeKey: e.dedupeKey, event: e.event })) },
      results: [...(await store.readResults(id))].sort(([a], [b]) => a.localeCompare(b)),
      trace: (await store.readTrace(id)).length,
    };
  }
  return out;
}

describe('redis store: group commit equals commits sent one by one', () => {
  it('random turns of kernel and per-step commits of one root: the same outcomes and the same stored state', async () => {
    const redis = new Redis(server.url);
    const other = new Redis(server.url);
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(planned, { minLength: 1, maxLength: 12 }), async (plan) => {
          run += 1;
          const batched = createRedisStore({ redis, prefix: `gb${run}` });
          const alone = createRedisStore({ redis: other, prefix: `ga${run}`, groupCommit: false });
          try {
            for (const store of [batched, alone]) for (const id of ACTORS) await store.create({ id, reactor: 'r', input: {}, commit: base('pending', -1) });
            await batched.create({ id: 'ahead', reactor: 'r', input: {}, commit: base('pending', -1) });
            const commits = commitsOf(plan);

            await redis.config('RESETSTAT');
            // A busy script ahead on the batching store's connection keeps its next commit in flight while the turn is issued.
            const busy = redis.eval('local i = 0 while i < 3000000 do i = i + 1 end return i', 0);
            const ahead = batched.commit('ahead', 1, base('ahead', 0));
            await new Promise((resolve) => setImmediate(resolve));
            const together = await Promise.allSettled(commits.map((c) => batched.commit(c.id, c.revision, c.commit)));
            await Promise.all([busy, ahead]);
            const stats = await redis.info('commandstats');
            const scriptCalls = [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
            // The busy script, the commit ahead, and the turn's commits in one call.
            expect(scriptCalls).toBe(3);

            const oneByOne: PromiseSettledResult<number>[] = [];
            for (const c of commits) {
              try {
                oneByOne.push({ status: 'fulfilled', value: await alone.commit(c.id, c.revision, c.commit) });
              } catch (error) {
                oneByOne.push({ status: 'rejected', reason: error });
              }
            }
            expect(together.map(outcomeOf)).toEqual(oneByOne.map(outcomeOf));
            expect(await stateOf(batched)).toEqual(await stateOf(alone));
          } finally {
            await Promise.all([batched.close(), alone.close()]);
          }
        }),
        { numRuns: 25 },
      );
    } finally {
      redis.disconnect();
      other.disconnect();
    }
  });
});
