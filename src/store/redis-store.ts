import type { Cluster, Redis } from 'ioredis';
import type { TraceEntry } from '../../machines/execution-types.js';
import { DefinitionError, DeserializationError, ExecutionNotFoundError } from '../errors/index.js';
import type { Clock } from '../internal/clock.js';
import { systemClock } from '../internal/clock.js';
import { decode, encode } from '../serialization/index.js';
import { createKeyBuilder, EXECUTION_FIELDS } from './keys.js';
import { batchedCommits, unbatchedCommits } from './commit-batcher.js';
import { batchedLoads, unbatchedLoads } from './load-batcher.js';
import { DEFAULT_REDIS_TIMEOUT_MS, withStoreDeadlines } from './redis-deadline.js';
import { checkCommitRules, checkCreateOption } from './commit-rules.js';
import { deliveredEntry, inboxOf } from './inbox-codec.js';
import {
  acquireAndLoadArgs,
  acquireLeaseArgs,
  commitArgs,
  createArgs,
  defineScripts,
  listedSpawnIds,
  loadArgs,
  markActiveArgs,
  markActiveManyArgs,
  readAcquireAndLoadReply,
  readCommitReceipt,
  readCommitReply,
  readCreateReply,
  readInboxArgs,
  readInboxReply,
  readLoadReply,
  readSignalReply,
  releaseLeaseArgs,
  signalArgs,
  spawnedIds,
} from './redis-scripts.js';
import type { LoadReply } from './redis-scripts.js';
import { markUnreadableArgs, readMarkUnreadableReply } from './redis-scripts.js';
import { decodeUnreadable } from './unreadable-codec.js';
import { createSettledHub } from './redis-settled.js';
import { decodeLoadedResults } from './results-codec.js';
import { decodeSnapshot, DEFAULT_MACHINES } from './snapshot-codec.js';
import { readSettledNotice } from './settled-notice.js';
import type { MachineVersions } from './snapshot-codec.js';
import type { Commit, LeasedLoad, LoadedExecution, MapPageEntry, OutboxEffect, Store, UndoEntry } from './store.js';
import { undoTopOf } from './undo-top.js';
import type { RollbackFailure } from '../../machines/execution-types.js';
import { bucketOf, ELEMENT_OUTCOME_OF, MAP_BUCKET_SIZE, readStats, startedWindow } from './map-writes.js';
import { readMapPageArgs, readMapPageReply } from './redis-map-args.js';

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
   * Retention of an execution's keys. `create` (and a commit's `spawn`) stamps it on every key of
   * the actor, and a commit or signal on every key it creates (an inbox, a dedupe record, an
   * awaits list, a children set). A commit re-stamps every key of the actor only when this
   * store has not done so for that actor within the refresh window,
   * {@link retentionRefreshMs}: max(1000 ms, contextTtlMs / 100), at most half of contextTtlMs;
   * that re-stamp also covers every key of the actor's ancestors (the parents its spawns
   * recorded) and of its descendants (the actors it spawned, transitively), so a child's
   * progress keeps its ancestors alive and a parent's progress keeps its children's undo data.
   * So every key always has a TTL, and an execution's keys live at least
   * contextTtlMs − refresh window after its last commit (or that of a descendant). (The store
   * remembers its last full stamp of the {@link RESTAMP_MEMORY} executions it stamped most recently.)
   * @defaultValue 86_400_000 (24 h)
   */
  readonly contextTtlMs?: number;
  /**
   * Actor kind -> the machine versions of that kind this build can load. Loading an actor of a
   * kind not listed, or of a version not listed for its kind, fails with a retryable
   * DeserializationError (a build that knows it can advance the actor).
   * @defaultValue `{ execution: [EXECUTION_MACHINE_VERSION] }`
   */
  readonly machines?: MachineVersions;
  /**
   * Creates the connection `waitSettled` subscribes on (once, on the first wait). The store owns
   * it and quits it on `close()`.
   * @defaultValue `redis.duplicate()`
   */
  readonly subscriber?: () => Redis | Cluster;
  /**
   * Time source for `waitSettled` timeouts and for the retention refresh window (when this store
   * last re-stamped an execution's keys).
   * @defaultValue the system clock
   */
  readonly clock?: Clock;
  /**
   * Group commit: the commits that several actors issue while the store's commit calls are in
   * flight (per-step ones and those with signals, spawns or map writes alike) go to Redis
   * together, in one script call, each still fenced and answered on its own: at the end of the
   * turn while fewer than two calls are in flight (from idle, a turn of four or more as two calls
   * of halves, so actors that started together do not stay in lockstep), once one is answered
   * while two are (see `src/store/commit-batcher.ts`); 128 waiting commits go out at once, as one
   * call. A lone run's commit waits only for the end of the turn it is issued in. The leases
   * and loads of several actors issued in one turn (`acquireAndLoad`: a bundle of rollback actors
   * each taking its element) share one call the same way (`src/store/load-batcher.ts`).
   * Not available on a Redis Cluster, whose executions live in different slots.
   * @defaultValue true on a single Redis server, false on a Cluster
   */
  readonly groupCommit?: boolean;
  /**
   * How long a call may wait for Redis before it rejects with `RedisUnavailableError`, which
   * names the server (a create or commit that times out has an unknown outcome: the error says
   * so and names the execution). 0 waits for as long as the connection does.
   * @defaultValue 10_000
   */
  readonly timeoutMs?: number;
}

/** How many executions a Redis store remembers its last retention re-stamp of (the oldest record is forgotten first). */
export const RESTAMP_MEMORY = 10_000;

/**
 * The retention refresh window of `contextTtlMs`: a commit re-stamps every key of the execution
 * when the store last did so longer ago than this. max(1000 ms, contextTtlMs / 100), and never more
 * than half of contextTtlMs (so a very short retention still outlives the window).
 */
export function retentionRefreshMs(contextTtlMs: number): number {
  return Math.min(Math.max(1000, contextTtlMs / 100), contextTtlMs / 2);
}

/**
 * When this process last stamped the retention on every key of an execution, by id: at most
 * `capacity` ids, forgetting the one stamped longest ago. A forgotten id is simply re-stamped on
 * its next commit.
 */
interface StampRecords {
  /** Whether a commit at `now` must re-stamp every key of `id` (no record, or the record is `windowMs` old or older). */
  due(id: string, now: number): boolean;
  /** Record a full stamp of `id`, sent at `at` (before the script ran, so the keys expire no earlier than `at` + TTL). */
  note(id: string, at: number): void;
  /** Record a stamp of `id` another process made at `at`, unless a later one is recorded. */
  noteEarlier(id: string, at: number): void;
}

function createStampRecords(windowMs: number, capacity: number): StampRecords {
  const stamped = new Map<string, number>();
  return {
    due(id, now) {
      const at = stamped.get(id);
      return at === undefined || now - at >= windowMs;
    },
    note(id, at) {
      // Re-inserting moves the id to the end of the Map's insertion order: the first key is the oldest stamp.
      stamped.delete(id);
      stamped.set(id, at);
      if (stamped.size > capacity) stamped.delete(stamped.keys().next().value!);
    },
    noteEarlier(id, at) {
      const known = stamped.get(id);
      if (known === undefined || known < at) this.note(id, at);
    },
  };
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
  const cluster = (redis as { isCluster?: boolean }).isCluster === true;
  if (cluster && options.groupCommit === true) {
    throw new DefinitionError('groupCommit is not available on a Redis Cluster (the executions of one group commit live in different hash slots): leave groupCommit unset');
  }
  return {
    redis,
    groupCommit: options.groupCommit ?? !cluster,
    timeoutMs: compileTimeout(options.timeoutMs),
    prefix: options.prefix ?? 'xr',
    contextTtlMs,
    machines: options.machines ?? DEFAULT_MACHINES,
    subscriber: options.subscriber ?? (() => (redis as Redis).duplicate()),
    clock: options.clock ?? systemClock,
  };
}

function compileTimeout(timeoutMs: number | undefined): number {
  const value = timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  if (!(value >= 0) || !Number.isFinite(value)) throw new DefinitionError(`timeoutMs ${String(timeoutMs)} is not a number of milliseconds >= 0 (0: no limit); the default is ${DEFAULT_REDIS_TIMEOUT_MS}`);
  return value;
}

/**
 * The Redis store. Every execution lives under the hash tag of its id, so its multi-key scripts
 * run in one slot of a Redis Cluster; `docs/redis-keys.md` lists the keys. Each create and commit
 * is one script call (one round trip), fenced by revision (and, with `ifSnapshot`, by the stored
 * snapshot bytes); it may take or release the lease and publish the settled notification in the
 * same script. Retention: see
 * {@link RedisStoreOptions.contextTtlMs}.
 *
 * @example
 * ```ts
 * const redis = new Redis(process.env.XREACTOR_REDIS_URL!);
 * const store = createRedisStore({ redis, prefix: 'shop' });
 * ```
 */
export function createRedisStore(options: RedisStoreOptions): Store {
  const config = compileRedisStoreOptions(options);
  const keys = createKeyBuilder(config.prefix);
  // Cluster and Redis share the command API; the store uses it through one type.
  const redis = config.redis as Redis;
  const run = defineScripts(config.redis);
  const sendCommit = config.groupCommit ? batchedCommits(run) : unbatchedCommits(run);
  const sendLoad = config.groupCommit ? batchedLoads(run) : unbatchedLoads(run);
  // The active index is a global key: a standalone server's commit script records its changes
  // with the commit; on a Cluster it is in another slot, so they are written around the script.
  const cluster = (config.redis as { isCluster?: boolean }).isCluster === true;
  const settled = createSettledHub(config.subscriber, config.clock, (message) => readSettledNotice(message, config.machines));
  const F = EXECUTION_FIELDS;
  const stamps = createStampRecords(retentionRefreshMs(config.contextTtlMs), RESTAMP_MEMORY);

  /** Runs a read; a key of another type (another program's data under our key) becomes a DeserializationError. */
  const read = async <T>(id: string, command: Promise<T>): Promise<T> => {
    try {
      return await command;
    } catch (error) {
      // A script's error carries the command's (`WRONGTYPE ... script: ...`), so look inside the message.
      if (error instanceof Error && /\bWRONGTYPE\b/.test(error.message)) {
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
  /** The checks and decoding of `load`, on the fields of the execution hash (not all absent) and its inbox. */
  const loaded = (id: string, { revision: rev, snapshot, outbox, inboxSeq, entries }: LoadReply): LoadedExecution => {
    const revision = Number(rev?.toString());
    if (!Number.isSafeInteger(revision) || snapshot == null || outbox == null) {
      throw new DeserializationError(`execution ${id} is incomplete or foreign (revision ${rev == null ? 'missing' : JSON.stringify(rev.toString())}, snapshot ${snapshot == null ? 'missing' : 'present'}): discard it`);
    }
    return { snapshot: decodeSnapshot(snapshot, config.machines), revision, outbox: decode(outbox) as OutboxEffect[], inbox: inboxOf(id, inboxSeq, entries) };
  };

  const markActiveMany = async (ids: readonly string[], active: boolean): Promise<void> => {
    if (ids.length === 0) return;
    if (active) {
      await run('markActive', markActiveManyArgs(keys.active, ids));
      return;
    }
    for (let from = 0; from < ids.length; from += 1000) await redis.zrem(keys.active, ...ids.slice(from, from + 1000));
  };
  /**
   * Runs a create or commit script, listing the actors it spawns (SpawnActor.listed) in the
   * active index, a global key of another slot, before it (should this process die right after
   * the script) and again after it lands (a sweep may have dropped the entry of an actor that did
   * not exist yet).
   */
  const withListedSpawns = async <T>(commit: Commit, script: () => Promise<T>, also: readonly string[] = []): Promise<T> => {
    const listed = commit.spawn === undefined ? [...also] : [...also, ...listedSpawnIds(commit)];
    if (listed.length === 0) return script();
    await markActiveMany(listed, true);
    const outcome = await script();
    await markActiveMany(listed, true);
    return outcome;
  };

  const store: Store = {
    shared: true,
    async create(execution, options) {
      checkCommitRules(execution.id, execution.commit);
      const k = keys.executionKeys(execution.id);
      // As publishSettled: a waiter in this process whose SUBSCRIBE is pending must not miss the announcement.
      if (options?.announce === true) await settled.subscribed(k.settled);
      const at = config.clock.now();
      // Listed with the create: in the script on a standalone server, beside it on a Cluster.
      const listBeside = cluster && options?.list === true;
      const create = withListedSpawns(execution.commit, async () =>
        readCreateReply(execution.id, await run('createExecution', createArgs(k, execution, config.contextTtlMs, { ...options, ...(options?.list === true && !cluster ? { activeKey: keys.active } : {}) }))),
      );
      // Both end before this returns (a refused create rejects once its listing is written, too).
      const [made, listed] = await Promise.allSettled([create, listBeside ? markActiveMany([execution.id], true) : undefined]);
      if (made.status === 'rejected') throw made.reason;
      if (listed.status === 'rejected') throw listed.reason;
      const revision = made.value;
      for (const created of [execution.id, ...spawnedIds(execution.commit)]) stamps.note(created, at);
      return revision;
    },
    async load(id, options) {
      const reply = readLoadReply(await read(id, run('loadExecution', loadArgs(keys.executionKeys(id), options?.results), true)));
      if (reply.revision == null && reply.snapshot == null && reply.outbox == null) return undefined;
      const results = reply.results === undefined ? undefined : decodeLoadedResults(reply.results);
      return { ...loaded(id, reply), leased: reply.leased, marked: reply.marked, ...(results === undefined ? {} : { results }) };
    },
    async readInbox(id) {
      const { seq, entries } = readInboxReply(await read(id, run('readInbox', readInboxArgs(keys.executionKeys(id)), true)));
      return inboxOf(id, seq, entries);
    },
    async signal(signal, options) {
      const reply = await read(signal.to, run('signalActor', signalArgs(keys.executionKeys(signal.to), signal, config.contextTtlMs, options?.refuseIn)));
      return readSignalReply(reply);
    },
    async commit(id, expectedRevision, commit, options) {
      checkCommitRules(id, commit);
      checkCreateOption(id, expectedRevision, options);
      const k = keys.executionKeys(id);
      const announce = options?.announce === true;
      if (announce) await settled.subscribed(k.settled);
      const at = config.clock.now();
      const create = options?.create;
      if (options?.stampedAt !== undefined) stamps.noteEarlier(id, options.stampedAt);
      // A creating commit gives every key it creates its retention (all of them).
      const restamp = create === undefined && stamps.due(id, at);
      const list = options?.list ?? [];
      const unlist = options?.unlist === true;
      // On a standalone server the script records the index changes with the commit; a Cluster
      // keeps the index in another slot, so it is written around the script there.
      const inScript = !cluster && (list.length > 0 || unlist || commit.spawn !== undefined);
      const spawnsListed = commit.spawn === undefined ? [] : listedSpawnIds(commit);
      const call = commitArgs(k, expectedRevision, commit, config.contextTtlMs, {
        restamp,
        releaseLease: options?.releaseLease,
        announceId: announce ? id : undefined,
        // On a Cluster a PUBLISH reaches every node: the id alone there, as before notices.
        ...(cluster ? {} : { announceResults: options?.announceResults }),
        takeLease: options?.takeLease,
        ifSnapshot: options?.ifSnapshot,
        ...(inScript ? { index: { activeKey: keys.active, list: [...list, ...spawnsListed], unlist } } : {}),
        ...(create === undefined ? {} : { create: { reactor: create.reactor, input: encode(create.input), parent: create.parent } }),
      });
      const send = async () => {
        const replying = sendCommit(call);
        options?.sending?.();
        const reply = await replying;
        const committed = readCommitReply(id, expectedRevision, reply);
        if (options?.landedSignals !== undefined || options?.delivered !== undefined) {
          const receipt = readCommitReceipt(reply);
          options.landedSignals?.push(...receipt.landed);
          if (options.delivered !== undefined) for (const [index, to, seq] of receipt.landings) options.delivered.push({ to, entry: deliveredEntry(to, seq, commit.signals?.[index]) });
        }
        return committed;
      };
      const revision = inScript ? await send() : await withListedSpawns(commit, send, list);
      if (!inScript && unlist) await markActiveMany([id], false);
      if (restamp || create !== undefined) stamps.note(id, at);
      for (const spawned of spawnedIds(commit)) stamps.note(spawned, at);
      return revision;
    },
    async acquireAndLoad(id, lease, options): Promise<LeasedLoad> {
      const k = keys.executionKeys(id);
      const asker = options?.unlessExists === undefined ? undefined : keys.executionKeys(options.unlessExists).execution;
      const found = readAcquireAndLoadReply(await read(id, sendLoad(acquireAndLoadArgs(k, lease, options?.undoTop === true, asker))));
      if (found.status !== 'leased') return found;
      try {
        const execution = loaded(id, found);
        if (found.input == null) throw new DeserializationError(`execution ${id} is incomplete or foreign (input missing): discard it`);
        const undoTop = found.undoTop && undoTopOf(found.undoTop.position, found.undoTop.bytes);
        return { status: 'leased', execution, input: decode(found.input), ...(undoTop && { undoTop }) };
      } catch (error) {
        // Hand the lease back before reporting the unreadable data. Should the release fail, the
        // lease expires after its TTL; the DeserializationError is what the caller needs to see.
        await run('releaseLease', releaseLeaseArgs(k, lease.owner)).catch(() => undefined);
        throw error;
      }
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
    markActiveMany,
    async readMapGate(map) {
      const [status, stop] = await Promise.all([read(map, redis.hget(keys.executionKeys(map).execution, F.status)), read(map, redis.hget(keys.mapKeys(map).stats, 'stop'))]);
      return { status: status ?? undefined, stop: stop ?? undefined };
    },
    async readMapStats(map) {
      return readStats(map, await read(map, redis.hgetall(keys.mapKeys(map).stats)));
    },
    async readMapSource(map, from, count) {
      const first = Math.max(0, Math.floor(from));
      if (!(count >= 1)) return [];
      const items = await read(map, redis.lrangeBuffer(keys.mapKeys(map).source, first, first + Math.floor(count) - 1));
      return items.map((bytes) => decode(bytes));
    },
    async readMapStarts(map, from, count) {
      const first = Math.max(0, Math.floor(from));
      const n = Math.max(0, Math.floor(count));
      if (n === 0) return [];
      const mk = keys.mapKeys(map);
      // One HMGET per bucket the window covers (a throw's window covers one or two).
      const reads: Promise<(Buffer | null)[]>[] = [];
      for (let at = first; at < first + n; ) {
        const bucket = bucketOf(at);
        const end = Math.min(first + n, (bucket + 1) * MAP_BUCKET_SIZE);
        reads.push(read(map, redis.hmgetBuffer(mk.starts(bucket), ...Array.from({ length: end - at }, (_, i) => String(at + i)))));
        at = end;
      }
      return (await Promise.all(reads)).flat().map((bytes) => (bytes === null ? undefined : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)));
    },
    async readMapStarted(map, total, fromPosition, count, list = 'started') {
      const window = startedWindow(total, fromPosition, count);
      if (window === undefined) return [];
      const mk = keys.mapKeys(map);
      const indexes = await read(map, redis.lrange(list === 'aborted' ? mk.aborted : mk.started, window.first, window.last));
      return indexes.map(Number).reverse();
    },
    async readMapPage(map, from, count, returns) {
      if (!(count >= 1)) return [];
      const mk = keys.mapKeys(map);
      const page = readMapPageReply(await read(map, run('readMapPage', readMapPageArgs(mk, from, count, returns), true)), returns === null);
      if (!page.exists) return [];
      const first = Math.max(0, Math.floor(from));
      return page.entries.map((entry, i): MapPageEntry => {
        const index = first + i;
        const outcome = entry.letter === null ? (page.target !== null && index >= page.target ? 'skipped' : undefined) : ELEMENT_OUTCOME_OF.get(entry.letter);
        if (outcome === 'completed') {
          const { result } = entry;
          if (result === null) return { index, outcome };
          return { index, outcome, result: Buffer.isBuffer(result) ? decode(result) : new Map(result.map(([step, bytes]) => [step, decode(bytes)])) };
        }
        if ((outcome === 'failed' || outcome === 'halted') && entry.snapshot !== null) return { index, outcome, snapshot: decodeSnapshot(entry.snapshot, config.machines) };
        return { index, outcome };
      });
    },
    async readRollbackFailures(map) {
      const failures = await read(map, redis.lrangeBuffer(keys.mapKeys(map).rollbackFailures, 0, -1));
      return failures.map((bytes) => decode(bytes) as RollbackFailure);
    },
    async markUnreadable(id, error) {
      const mark = readMarkUnreadableReply(await run('markUnreadable', markUnreadableArgs(keys.executionKeys(id), error)));
      // The active index is a global key (another cluster slot): removed after the mark, so an
      // actor is never unlisted without its mark (a crash between the two leaves it listed, and
      // the sweeper marks it again, which changes nothing, and unlists it).
      if (mark !== 'missing') await redis.zrem(keys.active, id);
      return mark;
    },
    async readUnreadable(id) {
      const bytes = await read(id, redis.hgetBuffer(keys.executionKeys(id).execution, F.unreadable));
      return bytes === null ? undefined : decodeUnreadable(id, bytes);
    },
    async listActive(limit, after) {
      const count = Math.floor(limit);
      if (!(count > 0)) return { ids: [], next: after };
      // Scores are unique (markActive-1.lua raises each above the newest): the last score seen is the cursor.
      const min = after === undefined ? '-inf' : `(${after}`;
      const reply = Number.isFinite(count)
        ? await redis.zrangebyscore(keys.active, min, '+inf', 'WITHSCORES', 'LIMIT', 0, count + 1)
        : await redis.zrangebyscore(keys.active, min, '+inf', 'WITHSCORES');
      const ids: string[] = [];
      let last: string | undefined;
      for (let i = 0; i < reply.length && ids.length < count; i += 2) {
        ids.push(reply[i]!);
        last = reply[i + 1];
      }
      return { ids, next: reply.length > ids.length * 2 ? last : undefined };
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
  return withStoreDeadlines(store, config.redis, config.timeoutMs);
}
