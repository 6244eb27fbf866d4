/**
 * The execution's side of async units (`asyncStep`, `asyncReactor`): dispatching a unit, and what
 * a step that reads one (`result(name)`) receives. The unit's own actor is `unit-host.ts` (an
 * async step) or an ordinary execution (an async reactor's child, `ExecutionOrigin.async`).
 *
 * A dispatch step's result is a reference to its unit (`{ xreactorUnit: { id, kind, dispatchedAt } }`);
 * a reader resolves it to the unit's {@link AsyncOutcome} when it runs, reading the unit itself,
 * so the owner's snapshot holds nothing of the unit but that reference.
 */
import type { ExecutionContext, ExecutionEvent } from '../../machines/execution-types.js';
import { executionStatusOf, executionTagsOf } from '../../machines/execution.js';
import type { UnitContext } from '../../machines/unit-types.js';
import { unitTagsOf } from '../../machines/unit.js';
import type { AsyncOutcome } from '../definition/async-unit.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { ArgumentResolutionError, AsyncWaitTimeoutError, InputValidationError, XreactorError } from '../errors/index.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import { deserializeError, serializeError } from '../serialization/index.js';
import type { Store } from '../store/store.js';
import { buildResult, reports } from './results.js';
import type { ExecutionView } from './results.js';
import type { ExecutionId } from '../internal/ids.js';
import type { LoadedActor } from '../store/store.js';
import { unitStatusOf } from '../../machines/unit.js';
import { resolveSources } from './step-performer.js';
import type { UnitRef } from './unit-ref.js';

export { isUnitRef } from './unit-ref.js';
export type { UnitRef } from './unit-ref.js';

/** Where a unit stands for a reader: settled (with its outcome), not yet, or gone (its retention expired). */
export type UnitLook = { readonly state: 'settled'; readonly outcome: AsyncOutcome<unknown> } | { readonly state: 'pending' } | { readonly state: 'gone' };

/**
 * Look at the unit `ref` names. An async step's unit: its end and value. An async reactor's child
 * (`child`: its reactor): its outcome as `run()` would report it.
 */
export async function lookAtUnit(store: Store, ref: UnitRef['xreactorUnit'], child: AnyReactorDefinition | undefined): Promise<UnitLook> {
  const loaded = await store.load(ref.id);
  if (loaded === undefined) return { state: 'gone' };
  const { kind, value } = loaded.snapshot;
  if (kind === 'unit') {
    if (!unitTagsOf(value).has('settled')) return { state: 'pending' };
    const end = (loaded.snapshot.context as UnitContext).end;
    if (end === null) return { state: 'pending' };
    if (end.status === 'failed') return { state: 'settled', outcome: { status: 'failed', error: deserializeError(end.error) } };
    if (end.status === 'halted') return { state: 'settled', outcome: { status: 'halted', reason: end.reason } };
    const results = await store.readResults(ref.id, ['value']);
    return { state: 'settled', outcome: { status: 'completed', value: results.get('value') } };
  }
  if (!executionTagsOf(value).has('settled')) return { state: 'pending' };
  const status = executionStatusOf(value);
  const context = loaded.snapshot.context as ExecutionContext;
  if (status === 'aborted') {
    const error = new XreactorError('execution_aborted', `async reactor execution ${ref.id} was interrupted (${context.ending.abortReason ?? 'aborted'}) and not rolled back`);
    return { state: 'settled', outcome: { status: 'failed', error } };
  }
  const result = await buildResult(child, status, context, store);
  switch (result?.status) {
    case 'completed':
      return { state: 'settled', outcome: { status: 'completed', value: result.value } };
    case 'failed':
      return { state: 'settled', outcome: { status: 'failed', error: result.error } };
    case 'halted':
      return { state: 'settled', outcome: { status: 'halted', reason: result.reason } };
    case 'cancelled':
      return { state: 'settled', outcome: { status: 'cancelled', reason: result.reason } };
    default:
      return { state: 'pending' };
  }
}

/** The failure of a reader whose unit is gone, or whose wait timed out: never started, not compensated. */
export function readerFailure(at: number, step: CompiledStep, attempt: number, cause: Error, source: string, reactor: string): ExecutionEvent {
  const error = new ArgumentResolutionError(`reactor "${reactor}" step "${step.name}": argument from result("${source}") cannot be resolved: ${cause.message}`, { step: step.name, reactor, cause });
  return { type: 'xreactor.step.failed', at, index: step.index, attempt, error: serializeError(error), started: false, retryable: false, args: undefined };
}

/** A reader's wait for `unit` timed out: it fails before its body (accepted only while it still waits for that unit). */
export function readerTimedOut(at: number, step: CompiledStep, attempt: number, unit: string, source: string, reactor: string, cause: AsyncWaitTimeoutError): ExecutionEvent {
  const failed = readerFailure(at, step, attempt, cause, source, reactor) as Extract<ExecutionEvent, { type: 'xreactor.step.failed' }>;
  return { type: 'xreactor.unit.timedOut', at, index: step.index, attempt, unit, error: failed.error, started: false, retryable: false, args: undefined };
}

/** The error of a reader whose unit is gone. */
export function unitGoneError(unit: string): XreactorError {
  return new XreactorError('context_unavailable', `async unit ${unit} is gone (its retention expired, or its data is unreadable); its outcome cannot be read`);
}

/** The error of a reader whose wait timed out. */
export function unitTimeoutError(unit: string, reader: string, timeoutMs: number, option: 'asyncWaitTimeoutMs' | 'asyncParkTimeoutMs'): AsyncWaitTimeoutError {
  return new AsyncWaitTimeoutError(unit, reader, timeoutMs, option);
}

/**
 * An async unit step at `attempt`: its arguments are resolved from this execution's sources here
 * (a source that cannot be resolved fails the step without starting anything; it is not
 * compensated). An async reactor's child input is checked here too, as for a run being started:
 * a bad one fails the dispatching step. An async step's input contract is not: its unit applies
 * it before every attempt in its own job (seed 001: "enforced before run on every path"), so a
 * bad argument fails the unit, never started and not compensated, and its owner only if a
 * reader fails on it.
 */
export async function dispatchUnit(step: CompiledStep, attempt: number, inputs: unknown, results: ReadonlyMap<string, unknown>, reactor: string, at: () => number): Promise<ExecutionEvent> {
  const base = { index: step.index, attempt };
  const refused = (error: unknown): ExecutionEvent => ({ type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args: undefined });
  let args: unknown;
  try {
    args = resolveSources(step, inputs, results, reactor);
    if (step.kind === 'asyncReactor' && step.child?.input !== undefined) {
      const checked = await validateWith(step.child.input, args);
      if (!checked.ok) {
        throw new InputValidationError(`reactor "${reactor}" asyncReactor "${step.name}": input of reactor "${step.child.name}" is invalid: ${describeIssues(checked.issues)}`, checked.issues, { step: step.name, reactor });
      }
    }
  } catch (error) {
    return refused(error);
  }
  return { type: 'xreactor.unit.dispatch', at: at(), ...base, args };
}

/**
 * `find(id)` of an async step's unit: its status, its outcome once settled (a failed unit's
 * compensation failure, if any, in `rollbackFailures`) and its trace, named by its owner's reactor.
 */
export async function unitView(store: Store, id: string, loaded: LoadedActor): Promise<ExecutionView> {
  const context = loaded.snapshot.context as UnitContext;
  const executionId = id as ExecutionId;
  const [look, trace] = await Promise.all([lookAtUnit(store, { id, kind: 'unit', dispatchedAt: context.dispatchedAt }, undefined), store.readTrace(id)]);
  const outcome = look.state === 'settled' ? look.outcome : undefined;
  const failures = context.compensation?.failure == null ? [] : reports([context.compensation.failure]);
  const result: ExecutionView['result'] =
    outcome === undefined
      ? undefined
      : outcome.status === 'completed'
        ? { status: 'completed', executionId, value: outcome.value }
        : outcome.status === 'halted'
          ? { status: 'halted', executionId, step: context.step, reason: outcome.reason }
          : outcome.status === 'failed'
            ? { status: 'failed', executionId, error: outcome.error, step: context.step, message: outcome.error.message, rollbackFailures: failures, validationErrors: undefined }
            : undefined;
  return {
    id: executionId,
    reactor: context.reactor,
    status: unitStatusOf(loaded.snapshot.value),
    revision: loaded.revision,
    result,
    undoStack: [],
    trace,
    pendingCompensation: undefined,
    waiting: undefined,
    maps: [],
    createdAt: context.dispatchedAt,
    updatedAt: context.updatedAt,
  };
}
