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
import type { Clock } from '../internal/clock.js';
import type { Call } from './call.js';
import type { HeldActor } from './actor-host.js';
import { markStale } from './actor-host.js';
import { jobId } from '../queue/job-ids.js';
import { childIdOf } from './compose.js';

import { isUnitRef } from './unit-ref.js';

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

/** What the waits of an execution for its async units need of its host. */
export interface UnitWaitDeps {
  readonly store: Store;
  readonly clock: Clock;
  /** The owner's reactor (errors name it). */
  readonly reactor: string;
  readonly asyncWaitTimeoutMs: number;
  readonly asyncParkTimeoutMs: number;
  /** The owner's recorded results of these steps (its host's cache, else the store). */
  readonly readResults: (steps: readonly string[]) => Promise<ReadonlyMap<string, unknown>>;
  /** Enqueue a delayed job delivering `event` to the owner. */
  readonly enqueueTimeout: (id: string, event: ExecutionEvent, delayMs: number) => Promise<void>;
  /** The owner's event for an interruption (the call's signal fired). */
  readonly abortEvent: (signal: AbortSignal) => ExecutionEvent;
}

/** An owner execution as its host holds it, as far as its waits read it. */
type Owner = HeldActor & { readonly snapshot: { readonly context: ExecutionContext } };

/**
 * The async units `step` reads: their outcomes once all settled; else the event of waiting for
 * the first that has not (or the reader's failure when one is gone).
 */
export async function readUnits(deps: UnitWaitDeps, step: CompiledStep, attempt: number, units: readonly CompiledStep[]): Promise<{ readonly outcomes: Map<string, unknown> } | { readonly event: ExecutionEvent }> {
  const { store, clock } = deps;
  const outcomes = new Map<string, unknown>();
  const recorded = await deps.readResults(units.map((u) => u.name));
  for (const unit of units) {
    const ref = recorded.get(unit.name);
    if (!isUnitRef(ref)) continue;
    const look = await lookAtUnit(store, ref.xreactorUnit, unit.child);
    if (look.state === 'gone') return { event: readerFailure(clock.now(), step, attempt, unitGoneError(ref.xreactorUnit.id), unit.name, deps.reactor) };
    if (look.state === 'pending') {
      const park = deps.asyncParkTimeoutMs;
      const until = Number.isFinite(park) ? ref.xreactorUnit.dispatchedAt + park : null;
      return { event: { type: 'xreactor.unit.awaiting', at: clock.now(), index: step.index, attempt, unit: ref.xreactorUnit.id, until } };
    }
    outcomes.set(unit.name, look.outcome);
  }
  return { outcomes };
}

/**
 * `step` (of `owner`, reading the async units `reads`) waits for async unit `params.unit`:
 * settled meanwhile → go on; gone → the reader fails. In a worker the execution stays `awaiting`
 * (the worker is free; the unit's signal wakes it, a delayed job times the wait out at `until`).
 * A caller waits here, up to `asyncWaitTimeoutMs`, on the unit's announcement and its owner's (an
 * operator's cancel meanwhile ends the wait: the owner reads its inbox and state again).
 */
export async function awaitUnit(
  deps: UnitWaitDeps,
  owner: Owner,
  step: CompiledStep,
  reads: readonly CompiledStep[],
  params: { readonly unit: string; readonly step: string; readonly index: number; readonly attempt: number; readonly until: number | null },
  call: Call,
): Promise<ExecutionEvent | undefined> {
  const { store, clock, reactor } = deps;
  const source = reads.find((u) => childIdOf(owner.id, u.name) === params.unit);
  const sourceName = source?.name ?? params.step;
  const look = () => lookAtUnit(store, { id: params.unit, kind: source?.kind === 'asyncReactor' ? 'execution' : 'unit', dispatchedAt: 0 }, source?.child);
  const settled: ExecutionEvent = { type: 'xreactor.unit.settled', at: clock.now(), child: params.unit };
  const gone = () => readerFailure(clock.now(), step, params.attempt, unitGoneError(params.unit), sourceName, reactor);
  if (owner.snapshot.context.handedOff || call.place === 'worker') {
    const found = await look();
    if (found.state === 'settled') return settled;
    if (found.state === 'gone') return gone();
    if (params.until !== null) {
      // One job per wait (the step may wait for several units in turn), accepted only while it waits for this one.
      const timeout = readerTimedOut(clock.now(), step, params.attempt, params.unit, sourceName, reactor, unitTimeoutError(params.unit, step.name, deps.asyncParkTimeoutMs, 'asyncParkTimeoutMs'));
      await deps.enqueueTimeout(jobId(owner.id, 'unit-timeout', params.index, params.attempt, params.unit), timeout, Math.max(0, params.until - clock.now()));
    }
    return undefined;
  }
  const ms = deps.asyncWaitTimeoutMs;
  const deadline = clock.now() + ms;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  call.signal.addEventListener('abort', onAbort, { once: true });
  // Moved by another writer (an operator's cancel), or a signal landed for it.
  const ownerMoved = async () => {
    const stored = await store.load(owner.id);
    return stored === undefined || stored.revision !== owner.revision || stored.inbox.seq !== owner.inbox.seq;
  };
  try {
    for (;;) {
      // Listening before looking: a settle between the look and the wait is not missed.
      const wait = store.waitSettled(params.unit, Math.max(1, deadline - clock.now()), stop.signal);
      await wait.listening;
      const found = await look();
      if (found.state === 'gone') return gone();
      if (found.state === 'settled') return settled;
      if (clock.now() >= deadline) return readerTimedOut(clock.now(), step, params.attempt, params.unit, sourceName, reactor, unitTimeoutError(params.unit, step.name, ms, 'asyncWaitTimeoutMs'));
      // The owner's own announcement too (listening before looking again), once the deadline is ahead.
      const ownerWait = store.waitSettled(owner.id, Math.max(1, deadline - clock.now()), stop.signal);
      await ownerWait.listening;
      if (await ownerMoved()) {
        markStale(owner);
        return undefined;
      }
      // Either wait ends on its announcement, or at the deadline on the store's clock.
      const notified = await Promise.race([wait.settled, ownerWait.settled.then((moved) => (moved ? ('owner' as const) : false))]);
      if (call.signal.aborted) return deps.abortEvent(call.signal);
      if (notified === 'owner' && (await ownerMoved())) {
        markStale(owner);
        return undefined;
      }
      // Not notified before this clock's deadline (a store on another clock): look again shortly, not at once.
      if (notified === false && clock.now() < deadline) await clock.sleep(Math.min(100, deadline - clock.now()), stop.signal).catch(() => undefined);
    }
  } finally {
    call.signal.removeEventListener('abort', onAbort);
    stop.abort();
  }
}
