import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, ExecutionNotFoundError } from '../../src/index.js';
import type { CancelledResult, MapProgress, Runtime, RunResult } from '../../src/index.js';
import { diagnoseMap, startMapEnv } from '../support/map-env.js';
import type { CountingReport, CountingWorker, Effect, MapEnv } from '../support/map-env.js';
import type { WorkerProcess } from '../support/worker-process.js';
import type { MapInput } from './fixtures/map-reactors.js';

// Fan-out maps across real processes (docs/design/map.md §9.3, §10, §12.3, §17 step 12), on a
// real Redis and BullMQ, fixtures in ./fixtures/map-reactors.ts:
//
// 1. 10,000 elements (and 1,000) fanned out forward and rolled back (the owner's step after the
//    map fails) by 4 counting worker processes (./fixtures/map-worker.ts: `xreactor worker`'s
//    setup with the store's loads counted per job): no job addressed to an actor loads the state
//    of more than one element; every element runs once and is undone once; the workers' maxRSS
//    for N = 1,000 and N = 10,000 is printed and the difference bounded.
// 2. A fan-out map inside a composed child of a background run: 100 runs on 4 `xreactor worker`
//    processes, every root settling as its inline reference run does.
// 3. Chaos: `xreactor worker` processes SIGKILLed at seeded random moments while a map runs
//    forward and while it rolls back (4 kills a round, replacements started): every completed
//    element undone (the effects ledger in Redis), a body run twice only when the process that
//    ran it first was killed, and the run's outcome equal to the inline reference run (the same
//    definitions on `createRuntime()`, embedded).

/** The chaos seed: MAP_CHAOS_SEED=<n> replays a run. */
const SEED = Number(process.env['MAP_CHAOS_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
/** Jobs each worker process handles at once. */
const CONCURRENCY = 4;
const WORKERS = 4;

let env: MapEnv;
/** The reference: the same definitions run by the embedded runtime (memory store, in-process queue). */
let reference: Runtime;

beforeAll(async () => {
  env = await startMapEnv();
  reference = createRuntime();
}, 60_000);

afterAll(async () => {
  await reference?.close();
  await env?.close();
});

// ---------------------------------------------------------------------------------------------
// Runs, their ends and their effects.

type Ended = RunResult<unknown> | CancelledResult;

/** What must be equal between a run across processes and its inline reference. */
interface Summary {
  readonly status: string;
  readonly step?: string | undefined;
  readonly message?: string;
  readonly rollbackFailures?: readonly unknown[];
  /** The stored status of the root and of its composed child (`missing` when it has none). */
  readonly actors: readonly string[];
}

async function statusOf(runtime: Runtime, id: string): Promise<string> {
  try {
    return (await runtime.find(id)).status;
  } catch (error) {
    if (error instanceof ExecutionNotFoundError) return 'missing';
    throw error;
  }
}

async function summarize(runtime: Runtime, id: string, result: Ended): Promise<Summary> {
  const actors = await Promise.all([id, `${id}.child`].map((a) => statusOf(runtime, a)));
  if (result.status !== 'failed') return { status: result.status, actors };
  return {
    status: result.status,
    step: result.step,
    message: result.message,
    rollbackFailures: result.rollbackFailures.map((f) => ({ step: f.step, kind: f.kind, path: f.path, reason: f.reason, message: f.message })),
    actors,
  };
}

/** The map's progress without its actor id (which names the root). */
const progressOf = (maps: readonly MapProgress[]) => maps.map(({ id: _id, ...rest }) => rest);

/** Wait for a run's end; on a timeout, the error says where the map stands. */
async function awaitEnd(id: string, mapId: string, timeoutMs: number, why: string): Promise<Ended> {
  try {
    const result = await env.runtime.awaitResult(id, { timeoutMs });
    if (result.status === 'paused') throw new Error(`${id} paused`);
    return result;
  } catch (error) {
    throw new Error(`${why}: ${id} did not settle (${(error as Error).message})\n${await diagnoseMap(env, mapId)}`, { cause: error });
  }
}

/** The inline reference run of the same reactor and input. */
async function runReference(reactor: 'mapOwner' | 'mapBackground', input: MapInput): Promise<{ id: string; summary: Summary; maps: ReturnType<typeof progressOf>; childMaps: ReturnType<typeof progressOf>; effects: Effect[] }> {
  const id = `ref-${randomUUID()}`;
  const run = await reference.run(env.fixtures[reactor], input, { executionId: id });
  const result = run.status === 'dispatched' ? await reference.awaitResult(id, { timeoutMs: 60_000 }) : run;
  if (result.status === 'paused') throw new Error(`reference ${id} paused`);
  const childMaps = reactor === 'mapBackground' ? progressOf((await reference.find(`${id}.child`)).maps) : [];
  return { id, summary: await summarize(reference, id, result), maps: progressOf((await reference.find(id)).maps), childMaps, effects: await env.effects(id) };
}

/** A body's effect without its attempt: `run:m.17/e`. */
const bodyOf = (label: string) => label.slice(0, label.lastIndexOf('#'));

interface Ledger {
  /** Body → the processes that ran it, in order. */
  readonly runs: Map<string, number[]>;
  /** Body → the position of its first record. */
  readonly first: Map<string, number>;
  readonly last: Map<string, number>;
}

function ledgerOf(effects: readonly Effect[]): Ledger {
  const runs = new Map<string, number[]>();
  const first = new Map<string, number>();
  const last = new Map<string, number>();
  effects.forEach((e, k) => {
    const body = bodyOf(e.label);
    runs.set(body, [...(runs.get(body) ?? []), e.pid]);
    if (!first.has(body)) first.set(body, k);
    last.set(body, k);
  });
  return { runs, first, last };
}

/**
 * The effects ledger of a map run rolled back (`path` is the map's path below the root: `m` or
 * `child.m`): element `failAt` ran and compensated itself; every other element that ran was
 * undone, after its run; nothing that did not run was undone; a body ran more than once only when
 * every process that ran it before the last was killed (its commit was cut off). Returns the
 * indexes that completed (ran and did not fail).
 */
function expectRolledBack(ledger: Ledger, plan: { n: number; failAt: number; path: string }, killed: ReadonlySet<number>, why: string): number[] {
  const completed: number[] = [];
  for (const [body, pids] of ledger.runs) {
    const again = pids.slice(0, -1).filter((pid) => !killed.has(pid));
    expect(again, `${why}: ${body} ran ${pids.length} times (processes ${pids.join(', ')}); a body runs again only after the process running it was killed`).toEqual([]);
  }
  for (let i = 0; i < plan.n; i += 1) {
    const el = `${plan.path}.${i}/e`;
    const ran = ledger.runs.has(`run:${el}`);
    const undone = ledger.runs.has(`undo:${el}`);
    if (i === plan.failAt) {
      expect([ran, ledger.runs.has(`compensate:${el}`), undone], `${why}: element ${i} (failing) ran, compensated, not undone`).toEqual([true, true, false]);
      continue;
    }
    expect(ledger.runs.has(`compensate:${el}`), `${why}: element ${i} compensated`).toBe(false);
    expect(undone, `${why}: element ${i} ${ran ? 'completed and was not undone' : 'never ran but was undone'}`).toBe(ran);
    if (!ran) continue;
    completed.push(i);
    expect(ledger.last.get(`run:${el}`)!, `${why}: element ${i} undone before its (last) run`).toBeLessThan(ledger.first.get(`undo:${el}`)!);
  }
  return completed;
}

/**
 * `check`, and when it throws, the same error with the map's diagnosis appended, naming the
 * elements that ran and were not undone (their state, trace and rollback actors).
 */
async function withDiagnosis<T>(mapId: string, ledger: Ledger, n: number, check: () => T): Promise<T> {
  try {
    return check();
  } catch (error) {
    const path = mapId.split('.').slice(1).join('.');
    const leftInPlace = Array.from({ length: n }, (_, i) => i).filter((i) => ledger.runs.has(`run:${path}.${i}/e`) && !ledger.runs.has(`undo:${path}.${i}/e`) && !ledger.runs.has(`compensate:${path}.${i}/e`));
    if (error instanceof Error) error.message += `\n${await diagnoseMap(env, mapId, leftInPlace)}`;
    throw error;
  }
}

/** The bodies of the owners (not of elements), sorted: the same set as the reference's. */
const ownerBodies = (ledger: Ledger) => [...ledger.runs.keys()].filter((b) => !/(^|:|\.)m\.[0-9]+\//.test(b)).sort();

/** Bodies run more than once, by the process that ran the first one (which must have been killed). */
function rerunsByProcess(ledger: Ledger): Map<number, string[]> {
  const by = new Map<number, string[]>();
  for (const [body, pids] of ledger.runs) if (pids.length > 1) by.set(pids[0]!, [...(by.get(pids[0]!) ?? []), body]);
  return by;
}

/** mulberry32: a small seeded PRNG. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const mb = (kib: number) => `${(kib / 1024).toFixed(1)} MB`;

// ---------------------------------------------------------------------------------------------

describe('10,000 elements fanned out and rolled back by 4 worker processes', () => {
  /** Per N: what the counting workers reported at their exit. */
  const reports = new Map<number, CountingReport[]>();

  for (const n of [1_000, 10_000]) {
    it(`N = ${n.toLocaleString('en')}: every element runs and is undone once, and no job loads more than one element's state`, async () => {
      /** Jobs beyond one per element: the sweeper's re-enqueued jobs (`<actor>.sweep.<revision>.<window>`). */
      const slackOf = (count: number) => Math.ceil(count * 0.05) + 20;
      const workers: CountingWorker[] = await Promise.all(Array.from({ length: WORKERS }, () => env.spawnCountingWorker(['--concurrency', String(CONCURRENCY)])));
      const began = Date.now();
      const started = await env.runtime.run(env.fixtures.mapOwner, { n, failStep: 'b' });
      expect(started.status).toBe('dispatched');
      const id = started.executionId;
      const mapId = `${id}.m`;
      // When the forward part ended (every element settled; the rollback starts), polled.
      let forwardMs: number | undefined;
      let polling = true;
      const poller = (async () => {
        while (polling && forwardMs === undefined) {
          const stats = await env.store.readMapStats(mapId);
          if (stats !== undefined && stats.settled === n) forwardMs = Date.now() - began;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      const result = await awaitEnd(id, mapId, 180_000, `N = ${n}`).finally(() => (polling = false));
      const totalMs = Date.now() - began;
      await poller;
      const workerReports = await Promise.all(workers.map((w) => w.stop()));
      reports.set(n, workerReports);

      expect(result).toMatchObject({ status: 'failed', step: 'b', message: 'b failed', rollbackFailures: [] });
      const view = await env.runtime.find(id);
      expect(progressOf(view.maps)).toEqual([
        {
          step: 'm',
          mode: 'fanOut',
          batchSize: env.fixtures.MAP_BATCH_SIZE,
          atomic: true,
          total: n,
          dispatched: n,
          started: n,
          settled: n,
          outcomes: { completed: n, failed: 0, halted: 0, aborted: 0, skipped: 0, cancelled: 0 },
          rollback: { total: n, settled: n, undone: n, failed: 0, notNeeded: 0, inFlight: 0, unavailable: 0 },
        },
      ]);

      // The ledger: each element ran once and was undone once (no process died); the owner's
      // bodies in order around them.
      const effects = await env.effects(id);
      expect(effects).toHaveLength(2 * n + 4);
      const ledger = ledgerOf(effects);
      for (const [body, pids] of ledger.runs) expect(pids, body).toHaveLength(1);
      expect(expectRolledBack(ledger, { n, failAt: -1, path: 'm' }, new Set(), `N = ${n}`)).toHaveLength(n);
      const at = (body: string) => ledger.first.get(body)!;
      const elementRuns = [...ledger.runs.keys()].filter((b) => b.startsWith('run:m.')).map(at);
      const elementUndos = [...ledger.runs.keys()].filter((b) => b.startsWith('undo:m.')).map(at);
      expect(at('run:/a')).toBe(0);
      expect(Math.max(...elementRuns)).toBeLessThan(at('run:/b'));
      expect(at('compensate:/b')).toBeLessThan(Math.min(...elementUndos));
      expect(at('undo:/a')).toBe(effects.length - 1);
      // Elements ran in every worker process.
      expect(new Set(effects.filter((e) => e.label.startsWith('run:m.')).map((e) => e.pid))).toEqual(new Set(workers.map((w) => w.pid)));

      // Loads per job. Sweep jobs (the scheduled sweeper, which looks at every listed actor) are
      // reported, not bounded; every job addressed to an actor loads at most one element's state.
      const purposes = new Map<string, { jobs: number; idle: number; maxElements: number; maxElementLoads: number; offenders: string[]; shapes: Record<string, number> }>();
      const wakes: Record<string, number> = {};
      for (const report of workerReports) {
        for (const [key, count] of Object.entries(report.wakesEnqueued)) wakes[key] = (wakes[key] ?? 0) + count;
        for (const [purpose, s] of Object.entries(report.purposes)) {
          const p = purposes.get(purpose) ?? { jobs: 0, idle: 0, maxElements: 0, maxElementLoads: 0, offenders: [], shapes: {} };
          purposes.set(purpose, p);
          p.jobs += s.jobs;
          p.idle += s.jobsWithoutOwnCommit;
          for (const [shape, count] of Object.entries(s.shapes)) p.shapes[shape] = (p.shapes[shape] ?? 0) + count;
          p.maxElements = Math.max(p.maxElements, s.maxElementsPerJob);
          p.maxElementLoads = Math.max(p.maxElementLoads, s.maxElementLoadsPerJob);
          p.offenders.push(...s.offenders.map((o) => `${o.job} loaded ${o.elements.join(', ')}`));
        }
      }
      console.log(
        `[map scale] N = ${n}: forward ${forwardMs} ms, rollback ${forwardMs === undefined ? '?' : totalMs - forwardMs} ms, settled ${totalMs} ms after run(); jobs by purpose: ` +
          [...purposes]
            .map(([purpose, p]) => `${purpose} ${p.jobs} ${JSON.stringify(p.shapes)} (${p.idle} committing nothing for their actor; at most ${p.maxElements} element(s), ${p.maxElementLoads} element load(s) per job)`)
            .join('; ') +
          `; wake jobs enqueued: ${JSON.stringify(wakes)}`,
      );
      console.log(`[map scale] N = ${n}: maxRSS ${workerReports.map((r) => mb(r.maxRssKiB)).join(', ')}; live heap peak ${workerReports.map((r) => mb(r.liveHeapPeakKiB)).join(', ')}`);
      for (const [purpose, p] of purposes) {
        if (purpose === 'sweep') continue;
        expect(p.offenders, `${purpose} jobs that loaded more than one element`).toEqual([]);
        expect(p.maxElements, purpose).toBeLessThanOrEqual(1);
      }
      // An element's start job carries the element's creation (its first commit takes the lease
      // fenced by those bytes, reading nothing); one that cannot (enqueued again after a crash, by
      // the sweeper) reads its one element. Each element-rollback job reads its one element (a
      // sweep's job for a rollback actor that reported meanwhile reads none).
      const elementJobs = workerReports.reduce((sum, r) => sum + (r.purposes['map-element']?.jobs ?? 0), 0);
      const elementJobsLoading = workerReports.reduce((sum, r) => sum + (r.purposes['map-element']?.jobsLoadingElements ?? 0), 0);
      expect(elementJobs).toBeGreaterThanOrEqual(n);
      expect(elementJobsLoading).toBeLessThanOrEqual(elementJobs - n + slackOf(n));
      const rollbackJobs = workerReports.reduce((sum, r) => sum + (r.purposes['element-rollback']?.jobs ?? 0), 0);
      const rollbackJobsLoading = workerReports.reduce((sum, r) => sum + (r.purposes['element-rollback']?.jobsLoadingElements ?? 0), 0);
      expect(rollbackJobsLoading).toBeGreaterThanOrEqual(n);
      expect(rollbackJobsLoading).toBeLessThanOrEqual(rollbackJobs);
      expect(workerReports.every((r) => r.loadsOutsideJobs === 0)).toBe(true);
      // Jobs per element (design D3, D5, §9.3, §12.3): one start job per element, one job per
      // rollback actor (it advances its element's undo in its own call), and the map advanced in
      // the job of the element (or rollback actor) that completed a throw, so a map job only when
      // the map's lease was busy: fewer than one per throw. The slack covers the sweeper's
      // re-enqueued jobs (`<actor>.sweep.<revision>.<window>`). (On e30c453 a rollback took two
      // element-rollback jobs per element and ~0.5 map job per element: a woken element re-performed
      // its settle's wake of its rollback actor, whose lease its own job still held; main's 4f24a0a
      // notes wakes before the effects that advance their recipient.)
      const jobsOf = (purpose: string) => purposes.get(purpose)?.jobs ?? 0;
      const slack = slackOf(n);
      expect(jobsOf('map-element'), 'map-element jobs').toBeLessThanOrEqual(n + slack);
      expect(jobsOf('element-rollback'), 'element-rollback jobs').toBeGreaterThanOrEqual(n);
      expect(jobsOf('element-rollback'), 'element-rollback jobs').toBeLessThanOrEqual(n + slack);
      expect(jobsOf('map-settle'), 'map-settle jobs').toBeLessThanOrEqual(n / env.fixtures.MAP_BATCH_SIZE + 20);
    }, 240_000);
  }

  // The bound. Per worker, the 10,000-element run handles about 2,500 more elements and 2,500
  // more rollback actors than the 1,000-element run (≈ 5,000 jobs more each): 60 MB is 12 KB per
  // extra job, less than one retained actor (an XState actor with its snapshot and host state) or
  // one retained BullMQ job object with its payload each, so any per-element retention of that
  // kind fails it; design §12.3 says nothing in a worker scales with N. The workers collect
  // garbage every 2 s (--expose-gc, fixtures/map-worker.ts) so that maxRSS measures what they keep
  // alive plus at most 2 s of garbage, not how lazily V8 grows its old space in a longer run
  // (without it, maxRSS grows by 40-55 MB from N = 1,000 to 10,000 with live data unchanged).
  // The live heap (peak after a full collection) is bounded too: 16 MB is 3 KB per extra job.
  it('the workers\' maxRSS grows by less than 60 MB from N = 1,000 to N = 10,000 (live heap: less than 16 MB)', () => {
    const small = reports.get(1_000);
    const large = reports.get(10_000);
    expect(small !== undefined && large !== undefined, 'both runs reported').toBe(true);
    const max = (rs: readonly CountingReport[], of: (r: CountingReport) => number) => Math.max(...rs.map(of));
    const rss = [max(small!, (r) => r.maxRssKiB), max(large!, (r) => r.maxRssKiB)] as const;
    const live = [max(small!, (r) => r.liveHeapPeakKiB), max(large!, (r) => r.liveHeapPeakKiB)] as const;
    console.log(`[map scale] maxRSS (largest of ${WORKERS} workers): N = 1,000 ${mb(rss[0])}, N = 10,000 ${mb(rss[1])}, difference ${mb(rss[1] - rss[0])}; live heap peak ${mb(live[0])} → ${mb(live[1])}`);
    expect(rss[1] - rss[0]).toBeLessThan(60 * 1024);
    expect(live[1] - live[0]).toBeLessThan(16 * 1024);
  });
});

// ---------------------------------------------------------------------------------------------

/** Keep `WORKERS` `xreactor worker` processes (no counting) alive. */
async function ensureWorkers(): Promise<void> {
  const missing = WORKERS - env.workers.size;
  await Promise.all(Array.from({ length: Math.max(0, missing) }, () => env.spawnWorker(['--concurrency', String(CONCURRENCY)])));
}

describe('a fan-out map inside a composed child of a background run', () => {
  const RUNS = 100;

  beforeAll(async () => {
    await ensureWorkers();
  }, 60_000);

  it(`${RUNS} runs: every root settles with its inline reference outcome, every completed element undone when it failed (seed ${SEED})`, async () => {
    const random = prng(SEED ^ 0x5bd1e995);
    type Kind = 'ok' | 'element' | 'c2' | 'r2';
    const plans = Array.from({ length: RUNS }, (): { kind: Kind; input: { n: number; failAt: number; failStep: 'none' | 'c2' | 'r2' } } => {
      const n = Math.floor(random() * 13);
      const kind = (['ok', 'element', 'c2', 'r2'] as const)[Math.floor(random() * 4)]!;
      const failAt = kind === 'element' && n > 0 ? Math.floor(random() * n) : -1;
      return { kind: kind === 'element' && n === 0 ? 'ok' : kind, input: { n, failAt, failStep: kind === 'c2' || kind === 'r2' ? kind : 'none' } };
    });
    const began = Date.now();
    const references = Promise.all(plans.map((p) => runReference('mapBackground', p.input)));
    const ids = await Promise.all(
      plans.map(async (p) => {
        const started = await env.runtime.run(env.fixtures.mapBackground, p.input);
        expect(started.status).toBe('dispatched');
        return started.executionId;
      }),
    );
    const ended = await Promise.all(ids.map((id, k) => awaitEnd(id, `${id}.child.m`, 120_000, `run ${k} ${JSON.stringify(plans[k])}`)));
    const settledMs = Date.now() - began;
    const refs = await references;
    const expected = { ok: ['completed', undefined], element: ['failed', 'child'], c2: ['failed', 'child'], r2: ['failed', 'r2'] } as const;
    for (const [k, id] of ids.entries()) {
      const plan = plans[k]!;
      const why = `run ${k} ${id} ${JSON.stringify(plan)}`;
      const summary = await summarize(env.runtime, id, ended[k]!);
      expect([summary.status, summary.step], why).toEqual(expected[plan.kind]);
      expect(summary, why).toEqual(refs[k]!.summary);
      const maps = progressOf((await env.runtime.find(`${id}.child`)).maps);
      const ledger = ledgerOf(await env.effects(id));
      for (const [body, pids] of ledger.runs) expect(pids, `${why}: ${body}`).toHaveLength(1);
      expect(ownerBodies(ledger), why).toEqual(ownerBodies(ledgerOf(refs[k]!.effects)));
      if (plan.kind === 'ok') {
        expect([...ledger.runs.keys()].filter((b) => !b.startsWith('run:')), why).toEqual([]);
        expect(maps, why).toEqual(refs[k]!.childMaps);
        continue;
      }
      const completed = expectRolledBack(ledger, { n: plan.input.n, failAt: plan.input.failAt, path: 'child.m' }, new Set(), why);
      expect(ledger.runs.has('undo:/r1') && ledger.runs.has('undo:child/c1'), `${why}: r1 and c1 undone`).toBe(true);
      if (plan.kind === 'element') {
        // Which elements started before the failure closed the gate depends on the delivery order.
        const [map] = maps;
        expect(map?.outcomes.completed, why).toBe(completed.length);
        expect(map?.rollback, why).toEqual({ total: map!.started, settled: map!.started, undone: completed.length, failed: 0, notNeeded: 1, inFlight: 0, unavailable: 0 });
      } else {
        expect(maps, why).toEqual(refs[k]!.childMaps);
        expect(completed, why).toHaveLength(plan.input.n);
      }
    }
    const counts = Object.fromEntries((['ok', 'element', 'c2', 'r2'] as const).map((kind) => [kind, plans.filter((p) => p.kind === kind).length]));
    console.log(`[map compose] ${RUNS} background runs (${JSON.stringify(counts)}, ${plans.reduce((s, p) => s + p.input.n, 0)} elements) settled in ${settledMs} ms`);
  }, 180_000);
});

// ---------------------------------------------------------------------------------------------

describe('chaos: worker processes SIGKILLed while a fan-out map runs forward and rolls back', () => {
  const ROUNDS = 5;
  const KILLS_PER_PHASE = 2;

  beforeAll(async () => {
    await ensureWorkers();
  }, 60_000);

  it(`every completed element is undone and the outcome is the inline run's (${ROUNDS} rounds, ${2 * KILLS_PER_PHASE} kills each; seed ${SEED}, MAP_CHAOS_SEED=${SEED} replays)`, async () => {
    const random = prng(SEED);
    const killed = new Set<number>();
    const kills: { round: number; phase: 'forward' | 'rollback'; at: string; pid: number }[] = [];
    const replacements: Promise<unknown>[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const began = Date.now();
      const n = 300 + Math.floor(random() * 300);
      const variant = random() < 0.5 ? 'owner' : 'last';
      const input: MapInput = variant === 'owner' ? { n, failStep: 'b' } : { n, failAt: n - 1 };
      // Kill moments: fractions of the phase's progress (elements settled, rollback actors reported).
      const moments = (['forward', 'rollback'] as const).flatMap((phase) =>
        Array.from({ length: KILLS_PER_PHASE }, () => 0.05 + random() * 0.6)
          .sort((a, b) => a - b)
          .map((fraction) => ({ phase, fraction, victim: random() })),
      );
      const why = `seed ${SEED} round ${round}: ${JSON.stringify({ input, moments })}`;
      console.log(`[map chaos] ${why}`);
      const referenceRun = runReference('mapOwner', input);
      referenceRun.catch(() => undefined);
      const started = await env.runtime.run(env.fixtures.mapOwner, input);
      expect(started.status, why).toBe('dispatched');
      const id = started.executionId;
      const mapId = `${id}.m`;

      for (const moment of moments) {
        // Wait for the moment (polled), then kill one of the live workers (at least two alive:
        // the run must go on while the replacements start).
        let progress: number;
        const deadline = Date.now() + 90_000;
        for (;;) {
          const stats = await env.store.readMapStats(mapId);
          progress = moment.phase === 'forward' ? (stats?.settled ?? 0) / n : stats?.rollback.target ? stats.rollback.settled / stats.rollback.target : 0;
          const alive = [...env.workers].filter((w) => w.child.exitCode === null && w.child.signalCode === null);
          if (progress >= moment.fraction && alive.length >= 2) break;
          if (Date.now() > deadline) throw new Error(`${why}: the map never reached ${moment.phase} ${moment.fraction} (at ${progress}, ${alive.length} workers)\n${await diagnoseMap(env, mapId)}`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const alive = [...env.workers].filter((w) => w.child.exitCode === null && w.child.signalCode === null).sort((a, b) => a.pid - b.pid);
        const victim: WorkerProcess = alive[Math.floor(moment.victim * alive.length)]!;
        victim.child.kill('SIGKILL');
        await victim.exited;
        killed.add(victim.pid);
        kills.push({ round, phase: moment.phase, at: progress.toFixed(3), pid: victim.pid });
        const replacement = env.spawnWorker(['--concurrency', String(CONCURRENCY)]);
        replacement.catch(() => undefined);
        replacements.push(replacement);
        // The kill landed while the phase was still running.
        expect(progress, `${why}: killed ${victim.pid} after the ${moment.phase} ended`).toBeLessThan(1);
      }

      const result = await awaitEnd(id, mapId, 120_000, why);
      const ref = await referenceRun;
      const summary = await summarize(env.runtime, id, result);
      expect(summary, why).toEqual(ref.summary);
      expect(summary, why).toMatchObject(variant === 'owner' ? { status: 'failed', step: 'b', message: 'b failed' } : { status: 'failed', step: 'm', message: `element ${n - 1} failed` });

      // The reference's own ledger: everything once, nothing left in place.
      const refLedger = ledgerOf(ref.effects);
      for (const [body, pids] of refLedger.runs) expect(pids, `${why}: reference ${body}`).toHaveLength(1);
      expectRolledBack(refLedger, { n, failAt: variant === 'last' ? n - 1 : -1, path: 'm' }, new Set(), `${why} (reference)`);

      const ledger = ledgerOf(await env.effects(id));
      const completed = await withDiagnosis(mapId, ledger, n, () => expectRolledBack(ledger, { n, failAt: variant === 'last' ? n - 1 : -1, path: 'm' }, killed, why));
      expect(ownerBodies(ledger), why).toEqual(ownerBodies(refLedger));
      for (const body of ['run:/a', 'undo:/a']) expect(ledger.runs.get(body), `${why}: ${body}`).toHaveLength(1);
      expect(ledger.last.get('undo:/a'), `${why}: undo:/a is the last effect`).toBe(Math.max(...ledger.last.values()));
      // At most one body cut off per job a killed process had in progress.
      const reruns = rerunsByProcess(ledger);
      for (const [pid, bodies] of reruns) expect(bodies.length, `${why}: process ${pid} had ${bodies.length} bodies cut off: ${bodies.join(' ')}`).toBeLessThanOrEqual(CONCURRENCY);

      const [map] = progressOf((await env.runtime.find(id)).maps);
      if (variant === 'owner') {
        expect(completed, why).toHaveLength(n);
        expect([map], why).toEqual(ref.maps);
      } else {
        expect(map?.outcomes.completed, why).toBe(completed.length);
        expect(map?.rollback, why).toEqual({ total: map!.started, settled: map!.started, undone: completed.length, failed: 0, notNeeded: 1, inFlight: 0, unavailable: 0 });
      }
      const cutOff = [...reruns.values()].flat();
      console.log(
        `[map chaos] round ${round}: n ${n} (${variant}), ${completed.length} completed and undone, killed ${kills.filter((k) => k.round === round).map((k) => `${k.pid} (${k.phase} ${k.at})`).join(', ')}; ` +
          `${cutOff.length} bodies cut off and run again${cutOff.length > 0 ? ` (${cutOff.slice(0, 6).join(' ')}${cutOff.length > 6 ? ' …' : ''})` : ''}; ${Date.now() - began} ms`,
      );
      // The next round starts with the full set of workers.
      await Promise.all(replacements.splice(0));
    }
    expect(kills.length).toBeGreaterThanOrEqual(20);
    expect(kills.filter((k) => k.phase === 'forward').length).toBe(ROUNDS * KILLS_PER_PHASE);
    expect(kills.filter((k) => k.phase === 'rollback').length).toBe(ROUNDS * KILLS_PER_PHASE);
    console.log(`[map chaos] seed ${SEED}: ${kills.length} workers killed (${kills.filter((k) => k.phase === 'forward').length} during forward, ${kills.filter((k) => k.phase === 'rollback').length} during rollback)`);
  }, 240_000);
});
