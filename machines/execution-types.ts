import type { RetryPolicy } from '../src/definition/retry.js';
import type { ErrorData } from '../src/internal/error-data.js';
import type { ElementMapLink, MapEvent } from './map-types.js';

/**
 * Version of the execution machine. Version 9 added async units (the `unit.*` events, the
 * `awaiting` record of kind `unit`, `origin.async`). Version 10 has the same states and events
 * and a context of 16 keys instead of 20 (`interrupts` groups the pause bookkeeping,
 * `ending.undoBy` the undo's asker; see {@link ExecutionContext}): every execution is stored as
 * version 10. A build before 10 does not read it: it leaves such an execution untouched and its
 * jobs are retried until a build of version 10 takes them (a rolling deploy).
 */
export const EXECUTION_MACHINE_VERSION = 10;

/** Execution machine versions this build reads: a version 6 to 9 snapshot resumes on version 10 (every state of 6 is one of 7; 7, 8, 9 and 10 have the same states, 9 and 10 only add transitions; the context is brought to 10's shape as it is read, `upgradeExecutionContext`). */
export const EXECUTION_MACHINE_READABLE = [6, 7, 8, 9, 10] as const;

/** What the machine knows of an interrupt step. */
export interface InterruptView {
  /** Interrupts ready together with this one (consecutive in the plan, dependencies all before it), itself first. */
  readonly group: readonly string[];
  /** Milliseconds the pause may last, or null. */
  readonly timeoutMs: number | null;
}

/** What the execution machine needs to know of a reactor: its steps in execution order. */
export interface ExecutionPlanView {
  readonly reactor: string;
  /** The reactor's version (`defineReactor({ version })`): an execution resumes on the version it started with. */
  readonly version?: number;
  /** The plan's fingerprint: a build whose plan differs refuses to resume the execution. */
  readonly fingerprint?: string;
  readonly steps: readonly {
    readonly name: string;
    readonly retry: RetryPolicy;
    readonly tracked: boolean;
    /** Present for an interrupt step: the run pauses there until it is continued. */
    readonly interrupt?: InterruptView;
    /** `map` for a map step: its actor is a map operation, and its undo-stack entry carries no arguments and no result. */
    readonly child?: 'map';
    /** An async unit's step: `unit` (an asyncStep, an actor of kind `unit`) or `execution` (an asyncReactor's child). Never tracked. */
    readonly async?: 'unit' | 'execution';
  }[];
  /** Plan index at which a background reactor hands the run to a worker; null: never. */
  readonly handoffIndex: number | null;
  /** The step whose result is the run's value; null or absent: the record of every result. */
  readonly returns?: string | null;
}

/** Why a compensate / undo did not complete. */
export type RollbackFailureReason = 'returned_failure' | 'raised';

/** A compensate or undo that did not complete; the rollback went on. */
export interface RollbackFailure {
  readonly step: string;
  /** Compose steps leading to the step, when it ran in a composed child (`['payment']`). */
  readonly path?: readonly string[];
  readonly kind: 'compensate' | 'undo' | 'undo_all';
  readonly reason: RollbackFailureReason;
  readonly error: ErrorData;
  /** The map step and element index the failure belongs to (a map element's undo). */
  readonly map?: { readonly step: string; readonly index: number };
}

/** The step failure that started a rollback. */
export interface FailureRecord {
  readonly step: string;
  readonly index: number;
  readonly error: ErrorData;
  /** The failing step's resolved arguments, when resolution got that far. */
  readonly args: unknown;
  /** Its body started, and its compensate has not finished yet. */
  readonly compensationPending: boolean;
  /** Its compensate failed: the run's error becomes a compensation error naming the step. */
  readonly compensationFailed: boolean;
}

/** One entry of the execution trace. */
export interface TraceEntry {
  readonly type:
    | 'run'
    | 'retry'
    | 'skipped'
    | 'halt'
    | 'failed'
    | 'compensate'
    | 'compensate_failure'
    | 'undo'
    | 'undo_failure'
    | 'aborted'
    | 'input_rejected'
    | 'paused'
    | 'resumed'
    | 'cancelled'
    | 'awaiting'
    | 'dispatched'
    | 'signal_discarded';
  readonly step?: string;
  readonly attempt?: number;
  readonly at: number;
  readonly reason?: string;
  readonly delayMs?: number;
  readonly error?: ErrorData;
  /** For `awaiting`: the actors awaited; for `signal_discarded`: the signal's type. */
  readonly actors?: readonly string[];
  readonly signal?: string;
}

/** The execution actor's context: small and of constant size per step. */
/**
 * What an execution is, set when it is created and never changed (one nested object: see
 * {@link ExecutionContext}).
 */
export interface ExecutionOrigin {
  /** The reactor version it started with. */
  readonly version: number;
  /** The fingerprint of the plan it started with. */
  readonly fingerprint: string;
  /**
   * The step whose result is the run's value (null: the record of every result). Kept in the
   * snapshot so a process that does not know the reactor still reports the right value.
   */
  readonly returns: string | null;
  /** The parent execution of a composed child (null for a root). */
  readonly parentId: string | null;
  /** Compose steps from the root to this execution (empty for a root). */
  readonly path: readonly string[];
  readonly createdAt: number;
  /**
   * An async reactor's child: dispatched by its parent as an independent execution. It tells its
   * parent only that it settled (`xreactor.unit.settled`), never its pauses; its parent never undoes it.
   */
  readonly async?: true;
}

/** How an execution ended or is ending, each set at most once (one nested object: see {@link ExecutionContext}). */
export interface ExecutionEnding {
  readonly halt: { readonly step: string; readonly reason: string } | null;
  /** Why the run is rolling back or was cancelled: a step failure, or an operator's undo. */
  readonly rollbackReason: 'failure' | 'operator' | null;
  readonly inputError: ErrorData | null;
  /** Why an operator cancelled the run. */
  readonly cancelReason: string | null;
  readonly abortReason: string | null;
  /** The actor (an element's rollback actor) that asked for the undo in progress, told when it ends. Version 7 (at the top level before 10). */
  readonly undoBy: string | null;
}

/** An ending with nothing set yet. */
export const NO_ENDING: ExecutionEnding = Object.freeze({ halt: null, rollbackReason: null, inputError: null, cancelReason: null, abortReason: null, undoBy: null });

/** An execution's interrupt bookkeeping (one nested object: see {@link ExecutionContext}). Version 10 (at the top level before). */
export interface ExecutionInterrupts {
  /** While paused: the interrupts that may be continued, when each times out, or the composed child that paused. */
  readonly paused: PauseRecord | null;
  /** Interrupts resumed so far (their payloads are their results). */
  readonly resumed: readonly string[];
  /** When each interrupt first became ready (its timeout runs from then). */
  readonly readyAt: Readonly<Record<string, number>>;
  /** Pauses entered so far (a composed child's pause and resume signals are keyed by it). */
  readonly pauses: number;
}

/** No pause yet. */
export const NO_INTERRUPTS: ExecutionInterrupts = Object.freeze({ paused: null, resumed: Object.freeze([]), readyAt: Object.freeze({}), pauses: 0 });

/**
 * A stored execution context in version 10's shape, built as an object literal in the order the
 * machine builds one. Versions 6 and 7 keep the fields of `origin` and `ending` at the top level
 * (and 6 lacks `map` and `undoBy`); versions 6 to 9 keep those of `interrupts` and `undoBy` there:
 * they are moved in. The literal matters as much as the shape: a decoded object of more than 16
 * keys is in V8's dictionary mode, and so is every copy XState's `assign` makes of it. Applied by
 * `decodeSnapshot` to an older version's context, and by the execution host to every stored
 * context it hands to the machine.
 */
export function upgradeExecutionContext(stored: unknown): ExecutionContext {
  const c = stored as Partial<ExecutionContext> & Partial<ExecutionOrigin> & Partial<ExecutionEnding> & Partial<ExecutionInterrupts> & Record<string, unknown>;
  const origin: ExecutionOrigin = c.origin ?? { version: c.version ?? 1, fingerprint: c.fingerprint ?? '', returns: c.returns ?? null, parentId: c.parentId ?? null, path: c.path ?? [], createdAt: c.createdAt ?? 0 };
  const stale: Omit<ExecutionEnding, 'undoBy'> & { readonly undoBy?: string | null } = c.ending ?? { halt: c.halt ?? null, rollbackReason: c.rollbackReason ?? null, inputError: c.inputError ?? null, cancelReason: c.cancelReason ?? null, abortReason: c.abortReason ?? null };
  const ending: ExecutionEnding = stale.undoBy === undefined ? { ...stale, undoBy: c.undoBy ?? null } : (stale as ExecutionEnding);
  const interrupts: ExecutionInterrupts = c.interrupts ?? { paused: c.paused ?? null, resumed: c.resumed ?? [], readyAt: c.readyAt ?? {}, pauses: c.pauses ?? 0 };
  return {
    executionId: c.executionId!,
    reactor: c.reactor!,
    origin,
    cursor: c.cursor!,
    attempt: c.attempt!,
    undoDepth: c.undoDepth!,
    failure: c.failure ?? null,
    rollbackFailures: c.rollbackFailures ?? [],
    ending,
    rollbackEpoch: c.rollbackEpoch ?? 0,
    handedOff: c.handedOff ?? false,
    interrupts,
    awaiting: c.awaiting ?? null,
    parkedUntil: c.parkedUntil ?? null,
    map: c.map ?? null,
    updatedAt: c.updatedAt!,
  };
}

/**
 * The execution machine's context. Version 8 grouped the fields that never change (`origin`)
 * and those set once at the end (`ending`); version 10 the interrupt bookkeeping
 * (`interrupts`), and the undo's asker into `ending`: 16 keys. XState copies the context with
 * `Object.assign({}, context, update)` on every `assign`; V8 makes that copy in dictionary mode
 * once an object filled that way has more than 16 properties (4 in the object, 12 beside it), and
 * a copy in dictionary mode cost a worker 7.3 µs per step against about 1 µs
 * (docs/performance.md). Keep it at 16 keys or fewer.
 */
export interface ExecutionContext {
  readonly executionId: string;
  readonly reactor: string;
  readonly origin: ExecutionOrigin;
  /** Plan index of the step being run, or of the next one. */
  readonly cursor: number;
  /** 1-based attempt of the step at `cursor`. */
  readonly attempt: number;
  /** Entries on the undo stack (kept in the store, outside this context). */
  readonly undoDepth: number;
  readonly failure: FailureRecord | null;
  readonly rollbackFailures: readonly RollbackFailure[];
  readonly ending: ExecutionEnding;
  /** Counts rollbacks started; compensate / undo outcomes of an earlier rollback are ignored. */
  readonly rollbackEpoch: number;
  /** The run was handed to a worker; from then on timers are delayed jobs. */
  readonly handedOff: boolean;
  readonly interrupts: ExecutionInterrupts;
  /** While a compose step waits for its child: the step, its plan index, attempt and resolved arguments. */
  readonly awaiting: AwaitRecord | null;
  /** While parked on a retry backoff: when its wake is due (the sweeper wakes it itself when that job is lost). */
  readonly parkedUntil: number | null;
  /** An element of a map: its map, index and throw (null for every other execution). Version 7. */
  readonly map: ElementMapLink | null;
  readonly updatedAt: number;
}

/** Where a paused run waits. */
export interface PauseRecord {
  readonly ready: readonly { readonly step: string; readonly timeoutAt: number | null }[];
  /** The compose step whose child paused (its interrupts are addressed by path). */
  readonly child: string | null;
  /** The child's ready interrupts, as the child reported them (names or paths below it). */
  readonly nested: readonly (string | readonly string[])[];
  readonly since: number;
}

/** A compose step waiting for its child actor. */
export interface AwaitRecord {
  readonly step: string;
  readonly index: number;
  readonly attempt: number;
  readonly child: string;
  /** The compose step's resolved arguments (the child's input), for its undo-stack entry. */
  readonly args: unknown;
  /** Waiting for the child to run (`run`), or to be undone (`undo`: of the undo-stack entry at `position`, or of the paused child when null). */
  readonly purpose: 'run' | 'undo';
  readonly position: number | null;
  /** What is awaited: a composed child, a map operation (version 7; absent in version 6: an execution), or an async unit a step reads (`unit`: an asyncStep's unit or an asyncReactor's child). */
  readonly kind?: 'execution' | 'map' | 'unit';
  /** For an async unit: when the wait times out in a worker (its dispatch plus `asyncParkTimeoutMs`; null: never). */
  readonly until?: number | null;
}

/** Input that creates an execution actor. */
export interface ExecutionInput {
  readonly executionId: string;
  readonly reactor: string;
  readonly at: number;
  readonly parentId?: string | null;
  readonly path?: readonly string[];
  /** An element of a map (its parent is the map). */
  readonly map?: ElementMapLink | null;
  /** An async reactor's child (see {@link ExecutionOrigin.async}). */
  readonly async?: boolean;
}

/** Events the execution actor accepts. Every event carries the host's clock reading. */
export type ExecutionEvent =
  | { readonly type: 'xreactor.input.accepted'; readonly at: number }
  | { readonly type: 'xreactor.input.rejected'; readonly at: number; readonly error: ErrorData }
  /** A queued fan-out element's start job found its map dispatching: it starts (and joins the started list). */
  | { readonly type: 'xreactor.element.start'; readonly at: number }
  /** A queued fan-out element's start job found its map stopped (a failure, a halt, a cancel): it never runs; its slot says `skipped`. */
  | { readonly type: 'xreactor.element.skip'; readonly at: number; readonly reason: string }
  | { readonly type: 'xreactor.step.succeeded'; readonly at: number; readonly index: number; readonly attempt: number; readonly args: unknown; readonly result: unknown }
  | { readonly type: 'xreactor.step.skipped'; readonly at: number; readonly index: number; readonly attempt: number; readonly value: unknown }
  | { readonly type: 'xreactor.step.halted'; readonly at: number; readonly index: number; readonly attempt: number; readonly reason: string }
  | {
      readonly type: 'xreactor.step.failed';
      readonly at: number;
      readonly index: number;
      readonly attempt: number;
      readonly error: ErrorData;
      /** The body started (arguments resolved and the input contract passed). */
      readonly started: boolean;
      readonly retryable: boolean;
      readonly args: unknown;
      /** Rollback failures a composed child already reported; they join this execution's list. */
      readonly nested?: readonly RollbackFailure[];
    }
  | { readonly type: 'xreactor.execution.resume'; readonly at: number }
  | { readonly type: 'xreactor.timer.fired'; readonly at: number; readonly index: number; readonly attempt: number }
  | {
      readonly type: 'xreactor.compensate.finished';
      readonly at: number;
      readonly epoch: number;
      readonly failure: Omit<RollbackFailure, 'step' | 'kind'> | null;
      /** Rollback failures of a map step's elements, undone as this step's compensation. */
      readonly nested?: readonly RollbackFailure[];
    }
  /** A map step's map operation must be rolled back as the step's compensation: wait for it. */
  | { readonly type: 'xreactor.compensate.child'; readonly at: number; readonly epoch: number; readonly step: string }
  /** A map step's source is resolved: its map operation is spawned with this transition (`args`: the map's stored input). */
  | { readonly type: 'xreactor.map.spawn'; readonly at: number; readonly index: number; readonly attempt: number; readonly args: unknown }
  | {
      readonly type: 'xreactor.undo.finished';
      readonly at: number;
      readonly epoch: number;
      readonly position: number;
      readonly step: string;
      readonly failure: Omit<RollbackFailure, 'step' | 'kind'> | null;
      /** Rollback failures of a composed child's steps, undone as this entry's undo. */
      readonly nested?: readonly RollbackFailure[];
    }
  /**
   * An interruption (signal, shutdown). `map`: the step at `index` is a map step whose map was
   * interrupted with it: its completed (and aborted) elements are the step's pending compensation.
   */
  | { readonly type: 'xreactor.execution.abort'; readonly at: number; readonly reason: string; readonly map?: { readonly index: number } }
  /** An operator's undo, or a parent's (`from`: the parent undoing its composed child). */
  | { readonly type: 'xreactor.operator.undo'; readonly at: number; readonly from?: string; readonly reason?: 'compensate' | 'undo' }
  | { readonly type: 'xreactor.operator.cancel'; readonly at: number; readonly reason: string }
  | { readonly type: 'xreactor.interrupt.resume'; readonly at: number; readonly step: string; readonly payload: unknown }
  | { readonly type: 'xreactor.interrupt.fail'; readonly at: number; readonly step: string; readonly error: ErrorData }
  /** A compose step's arguments are resolved and its child's input checked: the child is spawned with this transition. */
  | { readonly type: 'xreactor.compose.spawn'; readonly at: number; readonly index: number; readonly attempt: number; readonly args: unknown }
  /** The compose step's child exists and has not settled (found on recovery): wait for its signal. */
  | { readonly type: 'xreactor.compose.awaiting'; readonly at: number; readonly index: number; readonly attempt: number; readonly args: unknown }
  /** An undo-stack entry of a compose step: its child must be undone; wait for it. */
  | { readonly type: 'xreactor.undo.child'; readonly at: number; readonly epoch: number; readonly position: number; readonly step: string }
  /** Signals from a composed child (through the inbox). */
  | { readonly type: 'xreactor.child.settled'; readonly at: number; readonly child: string; readonly status: ExecutionStatus; readonly rollbackFailures?: readonly RollbackFailure[] }
  | { readonly type: 'xreactor.child.paused'; readonly at: number; readonly child: string; readonly ready: readonly (string | readonly string[])[] }
  | { readonly type: 'xreactor.child.resumed'; readonly at: number; readonly child: string }
  /** The awaited child is gone (its retention expired): reported by the sweeper. */
  | { readonly type: 'xreactor.child.lost'; readonly at: number; readonly child: string }
  /** An async unit step's arguments are resolved (and its child's input checked): the unit is spawned with this transition and dispatched after it. */
  | { readonly type: 'xreactor.unit.dispatch'; readonly at: number; readonly index: number; readonly attempt: number; readonly args: unknown }
  /** The step at `index` reads async unit `unit`, which has not settled: wait for its signal (a worker gives up at `until`). */
  | { readonly type: 'xreactor.unit.awaiting'; readonly at: number; readonly index: number; readonly attempt: number; readonly unit: string; readonly until: number | null }
  /** An async unit this execution dispatched settled (its signal; or the host, finding it settled while a step waits for it). */
  | { readonly type: 'xreactor.unit.settled'; readonly at: number; readonly child: string }
  /**
   * The wait of the step at `index` for async unit `unit` timed out: the step fails before its body
   * (`error`). Accepted only while that step waits for that unit (a timeout of an earlier unit the
   * same step read is stale).
   */
  | {
      readonly type: 'xreactor.unit.timedOut';
      readonly at: number;
      readonly index: number;
      readonly attempt: number;
      readonly unit: string;
      readonly error: ErrorData;
      readonly started: false;
      readonly retryable: false;
      readonly args: undefined;
    };

/** Store writes a transition asks for; committed atomically with the snapshot. */
export type ExecutionWrite =
  | { readonly type: 'xreactor.write.result'; readonly params: { readonly step: string; readonly value: unknown } }
  | { readonly type: 'xreactor.write.pushUndo'; readonly params: { readonly position: number; readonly step: string; readonly args: unknown; readonly result: unknown } }
  | { readonly type: 'xreactor.write.popUndo'; readonly params: { readonly position: number } }
  | { readonly type: 'xreactor.write.trace'; readonly params: TraceEntry }
  /** A signal to another actor of this root, landing atomically with the commit (`to` null: no recipient, nothing is sent). */
  | {
      readonly type: 'xreactor.write.signal';
      readonly params: {
        readonly to: string | null;
        readonly event: ExecutionSignalEvent;
        readonly dedupeKey: string;
        /** The recipient's kind (absent: an execution). */
        readonly kind?: string;
      };
    }
  /** An element's signal to its map, landed only when the store finds its condition true after the commit's map writes. */
  | {
      readonly type: 'xreactor.write.mapSignal';
      readonly params: {
        readonly to: string;
        readonly event: Extract<MapEvent, { type: 'xreactor.map.throwSettled' | 'xreactor.map.settled' }>;
        readonly dedupeKey: string;
        readonly condition: 'reportNew' | 'mapSettled';
      };
    }
  /**
   * Create a composed child (or, `kind: 'map'`, a map operation; `kind: 'unit'`, an async step's
   * unit; `async`, an async reactor's child) with this commit (the host builds its first commit).
   */
  | { readonly type: 'xreactor.write.spawn'; readonly params: { readonly step: string; readonly child: string; readonly input: unknown; readonly kind?: 'execution' | 'map' | 'unit'; readonly async?: true } }
  /** An element's writes to its map: started (with its creating commit), and its forward report (with its settling commit). */
  | {
      readonly type: 'xreactor.write.mapReport';
      readonly params:
        | { readonly started: { readonly map: string; readonly index: number; readonly gate?: boolean } }
        | { readonly report: { readonly map: string; readonly index: number; readonly outcome: 'completed' | 'failed' | 'halted' | 'aborted' | 'skipped' | 'cancelled'; readonly stops: boolean; readonly at: number } };
    }
  /** The actors this one awaits from this commit on. */
  | { readonly type: 'xreactor.write.awaits'; readonly params: { readonly actors: readonly string[] } };

/** Events an execution sends to other actors. */
export type ExecutionSignalEvent = Extract<ExecutionEvent, { type: 'xreactor.child.settled' | 'xreactor.child.paused' | 'xreactor.child.resumed' | 'xreactor.operator.undo' | 'xreactor.unit.settled' }>;

/** Effects a transition asks the host to perform after the commit. */
export type ExecutionEffect =
  | { readonly type: 'xreactor.effect.handOff'; readonly params: { readonly index: number } }
  | { readonly type: 'xreactor.effect.paused'; readonly params: PauseRecord }
  | { readonly type: 'xreactor.effect.runStep'; readonly params: { readonly index: number; readonly step: string; readonly attempt: number } }
  | { readonly type: 'xreactor.effect.wait'; readonly params: { readonly index: number; readonly step: string; readonly attempt: number; readonly delayMs: number; readonly error: ErrorData } }
  | { readonly type: 'xreactor.effect.compensate'; readonly params: { readonly index: number; readonly step: string; readonly error: ErrorData; readonly args: unknown; readonly epoch: number } }
  | { readonly type: 'xreactor.effect.undo'; readonly params: { readonly position: number; readonly epoch: number } }
  | { readonly type: 'xreactor.effect.finished'; readonly params: { readonly status: ExecutionStatus } }
  /** Wake an actor this commit signalled (advance it here when its lease is free, else it is woken by a job). */
  | { readonly type: 'xreactor.effect.wake'; readonly params: { readonly actor: string } }
  /** Advance the awaited child in this call when nothing else does, then look at the inbox. */
  | { readonly type: 'xreactor.effect.awaitChild'; readonly params: { readonly child: string } }
  /** A queued fan-out element's start: `element.start`, whose commit the store refuses once the map stopped (then `element.skip`). */
  | { readonly type: 'xreactor.effect.element.gate'; readonly params: { readonly map: string } }
  /** Enqueue the start job of the async unit the commit spawned (kind `unit`, or `execution` for an async reactor's child). */
  | { readonly type: 'xreactor.effect.dispatchUnit'; readonly params: { readonly unit: string; readonly kind: 'unit' | 'execution' } }
  /**
   * A step waits for async unit `unit`: a caller waits here (up to `asyncWaitTimeoutMs`), a worker
   * leaves the actor awaiting with a delayed timeout at `until`; either way the unit's signal wakes it.
   */
  | { readonly type: 'xreactor.effect.awaitUnit'; readonly params: { readonly unit: string; readonly step: string; readonly index: number; readonly attempt: number; readonly until: number | null } };

/** Lifecycle states of an execution. */
export type ExecutionStatus =
  | 'pending'
  /** A fan-out map element created by its map's throw, waiting for its start job. */
  | 'queued'
  | 'running'
  | 'paused'
  | 'rolling_back'
  | 'completed'
  | 'failed'
  | 'halted'
  | 'cancelled'
  | 'aborted';
