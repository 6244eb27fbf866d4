/**
 * Worker variants on a fan-out map, compared in one run: the same maps on worker sets that differ
 * only in some `xreactor worker` flags, in interleaved rounds, with paired ratios to the first.
 *
 *   npx tsx bench/map-worker-variants.ts   (builds the package, its own redis-server; about 4 minutes)
 *   BENCH_VARIANTS: the variants' flags, separated by `;`, the first the reference (default
 *     `--no-eager-bundle;`: throws sent through BullMQ whole, against the default that runs a
 *     throw's first bundle in the worker that sends it); a flag `@<dir>` runs that variant's
 *     workers from another tree (a checkout of another ref, with its node_modules, built:
 *     `git worktree add <dir> <ref> && (cd <dir> && npm ci && npm run build)`), so two builds are
 *     compared in paired rounds (this tree's caller starts the maps: the two builds must read each
 *     other's stored data). docs/performance.md (session 27) has two A/A runs: ratios within a
 *     tenth of 1 are not results on this host;
 *   a word `NAME=value` in a variant's flags sets that environment variable for its workers;
 *   BENCH_BUNDLE_SIZES (`5,10`): shorthand for `--bundle-size 5;--bundle-size 10`;
 *   BENCH_WORKERS (1: worker processes per variant), BENCH_ROUNDS (8), BENCH_ELEMENTS (1,000),
 *   BENCH_CONCURRENCY (10), BENCH_MAP_BATCH_SIZE (50)
 *
 * Each variant gets its own queue, prefix and `xreactor worker` processes of the built package (at
 * `--log-level info`, as in `bench/map.ts`), all started before the first round, so the other
 * variants' workers sit idle beside the measured ones. A round runs, for every variant in turn
 * (the order reversed every other round), a forward map (`bench_map_forward`) and a forward + full
 * rollback (`bench_map_rollback`) of `BENCH_ELEMENTS` elements, from `run()` to `awaitResult()`,
 * after two warm-up rounds. A variant's `--log-level` replaces the default `info`. Per variant it
 * prints the medians, the median of each round's ratio to the reference, the worker processes'
 * CPU per element over each round's two maps (from /proc) and its paired ratio, and the **throw
 * boundary** of the last forward map: for each throw after the first, the time from the end of
 * the previous throw's last position (whose settle sends the next throw, R-02) to the first start
 * of its own elements (`updatedAt` and `createdAt` of the elements, whole milliseconds): the map's
 * own part of the critical path. docs/performance.md has the figures that set the bundle size
 * (session 24, when this was `map-bundle-sizes.ts`), eager bundles (session 25) and the step log's
 * level (session 27).
 */
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { CliWorker } from './support.js';
import { benchFile, cpuSecondsOf, fmt, loadAverage, loadBuiltMapBench, machineLine, median, runBench, startCliWorker, startRedis, stopChild, whenReady } from './support.js';

const SIZES = process.env['BENCH_BUNDLE_SIZES']?.split(',').map((s) => s.trim());
/** Each variant's extra worker flags. */
const VARIANTS = (SIZES === undefined ? (process.env['BENCH_VARIANTS'] ?? '--no-eager-bundle;') : SIZES.map((size) => `--bundle-size ${size}`).join(';')).split(';').map((v) => v.trim().split(/\s+/).filter((arg) => arg !== ''));
/** A variant's `--log-level` goes to startCliWorker (which then knows when a quiet worker is ready); its other flags to the CLI. */
const splitLogLevel = (flags: readonly string[]): { logLevel?: string; rest: readonly string[] } => {
  const at = flags.indexOf('--log-level');
  return at < 0 ? { rest: flags } : { logLevel: flags[at + 1]!, rest: [...flags.slice(0, at), ...flags.slice(at + 2)] };
};
/** A variant's `@<dir>`: the workers run that tree's built CLI and fixtures (another checkout, built) instead of this one's. */
const splitTree = (flags: readonly string[]): { root?: string; rest: readonly string[] } => {
  const tree = flags.find((flag) => flag.startsWith('@'));
  return tree === undefined ? { rest: flags } : { root: resolve(tree.slice(1)), rest: flags.filter((flag) => flag !== tree) };
};
/** A variant's `NAME=value` words: environment variables of its worker processes (a knob a build reads, compared in paired rounds). */
const splitEnv = (flags: readonly string[]): { env: Record<string, string>; rest: readonly string[] } => {
  const isEnv = (flag: string) => /^[A-Z_][A-Z0-9_]*=/.test(flag);
  return { env: Object.fromEntries(flags.filter(isEnv).map((flag) => [flag.slice(0, flag.indexOf('=')), flag.slice(flag.indexOf('=') + 1)])), rest: flags.filter((flag) => !isEnv(flag)) };
};
const labelOf = (flags: readonly string[]) => (flags.length === 0 ? '(defaults)' : flags.join(' '));
const WORKERS = Number(process.env['BENCH_WORKERS'] ?? 1);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 8);
const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
const WARMUP_ROUNDS = 2;
const TIMEOUT_MS = 300_000;
const REDIS_OPTIONS = { maxRetriesPerRequest: null };

interface VariantSet {
  readonly label: string;
  readonly runtime: Xreactor.Runtime;
  /** The store and queue given to the runtime: ours to close (docs/lifecycle.md). */
  readonly store: Xreactor.Store;
  readonly queue: Xreactor.Queue;
  readonly workers: readonly CliWorker[];
  readonly forward: number[];
  readonly total: number[];
  /** The worker processes' CPU per element of each measured round (forward and forward + rollback maps together), µs. */
  readonly cpu: number[];
  /** Redis during each measured round's forward + rollback map: script calls per element, and the server's CPU µs per element. */
  readonly redisCalls: number[];
  readonly redisCpu: number[];
  lastForwardId?: string;
}

runBench(async () => {
  if (VARIANTS.length < 2) throw new Error(`BENCH_VARIANTS: at least two sets of worker flags, separated by ";" (got "${process.env['BENCH_VARIANTS']}")`);
  console.log(`map-worker-variants: ${fmt(ELEMENTS, 0)}-element fan-out maps, workers with ${VARIANTS.map(labelOf).join(' / ')} (reference: the first), ${WORKERS} worker process${WORKERS === 1 ? '' : 'es'} per variant × concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds after ${WARMUP_ROUNDS} warm-up rounds`);
  console.log(machineLine());
  const { xr, adapters, plan, reactors } = await loadBuiltMapBench();

  const server = await startRedis();
  process.env['XREACTOR_BENCH_REDIS_URL'] = server.url;
  const redis = new Redis(server.url, REDIS_OPTIONS);
  const logger = pino({ level: 'silent' });
  const sets: VariantSet[] = [];
  try {
    for (const [v, flags] of VARIANTS.entries()) {
      const label = labelOf(flags);
      const name = `bench-variant-${v}`;
      const { root, rest } = splitTree(flags);
      const { env, rest: withoutEnv } = splitEnv(rest);
      const { logLevel, rest: cliFlags } = splitLogLevel(withoutEnv);
      const workers = Array.from({ length: WORKERS }, () =>
        startCliWorker({
          redisUrl: server.url,
          lib: 'dist',
          modules: [root === undefined ? benchFile('fixtures/map-reactors-dist.mjs') : join(root, 'bench/fixtures/map-reactors-dist.mjs')],
          args: ['--queue', name, '--prefix', name, '--concurrency', String(CONCURRENCY), ...cliFlags],
          env,
          ...(logLevel === undefined ? {} : { logLevel }),
          ...(root === undefined ? {} : { root }),
        }),
      );
      const store = adapters.createRedisStore({ redis, prefix: name });
      const queue = adapters.createBullmqQueue({ connection: redis, queueName: name });
      sets.push({ label, workers, store, queue, forward: [], total: [], cpu: [], redisCalls: [], redisCpu: [], runtime: xr.createRuntime({ store, queue, worker: false, reactors: Object.values(reactors), logger }) });
      for (const worker of workers) await whenReady(worker, `xreactor worker (${label})`);
    }
    const items = Array.from({ length: ELEMENTS }, (_, i) => i);
    const once = async (set: VariantSet, reactor: Xreactor.AnyReactorDefinition, expected: string) => {
      const from = performance.now();
      const { executionId } = await set.runtime.run(reactor, { items });
      const result = await set.runtime.awaitResult(executionId, { timeoutMs: TIMEOUT_MS });
      if (result.status !== expected) throw new Error(`${set.label}: ${reactor.name} ended ${result.status}, not ${expected}`);
      return { ms: performance.now() - from, executionId };
    };
    for (let round = -WARMUP_ROUNDS; round < ROUNDS; round++) {
      for (const set of round % 2 === 0 ? sets : [...sets].reverse()) {
        const cpuBefore = workerCpu(set);
        const forward = await once(set, reactors.benchMapForward, 'completed');
        const redisBefore = await redisCounters(redis);
        const total = await once(set, reactors.benchMapRollback, 'failed');
        const redisAfter = await redisCounters(redis);
        if (round < 0) continue;
        set.redisCalls.push((redisAfter.scriptCalls - redisBefore.scriptCalls) / ELEMENTS);
        set.redisCpu.push(((redisAfter.cpu - redisBefore.cpu) * 1e6) / ELEMENTS);
        set.cpu.push(((workerCpu(set) - cpuBefore) * 1e6) / (2 * ELEMENTS));
        set.forward.push(forward.ms);
        set.total.push(total.ms);
        set.lastForwardId = forward.executionId;
      }
      if (round >= 0) console.log(`  round ${round + 1}: ${sets.map((s) => `${s.label}: ${fmt(s.forward.at(-1)!, 0)} / ${fmt(s.total.at(-1)!, 0)} ms`).join(', ')} (load ${loadAverage()})`);
    }

    console.log('');
    const reference = sets[0]!;
    const width = Math.max(...sets.map((s) => s.label.length));
    console.log(`${'variant'.padEnd(width)} | forward ms (median) | forward + rollback ms | ÷ first, forward | ÷ first, forward + rollback | workers' CPU µs per element (both maps) | ÷ first | throw boundary ms, median (least / most), last forward map`);
    for (const set of sets) {
      const ratio = (mine: number[], theirs: number[]) => median(mine.map((v, i) => v / theirs[i]!));
      const gaps = await throwGaps(set);
      console.log(
        `${set.label.padEnd(width)} | ${fmt(median(set.forward), 0).padStart(19)} | ${fmt(median(set.total), 0).padStart(21)} | ${fmt(ratio(set.forward, reference.forward), 3).padStart(16)} | ${fmt(ratio(set.total, reference.total), 3).padStart(27)} | ${fmt(median(set.cpu), 0).padStart(39)} | ${fmt(ratio(set.cpu, reference.cpu), 3).padStart(7)} | ` +
          (gaps.length === 0 ? '-' : `${fmt(median(gaps), 1)} (${Math.min(...gaps)} / ${Math.max(...gaps)}) over ${gaps.length} throws`),
      );
    }
    console.log('');
    console.log(`${'variant'.padEnd(width)} | Redis script calls per element, forward + rollback map (median) | Redis CPU µs per element, forward + rollback map | ÷ first`);
    for (const set of sets) {
      console.log(`${set.label.padEnd(width)} | ${fmt(median(set.redisCalls), 2).padStart(63)} | ${fmt(median(set.redisCpu), 0).padStart(47)} | ${fmt(median(set.redisCpu.map((v, i) => v / reference.redisCpu[i]!)), 3).padStart(7)}`);
    }
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    for (const set of sets) {
      await set.runtime.close().catch(() => undefined);
      await Promise.all([set.queue.close(), set.store.close()]).catch(() => undefined);
      for (const worker of set.workers) await stopChild(worker.child, worker.exited);
    }
    redis.disconnect();
    plan.closeMarks();
    await server.stop();
  }
});

/** The server's script calls (EVALSHA and EVAL) and CPU seconds (user + system) so far. */
async function redisCounters(redis: Redis): Promise<{ scriptCalls: number; cpu: number }> {
  const [commands, cpu] = await Promise.all([redis.info('commandstats'), redis.info('cpu')]);
  const scriptCalls = [...commands.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  const seconds = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(cpu)?.[1] ?? 0);
  return { scriptCalls, cpu: seconds('used_cpu_user') + seconds('used_cpu_sys') };
}

/** CPU seconds of a set's worker processes so far. */
function workerCpu(set: VariantSet): number {
  return set.workers.reduce((sum, worker) => sum + (cpuSecondsOf(worker.pid) ?? 0), 0);
}

/** For each throw after the first of the set's last forward map: its first element's start less the end of the previous throw's last position, ms. */
async function throwGaps(set: VariantSet): Promise<number[]> {
  if (set.lastForwardId === undefined) return [];
  const view = await set.runtime.find(set.lastForwardId);
  const map = view.maps[0];
  if (map === undefined) return [];
  const elements = await Promise.all(Array.from({ length: ELEMENTS }, (_, i) => set.runtime.find(`${map.id}.${i}`)));
  const starts = elements.map((element) => element.createdAt);
  const ends = elements.map((element) => element.updatedAt);
  const gaps: number[] = [];
  // R-02: a throw goes out when the previous throw's last position settles (others may still run).
  for (let from = map.batchSize; from < ELEMENTS; from += map.batchSize) gaps.push(Math.min(...starts.slice(from, from + map.batchSize)) - ends[from - 1]!);
  return gaps;
}
