/**
 * Random trees of composed reactors and their reference interpreter, for property tests that run
 * the same tree in different worlds (inline, in workers with crashes). The same generator and rules
 * as test/property/compose.test.ts (seed 001 §2.2 with R1–R7), factored here with two additions:
 * plain steps may declare retries (a fixed backoff) and fail their first attempts transiently, and
 * the root may be built `.background({ all: true })`.
 */
import fc from 'fast-check';
import { CompensationError, defineReactor, fail, halt, skip } from '../../../src/index.js';
import type { AnyReactorDefinition, RunResult } from '../../../src/index.js';
import { definitionOrder, referenceWaves } from './reference-plan.js';

const MIN_STEPS = 2;
const MAX_STEPS = 5;
/** Reactor levels: the root, its composed children, their composed children. */
export const MAX_DEPTH = 3;
/** Step names start with their level's letter: `a1` at the root, `a1.b0`, `a1.b0.c3`. */
const LEVEL_LETTERS = ['a', 'b', 'c'] as const;
export const INPUT = { x: 7 };

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

export type HandlerKind = 'absent' | 'ok' | 'throws' | 'fails';
/** What a plain step's body does once its transient failures are over. `throw` / `fail` only for the single failure point. */
export type Behaviour = 'ok' | 'skip' | 'halt' | 'throw' | 'fail';

/** A step's retry declaration: `maxAttempts` with a fixed backoff of `delayMs`; the first `transient` attempts throw. */
export interface RetrySpec {
  readonly maxAttempts: number;
  readonly delayMs: number;
  /** Attempts that throw before the body does what its behaviour says (< maxAttempts). */
  readonly transient: number;
}

export interface PlainSpec {
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
  /** Undefined: no retries declared (one attempt). */
  readonly retry: RetrySpec | undefined;
}

export interface ComposeSpec {
  readonly kind: 'compose';
  readonly name: string;
  readonly path: string;
  readonly composePath: readonly string[];
  /** Earlier steps whose results become the child's input (through `args`); none: the child gets this reactor's input. */
  readonly reads: readonly string[];
  readonly waitFor: readonly string[];
  readonly child: ReactorSpec;
}

export type StepSpec = PlainSpec | ComposeSpec;

export interface ReactorSpec {
  /** Compose steps from the root to this reactor (empty for the root). */
  readonly composePath: readonly string[];
  /** Dependencies only point at lower indices. */
  readonly steps: readonly StepSpec[];
  /** The order the steps are given to the builder (dependencies first). */
  readonly defOrder: readonly string[];
}

export interface Scenario {
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
  readonly retry: RetrySpec | undefined;
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

/** How the generator is tuned. */
export interface TreeOptions {
  /** Retry delays to choose from; none: no step declares retries. */
  readonly retryDelaysMs?: readonly number[];
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

function retryArb(options: TreeOptions): fc.Arbitrary<RetrySpec | undefined> {
  const delays = options.retryDelaysMs ?? [];
  if (delays.length === 0) return fc.constant(undefined);
  const declared = fc
    .record({ maxAttempts: fc.integer({ min: 2, max: 3 }), delayMs: fc.constantFrom(...delays), transient: fc.nat({ max: 2 }) })
    .map((r): RetrySpec => ({ ...r, transient: Math.min(r.transient, r.maxAttempts - 1) }));
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: declared, weight: 1 });
}

function plainArb(halts: boolean, options: TreeOptions): fc.Arbitrary<RawPlain> {
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
    retry: retryArb(options),
  });
}

/**
 * A reactor of `depth` levels at most. `rootHalts` false: the reactor's own
 * plain steps never halt (its children's may).
 */
function rawReactorArb(depth: number, options: TreeOptions, rootHalts = true): fc.Arbitrary<readonly RawStep[]> {
  const node: fc.Arbitrary<RawPlain | RawCompose> =
    depth > 1
      ? fc.oneof(
          { arbitrary: plainArb(rootHalts, options), weight: 2 },
          { arbitrary: fc.record({ kind: fc.constant('compose' as const), child: rawReactorArb(depth - 1, options) }), weight: 1 },
        )
      : plainArb(rootHalts, options);
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
      return { kind: 'plain', ...common, behaviour, compensate: r.node.compensate, undo: r.node.undo, async: r.node.async, retry: r.node.retry };
    });
    return { composePath, steps: specs, defOrder: definitionOrder(specs, steps.map((r) => r.priority)) };
  };
  const root = build(raw.root, []);
  return { root, failing };
}

/** Any scenario: at most one failure point (one in four has none), halts anywhere. */
export function scenarioArb(options: TreeOptions = {}): fc.Arbitrary<Scenario> {
  return fc
    .record({
      root: rawReactorArb(MAX_DEPTH, options),
      failure: fc.option(fc.record({ at: fc.nat({ max: 1000 }), via: fc.constantFrom<'throw' | 'fail'>('throw', 'fail') }), { nil: undefined, freq: 4 }),
    })
    .map(toScenario);
}

/** Scenarios whose root completes: no failure point, no halt at the root's own steps (children may halt). */
export function completingScenarioArb(options: TreeOptions = {}): fc.Arbitrary<Scenario> {
  return rawReactorArb(MAX_DEPTH, options, false).map((root) => toScenario({ root, failure: undefined }));
}

// ---------------------------------------------------------------------------
// Values the generated steps produce
// ---------------------------------------------------------------------------

export const okValue = (path: string) => ({ v: path });
export const skipValue = (path: string) => ({ skipped: path });
export const bodyErrorMessage = (path: string) => `boom ${path}`;
export const haltReason = (path: string) => `halt ${path}`;

// ---------------------------------------------------------------------------
// Reference interpreter, written from R1–R7 and §2.2 (and retries: a step runs again while its
// attempt failed and attempts are left)
// ---------------------------------------------------------------------------

export interface ExpectedFailure {
  readonly step: string;
  readonly path: readonly string[];
  readonly kind: 'compensate' | 'undo' | 'undo_all';
  readonly reason: 'raised' | 'returned_failure';
}

/** An undo-stack entry of the reference: a plain step, or a compose step with its child's stack. */
export type RefEntry = { readonly kind: 'plain'; readonly step: PlainSpec } | { readonly kind: 'compose'; readonly step: ComposeSpec; readonly stack: readonly RefEntry[] };

export type RefOutcome =
  | { readonly status: 'completed'; readonly stack: RefEntry[]; readonly value: Record<string, unknown> }
  | { readonly status: 'halted'; readonly stack: RefEntry[]; readonly step: string; readonly reason: string }
  /** `step`: the failing step of this reactor (a compose step when the failure was in a child); `origin`: the plain step that failed. */
  | { readonly status: 'failed'; readonly step: string; readonly origin: PlainSpec; readonly compensationFailed: boolean };

/** What the handlers see and the rollback failures, in order. */
export class Trace {
  /** Events pushed by the handlers (compensate / undo only when declared). */
  readonly handlers: string[] = [];
  /** Events a recording middleware sees: run / compensate / undo of plain steps, declared or not. */
  readonly hooks: string[] = [];
  readonly failures: ExpectedFailure[] = [];
  /** Paths of the plain steps that completed without skipping, in completion order. */
  readonly completed: string[] = [];
  /** Final status of every composed child execution, by its compose step's path. */
  readonly children = new Map<string, string>();
  /** Status each composed child settled in when its parent collected it (before any undo), by compose path. */
  readonly childRuns = new Map<string, string>();
  /** Compose steps whose child was undone (its parent awaited it a second time), in undo order. */
  readonly childUndos: string[] = [];

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
        this.childUndos.push(entry.step.path);
      }
    }
  }
}

/** R1: repeated waves of the steps whose dependencies are all done, in definition order. */
function referencePlan(r: ReactorSpec): StepSpec[] {
  return referenceWaves(r.steps, r.defOrder);
}

/** Attempts a plain step's body makes, and whether the last one failed (the step failed for good). */
function attemptsOf(step: PlainSpec): { readonly attempts: number; readonly failed: boolean } {
  const max = step.retry?.maxAttempts ?? 1;
  const transient = step.retry?.transient ?? 0;
  if (step.behaviour === 'throw' || step.behaviour === 'fail') return { attempts: max, failed: true };
  return { attempts: transient + 1, failed: false };
}

function referenceReactor(r: ReactorSpec, t: Trace): RefOutcome {
  const stack: RefEntry[] = [];
  const results: Record<string, unknown> = {};
  for (const step of referencePlan(r)) {
    if (step.kind === 'compose') {
      // §2.2.1: the child runs inline with its own undo stack.
      const child = referenceReactor(step.child, t);
      t.children.set(step.path, child.status);
      t.childRuns.set(step.path, child.status);
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
    const { attempts, failed } = attemptsOf(step);
    for (let i = 0; i < attempts; i++) t.run(step);
    if (failed) {
      // R2/R4: the body started: compensate it, then undo this reactor's stack newest first.
      const compensationFailed = !t.rollback('compensate', step);
      t.undoStack(stack);
      return { status: 'failed', step: step.name, origin: step, compensationFailed };
    }
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
      default:
        // R5: halt stops this reactor without rollback.
        return { status: 'halted', stack, step: step.name, reason: haltReason(step.path) };
    }
  }
  return { status: 'completed', stack, value: results };
}

export function reference(sc: Scenario): { trace: Trace; outcome: RefOutcome } {
  const trace = new Trace();
  return { trace, outcome: referenceReactor(sc.root, trace) };
}

// ---------------------------------------------------------------------------
// Building the real reactors
// ---------------------------------------------------------------------------

/** Where built handlers report. */
export interface HandlerLog {
  /** Events pushed by the step handlers themselves: `run:<path>` per attempt, `compensate:<path>`, `undo:<path>`. */
  readonly events: string[];
  /** Inconsistencies seen inside handlers (an undo given the wrong result...). */
  readonly problems: string[];
}

let reactors = 0;

function rollbackOutcome(kind: HandlerKind, what: string, path: string): unknown {
  if (kind === 'throws') throw new Error(`${what} ${path} raised`);
  if (kind === 'fails') return fail(new Error(`${what} ${path} failed`));
  return undefined;
}

const readArgs = (reads: readonly string[]) => ({ result }: { result: (n: string) => unknown }) =>
  Object.fromEntries(reads.map((d) => [`r_${d}`, result(d)]));

function buildReactor(r: ReactorSpec, log: HandlerLog, prefix: string, background: boolean): AnyReactorDefinition {
  reactors += 1;
  let builder: any = defineReactor({ name: `${prefix}_${reactors}` });
  for (const name of r.defOrder) {
    const step = r.steps.find((s) => s.name === name)!;
    const use: Record<string, unknown> = {};
    if (step.reads.length > 0) use['args'] = readArgs(step.reads);
    if (step.waitFor.length > 0) use['waitFor'] = step.waitFor;
    if (step.kind === 'compose') {
      builder = builder.compose(name, buildReactor(step.child, log, prefix, false), use);
      continue;
    }
    const { path } = step;
    if (step.retry !== undefined) use['retries'] = { maxAttempts: step.retry.maxAttempts, backoff: 'fixed', baseDelayMs: step.retry.delayMs };
    const transient = step.retry?.transient ?? 0;
    let produced = false;
    use['run'] = (_args: unknown, ctx: { readonly attempt: number }) => {
      log.events.push(`run:${path}`);
      const body = (): unknown => {
        if (ctx.attempt <= transient) throw new Error(`transient ${path} #${ctx.attempt}`);
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
        log.events.push(`compensate:${path}`);
        return rollbackOutcome(step.compensate, 'compensate', path);
      };
    }
    if (step.undo !== 'absent') {
      use['undo'] = (result: unknown) => {
        log.events.push(`undo:${path}`);
        if (!produced) log.problems.push(`${path}: undone but its body never produced a value`);
        else if (JSON.stringify(result) !== JSON.stringify(okValue(path))) log.problems.push(`${path}: undo received ${JSON.stringify(result)}`);
        return rollbackOutcome(step.undo, 'undo', path);
      };
    }
    builder = builder.step(name, use);
  }
  if (background) builder = builder.background({ all: true });
  return builder.build() as AnyReactorDefinition;
}

/** The real reactor tree of a scenario; `background`: the root is `.background({ all: true })`. */
export function buildTree(sc: Scenario, log: HandlerLog, options: { readonly prefix: string; readonly background: boolean }): AnyReactorDefinition {
  return buildReactor(sc.root, log, options.prefix, options.background);
}

// ---------------------------------------------------------------------------
// Reading a tree
// ---------------------------------------------------------------------------

export function plainSteps(r: ReactorSpec): PlainSpec[] {
  return r.steps.flatMap((s) => (s.kind === 'plain' ? [s] : plainSteps(s.child)));
}

export function composeSteps(r: ReactorSpec): ComposeSpec[] {
  return r.steps.flatMap((s) => (s.kind === 'compose' ? [s, ...composeSteps(s.child)] : []));
}

/** What a run's result must be, as the reference decides it (message and type of a failure's error included). */
export function expectedResult(outcome: RefOutcome): Record<string, unknown> {
  switch (outcome.status) {
    case 'completed':
      return { status: 'completed', value: outcome.value };
    case 'halted':
      return { status: 'halted', step: outcome.step, reason: outcome.reason };
    case 'failed':
      return { status: 'failed', step: outcome.step, origin: bodyErrorMessage(outcome.origin.path), compensationError: outcome.compensationFailed ? outcome.origin.name : null };
  }
}

/** A result in the shape of {@link expectedResult}. */
export function resultShape(result: RunResult<unknown> | { readonly status: string }): Record<string, unknown> {
  const r = result as RunResult<unknown>;
  switch (r.status) {
    case 'completed':
      return { status: 'completed', value: r.value };
    case 'halted':
      return { status: 'halted', step: r.step, reason: r.reason };
    case 'failed': {
      // R4: a compensate that did not complete: a CompensationError naming that step, carrying the body's message.
      const compensation = r.error instanceof CompensationError;
      const named = compensation ? /step "([^"]+)"/.exec(r.message)?.[1] ?? r.message : null;
      const origin = compensation ? (/boom [\w.]+/.exec(r.message)?.[0] ?? r.message) : r.message;
      return { status: 'failed', step: r.step, origin, compensationError: named };
    }
    default:
      return { status: result.status };
  }
}
