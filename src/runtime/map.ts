/**
 * The owner's side of a map step (docs/design/map.md §4, §9.1, §10): its three performers,
 * mirroring `runCompose` / `undoCompose` in `compose.ts`. The map operation is an actor of kind
 * `map` (`<owner>.<step>`), run by the map host; the owner spawns it, awaits its settle and reads
 * its end.
 */
import type { ExecutionContext, ExecutionEvent, RollbackFailure } from '../../machines/execution-types.js';
import { executionStatusOf } from '../../machines/execution.js';
import type { MapContext } from '../../machines/map-types.js';
import { mapStatusOf, mapTagsOf, mapUndoSettled } from '../../machines/map.js';
import type { CompiledStep } from '../definition/compiled.js';
import { ArgumentResolutionError, StepFailure, XreactorError } from '../errors/index.js';
import { isOutcome, outcomeKind } from '../definition/outcomes.js';
import type { Fail } from '../definition/outcomes.js';
import { deserializeError, serializeError } from '../serialization/index.js';
import type { Store, UndoEntry } from '../store/store.js';
import type { Clock } from '../internal/clock.js';
import { buildResult } from './results.js';
import { resolveArguments } from './step-performer.js';
import type { StepScope } from './step-performer.js';
import { stepContext } from './step-performer.js';
import { mapResultsOf, mapResultsRef } from './map-results.js';

/** The map's stored input: the element template (non-element sources resolved) and the paged source's resolved args. */
export interface MapStoredInput {
  /** Element args with every non-element source resolved; `undefined`: the item itself is the input. */
  readonly template: Readonly<Record<string, unknown>> | undefined;
  readonly pagedArgs: unknown;
}

/** What `xreactor.map.spawn` carries: the stored input, and an array source's items (written to the source list). */
export interface MapSpawnArgs extends MapStoredInput {
  readonly items?: readonly unknown[];
}

/** The owner of a map step, as its host holds it. */
export interface MapOwner {
  readonly id: string;
  readonly inputs: unknown;
  readonly snapshot: { readonly context: ExecutionContext };
}

/** Services the owner's map performers use. */
export interface MapDeps {
  readonly store: Store;
  readonly clock: Clock;
}

/** The id of a map step's map operation: deterministic, so a redelivery finds it. */
export function mapIdOf(ownerId: string, step: string): string {
  return `${ownerId}.${step}`;
}

/** An element's rollback failures as the owner reports them: pathed `[step, '<index>', …]` and marked with the map step and index. */
function elementNested(step: string, index: number, failures: readonly RollbackFailure[]): RollbackFailure[] {
  return failures.map((f) => ({ ...f, path: [step, String(index), ...(f.path ?? [])], map: { step, index } }));
}

/** Resolve the map-level sources: the items (array source) or the paged args, and the element template. */
async function resolveMapArgs(step: CompiledStep, inputs: unknown, results: ReadonlyMap<string, unknown>, reactor: string): Promise<MapSpawnArgs> {
  const map = step.map!;
  let template: Record<string, unknown> | undefined;
  if (map.elementArgs !== undefined) {
    const shared = Object.fromEntries(Object.entries(map.elementArgs).filter(([, source]) => source.spec.kind !== 'element'));
    template = (await resolveArguments({ ...step, args: shared, contract: undefined }, inputs, results, reactor)) as Record<string, unknown>;
  }
  if (map.source.kind === 'paged') {
    const pagedArgs = map.source.args === undefined ? undefined : await resolveArguments({ ...step, args: map.source.args, contract: undefined }, inputs, results, reactor);
    return { template, pagedArgs };
  }
  const { items } = (await resolveArguments({ ...step, args: map.source.args, contract: undefined }, inputs, results, reactor)) as { items: unknown };
  if (!Array.isArray(items)) {
    throw new ArgumentResolutionError(`reactor "${reactor}" map "${step.name}": source is not an array (got ${items === null ? 'null' : typeof items}); a map's source must resolve to an array or be paged({ page })`, {
      step: step.name,
      reactor,
    });
  }
  return { template, pagedArgs: undefined, items };
}

/**
 * The map step at `attempt`: resolve its sources and spawn its map operation when it does not
 * exist yet (`map.spawn`); an unsettled map is awaited (`compose.awaiting`); a settled map's
 * end becomes the step's outcome (`collect`'s value, or the map's results; the failing element's
 * error; the halting element's reason).
 */
export async function runMap(
  deps: MapDeps,
  owner: MapOwner,
  step: CompiledStep,
  attempt: number,
  loadResults: () => Promise<ReadonlyMap<string, unknown>>,
  onStart: (args: unknown) => void,
  scope: StepScope,
): Promise<ExecutionEvent> {
  const reactor = owner.snapshot.context.reactor;
  const at = () => deps.clock.now();
  const base = { index: step.index, attempt };
  const id = mapIdOf(owner.id, step.name);
  const held = await deps.store.load(id);
  if (held === undefined) {
    let args: MapSpawnArgs;
    try {
      args = await resolveMapArgs(step, owner.inputs, await loadResults(), reactor);
    } catch (error) {
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args: undefined };
    }
    onStart(undefined);
    return { type: 'xreactor.map.spawn', at: at(), ...base, args };
  }
  if (!mapTagsOf(held.snapshot.value).has('settled')) return { type: 'xreactor.compose.awaiting', at: at(), ...base, args: undefined };
  const context = held.snapshot.context as MapContext;
  const map = step.map!;
  switch (mapStatusOf(held.snapshot.value)) {
    case 'completed': {
      const ref = mapResultsRef(id, context.total ?? context.offset, map.element.returns ?? null);
      if (map.collect === undefined) return { type: 'xreactor.step.succeeded', at: at(), ...base, args: undefined, result: ref };
      try {
        const value: unknown = await map.collect(mapResultsOf(deps.store, ref, map.element), stepContext(scope, step.name, attempt));
        if (isOutcome(value) && outcomeKind(value) === 'fail') {
          const carried = (value as Fail).error;
          const error = carried instanceof Error ? carried : new StepFailure(typeof carried === 'string' ? carried : `map "${step.name}": collect failed`, { step: step.name, reactor, detail: carried });
          return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: true, retryable: false, args: undefined };
        }
        return { type: 'xreactor.step.succeeded', at: at(), ...base, args: undefined, result: value };
      } catch (error) {
        return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: true, retryable: false, args: undefined };
      }
    }
    case 'failed': {
      if (context.failure !== null) return { type: 'xreactor.step.failed', at: at(), ...base, error: context.failure, started: true, retryable: false, args: undefined };
      const index = context.stop?.index ?? 0;
      const element = await deps.store.load(`${id}.${index}`);
      const elementContext = element?.snapshot.context as ExecutionContext | undefined;
      const result = elementContext === undefined ? undefined : await buildResult(map.element, 'failed', elementContext, deps.store);
      const error = result?.status === 'failed' ? result.error : new StepFailure(`element ${index} of map "${step.name}" failed`, { step: step.name, reactor });
      const nested = elementContext === undefined ? [] : elementNested(step.name, index, elementContext.rollbackFailures);
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: true, retryable: false, args: undefined, nested };
    }
    case 'halted': {
      const index = context.stop?.index ?? 0;
      const element = await deps.store.load(`${id}.${index}`);
      const halt = (element?.snapshot.context as ExecutionContext | undefined)?.ending.halt;
      return { type: 'xreactor.step.halted', at: at(), ...base, reason: halt?.reason ?? `element ${index} of map "${step.name}" halted` };
    }
    case 'aborted':
      return { type: 'xreactor.execution.abort', at: at(), reason: context.abortReason ?? 'aborted', map: { index: step.index } };
    default: {
      const error = new XreactorError('child_cancelled', `map ${id} of step "${step.name}" was cancelled${context.cancelReason ? ` (${context.cancelReason})` : ''}; it has no result`);
      return { type: 'xreactor.step.failed', at: at(), ...base, error: serializeError(error), started: false, retryable: false, args: undefined };
    }
  }
}

/** The failure of a map that is gone: its elements cannot be undone. */
function mapGone(id: string, step: string): RollbackFailure {
  const error = new XreactorError('context_unavailable', `map ${id} of step "${step}" is gone (its retention expired); its elements cannot be undone`);
  return { step, kind: 'undo', reason: 'raised', error: serializeError(error) };
}

/**
 * Compensate a failed map step: an undoable map is rolled back (`compensate.child`, awaited);
 * once it is undone, the compensation finishes with its elements' rollback failures. A map's
 * compensation never fails as a compensation (§10.6).
 */
export async function compensateMap(deps: MapDeps, owner: MapOwner, step: string, epoch: number): Promise<ExecutionEvent> {
  const id = mapIdOf(owner.id, step);
  const at = deps.clock.now();
  const held = await deps.store.load(id);
  if (held === undefined) return { type: 'xreactor.compensate.finished', at, epoch, failure: null, nested: [mapGone(id, step)] };
  if (mapUndoSettled(held.snapshot.value) || !mapTagsOf(held.snapshot.value).has('undoable')) {
    return { type: 'xreactor.compensate.finished', at, epoch, failure: null, nested: await rollbackFailuresOf(deps.store, id, held.snapshot.context as MapContext) };
  }
  return { type: 'xreactor.compensate.child', at, epoch, step };
}

/** Undo a completed map step's entry: the map rolls its elements back (`undo.child`, awaited); once undone, the entry is done. */
export async function undoMap(deps: MapDeps, owner: MapOwner, entry: UndoEntry, position: number, epoch: number): Promise<ExecutionEvent> {
  const id = mapIdOf(owner.id, entry.step);
  const at = deps.clock.now();
  const held = await deps.store.load(id);
  if (held === undefined) {
    const failure = mapGone(id, entry.step);
    return { type: 'xreactor.undo.finished', at, epoch, position, step: entry.step, failure: { reason: failure.reason, error: failure.error } };
  }
  if (mapUndoSettled(held.snapshot.value) || !mapTagsOf(held.snapshot.value).has('undoable')) {
    return { type: 'xreactor.undo.finished', at, epoch, position, step: entry.step, failure: null, nested: await rollbackFailuresOf(deps.store, id, held.snapshot.context as MapContext) };
  }
  return { type: 'xreactor.undo.child', at, epoch, position, step: entry.step };
}

/** A rolled back map's failures: its rollback actors' and its undoAll's. */
async function rollbackFailuresOf(store: Store, id: string, context: MapContext): Promise<RollbackFailure[]> {
  const failures = await store.readRollbackFailures(id);
  const undoAll = context.rollback?.undoAllFailure;
  return undoAll == null ? failures : [...failures, undoAll];
}

/** Whether an element execution's stored status means it has nothing to undo. */
export function elementNeedsNoUndo(value: unknown): boolean {
  const status = executionStatusOf(value);
  return status === 'failed' || status === 'halted' || status === 'cancelled';
}

export { deserializeError };
