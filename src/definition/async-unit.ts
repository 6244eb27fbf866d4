/**
 * Async units: `asyncStep` (one step's body in its own job) and `asyncReactor` (a whole child
 * reactor as an independent execution). The owning execution dispatches a unit and goes on; the
 * unit is never undone by it (seed 001 R6). A step that reads a unit with `result(name)` waits for
 * it to settle and receives its {@link AsyncOutcome}. The builder methods are
 * `ReactorBuilder.asyncStep` / `asyncReactor`, their validation `compileAsyncStep` /
 * `compileAsyncReactor` below.
 */
import { DefinitionError } from '../errors/index.js';
import { compileBodyStep } from './compile-body.js';
import type { BodyShape } from './compile-body.js';
import type { CompiledStep, RawStep, ResolveArgs } from './compiled.js';
import { NO_RETRY } from './retry.js';
import { resultDependencies } from './sources.js';
import { checkName, checkArgSources, checkOptions, checkWaitFor, REMOVED_STEP_OPTIONS } from './checks.js';

/**
 * What a step reading an async unit (`result('sendEmail')`) receives once the unit settled: its
 * value, or how it ended otherwise. The reader decides: a failed unit fails the owner only if
 * the reader itself fails on it (the unit has compensated itself already).
 * @example
 * .step('confirm', {
 *   args: ({ result }) => ({ email: result('sendEmail') }),
 *   run: ({ email }) => (email.status === 'completed' ? email.value.messageId : fail(email.status === 'failed' ? email.error : email.status)),
 * })
 */
export type AsyncOutcome<V> = (
  | { readonly status: 'completed'; readonly value: V }
  | { readonly status: 'failed'; readonly error: Error }
  | { readonly status: 'halted'; readonly reason: string }
  /** An async reactor's child cancelled by an operator. */
  | { readonly status: 'cancelled'; readonly reason: string }
) & { readonly [ASYNC_UNIT]?: V };

/**
 * Marks the type of an async unit's outcome (types only, no value at run time): a run's record of
 * every result leaves async units out (`ReactorOutput`), as the runtime does.
 */
export declare const ASYNC_UNIT: unique symbol;

/** An async step takes a step's options but `undo`, and is never undone. */
const ASYNC_STEP_SHAPE: BodyShape = {
  kind: 'asyncStep',
  inlineOptions: new Set(['args', 'input', 'waitFor', 'run', 'compensate', 'output', 'retries']),
  useOptions: new Set(['args', 'waitFor', 'retries']),
  tracked: false,
};
const ASYNC_REACTOR_OPTIONS = new Set(['args', 'waitFor']);
const REMOVED_ASYNC_REACTOR_OPTIONS: Readonly<Record<string, string>> = {
  ...REMOVED_STEP_OPTIONS,
  retries: "an async reactor is never retried as a whole; declare retries on the child's steps",
};

function unitBody(): never {
  throw new Error('an async reactor step has no body: the runtime dispatches its child reactor');
}

/** Validate an `asyncStep` as written: a step body run in its own job, never undone by its owner. */
export function compileAsyncStep(raw: RawStep, order: number, reactor: string, resolveArgs: ResolveArgs): Omit<CompiledStep, 'index'> {
  const where = `reactor "${reactor}" asyncStep "${raw.name}"`;
  checkName('step', raw.name, `reactor "${reactor}"`);
  const def = raw.definition;
  if (raw.config['undo'] !== undefined) {
    throw new DefinitionError(`${where}: an async step takes no undo; its owner never undoes it (it compensates itself once after its last attempt fails: declare compensate)`, {
      reactor,
      step: raw.name,
    });
  }
  if (def !== undefined && def.handlers.undo !== undefined) {
    process.emitWarning(`${where}: step definition "${def.name}" declares undo, which never runs for an async step (its owner never undoes it)`, { code: 'XREACTOR_ASYNC_UNDO' });
  }
  return compileBodyStep(raw, order, resolveArgs, where, ASYNC_STEP_SHAPE);
}

/** Validate an `asyncReactor` as written: a child reactor dispatched as an independent execution. */
export function compileAsyncReactor(raw: RawStep, order: number, reactor: string, resolveArgs: ResolveArgs): Omit<CompiledStep, 'index'> {
  const where = `reactor "${reactor}" asyncReactor "${raw.name}"`;
  checkName('step', raw.name, `reactor "${reactor}"`);
  checkOptions(raw.config, ASYNC_REACTOR_OPTIONS, REMOVED_ASYNC_REACTOR_OPTIONS, where);
  const child = raw.compose!;
  if (child.kind !== 'reactor' || !Array.isArray(child.plan)) {
    throw new DefinitionError(`${where}: the child must be a built reactor definition (call .build() on it)`);
  }
  const args = resolveArgs(raw.config['args']);
  checkArgSources(args, where);
  return {
    name: raw.name,
    kind: 'asyncReactor',
    child,
    order,
    args,
    contract: undefined,
    output: undefined,
    run: unitBody,
    compensate: undefined,
    undo: undefined,
    retry: NO_RETRY,
    reads: resultDependencies(args),
    waitFor: checkWaitFor(raw.config['waitFor'], where),
    tracked: false,
    definitionName: child.name,
  };
}

/** Whether a compiled step is an async unit (`asyncStep` or `asyncReactor`). */
export function isAsyncUnit(step: Pick<CompiledStep, 'kind'>): boolean {
  return step.kind === 'asyncStep' || step.kind === 'asyncReactor';
}
