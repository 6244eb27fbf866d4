import type { ExecutionContext, ExecutionStatus, RollbackFailure, TraceEntry } from '../../machines/execution-types.js';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import { CompensationError, InputValidationError } from '../errors/index.js';
import type { ExecutionId } from '../internal/ids.js';
import { deserializeError } from '../serialization/index.js';
import type { Store, UndoEntry } from '../store/store.js';
import { isUnitRef } from './unit-ref.js';

/** A compensate or undo that did not complete, as reported to callers. */
export interface RollbackFailureReport {
  readonly step: string;
  /** `undo_all`: a map's undoAll. */
  readonly kind: 'compensate' | 'undo' | 'undo_all';
  /** The map step and element index, for an element's undo. */
  readonly map?: { readonly step: string; readonly index: number };
  /** Compose steps leading to the step when it belongs to a composed child (empty at the root). */
  readonly path: readonly string[];
  readonly reason: RollbackFailure['reason'];
  readonly error: Error;
  readonly message: string;
}

/** The run completed; `value` is the `returns` step's result, or every step's result. */
export interface CompletedResult<TOutput> {
  readonly status: 'completed';
  readonly executionId: ExecutionId;
  readonly value: TOutput;
}

/** The run failed and was rolled back. */
export interface FailedResult {
  readonly status: 'failed';
  readonly executionId: ExecutionId;
  /** The failure: the step's error, a CompensationError when its compensate failed, or an InputValidationError. */
  readonly error: Error;
  /** The step the failure is attributed to (undefined when the reactor input was invalid). */
  readonly step: string | undefined;
  readonly message: string;
  /** Every compensate / undo that did not complete. Always an array. */
  readonly rollbackFailures: readonly RollbackFailureReport[];
  /** Field errors when the reactor input or a step contract was invalid. */
  readonly validationErrors: Readonly<Record<string, string[]>> | undefined;
}

/** A step halted the run: no further steps ran and nothing was rolled back. */
export interface HaltedResult {
  readonly status: 'halted';
  readonly executionId: ExecutionId;
  readonly step: string;
  readonly reason: string;
}

/** An operator undid the run: every completed step was rolled back. */
export interface CancelledResult {
  readonly status: 'cancelled';
  readonly executionId: ExecutionId;
  readonly reason: string;
  readonly rollbackFailures: readonly RollbackFailureReport[];
}

/** A background reactor reached its hand-off point: a worker continues the execution. */
export interface DispatchedResult {
  readonly status: 'dispatched';
  readonly executionId: ExecutionId;
  /**
   * Why the work went on elsewhere: a background hand-off, a run busy in another process
   * (`run_busy`), or a run waiting on actors that are advanced by workers (`awaiting`: a composed
   * child parked on a retry backoff, later a fan-out map or a lock).
   */
  readonly reason?: 'background' | 'run_busy' | 'awaiting';
}

/** The typed outcome of `run`. */
export type RunResult<TOutput> = CompletedResult<TOutput> | FailedResult | HaltedResult;

/** An execution as `find(id)` reports it. */
export interface ExecutionView {
  readonly id: ExecutionId;
  readonly reactor: string;
  readonly status: ExecutionStatus;
  readonly revision: number;
  /** The outcome, once the execution settled. */
  readonly result: RunResult<unknown> | CancelledResult | undefined;
  /** Entries not undone, oldest first. */
  readonly undoStack: readonly UndoEntry[];
  readonly trace: readonly TraceEntry[];
  /** A failing step whose compensate was cut off by an interruption; `undo(id)` re-runs it first. */
  readonly pendingCompensation: { readonly step: string } | undefined;
  /**
   * What a running or rolling-back execution waits for: other actors (`awaiting`: a compose step's
   * child; it holds no worker), time (`parked`: a retry backoff with a delayed wake), or a worker
   * (handed off, not taken up yet: no worker is running for its queue, or they are all busy).
   * Undefined while it works or once it settled.
   */
  readonly waiting: { readonly on: 'actors'; readonly step: string; readonly actors: readonly string[] } | { readonly on: 'time'; readonly step: string } | { readonly on: 'worker' } | undefined;
  /**
   * Progress of each map step that has started (in plan order): its map operation's id, the
   * elements settled so far and the total (null while a paged source is still being read), and
   * the settled elements by outcome. Empty when the reactor has no map step, or this process
   * does not know the reactor.
   */
  readonly maps: readonly MapProgress[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Stored rollback failures as callers get them. */
export function reports(failures: readonly RollbackFailure[]): RollbackFailureReport[] {
  return failures.map((f) => {
    const error = deserializeError(f.error);
    return { step: f.step, path: f.path ?? [], kind: f.kind, reason: f.reason, error, message: error.message, ...(f.map === undefined ? {} : { map: f.map }) };
  });
}

/**
 * The step whose result is a completed run's value (undefined: every step's): the definition's
 * when this process knows the reactor, else what the snapshot recorded.
 */
export function returnsOf(definition: AnyReactorDefinition | undefined, context: ExecutionContext): string | undefined {
  return definition === undefined ? (context.origin.returns ?? undefined) : definition.returns;
}

/** Build the outcome of a settled execution from its context (and its results, for a completed run). */
export async function buildResult(
  definition: AnyReactorDefinition | undefined,
  status: ExecutionStatus,
  context: ExecutionContext,
  store: Pick<Store, 'readResults'>,
): Promise<RunResult<unknown> | CancelledResult | undefined> {
  const executionId = context.executionId as ExecutionId;
  switch (status) {
    case 'completed': {
      const returns = returnsOf(definition, context);
      const results = await store.readResults(executionId, returns === undefined ? undefined : [returns]);
      // Every step's result, but for async units' (a reference to the unit, not a value of the run).
      const value = returns === undefined ? Object.fromEntries([...results].filter(([, v]) => !isUnitRef(v))) : results.get(returns);
      return { status, executionId, value };
    }
    case 'halted':
      return { status, executionId, step: context.ending.halt!.step, reason: context.ending.halt!.reason };
    case 'cancelled':
      return { status, executionId, reason: context.ending.cancelReason ?? 'undo', rollbackFailures: reports(context.rollbackFailures) };
    case 'failed': {
      const rollbackFailures = reports(context.rollbackFailures);
      if (context.failure === null) {
        const error = deserializeError(context.ending.inputError!);
        const validationErrors = error instanceof InputValidationError ? error.fieldErrors : undefined;
        return { status, executionId, error, step: undefined, message: error.message, rollbackFailures, validationErrors };
      }
      const original = deserializeError(context.failure.error);
      const { step } = context.failure;
      const error = context.failure.compensationFailed
        ? new CompensationError(`step "${step}" failed (${original.message}) and its compensate did not complete`, {
            step,
            reactor: context.reactor,
            cause: original,
          })
        : original;
      const validationErrors = original instanceof InputValidationError ? original.fieldErrors : undefined;
      return { status, executionId, error, step, message: error.message, rollbackFailures, validationErrors };
    }
    default:
      return undefined;
  }
}

/** A map step's progress, in {@link ExecutionView.maps}. */
export interface MapProgress {
  readonly step: string;
  /** The map operation actor (`<execution>.<step>`). */
  readonly id: string;
  /** How its elements run, and its stored throw size and atomicity (R-10: every throw uses these). */
  readonly mode: 'inline' | 'fanOut';
  readonly batchSize: number;
  readonly atomic: boolean;
  /** Elements in the source; null while a paged source without a count has not ended. */
  readonly total: number | null;
  /** Positions dispatched, once no further one will be (positions past it settle as skipped); null until then. */
  readonly dispatched: number | null;
  readonly started: number;
  readonly settled: number;
  readonly outcomes: { readonly completed: number; readonly failed: number; readonly halted: number; readonly aborted: number; readonly skipped: number; readonly cancelled: number };
  /** Its rollback, once started: started elements it covers, how many reported, and by outcome. */
  readonly rollback?: { readonly total: number; readonly settled: number; readonly undone: number; readonly failed: number; readonly notNeeded: number; readonly inFlight: number; readonly unavailable: number };
}
