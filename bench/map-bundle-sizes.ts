/**
 * Bundle sizes of a fan-out map's throws, compared in one run: the same maps on worker sets that
 * differ only in `--bundle-size`, in interleaved rounds, with paired ratios to the first size.
 *
 *   npx tsx bench/map-bundle-sizes.ts      (builds the package, its own redis-server; about 4 minutes)
 *   BENCH_BUNDLE_SIZES (5,10: the first is the reference), BENCH_WORKERS (1: worker processes per
 *   size), BENCH_ROUNDS (8), BENCH_ELEMENTS (1,000), BENCH_CONCURRENCY (10), BENCH_MAP_BATCH_SIZE (50)
 *
 * Each size gets its own queue, prefix and `xreactor worker` processes of the built package (at
 * `--log-level info`, as in `bench/map.ts`), all started before the first round, so the other
 * sizes' workers sit idle beside the measured ones. A round runs, for every size in turn (the
 * order reversed every other round), a forward map (`bench_map_forward`) and a forward + full
 * rollback (`bench_map_rollback`) of `BENCH_ELEMENTS` elements, from `run()` to `awaitResult()`,
 * after two warm-up rounds. Per size it prints the medians, the median of each round's ratio to
 * the reference size, and the **throw boundary** of the last forward map: for each throw after
 * the first, the time from the end of the previous throw's last position (whose settle sends the
 * next throw, R-02) to the first start of its own elements (`updatedAt` and `createdAt` of the
 * elements, whole milliseconds): the map's own part of the critical path. What bundles change:
 * BullMQ jobs per element, the enqueue on that critical path, how many elements' commits share a
 * group-commit call. docs/performance.md (session 24) has the figures that set the default.
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { CliWorker } from './support.js';
import { benchFile, fmt, loadAverage, loadBuiltMapBench, machineLine, median, runBench, startCliWorker, startRedis, stopChild, whenReady } from './support.js';

const SIZES = (process.env['BENCH_BUNDLE_SIZES'] ?? '5,10').split(',').map((s) => Number(s.trim()));
const WORKERS = Number(process.env['BENCH_WORKERS'] ?? 1);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 8);
const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 10);
const WARMUP_ROUNDS = 2;
const TIMEOUT_MS = 300_000;
const REDIS_OPTIONS = { maxRetriesPerRequest: null };

interface SizeSet {
  readonly size: number;
  readonly runtime: Xreactor.Runtime;
  /** The store and queue given to the runtime: ours to close (docs/lifecycle.md). */
  readonly store: Xreactor.Store;
  readonly queue: Xreactor.Queue;
  readonly workers: readonly CliWorker[];
  readonly forward: number[];
  readonly total: number[];
  lastForwardId?: string;
}

runBench(async () => {
  if (SIZES.length < 2 || SIZES.some((s) => !Number.isSafeInteger(s) || s < 1)) throw new Error(`BENCH_BUNDLE_SIZES: at least two whole numbers >= 1, comma-separated (got "${process.env['BENCH_BUNDLE_SIZES']}")`);
  console.log(`map-bundle-sizes: ${fmt(ELEMENTS, 0)}-element fan-out maps, --bundle-size ${SIZES.join(' / ')} (reference ${SIZES[0]}), ${WORKERS} worker process${WORKERS === 1 ? '' : 'es'} per size × concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds after ${WARMUP_ROUNDS} warm-up rounds`);
  console.log(machineLine());
  const { xr, adapters, plan, reactors } = await loadBuiltMapBench();

  const server = await startRedis();
  process.env['XREACTOR_BENCH_REDIS_URL'] = server.url;
  const redis = new Redis(server.url, REDIS_OPTIONS);
  const logger = pino({ level: 'silent' });
  const sets: SizeSet[] = [];
  try {
    for (const size of SIZES) {
      const name = `bench-bundle-${size}`;
      const workers = Array.from({ length: WORKERS }, () =>
        startCliWorker({
          redisUrl: server.url,
          lib: 'dist',
          modules: [benchFile('fixtures/map-reactors-dist.mjs')],
          args: ['--queue', name, '--prefix', name, '--concurrency', String(CONCURRENCY), '--bundle-size', String(size)],
        }),
      );
      const store = adapters.createRedisStore({ redis, prefix: name });
      const queue = adapters.createBullmqQueue({ connection: redis, queueName: name });
      sets.push({ size, workers, store, queue, forward: [], total: [], runtime: xr.createRuntime({ store, queue, worker: false, reactors: Object.values(reactors), logger }) });
      for (const worker of workers) await whenReady(worker, `xreactor worker (--bundle-size ${size})`);
    }
    const items = Array.from({ length: ELEMENTS }, (_, i) => i);
    const once = async (set: SizeSet, reactor: Xreactor.AnyReactorDefinition, expected: string) => {
      const from = performance.now();
      const { executionId } = await set.runtime.run(reactor, { items });
      const result = await set.runtime.awaitResult(executionId, { timeoutMs: TIMEOUT_MS });
      if (result.status !== expected) throw new Error(`--bundle-size ${set.size}: ${reactor.name} ended ${result.status}, not ${expected}`);
      return { ms: performance.now() - from, executionId };
    };
    for (let round = -WARMUP_ROUNDS; round < ROUNDS; round++) {
      for (const set of round % 2 === 0 ? sets : [...sets].reverse()) {
        const forward = await once(set, reactors.benchMapForward, 'completed');
        const total = await once(set, reactors.benchMapRollback, 'failed');
        if (round < 0) continue;
        set.forward.push(forward.ms);
        set.total.push(total.ms);
        set.lastForwardId = forward.executionId;
      }
      if (round >= 0) console.log(`  round ${round + 1}: ${sets.map((s) => `${s.size}: ${fmt(s.forward.at(-1)!, 0)} / ${fmt(s.total.at(-1)!, 0)} ms`).join(', ')} (load ${loadAverage()})`);
    }

    console.log('');
    console.log(`bundle size | forward ms (median) | forward + rollback ms | ÷ ${SIZES[0]}, forward | ÷ ${SIZES[0]}, forward + rollback | throw boundary ms, median (least / most), last forward map`);
    const reference = sets[0]!;
    for (const set of sets) {
      const ratio = (mine: number[], theirs: number[]) => median(mine.map((v, i) => v / theirs[i]!));
      const gaps = await throwGaps(set);
      console.log(
        `${String(set.size).padStart(11)} | ${fmt(median(set.forward), 0).padStart(19)} | ${fmt(median(set.total), 0).padStart(21)} | ${fmt(ratio(set.forward, reference.forward), 3).padStart(12)} | ${fmt(ratio(set.total, reference.total), 3).padStart(23)} | ` +
          (gaps.length === 0 ? '-' : `${fmt(median(gaps), 1)} (${Math.min(...gaps)} / ${Math.max(...gaps)}) over ${gaps.length} throws`),
      );
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

/** For each throw after the first of the set's last forward map: its first element's start less the end of the previous throw's last position, ms. */
async function throwGaps(set: SizeSet): Promise<number[]> {
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
