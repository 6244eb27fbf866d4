import type { RollbackFailure, TraceEntry } from '../../machines/execution-types.js';
import type { ActorStatus } from '../../machines/registry-types.js';
import { ExecutionNotFoundError, MapGateClosedError, StaleRevisionError, XreactorError } from '../errors/index.js';

/** A persisted actor: its kind, machine version, state value and context. */
export interface PersistedSnapshot {
  /**
   * The actor's kind (`'execution'`, later `'map'`, ...): the envelope's kind, and the key of the
   * machine registry. Every adapter stores and returns it.
   */
  readonly kind: string;
  readonly machineVersion: number;
  readonly value: unknown;
  readonly context: unknown;
}

/** An effect as committed in a snapshot's outbox. */
export interface OutboxEffect {
  readonly type: string;
  readonly params: unknown;
}

/** A signal's event: plain data, delivered to the recipient's machine as an event. */
export interface SignalEvent {
  readonly type: string;
  readonly [key: string]: unknown;
}

/**
 * A signal to an actor: it lands in the recipient's inbox at most once per `dedupeKey` (a second
 * signal with a key the recipient has seen lands nowhere), and the recipient applies it through a
 * transition. Signals carried by a commit land atomically with it and must be addressed to actors
 * of the sender's root (same hash slot; otherwise the commit is refused, see
 * {@link signalCrossRootError}); a signal to an actor that does not exist lands nowhere. Landing
 * does not change the recipient's revision: it raises the recipient's inbox seq, which fences the
 * recipient's next commit ({@link Commit.inboxSeen}).
 */
export interface Signal {
  /** The recipient actor's id. */
  readonly to: string;
  readonly event: SignalEvent;
  /** At most one entry per recipient and key, ever (within the recipient's retention). */
  readonly dedupeKey: string;
  /**
   * Also deliver the signal, with the same dedupe key, to every actor the recipient awaits
   * (`Commit.awaits`), and to the actors those await, transitively. How `cancel` fences a tree.
   * The walk is breadth-first in the order each actor named its awaits, visits each actor once
   * (cycles end), follows the awaits of a recipient that had seen the key already (dedupe is per
   * recipient), skips actors that do not exist, and stops {@link MAX_CASCADE_DEPTH} levels below
   * the recipient (an actor deeper than that is not reached).
   */
  readonly cascade?: boolean;
  /**
   * Land only if the condition holds after the commit's writes ({@link SignalCondition}); a
   * signal whose condition does not hold lands nowhere and leaves its dedupe key unseen. Only in
   * a commit (not `Store.signal`), never with `cascade`; `reportNew` and `rollbackReportNew` only
   * in a commit with that report. The keys of those that landed are what
   * `CommitOptions.landedSignals` lists.
   */
  readonly condition?: SignalCondition;
}

/** An unconsumed signal in an actor's inbox. */
export interface InboxEntry {
  /** Position in the actor's inbox: 1, 2, 3, ... in landing order, never reused. */
  readonly seq: number;
  readonly event: SignalEvent;
  readonly dedupeKey: string;
}

/** A signal of a commit that landed: the actor it landed on, and the entry as that actor's inbox holds it. */
export interface DeliveredSignal {
  readonly to: string;
  readonly entry: InboxEntry;
}

/** An actor's inbox: its unconsumed entries, oldest first, and the highest seq ever assigned (0: none). */
export interface Inbox {
  readonly entries: readonly InboxEntry[];
  readonly seq: number;
}

/** The snapshot of an execution as loaded, with the revision a commit must name and its outbox. */
export interface LoadedExecution {
  readonly snapshot: PersistedSnapshot;
  readonly revision: number;
  /** The effects the last commit asked for: the pending work a recovering host performs again. */
  readonly outbox: readonly OutboxEffect[];
  /**
   * The actor's inbox at the same instant. A commit computed from this load names `inbox.seq` as
   * its `inboxSeen`. (Adapters read it in the same round trip as the snapshot.)
   */
  readonly inbox: Inbox;
}

/** An actor as `load` reads it, with two flags read at the same instant. */
export interface LoadedActor extends LoadedExecution {
  /** A lease on it was live (a sweep, a rollback's resolve). */
  readonly leased: boolean;
  /** It is marked unreadable (`markUnreadable`; its record is `readUnreadable`'s). */
  readonly marked: boolean;
  /**
   * The results `LoadOptions.results` asked for, read at the same instant, when the stored status
   * is `completed` (the steps that have none are absent); undefined when none were read, or one
   * of them cannot be decoded (`readResults` then reports it).
   */
  readonly results?: ReadonlyMap<string, unknown>;
}

/** Options of `Store.load`. */
export interface LoadOptions {
  /**
   * Also read these steps' results (`'all'`: every step's) in the same atomic read, when the
   * stored status is `completed`: a settled run's outcome in one round trip (`awaitResult`).
   */
  readonly results?: readonly string[] | 'all';
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
  /**
   * Map writes ({@link MapWrites}), applied in the same atomic step after the commit's own writes
   * and its spawned actors, before its signals (whose conditions read them).
   */
  readonly map?: MapWrites;
}

/** How an element of a map ended, as its report records it. */
export type ElementOutcome = 'completed' | 'failed' | 'halted' | 'aborted' | 'skipped' | 'cancelled';

/** How the rollback of one started element ended, as its rollback report records it. */
export type RollbackOutcome = 'undone' | 'failed' | 'not_needed' | 'element_in_flight' | 'context_unavailable';

/**
 * The writes of a map operation and of the actors working for it, applied in the same atomic
 * step as the commit that carries them (see `docs/redis-keys.md`, map keys). `init`, `source`,
 * `target`, `rollbackTarget` and `dropSource` are the map's own (the commit's actor is the map);
 * `started`, `report` and `rollbackReport` name the map they write to (an element's, a rollback
 * actor's), which must be of the committing actor's root. A write naming a map whose stats do not
 * exist (never initialised, or expired) is ignored: nothing is created.
 */
export interface MapWrites {
  /** Create the map's stats (its parameters, zero counters); leftovers of an expired map under the id are cleared. */
  readonly init?: { readonly total: number | null; readonly batchSize: number; readonly atomic: boolean; readonly mode: 'inline' | 'fanOut' };
  /** Append the items of an array source (read back a window at a time with `readMapSource`). */
  readonly source?: readonly unknown[];
  /**
   * Element `index` started: appended to the map's started list (the rollback's work list),
   * counted. `gate`: only while the map dispatches (its stored status is `running` and no report
   * stopped it); otherwise the whole commit is refused, nothing written, with
   * {@link MapGateClosedError} (a fan-out element's start: it then skips itself).
   */
  readonly started?: { readonly map: string; readonly index: number; readonly gate?: boolean };
  /**
   * Element `index` settled forward with `outcome`. First writer wins: only the first report of
   * an index is recorded and counted (`settled`, the outcome's counter, `lastReportAt` = `at`);
   * with `stops` it closes the map's gate (`stop` = `<outcome>:<index>`, the first one kept;
   * outcome `failed`, `halted` or `aborted`); an `aborted` one is appended to the aborted list.
   * Whether it was the first is what a `reportNew` signal of the same commit lands on.
   */
  readonly report?: { readonly map: string; readonly index: number; readonly outcome: ElementOutcome; readonly stops: boolean; readonly at: number };
  /** How many positions were dispatched (no further one will be): `mapSettled` signals land once `settled` reaches it. */
  readonly target?: { readonly target: number };
  /** How many started elements the rollback covers: `rolledBack` signals land once `rb.settled` reaches it. */
  readonly rollbackTarget?: { readonly target: number };
  /**
   * The rollback of the element at started-list `position` ended with `outcome`. First writer
   * wins, as for `report` (`rb.settled` and the outcome's counter); `failures` are appended to the
   * map's rollback failures. Whether it was the first is what a `rollbackReportNew` signal of the
   * same commit lands on.
   */
  readonly rollbackReport?: { readonly map: string; readonly position: number; readonly outcome: RollbackOutcome; readonly failures: readonly RollbackFailure[] };
  /**
   * The start payloads of the fan-out positions `[from, from + starts.length)` of a throw: opaque
   * bytes (what each position's start job carries, docs/design/map.md §19), kept in the map's
   * bucketed start hashes until its forward phase ends (`dropSource`), for a start job enqueued
   * again after a crash or a stall to carry them too. Read back with `readMapStarts`.
   */
  readonly starts?: { readonly from: number; readonly starts: readonly Uint8Array[] };
  /** Delete the array source and the start payloads (the map's forward phase ended). */
  readonly dropSource?: true;
}

/**
 * When a conditional signal ({@link Signal.condition}) lands, decided where the writes land, after
 * every write of the step:
 * - `reportNew`: this commit's `report` was the first of its index;
 * - `mapSettled`: the recipient map has a `target` and `settled` equals it;
 * - `rollbackReportNew`: this commit's `rollbackReport` was the first of its position;
 * - `rolledBack`: the recipient map has a `rollbackTarget` and `rb.settled` equals it.
 */
export type SignalCondition = 'reportNew' | 'mapSettled' | 'rollbackReportNew' | 'rolledBack';

/** A commit: the next snapshot, its writes, and the effects it asked for (the outbox). */
export interface Commit {
  readonly snapshot: PersistedSnapshot;
  /** The lifecycle status the snapshot is in (indexed by stores for listing and recovery; each kind maps its states onto these). */
  readonly status: ActorStatus;
  readonly writes: CommitWrites;
  readonly outbox: readonly OutboxEffect[];
  /**
   * The inbox seq this commit was computed with (the `inbox.seq` of the load, or of the last
   * `readInbox`). The commit is refused with InboxPendingError, writing nothing, when the actor's
   * stored inbox seq is higher: a signal landed that the actor has not seen. Default 0 (refused
   * once any signal has landed). Ignored by `create` (a new actor has no inbox).
   */
  readonly inboxSeen?: number;
  /**
   * Inbox entries (by seq) this commit applied: removed from the inbox with it (a seq no longer in
   * the inbox is ignored). Their dedupe keys stay recorded: the same signal never lands again.
   * Entries seen (seq <= `inboxSeen`) but not consumed stay in the inbox and do not fence later
   * commits. Ignored by `create` and by spawned actors (a new actor has no inbox).
   */
  readonly consumed?: readonly number[];
  /**
   * The commit was computed ahead of the signal it applies, before that signal's commit was
   * answered (the kernel sends it right behind the sender's commit, in the same store call where
   * it can): the signal's dedupe key. Applies only if that signal landed in this actor's inbox
   * under seq `inboxSeen` (which the commit names in `consumed`); otherwise nothing is written and
   * commit throws SignalNotLandedError. With the inbox rule above, the signal is then the last
   * entry that landed: the commit applies exactly the state its sender's commit left.
   */
  readonly signalAhead?: string;
  /**
   * Signals landing in actors' inboxes atomically with this commit (same root only: a recipient
   * of another root refuses the whole commit before anything is written, with
   * {@link signalCrossRootError}). They land after the commit's own writes and after the actors
   * of `spawn` are created (so a signal to an actor spawned by the same commit lands), in order:
   * this commit's signals, then each spawned actor's, depth first. A signal to this actor itself
   * lands in its own inbox (its next commit must have seen it).
   */
  readonly signals?: readonly Signal[];
  /**
   * The actors this actor awaits from this commit on (cascading signals follow them, in this
   * order; a repeated id counts once); replaces the stored list. Undefined: unchanged. `[]`: it
   * awaits nothing. Same root only ({@link signalCrossRootError}).
   */
  readonly awaits?: readonly string[];
  /**
   * Actors created atomically with this commit (same root only), each with its first commit and,
   * optionally, its lease. Each records this actor as its parent (and, unless spawned with
   * `retainWithParent: false`, this actor records it as a child): their keys share one retention
   * (see the adapters). Each is recorded in the active index unless spawned with `listed: false`
   * ({@link SpawnActor.listed}). Refused as a whole, writing
   * nothing, with the `execution_exists` error `create` throws ({@link executionExistsError})
   * when one of the ids exists (or is named twice, or is the committing actor's); with
   * `execution_busy` when another owner holds the lease a spawned actor is to take; with
   * `undo_position_invalid` for a gap in a spawned actor's undo pushes. These checks run after
   * the committing actor's own (exists, revision, ifSnapshot, inbox, undo positions, lease), for
   * each spawned actor in order: exists, lease, undo positions (as in `create`). A spawned
   * actor's commit may carry `signals`, `awaits` and `spawn` of its own (they apply as here);
   * its `inboxSeen` and `consumed` are ignored. `create` accepts `signals`, `awaits` and `spawn`
   * the same way.
   */
  readonly spawn?: readonly SpawnActor[];
}

/**
 * How many levels a cascading signal descends below its recipient ({@link Signal.cascade}), and
 * how far retention re-stamping follows parents and children. Deeper actors are not reached.
 */
export const MAX_CASCADE_DEPTH = 64;

/** An actor created by another's commit ({@link Commit.spawn}). */
export interface SpawnActor extends CreateExecution {
  /** Take the new actor's lease for this owner in the same atomic step. */
  readonly lease?: LeaseRequest;
  /**
   * The new actor's kind: the kind its first commit's snapshot names (a commit naming another one
   * is refused, `spawn_kind_mismatch`, before anything is written).
   * @defaultValue the snapshot's kind
   */
  readonly kind?: string;
  /**
   * Record the new actor in the active index (as `markActive(id, true)`), so the sweeper recovers
   * it should no process advance it. `false`: not listed by its creation; the actor lists itself
   * when it starts work (a queued element, a rollback actor that has not run yet). The memory
   * store lists it in the commit's atomic step; the Redis store, whose index lives in another
   * cluster slot, right before its script and again after it lands (an entry for an actor a
   * refused commit never created is dropped by the sweeper).
   * @defaultValue true
   */
  readonly listed?: boolean;
  /**
   * Share the spawning actor's retention: recorded in its `children` (a re-stamp of the spawning
   * actor re-stamps this one's keys), and this one's re-stamp climbs to the spawning actor and its
   * ancestors. `false` (an element of a map, a rollback actor): neither; the actor keeps its own
   * retention from its own commits. Its `parent` is recorded either way.
   * @defaultValue true
   */
  readonly retainWithParent?: boolean;
}

/** A map's gate ({@link Store.readMapGate}). */
export interface MapGate {
  /** The map actor's stored status; undefined when it does not exist. */
  readonly status: string | undefined;
  /** `<outcome>:<index>` of the first report that stopped it (`failed:2`); undefined while none has. */
  readonly stop: string | undefined;
}

/** A map's stats ({@link Store.readMapStats}). */
export interface MapStats {
  readonly total: number | null;
  readonly batchSize: number;
  readonly atomic: boolean;
  readonly mode: 'inline' | 'fanOut';
  /** Positions dispatched, once no further one will be; null until then. */
  readonly target: number | null;
  /** Elements started (the started list's length). */
  readonly started: number;
  /** Elements reported (counted once each), and by outcome. */
  readonly settled: number;
  readonly completed: number;
  readonly failed: number;
  readonly halted: number;
  readonly aborted: number;
  readonly skipped: number;
  readonly cancelled: number;
  /** The first report that stopped the map. */
  readonly stop: { readonly kind: 'failed' | 'halted' | 'aborted'; readonly index: number } | null;
  /** The `at` of the last report counted; null before the first. */
  readonly lastReportAt: number | null;
  readonly rollback: {
    /** Started elements the rollback covers; null before it started. */
    readonly target: number | null;
    readonly settled: number;
    readonly undone: number;
    readonly failed: number;
    readonly notNeeded: number;
    readonly inFlight: number;
    readonly unavailable: number;
  };
}

/** One element of a map page ({@link Store.readMapPage}). */
export interface MapPageEntry {
  readonly index: number;
  /** Its outcome; undefined while it has not reported; `skipped` at or past the map's target. */
  readonly outcome: ElementOutcome | undefined;
  /** A completed element's result: the `returns` step's, or a Map of every result by step (undefined when the element is gone). */
  readonly result?: unknown;
  /** A failed or halted element's stored snapshot (undefined when the element is gone). */
  readonly snapshot?: PersistedSnapshot;
}

/** What `Store.signal` did. */
export interface SignalReceipt {
  /** The actors whose inbox the signal landed in, in delivery order (the recipient first; empty: a duplicate everywhere, or no such actor). */
  readonly landed: readonly string[];
  /** With `refuseIn`: the first actor found in one of those statuses; nothing landed anywhere. */
  readonly refusedBy?: { readonly id: string; readonly status: string };
}

/**
 * What was wrong with an actor's stored data, as {@link Store.markUnreadable} records it beside
 * the data (the code and message of the DeserializationError that met it).
 */
export interface UnreadableRecord {
  /** The error's stable code (`deserialization_failed`). */
  readonly code: string;
  /** What was wrong, which actor, and what to do. */
  readonly message: string;
}

/**
 * What {@link Store.markUnreadable} did: `marked` (recorded now), `already` (recorded before;
 * nothing changed), `missing` (no such actor; nothing written), `foreign` (the actor's key holds
 * a value of another type, so nothing could be recorded in it; only removed from the active index).
 */
export type UnreadableMark = 'marked' | 'already' | 'missing' | 'foreign';

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
  /**
   * Called once the commit is on its way (queued on the store's connection, or applied where the
   * store applies at once), refused or not: a commit sent from here reaches the store after this
   * one, in the same group call where the store groups commits. How the kernel sends a
   * recipient's commit right behind the commit carrying its signal (`Commit.signalAhead`).
   */
  readonly sending?: () => void;
  /** Release the execution's lease if this owner holds it (no-op when free or held by another owner). */
  readonly releaseLease?: string;
  /** After applying the commit, publish the settled notification (a `waitSettled(id)` waiter wakes, as on `publishSettled(id)`). */
  readonly announce?: boolean;
  /**
   * With `announce`: the notification carries the committed state and these steps' results (a
   * completed run's returned step; none for a run that failed, halted or was cancelled), so that a
   * waiter reads nothing ({@link SettledWait.notice}). Unset: it carries no state. A store whose
   * notifications carry nothing ignores it (the memory store; Redis on a Cluster, where a
   * PUBLISH reaches every node).
   */
  readonly announceResults?: readonly string[];
  /**
   * Take (or renew, for the same owner) the execution's lease in the same atomic step, once every
   * other check has passed. If ANOTHER owner holds it, nothing is written and commit throws the
   * XreactorError `execution_busy` (retryable) that `create` throws ({@link executionBusyError}).
   * For a worker's first commit of a handed-off run, made without reading the store first.
   * With `releaseLease` naming the same owner, the lease is taken, then released.
   */
  readonly takeLease?: LeaseRequest;
  /**
   * Filled with the dedupe keys of the commit's conditional signals ({@link Signal.condition})
   * that landed, at any depth of its spawned actors, in delivery order (a key that did not land,
   * its condition false or its key seen already, is not listed). The commit's own receipt: a
   * wake that depends on a landing (`ifLanded`) is performed only when its key is here.
   */
  readonly landedSignals?: string[];
  /**
   * Filled with each landing of the commit's own signals (not its spawned actors'; a cascade's on
   * every actor it reached), in delivery order, with the entry as the recipient's inbox now holds
   * it. A process advancing the recipient in the same call hands it the entry instead of reading
   * its inbox again (when the entry's seq follows the last one the recipient has seen).
   */
  readonly delivered?: DeliveredSignal[];
  /**
   * Actors to record in the active index (`markActiveMany`) with this commit: listed no later than
   * the commit lands (should the process die right after it), and still listed once it has (a
   * sweep may have dropped an entry meanwhile). In the same atomic step where the store can (the
   * memory store, a standalone Redis), else just before and after the commit (a Redis Cluster:
   * the index is in another slot). Nothing is listed for a refused commit where it is atomic.
   */
  readonly list?: readonly string[];
  /** Remove the committing actor from the active index with this commit (it settled), as `markActive(id, false)`. */
  readonly unlist?: boolean;
  /**
   * When the actor's keys were last given their retention, if the caller knows it from another
   * process (a hand-off's or a start job's carried state: its creating commit): a store that
   * re-stamps retention at most once per window and process counts the window from there, so a
   * first commit in a new process does not re-stamp keys that were just created.
   */
  readonly stampedAt?: number;
  /**
   * Apply only if the stored snapshot is byte-for-byte these bytes (the envelope bytes
   * `encodeSnapshot` in `snapshot-codec.ts` produces, which every adapter stores); otherwise
   * nothing is written and commit throws StaleRevisionError (naming the stored revision).
   * Checked together with the revision fence, before the undo positions and the lease.
   */
  readonly ifSnapshot?: Uint8Array;
  /**
   * The commit creates the actor (`expectedRevision` 0): it must not exist (StaleRevisionError
   * naming its revision otherwise: a duplicate start); it is created at revision 1 with this
   * reactor name, input and parent (recorded, not retaining it: its retention is its own), the
   * commit its first, every key given its retention and leftovers of an expired actor under the
   * id cleared, as {@link Store.create} does. Unlike a create it is
   * fenced and batched as a commit is: a gated map start, the lease to take, listing. A fan-out
   * element's start creates its element this way (docs/design/map.md §19). Not with `ifSnapshot`.
   */
  readonly create?: { readonly reactor: string; readonly input: unknown; readonly parent?: string };
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
  /**
   * Record the execution in the active index (`markActive`) with the create: in its atomic step on
   * the memory store and a standalone Redis; beside it on a Cluster, where the index lives in
   * another slot (an entry whose execution was never created is dropped by the sweeper).
   */
  readonly list?: boolean;
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
  /** `true` on the notification; `false` after the timeout, on abort, on `stop()`, or when the store closes. */
  readonly settled: Promise<boolean>;
  /**
   * End the wait now (`settled` resolves false, unless it has resolved already): no abort signal
   * needed to give a wait up. Optional for stores written before it: without it, a wait the
   * runtime no longer needs runs to its timeout.
   */
  stop?(): void;
  /**
   * After `settled` resolved true: what the notification carried of the actor, when the store's
   * notifications carry state (Redis: the settling commit's snapshot and the results it was asked
   * to announce, `CommitOptions.announceResults`); undefined when it carried none (then the
   * waiter loads the actor). Optional: a store without it is always loaded from.
   */
  notice?(): SettledNotice | undefined;
}

/** The state a settle notification carried: the snapshot its commit wrote, at `revision`, and the results it announced (the steps that have none are absent). */
export interface SettledNotice {
  readonly snapshot: PersistedSnapshot;
  readonly revision: number;
  readonly results: ReadonlyMap<string, unknown>;
}

/** Options of `acquireAndLoad`. */
export interface AcquireAndLoadOptions {
  /**
   * Read the undo stack's top entry in the same step (`LeasedLoad.undoTop`): what a rollback of
   * the execution undoes first, for a caller about to roll it back (a map's element rollback).
   */
  readonly undoTop?: boolean;
  /**
   * The id of an actor of the same root (the one asking, not created yet) whose existence makes
   * the call take and read nothing (`{ status: 'exists' }`): a duplicate start job of that actor
   * learns it was created without taking the lease of the actor it would have worked on.
   */
  readonly unlessExists?: string;
}

/** What `acquireAndLoad` found. */
export type LeasedLoad =
  | {
      readonly status: 'leased';
      readonly execution: LoadedExecution;
      readonly input: unknown;
      /** With `undoTop`, a stack that is not empty: its last entry and that entry's position (the stack's length − 1). */
      readonly undoTop?: { readonly position: number; readonly entry: UndoEntry };
    }
  | { readonly status: 'busy' } // another owner holds the lease; nothing taken
  | { readonly status: 'missing' } // no such execution; no lease taken
  | { readonly status: 'exists' }; // the actor named by `unlessExists` exists; nothing taken nor read

/**
 * Whether `error` is one of `Store.commit`'s refusals, having written nothing (a fence: revision,
 * snapshot, inbox, the signal a commit was computed ahead of; the lease; the undo positions; a
 * spawn; a map's gate or rules; the commit's own rules), as opposed to a failure whose outcome is
 * unknown (a timeout, a lost connection, a reply the adapter cannot read).
 */
export function isCommitRefusal(error: unknown): boolean {
  if (error instanceof StaleRevisionError || error instanceof MapGateClosedError || error instanceof ExecutionNotFoundError) return true;
  return error instanceof XreactorError && COMMIT_REFUSAL_CODES.has(error.code);
}

/** The codes of `Store.commit`'s other refusals (those without a class of their own). */
const COMMIT_REFUSAL_CODES: ReadonlySet<string> = new Set(['execution_busy', 'execution_exists', 'undo_position_invalid', 'signal_cross_root', 'inbox_seq_invalid', 'commit_create_invalid', 'spawn_kind_mismatch', 'map_write_invalid', 'signal_condition_invalid']);

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
 * The error `create` throws for an id that exists, and `commit` for an actor of its `spawn` that
 * exists (code `execution_exists`). Every adapter throws this one.
 */
export function executionExistsError(id: string): XreactorError {
  return new XreactorError('execution_exists', `execution ${id} already exists; execution ids must be unique`);
}

/**
 * The error a commit (or create) throws, before writing anything, when a signal, an awaited actor,
 * a spawned actor or a map written to is of another root than the committing actor (code `signal_cross_root`):
 * only actors of one root share a hash slot, so only they can be written atomically together.
 * A signal to another root is performed after the commit, as a job calling `Store.signal`.
 */
export function signalCrossRootError(from: string, to: string, what: 'signal' | 'await' | 'spawn' | 'report to'): XreactorError {
  return new XreactorError(
    'signal_cross_root',
    `actor ${from} cannot ${what} actor ${to} in its commit: ${to} belongs to another root, so nothing was written. ` +
      'Cross-root signals go through a job: commit an outbox effect whose job calls Store.signal, and keep awaits and spawns within the root',
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
   * Whether other processes reach the same executions (a Redis store). A runtime refuses such a
   * store with its default in-process queue: background hand-offs would silently run in the
   * caller's process.
   * @defaultValue false (undefined): only this process sees them (the memory store)
   */
  readonly shared?: boolean;
  /**
   * Create an execution at revision 1. Throws XreactorError `execution_exists` if the id exists.
   * With `options.lease`, takes the lease in the same atomic step (throws `execution_busy`, writing
   * nothing, when another owner holds it); with `options.announce`, publishes the settled
   * notification after the write. A refused create neither takes the lease nor announces.
   * The first commit's `awaits`, `spawn` and `signals` apply as in `commit` (same root only); its
   * `inboxSeen` and `consumed` are ignored. Checks: the roots, the id, the lease, the undo
   * positions, then the spawned actors.
   */
  create(execution: CreateExecution, options?: CreateOptions): Promise<number>;
  /**
   * Load the current snapshot, revision, outbox and inbox, whether any owner holds its lease and
   * whether it is marked unreadable (in one atomic read), or undefined when unknown. With
   * `options.results`, also the results of a completed execution (`LoadedActor.results`).
   */
  load(id: string, options?: LoadOptions): Promise<LoadedActor | undefined>;
  /**
   * Commit the next snapshot with its writes; returns the new revision. `options` take or release
   * the lease and announce the settle in the same atomic step. Checks, all before the first write:
   * every signal, awaited and spawned actor is of this actor's root (`signal_cross_root`), the
   * execution exists (ExecutionNotFoundError), the revision and `ifSnapshot`
   * (StaleRevisionError), the inbox (InboxPendingError, when a signal landed after
   * `commit.inboxSeen`; SignalNotLandedError, when the `commit.signalAhead` it applies did not land
   * under that seq), the undo positions (`undo_position_invalid`), the lease to take
   * (`execution_busy`), then the spawned actors (see {@link Commit.spawn}). A refused commit writes
   * nothing, delivers no signal, spawns nothing, takes or releases no lease and announces nothing.
   */
  commit(id: string, expectedRevision: number, commit: Commit, options?: CommitOptions): Promise<number>;
  /** The execution's validated input. */
  readInput(id: string): Promise<unknown>;
  /** The actor's inbox now (empty entries and seq 0 for an unknown actor). */
  readInbox(id: string): Promise<Inbox>;
  /**
   * Deliver a signal from outside any commit (an operator's cancel, undo or continue; a signal
   * crossing roots, performed as a job), in one atomic step. With `cascade`, to the recipient and
   * every actor it awaits, transitively ({@link Signal.cascade}), with dedupe per recipient. With
   * `refuseIn`, nothing lands if the recipient (or, with `cascade`, any existing actor reached,
   * whether or not it had seen the key) has one of those stored statuses; the receipt names the
   * first such actor in delivery order. An unknown recipient: nothing lands, `landed` is empty.
   */
  signal(signal: Signal, options?: { readonly refuseIn?: readonly string[] }): Promise<SignalReceipt>;
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
   * atomic step (one round trip on Redis); with `undoTop`, the undo stack's top entry too.
   * Unreadable stored data: the lease just taken is released, then DeserializationError is thrown
   * (same checks/messages as load).
   */
  acquireAndLoad(id: string, lease: LeaseRequest, options?: AcquireAndLoadOptions): Promise<LeasedLoad>;
  /** Release the lease if `owner` holds it. */
  releaseLease(id: string, owner: string): Promise<void>;
  /** Whether any owner holds the execution's lease. */
  hasLease(id: string): Promise<boolean>;
  /** Record (or forget) that an execution may need recovery: it is running or rolling back. */
  markActive(id: string, active: boolean): Promise<void>;
  /**
   * `markActive` of several actors in one step (one round trip on Redis): each id is recorded (in
   * the order given, keeping the first time of one recorded already) or forgotten. An empty list
   * does nothing.
   */
  markActiveMany(ids: readonly string[], active: boolean): Promise<void>;

  /** A map's gate, read by an element before it starts: the map actor's stored status, and the stop its reports recorded (`<outcome>:<index>`), if any. */
  readMapGate(map: string): Promise<MapGate>;
  /** A map's stats (parameters and counters), or undefined when it has none (never initialised, or expired). */
  readMapStats(map: string): Promise<MapStats | undefined>;
  /** Items `[from, from + count)` of a map's array source (fewer at its end; none once dropped). */
  readMapSource(map: string, from: number, count: number): Promise<unknown[]>;
  /** The start payloads of positions `[from, from + count)` of a map (`MapWrites.starts`), one per position, undefined where none is kept. */
  readMapStarts(map: string, from: number, count: number): Promise<(Uint8Array | undefined)[]>;
  /**
   * Element indexes of a map's started list by position from the tail, anchored at `total` (the
   * list's length when the rollback started: position p is entry `total - 1 - p`, whatever was
   * appended since): positions `[fromPosition, fromPosition + count)` within `[0, total)`, in
   * position order (newest-started first). `list: 'aborted'` reads the aborted list (elements
   * that reported `aborted`) the same way: a rollback with `undoAll` replays only those.
   */
  readMapStarted(map: string, total: number, fromPosition: number, count: number, list?: 'started' | 'aborted'): Promise<number[]>;
  /**
   * Elements `[from, from + count)` of a map by index, with their outcomes; each completed
   * element's result (that of step `returns`, or with `returns` null every result by step), each
   * failed or halted element's stored snapshot (its error or halt reason). Positions at or past the
   * map's `target` are `skipped` (never dispatched); a position not reported yet has no outcome.
   * In one atomic read.
   */
  readMapPage(map: string, from: number, count: number, returns: string | null): Promise<MapPageEntry[]>;
  /** Every rollback failure a map's rollback reports recorded, in the order they were reported. */
  readRollbackFailures(map: string): Promise<RollbackFailure[]>;
  /**
   * Record that the actor's stored data cannot be read by any build (truncated, foreign, of the
   * wrong shape: a DeserializationError that is not retryable), so that it is failed in the store.
   * In one atomic step on the actor's keys: its stored status becomes `failed`, `error` is recorded
   * beside the data ({@link readUnreadable}), and its revision goes up by one (when it is a whole
   * number), so a commit computed before is refused as stale. Then it is removed from the active
   * index, as `markActive(id, false)` does. The snapshot, outbox, input, results, undo stack,
   * trace and inbox are kept byte for byte, for an operator to inspect. Idempotent: once
   * recorded, another call changes nothing (`already`; the first error is kept) but the removal
   * from the index. An unknown id (or one whose retention expired) is not created: `missing`,
   * nothing written. A retryable DeserializationError (a kind or version another build knows)
   * is not unreadable data: do not mark it.
   */
  markUnreadable(id: string, error: UnreadableRecord): Promise<UnreadableMark>;
  /**
   * The record {@link markUnreadable} left for the actor; undefined when it was never marked (or
   * does not exist).
   * @throws DeserializationError when the record itself cannot be read.
   */
  readUnreadable(id: string): Promise<UnreadableRecord | undefined>;
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
