import type { ArgsRecord } from './sources.js';
import type { AnySchema, CompensateHandler, RunHandler, StepContext, StepDefinition, UndoHandler } from './step.js';
import type { RetryPolicy } from './retry.js';
import type { CompletedElement, MapResults } from './map-results.js';

/** Where a background reactor hands the run to a worker. */
export type BackgroundCut<TStep extends string = string> =
  | { readonly all: true }
  | { readonly after: TStep }
  | { readonly before: TStep };

/** A validated hand-off point: the plan index the worker starts at. */
export interface Handoff {
  readonly mode: 'all' | 'after' | 'before';
  readonly step: string | undefined;
  /** Plan index of the first step the worker runs (the plan length when none is left). */
  readonly index: number;
}

/** A step as written, before validation. */
export interface RawStep {
  readonly name: string;
  readonly definition: StepDefinition | undefined;
  readonly config: Readonly<Record<string, unknown>>;
  /** The child reactor of a compose step. */
  readonly compose?: AnyReactorDefinition;
  /** An interrupt step (its options are the config). */
  readonly interrupt?: true;
  /** A map step: the element reactor as passed (checked at `build()`); its options are the config. */
  readonly map?: { readonly element: unknown };
  /** An async unit: `step` (an `asyncStep`, its body or definition as for a step) or `reactor` (an `asyncReactor`, its child in `compose`). */
  readonly async?: 'step' | 'reactor';
}

/** Turns an `args`-style callback of the sources into a source record (`undefined` when absent). */
export type ResolveArgs = (factory: unknown) => ArgsRecord | undefined;

/** How long an interrupt may stay paused, and how that is enforced. */
export interface InterruptTimeout {
  readonly ms: number;
  /** `lazy`: checked when a resume arrives; `active`: a delayed job fails the run when it elapses. */
  readonly strategy: 'lazy' | 'active';
}

/** A validated interrupt. */
export interface CompiledInterrupt {
  /** Validates the resume payload in the caller; its output is the interrupt's result. */
  readonly payload: AnySchema | undefined;
  /** Invalid payloads accepted before the run is undone and failed. */
  readonly maxAttempts: number;
  /** Where the correlation id comes from, if the interrupt has one. */
  readonly correlationId: ArgsRecord | undefined;
  readonly timeout: InterruptTimeout | undefined;
}

/** What a paged source's `page` and `count` receive besides the window. */
export interface PageContext<TArgs = unknown, TInput = unknown> {
  /** The paged source's own `args`, resolved once in the execution holding the map (undefined without `args`). */
  readonly args: TArgs;
  /** All inputs of the reactor holding the map. */
  readonly inputs: Readonly<TInput>;
  /** Fires when the run is interrupted; a long query should stop early. */
  readonly signal: AbortSignal;
}

/** Fetches at most `limit` items from `offset`; fewer than `limit` ends the collection. */
export type PageFn = (offset: number, limit: number, ctx: PageContext<any, any>) => readonly unknown[] | Promise<readonly unknown[]>;
/** Counts the items of a paged source. */
export type CountFn = (ctx: PageContext<any, any>) => number | Promise<number>;
/** Turns a map's results into its step's value. */
export type CollectFn = (results: MapResults<any>, ctx: StepContext<any>) => unknown;
/** Undoes every completed element of a map at once, instead of their own undos. */
export type UndoAllFn = (completed: AsyncIterable<CompletedElement<any>>, ctx: StepContext<any>) => unknown;

/** Where a map's items come from. */
export type CompiledMapSource =
  /** One source (`input(...)`, `result(...)`, ...) resolving to an array, as `args.items`. */
  | { readonly kind: 'source'; readonly args: ArgsRecord }
  /** A paged query: `page` per window of `batchSize` items, `count` once if given. */
  | { readonly kind: 'paged'; readonly page: PageFn; readonly count: CountFn | undefined; readonly args: ArgsRecord | undefined };

/** A validated map step: what runs per element and how. */
export interface CompiledMap {
  /** The reactor each element runs (also the step's `child`). */
  readonly element: AnyReactorDefinition;
  readonly source: CompiledMapSource;
  /** The element reactor's input per item; may hold `element()` sources. Undefined: the item itself. */
  readonly elementArgs: ArgsRecord | undefined;
  /** Elements run as jobs in workers (true) or one after another in the map's call (false). */
  readonly fanOut: boolean;
  /** Elements (or rollback actors) started per throw, and items per page. */
  readonly batchSize: number;
  /** The first element failure fails the map and rolls back its completed elements. */
  readonly atomic: boolean;
  readonly collect: CollectFn | undefined;
  readonly undoAll: UndoAllFn | undefined;
}

/** A validated step. */
export interface CompiledStep {
  readonly name: string;
  /**
   * `step`: a body; `compose`: a child reactor run inline, with its own undo stack; `interrupt`: a
   * pause until continued; `map`: the element reactor run once per item of a collection;
   * `asyncStep`: a body run in its own job (an async unit); `asyncReactor`: a child reactor
   * dispatched as an independent execution (an async unit). Async units are never undone by their owner.
   */
  readonly kind: 'step' | 'compose' | 'interrupt' | 'map' | 'asyncStep' | 'asyncReactor';
  /** The settings of an interrupt step. */
  readonly interrupt?: CompiledInterrupt;
  /** The settings of a map step. */
  readonly map?: CompiledMap;
  /** The child reactor of a compose or asyncReactor step, the element reactor of a map step. */
  readonly child: AnyReactorDefinition | undefined;
  /** Position in definition order. */
  readonly order: number;
  /** Position in execution order (the plan). */
  readonly index: number;
  /** Wired argument sources; undefined means "all reactor inputs". */
  readonly args: ArgsRecord | undefined;
  readonly contract: AnySchema | undefined;
  readonly output: AnySchema | undefined;
  readonly run: RunHandler<any, any, unknown>;
  readonly compensate: CompensateHandler<any, any> | undefined;
  readonly undo: UndoHandler<any, any, any> | undefined;
  readonly retry: RetryPolicy;
  /** Steps whose results this step reads. */
  readonly reads: readonly string[];
  /** Ordering-only dependencies. */
  readonly waitFor: readonly string[];
  /** Whether completion pushes the step on the undo stack. */
  readonly tracked: boolean;
  /** Name of the reusable definition, when the step uses one. */
  readonly definitionName: string | undefined;
}

/**
 * A validated reactor definition: plain data with phantom types, so a client
 * can `import type` it and get a typed `run(input)`.
 */
export interface ReactorDefinition<TName extends string = string, TInput = any, TResults = any, TOutput = any, TMode extends RunMode = RunMode> {
  readonly kind: 'reactor';
  readonly name: TName;
  /** The plan's version, a positive integer (`defineReactor({ version })`, default 1). */
  readonly version: number;
  /**
   * The plan's fingerprint (`planFingerprint`), computed at `build()`. It changes with the
   * plan (steps, their order, kinds, dependencies, hand-off, `returns`, composed children), not
   * with step bodies, transforms or schemas.
   */
  readonly fingerprint: string;
  readonly input: AnySchema | undefined;
  /** Steps in definition order. */
  readonly steps: readonly CompiledStep[];
  /** Steps in execution order: dependency order, then definition order among ready steps. */
  readonly plan: readonly CompiledStep[];
  /** The step whose result is the run's value, if declared. */
  readonly returns: string | undefined;
  /** Where the run is handed to a worker, if it is a background reactor. */
  readonly handoff: Handoff | undefined;
  /** Phantom types. */
  readonly __types?: { readonly input: TInput; readonly results: TResults; readonly output: TOutput; readonly mode: TMode };
}

/**
 * How `run` can end besides an outcome, as a union of flags: `inline` (always an
 * outcome), `background` (may return `dispatched`), `pause` (may return `paused`).
 */
export type RunMode = 'inline' | 'background' | 'pause';

/** Any reactor definition. */
export type AnyReactorDefinition = ReactorDefinition<string, any, any, any, RunMode>;

/** The input type of a reactor definition (before validation: what callers pass). */
export type InputOf<R> = R extends ReactorDefinition<string, infer I, any, any, RunMode> ? I : never;
/** The value type of a completed run. */
export type OutputOf<R> = R extends ReactorDefinition<string, any, any, infer O, RunMode> ? O : never;
/** The record of step results of a reactor definition. */
export type ResultsOf<R> = R extends ReactorDefinition<string, any, infer T, any, RunMode> ? T : never;
/** The run mode of a reactor definition. */
export type ModeOf<R> = R extends ReactorDefinition<string, any, any, any, infer M> ? M : never;

/** `TMode` with the flags `TFlags` added: `inline` is dropped once a run can end otherwise. */
export type WithModes<TMode extends RunMode, TFlags extends RunMode> = [TFlags] extends [never] ? TMode : Exclude<TMode, 'inline'> | TFlags;
