/**
 * The `map` step: the element reactor run once per item of a collection, inline or fanned out
 * to workers. Its options and their types, the `element()` source and `paged()` live here; the
 * builder method is `ReactorBuilder.map`, its validation `compileMap`.
 */
import { ArgumentSource, splitPath } from './sources.js';
import type { ArgsOf, ArgsRecord, Path, PathValue, SourceHelpers } from './sources.js';
import type { StepContext } from './step.js';
import type { StepValue } from './outcomes.js';
import type { CompletedElement, MapResults } from './map-results.js';
import type { AnyReactorDefinition, CountFn, InputOf, ModeOf, OutputOf, PageContext, ReactorDefinition, RunMode, WithModes } from './compiled.js';

/** The `element()` source, handed to a map's `args` beside the usual sources. */
export interface ElementHelpers<T> {
  /** The item this element runs on. */
  element(): ArgumentSource<T>;
  /** A dotted path into the item. */
  element<P extends Path<T>>(path: P): ArgumentSource<PathValue<T, P>>;
}

/** The untyped `element()` used at definition time; the types above are the promise. */
export const elementHelpers: ElementHelpers<any> = {
  element: (path?: string) => new ArgumentSource({ kind: 'element', path: splitPath(path), transforms: [] }),
} as ElementHelpers<any>;

/** The `args` a paged source's `page` and `count` receive: its own resolved `args`, or undefined. */
export type PageArgs<A> = [A] extends [never] ? undefined : A extends ArgsRecord ? ArgsOf<A> : undefined;

/** Options of {@link paged}. */
export interface PagedOptions<TInput, TResults, T, A> {
  /** Sources the query needs (inputs, results), resolved once in the execution holding the map. */
  readonly args?: (sources: SourceHelpers<TInput, TResults>) => A;
  /**
   * At most `limit` items from `offset`; fewer than `limit` ends the collection (unless `count`
   * said more). It must return the same items for the same window when called again.
   */
  readonly page: (offset: number, limit: number, ctx: PageContext<PageArgs<A>, TInput>) => readonly T[] | Promise<readonly T[]>;
  /** How many items there are, asked once before the first page. */
  readonly count?: (ctx: PageContext<PageArgs<A>, TInput>) => number | Promise<number>;
}

/** A paged map source built by {@link paged}: plain data with phantom types. */
export interface PagedSource<TInput = any, TResults = any, T = unknown> {
  readonly kind: 'paged-source';
  readonly page: (offset: number, limit: number, ctx: PageContext<any, TInput>) => readonly T[] | Promise<readonly T[]>;
  readonly count: CountFn | undefined;
  readonly args: ((sources: SourceHelpers<TInput, TResults>) => ArgsRecord) | undefined;
}

/**
 * A map source read a page at a time (a database query per throw, never the whole collection):
 * `page(offset, limit, ctx)` per window of `batchSize` items, `count(ctx)` once if given.
 * @example
 * .map('invoices', invoiceOne, {
 *   source: paged({
 *     args: ({ input }) => ({ customer: input('customerId') }),
 *     page: (offset, limit, { args }) => db.invoices.page(args.customer, offset, limit),
 *     count: ({ args }) => db.invoices.count(args.customer),
 *   }),
 *   fanOut: true,
 * })
 */
export function paged<TInput = any, TResults = any, T = unknown, A extends ArgsRecord = never>(
  options: PagedOptions<TInput, TResults, T, A>,
): PagedSource<TInput, TResults, T> {
  const { page, count, args } = (options ?? {}) as Partial<PagedOptions<TInput, TResults, T, A>>;
  return Object.freeze({ kind: 'paged-source', page, count, args }) as PagedSource<TInput, TResults, T>;
}

/** Options of `ReactorBuilder.map`. */
export interface MapOptions<TInput, TResults, E extends AnyReactorDefinition, T, A, R, F extends boolean> {
  /**
   * The collection: one source resolving to an array (`({ input }) => input('orders')`,
   * `({ result }) => result('load')`), or {@link paged}.
   */
  readonly source:
    | ((sources: SourceHelpers<TInput, TResults>) => ArgumentSource<readonly T[]> & ElementItemsCheck<E, T, A>)
    | PagedSource<TInput, TResults, T>;
  /**
   * The element reactor's input per item, wired like step arguments with `element(path?)` for the
   * item. Without `args` an element's input is the item itself.
   * @example
   * args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') })
   */
  readonly args?: (sources: SourceHelpers<TInput, TResults> & ElementHelpers<T>) => A & ElementArgs<E>;
  /**
   * Run elements as jobs in workers (`run()` may then return `dispatched`) instead of one after
   * another in the map's call.
   * @defaultValue false
   */
  readonly fanOut?: F;
  /**
   * Elements started per throw (the next throw goes out when the last element of the previous
   * one settled), rollback actors per rollback throw, and items per page of a paged source.
   * Stored with each map when it starts.
   * @defaultValue 50
   */
  readonly batchSize?: number;
  /**
   * The first element failure fails the map: no new element starts, in-flight ones finish and
   * every completed element is rolled back. `false`: the map completes with every outcome.
   * @defaultValue true
   */
  readonly atomic?: boolean;
  /**
   * Turns the results into the step's value; returning `fail(e)` or throwing fails the map step
   * (every completed element is rolled back). May run more than once, like a step body.
   */
  readonly collect?: (results: MapResults<OutputOf<E>>, ctx: StepContext<TInput>) => R;
  /**
   * Replaces the per-element undos on every rollback of this map: called once with the completed
   * elements in index order (lazily read), not called when none completed.
   */
  readonly undoAll?: (completed: AsyncIterable<CompletedElement<OutputOf<E>>>, ctx: StepContext<TInput>) => unknown;
  /** Ordering-only dependencies. */
  readonly waitFor?: readonly (keyof TResults & string)[];
}

type NameOf<E> = E extends ReactorDefinition<infer N, any, any, any, RunMode> ? N : string;

/**
 * A compile error on an element reactor that can pause (it has an interrupt, at any depth). An
 * erased definition (`AnyReactorDefinition`, every mode) is checked at `build()` only.
 */
export type ElementReactorCheck<E> = 'pause' extends ModeOf<E>
  ? RunMode extends ModeOf<E>
    ? unknown
    : { readonly 'element reactor': `element reactor "${NameOf<E>}" has an interrupt, which is not supported inside a map element` }
  : unknown;

/** An element reactor without an input schema reads no input, so any element input fits it. */
type TakesAnyInput<E> = [InputOf<E>] extends [Record<string, never>] ? true : false;

/**
 * What a map's `args` must return: a source per field of the element reactor's input, of that
 * field's type (a compile error at the field otherwise). Any record for an element reactor
 * without an input schema.
 */
export type ElementArgs<E> = TakesAnyInput<E> extends true
  ? unknown
  : InputOf<E> extends object
    ? { readonly [K in keyof InputOf<E>]: ArgumentSource<InputOf<E>[K]> }
    : { readonly 'element input': `element reactor "${NameOf<E>}" takes a non-object input; leave out args so that each item is its input` };

/**
 * A compile error at `source` when a map without `args` runs over items that are not the
 * element reactor's input. Only for a source function: the items of a {@link paged} source
 * without `args` are checked against the element reactor's input schema at run time.
 */
export type ElementItemsCheck<E, T, A> = [A] extends [never]
  ? TakesAnyInput<E> extends true
    ? unknown
    : [T] extends [InputOf<E>]
      ? unknown
      : { readonly 'element input': `the items are not the input of element reactor "${NameOf<E>}"; wire it with args: ({ element }) => ({ ... })` }
  : unknown;

/** The result type of a map step: `collect`'s value, or the results. */
export type MapValue<E, R> = [R] extends [never] ? MapResults<OutputOf<E>> : StepValue<Awaited<R>>;

/** The run mode of a reactor with a map: `background` once the map fans out or its element reactor may be dispatched. */
export type MapMode<TMode extends RunMode, F extends boolean, E> = WithModes<TMode, (true extends F ? 'background' : never) | Extract<ModeOf<E>, 'background'>>;
