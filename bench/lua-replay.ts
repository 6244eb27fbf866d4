/**
 * The Redis side of a fan-out map, replayed: every command the Redis store sent while a runtime
 * ran fan-out maps forward and back (`bench/fixtures/map-reactors.ts`, the in-process queue, one
 * process), captured in order on its one connection, then sent again, pipelined, to a fresh
 * `redis-server` with the store's scripts of two trees: this working tree's and those of a git
 * ref (`--before`, default HEAD). Both trees' scripts must take the same arguments; the replies
 * of every call and the data left on the server (TTLs and the active index's clock-based scores
 * aside) must be identical (the run stops at the first difference), and what differs is
 * the time Redis spends in them. So a change to the Lua alone is measured with the client, the
 * scheduler and the other processes out of the picture, each round on the same commands.
 *
 *   npx tsx bench/lua-replay.ts [--before <ref>]     (its own redis-server; about a minute)
 *   BENCH_ELEMENTS (1,000), BENCH_ROUNDS (7 per tree, interleaved)
 *
 * Printed: EVALSHA µs per element (Redis's own `INFO commandstats` time of the script calls) and
 * redis-server's CPU per element (from `INFO`), forward and forward + rollback, per tree: the
 * median and the least of the rounds (the same commands every round, so noise only adds: the
 * least is the steadier figure on a busy machine), with the after ÷ before ratios, and the
 * script calls by name.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createRuntime } from '../src/index.js';
import { createInProcessQueue, createRedisStore } from '../src/redis.js';
import { SCRIPTS } from '../src/store/redis-scripts.js';
import type { ScriptName } from '../src/store/redis-scripts.js';
import { benchMapElement, benchMapForward, benchMapRollback, closeMarks } from './fixtures/map-reactors.js';
import { fmt, loadAverage, machineLine, median, parseCommandStats, runBench, startRedis } from './support.js';

const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 1000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 7);
const beforeAt = process.argv.indexOf('--before');
const BEFORE = beforeAt >= 0 ? process.argv[beforeAt + 1]! : 'HEAD';

type Arg = string | Buffer;
const CONNECTION_COMMANDS = new Set(['hello', 'client', 'info', 'select', 'auth', 'ping', 'subscribe', 'unsubscribe', 'readonly']);
interface Captured {
  readonly name: string;
  readonly args: Arg[];
}

/** A script's source with its includes, read through `read` (a file under src/store/lua). */
function scriptSource(file: string, read: (path: string) => string): string {
  return read(file).replace(/^--- @include "([A-Za-z0-9_-]+)"[ \t]*$/gm, (_l, name: string) => read(`includes/${name}.lua`));
}

const treeReader = (path: string) => readFileSync(new URL(`../src/store/lua/${path}`, import.meta.url), 'utf8');
const refReader = (ref: string) => (path: string) => execFileSync('git', ['show', `${ref}:src/store/lua/${path}`], { encoding: 'utf8', maxBuffer: 1 << 26 });

function sourcesOf(read: (path: string) => string): Map<ScriptName, string> {
  return new Map(Object.entries(SCRIPTS).map(([name, s]) => [name as ScriptName, scriptSource(s.file, read)]));
}

/** Runs a forward and a rollback map on a store whose commands are recorded; returns them in the order sent. */
async function capture(url: string): Promise<{ forward: Captured[]; rollback: Captured[]; shaNames: Map<string, ScriptName> }> {
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  const store = createRedisStore({ redis });
  const runtime = createRuntime({ store, queue: createInProcessQueue(), worker: { concurrency: 10 }, reactors: [benchMapElement, benchMapForward, benchMapRollback], logger: pino({ level: 'silent' }) });
  // Every script loaded first, so no call meets NOSCRIPT (whose EVAL fallback would be captured twice).
  const shaNames = new Map<string, ScriptName>();
  for (const [name, source] of sourcesOf(treeReader)) shaNames.set((await redis.script('LOAD', source)) as string, name);
  let log: Captured[] = [];
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string; args: Arg[] }, ...rest: unknown[]) => {
    // The connection's own handshake and health checks are not the store's work.
    if (!CONNECTION_COMMANDS.has(command.name.toLowerCase())) log.push({ name: command.name, args: command.args.map((a) => (Buffer.isBuffer(a) ? Buffer.from(a) : a)) });
    return (send as (...a: unknown[]) => unknown)(command, ...rest);
  }) as typeof redis.sendCommand;
  const items = Array.from({ length: ELEMENTS }, (_, i) => i);
  const run = async (reactor: typeof benchMapForward, expected: string) => {
    log = [];
    const { executionId } = await runtime.run(reactor, { items });
    const result = await runtime.awaitResult(executionId, { timeoutMs: 300_000 });
    if (result.status !== expected) throw new Error(`capture: the map ended ${result.status}, not ${expected}`);
    return log;
  };
  const forward = await run(benchMapForward, 'completed');
  const rollback = await run(benchMapRollback, 'failed');
  await runtime.close();
  await store.close(); // the runtime does not own a store passed to it: its subscriber connection is closed here
  redis.disconnect();
  return { forward, rollback, shaNames };
}

interface Replay {
  readonly evalshaUs: number;
  readonly cpuUs: number;
  readonly byScript: Map<string, number>;
  readonly replies: unknown[];
  /** What the server holds afterwards (when replies are kept): key -> its type and value, TTLs and the active index's scores left out. */
  readonly state: Map<string, string>;
}

async function redisCpuUs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)![1]);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
}

/** Sends `commands` on a flushed server with `sources` loaded; the EVALSHA time and the replies. */
async function replay(redis: Redis, commands: readonly Captured[], shaNames: ReadonlyMap<string, ScriptName>, sources: ReadonlyMap<ScriptName, string>, keepReplies: boolean): Promise<Replay> {
  await redis.flushall();
  await redis.script('FLUSH');
  const shaOf = new Map<ScriptName, string>();
  for (const [name, source] of sources) shaOf.set(name, (await redis.script('LOAD', source)) as string);
  const byScript = new Map<string, number>();
  const calls = commands.map(({ name, args }) => {
    if (name !== 'evalsha') return { name, args };
    const script = shaNames.get(String(args[0]));
    if (script === undefined) throw new Error(`replay: an EVALSHA of an unknown script ${String(args[0])}`);
    byScript.set(script, (byScript.get(script) ?? 0) + 1);
    return { name, args: [shaOf.get(script)!, ...args.slice(1)] };
  });
  await redis.config('RESETSTAT');
  const cpu = await redisCpuUs(redis);
  const replies: unknown[] = [];
  for (let from = 0; from < calls.length; from += 500) {
    const pipeline = redis.pipeline();
    for (const { name, args } of calls.slice(from, from + 500)) pipeline.call(name, ...args);
    for (const [error, reply] of (await pipeline.exec())!) if (keepReplies) replies.push(error === null ? reply : `error: ${(error).message}`);
  }
  const cpuUs = (await redisCpuUs(redis)) - cpu;
  const evalsha = parseCommandStats(await redis.info('commandstats')).get('evalsha');
  return { evalshaUs: evalsha?.usec ?? 0, cpuUs, byScript, replies, state: keepReplies ? await stateOf(redis) : new Map() };
}

/**
 * Every key with its type and value, for comparing what two trees' scripts wrote. Left out: TTLs
 * (stamped from the server's clock) and sorted-set scores (the active index scores from `TIME`).
 */
async function stateOf(redis: Redis): Promise<Map<string, string>> {
  const text = (bytes: Buffer) => bytes.toString('latin1');
  const state = new Map<string, string>();
  for (const key of (await redis.keys('*')).sort()) {
    const type = await redis.type(key);
    const value =
      type === 'string' ? text((await redis.getBuffer(key))!)
      : type === 'hash' ? Object.entries(await redis.hgetallBuffer(key)).map(([field, bytes]) => [field, text(bytes)]).sort(([a], [b]) => (a! < b! ? -1 : 1))
      : type === 'list' ? (await redis.lrangeBuffer(key, 0, -1)).map(text)
      : type === 'set' ? (await redis.smembers(key)).sort()
      : type === 'zset' ? await redis.zrange(key, '0', '-1')
      : type;
    state.set(key, `${type} ${JSON.stringify(value)}`);
  }
  return state;
}

function firstDifference(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) return i;
  return -1;
}

runBench(async () => {
  const server = await startRedis();
  process.env['XREACTOR_BENCH_REDIS_URL'] = server.url;
  const redis = new Redis(server.url);
  try {
    console.log(`lua-replay: the store's commands of a ${fmt(ELEMENTS, 0)}-element fan-out map, forward and forward + rollback, replayed with the scripts of ${BEFORE} (before) and of this tree (after); ${ROUNDS} rounds each, interleaved`);
    console.log(machineLine());
    const { forward, rollback, shaNames } = await capture(server.url);
    closeMarks();
    const trees = { before: sourcesOf(refReader(BEFORE)), after: sourcesOf(treeReader) };
    for (const [kind, commands] of [['forward', forward], ['forward + rollback', [...forward, ...rollback]]] as const) {
      const figures = { before: { evalsha: [] as number[], cpu: [] as number[] }, after: { evalsha: [] as number[], cpu: [] as number[] } };
      let reference: unknown[] | undefined;
      let referenceState: Map<string, string> | undefined;
      let byScript: Map<string, number> | undefined;
      for (let round = 0; round < ROUNDS; round++) {
        for (const tree of round % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const)) {
          const r = await replay(redis, commands, shaNames, trees[tree], round < 2);
          if (round < 2) {
            if (reference === undefined) {
              reference = r.replies;
              referenceState = r.state;
            } else {
              for (const key of new Set([...referenceState!.keys(), ...r.state.keys()])) {
                if (referenceState!.get(key) !== r.state.get(key)) throw new Error(`replay: key ${key} differs between the trees afterwards: ${referenceState!.get(key)?.slice(0, 300) ?? 'absent'} vs ${r.state.get(key)?.slice(0, 300) ?? 'absent'}`);
              }
              const at = firstDifference(reference, r.replies);
              if (at >= 0) throw new Error(`replay: reply ${at} (${commands[at]!.name} ${shaNames.get(String(commands[at]!.args[0])) ?? ''}) differs between the trees: ${JSON.stringify(reference[at])} vs ${JSON.stringify(r.replies[at])}`);
            }
          }
          byScript = r.byScript;
          figures[tree].evalsha.push(r.evalshaUs / ELEMENTS);
          figures[tree].cpu.push(r.cpuUs / ELEMENTS);
        }
      }
      const line = (tree: 'before' | 'after') =>
        `EVALSHA ${fmt(median(figures[tree].evalsha))} µs per element, least ${fmt(Math.min(...figures[tree].evalsha))} (rounds ${figures[tree].evalsha.map((v) => fmt(v, 0)).join(' / ')}); redis-server CPU ${fmt(median(figures[tree].cpu))} µs, least ${fmt(Math.min(...figures[tree].cpu))}`;
      console.log(`${kind}: ${fmt(commands.length / ELEMENTS, 1)} commands per element; script calls: ${[...byScript!].map(([n, c]) => `${n} ${c}`).join(', ')}`);
      console.log(`  before: ${line('before')}`);
      console.log(`  after:  ${line('after')}`);
      const ratio = (of: (v: number[]) => number, what: 'evalsha' | 'cpu') => fmt(of(figures.after[what]) / of(figures.before[what]), 3);
      const least = (v: number[]) => Math.min(...v);
      console.log(`  after ÷ before: EVALSHA ${ratio(median, 'evalsha')} (least ÷ least ${ratio(least, 'evalsha')}), CPU ${ratio(median, 'cpu')} (${ratio(least, 'cpu')}); replies and the data left identical`);
    }
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    redis.disconnect();
    await server.stop();
  }
});
