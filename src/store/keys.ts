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
} as const;

/** Every key (and the pub/sub channel) of one execution. */
export interface ExecutionKeys {
  /** HASH: revision, status, reactor, snapshot, outbox, input ({@link EXECUTION_FIELDS}). */
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
  return {
    prefix,
    active: `${prefix}:active`,
    claim: (key) => `${prefix}:claim:${key}`,
    executionKeys(id, root = rootOf(id)) {
      if (id === '' || root === '') {
        // An empty hash tag `{}` hashes the whole key: the keys of one execution would land in different slots.
        throw new XreactorError('execution_id_invalid', `execution id ${JSON.stringify(id)} with root ${JSON.stringify(root)} is empty; ids must be non-empty strings`);
      }
      const base = `${prefix}:{${root}}`;
      return {
        execution: `${base}:exec:${id}`,
        results: `${base}:results:${id}`,
        undo: `${base}:undo:${id}`,
        trace: `${base}:trace:${id}`,
        lease: `${base}:lease:${id}`,
        settled: `${base}:settled:${id}`,
      };
    },
  };
}
