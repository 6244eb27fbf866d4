import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, createWorker, DefinitionError, DependencyError, DeprecatedOptionError, defineReactor, paged, toGraph } from '../../src/index.js';
import type { AnyReactorDefinition, ArgumentSource, CompiledStep, SourceHelpers } from '../../src/index.js';
import { createInProcessQueue } from '../../src/testing/index.js';

type Sources = SourceHelpers<any, any> & { element: (path?: string) => ArgumentSource<any> };

/** The builder without its compile-time checks, to write definitions the types reject. */
interface UncheckedBuilder {
  step(name: unknown, config: object): UncheckedBuilder;
  compose(name: unknown, child: unknown, use?: object): UncheckedBuilder;
  interrupt(name: unknown, options?: object): UncheckedBuilder;
  map(name: unknown, element: unknown, options?: unknown): UncheckedBuilder;
  returns(step: string): UncheckedBuilder;
  build(): AnyReactorDefinition;
}

function unchecked(name = 'billing'): UncheckedBuilder {
  return (defineReactor as (options: object) => unknown)({ name }) as UncheckedBuilder;
}

/** The error `build()` throws; fails the test when it does not throw. */
function buildError(builder: UncheckedBuilder): Error {
  try {
    builder.build();
  } catch (error) {
    if (error instanceof Error) return error;
    throw error;
  }
  throw new Error('expected build() to throw');
}

const run = () => undefined;
const silent = pino({ level: 'silent' });

const chargeOne = defineReactor({ name: 'charge-one', input: z.object({ orderId: z.string(), currency: z.string() }) })
  .step('reserve', { args: ({ input }) => ({ id: input('orderId') }), run: ({ id }) => ({ hold: id }), undo: run })
  .step('charge', { args: ({ result, input }) => ({ hold: result('reserve'), currency: input('currency') }), run: () => ({ cents: 100 }) })
  .returns('charge')
  .build();

const orders = z.object({ orders: z.array(z.object({ id: z.string() })), currency: z.string() });
const items = ({ input }: Sources) => input('orders');

/** A map over `orders` with `options` on top of a valid source. */
function mapWith(options: Record<string, unknown>): UncheckedBuilder {
  return unchecked().map('charges', chargeOne, { source: items, ...options });
}

/** A map of `element` over `orders`. */
function mapOf(element: unknown): UncheckedBuilder {
  return unchecked().map('charges', element, { source: items });
}

describe('map build(): names', () => {
  it('rejects an invalid map name as for any step', () => {
    const error = buildError(unchecked().map('1st', chargeOne, { source: items }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "billing": step name "1st" is invalid; use letters, digits, _ or - (starting with a letter or _)');
  });

  it('rejects a reserved map name as for any step', () => {
    const error = buildError(unchecked().map('xreactorMap', chargeOne, { source: items }));
    expect(error.message).toBe('reactor "billing": step name "xreactorMap" is reserved; choose another name');
  });

  it('rejects a map name already used by a step', () => {
    const error = buildError(unchecked().step('charges', { run }).map('charges', chargeOne, { source: items }));
    expect(error.message).toBe('reactor "billing": step "charges" is defined twice; step names must be unique');
  });
});

describe('map build(): the element reactor', () => {
  it.each<[string, unknown]>([
    ['a builder', defineReactor({ name: 'one' }).step('a', { run })],
    ['a plain object', { name: 'one' }],
    ['undefined', undefined],
  ])('rejects %s as the element reactor', (_, element) => {
    const error = buildError(mapOf(element));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error).toMatchObject({
      reactor: 'billing',
      step: 'charges',
      message: 'reactor "billing" map "charges": the element reactor must be a built reactor definition (call .build() on it)',
    });
  });

  it('rejects an element reactor that declares background', () => {
    const element = defineReactor({ name: 'one' }).step('a', { run }).background({ all: true }).build();
    const error = buildError(mapOf(element));
    expect(error.message).toBe(
      'reactor "billing" map "charges": element reactor "one" declares background; an element runs as part of its map (remove .background(...); fanOut: true runs elements in workers)',
    );
  });

  it('rejects an element reactor with an interrupt', () => {
    const element = defineReactor({ name: 'one' }).step('a', { run }).interrupt('approval', { waitFor: ['a'] }).build();
    const error = buildError(mapOf(element));
    expect(error.message).toBe(
      'reactor "billing" map "charges": interrupt "approval" of element reactor "one" is not supported inside a map element; declare it in reactor "billing" before or after the map',
    );
  });

  it('rejects an interrupt in a composed child of the element reactor, at any depth, naming its path', () => {
    const inner = defineReactor({ name: 'inner' }).interrupt('approval').build();
    const middle = defineReactor({ name: 'middle' }).compose('review', inner).build();
    const element = defineReactor({ name: 'one' }).step('a', { run }).compose('sign', middle).build();
    const error = buildError(mapOf(element));
    expect(error.message).toBe(
      'reactor "billing" map "charges": interrupt "sign.review.approval" of element reactor "one" is not supported inside a map element; declare it in reactor "billing" before or after the map',
    );
  });
});

describe('map build(): source', () => {
  it('requires a source', () => {
    const error = buildError(unchecked().map('charges', chargeOne, {}));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(
      "reactor \"billing\" map \"charges\": source is required: ({ input }) => input('items'), ({ result }) => result('load'), or paged({ page })",
    );
  });

  it('requires options at all', () => {
    expect(buildError(unchecked().map('charges', chargeOne)).message).toContain('source is required');
  });

  it.each<[string, unknown]>([
    ['a string', 'orders'],
    ['an array', [1, 2]],
    ['a bare source', { spec: { kind: 'input', name: 'orders', path: [], transforms: [] } }],
    ['paged options without paged()', { page: () => [] }],
  ])('rejects %s as the source', (_, source) => {
    const error = buildError(mapWith({ source }));
    expect(error.message).toBe('reactor "billing" map "charges": source must be a function of the sources returning one source, or paged({ page, count? })');
  });

  it('rejects a source function that returns no source', () => {
    const error = buildError(mapWith({ source: () => ['a', 'b'] }));
    expect(error.message).toBe(
      'reactor "billing" map "charges": source must be a function of the sources returning one source, or paged({ page, count? }); this function returned no source',
    );
  });

  it('rejects element() in the source', () => {
    const error = buildError(mapWith({ source: ({ element }: Sources) => element('orders') }));
    expect(error).toMatchObject({
      step: 'charges',
      message: "reactor \"billing\" map \"charges\" source: element() is only available in a map's args; read input(...), result(...) or value(...) here",
    });
  });

  it('rejects a paged source whose page is not a function', () => {
    const error = buildError(mapWith({ source: paged({ page: 'SELECT *' as never }) }));
    expect(error.message).toBe('reactor "billing" map "charges": paged source: page must be a function (offset, limit, ctx) => items');
  });

  it('rejects a paged source whose count is given and not a function', () => {
    const error = buildError(mapWith({ source: paged({ page: () => [], count: 10 as never }) }));
    expect(error.message).toBe('reactor "billing" map "charges": paged source: count must be a function (ctx) => number of items');
  });

  it('rejects a paged source whose args are not a function', () => {
    const error = buildError(mapWith({ source: paged({ page: () => [], args: { a: 1 } as never }) }));
    expect(error.message).toBe(
      "reactor \"billing\" map \"charges\": paged source: args must be a function of the sources, e.g. ({ input }) => ({ customer: input('customerId') })",
    );
  });

  it('rejects element() in the args of a paged source', () => {
    const error = buildError(mapWith({ source: paged({ page: () => [], args: (({ element }: Sources) => ({ id: element('id') })) as never }) }));
    expect(error.message).toBe(
      "reactor \"billing\" map \"charges\" paged source: element() is only available in a map's args; read input(...), result(...) or value(...) here",
    );
  });
});

describe('map build(): element() outside a map', () => {
  it('rejects element() in a step’s args', () => {
    const error = buildError(unchecked().step('s', { args: ({ element }: Sources) => ({ id: element('id') }), run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe("reactor \"billing\" step \"s\": element() is only available in a map's args; read input(...), result(...) or value(...) here");
  });

  it('rejects element() in a compose’s args', () => {
    const error = buildError(unchecked().compose('c', chargeOne, { args: ({ element }: Sources) => ({ orderId: element() }) }));
    expect(error.message).toBe("reactor \"billing\" compose \"c\": element() is only available in a map's args; read input(...), result(...) or value(...) here");
  });

  it('rejects element() in an interrupt’s correlation id', () => {
    const error = buildError(unchecked().interrupt('i', { correlationId: ({ element }: Sources) => element('id') }));
    expect(error.message).toBe(
      "reactor \"billing\" interrupt \"i\" correlationId: element() is only available in a map's args; read input(...), result(...) or value(...) here",
    );
  });
});

describe('map build(): args', () => {
  it('rejects args that are not a function', () => {
    const error = buildError(mapWith({ args: { orderId: 'x' } }));
    expect(error.message).toBe(
      "reactor \"billing\" map \"charges\": args must be a function of the sources, e.g. ({ element, input }) => ({ id: element('id'), currency: input('currency') })",
    );
  });

  it('rejects args that return something other than sources', () => {
    const error = buildError(mapWith({ args: ({ element }: Sources) => ({ orderId: element('id'), currency: 'EUR' }) }));
    expect(error.message).toBe(
      'reactor "billing" map "charges": argument "currency" is "EUR", not a source: build it with input(\'name\'), result(\'step\') or value(constant) ' +
        "(the helpers are functions: input('n', 'path'), not input.n)",
    );
  });
});

describe('map build(): options', () => {
  it.each<[unknown, string]>([
    [0, '0'],
    [-5, '-5'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    [2 ** 60, String(2 ** 60)],
    ['50', '"50"'],
    [null, 'null'],
  ])('rejects batchSize %j', (batchSize, got) => {
    const error = buildError(mapWith({ batchSize }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(`reactor "billing" map "charges": batchSize must be a positive integer, got ${got}`);
  });

  it.each(['fanOut', 'atomic'])('rejects a %s that is not a boolean', (key) => {
    const error = buildError(mapWith({ [key]: 'yes' }));
    expect(error.message).toBe(`reactor "billing" map "charges": ${key} must be true or false, got "yes"`);
  });

  it('rejects a collect that is not a function', () => {
    const error = buildError(mapWith({ collect: 'sum' }));
    expect(error.message).toBe('reactor "billing" map "charges": collect must be a function (results, ctx) => value');
  });

  it('rejects an undoAll that is not a function', () => {
    const error = buildError(mapWith({ undoAll: true }));
    expect(error.message).toBe('reactor "billing" map "charges": undoAll must be a function (completed, ctx) => void, called once with every completed element');
  });

  it('rejects retries with DeprecatedOptionError: a map is never retried as a whole', () => {
    const error = buildError(mapWith({ retries: { maxAttempts: 3 } }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(
      'reactor "billing" map "charges": option "retries" was removed; a map is never retried as a whole; declare retries on the element\'s steps',
    );
  });

  it('rejects failFast with DeprecatedOptionError naming atomic', () => {
    const error = buildError(mapWith({ failFast: true }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error).toMatchObject({ code: 'definition_invalid', reactor: 'billing', step: 'charges' });
    expect(error.message).toBe('reactor "billing" map "charges": option "failFast" was removed; use atomic (same meaning)');
  });

  it.each<[string, string]>([
    ['async', "use the reactor's background option, or asyncStep"],
    ['where', 'return skip(value) or halt(reason) from the step body instead'],
    ['guard', 'return skip(value) or halt(reason) from the step body instead'],
    ['retryDefaults', 'declare retries on each step'],
  ])('rejects the removed option %s with its replacement', (key, replacement) => {
    const error = buildError(mapWith({ [key]: true }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(`reactor "billing" map "charges": option "${key}" was removed; ${replacement}`);
  });

  it.each<[string, string]>([
    ['compensate', "a map takes no compensate; its rollback is its elements' undos (declare undoAll for one bulk undo)"],
    ['undo', "a map takes no undo; its rollback is its elements' undos (declare undoAll for one bulk undo)"],
    ['run', 'a map takes no run; each element runs the element reactor'],
    ['input', "a map takes no input; each element's input is validated by the element reactor's input schema"],
  ])('rejects %s: a map has no body and no undo of its own', (key, why) => {
    const error = buildError(mapWith({ [key]: run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error).not.toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(`reactor "billing" map "charges": ${why}`);
  });

  it('rejects an unknown option, listing the known ones', () => {
    const error = buildError(mapWith({ concurrency: 4 }));
    expect(error.message).toBe(
      'reactor "billing" map "charges": unknown option "concurrency"; known options are source, args, fanOut, batchSize, atomic, collect, undoAll, waitFor',
    );
  });

  it('rejects a waitFor that is not an array', () => {
    const error = buildError(mapWith({ waitFor: 'open' }));
    expect(error.message).toBe('reactor "billing" map "charges": waitFor must be an array of step names');
  });
});

describe('map build(): dependencies', () => {
  it.each<[string, Record<string, unknown>]>([
    ['its source', { source: ({ result }: Sources) => result('load') }],
    ['its args', { args: ({ element, result }: Sources) => ({ orderId: element('id'), currency: result('load') }) }],
    ['its paged source args', { source: paged({ page: () => [], args: ({ result }: SourceHelpers<any, any>) => ({ customer: result('load') }) }) }],
  ])('rejects result() of an undeclared step in %s', (_, options) => {
    const error = buildError(mapWith(options));
    expect(error).toBeInstanceOf(DependencyError);
    expect(error).toMatchObject({ reactor: 'billing', step: 'charges', message: 'step "charges" reads result("load"), which reactor "billing" does not declare' });
  });

  it('rejects waitFor an undeclared step', () => {
    const error = buildError(mapWith({ waitFor: ['open'] }));
    expect(error).toBeInstanceOf(DependencyError);
    expect(error.message).toBe('step "charges" waits for "open", which reactor "billing" does not declare');
  });
});

describe('map compile', () => {
  const billing = defineReactor({ name: 'billing', input: orders })
    .step('open', { run: () => ({ batch: 'b1' }) })
    .map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') }),
    })
    .build();
  const charges = billing.steps.find((s) => s.name === 'charges')!;

  it('compiles a map step with the element reactor as its child, tracked, never retried as a whole', () => {
    expect(charges).toMatchObject({
      name: 'charges',
      kind: 'map',
      child: chargeOne,
      args: undefined,
      contract: undefined,
      output: undefined,
      compensate: undefined,
      undo: undefined,
      retry: { maxAttempts: 1 },
      reads: [],
      waitFor: [],
      tracked: true,
      definitionName: 'charge-one',
      order: 1,
      index: 1,
    });
    expect(() => charges.run(undefined, undefined as never)).toThrow('a map step has no body');
    expect(Object.isFrozen(charges)).toBe(true);
  });

  it('fills the defaults: inline, batchSize 50, atomic, no collect, no undoAll', () => {
    expect(charges.map).toMatchObject({ element: chargeOne, fanOut: false, batchSize: 50, atomic: true, collect: undefined, undoAll: undefined });
    expect(Object.isFrozen(charges.map)).toBe(true);
  });

  it('keeps the source as one source record { items } and the element args with their element() sources', () => {
    const map = charges.map!;
    expect(map.source.kind).toBe('source');
    expect(map.source.args?.['items']?.spec).toStrictEqual({ kind: 'input', name: 'orders', path: [], transforms: [] });
    expect(map.elementArgs?.['orderId']?.spec).toStrictEqual({ kind: 'element', path: ['id'], transforms: [] });
    expect(map.elementArgs?.['currency']?.spec).toStrictEqual({ kind: 'input', name: 'currency', path: [], transforms: [] });
  });

  it('keeps element() without a path as the whole item, and its transforms', () => {
    const double = (x: unknown) => x;
    const def = unchecked()
      .map('m', chargeOne, { source: items, args: ({ element }: Sources) => ({ orderId: element(), currency: element('a.b').transform(double) }) })
      .build();
    const map = def.steps[0]!.map!;
    expect(map.elementArgs?.['orderId']?.spec).toStrictEqual({ kind: 'element', path: [], transforms: [] });
    expect(map.elementArgs?.['currency']?.spec).toStrictEqual({ kind: 'element', path: ['a', 'b'], transforms: [double] });
  });

  it('keeps the declared options', () => {
    const collect = () => 1;
    const undoAll = () => undefined;
    const def = unchecked().map('m', chargeOne, { source: items, fanOut: true, batchSize: 7, atomic: false, collect, undoAll }).build();
    expect(def.steps[0]!.map).toMatchObject({ fanOut: true, batchSize: 7, atomic: false, collect, undoAll, elementArgs: undefined });
  });

  it('compiles a paged source with its page, count and resolved args', () => {
    const page = () => [];
    const count = () => 0;
    const def = unchecked()
      .step('load', { run })
      .map('m', chargeOne, { source: paged({ page, count, args: ({ result }: SourceHelpers<any, any>) => ({ customer: result('load') }) }) })
      .build();
    const source = def.steps[1]!.map!.source;
    expect(source).toMatchObject({ kind: 'paged', page, count });
    expect(source.args?.['customer']?.spec).toStrictEqual({ kind: 'result', name: 'load', path: [], transforms: [] });
    expect(def.steps[1]!.reads).toStrictEqual(['load']);
  });

  it('compiles a paged source without count or args', () => {
    const page = () => [];
    const def = unchecked().map('m', chargeOne, { source: paged({ page }) }).build();
    expect(def.steps[0]!.map!.source).toStrictEqual({ kind: 'paged', page, count: undefined, args: undefined });
  });

  it('reads the results its source and args read, once each, and runs after them and its waitFor', () => {
    const def = unchecked()
      .map('m', chargeOne, {
        source: ({ result }: Sources) => result('load'),
        args: ({ element, result }: Sources) => ({ orderId: element('id'), currency: result('rates', 'eur'), again: result('load') }),
        waitFor: ['open'],
      })
      .step('open', { run })
      .step('load', { waitFor: ['open'], run })
      .step('rates', { run })
      .build();
    const map = def.steps.find((s) => s.name === 'm')!;
    expect(map.reads).toStrictEqual(['load', 'rates']);
    expect(map.waitFor).toStrictEqual(['open']);
    expect(def.plan.map((s: CompiledStep) => s.name)).toStrictEqual(['open', 'rates', 'load', 'm']);
  });

  it('lets later steps read the map’s result and return it', () => {
    const def = unchecked()
      .map('m', chargeOne, { source: items })
      .step('after', { args: ({ result }: Sources) => ({ charged: result('m') }), run })
      .returns('m')
      .build();
    expect(def.steps[1]!.reads).toStrictEqual(['m']);
    expect(def.returns).toBe('m');
  });
});

describe('map toGraph', () => {
  it('shows a map node with its settings and the element reactor’s graph nested', () => {
    const def = unchecked()
      .step('load', { run })
      .map('m', chargeOne, { source: ({ result }: Sources) => result('load'), fanOut: true, batchSize: 10, collect: () => 0 })
      .build();
    const graph = toGraph(def);
    expect(JSON.parse(JSON.stringify(graph))).toStrictEqual(graph);
    expect(graph.steps[0]).not.toHaveProperty('map');
    expect(graph.steps[1]).toStrictEqual({
      name: 'm',
      type: 'map',
      child: 'charge-one',
      reads: ['load'],
      waitFor: [],
      planIndex: 1,
      hasCompensate: false,
      hasUndo: false,
      hasInputContract: false,
      hasOutputContract: false,
      retry: { maxAttempts: 1, backoff: 'exponential', baseDelayMs: 0 },
      definition: 'charge-one',
      map: { element: toGraph(chargeOne), source: 'source', fanOut: true, batchSize: 10, atomic: true, hasCollect: true, hasUndoAll: false },
    });
  });

  it('names a paged source', () => {
    const graph = toGraph(unchecked().map('m', chargeOne, { source: paged({ page: () => [] }) }).build());
    expect(graph.steps[0]!.map?.source).toBe('paged');
  });
});

describe('fan-out maps register', () => {
  const billing = unchecked().step('open', { run }).map('charges', chargeOne, { source: items, fanOut: true }).build();

  it('registers a reactor with a fan-out map step, and one composing it', () => {
    expect(() => createRuntime({ logger: silent, reactors: [billing] })).not.toThrow();
    const outer = defineReactor({ name: 'outer' }).compose('bill', billing).build();
    expect(() => createWorker({ logger: silent, store: createMemoryStore(), queue: createInProcessQueue(), reactors: [outer] })).not.toThrow();
  });

  it('registers a reactor with an inline map step', () => {
    const inline = unchecked().step('open', { run }).map('charges', chargeOne, { source: items }).build();
    expect(() => createRuntime({ logger: silent, reactors: [inline] })).not.toThrow();
  });
});
