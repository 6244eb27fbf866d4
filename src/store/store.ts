import type { ExecutionStatus, TraceEntry } from '../../machines/execution-types.js';
import { XreactorError } from '../errors/index.js';

/** A persisted execution actor: machine version, state value and context. */
export interface PersistedSnapshot {
  readonly machineVersion: number;
  readonly value: unknown;
  readonly context: unknown;
}

/** An effect as committed in a snapshot's outbox. */
export interface OutboxEffect {
  readonly type: string;
  readonly params: unknown;
}

/** The snapshot of an execution as loaded, with the revision a commit must name and its outbox. */
export interface LoadedExecution {
  readonly snapshot: PersistedSnapshot;
  readonly revision: number;
  /** The effects the last commit asked for: the pending work a recovering host performs again. */
  readonly outbox: readonly OutboxEffect[];
}

/** An undo-stack entry: a completed step, its arguments and its result. */
export interface UndoEntry {
  readonly step: string;
  readonly args: unknown;
  readonly result: unknown;
}

/** Writes committed atomically with a snapshot. */
export interface CommitWrites {
  /** Step results to record, by step name. */
  readonly results: readonly (readonly [step: string, value: unknown])[];
  /** Entries pushed on the undo stack, each at the position it names. */
  readonly pushUndo: readonly (UndoEntry & { readonly position: number })[];
  /** When set, the undo stack is cut to this many entries (entries at and above it were undone). */
  readonly truncateUndoTo: number | undefined;
  /** Trace entries appended. */
  readonly trace: readonly TraceEntry[];
}

/** A commit: the next snapshot, its writes, and the effects it asked for (the outbox). */
export interface Commit {
  readonly snapshot: PersistedSnapshot;
  /** The lifecycle status the snapshot is in (indexed by stores for listing and recovery). */
  readonly status: ExecutionStatus;
  readonly writes: CommitWrites;
  readonly outbox: readonly OutboxEffect[];
}

/** Creating an execution: its first snapshot, the reactor name and the validated input. */
export interface CreateExecution {
  readonly id: string;
  readonly reactor: string;
  readonly input: unknown;
  readonly commit: Commit;
}

/** A liveness lease to take: its owner and how long it lasts without renewal. */
export interface LeaseRequest {
  readonly owner: string;
  readonly ttlMs: number;
}

/** What a commit does besides writing, in the same atomic step. */
export interface CommitOptions {
  /** Release the execution's lease if this owner holds it (no-op when free or held by another owner). */
  readonly releaseLease?: string;
  /** After applying the commit, publish the settled notification exactly as `publishSettled(id)` does (a `waitSettled(id)` waiter wakes). */
  readonly announce?: boolean;
  /**
   * Take (or renew, for the same owner) the execution's lease in the same atomic step, once every
   * other check has passed. If ANOTHER owner holds it, nothing is written and commit throws the
   * XreactorError `execution_busy` (retryable) that `create` throws ({@link executionBusyError}).
   * For a worker's first commit of a handed-off run, made without reading the store first.
   * With `releaseLease` naming the same owner, the lease is taken, then released.
   */
  readonly takeLease?: LeaseRequest;
  /**
   * Apply only if the stored snapshot is byte-for-byte these bytes (the envelope bytes
   * `encodeSnapshot` in `snapshot-codec.ts` produces, which every adapter stores); otherwise
   * nothing is written and commit throws StaleRevisionError (naming the stored revision).
   * Checked together with the revision fence, before the undo positions and the lease.
   */
  readonly ifSnapshot?: Uint8Array;
}

/** Options of `create`. */
export interface CreateOptions {
  /**
   * Take the execution's lease for this owner in the same atomic step. If ANOTHER owner holds the
   * lease, nothing is written and create throws XreactorError with code 'execution_busy' (message
   * names the id and says another live process holds it). An existing id still throws
   * 'execution_exists' (checked first).
   */
  readonly lease?: LeaseRequest;
  /** As CommitOptions.announce. */
  readonly announce?: boolean;
}

/** A page of the active index (see `Store.listActive`). */
export interface ActivePage {
  readonly ids: string[];
  /** Where the next page starts (an opaque cursor), or undefined after the last entry. */
  readonly next: string | undefined;
}

/** A waiter on an execution's settled notification (see `Store.waitSettled`). */
export interface SettledWait {
  /** Resolves once a notification published from now on reaches this waiter (it never rejects). */
  readonly listening: Promise<void>;
  /** `true` on the notification; `false` after the timeout, on abort, or when the store closes. */
  readonly settled: Promise<boolean>;
}

/** What `acquireAndLoad` found. */
export type LeasedLoad =
  | { readonly status: 'leased'; readonly execution: LoadedExecution; readonly input: unknown }
  | { readonly status: 'busy' } // another owner holds the lease; nothing taken
  | { readonly status: 'missing' }; // no such execution; no lease taken

/**
 * The error `create` with a `lease`, or `commit` with `takeLease`, throws when another owner holds
 * the execution's lease (code `execution_busy`, retryable: the holder's lease ends when it
 * finishes or dies). Every adapter throws this one, so the message is the same everywhere.
 */
export function executionBusyError(id: string): XreactorError {
  return new XreactorError(
    'execution_busy',
    `execution ${id} was not written: another live process holds its lease; nothing was created or committed. Try again once that process releases the lease or its lease expires`,
    { retryable: true },
  );
}

/**
 * The error a create or commit throws when an undo entry would be pushed past the end of the
 * stack (code `undo_position_invalid`): `position` is more than the `length` the stack has at
 * that point. Every adapter throws this one.
 */
export function undoGapError(id: string, position: number | string, length: number): XreactorError {
  return new XreactorError(
    'undo_position_invalid',
    `execution ${id}: an undo entry pushed at position ${position} would leave a gap in a stack of ${length} entries; nothing was written`,
  );
}

/**
 * The storage port. Every commit is atomic and fenced: it applies only if the
 * stored revision equals `expectedRevision`, else it throws
 * `StaleRevisionError` and changes nothing.
 */
export interface Store {
  /**
   * Create an execution at revision 1. Throws XreactorError `execution_exists` if the id exists.
   * With `options.lease`, takes the lease in the same atomic step (throws `execution_busy`, writing
   * nothing, when another owner holds it); with `options.announce`, publishes the settled
   * notification after the write. A refused create neither takes the lease nor announces.
   */
  create(execution: CreateExecution, options?: CreateOptions): Promise<number>;
  /** Load the current snapshot and revision, or undefined when unknown. */
  load(id: string): Promise<LoadedExecution | undefined>;
  /**
   * Commit the next snapshot with its writes; returns the new revision. `options` take or release
   * the lease and announce the settle in the same atomic step. Checks, all before the first write:
   * the execution exists (ExecutionNotFoundError), the revision and `ifSnapshot`
   * (StaleRevisionError), the undo positions (`undo_position_invalid`), the lease to take
   * (`execution_busy`). A refused commit writes nothing, takes or releases no lease and announces
   * nothing.
   */
  commit(id: string, expectedRevision: number, commit: Commit, options?: CommitOptions): Promise<number>;
  /** The execution's validated input. */
  readInput(id: string): Promise<unknown>;
  /** Results of the named steps (absent steps are omitted). Without names: every recorded result. */
  readResults(id: string, steps?: readonly string[]): Promise<Map<string, unknown>>;
  /** The undo-stack entry at `position` (0 is the oldest). */
  readUndoEntry(id: string, position: number): Promise<UndoEntry | undefined>;
  /** The whole undo stack, oldest first. */
  readUndoStack(id: string): Promise<UndoEntry[]>;
  /** The execution trace, oldest first. */
  readTrace(id: string): Promise<TraceEntry[]>;

  /**
   * Take (or renew, for the same owner) the execution's liveness lease for
   * `ttlMs`. Returns false when another owner holds it. A process that dies
   * stops renewing, and the lease expires.
   */
  acquireLease(id: string, owner: string, ttlMs: number): Promise<boolean>;
  /**
   * Take (or renew, for the same owner) the lease and read the snapshot, outbox and input, in one
   * atomic step (one round trip on Redis). Unreadable stored data: the lease just taken is
   * released, then DeserializationError is thrown (same checks/messages as load).
   */
  acquireAndLoad(id: string, lease: LeaseRequest): Promise<LeasedLoad>;
  /** Release the lease if `owner` holds it. */
  releaseLease(id: string, owner: string): Promise<void>;
  /** Whether any owner holds the execution's lease. */
  hasLease(id: string): Promise<boolean>;
  /** Record (or forget) that an execution may need recovery: it is running or rolling back. */
  markActive(id: string, active: boolean): Promise<void>;
  /**
   * Up to `limit` executions recorded active, oldest first. With `after` (the `next` of an earlier
   * page), the page continues after the entries already seen, even if some of them were removed
   * since; `next` is undefined once the last entry is listed.
   */
  listActive(limit: number, after?: string): Promise<ActivePage>;

  /** Announce that an execution settled (finished, or handed back to a caller). */
  publishSettled(id: string): Promise<void>;
  /**
   * Wait for the settled notification of `id` (`publishSettled`, or a create or commit with
   * `announce`), from any process sharing the store. `listening` resolves once a notification
   * published from then on reaches this waiter; `settled` resolves `true` on one, `false` after
   * `timeoutMs` or on abort. Callers look at the stored status after `listening` (the
   * notification is a hint, not the truth), so a run that settles between their look and their
   * wait is not missed.
   */
  waitSettled(id: string, timeoutMs: number, signal?: AbortSignal): SettledWait;

  /**
   * Set `key` to `value` unless it holds a value already; returns the value it
   * holds afterwards (the first writer's). Expires after `ttlMs`. Used for
   * first-writer-wins claims (an interrupt's resume, a correlation id).
   */
  claim(key: string, value: string, ttlMs: number): Promise<string>;
  /** The value a claimed key holds, or undefined. */
  readClaim(key: string): Promise<string | undefined>;
  /** Add one to a counter that expires after `ttlMs`; returns the new count. */
  increment(key: string, ttlMs: number): Promise<number>;

  /** Release connections. */
  close(): Promise<void>;
}
