import { DefinitionError, DependencyError } from '../errors/index.js';
import type { ArgsRecord } from './sources.js';
import { resultDependencies } from './sources.js';
import { NO_RETRY } from './retry.js';
import type { AnySchema } from './step.js';
import type { CompiledStep, Handoff, RawStep, ReactorDefinition, RunMode } from './compiled.js';
import { fingerprintPlan } from './fingerprint.js';
import { checkName, checkArgSources, checkOptions, checkWaitFor, REMOVED_STEP_OPTIONS } from './checks.js';
import { compileMap } from './compile-map.js';
import { compileAsyncReactor, compileAsyncStep, isAsyncUnit } from './async-unit.js';
import { compileBodyStep } from './compile-body.js';
import type { BodyShape } from './compile-body.js';

export { RESERVED_PREFIX } from './checks.js';

const REMOVED_REACTOR_OPTIONS: Readonly<Record<string, string>> = {
  async: 'use .background({ all: true }) (or { before: step } / { after: step })',
  retryDefaults: 'declare retries on each step',
};
const STEP_SHAPE: BodyShape = {
  kind: 'step',
  inlineOptions: new Set(['args', 'input', 'waitFor', 'run', 'compensate', 'undo', 'output', 'retries']),
  useOptions: new Set(['args', 'waitFor', 'retries']),
  tracked: true,
};
const COMPOSE_OPTIONS = new Set(['args', 'waitFor']);
const REMOVED_COMPOSE_OPTIONS: Readonly<Record<string, string>> = {
  ...REMOVED_STEP_OPTIONS,
  retries: "a composed reactor is never retried as a whole; declare retries on the child's steps",
};

function composeBody(): never {
  throw new Error('a compose step has no body: the runtime runs its child reactor');
}

const INTERRUPT_OPTIONS = new Set(['payload', 'maxAttempts', 'correlationId', 'timeout', 'waitFor']);
const REMOVED_INTERRUPT_OPTIONS: Readonly<Record<string, string>> = {
  ...REMOVED_STEP_OPTIONS,
  validate: 'use payload: <schema>',
};

function interruptBody(): never {
  throw new Error('an interrupt has no body: the run pauses there until it is continued');
}

function compileInterrupt(raw: RawStep, order: number, reactor: string, resolveArgs: CompileInput['resolveArgs']): Omit<CompiledStep, 'index'> {
  const where = `reactor "${reactor}" interrupt "${raw.name}"`;
  checkName('step', raw.name, `reactor "${reactor}"`);
  for (const key of ['input', 'args', 'run', 'retries']) {
    if (raw.config[key] !== undefined) {
      throw new DefinitionError(`${where}: an interrupt takes no ${key}; its result is the resume payload (declare payload: <schema>), and it waits for steps with waitFor`);
    }
  }
  checkOptions(raw.config, INTERRUPT_OPTIONS, REMOVED_INTERRUPT_OPTIONS, where);
  const maxAttempts = raw.config['maxAttempts'] ?? 1;
  if (!Number.isInteger(maxAttempts) || (maxAttempts as number) < 1) {
    throw new DefinitionError(`${where}: maxAttempts must be a positive integer, got ${JSON.stringify(maxAttempts)}`);
  }
  const timeout = raw.config['timeout'] as { ms?: unknown; strategy?: unknown } | undefined;
  if (timeout !== undefined) {
    if (typeof timeout.ms !== 'number' || !Number.isFinite(timeout.ms) || timeout.ms <= 0) {
      throw new DefinitionError(`${where}: timeout.ms must be a positive number of milliseconds, got ${JSON.stringify(timeout.ms)}`);
    }
    if (timeout.strategy !== undefined && timeout.strategy !== 'lazy' && timeout.strategy !== 'active') {
      throw new DefinitionError(`${where}: timeout.strategy must be "lazy" or "active", got ${JSON.stringify(timeout.strategy)}`);
    }
  }
  const correlation = raw.config['correlationId'];
  if (correlation !== undefined && typeof correlation !== 'function') {
    throw new DefinitionError(`${where}: correlationId must be a function of the sources, e.g. ({ input }) => input('orderId')`);
  }
  const correlationId = correlation === undefined ? undefined : resolveArgs((h: unknown) => ({ id: (correlation as (h: unknown) => unknown)(h) }));
  checkArgSources(correlationId, `${where} correlationId`);
  const waitFor = checkWaitFor(raw.config['waitFor'], where);
  return {
    name: raw.name,
    kind: 'interrupt',
    child: undefined,
    interrupt: {
      payload: raw.config['payload'] as AnySchema | undefined,
      maxAttempts: maxAttempts as number,
      correlationId,
      timeout: timeout === undefined ? undefined : { ms: timeout.ms as number, strategy: (timeout.strategy as 'lazy' | 'active' | undefined) ?? 'lazy' },
    },
    order,
    args: undefined,
    contract: undefined,
    output: undefined,
    run: interruptBody,
    compensate: undefined,
    undo: undefined,
    retry: NO_RETRY,
    reads: resultDependencies(correlationId),
    waitFor,
    tracked: false,
    definitionName: undefined,
  };
}

function compileCompose(raw: RawStep, order: number, reactor: string, resolveArgs: CompileInput['resolveArgs']): Omit<CompiledStep, 'index'> {
  const where = `reactor "${reactor}" compose "${raw.name}"`;
  checkName('step', raw.name, `reactor "${reactor}"`);
  checkOptions(raw.config, COMPOSE_OPTIONS, REMOVED_COMPOSE_OPTIONS, where);
  const child = raw.compose!;
  if (child.kind !== 'reactor' || !Array.isArray(child.plan)) {
    throw new DefinitionError(`${where}: the child must be a built reactor definition (call .build() on it)`);
  }
  if (child.handoff !== undefined) {
    throw new DefinitionError(`${where}: child reactor "${child.name}" declares background; a composed child runs inline in its parent`);
  }
  const args = resolveArgs(raw.config['args']);
  checkArgSources(args, where);
  const waitFor = checkWaitFor(raw.config['waitFor'], where);
  return {
    name: raw.name,
    kind: 'compose',
    child,
    order,
    args,
    contract: undefined,
    output: undefined,
    run: composeBody,
    compensate: undefined,
    undo: undefined,
    retry: NO_RETRY,
    reads: resultDependencies(args),
    waitFor,
    tracked: true,
    definitionName: child.name,
  };
}

interface CompileInput {
  readonly background: unknown;
  readonly name: string;
  readonly version: unknown;
  readonly input: AnySchema | undefined;
  readonly steps: readonly RawStep[];
  readonly returns: string | undefined;
  readonly options: Readonly<Record<string, unknown>>;
  readonly resolveArgs: (factory: unknown) => ArgsRecord | undefined;
}

function checkVersion(version: unknown, reactor: string): number {
  if (version === undefined) return 1;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) {
    const got = typeof version === 'number' ? String(version) : typeof version === 'string' ? `${JSON.stringify(version)} (a string)` : `a value of type ${typeof version}`;
    throw new DefinitionError(`reactor "${reactor}": version must be a positive integer (1, 2, 3, ...), got ${got}; leave it out for version 1`);
  }
  return version;
}

function compileStep(raw: RawStep, order: number, reactor: string, resolveArgs: CompileInput['resolveArgs']): Omit<CompiledStep, 'index'> {
  if (raw.async === 'step') return compileAsyncStep(raw, order, reactor, resolveArgs);
  if (raw.async === 'reactor') return compileAsyncReactor(raw, order, reactor, resolveArgs);
  if (raw.compose !== undefined) return compileCompose(raw, order, reactor, resolveArgs);
  if (raw.interrupt === true) return compileInterrupt(raw, order, reactor, resolveArgs);
  if (raw.map !== undefined) return compileMap(raw, order, reactor, resolveArgs);
  checkName('step', raw.name, `reactor "${reactor}"`);
  return compileBodyStep(raw, order, resolveArgs, `reactor "${reactor}" step "${raw.name}"`, STEP_SHAPE);
}

/**
 * Steps in the order a sequential executor runs them: repeated waves of ready
 * steps in definition order. A step's wave is one more than its latest
 * dependency's, so the order is (wave, definition order), computed in linear
 * time. The graph is known to be acyclic here.
 */
function planOrder(steps: readonly Omit<CompiledStep, 'index'>[]): number[] {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const waves = new Map<string, number>();
  const waveOf = (step: Omit<CompiledStep, 'index'>): number => {
    const known = waves.get(step.name);
    if (known !== undefined) return known;
    let wave = 0;
    for (const dep of [...step.reads, ...step.waitFor]) wave = Math.max(wave, waveOf(byName.get(dep)!) + 1);
    waves.set(step.name, wave);
    return wave;
  };
  return steps
    .map((s) => ({ order: s.order, wave: waveOf(s) }))
    .sort((a, b) => a.wave - b.wave || a.order - b.order)
    .map((s) => s.order);
}

function findCycle(steps: readonly Omit<CompiledStep, 'index'>[]): string[] | undefined {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'visiting') return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, 'visiting');
    stack.push(name);
    const step = byName.get(name);
    for (const dep of step === undefined ? [] : [...step.reads, ...step.waitFor]) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const s of steps) {
    const cycle = visit(s.name);
    if (cycle) return cycle;
  }
  return undefined;
}

/** Validate a reactor as written and compute its execution plan. */
export function compileDefinition<TName extends string, TInput, TResults, TOutput, TMode extends RunMode>(
  input: CompileInput,
): ReactorDefinition<TName, TInput, TResults, TOutput, TMode> {
  checkName('reactor', input.name, 'defineReactor');
  const reactor = input.name;
  const version = checkVersion(input.version, reactor);
  checkOptions(input.options, new Set(), REMOVED_REACTOR_OPTIONS, `reactor "${reactor}"`);
  const seen = new Set<string>();
  const steps = input.steps.map((raw, order) => {
    if (seen.has(raw.name)) {
      throw new DefinitionError(`reactor "${reactor}": step "${raw.name}" is defined twice; step names must be unique`);
    }
    seen.add(raw.name);
    return compileStep(raw, order, reactor, input.resolveArgs);
  });
  for (const step of steps) {
    for (const dep of step.reads) {
      if (!seen.has(dep)) {
        throw new DependencyError(
          `step "${step.name}" reads result("${dep}"), which reactor "${reactor}" does not declare`,
          { reactor, step: step.name },
        );
      }
    }
    for (const dep of step.waitFor) {
      if (!seen.has(dep)) {
        throw new DependencyError(
          `step "${step.name}" waits for "${dep}", which reactor "${reactor}" does not declare`,
          { reactor, step: step.name },
        );
      }
    }
  }
  const cycle = findCycle(steps);
  if (cycle) {
    throw new DependencyError(`reactor "${reactor}": dependency graph contains a cycle: ${cycle.join(' -> ')}; remove one of these dependencies`, { reactor });
  }
  if (input.returns !== undefined && !seen.has(input.returns)) {
    throw new DefinitionError(
      `reactor "${reactor}": returns("${input.returns}") names a step the reactor does not declare; name one of ${[...seen].map((n) => `"${n}"`).join(', ') || 'its steps (it has none)'}`,
    );
  }
  const returned = input.returns === undefined ? undefined : steps.find((s) => s.name === input.returns);
  if (returned !== undefined && isAsyncUnit(returned)) {
    throw new DefinitionError(
      `reactor "${reactor}": returns("${input.returns}") names an async unit (${returned.kind}), which has no value when the run completes; return a step that reads it with result("${input.returns}")`,
      { reactor, step: returned.name },
    );
  }
  const plan = planOrder(steps).map((order, index) => Object.freeze({ ...steps[order]!, index }));
  const handoff = compileHandoff(reactor, input.background, plan);
  const byOrder = [...plan].sort((a, b) => a.order - b.order);
  return Object.freeze({
    kind: 'reactor',
    name: reactor as TName,
    version,
    fingerprint: fingerprintPlan({ name: reactor, plan, returns: input.returns, handoff }),
    input: input.input,
    steps: Object.freeze(byOrder),
    plan: Object.freeze(plan),
    returns: input.returns,
    handoff,
  });
}

/** Validate a background declaration: exactly one of all / after / before, naming a declared step. */
function compileHandoff(reactor: string, cut: unknown, plan: readonly CompiledStep[]): Handoff | undefined {
  if (cut === undefined) return undefined;
  const where = `reactor "${reactor}": background`;
  if (typeof cut !== 'object' || cut === null) {
    throw new DefinitionError(`${where} must be { all: true }, { after: step } or { before: step }`);
  }
  const keys = Object.keys(cut).filter((k) => (cut as Record<string, unknown>)[k] !== undefined);
  const fix = 'declare exactly one of { all: true }, { after: step } or { before: step }';
  if (keys.length !== 1) throw new DefinitionError(`${where} declares ${keys.length === 0 ? 'no hand-off point' : keys.join(' and ')}; ${fix}`);
  const mode = keys[0]!;
  const value = (cut as Record<string, unknown>)[mode];
  if (mode === 'all') {
    if (value !== true) throw new DefinitionError(`${where}: all must be true; ${fix}`);
    return { mode, step: undefined, index: 0 };
  }
  if (mode !== 'after' && mode !== 'before') throw new DefinitionError(`${where}: unknown key "${mode}"; ${fix}`);
  const step = plan.find((s) => s.name === value);
  if (step === undefined) {
    throw new DefinitionError(`${where} ${mode}: "${String(value)}" is not a step of the reactor; name one of ${plan.map((s) => `"${s.name}"`).join(', ')}`);
  }
  return { mode, step: step.name, index: mode === 'after' ? step.index + 1 : step.index };
}
