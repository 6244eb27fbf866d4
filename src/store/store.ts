import type { TraceEntry } from '../../machines/execution-types.js';

/** A persisted execution actor: machine version, state value and context. */
export interface PersistedSnapshot {
  readonly machineVersion: number;
  readonly value: unknown;
  readonly context: unknown;
}

/** The snapshot of an execution as loaded, with the revision a commit must name. */
export interface LoadedExecution {
  readonly snapshot: PersistedSnapshot;
  readonly revision: number;
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
  readonly writes: CommitWrites;
  readonly outbox: readonly { readonly type: string; readonly params: unknown }[];
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
}
