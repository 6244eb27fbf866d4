/**
 * The Redis floor of one fan-out element's two forward commits: the 44 commands MONITOR shows for
 * them (the start commit's fence, creation, started list, active index and lease; the end
 * commit's fence, results, undo, trace, outcome slot, stats, unlisting, lease and notice), with
 * the same value sizes, run straight in one Lua script per element, against the same commands
 * with results, undo and trace as fields of the execution hash (docs/design/map.md §20).
 * Compare its figure with what `commitBatch-1n.lua` takes per commit in `bench/map.ts` (the
 * slow log, docs/performance.md): the difference is the Lua logic around the commands.
 *
 *   npx tsx bench/element-commands-flat.ts      (a private redis-server; about 10 s)
 *   BENCH_ELEMENTS=10000 BENCH_ROUNDS=4
 */
import { Redis } from 'ioredis';
import { fmt, loadAverage, machineLine, median, parseCommandStats, startRedis } from './support.js';

const ELEMENTS = Number(process.env['BENCH_ELEMENTS'] ?? 10_000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 4);

/** An element's snapshot envelope is about 700 bytes. */
const snap = 'x'.repeat(700);
const common = `
local id, b = ARGV[1], 'b:'
local function k(kind) return b .. kind .. ':' .. id end
local ttl = 86400000
`;
const today = common + `
-- start commit
redis.call('HMGET', k('exec'), 'rev', 'iseq'); redis.call('GET', k('lease')); redis.call('HGET', 'b:mapstat', 'stop'); redis.call('HGET', 'b:mapexec', 'status')
redis.call('DEL', k('results'), k('undo'), k('trace'), k('inbox'), k('dedupe'), k('awaits'), k('children'))
redis.call('HSET', k('exec'), 'reactor', 'bench_map_element', 'input', '1', 'parent', 'm', 'detached', '1')
redis.call('HSET', k('exec'), 'rev', 1, 'status', 'running', 'snapshot', ARGV[2], 'outbox', 'ob')
redis.call('PEXPIRE', k('exec'), ttl)
redis.call('EXISTS', 'b:mapstat'); redis.call('RPUSH', 'b:mapstarted', id); redis.call('PTTL', 'b:mapstarted'); redis.call('HINCRBY', 'b:mapstat', 'started', 1)
redis.call('ZSCORE', 'b:active', id); redis.call('TIME'); redis.call('ZRANGE', 'b:active', -1, -1, 'WITHSCORES'); redis.call('ZADD', 'b:active', 'NX', 1, id)
redis.call('SET', k('lease'), 'owner', 'PX', 30000)
-- end commit
redis.call('HMGET', k('exec'), 'rev', 'iseq'); redis.call('LLEN', k('undo'))
redis.call('HSET', k('results'), 'touch', '1'); redis.call('HLEN', k('results'))
redis.call('RPUSH', k('undo'), 'undo-entry-40-bytes-xxxxxxxxxxxxxxxxxxxxx'); redis.call('RPUSH', k('trace'), 'trace-entry-60-bytes-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
redis.call('HSET', k('exec'), 'rev', 2, 'status', 'completed', 'snapshot', ARGV[2], 'outbox', 'ob')
redis.call('PEXPIRE', k('results'), ttl); redis.call('PEXPIRE', k('undo'), ttl); redis.call('PEXPIRE', k('trace'), ttl)
redis.call('EXISTS', 'b:mapstat'); redis.call('HSETNX', 'b:mapout', id, 'c'); redis.call('PTTL', 'b:mapout')
redis.call('HINCRBY', 'b:mapstat', 'settled', 1); redis.call('HINCRBY', 'b:mapstat', 'completed', 1); redis.call('HSET', 'b:mapstat', 'lastReportAt', 1); redis.call('HGET', 'b:mapstat', 'buckets'); redis.call('HMGET', 'b:mapstat', 'target', 'settled')
redis.call('ZREM', 'b:active', id); redis.call('GET', k('lease')); redis.call('DEL', k('lease')); redis.call('HGET', k('results'), 'touch')
redis.call('PUBLISH', 'b:settled', ARGV[2])
return 1`;
const folded = common + `
-- start commit
redis.call('HMGET', k('exec'), 'rev', 'iseq'); redis.call('GET', k('lease')); redis.call('HGET', 'b:mapstat', 'stop'); redis.call('HGET', 'b:mapexec', 'status')
redis.call('DEL', k('exec'))
redis.call('HSET', k('exec'), 'reactor', 'bench_map_element', 'input', '1', 'parent', 'm', 'detached', '1', 'rev', 1, 'status', 'running', 'snapshot', ARGV[2], 'outbox', 'ob')
redis.call('PEXPIRE', k('exec'), ttl)
redis.call('EXISTS', 'b:mapstat'); redis.call('RPUSH', 'b:mapstarted', id); redis.call('PTTL', 'b:mapstarted'); redis.call('HINCRBY', 'b:mapstat', 'started', 1)
redis.call('ZSCORE', 'b:active', id); redis.call('TIME'); redis.call('ZRANGE', 'b:active', -1, -1, 'WITHSCORES'); redis.call('ZADD', 'b:active', 'NX', 1, id)
redis.call('SET', k('lease'), 'owner', 'PX', 30000)
-- end commit
redis.call('HMGET', k('exec'), 'rev', 'iseq', 'undo.n')
redis.call('HSET', k('exec'), 'r:touch', '1', 'u:1', 'undo-entry-40-bytes-xxxxxxxxxxxxxxxxxxxxx', 'undo.n', 1, 't:1', 'trace-entry-60-bytes-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', 'rev', 2, 'status', 'completed', 'snapshot', ARGV[2], 'outbox', 'ob')
redis.call('EXISTS', 'b:mapstat'); redis.call('HSETNX', 'b:mapout', id, 'c'); redis.call('PTTL', 'b:mapout')
redis.call('HINCRBY', 'b:mapstat', 'settled', 1); redis.call('HINCRBY', 'b:mapstat', 'completed', 1); redis.call('HSET', 'b:mapstat', 'lastReportAt', 1); redis.call('HGET', 'b:mapstat', 'buckets'); redis.call('HMGET', 'b:mapstat', 'target', 'settled')
redis.call('ZREM', 'b:active', id); redis.call('GET', k('lease')); redis.call('DEL', k('lease')); redis.call('HGET', k('exec'), 'r:touch')
redis.call('PUBLISH', 'b:settled', ARGV[2])
return 1`;

async function usecPerElement(redis: Redis, label: string, source: string): Promise<number> {
  const sha = (await redis.script('LOAD', source)) as string;
  await redis.flushall();
  await redis.config('RESETSTAT');
  const pipeline = redis.pipeline();
  for (let i = 0; i < ELEMENTS; i += 1) pipeline.evalsha(sha, 0, `${label}-${i}`, snap);
  await pipeline.exec();
  const evalsha = parseCommandStats(await redis.info('commandstats')).get('evalsha');
  if (evalsha === undefined || evalsha.calls === 0) throw new Error('redis-server counted no EVALSHA: the script did not run');
  return evalsha.usec / evalsha.calls;
}

const server = await startRedis();
const redis = new Redis(server.url);
try {
  console.log(`element-commands-flat: ${fmt(ELEMENTS, 0)} elements x ${ROUNDS} rounds per layout, interleaved`);
  console.log(machineLine());
  const figures = { today: [] as number[], folded: [] as number[] };
  for (let round = 0; round < ROUNDS; round += 1) {
    figures.today.push(await usecPerElement(redis, 'today', today));
    figures.folded.push(await usecPerElement(redis, 'folded', folded));
  }
  console.log(`  today's layout, 44 commands:          ${fmt(median(figures.today))} µs of Redis per element (rounds ${figures.today.map((x) => fmt(x)).join(' / ')})`);
  console.log(`  results/undo/trace as hash fields:    ${fmt(median(figures.folded))} µs (rounds ${figures.folded.map((x) => fmt(x)).join(' / ')})`);
  console.log(`load average at end: ${loadAverage()}`);
} finally {
  redis.disconnect();
  await server.stop();
}
