/**
 * Validation of a step that has a body of its own, inline or from a reusable definition: a
 * `step`, or an `asyncStep` (whose body runs in its unit's job). Both kinds share it; they differ
 * in the options they take and in whether they are undone.
 */
import { DefinitionError } from '../errors/index.js';
import type { AnySchema } from './step.js';
import type { CompiledStep, RawStep, ResolveArgs } from './compiled.js';
import { compileRetryOptions } from './retry.js';
import { resultDependencies } from './sources.js';
import { checkFunction, checkArgSources, checkOptions, checkWaitFor, REMOVED_STEP_OPTIONS } from './checks.js';

/** What tells the kinds of body steps apart. */
export interface BodyShape {
  readonly kind: 'step' | 'asyncStep';
  /** Options of an inline one. */
  readonly inlineOptions: ReadonlySet<string>;
  /** Options of one using a reusable definition. */
  readonly useOptions: ReadonlySet<string>;
  /** Completion pushes it on the undo stack (and it takes an undo). */
  readonly tracked: boolean;
}

/** Validate a body step as written (its name checked already); `where` names it in errors. */
export function compileBodyStep(raw: RawStep, order: number, resolveArgs: ResolveArgs, where: string, shape: BodyShape): Omit<CompiledStep, 'index'> {
  const def = raw.definition;
  checkOptions(raw.config, def === undefined ? shape.inlineOptions : shape.useOptions, REMOVED_STEP_OPTIONS, where);
  const handlers = (def?.handlers ?? raw.config) as Record<string, unknown>;
  checkFunction(handlers['run'], 'run', where, true);
  checkFunction(handlers['compensate'], 'compensate', where, false);
  if (shape.tracked) checkFunction(handlers['undo'], 'undo', where, false);
  if (def !== undefined && def.handlers.retries !== undefined && raw.config['retries'] !== undefined) {
    throw new DefinitionError(
      `${where}: step definition "${def.name}" declares its own retries; define a variant with defineStep({ ...}) to use a different policy`,
    );
  }
  const retries = (raw.config['retries'] ?? handlers['retries']) as Parameters<typeof compileRetryOptions>[0];
  const args = resolveArgs(raw.config['args']);
  checkArgSources(args, where);
  const waitFor = checkWaitFor(raw.config['waitFor'], where);
  return {
    name: raw.name,
    kind: shape.kind,
    child: undefined,
    order,
    args,
    contract: def === undefined ? (raw.config['input'] as AnySchema | undefined) : def.input,
    output: handlers['output'] as AnySchema | undefined,
    run: handlers['run'] as CompiledStep['run'],
    compensate: handlers['compensate'] as CompiledStep['compensate'],
    undo: shape.tracked ? (handlers['undo'] as CompiledStep['undo']) : undefined,
    retry: compileRetryOptions(retries, where),
    reads: resultDependencies(args),
    waitFor,
    tracked: shape.tracked,
    definitionName: def?.name,
  };
}
