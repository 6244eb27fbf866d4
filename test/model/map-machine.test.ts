/**
 * Model lane for the map operation machine (machines/map.ts, docs/design/map.md §5): XState's
 * graph utilities generate paths through the machine for a few map shapes (inline and fan-out,
 * array, paged and counted sources, with and without undoAll), and those paths together must
 * reach every transition the machine declares. Every path is replayed with the pure
 * `transition()` the host uses, checking at each step the contract a host implements: the
 * effects each state asks for, the writes and signals each commit carries (targets with their
 * conditional self-signals, the elements and rollback actors it creates, at most `batchSize` of
 * them), the actors it awaits, the owner told exactly once per phase, stale throw signals
 * consumed without effect, duplicates and stale outcomes ignored, purity, and the tags of every
 * state it rests in. The exact action lists of the important transitions are asserted at the end.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { declaredTransitions, describePath } from './support/transitions.js';
import type { AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { getMicrosteps, initialTransition, transition } from 'xstate';
import type { TestPath } from 'xstate/graph';
import { createTestModel, getStateNodes } from 'xstate/graph';
import type { ElementRollbackEffect, ElementRollbackEvent, ElementRollbackWrite } from '../../machines/element-rollback.js';
import { createElementRollbackMachine } from '../../machines/element-rollback.js';
import type { ElementOutcome, ElementSpawn, MapContext, MapEffect, MapEvent, MapInput, MapMachine, MapSignal, MapStatus, MapStop, MapWrite, RollbackOutcome } from '../../machines/map.js';
import { createMapMachine, elementIdOf, MAP_MACHINE_VERSION, MAP_STATE_TAGS, mapStatusOf, mapTagsOf, mapUndoSettled, rollbackIdOf } from '../../machines/map.js';
import type { ActorTag } from '../../machines/registry-types.js';

type Snapshot = ReturnType<typeof initialTransition<MapMachine>>[0];
type Action = MapEffect | MapWrite;
type Path = TestPath<Snapshot, MapEvent>;
type EventOf<T extends MapEvent['type']> = Extract<MapEvent, { type: T }>;
type ActionOf<T extends Action['type']> = Extract<Action, { type: T }>;

const MAP_ID = 'root.charges';
const OWNER = 'root';
const ACTOR_TAGS: readonly ActorTag[] = ['settled', 'recoverable', 'awaiting', 'parked', 'paused', 'undoable'];
const FORWARD_ENDS: ReadonlySet<string> = new Set(['completed', 'failed', 'halted', 'aborted']);
const SETTLED: ReadonlySet<string> = new Set([...FORWARD_ENDS, 'cancelled', 'undone']);
const KNOWN_ACTIONS: readonly string[] = [
  'xreactor.effect.map.throw',
  'xreactor.effect.map.enqueue',
  'xreactor.effect.map.redispatch',
  'xreactor.effect.map.conclude',
  'xreactor.effect.map.rollbackStart',
  'xreactor.effect.map.rollbackThrow',
  'xreactor.effect.map.undoAll',
  'xreactor.effect.awaitChild',
  'xreactor.effect.finished',
  'xreactor.write.map.init',
  'xreactor.write.map.target',
  'xreactor.write.map.rollbackTarget',
  'xreactor.write.map.dropSource',
  'xreactor.write.spawnElements',
  'xreactor.write.spawnRollbacks',
  'xreactor.write.signal',
  'xreactor.write.awaits',
];

const inputOf = (over: Partial<MapInput>): MapInput => ({
  mapId: MAP_ID,
  owner: OWNER,
  ownerPath: [],
  step: 'charges',
  reactor: 'billing',
  version: 3,
  fingerprint: 'fp-billing',
  element: { reactor: 'charge-one', version: 2, fingerprint: 'fp-charge' },
  mode: 'fanOut',
  batchSize: 2,
  atomic: true,
  undoAll: false,
  total: null,
  at: 1_000,
  ...over,
});

/** How the host finds the source's items: an array (total known at creation), pages without a count, pages with one. */
type Source = { readonly kind: 'array' } | { readonly kind: 'paged'; readonly length: number } | { readonly kind: 'counted'; readonly length: number };

interface MapModelConfig {
  readonly title: string;
  readonly input: MapInput;
  readonly source: Source;
  /** Declared transitions this shape cannot take (by its shape, not by a machine defect). */
  readonly unreachable: readonly string[];
}

/** An inline map never enqueues and is never redispatched (the kernel recovers its one awaited actor). */
const INLINE_ONLY = [
  'running.dispatching --xreactor.map.thrown[thrownToEnqueue]--> running.enqueuing',
  'running.enqueuing --xreactor.map.enqueued--> running.awaiting',
  'running.awaiting --xreactor.map.redispatch--> running.redispatching',
  'running.redispatching --xreactor.map.redispatched[redispatchDone]--> running.awaiting',
  'running.redispatching --xreactor.map.redispatched[redispatchMoved]--> running.redispatching',
  'rolling_back.throwing --xreactor.map.rollbackThrown[rollbackThrownToEnqueue]--> rolling_back.enqueuing',
  'rolling_back.enqueuing --xreactor.map.enqueued--> rolling_back.awaiting',
  'rolling_back.awaiting --xreactor.map.redispatch--> rolling_back.redispatching',
  'rolling_back.redispatching --xreactor.map.redispatched[redispatchDone]--> rolling_back.awaiting',
  'rolling_back.redispatching --xreactor.map.redispatched[redispatchMoved]--> rolling_back.redispatching',
];
/** A fan-out rollback throw always has positions, so it always enqueues. */
const FAN_OUT_ROLLBACK = ['rolling_back.throwing --xreactor.map.rollbackThrown[isValidRollbackThrown]--> rolling_back.awaiting'];
/** Without undoAll, the rollback never calls it. */
const NO_UNDO_ALL = [
  'rolling_back.awaiting --xreactor.map.rolledBack[rolledBackThenUndoAll]--> rolling_back.undoingAll',
  'rolling_back.undoingAll --xreactor.map.undoAllFinished--> undone',
];
/**
 * With undoAll, a finished rollback always goes on to it; and the rollback throws run over the
 * aborted elements only, of which the model's host reports at most one: a single throw.
 */
const UNDO_ALL = [
  'rolling_back.awaiting --xreactor.map.rolledBack[rolledBackAll]--> undone',
  'rolling_back.awaiting --xreactor.map.rollbackThrowSettled[opensNextRollbackThrow]--> rolling_back.throwing',
];
/** A redispatch window of batchSize covers everything a throw of batchSize dispatched. */
const ONE_WINDOW = [
  'running.redispatching --xreactor.map.redispatched[redispatchMoved]--> running.redispatching',
  'rolling_back.redispatching --xreactor.map.redispatched[redispatchMoved]--> rolling_back.redispatching',
];

const CONFIGS: readonly MapModelConfig[] = [
  {
    title: 'inline, an array of 2, atomic',
    input: inputOf({ mode: 'inline', batchSize: 50, total: 2 }),
    source: { kind: 'array' },
    unreachable: [...INLINE_ONLY, ...NO_UNDO_ALL],
  },
  {
    title: 'inline, a paged source of 1 (its last page empty), not atomic, with undoAll',
    input: inputOf({ mode: 'inline', batchSize: 50, atomic: false, undoAll: true }),
    source: { kind: 'paged', length: 1 },
    unreachable: [...INLINE_ONLY, ...UNDO_ALL],
  },
  {
    title: 'fan-out, an array of 3 in throws of 2',
    input: inputOf({ total: 3 }),
    source: { kind: 'array' },
    // Every throw of an array has positions: none ends on an empty window.
    unreachable: [...FAN_OUT_ROLLBACK, ...NO_UNDO_ALL, 'running.dispatching --xreactor.map.thrown[isValidThrown]--> running.awaiting'],
  },
  {
    title: 'fan-out, a paged source of 2 in throws of 2 (its last page empty), with undoAll',
    input: inputOf({ undoAll: true }),
    source: { kind: 'paged', length: 2 },
    unreachable: [...FAN_OUT_ROLLBACK, ...UNDO_ALL, ...ONE_WINDOW],
  },
  {
    title: 'fan-out, a counted source of 3 in throws of 2, in a composed child',
    input: inputOf({ mapId: 'root.child.charges', owner: 'root.child', ownerPath: ['child'] }),
    source: { kind: 'counted', length: 3 },
    unreachable: [...FAN_OUT_ROLLBACK, ...NO_UNDO_ALL, 'running.dispatching --xreactor.map.thrown[isValidThrown]--> running.awaiting'],
  },
  {
    title: 'fan-out, an empty array',
    input: inputOf({ total: 0 }),
    source: { kind: 'array' },
    unreachable: [
      ...FAN_OUT_ROLLBACK,
      ...NO_UNDO_ALL,
      ...ONE_WINDOW,
      // Nothing is ever dispatched: no element, no second throw, no stop, no rollback work.
      'running.dispatching --xreactor.map.thrown[thrownToEnqueue]--> running.enqueuing',
      'running.enqueuing --xreactor.map.enqueued--> running.awaiting',
      'running.awaiting --xreactor.map.throwSettled[opensNextThrow]--> running.dispatching',
      'rolling_back.starting --xreactor.map.rollbackStarted[rollbackHasWork]--> rolling_back.throwing',
      'rolling_back.throwing --xreactor.map.rollbackThrown[rollbackThrownToEnqueue]--> rolling_back.enqueuing',
      'rolling_back.enqueuing --xreactor.map.enqueued--> rolling_back.awaiting',
      'rolling_back.awaiting --xreactor.map.rollbackThrowSettled[opensNextRollbackThrow]--> rolling_back.throwing',
      'rolling_back.awaiting --xreactor.map.rollbackThrowSettled[else]--> (self, targetless)',
    ],
  },
];

// ---------------------------------------------------------------------------------------------
// The declared transitions, read from the machine definition.


const pathOf = (value: Snapshot['value']): string => (typeof value === 'string' ? value : Object.entries(value).map(([top, sub]) => `${top}.${String(sub)}`)[0]!);
const error = (message: string) => ({ name: 'Error', message });
const normalize = (actions: readonly { type: string; params?: unknown }[]): Action[] => actions.map((a) => ({ type: a.type, params: a.params }) as Action);
const ofType = <T extends Action['type']>(actions: readonly Action[], type: T): ActionOf<T>[] => actions.filter((a): a is ActionOf<T> => a.type === type);
const signalsOf = (actions: readonly Action[]): MapSignal[] => ofType(actions, 'xreactor.write.signal').map((a) => a.params);
const snapshotData = (s: Snapshot) => ({ value: s.value, context: s.context, status: s.status });
const withoutClock = (c: MapContext) => ({ ...c, updatedAt: 0 });

/** The size of the next forward throw, as the design states it (batchSize, 1 inline, clipped to what is left when the total is known). */
function expectedThrowSize(c: MapContext): number {
  const size = c.mode === 'inline' ? 1 : c.batchSize;
  return c.total === null ? size : Math.max(0, Math.min(size, c.total - c.offset));
}
const targetKnown = (c: MapContext) => c.exhausted || c.stopped !== null;
const redispatchScope = (c: MapContext) => (c.redispatch!.phase === 'rollback' ? c.rollback!.offset : c.offset);
const redispatchEnd = (c: MapContext) => Math.min(c.redispatch!.next + c.batchSize, redispatchScope(c));
/** The element index at rollback position `p`: the started list is in index order here, positions count from its tail. */
const indexAt = (c: MapContext, p: number) => (c.rollback!.list === 'started' ? c.rollback!.total - 1 - p : p);

// ---------------------------------------------------------------------------------------------
// Events a host (or the store's conditional signals) can deliver in each state.

function thrownFor(source: Source, c: MapContext, at: number): EventOf<'xreactor.map.thrown'> {
  const size = expectedThrowSize(c);
  let count: number;
  let exhausted: boolean;
  let total: number | null = null;
  if (source.kind === 'array') {
    count = size;
    exhausted = c.offset + size >= c.total!;
  } else {
    count = Math.min(size, source.length - c.offset);
    // Without a count, only a short page ends the source; with one, the host knows.
    exhausted = source.kind === 'counted' ? c.offset + count >= source.length : count < size;
    if (source.kind === 'counted') total = source.length;
  }
  // Every other element's input is rejected (it fails before its first step): both kinds of creation.
  const inputs: ElementSpawn[] = Array.from({ length: count }, (_, i) =>
    (c.offset + i) % 2 === 0 ? { index: c.offset + i, input: { item: c.offset + i } } : { index: c.offset + i, error: error(`element ${c.offset + i} input rejected`) },
  );
  return { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset, count, exhausted, total, inputs };
}

function eventsFor(source: Source, s: Snapshot): MapEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  const ends: MapEvent[] = [
    { type: 'xreactor.operator.cancel', at, reason: 'operator cancel' },
    { type: 'xreactor.execution.abort', at, reason: 'caller aborted' },
  ];
  const rb = c.rollback;
  switch (pathOf(s.value)) {
    case 'running.dispatching':
      return [
        thrownFor(source, c, at),
        ...(['failed', 'halted', 'aborted'] as const).map((kind): MapEvent => ({ type: 'xreactor.map.stop', at, throw: c.throws, stop: { kind, index: Math.max(0, c.offset - 1) } })),
        { type: 'xreactor.map.sourceFailed', at, throw: c.throws, error: { name: 'XreactorError', code: 'map_source_invalid', message: 'page returned 3 items for a limit of 2' } },
        ...ends,
      ];
    case 'running.enqueuing':
      return [{ type: 'xreactor.map.enqueued', at, kind: 'element', from: c.throwFrom }, ...ends];
    case 'running.awaiting':
      return [
        // The last throw's signal: it opens the next throw, or is stale and consumed.
        ...(c.throws > 0 ? [{ type: 'xreactor.map.throwSettled', at, throw: c.throws - 1 } as const] : []),
        ...(targetKnown(c) ? [{ type: 'xreactor.map.settled', at } as const] : []),
        ...(c.mode === 'fanOut' ? [{ type: 'xreactor.map.redispatch', at, phase: 'forward' } as const] : []),
        ...ends,
      ];
    case 'running.redispatching':
    case 'rolling_back.redispatching':
      return [{ type: 'xreactor.map.redispatched', at, next: redispatchEnd(c) }, ...(c.rollback === null ? ends : [])];
    case 'running.concluding': {
      const outcomes = c.stopped === null ? (['completed', 'failed', 'halted', 'aborted'] as const) : c.stopped === 'halt' ? (['halted'] as const) : c.stopped === 'abort' ? (['aborted'] as const) : (['failed'] as const);
      return [
        ...outcomes.map((outcome): MapEvent => ({ type: 'xreactor.map.concluded', at, outcome, stop: outcome === 'completed' ? null : (c.stop ?? { kind: outcome === 'failed' ? 'failed' : outcome, index: Math.max(0, c.offset - 1) }) })),
        { type: 'xreactor.map.throwSettled', at, throw: Math.max(0, c.throws - 1) },
        ...ends,
      ];
    }
    case 'completed':
    case 'failed':
    case 'halted':
    case 'aborted':
      return [{ type: 'xreactor.operator.undo', at, from: c.owner }];
    case 'rolling_back.starting': {
      const totals = [...new Set([0, c.offset])];
      return totals.flatMap((total) => [...new Set([0, Math.min(1, total)])].map((aborted): MapEvent => ({ type: 'xreactor.map.rollbackStarted', at, total, aborted })));
    }
    case 'rolling_back.throwing': {
      const n = Math.min(c.mode === 'inline' ? 1 : c.batchSize, rb!.total - rb!.offset);
      const positions = Array.from({ length: n }, (_, i) => ({ position: rb!.offset + i, index: indexAt(c, rb!.offset + i) }));
      return [{ type: 'xreactor.map.rollbackThrown', at, throw: rb!.throws, from: rb!.offset, positions }];
    }
    case 'rolling_back.enqueuing':
      return [{ type: 'xreactor.map.enqueued', at, kind: 'rollback', from: rb!.throwFrom }];
    case 'rolling_back.awaiting':
      return [
        ...(rb!.throws > 0 ? [{ type: 'xreactor.map.rollbackThrowSettled', at, throw: rb!.throws - 1 } as const] : []),
        ...(rb!.offset >= rb!.total ? [{ type: 'xreactor.map.rolledBack', at } as const] : []),
        ...(c.mode === 'fanOut' ? [{ type: 'xreactor.map.redispatch', at, phase: 'rollback' } as const] : []),
      ];
    case 'rolling_back.undoingAll':
      return [
        { type: 'xreactor.map.undoAllFinished', at, failure: null },
        { type: 'xreactor.map.undoAllFinished', at, failure: { reason: 'raised', error: error('ledger unavailable') } },
      ];
    default:
      return [];
  }
}

/** Events no state may accept at `s`: wrong throw, window or phase, a sender that is not the owner, a `settled` before the target is known. */
function ignoredEventsFor(s: Snapshot): MapEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  const good = (from: number, count: number): ElementSpawn[] => Array.from({ length: count }, (_, i) => ({ index: from + i, input: null }));
  const size = expectedThrowSize(c);
  const rb = c.rollback;
  return [
    { type: 'xreactor.map.thrown', at, throw: c.throws + 1, from: c.offset, count: 0, exhausted: true, total: null, inputs: [] },
    { type: 'xreactor.map.thrown', at, throw: c.throws - 1, from: c.offset, count: 0, exhausted: true, total: null, inputs: [] },
    { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset + 1, count: 0, exhausted: true, total: null, inputs: [] },
    // More than a throw may create, and inputs that do not match the window.
    { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset, count: size + 1, exhausted: false, total: null, inputs: good(c.offset, size + 1) },
    { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset, count: 1, exhausted: false, total: null, inputs: good(c.offset + 1, 1) },
    { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset, count: 1, exhausted: false, total: null, inputs: [] },
    // An empty window that does not end the source.
    { type: 'xreactor.map.thrown', at, throw: c.throws, from: c.offset, count: 0, exhausted: false, total: null, inputs: [] },
    { type: 'xreactor.map.stop', at, throw: c.throws + 1, stop: { kind: 'failed', index: 0 } },
    { type: 'xreactor.map.sourceFailed', at, throw: c.throws - 1, error: error('stale') },
    { type: 'xreactor.map.enqueued', at, kind: 'element', from: c.throwFrom + 1 },
    { type: 'xreactor.map.enqueued', at, kind: 'rollback', from: -1 },
    ...(targetKnown(c) ? [] : [{ type: 'xreactor.map.settled', at } as const]),
    { type: 'xreactor.map.redispatch', at, phase: c.rollback === null || !pathOf(s.value).startsWith('rolling_back') ? 'rollback' : 'forward' },
    { type: 'xreactor.map.redispatched', at, next: -1 },
    ...(c.redispatch === null ? [] : [{ type: 'xreactor.map.redispatched', at, next: redispatchEnd(c) + 1 } as const]),
    { type: 'xreactor.operator.undo', at, from: 'someone-else' },
    { type: 'xreactor.operator.undo', at },
    { type: 'xreactor.map.rollbackStarted', at, total: 1, aborted: 2 },
    { type: 'xreactor.map.rollbackStarted', at, total: -1, aborted: 0 },
    ...(rb === null
      ? []
      : [
          { type: 'xreactor.map.rollbackThrown', at, throw: rb.throws + 1, from: rb.offset, positions: [] } as const,
          { type: 'xreactor.map.rollbackThrown', at, throw: rb.throws, from: rb.offset + 1, positions: [{ position: rb.offset + 1, index: 0 }] } as const,
          { type: 'xreactor.map.rollbackThrown', at, throw: rb.throws, from: rb.offset, positions: [{ position: rb.offset + 1, index: 0 }] } as const,
          { type: 'xreactor.map.enqueued', at, kind: 'rollback', from: rb.throwFrom + 1 } as const,
          ...(rb.offset >= rb.total ? [] : [{ type: 'xreactor.map.rolledBack', at } as const]),
        ]),
  ];
}

/** Stale throw signals: not the last throw's, or of a throw to come. Consumed without effect where a state takes them, ignored elsewhere. */
function staleThrowSignalsFor(s: Snapshot): MapEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  const rb = c.rollback;
  return [
    { type: 'xreactor.map.throwSettled', at, throw: c.throws - 2 },
    { type: 'xreactor.map.throwSettled', at, throw: c.throws },
    ...(rb === null
      ? []
      : [{ type: 'xreactor.map.rollbackThrowSettled', at, throw: rb.throws - 2 } as const, { type: 'xreactor.map.rollbackThrowSettled', at, throw: rb.throws } as const]),
  ];
}
/** The states that consume a stale throw signal of this type (every other state leaves it in the inbox, or is final). */
function consumes(path: string, type: MapEvent['type']): boolean {
  if (type === 'xreactor.map.rollbackThrowSettled') return path === 'rolling_back.awaiting';
  return path === 'running.awaiting' || path === 'running.concluding';
}
/** What a state still owes after its commit (its entry effect): a commit that consumes a stale signal restates it, and adds nothing. */
function pendingEffects(s: Snapshot): Action[] {
  const c = s.context;
  const path = pathOf(s.value);
  if (path === 'running.concluding') return [{ type: 'xreactor.effect.map.conclude', params: { target: c.offset } }];
  if (s.hasTag('awaiting') && c.awaiting !== null) return [{ type: 'xreactor.effect.awaitChild', params: { child: c.awaiting } }];
  return [];
}

/**
 * The context fields that decide control (what the guards read and what the events name); the
 * clock, reasons, error payloads and the redispatch round count are left out, so redispatch and
 * stale-signal loops close.
 */
function abstractKey(s: Snapshot): string {
  const c = s.context;
  return JSON.stringify([
    s.value,
    c.offset,
    c.throws,
    c.throwFrom,
    c.exhausted,
    c.stopped,
    c.total,
    c.outcome,
    c.awaiting,
    c.rollback === null ? null : { ...c.rollback, undoAllFailure: c.rollback.undoAllFailure !== null },
    c.redispatch === null ? null : [c.redispatch.phase, c.redispatch.next],
  ]);
}

function eventVariant(e: MapEvent): string {
  switch (e.type) {
    case 'xreactor.map.thrown':
      return `${e.type}(count=${e.count},exhausted=${e.exhausted})`;
    case 'xreactor.map.stop':
      return `${e.type}(${e.stop.kind})`;
    case 'xreactor.map.concluded':
      return `${e.type}(${e.outcome})`;
    case 'xreactor.map.rollbackStarted':
      return `${e.type}(total=${e.total},aborted=${e.aborted})`;
    case 'xreactor.map.undoAllFinished':
      return `${e.type}(${e.failure === null ? 'ok' : 'failure'})`;
    case 'xreactor.map.throwSettled':
    case 'xreactor.map.rollbackThrowSettled':
      return `${e.type}(${e.throw})`;
    default:
      return e.type;
  }
}
const isRealEvent = (event: MapEvent) => 'at' in event;

function generatePaths(config: MapModelConfig, machine: MapMachine): Path[] {
  const model = createTestModel(machine, {
    input: config.input,
    events: (s) => eventsFor(config.source, s),
    filterEvents: (_, event) => isRealEvent(event),
    // A vertex is a state reached through a given edge, so the shortest paths reach every edge.
    serializeState: (state, event, previous) => (event === undefined || previous === undefined ? abstractKey(state) : `${abstractKey(state)} via ${eventVariant(event)} from ${abstractKey(previous)}`),
    limit: 100_000,
  });
  return model.getShortestPaths();
}

/** The declared transitions one macrostep takes (the machine has no eventless transitions: one per event). */
const takenTransitions = (machine: MapMachine, before: Snapshot, event: MapEvent): AnyTransitionDefinition[] => {
  expect(getMicrosteps(machine, before, event).length).toBeLessThanOrEqual(1);
  return [...machine.getTransitionData(before, event)];
};

function expectTags(s: Snapshot, where: string): void {
  const declared = mapTagsOf(s.value);
  expect([...s.tags].sort(), `${where}: the state's tags differ from mapTagsOf(${JSON.stringify(s.value)})`).toEqual([...declared].sort());
  for (const tag of ACTOR_TAGS) expect(s.hasTag(tag), `${where}: hasTag('${tag}')`).toBe(declared.has(tag));
}

/** The context stays of constant size: no field (but the owner's path) holds an array, at any depth. */
function expectConstantSize(c: MapContext, where: string): void {
  const arrays: string[] = [];
  const walk = (value: unknown, key: string) => {
    if (Array.isArray(value)) arrays.push(key);
    else if (typeof value === 'object' && value !== null) for (const [k, v] of Object.entries(value)) walk(v, `${key}.${k}`);
  };
  for (const [k, v] of Object.entries(c)) if (k !== 'ownerPath') walk(v, k);
  expect(arrays, `${where}: per-element data in the map's context`).toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// Replay: the contract at every step of every path.

interface ReplayResult {
  readonly covered: Set<string>;
  readonly transitionsReplayed: number;
}

function replay(config: MapModelConfig, machine: MapMachine, labels: Map<AnyTransitionDefinition, string>, paths: readonly Path[]): ReplayResult {
  const { input } = config;
  const covered = new Set<string>();
  const checkedEdges = new Set<string>();
  let transitionsReplayed = 0;
  const maxPerThrow = input.mode === 'inline' ? 1 : input.batchSize;

  for (const path of paths) {
    const [initial, initialActions] = initialTransition(machine, input);
    expect(initial.value).toEqual({ running: 'dispatching' });
    expect(normalize(initialActions)).toEqual([
      { type: 'xreactor.write.map.init', params: { total: input.total, batchSize: input.batchSize, atomic: input.atomic, mode: input.mode } },
      { type: 'xreactor.effect.map.throw', params: { throw: 0, from: 0, size: expectedThrowSize(initial.context) } },
    ]);
    expectTags(initial, 'initial');
    let snapshot = initial;
    /** The store's record of the actors this map awaits, as the writes set it. */
    let awaits: readonly string[] = [];
    /** Signals to the owner along the path, by dedupe key. */
    const toOwner = new Map<string, MapSignal>();
    /** Element indexes and rollback positions created along the path, in order. */
    const elements: number[] = [];
    const rollbackPositions: number[] = [];
    /** The last position of the last throw (its slot settles before the next throw: the events follow that rule). */

    for (const [i, pathStep] of path.steps.entries()) {
      const event = pathStep.event;
      if ((event.type as string) === 'xstate.init') continue;
      const before = snapshot;
      const where = `path ${describePath(path, eventVariant)}\n  at step ${i}: ${eventVariant(event)} from ${abstractKey(before)}`;
      const edge = `${abstractKey(before)} ${eventVariant(event)}`;
      const firstTime = !checkedEdges.has(edge);
      const beforeData = firstTime ? structuredClone(snapshotData(before)) : undefined;

      const [next, rawActions] = transition(machine, before, event);
      const actions = normalize(rawActions);
      transitionsReplayed++;
      expect(next, `${where}: generated event ${JSON.stringify(event)} was ignored`).not.toBe(before);
      const c = next.context;
      const b = before.context;
      const fromPath = pathOf(before.value);
      const toPath = pathOf(next.value);
      const consumed = (event.type === 'xreactor.map.throwSettled' || event.type === 'xreactor.map.rollbackThrowSettled') && toPath === fromPath;

      if (firstTime) {
        checkedEdges.add(edge);
        for (const t of takenTransitions(machine, before, event)) covered.add(labels.get(t) ?? `UNDECLARED ${t.source.id} ${t.eventType}`);
        // Purity: the same event from the same snapshot gives the same snapshot and actions, and leaves the input untouched.
        const [again, againActions] = transition(machine, before, event);
        expect(snapshotData(again), `${where}: transition() is not deterministic`).toEqual(snapshotData(next));
        expect(normalize(againActions), `${where}: transition() actions are not deterministic`).toEqual(actions);
        expect(snapshotData(before), `${where}: transition() mutated its input snapshot`).toEqual(beforeData);
      }

      expectTags(next, where);
      expectConstantSize(c, where);
      for (const action of actions) expect(KNOWN_ACTIONS, `${where}: unknown action ${action.type}`).toContain(action.type);
      expect(c.updatedAt, `${where}: updatedAt does not record the event's clock`).toBe(event.at);
      expect(c.mapId, where).toBe(input.mapId);
      expect(c.batchSize, `${where}: the stored batchSize changed`).toBe(input.batchSize);
      expect(c.atomic, where).toBe(input.atomic);
      expect(c.mode, where).toBe(input.mode);
      expect(next.status === 'done', `${where}: final states`).toBe(toPath === 'cancelled' || toPath === 'undone');
      expect(mapStatusOf(next.value), where).toBe((toPath === 'undone' ? 'cancelled' : toPath.split('.')[0]) as MapStatus);

      // A stale throw signal is consumed: the commit records the clock and removes the entry; it writes and signals
      // nothing, and restates the state's pending effect (the outbox it replaces).
      if (consumed) {
        expect(withoutClock(c), `${where}: consuming a stale signal changed the context`).toEqual(withoutClock(b));
        expect(consumes(fromPath, event.type), `${where}: consumed where it should wait`).toBe(true);
        expect(actions, `${where}: consuming a stale signal did more than restate the pending effect`).toEqual(pendingEffects(before));
      }
      if ((event.type === 'xreactor.map.throwSettled' || event.type === 'xreactor.map.rollbackThrowSettled') && !consumed) {
        // Only the last throw's signal opens the next throw, and only while there is more to throw.
        expect(event.throw, where).toBe(event.type === 'xreactor.map.throwSettled' ? b.throws - 1 : b.rollback!.throws - 1);
        expect(toPath, where).toBe(event.type === 'xreactor.map.throwSettled' ? 'running.dispatching' : 'rolling_back.throwing');
      }

      // Writes: awaits as the store records them.
      for (const write of ofType(actions, 'xreactor.write.awaits')) awaits = write.params.actors;
      expect(awaits, `${where}: the store's awaited actors differ from context.awaiting`).toEqual(c.awaiting === null ? [] : [c.awaiting]);
      if (c.awaiting !== null) {
        expect(next.hasTag('awaiting'), `${where}: an awaited actor recorded outside a waiting state`).toBe(true);
        expect(input.mode, `${where}: a fan-out map awaits no actor`).toBe('inline');
      }
      const awaitChild = ofType(actions, 'xreactor.effect.awaitChild');
      expect(awaitChild, `${where}: awaitChild`).toEqual(next.hasTag('awaiting') && c.awaiting !== null ? [{ type: 'xreactor.effect.awaitChild', params: { child: c.awaiting } }] : []);

      // Effects of the state entered (each entry asks for exactly its own effect).
      const entered = !consumed && (toPath !== fromPath || toPath.endsWith('redispatching'));
      const throwEffects = ofType(actions, 'xreactor.effect.map.throw');
      expect(throwEffects, `${where}: throw effect`).toEqual(entered && toPath === 'running.dispatching' ? [{ type: 'xreactor.effect.map.throw', params: { throw: c.throws, from: c.offset, size: expectedThrowSize(c) } }] : []);
      for (const t of throwEffects) expect(t.params.size, `${where}: a throw larger than batchSize`).toBeLessThanOrEqual(maxPerThrow);
      const enqueues = ofType(actions, 'xreactor.effect.map.enqueue');
      if (entered && toPath === 'running.enqueuing') expect(enqueues, where).toEqual([{ type: 'xreactor.effect.map.enqueue', params: { kind: 'element', from: c.throwFrom, count: c.offset - c.throwFrom } }]);
      else if (entered && toPath === 'rolling_back.enqueuing')
        expect(enqueues, where).toEqual([{ type: 'xreactor.effect.map.enqueue', params: { kind: 'rollback', from: c.rollback!.throwFrom, count: c.rollback!.offset - c.rollback!.throwFrom } }]);
      else expect(enqueues, where).toEqual([]);
      for (const e of enqueues) expect(e.params.count, `${where}: enqueue count`).toBeGreaterThan(0);
      for (const e of enqueues) expect(e.params.count, `${where}: more jobs than batchSize in one commit`).toBeLessThanOrEqual(maxPerThrow);
      expect(ofType(actions, 'xreactor.effect.map.redispatch'), where).toEqual(
        entered && toPath.endsWith('redispatching')
          ? [{ type: 'xreactor.effect.map.redispatch', params: { phase: c.redispatch!.phase, from: c.redispatch!.next, size: redispatchEnd(c) - c.redispatch!.next, round: c.redispatch!.round } }]
          : [],
      );
      if (toPath.endsWith('redispatching')) expect(c.redispatch!.phase, where).toBe(toPath.startsWith('rolling_back') ? 'rollback' : 'forward');
      expect(ofType(actions, 'xreactor.effect.map.conclude'), where).toEqual((entered || consumed) && toPath === 'running.concluding' ? [{ type: 'xreactor.effect.map.conclude', params: { target: c.offset } }] : []);
      expect(ofType(actions, 'xreactor.effect.map.rollbackStart'), where).toEqual(
        entered && toPath === 'rolling_back.starting' ? [{ type: 'xreactor.effect.map.rollbackStart', params: { reason: b.outcome === 'completed' ? 'undo' : 'compensate', epoch: 1 } }] : [],
      );
      expect(ofType(actions, 'xreactor.effect.map.rollbackThrow'), where).toEqual(
        entered && toPath === 'rolling_back.throwing'
          ? [{ type: 'xreactor.effect.map.rollbackThrow', params: { throw: c.rollback!.throws, from: c.rollback!.offset, size: Math.min(maxPerThrow, c.rollback!.total - c.rollback!.offset), total: c.rollback!.total, list: input.undoAll ? 'aborted' : 'started' } }]
          : [],
      );
      expect(ofType(actions, 'xreactor.effect.map.undoAll'), where).toEqual(entered && toPath === 'rolling_back.undoingAll' ? [{ type: 'xreactor.effect.map.undoAll', params: {} }] : []);
      if (toPath === 'rolling_back.undoingAll') expect(input.undoAll, where).toBe(true);

      // Elements: created only by a throw's outcome, exactly its window, at most batchSize.
      const spawns = ofType(actions, 'xreactor.write.spawnElements');
      if (event.type === 'xreactor.map.thrown' && event.count > 0) {
        expect(spawns, `${where}: spawnElements`).toEqual([
          {
            type: 'xreactor.write.spawnElements',
            params: {
              element: input.element,
              lease: input.mode === 'inline',
              elements: event.inputs.map((spawn, k) => ({
                id: elementIdOf(input.mapId, spawn.index),
                map: { id: input.mapId, index: spawn.index, throw: event.throw, lastOfThrow: k === event.count - 1, fanOut: input.mode === 'fanOut', atomic: input.atomic },
                spawn,
              })),
            },
          },
        ]);
        expect(event.count, where).toBeLessThanOrEqual(maxPerThrow);
        elements.push(...event.inputs.map((x) => x.index));
        if (input.mode === 'inline') expect(c.awaiting, `${where}: an inline map awaits the element it created`).toBe(elementIdOf(input.mapId, event.from));
      } else {
        expect(spawns, `${where}: elements created outside a throw`).toEqual([]);
      }
      expect(elements, `${where}: elements are created once each, in position order`).toEqual(elements.map((_, k) => k));

      // The target: written when dispatch ends, always with its conditional self-signal.
      const endsDispatch = (event.type === 'xreactor.map.thrown' && event.exhausted) || event.type === 'xreactor.map.stop' || event.type === 'xreactor.map.sourceFailed';
      expect(ofType(actions, 'xreactor.write.map.target'), `${where}: target write`).toEqual(endsDispatch ? [{ type: 'xreactor.write.map.target', params: { target: c.offset } }] : []);
      const selfSignals = signalsOf(actions).filter((sg) => sg.to === input.mapId);
      const expectedSelf: MapSignal[] = [];
      if (endsDispatch) expectedSelf.push({ to: input.mapId, event: { type: 'xreactor.map.settled', at: event.at }, dedupeKey: 'settled', condition: 'mapSettled' });
      if (event.type === 'xreactor.map.rollbackStarted') expectedSelf.push({ to: input.mapId, event: { type: 'xreactor.map.rolledBack', at: event.at }, dedupeKey: 'rolledback', condition: 'rolledBack' });
      expect(selfSignals, `${where}: self-signals`).toEqual(expectedSelf);
      if (endsDispatch) expect(targetKnown(c), where).toBe(true);
      if (event.type === 'xreactor.map.rollbackStarted') {
        const target = input.undoAll ? event.aborted : event.total;
        expect(ofType(actions, 'xreactor.write.map.rollbackTarget'), where).toEqual([{ type: 'xreactor.write.map.rollbackTarget', params: { target } }]);
        expect(c.rollback, where).toEqual({ list: input.undoAll ? 'aborted' : 'started', total: target, offset: 0, throws: 0, throwFrom: 0, undoAllFailure: null });
      } else {
        expect(ofType(actions, 'xreactor.write.map.rollbackTarget'), where).toEqual([]);
      }

      // Rollback actors: created only by a rollback throw's outcome, positions in order from 0 (newest-started first).
      const rbSpawns = ofType(actions, 'xreactor.write.spawnRollbacks');
      if (event.type === 'xreactor.map.rollbackThrown') {
        expect(rbSpawns, where).toEqual([
          {
            type: 'xreactor.write.spawnRollbacks',
            params: {
              lease: input.mode === 'inline',
              actors: event.positions.map((p, k) => ({
                id: rollbackIdOf(input.mapId, p.position),
                element: elementIdOf(input.mapId, p.index),
                position: p.position,
                index: p.index,
                throw: event.throw,
                lastOfThrow: k === event.positions.length - 1,
                mode: input.mode,
              })),
            },
          },
        ]);
        expect(event.positions.length, where).toBeLessThanOrEqual(maxPerThrow);
        rollbackPositions.push(...event.positions.map((p) => p.position));
        if (input.mode === 'inline') expect(c.awaiting, where).toBe(rollbackIdOf(input.mapId, event.from));
      } else {
        expect(rbSpawns, where).toEqual([]);
      }
      expect(rollbackPositions, `${where}: rollback positions are thrown once each, from the tail`).toEqual(rollbackPositions.map((_, k) => k));

      // The owner: told once on entering each end, keyed by status and epoch; never otherwise.
      const ownerSignals = signalsOf(actions).filter((sg) => sg.to !== input.mapId);
      const finished = ofType(actions, 'xreactor.effect.finished');
      if (SETTLED.has(toPath) && toPath !== fromPath) {
        const status = mapStatusOf(next.value);
        const signal: MapSignal = { to: input.owner, event: { type: 'xreactor.child.settled', at: event.at, child: input.mapId, status }, dedupeKey: `${input.mapId}.settled.${status}.${c.rollbackEpoch}` };
        expect(ownerSignals, `${where}: settle signal`).toEqual([signal]);
        expect(finished, where).toEqual([{ type: 'xreactor.effect.finished', params: { status } }]);
        expect(ofType(actions, 'xreactor.write.map.dropSource'), `${where}: the source list is dropped at the end of the forward phase`).toEqual(toPath === 'undone' ? [] : [{ type: 'xreactor.write.map.dropSource', params: {} }]);
        expect(toOwner.has(signal.dedupeKey), `${where}: the owner is told twice with one key`).toBe(false);
        toOwner.set(signal.dedupeKey, signal);
        expect(c.rollbackEpoch, where).toBe(toPath === 'undone' ? 1 : 0);
      } else {
        expect(ownerSignals, `${where}: a signal to the owner outside a settle`).toEqual([]);
        expect(finished, where).toEqual([]);
        expect(ofType(actions, 'xreactor.write.map.dropSource'), where).toEqual([]);
      }
      expect(toOwner.size, `${where}: more than one settle per phase`).toBeLessThanOrEqual(2);
      if (toPath === 'undone') {
        // The whole work list was thrown, once, newest-started first.
        expect(rollbackPositions.length, `${where}: positions thrown`).toBe(c.rollback!.total);
        expect(c.rollbackReason, where).not.toBeNull();
      }
      if (SETTLED.has(toPath)) {
        const [undone] = transition(machine, next, { type: 'xreactor.operator.undo', at: event.at + 1, from: input.owner });
        expect(undone !== next, `${where}: the owner's undo is accepted in ${toPath} iff it is tagged undoable`).toBe(mapTagsOf(next.value).has('undoable'));
        expect(mapUndoSettled(next.value), where).toBe(toPath === 'undone');
      }
      if (event.type === 'xreactor.operator.cancel' || event.type === 'xreactor.execution.abort') {
        // Nothing is thrown, enqueued or rolled back after a cancel or an abort.
        expect(actions.map((a) => a.type).sort(), `${where}: cancel/abort effects`).toEqual(
          [...(b.awaiting === null ? [] : ['xreactor.write.awaits']), 'xreactor.effect.finished', 'xreactor.write.signal', 'xreactor.write.map.dropSource'].sort(),
        );
      }

      if (!firstTime) {
        snapshot = next;
        continue;
      }
      // Duplicate delivery: ignored (same snapshot object, no actions); a throw signal may be consumed again, without effect.
      const [dup, dupActions] = transition(machine, next, event);
      if (dup !== next) {
        expect(event.type === 'xreactor.map.throwSettled' || event.type === 'xreactor.map.rollbackThrowSettled', `${where}: a duplicate ${event.type} was accepted`).toBe(true);
        expect(normalize(dupActions), where).toEqual(pendingEffects(next));
        expect(dup.value, where).toEqual(next.value);
        expect(withoutClock(dup.context), where).toEqual(withoutClock(c));
      } else {
        expect(dupActions, where).toEqual([]);
      }
      for (const stale of ignoredEventsFor(next)) {
        const [ignored, ignoredActions] = transition(machine, next, stale);
        expect(ignored, `${where}: ${JSON.stringify(stale)} was accepted in ${abstractKey(next)}`).toBe(next);
        expect(ignoredActions, where).toEqual([]);
      }
      for (const stale of staleThrowSignalsFor(next)) {
        const [after, staleActions] = transition(machine, next, stale);
        if (consumes(toPath, stale.type)) {
          expect(normalize(staleActions), `${where}: a stale ${eventVariant(stale)} had effects in ${toPath}`).toEqual(pendingEffects(next));
          expect(after, `${where}: a stale ${eventVariant(stale)} was left in the inbox in ${toPath}`).not.toBe(next);
          expect(after.value, where).toEqual(next.value);
          expect(withoutClock(after.context), where).toEqual(withoutClock(c));
          expect(after.context.updatedAt, where).toBe(stale.at);
        } else {
          expect(after, `${where}: a stale ${eventVariant(stale)} was consumed in ${toPath}`).toBe(next);
          expect(staleActions, where).toEqual([]);
        }
      }
      snapshot = next;
    }
  }
  return { covered, transitionsReplayed };
}

// ---------------------------------------------------------------------------------------------

const coveredByConfig = new Map<string, Set<string>>();
let allLabels: readonly string[] = [];

describe('map machine model (xstate/graph)', () => {
  for (const config of CONFIGS) {
    it(`generated paths reach every reachable transition: ${config.title}`, () => {
      const machine = createMapMachine();
      const labels = declaredTransitions(machine);
      allLabels = [...labels.values()].sort();
      for (const label of config.unreachable) expect(allLabels, `"${label}", listed as unreachable, is not a declared transition`).toContain(label);
      expect(new Set(config.unreachable).size, 'a transition is listed twice as unreachable').toBe(config.unreachable.length);

      const paths = generatePaths(config, machine);
      expect(paths.length).toBeGreaterThan(0);
      const { covered, transitionsReplayed } = replay(config, machine, labels, paths);
      coveredByConfig.set(config.title, covered);
      console.info(`[model] map, ${config.title}: ${labels.size} declared transitions, ${covered.size} reached, ${config.unreachable.length} unreachable by its shape, ${paths.length} paths, ${transitionsReplayed} transitions replayed`);

      expect([...covered].filter((label) => label.startsWith('UNDECLARED')), 'taken transitions missing from the definition walk').toEqual([]);
      const missing = allLabels.filter((label) => !covered.has(label) && !config.unreachable.includes(label));
      expect(missing, `unreached transitions of "${config.title}":\n  ${missing.join('\n  ')}`).toEqual([]);
      expect(config.unreachable.filter((label) => covered.has(label)), `transitions listed as unreachable for "${config.title}" were reached`).toEqual([]);
    });
  }

  it('the shapes together reach every declared transition', () => {
    expect(coveredByConfig.size, 'run the per-shape tests first (same file, sequential)').toBe(CONFIGS.length);
    const union = new Set([...coveredByConfig.values()].flatMap((s) => [...s]));
    const missing = allLabels.filter((label) => !union.has(label));
    expect(missing, `transitions no shape reaches:\n  ${missing.join('\n  ')}`).toEqual([]);
    // Version 1: 35 transitions. Forward 18: cancel and abort on `running`; dispatching's thrown
    // (to enqueuing, to awaiting), stop, sourceFailed; enqueuing's enqueued; awaiting's
    // throwSettled (next throw, stale consumed), settled, redispatch; redispatching's two windows;
    // concluding's four outcomes and its stale consume. Forward ends 4: the owner's undo. Rollback
    // 13: starting's two; throwing's two; enqueuing's one; awaiting's rbthrow (next, stale),
    // rolledBack (undoAll or not), redispatch; redispatching's two windows; undoingAll's one.
    expect(allLabels.length).toBe(35);
  });
});

describe('map machine state tags', () => {
  it('every state the machine rests in carries the tags MAP_STATE_TAGS declares for it, and only those', () => {
    const machine = createMapMachine();
    const resting = getStateNodes(machine.root).filter((node) => node.type !== 'compound');
    const path = (node: AnyStateNode) => node.path.join('.');
    expect(resting.map(path).sort()).toEqual(Object.keys(MAP_STATE_TAGS).sort());
    for (const node of resting) expect([...node.tags].sort(), path(node)).toEqual([...(MAP_STATE_TAGS as Record<string, readonly string[]>)[path(node)]!].sort());
    for (const node of getStateNodes(machine.root).filter((n) => n.type === 'compound')) expect(node.tags, path(node)).toEqual([]);
  });

  it('mapTagsOf, mapStatusOf and mapUndoSettled read a stored state value', () => {
    expect(MAP_MACHINE_VERSION).toBe(1);
    expect([...mapTagsOf({ running: 'awaiting' })]).toEqual(['awaiting']);
    expect([...mapTagsOf({ rolling_back: 'throwing' })]).toEqual(['recoverable']);
    expect([...mapTagsOf('failed')].sort()).toEqual(['settled', 'undoable']);
    expect([...mapTagsOf('undone')]).toEqual(['settled']);
    expect([...mapTagsOf({ running: 'noSuchState' })]).toEqual([]);
    expect(mapStatusOf({ running: 'dispatching' })).toBe('running');
    expect(mapStatusOf({ rolling_back: 'undoingAll' })).toBe('rolling_back');
    expect(mapStatusOf('undone')).toBe('cancelled');
    expect(mapStatusOf('halted')).toBe('halted');
    // The owner undoing a map waits for its rollback's end, not for its forward `failed`.
    expect(mapUndoSettled('failed')).toBe(false);
    expect(mapUndoSettled('cancelled')).toBe(false);
    expect(mapUndoSettled('undone')).toBe(true);
  });
});

describe('map machine contract: what each commit asks for', () => {
  const machine = createMapMachine();
  const element = { reactor: 'charge-one', version: 2, fingerprint: 'fp-charge' };
  const acts = (actions: readonly { type: string; params?: unknown }[]) => normalize(actions);
  const settledSignal = (at: number): MapSignal => ({ to: MAP_ID, event: { type: 'xreactor.map.settled', at }, dedupeKey: 'settled', condition: 'mapSettled' });
  const rolledBackSignal = (at: number): MapSignal => ({ to: MAP_ID, event: { type: 'xreactor.map.rolledBack', at }, dedupeKey: 'rolledback', condition: 'rolledBack' });
  const link = (index: number, thr: number, lastOfThrow: boolean, fanOut: boolean) => ({ id: MAP_ID, index, throw: thr, lastOfThrow, fanOut, atomic: true });

  it('fan-out: throws of batchSize, enqueued by the next commit; stale throw signals consumed; settled once; rollback from the tail', () => {
    let at = 2_000;
    let [s, a] = initialTransition(machine, inputOf({ total: 3 }));
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.map.init', params: { total: 3, batchSize: 2, atomic: true, mode: 'fanOut' } },
      { type: 'xreactor.effect.map.throw', params: { throw: 0, from: 0, size: 2 } },
    ]);

    [s, a] = transition(machine, s, { type: 'xreactor.map.thrown', at: ++at, throw: 0, from: 0, count: 2, exhausted: false, total: null, inputs: [{ index: 0, input: 'a' }, { index: 1, input: 'b' }] });
    expect(s.value).toEqual({ running: 'enqueuing' });
    expect(acts(a)).toEqual([
      {
        type: 'xreactor.write.spawnElements',
        params: {
          element,
          lease: false,
          elements: [
            { id: 'root.charges.0', map: link(0, 0, false, true), spawn: { index: 0, input: 'a' } },
            { id: 'root.charges.1', map: link(1, 0, true, true), spawn: { index: 1, input: 'b' } },
          ],
        },
      },
      { type: 'xreactor.effect.map.enqueue', params: { kind: 'element', from: 0, count: 2 } },
    ]);
    // A throw's signal that lands before its enqueue committed waits in the inbox (not consumed here).
    expect(transition(machine, s, { type: 'xreactor.map.throwSettled', at: at + 1, throw: 0 })[0]).toBe(s);

    [s, a] = transition(machine, s, { type: 'xreactor.map.enqueued', at: ++at, kind: 'element', from: 0 });
    expect(s.value).toEqual({ running: 'awaiting' });
    expect(s.hasTag('awaiting')).toBe(true);
    // A fan-out map awaits no actor: its elements wake it through its inbox.
    expect(acts(a)).toEqual([]);

    [s, a] = transition(machine, s, { type: 'xreactor.map.throwSettled', at: ++at, throw: 0 });
    expect(s.value).toEqual({ running: 'dispatching' });
    // The last throw is clipped to what is left.
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.map.throw', params: { throw: 1, from: 2, size: 1 } }]);

    [s, a] = transition(machine, s, { type: 'xreactor.map.thrown', at: ++at, throw: 1, from: 2, count: 1, exhausted: true, total: null, inputs: [{ index: 2, input: 'c' }] });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.spawnElements', params: { element, lease: false, elements: [{ id: 'root.charges.2', map: link(2, 1, true, true), spawn: { index: 2, input: 'c' } }] } },
      { type: 'xreactor.write.map.target', params: { target: 3 } },
      { type: 'xreactor.write.signal', params: settledSignal(at) },
      { type: 'xreactor.effect.map.enqueue', params: { kind: 'element', from: 2, count: 1 } },
    ]);
    expect(s.context).toMatchObject({ offset: 3, throws: 2, exhausted: true, total: 3 });
    [s] = transition(machine, s, { type: 'xreactor.map.enqueued', at: ++at, kind: 'element', from: 2 });

    // The last throw's signal after the source is exhausted, and an earlier throw's: consumed, no effect.
    for (const thr of [1, 0]) {
      const [consumed, none] = transition(machine, s, { type: 'xreactor.map.throwSettled', at: ++at, throw: thr });
      expect(consumed).not.toBe(s);
      expect(consumed.value).toEqual({ running: 'awaiting' });
      expect(none).toEqual([]);
      s = consumed;
    }

    [s, a] = transition(machine, s, { type: 'xreactor.map.settled', at: ++at });
    expect(s.value).toEqual({ running: 'concluding' });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.map.conclude', params: { target: 3 } }]);
    // A throw signal behind `settled` in the inbox: consumed, and the conclude it would otherwise drop from the outbox restated.
    const [behind, behindActions] = transition(machine, s, { type: 'xreactor.map.throwSettled', at: at + 1, throw: 1 });
    expect(behind.value).toEqual({ running: 'concluding' });
    expect(acts(behindActions)).toEqual([{ type: 'xreactor.effect.map.conclude', params: { target: 3 } }]);
    // A second `settled` is ignored.
    const [again, againActions] = transition(machine, s, { type: 'xreactor.map.settled', at: at + 1 });
    expect(again).toBe(s);
    expect(againActions).toEqual([]);

    [s, a] = transition(machine, s, { type: 'xreactor.map.concluded', at: ++at, outcome: 'failed', stop: { kind: 'failed', index: 1 } });
    expect(s.value).toBe('failed');
    expect(acts(a)).toEqual([
      { type: 'xreactor.effect.finished', params: { status: 'failed' } },
      { type: 'xreactor.write.signal', params: { to: OWNER, event: { type: 'xreactor.child.settled', at, child: MAP_ID, status: 'failed' }, dedupeKey: 'root.charges.settled.failed.0' } },
      { type: 'xreactor.write.map.dropSource', params: {} },
    ]);
    expect(s.context.stop).toEqual({ kind: 'failed', index: 1 });

    // Only the owner rolls it back.
    expect(transition(machine, s, { type: 'xreactor.operator.undo', at: at + 1, from: 'root.other' })[0]).toBe(s);
    [s, a] = transition(machine, s, { type: 'xreactor.operator.undo', at: ++at, from: OWNER });
    expect(s.value).toEqual({ rolling_back: 'starting' });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.map.rollbackStart', params: { reason: 'compensate', epoch: 1 } }]);

    [s, a] = transition(machine, s, { type: 'xreactor.map.rollbackStarted', at: ++at, total: 3, aborted: 0 });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.map.rollbackTarget', params: { target: 3 } },
      { type: 'xreactor.write.signal', params: rolledBackSignal(at) },
      { type: 'xreactor.effect.map.rollbackThrow', params: { throw: 0, from: 0, size: 2, total: 3, list: 'started' } },
    ]);

    // Position 0 is the newest-started element.
    [s, a] = transition(machine, s, { type: 'xreactor.map.rollbackThrown', at: ++at, throw: 0, from: 0, positions: [{ position: 0, index: 2 }, { position: 1, index: 1 }] });
    expect(s.value).toEqual({ rolling_back: 'enqueuing' });
    expect(acts(a)).toEqual([
      {
        type: 'xreactor.write.spawnRollbacks',
        params: {
          lease: false,
          actors: [
            { id: 'root.charges.rb-0', element: 'root.charges.2', position: 0, index: 2, throw: 0, lastOfThrow: false, mode: 'fanOut' },
            { id: 'root.charges.rb-1', element: 'root.charges.1', position: 1, index: 1, throw: 0, lastOfThrow: true, mode: 'fanOut' },
          ],
        },
      },
      { type: 'xreactor.effect.map.enqueue', params: { kind: 'rollback', from: 0, count: 2 } },
    ]);
    [s] = transition(machine, s, { type: 'xreactor.map.enqueued', at: ++at, kind: 'rollback', from: 0 });
    [s, a] = transition(machine, s, { type: 'xreactor.map.rollbackThrowSettled', at: ++at, throw: 0 });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.map.rollbackThrow', params: { throw: 1, from: 2, size: 1, total: 3, list: 'started' } }]);
    [s] = transition(machine, s, { type: 'xreactor.map.rollbackThrown', at: ++at, throw: 1, from: 2, positions: [{ position: 2, index: 0 }] });
    [s] = transition(machine, s, { type: 'xreactor.map.enqueued', at: ++at, kind: 'rollback', from: 2 });
    // The last rollback throw's signal once everything is thrown: consumed.
    const [consumed, none] = transition(machine, s, { type: 'xreactor.map.rollbackThrowSettled', at: ++at, throw: 1 });
    expect(consumed.value).toEqual({ rolling_back: 'awaiting' });
    expect(none).toEqual([]);
    [s, a] = transition(machine, consumed, { type: 'xreactor.map.rolledBack', at: ++at });
    expect(s.value).toBe('undone');
    expect(s.status).toBe('done');
    expect(acts(a)).toEqual([
      { type: 'xreactor.effect.finished', params: { status: 'cancelled' } },
      { type: 'xreactor.write.signal', params: { to: OWNER, event: { type: 'xreactor.child.settled', at, child: MAP_ID, status: 'cancelled' }, dedupeKey: 'root.charges.settled.cancelled.1' } },
    ]);
  });

  it('inline: one element per throw, created with a lease and awaited; the rollback actor likewise', () => {
    let at = 3_000;
    let [s, a] = initialTransition(machine, inputOf({ mode: 'inline', batchSize: 50, total: 2 }));
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.map.init', params: { total: 2, batchSize: 50, atomic: true, mode: 'inline' } },
      { type: 'xreactor.effect.map.throw', params: { throw: 0, from: 0, size: 1 } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.map.thrown', at: ++at, throw: 0, from: 0, count: 1, exhausted: false, total: null, inputs: [{ index: 0, input: 'a' }] });
    expect(s.value).toEqual({ running: 'awaiting' });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.spawnElements', params: { element, lease: true, elements: [{ id: 'root.charges.0', map: link(0, 0, true, false), spawn: { index: 0, input: 'a' } }] } },
      { type: 'xreactor.write.awaits', params: { actors: ['root.charges.0'] } },
      { type: 'xreactor.effect.awaitChild', params: { child: 'root.charges.0' } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.map.throwSettled', at: ++at, throw: 0 });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.awaits', params: { actors: [] } },
      { type: 'xreactor.effect.map.throw', params: { throw: 1, from: 1, size: 1 } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.map.thrown', at: ++at, throw: 1, from: 1, count: 1, exhausted: true, total: null, inputs: [{ index: 1, error: error('bad item') }] });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.spawnElements', params: { element, lease: true, elements: [{ id: 'root.charges.1', map: link(1, 1, true, false), spawn: { index: 1, error: error('bad item') } }] } },
      { type: 'xreactor.write.awaits', params: { actors: ['root.charges.1'] } },
      { type: 'xreactor.write.map.target', params: { target: 2 } },
      { type: 'xreactor.write.signal', params: settledSignal(at) },
      { type: 'xreactor.effect.awaitChild', params: { child: 'root.charges.1' } },
    ]);
    // The last element's settle lands `throw.1` and `settled`: the first is stale (the source is exhausted); its
    // commit restates what the state owes (advance the element), nothing else.
    [s, a] = transition(machine, s, { type: 'xreactor.map.throwSettled', at: ++at, throw: 1 });
    expect(s.value).toEqual({ running: 'awaiting' });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.awaitChild', params: { child: 'root.charges.1' } }]);
    [s, a] = transition(machine, s, { type: 'xreactor.map.settled', at: ++at });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.awaits', params: { actors: [] } },
      { type: 'xreactor.effect.map.conclude', params: { target: 2 } },
    ]);
    [s] = transition(machine, s, { type: 'xreactor.map.concluded', at: ++at, outcome: 'completed', stop: null });
    expect(s.value).toBe('completed');
    [s, a] = transition(machine, s, { type: 'xreactor.operator.undo', at: ++at, from: OWNER, reason: 'undo' });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.map.rollbackStart', params: { reason: 'undo', epoch: 1 } }]);
    [s] = transition(machine, s, { type: 'xreactor.map.rollbackStarted', at: ++at, total: 2, aborted: 0 });
    [s, a] = transition(machine, s, { type: 'xreactor.map.rollbackThrown', at: ++at, throw: 0, from: 0, positions: [{ position: 0, index: 1 }] });
    expect(s.value).toEqual({ rolling_back: 'awaiting' });
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.spawnRollbacks', params: { lease: true, actors: [{ id: 'root.charges.rb-0', element: 'root.charges.1', position: 0, index: 1, throw: 0, lastOfThrow: true, mode: 'inline' }] } },
      { type: 'xreactor.write.awaits', params: { actors: ['root.charges.rb-0'] } },
      { type: 'xreactor.effect.awaitChild', params: { child: 'root.charges.rb-0' } },
    ]);
    const [, next] = transition(machine, s, { type: 'xreactor.map.rollbackThrowSettled', at: at + 1, throw: 0 });
    expect(acts(next)).toEqual([
      { type: 'xreactor.write.awaits', params: { actors: [] } },
      { type: 'xreactor.effect.map.rollbackThrow', params: { throw: 1, from: 1, size: 1, total: 2, list: 'started' } },
    ]);
  });

  it('a stop, a source failure, a cancel and an abort end dispatch as the design says', () => {
    const at = 4_000;
    const [start] = initialTransition(machine, inputOf({ total: 10 }));
    const [stopped, stopActions] = transition(machine, start, { type: 'xreactor.map.stop', at, throw: 0, stop: { kind: 'halted', index: 4 } });
    expect(stopped.value).toEqual({ running: 'awaiting' });
    expect(stopped.context).toMatchObject({ stopped: 'halt', stop: { kind: 'halted', index: 4 } });
    expect(acts(stopActions)).toEqual([{ type: 'xreactor.write.map.target', params: { target: 0 } }, { type: 'xreactor.write.signal', params: settledSignal(at) }]);

    const failure = { name: 'XreactorError', code: 'map_source_invalid', message: 'count() returned -1' };
    const [failedSource, sourceActions] = transition(machine, start, { type: 'xreactor.map.sourceFailed', at, throw: 0, error: failure });
    expect(failedSource.context).toMatchObject({ stopped: 'source', failure });
    expect(acts(sourceActions)).toEqual([{ type: 'xreactor.write.map.target', params: { target: 0 } }, { type: 'xreactor.write.signal', params: settledSignal(at) }]);

    const [cancelled, cancelActions] = transition(machine, start, { type: 'xreactor.operator.cancel', at, reason: 'operator' });
    expect(cancelled.value).toBe('cancelled');
    expect(cancelled.status).toBe('done');
    expect(acts(cancelActions)).toEqual([
      { type: 'xreactor.effect.finished', params: { status: 'cancelled' } },
      { type: 'xreactor.write.signal', params: { to: OWNER, event: { type: 'xreactor.child.settled', at, child: MAP_ID, status: 'cancelled' }, dedupeKey: 'root.charges.settled.cancelled.0' } },
      { type: 'xreactor.write.map.dropSource', params: {} },
    ]);
    // A cancelled map is final: nothing is rolled back, nothing more is accepted.
    expect(transition(machine, cancelled, { type: 'xreactor.operator.undo', at: at + 1, from: OWNER })[0]).toBe(cancelled);

    const [aborted, abortActions] = transition(machine, start, { type: 'xreactor.execution.abort', at, reason: 'SIGINT' });
    expect(aborted.value).toBe('aborted');
    expect(aborted.context).toMatchObject({ outcome: 'aborted', stopped: 'abort', abortReason: 'SIGINT' });
    expect(signalsOf(acts(abortActions))).toEqual([{ to: OWNER, event: { type: 'xreactor.child.settled', at, child: MAP_ID, status: 'aborted' }, dedupeKey: 'root.charges.settled.aborted.0' }]);
    // An aborted map is undone by its owner's undo (its completed and aborted elements).
    expect(transition(machine, aborted, { type: 'xreactor.operator.undo', at: at + 1, from: OWNER })[0].value).toEqual({ rolling_back: 'starting' });
  });

  it('the rollback phase ignores cancel and abort (an interrupted rollback is finished later, not ended)', () => {
    const [start] = initialTransition(machine, inputOf({ total: 0 }));
    let [s] = transition(machine, start, { type: 'xreactor.map.thrown', at: 1, throw: 0, from: 0, count: 0, exhausted: true, total: null, inputs: [] });
    [s] = transition(machine, s, { type: 'xreactor.map.settled', at: 2 });
    [s] = transition(machine, s, { type: 'xreactor.map.concluded', at: 3, outcome: 'completed', stop: null });
    [s] = transition(machine, s, { type: 'xreactor.operator.undo', at: 4, from: OWNER });
    for (const event of [{ type: 'xreactor.operator.cancel', at: 5, reason: 'x' }, { type: 'xreactor.execution.abort', at: 5, reason: 'x' }] as const) {
      const [next, actions] = transition(machine, s, event);
      expect(next).toBe(s);
      expect(actions).toEqual([]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The two machines together, with the store's conditional signals: a small world.

/*
 * A world that does what the hosts and the store will do, step by step, in an order fast-check
 * chooses: the map's effects are performed and their outcomes committed as separate steps (so
 * signals land in between, and a commit applies the inbox entries its state accepts first, as the
 * kernel's inbox fence makes it); elements start (through the gate), settle and report (slot
 * first-writer-wins, counters, `throw.<k>` when last of its throw, `settled` when all dispatched
 * settled); rollback actors are the real machine, their elements undo when signalled. The owner
 * rolls a failed map back (and, when asked, a completed one). Checked: the bounds per commit, the
 * throw rule, the owner told once per phase, every completed element undone exactly once when
 * the map rolls back, failed and skipped ones never, newest-started first, and no inbox entry left.
 */
interface WorldParams {
  readonly n: number;
  readonly batchSize: number;
  readonly mode: 'inline' | 'fanOut';
  readonly atomic: boolean;
  /** An element whose step fails (it rolls itself back and settles failed). */
  readonly failAt: number | null;
  /** Elements whose input is rejected (they fail at creation, never started). */
  readonly rejected: readonly number[];
  /** The owner undoes a completed map too (a later step failed). */
  readonly undoAfter: boolean;
  /** An element's report lands `settled` before `throw.<k>` (the order of one commit's signals is the element's choice). */
  readonly settledFirst: boolean;
  readonly schedule: readonly number[];
}

type RbMachine = ReturnType<typeof createElementRollbackMachine>;
type RbSnapshot = ReturnType<typeof initialTransition<RbMachine>>[0];
type Generic = { type: string; params?: unknown };

interface ElementRecord {
  status: 'queued' | 'startable' | 'running' | 'settled';
  outcome: ElementOutcome | null;
  readonly throw: number;
  readonly lastOfThrow: boolean;
  readonly rejected: boolean;
  undone: number;
  undoRequests: { from: string }[];
}
interface RbRecord {
  snap: RbSnapshot;
  runnable: boolean;
  outbox: Generic[];
  inbox: ElementRollbackEvent[];
}

function runWorld(p: WorldParams) {
  const mapMachine = createMapMachine();
  const rbMachine = createElementRollbackMachine();
  let clock = 10_000;
  const at = () => ++clock;
  const input = inputOf({ mode: p.mode, batchSize: p.batchSize, atomic: p.atomic, total: p.n });
  const maxPerThrow = p.mode === 'inline' ? 1 : p.batchSize;
  const [initial, initialActions] = initialTransition(mapMachine, input);
  const map = { snap: initial, outbox: normalize(initialActions).filter((a) => a.type.startsWith('xreactor.effect.')) as Generic[], pending: undefined as MapEvent | undefined, inbox: [] as { key: string; event: MapEvent }[] };
  const landedKeys = new Map<string, Set<string>>();
  const stats = { target: null as number | null, settled: 0, stop: null as MapStop | null, rbTarget: null as number | null, rbSettled: 0 };
  const slots = new Map<number, ElementOutcome>();
  const rbSlots = new Map<number, RollbackOutcome>();
  const started: number[] = [];
  const elements = new Map<number, ElementRecord>();
  const rbs = new Map<string, RbRecord>();
  const ownerGot: MapSignal[] = [];
  const rbSpawnOrder: { position: number; index: number }[] = [];
  let ownerUndoSent = false;

  const land = (to: string, key: string, deliver: () => void) => {
    const keys = landedKeys.get(to) ?? new Set<string>();
    landedKeys.set(to, keys);
    if (keys.has(key)) return;
    keys.add(key);
    deliver();
  };
  const toMap = (key: string, event: MapEvent) => land(MAP_ID, key, () => map.inbox.push({ key, event }));
  const mapStatus = () => mapStatusOf(map.snap.value);

  const report = (index: number, outcome: ElementOutcome) => {
    const e = elements.get(index)!;
    e.status = 'settled';
    e.outcome = outcome;
    const fresh = !slots.has(index);
    if (fresh) {
      slots.set(index, outcome);
      stats.settled++;
      if (outcome === 'failed' && p.atomic && stats.stop === null) stats.stop = { kind: 'failed', index };
    }
    const now = at();
    const throwSignal = () => fresh && e.lastOfThrow && toMap(`throw.${e.throw}`, { type: 'xreactor.map.throwSettled', at: now, throw: e.throw });
    const settledSignal = () => stats.target !== null && stats.settled === stats.target && toMap('settled', { type: 'xreactor.map.settled', at: now });
    if (p.settledFirst) {
      settledSignal();
      throwSignal();
    } else {
      throwSignal();
      settledSignal();
    }
  };

  const signalsOfCommit = (signals: readonly MapSignal[]) => {
    for (const sg of signals) {
      if (sg.to === OWNER) {
        expect(ownerGot.some((g) => g.dedupeKey === sg.dedupeKey), `owner told twice: ${sg.dedupeKey}`).toBe(false);
        ownerGot.push(sg);
        continue;
      }
      const holds = sg.condition === 'mapSettled' ? stats.target !== null && stats.settled === stats.target : sg.condition === 'rolledBack' ? stats.rbTarget !== null && stats.rbSettled === stats.rbTarget : true;
      if (holds) toMap(sg.dedupeKey, sg.event as MapEvent);
    }
  };

  /** One fenced map commit: its writes, spawns and signals land together. */
  const commitMap = (event: MapEvent): boolean => {
    const [next, raw] = transition(mapMachine, map.snap, event);
    if (next === map.snap) return false;
    const actions = normalize(raw);
    for (const a of actions) {
      switch (a.type) {
        case 'xreactor.write.spawnElements': {
          expect(a.params.elements.length, 'elements per map commit').toBeLessThanOrEqual(maxPerThrow);
          const first = a.params.elements[0]!;
          // The next throw only after the last position of the previous one settled.
          if (first.map.throw > 0) expect(slots.has(first.map.index - 1), `throw ${first.map.throw} before position ${first.map.index - 1} settled`).toBe(true);
          for (const el of a.params.elements) {
            const rejected = 'error' in el.spawn;
            elements.set(el.map.index, { status: rejected ? 'settled' : p.mode === 'inline' ? 'running' : 'queued', outcome: null, throw: el.map.throw, lastOfThrow: el.map.lastOfThrow, rejected, undone: 0, undoRequests: [] });
            if (!rejected && p.mode === 'inline') started.push(el.map.index);
          }
          break;
        }
        case 'xreactor.write.spawnRollbacks':
          expect(a.params.actors.length, 'rollback actors per map commit').toBeLessThanOrEqual(maxPerThrow);
          for (const actor of a.params.actors) {
            rbSpawnOrder.push({ position: actor.position, index: actor.index });
            const [snap, acts] = initialTransition(rbMachine, { id: actor.id, map: MAP_ID, step: 'charges', element: actor.element, position: actor.position, index: actor.index, throw: actor.throw, lastOfThrow: actor.lastOfThrow, mode: actor.mode, maxAttempts: 2, at: clock });
            rbs.set(actor.id, { snap, runnable: p.mode === 'inline', outbox: normalizeRb(acts).filter((x) => x.type.startsWith('xreactor.effect.')), inbox: [] });
          }
          break;
        case 'xreactor.write.map.target':
          stats.target = a.params.target;
          break;
        case 'xreactor.write.map.rollbackTarget':
          stats.rbTarget = a.params.target;
          break;
        default:
      }
    }
    // Elements rejected at creation settle with the commit that creates them (their creation is their end).
    for (const a of ofType(actions, 'xreactor.write.spawnElements')) for (const el of a.params.elements) if ('error' in el.spawn) report(el.map.index, 'failed');
    signalsOfCommit(signalsOf(actions));
    map.snap = next;
    map.outbox = actions.filter((x) => x.type.startsWith('xreactor.effect.'));
    return true;
  };
  const firstAcceptedEntry = () => map.inbox.findIndex((entry) => transition(mapMachine, map.snap, entry.event)[0] !== map.snap);

  /** The map host's performers (the store reads they make, done on the world). */
  const perform = (effect: Generic): MapEvent | undefined => {
    const now = at();
    switch (effect.type) {
      case 'xreactor.effect.map.throw': {
        const { throw: thr, from, size } = effect.params as { throw: number; from: number; size: number };
        if (stats.stop !== null) return { type: 'xreactor.map.stop', at: now, throw: thr, stop: stats.stop };
        const count = Math.min(size, p.n - from);
        const inputs = Array.from({ length: count }, (_, i): ElementSpawn => (p.rejected.includes(from + i) ? { index: from + i, error: error('rejected') } : { index: from + i, input: from + i }));
        return { type: 'xreactor.map.thrown', at: now, throw: thr, from, count, exhausted: from + count >= p.n, total: null, inputs };
      }
      case 'xreactor.effect.map.enqueue': {
        const { kind, from, count } = effect.params as { kind: 'element' | 'rollback'; from: number; count: number };
        for (let k = from; k < from + count; k++) {
          if (kind === 'element') {
            const e = elements.get(k)!;
            if (e.status === 'queued') e.status = 'startable';
          } else {
            rbs.get(rollbackIdOf(MAP_ID, k))!.runnable = true;
          }
        }
        return { type: 'xreactor.map.enqueued', at: now, kind, from };
      }
      case 'xreactor.effect.map.conclude':
        return { type: 'xreactor.map.concluded', at: now, outcome: stats.stop === null ? 'completed' : 'failed', stop: stats.stop };
      case 'xreactor.effect.map.rollbackStart':
        return { type: 'xreactor.map.rollbackStarted', at: now, total: started.length, aborted: 0 };
      case 'xreactor.effect.map.rollbackThrow': {
        const { throw: thr, from, size, total } = effect.params as { throw: number; from: number; size: number; total: number };
        return { type: 'xreactor.map.rollbackThrown', at: now, throw: thr, from, positions: Array.from({ length: size }, (_, i) => ({ position: from + i, index: started[total - 1 - (from + i)]! })) };
      }
      default:
        return undefined;
    }
  };

  type Task = () => void;
  const tasks = (): Task[] => {
    const out: Task[] = [];
    if (map.pending !== undefined || firstAcceptedEntry() >= 0 || map.outbox.length > 0) {
      out.push(() => {
        // A commit computed without a landed signal is refused: the inbox entries its state accepts come first.
        const entry = firstAcceptedEntry();
        if (entry >= 0) {
          const [{ event }] = map.inbox.splice(entry, 1) as [{ key: string; event: MapEvent }];
          expect(commitMap(event)).toBe(true);
          return;
        }
        if (map.pending !== undefined) {
          // Delivered again after the inbox: ignored when the state it was performed for was left.
          const event = map.pending;
          map.pending = undefined;
          commitMap(event);
          return;
        }
        const effect = map.outbox.shift()!;
        map.pending = perform(effect);
      });
    }
    for (const [index, e] of elements) {
      if (e.status === 'startable') {
        out.push(() => {
          // The start job reads the gate: a map no longer running, or stopped, skips it.
          if (mapStatus() !== 'running' || stats.stop !== null) return report(index, 'skipped');
          e.status = 'running';
          started.push(index);
        });
      } else if (e.status === 'running') {
        out.push(() => report(index, index === p.failAt ? 'failed' : 'completed'));
      }
      if (e.undoRequests.length > 0) {
        out.push(() => {
          const { from } = e.undoRequests.shift()!;
          e.undone++;
          e.outcome = 'cancelled';
          rbs.get(from)!.inbox.push({ type: 'xreactor.child.settled', at: at(), child: elementIdOf(MAP_ID, index), status: 'cancelled' });
        });
      }
    }
    for (const [id, rb] of rbs) {
      if (!rb.runnable || rb.snap.status === 'done') continue;
      if (rb.inbox.length === 0 && rb.outbox.length === 0) continue;
      out.push(() => stepRollback(id, rb));
    }
    return out;
  };

  let freshRb = false;
  const stepRollback = (id: string, rb: RbRecord) => {
    let event: ElementRollbackEvent | undefined = rb.inbox.shift();
    if (event === undefined) {
      const effect = rb.outbox.shift()!;
      const c = rb.snap.context;
      if (effect.type === 'xreactor.effect.rollback.resolve') {
        const e = elements.get(c.index)!;
        // An element is held by its own worker at the first check now and then: the actor snoozes.
        if (e.outcome === 'completed' && c.index % 3 === 1 && c.attempt === 1) event = { type: 'xreactor.rollback.contended', at: at(), attempt: c.attempt, delayMs: 10 };
        else event = e.outcome === 'completed' ? { type: 'xreactor.rollback.undo', at: at(), attempt: c.attempt } : { type: 'xreactor.rollback.notNeeded', at: at(), attempt: c.attempt };
      } else if (effect.type === 'xreactor.effect.wait') {
        event = { type: 'xreactor.rollback.retry', at: at(), attempt: (effect.params as { attempt: number }).attempt };
      }
    }
    if (event === undefined) return;
    const [next, raw] = transition(rbMachine, rb.snap, event);
    expect(next, `rollback actor ${id} ignored ${event.type}`).not.toBe(rb.snap);
    const actions = normalizeRb(raw);
    for (const a of actions) {
      if (a.type === 'xreactor.write.signal') {
        const sg = a.params;
        if (sg.to === MAP_ID) {
          const holds = sg.condition === 'rolledBack' ? stats.rbTarget !== null && stats.rbSettled === stats.rbTarget : true;
          if (holds && (sg.condition !== 'rollbackReportNew' || freshRb)) toMap(sg.dedupeKey, sg.event);
        } else {
          land(sg.to, sg.dedupeKey, () => elements.get(rb.snap.context.index)!.undoRequests.push({ from: id }));
        }
      } else if (a.type === 'xreactor.write.map.rollbackReport') {
        freshRb = !rbSlots.has(a.params.position);
        if (freshRb) {
          rbSlots.set(a.params.position, a.params.outcome);
          stats.rbSettled++;
        }
      }
    }
    rb.snap = next;
    rb.outbox = actions.filter((x) => x.type.startsWith('xreactor.effect.'));
  };

  let steps = 0;
  let choice = 0;
  for (;;) {
    // The owner: compensates a failed map, undoes a completed one when a later step failed.
    const forward = ownerGot.find((g) => g.event.type === 'xreactor.child.settled' && g.event.status !== 'cancelled');
    if (forward !== undefined && !ownerUndoSent && (p.undoAfter || (forward.event as { status: string }).status === 'failed')) {
      ownerUndoSent = true;
      land(MAP_ID, `undo.${OWNER}.1.compensate`, () => map.inbox.push({ key: 'undo', event: { type: 'xreactor.operator.undo', at: at(), from: OWNER } }));
    }
    const available = tasks();
    if (available.length === 0) break;
    available[(p.schedule[choice++] ?? 0) % available.length]!();
    steps++;
    expect(steps, 'the world does not settle').toBeLessThan(5_000);
  }
  return { map, stats, slots, started, elements, rbs, ownerGot, rbSpawnOrder, rbSlots };
}
const normalizeRb = (actions: readonly { type: string; params?: unknown }[]): (ElementRollbackEffect | ElementRollbackWrite)[] =>
  actions.map((a) => ({ type: a.type, params: a.params }) as ElementRollbackEffect | ElementRollbackWrite);

describe('map and rollback actors with the store (conditional signals, any delivery order)', () => {
  const params = fc
    .record({
      n: fc.integer({ min: 0, max: 7 }),
      batchSize: fc.integer({ min: 1, max: 3 }),
      mode: fc.constantFrom('inline' as const, 'fanOut' as const),
      atomic: fc.boolean(),
      fail: fc.option(fc.integer({ min: 0, max: 6 }), { nil: null }),
      rejected: fc.uniqueArray(fc.integer({ min: 0, max: 6 }), { maxLength: 2 }),
      undoAfter: fc.boolean(),
      settledFirst: fc.boolean(),
      schedule: fc.array(fc.nat({ max: 1_000 }), { maxLength: 400 }),
    })
    .map(({ fail, ...rest }) => ({ ...rest, failAt: fail !== null && fail < rest.n && !rest.rejected.includes(fail) ? fail : null }) satisfies WorldParams);

  it('settles the map once per phase, undoes every completed element exactly once, leaves no inbox entry', () => {
    fc.assert(
      fc.property(params, (p) => {
        const w = runWorld(p);
        const forwardStatus = (w.ownerGot[0]?.event as { status?: string } | undefined)?.status;
        const failed = [...w.slots.values()].includes('failed') && p.atomic;
        expect(forwardStatus, 'the map settled its forward phase').toBe(failed ? 'failed' : 'completed');
        const rolledBack = failed || p.undoAfter;
        expect(w.ownerGot.map((g) => g.dedupeKey)).toEqual([`${MAP_ID}.settled.${forwardStatus}.0`, ...(rolledBack ? [`${MAP_ID}.settled.cancelled.1`] : [])]);
        expect(w.map.snap.value).toBe(rolledBack ? 'undone' : 'completed');
        expect(w.map.inbox, 'inbox entries left on the map').toEqual([]);
        expect(w.map.outbox.filter((e) => e.type !== 'xreactor.effect.finished'), 'effects left').toEqual([]);
        // Every dispatched position settled; without a stop, every position was dispatched.
        expect(w.stats.settled).toBe(w.stats.target);
        if (!failed) expect(w.stats.target).toBe(p.n);
        for (const [index, e] of w.elements) {
          const wasCompleted = w.slots.get(index) === 'completed';
          expect(e.undone, `element ${index} (${w.slots.get(index)}) undo count`).toBe(rolledBack && wasCompleted ? 1 : 0);
        }
        if (rolledBack) {
          // One rollback actor per started element, newest-started first, each reported once.
          expect(w.rbSpawnOrder).toEqual([...w.started].reverse().map((index, position) => ({ position, index })));
          expect(w.stats.rbSettled).toBe(w.started.length);
          for (const [index] of w.elements) if (!w.started.includes(index)) expect(w.slots.get(index) === 'skipped' || w.elements.get(index)!.rejected, `element ${index} got no rollback actor`).toBe(true);
          for (const rb of w.rbs.values()) expect(rb.snap.value).toBe('reported');
          expect([...w.rbSlots.values()].sort()).toEqual(w.started.map((i) => (w.slots.get(i) === 'completed' ? 'undone' : 'not_needed')).sort());
        } else {
          expect(w.rbs.size).toBe(0);
        }
      }),
      { numRuns: 300 },
    );
  });
});
