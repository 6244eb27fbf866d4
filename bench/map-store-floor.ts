/**
 * The floor under the fan-out map's forward and rollback targets: the store I/O an element needs,
 * done with no runtime, beside the bare BullMQ flow and the real map, in the same interleaved rounds.
 *
 *   npx tsx bench/map-store-floor.ts      (builds the package, its own redis-server; about 1 minute)
 *   BENCH_ROUNDS (5), BENCH_ELEMENTS (1,000), BENCH_WARMUP (3,000 of each kind), BENCH_CONCURRENCY (10),
 *   BENCH_WORKERS (1: worker processes of each kind), BENCH_ROLLBACK (1; 0: skip the rollback kinds)
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
 *   `xreactor worker` of the built package at `--log-level info`, as in `bench/map.ts`);
 * - **rb-floor** (BENCH_ROLLBACK): the rollback's throws without the runtime. The floor's map and
 *   elements are first made as **floor** makes them (untimed: each element completed with its undo
 *   entry); then, timed, the map's `rolling_back` commit with its `rollbackTarget` write (from this
 *   process), and for each rollback throw of 50 started positions (newest-started first, the
 *   started list read before the timing) bundle jobs of `DEFAULT_BUNDLE_SIZE` positions, in which
 *   the floor worker makes each position's five store calls in order (`rollbackElement` in
 *   `fixtures/map-store-floor.mjs`, recorded from a real rollback): the rollback actor's resolve
 *   (`acquireAndLoad` of the element with its undo top, `unlessExists` the actor), its creating
 *   `undoing` commit (lease, listing, the `operator.undo` signal to the element, which it awaits),
 *   the element's `rolling_back` commit consuming it, its `cancelled` commit (undo entry popped,
 *   `child.settled` to the actor, lease released, unlisted, announced), and the actor's `reported`
 *   commit (the `rollbackReport`, the conditional `rbthrow.<k>` and `rolledback` signals to the
 *   map, lease released, unlisted, announced). Every call's result is checked (a refusal fails the
 *   run), and after each batch the map's rollback stats and inbox;
 * - **rollback** (BENCH_ROLLBACK): the real forward + full rollback (`bench_map_rollback`: the step
 *   `after` the map fails, so every element is undone), timed as `bench/map.ts`'s rollback: from the
 *   CLOCK_MONOTONIC mark `after` takes first (`failedAtKey`) to the root's `awaitResult()`; its CPU
 *   from when this process sees the mark (polled every millisecond during the forward phase).
 * It prints each kind's median time and CPU per element (this process, the worker, redis-server)
 * against the bare flow's, and splits the forward's and the rollback's time per position into the
 * throws, the store's calls and the runtime. The floor is what the store part of the design costs
 * with this store: when it alone is above 1.5× (forward) or 2× (rollback) the bare flow, that
 * target is below it.
 */
import { randomUUID } from 'node:crypto';
import { FlowProducer, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { DEFAULT_BUNDLE_SIZE } from '../src/queue/bullmq-bundles.js';
import { failedAtKey, MAP_BATCH_SIZE } from './fixtures/map-reactors-plan.mjs';
import { createMap, startRollback } from './fixtures/map-store-floor.mjs';
import type { BenchChild } from './support.js';
import { cpuSecondsOf, fmt, loadAverage, loadBuiltMapBench, machineLine, median, monotonicMs, ownCpuSeconds, runBareFlow, runBench, sleep, startCliWorker, startNodeProcess, startRedis, startTsxProcess, stopChild, whenReady } from './support.js';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 3000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
const WORKER_COUNT = Number(process.env['BENCH_WORKERS'] ?? 1);
/** The rollback kinds (`rb-floor`, `rollback`); 0 skips them. */
const ROLLBACK = process.env['BENCH_ROLLBACK'] !== '0';
/** The maps' throw size: the real map's (`BENCH_MAP_BATCH_SIZE`, default 50), which the floor's throws follow. */
const BATCH_SIZE = MAP_BATCH_SIZE;
const BUNDLE_SIZE = DEFAULT_BUNDLE_SIZE;
const TIMEOUT_MS = 300_000;
const FORWARD_TARGET = 1.5;
const ROLLBACK_TARGET = 2.0;
const REDIS_OPTIONS = { maxRetriesPerRequest: null };
const PREFIX = 'bench-floor';
const ALL_KINDS = ['bare', 'throws', 'floor', 'forward', 'rb-floor', 'rollback'] as const;
type Kind = (typeof ALL_KINDS)[number];
const KINDS: readonly Kind[] = ROLLBACK ? ALL_KINDS : ALL_KINDS.slice(0, 4);
/** The worker process a kind's jobs run in (the throws without commits, and the rollback floor, run in the floor worker). */
const WORKER_OF = { bare: 'bare', throws: 'floor', floor: 'floor', forward: 'forward', 'rb-floor': 'floor', rollback: 'forward' } as const;
type WorkerKind = (typeof WORKER_OF)[Kind];
const WORKERS: readonly WorkerKind[] = [...new Set(Object.values(WORKER_OF))];

interface Sample {
  readonly ms: number;
  /** CPU seconds of this process, the kind's worker, redis-server. */
  readonly cpu: readonly [number, number, number];
}

/** A batch's timed window: from the batch's start to its end unless the batch moves either (a rollback's window starts at its failing step). */
interface Window {
  /** The window starts now (CPU too), or at `at` (monotonic ms; CPU from now). */
  from(at?: number): void;
  /** The window ends now (the first call counts). */
  to(): void;
}

runBench(async () => {
  console.log(`map-store-floor: ${fmt(ELEMENTS, 0)} positions; the bare flow, the store floor (an element's two commits, no runtime) and the real fan-out map, ${WORKER_COUNT} worker process${WORKER_COUNT === 1 ? '' : 'es'} of each × concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds after a warm-up of ${fmt(WARMUP, 0)} of each`);
  if (ROLLBACK) console.log(`  and the rollback: its store floor (a rolled-back element's five store calls, no runtime) beside the real full rollback (bench_map_rollback, timed from its failing step to the root's result)`);
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
    reactors: [reactors.benchMapForward, reactors.benchMapRollback],
    logger: pino({ level: 'silent' }),
  });
  const keep = { removeOnComplete: { age: 3600 } };
  let serial = 0;

  /**
   * `n` positions in the map's throws (`BATCH_SIZE` each, the next sent when the last settled),
   * each throw in bundle jobs of `BUNDLE_SIZE` positions at most (never across a throw's end):
   * `bundle(at, positions)` is the job data of the bundle of `positions` from `at`, `jobId(at)` its id.
   */
  const sendThrows = async (n: number, bundle: (at: number, positions: number[]) => object, jobId: (at: number) => string): Promise<void> => {
    for (let from = 0; from < n; from += BATCH_SIZE) {
      const bundles = [];
      for (let at = from; at < Math.min(n, from + BATCH_SIZE); at += BUNDLE_SIZE) {
        const positions = Array.from({ length: Math.min(BUNDLE_SIZE, n - at, from + BATCH_SIZE - at) }, (_, i) => at + i);
        bundles.push({ name: 'bundle', data: bundle(at, positions), opts: { ...keep, jobId: jobId(at) } });
      }
      const jobs = await floorQueue.addBulk(bundles);
      await Promise.all(jobs.map((job) => job.waitUntilFinished(floorEvents, TIMEOUT_MS)));
    }
  };

  /** The map's throws of bundle jobs; with `commits`, each position's two commits in the worker (else the jobs do nothing). Returns the map's id (with `commits`). */
  const throwsOf = async (n: number, commits: boolean, root = `floor-${(serial += 1)}`): Promise<string> => {
    const map = commits ? await createMap(floorStore, xr.EXECUTION_MACHINE_VERSION, root, n, BATCH_SIZE) : root;
    await sendThrows(n, (_, indexes) => ({ map, indexes, commits }), (at) => `${map}.${at}`);
    if (!commits) return map;
    const settled = (await floorStore.readMapStats(map))?.settled;
    if (settled !== n) throw new Error(`store floor: ${String(settled)} of ${n} positions reported to the map`);
    return map;
  };

  /**
   * The rollback's store floor: the floor's map and elements made as `throwsOf` makes them
   * (outside the window), then, in the window, the map `rolling_back` (its rollback target) and
   * the rollback's throws of bundle jobs, each position's five store calls in the worker.
   */
  const rollbackFloor = async (n: number, window: Window): Promise<void> => {
    // A root id as long as the runtime's (a UUID): the ids recur in every call's arguments and keys.
    const map = await throwsOf(n, true, randomUUID());
    // Position p is the started list's entry n - 1 - p: newest-started first, as the map's rollback throws read it.
    const started = await floorStore.readMapStarted(map, n, 0, n, 'started');
    if (started.length !== n) throw new Error(`store floor, rollback: ${started.length} of ${n} positions in the started list`);
    window.from();
    await startRollback(floorStore, xr.EXECUTION_MACHINE_VERSION, map, n);
    await sendThrows(
      n,
      (_, positions) => ({ map, rollback: { total: n, positions: positions.map((p): [number, number] => [p, started[p]!]) } }),
      (at) => `${map}.rb.${at}`,
    );
    window.to();
    // Every position reported undone, each throw's end and the rollback's end signalled to the map.
    const stats = await floorStore.readMapStats(map);
    if (stats?.rollback.target !== n || stats.rollback.settled !== n || stats.rollback.undone !== n) throw new Error(`store floor, rollback: the map's rollback stats are ${JSON.stringify(stats?.rollback)}, not ${n} of ${n} undone`);
    const keys = new Set((await floorStore.readInbox(map)).entries.map((e) => e.dedupeKey));
    const expected = [...Array.from({ length: Math.ceil(n / BATCH_SIZE) }, (_, k) => `rbthrow.${k}`), 'rolledback'];
    const missing = expected.filter((key) => !keys.has(key));
    if (missing.length > 0 || keys.size !== expected.length) throw new Error(`store floor, rollback: the map's inbox holds ${JSON.stringify([...keys])}; expected ${JSON.stringify(expected)}`);
  };

  const batches: Record<Kind, (n: number, window: Window) => Promise<void>> = {
    bare: async (n) => {
      if ((await runBareFlow(flow, bareEvents, queues.bare, n, `flow-${(serial += 1)}`, TIMEOUT_MS)) !== 1) throw new Error('bare flow: the parent did not return 1');
    },
    throws: async (n) => {
      await throwsOf(n, false);
    },
    floor: async (n) => {
      await throwsOf(n, true);
    },
    forward: async (n) => {
      const dispatched = await runtime.run(reactors.benchMapForward, { items: Array.from({ length: n }, (_, i) => i) });
      const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: TIMEOUT_MS });
      if (result.status !== 'completed') throw new Error(`map forward ended ${result.status}`);
    },
    'rb-floor': rollbackFloor,
    // As bench/map.ts's rollback: from the mark `after` takes first to the root's result. This
    // process polls the mark during the forward phase (every millisecond), to start the CPU there.
    rollback: async (n, window) => {
      const dispatched = await runtime.run(reactors.benchMapRollback, { items: Array.from({ length: n }, (_, i) => i) });
      const root = dispatched.executionId;
      let polling = true;
      let seen = false;
      const poll = (async () => {
        while (polling) {
          const mark = await caller.get(failedAtKey(root));
          if (mark !== null) {
            window.from(Number(mark) / 1e6);
            seen = true;
            return;
          }
          await sleep(1);
        }
      })();
      const result = await runtime.awaitResult(root, { timeoutMs: TIMEOUT_MS });
      window.to();
      polling = false;
      await poll;
      if (!seen) throw new Error('map rollback: this process did not see the mark of the step after the map before the root ended');
      if (result.status !== 'failed' || (result as { step?: string }).step !== 'after') throw new Error(`map rollback ended ${result.status}, not failed at step after`);
      const undone = (await runtime.find(root)).maps[0]?.rollback?.undone;
      if (undone !== n) throw new Error(`map rollback: ${String(undone)} of ${n} elements undone`);
    },
  };
  const measure = async (kind: Kind, n: number): Promise<Sample> => {
    const workers = WORKER_OF[kind];
    const cpuNow = () => [ownCpuSeconds(), workersCpu(workers), cpuSecondsOf(redisPid) ?? Number.NaN] as const;
    let before = cpuNow();
    let start = monotonicMs();
    let sample: Sample | undefined;
    const window: Window = {
      from: (at) => {
        before = cpuNow();
        start = at ?? monotonicMs();
      },
      to: () => {
        if (sample !== undefined) return;
        const ms = monotonicMs() - start;
        const after = cpuNow();
        sample = { ms, cpu: [after[0] - before[0], after[1] - before[1], after[2] - before[2]] };
      },
    };
    await batches[kind](n, window);
    window.to();
    return sample!;
  };

  try {
    await Promise.all(WORKERS.flatMap((kind) => children[kind].map((child) => whenReady(child, `${kind} worker`))));
    await Promise.all([bareEvents.waitUntilReady(), floorEvents.waitUntilReady()]);
    for (let left = WARMUP; left > 0; left -= ELEMENTS) for (const kind of KINDS) await measure(kind, Math.min(ELEMENTS, left));
    const samples = Object.fromEntries(ALL_KINDS.map((kind) => [kind, [] as Sample[]])) as Record<Kind, Sample[]>;
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
    /** What a floor at `ratio` of the bare flow leaves the runtime under a target of `target` (or that the target is below it). */
    const underTarget = (ratio: number, target: number, what: string) =>
      ratio > target ? `the ${what} target (${target}×) is below this store's floor` : `it leaves the runtime ${perPosition((target - ratio) * bareMs)} per position of wall time under the ${what} target (${target}×)`;
    console.log(`the store floor alone is ${fmt(floorRatio, 2)}× the bare flow: ${underTarget(floorRatio, FORWARD_TARGET, 'forward')}`);
    if (ROLLBACK) {
      const ratios = (kind: Kind) => median(samples[kind].map((s, i) => s.ms / samples.bare[i]!.ms));
      const rbFloorRatio = msOf('rb-floor') / bareMs;
      console.log('');
      console.log(
        `  rollback, per position of wall time: the throws of bundle jobs alone ${perPosition(msOf('throws'))} (the bare flow ${perPosition(bareMs)}); on them the store's five calls add ${perPosition(msOf('rb-floor') - msOf('throws'))}, and the runtime ${perPosition(msOf('rollback') - msOf('rb-floor'))} more`,
      );
      console.log(
        `the rollback's store floor alone is ${fmt(rbFloorRatio, 2)}× the bare flow (median of the rounds' ratios ${fmt(ratios('rb-floor'), 2)}), the real rollback ${fmt(msOf('rollback') / bareMs, 2)}× (${fmt(ratios('rollback'), 2)}): ` +
          underTarget(rbFloorRatio, ROLLBACK_TARGET, 'rollback'),
      );
    }
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
