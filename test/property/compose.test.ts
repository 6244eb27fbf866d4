/**
 * Property tests of compose (seed 001, §2.2, with the rollback rules R1–R7 of
 * §1) on random trees of reactors: each reactor has 2..5 steps in a random
 * linear-or-DAG shape, a step is a plain step or a compose step whose child is
 * itself a random reactor, nesting up to 3 reactor levels deep. At most one
 * plain step anywhere in the tree fails (by throwing or by returning fail());
 * compensate / undo handlers may raise or return a failure; steps may skip,
 * and may halt (a halt stops only the reactor it happens in). The expected
 * behaviour comes from a small reference interpreter written from the rules,
 * not from the implementation.
 */
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CompensationError, createMemoryStore, createRuntime, defineReactor, fail, halt, skip } from '../../src/index.js';
import type { AnyReactorDefinition, RollbackFailure, RunResult, RunReturn, Runtime, Store } from '../../src/index.js';
import { createTestClock, recordEvents } from '../../src/testing/index.js';
import type { EventRecorder } from '../../src/testing/index.js';
import { definitionOrder, referenceWaves } from './support/reference-plan.js';

const RUNS = { numRuns: 200 };
const MIN_STEPS = 2;
const MAX_STEPS = 5;
/** Reactor levels: the root, its composed children, their composed children. */
const MAX_DEPTH = 3;
/** Step names start with their level's letter: `a1` at the root, `a1.b0`, `a1.b0.c3`. */
const LEVEL_LETTERS = ['a', 'b', 'c'] as const;
const INPUT = { x: 7 };

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

type HandlerKind = 'absent' | 'ok' | 'throws' | 'fails';
/** What a plain step's body does. `throw` / `fail` only for the single failure point. */
type Behaviour = 'ok' | 'skip' | 'halt' | 'throw' | 'fail';

interface PlainSpec {
  readonly kind: 'plain';
  /** Local name within its reactor. */
  readonly name: string;
  /** Dotted names from the root: `a1.b0.c3`. */
  readonly path: string;
  /** Compose steps leading to this step (`['a1', 'b0']`). */
  readonly composePath: readonly string[];
  readonly reads: readonly string[];
  readonly waitFor: readonly string[];
  readonly behaviour: Behaviour;
  readonly compensate: HandlerKind;
  readonly undo: HandlerKind;
  /** Whether the body returns a promise (and rejects instead of throwing). */
  readonly async: boolean;
}

interface ComposeSpec {
  readonly kind: 'compose';
  readonly name: string;
  readonly path: string;
  readonly composePath: readonly string[];
  /** Earlier steps whose results become the child's input (through `args`); none: the child gets this reactor's input. */
  readonly reads: readonly string[];
  readonly waitFor: readonly string[];
  readonly child: ReactorSpec;
}

type StepSpec = PlainSpec | ComposeSpec;

interface ReactorSpec {
  /** Compose steps from the root to this reactor (empty for the root). */
  readonly composePath: readonly string[];
  /** Dependencies only point at lower indices. */
  readonly steps: readonly StepSpec[];
  /** The order the steps are given to the builder (dependencies first). */
  readonly defOrder: readonly string[];
}

interface Scenario {
  readonly root: ReactorSpec;
  /** Path of the failing plain step, if any. */
  readonly failing: string | undefined;
}

type Dep = 'none' | 'read' | 'wait' | 'both';

interface RawPlain {
  readonly kind: 'plain';
  readonly behaviour: 'ok' | 'skip' | 'halt';
  readonly compensate: HandlerKind;
  readonly undo: HandlerKind;
  readonly async: boolean;
}
interface RawCompose {
  readonly kind: 'compose';
  readonly child: readonly RawStep[];
}
interface RawStep {
  readonly deps: readonly Dep[];
  readonly priority: number;
  readonly node: RawPlain | RawCompose;
}
interface RawScenario {
  readonly root: readonly RawStep[];
  readonly failure: { readonly at: number; readonly via: 'throw' | 'fail' } | undefined;
}

const handlerArb = fc.oneof(
  { arbitrary: fc.constant<HandlerKind>('absent'), weight: 2 },
  { arbitrary: fc.constant<HandlerKind>('ok'), weight: 4 },
  { arbitrary: fc.constant<HandlerKind>('throws'), weight: 1 },
  { arbitrary: fc.constant<HandlerKind>('fails'), weight: 1 },
);
const depArb = fc.oneof(
  { arbitrary: fc.constant<Dep>('none'), weight: 5 },
  { arbitrary: fc.constant<Dep>('read'), weight: 2 },
  { arbitrary: fc.constant<Dep>('wait'), weight: 2 },
  { arbitrary: fc.constant<Dep>('both'), weight: 1 },
);

function plainArb(halts: boolean): fc.Arbitrary<RawPlain> {
  return fc.record({
    kind: fc.constant('plain' as const),
    behaviour: fc.oneof(
      { arbitrary: fc.constant('ok' as const), weight: 12 },
      { arbitrary: fc.constant('skip' as const), weight: 2 },
      { arbitrary: fc.constant(halts ? ('halt' as const) : ('ok' as const)), weight: 1 },
    ),
    compensate: handlerArb,
    undo: handlerArb,
    async: fc.boolean(),
  });
}

/**
 * A reactor of `depth` levels at most. `rootHalts` false: the reactor's own
 * plain steps never halt (its children's may).
 */
function rawReactorArb(depth: number, rootHalts = true): fc.Arbitrary<readonly RawStep[]> {
  const node: fc.Arbitrary<RawPlain | RawCompose> =
    depth > 1
      ? fc.oneof(
          { arbitrary: plainArb(rootHalts), weight: 2 },
          { arbitrary: fc.record({ kind: fc.constant('compose' as const), child: rawReactorArb(depth - 1) }), weight: 1 },
        )
      : plainArb(rootHalts);
  const step = fc.record({
    deps: fc.array(depArb, { minLength: MAX_STEPS - 1, maxLength: MAX_STEPS - 1 }),
    priority: fc.nat({ max: 100 }),
    node,
  });
  return fc.array(step, { minLength: MIN_STEPS, maxLength: MAX_STEPS });
}

/** Plain steps of a raw tree, depth first in index order. */
function countPlain(raw: readonly RawStep[]): number {
  return raw.reduce((n, s) => n + (s.node.kind === 'plain' ? 1 : countPlain(s.node.child)), 0);
}

/** Name the steps, wire their dependencies and put the failure on the `failure.at`-th plain step (mod their count). */
function toScenario(raw: RawScenario): Scenario {
  const total = countPlain(raw.root);
  const failAt = raw.failure === undefined || total === 0 ? -1 : raw.failure.at % total;
  let plainIndex = 0;
  let failing: string | undefined;
  const build = (steps: readonly RawStep[], composePath: readonly string[]): ReactorSpec => {
    const letter = LEVEL_LETTERS[composePath.length]!;
    const specs: StepSpec[] = steps.map((r, i) => {
      const name = `${letter}${i}`;
      const path = [...composePath, name].join('.');
      const deps = r.deps.slice(0, i);
      const earlier = (kinds: readonly Dep[]) => deps.flatMap((d, j) => (kinds.includes(d) ? [`${letter}${j}`] : []));
      const common = { name, path, composePath, reads: earlier(['read', 'both']), waitFor: earlier(['wait', 'both']) };
      if (r.node.kind === 'compose') return { kind: 'compose', ...common, child: build(r.node.child, [...composePath, name]) };
      let behaviour: Behaviour = r.node.behaviour;
      if (plainIndex++ === failAt) {
        behaviour = raw.failure!.via;
        failing = path;
      }
      return { kind: 'plain', ...common, behaviour, compensate: r.node.compensate, undo: r.node.undo, async: r.node.async };
    });
    return { composePath, steps: specs, defOrder: definitionOrder(specs, steps.map((r) => r.priority)) };
  };
  const root = build(raw.root, []);
  return { root, failing };
}

/** Any scenario: at most one failure point (one in four has none), halts anywhere. */
const anyScenario: fc.Arbitrary<Scenario> = fc
  .record({
    root: rawReactorArb(MAX_DEPTH),
    failure: fc.option(fc.record({ at: fc.nat({ max: 1000 }), via: fc.constantFrom<'throw' | 'fail'>('throw', 'fail') }), { nil: undefined, freq: 4 }),
  })
  .map(toScenario);

/** Scenarios whose root completes: no failure point, no halt at the root's own steps (children may halt). */
const completingScenario: fc.Arbitrary<Scenario> = rawReactorArb(MAX_DEPTH, false).map((root) => toScenario({ root, failure: undefined }));

// ---------------------------------------------------------------------------
// Values the generated steps produce
// ---------------------------------------------------------------------------

const okValue = (path: string) => ({ v: path });
const skipValue = (path: string) => ({ skipped: path });
const bodyErrorMessage = (path: string) => `boom ${path}`;
const haltReason = (path: string) => `halt ${path}`;

// ---------------------------------------------------------------------------
// Reference interpreter, written from R1–R7 and §2.2
// ---------------------------------------------------------------------------

interface ExpectedFailure {
  readonly step: string;
  readonly path: readonly string[];
  readonly kind: 'compensate' | 'undo';
  readonly reason: 'raised' | 'returned_failure';
}

/** An undo-stack entry of the reference: a plain step, or a compose step with its child's stack. */
type RefEntry = { readonly kind: 'plain'; readonly step: PlainSpec } | { readonly kind: 'compose'; readonly step: ComposeSpec; readonly stack: readonly RefEntry[] };

type RefOutcome =
  | { readonly status: 'completed'; readonly stack: RefEntry[]; readonly value: Record<string, unknown> }
  | { readonly status: 'halted'; readonly stack: RefEntry[]; readonly step: string; readonly reason: string }
  /** `step`: the failing step of this reactor (a compose step when the failure was in a child); `origin`: the plain step that failed. */
  | { readonly status: 'failed'; readonly step: string; readonly origin: PlainSpec; readonly compensationFailed: boolean };

/** What the handlers and the recorder middleware see, and the rollback failures, in order. */
class Trace {
  /** Events pushed by the handlers (compensate / undo only when declared). */
  readonly handlers: string[] = [];
  /** Events the recordEvents() middleware sees: run / compensate / undo of plain steps, declared or not. */
  readonly hooks: string[] = [];
  readonly failures: ExpectedFailure[] = [];
  /** Paths of the plain steps that completed without skipping, in completion order. */
  readonly completed: string[] = [];
  /** Status of every composed child execution, by its compose step's path. */
  readonly children = new Map<string, string>();

  run(step: PlainSpec): void {
    this.hooks.push(`run:${step.path}`);
    this.handlers.push(`run:${step.path}`);
  }

  /** R2/R4: a compensate or undo phase; false when a declared handler did not complete. */
  rollback(kind: 'compensate' | 'undo', step: PlainSpec): boolean {
    const handler = kind === 'compensate' ? step.compensate : step.undo;
    this.hooks.push(`${kind}:${step.path}`);
    if (handler === 'absent') return true;
    this.handlers.push(`${kind}:${step.path}`);
    if (handler === 'throws') this.failures.push({ step: step.name, path: step.composePath, kind, reason: 'raised' });
    if (handler === 'fails') this.failures.push({ step: step.name, path: step.composePath, kind, reason: 'returned_failure' });
    return handler === 'ok';
  }

  /** R2: undo a stack newest first; a compose entry undoes its child's stack newest first (§2.2.3), and the child ends cancelled. */
  undoStack(stack: readonly RefEntry[]): void {
    for (const entry of [...stack].reverse()) {
      if (entry.kind === 'plain') this.rollback('undo', entry.step);
      else {
        this.undoStack(entry.stack);
        this.children.set(entry.step.path, 'cancelled');
      }
    }
  }
}

/** R1: repeated waves of the steps whose dependencies are all done, in definition order. */
function referencePlan(r: ReactorSpec): StepSpec[] {
  return referenceWaves(r.steps, r.defOrder);
}

function referenceReactor(r: ReactorSpec, t: Trace): RefOutcome {
  const stack: RefEntry[] = [];
  const results: Record<string, unknown> = {};
  for (const step of referencePlan(r)) {
    if (step.kind === 'compose') {
      // §2.2.1: the child runs inline with its own undo stack.
      const child = referenceReactor(step.child, t);
      t.children.set(step.path, child.status);
      if (child.status === 'failed') {
        // §2.2.2: the child rolled itself back; the compose step is not compensated; the parent undoes its own stack.
        t.undoStack(stack);
        return { status: 'failed', step: step.name, origin: child.origin, compensationFailed: child.compensationFailed };
      }
      // §2.2.3 (and a halted child: the parent goes on, the compose step's value is undefined); pushed at its position.
      stack.push({ kind: 'compose', step, stack: child.stack });
      results[step.name] = child.status === 'completed' ? child.value : undefined;
      continue;
    }
    t.run(step);
    switch (step.behaviour) {
      case 'ok':
        // R1: a success is pushed on this reactor's undo stack.
        stack.push({ kind: 'plain', step });
        t.completed.push(step.path);
        results[step.name] = okValue(step.path);
        break;
      case 'skip':
        // R5: a skip is never pushed.
        results[step.name] = skipValue(step.path);
        break;
      case 'halt':
        // R5: halt stops this reactor without rollback.
        return { status: 'halted', stack, step: step.name, reason: haltReason(step.path) };
      case 'throw':
      case 'fail': {
        // R2/R4: the body started: compensate it, then undo this reactor's stack newest first.
        const compensationFailed = !t.rollback('compensate', step);
        t.undoStack(stack);
        return { status: 'failed', step: step.name, origin: step, compensationFailed };
      }
    }
  }
  return { status: 'completed', stack, value: results };
}

function reference(sc: Scenario): { trace: Trace; outcome: RefOutcome } {
  const trace = new Trace();
  return { trace, outcome: referenceReactor(sc.root, trace) };
}

/** The handler and hook events, failures and child statuses of `undo(id)` on a settled root with `stack`. */
function referenceUndo(stack: readonly RefEntry[], children: ReadonlyMap<string, string>): Trace {
  const t = new Trace();
  for (const [path, status] of children) t.children.set(path, status);
  t.undoStack(stack);
  return t;
}

// ---------------------------------------------------------------------------
// Building and running the real reactors
// ---------------------------------------------------------------------------

interface Harness {
  readonly runtime: Runtime;
  readonly store: Store;
  readonly recorder: EventRecorder;
  /** Events pushed by the step handlers themselves. */
  readonly log: string[];
  /** Inconsistencies seen inside handlers (an undo given the wrong result...). */
  readonly problems: string[];
  readonly reactor: AnyReactorDefinition;
  readonly id: string;
}

let reactors = 0;
let executions = 0;

function rollbackOutcome(kind: HandlerKind, what: string, path: string): unknown {
  if (kind === 'throws') throw new Error(`${what} ${path} raised`);
  if (kind === 'fails') return fail(new Error(`${what} ${path} failed`));
  return undefined;
}

const readArgs = (reads: readonly string[]) => ({ result }: { result: (n: string) => unknown }) =>
  Object.fromEntries(reads.map((d) => [`r_${d}`, result(d)]));

function buildReactor(r: ReactorSpec, log: string[], problems: string[]): AnyReactorDefinition {
  reactors += 1;
  let builder: any = defineReactor({ name: `compose_property_${reactors}` });
  for (const name of r.defOrder) {
    const step = r.steps.find((s) => s.name === name)!;
    const use: Record<string, unknown> = {};
    if (step.reads.length > 0) use['args'] = readArgs(step.reads);
    if (step.waitFor.length > 0) use['waitFor'] = step.waitFor;
    if (step.kind === 'compose') {
      builder = builder.compose(name, buildReactor(step.child, log, problems), use);
      continue;
    }
    const { path } = step;
    let produced = false;
    use['run'] = () => {
      log.push(`run:${path}`);
      const body = (): unknown => {
        switch (step.behaviour) {
          case 'ok':
            produced = true;
            return okValue(path);
          case 'skip':
            return skip(skipValue(path));
          case 'halt':
            return halt(haltReason(path));
          case 'throw':
            throw new Error(bodyErrorMessage(path));
          case 'fail':
            return fail(new Error(bodyErrorMessage(path)));
        }
      };
      return step.async ? Promise.resolve().then(body) : body();
    };
    if (step.compensate !== 'absent') {
      use['compensate'] = () => {
        log.push(`compensate:${path}`);
        return rollbackOutcome(step.compensate, 'compensate', path);
      };
    }
    if (step.undo !== 'absent') {
      use['undo'] = (result: unknown) => {
        log.push(`undo:${path}`);
        if (!produced) problems.push(`${path}: undone but its body never produced a value`);
        else if (JSON.stringify(result) !== JSON.stringify(okValue(path))) problems.push(`${path}: undo received ${JSON.stringify(result)}`);
        return rollbackOutcome(step.undo, 'undo', path);
      };
    }
    builder = builder.step(name, use);
  }
  return builder.build() as AnyReactorDefinition;
}

function harness(sc: Scenario): Harness {
  const log: string[] = [];
  const problems: string[] = [];
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const recorder = recordEvents();
  const runtime = createRuntime({ clock, store, middleware: [recorder.middleware], logger: pino({ level: 'silent' }) });
  executions += 1;
  return { runtime, store, recorder, log, problems, reactor: buildReactor(sc.root, log, problems), id: `compose-${executions}` };
}

async function runScenario(sc: Scenario) {
  const h = harness(sc);
  try {
    const result = await h.runtime.run(h.reactor, INPUT, { executionId: h.id });
    return { h, result, ...reference(sc) };
  } catch (error) {
    await h.runtime.close();
    throw error;
  }
}

/** Rollback failures as stored, with the compose path the caller-facing report leaves out. */
async function storedFailures(h: Harness): Promise<ExpectedFailure[]> {
  const loaded = await h.store.load(h.id);
  const context = loaded!.snapshot.context as { rollbackFailures: readonly RollbackFailure[] };
  return context.rollbackFailures.map(({ step, path, kind, reason }) => ({ step, path: path ?? [], kind, reason }));
}

const reported = (result: { rollbackFailures: readonly { step: string; kind: string; reason: string }[] }) =>
  result.rollbackFailures.map(({ step, kind, reason }) => ({ step, kind, reason }));
const unpathed = (failures: readonly ExpectedFailure[]) => failures.map(({ step, kind, reason }) => ({ step, kind, reason }));

/** Status of every composed child execution (ids are the root id plus the compose path). */
async function childStatuses(h: Harness, expected: ReadonlyMap<string, string>): Promise<Map<string, string>> {
  const actual = new Map<string, string>();
  for (const path of expected.keys()) actual.set(path, (await h.runtime.find(`${h.id}.${path}`)).status);
  return actual;
}

const isLifecycle = (e: string) => e.startsWith('run:') || e.startsWith('compensate:') || e.startsWith('undo:');
const pathOf = (e: string) => e.slice(e.indexOf(':') + 1);

function plainSteps(r: ReactorSpec): PlainSpec[] {
  return r.steps.flatMap((s) => (s.kind === 'plain' ? [s] : plainSteps(s.child)));
}

function checkOutcome(outcomeOfRun: RunReturn<AnyReactorDefinition>, outcome: RefOutcome): void {
  // Inline reactors of these tests never dispatch nor pause.
  if (outcomeOfRun.status === 'dispatched' || outcomeOfRun.status === 'paused') throw new Error(`unexpected ${outcomeOfRun.status}`);
  const result: RunResult<unknown> = outcomeOfRun;
  expect(result.status).toBe(outcome.status);
  if (outcome.status === 'failed' && result.status === 'failed') {
    expect(result.step).toBe(outcome.step);
    const message = bodyErrorMessage(outcome.origin.path);
    if (outcome.compensationFailed) {
      // R4: the failing step's compensate did not complete: a CompensationError naming that step.
      expect(result.error).toBeInstanceOf(CompensationError);
      expect(result.message).toContain(message);
      expect(result.message).toContain(`"${outcome.origin.name}"`);
    } else {
      expect(result.message).toBe(message);
    }
  } else if (outcome.status === 'halted' && result.status === 'halted') {
    expect({ step: result.step, reason: result.reason }).toEqual({ step: outcome.step, reason: outcome.reason });
  } else if (outcome.status === 'completed' && result.status === 'completed') {
    expect(result.value).toEqual(outcome.value);
  }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

describe('compose properties (seed 001 §2.2 with R1–R7) on random trees of reactors', () => {
  it('1. the handler and middleware event sequences equal the reference interpreter', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, trace } = await runScenario(sc);
        try {
          expect(h.problems).toEqual([]);
          expect(h.log).toEqual(trace.handlers);
          expect(h.recorder.events).toEqual(trace.hooks);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('2. every completed non-skipped step at every depth is undone once, newest first across levels; nothing runs after the failure; the failing step is compensated', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, outcome } = await runScenario(sc);
        try {
          const byPath = new Map(plainSteps(sc.root).map((s) => [s.path, s]));
          const events = h.recorder.events.filter(isLifecycle);
          const runs = events.filter((e) => e.startsWith('run:')).map(pathOf);
          const undos = events.filter((e) => e.startsWith('undo:')).map(pathOf);
          const compensates = events.filter((e) => e.startsWith('compensate:')).map(pathOf);
          // Completion order as it actually happened: the steps that ran and succeed without skipping.
          const completed = runs.filter((p) => byPath.get(p)!.behaviour === 'ok');
          expect(new Set(runs).size).toBe(runs.length);
          if (outcome.status === 'failed') {
            expect(undos).toEqual([...completed].reverse());
            for (const p of runs) if (byPath.get(p)!.behaviour === 'skip') expect(undos).not.toContain(p);
            // A plain step's body always starts: the failing step (and nothing else) is compensated.
            expect(compensates).toEqual([sc.failing]);
            expect(runs.at(-1)).toBe(sc.failing);
            const firstRollback = events.findIndex((e) => !e.startsWith('run:'));
            expect(events.slice(firstRollback).filter((e) => e.startsWith('run:'))).toEqual([]);
            expect(events[firstRollback]).toBe(`compensate:${sc.failing}`);
          } else {
            expect(undos).toEqual([]);
            expect(compensates).toEqual([]);
            if (sc.failing !== undefined) expect(runs).not.toContain(sc.failing);
          }
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('3. status, failing root step, error, rollbackFailures (with their compose paths) and child statuses match the reference', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, result, trace, outcome } = await runScenario(sc);
        try {
          checkOutcome(result, outcome);
          if (result.status === 'failed') expect(reported(result)).toEqual(unpathed(trace.failures));
          else expect(trace.failures).toEqual([]);
          expect(await storedFailures(h)).toEqual(trace.failures);
          const view = await h.runtime.find(h.id);
          expect(view.status).toBe(outcome.status);
          if (outcome.status === 'failed') expect(view.undoStack).toEqual([]);
          else expect(view.undoStack.map((e) => e.step)).toEqual(outcome.stack.map((e) => e.step.name));
          expect(await childStatuses(h, trace.children)).toEqual(trace.children);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('4. undo(id) of a completed run undoes every completed step at every depth once, newest first, and ends cancelled', async () => {
    await fc.assert(
      fc.asyncProperty(completingScenario, async (sc) => {
        const { h, result, trace, outcome } = await runScenario(sc);
        try {
          expect(outcome.status).toBe('completed');
          checkOutcome(result, outcome);
          if (outcome.status !== 'completed') return;
          const before = h.log.length;
          const hooksBefore = h.recorder.events.length;
          const cancelled = await h.runtime.undo(h.id);
          const undone = referenceUndo(outcome.stack, trace.children);
          expect(cancelled.status).toBe('cancelled');
          expect(reported(cancelled)).toEqual(unpathed(undone.failures));
          expect(await storedFailures(h)).toEqual(undone.failures);
          expect(h.log.slice(before)).toEqual(undone.handlers);
          const undos = h.recorder.events.slice(hooksBefore);
          expect(undos).toEqual(undone.hooks);
          // Independently of the reference: exactly the completed steps, each once, in reverse completion order.
          expect(undos).toEqual([...trace.completed].reverse().map((p) => `undo:${p}`));
          expect(h.problems).toEqual([]);
          const view = await h.runtime.find(h.id);
          expect(view.status).toBe('cancelled');
          expect(view.undoStack).toEqual([]);
          expect(await childStatuses(h, undone.children)).toEqual(undone.children);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });
});
