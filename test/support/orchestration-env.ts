import { Redis } from 'ioredis';
import pino from 'pino';
import { createRuntime } from '../../src/index.js';
import type { AnyReactorDefinition, Runtime, Store } from '../../src/index.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import type * as FixtureModule from '../orchestration/fixtures/reactors.js';
import { startRedis } from './redis-server.js';
import type { RedisServer } from './redis-server.js';
import { startWorkerProcess } from './worker-process.js';
import type { WorkerProcess } from './worker-process.js';

/** The reactors shared by the orchestration tests and their worker processes. */
export type Fixtures = typeof FixtureModule;

const MODULES = ['test/orchestration/fixtures/reactors.ts'];
/** Short leases and job locks, so a killed worker's work is picked up within about a second. */
const FAST_RECOVERY = ['--lease-ttl-ms', '1000', '--lock-duration-ms', '1000', '--stalled-interval-ms', '500'];

/** A private Redis, a caller runtime on it, the fixture reactors, and worker processes on demand. */
export interface OrchestrationEnv {
  readonly server: RedisServer;
  readonly redis: Redis;
  readonly store: Store;
  readonly runtime: Runtime;
  readonly fixtures: Fixtures;
  /** Live worker processes. */
  readonly workers: Set<WorkerProcess>;
  /** Start an `xreactor worker` process for the fixtures (extra CLI arguments appended). */
  spawnWorker(args?: readonly string[]): Promise<WorkerProcess>;
  /** Side effects recorded by the fixtures for an execution, in order. */
  events(id: string): Promise<string[]>;
  close(): Promise<void>;
}

/** Start the environment: call in `beforeAll`, and `close()` in `afterAll`. */
export async function startOrchestrationEnv(options: { readonly runtimeWorker?: boolean } = {}): Promise<OrchestrationEnv> {
  const server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  const fixtures: Fixtures = await import('../orchestration/fixtures/reactors.js');
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const store = createRedisStore({ redis });
  const runtime = createRuntime({
    store,
    queue: createBullmqQueue({ connection: redis }),
    worker: options.runtimeWorker ?? false,
    reactors: (Object.values(fixtures) as unknown[]).filter((v): v is AnyReactorDefinition => typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'reactor'),
    logger: pino({ level: 'silent' }),
  });
  const workers = new Set<WorkerProcess>();
  return {
    server,
    redis,
    store,
    runtime,
    fixtures,
    workers,
    async spawnWorker(args = []) {
      const worker = startWorkerProcess({ redisUrl: server.url, modules: MODULES, args: [...FAST_RECOVERY, ...args], env: { XREACTOR_TEST_REDIS_URL: server.url } });
      workers.add(worker);
      void worker.exited.then(() => workers.delete(worker));
      await worker.ready;
      if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
      return worker;
    },
    events: (id) => redis.lrange(`events:${id}`, 0, -1),
    async close() {
      for (const worker of workers) worker.child.kill('SIGKILL');
      await runtime.close();
      await store.close();
      fixtures.recorder().disconnect();
      redis.disconnect();
      await server.stop();
    },
  };
}
