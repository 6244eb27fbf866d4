import type { ErrorData } from '../src/internal/error-data.js';
import type { RollbackFailure } from './execution-types.js';

/** Version of the map operation machine; stored with every snapshot of kind `map`. */
export const MAP_MACHINE_VERSION = 1;

/** How a map's elements are advanced: one at a time in the map's call, or by jobs in throws of `batchSize`. */
export type MapMode = 'inline' | 'fanOut';

/** A settled element's outcome, as its report writes it into the map's slot. */
export type ElementOutcome = 'completed' | 'failed' | 'halted' | 'aborted' | 'skipped' | 'cancelled';

/** A rollback actor's outcome for one started element. */
export type RollbackOutcome = 'undone' | 'failed' | 'not_needed' | 'element_in_flight' | 'context_unavailable';

/** How a map operation ended its forward phase. */
export type MapOutcome = 'completed' | 'failed' | 'halted' | 'aborted';

/** Why no further throw is dispatched: an element's failure (atomic), a halt, an abort, or the source's own failure. */
export type MapStopReason = 'failure' | 'halt' | 'abort' | 'source';

/** The first element that stopped the map (first writer of the stats hash's `stop`). */
export interface MapStop {
  readonly kind: 'failed' | 'halted' | 'aborted';
  readonly index: number;
}

/** The reactor an element runs (or the owner's), as stored: an execution resumes on the version it started with. */
export interface ReactorRef {
  readonly reactor: string;
  readonly version: number;
  readonly fingerprint: string;
}

/** One element a throw creates: its resolved input, or why its input was rejected (it then fails before its first step). */
export type ElementSpawn = { readonly index: number; readonly input: unknown } | { readonly index: number; readonly error: ErrorData };

/** What an element knows of its map (the execution machine's `map` context field, version 7). */
export interface ElementMapLink {
  /** The map operation's id. */
  readonly id: string;
  readonly index: number;
  readonly throw: number;
  /** The element is the last position of its throw: its report may land `throw.<k>`. */
  readonly lastOfThrow: boolean;
  readonly fanOut: boolean;
  /** Its failure stops the map (the report's `stops`). */
  readonly atomic: boolean;
  /** Set when the element skipped itself at its start (its map had stopped dispatching): its report says `skipped`. */
  readonly skipped?: true;
}

/** One element actor a map commit creates (id `<map>.<index>`, parent the map, unlisted and detached). */
export interface ElementCreation {
  readonly id: string;
  readonly map: ElementMapLink;
  readonly spawn: ElementSpawn;
}

/** One rollback actor a map commit creates (id `<map>.rb-<position>`, parent the map, unlisted and detached). */
export interface RollbackCreation {
  readonly id: string;
  /** The element it rolls back (`<map>.<index>`). */
  readonly element: string;
  readonly position: number;
  readonly index: number;
  readonly throw: number;
  readonly lastOfThrow: boolean;
  readonly mode: MapMode;
}

/** The rollback in progress (set when its work list is known). */
export interface MapRollback {
  /** The list its positions are read from: every started element, or (with undoAll) only the aborted ones. */
  readonly list: 'started' | 'aborted';
  /** Positions to roll back: the list's length when the rollback started (positions count from its tail). */
  readonly total: number;
  /** Next position to throw. */
  readonly offset: number;
  /** Rollback throws dispatched. */
  readonly throws: number;
  /** First position of the last rollback throw. */
  readonly throwFrom: number;
  readonly undoAllFailure: RollbackFailure | null;
}

/** A stall redispatch in progress: the sweeper found the map waiting with positions unsettled and no report for too long. */
export interface MapRedispatch {
  readonly phase: 'forward' | 'rollback';
  /** Next position to look at (positions `[0, next)` are done). */
  readonly next: number;
  /** Which redispatch of this map this is (1-based): restarted jobs are named by it. */
  readonly round: number;
}

/** The map operation actor's context: constant size; positions and outcomes live in the store. */
export interface MapContext {
  readonly mapId: string;
  /** The execution holding the map step. */
  readonly owner: string;
  readonly ownerPath: readonly string[];
  readonly step: string;
  /** The owner's reactor. */
  readonly reactor: string;
  readonly version: number;
  readonly fingerprint: string;
  readonly element: ReactorRef;
  readonly mode: MapMode;
  /** Stored when the map is created: every throw and every redispatch use it. */
  readonly batchSize: number;
  readonly atomic: boolean;
  readonly undoAll: boolean;
  /** The source's length (array length, `count()`), or null until the pages end. */
  readonly total: number | null;
  /** Next position to dispatch = positions dispatched so far. */
  readonly offset: number;
  /** Throws dispatched. */
  readonly throws: number;
  /** First position of the last throw. */
  readonly throwFrom: number;
  /** The source has no item at `offset`. */
  readonly exhausted: boolean;
  /** Set when dispatch stopped before the source was exhausted. */
  readonly stopped: MapStopReason | null;
  /** The map's own failure (its source), when it has one. */
  readonly failure: ErrorData | null;
  readonly outcome: MapOutcome | null;
  readonly stop: MapStop | null;
  /** The actor this map awaits (inline: its current element or rollback actor), recorded in the store as awaited. */
  readonly awaiting: string | null;
  /** Why it rolls back: the owner compensates the failed map step, or undoes its entry. */
  readonly rollbackReason: 'compensate' | 'undo' | null;
  readonly rollback: MapRollback | null;
  readonly redispatch: MapRedispatch | null;
  /** Redispatches so far (their rounds). */
  readonly redispatches: number;
  /** 0 in the forward phase, 1 once the rollback started: the owner's settle signals are keyed by it. */
  readonly rollbackEpoch: number;
  readonly cancelReason: string | null;
  readonly abortReason: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input that creates a map operation actor (the element template and paged args are the actor's stored input, not its context). */
export type MapInput = Pick<MapContext, 'mapId' | 'owner' | 'step' | 'reactor' | 'version' | 'fingerprint' | 'element' | 'mode' | 'batchSize' | 'atomic' | 'undoAll' | 'total'> & {
  readonly ownerPath?: readonly string[];
  readonly at: number;
};

/** Events the map operation actor accepts. Every event carries the host's clock reading. */
export type MapEvent =
  /** A throw's window was fetched: its elements are created with this transition. */
  | {
      readonly type: 'xreactor.map.thrown';
      readonly at: number;
      readonly throw: number;
      readonly from: number;
      readonly count: number;
      /** The source has no item after this window. */
      readonly exhausted: boolean;
      /** The source's length when the host learnt it (a paged source's count), else null. */
      readonly total: number | null;
      /** One per element, positions `from … from + count - 1` in order; they go into the elements' creations, never into this snapshot. */
      readonly inputs: readonly ElementSpawn[];
    }
  /** The gate was closed when the throw was to be fetched: no further throw. */
  | { readonly type: 'xreactor.map.stop'; readonly at: number; readonly throw: number; readonly stop: MapStop }
  /** Fetching the throw's window failed (`map_source_invalid`): no further throw. */
  | { readonly type: 'xreactor.map.sourceFailed'; readonly at: number; readonly throw: number; readonly error: ErrorData }
  /** The start jobs of the last (rollback) throw are enqueued. */
  | { readonly type: 'xreactor.map.enqueued'; readonly at: number; readonly kind: 'element' | 'rollback'; readonly from: number }
  /** Signal (conditional, dedupe `throw.<k>`): the last position of throw `k` settled. */
  | { readonly type: 'xreactor.map.throwSettled'; readonly at: number; readonly throw: number }
  /** Signal (conditional, dedupe `settled`): every dispatched position settled. */
  | { readonly type: 'xreactor.map.settled'; readonly at: number }
  /** The stats read at the end of the forward phase. */
  | { readonly type: 'xreactor.map.concluded'; readonly at: number; readonly outcome: MapOutcome; readonly stop: MapStop | null }
  /** The rollback's work list: the started list's length and how many elements aborted. */
  | { readonly type: 'xreactor.map.rollbackStarted'; readonly at: number; readonly total: number; readonly aborted: number }
  /** A rollback throw's positions were read (tail-anchored): its rollback actors are created with this transition. */
  | { readonly type: 'xreactor.map.rollbackThrown'; readonly at: number; readonly throw: number; readonly from: number; readonly positions: readonly { readonly position: number; readonly index: number }[] }
  /** Signal (conditional, dedupe `rbthrow.<k>`): the last position of rollback throw `k` reported. */
  | { readonly type: 'xreactor.map.rollbackThrowSettled'; readonly at: number; readonly throw: number }
  /** Signal (conditional, dedupe `rolledback`): every rollback position reported. */
  | { readonly type: 'xreactor.map.rolledBack'; readonly at: number }
  | { readonly type: 'xreactor.map.undoAllFinished'; readonly at: number; readonly failure: Omit<RollbackFailure, 'step' | 'kind'> | null }
  /** From the sweeper: the map waits with unsettled positions and no report for too long. */
  | { readonly type: 'xreactor.map.redispatch'; readonly at: number; readonly phase: 'forward' | 'rollback' }
  /** One redispatch window was scanned: positions `[0, next)` are done. */
  | { readonly type: 'xreactor.map.redispatched'; readonly at: number; readonly next: number }
  /** The owner rolls the map back (compensating the map step, or undoing its entry). */
  | { readonly type: 'xreactor.operator.undo'; readonly at: number; readonly from?: string; readonly reason?: 'compensate' | 'undo' }
  | { readonly type: 'xreactor.operator.cancel'; readonly at: number; readonly reason: string }
  | { readonly type: 'xreactor.execution.abort'; readonly at: number; readonly reason: string };

/** The condition under which the store lands a signal (evaluated in the commit's atomic step, after its map writes). */
export type SignalCondition =
  /** This commit's element report was the first writer of its slot. */
  | 'reportNew'
  /** The target is set and every dispatched position settled. */
  | 'mapSettled'
  /** This commit's rollback report was the first writer of its slot. */
  | 'rollbackReportNew'
  /** The rollback target is set and every rollback position reported. */
  | 'rolledBack';

/** Events the map operation sends: to its owner, and to itself (conditional). */
export type MapSignalEvent =
  | { readonly type: 'xreactor.child.settled'; readonly at: number; readonly child: string; readonly status: MapStatus }
  | Extract<MapEvent, { type: 'xreactor.map.settled' | 'xreactor.map.rolledBack' }>;

/** A signal a map commit carries (`condition`: landed only when the store finds it true). */
export interface MapSignal {
  readonly to: string;
  readonly event: MapSignalEvent;
  readonly dedupeKey: string;
  readonly condition?: SignalCondition;
}

/** Store writes a map transition asks for; committed atomically with the snapshot. */
export type MapWrite =
  /** The stats hash's parameters (with the creating commit). */
  | { readonly type: 'xreactor.write.map.init'; readonly params: { readonly total: number | null; readonly batchSize: number; readonly atomic: boolean; readonly mode: MapMode } }
  /** Dispatch is over: `target` positions were dispatched (the `settled` condition compares with it). */
  | { readonly type: 'xreactor.write.map.target'; readonly params: { readonly target: number } }
  | { readonly type: 'xreactor.write.map.rollbackTarget'; readonly params: { readonly target: number } }
  /** Delete the source list (the forward phase is over). */
  | { readonly type: 'xreactor.write.map.dropSource'; readonly params: Record<string, never> }
  /** Create the throw's elements: unlisted and detached; inline, the one element with this process's lease. */
  | { readonly type: 'xreactor.write.spawnElements'; readonly params: { readonly element: ReactorRef; readonly lease: boolean; readonly elements: readonly ElementCreation[] } }
  /** Create the rollback throw's actors: unlisted and detached; inline, the one actor with this process's lease. */
  | { readonly type: 'xreactor.write.spawnRollbacks'; readonly params: { readonly lease: boolean; readonly actors: readonly RollbackCreation[] } }
  | { readonly type: 'xreactor.write.signal'; readonly params: MapSignal }
  /** The actors this one awaits from this commit on. */
  | { readonly type: 'xreactor.write.awaits'; readonly params: { readonly actors: readonly string[] } };

/** Effects a map transition asks the host to perform after the commit; each one's outcome is the map's next event. */
export type MapEffect =
  /** Read the gate, then fetch positions `[from, from + size)` and build their inputs: `map.thrown`, `map.stop` or `map.sourceFailed`. */
  | { readonly type: 'xreactor.effect.map.throw'; readonly params: { readonly throw: number; readonly from: number; readonly size: number } }
  /** Enqueue the start jobs of the actors the last throw created: `map.enqueued`. */
  | { readonly type: 'xreactor.effect.map.enqueue'; readonly params: { readonly kind: 'element' | 'rollback'; readonly from: number; readonly count: number } }
  /** Restart the lost jobs of positions `[from, from + size)`: `map.redispatched`. */
  | { readonly type: 'xreactor.effect.map.redispatch'; readonly params: { readonly phase: 'forward' | 'rollback'; readonly from: number; readonly size: number; readonly round: number } }
  /** Read the stats: `map.concluded`. */
  | { readonly type: 'xreactor.effect.map.conclude'; readonly params: { readonly target: number } }
  /** Read the work list's length (`LLEN`) and the aborted count: `map.rollbackStarted`. */
  | { readonly type: 'xreactor.effect.map.rollbackStart'; readonly params: { readonly reason: 'compensate' | 'undo'; readonly epoch: number } }
  /** Read positions `[from, from + size)` of `list`, anchored at `total`: `map.rollbackThrown`. */
  | { readonly type: 'xreactor.effect.map.rollbackThrow'; readonly params: { readonly throw: number; readonly from: number; readonly size: number; readonly total: number; readonly list: 'started' | 'aborted' } }
  /** Call the map's undoAll with its completed elements (not when none completed): `map.undoAllFinished`. */
  | { readonly type: 'xreactor.effect.map.undoAll'; readonly params: Record<string, never> }
  /** Advance the awaited actor in this call when nothing else does, then look at the inbox. */
  | { readonly type: 'xreactor.effect.awaitChild'; readonly params: { readonly child: string } }
  | { readonly type: 'xreactor.effect.finished'; readonly params: { readonly status: MapStatus } };

/** The map operation's stored status (what `Commit.status` and the owner read). */
export type MapStatus = 'running' | 'rolling_back' | 'completed' | 'failed' | 'halted' | 'aborted' | 'cancelled';
