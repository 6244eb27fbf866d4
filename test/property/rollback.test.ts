/**
 * Property tests of the rollback rules R1–R7 (seed 001, section 1) on random
 * reactors: random DAGs of 1..12 steps with random bodies, retries,
 * compensates and undos. The expected outcome comes from a small reference
 * interpreter written from the rules, not from the implementation.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ArgumentResolutionError,
  CompensationError,
  ExecutionAbortedError,
  createRuntime,
  defineReactor,
  fail,
  halt,
  skip,
} from '../../src/index.js';
import type { AnyReactorDefinition, RunResult, RunReturn, Runtime, UndoEntry } from '../../src/index.js';
import { createTestClock, recordEvents } from '../../src/testing/index.js';
import type { EventRecorder, TestClock } from '../../src/testing/index.js';
import { definitionOrder, referenceWaves } from './support/reference-plan.js';

const RUNS = { numRuns: 300 };
const MAX_STEPS = 12;
const INPUT = { x: 7 };
const RETRY_DELAY_MS = 5;

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

type HandlerKind = 'absent' | 'ok' | 'throws' | 'fails';

type Behaviour =
  | { readonly kind: 'ok' }
  | { readonly kind: 'skip' }
  | { readonly kind: 'failReturn' }
  | { readonly kind: 'throw' }
  | { readonly kind: 'failNoRetry' }
  | { readonly kind: 'halt' }
  | { readonly kind: 'transformThrows' }
  /** Fails (by throwing or returning fail(...)) on the first `k` attempts, then succeeds. */
  | { readonly kind: 'flaky'; readonly k: number; readonly via: 'throw' | 'fail' };

interface StepSpec {
  readonly name: string;
  /** Earlier steps whose results this step reads. */
  readonly reads: readonly string[];
  /** Earlier steps this step waits for (ordering only). */
  readonly waitFor: readonly string[];
  readonly behaviour: Behaviour;
  /** `retries.maxAttempts` (fixed backoff, 5 ms); undefined: no retries declared. */
  readonly maxAttempts: number | undefined;
  readonly compensate: HandlerKind;
  readonly undo: HandlerKind;
  /** Whether the body returns a promise (and rejects instead of throwing). */
  readonly async: boolean;
}

interface Scenario {
  /** s0..s(n-1); dependencies only point at lower indices. */
  readonly steps: readonly StepSpec[];
  /** The order the steps are given to the builder (dependencies first). */
  readonly defOrder: readonly string[];
  readonly returns: string | undefined;
}

const handlerArb = fc.constantFrom<HandlerKind>('absent', 'ok', 'throws', 'fails');
const depArb = fc.oneof(
  { arbitrary: fc.constant('none' as const), weight: 6 },
  { arbitrary: fc.constant('read' as const), weight: 2 },
  { arbitrary: fc.constant('wait' as const), weight: 2 },
  { arbitrary: fc.constant('both' as const), weight: 1 },
);
const flakyArb = fc.record({
  kind: fc.constant('flaky' as const),
  k: fc.integer({ min: 1, max: 3 }),
  via: fc.constantFrom<'throw' | 'fail'>('throw', 'fail'),
});
const ok = fc.constant<Behaviour>({ kind: 'ok' });
const skipped = fc.constant<Behaviour>({ kind: 'skip' });

/** Every behaviour, weighted so that runs usually get some way before a failure. */
const anyBehaviour: fc.Arbitrary<Behaviour> = fc.oneof(
  { arbitrary: ok, weight: 20 },
  { arbitrary: skipped, weight: 3 },
  { arbitrary: flakyArb, weight: 3 },
  { arbitrary: fc.constant<Behaviour>({ kind: 'failReturn' }), weight: 1 },
  { arbitrary: fc.constant<Behaviour>({ kind: 'throw' }), weight: 1 },
  { arbitrary: fc.constant<Behaviour>({ kind: 'failNoRetry' }), weight: 1 },
  { arbitrary: fc.constant<Behaviour>({ kind: 'halt' }), weight: 1 },
  { arbitrary: fc.constant<Behaviour>({ kind: 'transformThrows' }), weight: 1 },
);
/** Behaviours that end in a completed step (flaky steps get enough attempts, see below). */
const succeedingBehaviour: fc.Arbitrary<Behaviour> = fc.oneof(
  { arbitrary: ok, weight: 4 },
  { arbitrary: skipped, weight: 2 },
  { arbitrary: flakyArb, weight: 2 },
);

const rawStepArb = (behaviour: fc.Arbitrary<Behaviour>) =>
  fc.record({
    deps: fc.array(depArb, { minLength: MAX_STEPS - 1, maxLength: MAX_STEPS - 1 }),
    behaviour,
    maxAttempts: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
    compensate: handlerArb,
    undo: handlerArb,
    async: fc.boolean(),
    /** Rank among the steps available for definition (random topological order). */
    priority: fc.nat({ max: 100 }),
  });

function scenarioArb(behaviour: fc.Arbitrary<Behaviour>, succeedOnly: boolean): fc.Arbitrary<Scenario> {
  // No `chain`: a flat array of steps shrinks by dropping steps (later dependencies re-index onto the remaining ones).
  return fc
    .record({
      raw: fc.array(rawStepArb(behaviour), { minLength: 1, maxLength: MAX_STEPS }),
      returns: fc.option(fc.nat({ max: MAX_STEPS - 1 }), { nil: undefined, freq: 3 }),
    })
    .map(({ raw, returns }) => {
      const steps: StepSpec[] = raw.map((r, i) => {
        const deps = r.deps.slice(0, i);
        const earlier = (kinds: readonly string[]) => deps.flatMap((d, j) => (kinds.includes(d) ? [`s${j}`] : []));
        let maxAttempts = r.maxAttempts;
        // A flaky step that must succeed gets more attempts than it fails.
        if (succeedOnly && r.behaviour.kind === 'flaky' && (maxAttempts ?? 1) <= r.behaviour.k) maxAttempts = r.behaviour.k + 1;
        return {
          name: `s${i}`,
          reads: earlier(['read', 'both']),
          waitFor: earlier(['wait', 'both']),
          behaviour: r.behaviour,
          maxAttempts,
          compensate: r.compensate,
          undo: r.undo,
          async: r.async,
        };
      });
      const priorities = raw.map((r) => r.priority);
      return {
        steps,
        defOrder: definitionOrder(steps, priorities),
        returns: returns === undefined ? undefined : `s${returns % steps.length}`,
      };
    });
}

// ---------------------------------------------------------------------------
// Values the generated steps produce
// ---------------------------------------------------------------------------

const okValue = (step: string, attempt: number) => ({ v: step, attempt });
const skipValue = (step: string) => ({ skipped: step });
const bodyErrorMessage = (step: string, attempt: number) => `boom ${step}#${attempt}`;
const haltReason = (step: string) => `halt ${step}`;

type Attempted = { type: 'value'; value: unknown } | { type: 'skip'; value: unknown } | { type: 'halt' } | { type: 'fail'; retryable: boolean };

/** What a step body does on its `attempt`-th attempt (the shared truth of the builder and the reference). */
function attemptOutcome(step: StepSpec, attempt: number): Attempted {
  const b = step.behaviour;
  switch (b.kind) {
    case 'ok':
      return { type: 'value', value: okValue(step.name, attempt) };
    case 'skip':
      return { type: 'skip', value: skipValue(step.name) };
    case 'failReturn':
    case 'throw':
      return { type: 'fail', retryable: true };
    case 'failNoRetry':
      return { type: 'fail', retryable: false };
    case 'halt':
      return { type: 'halt' };
    case 'flaky':
      return attempt <= b.k ? { type: 'fail', retryable: true } : { type: 'value', value: okValue(step.name, attempt) };
    case 'transformThrows':
      throw new Error('a transformThrows step never runs its body');
  }
}

// ---------------------------------------------------------------------------
// Reference interpreter, written from the rules R1–R7
// ---------------------------------------------------------------------------

interface ExpectedFailure {
  readonly step: string;
  readonly kind: 'compensate' | 'undo';
  readonly reason: 'raised' | 'returned_failure';
}

interface Expected {
  readonly plan: readonly string[];
  status: 'completed' | 'failed' | 'halted';
  /** What the recordEvents() middleware sees: run / retry / compensate / undo. */
  readonly hooks: string[];
  /** What the handlers themselves record (compensate / undo only when the step declares them). */
  readonly handlers: string[];
  /** Every step that completed without skipping, in completion order (all that were ever pushed). */
  readonly completed: UndoEntry[];
  /** The undo stack left after the run. */
  stack: UndoEntry[];
  readonly results: Record<string, unknown>;
  readonly successes: { step: string; attempt: number }[];
  readonly skips: string[];
  retries: number;
  failure?: { step: string; started: boolean; message: string; argumentError: boolean; compensationFailed: boolean };
  readonly rollbackFailures: ExpectedFailure[];
  halt?: { step: string; reason: string };
  value?: unknown;
}

/** R1: repeated waves of the steps whose dependencies are all done, in definition order. */
function referencePlan(sc: Scenario): StepSpec[] {
  return referenceWaves(sc.steps, sc.defOrder);
}

const specOf = (sc: Scenario, name: string): StepSpec => sc.steps.find((s) => s.name === name)!;

function expectedArgs(step: StepSpec, results: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const args: Record<string, unknown> = { x: INPUT.x };
  for (const d of step.reads) args[`r_${d}`] = results[d];
  return args;
}

/** R2/R4: a rollback handler phase. The middleware sees it whether or not the step declares the handler. */
function rollbackPhase(kind: 'compensate' | 'undo', step: StepSpec, hooks: string[], handlers: string[], failures: ExpectedFailure[]): boolean {
  const handler = kind === 'compensate' ? step.compensate : step.undo;
  hooks.push(`${kind}:${step.name}`);
  if (handler === 'absent') return true;
  handlers.push(`${kind}:${step.name}`);
  if (handler === 'throws') failures.push({ step: step.name, kind, reason: 'raised' });
  if (handler === 'fails') failures.push({ step: step.name, kind, reason: 'returned_failure' });
  return handler === 'ok';
}

/** Undo every entry of `stack`, newest first (R2); failures are collected, never fatal (R4). */
function referenceUndo(sc: Scenario, stack: readonly UndoEntry[]) {
  const hooks: string[] = [];
  const handlers: string[] = [];
  const rollbackFailures: ExpectedFailure[] = [];
  for (const entry of [...stack].reverse()) rollbackPhase('undo', specOf(sc, entry.step), hooks, handlers, rollbackFailures);
  return { hooks, handlers, rollbackFailures };
}

function reference(sc: Scenario): Expected {
  const plan = referencePlan(sc);
  const out: Expected = {
    plan: plan.map((s) => s.name),
    status: 'completed',
    hooks: [],
    handlers: [],
    completed: [],
    stack: [],
    results: {},
    successes: [],
    skips: [],
    retries: 0,
    rollbackFailures: [],
  };
  const rollBack = (step: StepSpec, started: boolean, message: string) => {
    out.status = 'failed';
    let compensationFailed = false;
    // R2/R3/R7: compensate the failing step only if its body started.
    if (started) compensationFailed = !rollbackPhase('compensate', step, out.hooks, out.handlers, out.rollbackFailures);
    const undone = referenceUndo(sc, out.stack);
    out.hooks.push(...undone.hooks);
    out.handlers.push(...undone.handlers);
    out.rollbackFailures.push(...undone.rollbackFailures);
    out.stack = [];
    out.failure = { step: step.name, started, message, argumentError: !started, compensationFailed };
  };

  for (const step of plan) {
    // R7: an argument transform that throws is a failure before the body: no run, no retry, no compensate.
    if (step.behaviour.kind === 'transformThrows') {
      rollBack(step, false, '');
      return out;
    }
    const maxAttempts = step.maxAttempts ?? 1;
    const args = expectedArgs(step, out.results);
    for (let attempt = 1; ; attempt++) {
      out.hooks.push(`run:${step.name}`);
      out.handlers.push(`run:${step.name}`);
      const o = attemptOutcome(step, attempt);
      if (o.type === 'value') {
        // R1: a success is pushed on the undo stack.
        out.results[step.name] = o.value;
        const entry = { step: step.name, args, result: o.value };
        out.stack.push(entry);
        out.completed.push(entry);
        out.successes.push({ step: step.name, attempt });
        break;
      }
      if (o.type === 'skip') {
        // R5: a skip is a result for dependants but never pushed.
        out.results[step.name] = o.value;
        out.skips.push(step.name);
        break;
      }
      if (o.type === 'halt') {
        // R5: halt stops without rollback.
        out.status = 'halted';
        out.halt = { step: step.name, reason: haltReason(step.name) };
        return out;
      }
      if (o.retryable && attempt < maxAttempts) {
        out.hooks.push(`retry:${step.name}#${attempt}`);
        out.retries++;
        continue;
      }
      rollBack(step, true, bodyErrorMessage(step.name, attempt));
      return out;
    }
  }
  out.value = sc.returns === undefined ? out.results : out.results[sc.returns];
  return out;
}

// ---------------------------------------------------------------------------
// Building and running the real reactor
// ---------------------------------------------------------------------------

interface Harness {
  readonly runtime: Runtime;
  readonly clock: TestClock;
  readonly recorder: EventRecorder;
  /** Events pushed by the step handlers themselves. */
  readonly log: string[];
  /** Inconsistencies seen inside handlers (wrong attempt number, wrong undo result...). */
  readonly problems: string[];
  readonly reactor: AnyReactorDefinition;
  readonly id: string;
}

let executions = 0;

function rollbackOutcome(kind: HandlerKind, what: string, step: string): unknown {
  if (kind === 'throws') throw new Error(`${what} ${step} raised`);
  if (kind === 'fails') return fail(new Error(`${what} ${step} failed`));
  return undefined;
}

function harness(sc: Scenario, abort?: { step: string; controller: AbortController }): Harness {
  const log: string[] = [];
  const problems: string[] = [];
  const clock = createTestClock();
  const recorder = recordEvents();
  const runtime = createRuntime({ clock, middleware: [recorder.middleware] });
  const attempts = new Map<string, number>();
  const producedBy = new Map<string, unknown>();

  let builder: any = defineReactor({ name: 'rollback_property' });
  for (const name of sc.defOrder) {
    const step = specOf(sc, name);
    const throwing = step.behaviour.kind === 'transformThrows';
    const boom = (): never => {
      throw new Error(`transform of ${name} raised`);
    };
    const config: Record<string, unknown> = {
      args: ({ input, result }: { input: (n: string) => any; result: (n: string) => any }) => {
        const args: Record<string, unknown> = { x: throwing && step.reads.length === 0 ? input('x').transform(boom) : input('x') };
        step.reads.forEach((d, i) => {
          args[`r_${d}`] = throwing && i === 0 ? result(d).transform(boom) : result(d);
        });
        return args;
      },
      run: (_args: unknown, ctx: { attempt: number }) => {
        log.push(`run:${name}`);
        const attempt = (attempts.get(name) ?? 0) + 1;
        attempts.set(name, attempt);
        if (ctx.attempt !== attempt) problems.push(`${name}: ctx.attempt ${ctx.attempt} on attempt ${attempt}`);
        if (abort?.step === name) {
          abort.controller.abort(new Error('interrupted by the test'));
          return new Promise<void>((resolve) => queueMicrotask(resolve)).then(() => okValue(name, attempt));
        }
        const body = (): unknown => {
          const o = attemptOutcome(step, attempt);
          switch (o.type) {
            case 'value':
              producedBy.set(name, o.value);
              return o.value;
            case 'skip':
              return skip(o.value);
            case 'halt':
              return halt(haltReason(name));
            case 'fail': {
              const error = new Error(bodyErrorMessage(name, attempt));
              if (!o.retryable) return fail(error, { retry: false });
              const via = step.behaviour.kind === 'flaky' ? step.behaviour.via : step.behaviour.kind === 'throw' ? 'throw' : 'fail';
              if (via === 'throw') throw error;
              return fail(error);
            }
          }
        };
        return step.async ? Promise.resolve().then(body) : body();
      },
    };
    if (step.waitFor.length > 0) config['waitFor'] = step.waitFor;
    if (step.maxAttempts !== undefined) config['retries'] = { maxAttempts: step.maxAttempts, backoff: 'fixed', baseDelayMs: RETRY_DELAY_MS };
    if (step.compensate !== 'absent') {
      config['compensate'] = () => {
        log.push(`compensate:${name}`);
        return rollbackOutcome(step.compensate, 'compensate', name);
      };
    }
    if (step.undo !== 'absent') {
      config['undo'] = (result: unknown) => {
        log.push(`undo:${name}`);
        if (!producedBy.has(name)) problems.push(`${name}: undone but its body never produced a value`);
        else if (JSON.stringify(result) !== JSON.stringify(producedBy.get(name))) {
          problems.push(`${name}: undo received ${JSON.stringify(result)}, the body produced ${JSON.stringify(producedBy.get(name))}`);
        }
        return rollbackOutcome(step.undo, 'undo', name);
      };
    }
    builder = builder.step(name, config);
  }
  if (sc.returns !== undefined) builder = builder.returns(sc.returns);
  const reactor = builder.build() as AnyReactorDefinition;
  executions += 1;
  return { runtime, clock, recorder, log, problems, reactor, id: `rollback-${executions}` };
}

async function runScenario(sc: Scenario) {
  const h = harness(sc);
  const result = await h.runtime.run(h.reactor, INPUT, { executionId: h.id });
  return { h, result, expected: reference(sc) };
}

const isLifecycle = (e: string) => e.startsWith('run:') || e.startsWith('compensate:') || e.startsWith('undo:');
const stepOfEvent = (e: string) => e.slice(e.indexOf(':') + 1).split('#')[0]!;

function failureList(result: { rollbackFailures: readonly { step: string; kind: string; reason: string }[] }) {
  return result.rollbackFailures.map(({ step, kind, reason }) => ({ step, kind, reason }));
}

/** undo(id) of a run whose undo stack is `stack`: the handlers, hooks and failures the reference predicts, ending cancelled with an empty stack. */
async function expectUndoAsReference(h: Harness, sc: Scenario, stack: readonly UndoEntry[]): Promise<void> {
  const before = h.log.length;
  const hooksBefore = h.recorder.events.length;
  const cancelled = await h.runtime.undo(h.id);
  const undone = referenceUndo(sc, stack);
  expect(cancelled.status).toBe('cancelled');
  if (cancelled.status !== 'cancelled') return; // undo may return dispatched (a fan-out map); these runs have none
  expect(failureList(cancelled)).toEqual(undone.rollbackFailures);
  expect(h.log.slice(before)).toEqual(undone.handlers);
  expect(h.recorder.events.slice(hooksBefore)).toEqual(undone.hooks);
  const after = await h.runtime.find(h.id);
  expect(after.status).toBe('cancelled');
  expect(after.undoStack).toEqual([]);
}

function checkOutcome(outcomeOfRun: RunReturn<AnyReactorDefinition>, expected: Expected): void {
  // Inline reactors of these tests never dispatch nor pause.
  if (outcomeOfRun.status === 'dispatched' || outcomeOfRun.status === 'paused') throw new Error(`unexpected ${outcomeOfRun.status}`);
  const result: RunResult<unknown> = outcomeOfRun;
  expect(result.status).toBe(expected.status);
  if (result.status === 'failed') {
    const f = expected.failure!;
    expect(result.step).toBe(f.step);
    expect(failureList(result)).toEqual(expected.rollbackFailures);
    if (f.compensationFailed) {
      expect(result.error).toBeInstanceOf(CompensationError);
      expect(result.message).toContain(f.message);
    } else if (f.argumentError) {
      expect(result.error).toBeInstanceOf(ArgumentResolutionError);
    } else {
      expect(result.message).toBe(f.message);
    }
  } else if (result.status === 'halted') {
    expect({ step: result.step, reason: result.reason }).toEqual(expected.halt);
  } else {
    expect(result.value).toEqual(expected.value);
  }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

const anyScenario = scenarioArb(anyBehaviour, false);
const succeedingScenario = scenarioArb(succeedingBehaviour, true);

describe('rollback properties (R1–R7) on random reactors', () => {
  it('1. the event sequence equals the reference interpreter, from handlers and from the recorder middleware', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, expected } = await runScenario(sc);
        expect(h.problems).toEqual([]);
        expect(h.log).toEqual(expected.handlers);
        expect(h.recorder.events).toEqual(expected.hooks);
        // The middleware sees the handlers' run/compensate/undo order (it also sees phases of absent handlers).
        const declared = (e: string) => {
          const s = specOf(sc, stepOfEvent(e));
          return e.startsWith('run:') || (e.startsWith('compensate:') ? s.compensate !== 'absent' : s.undo !== 'absent');
        };
        expect(h.recorder.events.filter((e) => isLifecycle(e) && declared(e))).toEqual(h.log);
      }),
      RUNS,
    );
  });

  it('2. completed non-skipped steps are undone once, newest first; the failing step is compensated iff started; nothing runs after the failure', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, expected } = await runScenario(sc);
        const events = h.recorder.events.filter(isLifecycle);
        const undos = events.filter((e) => e.startsWith('undo:')).map(stepOfEvent);
        const compensates = events.filter((e) => e.startsWith('compensate:')).map(stepOfEvent);
        const ran = [...new Set(events.filter((e) => e.startsWith('run:')).map(stepOfEvent))];
        if (expected.status === 'failed') {
          const f = expected.failure!;
          expect(undos).toEqual(expected.completed.map((e) => e.step).reverse());
          expect(new Set(undos).size).toBe(undos.length);
          for (const s of expected.skips) expect(undos).not.toContain(s);
          expect(compensates).toEqual(f.started ? [f.step] : []);
          // Nothing after the failure: the steps that ran are a plan prefix ending at the failing
          // step (or just before it when it never started), and no run follows the rollback.
          const failingAt = expected.plan.indexOf(f.step);
          expect(ran).toEqual(expected.plan.slice(0, f.started ? failingAt + 1 : failingAt));
          const firstRollback = events.findIndex((e) => !e.startsWith('run:'));
          if (firstRollback >= 0) expect(events.slice(firstRollback).every((e) => !e.startsWith('run:'))).toBe(true);
        } else {
          expect(undos).toEqual([]);
          expect(compensates).toEqual([]);
        }
      }),
      RUNS,
    );
  });

  it('3. status, failing step, rollbackFailures and value match the reference', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, result, expected } = await runScenario(sc);
        checkOutcome(result, expected);
        expect(h.clock.sleeps).toEqual(Array.from({ length: expected.retries }, () => RETRY_DELAY_MS));
      }),
      RUNS,
    );
  });

  it('4. find(id) reports the status, the remaining undo stack and a run trace entry per success', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, expected } = await runScenario(sc);
        const view = await h.runtime.find(h.id);
        expect(view.status).toBe(expected.status);
        expect(view.result?.status).toBe(expected.status);
        checkOutcome(view.result as RunResult<unknown>, expected);
        expect(view.undoStack).toEqual(expected.status === 'failed' ? [] : expected.completed);
        expect(view.undoStack).toEqual(expected.stack);
        const runs = view.trace.filter((t) => t.type === 'run').map((t) => ({ step: t.step, attempt: t.attempt }));
        expect(runs).toEqual(expected.successes);
        expect(view.trace.filter((t) => t.type === 'skipped').map((t) => t.step)).toEqual(expected.skips);
        if (expected.status === 'halted') {
          // A halted run keeps its completed steps; undo(id) rolls them back newest first.
          await expectUndoAsReference(h, sc, expected.stack);
        }
      }),
      RUNS,
    );
  });

  it('5. undo(id) on a completed run undoes exactly the completed non-skipped steps, newest first, and ends cancelled', async () => {
    await fc.assert(
      fc.asyncProperty(succeedingScenario, async (sc) => {
        const { h, result, expected } = await runScenario(sc);
        expect(expected.status).toBe('completed');
        checkOutcome(result, expected);
        await expectUndoAsReference(h, sc, expected.completed);
        expect(h.problems).toEqual([]);
      }),
      RUNS,
    );
  });

  it('6. an abort inside a step body runs no rollback, stores `aborted` with the completed steps, and undo(id) rolls them back', async () => {
    await fc.assert(
      fc.asyncProperty(succeedingScenario, fc.nat(), async (sc, pick) => {
        const full = reference(sc);
        const abortAt = full.plan[pick % full.plan.length]!;
        const controller = new AbortController();
        const h = harness(sc, { step: abortAt, controller });
        // Expected: the plan prefix before the aborting step runs as in the reference; the aborting step runs once.
        const prefix = full.plan.slice(0, full.plan.indexOf(abortAt));
        const kept = full.completed.filter((e) => prefix.includes(e.step));
        const expectedHooks = full.hooks.filter((e) => prefix.includes(stepOfEvent(e))).concat(`run:${abortAt}`);

        const error: unknown = await h.runtime.run(h.reactor, INPUT, { executionId: h.id, signal: controller.signal }).then(
          (r) => r,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(ExecutionAbortedError);
        expect(h.recorder.events).toEqual(expectedHooks);
        expect(h.log).toEqual(expectedHooks.filter(isLifecycle));
        expect(h.log.some((e) => !e.startsWith('run:'))).toBe(false);
        const view = await h.runtime.find(h.id);
        expect(view.status).toBe('aborted');
        expect(view.undoStack).toEqual(kept);
        expect(view.pendingCompensation).toBeUndefined();
        expect(view.trace.filter((t) => t.type === 'aborted')).toHaveLength(1);
        expect(view.trace.filter((t) => t.type === 'run').map((t) => t.step)).toEqual(kept.map((e) => e.step));

        await expectUndoAsReference(h, sc, kept);
        expect(h.problems).toEqual([]);
      }),
      RUNS,
    );
  });
});
