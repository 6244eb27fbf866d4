/**
 * Per-step cost of an inline run persisted to Redis, for linear reactors of 10, 100 and 1,000
 * steps, against a bare Lua script round trip (EVALSHA of a trivial script, same client, same
 * run, interleaved).
 *
 *   npx tsx bench/redis-steps.ts        (BENCH_ROUNDS=41 for more rounds; default 21)
 *
 * A private redis-server is started on a free port (no persistence) and stopped at the end.
 * Each step reads the previous step's result and returns a small object, as in
 * `inline-steps.ts`. The runtime is `createRuntime({ store: <Redis store>, queue: createInProcessQueue() })`, an
 * in-process queue (an inline run enqueues nothing). A counting wrapper around the store counts
 * and times every store call, so the report also gives commits per step and a breakdown.
 * A benchmark reports, it never gates: the exit code is always 0.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pino from 'pino';
import type * as Xreactor from '../src/index.js';
import type { AnyReactorDefinition, Commit, Runtime, Store } from '../src/index.js';
import type * as RedisAdapters from '../src/redis.js';
import type * as Keys from '../src/store/keys.js';
import type * as Scripts from '../src/store/redis-scripts.js';
import { fmt, loadAverage, machineLine, median, pad, percentile, startRedis, targetLine, turn, runBench, linearReactor } from './support.js';
import type { RedisServer } from './support.js';

let xr: typeof Xreactor;
let adapters: typeof RedisAdapters;
let keys: typeof Keys;
let scripts: typeof Scripts;

const SIZES = [10, 100, 1000] as const;
/** Steps per timed sample: 100 executions of 10 steps, 10 of 100, 1 of 1,000. */
const STEPS_PER_SAMPLE = 1000;
const WARMUP_ROUNDS = 3;
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 21);
/** Awaited calls per baseline sample. */
const BASELINE_OPS = 500;
/** Targets from the issue. */
const MAX_ROUND_TRIPS_PER_STEP = 2;
const MAX_FLATNESS = 1.5;

const logger = pino({ level: 'silent' });

// ---------------------------------------------------------------------------------------------
// Reactors and the counting store


interface CallStats {
  count: number;
  ms: number;
}

/** Counts and times every call of a store (sequential calls per run: a run awaits each one). */
class CountingStore {
  readonly stats = new Map<string, CallStats>();
  /** Duration of every commit and readResults call since the last reset, µs. */
  latencies = { commit: [] as number[], readResults: [] as number[] };
  /** The last commit that recorded a step result and asked for the next step. */
  lastCommit: Commit | undefined;
  readonly store: Store;

  constructor(inner: Store) {
    this.store = new Proxy(inner, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        return (...args: unknown[]) => {
          let stats = this.stats.get(property);
          if (stats === undefined) this.stats.set(property, (stats = { count: 0, ms: 0 }));
          // Keep a commit from the middle of a run (one that asks for the next step), for the breakdown.
          if (property === 'commit' && (args[2] as Commit).outbox.some((e) => e.type === 'xreactor.effect.runStep') && (args[2] as Commit).writes.results.length > 0) {
            this.lastCommit = args[2] as Commit;
          }
          const counted = stats;
          counted.count += 1;
          const start = performance.now();
          const out = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (!(out instanceof Promise)) return out;
          return out.finally(() => {
            const ms = performance.now() - start;
            counted.ms += ms;
            if (property === 'commit' || property === 'readResults') this.latencies[property].push(ms * 1000);
          });
        };
      },
    });
  }

  reset(): void {
    this.stats.clear();
    this.latencies.commit = [];
    this.latencies.readResults = [];
  }

  count(name: string): number {
    return this.stats.get(name)?.count ?? 0;
  }

  ms(name: string): number {
    return this.stats.get(name)?.ms ?? 0;
  }

  totalMs(): number {
    let total = 0;
    for (const s of this.stats.values()) total += s.ms;
    return total;
  }

  totalCount(): number {
    let total = 0;
    for (const s of this.stats.values()) total += s.count;
    return total;
  }
}

// ---------------------------------------------------------------------------------------------
// Samples

interface StepSample {
  perStepUs: number;
  commitsPerStep: number;
  storeCallsPerStep: number;
  commitUs: number;
  readResultsUs: number;
  otherStoreUs: number;
  restUs: number;
  /** Every commit / readResults call of the sample, µs. */
  commitCalls: number[];
  readCalls: number[];
}

async function runOnce(runtime: Runtime, reactor: AnyReactorDefinition, steps: number): Promise<void> {
  const result = await runtime.run(reactor as any, {});
  if (result.status !== 'completed' || (result.value as { n: number }).n !== steps - 1) {
    throw new Error(`${reactor.name}: unexpected result ${JSON.stringify(result)}`);
  }
}

async function sampleReactor(runtime: Runtime, counting: CountingStore, reactor: AnyReactorDefinition, steps: number): Promise<StepSample> {
  const executions = Math.max(1, Math.round(STEPS_PER_SAMPLE / steps));
  counting.reset();
  const start = performance.now();
  for (let i = 0; i < executions; i++) await runOnce(runtime, reactor, steps);
  const elapsed = performance.now() - start;
  const total = executions * steps;
  const us = (ms: number) => (ms * 1000) / total;
  const commitMs = counting.ms('commit');
  const readMs = counting.ms('readResults');
  const otherMs = counting.totalMs() - commitMs - readMs;
  return {
    perStepUs: us(elapsed),
    commitsPerStep: counting.count('commit') / total,
    storeCallsPerStep: counting.totalCount() / total,
    commitUs: us(commitMs),
    readResultsUs: us(readMs),
    otherStoreUs: us(otherMs),
    restUs: us(elapsed - commitMs - readMs - otherMs),
    commitCalls: counting.latencies.commit,
    readCalls: counting.latencies.readResults,
  };
}

/** µs per awaited call. */
async function sampleCalls(call: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < BASELINE_OPS; i++) await call();
  return ((performance.now() - start) * 1000) / BASELINE_OPS;
}

/** Redis' own time per EVALSHA (server side, from INFO commandstats) over `work`. */
async function serverUsPerEvalsha(redis: Redis, work: () => Promise<void>): Promise<{ calls: number; usPerCall: number }> {
  await redis.config('RESETSTAT');
  await work();
  const info = await redis.info('commandstats');
  const line = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info);
  if (line === null) return { calls: 0, usPerCall: Number.NaN };
  const calls = Number(line[1]);
  return { calls, usPerCall: Number(line[2]) / calls };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  [xr, adapters, keys, scripts] = await Promise.all([
    import('../src/index.js'),
    import('../src/redis.js'),
    import('../src/store/keys.js'),
    import('../src/store/redis-scripts.js'),
  ]);
  console.log('xreactor bench: inline steps persisted to Redis');
  console.log(machineLine());
  console.log(`${ROUNDS} interleaved rounds after ${WARMUP_ROUNDS} warm-up rounds, ${STEPS_PER_SAMPLE} steps per sample, ${BASELINE_OPS} calls per baseline sample`);
  console.log(`load average at start: ${loadAverage()} (other processes on the machine inflate every figure alike)`);

  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  const runtimes: Runtime[] = [];
  let storeToClose: Store | undefined;
  try {
    server = await startRedis();
    redis = new Redis(server.url);
    const client = redis;
    const version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?';
    console.log(`redis-server ${version} on 127.0.0.1:${server.port} (private, no persistence), ioredis client, one connection`);

    const bareStore = adapters.createRedisStore({ redis: client });
    const counting = new CountingStore(bareStore);
    storeToClose = counting.store;
    const reactors = new Map(SIZES.map((n) => [n, linearReactor(xr.defineReactor, 'redis_linear', n)]));
    const runtimeOf = new Map(
      SIZES.map((n) => {
        const runtime = xr.createRuntime({ store: counting.store, queue: adapters.createInProcessQueue(), logger, reactors: [reactors.get(n)!] });
        runtimes.push(runtime);
        return [n, runtime];
      }),
    );

    const trivialSha = String(await client.script('LOAD', 'return 1'));
    const evalsha = () => client.evalsha(trivialSha, 1, 'bench:trivial');
    const ping = () => client.ping();

    // The floor of a step on Redis: its commit alone, called on the store with no host around it
    // (the commit a run makes mid-way, replayed on a fresh execution with its undo push moved to
    // the end of the stack). NaN until a run has produced such a commit (warm-up rounds only).
    let bareExecutions = 0;
    const bareCommit = async (): Promise<number> => {
      const model = counting.lastCommit;
      if (model === undefined) return Number.NaN;
      const id = `bench-bare-commit-${(bareExecutions += 1)}`;
      let revision = await bareStore.create({ id, reactor: 'bench', input: {}, commit: { ...model, writes: { ...model.writes, pushUndo: [] } } });
      const commits = Array.from({ length: BASELINE_OPS }, (_, i) => ({ ...model, writes: { ...model.writes, pushUndo: model.writes.pushUndo.map((e) => ({ ...e, position: i })) } }));
      const start = performance.now();
      for (const commit of commits) revision = await bareStore.commit(id, revision, commit);
      return ((performance.now() - start) * 1000) / BASELINE_OPS;
    };

    // The commit's wire cost alone: a trivial script called with the very keys and arguments of a
    // step's commit (what the client and the server spend on 29 arguments and their bytes, with
    // nothing done inside). NaN until a run has produced such a commit.
    const trivialReplySha = String(await client.script('LOAD', 'return {0, 1}'));
    const commitShaped = async (): Promise<number> => {
      const model = counting.lastCommit;
      if (model === undefined) return Number.NaN;
      const call = scripts.commitArgs(keys.createKeyBuilder('xr').executionKeys('bench-commit-shaped'), 1, model, 86_400_000, { restamp: false });
      return sampleCalls(() => client.evalsha(trivialReplySha, call.keys.length, ...call.keys, ...call.argv));
    };

    const kinds: { name: string; sample: () => Promise<number | StepSample> }[] = [
      { name: 'evalsha', sample: () => sampleCalls(evalsha) },
      { name: 'commitShaped', sample: commitShaped },
      { name: 'ping', sample: () => sampleCalls(ping) },
      { name: 'bareCommit', sample: bareCommit },
      ...SIZES.map((n) => ({ name: `steps${n}`, sample: () => sampleReactor(runtimeOf.get(n)!, counting, reactors.get(n)!, n) })),
    ];
    const samples = new Map<string, (number | StepSample)[]>(kinds.map((k) => [k.name, []]));
    for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
      for (let k = 0; k < kinds.length; k++) {
        const kind = kinds[(k + round) % kinds.length]!;
        const value = await kind.sample();
        if (round >= WARMUP_ROUNDS) samples.get(kind.name)!.push(value);
        await turn();
      }
    }
    const numbers = (name: string) => samples.get(name)! as number[];
    const steps = (n: number) => samples.get(`steps${n}`)! as StepSample[];
    const evalshaUs = median(numbers('evalsha'));
    const pingUs = median(numbers('ping'));
    const range = (values: readonly number[]) => `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;

    console.log('');
    console.log('baselines (median µs per awaited call, min–max over rounds):');
    console.log(`  EVALSHA of a trivial script (return 1)   ${pad(fmt(evalshaUs), 7)} µs   (${range(numbers('evalsha'))})`);
    console.log(`  (reference) PING                         ${pad(fmt(pingUs), 7)} µs   (${range(numbers('ping'))})`);
    const shapedUs = median(numbers('commitShaped').filter((v) => !Number.isNaN(v)));
    console.log(
      `  (wire) a trivial script, a commit's args ${pad(fmt(shapedUs), 7)} µs   (${range(numbers('commitShaped').filter((v) => !Number.isNaN(v)))}) = ${fmt(shapedUs / evalshaUs, 2)}× EVALSHA`,
    );
    const bareUs = median(numbers('bareCommit').filter((v) => !Number.isNaN(v)));
    console.log(
      `  (floor) a step's commit alone, no host   ${pad(fmt(bareUs), 7)} µs   (${range(numbers('bareCommit').filter((v) => !Number.isNaN(v)))}) = ${fmt(bareUs / evalshaUs, 2)}× EVALSHA`,
    );
    console.log('');
    console.log(' steps | per-step µs | min–max µs      | ÷ EVALSHA | commits/step | store calls/step');
    console.log('-------|-------------|-----------------|-----------|--------------|-----------------');
    const perStep = new Map<number, number>();
    for (const n of SIZES) {
      const rows = steps(n);
      const us = median(rows.map((r) => r.perStepUs));
      perStep.set(n, us);
      console.log(
        `${pad(String(n), 6)} | ${pad(fmt(us), 11)} | ${range(rows.map((r) => r.perStepUs)).padEnd(15)} | ${pad(fmt(us / evalshaUs, 2) + '×', 9)} | ` +
          `${pad(fmt(median(rows.map((r) => r.commitsPerStep)), 3), 12)} | ${pad(fmt(median(rows.map((r) => r.storeCallsPerStep)), 3), 15)}`,
      );
    }
    console.log(
      `per-step cost ÷ a step's commit alone (what the host adds around the commit): ${SIZES.map((n) => `${fmt(perStep.get(n)! / bareUs, 2)}× at ${n}`).join(', ')}`,
    );
    const flatness = perStep.get(1000)! / perStep.get(10)!;
    console.log('');
    console.log(`flatness (per-step cost at 1,000 steps ÷ at 10 steps): ${fmt(flatness, 2)}`);

    // ---- breakdown
    console.log('');
    console.log('breakdown per step: median µs (÷ EVALSHA), from the counting store in the same samples:');
    console.log(' steps | total          | store.commit   | readResults    | other store calls | rest (transition, host loop, step body)');
    console.log('-------|----------------|----------------|----------------|-------------------|-----------------------------------------');
    for (const n of SIZES) {
      const rows = steps(n);
      const col = (key: 'perStepUs' | 'commitUs' | 'readResultsUs' | 'otherStoreUs' | 'restUs', width: number) => {
        const us = median(rows.map((r) => r[key]));
        return pad(`${fmt(us)} (${fmt(us / evalshaUs, 2)}×)`, width);
      };
      console.log(`${pad(String(n), 6)} | ${col('perStepUs', 14)} | ${col('commitUs', 14)} | ${col('readResultsUs', 14)} | ${col('otherStoreUs', 17)} | ${col('restUs', 18)}`);
    }
    const callCounts = [...counting.stats.entries()].map(([name, s]) => `${name} ${s.count}`).join(', ');
    console.log(`  store calls in the last sample: ${callCounts}`);
    console.log('');
    console.log('single calls, all measured samples pooled: median / p90 / p99 µs (÷ EVALSHA at the median):');
    for (const n of SIZES) {
      const rows = steps(n);
      const dist = (values: number[]) =>
        values.length === 0
          ? 'none (every result read came from what the host committed)'
          : `${pad(fmt(median(values)), 6)} / ${pad(fmt(percentile(values, 90)), 6)} / ${pad(fmt(percentile(values, 99)), 7)}  (${fmt(median(values) / evalshaUs, 2)}×)`;
      console.log(`  ${pad(String(n), 5)} steps   store.commit ${dist(rows.flatMap((r) => r.commitCalls))}   readResults ${dist(rows.flatMap((r) => r.readCalls))}`);
    }

    // ---- the commit round trip, taken apart
    const commit = counting.lastCommit;
    if (commit !== undefined) {
      const keyBuilder = keys.createKeyBuilder('xr');
      const executionKeys = keyBuilder.executionKeys('00000000-0000-0000-0000-000000000000');
      const encodeRuns: number[] = [];
      for (let b = 0; b < 9; b++) {
        const start = performance.now();
        for (let i = 0; i < 1000; i++) scripts.commitArgs(executionKeys, 5, commit, 86_400_000);
        encodeRuns.push(performance.now() - start); // ms per 1,000 = µs each
      }
      const call = scripts.commitArgs(executionKeys, 5, commit, 86_400_000);
      const bytes = call.argv.reduce((sum, a) => sum + (typeof a === 'string' ? Buffer.byteLength(a) : a.length), 0);
      const runtime1000 = runtimeOf.get(1000)!;
      const server1000 = await serverUsPerEvalsha(client, () => runOnce(runtime1000, reactors.get(1000)!, 1000));
      const serverTrivial = await serverUsPerEvalsha(client, async () => {
        for (let i = 0; i < 1000; i++) await evalsha();
      });
      console.log('');
      console.log('one step commit (commitExecution-5.lua), taken apart:');
      console.log(`  arguments built and encoded (commitArgs, client CPU)  ${pad(fmt(median(encodeRuns)), 6)} µs   (${call.argv.length} ARGV, ${bytes} B)`);
      console.log(
        `  Redis time per EVALSHA while a 1,000-step run commits ${pad(fmt(server1000.usPerCall), 6)} µs   (INFO commandstats, ${server1000.calls} EVALSHA: commits, lease, create)`,
      );
      console.log(`  Redis time per EVALSHA of the trivial script          ${pad(fmt(serverTrivial.usPerCall), 6)} µs`);
      console.log(
        `  what it writes: ${commit.writes.results.length} result, ${commit.writes.pushUndo.length} undo entry, ${commit.writes.trace.length} trace entry, ` +
          `snapshot, outbox [${commit.outbox.map((e) => e.type).join(', ')}] (retention re-stamped only when due)`,
      );
    }

    // ---- targets
    console.log('');
    const worst = Math.max(...perStep.values());
    console.log(
      targetLine(
        worst / evalshaUs <= MAX_ROUND_TRIPS_PER_STEP,
        `per-step cost within ${MAX_ROUND_TRIPS_PER_STEP} bare Lua round trips (worst ${fmt(worst / evalshaUs, 2)}×: ${fmt(worst)} µs vs EVALSHA ${fmt(evalshaUs)} µs)`,
      ),
    );
    console.log(targetLine(flatness <= MAX_FLATNESS, `per-step cost flat from 10 to 1,000 steps (flatness ${fmt(flatness, 2)}, target ≤ ${MAX_FLATNESS})`));
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    for (const runtime of runtimes) await runtime.close().catch(() => undefined);
    await storeToClose?.close().catch(() => undefined);
    redis?.disconnect();
    await server?.stop();
  }
}

runBench(main);
