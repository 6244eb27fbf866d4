/**
 * Validation of a map step at `build()`: one {@link DefinitionError} per mistake, naming the
 * reactor, the map and the fix.
 */
import { DefinitionError } from '../errors/index.js';
import type { XreactorErrorOptions } from '../errors/index.js';
import { ArgumentSource, resultDependencies } from './sources.js';
import type { AnyReactorDefinition, CompiledMap, CompiledMapSource, CompiledStep, PageFn, RawStep, ResolveArgs } from './compiled.js';
import type { PagedSource } from './map.js';
import { NO_RETRY } from './retry.js';
import { checkName, checkArgSources, checkOptions, checkSources, checkWaitFor, REMOVED_STEP_OPTIONS } from './checks.js';

/** Elements started per throw (and items fetched per page) when a map declares no `batchSize`. */
export const DEFAULT_MAP_BATCH_SIZE = 50;

const MAP_OPTIONS = new Set(['source', 'args', 'fanOut', 'batchSize', 'atomic', 'collect', 'undoAll', 'waitFor']);
const REMOVED_MAP_OPTIONS: Readonly<Record<string, string>> = {
  ...REMOVED_STEP_OPTIONS,
  retries: "a map is never retried as a whole; declare retries on the element's steps",
  failFast: 'use atomic (same meaning)',
};
const NOT_MAP_OPTIONS: Readonly<Record<string, string>> = {
  run: 'each element runs the element reactor',
  input: "each element's input is validated by the element reactor's input schema",
  compensate: "its rollback is its elements' undos (declare undoAll for one bulk undo)",
  undo: "its rollback is its elements' undos (declare undoAll for one bulk undo)",
};
const SOURCE_SHAPE = 'a function of the sources returning one source, or paged({ page, count? })';

function refuseMap(where: string, at: XreactorErrorOptions, why: string): never {
  throw new DefinitionError(`${where}: ${why}`, at);
}

function mapBody(): never {
  throw new Error('a map step has no body: the runtime runs its element reactor once per item');
}

function isPagedSource(value: unknown): value is PagedSource {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'paged-source';
}

function isReactor(value: unknown): value is AnyReactorDefinition {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'reactor' && Array.isArray((value as { plan?: unknown }).plan);
}

/** The dotted path of the first interrupt in `definition` or its composed children and map elements. */
function findInterrupt(definition: AnyReactorDefinition): string | undefined {
  for (const step of definition.plan) {
    if (step.kind === 'interrupt') return step.name;
    const inner = step.child === undefined ? undefined : findInterrupt(step.child);
    if (inner !== undefined) return `${step.name}.${inner}`;
  }
  return undefined;
}

/** Validate a map step as written. */
export function compileMap(raw: RawStep, order: number, reactor: string, resolveArgs: ResolveArgs): Omit<CompiledStep, 'index'> {
  const where = `reactor "${reactor}" map "${raw.name}"`;
  const at: XreactorErrorOptions = { reactor, step: raw.name };
  const refuse = (why: string): never => refuseMap(where, at, why);
  checkName('step', raw.name, `reactor "${reactor}"`);
  for (const [key, why] of Object.entries(NOT_MAP_OPTIONS)) {
    if (raw.config[key] !== undefined) refuse(`a map takes no ${key}; ${why}`);
  }
  checkOptions(raw.config, MAP_OPTIONS, REMOVED_MAP_OPTIONS, where, at);
  const element = raw.map?.element;
  if (!isReactor(element)) return refuse('the element reactor must be a built reactor definition (call .build() on it)');
  if (element.handoff !== undefined) {
    refuse(`element reactor "${element.name}" declares background; an element runs as part of its map (remove .background(...); fanOut: true runs elements in workers)`);
  }
  const interrupt = findInterrupt(element);
  if (interrupt !== undefined) {
    refuse(`interrupt "${interrupt}" of element reactor "${element.name}" is not supported inside a map element; declare it in reactor "${reactor}" before or after the map`);
  }
  const source = compileSource(raw.config['source'], where, at, resolveArgs);
  const argsFactory = raw.config['args'];
  if (argsFactory !== undefined && typeof argsFactory !== 'function') {
    refuse("args must be a function of the sources, e.g. ({ element, input }) => ({ id: element('id'), currency: input('currency') })");
  }
  const elementArgs = resolveArgs(argsFactory);
  checkSources(elementArgs, where, at);
  const batchSize = raw.config['batchSize'] === undefined ? DEFAULT_MAP_BATCH_SIZE : raw.config['batchSize'];
  if (typeof batchSize !== 'number' || !Number.isSafeInteger(batchSize) || batchSize < 1) {
    refuse(`batchSize must be a positive integer, got ${typeof batchSize === 'number' ? String(batchSize) : JSON.stringify(batchSize) ?? typeof batchSize}`);
  }
  const flag = (key: 'fanOut' | 'atomic', fallback: boolean): boolean => {
    const value = raw.config[key] === undefined ? fallback : raw.config[key];
    if (typeof value !== 'boolean') refuse(`${key} must be true or false, got ${JSON.stringify(value) ?? typeof value}`);
    return value as boolean;
  };
  const fanOut = flag('fanOut', false);
  const atomic = flag('atomic', true);
  const collect = raw.config['collect'];
  if (collect !== undefined && typeof collect !== 'function') refuse('collect must be a function (results, ctx) => value');
  const undoAll = raw.config['undoAll'];
  if (undoAll !== undefined && typeof undoAll !== 'function') refuse('undoAll must be a function (completed, ctx) => void, called once with every completed element');
  const waitFor = checkWaitFor(raw.config['waitFor'], where, at);
  const map: CompiledMap = Object.freeze({
    element,
    source,
    elementArgs,
    fanOut,
    batchSize: batchSize as number,
    atomic,
    collect: collect as CompiledMap['collect'],
    undoAll: undoAll as CompiledMap['undoAll'],
  });
  const sourceArgs = source.args;
  return {
    name: raw.name,
    kind: 'map',
    child: element,
    map,
    order,
    args: undefined,
    contract: undefined,
    output: undefined,
    run: mapBody,
    compensate: undefined,
    undo: undefined,
    retry: NO_RETRY,
    reads: [...new Set([...resultDependencies(sourceArgs), ...resultDependencies(elementArgs)])],
    waitFor,
    tracked: true,
    definitionName: element.name,
  };
}

function compileSource(source: unknown, where: string, at: XreactorErrorOptions, resolveArgs: ResolveArgs): CompiledMapSource {
  const refuse = (why: string): never => refuseMap(where, at, why);
  if (source === undefined) return refuse("source is required: ({ input }) => input('items'), ({ result }) => result('load'), or paged({ page })");
  if (isPagedSource(source)) {
    if (typeof source.page !== 'function') refuse('paged source: page must be a function (offset, limit, ctx) => items');
    if (source.count !== undefined && typeof source.count !== 'function') refuse('paged source: count must be a function (ctx) => number of items');
    if (source.args !== undefined && typeof source.args !== 'function') refuse("paged source: args must be a function of the sources, e.g. ({ input }) => ({ customer: input('customerId') })");
    const args = resolveArgs(source.args);
    checkArgSources(args, `${where} paged source`, at);
    return { kind: 'paged', page: source.page as PageFn, count: source.count, args };
  }
  if (typeof source !== 'function') return refuse(`source must be ${SOURCE_SHAPE}`);
  const args = resolveArgs((helpers: unknown) => ({ items: (source as (helpers: unknown) => unknown)(helpers) }))!;
  if (!((args['items'] as unknown) instanceof ArgumentSource)) refuse(`source must be ${SOURCE_SHAPE}; this function returned no source`);
  checkArgSources(args, `${where} source`, at);
  return { kind: 'source', args };
}

/**
 * The path (step names from `definition`) of its first map step, looking into composed children
 * too; undefined when it has none.
 */
export function findMapStep(definition: AnyReactorDefinition): readonly string[] | undefined {
  for (const step of definition.plan) {
    if (step.kind === 'map') return [step.name];
    const inner = step.child === undefined ? undefined : findMapStep(step.child);
    if (inner !== undefined) return [step.name, ...inner];
  }
  return undefined;
}
