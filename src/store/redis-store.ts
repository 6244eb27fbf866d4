import type { Cluster, Redis } from 'ioredis';
import { EXECUTION_MACHINE_VERSION } from '../../machines/execution-types.js';
import type { TraceEntry } from '../../machines/execution-types.js';
import { DefinitionError, DeserializationError, ExecutionNotFoundError } from '../errors/index.js';
import type { Clock } from '../internal/clock.js';
import { systemClock } from '../internal/clock.js';
import { decode, decodeEnvelope } from '../serialization/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from './keys.js';
import {
  acquireLeaseArgs,
  commitArgs,
  createArgs,
  defineScripts,
  markActiveArgs,
  readCommitReply,
  readCreateReply,
  releaseLeaseArgs,
  SNAPSHOT_KIND,
} from './redis-scripts.js';
import { createSettledHub } from './redis-settled.js';
import type { LoadedExecution, OutboxEffect, Store, UndoEntry } from './store.js';

/** Retention of an execution's keys after its last write: 24 hours, as `context_ttl` in ruby_reactor. */
export const DEFAULT_CONTEXT_TTL_MS = 86_400_000;

/** Options of {@link createRedisStore}. */
export interface RedisStoreOptions {
  /** The connection (or cluster) the store runs its commands on. The caller owns it: `close()` leaves it open. */
  readonly redis: Redis | Cluster;
  /**
   * Prefix of every key; must not contain `{` or `}`.
   * @defaultValue 'xr'
   */
  readonly prefix?: string;
  /**
   * Retention of an execution's keys, re-stamped on every commit.
   * @defaultValue 86_400_000 (24 h)
   */
  readonly contextTtlMs?: number;
  /**
   * Machine versions this build can load.
   * @defaultValue [EXECUTION_MACHINE_VERSION]
   */
  readonly machineVersions?: readonly number[];
  /**
   * Creates the connection `waitSettled` subscribes on (once, on the first wait). The store owns
   * it and quits it on `close()`.
   * @defaultValue `redis.duplicate()`
   */
  readonly subscriber?: () => Redis | Cluster;
  /**
   * Time source for `waitSettled` timeouts.
   * @defaultValue the system clock
   */
  readonly clock?: Clock;
}

/** {@link RedisStoreOptions} with every default filled. */
export type CompiledRedisStoreOptions = Required<RedisStoreOptions>;

/**
 * Fills the defaults of {@link RedisStoreOptions}.
 * @throws DefinitionError when `contextTtlMs` is not a positive integer.
 */
export function compileRedisStoreOptions(options: RedisStoreOptions): CompiledRedisStoreOptions {
  const contextTtlMs = options.contextTtlMs ?? DEFAULT_CONTEXT_TTL_MS;
  if (!Number.isSafeInteger(contextTtlMs) || contextTtlMs <= 0) {
    throw new DefinitionError(`contextTtlMs ${contextTtlMs} is not a positive whole number of milliseconds; the default is ${DEFAULT_CONTEXT_TTL_MS} (24 h)`);
  }
  const redis = options.redis;
  return {
    redis,
    prefix: options.prefix ?? 'xr',
    contextTtlMs,
    machineVersions: options.machineVersions ?? [EXECUTION_MACHINE_VERSION],
    subscriber: options.subscriber ?? (() => (redis as Redis).duplicate()),
    clock: options.clock ?? systemClock,
  };
}

/**
 * The Redis store. Every execution lives under the hash tag of its id, so its multi-key scripts
 * run in one slot of a Redis Cluster; `docs/redis-keys.md` lists the keys. Each create and commit
 * is one script call (one round trip), fenced by revision, and re-stamps the retention of every
 * key of the execution.
 *
 * @example
 * ```ts
 * const redis = new Redis(process.env.REDIS_URL!);
 * const store = createRedisStore({ redis, prefix: 'shop' });
 * ```
 */
export function createRedisStore(options: RedisStoreOptions): Store {
  const config = compileRedisStoreOptions(options);
  const keys = createKeyBuilder(config.prefix);
  // Cluster and Redis share the command API; the store uses it through one type.
  const redis = config.redis as Redis;
  const run = defineScripts(config.redis);
  const settled = createSettledHub(config.subscriber, config.clock);
  const expectation = { kind: SNAPSHOT_KIND, machineVersions: config.machineVersions };
  const F = EXECUTION_FIELDS;

  /** Runs a read; a key of another type (another program's data under our key) becomes a DeserializationError. */
  const read = async <T>(id: string, command: Promise<T>): Promise<T> => {
    try {
      return await command;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('WRONGTYPE')) {
        throw new DeserializationError(`execution ${id} could not be read: a key under prefix "${config.prefix}" holds another type of value (foreign data); discard it`, { cause: error });
      }
      throw error;
    }
  };
  /** Throws ExecutionNotFoundError unless the execution exists (checked alongside the read, in the same round trip). */
  const mustExist = async (id: string, exists: Promise<number>): Promise<void> => {
    if ((await exists) === 0) throw new ExecutionNotFoundError(id);
  };
  const exists = (id: string) => redis.exists(keys.executionKeys(id).execution);

  return {
    async create(execution) {
      const reply = await run('createExecution', createArgs(keys.executionKeys(execution.id), execution, config.contextTtlMs));
      return readCreateReply(execution.id, reply);
    },
    async load(id) {
      const [rev, snapshot, outbox] = await read(id, redis.hmgetBuffer(keys.executionKeys(id).execution, F.revision, F.snapshot, F.outbox));
      if (rev == null && snapshot == null && outbox == null) return undefined;
      const revision = Number(rev?.toString());
      if (!Number.isSafeInteger(revision) || snapshot == null || outbox == null) {
        throw new DeserializationError(`execution ${id} is incomplete or foreign (revision ${rev == null ? 'missing' : JSON.stringify(rev.toString())}, snapshot ${snapshot == null ? 'missing' : 'present'}): discard it`);
      }
      const { machineVersion, payload } = decodeEnvelope(snapshot, expectation);
      const { value, context } = payload as { value: unknown; context: unknown };
      return { snapshot: { machineVersion, value, context }, revision, outbox: decode(outbox) as OutboxEffect[] } satisfies LoadedExecution;
    },
    async commit(id, expectedRevision, commit) {
      const reply = await run('commitExecution', commitArgs(keys.executionKeys(id), expectedRevision, commit, config.contextTtlMs));
      return readCommitReply(id, expectedRevision, reply);
    },
    async readInput(id) {
      const bytes = await read(id, redis.hgetBuffer(keys.executionKeys(id).execution, F.input));
      if (bytes === null) throw new ExecutionNotFoundError(id);
      return decode(bytes);
    },
    async readResults(id, steps) {
      const k = keys.executionKeys(id);
      const out = new Map<string, unknown>();
      if (steps === undefined) {
        const [, all] = await Promise.all([mustExist(id, exists(id)), read(id, redis.hgetallBuffer(k.results))]);
        for (const [step, bytes] of Object.entries(all)) out.set(step, decode(bytes));
        return out;
      }
      if (steps.length === 0) {
        await mustExist(id, exists(id));
        return out;
      }
      const [, values] = await Promise.all([mustExist(id, exists(id)), read(id, redis.hmgetBuffer(k.results, ...steps))]);
      steps.forEach((step, i) => {
        const bytes = values[i];
        if (bytes != null) out.set(step, decode(bytes));
      });
      return out;
    },
    async readUndoEntry(id, position) {
      if (!Number.isSafeInteger(position) || position < 0) return undefined;
      const [, bytes] = await Promise.all([mustExist(id, exists(id)), read(id, redis.lindexBuffer(keys.executionKeys(id).undo, position))]);
      return bytes === null ? undefined : (decode(bytes) as UndoEntry);
    },
    async readUndoStack(id) {
      const [, list] = await Promise.all([mustExist(id, exists(id)), read(id, redis.lrangeBuffer(keys.executionKeys(id).undo, 0, -1))]);
      return list.map((bytes) => decode(bytes) as UndoEntry);
    },
    async readTrace(id) {
      const [, list] = await Promise.all([mustExist(id, exists(id)), read(id, redis.lrangeBuffer(keys.executionKeys(id).trace, 0, -1))]);
      return list.map((bytes) => decode(bytes) as TraceEntry);
    },
    async acquireLease(id, owner, ttlMs) {
      return Number(await run('acquireLease', acquireLeaseArgs(keys.executionKeys(id), owner, ttlMs))) === 1;
    },
    async releaseLease(id, owner) {
      await run('releaseLease', releaseLeaseArgs(keys.executionKeys(id), owner));
    },
    async hasLease(id) {
      return (await redis.exists(keys.executionKeys(id).lease)) === 1;
    },
    async markActive(id, active) {
      if (active) await run('markActive', markActiveArgs(keys.active, id));
      else await redis.zrem(keys.active, id);
    },
    async listActive(limit) {
      const count = Math.floor(limit);
      if (!(count > 0)) return [];
      return redis.zrange(keys.active, 0, String(Number.isFinite(count) ? count - 1 : -1));
    },
    async publishSettled(id) {
      const channel = keys.executionKeys(id).settled;
      await settled.subscribed(channel);
      await redis.publish(channel, id);
    },
    waitSettled(id, timeoutMs, signal) {
      return settled.wait(keys.executionKeys(id).settled, timeoutMs, signal);
    },
    async claim(key, value, ttlMs) {
      // SET NX GET (Redis >= 7.0): the previous value when another writer was first, else nil.
      const previous = (await redis.set(keys.claim(key), value, 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX', 'GET'));
      return previous ?? value;
    },
    async readClaim(key) {
      return (await redis.get(keys.claim(key))) ?? undefined;
    },
    async increment(key, ttlMs) {
      const replies = await redis.multi().incr(keys.claim(key)).pexpire(keys.claim(key), Math.max(1, Math.ceil(ttlMs))).exec();
      return Number(replies?.[0]?.[1]);
    },
    async close() {
      await settled.close();
    },
  };
}
