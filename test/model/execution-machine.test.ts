/**
 * Model lane (ARCHITECTURE.md §6.4): XState's graph utilities generate paths through the
 * execution machine of a few small plans, and those paths must reach every transition the
 * machine declares (guarded alternatives and eventless `always` branches counted apart).
 * Every generated path is replayed with the pure `transition()` the host uses, checking the
 * machine's invariants at each step.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { getMicrosteps, initialTransition, transition } from 'xstate';
import type { TestPath } from 'xstate/graph';
import { createTestModel, getStateNodes } from 'xstate/graph';
import type {
  ExecutionEffect,
  ExecutionEvent,
  ExecutionInput,
  ExecutionMachine,
  ExecutionPlanView,
  ExecutionStatus,
  ExecutionWrite,
} from '../../machines/execution.js';
import { createExecutionMachine } from '../../machines/execution.js';
import { createMachineStepper } from '../../src/runtime/machine-stepper.js';

type Snapshot = ReturnType<typeof initialTransition<ExecutionMachine>>[0];
type Action = ExecutionEffect | ExecutionWrite;
type Path = TestPath<Snapshot, ExecutionEvent>;

const INPUT: ExecutionInput = { executionId: 'exec-1', reactor: 'model', at: 1_000 };
const BASE_DELAY_MS = 10;
const TERMINAL: ReadonlySet<ExecutionStatus> = new Set(['completed', 'halted', 'aborted', 'failed', 'cancelled']);
const FINAL: ReadonlySet<ExecutionStatus> = new Set(['failed', 'cancelled']);
/** Effects whose outcome is the host's next event; `drive()` follows at most one per transition. */
const EVENT_PRODUCING = new Set(['xreactor.effect.runStep', 'xreactor.effect.wait', 'xreactor.effect.compensate', 'xreactor.effect.undo']);

const step = (name: string, maxAttempts: number, tracked = true) => ({
  name,
  retry: { maxAttempts, backoff: 'fixed' as const, baseDelayMs: BASE_DELAY_MS },
  tracked,
});
const interrupt = (name: string, group: readonly string[], timeoutMs: number | null = null) => ({
  ...step(name, 1, false),
  interrupt: { group, timeoutMs },
});

interface ModelPlan {
  readonly title: string;
  readonly plan: ExecutionPlanView;
  /** Declared transitions this plan cannot exercise (by its shape, not by a machine defect). */
  readonly unreachable: readonly string[];
}

/** Transitions a plan without a background cut never takes. */
const NO_HANDOFF = ['running.next --always[atHandoff]--> running.handedOff', 'running.handedOff --xreactor.execution.resume--> running.next'];
/** Transitions a plan without an interrupt step never takes (only a child's pause reaches `paused`). */
const NO_INTERRUPT = [
  'running.next --always[atResumedInterrupt]--> running.next',
  'running.next --always[atInterrupt]--> paused',
  'paused --xreactor.interrupt.resume--> running',
  'paused --xreactor.interrupt.fail--> rolling_back',
];
/** Transitions a plan whose steps all have maxAttempts 1 never takes. */
const NO_RETRY = ['running.executing --xreactor.step.failed[canRetry]--> running.waitingToRetry', 'running.waitingToRetry --xreactor.timer.fired--> running.executing'];

const PLANS: readonly ModelPlan[] = [
  {
    title: 'no steps',
    plan: { reactor: 'empty', steps: [], handoffIndex: null },
    unreachable: [
      ...NO_HANDOFF,
      'running --xreactor.execution.abort--> aborted',
      'running.next --always[hasNextStep]--> running.executing',
      'running.executing --xreactor.step.succeeded--> running.next',
      'running.executing --xreactor.step.skipped--> running.next',
      'running.executing --xreactor.step.halted--> halted',
      'running.executing --xreactor.step.failed[canRetry]--> running.waitingToRetry',
      'running.executing --xreactor.step.failed[isCurrentOutcome]--> rolling_back',
      'running.waitingToRetry --xreactor.timer.fired--> running.executing',
      'rolling_back --xreactor.execution.abort--> aborted',
      'rolling_back.deciding --always[compensationPending]--> rolling_back.compensating',
      'rolling_back.compensating --xreactor.compensate.finished--> rolling_back.undoing',
      'rolling_back.undoing --always[hasUndoLeft]--> rolling_back.undoingEntry',
      'rolling_back.undoingEntry --xreactor.undo.finished--> rolling_back.undoing',
      'rolling_back.done --always[else]--> failed',
      'halted --xreactor.operator.undo--> rolling_back',
      'aborted --xreactor.operator.undo--> rolling_back',
      // Nothing runs, so nothing can be cancelled or pause.
      'running --xreactor.operator.cancel--> cancelled',
      'running.executing --xreactor.child.paused--> paused',
      'running.next --always[atResumedInterrupt]--> running.next',
      'running.next --always[atInterrupt]--> paused',
      'paused --xreactor.interrupt.resume--> running',
      'paused --xreactor.interrupt.fail--> rolling_back',
      'paused --xreactor.execution.resume--> running.executing',
      'paused --xreactor.operator.cancel--> cancelled',
      'paused --xreactor.operator.undo--> rolling_back',
    ],
  },
  {
    title: 'one step, no retry',
    plan: { reactor: 'one', steps: [step('only', 1)], handoffIndex: null },
    unreachable: [...NO_HANDOFF, ...NO_RETRY, ...NO_INTERRUPT],
  },
  {
    title: 'two steps, the second retried up to 2 attempts',
    plan: { reactor: 'two', steps: [step('reserve', 1), step('charge', 2)], handoffIndex: null },
    unreachable: [...NO_HANDOFF, ...NO_INTERRUPT],
  },
  {
    title: 'three steps, an untracked one in the middle',
    plan: { reactor: 'mixed', steps: [step('reserve', 2), step('notify', 1, false), step('charge', 2)], handoffIndex: null },
    unreachable: [...NO_HANDOFF, ...NO_INTERRUPT],
  },
  {
    title: 'two interrupts ready together, between two steps',
    plan: {
      reactor: 'approvals',
      steps: [step('quote', 1), interrupt('manager', ['manager', 'finance'], 1_000), interrupt('finance', ['finance']), step('order', 1)],
      handoffIndex: null,
    },
    unreachable: [...NO_HANDOFF, ...NO_RETRY],
  },
  {
    title: 'background hand-off after the first of two steps',
    plan: { reactor: 'background', steps: [step('reserve', 1), step('charge', 2)], handoffIndex: 1 },
    unreachable: NO_INTERRUPT,
  },
];

// ---------------------------------------------------------------------------------------------
// The declared transitions, read from the machine definition.

const shortId = (node: AnyStateNode) => node.id.replace(/^execution\.?/, '') || '(root)';

function guardName(t: AnyTransitionDefinition): string {
  const guard: unknown = t.guard;
  if (guard === undefined) return 'else';
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && guard !== null && 'type' in guard) return String(guard.type);
  return 'inline';
}

/** Every transition of every state node, labelled `source --event[guard]--> target`. */
function declaredTransitions(machine: ExecutionMachine): Map<AnyTransitionDefinition, string> {
  const labels = new Map<AnyTransitionDefinition, string>();
  const add = (node: AnyStateNode, eventLabel: string, alternatives: readonly AnyTransitionDefinition[]) => {
    for (const t of alternatives) {
      const guard = alternatives.length > 1 ? `[${guardName(t)}]` : '';
      const targets = t.target === undefined ? '(self, targetless)' : t.target.map(shortId).join(',');
      labels.set(t, `${shortId(node)} --${eventLabel}${guard}--> ${targets}`);
    }
  };
  for (const node of [machine.root, ...getStateNodes(machine.root)]) {
    // Delayed transitions and invocations would need the clock/actors the model does not drive.
    expect(node.after, `${node.id} declares delayed transitions`).toEqual([]);
    expect(node.invoke, `${node.id} invokes actors`).toEqual([]);
    for (const [eventType, alternatives] of node.transitions) add(node, eventType, alternatives);
    if (node.always !== undefined) add(node, 'always', node.always);
  }
  expect(new Set(labels.values()).size, 'transition labels are not unique').toBe(labels.size);
  return labels;
}

/**
 * The declared transitions one macrostep takes. The first microstep takes what
 * `getTransitionData` selects for the event (guards evaluated); every further microstep is an
 * eventless one, identified as the single `always` alternative of the previous configuration
 * whose targets are all in the next configuration.
 */
function takenTransitions(machine: ExecutionMachine, before: Snapshot, event: ExecutionEvent): AnyTransitionDefinition[] {
  const taken: AnyTransitionDefinition[] = [...machine.getTransitionData(before, event)];
  let previous = before;
  getMicrosteps(machine, before, event).forEach(([snapshot], i) => {
    if (i > 0) {
      const candidates = previous._nodes
        .flatMap((node) => node.always ?? [])
        .filter((t) => t.target !== undefined && t.target.every((target) => snapshot._nodes.includes(target)));
      expect(candidates, `eventless microstep ${i} of ${event.type} from ${JSON.stringify(previous.value)}`).toHaveLength(1);
      taken.push(candidates[0]!);
    }
    previous = snapshot;
  });
  return taken;
}

// ---------------------------------------------------------------------------------------------
// Traversal: context-aware event generators and an abstract state key.

const statusOf = (value: Snapshot['value']): ExecutionStatus =>
  (typeof value === 'string' ? value : Object.keys(value)[0]) as ExecutionStatus;

/**
 * The context fields the guards read, and what decides which events are current (the ready
 * interrupts a resume/fail may name); everything else (clock, epochs, error payloads) is
 * irrelevant to control. The epoch is left out on purpose: abort → operator undo → abort
 * cycles would make the graph infinite, and the events read it from the concrete snapshot.
 */
function abstractKey(s: Snapshot): string {
  const c = s.context;
  return JSON.stringify([
    s.value,
    c.cursor,
    c.attempt,
    c.undoDepth,
    c.rollbackReason,
    c.failure?.compensationPending ?? null,
    c.handedOff,
    c.resumed,
    c.paused === null ? null : { ready: c.paused.ready.map((r) => r.step), child: c.paused.child },
  ]);
}

function eventVariant(e: ExecutionEvent): string {
  switch (e.type) {
    case 'xreactor.step.failed':
      return `${e.type}(started=${e.started},retryable=${e.retryable})`;
    case 'xreactor.compensate.finished':
    case 'xreactor.undo.finished':
      return `${e.type}(${e.failure === null ? 'ok' : 'failure'})`;
    case 'xreactor.interrupt.resume':
    case 'xreactor.interrupt.fail':
      // Which interrupt: resuming one or the other of a group leads to different states.
      return `${e.type}(${e.step})`;
    default:
      return e.type;
  }
}

/**
 * A vertex is a state reached *through a given edge* (as `createTestModel`'s
 * `serializeTransition` does), so the shortest paths reach every edge of the abstract graph,
 * not only every state.
 */
function serializeState(state: Snapshot, event: ExecutionEvent | undefined, previous?: Snapshot): string {
  const key = abstractKey(state);
  return event === undefined || previous === undefined ? key : `${key} via ${eventVariant(event)} from ${abstractKey(previous)}`;
}

const error = (message: string) => ({ name: 'Error', message });

/**
 * Concrete events for a snapshot: each carries the index/attempt/position the snapshot expects,
 * with every variant the guards distinguish. `createTestModel` keeps those whose type an active
 * state node handles — and, for a handled type this list has no event of, substitutes a bare
 * `{ type }` (no `at`, no step): `isRealEvent` drops those (see `generatePaths`).
 *
 * `xreactor.execution.resume` is what the host sends to a handed-off run (the worker's job) or
 * to a run paused on a composed child (the child was continued); a run paused on its own
 * interrupts is continued by `xreactor.interrupt.resume` / `.fail` naming a ready interrupt.
 * The ignored cases are checked in `staleEventsFor`.
 */
function eventsFor(s: Snapshot): ExecutionEvent[] {
  const { cursor: index, attempt, undoDepth, updatedAt, rollbackEpoch: epoch } = s.context;
  const at = updatedAt + 1;
  const flags = [true, false];
  return [
    { type: 'xreactor.input.accepted', at },
    { type: 'xreactor.input.rejected', at, error: error('input rejected') },
    { type: 'xreactor.step.succeeded', at, index, attempt, args: { index }, result: `result-${index}` },
    { type: 'xreactor.step.skipped', at, index, attempt, value: `skipped-${index}` },
    { type: 'xreactor.step.halted', at, index, attempt, reason: 'halt requested' },
    ...flags.flatMap((started) =>
      flags.map((retryable): ExecutionEvent => ({ type: 'xreactor.step.failed', at, index, attempt, error: error('step failed'), started, retryable, args: { index } })),
    ),
    { type: 'xreactor.timer.fired', at, index, attempt },
    ...(pausedOnInterrupts(s) ? [] : [{ type: 'xreactor.execution.resume', at } as const]),
    { type: 'xreactor.operator.cancel', at, reason: 'operator cancel' },
    { type: 'xreactor.child.paused', at, index, attempt },
    ...(s.context.paused?.ready ?? []).flatMap((r): ExecutionEvent[] => [
      { type: 'xreactor.interrupt.resume', at, step: r.step, payload: { ok: r.step } },
      { type: 'xreactor.interrupt.fail', at, step: r.step, error: error('interrupt failed') },
    ]),
    { type: 'xreactor.compensate.finished', at, epoch, failure: null },
    { type: 'xreactor.compensate.finished', at, epoch, failure: { reason: 'raised', error: error('compensate raised') } },
    { type: 'xreactor.undo.finished', at, epoch, position: undoDepth - 1, step: 'top-of-stack', failure: null },
    { type: 'xreactor.undo.finished', at, epoch, position: undoDepth - 1, step: 'top-of-stack', failure: { reason: 'returned_failure', error: error('undo failed') } },
    { type: 'xreactor.execution.abort', at, reason: 'signal aborted' },
    { type: 'xreactor.operator.undo', at },
  ];
}

const pausedOnInterrupts = (s: Snapshot) => s.context.paused !== null && s.context.paused.child === null;
const acceptsExecutionResume = (s: Snapshot) =>
  JSON.stringify(s.value) === JSON.stringify({ running: 'handedOff' }) || (statusOf(s.value) === 'paused' && s.context.paused?.child != null);

/** `createTestModel`'s stand-in `{ type }` for a handled type `eventsFor` gave no event of. */
const isRealEvent = (event: ExecutionEvent) => 'at' in event;

/**
 * Events no state may accept at `s`: outcomes of another step/attempt, undo of another position,
 * a resume/fail of an interrupt that is not ready (already resumed, not reached, not an
 * interrupt, unknown), an `xreactor.execution.resume` where no hand-off or child pause waits.
 */
function staleEventsFor(s: Snapshot, plan: ExecutionPlanView): ExecutionEvent[] {
  const { cursor, attempt, undoDepth, updatedAt, rollbackEpoch: epoch } = s.context;
  const ready = new Set((s.context.paused?.ready ?? []).map((r) => r.step));
  const notReady = [...plan.steps.map((st) => st.name), 'no-such-step'].filter((name) => !ready.has(name));
  const at = updatedAt + 1;
  const wrong = [
    { index: cursor, attempt: attempt + 1 },
    { index: cursor, attempt: attempt - 1 },
    { index: cursor + 1, attempt },
    { index: cursor - 1, attempt },
  ];
  return [
    ...wrong.flatMap(({ index, attempt: a }): ExecutionEvent[] => [
      { type: 'xreactor.step.succeeded', at, index, attempt: a, args: null, result: 'stale' },
      { type: 'xreactor.step.skipped', at, index, attempt: a, value: 'stale' },
      { type: 'xreactor.step.halted', at, index, attempt: a, reason: 'stale' },
      { type: 'xreactor.step.failed', at, index, attempt: a, error: error('stale'), started: true, retryable: true, args: null },
      { type: 'xreactor.step.failed', at, index, attempt: a, error: error('stale'), started: false, retryable: false, args: null },
      { type: 'xreactor.timer.fired', at, index, attempt: a },
      { type: 'xreactor.child.paused', at, index, attempt: a },
    ]),
    ...notReady.flatMap((name): ExecutionEvent[] => [
      { type: 'xreactor.interrupt.resume', at, step: name, payload: 'stale' },
      { type: 'xreactor.interrupt.fail', at, step: name, error: error('stale') },
    ]),
    ...(acceptsExecutionResume(s) ? [] : [{ type: 'xreactor.execution.resume', at } as const]),
    { type: 'xreactor.undo.finished', at, epoch, position: undoDepth, step: 'stale', failure: null },
    { type: 'xreactor.undo.finished', at, epoch, position: undoDepth - 2, step: 'stale', failure: null },
    // Outcomes of an earlier rollback (an aborted one that an operator undo restarted).
    { type: 'xreactor.undo.finished', at, epoch: epoch - 1, position: undoDepth - 1, step: 'stale', failure: null },
    { type: 'xreactor.compensate.finished', at, epoch: epoch - 1, failure: null },
  ];
}

function generatePaths(machine: ExecutionMachine): Path[] {
  const model = createTestModel(machine, {
    input: INPUT,
    events: eventsFor,
    // Without this, a type the state handles but `eventsFor` has no concrete event of (e.g.
    // `xreactor.interrupt.resume` while paused on a composed child: no ready interrupt) is
    // explored as a bare `{ type }`, which the guards reject: a self-loop vertex whose path
    // replays an ignored event.
    filterEvents: (_, event) => isRealEvent(event),
    serializeState,
    // The plans are tiny; a blow-up of the abstract state space must fail, not hang.
    limit: 50_000,
  });
  return model.getShortestPaths();
}

// ---------------------------------------------------------------------------------------------
// Replay with the pure transition() the host uses, checking invariants at each step.

const normalize = (actions: readonly { type: string; params?: unknown }[]): Action[] =>
  actions.map((a) => ({ type: a.type, params: a.params }) as Action);

const describePath = (path: Path) =>
  path.steps
    .map((s) => s.event)
    .filter((e) => (e.type as string) !== 'xstate.init')
    .map(eventVariant)
    .join(' → ');

const snapshotData = (s: Snapshot) => ({ value: s.value, context: s.context, status: s.status });

interface ReplayResult {
  readonly covered: Set<string>;
  readonly transitionsReplayed: number;
  /** `xreactor.write.pushUndo` emitted for an untracked step. */
  readonly untrackedPushes: Set<string>;
  /** Interrupts still ready after a resume of another one of their group, with a moved deadline. */
  readonly movedDeadlines: Set<string>;
}

function replay(plan: ExecutionPlanView, machine: ExecutionMachine, labels: Map<AnyTransitionDefinition, string>, paths: readonly Path[]): ReplayResult {
  const covered = new Set<string>();
  /** Abstract edges whose per-edge checks (coverage, purity, ignored events) already ran. */
  const checkedEdges = new Set<string>();
  const untrackedPushes = new Set<string>();
  const movedDeadlines = new Set<string>();
  let transitionsReplayed = 0;
  const trackedCount = plan.steps.filter((s) => s.tracked).length;
  const interrupts = plan.steps.filter((s) => s.interrupt !== undefined).map((s) => s.name);

  const stepper = createMachineStepper(machine);
  for (const path of paths) {
    const [initial, initialActions] = initialTransition(machine, INPUT);
    const [steppedInitial, steppedInitialActions] = stepper.initial(INPUT);
    expect(snapshotData(steppedInitial)).toEqual(snapshotData(initial));
    expect(normalize(steppedInitialActions)).toEqual(normalize(initialActions));
    expect(initial.value).toBe('pending');
    expect(initialActions).toEqual([]);
    let snapshot = initial;
    /** The store's undo stack as the writes build it (entries named by plan index). */
    const stack: number[] = [];
    let skippedTracked = 0;

    for (const [i, pathStep] of path.steps.entries()) {
      const event = pathStep.event;
      if ((event.type as string) === 'xstate.init') continue;
      const where = `path ${describePath(path)}\n  at step ${i}: ${eventVariant(event)} from ${abstractKey(snapshot)}`;
      const before = snapshot;
      const edge = `${abstractKey(before)} ${eventVariant(event)}`;
      const firstTime = !checkedEdges.has(edge);
      const beforeData = firstTime ? structuredClone(snapshotData(before)) : undefined;

      const [next, rawActions] = transition(machine, before, event);
      const actions = normalize(rawActions);
      transitionsReplayed++;

      // The host's stepper (one actor scope per machine) agrees with xstate's transition().
      const [stepped, steppedActions] = stepper.next(before, event);
      expect(snapshotData(stepped), `${where}: the host's stepper disagrees with transition()`).toEqual(snapshotData(next));
      expect(normalize(steppedActions), `${where}: the host's stepper's actions disagree with transition()`).toEqual(actions);

      // Generated events are current: each one is accepted.
      expect(next, `${where}: generated event ${JSON.stringify(event)} was ignored`).not.toBe(before);
      // The replay follows the model's path.
      expect(abstractKey(next), where).toBe(abstractKey(pathStep.state));

      if (firstTime) {
        checkedEdges.add(edge);
        // Coverage, from the microsteps of this macrostep.
        for (const t of takenTransitions(machine, before, event)) covered.add(labels.get(t) ?? `UNDECLARED ${t.source.id} ${t.eventType}`);

        // Purity: same snapshot + event → deep-equal snapshot and actions; the input is untouched;
        // the microsteps add up to the macrostep.
        const [again, againActions] = transition(machine, before, event);
        expect(snapshotData(again), `${where}: transition() is not deterministic`).toEqual(snapshotData(next));
        expect(normalize(againActions), `${where}: transition() actions are not deterministic`).toEqual(actions);
        expect(snapshotData(before), `${where}: transition() mutated its input snapshot`).toEqual(beforeData);
        const microsteps = getMicrosteps(machine, before, event);
        expect(snapshotData(microsteps.at(-1)![0]), where).toEqual(snapshotData(next));
        expect(normalize(microsteps.flatMap(([, a]) => a)), where).toEqual(actions);
      }

      const c = next.context;
      const status = statusOf(next.value);

      // Context bounds.
      expect(c.undoDepth, `${where}: undoDepth < 0`).toBeGreaterThanOrEqual(0);
      expect(c.undoDepth, `${where}: undoDepth > cursor`).toBeLessThanOrEqual(c.cursor);
      expect(c.cursor, where).toBeLessThanOrEqual(plan.steps.length);
      expect(c.attempt, where).toBeGreaterThanOrEqual(1);
      if (c.cursor < plan.steps.length) expect(c.attempt, where).toBeLessThanOrEqual(plan.steps[c.cursor]!.retry.maxAttempts);
      expect(c.updatedAt, `${where}: updatedAt does not record the event's clock`).toBe(event.at);
      expect(next.status === 'done', where).toBe(FINAL.has(status));

      // Writes (applied before the effects are checked: an undo effect follows the pop of the
      // same transition). The undo stack the writes build must match undoDepth.
      for (const write of actions) {
        if (write.type === 'xreactor.write.pushUndo') {
          expect(write.params.position, where).toBe(stack.length);
          expect(event.type, where).toBe('xreactor.step.succeeded');
          const index = (event as Extract<ExecutionEvent, { type: 'xreactor.step.succeeded' }>).index;
          // The store keeps what is pushed (memory-store: `undo[position] = entry`), so an untracked
          // step must not be pushed. Collected and asserted after the coverage check (see the report).
          if (plan.steps[index]!.tracked) stack.push(index);
          else untrackedPushes.add(`step "${plan.steps[index]!.name}" (plan index ${index}, tracked: false) pushed at position ${write.params.position}`);
        } else if (write.type === 'xreactor.write.popUndo') {
          expect(write.params.position, `${where}: pop is not of the top of the stack`).toBe(stack.length - 1);
          stack.pop();
        }
      }
      expect(stack.length, `${where}: undoDepth differs from the stack the writes build`).toBe(c.undoDepth);
      if (event.type === 'xreactor.step.skipped' && plan.steps[event.index]!.tracked) skippedTracked++;

      // Interrupts: `resumed` lists interrupt steps of the plan, each once, and only a resume
      // changes it — appending exactly the resumed step, whose payload becomes its result.
      for (const name of c.resumed) expect(interrupts, `${where}: resumed "${name}" is not an interrupt step`).toContain(name);
      expect(new Set(c.resumed).size, `${where}: an interrupt resumed twice`).toBe(c.resumed.length);
      const results = actions.filter((a) => a.type === 'xreactor.write.result');
      if (event.type === 'xreactor.interrupt.resume') {
        expect(before.context.paused?.ready.map((r) => r.step), `${where}: resume of an interrupt that is not ready`).toContain(event.step);
        expect(c.resumed, `${where}: resume does not append exactly its step to resumed`).toEqual([...before.context.resumed, event.step]);
        expect(results, `${where}: resume does not write exactly its payload as the step's result`).toEqual([
          { type: 'xreactor.write.result', params: { step: event.step, value: event.payload } },
        ]);
        expect(
          actions.filter((a) => a.type === 'xreactor.write.pushUndo'),
          `${where}: resume pushed an undo entry`,
        ).toEqual([]);
      } else {
        expect(c.resumed, `${where}: resumed changed without a resume`).toEqual(before.context.resumed);
      }
      for (const result of results) {
        // Every other result is the outcome of the step the event names.
        if (event.type !== 'xreactor.interrupt.resume') {
          expect(event.type === 'xreactor.step.succeeded' || event.type === 'xreactor.step.skipped', `${where}: result written by ${event.type}`).toBe(true);
          expect(result.params.step, where).toBe(plan.steps[(event as Extract<ExecutionEvent, { type: 'xreactor.step.succeeded' }>).index]!.name);
        }
      }

      // Pause record: present exactly while paused; either the composed child at the cursor
      // (nothing ready), or the not-yet-resumed interrupts of the group of the interrupt at the
      // cursor, itself first, with their deadlines.
      if (status !== 'paused') {
        expect(c.paused, `${where}: pause record outside paused`).toBeNull();
      } else {
        const p = c.paused;
        expect(p, `${where}: paused without a pause record`).not.toBeNull();
        expect(p!.since, `${where}: pause since is not the pausing event's clock`).toBe(event.at);
        const atCursor = plan.steps[c.cursor]!;
        if (p!.child !== null) {
          expect(event.type, where).toBe('xreactor.child.paused');
          expect(p!.child, `${where}: paused child is not the step at the cursor`).toBe(atCursor.name);
          expect(p!.ready, where).toEqual([]);
        } else {
          expect(atCursor.interrupt, `${where}: paused on interrupts at a step that is not one`).toBeDefined();
          const readySteps = p!.ready.map((r) => r.step);
          expect(readySteps[0], `${where}: the interrupt at the cursor is not ready first`).toBe(atCursor.name);
          for (const name of readySteps) {
            expect(interrupts, `${where}: ready "${name}" is not an interrupt step`).toContain(name);
            expect(c.resumed, `${where}: ready "${name}" was already resumed`).not.toContain(name);
          }
          expect(readySteps, `${where}: ready is not the unresumed rest of the group`).toEqual(atCursor.interrupt!.group.filter((n) => !c.resumed.includes(n)));
          for (const r of p!.ready) {
            const ms = plan.steps.find((st) => st.name === r.step)!.interrupt!.timeoutMs;
            // A deadline runs from when the interrupt first became ready (a re-pause does not move it).
            expect(c.readyAt[r.step], `${where}: "${r.step}" has no ready time`).toBeDefined();
            expect(r.timeoutAt, `${where}: deadline of "${r.step}"`).toBe(ms === null ? null : c.readyAt[r.step]! + ms);
          }
        }
      }
      // An interrupt that stays ready across a resume of another one of its group has been
      // waiting since the first pause: its deadline must not move. (The host's active timeout is
      // a delayed job whose id is per interrupt, and the queue does not add a known id again, so
      // that job keeps the first deadline; a lazy check reads the pause record's.) Collected and
      // asserted after the coverage check (see the report).
      if (event.type === 'xreactor.interrupt.resume' && status === 'paused') {
        for (const r of c.paused!.ready) {
          const earlier = before.context.paused!.ready.find((e) => e.step === r.step);
          if (earlier !== undefined && earlier.timeoutAt !== r.timeoutAt) {
            movedDeadlines.add(`"${r.step}" still ready after resuming "${event.step}": timeoutAt ${earlier.timeoutAt} → ${r.timeoutAt}`);
          }
        }
      }

      // Effects.
      const effects = actions.filter((a): a is ExecutionEffect => a.type.startsWith('xreactor.effect.'));
      expect(effects.filter((e) => EVENT_PRODUCING.has(e.type)).length, `${where}: more than one event-producing effect`).toBeLessThanOrEqual(1);
      for (const effect of effects) {
        switch (effect.type) {
          case 'xreactor.effect.paused':
            expect(status, where).toBe('paused');
            expect(effect.params, `${where}: paused effect differs from the pause record`).toEqual(c.paused);
            break;
          case 'xreactor.effect.runStep':
            expect(next.value, where).toEqual({ running: 'executing' });
            expect(plan.steps[c.cursor]!.interrupt, `${where}: runStep of an interrupt step`).toBeUndefined();
            expect(effect.params, `${where}: runStep names another step than the cursor`).toEqual({
              index: c.cursor,
              step: plan.steps[c.cursor]!.name,
              attempt: c.attempt,
            });
            break;
          case 'xreactor.effect.wait':
            expect(next.value, where).toEqual({ running: 'waitingToRetry' });
            expect(effect.params, where).toMatchObject({ index: c.cursor, attempt: c.attempt, delayMs: BASE_DELAY_MS });
            break;
          case 'xreactor.effect.compensate':
            expect(next.value, where).toEqual({ rolling_back: 'compensating' });
            expect(c.failure?.compensationPending, where).toBe(true);
            expect(effect.params.index, where).toBe(c.failure!.index);
            break;
          case 'xreactor.effect.undo':
            expect(effect.params.position, `${where}: undo of a negative position`).toBeGreaterThanOrEqual(0);
            expect(effect.params.position, where).toBe(c.undoDepth - 1);
            expect(effect.params.position, `${where}: undo is not of the top of the stack`).toBe(stack.length - 1);
            expect(next.value, where).toEqual({ rolling_back: 'undoingEntry' });
            break;
          case 'xreactor.effect.finished':
            expect(effect.params.status, where).toBe(status);
            break;
        }
      }
      // Entering paused (and only that) announces the pause, once. Every event `paused` accepts
      // leaves it, so a macrostep ending in paused entered it (a resume may leave and re-enter).
      const pausedCount = status === 'paused' ? 1 : 0;
      expect(effects.filter((e) => e.type === 'xreactor.effect.paused').length, `${where}: paused effect count`).toBe(pausedCount);
      expect(
        actions.filter((a) => a.type === 'xreactor.write.trace' && a.params.type === 'paused').length,
        `${where}: paused trace count`,
      ).toBe(pausedCount);
      const finished = effects.filter((e) => e.type === 'xreactor.effect.finished');
      expect(finished.length, `${where}: finished effect count`).toBe(TERMINAL.has(status) ? 1 : 0);
      if (status === 'aborted') {
        const forbidden = effects.filter((e) => e.type !== 'xreactor.effect.finished');
        expect(forbidden, `${where}: aborting emitted effects`).toEqual([]);
      }

      // Terminal states.
      if (status === 'completed') {
        expect(c.cursor, where).toBe(plan.steps.length);
        // A skipped step has nothing to undo, so the stack holds the tracked steps that succeeded.
        expect(c.undoDepth, `${where}: completed with an undo stack that is not the tracked, non-skipped steps`).toBe(trackedCount - skippedTracked);
      }
      if (status === 'failed') {
        expect(c.undoDepth, `${where}: failed with undo entries left`).toBe(0);
        if (c.inputError === null) {
          expect(c.rollbackReason, where).toBe('failure');
          expect(c.failure, where).not.toBeNull();
          expect(c.failure!.compensationPending, `${where}: failed with the compensation still pending`).toBe(false);
        } else {
          expect(c.cursor, where).toBe(0);
        }
      }
      if (status === 'cancelled' && event.type !== 'xreactor.operator.cancel') {
        // Reached through an operator undo's rollback.
        expect(c.cancelReason, where).toBeNull();
        expect(c.undoDepth, `${where}: cancelled with undo entries left`).toBe(0);
        expect(c.rollbackReason, where).toBe('operator');
      }
      if (event.type === 'xreactor.operator.cancel') {
        // Cancel: no rollback (src/runtime/runtime.ts `cancel`); the run ends as it stands.
        expect(status, where).toBe('cancelled');
        expect(effects, `${where}: cancel emitted other effects than finished(cancelled)`).toEqual([
          { type: 'xreactor.effect.finished', params: { status: 'cancelled' } },
        ]);
        expect(
          actions.filter((a) => a.type === 'xreactor.write.pushUndo' || a.type === 'xreactor.write.popUndo' || a.type === 'xreactor.write.result'),
          `${where}: cancel wrote results or undo entries`,
        ).toEqual([]);
        expect(c.cancelReason, where).toBe(event.reason);
        expect(c.undoDepth, `${where}: cancel changed the undo stack`).toBe(before.context.undoDepth);
        expect(c.rollbackReason, where).toBe(before.context.rollbackReason);
      }

      if (!firstTime) {
        snapshot = next;
        continue;
      }
      // Duplicate delivery: the same event again is ignored (same snapshot object, no actions).
      const [dup, dupActions] = transition(machine, next, event);
      expect(dup, `${where}: a duplicate delivery was accepted`).toBe(next);
      expect(dupActions, where).toEqual([]);
      // Stale outcomes (another attempt/index, another undo position) are ignored.
      for (const stale of staleEventsFor(next, plan)) {
        const [ignored, ignoredActions] = transition(machine, next, stale);
        expect(ignored, `${where}: stale ${JSON.stringify(stale)} was accepted in ${abstractKey(next)}`).toBe(next);
        expect(ignoredActions, where).toEqual([]);
      }

      snapshot = next;
    }
  }
  return { covered, transitionsReplayed, untrackedPushes, movedDeadlines };
}

// ---------------------------------------------------------------------------------------------

const coveredByPlan = new Map<string, Set<string>>();
let allLabels: readonly string[] = [];

describe('execution machine model (xstate/graph)', () => {
  for (const { title, plan, unreachable } of PLANS) {
    it(`generated paths reach every reachable transition: ${title}`, () => {
      const machine = createExecutionMachine(plan);
      const labels = declaredTransitions(machine);
      allLabels = [...labels.values()].sort();
      for (const label of unreachable) expect(allLabels, `"${label}", listed as unreachable for this plan, is not a declared transition (update the list)`).toContain(label);

      const paths = generatePaths(machine);
      expect(paths.length).toBeGreaterThan(0);
      const { covered, transitionsReplayed, untrackedPushes, movedDeadlines } = replay(plan, machine, labels, paths);
      coveredByPlan.set(title, covered);
      // Shown with --reporter=verbose: the size of what was checked.
      console.info(`[model] ${title}: ${labels.size} declared transitions, ${covered.size} reached, ${paths.length} paths, ${transitionsReplayed} transitions replayed`);

      const undeclared = [...covered].filter((label) => label.startsWith('UNDECLARED'));
      expect(undeclared, 'taken transitions missing from the definition walk').toEqual([]);
      const missing = allLabels.filter((label) => !covered.has(label) && !unreachable.includes(label));
      expect(missing, `unreached transitions of plan "${title}":\n  ${missing.join('\n  ')}`).toEqual([]);
      const nowReachable = unreachable.filter((label) => covered.has(label));
      expect(nowReachable, `transitions listed as unreachable for "${title}" were reached`).toEqual([]);

      // Regression check (a defect reported earlier, fixed in machines/execution.ts): the
      // `xreactor.step.succeeded` transition emitted `xreactor.write.pushUndo` unconditionally
      // while counting only tracked steps in undoDepth, leaving an untracked step's entry in the
      // store's undo stack at position undoDepth.
      expect([...untrackedPushes], `pushUndo written for untracked steps in plan "${title}"`).toEqual([]);

      // Machine defect (reported to the lead, machines/execution.ts `enterPause`): a resume that
      // pauses again on the same group recomputes every still-ready interrupt's `timeoutAt` from
      // the new pause's `since`, so resuming one interrupt extends the lazy timeout of the others,
      // while their active-timeout jobs (same job id, not added again) keep the first deadline.
      expect([...movedDeadlines], `deadlines of still-ready interrupts moved by a resume in plan "${title}"`).toEqual([]);
    });
  }

  it('the plans together reach every declared transition', () => {
    expect(coveredByPlan.size, 'run the per-plan tests first (same file, sequential)').toBe(PLANS.length);
    const union = new Set([...coveredByPlan.values()].flatMap((s) => [...s]));
    const missing = allLabels.filter((label) => !union.has(label));
    expect(missing, `transitions no plan reaches:\n  ${missing.join('\n  ')}`).toEqual([]);
    // 34 with machine version 4: 23 in version 1; version 2 added the background hand-off and its
    // resume (25); version 4 added 9: `running` cancel, `running.executing` child.paused, the
    // `running.next` branches atResumedInterrupt and atInterrupt, and `paused` with interrupt
    // resume / fail, execution resume (child), operator cancel and operator undo.
    expect(allLabels.length).toBe(34);
  });
});

describe('events a state does not accept', () => {
  const plan: ExecutionPlanView = { reactor: 'two', steps: [step('reserve', 1), step('charge', 2)], handoffIndex: null };
  const machine = createExecutionMachine(plan);

  /*
   * What the host can rely on (xstate 5.33.3, pinned in package.json): when no transition is
   * enabled for an event — wrong type for the state, a guard rejecting a stale index/attempt/
   * position, or a final snapshot — `transition()` returns the very same snapshot object and an
   * empty action list. So `next === held.snapshot` alone identifies an ignored event, and
   * ExecutionHost.drive() skips the commit. Conversely every accepted event here yields a new
   * snapshot object with a new context object (every transition assigns `updatedAt`).
   */
  it('ignores a stale or duplicate step outcome: same snapshot object, no actions', () => {
    const [initial] = initialTransition(machine, INPUT);
    const [running, runActions] = transition(machine, initial, { type: 'xreactor.input.accepted', at: 1_001 });
    expect(running.value).toEqual({ running: 'executing' });
    expect(normalize(runActions)).toEqual([{ type: 'xreactor.effect.runStep', params: { index: 0, step: 'reserve', attempt: 1 } }]);

    const stale: ExecutionEvent = { type: 'xreactor.step.succeeded', at: 1_002, index: 0, attempt: 2, args: null, result: 'late' };
    const [afterStale, staleActions] = transition(machine, running, stale);
    expect(afterStale).toBe(running);
    expect(staleActions).toEqual([]);

    const succeeded: ExecutionEvent = { type: 'xreactor.step.succeeded', at: 1_003, index: 0, attempt: 1, args: null, result: 'ok' };
    const [advanced, advancedActions] = transition(machine, running, succeeded);
    expect(advanced).not.toBe(running);
    expect(advanced.context).not.toBe(running.context);
    expect(advancedActions.length).toBeGreaterThan(0);

    // The same outcome delivered twice (e.g. a redelivered job) is ignored the second time.
    const [duplicate, duplicateActions] = transition(machine, advanced, succeeded);
    expect(duplicate).toBe(advanced);
    expect(duplicateActions).toEqual([]);

    // An event of a type the state does not handle is ignored the same way.
    const [wrongType, wrongTypeActions] = transition(machine, advanced, { type: 'xreactor.compensate.finished', at: 1_004, epoch: 0, failure: null });
    expect(wrongType).toBe(advanced);
    expect(wrongTypeActions).toEqual([]);
  });

  it('ignores every event in a final state', () => {
    const [initial] = initialTransition(machine, INPUT);
    const [failed] = transition(machine, initial, { type: 'xreactor.input.rejected', at: 1_001, error: error('bad') });
    expect(failed.value).toBe('failed');
    expect(failed.status).toBe('done');
    for (const event of [...eventsFor(failed), ...staleEventsFor(failed, plan)]) {
      const [next, actions] = transition(machine, failed, event);
      expect(next, event.type).toBe(failed);
      expect(actions).toEqual([]);
    }
  });
});
