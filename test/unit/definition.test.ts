import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { z } from 'zod';
import {
  DefinitionError,
  DependencyError,
  DeprecatedOptionError,
  defineReactor,
  defineStep,
  toGraph,
  reactorMachine,
} from '../../src/index.js';
import type { AnyReactorDefinition } from '../../src/index.js';
import { serializeError } from '../../src/serialization/index.js';

/** The builder without its compile-time checks, to write definitions the types reject. */
interface UncheckedBuilder {
  step(name: unknown, config: object, use?: object): UncheckedBuilder;
  returns(step: string): UncheckedBuilder;
  build(): AnyReactorDefinition;
}

function unchecked(name: unknown, options: Record<string, unknown> = {}): UncheckedBuilder {
  return (defineReactor as (options: object) => unknown)({ name, ...options }) as UncheckedBuilder;
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

const chargeCard = defineStep({
  name: 'chargeCard',
  input: z.object({ cents: z.number() }),
  retries: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 50 },
  run: ({ cents }) => ({ chargeId: `ch_${cents}` }),
});
const sendEmail = defineStep({ name: 'sendEmail', run: (args: { to: string }) => args.to });

describe('defineReactor build(): dependencies', () => {
  it('rejects a cycle through waitFor, naming the reactor, the cycle and the fix', () => {
    const error = buildError(unchecked('loop').step('a', { waitFor: ['b'], run }).step('b', { waitFor: ['a'], run }));
    expect(error).toBeInstanceOf(DependencyError);
    expect(error).toMatchObject({
      code: 'definition_invalid',
      reactor: 'loop',
      message: 'reactor "loop": dependency graph contains a cycle: a -> b -> a; remove one of these dependencies',
    });
  });

  it('rejects a cycle through result() and waitFor', () => {
    const builder = unchecked('loop')
      .step('a', { args: ({ result }: { result: (s: string) => unknown }) => ({ c: result('c') }), run })
      .step('b', { args: ({ result }: { result: (s: string) => unknown }) => ({ a: result('a') }), run })
      .step('c', { waitFor: ['b'], run });
    const error = buildError(builder);
    expect(error).toBeInstanceOf(DependencyError);
    expect(error.message).toBe('reactor "loop": dependency graph contains a cycle: a -> c -> b -> a; remove one of these dependencies');
  });

  it('rejects a step that waits for itself', () => {
    const error = buildError(unchecked('loop').step('a', { waitFor: ['a'], run }));
    expect(error).toBeInstanceOf(DependencyError);
    expect(error.message).toBe('reactor "loop": dependency graph contains a cycle: a -> a; remove one of these dependencies');
  });

  it('rejects result() of a step the reactor does not declare', () => {
    const builder = unchecked('checkout').step('charge', {
      args: ({ result }: { result: (s: string) => unknown }) => ({ hold: result('reserve') }),
      run,
    });
    const error = buildError(builder);
    expect(error).toBeInstanceOf(DependencyError);
    expect(error).toMatchObject({
      reactor: 'checkout',
      step: 'charge',
      message: 'step "charge" reads result("reserve"), which reactor "checkout" does not declare',
    });
  });

  it('rejects waitFor a step the reactor does not declare', () => {
    const error = buildError(unchecked('checkout').step('a', { run }).step('ship', { waitFor: ['a', 'pack'], run }));
    expect(error).toBeInstanceOf(DependencyError);
    expect(error).toMatchObject({
      reactor: 'checkout',
      step: 'ship',
      message: 'step "ship" waits for "pack", which reactor "checkout" does not declare',
    });
  });

  it('rejects a waitFor that is not an array', () => {
    const error = buildError(unchecked('checkout').step('a', { run }).step('b', { waitFor: 'a', run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "checkout" step "b": waitFor must be an array of step names');
  });

  it('throws at build(), not while steps are added', () => {
    const builder = unchecked('later').step('a', { waitFor: ['missing'], run }).step('a', { where: () => true, run });
    expect(() => builder.build()).toThrow(DefinitionError);
  });
});

describe('defineReactor build(): names', () => {
  it('rejects a duplicate step name', () => {
    const error = buildError(unchecked('names').step('a', { run }).step('b', { run }).step('a', { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "names": step "a" is defined twice; step names must be unique');
  });

  it.each(['xreactor', 'xreactorStep', 'xreactor-internal', 'constructor', '__proto__', 'hasOwnProperty', 'prototype'])(
    'rejects the reserved step name %j',
    (name) => {
      const error = buildError(unchecked('names').step(name, { run }));
      expect(error).toBeInstanceOf(DefinitionError);
      expect(error.message).toBe(`reactor "names": step name "${name}" is reserved; choose another name`);
    },
  );

  it('rejects a reserved reactor name', () => {
    const error = buildError(unchecked('xreactorCheckout').step('a', { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('defineReactor: reactor name "xreactorCheckout" is reserved; choose another name');
  });

  it.each(['', 'two words', '1st', 'a.b', 'a/b', 'ünï', ' padded', 42, undefined])('rejects the invalid step name %j', (name) => {
    const error = buildError(unchecked('names').step(name, { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(
      `reactor "names": step name ${JSON.stringify(name)} is invalid; use letters, digits, _ or - (starting with a letter or _)`,
    );
  });

  it('rejects an invalid reactor name', () => {
    const error = buildError(unchecked('check out').step('a', { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('defineReactor: reactor name "check out" is invalid; use letters, digits, _ or - (starting with a letter or _)');
  });

  it('accepts letters, digits, _ and -', () => {
    const def = unchecked('Checkout_v2').step('reserve-stock', { run }).step('_audit', { run }).step('step2', { run }).build();
    expect(def.steps.map((s) => s.name)).toEqual(['reserve-stock', '_audit', 'step2']);
  });

  it('rejects returns() of a step the reactor does not declare', () => {
    const error = buildError(unchecked('names').step('a', { run }).returns('b'));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "names": returns("b") names a step the reactor does not declare; name one of "a"');
  });
});

describe('defineReactor build(): options', () => {
  const removedStepOptions = [
    ['where', 'return skip(value) or halt(reason) from the step body instead'],
    ['guard', 'return skip(value) or halt(reason) from the step body instead'],
    ['async', "use the reactor's background option, or asyncStep"],
  ] as const;

  it.each(removedStepOptions)('rejects the removed step option %s, naming its replacement', (option, replacement) => {
    const error = buildError(unchecked('opts').step('a', { run, [option]: true }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(`reactor "opts" step "a": option "${option}" was removed; ${replacement}`);
  });

  it.each(removedStepOptions)('rejects the removed option %s where a reusable step is used', (option, replacement) => {
    const error = buildError(unchecked('opts').step('email', sendEmail, { [option]: true }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(`reactor "opts" step "email": option "${option}" was removed; ${replacement}`);
  });

  it.each([
    ['async', 'use .background({ all: true }) (or { before: step } / { after: step })'],
    ['retryDefaults', 'declare retries on each step'],
  ])('rejects the removed reactor option %s, naming its replacement', (option, replacement) => {
    const error = buildError(unchecked('opts', { [option]: true }).step('a', { run }));
    expect(error).toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(`reactor "opts": option "${option}" was removed; ${replacement}`);
  });

  it('rejects an unknown step option, listing the known ones', () => {
    const error = buildError(unchecked('opts').step('a', { run, timeoutMs: 10 }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error).not.toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe(
      'reactor "opts" step "a": unknown option "timeoutMs"; known options are args, input, waitFor, run, compensate, undo, output, retries',
    );
  });

  it('rejects handlers passed where a reusable step is used', () => {
    const error = buildError(unchecked('opts').step('email', sendEmail, { undo: run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "opts" step "email": unknown option "undo"; known options are args, waitFor, retries');
  });

  it('rejects an unknown reactor option', () => {
    const error = buildError(unchecked('opts', { concurrency: 4 }).step('a', { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error).not.toBeInstanceOf(DeprecatedOptionError);
    expect(error.message).toBe('reactor "opts": unknown option "concurrency"; it takes no options besides name, input and version');
  });
});

describe('defineReactor build(): version', () => {
  it('is 1 when not declared', () => {
    expect(defineReactor({ name: 'v' }).step('a', { run }).build().version).toBe(1);
  });

  it('is the declared positive integer', () => {
    expect(defineReactor({ name: 'v', version: 3 }).step('a', { run }).build().version).toBe(3);
  });

  it.each([
    [0, '0'],
    [-1, '-1'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [2 ** 53, String(2 ** 53)],
    ['2', '"2" (a string)'],
    [null, 'a value of type object'],
    [2n, 'a value of type bigint'],
  ])('rejects version %s, naming the reactor and what is allowed', (version, got) => {
    const error = buildError(unchecked('v', { version }).step('a', { run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error).toMatchObject({
      code: 'definition_invalid',
      message: `reactor "v": version must be a positive integer (1, 2, 3, ...), got ${got}; leave it out for version 1`,
    });
  });
});

describe('defineReactor build(): retries', () => {
  it.each([
    [{ maxAttempts: 0 }, 'retries.maxAttempts must be a positive integer, got 0'],
    [{ maxAttempts: 2.5 }, 'retries.maxAttempts must be a positive integer, got 2.5'],
    [{ maxAttempts: '3' }, 'retries.maxAttempts must be a positive integer, got "3"'],
    [{ maxAttempts: -1 }, 'retries.maxAttempts must be a positive integer, got -1'],
    [{ backoff: 'quadratic' }, 'retries.backoff must be one of exponential, linear, fixed, got "quadratic"'],
    [{ baseDelayMs: -1 }, 'retries.baseDelayMs must be a finite number >= 0, got -1'],
    [{ baseDelayMs: Number.POSITIVE_INFINITY }, 'retries.baseDelayMs must be a finite number >= 0, got Infinity'],
    [{ baseDelayMs: '100' }, 'retries.baseDelayMs must be a finite number >= 0, got "100"'],
  ])('rejects retries %j', (retries, why) => {
    const error = buildError(unchecked('retry').step('charge', { run, retries }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(`reactor "retry" step "charge": ${why}`);
  });

  it('checks the retries given where a reusable step is used', () => {
    const error = buildError(unchecked('retry').step('email', sendEmail, { retries: { maxAttempts: 0 } }));
    expect(error.message).toBe('reactor "retry" step "email": retries.maxAttempts must be a positive integer, got 0');
  });

  it('rejects retries for a reusable step that declares its own', () => {
    const error = buildError(unchecked('retry').step('charge', chargeCard, { retries: { maxAttempts: 5 } }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(
      'reactor "retry" step "charge": step definition "chargeCard" declares its own retries; define a variant with defineStep({ ...}) to use a different policy',
    );
  });

  it('fills defaults: one attempt without retries, 3 exponential attempts of 1000 ms with retries {}', () => {
    const def = unchecked('retry')
      .step('once', { run })
      .step('defaults', { run, retries: {} })
      .step('charge', chargeCard)
      .step('email', sendEmail, { retries: { maxAttempts: 2, backoff: 'linear' } })
      .build();
    expect(def.steps.map((s) => [s.name, s.retry])).toEqual([
      ['once', { maxAttempts: 1, backoff: 'exponential', baseDelayMs: 0 }],
      ['defaults', { maxAttempts: 3, backoff: 'exponential', baseDelayMs: 1000 }],
      ['charge', { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 50 }],
      ['email', { maxAttempts: 2, backoff: 'linear', baseDelayMs: 1000 }],
    ]);
  });
});

describe('defineReactor build(): handlers', () => {
  it('rejects an inline step without run', () => {
    const error = buildError(unchecked('handlers').step('a', { undo: run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe('reactor "handlers" step "a": run must be a function (it is required)');
  });

  it('rejects a reusable step without run', () => {
    const noRun = defineStep({ name: 'noRun' } as never);
    const error = buildError(unchecked('handlers').step('a', noRun));
    expect(error.message).toBe('reactor "handlers" step "a": run must be a function (it is required)');
  });

  it.each(['compensate', 'undo'])('rejects a %s that is not a function', (handler) => {
    const error = buildError(unchecked('handlers').step('a', { run, [handler]: 'later' }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(`reactor "handlers" step "a": ${handler} must be a function`);
  });
});

describe('defineReactor build(): args', () => {
  it('rejects an argument that is not a source, naming the step and the argument (input.n instead of input(\'n\'))', () => {
    const error = buildError(
      unchecked('args')
        .step('a', { run })
        .step('b', { args: ({ result, input }: { result: (s: string) => unknown; input: Record<string, unknown> }) => ({ a: result('a'), n: input['n'] }), run }),
    );
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toBe(
      'reactor "args" step "b": argument "n" is undefined, not a source: build it with input(\'name\'), result(\'step\') or value(constant) ' +
        "(the helpers are functions: input('n', 'path'), not input.n)",
    );
  });

  it.each([
    ['a constant', { x: 5 }, 'reactor "args" step "a": argument "x" is 5, not a source:'],
    ['a factory returning an array', () => [1], 'reactor "args" step "a": args must give a record of sources, e.g. ({ input, result }) => ({ id: input(\'id\'), total: result(\'price\') }); got an array of 1'],
  ])('rejects %s', (_what, args, message) => {
    const error = buildError(unchecked('args').step('a', { args, run }));
    expect(error).toBeInstanceOf(DefinitionError);
    expect(error.message).toContain(message);
  });

  it('rejects a non-source in a compose step\'s args', () => {
    const child = defineReactor({ name: 'args_child' }).step('c', { run }).build();
    const compose = buildError((defineReactor({ name: 'args_parent' }) as unknown as { compose(name: string, child: AnyReactorDefinition, config: object): UncheckedBuilder }).compose('k', child, { args: () => ({ q: 'plain' }) }));
    expect(compose.message).toContain('reactor "args_parent" compose "k": argument "q" is "plain", not a source:');
  });
});

describe('execution plan', () => {
  const reads = (step: string) => ({ args: ({ result }: { result: (s: string) => unknown }) => ({ [step]: result(step) }) });

  it('runs dependencies first, then ready steps in definition order, in waves', () => {
    const def = unchecked('plan')
      .step('a', { run })
      .step('c', { ...reads('a'), run })
      .step('b', { run })
      .step('d', { run })
      .build();
    expect(def.plan.map((s) => s.name)).toEqual(['a', 'b', 'd', 'c']);
  });

  it('holds a step back until every result it reads and every step it waits for is planned', () => {
    const def = unchecked('plan')
      .step('report', { args: ({ result }: { result: (s: string) => unknown }) => ({ s: result('ship'), b: result('bill') }), run })
      .step('ship', { ...reads('pack'), run })
      .step('bill', { waitFor: ['pack'], run })
      .step('pack', { run })
      .step('audit', { run })
      .build();
    expect(def.plan.map((s) => s.name)).toEqual(['pack', 'audit', 'ship', 'bill', 'report']);
    expect(def.plan.map((s) => [s.name, s.reads, s.waitFor])).toEqual([
      ['pack', [], []],
      ['audit', [], []],
      ['ship', ['pack'], []],
      ['bill', [], ['pack']],
      ['report', ['ship', 'bill'], []],
    ]);
  });

  it('keeps steps in definition order, each knowing its plan index', () => {
    const def = unchecked('plan')
      .step('a', { run })
      .step('c', { ...reads('a'), run })
      .step('b', { run })
      .build();
    expect(def.steps.map((s) => [s.name, s.order, s.index])).toEqual([
      ['a', 0, 0],
      ['c', 1, 2],
      ['b', 2, 1],
    ]);
    expect(def.plan.map((s) => s.index)).toEqual([0, 1, 2]);
  });

  it('is frozen', () => {
    const def = unchecked('plan').step('a', { run }).build();
    expect(Object.isFrozen(def)).toBe(true);
    expect(Object.isFrozen(def.plan)).toBe(true);
    expect(Object.isFrozen(def.plan[0])).toBe(true);
  });
});

describe('toGraph and reactorMachine', () => {
  const checkout = defineReactor({ name: 'checkout', input: z.object({ sku: z.string(), cents: z.number() }) })
    .step('reserve', {
      args: ({ input }) => ({ sku: input('sku') }),
      run: ({ sku }) => ({ holdId: `h_${sku}` }),
      undo: () => undefined,
    })
    .step('charge', chargeCard, { args: ({ input }) => ({ cents: input('cents') }) })
    .step('receipt', {
      args: ({ result }) => ({ chargeId: result('charge', 'chargeId') }),
      output: z.string(),
      waitFor: ['reserve'],
      run: ({ chargeId }) => chargeId,
      compensate: () => undefined,
    })
    .returns('receipt')
    .build();
  const roundTrip = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

  it('toGraph returns JSON-serialisable plain data', () => {
    const graph = toGraph(checkout);
    expect(roundTrip(graph)).toStrictEqual(graph);
    expect(graph).toEqual({
      name: 'checkout',
      returns: 'receipt',
      plan: ['reserve', 'charge', 'receipt'],
      steps: [
        {
          name: 'reserve',
          type: 'step',
          child: null,
          reads: [],
          waitFor: [],
          planIndex: 0,
          hasCompensate: false,
          hasUndo: true,
          hasInputContract: false,
          hasOutputContract: false,
          retry: { maxAttempts: 1, backoff: 'exponential', baseDelayMs: 0 },
          definition: null,
        },
        {
          name: 'charge',
          type: 'step',
          child: null,
          reads: [],
          waitFor: [],
          planIndex: 1,
          hasCompensate: false,
          hasUndo: false,
          hasInputContract: true,
          hasOutputContract: false,
          retry: { maxAttempts: 3, backoff: 'fixed', baseDelayMs: 50 },
          definition: 'chargeCard',
        },
        {
          name: 'receipt',
          type: 'step',
          child: null,
          reads: ['charge'],
          waitFor: ['reserve'],
          planIndex: 2,
          hasCompensate: true,
          hasUndo: false,
          hasInputContract: false,
          hasOutputContract: true,
          retry: { maxAttempts: 1, backoff: 'exponential', baseDelayMs: 0 },
          definition: null,
        },
      ],
    });
  });

  it('reactorMachine is the machine the runtime advances: xstate steps it through success, retry, skip and completion', () => {
    const machine = reactorMachine(checkout);
    expect(reactorMachine(checkout)).toBe(machine);
    const at = 0;
    let [snapshot] = initialTransition(machine, { executionId: 'e1', reactor: 'checkout', at });
    const visited: unknown[] = [];
    const send = (event: Parameters<typeof transition<typeof machine>>[2]) => {
      [snapshot] = transition(machine, snapshot, event);
      visited.push(snapshot.value);
    };
    send({ type: 'xreactor.input.accepted', at });
    send({ type: 'xreactor.step.succeeded', at, index: 0, attempt: 1, args: {}, result: 'R' });
    send({ type: 'xreactor.step.failed', at, index: 1, attempt: 1, error: serializeError(new Error('x')), started: true, retryable: true, args: {} });
    send({ type: 'xreactor.timer.fired', at, index: 1, attempt: 1 });
    send({ type: 'xreactor.step.skipped', at, index: 1, attempt: 2, value: null });
    send({ type: 'xreactor.step.succeeded', at, index: 2, attempt: 1, args: {}, result: 'done' });
    expect(visited).toEqual([{ running: 'executing' }, { running: 'executing' }, { running: 'parked' }, { running: 'executing' }, { running: 'executing' }, 'completed']);
    expect(snapshot.hasTag('settled')).toBe(true);
  });

  it('reactorMachine leads a failure through rolling_back to failed, and a halt to halted', () => {
    const machine = reactorMachine(checkout);
    const at = 0;
    const walk = (events: readonly Parameters<typeof transition<typeof machine>>[2][]): unknown[] => {
      let [snapshot] = initialTransition(machine, { executionId: 'e1', reactor: 'checkout', at });
      const visited: unknown[] = [];
      for (const event of events) {
        [snapshot] = transition(machine, snapshot, event);
        visited.push(snapshot.value);
      }
      return visited;
    };
    const failed = { type: 'xreactor.step.failed', at, index: 0, attempt: 1, error: serializeError(new Error('x')), started: false, retryable: false, args: undefined } as const;
    expect(walk([{ type: 'xreactor.input.accepted', at }, failed])).toEqual([{ running: 'executing' }, 'failed']);
    expect(walk([{ type: 'xreactor.input.accepted', at }, { type: 'xreactor.step.halted', at, index: 0, attempt: 1, reason: 'stop' }])).toEqual([{ running: 'executing' }, 'halted']);
  });

  it('exports a reactor without steps as a machine that completes on its input', () => {
    const empty = defineReactor({ name: 'empty' }).build();
    expect(toGraph(empty)).toStrictEqual({ name: 'empty', returns: null, plan: [], steps: [] });
    const machine = reactorMachine(empty);
    const [initial] = initialTransition(machine, { executionId: 'e', reactor: 'empty', at: 0 });
    const [snapshot] = transition(machine, initial, { type: 'xreactor.input.accepted', at: 0 });
    expect(snapshot.value).toBe('completed');
  });
});
