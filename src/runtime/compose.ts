import type { ExecutionContext, ExecutionEvent, RollbackFailure } from '../../machines/execution-types.js';
import { executionStatusOf as statusOf, executionTagsOf } from '../../machines/execution.js';
import type { CompiledStep } from '../definition/compiled.js';
import { DeserializationError, StepFailure, XreactorError } from '../errors/index.js';
import { serializeError } from '../serialization/index.js';
import type { Store, UndoEntry } from '../store/store.js';
import type { Clock } from '../internal/clock.js';
import { buildResult } from './results.js';
import { resolveArguments } from './step-performer.js';

/** The parent execution of a compose step, as its host holds it. */
export interface ComposeParent {
  readonly id: string;
  readonly inputs: unknown;
  readonly snapshot: { readonly context: ExecutionContext };
}

/** Services compose uses. */
export interface ComposeDeps {
  readonly store: Store;
  readonly clock: Clock;
}

/** The id of a compose step's child execution: deterministic, so a redelivery finds it. */
export function childIdOf(parentId: string, step: string): string {
  return `${parentId}.${step}`;
}


/** The error an actor was marked unreadable with (`Store.markUnreadable`), or undefined when it was not. */
async function markedUnreadable(store: Store, id: string): Promise<DeserializationError | undefined> {
  try {
    const record = await store.readUnreadable(id);
    return record === undefined ? undefined : new DeserializationError(record.message);
  } catch (error) {
    if (error instanceof DeserializationError) return error;
    throw error;
  }
}

/** A child's rollback failures as the parent reports them: the compose step joins their path. */
function nested(step: string, failures: readonly RollbackFailure[]): RollbackFailure[] {
  return failures.map((f) => ({ ...f, path: [step, ...(f.path ?? [])] }));
}

/**
 * The compose step at `attempt`: its child is spawned by the transition this returns
 * (`compose.spawn`) when it does not exist yet; a child that has not settled is awaited
 * (`compose.awaiting`: its signal wakes the parent); a settled child's end becomes the step's
 * outcome. A child that failed rolled itself back: the parent compensates nothing for the compose
 * step. A child that halted does not stop the parent.
 */
export async function runCompose(
  deps: ComposeDeps,
  parent: ComposeParent,
  step: CompiledStep,
  attempt: number,
  loadResults: () => Promise<ReadonlyMap<string, unknown>>,
  onStart: (args: unknown) => void,
): Promise<ExecutionEvent> {
  const reactor = parent.snapshot.context.reactor;
  const at = () => deps.clock.now();
  const base = { index: step.index, attempt };
  let args: unknown;
  try {
    args = await resolveArguments(step, parent.inputs, await loadResults(), reactor);
  } catch (error) {
    return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args: undefined };
  }
  const child = step.child!;
  const id = childIdOf(parent.id, step.name);
  let held: Awaited<ReturnType<Store['load']>>;
  try {
    held = await deps.store.load(id);
  } catch (error) {
    // The child's stored data cannot be read (truncated, foreign): the compose step fails with that error.
    if (!(error instanceof DeserializationError) || error.retryable) throw error;
    return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args };
  }
  if (held === undefined) {
    onStart(args);
    return { type: 'xreactor.compose.spawn', at: at(), ...base, args };
  }
  if (!executionTagsOf(held.snapshot.value).has('settled')) {
    // A child failed in the store though its snapshot reads (its input or outbox did not) never settles: the step fails with its error.
    const unreadable = await markedUnreadable(deps.store, id);
    if (unreadable !== undefined) return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(unreadable), started: false, retryable: false, args };
    return { type: 'xreactor.compose.awaiting', at: at(), ...base, args };
  }
  const status = statusOf(held.snapshot.value);
  const context = held.snapshot.context as ExecutionContext;
  switch (status) {
    case 'completed': {
      const result = await buildResult(child, 'completed', context, deps.store);
      return { type: 'xreactor.step.succeeded', at: at(), ...base, args, result: result?.status === 'completed' ? result.value : undefined };
    }
    case 'halted':
      return { type: 'xreactor.step.succeeded', at: at(), ...base, args, result: undefined };
    case 'failed': {
      const result = await buildResult(child, 'failed', context, deps.store);
      const error = result?.status === 'failed' ? result.error : new StepFailure(`composed reactor "${child.name}" failed`);
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args, nested: nested(step.name, context.rollbackFailures) };
    }
    case 'aborted':
      return { type: 'xreactor.execution.abort', at: at(), reason: context.ending.abortReason ?? 'aborted' };
    default: {
      const error = new XreactorError('child_cancelled', `composed execution ${id} of reactor "${child.name}" was cancelled${context.ending.cancelReason ? ` (${context.ending.cancelReason})` : ''}; it has no result`);
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args };
    }
  }
}

/**
 * Undo a completed compose step's entry: the child rolls back its own completed steps, newest
 * first. A child that has not been undone yet is signalled and awaited (`undo.child`); once it
 * has settled the entry is done, with the child's rollback failures reported as the parent's.
 */
export async function undoCompose(deps: ComposeDeps, parent: ComposeParent, step: CompiledStep, entry: UndoEntry, position: number, epoch: number): Promise<ExecutionEvent> {
  const id = childIdOf(parent.id, entry.step);
  const at = () => deps.clock.now();
  const held = await deps.store.load(id);
  if (held === undefined) {
    const error = new XreactorError('context_unavailable', `composed execution ${id} of reactor "${step.child!.name}" is gone (its retention expired); its steps cannot be undone`);
    return { type: 'xreactor.undo.finished', at: at(), epoch, position, step: entry.step, failure: { reason: 'raised', error: serializeError(error) } };
  }
  const status = statusOf(held.snapshot.value);
  const context = held.snapshot.context as ExecutionContext;
  if (status === 'aborted') return { type: 'xreactor.execution.abort', at: at(), reason: context.ending.abortReason ?? 'aborted' };
  if (status === 'cancelled' || status === 'failed') {
    return { type: 'xreactor.undo.finished', at: at(), epoch, position, step: entry.step, failure: null, nested: nested(entry.step, context.rollbackFailures) };
  }
  return { type: 'xreactor.undo.child', at: at(), epoch, position, step: entry.step };
}
