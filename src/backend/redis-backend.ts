/**
 * A Redis backend owned as one thing: the ioredis connection, the Redis store and the BullMQ
 * queue built on it, and one `close()` that closes all three. Hand it to `createRuntime({
 * backend })` or `createWorker({ backend })` and `close()` of the runtime or worker closes it
 * too; or keep it and close it yourself. Either way a process that closes what it opened exits
 * by itself: nothing of the backend keeps the event loop alive after `close()`.
 */
import { Cluster, Redis } from 'ioredis';
import type { ClusterNode } from 'ioredis';
import { DefinitionError } from '../errors/index.js';
import { createBullmqQueue } from '../queue/bullmq-queue.js';
import type { BullmqQueue, BullmqQueueOptions, BullmqWorkerOptions } from '../queue/bullmq-queue.js';
import type { JobSpec } from '../queue/queue.js';
import { createRedisStore } from '../store/redis-store.js';
import type { RedisStoreOptions } from '../store/redis-store.js';
import type { Store } from '../store/store.js';

/** The environment variable read for the Redis URL when neither `url` nor `cluster` is given. */
export const REDIS_URL_ENV = 'XREACTOR_REDIS_URL';

/** The Redis URL used when nothing names one. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** The key prefix BullMQ uses on a Redis Cluster: a hash tag, so a queue's keys share one slot. */
export const CLUSTER_QUEUE_PREFIX = '{xreactor}';

/** Options of {@link connectRedis}. */
export interface RedisBackendOptions {
  /**
   * The Redis server's URL.
   * @defaultValue `$XREACTOR_REDIS_URL`, else `redis://127.0.0.1:6379`
   */
  readonly url?: string;
  /** Redis Cluster seed nodes (`'host:port'` or ioredis nodes), instead of `url`. */
  readonly cluster?: readonly (string | ClusterNode)[];
  /**
   * Prefix of the store's keys.
   * @defaultValue 'xr'
   */
  readonly prefix?: string;
  /**
   * The BullMQ queue's name.
   * @defaultValue 'xreactor'
   */
  readonly queueName?: string;
  /** Retention of an execution's keys (see `createRedisStore`). */
  readonly contextTtlMs?: number;
  /**
   * How long a store or queue call waits for Redis before it rejects with `RedisUnavailableError`
   * naming the server; 0 waits for as long as the connection does.
   * @defaultValue 10_000
   */
  readonly timeoutMs?: number;
  /** BullMQ worker settings (lock duration, stalled-job interval), for workers. */
  readonly worker?: BullmqWorkerOptions;
  /** Told of connection errors and of jobs that cannot be handled. */
  readonly onError?: (error: Error, job?: JobSpec) => void;
  /** Any other option of the Redis store (`groupCommit`, `machines`, …); the ones above win. */
  readonly storeOptions?: Omit<RedisStoreOptions, 'redis'>;
  /** Any other option of the BullMQ queue (`maxAttempts`, `backoffMs`, job retention, …); the ones above win. */
  readonly queueOptions?: Omit<BullmqQueueOptions, 'connection'>;
}

/** What {@link connectRedis} opened: a store and a queue on one connection, closed together. */
export interface RedisBackend {
  readonly store: Store;
  readonly queue: BullmqQueue;
  /** The connection both use (for administration; `close()` closes it). */
  readonly redis: Redis | Cluster;
  /** Where it connects, for messages: the URL, or the cluster's seed nodes. */
  readonly address: string;
  /** Closes the queue, the store and the connection. Idempotent. */
  close(): Promise<void>;
}

/** `'host:port'` → an ioredis cluster node, refusing anything else with a message naming it. */
function clusterNode(node: string | ClusterNode): ClusterNode {
  if (typeof node !== 'string') return node;
  const match = /^([^:\s]+):(\d+)$/.exec(node.trim());
  if (match === null) throw new DefinitionError(`cluster node ${JSON.stringify(node)} is not host:port (for example 127.0.0.1:7000)`);
  return { host: match[1]!, port: Number(match[2]) };
}

/**
 * Opens a Redis backend: one ioredis connection (`maxRetriesPerRequest: null`, as BullMQ workers
 * require), the Redis store and the BullMQ queue on it.
 *
 * @example
 * ```ts
 * const runtime = createRuntime({ backend: connectRedis({ url: process.env.XREACTOR_REDIS_URL }), reactors: [order] });
 * // ... run, awaitResult ...
 * await runtime.close(); // closes the queue, the store and the connection: the process can exit
 * ```
 */
export function connectRedis(options: RedisBackendOptions = {}): RedisBackend {
  if (options.url !== undefined && options.cluster !== undefined) throw new DefinitionError('connectRedis takes url or cluster, not both');
  const nodes = options.cluster?.map(clusterNode);
  if (nodes !== undefined && nodes.length === 0) throw new DefinitionError('connectRedis: cluster names no seed node; give at least one host:port');
  const url = options.url ?? process.env[REDIS_URL_ENV] ?? DEFAULT_REDIS_URL;
  const redis = nodes === undefined ? new Redis(url, { maxRetriesPerRequest: null }) : new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
  const address = nodes === undefined ? url : (options.cluster ?? []).map((n) => (typeof n === 'string' ? n : JSON.stringify(n))).join(',');
  const timeout = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
  const store = createRedisStore({ ...options.storeOptions, redis, ...timeout, ...(options.prefix === undefined ? {} : { prefix: options.prefix }), ...(options.contextTtlMs === undefined ? {} : { contextTtlMs: options.contextTtlMs }) });
  // One report per outage, not one per reconnection attempt (ioredis retries every ~2 s, and
  // BullMQ re-emits the connection's errors): a message equal to the previous one is dropped
  // until the connection is ready again.
  const report = options.onError ?? ((e: Error, job?: JobSpec) => process.stderr.write(job === undefined ? `xreactor: Redis at ${address}: ${e.message}\n` : `xreactor: job ${job.id} failed: ${e.message}\n`));
  let lastError = '';
  const onError = (error: Error, job?: JobSpec) => {
    if (job === undefined && error.message === lastError) return;
    if (job === undefined) lastError = error.message;
    report(error, job);
  };
  redis.on('error', (error: Error) => onError(error));
  redis.on('ready', () => (lastError = ''));
  const queue = createBullmqQueue({
    ...options.queueOptions,
    connection: redis,
    ...timeout,
    ...(options.queueName === undefined ? {} : { queueName: options.queueName }),
    ...(nodes === undefined ? {} : { prefix: CLUSTER_QUEUE_PREFIX }),
    ...(options.worker === undefined ? {} : { worker: options.worker }),
    onError,
  });
  let closing: Promise<void> | undefined;
  return {
    store,
    queue,
    redis,
    address,
    close() {
      closing ??= (async () => {
        try {
          await queue.close();
          await store.close();
        } finally {
          // quit() waits for pending replies; disconnect() if the server is gone.
          await Promise.race([redis.quit().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
          redis.disconnect();
        }
      })();
      return closing;
    },
  };
}
