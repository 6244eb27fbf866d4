/**
 * A command tracer for worker processes, and its reader: where a process waits on Redis.
 *
 * As a preload (`node --import ./bench/trace-commands.mjs ...`, e.g. `BENCH_WORKER_NODE_ARGS` of
 * `bench/map.ts`, with `XR_TRACE_DIR=<dir>`): every command the process sends through ioredis is
 * recorded with its send and reply times on the machine's wall clock (milliseconds, so traces of
 * several processes line up), its name, and for a script its name (the store's, as in `SCRIPTS`,
 * and BullMQ's, by SHA1); the map host's `load`, `transition` and `perform` are marked
 * beside them (a map transition's event, a perform's effect). On exit the process writes
 * `<dir>/trace.<pid>.json`: `[sentMs, repliedMs, name, detail][]` (repliedMs negative: it failed).
 *
 * As a program (`node bench/trace-commands.mjs <dir>`): reads every trace in `<dir>` and prints,
 * per process, its commands by name, and the **throw boundaries** of the fan-out maps it threw:
 * from the last reply before a map's `load` (the wake its last position's settle sent) to the
 * first group commit after the map's `enqueue` began (the next throw's first element commit).
 * docs/performance.md (session 28) has what these showed.
 */
import console from 'node:console';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, URL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Script SHA1 (first 8 hex digits) → name: the store's scripts as the built store loads them
 * (`SCRIPTS`, `loadLuaScript`: includes resolved), and BullMQ's.
 */
async function scriptNames() {
  const names = new Map();
  try {
    const { SCRIPTS, loadLuaScript } = await import(join(ROOT, 'dist/src/store/redis-scripts.js'));
    for (const [name, script] of Object.entries(SCRIPTS)) names.set(createHash('sha1').update(loadLuaScript(script.file)).digest('hex').slice(0, 8), name);
  } catch {
    // No built tree: the store's scripts go by their SHA1.
  }
  const require = createRequire(join(ROOT, 'package.json'));
  const bullScripts = join(require.resolve('bullmq').replace(/dist\/cjs\/.*$/, 'dist/cjs/scripts'));
  for (const file of readdirSync(bullScripts).filter((f) => f.endsWith('.js') && f !== 'index.js')) {
    try {
      for (const script of Object.values(require(join(bullScripts, file)))) {
        if (typeof script?.content === 'string') names.set(createHash('sha1').update(script.content).digest('hex').slice(0, 8), `bullmq:${script.name}`);
      }
    } catch {
      // Not a script module.
    }
  }
  return names;
}

const now = () => performance.timeOrigin + performance.now();

async function trace(dir) {
  const require = createRequire(join(ROOT, 'package.json'));
  const { Redis } = require('ioredis');
  const names = await scriptNames();
  const log = [];
  const send = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function (command, stream) {
    const detail = command.name === 'evalsha' ? (names.get(String(command.args[0]).slice(0, 8)) ?? String(command.args[0]).slice(0, 8)) : '';
    const record = [now(), 0, command.name, detail];
    log.push(record);
    const result = send.call(this, command, stream);
    command.promise.then(
      () => void (record[1] = now()),
      () => void (record[1] = -now()),
    );
    return result;
  };
  // The map host of the tree this process runs (a worker of the built package), when it has one.
  try {
    const { MapHost } = await import(join(ROOT, 'dist/src/runtime/map-host.js'));
    for (const method of ['load', 'transition', 'perform']) {
      const original = MapHost.prototype[method];
      MapHost.prototype[method] = function (...args) {
        const record = [now(), 0, `map.${method}`, method === 'load' ? '' : String(args[1]?.type ?? '')];
        log.push(record);
        const result = original.apply(this, args);
        Promise.resolve(result).then(
          () => void (record[1] = now()),
          () => void (record[1] = -now()),
        );
        return result;
      };
    }
  } catch {
    // No built tree: commands only.
  }
  process.on('exit', () => writeFileSync(join(dir, `trace.${process.pid}.json`), JSON.stringify(log)));
}

function read(dir) {
  const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] ?? NaN;
  for (const file of readdirSync(dir).filter((f) => /^trace\.\d+\.json$/.test(f))) {
    const log = JSON.parse(readFileSync(join(dir, file), 'utf8')).sort((a, b) => a[0] - b[0]);
    const counts = new Map();
    for (const [, , name, detail] of log) if (!name.startsWith('map.')) counts.set(detail || name, (counts.get(detail || name) ?? 0) + 1);
    const boundaries = [];
    for (const [at, , name] of log) {
      if (name !== 'map.load') continue;
      const before = log.filter((r) => r[1] > 0 && r[1] < at && !r[2].startsWith('map.') && r[2] !== 'bzpopmin').map((r) => r[1]);
      const enqueue = log.find((r) => r[0] > at && r[2] === 'map.perform' && r[3] === 'xreactor.effect.map.enqueue');
      const next = enqueue && log.find((r) => r[0] > enqueue[0] && r[3] === 'commitBatch');
      if (before.length > 0 && next) boundaries.push(next[0] - Math.max(...before));
    }
    console.log(`${file}: ${log.length} records; ${[...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    if (boundaries.length > 0) {
      // A map's first throw is its start job's: far longer (the caller's run() is in it).
      const throws = boundaries.filter((ms) => ms < 10);
      console.log(`  throw boundaries: ${throws.length} (median ${median(throws).toFixed(2)} ms, least ${Math.min(...throws).toFixed(2)}, most ${Math.max(...throws).toFixed(2)}; ${boundaries.length - throws.length} over 10 ms left out)`);
    }
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = process.argv[2];
  if (dir === undefined) {
    console.error('usage: node bench/trace-commands.mjs <dir with trace.<pid>.json files>');
    process.exitCode = 2;
  } else read(dir);
} else if (process.env['XR_TRACE_DIR'] !== undefined) {
  await trace(process.env['XR_TRACE_DIR']);
}
