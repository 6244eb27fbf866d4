/**
 * Bounded calls to Redis. ioredis (with `maxRetriesPerRequest: null`, as BullMQ needs) keeps a
 * command waiting for as long as the server is unreachable; a caller would hang without a word.
 * Every call of the Redis store and of the BullMQ queue's producer side is given a deadline
 * instead: past it, the call rejects with a `RedisUnavailableError` that names the server, the
 * call and the connection's state (and, for a write, that its outcome is unknown). The command
 * itself is not withdrawn: it may still run when the connection is back, which is why writes
 * are fenced and a retried start is idempotent.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedisUnavailableError } from '../errors/index.js';

/** How long a call to Redis may take before it is reported as unavailable. */
export const DEFAULT_REDIS_TIMEOUT_MS = 10_000;

/** Where a client connects, for messages: `host:port` (or a cluster's seed nodes). */
export function redisAddress(redis: Redis | Cluster): string {
  if ((redis as { isCluster?: boolean }).isCluster === true) {
    const nodes = ((redis as unknown as { startupNodes?: unknown[] }).startupNodes ?? []).map((n: unknown) => (typeof n === 'object' && n !== null ? `${String((n as { host?: string }).host ?? '127.0.0.1')}:${String((n as { port?: number }).port ?? 6379)}` : String(n)));
    return `cluster ${nodes.join(',') || '(no seed nodes)'}`;
  }
  const options = (redis as Redis).options;
  return options.path !== undefined && options.path !== null ? String(options.path) : `${options.host ?? '127.0.0.1'}:${options.port ?? 6379}`;
}

/** The server a deadline's error names, and the connection's state when it fired. */
export interface DeadlineTarget {
  readonly address: string;
  status(): string;
}

/** The target of an ioredis client (or cluster). */
export function targetOf(redis: Redis | Cluster): DeadlineTarget {
  return { address: redisAddress(redis), status: () => redis.status };
}

/** How a bounded call names itself and the execution it is for. */
export interface CallLabel {
  readonly call: string;
  readonly executionId?: string;
  /** A write whose outcome a timeout leaves unknown (create, commit, signal). */
  readonly writes?: boolean;
}

/**
 * Returns `work`'s outcome, or rejects with `RedisUnavailableError` once `timeoutMs` has passed
 * (0 or Infinity: no deadline). The timer never keeps the process alive.
 */
export function withDeadline<T>(target: DeadlineTarget, timeoutMs: number, label: CallLabel, work: Promise<T>): Promise<T> {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) return work;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new RedisUnavailableError(target.address, label.call, timeoutMs, target.status(), label.executionId, label.writes === true));
    }, timeoutMs);
    timer.unref();
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** Store calls whose timeout leaves a write's outcome unknown. */
const WRITES = new Set(['create', 'commit', 'signal', 'markUnreadable', 'claim', 'increment', 'acquireAndLoad', 'acquireLease']);
/** Store calls that carry their own time limit, or none. */
const UNBOUNDED = new Set(['waitSettled', 'close']);

/** The execution a store call is for, from its first argument (an id, a create, a signal). */
function executionOf(first: unknown): string | undefined {
  if (typeof first === 'string') return first;
  if (typeof first === 'object' && first !== null) {
    const { id, to } = first as { id?: unknown; to?: unknown };
    if (typeof id === 'string') return id;
    if (typeof to === 'string') return to;
  }
  return undefined;
}

/** `store` with a deadline on every call but `waitSettled` and `close` (see {@link withDeadline}). */
export function withStoreDeadlines<S extends object>(store: S, redis: Redis | Cluster, timeoutMs: number): S {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) return store;
  const target = targetOf(redis);
  const bounded: Record<string, unknown> = { ...(store as Record<string, unknown>) };
  for (const [name, value] of Object.entries(store as Record<string, unknown>)) {
    if (typeof value !== 'function' || UNBOUNDED.has(name)) continue;
    const method = value as (...args: unknown[]) => unknown;
    bounded[name] = (...args: unknown[]) => {
      const out = method.apply(store, args);
      if (!(out instanceof Promise)) return out;
      return withDeadline(target, timeoutMs, { call: `store.${name}`, executionId: executionOf(args[0]), writes: WRITES.has(name) }, out);
    };
  }
  return bounded as S;
}
