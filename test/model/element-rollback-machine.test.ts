/**
 * Model lane for the element-rollback machine (machines/element-rollback.ts, docs/design/map.md
 * §7): XState's graph utilities generate paths through the machine for a few rollback actors
 * (lease checks allowed, last position of its throw or not, inline or fan-out), and those paths
 * together must reach every declared transition. Every path is replayed with the pure
 * `transition()`, checking the contract a host implements: one resolve per lease check, a
 * delayed wake per snooze, `element_in_flight` after exactly `maxAttempts` checks with the
 * element untouched, the undo signal to the element and its await, and the report to the map
 * written exactly once with its conditional signals. Duplicates and stale outcomes are ignored;
 * transitions are pure; every state carries its declared tags.
 */
import { describe, expect, it } from 'vitest';
import { declaredTransitions, describePath } from './support/transitions.js';
import type { AnyTransitionDefinition } from 'xstate';
import { getMicrosteps, initialTransition, transition } from 'xstate';
import type { TestPath } from 'xstate/graph';
import { createTestModel, getStateNodes } from 'xstate/graph';
import type {
  ElementRollbackContext,
  ElementRollbackEffect,
  ElementRollbackEvent,
  ElementRollbackInput,
  ElementRollbackMachine,
  ElementRollbackWrite,
} from '../../machines/element-rollback.js';
import {
  createElementRollbackMachine,
  ELEMENT_ROLLBACK_MACHINE_VERSION,
  ELEMENT_ROLLBACK_STATE_TAGS,
  elementRollbackStatusOf,
  elementRollbackTagsOf,
} from '../../machines/element-rollback.js';
import type { RollbackFailure } from '../../machines/execution-types.js';
import type { ActorTag } from '../../machines/registry-types.js';

type Snapshot = ReturnType<typeof initialTransition<ElementRollbackMachine>>[0];
type Action = ElementRollbackEffect | ElementRollbackWrite;
type ActionOf<T extends Action['type']> = Extract<Action, { type: T }>;
type Path = TestPath<Snapshot, ElementRollbackEvent>;
type Signal = ActionOf<'xreactor.write.signal'>['params'];

const ACTOR_TAGS: readonly ActorTag[] = ['settled', 'recoverable', 'awaiting', 'parked', 'paused', 'undoable'];
const KNOWN_ACTIONS: readonly string[] = [
  'xreactor.effect.rollback.resolve',
  'xreactor.effect.wait',
  'xreactor.effect.awaitChild',
  'xreactor.effect.finished',
  'xreactor.write.map.rollbackReport',
  'xreactor.write.signal',
  'xreactor.write.awaits',
];
const SNOOZE_MS = 7_000;

const inputOf = (over: Partial<ElementRollbackInput>): ElementRollbackInput => ({
  id: 'root.charges.rb-1',
  map: 'root.charges',
  step: 'charges',
  element: 'root.charges.6',
  position: 1,
  index: 6,
  throw: 0,
  lastOfThrow: true,
  mode: 'fanOut',
  maxAttempts: 3,
  at: 1_000,
  ...over,
});

interface RollbackModelConfig {
  readonly title: string;
  readonly input: ElementRollbackInput;
  readonly unreachable: readonly string[];
}

const CONFIGS: readonly RollbackModelConfig[] = [
  {
    title: 'fan-out, last of its throw, 3 lease checks',
    input: inputOf({}),
    unreachable: [],
  },
  {
    title: 'inline, not last of its throw, 1 lease check (never parks)',
    input: inputOf({ mode: 'inline', lastOfThrow: false, maxAttempts: 1, position: 0, index: 2, element: 'root.charges.2', id: 'root.charges.rb-0', throw: 4 }),
    unreachable: ['resolving --xreactor.rollback.contended[isCurrentAttempt]--> parked', 'parked --xreactor.rollback.retry--> resolving'],
  },
];

// ---------------------------------------------------------------------------------------------


const error = (message: string) => ({ name: 'Error', message });
const normalize = (actions: readonly { type: string; params?: unknown }[]): Action[] => actions.map((a) => ({ type: a.type, params: a.params }) as Action);
const ofType = <T extends Action['type']>(actions: readonly Action[], type: T): ActionOf<T>[] => actions.filter((a): a is ActionOf<T> => a.type === type);
const snapshotData = (s: Snapshot) => ({ value: s.value, context: s.context, status: s.status });
const ELEMENT_FAILURES: readonly RollbackFailure[] = [
  { step: 'refund', kind: 'undo', reason: 'raised', error: error('refund failed') },
  { step: 'release', path: ['hold'], kind: 'undo', reason: 'returned_failure', error: error('hold gone') },
];

function eventsFor(s: Snapshot): ElementRollbackEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  switch (s.value) {
    case 'resolving':
      return [
        { type: 'xreactor.rollback.notNeeded', at, attempt: c.attempt },
        { type: 'xreactor.rollback.unavailable', at, attempt: c.attempt },
        { type: 'xreactor.rollback.contended', at, attempt: c.attempt, delayMs: SNOOZE_MS },
        { type: 'xreactor.rollback.undo', at, attempt: c.attempt },
      ];
    case 'parked':
      return [{ type: 'xreactor.rollback.retry', at, attempt: c.attempt }];
    case 'undoing':
      return [
        { type: 'xreactor.child.settled', at, child: c.element, status: 'cancelled' },
        { type: 'xreactor.child.settled', at, child: c.element, status: 'cancelled', rollbackFailures: ELEMENT_FAILURES },
        { type: 'xreactor.child.settled', at, child: c.element, status: 'aborted', rollbackFailures: ELEMENT_FAILURES.slice(0, 1) },
        { type: 'xreactor.child.lost', at, child: c.element },
      ];
    default:
      return [];
  }
}

function ignoredEventsFor(s: Snapshot): ElementRollbackEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  const stale = [c.attempt - 1, c.attempt + 1];
  return [
    ...stale.flatMap((attempt): ElementRollbackEvent[] => [
      { type: 'xreactor.rollback.notNeeded', at, attempt },
      { type: 'xreactor.rollback.unavailable', at, attempt },
      { type: 'xreactor.rollback.contended', at, attempt, delayMs: 1 },
      { type: 'xreactor.rollback.undo', at, attempt },
      { type: 'xreactor.rollback.retry', at, attempt },
    ]),
    { type: 'xreactor.child.settled', at, child: 'root.charges.7', status: 'cancelled' },
    { type: 'xreactor.child.settled', at, child: c.map, status: 'cancelled' },
    { type: 'xreactor.child.lost', at, child: 'root.charges.7' },
  ];
}

function eventVariant(e: ElementRollbackEvent): string {
  if (e.type === 'xreactor.child.settled') return `${e.type}(${e.status},${e.rollbackFailures?.length ?? 0} failures)`;
  return e.type;
}
const isRealEvent = (event: ElementRollbackEvent) => 'at' in event;
/** Control only: the attempt and undo counts only grow (an aborted undo starts another round), so they are left out. */
const abstractKey = (s: Snapshot) => JSON.stringify([s.value, s.context.contended, s.context.outcome, s.context.undos > 0]);

function generatePaths(config: RollbackModelConfig, machine: ElementRollbackMachine): Path[] {
  return createTestModel(machine, {
    input: config.input,
    events: eventsFor,
    filterEvents: (_, event) => isRealEvent(event),
    serializeState: (state, event, previous) => (event === undefined || previous === undefined ? abstractKey(state) : `${abstractKey(state)} via ${eventVariant(event)} from ${abstractKey(previous)}`),
    limit: 10_000,
  }).getShortestPaths();
}

function expectTags(s: Snapshot, where: string): void {
  const declared = elementRollbackTagsOf(s.value);
  expect([...s.tags].sort(), where).toEqual([...declared].sort());
  for (const tag of ACTOR_TAGS) expect(s.hasTag(tag), `${where}: hasTag('${tag}')`).toBe(declared.has(tag));
}

/** The failure of an element not undone at all (gone, or held by another process). */
const wholeElementFailure = (c: ElementRollbackContext, code: string) =>
  expect.objectContaining({ step: c.step, kind: 'undo', reason: 'raised', map: { step: c.step, index: c.index }, error: expect.objectContaining({ name: 'XreactorError', code }) }) as unknown;

function replay(config: RollbackModelConfig, machine: ElementRollbackMachine, labels: Map<AnyTransitionDefinition, string>, paths: readonly Path[]): Set<string> {
  const { input } = config;
  const covered = new Set<string>();
  const checked = new Set<string>();
  for (const path of paths) {
    const [initial, initialActions] = initialTransition(machine, input);
    expect(initial.value).toBe('resolving');
    expect(normalize(initialActions)).toEqual([{ type: 'xreactor.effect.rollback.resolve', params: { element: input.element, attempt: 1 } }]);
    expectTags(initial, 'initial');
    let snapshot = initial;
    let awaits: readonly string[] = [];
    let reports = 0;
    const undoKeys = new Set<string>();
    /** Undo signals sent to the element in the current round (reset when an aborted undo starts another). */
    let undosThisRound = 0;

    for (const [i, pathStep] of path.steps.entries()) {
      const event = pathStep.event;
      if ((event.type as string) === 'xstate.init') continue;
      const before = snapshot;
      const b = before.context;
      const where = `path ${describePath(path, eventVariant)}\n  at step ${i}: ${eventVariant(event)} from ${abstractKey(before)}`;
      const [next, raw] = transition(machine, before, event);
      const actions = normalize(raw);
      const c = next.context;
      expect(next, `${where}: generated event was ignored`).not.toBe(before);
      const edge = `${abstractKey(before)} ${eventVariant(event)}`;
      if (!checked.has(edge)) {
        checked.add(edge);
        const frozen = structuredClone(snapshotData(before));
        expect(getMicrosteps(machine, before, event).length).toBe(1);
        for (const t of machine.getTransitionData(before, event)) covered.add(labels.get(t) ?? `UNDECLARED ${t.source.id} ${t.eventType}`);
        const [again, againActions] = transition(machine, before, event);
        expect(snapshotData(again), `${where}: not deterministic`).toEqual(snapshotData(next));
        expect(normalize(againActions), where).toEqual(actions);
        expect(snapshotData(before), `${where}: mutated its input`).toEqual(frozen);
        const [dup, dupActions] = transition(machine, next, event);
        expect(dup, `${where}: a duplicate delivery was accepted`).toBe(next);
        expect(dupActions).toEqual([]);
        for (const stale of ignoredEventsFor(next)) {
          const [ignored, ignoredActions] = transition(machine, next, stale);
          expect(ignored, `${where}: ${JSON.stringify(stale)} was accepted in ${abstractKey(next)}`).toBe(next);
          expect(ignoredActions).toEqual([]);
        }
      }

      expectTags(next, where);
      for (const action of actions) expect(KNOWN_ACTIONS, `${where}: unknown action ${action.type}`).toContain(action.type);
      expect(c.updatedAt, where).toBe(event.at);
      expect(next.status === 'done', where).toBe(next.value === 'reported');
      expect(elementRollbackStatusOf(next.value), where).toBe(next.value === 'reported' ? 'completed' : 'running');
      expect(c.attempt, `${where}: the attempt never goes back`).toBeGreaterThanOrEqual(b.attempt);
      expect(c.contended, `${where}: more lease checks than allowed`).toBeLessThanOrEqual(c.maxAttempts);

      // One resolve per lease check, numbered by attempt; one delayed wake per snooze.
      expect(ofType(actions, 'xreactor.effect.rollback.resolve'), where).toEqual(next.value === 'resolving' ? [{ type: 'xreactor.effect.rollback.resolve', params: { element: input.element, attempt: c.attempt } }] : []);
      if (next.value === 'resolving') expect(c.attempt, `${where}: a resolve repeats an attempt`).toBe(b.attempt + 1);
      if (next.value === 'parked') {
        expect(event.type, where).toBe('xreactor.rollback.contended');
        expect(c.parkedUntil, where).toBe(event.at + SNOOZE_MS);
        expect(c.contended, where).toBe(b.contended + 1);
        expect(c.contended, `${where}: parked on the last lease check`).toBeLessThan(c.maxAttempts);
        expect(ofType(actions, 'xreactor.effect.wait'), where).toEqual([{ type: 'xreactor.effect.wait', params: { attempt: c.attempt, delayMs: SNOOZE_MS } }]);
      } else {
        expect(c.parkedUntil, where).toBeNull();
        expect(ofType(actions, 'xreactor.effect.wait'), where).toEqual([]);
      }

      // The undo: signalled to the element once per round, keyed by this actor, and awaited.
      for (const write of ofType(actions, 'xreactor.write.awaits')) awaits = write.params.actors;
      const signals = ofType(actions, 'xreactor.write.signal').map((a) => a.params);
      const toElement = signals.filter((sg) => sg.to === input.element);
      if (next.value === 'undoing') {
        const key = b.undos === 0 ? `undo.${input.id}` : `undo.${input.id}.${b.undos}`;
        expect(toElement, `${where}: undo signal`).toEqual([{ to: input.element, event: { type: 'xreactor.operator.undo', at: event.at, from: input.id }, dedupeKey: key }]);
        expect(undoKeys.has(key), `${where}: an undo key used twice`).toBe(false);
        undoKeys.add(key);
        undosThisRound++;
        expect(ofType(actions, 'xreactor.effect.awaitChild'), where).toEqual([{ type: 'xreactor.effect.awaitChild', params: { child: input.element } }]);
        expect(awaits, where).toEqual([input.element]);
      } else {
        expect(toElement, `${where}: a signal to the element outside the undo`).toEqual([]);
        expect(ofType(actions, 'xreactor.effect.awaitChild'), where).toEqual([]);
        expect(awaits, `${where}: the element is still recorded as awaited`).toEqual([]);
      }
      if (b.undos > 0 && before.value === 'undoing' && next.value === 'resolving') undosThisRound = 0;

      // The report: once, on entering reported, with the conditional signals of its throw and of the rollback's end.
      const reportWrites = ofType(actions, 'xreactor.write.map.rollbackReport');
      const toMap = signals.filter((sg) => sg.to === input.map);
      if (next.value === 'reported') {
        reports++;
        expect(reportWrites, where).toEqual([
          { type: 'xreactor.write.map.rollbackReport', params: { map: input.map, position: input.position, index: input.index, outcome: c.outcome, failures: c.failures, throw: input.throw, lastOfThrow: input.lastOfThrow } },
        ]);
        const expected: Signal[] = [
          ...(input.lastOfThrow ? [{ to: input.map, event: { type: 'xreactor.map.rollbackThrowSettled' as const, at: event.at, throw: input.throw }, dedupeKey: `rbthrow.${input.throw}`, condition: 'rollbackReportNew' as const }] : []),
          { to: input.map, event: { type: 'xreactor.map.rolledBack', at: event.at }, dedupeKey: 'rolledback', condition: 'rolledBack' },
        ];
        expect(toMap, `${where}: signals to the map`).toEqual(expected);
        expect(ofType(actions, 'xreactor.effect.finished'), where).toEqual([{ type: 'xreactor.effect.finished', params: { status: 'completed' } }]);
        // The outcome follows from what the host found.
        switch (event.type) {
          case 'xreactor.rollback.notNeeded':
            expect([c.outcome, c.failures], where).toEqual(['not_needed', []]);
            break;
          case 'xreactor.rollback.unavailable':
          case 'xreactor.child.lost':
            expect(c.outcome, where).toBe('context_unavailable');
            expect(c.failures, where).toEqual([wholeElementFailure(c, 'context_unavailable')]);
            break;
          case 'xreactor.rollback.contended':
            // element_in_flight after exactly maxAttempts checks in the round, and the element was never told to undo in it.
            expect(c.outcome, where).toBe('element_in_flight');
            expect(c.contended, where).toBe(c.maxAttempts);
            expect(c.failures, where).toEqual([wholeElementFailure(c, 'element_in_flight')]);
            expect(undosThisRound, `${where}: the element was signalled before element_in_flight`).toBe(0);
            break;
          case 'xreactor.child.settled': {
            const pathed = (event.rollbackFailures ?? []).map((f) => ({ ...f, path: [input.step, String(input.index), ...(f.path ?? [])], map: { step: input.step, index: input.index } }));
            expect(c.failures, where).toEqual(pathed);
            expect(c.outcome, where).toBe(pathed.length === 0 ? 'undone' : 'failed');
            break;
          }
          default:
            expect.unreachable(`${where}: reported by ${event.type}`);
        }
      } else {
        expect(reportWrites, where).toEqual([]);
        expect(toMap, where).toEqual([]);
        expect(ofType(actions, 'xreactor.effect.finished'), where).toEqual([]);
        expect(c.outcome, where).toBeNull();
      }
      expect(reports, `${where}: reported twice`).toBeLessThanOrEqual(1);
      snapshot = next;
    }
  }
  return covered;
}

const coveredByConfig = new Map<string, Set<string>>();
let allLabels: readonly string[] = [];

describe('element-rollback machine model (xstate/graph)', () => {
  for (const config of CONFIGS) {
    it(`generated paths reach every reachable transition: ${config.title}`, () => {
      const machine = createElementRollbackMachine();
      const labels = declaredTransitions(machine);
      allLabels = [...labels.values()].sort();
      for (const label of config.unreachable) expect(allLabels, `"${label}" is not a declared transition`).toContain(label);
      const paths = generatePaths(config, machine);
      const covered = replay(config, machine, labels, paths);
      coveredByConfig.set(config.title, covered);
      console.info(`[model] element-rollback, ${config.title}: ${labels.size} declared transitions, ${covered.size} reached, ${paths.length} paths`);
      const missing = allLabels.filter((label) => !covered.has(label) && !config.unreachable.includes(label));
      expect(missing, `unreached transitions of "${config.title}":\n  ${missing.join('\n  ')}`).toEqual([]);
      expect(config.unreachable.filter((label) => covered.has(label))).toEqual([]);
    });
  }

  it('the configurations together reach every declared transition', () => {
    expect(coveredByConfig.size).toBe(CONFIGS.length);
    const union = new Set([...coveredByConfig.values()].flatMap((s) => [...s]));
    expect(allLabels.filter((label) => !union.has(label))).toEqual([]);
    // Version 1: resolving 5 (notNeeded, unavailable, contended last check or park, undo), parked 1,
    // undoing 3 (settled after an aborted undo or not, lost).
    expect(allLabels.length).toBe(9);
  });
});

describe('element-rollback machine state tags', () => {
  it('every state carries the tags ELEMENT_ROLLBACK_STATE_TAGS declares for it, and only those', () => {
    const machine = createElementRollbackMachine();
    const nodes = getStateNodes(machine.root);
    expect(nodes.map((n) => n.path.join('.')).sort()).toEqual(Object.keys(ELEMENT_ROLLBACK_STATE_TAGS).sort());
    for (const node of nodes) expect([...node.tags].sort(), node.id).toEqual([...(ELEMENT_ROLLBACK_STATE_TAGS as Record<string, readonly string[]>)[node.path.join('.')]!].sort());
  });

  it('elementRollbackTagsOf and elementRollbackStatusOf read a stored state value', () => {
    expect(ELEMENT_ROLLBACK_MACHINE_VERSION).toBe(1);
    expect([...elementRollbackTagsOf('parked')].sort()).toEqual(['parked', 'recoverable']);
    expect([...elementRollbackTagsOf('undoing')]).toEqual(['awaiting']);
    expect([...elementRollbackTagsOf('reported')]).toEqual(['settled']);
    expect([...elementRollbackTagsOf({ resolving: 'x' })]).toEqual([]);
    expect(elementRollbackStatusOf('reported')).toBe('completed');
    expect(elementRollbackStatusOf('parked')).toBe('running');
  });
});

describe('element-rollback machine contract', () => {
  const machine = createElementRollbackMachine();
  const input = inputOf({});
  const acts = (a: readonly { type: string; params?: unknown }[]) => normalize(a);

  it('snoozes on a held lease, then undoes the element once it is free and reports undone', () => {
    let [s] = initialTransition(machine, input);
    let a: readonly { type: string; params?: unknown }[];
    [s, a] = transition(machine, s, { type: 'xreactor.rollback.contended', at: 1_001, attempt: 1, delayMs: 5_000 });
    expect(s.value).toBe('parked');
    expect(s.context.parkedUntil).toBe(6_001);
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.wait', params: { attempt: 1, delayMs: 5_000 } }]);
    [s, a] = transition(machine, s, { type: 'xreactor.rollback.retry', at: 6_001, attempt: 1 });
    expect(acts(a)).toEqual([{ type: 'xreactor.effect.rollback.resolve', params: { element: 'root.charges.6', attempt: 2 } }]);
    [s, a] = transition(machine, s, { type: 'xreactor.rollback.undo', at: 6_002, attempt: 2 });
    expect(s.value).toBe('undoing');
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.signal', params: { to: 'root.charges.6', event: { type: 'xreactor.operator.undo', at: 6_002, from: 'root.charges.rb-1' }, dedupeKey: 'undo.root.charges.rb-1' } },
      { type: 'xreactor.write.awaits', params: { actors: ['root.charges.6'] } },
      { type: 'xreactor.effect.awaitChild', params: { child: 'root.charges.6' } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.child.settled', at: 6_010, child: 'root.charges.6', status: 'cancelled' });
    expect(s.value).toBe('reported');
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.awaits', params: { actors: [] } },
      { type: 'xreactor.write.map.rollbackReport', params: { map: 'root.charges', position: 1, index: 6, outcome: 'undone', failures: [], throw: 0, lastOfThrow: true } },
      { type: 'xreactor.write.signal', params: { to: 'root.charges', event: { type: 'xreactor.map.rollbackThrowSettled', at: 6_010, throw: 0 }, dedupeKey: 'rbthrow.0', condition: 'rollbackReportNew' } },
      { type: 'xreactor.write.signal', params: { to: 'root.charges', event: { type: 'xreactor.map.rolledBack', at: 6_010 }, dedupeKey: 'rolledback', condition: 'rolledBack' } },
      { type: 'xreactor.effect.finished', params: { status: 'completed' } },
    ]);
  });

  it('reports element_in_flight after lockSnoozeMaxAttempts checks, without touching the element', () => {
    let [s] = initialTransition(machine, inputOf({ maxAttempts: 2, lastOfThrow: false }));
    [s] = transition(machine, s, { type: 'xreactor.rollback.contended', at: 1_001, attempt: 1, delayMs: 10 });
    [s] = transition(machine, s, { type: 'xreactor.rollback.retry', at: 1_011, attempt: 1 });
    const [last, a] = transition(machine, s, { type: 'xreactor.rollback.contended', at: 1_012, attempt: 2, delayMs: 10 });
    s = last;
    expect(s.value).toBe('reported');
    expect(s.context.outcome).toBe('element_in_flight');
    expect(s.context.failures).toEqual([
      {
        step: 'charges',
        kind: 'undo',
        reason: 'raised',
        map: { step: 'charges', index: 6 },
        error: {
          name: 'XreactorError',
          code: 'element_in_flight',
          retryable: false,
          message: 'element 6 of map "charges" (root.charges.6) is still held by another process after 2 lease checks; it was not undone (raise lockSnoozeMaxAttempts, or undo the run again once it is free)',
        },
      },
    ]);
    // Not the last of its throw: only the rollback's end is signalled (conditionally).
    expect(acts(a).filter((x) => x.type === 'xreactor.write.signal')).toEqual([
      { type: 'xreactor.write.signal', params: { to: 'root.charges', event: { type: 'xreactor.map.rolledBack', at: 1_012 }, dedupeKey: 'rolledback', condition: 'rolledBack' } },
    ]);
  });

  it('a failed, halted or cancelled element is not_needed; a gone one is context_unavailable with its index', () => {
    const [s0] = initialTransition(machine, input);
    const [notNeeded, a] = transition(machine, s0, { type: 'xreactor.rollback.notNeeded', at: 1_001, attempt: 1 });
    expect(notNeeded.context).toMatchObject({ outcome: 'not_needed', failures: [] });
    expect(acts(a)[0]).toEqual({ type: 'xreactor.write.map.rollbackReport', params: { map: 'root.charges', position: 1, index: 6, outcome: 'not_needed', failures: [], throw: 0, lastOfThrow: true } });
    const [gone] = transition(machine, s0, { type: 'xreactor.rollback.unavailable', at: 1_001, attempt: 1 });
    expect(gone.context.outcome).toBe('context_unavailable');
    expect(gone.context.failures).toEqual([
      {
        step: 'charges',
        kind: 'undo',
        reason: 'raised',
        map: { step: 'charges', index: 6 },
        error: { name: 'XreactorError', code: 'context_unavailable', retryable: false, message: 'element 6 of map "charges" (root.charges.6) is gone: its retention expired; its steps cannot be undone' },
      },
    ]);
  });

  it("an element's undo failures are reported pathed under the map step and index; an aborted undo is undone again", () => {
    let [s] = initialTransition(machine, input);
    [s] = transition(machine, s, { type: 'xreactor.rollback.undo', at: 1_001, attempt: 1 });
    let a: readonly { type: string; params?: unknown }[];
    [s, a] = transition(machine, s, { type: 'xreactor.child.settled', at: 1_002, child: 'root.charges.6', status: 'aborted', rollbackFailures: ELEMENT_FAILURES.slice(0, 1) });
    expect(s.value).toBe('resolving');
    expect(acts(a)).toEqual([
      { type: 'xreactor.write.awaits', params: { actors: [] } },
      { type: 'xreactor.effect.rollback.resolve', params: { element: 'root.charges.6', attempt: 2 } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.rollback.undo', at: 1_003, attempt: 2 });
    expect(acts(a)[0]).toEqual({ type: 'xreactor.write.signal', params: { to: 'root.charges.6', event: { type: 'xreactor.operator.undo', at: 1_003, from: 'root.charges.rb-1' }, dedupeKey: 'undo.root.charges.rb-1.1' } });
    [s] = transition(machine, s, { type: 'xreactor.child.settled', at: 1_004, child: 'root.charges.6', status: 'cancelled', rollbackFailures: ELEMENT_FAILURES });
    expect(s.context.outcome).toBe('failed');
    expect(s.context.failures).toEqual([
      { step: 'refund', path: ['charges', '6'], kind: 'undo', reason: 'raised', error: error('refund failed'), map: { step: 'charges', index: 6 } },
      { step: 'release', path: ['charges', '6', 'hold'], kind: 'undo', reason: 'returned_failure', error: error('hold gone'), map: { step: 'charges', index: 6 } },
    ]);
  });
});
