/**
 * Definition-time checks shared by every kind of step: names, options, handlers, `waitFor`.
 * Each throws a {@link DefinitionError} (or {@link DeprecatedOptionError}) naming where and the fix.
 */
import { DefinitionError, DeprecatedOptionError } from '../errors/index.js';
import { preview } from '../internal/preview.js';
import type { XreactorErrorOptions } from '../errors/index.js';
import type { ArgsRecord } from './sources.js';
import { ArgumentSource, elementSourceKey } from './sources.js';

/** Prefix reserved for the library's own event and step names. */
export const RESERVED_PREFIX = 'xreactor';

const NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const RESERVED_NAMES = new Set(Object.getOwnPropertyNames(Object.prototype).concat(['prototype']));

/** Options every kind of step once had, and what replaces them. */
export const REMOVED_STEP_OPTIONS: Readonly<Record<string, string>> = {
  where: 'return skip(value) or halt(reason) from the step body instead',
  guard: 'return skip(value) or halt(reason) from the step body instead',
  async: "use the reactor's background option, or asyncStep",
  retryDefaults: 'declare retries on each step',
};

/** Reject an invalid or reserved reactor or step name. */
export function checkName(kind: string, name: unknown, where: string): asserts name is string {
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    throw new DefinitionError(
      `${where}: ${kind} name ${JSON.stringify(name)} is invalid; use letters, digits, _ or - (starting with a letter or _)`,
    );
  }
  if (name.startsWith(RESERVED_PREFIX) || RESERVED_NAMES.has(name)) {
    throw new DefinitionError(`${where}: ${kind} name "${name}" is reserved; choose another name`);
  }
}

/** Reject removed options (naming their replacement) and unknown ones (listing the known ones). */
export function checkOptions(
  options: Readonly<Record<string, unknown>>,
  allowed: ReadonlySet<string>,
  removed: Readonly<Record<string, string>>,
  where: string,
  errorOptions: XreactorErrorOptions = {},
): void {
  for (const key of Object.keys(options)) {
    const replacement = removed[key];
    if (replacement !== undefined) {
      throw new DeprecatedOptionError(`${where}: option "${key}" was removed; ${replacement}`, errorOptions);
    }
    if (!allowed.has(key)) {
      const known = allowed.size === 0 ? 'it takes no options besides name, input and version' : `known options are ${[...allowed].join(', ')}`;
      throw new DefinitionError(`${where}: unknown option "${key}"; ${known}`, errorOptions);
    }
  }
}

/** Reject a handler that is not a function (or is missing when required). */
export function checkFunction(value: unknown, what: string, where: string, required: boolean): void {
  if (value === undefined && !required) return;
  if (typeof value !== 'function') {
    throw new DefinitionError(`${where}: ${what} must be a function${required ? ' (it is required)' : ''}`);
  }
}

/** The declared `waitFor`, checked to be an array of step names (names are resolved later). */
export function checkWaitFor(value: unknown, where: string, errorOptions: XreactorErrorOptions = {}): string[] {
  const waitFor = value ?? [];
  if (!Array.isArray(waitFor) || !waitFor.every((w) => typeof w === 'string')) {
    throw new DefinitionError(`${where}: waitFor must be an array of step names`, errorOptions);
  }
  return [...waitFor];
}

/**
 * Check what an `args` factory gave: a record whose every value is a source (a constant, or a
 * helper's property such as `input.n` for `input('n')`, is refused by name).
 */
export function checkSources(args: ArgsRecord | undefined, where: string, errorOptions: XreactorErrorOptions = {}): void {
  if (args === undefined) return;
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new DefinitionError(`${where}: args must give a record of sources, e.g. ({ input, result }) => ({ id: input('id'), total: result('price') }); got ${preview(args)}`, errorOptions);
  }
  for (const [key, source] of Object.entries(args)) {
    if ((source as unknown) instanceof ArgumentSource) continue;
    throw new DefinitionError(
      `${where}: argument "${key}" is ${preview(source)}, not a source: build it with input('name'), result('step') or value(constant) ` +
        "(the helpers are functions: input('n', 'path'), not input.n)",
      errorOptions,
    );
  }
}

/** {@link checkSources}, and no `element()` outside a map's `args` (a step's, a compose's, a map's source...). */
export function checkArgSources(args: ArgsRecord | undefined, where: string, errorOptions: XreactorErrorOptions = {}): void {
  checkSources(args, where, errorOptions);
  if (elementSourceKey(args) === undefined) return;
  throw new DefinitionError(`${where}: element() is only available in a map's args; read input(...), result(...) or value(...) here`, errorOptions);
}

