import type { TraceEntry } from '../../machines/execution-types.js';
import { ExecutionNotFoundError, StaleRevisionError, XreactorError } from '../errors/index.js';
import { decode, encode } from '../serialization/index.js';
import type { Clock } from '../internal/clock.js';
import { systemClock } from '../internal/clock.js';
import { decodeSnapshot, DEFAULT_MACHINES, encodeSnapshot } from './snapshot-codec.js';
import type { MachineVersions } from './snapshot-codec.js';
import { executionBusyError, undoGapError } from './store.js';
import type { Commit, CommitWrites, CreateExecution, CreateOptions, LeasedLoad, LoadedExecution, OutboxEffect, Store, UndoEntry } from './store.js';

interface Row {
  revision: number;
  snapshot: Uint8Array;
  readonly input: Uint8Array;
  readonly results: Map<string, Uint8Array>;
  readonly undo: Uint8Array[];
  readonly trace: Uint8Array[];
  outbox: Uint8Array;
}

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Actor kind -> the machine versions of that kind this build can load. Loading an actor of a
   * kind not listed, or of a version not listed for its kind, fails with a retryable
   * DeserializationError (a build that knows it can advance the actor).
   * @defaultValue `{ execution: [EXECUTION_MACHINE_VERSION] }`
   */
  readonly machines?: MachineVersions;
  /**
   * Time source for lease expiry and waits.
   * @defaultValue the system clock
   */
  readonly clock?: Clock;
}

const isPosition = (n: number) => Number.isSafeInteger(n) && n >= 0;

/**
 * The checks the Redis scripts make on a commit's undo writes, before anything is written: a
 * truncation and every position are non-negative integers, and each push lands on an existing
 * entry or directly after the last one (`length` is the stack's current length).
 */
function checkUndo(id: string, w: CommitWrites, length: number): void {
  if (w.truncateUndoTo !== undefined && !isPosition(w.truncateUndoTo)) {
    throw new XreactorError('undo_position_invalid', `truncateUndoTo ${w.truncateUndoTo} is not a non-negative integer`);
  }
  let len = w.truncateUndoTo === undefined ? length : Math.min(length, w.truncateUndoTo);
  for (const entry of w.pushUndo) {
    if (!isPosition(entry.position)) {
      throw new XreactorError('undo_position_invalid', `undo entry of step "${entry.step}" has position ${entry.position}, not a non-negative integer`);
    }
    if (entry.position > len) throw undoGapError(id, entry.position, len);
    if (entry.position === len) len += 1;
  }
}

/** Whether two byte arrays hold the same bytes. */
const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;

/**
 * The embedded store: everything in process memory, encoded exactly as the
 * Redis adapter stores it, so a caller can never alias stored state. Commits
 * are fenced by revision like every other adapter.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const machines = options.machines ?? DEFAULT_MACHINES;
  const clock = options.clock ?? systemClock;
  const rows = new Map<string, Row>();
  const leases = new Map<string, { owner: string; expiresAt: number }>();
  /** The active index: id → the order it was first marked in. */
  const active = new Map<string, number>();
  let activeSeq = 0;
  const waiters = new Map<string, Set<() => void>>();
  const claims = new Map<string, { value: string; expiresAt: number }>();
  const liveClaim = (key: string) => {
    const claimed = claims.get(key);
    if (claimed !== undefined && claimed.expiresAt <= clock.now()) {
      claims.delete(key);
      return undefined;
    }
    return claimed;
  };
  const liveLease = (id: string) => {
    const lease = leases.get(id);
    if (lease !== undefined && lease.expiresAt <= clock.now()) {
      leases.delete(id);
      return undefined;
    }
    return lease;
  };

  /** Whether an owner other than `owner` holds the execution's live lease. */
  const heldByOther = (id: string, owner: string): boolean => {
    const lease = liveLease(id);
    return lease !== undefined && lease.owner !== owner;
  };
  /** Take (or renew, for the same owner) the lease; false when another owner holds it. */
  const takeLease = (id: string, owner: string, ttlMs: number): boolean => {
    if (heldByOther(id, owner)) return false;
    leases.set(id, { owner, expiresAt: clock.now() + ttlMs });
    return true;
  };
  const releaseLease = (id: string, owner: string): void => {
    if (leases.get(id)?.owner === owner) leases.delete(id);
  };
  const publishSettled = (id: string): void => {
    for (const wake of waiters.get(id) ?? []) wake();
  };
  const decodeRow = (r: Row): LoadedExecution => {
    const snapshot = decodeSnapshot(r.snapshot, machines);
    return { snapshot, revision: r.revision, outbox: decode(r.outbox) as OutboxEffect[] };
  };

  const row = (id: string): Row => {
    const found = rows.get(id);
    if (found === undefined) throw new ExecutionNotFoundError(id);
    return found;
  };
  // Copies: msgpackr returns views into its shared working buffer, which a stored view would pin.
  const own = (value: unknown): Uint8Array => Buffer.from(encode(value));
  const apply = (r: Row, commit: Commit): void => {
    // Encoded first: a snapshot that cannot be encoded is refused before anything is written.
    // Exactly encodeSnapshot's bytes (copied), as the Redis store keeps them: `ifSnapshot` compares them.
    const snapshot = Buffer.from(encodeSnapshot(commit.snapshot));
    const outbox = own(commit.outbox);
    const w = commit.writes;
    for (const [step, value] of w.results) r.results.set(step, own(value));
    if (w.truncateUndoTo !== undefined) r.undo.length = Math.min(r.undo.length, w.truncateUndoTo);
    for (const entry of w.pushUndo) r.undo[entry.position] = own({ step: entry.step, args: entry.args, result: entry.result });
    for (const entry of w.trace) r.trace.push(own(entry));
    r.snapshot = snapshot;
    r.outbox = outbox;
    r.revision += 1;
  };

  return {
    async create(execution: CreateExecution, options?: CreateOptions) {
      if (rows.has(execution.id)) {
        throw new XreactorError('execution_exists', `execution ${execution.id} already exists; execution ids must be unique`);
      }
      const lease = options?.lease;
      if (lease !== undefined && heldByOther(execution.id, lease.owner)) throw executionBusyError(execution.id);
      checkUndo(execution.id, execution.commit.writes, 0);
      const r: Row = {
        revision: 0,
        snapshot: new Uint8Array(),
        input: own(execution.input),
        results: new Map(),
        undo: [],
        trace: [],
        outbox: new Uint8Array(),
      };
      apply(r, execution.commit);
      rows.set(execution.id, r);
      if (lease !== undefined) takeLease(execution.id, lease.owner, lease.ttlMs);
      if (options?.announce === true) publishSettled(execution.id);
      return r.revision;
    },
    async load(id) {
      const r = rows.get(id);
      return r === undefined ? undefined : decodeRow(r);
    },
    async commit(id, expectedRevision, commit, options) {
      const r = row(id);
      if (r.revision !== expectedRevision) throw new StaleRevisionError(id, expectedRevision, r.revision);
      if (options?.ifSnapshot !== undefined && !sameBytes(r.snapshot, options.ifSnapshot)) throw new StaleRevisionError(id, expectedRevision, r.revision);
      checkUndo(id, commit.writes, r.undo.length);
      const lease = options?.takeLease;
      if (lease !== undefined && heldByOther(id, lease.owner)) throw executionBusyError(id);
      apply(r, commit);
      if (lease !== undefined) takeLease(id, lease.owner, lease.ttlMs);
      if (options?.releaseLease !== undefined) releaseLease(id, options.releaseLease);
      if (options?.announce === true) publishSettled(id);
      return r.revision;
    },
    async acquireAndLoad(id, lease): Promise<LeasedLoad> {
      const r = rows.get(id);
      if (r === undefined) return { status: 'missing' };
      if (!takeLease(id, lease.owner, lease.ttlMs)) return { status: 'busy' };
      try {
        return { status: 'leased', execution: decodeRow(r), input: decode(r.input) };
      } catch (error) {
        releaseLease(id, lease.owner);
        throw error;
      }
    },
    async readInput(id) {
      return decode(row(id).input);
    },
    async readResults(id, steps) {
      const r = row(id);
      const out = new Map<string, unknown>();
      for (const step of steps ?? r.results.keys()) {
        const bytes = r.results.get(step);
        if (bytes !== undefined) out.set(step, decode(bytes));
      }
      return out;
    },
    async readUndoEntry(id, position) {
      const bytes = row(id).undo[position];
      return bytes === undefined ? undefined : (decode(bytes) as UndoEntry);
    },
    async readUndoStack(id) {
      return row(id).undo.map((bytes) => decode(bytes) as UndoEntry);
    },
    async readTrace(id) {
      return row(id).trace.map((bytes) => decode(bytes) as TraceEntry);
    },
    async acquireLease(id, owner, ttlMs) {
      return takeLease(id, owner, ttlMs);
    },
    async releaseLease(id, owner) {
      releaseLease(id, owner);
    },
    async hasLease(id) {
      return liveLease(id) !== undefined;
    },
    async markActive(id, isActive) {
      if (isActive) {
        if (!active.has(id)) active.set(id, (activeSeq += 1));
      } else active.delete(id);
    },
    async listActive(limit, after) {
      const count = Math.floor(limit);
      if (!(count > 0)) return { ids: [], next: after };
      const from = after === undefined ? 0 : Number(after);
      const page = [...active].filter(([, seq]) => seq > from).slice(0, count);
      const last = page.at(-1);
      const more = last !== undefined && [...active.values()].some((seq) => seq > last[1]);
      return { ids: page.map(([id]) => id), next: more ? String(last[1]) : undefined };
    },
    async publishSettled(id) {
      publishSettled(id);
    },
    waitSettled(id, timeoutMs, signal) {
      // In one process a waiter listens as soon as it is registered.
      const settled = new Promise<boolean>((resolve) => {
        const set = waiters.get(id) ?? new Set();
        waiters.set(id, set);
        const timeout = new AbortController();
        const done = (notified: boolean) => {
          set.delete(wake);
          if (set.size === 0) waiters.delete(id);
          timeout.abort();
          resolve(notified);
        };
        const wake = () => done(true);
        set.add(wake);
        const stop = signal === undefined ? timeout.signal : AbortSignal.any([signal, timeout.signal]);
        clock.sleep(timeoutMs, stop).then(
          () => done(false),
          () => done(false),
        );
      });
      return { listening: Promise.resolve(), settled };
    },
    async claim(key, value, ttlMs) {
      const held = liveClaim(key);
      if (held !== undefined) return held.value;
      claims.set(key, { value, expiresAt: clock.now() + ttlMs });
      return value;
    },
    async readClaim(key) {
      return liveClaim(key)?.value;
    },
    async increment(key, ttlMs) {
      const count = Number(liveClaim(key)?.value ?? 0) + 1;
      claims.set(key, { value: String(count), expiresAt: clock.now() + ttlMs });
      return count;
    },
    async close() {
      waiters.clear();
    },
  };
}
