/**
 * Worker throughput on Redis with AOF (`appendfsync everysec`): how many 10-step background runs
 * one xreactor worker process completes per second, against chains of 10 bare BullMQ jobs on the
 * same server with the same settings.
 *
 *   npx tsx bench/worker-throughput.ts
 *     BENCH_ROUNDS=5 (default 3)  BENCH_RUNS=1000 (runs / chains per batch)  BENCH_WARMUP=3000 (in batches of BENCH_RUNS)
 *     BENCH_PROFILE=0 (skip the profiled round)  BENCH_PROF_INTERVAL_US=250  BENCH_PROFILE_DIR=<dir> (keep the profiles there)
 *     BENCH_JSON=<file> (also write the figures as JSON; bench/compare-trees.ts reads it)
 *     BENCH_LIB=dist (A's worker runs the built package on plain Node: `npm run build` first)
 *
 * A. xreactor: `bench/fixtures/worker-throughput-reactor.ts`, ten trivial steps, each reading the
 *    previous step's result, `.background({ all: true })`. One worker process
 *    (`bench/fixtures/worker-throughput-worker.ts`: `createWorker({ store, queue, reactors,
 *    concurrency: 10 })`). The caller is this process: 1,000 `runtime.run()` at once (each returns
 *    `dispatched`), then `awaitResult()` on each; timed from the first `run()` to the last
 *    `awaitResult()`. Runs/s.
 * B. bare BullMQ: 1,000 chains of 10 jobs; each job's processor adds the next job of its chain,
 *    carrying the previous value (`bench/fixtures/chain-bullmq-worker.ts`, one process,
 *    concurrency 10). This process adds the 1,000 first jobs at once and waits, on `QueueEvents`,
 *    for the 1,000 last jobs to complete. Chains/s.
 *
 * Rounds alternate A, B, A, B, …; each round has its own store prefix / queue name and its own
 * freshly started worker process, warmed up with BENCH_WARMUP runs / chains (in batches of
 * BENCH_RUNS, as the timed batch is made) before it is timed: the figure is a warm process's, as a
 * long-running worker's is. A fresh Node process is slower until V8 has optimized its hot code;
 * each warm-up batch's rate is printed, so the curve is visible (docs/performance.md, "Warm
 * processes").
 * Between rounds the AOF is rewritten (untimed), and automatic rewrites are off, so none lands inside a round.
 * Headline: median A ÷ median B. Then one more A round with the worker under `node --cpu-prof`,
 * whose profile (the timed window only) gives the worker's self time by package and area
 * (bench/cpu-profile.ts), and µs of worker CPU per step.
 *
 * Public API only (createRuntime, createWorker, defineReactor, createRedisStore,
 * createBullmqQueue), so it runs unchanged against other trees (bench/compare-trees.ts).
 * A benchmark reports, it never gates: the exit code is always 0.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue as BullQueue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { AnyReactorDefinition, Runtime } from '../src/index.js';
import type * as RedisAdapters from '../src/redis.js';
import { summarizeProfile } from './cpu-profile.js';
import type { ProfileSummary } from './cpu-profile.js';
import {
  benchFile,
  cpuSecondsOf,
  fmt,
  loadAverage,
  machineLine,
  median,
  monotonicMs,
  ownCpuSeconds,
  pad,
  runBench,
  sleep,
  startRedis,
  startTsxProcess,
  stopChild,
  whenReady,
} from './support.js';
import type { BenchChild, RedisServer } from './support.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const RUNS = Number(process.env['BENCH_RUNS'] ?? 1000);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 3000);
const PROFILE = process.env['BENCH_PROFILE'] !== '0';
const PROF_INTERVAL_US = Number(process.env['BENCH_PROF_INTERVAL_US'] ?? 250);
const JSON_OUT = process.env['BENCH_JSON'];
const COMMANDSTATS = process.env['BENCH_COMMANDSTATS'] === '1';
/**
 * `dist`: workload A's worker and caller run the built package (`npm run build` first) on plain
 * Node, as an application does; by default both run the sources through tsx, which adds esbuild's
 * `__name` helper to each closure of xreactor's code (not to node_modules').
 */
const LIB = process.env['BENCH_LIB'] === 'dist' ? 'dist' : 'src';
const STEPS = 10;
/** Worker concurrency on both sides; issue 9's figure is at 10 (BENCH_CONCURRENCY changes it, to see whether a side is latency-bound). */
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
if (!Number.isSafeInteger(CONCURRENCY) || CONCURRENCY < 1) throw new Error(`BENCH_CONCURRENCY=${process.env['BENCH_CONCURRENCY']} is not a positive whole number of jobs (default 10)`);
const AWAIT_TIMEOUT_MS = 120_000;
/** Target from the issue: worker throughput at least that of raw BullMQ chained jobs. */
const TARGET_RATIO = 1.0;
/** The groups the report always shows, in this order (others follow, largest first). */
const NAMED_GROUPS = ['ioredis', 'bullmq', 'xstate', 'msgpackr', 'node: net/stream', 'node: other internals', 'GC', 'src/runtime', 'src/store', 'src/queue', 'machines', 'src/serialization'];

const REDIS_OPTIONS = { maxRetriesPerRequest: null } as const;
const logger = pino({ level: 'silent' });

let xr: typeof Xreactor;
let adapters: typeof RedisAdapters;
let reactor: AnyReactorDefinition;

/** CPU seconds used during a batch, by whom (from /proc and process.cpuUsage). */
interface Cpu {
  worker: number;
  caller: number;
  redis: number;
}

interface Batch {
  kind: 'A' | 'B';
  round: number;
  /** Runs (A) or chains (B) per second. */
  perSecond: number;
  totalS: number;
  /** Until every run() returned / every first job was added. */
  startedS: number;
  cpu: Cpu;
  /** Runs completed with the expected output / chains whose last job returned the expected value. */
  ok: number;
  note: string;
  loadAfter: string;
  window: { fromMs: number; toMs: number };
  /** Runs (A) or chains (B) per second of each warm-up batch, in order. */
  warmup: number[];
}

/** The sizes of the warm-up batches: WARMUP in batches of at most RUNS. */
function warmupSizes(): number[] {
  const sizes: number[] = [];
  for (let left = WARMUP; left > 0; left -= RUNS) sizes.push(Math.min(RUNS, left));
  return sizes;
}

let redisPid = 0;

function cpuNow(workerPid: number): Cpu {
  return { worker: cpuSecondsOf(workerPid) ?? Number.NaN, caller: ownCpuSeconds(), redis: cpuSecondsOf(redisPid) ?? Number.NaN };
}

function cpuSince(before: Cpu, workerPid: number): Cpu {
  const now = cpuNow(workerPid);
  return { worker: now.worker - before.worker, caller: now.caller - before.caller, redis: now.redis - before.redis };
}

/** `node [nodeArgs] --import tsx <file>` from the tree's root, like startTsxProcess (which takes no node flags such as --cpu-prof); without tsx for a `.mjs` file. */
function startNodeProcess(file: string, env: Readonly<Record<string, string>>, readyLine: string, nodeArgs: readonly string[]): BenchChild {
  const child = spawn(process.execPath, [...nodeArgs, ...(file.endsWith('.mjs') ? [] : ['--import', 'tsx']), file], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let markReady: () => void = () => undefined;
  let markFailed: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes(readyLine)) markReady();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  void exited.then((code) => markFailed(new Error(`${file} exited (${String(code)}) before it was ready:\n${output.slice(-2000)}`)));
  return { child, ready, exited, output: () => output };
}

/** BENCH_COMMANDSTATS=1: the Redis commands of one timed batch (every client), per unit of work. */
function printCommandStats(kind: string, stats: string): void {
  const rows = [...stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)].map(([, name, calls, usec]) => ({ name: name!, calls: Number(calls), usec: Number(usec) }));
  rows.sort((a, b) => b.calls - a.calls);
  const units = RUNS * STEPS;
  console.log(`  ${kind} Redis commands per step or job: ` + rows.map((r) => `${r.name} ${(r.calls / units).toFixed(2)} (${(r.usec / units).toFixed(1)} µs)`).join(', '));
}

async function info(redis: Redis, section: string): Promise<string> {
  return redis.info(section);
}

/** Turn on AOF with `appendfsync everysec` on the private server, and wait until the first rewrite is done. */
async function enableAof(admin: Redis): Promise<void> {
  await admin.config('SET', 'appendfsync', 'everysec');
  // No automatic rewrite (a fork and a rewrite of the whole file) inside a round: the benchmark
  // rewrites between rounds itself (a round with its warm-up grows the file by more than 100 %).
  await admin.config('SET', 'auto-aof-rewrite-percentage', '0');
  await admin.config('SET', 'appendonly', 'yes');
  await aofSettled(admin);
  const enabled = /aof_enabled:(\d)/.exec(await info(admin, 'persistence'))?.[1];
  if (enabled !== '1') throw new Error('AOF did not turn on');
}

async function aofSettled(admin: Redis): Promise<void> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    const persistence = await info(admin, 'persistence');
    if (/aof_rewrite_in_progress:0/.test(persistence) && /aof_rewrite_scheduled:0/.test(persistence) && !/aof_enabled:0/.test(persistence)) return;
    await sleep(50);
  }
  throw new Error('AOF rewrite did not finish within 60 s');
}

// ---------------------------------------------------------------------------------------------
// Workload A: xreactor

async function runBatch(runtime: Runtime, n: number): Promise<{ startedAt: number; dispatchedAt: number; ok: number; statuses: string[] }> {
  const startedAt = monotonicMs();
  const dispatched = await Promise.all(Array.from({ length: n }, () => runtime.run(reactor, undefined as never)));
  const dispatchedAt = monotonicMs();
  const results = await Promise.all(
    dispatched.map((d) => {
      if (d.status !== 'dispatched') throw new Error(`run() returned ${d.status}, not dispatched`);
      return runtime.awaitResult(d.executionId, { timeoutMs: AWAIT_TIMEOUT_MS });
    }),
  );
  const ok = results.filter((r) => r.status === 'completed' && (r as { value?: { n?: number } }).value?.n === STEPS - 1).length;
  return { startedAt, dispatchedAt, ok, statuses: results.map((r) => r.status) };
}

async function roundA(url: string, round: number, profileDir?: string): Promise<{ batch: Batch; profile?: ProfileSummary }> {
  const prefix = `wt-a${round}`;
  const queueName = `bench-wt-xr-${round}`;
  const env = { XREACTOR_BENCH_REDIS_URL: url, BENCH_PREFIX: prefix, BENCH_QUEUE: queueName, BENCH_CONCURRENCY: String(CONCURRENCY) };
  // BENCH_LIB=dist: the worker runs the built package on plain Node, as an application does.
  const file = benchFile(LIB === 'dist' ? 'fixtures/worker-throughput-worker-dist.mjs' : 'fixtures/worker-throughput-worker.ts');
  const worker =
    profileDir === undefined && LIB !== 'dist'
      ? startTsxProcess(file, env, 'bench worker ready')
      : startNodeProcess(file, env, 'bench worker ready', profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-interval=${PROF_INTERVAL_US}`]);
  let batch: Batch;
  try {
    await whenReady(worker, 'xreactor worker process');
    const pid = worker.child.pid!;
    // The profile is read after the worker has exited (below): it writes it on exit.
    batch = LIB === 'dist' ? await distRoundA(url, env, pid, round) : await srcRoundA(url, prefix, queueName, pid, round);
  } finally {
    await stopChild(worker.child, worker.exited, 15_000);
  }
  if (profileDir === undefined) return { batch };
  return { batch, profile: workerProfile(profileDir, worker, batch) };
}

/** Workload A's timed batch from a caller process on the built package (BENCH_LIB=dist). */
async function distRoundA(url: string, env: Readonly<Record<string, string>>, pid: number, round: number): Promise<Batch> {
  const stats = COMMANDSTATS ? new Redis(url, REDIS_OPTIONS) : undefined;
  try {
    const batch = await distCallerBatch(env, pid, round, async () => void (await stats?.config('RESETSTAT')));
    if (stats !== undefined) printCommandStats('A', await info(stats, 'commandstats'));
    return batch;
  } finally {
    stats?.disconnect();
  }
}

/** Workload A's timed batch from this process, on the sources. */
async function srcRoundA(url: string, prefix: string, queueName: string, pid: number, round: number): Promise<Batch> {
  const caller = new Redis(url, REDIS_OPTIONS);
  const store = adapters.createRedisStore({ redis: caller, prefix });
  const queue = adapters.createBullmqQueue({ connection: caller, queueName });
  const runtime = xr.createRuntime({ store, queue, worker: false, reactors: [reactor], logger });
  try {
    const warmup: number[] = [];
    for (const size of warmupSizes()) {
      const w = await runBatch(runtime, size);
      warmup.push(size / ((monotonicMs() - w.startedAt) / 1000));
    }
    if (COMMANDSTATS) await caller.config('RESETSTAT');
    const cpu = cpuNow(pid);
    const { startedAt, dispatchedAt, ok, statuses } = await runBatch(runtime, RUNS);
    if (COMMANDSTATS) printCommandStats('A', await info(caller, 'commandstats'));
    const endedAt = monotonicMs();
    const used = cpuSince(cpu, pid);
    const totalS = (endedAt - startedAt) / 1000;
    const other = statuses.filter((s) => s !== 'completed');
    return {
      kind: 'A',
      round,
      perSecond: RUNS / totalS,
      totalS,
      startedS: (dispatchedAt - startedAt) / 1000,
      cpu: used,
      ok,
      note: other.length === 0 ? '' : `${other.length} not completed (${[...new Set(other)].join(', ')})`,
      loadAfter: loadAverage(),
      window: { fromMs: startedAt, toMs: endedAt },
      warmup,
    };
  } finally {
    await runtime.close().catch(() => undefined);
    await queue.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    caller.disconnect();
  }
}

/** The worker's CPU profile over the timed window (the worker has exited and written it). */
function workerProfile(profileDir: string, worker: BenchChild, batch: Batch): ProfileSummary {
  // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is the main thread (tsx's
  // loader hooks run on a thread of their own, which writes a profile too).
  const files = readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[4] === '0');
  if (files.length !== 1) throw new Error(`expected one main-thread .cpuprofile in ${profileDir}, found ${files.length} (did the worker exit cleanly?)\n${worker.output().slice(-1000)}`);
  return summarizeProfile(join(profileDir, files[0]!), ROOT, batch.window.fromMs * 1000, batch.window.toMs * 1000);
}

/**
 * BENCH_LIB=dist: the timed batch from a caller process on plain Node and the built package
 * (`fixtures/worker-throughput-caller-dist.mjs`); its CPU is that process's, read from /proc
 * around the batch as the worker's and redis-server's are.
 */
async function distCallerBatch(env: Readonly<Record<string, string>>, workerPid: number, round: number, afterWarmup: () => Promise<void>): Promise<Batch> {
  const child = spawn(process.execPath, [benchFile('fixtures/worker-throughput-caller-dist.mjs')], {
    cwd: ROOT,
    env: { ...process.env, ...env, BENCH_RUNS: String(RUNS), BENCH_WARMUP: String(WARMUP) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  const seen = (marker: string) =>
    new Promise<string>((resolve, reject) => {
      const onData = () => {
        const at = output.indexOf(marker);
        if (at < 0) return;
        const end = output.indexOf('\n', at);
        if (end < 0) return;
        child.stdout.off('data', onData);
        resolve(output.slice(at + marker.length, end));
      };
      child.stdout.on('data', onData);
      child.once('exit', (code) => reject(new Error(`the dist caller exited (${String(code)}):\n${output.slice(-2000)}`)));
      onData();
    });
  child.stdout.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()));
  // The warm-up rates follow the marker (a caller of an older tree prints the marker alone).
  const warmLine = (await seen('bench caller warm')).trim();
  const warmup = warmLine === '' ? [] : (JSON.parse(warmLine) as { rates: number[] }).rates;
  await afterWarmup();
  const callerPid = child.pid!;
  const before = { worker: cpuSecondsOf(workerPid) ?? Number.NaN, caller: cpuSecondsOf(callerPid) ?? Number.NaN, redis: cpuSecondsOf(redisPid) ?? Number.NaN };
  const fromMs = monotonicMs();
  child.stdin.write('go\n');
  const reported = JSON.parse(await seen('bench caller result ')) as { totalS: number; startedS: number; ok: number; statuses: string[] };
  const toMs = monotonicMs();
  const cpu = {
    worker: (cpuSecondsOf(workerPid) ?? Number.NaN) - before.worker,
    caller: (cpuSecondsOf(callerPid) ?? Number.NaN) - before.caller,
    redis: (cpuSecondsOf(redisPid) ?? Number.NaN) - before.redis,
  };
  await new Promise((resolve) => child.once('exit', resolve));
  const other = reported.statuses.filter((s) => s !== 'completed');
  return {
    kind: 'A',
    round,
    perSecond: RUNS / reported.totalS,
    totalS: reported.totalS,
    startedS: reported.startedS,
    cpu,
    ok: reported.ok,
    note: other.length === 0 ? '' : `${other.length} not completed (${[...new Set(other)].join(', ')})`,
    loadAfter: loadAverage(),
    window: { fromMs, toMs },
    warmup,
  };
}

// ---------------------------------------------------------------------------------------------
// Workload B: chains of bare BullMQ jobs

/** Counts, per batch, the chains whose last job completed (from QueueEvents), and resolves when a batch is whole. */
class ChainWaiter {
  readonly #expect = new Map<string, { n: number; seen: Set<number>; ok: number; resolve: (at: number) => void }>();

  constructor(events: QueueEvents) {
    events.on('completed', ({ jobId, returnvalue }: { jobId: string; returnvalue: unknown }) => {
      const [batch, chain, step] = jobId.split('-');
      if (Number(step) !== STEPS - 1) return;
      const wanted = this.#expect.get(batch!);
      if (wanted === undefined || wanted.seen.has(Number(chain))) return;
      wanted.seen.add(Number(chain));
      if (Number(returnvalue) === STEPS) wanted.ok += 1;
      if (wanted.seen.size === wanted.n) wanted.resolve(monotonicMs());
    });
  }

  expect(batch: string, n: number): { done: Promise<number>; ok: () => number } {
    let resolve: (at: number) => void = () => undefined;
    const done = new Promise<number>((r) => (resolve = r));
    const entry = { n, seen: new Set<number>(), ok: 0, resolve };
    this.#expect.set(batch, entry);
    return { done, ok: () => entry.ok };
  }
}

async function chainBatch(
  queue: BullQueue,
  waiter: ChainWaiter,
  counter: Redis,
  batchName: string,
  n: number,
): Promise<{ startedAt: number; addedAt: number; endedAt: number; ok: number; note: string }> {
  const completedKey = `bull:${queue.name}:completed`;
  const completedBefore = await counter.zcard(completedKey);
  const { done, ok } = waiter.expect(batchName, n);
  // A safety net, not the measurement: if QueueEvents lost events (its stream is trimmed), the
  // completed set still tells when every job is done (checked every 250 ms).
  let lost = false;
  let stop = false;
  const net = (async () => {
    const deadline = Date.now() + AWAIT_TIMEOUT_MS;
    while (!stop) {
      await sleep(250);
      if (stop) return Number.NaN;
      if ((await counter.zcard(completedKey)) >= completedBefore + n * STEPS) {
        await sleep(250);
        if (stop) return Number.NaN;
        lost = true;
        return monotonicMs();
      }
      if (Date.now() > deadline) throw new Error(`bare BullMQ: ${n} chains not completed within ${AWAIT_TIMEOUT_MS} ms`);
    }
    return Number.NaN;
  })();
  const startedAt = monotonicMs();
  await Promise.all(Array.from({ length: n }, (_, chain) => queue.add('link', { batch: batchName, chain, step: 0, value: 0 }, { jobId: `${batchName}-${chain}-0` })));
  const addedAt = monotonicMs();
  const endedAt = await Promise.race([done, net]);
  stop = true;
  await net.catch(() => undefined);
  return { startedAt, addedAt, endedAt, ok: ok(), note: lost ? 'QueueEvents lost events: end taken from the completed set (±250 ms)' : '' };
}

async function roundB(url: string, round: number): Promise<Batch> {
  const queueName = `bench-wt-bare-${round}`;
  const worker = startTsxProcess(
    benchFile('fixtures/chain-bullmq-worker.ts'),
    { XREACTOR_BENCH_REDIS_URL: url, BENCH_QUEUE: queueName, BENCH_CONCURRENCY: String(CONCURRENCY), BENCH_CHAIN_LENGTH: String(STEPS) },
    'bench worker ready',
  );
  try {
    await whenReady(worker, 'bare BullMQ chain worker process');
    const pid = worker.child.pid!;
    const caller = new Redis(url, REDIS_OPTIONS);
    const eventsConnection = new Redis(url, REDIS_OPTIONS);
    const queue = new BullQueue(queueName, { connection: caller, defaultJobOptions: { removeOnComplete: { age: 3600 } } });
    // A fresh queue: read its event stream from the start, so no event before the first XREAD is missed.
    const events = new QueueEvents(queueName, { connection: eventsConnection, lastEventId: '0-0' });
    try {
      await events.waitUntilReady();
      const waiter = new ChainWaiter(events);
      const warmup: number[] = [];
      for (const [i, size] of warmupSizes().entries()) {
        const w = await chainBatch(queue, waiter, caller, `w${i}`, size);
        warmup.push(size / ((w.endedAt - w.startedAt) / 1000));
      }
      if (COMMANDSTATS) await caller.config('RESETSTAT');
      const cpu = cpuNow(pid);
      const b = await chainBatch(queue, waiter, caller, 'm', RUNS);
      if (COMMANDSTATS) printCommandStats('B', await info(caller, 'commandstats'));
      const used = cpuSince(cpu, pid);
      const totalS = (b.endedAt - b.startedAt) / 1000;
      return {
        kind: 'B',
        round,
        perSecond: RUNS / totalS,
        totalS,
        startedS: (b.addedAt - b.startedAt) / 1000,
        cpu: used,
        ok: b.ok,
        note: b.note,
        loadAfter: loadAverage(),
        window: { fromMs: b.startedAt, toMs: b.endedAt },
        warmup,
      };
    } finally {
      await events.close().catch(() => undefined);
      await queue.close().catch(() => undefined);
      eventsConnection.disconnect();
      caller.disconnect();
    }
  } finally {
    await stopChild(worker.child, worker.exited, 15_000);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function range(values: readonly number[], digits = 0): string {
  return `${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)}`;
}

/** µs of CPU per step (A) or per job (B): both do RUNS × STEPS units of work. */
const perUnitUs = (seconds: number) => (seconds * 1e6) / (RUNS * STEPS);

function printProfile(profile: ProfileSummary, cpuSeconds: number): void {
  const steps = RUNS * STEPS;
  const busy = profile.busyUs;
  const cpuPerStep = perUnitUs(cpuSeconds);
  const byName = new Map(profile.groups.map((g) => [g.group, g.us]));
  const rest = profile.groups.filter((g) => !NAMED_GROUPS.includes(g.group));
  console.log('');
  console.log(`Where the worker's CPU goes per step (self time, profiled round, timed window only; ${fmt(PROF_INTERVAL_US, 0)} µs sampling):`);
  console.log(
    `  worker CPU per step: ${fmt(cpuPerStep, 1)} µs in this profiled round (process CPU from /proc, all threads, ÷ ${fmt(steps, 0)} steps; profiling adds to it). ` +
      `The profile's ticks are wall time: the main thread was not idle for ${fmt(busy / steps, 1)} µs per step (including time it waited for a core) ` +
      `and idle ${fmt((100 * profile.idleUs) / (profile.idleUs + busy), 0)} % of the window. Shares are of the not-idle ticks; µs/step = share × CPU per step.`,
  );
  console.log('  group                                  |  share | µs/step');
  console.log('  ---------------------------------------|--------|--------');
  for (const { group, us } of [...NAMED_GROUPS.map((group) => ({ group, us: byName.get(group) ?? 0 })), ...rest]) {
    console.log(`  ${group.padEnd(38)} | ${pad(fmt((100 * us) / busy, 1), 4)} % | ${pad(fmt((us / busy) * cpuPerStep, 1), 7)}`);
  }
  console.log('  top functions by self time:');
  for (const { fn, group, us } of profile.top) console.log(`    ${pad(fmt((100 * us) / busy, 1), 5)} %  ${fn}  [${group}]`);
}

async function main(): Promise<void> {
  console.log(`xreactor bench: worker throughput, ${fmt(RUNS, 0)} × ${STEPS}-step background runs vs ${fmt(RUNS, 0)} chains of ${STEPS} bare BullMQ jobs, one worker process each (concurrency ${CONCURRENCY})`);
  console.log(machineLine());
  console.log(`tree: ${ROOT}`);
  console.log(
    `${ROUNDS} rounds of A (xreactor) and B (bare BullMQ), interleaved A, B, A, B, …, each with its own prefix / queue and worker process, ` +
      `after ${WARMUP} warm-up runs / chains in that process (batches of ${RUNS})${PROFILE ? '; then one profiled A round' : ''}`,
  );
  console.log(`load average at start: ${loadAverage()} (other processes on the machine inflate every figure; the ratio holds up better)`);

  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  const keepProfile = process.env['BENCH_PROFILE_DIR'];
  // The directory to keep profiles in is made when missing.
  if (PROFILE && keepProfile !== undefined) mkdirSync(keepProfile, { recursive: true });
  const profileDir = !PROFILE ? undefined : keepProfile !== undefined ? mkdtempSync(join(keepProfile, 'worker-throughput-')) : mkdtempSync(join(tmpdir(), 'xreactor-cpuprof-'));
  try {
    server = await startRedis();
    [xr, adapters] = await Promise.all([import('../src/index.js'), import('../src/redis.js')]);
    reactor = (await import('./fixtures/worker-throughput-reactor.js')).benchWorkerTenSteps;
    admin = new Redis(server.url, REDIS_OPTIONS);
    await enableAof(admin);
    const serverInfo = await info(admin, 'server');
    redisPid = Number(/process_id:(\d+)/.exec(serverInfo)?.[1]);
    const fsync = await admin.config('GET', 'appendfsync');
    console.log(
      `redis-server ${/redis_version:(\S+)/.exec(serverInfo)?.[1] ?? '?'} on 127.0.0.1:${server.port} (private; appendonly yes, appendfsync ${fsync[1]}, RDB off); ` +
        `ioredis clients with maxRetriesPerRequest: null`,
    );

    const batches: Batch[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const kind of ['A', 'B'] as const) {
        const batch = kind === 'A' ? (await roundA(server.url, round)).batch : await roundB(server.url, round);
        batches.push(batch);
        console.log(
          `  round ${round} ${kind}: ${fmt(batch.perSecond, 0)} ${kind === 'A' ? 'runs' : 'chains'}/s (${fmt(batch.totalS, 2)} s; ${batch.ok}/${RUNS} ok${batch.note ? '; ' + batch.note : ''}; load ${batch.loadAfter}; ` +
            `warm-up batches ${batch.warmup.map((r) => fmt(r, 0)).join(' → ') || 'none'})`,
        );
        await admin.bgrewriteaof();
        await aofSettled(admin);
      }
    }
    let profiled: { batch: Batch; profile?: ProfileSummary } | undefined;
    if (profileDir !== undefined) {
      profiled = await roundA(server.url, ROUNDS + 1, profileDir);
      console.log(`  profiled A round: ${fmt(profiled.batch.perSecond, 0)} runs/s (${fmt(profiled.batch.totalS, 2)} s; ${profiled.batch.ok}/${RUNS} ok; not in the medians)`);
    }

    // ---- report
    const of = (kind: 'A' | 'B') => batches.filter((b) => b.kind === kind);
    const a = of('A');
    const b = of('B');
    const aRate = median(a.map((x) => x.perSecond));
    const bRate = median(b.map((x) => x.perSecond));
    const ratio = aRate / bRate;
    const pairRatios = a.map((x, i) => x.perSecond / b[i]!.perSecond);
    console.log('');
    const roundsWidth = Math.max(18, ROUNDS * 6);
    console.log(` kind                                        | per second, median | ${'rounds'.padEnd(roundsWidth)} | steps or jobs/s | start all (s) | worker CPU µs/step | caller µs/step | redis µs/step`);
    console.log(`---------------------------------------------|--------------------|-${'-'.repeat(roundsWidth)}-|-----------------|---------------|--------------------|----------------|--------------`);
    for (const [label, list, rate] of [
      [`A xreactor ${STEPS}-step background runs`, a, aRate],
      [`B bare BullMQ chains of ${STEPS} jobs`, b, bRate],
    ] as const) {
      const cpu = (pick: (c: Cpu) => number) => pad(fmt(median(list.map((x) => perUnitUs(pick(x.cpu)))), 1), 14);
      console.log(
        ` ${label.padEnd(43)} | ${pad(fmt(rate, 0), 18)} | ${list
          .map((x) => fmt(x.perSecond, 0))
          .join(' / ')
          .padEnd(roundsWidth)} | ${pad(fmt(rate * STEPS, 0), 15)} | ${pad(fmt(median(list.map((x) => x.startedS)), 2), 13)} | ${pad(cpu((c) => c.worker), 18)} | ${cpu((c) => c.caller)} | ${cpu((c) => c.redis)}`,
      );
    }
    const spread = (list: readonly Batch[]) => (Math.max(...list.map((x) => x.perSecond)) / Math.min(...list.map((x) => x.perSecond)) - 1) * 100;
    console.log(
      `(CPU per step for A, per job for B: both are ${fmt(RUNS * STEPS, 0)} units of work; spread max/min over rounds: A ${fmt(spread(a), 0)} %, B ${fmt(spread(b), 0)} %; ` +
        `outcomes: A ${a.reduce((s, x) => s + x.ok, 0)}/${a.length * RUNS} ok, B ${b.reduce((s, x) => s + x.ok, 0)}/${b.length * RUNS} ok)`,
    );
    // CPU cost per unit of throughput: far steadier than the rates when other processes share the cores.
    const cpuPer = (list: readonly Batch[], pick: (c: Cpu) => number) => median(list.map((x) => (pick(x.cpu) * 1e3) / RUNS));
    const cpuRatioWorker = cpuPer(b, (c) => c.worker) / cpuPer(a, (c) => c.worker);
    const all = (c: Cpu) => c.worker + c.caller + c.redis;
    const cpuRatioAll = cpuPer(b, all) / cpuPer(a, all);
    console.log(
      `CPU per run (A) / per chain (B), ms: worker ${fmt(cpuPer(a, (c) => c.worker), 2)} / ${fmt(cpuPer(b, (c) => c.worker), 2)}, ` +
        `worker + caller + redis-server ${fmt(cpuPer(a, all), 2)} / ${fmt(cpuPer(b, all), 2)}. ` +
        `As a throughput ratio if CPU were the only limit (B's CPU per chain ÷ A's per run): worker alone ${fmt(cpuRatioWorker, 2)}×, all three ${fmt(cpuRatioAll, 2)}×`,
    );
    console.log('');
    console.log(
      `HEADLINE: xreactor runs/s ÷ bare BullMQ chains/s = ${fmt(ratio, 2)}× (median ${fmt(aRate, 0)} ÷ median ${fmt(bRate, 0)}); ` +
        `round by round ${pairRatios.map((r) => fmt(r, 2)).join(' / ')} (${range(pairRatios, 2)})`,
    );
    console.log(`${ratio >= TARGET_RATIO ? 'TARGET MET' : 'TARGET MISSED'}: worker throughput ≥ ${fmt(TARGET_RATIO, 1)}× raw BullMQ chained jobs (${fmt(ratio, 2)}×)`);

    if (profiled?.profile !== undefined) printProfile(profiled.profile, profiled.batch.cpu.worker);
    console.log('');
    console.log(`load average at end: ${loadAverage()}`);

    if (JSON_OUT !== undefined) {
      writeFileSync(
        JSON_OUT,
        JSON.stringify(
          {
            tree: ROOT,
            runs: RUNS,
            steps: STEPS,
            rounds: ROUNDS,
            aRunsPerS: a.map((x) => x.perSecond),
            bChainsPerS: b.map((x) => x.perSecond),
            aMedian: aRate,
            bMedian: bRate,
            ratio,
            pairRatios,
            cpuRatioWorker,
            cpuRatioAll,
            workerUsPerStep: median(a.map((x) => perUnitUs(x.cpu.worker))),
            callerUsPerStep: median(a.map((x) => perUnitUs(x.cpu.caller))),
            redisUsPerStep: median(a.map((x) => perUnitUs(x.cpu.redis))),
            bareWorkerUsPerJob: median(b.map((x) => perUnitUs(x.cpu.worker))),
            bareRedisUsPerJob: median(b.map((x) => perUnitUs(x.cpu.redis))),
            profile: profiled?.profile === undefined ? undefined : { ...profiled.profile, steps: RUNS * STEPS, workerCpuUsPerStep: perUnitUs(profiled.batch.cpu.worker) },
            ok: batches.every((x) => x.ok === RUNS),
          },
          null,
          2,
        ),
      );
    }
  } finally {
    admin?.disconnect();
    await server?.stop();
    if (profileDir !== undefined && keepProfile === undefined) rmSync(profileDir, { recursive: true, force: true });
    else if (profileDir !== undefined) console.log(`profiles kept in ${profileDir} (open the .cpuprofile in Chrome DevTools)`);
  }
}

runBench(main);
