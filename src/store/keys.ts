/**
 * The one Redis key builder. `docs/redis-keys.md` lists every key it makes.
 *
 * Layout: `<prefix>:{<root>}:<kind>:<id>`. Every key of an execution carries the hash tag of
 * its root execution, so the multi-key scripts of one execution tree run in one Redis Cluster
 * slot. The kind comes before the id, so ids that contain `:` can never collide with another
 * kind's key. Global keys (`<prefix>:<name>`, no hash tag) live in their own slot and are only
 * touched by single-key commands and scripts.
 */
import { DefinitionError, XreactorError } from '../errors/index.js';

/** The default key prefix. */
export const DEFAULT_KEY_PREFIX = 'xr';

/** Fields of the execution hash ({@link ExecutionKeys.execution}). */
export const EXECUTION_FIELDS = {
  /** Revision, an integer: 1 after create, +1 per commit. */
  revision: 'rev',
  /** Lifecycle status of the last commit. */
  status: 'status',
  /** Reactor name. */
  reactor: 'reactor',
  /** The snapshot envelope (msgpack bytes). */
  snapshot: 'snapshot',
  /** The outbox of the last commit (msgpack bytes). */
  outbox: 'outbox',
  /** The validated input (msgpack bytes), written once by create. */
  input: 'input',
  /** The highest inbox seq ever assigned (an integer; absent: no signal ever landed). */
  inboxSeq: 'iseq',
  /** The id of the actor whose commit spawned this one (absent: created by `create`). */
  parent: 'parent',
  /** `'1'` for an actor spawned with `retainWithParent: false`: not in its parent's children set, and its re-stamp does not climb to the parent (absent otherwise). */
  detached: 'detached',
  /** The encoded UnreadableRecord of an actor whose data cannot be read (absent: never marked; see `Store.markUnreadable`). */
  unreadable: 'unreadable',
} as const;

/**
 * The kind segment of each key of an actor (`<prefix>:{<root>}:<kind>:<id>`). The Lua scripts
 * build the keys of other actors of the same root (signal recipients, spawned actors, ancestors
 * and descendants) from the root's {@link ExecutionKeys.base} with the same segments:
 * `lua/includes/actorKeys.lua` mirrors this table (a unit test compares them).
 */
export const KEY_KINDS = {
  execution: 'exec',
  results: 'results',
  undo: 'undo',
  trace: 'trace',
  lease: 'lease',
  settled: 'settled',
  inbox: 'inbox',
  dedupe: 'dedupe',
  awaits: 'awaits',
  children: 'children',
} as const;

/**
 * The kind segment of each key a map operation has beside its actor keys
 * (`<prefix>:{<root>}:<kind>:<map>`, and `...:<map>:<bucket>` for the bucketed outcome hashes).
 * Written by the map's own commits and by the commits of its elements and rollback actors, so
 * the scripts build them from the root's base: `lua/includes/actorKeys.lua` mirrors this table
 * (`MAP_KIND`; a unit test compares them).
 */
export const MAP_KEY_KINDS = {
  stats: 'mapstat',
  source: 'mapsrc',
  outcomes: 'mapout',
  started: 'mapstarted',
  aborted: 'mapaborted',
  rollbackOutcomes: 'rbout',
  rollbackFailures: 'rbfail',
  starts: 'mapstarts',
} as const;

/** The keys of one map operation beside its actor keys (see `docs/redis-keys.md`, map keys). */
export interface MapKeys {
  /** The map actor's id. */
  readonly id: string;
  /** As {@link ExecutionKeys.base}. */
  readonly base: string;
  /** HASH: parameters and counters (`total`, `batch`, `atomic`, `mode`, `target`, `started`, `settled`, per outcome, `stop`, `lastReportAt`, `buckets`, `rb.*`). */
  readonly stats: string;
  /** LIST: the encoded items of an array source. */
  readonly source: string;
  /** LIST: element indexes in start order (the rollback's work list, read by position from the tail). */
  readonly started: string;
  /** LIST: indexes of aborted elements. */
  readonly aborted: string;
  /** LIST: encoded rollback failures. */
  readonly rollbackFailures: string;
  /** HASH of bucket `bucket`: element index → one-letter outcome. */
  outcomes(bucket: number): string;
  /** HASH of bucket `bucket`: started-list position → one-letter rollback outcome. */
  rollbackOutcomes(bucket: number): string;
  /** HASH of bucket `bucket`: fan-out position → its start payload (until the forward phase ends). */
  starts(bucket: number): string;
}

/** Every key (and the pub/sub channel) of one execution (one actor). */
export interface ExecutionKeys {
  /** The actor's id. */
  readonly id: string;
  /**
   * The start every key of the actor's root shares: `<prefix>:{<root>}:`. A key of any actor of
   * the root is `base + KEY_KINDS.<kind> + ':' + id` (how the scripts reach other actors).
   */
  readonly base: string;
  /** HASH: revision, status, reactor, snapshot, outbox, input, inbox seq, parent, detached, unreadable ({@link EXECUTION_FIELDS}). */
  readonly execution: string;
  /** HASH: step name -> encoded result. */
  readonly results: string;
  /** LIST: encoded undo entries, oldest first. */
  readonly undo: string;
  /** LIST: encoded trace entries, oldest first. */
  readonly trace: string;
  /** STRING: the owner holding the liveness lease, with the lease TTL. */
  readonly lease: string;
  /** Pub/sub channel announcing that the execution settled. */
  readonly settled: string;
  /** HASH: inbox seq -> encoded `{ event, dedupeKey }`, the unconsumed signals. */
  readonly inbox: string;
  /** HASH: dedupe key -> the inbox seq it landed at, for every signal that ever landed. */
  readonly dedupe: string;
  /** LIST: ids of the actors this actor awaits (cascading signals follow them), in the order the commit named them. */
  readonly awaits: string;
  /** SET: ids of the actors this actor spawned. */
  readonly children: string;
}

/** The key builder of one prefix. */
export interface KeyBuilder {
  readonly prefix: string;
  /**
   * Keys of execution `id`, tagged with its root execution: `root`, by default {@link rootOf}(id)
   * (a composed child `<root>.<step>` shares its root's tag, so one execution tree lives in one
   * cluster slot).
   * @throws XreactorError when `id` or `root` is empty.
   */
  executionKeys(id: string, root?: string): ExecutionKeys;
  /**
   * The map keys of map operation `map`, tagged with its root as {@link executionKeys} tags its actor keys.
   * @throws XreactorError when `map` or `root` is empty.
   */
  mapKeys(map: string, root?: string): MapKeys;
  /** ZSET (global slot): executions that may need recovery, scored by the time first marked. */
  readonly active: string;
  /** STRING: a first-writer-wins claim or a counter (`claim` / `increment`), under the caller's key. */
  claim(key: string): string;
}

/**
 * The root execution of an execution id: the part before the first `.`. A composed child's id is
 * `<root>.<step>[.<step>...]`, and a root id never contains `.` (the runtime refuses one).
 */
export function rootOf(id: string): string {
  const dot = id.indexOf('.');
  return dot < 0 ? id : id.slice(0, dot);
}

/**
 * Creates the key builder for `prefix`.
 * @throws DefinitionError when the prefix is empty or contains `{` or `}` (it would capture the hash tag).
 */
export function createKeyBuilder(prefix: string = DEFAULT_KEY_PREFIX): KeyBuilder {
  if (prefix === '' || /[{}]/.test(prefix)) {
    throw new DefinitionError(
      `Redis key prefix ${JSON.stringify(prefix)} is empty or contains "{" or "}": ` +
        'braces would capture the hash tag and put every execution in one cluster slot; choose a prefix like "xr" or "app:xr"',
    );
  }
  const baseOf = (id: string, root: string): string => {
    if (id === '' || root === '') {
      // An empty hash tag `{}` hashes the whole key: the keys of one execution would land in different slots.
      throw new XreactorError('execution_id_invalid', `execution id ${JSON.stringify(id)} with root ${JSON.stringify(root)} is empty; ids must be non-empty strings`);
    }
    return `${prefix}:{${root}}:`;
  };
  return {
    prefix,
    active: `${prefix}:active`,
    claim: (key) => `${prefix}:claim:${key}`,
    mapKeys(map, root = rootOf(map)) {
      const base = baseOf(map, root);
      const K = MAP_KEY_KINDS;
      return {
        id: map,
        base,
        stats: `${base}${K.stats}:${map}`,
        source: `${base}${K.source}:${map}`,
        started: `${base}${K.started}:${map}`,
        aborted: `${base}${K.aborted}:${map}`,
        rollbackFailures: `${base}${K.rollbackFailures}:${map}`,
        outcomes: (bucket) => `${base}${K.outcomes}:${map}:${bucket}`,
        rollbackOutcomes: (bucket) => `${base}${K.rollbackOutcomes}:${map}:${bucket}`,
        starts: (bucket) => `${base}${K.starts}:${map}:${bucket}`,
      };
    },
    executionKeys(id, root = rootOf(id)) {
      const base = baseOf(id, root);
      const K = KEY_KINDS;
      return {
        id,
        base,
        execution: `${base}${K.execution}:${id}`,
        results: `${base}${K.results}:${id}`,
        undo: `${base}${K.undo}:${id}`,
        trace: `${base}${K.trace}:${id}`,
        lease: `${base}${K.lease}:${id}`,
        settled: `${base}${K.settled}:${id}`,
        inbox: `${base}${K.inbox}:${id}`,
        dedupe: `${base}${K.dedupe}:${id}`,
        awaits: `${base}${K.awaits}:${id}`,
        children: `${base}${K.children}:${id}`,
      };
    },
  };
}
