import { assign, enqueueActions, setup } from 'xstate';
import { backoffDelayMs } from '../src/definition/retry.js';
import { NO_ENDING, NO_INTERRUPTS } from './execution-types.js';
import type {
  ActorTag,
} from './registry-types.js';
import type {
  ExecutionContext,
  ExecutionEffect,
  ExecutionEvent,
  ExecutionInput,
  ExecutionPlanView,
  ExecutionStatus,
  ExecutionWrite,
  RollbackFailure,
} from './execution-types.js';

export * from './execution-types.js';

type EventOf<T extends ExecutionEvent['type']> = Extract<ExecutionEvent, { type: T }>;
type ParamsOf<U extends { type: string; params: unknown }, T extends U['type']> = Extract<U, { type: T }>['params'];

/**
 * Tags of the execution machine's states, declared once: the machine's state nodes carry them, and
 * {@link executionTagsOf} answers the same question for a stored state value without the machine
 * (a process that does not know the reactor, the sweeper, `find`).
 */
export const EXECUTION_STATE_TAGS = {
  pending: [],
  // Not recoverable by a sweep: its start job is the map's (a lost one is redispatched by the map).
  queued: [],
  'running.handedOff': ['recoverable'],
  'running.executing': ['recoverable'],
  'running.awaiting': ['awaiting'],
  'running.parked': ['parked', 'recoverable'],
  paused: ['paused'],
  'rolling_back.compensating': ['recoverable'],
  'rolling_back.compensatingChild': ['awaiting'],
  'rolling_back.undoingEntry': ['recoverable'],
  'rolling_back.undoingChild': ['awaiting'],
  'rolling_back.undoingPausedChild': ['awaiting'],
  completed: ['settled', 'undoable'],
  halted: ['settled', 'undoable'],
  aborted: ['settled', 'undoable'],
  failed: ['settled'],
  cancelled: ['settled'],
} as const satisfies Record<string, readonly ActorTag[]>;

type TaggedState = keyof typeof EXECUTION_STATE_TAGS;
const tagsAt = (path: TaggedState): ActorTag[] => [...EXECUTION_STATE_TAGS[path]];

/** The tags of a stored execution state value (`'paused'`, `{ running: 'awaiting' }`, ...). */
export function executionTagsOf(value: unknown): ReadonlySet<ActorTag> {
  if (typeof value === 'string') return TAG_SETS.get(value) ?? NO_TAGS;
  // A compound state value has one key: the top-level state, with its substate as the value.
  for (const top in value as Record<string, string>) return TAG_SETS.get(`${top}.${(value as Record<string, string>)[top]}`) ?? NO_TAGS;
  return NO_TAGS;
}

/** The lifecycle status of a stored execution state value: its top-level state. */
export function executionStatusOf(value: unknown): ExecutionStatus {
  return (typeof value === 'string' ? value : Object.keys(value as object)[0]) as ExecutionStatus;
}

/** One frozen set per tagged state, built once: asked on every transition. */
const TAG_SETS: ReadonlyMap<string, ReadonlySet<ActorTag>> = new Map(Object.entries(EXECUTION_STATE_TAGS).map(([path, tags]) => [path, new Set<ActorTag>(tags)]));
const NO_TAGS: ReadonlySet<ActorTag> = new Set();

/** No-op implementations: these actions are data the host performs after the commit. */
const hostPerformed = <P>() => (_: unknown, _params: P): void => undefined;

/**
 * The execution actor of one reactor: pure, versioned. It decides which step
 * runs, when to retry, what to compensate and which undo-stack entry to undo
 * next; the host performs the effects and feeds their outcomes back as events.
 * Time arrives in events (`at`), never from a clock.
 */
export function createExecutionMachine(plan: ExecutionPlanView) {
  const stepCount = plan.steps.length;
  const stepAt = (index: number) => {
    const step = plan.steps[index];
    if (step === undefined) throw new RangeError(`reactor "${plan.reactor}" has no step at plan index ${index}`);
    return step;
  };
  const isCurrent = (context: ExecutionContext, event: { index: number; attempt: number }) =>
    event.index === context.cursor && event.attempt === context.attempt;
  // A composed child tells its parent (a root has none: `to` is null and nothing is sent), once per
  // settle: the epoch tells a later undo's settle apart.
  const terminal = (status: ExecutionStatus) => [
    { type: 'xreactor.effect.finished' as const, params: { status } },
    { type: 'reportSettle' as const, params: { status } },
  ];
  /**
   * A map step that ended with the run (interrupted, or halted by an element) without being
   * rolled back: its completed elements are the step's pending compensation, so an undo(id)
   * rolls them back before the undo stack.
   */
  const mapPendingCompensation = (index: number, name: string, code: string, what: string) => ({
    step: stepAt(index).name,
    index,
    error: { name, code, message: `map step "${stepAt(index).name}" ${what}`, retryable: false },
    args: undefined,
    compensationPending: true,
    compensationFailed: false,
  });
  /** A composed child tells its parent it left its pause by itself (resumed, or failed there). */
  const signalResumed = {
    type: 'xreactor.write.signal' as const,
    params: ({ context, event }: { context: ExecutionContext; event: ExecutionEvent }) => ({
      to: parentToTell(context),
      event: { type: 'xreactor.child.resumed' as const, at: event.at, child: context.executionId },
      dedupeKey: `${context.executionId}.resumed.${context.interrupts.pauses}`,
    }),
  };
  /** Entering a pause: a composed child tells its parent which interrupts are ready below it. */
  const signalPaused = {
    type: 'xreactor.write.signal' as const,
    params: ({ context }: { context: ExecutionContext }) => {
      const paused = context.interrupts.paused!;
      const ready = [
        ...paused.ready.map((r) => r.step),
        ...paused.nested.map((p) => (paused.child === null ? p : [paused.child, ...(typeof p === 'string' ? [p] : p)])),
      ];
      return { to: parentToTell(context), event: { type: 'xreactor.child.paused' as const, at: context.updatedAt, child: context.executionId, ready }, dedupeKey: `${context.executionId}.paused.${context.interrupts.pauses}` };
    },
  };
  const childId = (context: ExecutionContext, step: string) => `${context.executionId}.${step}`;
  /** The interrupt bookkeeping once the run no longer waits in a pause. */
  const unpaused = (context: ExecutionContext) => (context.interrupts.paused === null ? context.interrupts : { ...context.interrupts, paused: null });
  /*
   * What `running.next` decides at position `n`, read ahead so that a transition can go where it
   * would send the run without the extra microstep: position `n` is the hand-off point, a plain
   * step to run at once (not the hand-off point, not an interrupt), or the end with nothing
   * waiting there (the run completes). An interrupt, a hand-off and the rest are left to `next`.
   */
  const handsOffAt = (context: ExecutionContext, n: number) => plan.handoffIndex !== null && !context.handedOff && n === plan.handoffIndex;
  const isPlainAt = (context: ExecutionContext, n: number) => n < stepCount && stepAt(n).interrupt === undefined && !handsOffAt(context, n);
  const completesAt = (context: ExecutionContext, n: number) => n >= stepCount && !handsOffAt(context, n);
  /** Whether the step after the current one is a plain step: the run goes on past a success straight into it. */
  const nextIsPlain = (context: ExecutionContext) => isPlainAt(context, context.cursor + 1);
  type Succeeded = { readonly context: ExecutionContext; readonly event: ExecutionEvent };
  /** A guard: the event is the current step's success, of a tracked step or not, with a plain next step or not (checked in that order of the transitions, so `toPlain: false` is the rest). */
  const currentSuccess =
    ({ tracked, toPlain }: { readonly tracked: boolean; readonly toPlain: boolean }) =>
    ({ context, event }: Succeeded) =>
      isCurrent(context, event as EventOf<'xreactor.step.succeeded'>) && stepAt(context.cursor).tracked === tracked && (!toPlain || nextIsPlain(context));
  /** A guard: the event is the last step's success (tracked or not), and nothing waits at the end (no hand-off there): the run completes. */
  const currentLastSuccess =
    ({ tracked }: { readonly tracked: boolean }) =>
    ({ context, event }: Succeeded) =>
      isCurrent(context, event as EventOf<'xreactor.step.succeeded'>) && stepAt(context.cursor).tracked === tracked && completesAt(context, context.cursor + 1);
  const succeededOf = (event: ExecutionEvent) => event as EventOf<'xreactor.step.succeeded'>;
  const undoneOf = (event: ExecutionEvent) => event as EventOf<'xreactor.undo.finished'>;
  /** What an undone entry writes: the entry popped, its trace entry. */
  const popUndone = { type: 'xreactor.write.popUndo' as const, params: ({ event }: Succeeded) => ({ position: undoneOf(event).position }) };
  const traceUndone = {
    type: 'xreactor.write.trace' as const,
    params: ({ event }: Succeeded) => {
      const e = undoneOf(event);
      return { type: e.failure === null ? ('undo' as const) : ('undo_failure' as const), step: e.step, at: e.at, ...(e.failure === null ? {} : { error: e.failure.error, reason: e.failure.reason }) };
    },
  };
  /** The event is the outcome of the undo entry the rollback is at (its epoch, its position). */
  const isCurrentUndo = (context: ExecutionContext, event: ExecutionEvent) => {
    const e = event as EventOf<'xreactor.undo.finished'>;
    return e.epoch === context.rollbackEpoch && e.position === context.undoDepth - 1;
  };
  /** What a success writes: its result, its undo entry (a tracked step), its trace entry. */
  const writeSuccessResult = { type: 'xreactor.write.result' as const, params: ({ event }: Succeeded) => ({ step: stepAt(succeededOf(event).index).name, value: succeededOf(event).result }) };
  const pushSuccessUndo = {
    type: 'xreactor.write.pushUndo' as const,
    params: ({ context, event }: Succeeded) => {
      const e = succeededOf(event);
      const step = stepAt(e.index);
      const bare = step.child === 'map';
      return { position: context.undoDepth, step: step.name, args: bare ? undefined : e.args, result: bare ? undefined : e.result };
    },
  };
  const traceSuccess = { type: 'xreactor.write.trace' as const, params: ({ event }: Succeeded) => ({ type: 'run' as const, step: stepAt(succeededOf(event).index).name, attempt: succeededOf(event).attempt, at: event.at }) };

  /**
   * An async unit's settle, consumed in a state that does not wait for it: nothing else changes (a
   * reader reads the unit's end when it runs). On every state that may dispatch or outlive a unit
   * and is not final (XState would take a transition of the machine's root even in a final state):
   * in `failed` and `cancelled` no transition applies, so the host discards the late entry.
   */
  const consumeUnitSettle = { 'xreactor.unit.settled': { actions: 'consumeUnitSettle' as const } };
  /** The parent a composed child tells of its pauses: none for a root, nor for an async reactor's child (independent of its parent). */
  const parentToTell = (context: ExecutionContext) => (context.origin.async === true ? null : context.origin.parentId);
  const fromChild = ({ context, event }: { context: ExecutionContext; event: ExecutionEvent }) => context.awaiting !== null && (event as { child?: string }).child === context.awaiting.child;
  const fromPausedChild = ({ context, event }: { context: ExecutionContext; event: ExecutionEvent }) =>
    context.interrupts.paused?.child != null && (event as { child?: string }).child === childId(context, context.interrupts.paused.child);

  return setup({
    types: {
      context: {} as ExecutionContext,
      events: {} as ExecutionEvent,
      input: {} as ExecutionInput,
    },
    actions: {
      advancePastSuccess: assign(({ context, event }) => ({
        cursor: context.cursor + 1,
        attempt: 1,
        undoDepth: context.undoDepth + (stepAt((event as EventOf<'xreactor.step.succeeded'>).index).tracked ? 1 : 0),
        updatedAt: event.at,
      })),
      'xreactor.effect.paused': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.paused'>>(),
      'xreactor.effect.handOff': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.handOff'>>(),
      'xreactor.effect.runStep': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.runStep'>>(),
      'xreactor.effect.wait': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.wait'>>(),
      'xreactor.effect.compensate': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.compensate'>>(),
      'xreactor.effect.undo': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.undo'>>(),
      'xreactor.effect.finished': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.finished'>>(),
      'xreactor.write.result': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.result'>>(),
      'xreactor.write.pushUndo': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.pushUndo'>>(),
      'xreactor.write.popUndo': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.popUndo'>>(),
      'xreactor.write.trace': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.trace'>>(),
      'xreactor.write.signal': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.signal'>>(),
      'xreactor.write.spawn': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.spawn'>>(),
      'xreactor.write.awaits': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.awaits'>>(),
      'xreactor.effect.awaitChild': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.awaitChild'>>(),
      'xreactor.effect.element.gate': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.element.gate'>>(),
      'xreactor.write.mapSignal': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.mapSignal'>>(),
      'xreactor.write.mapReport': hostPerformed<ParamsOf<ExecutionWrite, 'xreactor.write.mapReport'>>(),
      'xreactor.effect.dispatchUnit': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.dispatchUnit'>>(),
      'xreactor.effect.awaitUnit': hostPerformed<ParamsOf<ExecutionEffect, 'xreactor.effect.awaitUnit'>>(),
      consumeUnitSettle: assign(({ event }) => ({ updatedAt: event.at })),
      /** An async unit step: its unit (or child execution) is spawned with this commit, dispatched after it, and never pushed on the undo stack. */
      dispatchUnit: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.unit.dispatch'>;
        const step = stepAt(e.index);
        const unit = childId(context, step.name);
        const kind = step.async === 'unit' ? ('unit' as const) : ('execution' as const);
        enqueue({ type: 'xreactor.write.spawn', params: { step: step.name, child: unit, input: e.args, kind, async: true } });
        // The step's result is a reference to its unit until a reader reads the unit's end.
        enqueue({ type: 'xreactor.write.result', params: { step: step.name, value: { xreactorUnit: { id: unit, kind, dispatchedAt: e.at } } } });
        enqueue({ type: 'xreactor.write.trace', params: { type: 'dispatched', step: step.name, attempt: e.attempt, at: e.at, actors: [unit] } });
        enqueue({ type: 'xreactor.effect.dispatchUnit', params: { unit, kind } });
        enqueue.assign({ cursor: context.cursor + 1, attempt: 1, updatedAt: e.at });
      }),
      /** A run starts; an element that starts is on its map's started list (the rollback's work list), with the same commit. */
      startElement: enqueueActions(({ context, event, enqueue }) => {
        enqueue.assign({ updatedAt: event.at });
        // A queued fan-out element's start is gated: the store refuses it once its map stopped dispatching.
        const gate = event.type === 'xreactor.element.start' ? { gate: true } : {};
        if (context.map !== null) enqueue({ type: 'xreactor.write.mapReport', params: { started: { map: context.map.id, index: context.map.index, ...gate } } });
      }),
      /** Who is told of a settle: the rollback actor undoing an element, an element's map (through its slot), or the parent. */
      reportSettle: enqueueActions(({ context, enqueue }, params: unknown) => {
        const { status } = params as { readonly status: ExecutionStatus };
      const at = context.updatedAt;
      const settled = { type: 'xreactor.child.settled' as const, at, child: context.executionId, status };
      if (context.ending.undoBy !== null) {
        // An element's undo ended: its rollback actor is told, with the element's rollback failures.
        enqueue({
          type: 'xreactor.write.signal',
          params: { to: context.ending.undoBy, kind: 'element-rollback', event: { ...settled, rollbackFailures: context.rollbackFailures }, dedupeKey: `${context.executionId}.settled.${status}.${context.rollbackEpoch}` },
        });
        return;
      }
      const link = context.map;
      if (link !== null) {
        // An element's forward end: its outcome goes into the map's slot; the map is signalled only by the conditions the store decides.
        const outcome = link.skipped === true ? 'skipped' : status === 'completed' || status === 'failed' || status === 'halted' || status === 'aborted' ? status : 'cancelled';
        const stops = outcome === 'halted' || outcome === 'aborted' || (outcome === 'failed' && link.atomic);
        enqueue({ type: 'xreactor.write.mapReport' as const, params: { report: { map: link.id, index: link.index, outcome, stops, at } } });
        if (link.lastOfThrow) {
          enqueue({ type: 'xreactor.write.mapSignal', params: { to: link.id, event: { type: 'xreactor.map.throwSettled', at, throw: link.throw }, dedupeKey: `throw.${link.throw}`, condition: 'reportNew' } });
        }
        enqueue({ type: 'xreactor.write.mapSignal', params: { to: link.id, event: { type: 'xreactor.map.settled', at }, dedupeKey: 'settled', condition: 'mapSettled' } });
        return;
      }
      if (context.origin.async === true) {
        // An async reactor's child tells its parent once that it settled (a reader of it may wait).
        enqueue({ type: 'xreactor.write.signal', params: { to: context.origin.parentId, event: { type: 'xreactor.unit.settled', at, child: context.executionId }, dedupeKey: `${context.executionId}.settled` } });
        return;
      }
      // A composed child tells its parent (a root has none: `to` is null and nothing is sent), once per
      // settle: the epoch tells a later undo's settle apart.
      enqueue({ type: 'xreactor.write.signal' as const, params: { to: context.origin.parentId, event: settled, dedupeKey: `${context.executionId}.settled.${status}.${context.rollbackEpoch}` } });
      }),
      /** A fan-out element whose map stopped dispatching before it started: it ends skipped, never having run. */
      skipElement: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.element.skip'>;
        enqueue.assign({ map: { ...context.map!, skipped: true as const }, ending: { ...context.ending, cancelReason: e.reason }, updatedAt: e.at });
        enqueue({ type: 'xreactor.write.trace', params: { type: 'cancelled', at: e.at, reason: e.reason } });
      }),
      // An interruption (signal, shutdown) from running or rolling back: no rollback runs.
      recordAbort: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.execution.abort'>;
        enqueue.assign({ ending: { ...context.ending, abortReason: e.reason }, awaiting: null, updatedAt: e.at });
        // A map interrupted with the run has completed (and aborted) elements: the map step is
        // pending compensation, so a later undo(id) rolls them back before the undo stack.
        const mapIndex = e.map?.index ?? (context.awaiting?.kind === 'map' && context.awaiting.purpose === 'run' ? context.awaiting.index : undefined);
        if (mapIndex !== undefined && context.failure === null) {
          enqueue.assign({ failure: mapPendingCompensation(mapIndex, 'ExecutionAbortedError', 'execution_aborted', `was interrupted: ${e.reason}`) });
        }
        if (context.awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
        enqueue({ type: 'xreactor.write.trace', params: { type: 'aborted', at: e.at, reason: e.reason } });
      }),
      enterPause: assign(({ context }) => {
        const group = stepAt(context.cursor).interrupt!.group.filter((name) => !context.interrupts.resumed.includes(name));
        const timeoutOf = (name: string) => plan.steps.find((st) => st.name === name)?.interrupt?.timeoutMs ?? null;
        // An interrupt's deadline runs from when it first became ready, not from a later re-pause.
        const readyAt = { ...context.interrupts.readyAt };
        for (const step of group) readyAt[step] ??= context.updatedAt;
        return {
          interrupts: {
            ...context.interrupts,
            readyAt,
            paused: {
              ready: group.map((step) => {
                const ms = timeoutOf(step);
                return { step, timeoutAt: ms === null ? null : readyAt[step]! + ms };
              }),
              child: null,
              nested: [],
              since: context.updatedAt,
            },
          },
        };
      }),
      // A step failed for good (or a composed child failed, or is gone): roll back.
      recordStepFailure: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.step.failed'>;
        enqueue({ type: 'xreactor.write.trace', params: { type: 'failed', step: stepAt(e.index).name, attempt: e.attempt, at: e.at, error: e.error } });
        enqueue.assign({
          failure: { step: stepAt(e.index).name, index: e.index, error: e.error, args: e.args, compensationPending: e.started, compensationFailed: false },
          ending: { ...context.ending, rollbackReason: 'failure' as const },
          rollbackFailures: [...context.rollbackFailures, ...(e.nested ?? [])],
          rollbackEpoch: context.rollbackEpoch + 1,
          awaiting: null,
          updatedAt: e.at,
        });
      }),
      /** Waiting for the compose step's child: record it and what it is awaited for. */
      startAwaiting: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.compose.spawn' | 'xreactor.compose.awaiting' | 'xreactor.map.spawn'>;
        const step = stepAt(e.index).name;
        const child = childId(context, step);
        const kind = e.type === 'xreactor.map.spawn' || stepAt(e.index).child === 'map' ? ('map' as const) : ('execution' as const);
        // A map step's entry carries no arguments (D11): the map's input is its own.
        const args = kind === 'map' ? undefined : e.args;
        enqueue.assign({ awaiting: { step, index: e.index, attempt: e.attempt, child, args, purpose: 'run', position: null, ...(kind === 'map' ? { kind } : {}) }, updatedAt: e.at });
        if (e.type === 'xreactor.compose.spawn') enqueue({ type: 'xreactor.write.spawn', params: { step, child, input: e.args } });
        if (e.type === 'xreactor.map.spawn') enqueue({ type: 'xreactor.write.spawn', params: { step, child, input: e.args, kind: 'map' } });
        enqueue({ type: 'xreactor.write.awaits', params: { actors: [child] } });
        enqueue({ type: 'xreactor.write.trace', params: { type: 'awaiting', step, at: e.at, actors: [child] } });
      }),
      stopAwaiting: enqueueActions(({ event, enqueue }) => {
        enqueue.assign({ awaiting: null, updatedAt: event.at });
        enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
      }),
      // A cancel ends any wait: the awaited child was reached by the same cascading signal.
      recordCancel: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.operator.cancel'>;
        enqueue.assign({ ending: { ...context.ending, cancelReason: e.reason }, interrupts: unpaused(context), awaiting: null, updatedAt: e.at });
        if (context.awaiting !== null || context.interrupts.paused?.child != null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
      }),
      /** An undo entry's outcome counted: one entry less, its failures kept. */
      recordUndone: assign(({ context, event }) => {
        const e = undoneOf(event);
        return {
          undoDepth: context.undoDepth - 1,
          rollbackFailures: [...context.rollbackFailures, ...(e.nested ?? []), ...(e.failure === null ? [] : [{ step: e.step, kind: 'undo', ...e.failure } satisfies RollbackFailure])],
          updatedAt: e.at,
        };
      }),
      recordOperatorUndo: assign(({ context, event }) => ({
        // An element undone for its map's rollback tells the rollback actor that asked (`from`) when it ends.
        ending: { ...context.ending, rollbackReason: 'operator' as const, undoBy: context.map !== null ? ((event as EventOf<'xreactor.operator.undo'>).from ?? null) : context.ending.undoBy },
        rollbackEpoch: context.rollbackEpoch + 1,
        updatedAt: event.at,
      })),
    },
    guards: {
      isCurrentTrackedSuccessToPlain: currentSuccess({ tracked: true, toPlain: true }),
      isCurrentUntrackedSuccessToPlain: currentSuccess({ tracked: false, toPlain: true }),
      isCurrentTrackedSuccessToEnd: currentLastSuccess({ tracked: true }),
      isCurrentUntrackedSuccessToEnd: currentLastSuccess({ tracked: false }),
      firstIsPlain: ({ context }) => context.map?.fanOut === true && isPlainAt(context, context.cursor),
      startsPlain: ({ context }) => isPlainAt(context, context.cursor),
      isCurrentTrackedSuccess: currentSuccess({ tracked: true, toPlain: false }),
      hasNextStep: ({ context }) => context.cursor < stepCount,
      atResumedInterrupt: ({ context }) => context.cursor < stepCount && stepAt(context.cursor).interrupt !== undefined && context.interrupts.resumed.includes(stepAt(context.cursor).name),
      atInterrupt: ({ context }) => context.cursor < stepCount && stepAt(context.cursor).interrupt !== undefined,
      isReadyInterrupt: ({ context, event }) => {
        const step = (event as EventOf<'xreactor.interrupt.resume'>).step;
        return context.interrupts.paused?.ready.some((r) => r.step === step) === true;
      },
      fromChild,
      fromPausedChild,
      pausedOnChild: ({ context }) => context.interrupts.paused?.child != null,
      atHandoff: ({ context }) => plan.handoffIndex !== null && !context.handedOff && context.cursor === plan.handoffIndex,
      isCurrentSuccess: ({ context, event }) => isCurrent(context, event as EventOf<'xreactor.step.succeeded'>),
      isCurrentOutcome: ({ context, event }) => isCurrent(context, event as EventOf<'xreactor.step.halted'>),
      isCurrentUndoChild: ({ context, event }) => {
        const e = event as EventOf<'xreactor.undo.child'>;
        return e.epoch === context.rollbackEpoch && e.position === context.undoDepth - 1;
      },
      canRetry: ({ context, event }) => {
        const e = event as EventOf<'xreactor.step.failed'>;
        return isCurrent(context, e) && e.started && e.retryable && context.attempt < stepAt(context.cursor).retry.maxAttempts;
      },
      compensationPending: ({ context }) => context.failure?.compensationPending === true,
      hasUndoLeft: ({ context }) => context.undoDepth > 0,
      isOperatorUndo: ({ context }) => context.ending.rollbackReason === 'operator',
      isCurrentUndo: ({ context, event }) => isCurrentUndo(context, event),
      isCurrentUndoWithMoreLeft: ({ context, event }) => isCurrentUndo(context, event) && context.undoDepth - 1 > 0,
      isCurrentLastUndoOfOperator: ({ context, event }) => isCurrentUndo(context, event) && context.undoDepth - 1 === 0 && context.ending.rollbackReason === 'operator',
      undoesAnEntryFirst: ({ context }) => context.failure?.compensationPending !== true && context.undoDepth > 0,
      isCurrentCompensation: ({ context, event }) => (event as EventOf<'xreactor.compensate.finished'>).epoch === context.rollbackEpoch,
    },
  }).createMachine({
    id: 'execution',
    // XState's transition() resolves the initial state without input on every call; tolerate it
    // instead of throwing (a caught exception per transition is most of its cost).
    context: ({ input }: { input: ExecutionInput | undefined }) => ({
      executionId: input?.executionId ?? '',
      reactor: input?.reactor ?? plan.reactor,
      origin: {
        version: plan.version ?? 1,
        fingerprint: plan.fingerprint ?? '',
        returns: plan.returns ?? null,
        parentId: input?.parentId ?? null,
        path: input?.path ?? [],
        createdAt: input?.at ?? 0,
        ...(input?.async === true ? { async: true as const } : {}),
      },
      cursor: 0,
      attempt: 1,
      undoDepth: 0,
      failure: null,
      rollbackFailures: [],
      ending: NO_ENDING,
      rollbackEpoch: 0,
      handedOff: false,
      interrupts: NO_INTERRUPTS,
      awaiting: null,
      parkedUntil: null,
      map: input?.map ?? null,
      updatedAt: input?.at ?? 0,
    }),
    initial: 'pending',
    states: {
      pending: {
        on: {
          'xreactor.input.accepted': [
            // A fan-out element waits for its start job, which reads its map's gate first.
            { guard: ({ context }) => context.map?.fanOut === true, target: 'queued', actions: assign({ updatedAt: ({ event }) => event.at }) },
            // Its first step plain (the common case), straight into it, as `running.next` would in a second microstep.
            { guard: 'startsPlain', target: '#execution.running.executing', actions: 'startElement' },
            { target: 'running', actions: 'startElement' },
          ],
          // A fan-out element built by its start job, its input accepted: its start (gated in the
          // store) in one transition, to the snapshot `input.accepted` then `element.start` reach.
          // Its first step plain (the common case), straight into it: the state and actions
          // `running.next` would reach in a second microstep, without it.
          'xreactor.element.start': [
            { guard: 'firstIsPlain', target: '#execution.running.executing', actions: 'startElement' },
            { guard: ({ context }) => context.map?.fanOut === true, target: 'running', actions: 'startElement' },
          ],
          'xreactor.element.skip': { guard: ({ context }) => context.map?.fanOut === true, target: 'cancelled', actions: 'skipElement' },
          'xreactor.input.rejected': {
            target: 'failed',
            actions: [
              assign(({ context, event }) => ({ ending: { ...context.ending, inputError: event.error }, updatedAt: event.at })),
              { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'input_rejected', at: event.at, error: event.error }) },
            ],
          },
        },
      },
      queued: {
        tags: tagsAt('queued'),
        entry: { type: 'xreactor.effect.element.gate', params: ({ context }) => ({ map: context.map!.id }) },
        on: {
          'xreactor.element.start': { target: 'running', actions: 'startElement' },
          'xreactor.element.skip': { target: 'cancelled', actions: 'skipElement' },
        },
      },
      running: {
        initial: 'next',
        on: {
          ...consumeUnitSettle,
          'xreactor.operator.cancel': { target: 'cancelled', actions: ['recordCancel', { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'cancelled', at: event.at, reason: event.reason }) }] },
          'xreactor.execution.abort': { target: '#execution.aborted', actions: 'recordAbort' },
        },
        states: {
          next: {
            always: [
              { guard: 'atHandoff', target: 'handedOff' },
              // An interrupt resumed out of order: its payload is recorded; move past it.
              { guard: 'atResumedInterrupt', target: 'next', reenter: true, actions: assign(({ context }) => ({ cursor: context.cursor + 1 })) },
              { guard: 'atInterrupt', target: '#execution.paused', actions: 'enterPause' },
              { guard: 'hasNextStep', target: 'executing' },
              { target: '#execution.completed' },
            ],
          },
          handedOff: {
            tags: tagsAt('running.handedOff'),
            entry: [
              assign({ handedOff: true }),
              { type: 'xreactor.effect.handOff', params: ({ context }) => ({ index: context.cursor }) },
            ],
            on: {
              'xreactor.execution.resume': { target: 'next', actions: assign(({ event }) => ({ updatedAt: event.at })) },
            },
          },
          executing: {
            tags: tagsAt('running.executing'),
            entry: {
              type: 'xreactor.effect.runStep',
              params: ({ context }) => ({ index: context.cursor, step: stepAt(context.cursor).name, attempt: context.attempt }),
            },
            on: {
              // A success moves to the next step directly when that is a plain step (the common
              // case: no hand-off, interrupt or end there), or to `completed` when it was the last
              // and no hand-off waits at the end; else through `next`, which decides.
              // Tracked and untracked successes are apart, rather than one transition whose undo
              // push is an enqueueActions: together that halves a step's transition cost
              // (docs/performance.md, "Fewer arguments, fewer microsteps, a smaller context").
              'xreactor.step.succeeded': [
                { guard: 'isCurrentTrackedSuccessToPlain', target: 'executing', reenter: true, actions: [writeSuccessResult, pushSuccessUndo, traceSuccess, 'advancePastSuccess'] },
                { guard: 'isCurrentUntrackedSuccessToPlain', target: 'executing', reenter: true, actions: [writeSuccessResult, traceSuccess, 'advancePastSuccess'] },
                // The last step's success completes the run directly (nothing waits at the end), as `next` would in a second microstep.
                { guard: 'isCurrentTrackedSuccessToEnd', target: '#execution.completed', actions: [writeSuccessResult, pushSuccessUndo, traceSuccess, 'advancePastSuccess'] },
                { guard: 'isCurrentUntrackedSuccessToEnd', target: '#execution.completed', actions: [writeSuccessResult, traceSuccess, 'advancePastSuccess'] },
                // The same writes, through `next`.
                { guard: 'isCurrentTrackedSuccess', target: 'next', actions: [writeSuccessResult, pushSuccessUndo, traceSuccess, 'advancePastSuccess'] },
                { guard: 'isCurrentSuccess', target: 'next', actions: [writeSuccessResult, traceSuccess, 'advancePastSuccess'] },
              ],
              'xreactor.step.skipped': {
                guard: 'isCurrentOutcome',
                target: 'next',
                actions: [
                  { type: 'xreactor.write.result', params: ({ event }) => ({ step: stepAt(event.index).name, value: event.value }) },
                  { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'skipped', step: stepAt(event.index).name, attempt: event.attempt, at: event.at }) },
                  assign(({ context, event }) => ({ cursor: context.cursor + 1, attempt: 1, updatedAt: event.at })),
                ],
              },
              'xreactor.compose.spawn': { guard: 'isCurrentOutcome', target: 'awaiting', actions: 'startAwaiting' },
              'xreactor.compose.awaiting': { guard: 'isCurrentOutcome', target: 'awaiting', actions: 'startAwaiting' },
              'xreactor.map.spawn': { guard: 'isCurrentOutcome', target: 'awaiting', actions: 'startAwaiting' },
              'xreactor.unit.dispatch': { guard: 'isCurrentOutcome', target: 'next', actions: 'dispatchUnit' },
              // The step reads an async unit that has not settled: wait for its signal.
              'xreactor.unit.awaiting': {
                guard: 'isCurrentOutcome',
                target: 'awaiting',
                actions: [
                  assign(({ event }) => ({
                    awaiting: { step: stepAt(event.index).name, index: event.index, attempt: event.attempt, child: event.unit, args: undefined, purpose: 'run' as const, position: null, kind: 'unit' as const, until: event.until },
                    updatedAt: event.at,
                  })),
                  { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'awaiting', step: stepAt(event.index).name, at: event.at, actors: [event.unit] }) },
                ],
              },
              'xreactor.step.halted': {
                guard: 'isCurrentOutcome',
                target: '#execution.halted',
                actions: [
                  { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'halt', step: stepAt(event.index).name, reason: event.reason, at: event.at }) },
                  assign(({ context, event }) => ({ ending: { ...context.ending, halt: { step: stepAt(event.index).name, reason: event.reason } }, updatedAt: event.at })),
                  // A map step halted by an element: its completed elements are its pending
                  // compensation, so an undo(id) of the halted run rolls them back (halted
                  // elements report not_needed) before the undo stack.
                  enqueueActions(({ context, event, enqueue }) => {
                    if (stepAt(event.index).child !== 'map' || context.failure !== null) return;
                    enqueue.assign({ failure: mapPendingCompensation(event.index, 'XreactorError', 'map_halted', `halted: ${event.reason}`) });
                  }),
                ],
              },
              'xreactor.step.failed': [
                {
                  guard: 'canRetry',
                  target: 'parked',
                  actions: [
                    {
                      type: 'xreactor.write.trace',
                      params: ({ context, event }) => ({
                        type: 'retry',
                        step: stepAt(event.index).name,
                        attempt: event.attempt,
                        at: event.at,
                        delayMs: backoffDelayMs(stepAt(context.cursor).retry, event.attempt),
                        error: event.error,
                      }),
                    },
                    {
                      type: 'xreactor.effect.wait',
                      params: ({ context, event }) => ({
                        index: event.index,
                        step: stepAt(event.index).name,
                        attempt: event.attempt,
                        delayMs: backoffDelayMs(stepAt(context.cursor).retry, event.attempt),
                        error: event.error,
                      }),
                    },
                    assign(({ context, event }) => ({ parkedUntil: event.at + backoffDelayMs(stepAt(context.cursor).retry, event.attempt), updatedAt: event.at })),
                  ],
                },
                { guard: 'isCurrentOutcome', target: '#execution.rolling_back', actions: 'recordStepFailure' },
              ],
            },
          },
          awaiting: {
            tags: tagsAt('running.awaiting'),
            entry: enqueueActions(({ context, enqueue }) => {
              const awaiting = context.awaiting!;
              if (awaiting.kind === 'unit') {
                enqueue({ type: 'xreactor.effect.awaitUnit', params: { unit: awaiting.child, step: awaiting.step, index: awaiting.index, attempt: awaiting.attempt, until: awaiting.until ?? null } });
              } else enqueue({ type: 'xreactor.effect.awaitChild', params: { child: awaiting.child } });
            }),
            on: {
              // The async unit the step reads settled: run the step again (it reads the unit's end).
              'xreactor.unit.settled': { guard: 'fromChild', target: 'executing', actions: assign(({ event }) => ({ awaiting: null, updatedAt: event.at })) },
              // The wait for that unit timed out: the step fails before its body.
              'xreactor.unit.timedOut': {
                guard: ({ context, event }) => context.awaiting?.kind === 'unit' && context.awaiting.child === event.unit && isCurrent(context, event),
                target: '#execution.rolling_back',
                actions: 'recordStepFailure',
              },
              // The child is gone (reported by the sweeper): the compose step fails.
              'xreactor.step.failed': { guard: 'isCurrentOutcome', target: '#execution.rolling_back', actions: ['recordStepFailure', { type: 'xreactor.write.awaits', params: { actors: [] } }] },
              // The child settled: run the compose step again to collect its outcome (value, failure, rollback failures).
              'xreactor.child.settled': { guard: 'fromChild', target: 'executing', actions: 'stopAwaiting' },
              'xreactor.child.paused': {
                guard: 'fromChild',
                target: '#execution.paused',
                actions: assign(({ context, event }) => ({
                  interrupts: { ...context.interrupts, paused: { ready: [], child: context.awaiting!.step, nested: event.ready, since: event.at } },
                  updatedAt: event.at,
                })),
              },
            },
          },
          parked: {
            tags: tagsAt('running.parked'),
            on: {
              'xreactor.timer.fired': {
                guard: ({ context, event }) => isCurrent(context, event),
                target: 'executing',
                actions: assign(({ context, event }) => ({ attempt: context.attempt + 1, parkedUntil: null, updatedAt: event.at })),
              },
            },
          },
        },
      },
      rolling_back: {
        initial: 'deciding',
        on: {
          ...consumeUnitSettle,
          'xreactor.execution.abort': { target: '#execution.aborted', actions: 'recordAbort' },
        },
        states: {
          deciding: {
            always: [{ guard: 'compensationPending', target: 'compensating' }, { target: 'undoing' }],
          },
          compensating: {
            tags: tagsAt('rolling_back.compensating'),
            entry: {
              type: 'xreactor.effect.compensate',
              params: ({ context }) => {
                const failure = context.failure!;
                return { index: failure.index, step: failure.step, error: failure.error, args: failure.args, epoch: context.rollbackEpoch };
              },
            },
            on: {
              // A map step's compensation: its map rolls its elements back; this waits for it to settle.
              'xreactor.compensate.child': {
                guard: 'isCurrentCompensation',
                target: 'compensatingChild',
                actions: enqueueActions(({ context, event, enqueue }) => {
                  const child = childId(context, event.step);
                  enqueue.assign({ awaiting: { step: event.step, index: context.failure!.index, attempt: 0, child, args: undefined, purpose: 'undo', position: null, kind: 'map' }, updatedAt: event.at });
                  enqueue({
                    type: 'xreactor.write.signal',
                    params: { to: child, kind: 'map', event: { type: 'xreactor.operator.undo', at: event.at, from: context.executionId, reason: 'compensate' }, dedupeKey: `undo.${context.executionId}.${event.epoch}.compensate` },
                  });
                  enqueue({ type: 'xreactor.write.awaits', params: { actors: [child] } });
                  enqueue({ type: 'xreactor.write.trace', params: { type: 'awaiting', step: event.step, at: event.at, actors: [child] } });
                }),
              },
              'xreactor.compensate.finished': {
                guard: 'isCurrentCompensation',
                target: 'undoing',
                actions: [
                  {
                    type: 'xreactor.write.trace',
                    params: ({ context, event }) => ({
                      type: event.failure === null ? 'compensate' : 'compensate_failure',
                      step: context.failure!.step,
                      at: event.at,
                      ...(event.failure === null ? {} : { error: event.failure.error, reason: event.failure.reason }),
                    }),
                  },
                  assign(({ context, event }) => ({
                    failure: { ...context.failure!, compensationPending: false, compensationFailed: event.failure !== null },
                    rollbackFailures: [
                      ...context.rollbackFailures,
                      ...(event.nested ?? []),
                      ...(event.failure === null ? [] : [{ step: context.failure!.step, kind: 'compensate', ...event.failure } satisfies RollbackFailure]),
                    ],
                    updatedAt: event.at,
                  })),
                ],
              },
            },
          },
          compensatingChild: {
            tags: tagsAt('rolling_back.compensatingChild'),
            entry: { type: 'xreactor.effect.awaitChild', params: ({ context }) => ({ child: context.awaiting!.child }) },
            on: {
              // Compensate again: the map has settled, so the compensation collects its rollback failures.
              'xreactor.child.settled': { guard: 'fromChild', target: 'compensating', actions: 'stopAwaiting' },
              'xreactor.child.lost': { guard: 'fromChild', target: 'compensating', actions: 'stopAwaiting' },
            },
          },
          undoing: {
            always: [{ guard: 'hasUndoLeft', target: 'undoingEntry' }, { target: 'done' }],
          },
          undoingEntry: {
            tags: tagsAt('rolling_back.undoingEntry'),
            entry: { type: 'xreactor.effect.undo', params: ({ context }) => ({ position: context.undoDepth - 1, epoch: context.rollbackEpoch }) },
            on: {
              // A compose step's entry: its child rolls itself back; this waits for it to settle.
              'xreactor.undo.child': {
                guard: 'isCurrentUndoChild',
                target: 'undoingChild',
                actions: enqueueActions(({ context, event, enqueue }) => {
                  const child = childId(context, event.step);
                  const kind = plan.steps.find((st) => st.name === event.step)?.child === 'map' ? ('map' as const) : ('execution' as const);
                  const toMap = kind === 'map';
                  enqueue.assign({ awaiting: { step: event.step, index: -1, attempt: 0, child, args: undefined, purpose: 'undo', position: event.position, ...(toMap ? { kind } : {}) }, updatedAt: event.at });
                  enqueue({
                    type: 'xreactor.write.signal',
                    params: {
                      to: child,
                      ...(toMap ? { kind } : {}),
                      event: { type: 'xreactor.operator.undo', at: event.at, from: context.executionId, ...(toMap ? { reason: 'undo' as const } : {}) },
                      dedupeKey: `undo.${context.executionId}.${event.epoch}.${event.position}`,
                    },
                  });
                  enqueue({ type: 'xreactor.write.awaits', params: { actors: [child] } });
                  enqueue({ type: 'xreactor.write.trace', params: { type: 'awaiting', step: event.step, at: event.at, actors: [child] } });
                }),
              },
              // An undone entry: the next one straight away, or the end of the rollback, in one
              // microstep each (the states `undoing` and `done` would reach in two or three).
              'xreactor.undo.finished': [
                { guard: 'isCurrentUndoWithMoreLeft', target: 'undoingEntry', reenter: true, actions: [popUndone, traceUndone, 'recordUndone'] },
                { guard: 'isCurrentLastUndoOfOperator', target: '#execution.cancelled', actions: [popUndone, traceUndone, 'recordUndone'] },
                { guard: 'isCurrentUndo', target: '#execution.failed', actions: [popUndone, traceUndone, 'recordUndone'] },
              ],
            },
          },
          undoingChild: {
            tags: tagsAt('rolling_back.undoingChild'),
            entry: { type: 'xreactor.effect.awaitChild', params: ({ context }) => ({ child: context.awaiting!.child }) },
            on: {
              // Undo the entry again: the child has settled, so the undo collects its rollback failures.
              'xreactor.child.settled': { guard: 'fromChild', target: 'undoingEntry', actions: 'stopAwaiting' },
              'xreactor.child.lost': { guard: 'fromChild', target: 'undoingEntry', actions: 'stopAwaiting' },
            },
          },
          undoingPausedChild: {
            tags: tagsAt('rolling_back.undoingPausedChild'),
            entry: { type: 'xreactor.effect.awaitChild', params: ({ context }) => ({ child: context.awaiting!.child }) },
            on: {
              'xreactor.child.settled': { guard: 'fromChild', target: 'deciding', actions: 'stopAwaiting' },
              'xreactor.child.lost': { guard: 'fromChild', target: 'deciding', actions: 'stopAwaiting' },
            },
          },
          done: {
            always: [{ guard: 'isOperatorUndo', target: '#execution.cancelled' }, { target: '#execution.failed' }],
          },
        },
      },
      paused: {
        tags: tagsAt('paused'),
        entry: [
          { type: 'xreactor.effect.paused', params: ({ context }) => context.interrupts.paused! },
          { type: 'xreactor.write.trace', params: ({ context }) => ({ type: 'paused', at: context.updatedAt, step: context.interrupts.paused!.child ?? context.interrupts.paused!.ready.map((r) => r.step).join(',') }) },
          assign(({ context }) => ({ interrupts: { ...context.interrupts, pauses: context.interrupts.pauses + 1 } })),
          signalPaused,
        ],
        on: {
          ...consumeUnitSettle,
          'xreactor.interrupt.resume': {
            guard: 'isReadyInterrupt',
            target: 'running',
            actions: [
              { type: 'xreactor.write.result', params: ({ event }) => ({ step: event.step, value: event.payload }) },
              { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'resumed', step: event.step, at: event.at }) },
              signalResumed,
              assign(({ context, event }) => ({ interrupts: { ...context.interrupts, resumed: [...context.interrupts.resumed, event.step], paused: null }, updatedAt: event.at })),
            ],
          },
          // The paused child was continued: wait for it again (it signals its settle or its next pause).
          'xreactor.child.resumed': {
            guard: 'fromPausedChild',
            target: 'running.awaiting',
            actions: [signalResumed, assign(({ context, event }) => ({ interrupts: unpaused(context), updatedAt: event.at }))],
          },
          'xreactor.child.settled': {
            guard: 'fromPausedChild',
            target: 'running.executing',
            actions: [signalResumed, assign(({ context, event }) => ({ interrupts: unpaused(context), awaiting: null, updatedAt: event.at })), { type: 'xreactor.write.awaits', params: { actors: [] } }],
          },
          'xreactor.interrupt.fail': {
            guard: 'isReadyInterrupt',
            target: 'rolling_back',
            actions: [
              signalResumed,
              { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'failed', step: event.step, at: event.at, error: event.error }) },
              assign(({ context, event }) => ({
                failure: {
                  step: event.step,
                  index: plan.steps.findIndex((st) => st.name === event.step),
                  error: event.error,
                  args: undefined,
                  compensationPending: false,
                  compensationFailed: false,
                },
                interrupts: unpaused(context),
                ending: { ...context.ending, rollbackReason: 'failure' as const },
                rollbackEpoch: context.rollbackEpoch + 1,
                updatedAt: event.at,
              })),
            ],
          },
          'xreactor.operator.cancel': { target: 'cancelled', actions: ['recordCancel', { type: 'xreactor.write.trace', params: ({ event }) => ({ type: 'cancelled', at: event.at, reason: event.reason }) }] },
          'xreactor.operator.undo': [
            {
              // Paused on a composed child: the child undoes its completed steps first, then this run its own.
              guard: 'pausedOnChild',
              target: 'rolling_back.undoingPausedChild',
              actions: [
                'recordOperatorUndo',
                enqueueActions(({ context, event, enqueue }) => {
                  const step = context.interrupts.paused!.child!;
                  const child = childId(context, step);
                  enqueue.assign({ awaiting: { step, index: -1, attempt: 0, child, args: undefined, purpose: 'undo', position: null }, interrupts: unpaused(context) });
                  enqueue({ type: 'xreactor.write.signal', params: { to: child, event: { type: 'xreactor.operator.undo', at: event.at, from: context.executionId }, dedupeKey: `undo.${context.executionId}.${context.rollbackEpoch}.paused` } });
                  enqueue({ type: 'xreactor.write.awaits', params: { actors: [child] } });
                }),
              ],
            },
            { target: 'rolling_back', actions: ['recordOperatorUndo', assign(({ context }) => ({ interrupts: unpaused(context) }))] },
          ],
        },
      },
      completed: {
        tags: tagsAt('completed'),
        entry: terminal('completed'),
        on: {
          ...consumeUnitSettle,
          // Straight to its newest undo entry (what `deciding` and `undoing` would reach in two more microsteps).
          'xreactor.operator.undo': [
            { guard: 'undoesAnEntryFirst', target: '#execution.rolling_back.undoingEntry', actions: 'recordOperatorUndo' },
            { target: 'rolling_back', actions: 'recordOperatorUndo' },
          ],
        },
      },
      halted: {
        tags: tagsAt('halted'),
        entry: terminal('halted'),
        on: { ...consumeUnitSettle, 'xreactor.operator.undo': { target: 'rolling_back', actions: 'recordOperatorUndo' } },
      },
      aborted: {
        tags: tagsAt('aborted'),
        entry: terminal('aborted'),
        on: { ...consumeUnitSettle, 'xreactor.operator.undo': { target: 'rolling_back', actions: 'recordOperatorUndo' } },
      },
      failed: { type: 'final', tags: tagsAt('failed'), entry: terminal('failed') },
      cancelled: { type: 'final', tags: tagsAt('cancelled'), entry: terminal('cancelled') },
    },
  });
}

/** The execution machine of one reactor. */
export type ExecutionMachine = ReturnType<typeof createExecutionMachine>;
