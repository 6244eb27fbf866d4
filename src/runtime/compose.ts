import type { ExecutionContext, ExecutionEvent, RollbackFailure } from '../../machines/execution-types.js';
import type { AnyReactorDefinition, CompiledStep } from '../definition/compiled.js';
import { StepFailure, XreactorError } from '../errors/index.js';
import { serializeError } from '../serialization/index.js';
import type { Store, UndoEntry } from '../store/store.js';
import type { Clock } from '../internal/clock.js';
import { buildResult } from './results.js';
import { resolveArguments } from './step-performer.js';

/** Who is advancing an execution (see host.ts). */
type Place = 'caller' | 'worker';

/** What a composed child's execution looks like to its parent's host. */
export interface ChildExecution {
  readonly id: string;
  readonly snapshot: { readonly value: unknown; readonly context: ExecutionContext };
  readonly outbox: readonly { readonly type: string; readonly params: unknown }[];
}

/** The host operations compose needs from the child reactor's host. */
export interface ChildHost {
  start(id: string, input: unknown, signal: AbortSignal, lineage: { parentId: string; path: readonly string[] }, place: Place): Promise<ChildExecution>;
  load(id: string): Promise<ChildExecution | undefined>;
  resume(held: ChildExecution, outbox: ChildExecution['outbox'], signal: AbortSignal, place: Place): Promise<void>;
  drive(held: ChildExecution, event: ExecutionEvent, signal: AbortSignal, place: Place): Promise<boolean>;
}

/** Services compose uses. */
export interface ComposeDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly hostFor: (definition: AnyReactorDefinition) => ChildHost;
}

/** The id of a compose step's child execution: deterministic, so a redelivery finds it. */
export function childIdOf(parentId: string, step: string): string {
  return `${parentId}.${step}`;
}

const statusOf = (value: unknown) => (typeof value === 'string' ? value : Object.keys(value as object)[0]);

/** A child's rollback failures as the parent reports them: the compose step joins their path. */
function nested(step: string, failures: readonly RollbackFailure[]): RollbackFailure[] {
  return failures.map((f) => ({ ...f, path: [step, ...(f.path ?? [])] }));
}

/**
 * Run (or, after a crash, continue) a compose step's child execution inline
 * and turn its end into the parent's step event. A child that failed rolled
 * itself back: the parent compensates nothing for the compose step. A child
 * that halted does not stop the parent. A stored failed child is never run again.
 */
export async function runCompose(
  deps: ComposeDeps,
  parent: ChildExecution & { readonly inputs: unknown },
  step: CompiledStep,
  attempt: number,
  signal: AbortSignal,
  place: Place,
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
  onStart(args);
  const child = step.child!;
  const host = deps.hostFor(child);
  const id = childIdOf(parent.id, step.name);
  let held = await host.load(id);
  if (held === undefined) {
    held = await host.start(id, args, signal, { parentId: parent.id, path: [...parent.snapshot.context.path, step.name] }, place);
  } else if (statusOf(held.snapshot.value) === 'running' || statusOf(held.snapshot.value) === 'rolling_back') {
    await host.resume(held, held.outbox, signal, place);
  }
  const status = statusOf(held.snapshot.value);
  const context = held.snapshot.context;
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
      return { type: 'xreactor.execution.abort', at: at(), reason: context.abortReason ?? 'aborted' };
    case 'paused':
      // An interrupt inside the child pauses the root; it is continued by path.
      return { type: 'xreactor.child.paused', at: at(), ...base };
    default: {
      const error = new XreactorError('child_unfinished', `composed execution ${id} of reactor "${child.name}" is ${status}; it cannot be used as a result`);
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args };
    }
  }
}

/**
 * Undo a completed compose step: roll back the child's completed steps,
 * newest first, and report their rollback failures as the parent's.
 */
export async function undoCompose(
  deps: ComposeDeps,
  parent: ChildExecution,
  step: CompiledStep,
  entry: UndoEntry,
  position: number,
  epoch: number,
  signal: AbortSignal,
  place: Place,
): Promise<ExecutionEvent> {
  const host = deps.hostFor(step.child!);
  const id = childIdOf(parent.id, entry.step);
  const at = () => deps.clock.now();
  const held = await host.load(id);
  if (held === undefined) {
    const error = new XreactorError('context_unavailable', `composed execution ${id} is gone (its retention expired); its steps cannot be undone`);
    return { type: 'xreactor.undo.finished', at: at(), epoch, position, step: entry.step, failure: { reason: 'raised', error: serializeError(error) } };
  }
  const status = statusOf(held.snapshot.value);
  if (status === 'completed' || status === 'halted') {
    await host.drive(held, { type: 'xreactor.operator.undo', at: at() }, signal, place);
  } else if (status === 'rolling_back') {
    await host.resume(held, held.outbox, signal, place);
  }
  if (statusOf(held.snapshot.value) === 'aborted') return { type: 'xreactor.execution.abort', at: at(), reason: held.snapshot.context.abortReason ?? 'aborted' };
  return { type: 'xreactor.undo.finished', at: at(), epoch, position, step: entry.step, failure: null, nested: nested(entry.step, held.snapshot.context.rollbackFailures) };
}
