/**
 * The floor under the fan-out map's forward target: the store I/O an element needs, done with no
 * runtime, beside the bare BullMQ flow and the real map, in the same interleaved rounds.
 *
 *   npx tsx bench/map-store-floor.ts      (builds the package, its own redis-server; about 3 minutes)
 *   BENCH_ROUNDS (5), BENCH_ELEMENTS (1,000), BENCH_WARMUP (3,000 of each kind), BENCH_CONCURRENCY (10),
 *   BENCH_WORKERS (1: worker processes of each kind)
 *
 * `BENCH_WORKERS` worker processes of each kind (default 1), at the same concurrency, each kind on
 * its own queue:
 * - **bare**: one `FlowProducer.add` of a parent with N children, as in `bench/map.ts`
 *   (`fixtures/bare-bullmq-worker.ts`, the processor returns 1);
 * - **throws**: the floor's bundle jobs in the same throws, doing nothing: what the map's bounded
 *   throws (R-02: the next throw goes out when the previous one has settled) cost on BullMQ alone;
 * - **floor**: the map's throws without the map. For each throw of 50 positions this process adds
 *   bundle jobs of the adapter's default size (`DEFAULT_BUNDLE_SIZE`, as the xreactor adapter
 *   bundles a throw) and waits for them; the worker (`fixtures/map-store-floor-worker.mjs`, the
 *   built package's Redis store, no runtime) makes each position's two commits through
 *   `Store.commit`: its creating start (gated `started` write, lease, listing) and its end (result,
 *   undo and trace entries, report, the conditional `mapSettled` signal, lease released, unlisted,
 *   announced), with snapshots of a real element's shape and size (`fixtures/map-store-floor.mjs`).
 *   What it leaves out, the runtime: machines, the actor host, the step, the map actor's own
 *   commits, wakes and reads;
 * - **forward**: the real map (`bench_map_forward` of `fixtures/map-reactors-plan.mjs`, an
 *   `xreactor worker` of the built package at `--log-level info`, as in `bench/map.ts`).
 * It prints each kind's median time and CPU per element (this process, the worker, redis-server)
 * against the bare flow's, and splits the forward's time per position into the throws, the store's
 * commits and the runtime. The floor is what the store part of the design costs with this store:
 * when it alone is above 1.5× the bare flow, the forward target is below it.
 */
import { FlowProducer, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { DEFAULT_BUNDLE_SIZE } from '../src/queue/bullmq-bundles.js';
import { MAP_BATCH_SIZE } from './fixtures/map-reactors-plan.mjs';
import { createMap } from './fixtures/map-store-floor.mjs';
import type { BenchChild } from './support.js';
import { cpuSecondsOf, fmt, loadAverage, loadBuiltMapBench, machineLine, median, monotonicMs, ownCpuSeconds, runBareFlow, runBench, startCliWorker, startNodeProcess, startRedis, startTsxProcess, stopChild, whenReady } from './support.js';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 3000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
const WORKER_COUNT = Number(process.env['BENCH_WORKERS'] ?? 1);
/** The maps' throw size: the real map's (`BENCH_MAP_BATCH_SIZE`, default 50), which the floor's throws follow. */
const BATCH_SIZE = MAP_BATCH_SIZE;
const BUNDLE_SIZE = DEFAULT_BUNDLE_SIZE;
const TIMEOUT_MS = 300_000;
const FORWARD_TARGET = 1.5;
const REDIS_OPTIONS = { maxRetriesPerRequest: null };
const PREFIX = 'bench-floor';
const KINDS = ['bare', 'throws', 'floor', 'forward'] as const;
type Kind = (typeof KINDS)[number];
/** The worker process a kind's jobs run in (the throws without commits run in the floor worker). */
const WORKER_OF = { bare: 'bare', throws: 'floor', floor: 'floor', forward: 'forward' } as const;
type WorkerKind = (typeof WORKER_OF)[Kind];
const WORKERS: readonly WorkerKind[] = [...new Set(Object.values(WORKER_OF))];

interface Sample {
  readonly ms: number;
  /** CPU seconds of this process, the kind's worker, redis-server. */
  readonly cpu: readonly [number, number, number];
}

runBench(async () => {
  console.log(`map-store-floor: ${fmt(ELEMENTS, 0)} positions; the bare flow, the store floor (an element's two commits, no runtime) and the real fan-out map, ${WORKER_COUNT} worker process${WORKER_COUNT === 1 ? '' : 'es'} of each × concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds after a warm-up of ${fmt(WARMUP, 0)} of each`);
  console.log(machineLine());
  const { xr, adapters, plan, reactors } = await loadBuiltMapBench();

  const server = await startRedis();
  process.env['XREACTOR_BENCH_REDIS_URL'] = server.url;
  const admin = new Redis(server.url, REDIS_OPTIONS);
  const caller = new Redis(server.url, REDIS_OPTIONS);
  const eventsConnection = new Redis(server.url, REDIS_OPTIONS);
  const floorEventsConnection = new Redis(server.url, REDIS_OPTIONS);
  const redisPid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
  const env = { XREACTOR_BENCH_REDIS_URL: server.url };
  const queues = { bare: 'bench-floor-bare', floor: 'bench-floor-floor', forward: 'bench-floor-xr' };
  const fleet = <T,>(start: () => T): T[] => Array.from({ length: WORKER_COUNT }, start);
  const children: Record<WorkerKind, BenchChild[]> = {
    bare: fleet(() => startTsxProcess('bench/fixtures/bare-bullmq-worker.ts', { ...env, BENCH_QUEUE: queues.bare, BENCH_CONCURRENCY: String(CONCURRENCY) }, 'bench worker ready')),
    floor: fleet(() => startNodeProcess(['bench/fixtures/map-store-floor-worker.mjs'], { ...env, BENCH_QUEUE: queues.floor, BENCH_CONCURRENCY: String(CONCURRENCY), BENCH_PREFIX: `${PREFIX}-store` }, 'bench worker ready')),
    forward: fleet(() => startCliWorker({ redisUrl: server.url, lib: 'dist', modules: ['bench/fixtures/map-reactors-dist.mjs'], args: ['--queue', queues.forward, '--prefix', `${PREFIX}-xr`, '--concurrency', String(CONCURRENCY)], env })),
  };
  const workersCpu = (kind: WorkerKind): number => children[kind].reduce((sum, c) => sum + (cpuSecondsOf(c.child.pid!) ?? Number.NaN), 0);
  const flow = new FlowProducer({ connection: caller });
  const bareEvents = new QueueEvents(queues.bare, { connection: eventsConnection });
  const floorQueue = new Queue(queues.floor, { connection: caller });
  const floorEvents = new QueueEvents(queues.floor, { connection: floorEventsConnection });
  const floorStore = adapters.createRedisStore({ redis: caller, prefix: `${PREFIX}-store` });
  const xrStore = adapters.createRedisStore({ redis: caller, prefix: `${PREFIX}-xr` });
  const xrQueue = adapters.createBullmqQueue({ connection: caller, queueName: queues.forward });
  const runtime = xr.createRuntime({
    store: xrStore,
    queue: xrQueue,
    worker: false,
    reactors: [reactors.benchMapForward],
    logger: pino({ level: 'silent' }),
  });
  const keep = { removeOnComplete: { age: 3600 } };
  let serial = 0;

  /** The map's throws of bundle jobs; with `commits`, each position's two commits in the worker (else the jobs do nothing). */
  const throwsOf = async (n: number, commits: boolean): Promise<void> => {
    const root = `floor-${(serial += 1)}`;
    const map = commits ? await createMap(floorStore, xr.EXECUTION_MACHINE_VERSION, root, n, BATCH_SIZE) : root;
    for (let from = 0; from < n; from += BATCH_SIZE) {
      const bundles: { name: string; data: { map: string; indexes: number[]; commits: boolean }; opts: typeof keep & { jobId: string } }[] = [];
      for (let at = from; at < Math.min(n, from + BATCH_SIZE); at += BUNDLE_SIZE) {
        const indexes = Array.from({ length: Math.min(BUNDLE_SIZE, n - at) }, (_, i) => at + i);
        bundles.push({ name: 'bundle', data: { map, indexes, commits }, opts: { ...keep, jobId: `${map}.${at}` } });
      }
      const jobs = await floorQueue.addBulk(bundles);
      await Promise.all(jobs.map((job) => job.waitUntilFinished(floorEvents, TIMEOUT_MS)));
    }
    if (!commits) return;
    const settled = (await floorStore.readMapStats(map))?.settled;
    if (settled !== n) throw new Error(`store floor: ${String(settled)} of ${n} positions reported to the map`);
  };

  const batches: Record<Kind, (n: number) => Promise<void>> = {
    bare: async (n) => {
      if ((await runBareFlow(flow, bareEvents, queues.bare, n, `flow-${(serial += 1)}`, TIMEOUT_MS)) !== 1) throw new Error('bare flow: the parent did not return 1');
    },
    throws: (n) => throwsOf(n, false),
    floor: (n) => throwsOf(n, true),
    forward: async (n) => {
      const dispatched = await runtime.run(reactors.benchMapForward, { items: Array.from({ length: n }, (_, i) => i) });
      const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: TIMEOUT_MS });
      if (result.status !== 'completed') throw new Error(`map forward ended ${result.status}`);
    },
  };
  const measure = async (kind: Kind, n: number): Promise<Sample> => {
    const workers = WORKER_OF[kind];
    const before = [ownCpuSeconds(), workersCpu(workers), cpuSecondsOf(redisPid) ?? Number.NaN] as const;
    const start = monotonicMs();
    await batches[kind](n);
    const ms = monotonicMs() - start;
    return { ms, cpu: [ownCpuSeconds() - before[0], workersCpu(workers) - before[1], (cpuSecondsOf(redisPid) ?? Number.NaN) - before[2]] };
  };

  try {
    await Promise.all(WORKERS.flatMap((kind) => children[kind].map((child) => whenReady(child, `${kind} worker`))));
    await Promise.all([bareEvents.waitUntilReady(), floorEvents.waitUntilReady()]);
    for (let left = WARMUP; left > 0; left -= ELEMENTS) for (const kind of KINDS) await measure(kind, Math.min(ELEMENTS, left));
    const samples: Record<Kind, Sample[]> = { bare: [], throws: [], floor: [], forward: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = KINDS.map((_, i) => KINDS[(i + round) % KINDS.length]!);
      for (const kind of order) samples[kind].push(await measure(kind, ELEMENTS));
      console.log(`  round ${round + 1}: ${KINDS.map((k) => `${k} ${fmt(samples[k].at(-1)!.ms, 0)} ms`).join(', ')} (load ${loadAverage()})`);
    }
    const bareMs = median(samples.bare.map((s) => s.ms));
    const perElement = (list: readonly Sample[], part: 0 | 1 | 2) => fmt((median(list.map((s) => s.cpu[part])) * 1e6) / ELEMENTS, 0);
    console.log('');
    for (const kind of KINDS) {
      const list = samples[kind];
      const ms = median(list.map((s) => s.ms));
      const perRound = list.map((s, i) => fmt(s.ms / samples.bare[i]!.ms, 2)).join(' / ');
      console.log(
        `  ${kind.padEnd(8)} ${fmt(ms, 0).padStart(6)} ms  ${fmt(ms / bareMs, 2)}× the bare flow (by round ${perRound}); CPU per position: this process ${perElement(list, 0)} µs, worker${WORKER_COUNT === 1 ? '' : 's'} ${perElement(list, 1)} µs, redis-server ${perElement(list, 2)} µs`,
      );
    }
    const msOf = (kind: Kind) => median(samples[kind].map((s) => s.ms));
    const floorRatio = msOf('floor') / bareMs;
    const perPosition = (ms: number) => `${fmt((ms / ELEMENTS) * 1000, 0)} µs`;
    console.log('');
    console.log(
      `  per position of wall time: the throws of bundle jobs alone ${perPosition(msOf('throws'))} (the bare flow ${perPosition(bareMs)}); on them the store's commits add ${perPosition(msOf('floor') - msOf('throws'))}, and the runtime ${perPosition(msOf('forward') - msOf('floor'))} more`,
    );
    console.log(
      floorRatio > FORWARD_TARGET
        ? `the store floor alone is ${fmt(floorRatio, 2)}× the bare flow: the forward target (${FORWARD_TARGET}×) is below this store's floor`
        : `the store floor alone is ${fmt(floorRatio, 2)}× the bare flow: it leaves the runtime ${perPosition((FORWARD_TARGET - floorRatio) * bareMs)} per position of wall time under the forward target (${FORWARD_TARGET}×)`,
    );
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    // The store and queue given to the runtime stay ours to close (docs/lifecycle.md).
    await runtime.close().catch(() => undefined);
    await Promise.all([xrQueue.close(), xrStore.close(), floorStore.close()]).catch(() => undefined);
    await Promise.all([flow.close(), bareEvents.close(), floorQueue.close(), floorEvents.close()]).catch(() => undefined);
    await Promise.all(WORKERS.flatMap((kind) => children[kind].map((c) => stopChild(c.child, c.exited, 15_000))));
    plan.closeMarks();
    for (const c of [admin, caller, eventsConnection, floorEventsConnection]) c.disconnect();
    await server.stop();
  }
});
