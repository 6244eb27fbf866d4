import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobId, bundleSizes } from '../../src/queue/bullmq-bundles.js';
import { encodeJobId } from '../../src/queue/bullmq-queue.js';
import { diagnoseMap, startMapEnv } from '../support/map-env.js';
import type { MapEnv } from '../support/map-env.js';
import type { WorkerProcess } from '../support/worker-process.js';

// `xreactor worker --no-eager-bundle` (docs/design/map.md §9.3, "Eager first bundle"), read from
// BullMQ's own state: a fan-out map run by one real CLI worker process, its throws' start jobs
// carried in bundles of --bundle-size parts. With the flag, every bundle goes through BullMQ and
// is completed by the worker; without it, the worker runs the first bundle of each throw itself,
// that bundle's job added delayed and then removed, never completed.
//
// Every throw is sent by the worker: the run is a background root (fixtures/map-reactors.ts:
// map-orch-background → map-orch-child, whose map m fans out in throws of 4), which the caller
// (a runtime with `worker: false`, consuming nothing) hands to the worker at once, and each
// further throw is sent by the job of the element that settled the previous throw's last
// position. The eager path takes a bundle when the sender's consumer has free permits for half
// of it (1 of 2): with a concurrency above the run's actors (10 elements, map, child, root), it
// always has, so without the flag exactly the first bundle of every throw is eager.

/** Elements of the child's map: throws of 4, 4 and 2. */
const ELEMENTS = 10;
const BUNDLE_SIZE = 2;
/** Jobs the worker handles at once: more than the run's actors, so every throw finds free permits. */
const CONCURRENCY = 16;
/** After map-env's FAST_RECOVERY flags, which these override (the last value of a flag wins). */
const WORKER_ARGS = [
  '--concurrency', String(CONCURRENCY),
  '--bundle-size', String(BUNDLE_SIZE),
  // An eager bundle's job waits delayed by the lock duration (map-env's 1 s, renewed every 500 ms
  // while its parts run): 30 s, so a stalled event loop cannot let it be delivered to the worker.
  '--lock-duration-ms', '30000',
  // No sweeper: its re-dispatch of map positions would send bundles of its own.
  '--sweep-interval-ms', '0',
];

let env: MapEnv;

beforeAll(async () => {
  env = await startMapEnv();
}, 60_000);

afterAll(async () => {
  await env?.close();
});

/** One bundle of a throw: its BullMQ job id and the element indexes it carries. */
interface ExpectedBundle {
  readonly throw: number;
  /** Whether it is its throw's first bundle: the one the sender runs itself when eager. */
  readonly first: boolean;
  readonly elements: readonly number[];
  readonly id: string;
}

/** The bundles the map's throws are cut into: throws of `batchSize` positions, each cut by bundleSizes(). */
function bundlesOf(mapId: string, total: number, batchSize: number, bundleSize: number): ExpectedBundle[] {
  const bundles: ExpectedBundle[] = [];
  for (let from = 0, t = 0; from < total; from += batchSize, t += 1) {
    let next = from;
    for (const parts of bundleSizes(Math.min(batchSize, total - from), bundleSize)) {
      const elements = Array.from({ length: parts }, (_, k) => next + k);
      bundles.push({ throw: t, first: next === from, elements, id: bundleJobId(elements.map((i) => encodeJobId(`${mapId}.${i}.start`))) });
      next += parts;
    }
  }
  return bundles;
}

/** What BullMQ says of a bundle: its state now (`unknown` once removed) and the events its stream holds for it. */
interface BundleHistory {
  readonly throw: number;
  readonly elements: readonly number[];
  readonly state: string;
  /** Of the events that tell the two paths apart, those BullMQ recorded for the job, in order. */
  readonly events: readonly string[];
}

/** BullMQ's events that tell a bundle delivered by BullMQ from one run eagerly: added delayed, completed, removed. */
const TELLING_EVENTS = new Set(['delayed', 'completed', 'removed']);

async function historyOf(bundles: readonly ExpectedBundle[]): Promise<BundleHistory[]> {
  const stream = await env.redis.xrange(`bull:${env.queueName}:events`, '-', '+');
  const eventsOf = new Map<string, string[]>();
  for (const [, fields] of stream) {
    const field = (name: string) => fields[fields.indexOf(name) + 1];
    const [event, jobId] = [field('event'), field('jobId')];
    if (event === undefined || jobId === undefined || !TELLING_EVENTS.has(event)) continue;
    eventsOf.set(jobId, [...(eventsOf.get(jobId) ?? []), event]);
  }
  return Promise.all(
    bundles.map(async (b) => ({ throw: b.throw, elements: b.elements, state: await env.queue.bullQueue.getJobState(b.id), events: eventsOf.get(b.id) ?? [] })),
  );
}

/** The bundle jobs of this run BullMQ holds, by state (all of them: a bundle is named `bundle`, its id carries its first part's). */
async function bundleJobsOf(mapId: string): Promise<Record<string, string[]>> {
  const states = ['completed', 'waiting', 'active', 'delayed', 'failed', 'prioritized', 'waiting-children'] as const;
  const byState: Record<string, string[]> = {};
  for (const state of states) {
    const jobs = await env.queue.bullQueue.getJobs([state], 0, -1);
    const ids = jobs.filter((j) => j.name === 'bundle' && String(j.id).includes(encodeJobId(`${mapId}.`))).map((j) => String(j.id));
    if (ids.length > 0) byState[state] = ids.sort();
  }
  return byState;
}

async function stopWorker(worker: WorkerProcess): Promise<void> {
  worker.child.kill('SIGTERM');
  const code = await worker.exited;
  expect(code, worker.output()).toBe(0);
}

/**
 * Runs the background root with the worker started with `args`, and returns, once every bundle of
 * its map reached its end in BullMQ (completed, or removed after its eager run), their histories.
 */
async function runMap(label: string, args: readonly string[]): Promise<{ mapId: string; bundles: ExpectedBundle[]; history: BundleHistory[] }> {
  const worker = await env.spawnWorker([...WORKER_ARGS, ...args]);
  try {
    const id = `${label}-${randomUUID().slice(0, 8)}`;
    const mapId = `${id}.child.m`;
    const started = await env.runtime.run(env.fixtures.mapBackground, { n: ELEMENTS }, { executionId: id });
    expect(started.status).toBe('dispatched');
    const result = await env.runtime.awaitResult(id, { timeoutMs: 30_000 }).catch(async (error: unknown) => {
      throw new Error(`${id} did not settle (${(error as Error).message})\n${await diagnoseMap(env, mapId)}\n${worker.output().slice(-3_000)}`, { cause: error });
    });
    expect(result.status, worker.output().slice(-3_000)).toBe('completed');
    const [map] = (await env.runtime.find(`${id}.child`)).maps;
    expect(map).toMatchObject({ id: mapId, mode: 'fanOut', batchSize: 4, total: ELEMENTS, dispatched: ELEMENTS, settled: ELEMENTS });
    const bundles = bundlesOf(mapId, ELEMENTS, map!.batchSize, BUNDLE_SIZE);
    // The root settles inside the job of the element that settled last: that element's bundle
    // completes (or, run eagerly, is removed) just after. Polled until none is left in between.
    let history: BundleHistory[] = [];
    for (const deadline = Date.now() + 10_000; ; ) {
      history = await historyOf(bundles);
      if (history.every((h) => h.state === 'completed' || h.state === 'unknown')) break;
      if (Date.now() > deadline) throw new Error(`bundles of ${mapId} still in progress: ${JSON.stringify(history)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // Every element ran once.
    const runs = (await env.effects(id)).map((e) => e.label).filter((l) => l.startsWith('run:child.m.'));
    expect(runs.sort()).toEqual(Array.from({ length: ELEMENTS }, (_, i) => `run:child.m.${i}/e#1`).sort());
    return { mapId, bundles, history };
  } finally {
    await stopWorker(worker);
  }
}

describe('xreactor worker --no-eager-bundle', () => {
  it('with the flag, every bundle of every throw goes through BullMQ and is completed by the worker: none added delayed, none removed', async () => {
    const { mapId, bundles, history } = await runMap('lazy', ['--no-eager-bundle']);
    // Throws of 4, 4 and 2 elements in bundles of 2: 2 + 2 + 1.
    expect(bundles.map((b) => b.elements)).toEqual([[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]);
    expect(history).toEqual(bundles.map((b) => ({ throw: b.throw, elements: b.elements, state: 'completed', events: ['completed'] })));
    expect(await bundleJobsOf(mapId)).toEqual({ completed: bundles.map((b) => b.id).sort() });
  });

  it('without the flag, the first bundle of each throw is run by the worker itself: added delayed, then removed, not completed; the others are completed', async () => {
    const { mapId, bundles, history } = await runMap('eager', []);
    expect(bundles.filter((b) => b.first).map((b) => b.elements)).toEqual([[0, 1], [4, 5], [8, 9]]);
    expect(history).toEqual(
      bundles.map((b) => ({
        throw: b.throw,
        elements: b.elements,
        ...(b.first ? { state: 'unknown', events: ['delayed', 'removed'] } : { state: 'completed', events: ['completed'] }),
      })),
    );
    // 5 bundles, one eager per throw: 2 completed, 3 fewer than with --no-eager-bundle.
    expect(await bundleJobsOf(mapId)).toEqual({ completed: bundles.filter((b) => !b.first).map((b) => b.id).sort() });
  });
});
