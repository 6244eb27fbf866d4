/**
 * Helpers shared by the Redis benchmarks (`redis-steps.ts`, `handoff.ts`, `throughput.ts`):
 * statistics, formatting, the machine banner, a cross-process clock, and child processes
 * (`xreactor worker` through the real CLI, and a bare BullMQ worker).
 *
 * Redis servers come from `test/support/redis-server.ts`: a private `redis-server` on a free
 * port, without persistence, killed on `stop()` or when this process exits.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { FlowProducer, QueueEvents } from 'bullmq';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type * as Xreactor from '../src/index.js';
import type { AnyReactorDefinition } from '../src/index.js';
import type * as RedisAdapters from '../src/redis.js';
import type * as MapPlan from './fixtures/map-reactors-plan.mjs';

export { startRedis } from '../test/support/redis-server.js';
export type { RedisServer } from '../test/support/redis-server.js';
export { startWorkerProcess } from '../test/support/worker-process.js';
export type { WorkerProcess } from '../test/support/worker-process.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

// ---------------------------------------------------------------------------------------------
// The built package, as the map benchmarks run it

/** The built package's entry points and the map benchmarks' reactors built from it. */
export interface BuiltMapBench {
  readonly xr: typeof Xreactor;
  readonly adapters: typeof RedisAdapters;
  readonly plan: typeof MapPlan;
  readonly reactors: MapPlan.MapReactors;
}

/**
 * Builds the package (`npm run build`), imports `dist/` (the library and `xreactor/redis`) and
 * builds the map benchmarks' reactors from it (`fixtures/map-reactors-plan.mjs`, as the workers'
 * `fixtures/map-reactors-dist.mjs` does), so the caller runs the code its workers run.
 */
export async function loadBuiltMapBench(): Promise<BuiltMapBench> {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  // Paths held in variables: typecheck does not need dist/ to exist; its types are the sources'.
  const [indexPath, redisPath] = ['../dist/src/index.js', '../dist/src/redis.js'];
  const [xr, adapters, plan] = await Promise.all([import(indexPath) as Promise<typeof Xreactor>, import(redisPath) as Promise<typeof RedisAdapters>, import('./fixtures/map-reactors-plan.mjs')]);
  return { xr, adapters, plan, reactors: plan.buildMapReactors(xr) };
}

// ---------------------------------------------------------------------------------------------
// The reactor the per-step benchmarks run

/**
 * A linear reactor of `steps` steps named `<name>_<steps>`: step `sN` reads the result of `sN-1`
 * and returns `{ n: prev.n + 1, tag: 'step' }`. `defineReactor` is passed in because the
 * benchmarks import the library inside `main()` (a broken build is then reported, exit code 0).
 */
export function linearReactor(defineReactor: typeof Xreactor.defineReactor, name: string, steps: number): AnyReactorDefinition {
  let builder: any = defineReactor({ name: `${name}_${steps}` }).step('s0', { run: () => ({ n: 0, tag: 'step' }) });
  for (let i = 1; i < steps; i++) {
    const previous = `s${i - 1}`;
    builder = builder.step(`s${i}`, {
      args: ({ result }: any) => ({ prev: result(previous) }),
      run: ({ prev }: { prev: { n: number } }) => ({ n: prev.n + 1, tag: 'step' }),
    });
  }
  return builder.returns(`s${steps - 1}`).build() as AnyReactorDefinition;
}

// ---------------------------------------------------------------------------------------------
// Statistics and formatting

/** Redis `INFO commandstats`, by command: calls and total µs. */
export function parseCommandStats(info: string): Map<string, { calls: number; usec: number }> {
  const out = new Map<string, { calls: number; usec: number }>();
  for (const [, name, calls, usec] of info.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) out.set(name!, { calls: Number(calls), usec: Number(usec) });
  return out;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (p in 0..100) of unsorted values; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return String(value);
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function pad(text: string, width: number): string {
  return text.padStart(width);
}

export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => fmt(l, 2))
    .join(' ');
}

/** One line describing the machine, for the top of every report. */
export function machineLine(): string {
  const cpus = os.cpus();
  return `node ${process.version}, ${os.platform()} ${os.arch()}, ${cpus.length} vCPU (${cpus[0]?.model.trim() ?? 'unknown'}), ${fmt(os.totalmem() / 2 ** 30, 0)} GiB`;
}

/** A met / missed line, as the other benchmarks print it. */
export function targetLine(met: boolean, text: string): string {
  return `${met ? 'TARGET MET' : 'TARGET MISSED'}: ${text}`;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

// ---------------------------------------------------------------------------------------------
// A clock every process on the machine shares

/**
 * Milliseconds of CLOCK_MONOTONIC (`process.hrtime`), with sub-microsecond resolution. Unlike
 * `performance.now()`, whose origin is each process's start, and `Date.now()` (whole
 * milliseconds, and the wall clock may be stepped), it is the same clock in every process of
 * the machine: a time taken in a worker process can be subtracted from one taken here.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** A child process started by a benchmark, with its output kept for error messages. */
export interface BenchChild {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<number | string | null>;
  output(): string;
}

/** Start `node --import tsx <file>` from the project root; ready when it prints `readyLine`. */
export function startTsxProcess(file: string, env: Readonly<Record<string, string>>, readyLine: string): BenchChild {
  return startNodeProcess(['--import', 'tsx', file], env, readyLine);
}

/**
 * Start `node <args>` from the project root (a module of the built package on plain Node, say:
 * no tsx loader in the measured process); ready when it prints `readyLine`.
 */
export function startNodeProcess(args: readonly string[], env: Readonly<Record<string, string>>, readyLine: string): BenchChild {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
  void exited.then((code) => markFailed(new Error(`${args.at(-1) ?? 'node'} exited (${String(code)}) before it was ready:\n${output.slice(-2000)}`)));
  return { child, ready, exited, output: () => output };
}

/** Wait until a child started by {@link startTsxProcess} or `startWorkerProcess` is ready; throw with its output if it died or took too long. */
export async function whenReady(worker: { readonly ready: Promise<void>; readonly child: ChildProcess; output(): string }, what: string, timeoutMs = 60_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} not ready after ${timeoutMs} ms:\n${worker.output().slice(-2000)}`)), timeoutMs);
  });
  try {
    await Promise.race([worker.ready, late]);
  } finally {
    clearTimeout(timer);
  }
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) {
    throw new Error(`${what} exited at start:\n${worker.output().slice(-2000)}`);
  }
}

/** Stop a child this benchmark started: SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Path of a file under bench/, relative to the project root (the cwd of every child). */
export function benchFile(name: string): string {
  return `bench/${name}`;
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); undefined elsewhere. */
export function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which is in parentheses and may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) this process has used so far. */
export function ownCpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Linux USER_HZ: /proc times are in 1/100 s on every common architecture. */
const CLOCK_TICKS = 100;

/** Run a benchmark's main: a failure is reported, and the exit code is always 0 (benchmarks report, they do not gate). */
export function runBench(main: () => Promise<void>): void {
  main()
    .catch((error: unknown) => {
      console.error('bench failed:', error);
    })
    .finally(() => {
      process.exitCode = 0;
      // Something left open (a connection reconnecting to the stopped server, a child, a timer)
      // would keep a finished benchmark alive with nothing to show for it: name it, then exit.
      setTimeout(() => {
        console.error(`bench: still running ${LINGER_MS / 1000} s after it finished; open: ${process.getActiveResourcesInfo().join(', ')}; exiting`);
        process.exit(0);
      }, LINGER_MS).unref();
    });
}

/** How long a finished benchmark may take to exit by itself before {@link runBench} ends it. */
const LINGER_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// `xreactor worker` processes that log a lot

/** An `xreactor worker` process started by {@link startCliWorker}. */
export interface CliWorker extends BenchChild {
  readonly pid: number;
  /** How many output lines so far contained `marker` (one of the markers it was started with). */
  count(marker: string): number;
}

const OUTPUT_TAIL = 64 * 1024;

/**
 * Start `xreactor worker` through the real CLI (as `startWorkerProcess` in test/support does) for
 * a benchmark whose workers write a line per step: only the last 64 KB of output are kept (for
 * error messages), the ready line is looked for in the new output only, and the lines holding
 * each of `markers` are counted as they arrive. Keeping and searching a worker's whole output
 * costs the benchmark's process CPU that grows with the square of the output. Above `info` the
 * worker logs nothing when it starts: `ready` then resolves once the process has spawned, and
 * the caller waits for the worker some other way (BullMQ's `Queue.getWorkersCount()`).
 */
export function startCliWorker(options: {
  readonly redisUrl: string;
  /** `src` (default): the CLI's sources through tsx; `dist`: the built CLI (`npm run build` first) on plain Node, as the published package runs. */
  readonly lib?: 'src' | 'dist';
  readonly modules: readonly string[];
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly logLevel?: string;
  readonly markers?: readonly string[];
  /** Node options before the CLI (e.g. `--log-deopt --logfile=...` to see what V8 deoptimizes). */
  readonly nodeArgs?: readonly string[];
  /** The tree whose CLI runs (its root directory; default this one): another checkout built beside it, for before / after comparisons. */
  readonly root?: string;
}): CliWorker {
  const dist = options.lib === 'dist';
  const root = options.root ?? ROOT;
  const cli = join(root, dist ? 'dist/src/cli/xreactor.js' : 'src/cli/xreactor.ts');
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), ...(dist ? [] : ['--import', 'tsx']), cli, 'worker', '--redis', options.redisUrl, '--log-level', options.logLevel ?? 'info', ...(options.args ?? []), ...options.modules],
    { cwd: root, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const counts = new Map<string, number>((options.markers ?? []).map((m) => [m, 0]));
  let tail = '';
  let partial = '';
  let isReady = false;
  let markReady: () => void = () => undefined;
  let markFailed: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    tail = (tail + text).slice(-OUTPUT_TAIL);
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!isReady && line.includes('xreactor.worker.started')) {
        isReady = true;
        markReady();
      }
      for (const [marker, n] of counts) if (line.includes(marker)) counts.set(marker, n + 1);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  if (!['trace', 'debug', 'info'].includes(options.logLevel ?? 'info')) child.once('spawn', () => markReady());
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  void exited.then((code) => markFailed(new Error(`xreactor worker exited (${String(code)}) before it was ready:\n${tail.slice(-2000)}`)));
  return { child, pid: child.pid!, ready, exited, output: () => tail, count: (marker) => counts.get(marker) ?? 0 };
}

/** {@link startTsxProcess} with node flags before `--import tsx` (`--cpu-prof`, ...). */
export function startTsxProcessWithFlags(file: string, env: Readonly<Record<string, string>>, readyLine: string, nodeArgs: readonly string[]): BenchChild {
  return startNodeProcess([...nodeArgs, '--import', 'tsx', file], env, readyLine);
}

/** Completed jobs of the bare flow are kept an hour, as xreactor's queue keeps them. */
const BARE_KEEP = { removeOnComplete: { age: 3600 } };

/**
 * The bare BullMQ flow the map benchmarks compare against: one `FlowProducer.add` of parent
 * `jobId` with `n` children on `queueName` (a `bare-bullmq-worker` fleet returns 1 for each),
 * resolved with the parent's return value once it has completed (seen on `events`).
 */
export async function runBareFlow(flow: FlowProducer, events: QueueEvents, queueName: string, n: number, jobId: string, timeoutMs: number): Promise<unknown> {
  const children = Array.from({ length: n }, (_, i) => ({ name: 'child', queueName, data: { i }, opts: BARE_KEEP }));
  const node = await flow.add({ name: 'parent', queueName, data: {}, opts: { ...BARE_KEEP, jobId }, children });
  return node.job.waitUntilFinished(events, timeoutMs);
}
