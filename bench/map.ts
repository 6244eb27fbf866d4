/**
 * Fan-out maps against a bare BullMQ flow: a map of N elements fanned out to `xreactor worker`
 * processes, forward, and forward then a full rollback, beside a BullMQ `FlowProducer` parent
 * with N children on the same worker processes' count and concurrency.
 *
 *   npx tsx bench/map.ts
 *     BENCH_ROUNDS=5 (measured rounds per configuration, after the warm-up batches of each kind)
 *     BENCH_BUNDLE_SIZE (the xreactor workers' --bundle-size; unset: the adapter's default, 10)
 *     BENCH_ELEMENTS=1000   BENCH_WORKERS=1,4   BENCH_CONCURRENCY=10
 *     BENCH_WARMUP=3000 (elements of each kind before the measured rounds of a phase, in batches of at most
 *       BENCH_ELEMENTS: a worker's code reaches its steady speed only after some thousands of elements)
 *     BENCH_LARGE=10000 (0: skip)   BENCH_LARGE_ROUNDS=1
 *     BENCH_INLINE_ELEMENTS=1000 (sizes of the inline reference, default BENCH_ELEMENTS; 0: skip it)   BENCH_MAP_BATCH_SIZE=50
 *     BENCH_ACCOUNTING=0 (skip the store-call accounting pass)   BENCH_PROFILE_DIR=<dir> (keep its profiles there)   BENCH_LOG_LEVEL=info (the workers')
 *     BENCH_FLOOR=0 (skip the runtime-alone pass)   BENCH_FLOOR_ROUNDS=5
 *     BENCH_JSON=<file>   BENCH_WORKER_NODE_ARGS='<node options for the xreactor workers>' (e.g. --cpu-prof --cpu-prof-dir=<dir>)
 *     BENCH_LIB=dist (default: the workers, the caller and the runtime-alone pass run the built
 *       package on plain Node, as an application deploys it; the benchmark runs `npm run build`
 *       first) or src (the sources through tsx, which adds esbuild's `__name` helper to every
 *       closure of xreactor's code; the accounting pass's counting worker always runs src)
 *
 * One private redis-server (no persistence). Per worker count W (1, then 4):
 *   - W `xreactor worker --concurrency 10` processes started through the real CLI
 *     (bench/fixtures/map-reactors.ts) on their own queue and prefix, and W bare BullMQ worker
 *     processes (bench/fixtures/bare-bullmq-worker.ts, concurrency 10, processor returns 1) on
 *     another queue. Both sets stay up for the whole phase; the set not measured is idle.
 *   - Kinds, in rounds whose order rotates:
 *       bare      one `FlowProducer.add` of a parent with N children (one queue, completed jobs
 *                 kept an hour as xreactor's queue keeps them), from before `add` to the parent
 *                 completed (`job.waitUntilFinished` on QueueEvents);
 *       forward   `run()` of `.map('m', element, { source, fanOut: true })` over N numbers and
 *                 nothing after it, from `run()` (which returns `dispatched`) to `awaitResult()`
 *                 returning `completed`;
 *       rollback  the same map, then a step `after` that takes CLOCK_MONOTONIC as its first
 *                 statement and fails: forward = `run()` → `after`, rollback = `after` → the
 *                 root's `awaitResult()` (`failed`, every element undone);
 *       inline    the `rollback` reactor with the map inline, run by this process alone (`run()`
 *                 returns at the root's end) on a queue no worker consumes, over each
 *                 BENCH_INLINE_ELEMENTS size: the reference of the rollback speed-up;
 *       small     `rollback` over each BENCH_INLINE_ELEMENTS size other than N (for the speed-up
 *                 at equal size).
 *   - The element reactor is one trivial step with an undo. Each map job runs in a worker; this
 *     process is the caller (`run()`, `awaitResult()`), as an application's would be.
 * Then, with the largest W, BENCH_LARGE_ROUNDS pairs of bare / rollback with BENCH_LARGE
 * elements. Then (BENCH_ACCOUNTING) one forward and one rollback batch of N against one worker
 * whose store counts its calls (bench/fixtures/map-counting-worker.ts): store calls per element.
 * Then (BENCH_FLOOR) the runtime alone: the same maps in this process on the memory store and
 * the in-process queue (worker concurrency as the workers'), with no Redis and no BullMQ; its CPU
 * per element is printed beside the single worker's budget the targets leave.
 *
 * Every batch also records Redis' commands (`CONFIG RESETSTAT` before, `INFO commandstats`
 * after, every client: idle workers' polling included), CPU time from /proc (this process, the
 * worker processes, redis-server), and after it, outside the timing, the map actor's commits
 * (its revision), throws and rollback throws, and the commits of one element and one rollback
 * actor. Headline: median over rounds of each figure, as a ratio to the bare flow's median in
 * the same phase. Targets (issue): forward ≤ 1.5× the bare flow, rollback ≤ 2× the bare flow.
 * A benchmark reports, it never gates: the exit code is always 0.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FlowProducer, Queue as BullQueue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { AnyReactorDefinition, Runtime, Store } from '../src/index.js';
import type * as RedisAdapters from '../src/redis.js';
import { summarizeProfile } from './cpu-profile.js';
import type { ProfileSummary } from './cpu-profile.js';
import { countingStore, mapActorKind } from './fixtures/counting-store.js';
import type * as Fixtures from './fixtures/map-reactors.js';
import {
  benchFile,
  cpuSecondsOf,
  fmt,
  loadAverage,
  loadBuiltMapBench,
  machineLine,
  median,
  monotonicMs,
  ownCpuSeconds,
  pad,
  parseCommandStats,
  runBareFlow,
  runBench,
  sleep,
  startRedis,
  startCliWorker,
  startTsxProcess,
  startTsxProcessWithFlags,
  stopChild,
  targetLine,
  whenReady,
} from './support.js';
import type { BenchChild, CliWorker, RedisServer } from './support.js';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 5);
const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const WORKER_COUNTS = (process.env['BENCH_WORKERS'] ?? '1,4').split(',').map(Number);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 3000);
/** The xreactor workers' `--bundle-size` (unset: the adapter's default). */
const BUNDLE_SIZE = process.env['BENCH_BUNDLE_SIZE'];
const LARGE = Number(process.env['BENCH_LARGE'] ?? 10_000);
const LARGE_ROUNDS = Number(process.env['BENCH_LARGE_ROUNDS'] ?? 1);
/** Sizes of the inline reference and of the fan-out rollbacks it is compared with (its rollback grows faster than linearly: see docs/performance.md). */
const INLINE_SIZES = (process.env['BENCH_INLINE_ELEMENTS'] ?? String(ELEMENTS))
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const ACCOUNTING = process.env['BENCH_ACCOUNTING'] !== '0';
const FLOOR = process.env['BENCH_FLOOR'] !== '0';
const FLOOR_ROUNDS = Number(process.env['BENCH_FLOOR_ROUNDS'] ?? 5);
/** The workers' `--log-level`: the CLI's default, info, writes a line per step (the bare workers write nothing). */
const LOG_LEVEL = process.env['BENCH_LOG_LEVEL'] ?? 'info';
const JSON_OUT = process.env['BENCH_JSON'];
/** Node options for the xreactor workers, space-separated (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`, or `--log-deopt --logfile=/tmp/v8.log`). */
const WORKER_NODE_ARGS = (process.env['BENCH_WORKER_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');
const LIB = process.env['BENCH_LIB'] === 'src' ? 'src' : 'dist';
if (!['src', 'dist', undefined].includes(process.env['BENCH_LIB'])) throw new Error(`BENCH_LIB=${process.env['BENCH_LIB']} is neither dist (the built package, the default) nor src (the sources through tsx)`);
const TIMEOUT_MS = 600_000;
const PROF_INTERVAL_US = 250;
/** The counting worker's reset channel (bench/fixtures/map-counting-worker.ts). */
const RESET_CHANNEL = 'bench:map:reset';
const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** Targets from the issue: forward within 1.5× of the bare flow, rollback within 2×. */
const FORWARD_TARGET = 1.5;
const ROLLBACK_TARGET = 2.0;

const REDIS_OPTIONS = { maxRetriesPerRequest: null } as const;
const logger = pino({ level: 'silent' });

let xr: typeof Xreactor;
let adapters: typeof RedisAdapters;
let fixtures: typeof Fixtures;

type Kind = 'bare' | 'forward' | 'rollback' | 'small' | 'inline';

/** CPU seconds used during a batch, by whom. */
interface Cpu {
  caller: number;
  xrWorkers: number;
  bareWorkers: number;
  redis: number;
}

/** What the map actor and its actors committed in one batch (read after it). */
interface Actors {
  mapCommits: number;
  throws: number;
  rollbackThrows: number;
  rootCommits: number;
  elementCommits: number;
  rollbackActorCommits: number;
}

interface Sample {
  kind: Kind;
  workers: number;
  elements: number;
  round: number;
  totalMs: number;
  /** bare: = totalMs; forward: = totalMs; rollback kinds: run() → `after`. */
  forwardMs: number;
  /** rollback kinds: `after` → the root's end. */
  rollbackMs: number;
  ok: boolean;
  note: string;
  cpu: Cpu;
  commands: Map<string, { calls: number; usec: number }>;
  /** Jobs the batch's queue completed (BullMQ's completed set grew by), and jobs a worker handed back because their actor was held by another process (`execution_busy`, retried with backoff). */
  jobs: number;
  /** The completed jobs by what they address (`start element`, `start rollback actor`, `wake map`, ...). */
  jobKinds: Map<string, number>;
  busy: number;
  actors?: Actors;
  /** Map batches, wall clock from `run()` (ms; the stored times are whole ms): the map's last event, the root's last commit, `awaitResult()` returned. */
  ends?: { map: number; root: number; returned: number };
  load: string;
}

/** Pids whose CPU a batch accounts for. */
const pids = { xr: [] as number[], bare: [] as number[], redis: 0 };

function cpuNow(): Cpu {
  const sum = (list: readonly number[]) => list.reduce((s, pid) => s + (cpuSecondsOf(pid) ?? Number.NaN), 0);
  return { caller: ownCpuSeconds(), xrWorkers: sum(pids.xr), bareWorkers: sum(pids.bare), redis: cpuSecondsOf(pids.redis) ?? Number.NaN };
}

function cpuSince(before: Cpu): Cpu {
  const now = cpuNow();
  return { caller: now.caller - before.caller, xrWorkers: now.xrWorkers - before.xrWorkers, bareWorkers: now.bareWorkers - before.bareWorkers, redis: now.redis - before.redis };
}

/** The services one phase measures with. */
interface Phase {
  workers: number;
  fleet: Fleet;
  xrQueue: string;
  admin: Redis;
  caller: Redis;
  store: Store;
  runtime: Runtime;
  inlineRuntime: Runtime | undefined;
  flow: FlowProducer;
  bareQueue: string;
  events: QueueEvents;
}

let flowSerial = 0;

const BUSY = 'execution_busy';

/** What an xreactor job id addresses (ids are `<actor>.<purpose>[.<n>]`, bench/fixtures/map-reactors.ts's map step is `m`). */
function jobKind(id: string): string {
  // A bundle of sibling jobs (`%b<parts>-<digest>.<first part's id>`, bullmq-bundles.ts): its first part's kind.
  const bundle = /^%b(\d+)-[0-9a-f]+\.(.*)$/.exec(id);
  if (bundle !== null) return `bundles of ${bundle[1]}: ${jobKind(bundle[2]!)}`;
  const match = /^(.*)\.(start|wake|timer)(\..*)?$/.exec(id);
  if (match === null) return 'other';
  const actor = match[1]!;
  const what = /\.m\.rb-\d+$/.test(actor) ? 'rollback actor' : /\.m\.\d+$/.test(actor) ? 'element' : /\.m$/.test(actor) ? 'map' : 'root';
  return `${match[2]} ${what}`;
}
const busyCount = (fleet: Fleet) => fleet.xr.reduce((n, w) => n + w.count(BUSY), 0);

async function measured(
  phase: Phase,
  kind: Kind,
  elements: number,
  round: number,
  work: () => Promise<Omit<Sample, 'kind' | 'workers' | 'elements' | 'round' | 'cpu' | 'commands' | 'jobs' | 'jobKinds' | 'busy' | 'load'>>,
): Promise<Sample> {
  const completedKey = `bull:${kind === 'bare' ? phase.bareQueue : phase.xrQueue}:completed`;
  const jobsBefore = await phase.admin.zcard(completedKey);
  const since = Date.now();
  const busyBefore = busyCount(phase.fleet);
  await phase.admin.config('RESETSTAT');
  const cpu = cpuNow();
  const result = await work();
  const used = cpuSince(cpu);
  const commands = parseCommandStats(await phase.admin.info('commandstats'));
  const jobs = (await phase.admin.zcard(completedKey)) - jobsBefore;
  // The completed set's scores are the jobs' finish times (ms).
  const jobKinds = new Map<string, number>();
  for (const id of await phase.admin.zrangebyscore(completedKey, since, '+inf')) jobKinds.set(jobKind(id), (jobKinds.get(jobKind(id)) ?? 0) + 1);
  return { kind, workers: phase.workers, elements, round, ...result, cpu: used, commands, jobs, jobKinds, busy: busyCount(phase.fleet) - busyBefore, load: loadAverage() };
}

async function bareBatch(phase: Phase, n: number, round: number): Promise<Sample> {
  return measured(phase, 'bare', n, round, async () => {
    const id = `flow-${(flowSerial += 1)}`;
    const start = monotonicMs();
    const value = await runBareFlow(phase.flow, phase.events, phase.bareQueue, n, id, TIMEOUT_MS);
    const totalMs = monotonicMs() - start;
    return { totalMs, forwardMs: totalMs, rollbackMs: Number.NaN, ok: value === 1, note: value === 1 ? '' : `parent returned ${JSON.stringify(value)}` };
  });
}

async function actorsOf(store: Store, root: string): Promise<Actors | undefined> {
  const map = `${root}.m`;
  const [rootLoaded, mapLoaded, element, rollbackActor] = await Promise.all([store.load(root), store.load(map), store.load(`${map}.0`), store.load(`${map}.rb-0`)]);
  if (mapLoaded === undefined || rootLoaded === undefined) return undefined;
  const context = mapLoaded.snapshot.context as { throws: number; rollback: { throws: number } | null };
  return {
    mapCommits: mapLoaded.revision,
    throws: context.throws,
    rollbackThrows: context.rollback?.throws ?? 0,
    rootCommits: rootLoaded.revision,
    elementCommits: element?.revision ?? Number.NaN,
    rollbackActorCommits: rollbackActor?.revision ?? Number.NaN,
  };
}

function itemsOf(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

async function mapBatch(phase: Phase, kind: 'forward' | 'rollback' | 'small', n: number, round: number): Promise<Sample> {
  const reactor: AnyReactorDefinition = kind === 'forward' ? fixtures.benchMapForward : fixtures.benchMapRollback;
  let root = '';
  let startWall = 0;
  let returnedWall = 0;
  const sample = await measured(phase, kind, n, round, async () => {
    const items = itemsOf(n);
    startWall = Date.now();
    const start = monotonicMs();
    const dispatched = await phase.runtime.run(reactor, { items });
    root = dispatched.executionId;
    const result = await phase.runtime.awaitResult(root, { timeoutMs: TIMEOUT_MS });
    const end = monotonicMs();
    returnedWall = Date.now();
    if (dispatched.status !== 'dispatched') return { totalMs: end - start, forwardMs: Number.NaN, rollbackMs: Number.NaN, ok: false, note: `run() returned ${dispatched.status}` };
    if (kind === 'forward') return { totalMs: end - start, forwardMs: end - start, rollbackMs: Number.NaN, ok: result.status === 'completed', note: result.status === 'completed' ? '' : `ended ${result.status}` };
    const failedAt = Number(await phase.caller.get(fixtures.failedAtKey(root))) / 1e6;
    return { totalMs: end - start, forwardMs: failedAt - start, rollbackMs: end - failedAt, ok: result.status === 'failed' && (result as { step?: string }).step === 'after', note: result.status === 'failed' ? '' : `ended ${result.status}` };
  });
  // Outside the timing: every element completed (and, for a rollback, was undone), and what the actors committed.
  const view = await phase.runtime.find(root);
  const progress = view.maps[0];
  const undone = progress?.rollback?.undone ?? 0;
  if (progress?.outcomes.completed !== n || (kind !== 'forward' && undone !== n)) {
    sample.ok = false;
    sample.note += ` completed ${progress?.outcomes.completed ?? '?'}/${n}, undone ${undone}/${kind === 'forward' ? 0 : n}`;
  }
  sample.actors = await actorsOf(phase.store, root);
  const mapLoaded = await phase.store.load(`${root}.m`);
  const mapAt = (mapLoaded?.snapshot.context as { updatedAt?: number } | undefined)?.updatedAt ?? Number.NaN;
  sample.ends = { map: mapAt - startWall, root: view.updatedAt - startWall, returned: returnedWall - startWall };
  return sample;
}

async function inlineBatch(phase: Phase, n: number, round: number): Promise<Sample> {
  const runtime = phase.inlineRuntime!;
  return measured(phase, 'inline', n, round, async () => {
    const start = monotonicMs();
    const result = await runtime.run(fixtures.benchMapInlineRollback, { items: itemsOf(n) });
    const end = monotonicMs();
    const failedAt = Number(await phase.caller.get(fixtures.failedAtKey(result.executionId))) / 1e6;
    const view = await runtime.find(result.executionId);
    const undone = view.maps[0]?.rollback?.undone ?? 0;
    const ok = result.status === 'failed' && undone === n;
    return { totalMs: end - start, forwardMs: failedAt - start, rollbackMs: end - failedAt, ok, note: ok ? '' : `ended ${result.status}, undone ${undone}/${n}` };
  });
}

function sampleLine(s: Sample): string {
  const times = s.kind === 'bare' || s.kind === 'forward' ? `${fmt(s.totalMs, 0)} ms` : `forward ${fmt(s.forwardMs, 0)} ms + rollback ${fmt(s.rollbackMs, 0)} ms`;
  const jobs = s.kind === 'inline' ? '' : `; ${fmt(s.jobs / s.elements, 2)} jobs per ${s.kind === 'bare' ? 'child' : 'element'}${s.kind === 'bare' ? '' : `, ${s.busy} busy hand-backs`}`;
  return `  ${s.workers}w round ${s.round} ${s.kind.padEnd(8)} ${String(s.elements).padStart(6)}: ${times}${jobs}${s.ok ? '' : ' NOT OK: ' + s.note} (load ${s.load})`;
}

// ---------------------------------------------------------------------------------------------
// Processes

/** Wait until `count` BullMQ workers consume `queueName` (from CLIENT LIST, as BullMQ names its connections). */
async function queueWorkers(connection: Redis, queueName: string, count: number): Promise<void> {
  const queue = new BullQueue(queueName, { connection });
  try {
    for (const deadline = Date.now() + 60_000; (await queue.getWorkersCount()) < count; ) {
      if (Date.now() > deadline) throw new Error(`${count} workers did not start consuming ${queueName} within 60 s`);
      await sleep(100);
    }
  } finally {
    await queue.close();
  }
}

interface Fleet {
  xr: CliWorker[];
  bare: BenchChild[];
}

function startFleet(url: string, workers: number, xrQueue: string, prefix: string, bareQueue: string): Fleet {
  const env = { XREACTOR_BENCH_REDIS_URL: url };
  const xrWorkers = Array.from({ length: workers }, () =>
    startCliWorker({
      redisUrl: url,
      lib: LIB,
      modules: [benchFile(LIB === 'dist' ? 'fixtures/map-reactors-dist.mjs' : 'fixtures/map-reactors.ts')],
      args: ['--queue', xrQueue, '--prefix', prefix, '--concurrency', String(CONCURRENCY), ...(BUNDLE_SIZE === undefined ? [] : ['--bundle-size', BUNDLE_SIZE])],
      env,
      logLevel: LOG_LEVEL,
      markers: [BUSY],
      nodeArgs: WORKER_NODE_ARGS,
    }),
  );
  const bare = Array.from({ length: workers }, () =>
    startTsxProcess(benchFile('fixtures/bare-bullmq-worker.ts'), { ...env, BENCH_QUEUE: bareQueue, BENCH_CONCURRENCY: String(CONCURRENCY) }, 'bench worker ready'),
  );
  return { xr: xrWorkers, bare };
}

async function stopFleet(fleet: Fleet | undefined): Promise<void> {
  if (fleet === undefined) return;
  await Promise.all([...fleet.xr, ...fleet.bare].map((c) => stopChild(c.child, c.exited, 15_000)));
}

// ---------------------------------------------------------------------------------------------
// Report

const of = (samples: readonly Sample[], kind: Kind, workers: number, elements: number) => samples.filter((s) => s.kind === kind && s.workers === workers && s.elements === elements && s.ok);
const med = (list: readonly Sample[], pick: (s: Sample) => number) => median(list.map(pick));

function commandsPer(list: readonly Sample[], units: number): { all: number; evalsha: number; other: string } {
  const total = (s: Sample) => [...s.commands.values()].reduce((a, c) => a + c.calls, 0);
  const evalsha = (s: Sample) => (s.commands.get('evalsha')?.calls ?? 0) + (s.commands.get('eval')?.calls ?? 0);
  // The three most called other commands, from the median batch's counts.
  const names = new Map<string, number[]>();
  for (const s of list) for (const [name, c] of s.commands) if (name !== 'evalsha' && name !== 'eval' && name !== 'config' && name !== 'info') names.set(name, [...(names.get(name) ?? []), c.calls]);
  const other = [...names.entries()]
    .map(([name, calls]) => ({ name, per: median(calls) / units }))
    .sort((a, b) => b.per - a.per)
    .slice(0, 4)
    .map((x) => `${x.name} ${fmt(x.per, 2)}`)
    .join(', ');
  return { all: med(list, total) / units, evalsha: med(list, evalsha) / units, other };
}

function printPhase(samples: readonly Sample[], workers: number, n: number): void {
  const bare = of(samples, 'bare', workers, n);
  const bareMs = med(bare, (s) => s.totalMs);
  console.log('');
  console.log(`${workers} worker process${workers === 1 ? '' : 'es'} × concurrency ${CONCURRENCY}, ${fmt(n, 0)} elements / children:`);
  console.log(' kind                              | median ms | ÷ bare | rounds (ms)                      | per element µs | CPU ms per element: caller / workers / redis | Redis cmds per element (EVALSHA)');
  console.log('-----------------------------------|-----------|--------|----------------------------------|----------------|----------------------------------------------|---------------------------------');
  const row = (label: string, list: readonly Sample[], pick: (s: Sample) => number, units: number, cpuWorkers: (c: Cpu) => number) => {
    if (list.length === 0) return;
    const value = med(list, pick);
    const cpu = (f: (c: Cpu) => number) => fmt((med(list, (s) => f(s.cpu)) * 1e3) / units, 3);
    const cmds = commandsPer(list, units);
    console.log(
      ` ${label.padEnd(34)}| ${pad(fmt(value, 0), 9)} | ${pad(fmt(value / bareMs, 2), 6)} | ${list
        .map((s) => fmt(pick(s), 0))
        .join(' / ')
        .padEnd(32)} | ${pad(fmt((value * 1e3) / units, 0), 14)} | ${pad(`${cpu((c) => c.caller)} / ${cpu(cpuWorkers)} / ${cpu((c) => c.redis)}`, 44)} | ${fmt(cmds.all, 1)} (${fmt(cmds.evalsha, 1)})`,
    );
  };
  row('bare flow, parent + children', bare, (s) => s.totalMs, n, (c) => c.bareWorkers);
  const forward = of(samples, 'forward', workers, n);
  const rollback = of(samples, 'rollback', workers, n);
  row('map forward', forward, (s) => s.totalMs, n, (c) => c.xrWorkers);
  row('map forward + rollback: forward', rollback, (s) => s.forwardMs, n, (c) => c.xrWorkers);
  row('map forward + rollback: rollback', rollback, (s) => s.rollbackMs, n, (c) => c.xrWorkers);
  row('map forward + rollback: total', rollback, (s) => s.totalMs, n, (c) => c.xrWorkers);
  for (const size of n === ELEMENTS ? INLINE_SIZES : []) {
    const small = of(samples, 'small', workers, size);
    if (small.length > 0) console.log(` (fan-out rollback of ${size} elements, for the speed-up: rollback median ${fmt(med(small, (s) => s.rollbackMs), 0)} ms, rounds ${small.map((s) => fmt(s.rollbackMs, 0)).join(' / ')})`);
  }
  const cmds = (list: readonly Sample[]) => commandsPer(list, n);
  if (bare.length > 0) console.log(`  Redis commands per child job, bare: ${fmt(cmds(bare).all, 2)} executed (EVALSHA ${fmt(cmds(bare).evalsha, 2)}; most executed otherwise, in scripts or not: ${cmds(bare).other})`);
  if (forward.length > 0) console.log(`  Redis commands per element, forward: ${fmt(cmds(forward).all, 2)} executed (EVALSHA ${fmt(cmds(forward).evalsha, 2)}; ${cmds(forward).other})`);
  if (rollback.length > 0) console.log(`  Redis commands per element, forward + rollback: ${fmt(cmds(rollback).all, 2)} executed (EVALSHA ${fmt(cmds(rollback).evalsha, 2)}; ${cmds(rollback).other})`);
  const jobs = (list: readonly Sample[]) => {
    const kinds = new Map<string, number[]>();
    for (const s of list) for (const [k, c] of s.jobKinds) kinds.set(k, [...(kinds.get(k) ?? []), c]);
    const byKind = [...kinds.entries()]
      .map(([k, c]) => ({ k, per: median(c) / n }))
      .sort((a, b) => b.per - a.per)
      .map(({ k, per }) => `${k} ${fmt(per, 2)}`)
      .join(', ');
    return `${fmt(med(list, (s) => s.jobs) / n, 2)} jobs completed per element (${byKind}); ${fmt(med(list, (s) => s.busy), 0)} busy hand-backs per batch (${list.map((s) => s.busy).join(' / ')})`;
  };
  if (forward.length > 0) console.log(`  queue, forward: ${jobs(forward)}`);
  if (rollback.length > 0) console.log(`  queue, forward + rollback: ${jobs(rollback)}`);
  const ends = (list: readonly Sample[], label: string) => {
    const with_ = list.filter((s) => s.ends !== undefined);
    if (with_.length === 0) return;
    const m = (pick: (e: NonNullable<Sample['ends']>) => number) => fmt(med(with_, (s) => pick(s.ends!)), 0);
    console.log(`  ${label}: the map's last event at ${m((e) => e.map)} ms, the root's last commit at ${m((e) => e.root)} ms, awaitResult() returned at ${m((e) => e.returned)} ms (wall clock from run(), medians)`);
  };
  ends(forward, 'ends, forward');
  ends(rollback, 'ends, forward + rollback');
  const withActors = forward.filter((s) => s.actors !== undefined);
  const rbActors = rollback.filter((s) => s.actors !== undefined);
  if (withActors.length > 0 && rbActors.length > 0) {
    const a = withActors[0]!.actors!;
    const b = rbActors[0]!.actors!;
    const rollbackMapCommits = b.mapCommits - a.mapCommits;
    console.log(
      `  commits: map forward ${a.mapCommits} over ${a.throws} throws (${fmt(a.mapCommits / a.throws, 2)} per throw); map rollback ${rollbackMapCommits} over ${b.rollbackThrows} throws ` +
        `(${fmt(rollbackMapCommits / Math.max(1, b.rollbackThrows), 2)} per throw; ${b.mapCommits} in all); an element ${a.elementCommits} forward, ${b.elementCommits} with its undo; ` +
        `a rollback actor ${b.rollbackActorCommits}; the root ${a.rootCommits} (forward) / ${b.rootCommits} (rollback)`,
    );
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * The library this process runs as the caller (and in the runtime-alone pass), and the reactors
 * built from it: BENCH_LIB=dist builds the package first and imports `dist/` (the reactors come
 * from bench/fixtures/map-reactors-plan.mjs, as the dist workers' module builds them), src
 * imports the sources.
 */
async function loadLibrary(): Promise<[typeof Xreactor, typeof RedisAdapters, typeof Fixtures]> {
  if (LIB === 'src') return Promise.all([import('../src/index.js'), import('../src/redis.js'), import('./fixtures/map-reactors.js')]);
  const { xr, adapters, plan, reactors } = await loadBuiltMapBench();
  return [xr, adapters, { ...plan, ...reactors }];
}

async function main(): Promise<void> {
  console.log(`xreactor bench: fan-out map of ${fmt(ELEMENTS, 0)} elements against a bare BullMQ flow of ${fmt(ELEMENTS, 0)} children`);
  console.log(machineLine());
  console.log(
    `workers: ${WORKER_COUNTS.join(' and ')} processes × concurrency ${CONCURRENCY} (xreactor worker CLI at --log-level ${LOG_LEVEL}, ${LIB === 'dist' ? 'the built package on plain Node' : 'the sources through tsx'}; bare BullMQ worker); ${ROUNDS} rounds per kind after a warm-up of ${fmt(WARMUP, 0)} elements of each kind in batches of at most ${fmt(ELEMENTS, 0)}; ` +
      `map batchSize ${process.env['BENCH_MAP_BATCH_SIZE'] ?? 50}; ${LARGE > 0 ? `${fmt(LARGE, 0)} elements × ${LARGE_ROUNDS} round(s) with ${Math.max(...WORKER_COUNTS)} workers; ` : ''}` +
      `inline reference ${INLINE_SIZES.length > 0 ? `${INLINE_SIZES.join(' and ')} elements` : 'off'}`,
  );
  console.log(`load average at start: ${loadAverage()} (other processes on the machine inflate every figure; ratios to the bare flow of the same phase hold up better)`);

  let server: RedisServer | undefined;
  let fleet: Fleet | undefined;
  const closers: (() => Promise<unknown>)[] = [];
  const samples: Sample[] = [];
  const accounting: { kind: string; calls: Record<string, number> }[] = [];
  try {
    server = await startRedis();
    process.env['XREACTOR_BENCH_REDIS_URL'] = server.url;
    [xr, adapters, fixtures] = await loadLibrary();
    closers.push(async () => fixtures.closeMarks());
    const admin = new Redis(server.url, REDIS_OPTIONS);
    closers.push(async () => admin.disconnect());
    const serverInfo = await admin.info('server');
    pids.redis = Number(/process_id:(\d+)/.exec(serverInfo)?.[1]);
    console.log(`redis-server ${/redis_version:(\S+)/.exec(serverInfo)?.[1] ?? '?'} on 127.0.0.1:${server.port} (private, no persistence); ioredis clients with maxRetriesPerRequest: null`);

    const reactors = [fixtures.benchMapForward, fixtures.benchMapRollback, fixtures.benchMapInlineRollback];
    const largest = Math.max(...WORKER_COUNTS);
    for (const workers of WORKER_COUNTS) {
      const xrQueue = `bench-map-xr-${workers}`;
      const prefix = `map${workers}`;
      const bareQueue = `bench-map-bare-${workers}`;
      fleet = startFleet(server.url, workers, xrQueue, prefix, bareQueue);
      const caller = new Redis(server.url, REDIS_OPTIONS);
      const store = adapters.createRedisStore({ redis: caller, prefix });
      const runtime = xr.createRuntime({ store, queue: adapters.createBullmqQueue({ connection: caller, queueName: xrQueue }), worker: false, reactors, logger });
      // The inline reference: its own queue, which no worker consumes (an inline map enqueues
      // wake jobs for itself while this process holds it; a worker taking them would contend).
      const inlineRuntime =
        INLINE_SIZES.length > 0
          ? xr.createRuntime({ store, queue: adapters.createBullmqQueue({ connection: caller, queueName: `${xrQueue}-inline` }), worker: false, reactors, logger })
          : undefined;
      const flow = new FlowProducer({ connection: caller });
      const eventsConnection = new Redis(server.url, REDIS_OPTIONS);
      const events = new QueueEvents(bareQueue, { connection: eventsConnection });
      const phase: Phase = { workers, fleet, xrQueue, admin, caller, store, runtime, inlineRuntime, flow, bareQueue, events };
      try {
        await Promise.all([...fleet.xr, ...fleet.bare].map((c) => whenReady(c, 'worker process')));
        // Above info the workers say nothing when they start: wait until BullMQ lists them.
        if (!['trace', 'debug', 'info'].includes(LOG_LEVEL)) await queueWorkers(caller, xrQueue, workers);
        await events.waitUntilReady();
        pids.xr = fleet.xr.map((c) => c.pid);
        pids.bare = fleet.bare.map((c) => c.child.pid!);

        // Warm-up (not recorded).
        for (let left = WARMUP; left > 0; left -= ELEMENTS) {
          const n = Math.min(ELEMENTS, left);
          await bareBatch(phase, n, 0);
          await mapBatch(phase, 'forward', n, 0);
          await mapBatch(phase, 'rollback', n, 0);
        }
        if (WARMUP > 0) {
          if (inlineRuntime !== undefined) await inlineBatch(phase, Math.min(20, ...INLINE_SIZES), 0);
        }
        const tasks: { kind: Kind; n: number }[] = [
          { kind: 'bare', n: ELEMENTS },
          { kind: 'forward', n: ELEMENTS },
          { kind: 'rollback', n: ELEMENTS },
          // A size other than N gets fan-out rollbacks of its own to compare with.
          ...INLINE_SIZES.filter((n) => n !== ELEMENTS).map((n) => ({ kind: 'small' as const, n })),
          ...(inlineRuntime === undefined ? [] : INLINE_SIZES.map((n) => ({ kind: 'inline' as const, n }))),
        ];
        for (let round = 1; round <= ROUNDS; round++) {
          const order = tasks.map((_, i) => tasks[(i + round - 1) % tasks.length]!);
          for (const { kind, n } of order) {
            const sample = kind === 'bare' ? await bareBatch(phase, n, round) : kind === 'inline' ? await inlineBatch(phase, n, round) : await mapBatch(phase, kind, n, round);
            samples.push(sample);
            console.log(sampleLine(sample));
          }
        }
        if (workers === largest && LARGE > 0) {
          for (let round = 1; round <= LARGE_ROUNDS; round++) {
            for (const kind of round % 2 === 1 ? (['bare', 'rollback'] as const) : (['rollback', 'bare'] as const)) {
              const sample = kind === 'bare' ? await bareBatch(phase, LARGE, round) : await mapBatch(phase, 'rollback', LARGE, round);
              samples.push(sample);
              console.log(sampleLine(sample));
            }
          }
        }
      } finally {
        await stopFleet(fleet);
        fleet = undefined;
        await events.close().catch(() => undefined);
        eventsConnection.disconnect();
        await flow.close().catch(() => undefined);
        await runtime.close().catch(() => undefined);
        await inlineRuntime?.close().catch(() => undefined);
        await store.close().catch(() => undefined);
        caller.disconnect();
      }
    }

    // ---- accounting: store calls per element and the worker's CPU profile, one worker whose store counts its calls
    const profiles: { kind: string; summary: ProfileSummary; cpuS: number; ms: number }[] = [];
    if (ACCOUNTING) {
      const keepProfile = process.env['BENCH_PROFILE_DIR'];
      // The directory to keep profiles in is made when missing.
      if (keepProfile !== undefined) mkdirSync(keepProfile, { recursive: true });
      const profileDir = mkdtempSync(keepProfile !== undefined ? join(keepProfile, 'map-') : join(tmpdir(), 'xreactor-map-prof-'));
      if (keepProfile === undefined) closers.push(async () => rmSync(profileDir, { recursive: true, force: true }));
      else console.log(`profiles kept in ${profileDir}`);
      for (const kind of ['forward', 'rollback'] as const) {
        const prefix = `mapacc-${kind}`;
        const queueName = `bench-map-acc-${kind}`;
        const dir = join(profileDir, kind);
        const worker = startTsxProcessWithFlags(
          benchFile('fixtures/map-counting-worker.ts'),
          { XREACTOR_BENCH_REDIS_URL: server.url, BENCH_PREFIX: prefix, BENCH_QUEUE: queueName, BENCH_CONCURRENCY: String(CONCURRENCY) },
          'bench worker ready',
          ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${PROF_INTERVAL_US}`],
        );
        const caller = new Redis(server.url, REDIS_OPTIONS);
        const counted = countingStore(adapters.createRedisStore({ redis: caller, prefix }), mapActorKind);
        const runtime = xr.createRuntime({ store: counted.store, queue: adapters.createBullmqQueue({ connection: caller, queueName }), worker: false, reactors, logger });
        let window = { from: 0, to: 0 };
        let cpuS = Number.NaN;
        try {
          await whenReady(worker, 'counting worker');
          // A warm-up batch, then the counts and the profile window start.
          const warm = await runtime.run(kind === 'forward' ? fixtures.benchMapForward : fixtures.benchMapRollback, { items: itemsOf(Math.min(WARMUP, ELEMENTS)) });
          await runtime.awaitResult(warm.executionId, { timeoutMs: TIMEOUT_MS });
          // The counting worker starts its counts again (and the profile window starts) here.
          if ((await caller.publish(RESET_CHANNEL, '1')) !== 1) throw new Error('the counting worker is not subscribed to its reset channel');
          await sleep(100);
          counted.counts.clear();
          const cpuBefore = cpuSecondsOf(worker.child.pid!) ?? Number.NaN;
          const from = monotonicMs();
          const dispatched = await runtime.run(kind === 'forward' ? fixtures.benchMapForward : fixtures.benchMapRollback, { items: itemsOf(ELEMENTS) });
          await runtime.awaitResult(dispatched.executionId, { timeoutMs: TIMEOUT_MS });
          window = { from, to: monotonicMs() };
          cpuS = (cpuSecondsOf(worker.child.pid!) ?? Number.NaN) - cpuBefore;
          await sleep(200);
        } finally {
          await stopChild(worker.child, worker.exited, 15_000);
          await runtime.close().catch(() => undefined);
          await counted.store.close().catch(() => undefined);
          caller.disconnect();
        }
        const lines = [...worker.output().matchAll(/bench store calls (\{.*\})/g)];
        const line = lines.at(-1)?.[1];
        if (line === undefined) throw new Error(`the counting worker printed no counts:\n${worker.output().slice(-1000)}`);
        accounting.push({ kind: `${kind}: worker`, calls: JSON.parse(line) as Record<string, number> });
        accounting.push({ kind: `${kind}: caller`, calls: Object.fromEntries(counted.counts) });
        const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[4] === '0');
        if (files.length === 1) profiles.push({ kind, summary: summarizeProfile(join(dir, files[0]!), ROOT, window.from * 1000, window.to * 1000, 12), cpuS, ms: window.to - window.from });
      }
    }

    // ---- the runtime alone: the same maps on the memory store and the in-process queue, in this
    // process (its workers at the workers' concurrency), no Redis and no BullMQ: about what a
    // worker spends per element with free I/O (the memory store's own bookkeeping, which Redis
    // does in its scripts, included; so an estimate of that floor, not a strict bound).
    const floor: { forward: number[]; total: number[]; forwardWall: number[] } = { forward: [], total: [], forwardWall: [] };
    if (FLOOR) {
      const runtime = xr.createRuntime({ reactors, logger, worker: { concurrency: CONCURRENCY } });
      try {
        const batch = async (kind: 'forward' | 'rollback', n: number) => {
          const cpu = process.cpuUsage();
          const from = monotonicMs();
          const dispatched = await (kind === 'forward' ? runtime.run(fixtures.benchMapForward, { items: itemsOf(n) }) : runtime.run(fixtures.benchMapRollback, { items: itemsOf(n) }));
          const result = await runtime.awaitResult(dispatched.executionId, { timeoutMs: TIMEOUT_MS });
          const used = process.cpuUsage(cpu);
          const expected = kind === 'forward' ? 'completed' : 'failed';
          if (result.status !== expected) throw new Error(`runtime-alone batch: ${result.status}, not ${expected}`);
          return { cpuUs: (used.user + used.system) / n, wallUs: ((monotonicMs() - from) * 1000) / n };
        };
        // Warm-up at full size: this process has not run the memory store's paths before.
        for (let i = 0; i < 2; i++) {
          await batch('forward', ELEMENTS);
          await batch('rollback', ELEMENTS);
        }
        for (let round = 0; round < FLOOR_ROUNDS; round++) {
          const forward = await batch('forward', ELEMENTS);
          floor.forward.push(forward.cpuUs);
          floor.forwardWall.push(forward.wallUs);
          floor.total.push((await batch('rollback', ELEMENTS)).cpuUs);
        }
      } finally {
        await runtime.close().catch(() => undefined);
      }
    }

    // ---- report
    for (const workers of WORKER_COUNTS) printPhase(samples, workers, ELEMENTS);
    if (LARGE > 0) printPhase(samples, largest, LARGE);

    if (INLINE_SIZES.length > 0) console.log('');
    for (const size of INLINE_SIZES) {
      for (const workers of WORKER_COUNTS) {
        const inline = of(samples, 'inline', workers, size);
        const fanned = of(samples, size === ELEMENTS ? 'rollback' : 'small', workers, size);
        if (inline.length === 0 || fanned.length === 0) continue;
        const inlineRb = med(inline, (s) => s.rollbackMs);
        const fannedRb = med(fanned, (s) => s.rollbackMs);
        console.log(
          `inline reference, ${fmt(size, 0)} elements, this process alone (in the ${workers}-worker phase): forward ${fmt(med(inline, (s) => s.forwardMs), 0)} ms, rollback ${fmt(inlineRb, 0)} ms ` +
            `(rounds ${inline.map((s) => fmt(s.rollbackMs, 0)).join(' / ')}; ${fmt((inlineRb * 1e3) / size, 0)} µs per element; Redis commands executed per element ${fmt(commandsPer(inline, size).all, 1)}, EVALSHA ${fmt(commandsPer(inline, size).evalsha, 1)}; ` +
            `CPU per element: caller ${fmt((med(inline, (s) => s.cpu.caller) * 1e6) / size, 0)} µs, redis ${fmt((med(inline, (s) => s.cpu.redis) * 1e6) / size, 0)} µs)`,
        );
        console.log(`  rollback speed-up of ${workers} worker process${workers === 1 ? '' : 'es'} over inline: ${fmt(inlineRb / fannedRb, 2)}× (${fmt(inlineRb, 0)} ÷ ${fmt(fannedRb, 0)} ms)`);
      }
    }

    if (floor.forward.length > 0) {
      const forwardUs = median(floor.forward);
      const rollbackUs = median(floor.total) - forwardUs;
      console.log('');
      console.log(
        `the runtime alone (this process, memory store and in-process queue, concurrency ${CONCURRENCY}, no Redis, no BullMQ; ${FLOOR_ROUNDS} rounds of ${fmt(ELEMENTS, 0)}): ` +
          `forward ${fmt(forwardUs, 0)} µs of CPU per element (rounds ${floor.forward.map((v) => fmt(v, 0)).join(' / ')}; wall ${fmt(median(floor.forwardWall), 0)} µs), ` +
          `rollback ${fmt(rollbackUs, 0)} µs more (forward + rollback ${fmt(median(floor.total), 0)})`,
      );
      const one = WORKER_COUNTS.includes(1) ? of(samples, 'bare', 1, ELEMENTS) : [];
      if (one.length > 0) {
        const bareUs = (med(one, (s) => s.totalMs) * 1000) / ELEMENTS;
        const budget = (target: number, runtimeUs: number, what: string) =>
          `  ${what}, 1 worker: the target leaves ${fmt(target * bareUs, 0)} µs per element (${target} × the bare flow's ${fmt(bareUs, 0)}); the runtime alone spends ${fmt(runtimeUs, 0)}, ${fmt(runtimeUs / (target * bareUs), 2)} of it` +
          (runtimeUs > target * bareUs ? ': the target is below this floor' : '');
        console.log(budget(FORWARD_TARGET, forwardUs, 'forward'));
        console.log(budget(ROLLBACK_TARGET, rollbackUs, 'rollback'));
      }
    }

    if (accounting.length > 0) {
      console.log('');
      console.log(`store calls (one counting worker, ${fmt(ELEMENTS, 0)} elements, one batch each after a warm-up; by method, then by the actor named):`);
      const line = (label: string, calls: Record<string, number>, per: number, unit: string) => {
        // `<method>:<actor kind>` → per method, the kinds in brackets.
        const byMethod = new Map<string, Map<string, number>>();
        for (const [key, n] of Object.entries(calls)) {
          const [method, actor = ''] = key.split(':');
          if (method === 'close' || n === 0) continue;
          const kinds = byMethod.get(method!) ?? new Map<string, number>();
          kinds.set(actor, (kinds.get(actor) ?? 0) + n);
          byMethod.set(method!, kinds);
        }
        const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
        const total = [...byMethod.values()].reduce((a, m) => a + sum(m), 0);
        const list = [...byMethod.entries()]
          .sort((a, b) => sum(b[1]) - sum(a[1]))
          .map(([method, kinds]) => `${method} ${fmt(sum(kinds) / per, 2)} (${[...kinds.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${fmt(n / per, 2)}`).join(', ')})`)
          .join('; ');
        console.log(`  ${label}: ${fmt(total / per, 2)} ${unit}: ${list}`);
      };
      const calls = (kind: string) => accounting.find((a) => a.kind === kind)?.calls ?? {};
      line('forward, worker', calls('forward: worker'), ELEMENTS, 'per element');
      line('forward + rollback, worker', calls('rollback: worker'), ELEMENTS, 'per element');
      const forward = calls('forward: worker');
      const difference = Object.fromEntries(Object.entries(calls('rollback: worker')).map(([k, n]) => [k, n - (forward[k] ?? 0)]));
      line('the rollback alone (the difference)', difference, ELEMENTS, 'per element');
      line('forward + rollback, caller', calls('rollback: caller'), 1, 'per run');
    }

    for (const { kind, summary, cpuS, ms } of profiles) {
      const cpuUs = (cpuS * 1e6) / ELEMENTS;
      const share = (us: number) => us / summary.busyUs;
      console.log('');
      console.log(
        `where the worker's CPU goes, ${kind === 'forward' ? 'forward' : 'forward + rollback'} (the counting worker, ${fmt(ELEMENTS, 0)} elements in ${fmt(ms, 0)} ms, node --cpu-prof at ${PROF_INTERVAL_US} µs; ` +
          `${fmt(cpuUs, 0)} µs of worker CPU per element from /proc, profiling included; shares of the main thread's not-idle ticks, µs = share × that):`,
      );
      console.log('  ' + summary.groups.slice(0, 12).map((g) => `${g.group} ${fmt(100 * share(g.us), 1)} % (${fmt(share(g.us) * cpuUs, 0)} µs)`).join(', '));
      console.log('  top functions: ' + summary.top.slice(0, 8).map((f) => `${f.fn} [${f.group}] ${fmt(100 * share(f.us), 1)} %`).join(', '));
    }

    console.log('');
    const targets: { met: boolean; text: string }[] = [];
    const sizes = [...WORKER_COUNTS.map((w) => [w, ELEMENTS] as const), ...(LARGE > 0 ? [[largest, LARGE] as const] : [])];
    for (const [workers, n] of sizes) {
      const bareMs = med(of(samples, 'bare', workers, n), (s) => s.totalMs);
      const forwardList = of(samples, 'forward', workers, n);
      const rollbackList = of(samples, 'rollback', workers, n);
      const forward = forwardList.length > 0 ? med(forwardList, (s) => s.totalMs) : med(rollbackList, (s) => s.forwardMs);
      const rollback = med(rollbackList, (s) => s.rollbackMs);
      const label = `${fmt(n, 0)} elements, ${workers} worker${workers === 1 ? '' : 's'}`;
      console.log(
        `${label}: elements/s forward ${fmt((n * 1e3) / forward, 0)} vs bare jobs/s ${fmt((n * 1e3) / bareMs, 0)} (${fmt(bareMs / forward, 2)} of bare); ` +
          `rollback ${fmt((n * 1e3) / rollback, 0)} elements/s (${fmt(bareMs / rollback, 2)} of bare)${forwardList.length === 0 ? '; forward taken from the rollback batches (run() → after)' : ''}`,
      );
      // Each map batch against the bare batch of its own round (the load moves between rounds), and the CPU ratio.
      const pairs = (list: readonly Sample[], pick: (s: Sample) => number) =>
        list.flatMap((s) => {
          const bare = of(samples, 'bare', workers, n).find((b) => b.round === s.round);
          return bare === undefined ? [] : [pick(s) / bare.totalMs];
        });
      const forwardPairs = forwardList.length > 0 ? pairs(forwardList, (s) => s.totalMs) : pairs(rollbackList, (s) => s.forwardMs);
      const rollbackPairs = pairs(rollbackList, (s) => s.rollbackMs);
      const cpuAll = (c: Cpu, bare: boolean) => c.caller + c.redis + (bare ? c.bareWorkers : c.xrWorkers);
      const bareCpu = med(of(samples, 'bare', workers, n), (s) => cpuAll(s.cpu, true));
      // Without a forward-only batch at this size, the CPU of the forward + rollback batches.
      const cpuList = forwardList.length > 0 ? forwardList : rollbackList;
      const mapCpu = med(cpuList, (s) => cpuAll(s.cpu, false));
      const what = forwardList.length > 0 ? 'forward' : 'forward + rollback';
      console.log(
        `  round by round, ÷ that round's bare flow: forward ${forwardPairs.map((r) => fmt(r, 2)).join(' / ')} (median ${fmt(median(forwardPairs), 2)}), rollback ${rollbackPairs.map((r) => fmt(r, 2)).join(' / ')} (median ${fmt(median(rollbackPairs), 2)}); ` +
          `CPU of caller + workers + redis-server, ${what} ÷ bare: ${fmt(mapCpu / bareCpu, 2)} (${fmt((mapCpu * 1e6) / n, 0)} vs ${fmt((bareCpu * 1e6) / n, 0)} µs per element; on ${os.cpus().length} vCPU the bound if CPU were the only limit)`,
      );
      targets.push({ met: forward / bareMs <= FORWARD_TARGET, text: `forward, ${label}: ${fmt(forward / bareMs, 2)}× the bare flow (${fmt(forward, 0)} vs ${fmt(bareMs, 0)} ms; target ≤ ${FORWARD_TARGET}×)` });
      targets.push({ met: rollback / bareMs <= ROLLBACK_TARGET, text: `rollback, ${label}: ${fmt(rollback / bareMs, 2)}× the bare flow (${fmt(rollback, 0)} vs ${fmt(bareMs, 0)} ms; target ≤ ${ROLLBACK_TARGET}×)` });
    }
    console.log('');
    for (const t of targets) console.log(targetLine(t.met, t.text));
    const bad = samples.filter((s) => !s.ok);
    if (bad.length > 0) console.log(`${bad.length} batch(es) not OK and left out of the medians: ${bad.map((s) => `${s.workers}w ${s.kind} ${s.elements} round ${s.round}: ${s.note}`).join('; ')}`);
    console.log(`load average at end: ${loadAverage()}; ${os.cpus().length} vCPU`);

    if (JSON_OUT !== undefined) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(JSON_OUT, JSON.stringify({ samples: samples.map((s) => ({ ...s, commands: Object.fromEntries(s.commands), jobKinds: Object.fromEntries(s.jobKinds) })), accounting }, null, 2));
    }
  } finally {
    await stopFleet(fleet);
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await server?.stop();
  }
}

runBench(main);
