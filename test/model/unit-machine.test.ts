/**
 * Model lane for the async unit machine (machines/unit.ts, kind `unit`: one `asyncStep`'s body in
 * its own job): XState's graph utilities generate paths through the machine for a few retry
 * policies (exponential, linear, fixed backoff; one attempt only), and those paths together must
 * reach every declared transition. Every path is replayed with the pure `transition()`, checking
 * the contract a host implements (src/runtime/unit-host.ts): one run effect per attempt, at most
 * `retry.maxAttempts` of them, a backoff wait between them of `backoffDelayMs` after a retryable
 * failure of a started body; one compensation, only after the last failed attempt of a started
 * body; the `value` result written only on success; and, on entering any settled state, exactly one
 * signal to the owner (`xreactor.unit.settled`, keyed `<unitId>.settled`) with the `finished`
 * effect. Duplicates, stale attempts and an owner's signals are ignored; transitions are pure; every
 * state carries its declared tags.
 */
import { describe, expect, it } from 'vitest';
import { declaredTransitions, describePath } from './support/transitions.js';
import type { AnyTransitionDefinition } from 'xstate';
import { getMicrosteps, initialTransition, transition } from 'xstate';
import type { TestPath } from 'xstate/graph';
import { createTestModel, getStateNodes } from 'xstate/graph';
import type { UnitContext, UnitEffect, UnitEvent, UnitInput, UnitMachine, UnitStatus, UnitWrite } from '../../machines/unit.js';
import { createUnitMachine, UNIT_MACHINE_VERSION, UNIT_STATE_TAGS, unitStatusOf, unitTagsOf } from '../../machines/unit.js';
import type { ActorTag } from '../../machines/registry-types.js';
import type { RetryPolicy } from '../../src/definition/retry.js';
import { backoffDelayMs, NO_RETRY } from '../../src/definition/retry.js';

type Snapshot = ReturnType<typeof initialTransition<UnitMachine>>[0];
type Action = UnitEffect | UnitWrite;
type ActionOf<T extends Action['type']> = Extract<Action, { type: T }>;
type Path = TestPath<Snapshot, UnitEvent>;
type EventOf<T extends UnitEvent['type']> = Extract<UnitEvent, { type: T }>;

const ACTOR_TAGS: readonly ActorTag[] = ['settled', 'recoverable', 'awaiting', 'parked', 'paused', 'undoable'];
const SETTLED: ReadonlySet<string> = new Set(['completed', 'failed', 'halted']);
/** Every action type the unit machine may ask for (machines/unit-types.ts). */
const KNOWN_ACTIONS: readonly string[] = [
  'xreactor.effect.unit.start',
  'xreactor.effect.unit.run',
  'xreactor.effect.unit.wait',
  'xreactor.effect.unit.compensate',
  'xreactor.effect.finished',
  'xreactor.write.result',
  'xreactor.write.trace',
  'xreactor.write.signal',
];
const OWNER = 'order-1';
const STEP = 'email';
const UNIT_ID = `${OWNER}.${STEP}`;

const inputOf = (retry: RetryPolicy): UnitInput => ({
  unitId: UNIT_ID,
  owner: OWNER,
  ownerPath: ['checkout'],
  reactor: 'checkout',
  version: 4,
  fingerprint: 'fp-checkout',
  step: STEP,
  retry,
  at: 1_000,
});

interface UnitModelConfig {
  readonly title: string;
  readonly input: UnitInput;
  /** The backoff before attempt n + 1 (index n - 1), written out by hand: `backoffDelayMs` must agree. */
  readonly delays: readonly number[];
  readonly unreachable: readonly string[];
}

/** Transitions a unit with a single attempt never takes. */
const NO_RETRY_TRANSITIONS = ['running --xreactor.unit.failed[canRetry]--> retrying', 'retrying --xreactor.timer.fired--> running'];

const CONFIGS: readonly UnitModelConfig[] = [
  { title: '3 attempts, exponential backoff from 100 ms', input: inputOf({ maxAttempts: 3, backoff: 'exponential', baseDelayMs: 100 }), delays: [100, 200], unreachable: [] },
  { title: '3 attempts, linear backoff from 50 ms', input: inputOf({ maxAttempts: 3, backoff: 'linear', baseDelayMs: 50 }), delays: [50, 100], unreachable: [] },
  { title: '2 attempts, fixed backoff of 30 ms', input: inputOf({ maxAttempts: 2, backoff: 'fixed', baseDelayMs: 30 }), delays: [30], unreachable: [] },
  { title: 'no retries (NO_RETRY: one attempt)', input: inputOf(NO_RETRY), delays: [], unreachable: NO_RETRY_TRANSITIONS },
];

// ---------------------------------------------------------------------------------------------

const error = (message: string) => ({ name: 'Error', message });
const normalize = (actions: readonly { type: string; params?: unknown }[]): Action[] => actions.map((a) => ({ type: a.type, params: a.params }) as Action);
const ofType = <T extends Action['type']>(actions: readonly Action[], type: T): ActionOf<T>[] => actions.filter((a): a is ActionOf<T> => a.type === type);
const snapshotData = (s: Snapshot) => ({ value: s.value, context: s.context, status: s.status });
const flags = [true, false];

/** Concrete events for a snapshot: what the unit's job can feed back in each state, with every variant the guards tell apart. */
function eventsFor(s: Snapshot): UnitEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  switch (s.value) {
    case 'queued':
      return [{ type: 'xreactor.unit.start', at }];
    case 'running':
      return [
        { type: 'xreactor.unit.succeeded', at, attempt: c.attempt, value: { sent: c.attempt } },
        { type: 'xreactor.unit.halted', at, attempt: c.attempt, reason: 'halt requested' },
        ...flags.flatMap((started) => flags.map((retryable): UnitEvent => ({ type: 'xreactor.unit.failed', at, attempt: c.attempt, error: error(`attempt ${c.attempt} failed`), started, retryable }))),
      ];
    case 'retrying':
      return [{ type: 'xreactor.timer.fired', at, attempt: c.attempt }];
    case 'compensating':
      return [
        { type: 'xreactor.unit.compensated', at, failure: null, skipped: false },
        { type: 'xreactor.unit.compensated', at, failure: null, skipped: true },
        { type: 'xreactor.unit.compensated', at, failure: { reason: 'raised', error: error('compensate raised') }, skipped: false },
      ];
    default:
      return [];
  }
}

/**
 * Events no state of `s` may accept: outcomes and timers of another attempt, a start job
 * redelivered once the unit runs, a compensation outcome outside compensating, and the signals
 * an owner sends its composed children (a unit is independent of its owner: neither an owner's
 * cancel nor its undo reaches it; they are not even unit events).
 */
function ignoredEventsFor(s: Snapshot): UnitEvent[] {
  const c = s.context;
  const at = c.updatedAt + 1;
  const stale = [c.attempt - 1, c.attempt + 1];
  const foreign = [
    { type: 'xreactor.operator.cancel', at, reason: 'owner cancelled' },
    { type: 'xreactor.operator.undo', at, from: OWNER },
    { type: 'xreactor.execution.abort', at, reason: 'owner aborted' },
    { type: 'xreactor.unit.settled', at, child: UNIT_ID },
  ] as unknown as UnitEvent[];
  return [
    ...stale.flatMap((attempt): UnitEvent[] => [
      { type: 'xreactor.unit.succeeded', at, attempt, value: 'stale' },
      { type: 'xreactor.unit.halted', at, attempt, reason: 'stale' },
      ...flags.flatMap((started) => flags.map((retryable): UnitEvent => ({ type: 'xreactor.unit.failed', at, attempt, error: error('stale'), started, retryable }))),
      { type: 'xreactor.timer.fired', at, attempt },
    ]),
    ...(s.value === 'queued' ? [] : [{ type: 'xreactor.unit.start', at } as const]),
    ...(s.value === 'compensating' ? [] : [{ type: 'xreactor.unit.compensated', at, failure: null, skipped: false } as const]),
    ...foreign,
  ];
}

function eventVariant(e: UnitEvent): string {
  switch (e.type) {
    case 'xreactor.unit.failed':
      return `${e.type}(started=${e.started},retryable=${e.retryable})`;
    case 'xreactor.unit.compensated':
      return `${e.type}(${e.skipped ? 'skipped' : e.failure === null ? 'ok' : 'failure'})`;
    default:
      return e.type;
  }
}
const isRealEvent = (event: UnitEvent) => 'at' in event;
/** Control only (the clock and error payloads aside); the attempt is bounded by maxAttempts, so the graph is finite. */
const abstractKey = (s: Snapshot) => JSON.stringify([s.value, s.context.attempt, s.context.failure !== null, s.context.end?.status ?? null, s.context.compensation?.status ?? null]);

function generatePaths(config: UnitModelConfig, machine: UnitMachine): Path[] {
  return createTestModel(machine, {
    input: config.input,
    events: eventsFor,
    filterEvents: (_, event) => isRealEvent(event),
    serializeState: (state, event, previous) => (event === undefined || previous === undefined ? abstractKey(state) : `${abstractKey(state)} via ${eventVariant(event)} from ${abstractKey(previous)}`),
    limit: 10_000,
  }).getShortestPaths();
}

function expectTags(s: Snapshot, where: string): void {
  const declared = unitTagsOf(s.value);
  expect([...s.tags].sort(), where).toEqual([...declared].sort());
  expect([...declared].sort(), `${where}: unitTagsOf disagrees with UNIT_STATE_TAGS`).toEqual([...(UNIT_STATE_TAGS as Record<string, readonly string[]>)[s.value as string]!].sort());
  for (const tag of ACTOR_TAGS) expect(s.hasTag(tag), `${where}: hasTag('${tag}')`).toBe(declared.has(tag));
}

interface ReplayResult {
  readonly covered: Set<string>;
  readonly transitionsReplayed: number;
  readonly settles: number;
}

function replay(config: UnitModelConfig, machine: UnitMachine, labels: Map<AnyTransitionDefinition, string>, paths: readonly Path[]): ReplayResult {
  const { input } = config;
  const { retry } = input;
  const covered = new Set<string>();
  const checked = new Set<string>();
  let transitionsReplayed = 0;
  let settles = 0;
  for (const path of paths) {
    const [initial, initialActions] = initialTransition(machine, input);
    // Created queued by its owner's dispatch commit: its start job is the only thing it asks for.
    expect(initial.value).toBe('queued');
    expect(normalize(initialActions)).toEqual([{ type: 'xreactor.effect.unit.start', params: {} }]);
    expect(initial.context).toEqual({
      unitId: UNIT_ID,
      owner: OWNER,
      ownerPath: input.ownerPath,
      reactor: input.reactor,
      version: input.version,
      fingerprint: input.fingerprint,
      step: STEP,
      attempt: 1,
      retry,
      failure: null,
      end: null,
      compensation: null,
      dispatchedAt: input.at,
      updatedAt: input.at,
    } satisfies UnitContext);
    expect(unitStatusOf(initial.value)).toBe('queued');
    expectTags(initial, 'initial');
    let snapshot = initial;
    /** Along the path: run effects (attempts begun), compensations asked for, signals to the owner, `value` results written. */
    let runs = 0;
    let compensations = 0;
    let signals = 0;
    let values = 0;
    /** The error of the attempt that failed last (the one a compensation and the end carry). */
    let lastError: EventOf<'xreactor.unit.failed'>['error'] | null = null;

    for (const [i, pathStep] of path.steps.entries()) {
      const event = pathStep.event;
      if ((event.type as string) === 'xstate.init') continue;
      const before = snapshot;
      const b = before.context;
      const where = `path ${describePath(path, eventVariant)}\n  at step ${i}: ${eventVariant(event)} from ${abstractKey(before)}`;
      const [next, raw] = transition(machine, before, event);
      const actions = normalize(raw);
      const c = next.context;
      const value = next.value as string;
      transitionsReplayed++;
      expect(next, `${where}: generated event was ignored`).not.toBe(before);
      expect(abstractKey(next), `${where}: the replay left the model's path`).toBe(abstractKey(pathStep.state));

      const edge = `${abstractKey(before)} ${eventVariant(event)}`;
      if (!checked.has(edge)) {
        checked.add(edge);
        const frozen = structuredClone(snapshotData(before));
        expect(getMicrosteps(machine, before, event).length, `${where}: more than one microstep`).toBe(1);
        for (const t of machine.getTransitionData(before, event)) covered.add(labels.get(t) ?? `UNDECLARED ${t.source.id} ${t.eventType}`);
        const [again, againActions] = transition(machine, before, event);
        expect(snapshotData(again), `${where}: not deterministic`).toEqual(snapshotData(next));
        expect(normalize(againActions), where).toEqual(actions);
        expect(snapshotData(before), `${where}: mutated its input`).toEqual(frozen);
        // Duplicate delivery (a redelivered job, a repeated outcome): ignored, no actions.
        const [dup, dupActions] = transition(machine, next, event);
        expect(dup, `${where}: a duplicate delivery was accepted`).toBe(next);
        expect(dupActions, where).toEqual([]);
        for (const stale of ignoredEventsFor(next)) {
          const [ignored, ignoredActions] = transition(machine, next, stale);
          expect(ignored, `${where}: ${JSON.stringify(stale)} was accepted in ${abstractKey(next)}`).toBe(next);
          expect(ignoredActions, where).toEqual([]);
        }
      }

      // State, tags, status, context bounds.
      expectTags(next, where);
      for (const action of actions) expect(KNOWN_ACTIONS, `${where}: unknown action ${action.type}`).toContain(action.type);
      expect(c.updatedAt, `${where}: updatedAt does not record the event's clock`).toBe(event.at);
      expect(next.status === 'done', where).toBe(SETTLED.has(value));
      expect(unitStatusOf(next.value), where).toBe((SETTLED.has(value) ? value : 'running') as UnitStatus);
      expect(c.attempt, `${where}: more attempts than retry.maxAttempts`).toBeLessThanOrEqual(retry.maxAttempts);
      expect(c.attempt, `${where}: the attempt moved without a backoff's end`).toBe(b.attempt + (event.type === 'xreactor.timer.fired' ? 1 : 0));
      // What never changes.
      expect({ ...c, attempt: 0, failure: null, end: null, compensation: null, updatedAt: 0 }, `${where}: an immutable field changed`).toEqual({ ...b, attempt: 0, failure: null, end: null, compensation: null, updatedAt: 0 });

      // One run effect per attempt, on entering running (every event running accepts leaves it).
      const runEffects = ofType(actions, 'xreactor.effect.unit.run');
      expect(runEffects, `${where}: run effects`).toEqual(value === 'running' ? [{ type: 'xreactor.effect.unit.run', params: { attempt: c.attempt } }] : []);
      runs += runEffects.length;
      expect(runs, `${where}: attempts begun`).toBe(value === 'queued' ? 0 : c.attempt);
      expect(runs, `${where}: more attempts than retry.maxAttempts`).toBeLessThanOrEqual(retry.maxAttempts);
      expect(ofType(actions, 'xreactor.effect.unit.start'), `${where}: a start effect after the unit was created`).toEqual([]);

      // Retries: only a retryable failure of a started body before the last attempt waits, for backoffDelayMs.
      const waits = ofType(actions, 'xreactor.effect.unit.wait');
      const retryTraces = ofType(actions, 'xreactor.write.trace').filter((t) => t.params.type === 'retry');
      if (value === 'retrying') {
        expect(event.type, where).toBe('xreactor.unit.failed');
        const e = event as EventOf<'xreactor.unit.failed'>;
        expect(e.started && e.retryable, `${where}: a retry of a failure that is not a retryable failure of a started body`).toBe(true);
        expect(b.attempt, `${where}: a retry after the last attempt`).toBeLessThan(retry.maxAttempts);
        const delayMs = backoffDelayMs(retry, e.attempt);
        expect(delayMs, `${where}: backoffDelayMs differs from the policy's delay after attempt ${e.attempt}`).toBe(config.delays[e.attempt - 1]);
        expect(waits, `${where}: wait effect`).toEqual([{ type: 'xreactor.effect.unit.wait', params: { attempt: e.attempt, delayMs, error: e.error } }]);
        expect(retryTraces, `${where}: retry trace`).toEqual([{ type: 'xreactor.write.trace', params: { type: 'retry', step: STEP, attempt: e.attempt, at: e.at, delayMs, error: e.error } }]);
        expect(c.failure, `${where}: the retried failure is not recorded`).toEqual(e.error);
      } else {
        expect(waits, `${where}: a wait outside retrying`).toEqual([]);
        expect(retryTraces, `${where}: a retry trace outside retrying`).toEqual([]);
      }
      if (event.type === 'xreactor.unit.failed') lastError = event.error;
      if (event.type === 'xreactor.timer.fired') expect(c.failure, `${where}: the retried failure outlives its backoff`).toBeNull();

      // Compensation: once, only after the last failed attempt (no retry follows it) of a started body.
      const compensates = ofType(actions, 'xreactor.effect.unit.compensate');
      if (value === 'compensating') {
        expect(event.type, where).toBe('xreactor.unit.failed');
        const e = event as EventOf<'xreactor.unit.failed'>;
        expect(e.started, `${where}: compensating a body that never started`).toBe(true);
        expect(e.attempt === retry.maxAttempts || !e.retryable, `${where}: compensating before the last attempt`).toBe(true);
        expect(compensates, `${where}: compensate effect`).toEqual([{ type: 'xreactor.effect.unit.compensate', params: { attempt: c.attempt, error: e.error } }]);
        expect(c.failure, where).toEqual(e.error);
      } else {
        expect(compensates, `${where}: a compensation outside compensating`).toEqual([]);
      }
      compensations += compensates.length;
      expect(compensations, `${where}: compensated twice`).toBeLessThanOrEqual(1);
      if (event.type === 'xreactor.unit.failed' && value === 'failed') {
        // Failed without compensating: its body never started (its input contract).
        expect(event.started, `${where}: a started body failed for good without its compensation`).toBe(false);
      }
      if (c.compensation !== null) {
        expect(before.value === 'compensating' || b.compensation !== null, `${where}: a compensation recorded without compensating`).toBe(true);
      }

      // The value: written once, only on success, as result `value`.
      const results = ofType(actions, 'xreactor.write.result');
      if (event.type === 'xreactor.unit.succeeded') {
        expect(value, where).toBe('completed');
        expect(results, `${where}: value write`).toEqual([{ type: 'xreactor.write.result', params: { step: 'value', value: event.value } }]);
      } else {
        expect(results, `${where}: a result written without success`).toEqual([]);
      }
      values += results.length;
      expect(values, where).toBeLessThanOrEqual(1);

      // Settling: exactly one signal to the owner and one finished effect, on entering a settled state.
      const toOwner = ofType(actions, 'xreactor.write.signal').map((a) => a.params);
      const finished = ofType(actions, 'xreactor.effect.finished');
      if (SETTLED.has(value)) {
        expect(SETTLED.has(before.value as string), `${where}: left a settled state`).toBe(false);
        expect(toOwner, `${where}: settle signal`).toEqual([{ to: OWNER, event: { type: 'xreactor.unit.settled', at: event.at, child: UNIT_ID }, dedupeKey: `${UNIT_ID}.settled` }]);
        expect(finished, `${where}: finished effect`).toEqual([{ type: 'xreactor.effect.finished', params: { status: value as UnitStatus } }]);
        settles++;
      } else {
        expect(toOwner, `${where}: a signal to the owner before settling`).toEqual([]);
        expect(finished, where).toEqual([]);
      }
      signals += toOwner.length;
      expect(signals, `${where}: the owner told twice`).toBeLessThanOrEqual(1);

      // The end, as a reader of the unit reads it (src/runtime/async-units.ts `lookAtUnit`).
      switch (value) {
        case 'completed':
          expect(c.end, where).toEqual({ status: 'completed' });
          expect(c.compensation, where).toBeNull();
          break;
        case 'halted':
          expect(event.type, where).toBe('xreactor.unit.halted');
          expect(c.end, where).toEqual({ status: 'halted', reason: (event as EventOf<'xreactor.unit.halted'>).reason });
          expect(c.compensation, `${where}: a halt compensated`).toBeNull();
          break;
        case 'failed': {
          expect(c.end, `${where}: the end is not the last attempt's failure`).toEqual({ status: 'failed', error: lastError });
          if (event.type === 'xreactor.unit.compensated') {
            const status = event.skipped ? 'skipped' : event.failure === null ? 'completed' : 'failed';
            expect(c.compensation, where).toEqual({ status, failure: event.failure === null ? null : { step: STEP, kind: 'compensate', ...event.failure } });
            expect(ofType(actions, 'xreactor.write.trace').map((t) => t.params.type), where).toEqual(event.skipped ? [] : [event.failure === null ? 'compensate' : 'compensate_failure']);
          } else {
            expect(c.compensation, where).toBeNull();
          }
          break;
        }
        default:
          expect(c.end, `${where}: an end before settling`).toBeNull();
          expect(c.compensation, where).toBeNull();
      }
      snapshot = next;
    }
  }
  return { covered, transitionsReplayed, settles };
}

const coveredByConfig = new Map<string, Set<string>>();
let allLabels: readonly string[] = [];

describe('unit machine model (xstate/graph)', () => {
  for (const config of CONFIGS) {
    it(`generated paths reach every reachable transition: ${config.title}`, () => {
      const machine = createUnitMachine();
      const labels = declaredTransitions(machine);
      allLabels = [...labels.values()].sort();
      for (const label of config.unreachable) expect(allLabels, `"${label}" is not a declared transition`).toContain(label);
      expect(config.delays.length, 'one delay per retry').toBe(config.input.retry.maxAttempts - 1);
      const paths = generatePaths(config, machine);
      expect(paths.length).toBeGreaterThan(0);
      const { covered, transitionsReplayed, settles } = replay(config, machine, labels, paths);
      coveredByConfig.set(config.title, covered);
      console.info(`[model] unit, ${config.title}: ${labels.size} declared transitions, ${covered.size} reached, ${paths.length} paths, ${transitionsReplayed} transitions replayed, ${settles} settles checked`);
      const undeclared = [...covered].filter((label) => label.startsWith('UNDECLARED'));
      expect(undeclared, 'taken transitions missing from the definition walk').toEqual([]);
      const missing = allLabels.filter((label) => !covered.has(label) && !config.unreachable.includes(label));
      expect(missing, `unreached transitions of "${config.title}":\n  ${missing.join('\n  ')}`).toEqual([]);
      expect(config.unreachable.filter((label) => covered.has(label)), `transitions listed as unreachable for "${config.title}" were reached`).toEqual([]);
    });
  }

  it('the configurations together reach every declared transition', () => {
    expect(coveredByConfig.size).toBe(CONFIGS.length);
    const union = new Set([...coveredByConfig.values()].flatMap((s) => [...s]));
    expect(allLabels.filter((label) => !union.has(label))).toEqual([]);
    // Version 1: queued 1 (start), running 5 (succeeded, halted, failed split on canRetry,
    // startedAndCurrent and isCurrent), retrying 1 (timer.fired), compensating 1 (compensated).
    expect(UNIT_MACHINE_VERSION).toBe(1);
    expect(allLabels.length).toBe(8);
  });
});

describe('unit machine state tags', () => {
  it('every state carries the tags UNIT_STATE_TAGS declares for it, and only those', () => {
    const machine = createUnitMachine();
    const nodes = getStateNodes(machine.root);
    expect(nodes.map((n) => n.path.join('.')).sort()).toEqual(Object.keys(UNIT_STATE_TAGS).sort());
    for (const node of nodes) expect([...node.tags].sort(), node.id).toEqual([...(UNIT_STATE_TAGS as Record<string, readonly string[]>)[node.path.join('.')]!].sort());
    // The settled states are final: nothing moves a settled unit (it is never undone).
    for (const node of nodes) expect(node.type === 'final', node.id).toBe(SETTLED.has(node.key));
  });

  it('unitTagsOf and unitStatusOf read a stored state value', () => {
    expect([...unitTagsOf('running')]).toEqual(['recoverable']);
    expect([...unitTagsOf('retrying')]).toEqual(['recoverable']);
    expect([...unitTagsOf('compensating')]).toEqual(['recoverable']);
    expect([...unitTagsOf('queued')]).toEqual([]);
    for (const settled of SETTLED) expect([...unitTagsOf(settled)], settled).toEqual(['settled']);
    // Not a unit state value (an execution's compound value, an unknown state).
    expect([...unitTagsOf({ running: 'executing' })]).toEqual([]);
    expect([...unitTagsOf('parked')]).toEqual([]);
    expect(unitStatusOf('queued')).toBe('queued');
    expect(unitStatusOf('running')).toBe('running');
    expect(unitStatusOf('retrying')).toBe('running');
    expect(unitStatusOf('compensating')).toBe('running');
    expect(unitStatusOf('completed')).toBe('completed');
    expect(unitStatusOf('failed')).toBe('failed');
    expect(unitStatusOf('halted')).toBe('halted');
  });
});

describe('unit machine contract', () => {
  const machine = createUnitMachine();
  const settledSignal = (at: number) => ({ type: 'xreactor.write.signal', params: { to: OWNER, event: { type: 'xreactor.unit.settled', at, child: UNIT_ID }, dedupeKey: `${UNIT_ID}.settled` } });

  it('retries a retryable failure with exponential backoff, then succeeds: its value written, the owner told once', () => {
    const input = inputOf({ maxAttempts: 3, backoff: 'exponential', baseDelayMs: 100 });
    let [s] = initialTransition(machine, input);
    let a: readonly { type: string; params?: unknown }[];
    [s, a] = transition(machine, s, { type: 'xreactor.unit.start', at: 1_001 });
    expect(normalize(a)).toEqual([{ type: 'xreactor.effect.unit.run', params: { attempt: 1 } }]);
    [s, a] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_002, attempt: 1, error: error('smtp down'), started: true, retryable: true });
    expect(s.value).toBe('retrying');
    expect(normalize(a)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'retry', step: STEP, attempt: 1, at: 1_002, delayMs: 100, error: error('smtp down') } },
      { type: 'xreactor.effect.unit.wait', params: { attempt: 1, delayMs: 100, error: error('smtp down') } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.timer.fired', at: 1_102, attempt: 1 });
    expect(normalize(a)).toEqual([{ type: 'xreactor.effect.unit.run', params: { attempt: 2 } }]);
    [s, a] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_103, attempt: 2, error: error('smtp down'), started: true, retryable: true });
    expect(normalize(a).find((x) => x.type === 'xreactor.effect.unit.wait')).toEqual({ type: 'xreactor.effect.unit.wait', params: { attempt: 2, delayMs: 200, error: error('smtp down') } });
    [s] = transition(machine, s, { type: 'xreactor.timer.fired', at: 1_303, attempt: 2 });
    // The first attempt's success arrives late: ignored.
    expect(transition(machine, s, { type: 'xreactor.unit.succeeded', at: 1_304, attempt: 1, value: 'late' })[0]).toBe(s);
    [s, a] = transition(machine, s, { type: 'xreactor.unit.succeeded', at: 1_305, attempt: 3, value: { id: 'm-1' } });
    expect(s.value).toBe('completed');
    expect(s.status).toBe('done');
    expect(s.context.end).toEqual({ status: 'completed' });
    expect(normalize(a)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'run', step: STEP, attempt: 3, at: 1_305 } },
      { type: 'xreactor.write.result', params: { step: 'value', value: { id: 'm-1' } } },
      { type: 'xreactor.effect.finished', params: { status: 'completed' } },
      settledSignal(1_305),
    ]);
  });

  it('compensates itself once after its last attempt failed with its body started, then settles failed', () => {
    let [s] = initialTransition(machine, inputOf({ maxAttempts: 2, backoff: 'fixed', baseDelayMs: 30 }));
    let a: readonly { type: string; params?: unknown }[];
    [s] = transition(machine, s, { type: 'xreactor.unit.start', at: 1_001 });
    [s] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_002, attempt: 1, error: error('first'), started: true, retryable: true });
    [s] = transition(machine, s, { type: 'xreactor.timer.fired', at: 1_032, attempt: 1 });
    [s, a] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_033, attempt: 2, error: error('second'), started: true, retryable: true });
    expect(s.value).toBe('compensating');
    expect(normalize(a)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'failed', step: STEP, attempt: 2, at: 1_033, error: error('second') } },
      { type: 'xreactor.effect.unit.compensate', params: { attempt: 2, error: error('second') } },
    ]);
    [s, a] = transition(machine, s, { type: 'xreactor.unit.compensated', at: 1_040, failure: { reason: 'raised', error: error('undo mail') }, skipped: false });
    expect(s.value).toBe('failed');
    expect(s.context.end).toEqual({ status: 'failed', error: error('second') });
    expect(s.context.compensation).toEqual({ status: 'failed', failure: { step: STEP, kind: 'compensate', reason: 'raised', error: error('undo mail') } });
    expect(normalize(a)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'compensate_failure', step: STEP, at: 1_040, error: error('undo mail'), reason: 'raised' } },
      { type: 'xreactor.effect.finished', params: { status: 'failed' } },
      settledSignal(1_040),
    ]);
  });

  it('a body that never started fails without compensation, even with attempts left; a halt compensates nothing', () => {
    const input = inputOf({ maxAttempts: 3, backoff: 'exponential', baseDelayMs: 100 });
    let [s] = initialTransition(machine, input);
    [s] = transition(machine, s, { type: 'xreactor.unit.start', at: 1_001 });
    const [failed, failedActions] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_002, attempt: 1, error: error('bad input'), started: false, retryable: true });
    expect(failed.value).toBe('failed');
    expect(failed.context.compensation).toBeNull();
    expect(normalize(failedActions)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'failed', step: STEP, attempt: 1, at: 1_002, error: error('bad input') } },
      { type: 'xreactor.effect.finished', params: { status: 'failed' } },
      settledSignal(1_002),
    ]);
    const [halted, haltedActions] = transition(machine, s, { type: 'xreactor.unit.halted', at: 1_003, attempt: 1, reason: 'not today' });
    expect(halted.value).toBe('halted');
    expect(halted.context.end).toEqual({ status: 'halted', reason: 'not today' });
    expect(normalize(haltedActions)).toEqual([
      { type: 'xreactor.write.trace', params: { type: 'halt', step: STEP, reason: 'not today', at: 1_003 } },
      { type: 'xreactor.effect.finished', params: { status: 'halted' } },
      settledSignal(1_003),
    ]);
    // A non-retryable failure of a started body is its last attempt: compensated at once.
    const [compensating] = transition(machine, s, { type: 'xreactor.unit.failed', at: 1_004, attempt: 1, error: error('card declined'), started: true, retryable: false });
    expect(compensating.value).toBe('compensating');
  });

  it('a settled unit accepts nothing: not its own outcomes again, not its owner’s cancel or undo', () => {
    let [s] = initialTransition(machine, inputOf(NO_RETRY));
    [s] = transition(machine, s, { type: 'xreactor.unit.start', at: 1_001 });
    [s] = transition(machine, s, { type: 'xreactor.unit.succeeded', at: 1_002, attempt: 1, value: 1 });
    expect(s.status).toBe('done');
    for (const event of [...eventsFor(s), ...ignoredEventsFor(s), { type: 'xreactor.unit.succeeded', at: 1_003, attempt: 1, value: 2 } as const]) {
      const [next, actions] = transition(machine, s, event);
      expect(next, event.type).toBe(s);
      expect(actions).toEqual([]);
    }
  });
});
