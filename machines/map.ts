/*
 * The map operation machine (kind `map`), docs/design/map.md §5. Choices where the design leaves
 * a detail open (each is what a user of a durable workflow engine would expect: nothing lost,
 * nothing done twice, no inbox entry left behind):
 *
 * - Forward states sit under `running`, rollback states under `rolling_back` (stored values
 *   `{ running: 'awaiting' }`, `{ rolling_back: 'throwing' }`), so the stored status is the
 *   top-level state, as for an execution (`undone` is status `cancelled`). `operator.cancel` and
 *   `execution.abort` are declared once, on `running`.
 * - A throw's size is `batchSize` (1 inline), clipped to the positions left when the total is
 *   known. A throw that finds nothing (`count: 0`) must say `exhausted`; the map then writes its
 *   target like any other end of dispatch, and its conditional `settled` lands at once.
 * - Every write of a target (`map.target`, `map.rollbackTarget`) carries the conditional self-signal
 *   that goes with it (`settled`, `rolledback`), so "all settled" is decided in one place, where
 *   the writes land, whichever side comes second (D4), the empty cases included.
 * - Stale throw signals are consumed by a transition that records the clock and restates the
 *   state's pending effect (a commit's outbox is the work pending after it, so a commit that
 *   consumed a signal must not drop the `conclude` or `awaitChild` its state still owes): no
 *   write, no signal, no new work. `throw.<k>` is consumed in `running.awaiting` when it is not
 *   the last throw's, or the source is exhausted, or dispatch stopped, and always in `concluding`;
 *   `rbthrow.<k>` likewise in `rolling_back.awaiting`. A throw signal that may still be current
 *   (in `dispatching`, `enqueuing`, `redispatching`) is left in the inbox for `awaiting`. Every
 *   throw signal lands before (or with) the `settled` that ends its phase, and a state is left only
 *   by a commit fenced by its inbox, so none is left for the ends or for the rollback.
 * - `settled` is accepted only in `running.awaiting` once the target is known (exhausted or
 *   stopped); a second one is ignored (the dedupe key already keeps it out of the inbox).
 * - `operator.undo` is accepted only from the owner; its optional `reason` is recorded, and when
 *   absent a `completed` map is being undone and any other end is being compensated.
 * - The rollback phase does not accept `execution.abort`: an interrupted caller leaves the map
 *   rolling back (recoverable, or awaiting a rollback actor that is), and a sweep or the next
 *   call finishes it. There is exactly one rollback per map (`rollbackEpoch` 1), so the rollback
 *   actors' ids (`<map>.rb-<position>`) and the `rbthrow.<k>` / `rolledback` keys never repeat.
 * - Stall redispatch is fan-out only: an inline map awaits its one current actor (recorded in the
 *   store as awaited), which the kernel's sweep recovers. `map.redispatched` names the end of the
 *   window it scanned; the machine knows the window (`batchSize`) and when the scan is done.
 * - With undoAll the rollback throws run over the aborted list only (possibly empty), then
 *   `undoingAll`.
 * - Every forward end (and a cancel) deletes the source list; only the started list is read by a
 *   rollback.
 * - The elements' creations carry `atomic`, so an element's report knows whether its failure
 *   stops the map.
 */
import { assign, enqueueActions, setup } from 'xstate';
import type { ActorTag } from './registry-types.js';
import type {
  ElementCreation,
  MapContext,
  MapEffect,
  MapEvent,
  MapInput,
  MapOutcome,
  MapSignal,
  MapStatus,
  MapWrite,
  RollbackCreation,
} from './map-types.js';

export * from './map-types.js';

type EventOf<T extends MapEvent['type']> = Extract<MapEvent, { type: T }>;
type ParamsOf<U extends { type: string; params: unknown }, T extends U['type']> = Extract<U, { type: T }>['params'];
type Args = { context: MapContext; event: MapEvent };

/**
 * Tags of the map machine's states, declared once: the state nodes carry them, and
 * {@link mapTagsOf} answers for a stored state value without the machine. A forward end is
 * `undoable`: the owner compensates a failed map step, or undoes a completed one's entry.
 */
export const MAP_STATE_TAGS = {
  'running.dispatching': ['recoverable'],
  'running.enqueuing': ['recoverable'],
  'running.awaiting': ['awaiting'],
  'running.redispatching': ['recoverable'],
  'running.concluding': ['recoverable'],
  completed: ['settled', 'undoable'],
  failed: ['settled', 'undoable'],
  halted: ['settled', 'undoable'],
  aborted: ['settled', 'undoable'],
  cancelled: ['settled'],
  'rolling_back.starting': ['recoverable'],
  'rolling_back.throwing': ['recoverable'],
  'rolling_back.enqueuing': ['recoverable'],
  'rolling_back.awaiting': ['awaiting'],
  'rolling_back.redispatching': ['recoverable'],
  'rolling_back.undoingAll': ['recoverable'],
  undone: ['settled'],
} as const satisfies Record<string, readonly ActorTag[]>;

type TaggedState = keyof typeof MAP_STATE_TAGS;
const tagsAt = (path: TaggedState): ActorTag[] => [...MAP_STATE_TAGS[path]];
const TAG_SETS: ReadonlyMap<string, ReadonlySet<ActorTag>> = new Map(Object.entries(MAP_STATE_TAGS).map(([path, tags]) => [path, new Set<ActorTag>(tags)]));
const NO_TAGS: ReadonlySet<ActorTag> = new Set();

/** The tags of a stored map state value (`'completed'`, `{ running: 'awaiting' }`, ...). */
export function mapTagsOf(value: unknown): ReadonlySet<ActorTag> {
  if (typeof value === 'string') return TAG_SETS.get(value) ?? NO_TAGS;
  for (const top in value as Record<string, string>) return TAG_SETS.get(`${top}.${(value as Record<string, string>)[top]}`) ?? NO_TAGS;
  return NO_TAGS;
}

/** The stored status of a map state value: its top-level state (`undone` is `cancelled`). */
export function mapStatusOf(value: unknown): MapStatus {
  const top = typeof value === 'string' ? value : Object.keys(value as object)[0];
  return (top === 'undone' ? 'cancelled' : top) as MapStatus;
}

/** Whether a map state value is the end of its rollback: what an owner undoing the map waits for (a `failed` map is its forward end). */
export function mapUndoSettled(value: unknown): boolean {
  return value === 'undone';
}

/** The id of element `index` of map `mapId`. */
export const elementIdOf = (mapId: string, index: number): string => `${mapId}.${index}`;
/** The id of the rollback actor of position `position` of map `mapId`. */
export const rollbackIdOf = (mapId: string, position: number): string => `${mapId}.rb-${position}`;

/** No-op implementations: these actions are data the host performs after the commit. */
const hostPerformed = <P>() => (_: unknown, _params: P): void => undefined;

/** Positions the next forward throw may create. */
const throwSize = (c: MapContext): number => {
  const size = c.mode === 'inline' ? 1 : c.batchSize;
  return c.total === null ? size : Math.max(0, Math.min(size, c.total - c.offset));
};
/** Positions the next rollback throw creates. */
const rollbackThrowSize = (c: MapContext): number => {
  const rb = c.rollback!;
  return Math.min(c.mode === 'inline' ? 1 : c.batchSize, rb.total - rb.offset);
};
/** What a redispatch scans: the positions dispatched in its phase. */
const redispatchScope = (c: MapContext): number => (c.redispatch?.phase === 'rollback' ? c.rollback!.offset : c.offset);
const redispatchWindowEnd = (c: MapContext): number => Math.min(c.redispatch!.next + c.batchSize, redispatchScope(c));

const isValidThrown = ({ context: c, event }: Args): boolean => {
  const e = event as EventOf<'xreactor.map.thrown'>;
  return (
    e.throw === c.throws &&
    e.from === c.offset &&
    e.count >= 0 &&
    e.count <= throwSize(c) &&
    (e.count > 0 || e.exhausted) &&
    e.inputs.length === e.count &&
    e.inputs.every((input, i) => input.index === e.from + i)
  );
};
const isValidRollbackThrown = ({ context: c, event }: Args): boolean => {
  const e = event as EventOf<'xreactor.map.rollbackThrown'>;
  const rb = c.rollback!;
  return e.throw === rb.throws && e.from === rb.offset && e.positions.length === rollbackThrowSize(c) && e.positions.every((p, i) => p.position === e.from + i);
};
const isValidRollbackStart = ({ event }: Args): boolean => {
  const e = event as EventOf<'xreactor.map.rollbackStarted'>;
  return Number.isSafeInteger(e.total) && Number.isSafeInteger(e.aborted) && e.total >= 0 && e.aborted >= 0 && e.aborted <= e.total;
};
const concludes = (outcome: MapOutcome) => ({ event }: Args) => (event as EventOf<'xreactor.map.concluded'>).outcome === outcome;

/** The owner is told once per phase; the key names the map, its status and its epoch. */
const settleSignal = ({ context: c }: { context: MapContext }, status: MapStatus): MapSignal => ({
  to: c.owner,
  event: { type: 'xreactor.child.settled', at: c.updatedAt, child: c.mapId, status },
  dedupeKey: `${c.mapId}.settled.${status}.${c.rollbackEpoch}`,
});
const terminal = (status: MapStatus, forward: boolean) => [
  { type: 'xreactor.effect.finished' as const, params: { status } },
  { type: 'xreactor.write.signal' as const, params: (args: { context: MapContext }) => settleSignal(args, status) },
  ...(forward ? [{ type: 'xreactor.write.map.dropSource' as const, params: {} as Record<string, never> }] : []),
];
const concludeEffect = { type: 'xreactor.effect.map.conclude' as const, params: ({ context }: { context: MapContext }) => ({ target: context.offset }) };
/** Dispatch is over: the target is the positions dispatched, and `settled` lands when they all settled (perhaps with this very commit). */
const targetWrites = (c: MapContext, at: number): (MapWrite & { type: 'xreactor.write.map.target' | 'xreactor.write.signal' })[] => [
  { type: 'xreactor.write.map.target', params: { target: c.offset } },
  { type: 'xreactor.write.signal', params: { to: c.mapId, event: { type: 'xreactor.map.settled', at }, dedupeKey: 'settled', condition: 'mapSettled' } },
];
/**
 * The map operation actor: pure, one machine for every map (its parameters are in its context).
 * It decides when to throw, when dispatch is over, how the forward phase ended, and which
 * rollback positions to throw; the host performs the effects and feeds their outcomes back as
 * events, and the store lands the conditional signals that wake it. Time arrives in events.
 */
export function createMapMachine() {
  return setup({
    types: {
      context: {} as MapContext,
      events: {} as MapEvent,
      input: {} as MapInput,
    },
    actions: {
      'xreactor.effect.map.throw': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.throw'>>(),
      'xreactor.effect.map.enqueue': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.enqueue'>>(),
      'xreactor.effect.map.redispatch': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.redispatch'>>(),
      'xreactor.effect.map.conclude': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.conclude'>>(),
      'xreactor.effect.map.rollbackStart': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.rollbackStart'>>(),
      'xreactor.effect.map.rollbackThrow': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.rollbackThrow'>>(),
      'xreactor.effect.map.undoAll': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.map.undoAll'>>(),
      'xreactor.effect.awaitChild': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.awaitChild'>>(),
      'xreactor.effect.finished': hostPerformed<ParamsOf<MapEffect, 'xreactor.effect.finished'>>(),
      'xreactor.write.map.init': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.map.init'>>(),
      'xreactor.write.map.target': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.map.target'>>(),
      'xreactor.write.map.rollbackTarget': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.map.rollbackTarget'>>(),
      'xreactor.write.map.dropSource': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.map.dropSource'>>(),
      'xreactor.write.spawnElements': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.spawnElements'>>(),
      'xreactor.write.spawnRollbacks': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.spawnRollbacks'>>(),
      'xreactor.write.signal': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.signal'>>(),
      'xreactor.write.awaits': hostPerformed<ParamsOf<MapWrite, 'xreactor.write.awaits'>>(),
      /** Entering a waiting state: advance the awaited actor (inline) in this call. */
      awaitAwaited: enqueueActions(({ context, enqueue }) => {
        if (context.awaiting !== null) enqueue({ type: 'xreactor.effect.awaitChild', params: { child: context.awaiting } });
      }),
      /** A stale signal: consumed (the commit removes it from the inbox); the state's pending effect is restated by the transition. */
      consume: assign(({ event }) => ({ updatedAt: event.at })),
      /** A throw's elements are created; inline, the one element is awaited; the end of the source ends dispatch. */
      recordThrow: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.map.thrown'>;
        const offset = e.from + e.count;
        const awaiting = context.mode === 'inline' && e.count === 1 ? elementIdOf(context.mapId, e.from) : null;
        const elements = e.inputs.map(
          (spawn, i): ElementCreation => ({
            id: elementIdOf(context.mapId, spawn.index),
            map: { id: context.mapId, index: spawn.index, throw: e.throw, lastOfThrow: i === e.count - 1, fanOut: context.mode === 'fanOut', atomic: context.atomic },
            spawn,
          }),
        );
        enqueue.assign({
          offset,
          throws: context.throws + 1,
          throwFrom: e.from,
          exhausted: e.exhausted,
          total: e.exhausted ? offset : (e.total ?? context.total),
          awaiting,
          updatedAt: e.at,
        });
        if (elements.length > 0) enqueue({ type: 'xreactor.write.spawnElements', params: { element: context.element, lease: context.mode === 'inline', elements } });
        if (awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [awaiting] } });
        if (e.exhausted) for (const write of targetWrites({ ...context, offset }, e.at)) enqueue(write);
      }),
      recordStop: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.map.stop'>;
        const stopped = e.stop.kind === 'failed' ? 'failure' : e.stop.kind === 'halted' ? 'halt' : 'abort';
        enqueue.assign({ stopped, stop: e.stop, updatedAt: e.at });
        for (const write of targetWrites(context, e.at)) enqueue(write);
      }),
      recordSourceFailure: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.map.sourceFailed'>;
        enqueue.assign({ stopped: 'source', failure: e.error, updatedAt: e.at });
        for (const write of targetWrites(context, e.at)) enqueue(write);
      }),
      /** Leaving a wait: the awaited actor (inline) is no longer recorded. */
      stopAwaiting: enqueueActions(({ context, event, enqueue }) => {
        if (context.awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
        enqueue.assign({ awaiting: null, updatedAt: event.at });
      }),
      recordCancel: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.operator.cancel'>;
        if (context.awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
        enqueue.assign({ cancelReason: e.reason, awaiting: null, redispatch: null, updatedAt: e.at });
      }),
      recordAbort: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.execution.abort'>;
        if (context.awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [] } });
        enqueue.assign({ abortReason: e.reason, stopped: 'abort', outcome: 'aborted', awaiting: null, redispatch: null, updatedAt: e.at });
      }),
      recordOutcome: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.map.concluded'>;
        return { outcome: e.outcome, stop: e.stop ?? context.stop, updatedAt: e.at };
      }),
      startRollback: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.operator.undo'>;
        const outcome = context.outcome;
        return { rollbackReason: e.reason ?? (outcome === 'completed' ? 'undo' : 'compensate'), rollbackEpoch: context.rollbackEpoch + 1, updatedAt: e.at };
      }),
      /** The work list is known: its target is written with the conditional `rolledback` (which lands at once when it is empty). */
      recordRollbackStart: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.map.rollbackStarted'>;
        const list = context.undoAll ? 'aborted' : 'started';
        const total = context.undoAll ? e.aborted : e.total;
        enqueue.assign({ rollback: { list, total, offset: 0, throws: 0, throwFrom: 0, undoAllFailure: null }, updatedAt: e.at });
        enqueue({ type: 'xreactor.write.map.rollbackTarget', params: { target: total } });
        enqueue({ type: 'xreactor.write.signal', params: { to: context.mapId, event: { type: 'xreactor.map.rolledBack', at: e.at }, dedupeKey: 'rolledback', condition: 'rolledBack' } });
      }),
      recordRollbackThrow: enqueueActions(({ context, event, enqueue }) => {
        const e = event as EventOf<'xreactor.map.rollbackThrown'>;
        const rb = context.rollback!;
        const n = e.positions.length;
        const awaiting = context.mode === 'inline' ? rollbackIdOf(context.mapId, e.from) : null;
        const actors = e.positions.map(
          (p, i): RollbackCreation => ({
            id: rollbackIdOf(context.mapId, p.position),
            element: elementIdOf(context.mapId, p.index),
            position: p.position,
            index: p.index,
            throw: e.throw,
            lastOfThrow: i === n - 1,
            mode: context.mode,
          }),
        );
        enqueue.assign({ rollback: { ...rb, offset: rb.offset + n, throws: rb.throws + 1, throwFrom: e.from }, awaiting, updatedAt: e.at });
        enqueue({ type: 'xreactor.write.spawnRollbacks', params: { lease: context.mode === 'inline', actors } });
        if (awaiting !== null) enqueue({ type: 'xreactor.write.awaits', params: { actors: [awaiting] } });
      }),
      recordUndoAll: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.map.undoAllFinished'>;
        const undoAllFailure = e.failure === null ? null : { step: context.step, kind: 'undo_all' as const, ...e.failure };
        return { rollback: { ...context.rollback!, undoAllFailure }, updatedAt: e.at };
      }),
      startRedispatch: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.map.redispatch'>;
        return { redispatch: { phase: e.phase, next: 0, round: context.redispatches + 1 }, redispatches: context.redispatches + 1, updatedAt: e.at };
      }),
      moveRedispatch: assign(({ context, event }) => {
        const e = event as EventOf<'xreactor.map.redispatched'>;
        return { redispatch: { ...context.redispatch!, next: e.next }, updatedAt: e.at };
      }),
      endRedispatch: assign(({ event }) => ({ redispatch: null, updatedAt: event.at })),
    },
    guards: {
      isValidThrown,
      /** Fan-out elements are created queued: their start jobs are enqueued by the next commit. */
      thrownToEnqueue: (args) => isValidThrown(args) && args.context.mode === 'fanOut' && (args.event as EventOf<'xreactor.map.thrown'>).count > 0,
      isCurrentThrowOutcome: ({ context, event }) => (event as EventOf<'xreactor.map.stop'>).throw === context.throws,
      isCurrentEnqueue: ({ context, event }) => {
        const e = event as EventOf<'xreactor.map.enqueued'>;
        return e.kind === 'element' && e.from === context.throwFrom;
      },
      /** The last position of the last throw settled, and there is more to throw. */
      opensNextThrow: ({ context, event }) => (event as EventOf<'xreactor.map.throwSettled'>).throw === context.throws - 1 && !context.exhausted && context.stopped === null,
      targetKnown: ({ context }) => context.exhausted || context.stopped !== null,
      isForwardRedispatch: ({ context, event }) => context.mode === 'fanOut' && (event as EventOf<'xreactor.map.redispatch'>).phase === 'forward',
      isRollbackRedispatch: ({ context, event }) => context.mode === 'fanOut' && (event as EventOf<'xreactor.map.redispatch'>).phase === 'rollback',
      redispatchDone: ({ context, event }) => (event as EventOf<'xreactor.map.redispatched'>).next === redispatchWindowEnd(context) && redispatchWindowEnd(context) >= redispatchScope(context),
      redispatchMoved: ({ context, event }) => (event as EventOf<'xreactor.map.redispatched'>).next === redispatchWindowEnd(context),
      concludesCompleted: concludes('completed'),
      concludesFailed: concludes('failed'),
      concludesHalted: concludes('halted'),
      concludesAborted: concludes('aborted'),
      fromOwner: ({ context, event }) => (event as EventOf<'xreactor.operator.undo'>).from === context.owner,
      isValidRollbackStart,
      rollbackHasWork: (args) => {
        const e = args.event as EventOf<'xreactor.map.rollbackStarted'>;
        return isValidRollbackStart(args) && (args.context.undoAll ? e.aborted : e.total) > 0;
      },
      isValidRollbackThrown,
      rollbackThrownToEnqueue: (args) => isValidRollbackThrown(args) && args.context.mode === 'fanOut',
      isCurrentRollbackEnqueue: ({ context, event }) => {
        const e = event as EventOf<'xreactor.map.enqueued'>;
        return e.kind === 'rollback' && e.from === context.rollback!.throwFrom;
      },
      opensNextRollbackThrow: ({ context, event }) => {
        const rb = context.rollback!;
        return (event as EventOf<'xreactor.map.rollbackThrowSettled'>).throw === rb.throws - 1 && rb.offset < rb.total;
      },
      rolledBackThenUndoAll: ({ context }) => context.undoAll && context.rollback!.offset >= context.rollback!.total,
      rolledBackAll: ({ context }) => context.rollback!.offset >= context.rollback!.total,
    },
  }).createMachine({
    id: 'map',
    // XState's transition() resolves the initial state without input on every call; tolerate it.
    context: ({ input }: { input: MapInput | undefined }) => ({
      mapId: input?.mapId ?? '',
      owner: input?.owner ?? '',
      ownerPath: input?.ownerPath ?? [],
      step: input?.step ?? '',
      reactor: input?.reactor ?? '',
      version: input?.version ?? 1,
      fingerprint: input?.fingerprint ?? '',
      element: input?.element ?? { reactor: '', version: 1, fingerprint: '' },
      mode: input?.mode ?? 'inline',
      batchSize: input?.batchSize ?? 1,
      atomic: input?.atomic ?? true,
      undoAll: input?.undoAll ?? false,
      total: input?.total ?? null,
      offset: 0,
      throws: 0,
      throwFrom: 0,
      exhausted: false,
      stopped: null,
      failure: null,
      outcome: null,
      stop: null,
      awaiting: null,
      rollbackReason: null,
      rollback: null,
      redispatch: null,
      redispatches: 0,
      rollbackEpoch: 0,
      cancelReason: null,
      abortReason: null,
      createdAt: input?.at ?? 0,
      updatedAt: input?.at ?? 0,
    }),
    // The stats hash holds what the context stores: written with the creating commit.
    entry: { type: 'xreactor.write.map.init', params: ({ context }) => ({ total: context.total, batchSize: context.batchSize, atomic: context.atomic, mode: context.mode }) },
    initial: 'running',
    states: {
      running: {
        initial: 'dispatching',
        on: {
          // Reaches the map by the operator's cascading signal; queued elements then skip themselves.
          'xreactor.operator.cancel': { target: '#map.cancelled', actions: 'recordCancel' },
          // An interruption of the caller advancing an inline map (a fan-out map never runs in one).
          'xreactor.execution.abort': { target: '#map.aborted', actions: 'recordAbort' },
        },
        states: {
          dispatching: {
            tags: tagsAt('running.dispatching'),
            entry: { type: 'xreactor.effect.map.throw', params: ({ context }) => ({ throw: context.throws, from: context.offset, size: throwSize(context) }) },
            on: {
              'xreactor.map.thrown': [
                { guard: 'thrownToEnqueue', target: 'enqueuing', actions: 'recordThrow' },
                { guard: 'isValidThrown', target: 'awaiting', actions: 'recordThrow' },
              ],
              'xreactor.map.stop': { guard: 'isCurrentThrowOutcome', target: 'awaiting', actions: 'recordStop' },
              'xreactor.map.sourceFailed': { guard: 'isCurrentThrowOutcome', target: 'awaiting', actions: 'recordSourceFailure' },
            },
          },
          enqueuing: {
            tags: tagsAt('running.enqueuing'),
            entry: { type: 'xreactor.effect.map.enqueue', params: ({ context }) => ({ kind: 'element' as const, from: context.throwFrom, count: context.offset - context.throwFrom }) },
            on: {
              'xreactor.map.enqueued': { guard: 'isCurrentEnqueue', target: 'awaiting', actions: assign(({ event }) => ({ updatedAt: event.at })) },
            },
          },
          awaiting: {
            tags: tagsAt('running.awaiting'),
            entry: 'awaitAwaited',
            on: {
              'xreactor.map.throwSettled': [{ guard: 'opensNextThrow', target: 'dispatching', actions: 'stopAwaiting' }, { actions: ['consume', 'awaitAwaited'] }],
              'xreactor.map.settled': { guard: 'targetKnown', target: 'concluding', actions: 'stopAwaiting' },
              'xreactor.map.redispatch': { guard: 'isForwardRedispatch', target: 'redispatching', actions: 'startRedispatch' },
            },
          },
          redispatching: {
            tags: tagsAt('running.redispatching'),
            entry: {
              type: 'xreactor.effect.map.redispatch',
              params: ({ context }) => ({ phase: 'forward' as const, from: context.redispatch!.next, size: redispatchWindowEnd(context) - context.redispatch!.next, round: context.redispatch!.round }),
            },
            on: {
              'xreactor.map.redispatched': [
                { guard: 'redispatchDone', target: 'awaiting', actions: 'endRedispatch' },
                { guard: 'redispatchMoved', target: 'redispatching', reenter: true, actions: 'moveRedispatch' },
              ],
            },
          },
          concluding: {
            tags: tagsAt('running.concluding'),
            entry: concludeEffect,
            on: {
              'xreactor.map.concluded': [
                { guard: 'concludesCompleted', target: '#map.completed', actions: 'recordOutcome' },
                { guard: 'concludesFailed', target: '#map.failed', actions: 'recordOutcome' },
                { guard: 'concludesHalted', target: '#map.halted', actions: 'recordOutcome' },
                { guard: 'concludesAborted', target: '#map.aborted', actions: 'recordOutcome' },
              ],
              'xreactor.map.throwSettled': { actions: ['consume', concludeEffect] },
            },
          },
        },
      },
      completed: {
        tags: tagsAt('completed'),
        entry: terminal('completed', true),
        on: { 'xreactor.operator.undo': { guard: 'fromOwner', target: 'rolling_back', actions: 'startRollback' } },
      },
      failed: {
        tags: tagsAt('failed'),
        entry: terminal('failed', true),
        on: { 'xreactor.operator.undo': { guard: 'fromOwner', target: 'rolling_back', actions: 'startRollback' } },
      },
      halted: {
        tags: tagsAt('halted'),
        entry: terminal('halted', true),
        on: { 'xreactor.operator.undo': { guard: 'fromOwner', target: 'rolling_back', actions: 'startRollback' } },
      },
      aborted: {
        tags: tagsAt('aborted'),
        entry: terminal('aborted', true),
        on: { 'xreactor.operator.undo': { guard: 'fromOwner', target: 'rolling_back', actions: 'startRollback' } },
      },
      cancelled: { type: 'final', tags: tagsAt('cancelled'), entry: terminal('cancelled', true) },
      rolling_back: {
        initial: 'starting',
        states: {
          starting: {
            tags: tagsAt('rolling_back.starting'),
            entry: { type: 'xreactor.effect.map.rollbackStart', params: ({ context }) => ({ reason: context.rollbackReason!, epoch: context.rollbackEpoch }) },
            on: {
              'xreactor.map.rollbackStarted': [
                { guard: 'rollbackHasWork', target: 'throwing', actions: 'recordRollbackStart' },
                { guard: 'isValidRollbackStart', target: 'awaiting', actions: 'recordRollbackStart' },
              ],
            },
          },
          throwing: {
            tags: tagsAt('rolling_back.throwing'),
            entry: {
              type: 'xreactor.effect.map.rollbackThrow',
              params: ({ context }) => {
                const rb = context.rollback!;
                return { throw: rb.throws, from: rb.offset, size: rollbackThrowSize(context), total: rb.total, list: rb.list };
              },
            },
            on: {
              'xreactor.map.rollbackThrown': [
                { guard: 'rollbackThrownToEnqueue', target: 'enqueuing', actions: 'recordRollbackThrow' },
                { guard: 'isValidRollbackThrown', target: 'awaiting', actions: 'recordRollbackThrow' },
              ],
            },
          },
          enqueuing: {
            tags: tagsAt('rolling_back.enqueuing'),
            entry: {
              type: 'xreactor.effect.map.enqueue',
              params: ({ context }) => ({ kind: 'rollback' as const, from: context.rollback!.throwFrom, count: context.rollback!.offset - context.rollback!.throwFrom }),
            },
            on: {
              'xreactor.map.enqueued': { guard: 'isCurrentRollbackEnqueue', target: 'awaiting', actions: assign(({ event }) => ({ updatedAt: event.at })) },
            },
          },
          awaiting: {
            tags: tagsAt('rolling_back.awaiting'),
            entry: 'awaitAwaited',
            on: {
              'xreactor.map.rollbackThrowSettled': [{ guard: 'opensNextRollbackThrow', target: 'throwing', actions: 'stopAwaiting' }, { actions: ['consume', 'awaitAwaited'] }],
              'xreactor.map.rolledBack': [
                { guard: 'rolledBackThenUndoAll', target: 'undoingAll', actions: 'stopAwaiting' },
                { guard: 'rolledBackAll', target: '#map.undone', actions: 'stopAwaiting' },
              ],
              'xreactor.map.redispatch': { guard: 'isRollbackRedispatch', target: 'redispatching', actions: 'startRedispatch' },
            },
          },
          redispatching: {
            tags: tagsAt('rolling_back.redispatching'),
            entry: {
              type: 'xreactor.effect.map.redispatch',
              params: ({ context }) => ({ phase: 'rollback' as const, from: context.redispatch!.next, size: redispatchWindowEnd(context) - context.redispatch!.next, round: context.redispatch!.round }),
            },
            on: {
              'xreactor.map.redispatched': [
                { guard: 'redispatchDone', target: 'awaiting', actions: 'endRedispatch' },
                { guard: 'redispatchMoved', target: 'redispatching', reenter: true, actions: 'moveRedispatch' },
              ],
            },
          },
          undoingAll: {
            tags: tagsAt('rolling_back.undoingAll'),
            entry: { type: 'xreactor.effect.map.undoAll', params: {} },
            on: { 'xreactor.map.undoAllFinished': { target: '#map.undone', actions: 'recordUndoAll' } },
          },
        },
      },
      undone: { type: 'final', tags: tagsAt('undone'), entry: terminal('cancelled', false) },
    },
  });
}

/** The map operation machine. */
export type MapMachine = ReturnType<typeof createMapMachine>;
