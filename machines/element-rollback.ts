/*
 * The element-rollback machine (kind `element-rollback`), docs/design/map.md §7: one per started
 * element of a map that rolls back (id `<map>.rb-<position>`). Choices where the design leaves a
 * detail open:
 *
 * - Every outcome of a resolve names its `attempt` (1-based, never reused), so a resolve performed
 *   again after a crash cannot be taken for a later one, and each snooze's timer job has its own
 *   id (`<id>.timer.<attempt>`).
 * - `lockSnoozeMaxAttempts` counts lease checks: with N, checks 1 … N-1 that find the lease held
 *   park the actor, check N reports `element_in_flight`. No signal reaches the element on that
 *   path, so it is left untouched.
 * - The machine builds the errors of the outcomes it decides itself (`element_in_flight`,
 *   `context_unavailable`) as plain `XreactorError` data without a stack, so a transition stays
 *   deterministic; they deserialize as `XreactorError` with their code.
 * - An element whose undo ends `aborted` (its caller was interrupted mid-undo) has not been undone:
 *   the actor goes back to `resolving` and, once the element is free, signals a new undo (keyed
 *   `undo.<id>.<n>`; the first one is `undo.<id>`). The element's final settle carries all its
 *   rollback failures, so none are kept from the aborted round.
 * - Any other settle of the element ends its undo: outcome `undone`, or `failed` with its rollback
 *   failures pathed `[step, '<index>', …]` and marked with the map step and index.
 * - The report is written once, on entering `reported` (final): `map.rollbackReport` with the
 *   conditional `rbthrow.<k>` (last position of its throw only) and `rolledback` signals.
 */
import { assign, enqueueActions, setup } from 'xstate';
import type { ErrorData } from '../src/internal/error-data.js';
import type { ActorTag } from './registry-types.js';
import type {
  ElementRollbackContext,
  ElementRollbackEffect,
  ElementRollbackEvent,
  ElementRollbackInput,
  ElementRollbackStatus,
  ElementRollbackWrite,
} from './element-rollback-types.js';
import type { RollbackFailure } from './execution-types.js';

export * from './element-rollback-types.js';

type EventOf<T extends ElementRollbackEvent['type']> = Extract<ElementRollbackEvent, { type: T }>;
type ParamsOf<U extends { type: string; params: unknown }, T extends U['type']> = Extract<U, { type: T }>['params'];

/** Tags of the element-rollback machine's states, declared once (see {@link elementRollbackTagsOf}). */
export const ELEMENT_ROLLBACK_STATE_TAGS = {
  resolving: ['recoverable'],
  parked: ['parked', 'recoverable'],
  undoing: ['awaiting'],
  reported: ['settled'],
} as const satisfies Record<string, readonly ActorTag[]>;

type TaggedState = keyof typeof ELEMENT_ROLLBACK_STATE_TAGS;
const tagsAt = (path: TaggedState): ActorTag[] => [...ELEMENT_ROLLBACK_STATE_TAGS[path]];
const TAG_SETS: ReadonlyMap<string, ReadonlySet<ActorTag>> = new Map(Object.entries(ELEMENT_ROLLBACK_STATE_TAGS).map(([path, tags]) => [path, new Set<ActorTag>(tags)]));
const NO_TAGS: ReadonlySet<ActorTag> = new Set();

/** The tags of a stored element-rollback state value (its states are all top-level). */
export function elementRollbackTagsOf(value: unknown): ReadonlySet<ActorTag> {
  return typeof value === 'string' ? (TAG_SETS.get(value) ?? NO_TAGS) : NO_TAGS;
}

/** The stored status of an element-rollback state value: `completed` once it reported, else `running`. */
export function elementRollbackStatusOf(value: unknown): ElementRollbackStatus {
  return value === 'reported' ? 'completed' : 'running';
}

/** No-op implementations: these actions are data the host performs after the commit. */
const hostPerformed = <P>() => (_: unknown, _params: P): void => undefined;

const kernelError = (code: string, message: string): ErrorData => ({ name: 'XreactorError', code, message, retryable: false });
/** One failure naming the element as a whole (it was not undone at all). */
const elementFailure = (c: ElementRollbackContext, error: ErrorData): RollbackFailure => ({
  step: c.step,
  kind: 'undo',
  reason: 'raised',
  error,
  map: { step: c.step, index: c.index },
});
const unavailable = (c: ElementRollbackContext): RollbackFailure =>
  elementFailure(c, kernelError('context_unavailable', `element ${c.index} of map "${c.step}" (${c.element}) is gone: its retention expired; its steps cannot be undone`));
const inFlight = (c: ElementRollbackContext, checks: number): RollbackFailure =>
  elementFailure(
    c,
    kernelError(
      'element_in_flight',
      `element ${c.index} of map "${c.step}" (${c.element}) is still held by another process after ${checks} lease checks; it was not undone (raise lockSnoozeMaxAttempts, or undo the run again once it is free)`,
    ),
  );
const undoKey = (c: ElementRollbackContext): string => (c.undos === 0 ? `undo.${c.id}` : `undo.${c.id}.${c.undos}`);

/**
 * The element-rollback actor: pure. It decides whether an element needs undoing, waits for its
 * lease (parked, with a delayed wake), asks the element to undo itself and awaits it, then
 * reports the outcome to its map exactly once. Time arrives in events.
 */
export function createElementRollbackMachine() {
  return setup({
    types: {
      context: {} as ElementRollbackContext,
      events: {} as ElementRollbackEvent,
      input: {} as ElementRollbackInput,
    },
    actions: {
      'xreactor.effect.rollback.resolve': hostPerformed<ParamsOf<ElementRollbackEffect, 'xreactor.effect.rollback.resolve'>>(),
      'xreactor.effect.wait': hostPerformed<ParamsOf<ElementRollbackEffect, 'xreactor.effect.wait'>>(),
      'xreactor.effect.awaitChild': hostPerformed<ParamsOf<ElementRollbackEffect, 'xreactor.effect.awaitChild'>>(),
      'xreactor.effect.finished': hostPerformed<ParamsOf<ElementRollbackEffect, 'xreactor.effect.finished'>>(),
      'xreactor.write.map.rollbackReport': hostPerformed<ParamsOf<ElementRollbackWrite, 'xreactor.write.map.rollbackReport'>>(),
      'xreactor.write.signal': hostPerformed<ParamsOf<ElementRollbackWrite, 'xreactor.write.signal'>>(),
      'xreactor.write.awaits': hostPerformed<ParamsOf<ElementRollbackWrite, 'xreactor.write.awaits'>>(),
      /** The outcome is decided: written once with the report, and the map told by the conditions the store evaluates. */
      report: enqueueActions(({ context: c, enqueue }) => {
        const at = c.updatedAt;
        enqueue({
          type: 'xreactor.write.map.rollbackReport',
          params: { map: c.map, position: c.position, index: c.index, outcome: c.outcome!, failures: c.failures, throw: c.throw, lastOfThrow: c.lastOfThrow },
        });
        if (c.lastOfThrow) {
          enqueue({ type: 'xreactor.write.signal', params: { to: c.map, event: { type: 'xreactor.map.rollbackThrowSettled', at, throw: c.throw }, dedupeKey: `rbthrow.${c.throw}`, condition: 'rollbackReportNew' } });
        }
        enqueue({ type: 'xreactor.write.signal', params: { to: c.map, event: { type: 'xreactor.map.rolledBack', at }, dedupeKey: 'rolledback', condition: 'rolledBack' } });
        enqueue({ type: 'xreactor.effect.finished', params: { status: 'completed' } });
      }),
      park: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.rollback.contended'>;
        return { contended: context.contended + 1, parkedUntil: e.at + Math.max(0, e.delayMs), updatedAt: e.at };
      }),
      /** Ask the element to undo itself (its own machine pops one entry per commit), and await its settle. */
      startUndo: enqueueActions(({ context, event, enqueue }) => {
        enqueue({ type: 'xreactor.write.signal', params: { to: context.element, event: { type: 'xreactor.operator.undo', at: event.at, from: context.id }, dedupeKey: undoKey(context) } });
        enqueue({ type: 'xreactor.write.awaits', params: { actors: [context.element] } });
        enqueue.assign({ undos: context.undos + 1, updatedAt: event.at });
      }),
    },
    guards: {
      isCurrentAttempt: ({ context, event }) => (event as EventOf<'xreactor.rollback.undo'>).attempt === context.attempt,
      lastLeaseCheck: ({ context, event }) => (event as EventOf<'xreactor.rollback.contended'>).attempt === context.attempt && context.contended + 1 >= context.maxAttempts,
      fromElement: ({ context, event }) => (event as EventOf<'xreactor.child.settled'>).child === context.element,
      elementUndoAborted: ({ context, event }) => {
        const e = event as EventOf<'xreactor.child.settled'>;
        return e.child === context.element && e.status === 'aborted';
      },
    },
  }).createMachine({
    id: 'element-rollback',
    // XState's transition() resolves the initial state without input on every call; tolerate it.
    context: ({ input }: { input: ElementRollbackInput | undefined }) => ({
      id: input?.id ?? '',
      map: input?.map ?? '',
      step: input?.step ?? '',
      element: input?.element ?? '',
      position: input?.position ?? 0,
      index: input?.index ?? 0,
      throw: input?.throw ?? 0,
      lastOfThrow: input?.lastOfThrow ?? false,
      mode: input?.mode ?? 'inline',
      attempt: 1,
      contended: 0,
      maxAttempts: Math.max(1, input?.maxAttempts ?? 1),
      undos: 0,
      parkedUntil: null,
      outcome: null,
      failures: [],
      createdAt: input?.at ?? 0,
      updatedAt: input?.at ?? 0,
    }),
    initial: 'resolving',
    states: {
      resolving: {
        tags: tagsAt('resolving'),
        entry: { type: 'xreactor.effect.rollback.resolve', params: ({ context }) => ({ element: context.element, attempt: context.attempt }) },
        on: {
          'xreactor.rollback.notNeeded': { guard: 'isCurrentAttempt', target: 'reported', actions: assign(({ event }) => ({ outcome: 'not_needed', updatedAt: event.at })) },
          'xreactor.rollback.unavailable': {
            guard: 'isCurrentAttempt',
            target: 'reported',
            actions: assign(({ context, event }) => ({ outcome: 'context_unavailable', failures: [unavailable(context)], updatedAt: event.at })),
          },
          'xreactor.rollback.contended': [
            {
              guard: 'lastLeaseCheck',
              target: 'reported',
              actions: assign(({ context, event }) => ({ outcome: 'element_in_flight', contended: context.contended + 1, failures: [inFlight(context, context.contended + 1)], updatedAt: event.at })),
            },
            { guard: 'isCurrentAttempt', target: 'parked', actions: 'park' },
          ],
          'xreactor.rollback.undo': { guard: 'isCurrentAttempt', target: 'undoing', actions: 'startUndo' },
        },
      },
      parked: {
        tags: tagsAt('parked'),
        entry: { type: 'xreactor.effect.wait', params: ({ context }) => ({ attempt: context.attempt, delayMs: context.parkedUntil! - context.updatedAt }) },
        on: {
          'xreactor.rollback.retry': {
            guard: 'isCurrentAttempt',
            target: 'resolving',
            actions: assign(({ context, event }) => ({ attempt: context.attempt + 1, parkedUntil: null, updatedAt: event.at })),
          },
        },
      },
      undoing: {
        tags: tagsAt('undoing'),
        entry: { type: 'xreactor.effect.awaitChild', params: ({ context }) => ({ child: context.element }) },
        on: {
          'xreactor.child.settled': [
            // Interrupted mid-undo: not undone yet; resolve again (the lease decides when) and undo again.
            {
              guard: 'elementUndoAborted',
              target: 'resolving',
              actions: [
                { type: 'xreactor.write.awaits', params: { actors: [] } },
                assign(({ context, event }) => ({ attempt: context.attempt + 1, contended: 0, updatedAt: event.at })),
              ],
            },
            {
              guard: 'fromElement',
              target: 'reported',
              actions: [
                { type: 'xreactor.write.awaits', params: { actors: [] } },
                assign(({ context, event }) => {
                  const failures = (event.rollbackFailures ?? []).map(
                    (f): RollbackFailure => ({ ...f, path: [context.step, String(context.index), ...(f.path ?? [])], map: { step: context.step, index: context.index } }),
                  );
                  return { outcome: (failures.length === 0 ? 'undone' : 'failed'), failures, updatedAt: event.at };
                }),
              ],
            },
          ],
          'xreactor.child.lost': {
            guard: 'fromElement',
            target: 'reported',
            actions: [
              { type: 'xreactor.write.awaits', params: { actors: [] } },
              assign(({ context, event }) => ({ outcome: 'context_unavailable', failures: [unavailable(context)], updatedAt: event.at })),
            ],
          },
        },
      },
      reported: { type: 'final', tags: tagsAt('reported'), entry: 'report' },
    },
  });
}

/** The element-rollback machine. */
export type ElementRollbackMachine = ReturnType<typeof createElementRollbackMachine>;
