import type { ExecutionEvent, RollbackFailure } from '../../machines/execution-types.js';
import type { CompiledStep } from '../definition/compiled.js';
import { isOutcome, outcomeKind } from '../definition/outcomes.js';
import type { Fail, Halt, Skip } from '../definition/outcomes.js';
import type { SourceSpec } from '../definition/sources.js';
import type { StepContext } from '../definition/step.js';
import { ArgumentResolutionError, InputValidationError, OutputValidationError, StepFailure, XreactorError } from '../errors/index.js';
import type { ExecutionId } from '../internal/ids.js';
import { describeIssues, validateWith } from '../internal/standard-schema.js';
import { serializeError } from '../serialization/index.js';

/** What a step handler runs against. */
export interface StepScope {
  readonly executionId: string;
  readonly reactor: string;
  readonly inputs: unknown;
  readonly signal: AbortSignal;
}

/** Arguments resolved for an attempt; `undefined` until resolution succeeds. */
export interface Attempt {
  args: unknown;
  started: boolean;
  /** Called with the resolved arguments right before the body starts. */
  readonly onStart?: (args: unknown) => void;
}

function describeSource(spec: SourceSpec): string {
  if (spec.kind === 'value') return 'value(...)';
  if (spec.kind === 'element') return `element(${spec.path.length > 0 ? `"${spec.path.join('.')}"` : ''})`;
  const path = spec.path.length > 0 ? `, "${spec.path.join('.')}"` : '';
  return `${spec.kind}("${spec.name}"${path})`;
}

function resolveSource(step: CompiledStep, key: string, spec: SourceSpec, inputs: unknown, results: ReadonlyMap<string, unknown>, reactor: string): unknown {
  const fail = (why: string, cause?: unknown) =>
    new ArgumentResolutionError(`reactor "${reactor}" step "${step.name}": argument "${key}" from ${describeSource(spec)} ${why}`, {
      step: step.name,
      reactor,
      cause,
    });
  let value: unknown;
  if (spec.kind === 'value') value = spec.value;
  else if (spec.kind === 'input') value = (inputs as Record<string, unknown> | undefined)?.[spec.name];
  else if (spec.kind === 'element') throw fail('cannot be resolved: there is no item outside a map element');
  else {
    if (!results.has(spec.name)) throw fail(`cannot be resolved: step "${spec.name}" has no recorded result`);
    value = results.get(spec.name);
  }
  if (spec.kind !== 'value') {
    for (const segment of spec.path) {
      if (typeof value !== 'object' || value === null || !(segment in value)) {
        throw fail(`cannot be resolved: "${segment}" is missing in ${value === null ? 'null' : typeof value}`);
      }
      value = (value as Record<string, unknown>)[segment];
    }
  }
  for (const transform of spec.transforms) {
    try {
      value = transform(value);
    } catch (error) {
      throw fail(`failed in its transform: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  }
  return value;
}

/** Resolve a step's arguments (sources, then its input contract). Throws before the body on any problem. */
export async function resolveArguments(step: CompiledStep, inputs: unknown, results: ReadonlyMap<string, unknown>, reactor: string): Promise<unknown> {
  return checkArguments(step, resolveSources(step, inputs, results, reactor), reactor);
}

/**
 * A step's arguments from its sources, before its input contract: without `args`, every input;
 * with a contract, the inputs with the wired sources over them. Throws an ArgumentResolutionError.
 */
export function resolveSources(step: CompiledStep, inputs: unknown, results: ReadonlyMap<string, unknown>, reactor: string): unknown {
  if (step.args === undefined) return inputs;
  const resolved: Record<string, unknown> = {};
  for (const [key, source] of Object.entries(step.args)) resolved[key] = resolveSource(step, key, source.spec, inputs, results, reactor);
  return step.contract === undefined ? resolved : { ...(inputs as object), ...resolved };
}

/** Apply a step's input contract to its resolved arguments (its output is what the body receives). Throws an InputValidationError. */
export async function checkArguments(step: CompiledStep, args: unknown, reactor: string): Promise<unknown> {
  if (step.contract === undefined) return args;
  const checked = await validateWith(step.contract, args);
  if (!checked.ok) {
    throw new InputValidationError(`reactor "${reactor}" step "${step.name}": arguments are invalid: ${describeIssues(checked.issues)}`, checked.issues, {
      step: step.name,
      reactor,
    });
  }
  return checked.value;
}

/** Whether an error may be retried: `retryable` when it says so, otherwise yes. */
export function isRetryable(error: unknown): boolean {
  if (error instanceof XreactorError) return error.retryable;
  if (typeof error === 'object' && error !== null && typeof (error as { retryable?: unknown }).retryable === 'boolean') {
    return (error as { retryable: boolean }).retryable;
  }
  return true;
}

/** Turn what a `fail(...)` carried into an Error. */
export function failureError(value: unknown, step: string, reactor: string): Error {
  if (value instanceof Error) return value;
  const message = typeof value === 'string' ? value : `step "${step}" failed`;
  return new StepFailure(message, { step, reactor, detail: value });
}

/** The context a handler receives. */
export function stepContext(scope: StepScope, step: string, attempt: number): StepContext<unknown> {
  return {
    executionId: scope.executionId as ExecutionId,
    reactor: scope.reactor,
    step,
    attempt,
    signal: scope.signal,
    inputs: scope.inputs as Readonly<unknown>,
  };
}

/**
 * Run one attempt of a step body and classify what happened as the event the
 * execution actor receives. Never throws: every failure, in user code or in
 * reading the step's dependencies, is an event attributed to the step.
 */
export async function performStep(
  step: CompiledStep,
  attempt: number,
  scope: StepScope,
  loadResults: () => Promise<ReadonlyMap<string, unknown>>,
  at: () => number,
  progress: Attempt,
  /** How the arguments are had (an async unit's: its stored arguments through its contract). @defaultValue resolved from the sources */
  resolve: () => Promise<unknown> = async () => resolveArguments(step, scope.inputs, await loadResults(), scope.reactor),
): Promise<ExecutionEvent> {
  const base = { index: step.index, attempt };
  const failed = (error: unknown, started: boolean, retryable: boolean): ExecutionEvent => ({
    type: 'xreactor.step.failed',
    at: at(),
    ...base,
    error: serializeError(error),
    started,
    retryable: started && retryable,
    args: progress.args,
  });
  try {
    // Reading the results it depends on is part of resolution: a failure here never starts the body.
    progress.args = await resolve();
  } catch (error) {
    return failed(error, false, false);
  }
  let returned: unknown;
  progress.started = true;
  progress.onStart?.(progress.args);
  try {
    returned = await step.run(progress.args, stepContext(scope, step.name, attempt));
  } catch (error) {
    return failed(error, true, isRetryable(error));
  }
  if (isOutcome(returned)) {
    const kind = outcomeKind(returned);
    if (kind === 'halt') return { type: 'xreactor.step.halted', at: at(), ...base, reason: (returned as Halt).reason };
    if (kind === 'fail') {
      const f = returned as Fail;
      const error = failureError(f.error, step.name, scope.reactor);
      return failed(error, true, f.retry !== false && isRetryable(error));
    }
    returned = (returned as Skip<unknown>).value;
    const value = await checkOutput(step, returned, scope.reactor);
    if (value instanceof OutputValidationError) return failed(value, true, false);
    return { type: 'xreactor.step.skipped', at: at(), ...base, value };
  }
  const value = await checkOutput(step, returned, scope.reactor);
  if (value instanceof OutputValidationError) return failed(value, true, false);
  return { type: 'xreactor.step.succeeded', at: at(), ...base, args: progress.args, result: value };
}

async function checkOutput(step: CompiledStep, value: unknown, reactor: string): Promise<unknown> {
  if (step.output === undefined) return value;
  const checked = await validateWith(step.output, value);
  if (checked.ok) return checked.value;
  return new OutputValidationError(`reactor "${reactor}" step "${step.name}": returned value is invalid: ${describeIssues(checked.issues)}`, checked.issues, {
    step: step.name,
    reactor,
  });
}

/** Run a compensate or undo handler; a returned `fail(...)` or a throw is a rollback failure, never fatal. */
export async function performRollbackHandler(
  handler: (() => unknown) | undefined,
  step: string,
  reactor: string,
): Promise<Omit<RollbackFailure, 'step' | 'kind'> | null> {
  if (handler === undefined) return null;
  try {
    const out = await handler();
    if (isOutcome(out) && outcomeKind(out) === 'fail') {
      return { reason: 'returned_failure', error: serializeError(failureError((out as Fail).error, step, reactor)) };
    }
    return null;
  } catch (error) {
    return { reason: 'raised', error: serializeError(error) };
  }
}
