import type { ArgsOf, ArgsRecord, ArgumentSource, SourceHelpers } from './sources.js';
import { sourceHelpers } from './sources.js';
import type { AnySchema, SchemaInput, SchemaOutput, StepDefinition, StepHandlers } from './step.js';
import type { StepValue } from './outcomes.js';
import type { RetryOptions } from './retry.js';
import { compileDefinition } from './compile.js';
import type { AnyReactorDefinition, BackgroundCut, CompiledStep, ModeOf, OutputOf, RawStep, ReactorDefinition, RunMode, WithModes } from './compiled.js';
import { elementHelpers } from './map.js';
import type { ElementReactorCheck, MapMode, MapOptions, MapValue } from './map.js';
import type { ASYNC_UNIT, AsyncOutcome } from './async-unit.js';
import { DefinitionError } from '../errors/index.js';

interface BuilderState {
  readonly name: string;
  readonly version: unknown;
  readonly input: AnySchema | undefined;
  readonly steps: readonly RawStep[];
  readonly returns: string | undefined;
  readonly options: Readonly<Record<string, unknown>>;
  readonly background: unknown;
}

/** Arguments a step body receives: its contract's output, its wired args, or all inputs. */
export type RunArgs<TInput, A, S> = [S] extends [never]
  ? [A] extends [never]
    ? TInput
    : A extends ArgsRecord
      ? ArgsOf<A>
      : TInput
  : S extends AnySchema
    ? SchemaOutput<S>
    : TInput;

/** Rejects a step name that is already defined, at compile time. */
export type NewStepName<N extends string, TResults> = N extends keyof TResults ? `step "${N}" is already defined` : N;

/** Configuration of a step written inline in a reactor. */
export interface InlineStepConfig<TInput, TResults, A, S, R> extends StepHandlers<RunArgs<TInput, A, S>, TInput, R> {
  /**
   * Where the step's arguments come from. Without `args` (and without an
   * `input` contract) the step receives all reactor inputs.
   * @example
   * args: ({ input, result }) => ({ orderId: input('orderId'), total: result('price', 'total') })
   */
  readonly args?: (sources: SourceHelpers<TInput, TResults>) => A;
  /** Input contract: arguments (or all inputs) are validated and the step receives the output. */
  readonly input?: S;
  /** Ordering-only dependencies: this step runs after them without reading their results. */
  readonly waitFor?: readonly (keyof TResults & string)[];
}

/** Configuration of an async step written inline: a step's, without `undo` (its owner never undoes it). */
export interface AsyncStepConfig<TInput, TResults, A, S, R> extends Omit<InlineStepConfig<TInput, TResults, A, S, R>, 'undo'> {
  /** Not available: an async step is never undone; it compensates itself once after its last attempt fails. */
  readonly undo?: never;
}

/** Options of an interrupt. */
export interface InterruptOptions<TInput, TResults, S> {
  /** Validates the resume payload (in the caller); the interrupt's result is its output. */
  readonly payload?: S;
  /**
   * Invalid payloads accepted before the run is undone and marked failed.
   * @defaultValue 1
   */
  readonly maxAttempts?: number;
  /** A correlation id other systems can continue the run by (`continueByCorrelationId`). */
  readonly correlationId?: (sources: SourceHelpers<TInput, TResults>) => ArgumentSource<string>;
  /** How long the pause may last. `lazy` (default) is checked when a resume arrives; `active` fails the run when it elapses. */
  readonly timeout?: { readonly ms: number; readonly strategy?: 'lazy' | 'active' };
  /** Ordering-only dependencies: the run pauses here once they completed. */
  readonly waitFor?: readonly (keyof TResults & string)[];
}

/** How a reactor composes a child reactor. */
export interface ComposeUse<TInput, TResults, A> {
  /** The child's input, wired like step arguments. Without `args` the child receives all of this reactor's inputs. */
  readonly args?: (sources: SourceHelpers<TInput, TResults>) => A;
  /** Ordering-only dependencies. */
  readonly waitFor?: readonly (keyof TResults & string)[];
}

/** How a reactor uses a reusable step definition. */
export interface StepUse<TInput, TResults, A> {
  /** Where the step's arguments come from; unwired contract fields read the reactor input of the same name. */
  readonly args?: (sources: SourceHelpers<TInput, TResults>) => A;
  /** Ordering-only dependencies. */
  readonly waitFor?: readonly (keyof TResults & string)[];
  /** Retry policy for a definition that declares none (a definition's own policy cannot be overridden). */
  readonly retries?: RetryOptions;
}

/** The results of a reactor with no steps yet. */
export type EmptyResults = Record<never, never>;

/** What the steps of a reactor without an input schema see as inputs: none, so `input(name)` is a compile error. */
export type NoInputs = Record<never, never>;

type IsAny<T> = 0 extends 1 & T ? true : false;

/** The keys of a record of results whose values are async units' outcomes (not results of the run). */
type AsyncUnitKeys<T> = { [K in keyof T]: IsAny<T[K]> extends true ? never : typeof ASYNC_UNIT extends keyof T[K] ? K : never }[keyof T];

/**
 * The value of a completed run: the `returns` step's result, or (`TReturns` never) the record of
 * every step's result, async units left out (they have no value when the run completes).
 */
export type ReactorOutput<TResults, TReturns extends string> = [TReturns] extends [never]
  ? [AsyncUnitKeys<TResults>] extends [never]
    ? TResults
    : Simplify<Omit<TResults, AsyncUnitKeys<TResults>>>
  : TReturns extends keyof TResults
    ? TResults[TReturns]
    : never;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type WithStep<TResults, N extends string, V> = Simplify<TResults & Record<N, V>>;

/** The run mode of a reactor composing `C`: a child that may pause or be dispatched makes the parent so too. */
export type ComposeMode<TMode extends RunMode, C> = WithModes<TMode, Extract<ModeOf<C>, 'pause' | 'background'>>;

/**
 * Typed builder of a reactor definition. Each `step` adds a name and a result type.
 * `TInput` is what steps read (the input schema's output), `TRunInput` what callers
 * pass to `run` (its input), `TReturns` the step named by `returns` (never: none).
 */
export class ReactorBuilder<TName extends string, TInput, TResults, TReturns extends string = never, TRunInput = TInput, TMode extends RunMode = 'inline'> {
  readonly #state: BuilderState;

  /** @internal use {@link defineReactor}. */
  constructor(state: BuilderState) {
    this.#state = state;
  }

  /**
   * Add an inline step.
   * @example
   * .step('reserve', {
   *   args: ({ input }) => ({ sku: input('sku') }),
   *   run: ({ sku }) => inventory.reserve(sku),
   *   undo: (reservation) => inventory.release(reservation.id),
   * })
   */
  step<const N extends string, A extends ArgsRecord = never, S extends AnySchema = never, R = unknown>(
    name: NewStepName<N, TResults>,
    config: InlineStepConfig<TInput, TResults, A, S, R>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, StepValue<Awaited<R>>>, TReturns, TRunInput, TMode>;
  /**
   * Add a reusable step definition under `name`.
   * @example
   * .step('charge', chargeCard, { args: ({ input }) => ({ cardToken: input('token'), amountCents: input('cents') }) })
   */
  step<const N extends string, TArgs, V, A extends ArgsRecord = never>(
    name: NewStepName<N, TResults>,
    definition: StepDefinition<TArgs, V>,
    use?: StepUse<TInput, TResults, A>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, V>, TReturns, TRunInput, TMode>;
  step(name: string, configOrDefinition: object, use?: object): unknown {
    const raw: RawStep = isStepDefinition(configOrDefinition)
      ? { name, definition: configOrDefinition, config: (use ?? {}) as Record<string, unknown> }
      : { name, definition: undefined, config: configOrDefinition as Record<string, unknown> };
    return new ReactorBuilder<TName, TInput, unknown, TReturns, TRunInput, TMode>({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /**
   * Run a child reactor inline, with its own undo stack. Its result is the child's
   * value. When the child fails it rolls itself back first; a later failure of this
   * reactor undoes the child's completed steps at this step's position.
   * @example
   * .compose('payment', paymentReactor, { args: ({ input }) => ({ cents: input('cents') }) })
   */
  compose<const N extends string, C extends AnyReactorDefinition, A extends ArgsRecord = never>(
    name: NewStepName<N, TResults>,
    child: C,
    use?: ComposeUse<TInput, TResults, A>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, OutputOf<C>>, TReturns, TRunInput, ComposeMode<TMode, C>> {
    const raw: RawStep = { name, definition: undefined, config: (use ?? {}) as Record<string, unknown>, compose: child };
    return new ReactorBuilder({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /**
   * Dispatch this step's body to its own job (an async unit) and go on at once: the step is
   * complete for scheduling with no value, and is never undone by this reactor. Its body retries
   * in its job; after its last attempt fails it compensates itself, once. A step that reads it
   * (`result(name)`) waits until it settled and receives its {@link AsyncOutcome}.
   * @example
   * .asyncStep('sendEmail', { args: ({ input }) => ({ to: input('email') }), run: ({ to }) => mailer.send(to), retries: { maxAttempts: 3 } })
   */
  asyncStep<const N extends string, A extends ArgsRecord = never, S extends AnySchema = never, R = unknown>(
    name: NewStepName<N, TResults>,
    config: AsyncStepConfig<TInput, TResults, A, S, R>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, AsyncOutcome<StepValue<Awaited<R>>>>, TReturns, TRunInput, TMode>;
  /** Dispatch a reusable step definition's body to its own job (see the inline form). */
  asyncStep<const N extends string, TArgs, V, A extends ArgsRecord = never>(
    name: NewStepName<N, TResults>,
    definition: StepDefinition<TArgs, V>,
    use?: StepUse<TInput, TResults, A>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, AsyncOutcome<V>>, TReturns, TRunInput, TMode>;
  asyncStep(name: string, configOrDefinition: object, use?: object): unknown {
    const raw: RawStep = isStepDefinition(configOrDefinition)
      ? { name, definition: configOrDefinition, config: (use ?? {}) as Record<string, unknown>, async: 'step' }
      : { name, definition: undefined, config: configOrDefinition as Record<string, unknown>, async: 'step' };
    return new ReactorBuilder<TName, TInput, unknown, TReturns, TRunInput, TMode>({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /**
   * Dispatch a child reactor as an independent execution (an async unit, id
   * `<execution>.<name>`) and go on at once. The child runs in a worker, rolls itself back on
   * its own failure, and is never undone by this reactor. A step that reads it (`result(name)`)
   * waits until it settled and receives its {@link AsyncOutcome}.
   * @example
   * .asyncReactor('provision', provisionAccount, { args: ({ input }) => ({ userId: input('userId') }) })
   */
  asyncReactor<const N extends string, C extends AnyReactorDefinition, A extends ArgsRecord = never>(
    name: NewStepName<N, TResults>,
    child: C,
    use?: ComposeUse<TInput, TResults, A>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, AsyncOutcome<OutputOf<C>>>, TReturns, TRunInput, TMode> {
    const raw: RawStep = { name, definition: undefined, config: (use ?? {}) as Record<string, unknown>, compose: child, async: 'reactor' };
    return new ReactorBuilder({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /**
   * Run `element` (a built reactor) once per item of a collection, each element an execution with
   * its own undo stack: one after another in this call, or as jobs in workers with
   * `fanOut: true` (`run()` may then return `dispatched`). The step's result is `collect`'s value,
   * or the `MapResults` of every element. A later failure (or, with `atomic`, an element's
   * failure) rolls back every completed element.
   * @example
   * .map('charges', chargeOne, {
   *   source: ({ input }) => input('orders'),
   *   args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') }),
   *   fanOut: true,
   *   batchSize: 100,
   * })
   */
  map<
    const N extends string,
    E extends AnyReactorDefinition,
    T,
    A extends ArgsRecord = never,
    R = never,
    const F extends boolean = false,
  >(
    name: NewStepName<N, TResults>,
    element: E & ElementReactorCheck<E>,
    options: MapOptions<TInput, TResults, E, T, A, R, F>,
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, MapValue<E, R>>, TReturns, TRunInput, MapMode<TMode, F, E>> {
    const raw: RawStep = { name, definition: undefined, config: (options ?? {}) as unknown as Record<string, unknown>, map: { element } };
    return new ReactorBuilder({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /**
   * Pause the run here until an operator or another system continues it with a
   * payload (validated in the caller); the payload is this step's result.
   * @example
   * .interrupt('approval', { waitFor: ['quote'], payload: z.object({ approved: z.boolean() }), timeout: { ms: 86_400_000 } })
   */
  interrupt<const N extends string, S extends AnySchema = never>(
    name: NewStepName<N, TResults>,
    options: InterruptOptions<TInput, TResults, S> = {},
  ): ReactorBuilder<TName, TInput, WithStep<TResults, N, [S] extends [never] ? unknown : SchemaOutput<S>>, TReturns, TRunInput, Exclude<TMode, 'inline'> | 'pause'> {
    const raw: RawStep = { name, definition: undefined, config: options as Record<string, unknown>, interrupt: true };
    return new ReactorBuilder({ ...this.#state, steps: [...this.#state.steps, raw] });
  }

  /** The step whose result is the run's value. Without it the value is the record of every step's result. */
  returns<K extends keyof TResults & string>(step: K): ReactorBuilder<TName, TInput, TResults, K, TRunInput, TMode> {
    return new ReactorBuilder({ ...this.#state, returns: step });
  }

  /**
   * Hand the run to a worker: `{ all: true }` before the first step, `{ before: step }`
   * instead of running that step, `{ after: step }` once it completed. `run()` then
   * returns a dispatched result; the worker continues the same execution.
   * @example
   * .background({ after: 'reserve' })
   */
  background(cut: BackgroundCut<keyof TResults & string>): ReactorBuilder<TName, TInput, TResults, TReturns, TRunInput, Exclude<TMode, 'inline'> | 'background'> {
    if (this.#state.background !== undefined) {
      throw new DefinitionError(`reactor "${this.#state.name}": background is declared twice; a reactor has exactly one hand-off point`);
    }
    return new ReactorBuilder({ ...this.#state, background: cut });
  }

  /** Validate the definition and freeze it. Throws a {@link DefinitionError} naming the reactor, step and fix. */
  build(): ReactorDefinition<TName, TRunInput, TResults, ReactorOutput<TResults, TReturns>, TMode> {
    return compileDefinition<TName, TRunInput, TResults, ReactorOutput<TResults, TReturns>, TMode>({ ...this.#state, resolveArgs: resolveArgsFactory });
  }
}

function isStepDefinition(value: object): value is StepDefinition {
  return (value as { kind?: unknown }).kind === 'step-definition';
}

/** Every source, `element()` included: definitions that use it outside a map's args are refused at `build()` by name. */
const definitionHelpers = { ...sourceHelpers, ...elementHelpers };

function resolveArgsFactory(factory: unknown): ArgsRecord | undefined {
  if (factory === undefined) return undefined;
  if (typeof factory !== 'function') return factory as ArgsRecord;
  return (factory as (h: typeof definitionHelpers) => ArgsRecord)(definitionHelpers);
}

/** Options of {@link defineReactor}. */
export interface DefineReactorOptions<TName extends string, S extends AnySchema | undefined> {
  /** Unique reactor name; used in storage, logs and errors. */
  readonly name: TName;
  /** Input contract (any Standard Schema). Invalid input fails the run before any step. */
  readonly input?: S;
  /**
   * Version of this reactor's plan, a positive integer. Runtimes register reactors by name and
   * version, so several versions of one name can be deployed together; an execution stays with
   * the version it started with. Declare a new version when a change alters the plan (its
   * `planFingerprint`) while executions of the old one may still be stored.
   * @defaultValue 1
   */
  readonly version?: number;
}

/**
 * Start defining a reactor: a DAG of steps with run, compensate and undo.
 * `version` (default 1) tells apart reactors of one name whose plans differ.
 * @example
 * const checkout = defineReactor({ name: 'checkout', input: z.object({ sku: z.string(), cents: z.number() }) })
 *   .step('reserve', { args: ({ input }) => ({ sku: input('sku') }), run: reserve, undo: release })
 *   .step('charge', { args: ({ input, result }) => ({ cents: input('cents'), hold: result('reserve') }), run: charge })
 *   .returns('charge')
 *   .build();
 */
export function defineReactor<const TName extends string, S extends AnySchema | undefined = undefined>(
  options: DefineReactorOptions<TName, S>,
): ReactorBuilder<
  TName,
  S extends AnySchema ? SchemaOutput<S> : NoInputs,
  EmptyResults,
  never,
  S extends AnySchema ? SchemaInput<S> : Record<string, never>
> {
  const { name, input, version, ...rest } = options as DefineReactorOptions<TName, S> & Record<string, unknown>;
  return new ReactorBuilder({ name, version, input, steps: [], returns: undefined, options: rest, background: undefined });
}

export type { CompiledStep, ReactorDefinition };
