/**
 * Throughput of background runs: 1,000 concurrent runs of a 5-step reactor handed off whole
 * (`.background({ all: true })`, trivial steps) to 1 and to 4 `xreactor worker` processes
 * (`--concurrency 10` each), from the first `run()` to the last `awaitResult()`. For context,
 * bare BullMQ: 1,000 trivial jobs added concurrently to 1 and to 4 worker processes with
 * concurrency 10, from the first `add()` to the last job completed.
 *
 *   npx tsx bench/throughput.ts          (BENCH_REPS=5 for more repetitions; default 3)
 *
 * One caller process (this one) runs every `run()` and `awaitResult()` on one Redis connection
 * (plus the store's subscriber connection). Workers are started through the real CLI
 * (bench/fixtures/throughput-reactors.ts) and bench/fixtures/bare-bullmq-worker.ts; each
 * configuration gets its own queues and processes, and batches of xreactor and bare BullMQ
 * alternate. A benchmark reports, it never gates: the exit code is always 0.
 */
import os from 'node:os';
import { Queue as BullQueue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { Runtime } from '../src/index.js';
import type * as RedisAdapters from '../src/redis.js';
import type * as Fixtures from './fixtures/throughput-reactors.js';
import {
  benchFile,
  cpuSecondsOf,
  fmt,
  loadAverage,
  machineLine,
  median,
  ownCpuSeconds,
  pad,
  sleep,
  startRedis,
  startTsxProcess,
  startWorkerProcess,
  stopChild,
  whenReady,
  runBench,
} from './support.js';
import type { BenchChild, RedisServer, WorkerProcess } from './support.js';

let xr: typeof Xreactor;
let adapters: typeof RedisAdapters;
let fixtures: typeof Fixtures;

const RUNS = 1000;
const WORKER_COUNTS = [1, 4] as const;
const CONCURRENCY = 10;
const REPS = Number(process.env['BENCH_REPS'] ?? 3);
const WARMUP_RUNS = 200;
const AWAIT_TIMEOUT_MS = 120_000;
const BARE_POLL_MS = 2;

const logger = pino({ level: 'silent' });

interface XreactorBatch {
  /** Runs per second, first run() to the last awaitResult(). */
  runsPerSecond: number;
  /** Seconds until every run() returned `dispatched`. */
  dispatchS: number;
  totalS: number;
  /** Seconds from the first run() to the last settle as stored (the execution's updatedAt, wall clock). */
  lastSettledS: number;
  /** awaitResult() calls that returned more than 500 ms after their run settled, and the latest of them (s). */
  lateWakeups: number;
  maxLateS: number;
  statuses: Map<string, number>;
  cpu: Cpu;
}

interface BareBatch {
  jobsPerSecond: number;
  addS: number;
  totalS: number;
  cpu: Cpu;
}

/** CPU seconds used during a batch, by whom. */
interface Cpu {
  caller: number;
  workers: number;
  redis: number;
}

/** Pids whose CPU time a batch accounts for. */
const accounted = { workers: [] as number[], redis: 0 };

function cpuNow(): Cpu {
  const workers = accounted.workers.reduce((sum, pid) => sum + (cpuSecondsOf(pid) ?? Number.NaN), 0);
  return { caller: ownCpuSeconds(), workers, redis: cpuSecondsOf(accounted.redis) ?? Number.NaN };
}

function cpuSince(before: Cpu): Cpu {
  const now = cpuNow();
  return { caller: now.caller - before.caller, workers: now.workers - before.workers, redis: now.redis - before.redis };
}

async function xreactorBatch(runtime: Runtime, runs: number): Promise<XreactorBatch> {
  const cpu = cpuNow();
  const startWall = Date.now();
  const start = performance.now();
  const dispatched = await Promise.all(Array.from({ length: runs }, () => runtime.run(fixtures.benchFiveSteps, undefined as never)));
  const dispatchS = (performance.now() - start) / 1000;
  const results = await Promise.all(
    dispatched.map(async (d) => {
      const result = await runtime.awaitResult(d.executionId, { timeoutMs: AWAIT_TIMEOUT_MS });
      return { result, returnedWall: Date.now() };
    }),
  );
  const totalS = (performance.now() - start) / 1000;
  const used = cpuSince(cpu);
  const statuses = new Map<string, number>();
  for (const { result } of results) statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
  // When did each run settle, as stored? (Outside the timed region.)
  const views = await Promise.all(dispatched.map((d) => runtime.find(d.executionId)));
  const settledAt = views.map((v) => v.updatedAt);
  const lateness = results.map(({ returnedWall }, i) => returnedWall - settledAt[i]!);
  return {
    runsPerSecond: runs / totalS,
    dispatchS,
    totalS,
    lastSettledS: (Math.max(...settledAt) - startWall) / 1000,
    lateWakeups: lateness.filter((ms) => ms > 500).length,
    maxLateS: Math.max(...lateness) / 1000,
    statuses,
    cpu: used,
  };
}

async function bareBatch(queue: BullQueue, counter: Redis, jobs: number, serial: { n: number }): Promise<BareBatch> {
  const before = await queue.getCompletedCount();
  const cpu = cpuNow();
  const start = performance.now();
  await Promise.all(Array.from({ length: jobs }, () => queue.add('bench', { n: serial.n }, { jobId: `tp-${(serial.n += 1)}` })));
  const addS = (performance.now() - start) / 1000;
  const deadline = Date.now() + AWAIT_TIMEOUT_MS;
  const completedKey = `bull:${queue.name}:completed`;
  while ((await counter.zcard(completedKey)) < before + jobs) {
    if (Date.now() > deadline) throw new Error(`bare BullMQ: ${jobs} jobs not completed within ${AWAIT_TIMEOUT_MS} ms`);
    await sleep(BARE_POLL_MS);
  }
  const totalS = (performance.now() - start) / 1000;
  return { jobsPerSecond: jobs / totalS, addS, totalS, cpu: cpuSince(cpu) };
}

async function main(): Promise<void> {
  console.log(`xreactor bench: throughput of ${RUNS} concurrent 5-step background runs`);
  console.log(machineLine());
  console.log(
    `workers: ${WORKER_COUNTS.join(' and ')} processes × concurrency ${CONCURRENCY}; ${REPS} measured batches of ${RUNS} per configuration and kind, ` +
      `after one warm-up batch of ${WARMUP_RUNS}; xreactor and bare BullMQ batches alternate`,
  );
  console.log(`load average at start: ${loadAverage()} (other processes on the machine inflate every figure alike)`);

  let server: RedisServer | undefined;
  const clients: Redis[] = [];
  const runtimes: Runtime[] = [];
  const queues: BullQueue[] = [];
  let children: (WorkerProcess | BenchChild)[] = [];
  const rows: { workers: number; xr: XreactorBatch[]; bare: BareBatch[]; loadAfter: string }[] = [];
  let store: Xreactor.Store | undefined;
  try {
    server = await startRedis();
    const url = server.url;
    [xr, adapters, fixtures] = await Promise.all([import('../src/index.js'), import('../src/redis.js'), import('./fixtures/throughput-reactors.js')]);
    const connect = () => {
      const client = new Redis(url, { maxRetriesPerRequest: null });
      clients.push(client);
      return client;
    };
    const caller = connect();
    const counter = connect();
    const version = /redis_version:(\S+)/.exec(await caller.info('server'))?.[1] ?? '?';
    console.log(`redis-server ${version} on 127.0.0.1:${server.port} (private, no persistence)`);
    accounted.redis = Number(/process_id:(\d+)/.exec(await caller.info('server'))?.[1]);
    store = adapters.createRedisStore({ redis: caller });
    const serial = { n: 0 };

    for (const workers of WORKER_COUNTS) {
      const xrQueue = `bench-tp-xr-${workers}`;
      const bareQueueName = `bench-tp-bare-${workers}`;
      const runtime = xr.createRuntime({
        store,
        queue: adapters.createBullmqQueue({ connection: caller, queueName: xrQueue }),
        worker: false,
        reactors: [fixtures.benchFiveSteps],
        logger,
      });
      runtimes.push(runtime);
      const bareQueue = new BullQueue(bareQueueName, { connection: caller, defaultJobOptions: { removeOnComplete: { age: 3600 } } });
      queues.push(bareQueue);

      children = [];
      for (let i = 0; i < workers; i++) {
        children.push(
          startWorkerProcess({
            redisUrl: url,
            modules: [benchFile('fixtures/throughput-reactors.ts')],
            args: ['--queue', xrQueue, '--concurrency', String(CONCURRENCY)],
          }),
        );
        children.push(
          startTsxProcess(benchFile('fixtures/bare-bullmq-worker.ts'), { XREACTOR_BENCH_REDIS_URL: url, BENCH_QUEUE: bareQueueName, BENCH_CONCURRENCY: String(CONCURRENCY) }, 'bench worker ready'),
        );
      }
      await Promise.all(children.map((child) => whenReady(child, 'worker process')));
      accounted.workers = children.map((c) => c.child.pid!);

      await xreactorBatch(runtime, WARMUP_RUNS);
      await bareBatch(bareQueue, counter, WARMUP_RUNS, serial);
      const row = { workers, xr: [] as XreactorBatch[], bare: [] as BareBatch[], loadAfter: '' };
      for (let rep = 0; rep < REPS; rep++) {
        // Alternate which kind goes first.
        if (rep % 2 === 0) {
          row.xr.push(await xreactorBatch(runtime, RUNS));
          row.bare.push(await bareBatch(bareQueue, counter, RUNS, serial));
        } else {
          row.bare.push(await bareBatch(bareQueue, counter, RUNS, serial));
          row.xr.push(await xreactorBatch(runtime, RUNS));
        }
      }
      row.loadAfter = loadAverage();
      rows.push(row);
      await Promise.all(children.map((c) => stopChild(c.child, c.exited)));
      children = [];
    }

    // ---- report
    console.log('');
    console.log(' workers | kind                         | per second (median) | each batch                | time to dispatch / add all | total s');
    console.log('---------|------------------------------|---------------------|---------------------------|----------------------------|--------');
    for (const row of rows) {
      const xrRates = row.xr.map((b) => b.runsPerSecond);
      const bareRates = row.bare.map((b) => b.jobsPerSecond);
      console.log(
        ` ${pad(String(row.workers), 7)} | ${'xreactor 5-step runs'.padEnd(28)} | ${pad(fmt(median(xrRates), 0), 19)} | ${xrRates.map((r) => fmt(r, 0)).join(' / ').padEnd(25)} | ` +
          `${pad(fmt(median(row.xr.map((b) => b.dispatchS)), 2) + ' s', 26)} | ${pad(fmt(median(row.xr.map((b) => b.totalS)), 2), 6)}`,
      );
      console.log(
        ` ${pad(String(row.workers), 7)} | ${'bare BullMQ trivial jobs'.padEnd(28)} | ${pad(fmt(median(bareRates), 0), 19)} | ${bareRates.map((r) => fmt(r, 0)).join(' / ').padEnd(25)} | ` +
          `${pad(fmt(median(row.bare.map((b) => b.addS)), 2) + ' s', 26)} | ${pad(fmt(median(row.bare.map((b) => b.totalS)), 2), 6)}`,
      );
    }
    console.log('');
    for (const row of rows) {
      const statuses = new Map<string, number>();
      for (const b of row.xr) for (const [s, n] of b.statuses) statuses.set(s, (statuses.get(s) ?? 0) + n);
      const xrRate = median(row.xr.map((b) => b.runsPerSecond));
      const bareRate = median(row.bare.map((b) => b.jobsPerSecond));
      console.log(
        `${row.workers} worker process${row.workers === 1 ? '' : 'es'}: xreactor runs/s ÷ bare jobs/s ${fmt(xrRate / bareRate, 2)}; ` +
          `steps/s ${fmt(xrRate * 5, 0)}; last run settled (stored) at ${row.xr.map((b) => fmt(b.lastSettledS, 2)).join(' / ')} s; ` +
          `outcomes: ${[...statuses.entries()].map(([s, n]) => `${n} ${s}`).join(', ')}; load average after: ${row.loadAfter}`,
      );
    }
    console.log('');
    console.log('CPU time per run / job, median over batches (ms; caller = this process, workers = all worker processes, redis = redis-server):');
    console.log(' workers | kind                     | caller | workers |  redis |  total | share of the 2-vCPU wall time');
    console.log('---------|--------------------------|--------|---------|--------|--------|------------------------------');
    const vcpus = os.cpus().length;
    for (const row of rows) {
      for (const [kind, batches] of [
        ['xreactor 5-step run', row.xr],
        ['bare BullMQ job', row.bare],
      ] as const) {
        const per = (pick: (c: Cpu) => number) => median(batches.map((b) => (pick(b.cpu) * 1000) / RUNS));
        const busy = median(batches.map((b) => (b.cpu.caller + b.cpu.workers + b.cpu.redis) / (b.totalS * vcpus)));
        console.log(
          ` ${pad(String(row.workers), 7)} | ${kind.padEnd(24)} | ${pad(fmt(per((c) => c.caller), 2), 6)} | ${pad(fmt(per((c) => c.workers), 2), 7)} | ` +
            `${pad(fmt(per((c) => c.redis), 2), 6)} | ${pad(fmt(per((c) => c.caller + c.workers + c.redis), 2), 6)} | ${pad(fmt(busy * 100, 0) + ' %', 28)}`,
        );
      }
    }
    console.log('');
    for (const row of rows) {
      const bySettle = median(row.xr.map((b) => RUNS / b.lastSettledS));
      console.log(
        `${row.workers} worker process${row.workers === 1 ? '' : 'es'}: runs/s counted to the last stored settle instead of the last awaitResult: ${fmt(bySettle, 0)} ` +
          `(awaitResult calls that returned > 500 ms after their run settled: ${row.xr.map((b) => b.lateWakeups).join(' / ')}, latest by ${row.xr.map((b) => fmt(b.maxLateS, 2)).join(' / ')} s)`,
      );
    }
    if (rows.length === 2) {
      const scale = (pick: (r: (typeof rows)[number]) => number) => pick(rows[1]!) / pick(rows[0]!);
      console.log(
        `scaling 1 → 4 worker processes: xreactor ${fmt(
          scale((r) => median(r.xr.map((b) => b.runsPerSecond))),
          2,
        )}×, bare BullMQ ${fmt(
          scale((r) => median(r.bare.map((b) => b.jobsPerSecond))),
          2,
        )}× (on this machine every process shares the same vCPUs with the caller and redis-server)`,
      );
    }
    console.log('');
    console.log('NO TARGET: the issue sets none for throughput; the figures are for context.');
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    await Promise.all(children.map((c) => stopChild(c.child, c.exited)));
    for (const runtime of runtimes) await runtime.close().catch(() => undefined);
    for (const queue of queues) await queue.close().catch(() => undefined);
    await store?.close().catch(() => undefined);
    for (const client of clients) client.disconnect();
    await server?.stop();
  }
}

runBench(main);
