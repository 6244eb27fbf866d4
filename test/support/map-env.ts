/**
 * The environment of the fan-out map orchestration test: a private Redis, a fresh store prefix
 * and queue name, a caller runtime in the test process, `xreactor worker` processes and counting
 * worker processes (test/orchestration/fixtures/map-worker.ts) for the map fixtures, and the
 * effects those fixtures record.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createRuntime } from '../../src/index.js';
import type { Runtime, Store } from '../../src/index.js';
import { encodeJobId } from '../../src/queue/bullmq-queue.js';
import { createKeyBuilder } from '../../src/store/keys.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import type { BullmqQueue } from '../../src/redis.js';
import type * as MapFixtures from '../orchestration/fixtures/map-reactors.js';
import { startRedis } from './redis-server.js';
import type { RedisServer } from './redis-server.js';
import { startWorkerProcess } from './worker-process.js';
import type { WorkerProcess } from './worker-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MODULES = ['test/orchestration/fixtures/map-reactors.ts'];
const COUNTING_WORKER = fileURLToPath(new URL('../orchestration/fixtures/map-worker.ts', import.meta.url));

/** Leases, job locks and sweeps short enough that a killed process's work moves on within about a second. */
export const LEASE_TTL_MS = 1_000;
export const FAST_RECOVERY = ['--lease-ttl-ms', String(LEASE_TTL_MS), '--lock-duration-ms', '1000', '--stalled-interval-ms', '500', '--sweep-interval-ms', '500'];

/** One recorded effect: `<kind>:<path>/<step>#<attempt>` and the process that ran the body. */
export interface Effect {
  readonly label: string;
  readonly pid: number;
}

/** Per job purpose, what the jobs of a counting worker loaded (see fixtures/map-worker.ts). */
export interface PurposeLoads {
  readonly jobs: number;
  readonly jobsLoadingElements: number;
  readonly loads: number;
  readonly elementLoads: number;
  readonly maxElementsPerJob: number;
  readonly maxElementLoadsPerJob: number;
  readonly offenders: readonly { readonly job: string; readonly actor: string; readonly elements: readonly string[] }[];
  readonly shapes: Readonly<Record<string, number>>;
  /** Jobs that committed nothing for the actor they address. */
  readonly jobsWithoutOwnCommit: number;
}

/** What a counting worker printed at its exit. */
export interface CountingReport {
  readonly pid: number;
  readonly maxRssKiB: number;
  /** The heap in use after a full collection at exit (the process runs with --expose-gc). */
  readonly heapUsedAfterGcKiB: number | null;
  /** The most heap in use after a full collection (one every 2 s): the live data's peak. */
  readonly liveHeapPeakKiB: number;
  /** Peaks of process.memoryUsage(), sampled every 100 ms (KiB). */
  readonly peaksKiB: { readonly heapTotal: number; readonly heapUsed: number; readonly external: number; readonly arrayBuffers: number; readonly rss: number };
  readonly loadsOutsideJobs: number;
  /** Wake jobs it enqueued: `<purpose of the woken actor> by <purpose of the enqueuing job>` → count. */
  readonly wakesEnqueued: Readonly<Record<string, number>>;
  readonly purposes: Readonly<Record<string, PurposeLoads>>;
}

/** A counting worker: a worker process like any, whose `stop()` SIGTERMs it and reads its report. */
export interface CountingWorker extends WorkerProcess {
  stop(): Promise<CountingReport>;
}

export interface MapEnv {
  readonly server: RedisServer;
  readonly redis: Redis;
  readonly prefix: string;
  readonly queueName: string;
  readonly store: Store;
  readonly queue: BullmqQueue;
  /** A caller runtime (no worker) in the test process. */
  readonly runtime: Runtime;
  readonly fixtures: typeof MapFixtures;
  /** Every worker process alive (either kind). */
  readonly workers: Set<WorkerProcess>;
  /** Start an `xreactor worker` process for the map fixtures on this suite's prefix and queue. */
  spawnWorker(args?: readonly string[]): Promise<WorkerProcess>;
  /** Start a counting worker (fixtures/map-worker.ts) on this suite's prefix and queue. */
  spawnCountingWorker(args?: readonly string[]): Promise<CountingWorker>;
  /** The effects recorded for a tree (all its actors), in order. */
  effects(root: string): Promise<Effect[]>;
  close(): Promise<void>;
}

function track(workers: Set<WorkerProcess>, worker: WorkerProcess): void {
  workers.add(worker);
  void worker.exited.then(() => workers.delete(worker));
}

export async function startMapEnv(): Promise<MapEnv> {
  const server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  const fixtures = await import('../orchestration/fixtures/map-reactors.js');
  const tag = randomUUID().slice(0, 8);
  const prefix = `mo${tag}`;
  const queueName = `map-${tag}`;
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const store = createRedisStore({ redis, prefix });
  const queue = createBullmqQueue({ connection: redis, queueName });
  const runtime = createRuntime({ store, queue, worker: false, leaseTtlMs: LEASE_TTL_MS, reactors: [fixtures.mapOwner, fixtures.mapBackground], logger: pino({ level: 'silent' }) });
  const workers = new Set<WorkerProcess>();
  const common = ['--prefix', prefix, '--queue', queueName];

  return {
    server,
    redis,
    prefix,
    queueName,
    store,
    queue,
    runtime,
    fixtures,
    workers,
    async spawnWorker(args = []) {
      const worker = startWorkerProcess({ redisUrl: server.url, modules: MODULES, args: [...common, ...FAST_RECOVERY, ...args], env: { XREACTOR_TEST_REDIS_URL: server.url } });
      track(workers, worker);
      await worker.ready;
      if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
      return worker;
    },
    async spawnCountingWorker(args = []) {
      const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', COUNTING_WORKER, '--redis', server.url, ...common, ...FAST_RECOVERY, ...args], {
        cwd: ROOT,
        env: { ...process.env, XREACTOR_TEST_REDIS_URL: server.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      let markReady: () => void = () => undefined;
      const ready = new Promise<void>((resolve) => (markReady = resolve));
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('xreactor.worker.started')) markReady();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
      void exited.then(() => markReady());
      const worker: CountingWorker = {
        child,
        pid: child.pid!,
        ready,
        exited,
        output: () => output,
        async stop() {
          child.kill('SIGTERM');
          const code = await exited;
          const line = output.split('\n').find((l) => l.startsWith('MAPWORKER '));
          if (code !== 0 || line === undefined) throw new Error(`counting worker ${child.pid} exited with ${String(code)} without its report:\n${output.slice(-3_000)}`);
          return JSON.parse(line.slice('MAPWORKER '.length)) as CountingReport;
        },
      };
      track(workers, worker);
      await ready;
      if (child.exitCode !== null) throw new Error(`counting worker exited at start:\n${output}`);
      return worker;
    },
    async effects(root) {
      const raw = await redis.lrange(`mev:${root}`, 0, -1);
      return raw.map((entry) => {
        const at = entry.lastIndexOf('@');
        return { label: entry.slice(0, at), pid: Number(entry.slice(at + 1)) };
      });
    },
    async close() {
      for (const worker of workers) worker.child.kill('SIGKILL');
      await runtime.close();
      await queue.close();
      await store.close();
      fixtures.mapRecorder().disconnect();
      redis.disconnect();
      await server.stop();
    },
  };
}

/** Outcome-hash buckets hold 1,024 positions each (docs/design/map.md §12.2). */
const BUCKET = 1_024;

/**
 * Where a map stands, for the message of a test that timed out: the root's view, the map actor,
 * its stats, and the first positions that have not reported (forward, and in its rollback) with
 * each one's actor, lease and start job; the queue's counts; the workers' last warnings.
 */
export async function diagnoseMap(env: MapEnv, mapId: string, elements: readonly number[] = []): Promise<string> {
  const lines: string[] = [];
  const safe = async (what: string, f: () => Promise<unknown>) => {
    try {
      lines.push(`${what}: ${JSON.stringify(await f())}`);
    } catch (error) {
      lines.push(`${what}: (${(error as Error).message})`);
    }
  };
  const keys = createKeyBuilder(env.prefix);
  const queue = new Queue(env.queueName, { connection: env.redis });
  const actor = async (id: string) => {
    const loaded = await env.store.load(id);
    const job = await queue.getJob(encodeJobId(`${id}.start`));
    return {
      id,
      value: loaded?.snapshot.value ?? 'missing',
      revision: loaded?.revision,
      outbox: loaded?.outbox.map((e) => e.type),
      inbox: loaded?.inbox.entries.map((e) => e.event.type),
      lease: await env.store.hasLease(id),
      startJob: job === undefined ? 'none' : { state: await job.getState(), attemptsMade: job.attemptsMade, stalled: job.stalledCounter, failedReason: job.failedReason },
    };
  };
  const root = mapId.split('.')[0]!;
  await safe(`root ${root}`, async () => {
    const view = await env.runtime.find(root);
    return { status: view.status, waiting: view.waiting, maps: view.maps };
  });
  const owner = mapId.slice(0, mapId.lastIndexOf('.'));
  if (owner !== root) await safe(`owner ${owner}`, async () => ({ status: (await env.runtime.find(owner)).status, maps: (await env.runtime.find(owner)).maps }));
  await safe(`map ${mapId}`, async () => {
    const loaded = await env.store.load(mapId);
    return { value: loaded?.snapshot.value, outbox: loaded?.outbox.map((e) => e.type), inbox: loaded?.inbox.entries.map((e) => e.event.type), lease: await env.store.hasLease(mapId) };
  });
  const stats = await env.store.readMapStats(mapId).catch(() => undefined);
  lines.push(`stats: ${JSON.stringify(stats)}`);
  if (stats !== undefined) {
    const mapKeys = keys.mapKeys(mapId);
    const unreported = async (count: number, bucketKey: (b: number) => string) => {
      const missing: number[] = [];
      for (let b = 0; b * BUCKET < count && missing.length < 8; b += 1) {
        const seen = new Set((await env.redis.hkeys(bucketKey(b))).map(Number));
        for (let p = b * BUCKET; p < Math.min(count, (b + 1) * BUCKET) && missing.length < 8; p += 1) if (!seen.has(p)) missing.push(p);
      }
      return missing;
    };
    const forward = stats.target ?? stats.total ?? 0;
    for (const index of await unreported(forward, mapKeys.outcomes)) await safe(`element ${index} not reported`, () => actor(`${mapId}.${index}`));
    if (stats.rollback.target !== null) {
      for (const position of await unreported(stats.rollback.target, mapKeys.rollbackOutcomes)) await safe(`rollback position ${position} not reported`, () => actor(`${mapId}.rb-${position}`));
    }
  }
  if (elements.length > 0) {
    // Elements named by the caller (e.g. one left in place): their state and trace, their place
    // in the started list and the rollback actor at that position.
    const started = await env.redis.lrange(keys.mapKeys(mapId).started, 0, -1);
    for (const index of elements.slice(0, 4)) {
      await safe(`element ${index}`, async () => {
        const id = `${mapId}.${index}`;
        const view = await env.runtime.find(id);
        const entries = started.flatMap((entry, k) => (entry === String(index) ? [k] : []));
        const positions = entries.map((k) => started.length - 1 - k);
        const rollbackActors = await Promise.all(positions.map(async (position) => ({ position, ...(await actor(`${mapId}.rb-${position}`)), context: (await env.store.load(`${mapId}.rb-${position}`))?.snapshot.context })));
        return { ...(await actor(id)), status: view.status, undoStack: view.undoStack.length, trace: view.trace.slice(-12), startedEntries: entries, startedLength: started.length, rollbackActors };
      });
    }
  }
  await safe('queue', () => queue.getJobCounts('wait', 'active', 'delayed', 'failed', 'completed', 'prioritized'));
  await queue.close();
  for (const worker of env.workers) {
    const warnings = worker.output().split('\n').filter((l) => /"level":(40|50|60)|error/i.test(l)).slice(-3);
    if (warnings.length > 0) lines.push(`worker ${worker.pid}:\n  ${warnings.join('\n  ')}`);
  }
  return lines.join('\n');
}
