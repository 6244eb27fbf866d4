import type { ExecutionStatus, TraceEntry } from '../../machines/execution-types.js';

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

/**
 * The storage port. Every commit is atomic and fenced: it applies only if the
 * stored revision equals `expectedRevision`, else it throws
 * `StaleRevisionError` and changes nothing.
 */
export interface Store {
  /** Create an execution at revision 1. Throws if the id exists. */
  create(execution: CreateExecution): Promise<number>;
  /** Load the current snapshot and revision, or undefined when unknown. */
  load(id: string): Promise<LoadedExecution | undefined>;
  /** Commit the next snapshot with its writes; returns the new revision. */
  commit(id: string, expectedRevision: number, commit: Commit): Promise<number>;
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
  /** Release the lease if `owner` holds it. */
  releaseLease(id: string, owner: string): Promise<void>;
  /** Whether any owner holds the execution's lease. */
  hasLease(id: string): Promise<boolean>;
  /** Record (or forget) that an execution may need recovery: it is running or rolling back. */
  markActive(id: string, active: boolean): Promise<void>;
  /** Up to `limit` executions recorded active, oldest first. */
  listActive(limit: number): Promise<string[]>;

  /** Announce that an execution settled (finished, or handed back to a caller). */
  publishSettled(id: string): Promise<void>;
  /**
   * Resolve `true` when `publishSettled(id)` is called, `false` after `timeoutMs`
   * (callers re-check the stored status: the notification is a hint, not the truth).
   */
  waitSettled(id: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;

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
