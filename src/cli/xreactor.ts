#!/usr/bin/env node
/**
 * The `xreactor` command line.
 *
 *   xreactor worker [options] <module...>
 *
 * Runs a worker for the reactors exported by the given modules, against Redis
 * (store) and BullMQ (queue). SIGTERM / SIGINT: stop taking jobs and finish the
 * ones in progress (up to --shutdown-timeout-ms, then hand them back: nothing of
 * an interrupted step is committed and it runs again elsewhere); a second signal
 * hands them back at once.
 */
import { parseArgs } from 'node:util';
import pino from 'pino';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import { connectRedis, DEFAULT_REDIS_URL, REDIS_URL_ENV } from '../backend/redis-backend.js';
import { startHealthServer } from './health.js';
import type { Health } from './health.js';
import { loadUserModule, middlewareOf, reactorsOf } from './load-module.js';
import type { Middleware } from '../observability/middleware.js';
import { stepLog } from '../observability/step-log.js';
import type { StepLogOptions } from '../observability/step-log.js';
import { createWorker } from '../runtime/worker.js';

/** How long a starting worker may take to reach Redis before it warns that it is not connected. */
const CONNECT_GRACE_MS = 2_000;

/** How often the worker checks that its parent process is still there. */
const PARENT_WATCH_MS = 500;

/** How long before the shutdown timeout the close is forced (at most half the timeout): the process exits by the timeout. */
const FORCE_GRACE_MS = 2_000;

const USAGE = `usage: xreactor worker [options] <module...>

options:
  --redis <url>                 Redis URL (default: $XREACTOR_REDIS_URL or redis://127.0.0.1:6379)
  --cluster <host:port,...>     Redis Cluster seed nodes (instead of --redis)
  --concurrency <n>             jobs handled at once (default 1)
  --queue <name>                BullMQ queue name (default xreactor)
  --prefix <prefix>             key prefix of the store (default xr)
  --lease-ttl-ms <ms>           liveness lease ttl (default 30000)
  --context-ttl-ms <ms>         retention of an execution's keys after its last write (default 86400000: 24 h;
                                give every worker and caller the same value)
  --shutdown-timeout-ms <ms>    graceful shutdown limit (default 30000)
  --lock-duration-ms <ms>       BullMQ job lock; a dead worker's job is redelivered after it (default 30000)
  --stalled-interval-ms <ms>    how often dead workers' jobs are looked for (default 30000)
  --sweep-interval-ms <ms>      how often executions whose process died are re-enqueued (default 30000; 0: never)
  --map-stall-ms <ms>           a fan-out map waiting this long with unsettled positions and no report has the
                                start jobs of its unstarted elements restarted by the sweeper (default 5 x lease ttl)
  --lock-snooze-max-attempts <n>  lease checks of an element another process holds before a map rollback
                                reports it element_in_flight (default 20)
  --lock-snooze-delay-ms <ms>   pause between two of those checks (default 5000)
  --bundle-size <n>             the sibling jobs of one map throw this worker sends travel n to a BullMQ job
                                (default 10, or --concurrency when lower; 1: one BullMQ job each)
  --no-eager-bundle             send every bundle of a map throw through BullMQ; by default this worker runs
                                the first bundle of a throw it sends itself at once, its BullMQ job kept
                                delayed by --lock-duration-ms until its parts were handled (in case it dies)
  --middleware <module>         load middleware (hooks) from a module: its default export, or its
                                export named middleware (an object or an array); repeatable. An
                                export named redact filters what the step log writes at debug
  --health-port <port>          serve GET /health on this port: 200 when running and connected to Redis, else 503
  --log-level <level>           pino level (default info)
  --help                        this text

environment:
  XREACTOR_REDIS_URL            Redis URL when --redis and --cluster are not given`;

async function worker(argv: readonly string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      redis: { type: 'string' },
      cluster: { type: 'string' },
      concurrency: { type: 'string', default: '1' },
      queue: { type: 'string', default: 'xreactor' },
      prefix: { type: 'string', default: 'xr' },
      'lease-ttl-ms': { type: 'string', default: '30000' },
      'shutdown-timeout-ms': { type: 'string', default: '30000' },
      'lock-duration-ms': { type: 'string', default: '30000' },
      'stalled-interval-ms': { type: 'string', default: '30000' },
      'sweep-interval-ms': { type: 'string', default: '30000' },
      'log-level': { type: 'string', default: 'info' },
      'health-port': { type: 'string' },
      'context-ttl-ms': { type: 'string' },
      'map-stall-ms': { type: 'string' },
      'lock-snooze-max-attempts': { type: 'string' },
      'lock-snooze-delay-ms': { type: 'string' },
      'bundle-size': { type: 'string' },
      'no-eager-bundle': { type: 'boolean', default: false },
      middleware: { type: 'string', multiple: true },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // Lines go to stdout asynchronously: a busy worker's lines (one per step at debug) are written
  // together while a write is in flight, off the thread that runs the steps; pino flushes what is
  // pending when the process exits. A SIGKILL can lose the last lines not yet written.
  const logger = pino({ level: values['log-level'], base: { service: 'xreactor-worker', pid: process.pid } }, pino.destination({ dest: 1, sync: false }));
  if (positionals.length === 0) throw new Error(`no reactor modules given\n${USAGE}`);
  const reactors: AnyReactorDefinition[] = [];
  for (const path of positionals) {
    const found = reactorsOf(await loadUserModule(path, 'reactor module'));
    if (found.length === 0) throw new Error(`module ${path} exports no reactor definition (export the result of defineReactor(...).build())`);
    reactors.push(...found);
  }
  const number = (name: string, raw: string | undefined) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(raw)}`);
    return n;
  };
  // Every flag is checked, and every module loaded, before anything connects: a mistake ends
  // the process at once instead of leaving a connection open.
  const concurrency = number('concurrency', values.concurrency);
  const shutdownTimeoutMs = number('shutdown-timeout-ms', values['shutdown-timeout-ms']);
  const leaseTtlMs = number('lease-ttl-ms', values['lease-ttl-ms']);
  const lockDurationMs = number('lock-duration-ms', values['lock-duration-ms']);
  const stalledIntervalMs = number('stalled-interval-ms', values['stalled-interval-ms']);
  const contextTtlMs = values['context-ttl-ms'] === undefined ? undefined : number('context-ttl-ms', values['context-ttl-ms']);
  // Map options: given only when the flag is (the engine's defaults follow --lease-ttl-ms).
  const mapFlags = { mapStallMs: 'map-stall-ms', lockSnoozeMaxAttempts: 'lock-snooze-max-attempts', lockSnoozeDelayMs: 'lock-snooze-delay-ms' } as const;
  const mapOptions = Object.fromEntries(
    Object.entries(mapFlags).flatMap(([option, flag]) => (values[flag] === undefined ? [] : [[option, number(flag, values[flag])]])),
  ) as { mapStallMs?: number; lockSnoozeMaxAttempts?: number; lockSnoozeDelayMs?: number };
  const bundleSize = values['bundle-size'] === undefined ? undefined : number('bundle-size', values['bundle-size']);
  const sweepIntervalMs = Number(values['sweep-interval-ms']);
  if (!Number.isInteger(sweepIntervalMs) || sweepIntervalMs < 0) throw new Error(`--sweep-interval-ms must be an integer >= 0, got ${JSON.stringify(values['sweep-interval-ms'])}`);
  const healthPort = values['health-port'] === undefined ? undefined : Number(values['health-port']);
  if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort >= 0 && healthPort <= 65_535)) {
    throw new Error(`--health-port must be a port number (0-65535), got ${JSON.stringify(values['health-port'])}`);
  }
  // A --middleware module may also export `redact`: what of a step's arguments and result the
  // step log may write at debug level.
  const userMiddleware: Middleware[] = [];
  let redact: StepLogOptions['redact'];
  for (const path of values.middleware ?? []) {
    const module = await loadUserModule(path, 'middleware module');
    userMiddleware.push(...middlewareOf(module, path));
    if (module['redact'] !== undefined) {
      if (typeof module['redact'] !== 'function') throw new Error(`middleware module ${path} exports redact, but not as a function (value, { reactor, step, what }) => what may be logged`);
      redact = module['redact'] as StepLogOptions['redact'];
    }
  }
  // The health endpoint listens before the worker takes jobs: a port in use ends the process here.
  let report: () => Health = () => ({ status: 'not_connected', redis: '', connection: 'starting' });
  const health = healthPort === undefined ? undefined : await startHealthServer(healthPort, () => report());
  const backend = connectRedis({
    ...(values.cluster ? { cluster: values.cluster.split(',') } : { url: values.redis ?? process.env[REDIS_URL_ENV] ?? DEFAULT_REDIS_URL }),
    prefix: values.prefix,
    queueName: values.queue,
    ...(contextTtlMs === undefined ? {} : { contextTtlMs }),
    worker: { lockDurationMs, stalledIntervalMs },
    queueOptions: { ...(bundleSize === undefined ? {} : { bundleSize }), eagerBundle: !values['no-eager-bundle'] },
    onError: (error, job) => logger.warn({ event: 'xreactor.queue.error', err: error, jobId: job?.id }, error.message),
  });
  const middleware: Middleware[] = [stepLog(logger, redact === undefined ? {} : { redact }), ...userMiddleware];
  const running = createWorker({
    middleware,
    unknownReactor: { who: 'this worker', fix: `export it from one of the modules this worker loads (${positionals.join(', ')}), or run a worker that has it` },
    backend,
    reactors,
    concurrency,
    logger,
    sweepIntervalMs,
    leaseTtlMs,
    ...mapOptions,
  });
  const redisAddress = backend.address;
  let stopping = false;
  logger.info({ event: 'xreactor.worker.started', reactors: reactors.map((r) => r.name), concurrency, queue: values.queue, redis: redisAddress, connected: backend.redis.status === 'ready' }, 'worker started');
  // Say whether it can work: a worker that cannot reach Redis takes no jobs, and says so once.
  const connection = backend.redis;
  // Connecting takes a moment at every start: say so only when it takes longer than that.
  setTimeout(() => {
    if (connection.status !== 'ready' && !stopping) logger.warn({ event: 'xreactor.worker.not_connected', redis: redisAddress, connection: connection.status }, `not connected to Redis at ${redisAddress}: no jobs are taken until it is`);
  }, CONNECT_GRACE_MS).unref();
  // One line per change of state, not one per reconnection attempt.
  let connected = connection.status === 'ready';
  connection.on('ready', () => {
    connected = true;
    logger.info({ event: 'xreactor.worker.connected', redis: redisAddress }, `connected to Redis at ${redisAddress}`);
  });
  connection.on('close', () => {
    if (!connected) return;
    connected = false;
    if (!stopping) logger.warn({ event: 'xreactor.worker.not_connected', redis: redisAddress, connection: connection.status }, `lost the connection to Redis at ${redisAddress}: reconnecting; no jobs are taken meanwhile`);
  });

  report = () => (stopping ? { status: 'stopping' } : connection.status === 'ready' ? { status: 'ready' } : { status: 'not_connected', redis: redisAddress, connection: connection.status });
  if (health !== undefined) {
    const address = health.address();
    logger.info({ event: 'xreactor.worker.health', port: typeof address === 'object' && address !== null ? address.port : healthPort }, 'health endpoint listening (GET /health)');
  }

  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ event: 'xreactor.worker.force_stop', signal }, 'second signal: handing jobs in progress back');
      void running.close({ force: true });
      return;
    }
    stopping = true;
    logger.info({ event: 'xreactor.worker.stopping', signal }, 'finishing jobs in progress');
    // Jobs in progress may finish until the forced close, which leaves the close the rest of the
    // timeout (up to 2 s, at most half of it); the process is gone by the timeout either way.
    const grace = Math.min(FORCE_GRACE_MS, shutdownTimeoutMs / 2);
    const force = setTimeout(() => void running.close({ force: true }), shutdownTimeoutMs - grace);
    force.unref();
    // Should even the forced close hang (Redis unreachable: BullMQ waits for its connections),
    // exit anyway: jobs in progress come back through BullMQ's stalled-job detection.
    const hard = setTimeout(() => {
      logger.error({ event: 'xreactor.worker.stop_timeout', redis: redisAddress, connection: connection.status }, `could not close within ${shutdownTimeoutMs} ms (is Redis at ${redisAddress} reachable?): exiting; jobs in progress are delivered again after their lock expires`);
      process.exit(1);
    }, shutdownTimeoutMs);
    hard.unref();
    void running
      .close()
      .then(() => {
        // close() of a worker closes the backend it was given: queue, store and connection.
        clearTimeout(force);
        clearTimeout(hard);
        logger.info({ event: 'xreactor.worker.stopped' }, 'worker stopped');
        process.exit(0);
      })
      .catch((error: unknown) => {
        logger.error({ event: 'xreactor.worker.stop_failed', err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // Started through npx or an npm script, the worker's parent is npm, which exits on SIGTERM
  // without passing it on: the worker is left behind, orphaned. So a worker whose parent went
  // away stops as it would on SIGTERM (reparented: process.ppid changes).
  const parent = process.ppid;
  if (parent > 1) {
    const watch = setInterval(() => {
      if (process.ppid !== parent) {
        clearInterval(watch);
        logger.warn({ event: 'xreactor.worker.parent_exited', parent }, `parent process ${parent} exited (npm or npx ending on a signal): stopping`);
        stop('parent exited');
      }
    }, PARENT_WATCH_MS);
    watch.unref();
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'worker') return worker(rest);
  process.stderr.write(`${USAGE}\n`);
  process.exitCode = command === undefined || command === '--help' ? 0 : 2;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`xreactor: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
