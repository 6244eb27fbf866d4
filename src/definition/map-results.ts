/**
 * The results of a map step, as its `collect`, later steps and `run` see them: a lazy, paged
 * reader over the map's stored per-element outcomes (never the whole collection in memory).
 */

/** The outcome of one element of a map, by its index in the source. */
export type ElementResult<T> =
  | { readonly index: number; readonly status: 'completed'; readonly value: T }
  | { readonly index: number; readonly status: 'failed'; readonly error: Error }
  | { readonly index: number; readonly status: 'halted'; readonly reason: string }
  | { readonly index: number; readonly status: 'skipped' };

/** A completed element, as `undoAll` receives it. */
export interface CompletedElement<T> {
  readonly index: number;
  readonly value: T;
}

/**
 * The results of a map: every element's outcome in index order. Iterating (or `page`) reads the
 * stored outcomes a page at a time.
 * @example
 * collect: async (results) => {
 *   let charged = 0;
 *   for await (const cents of results.successes()) charged += cents;
 *   return { charged, failed: results.total - charged };
 * }
 */
export interface MapResults<T> extends AsyncIterable<ElementResult<T>> {
  /** The map operation's id (`<execution>.<step>`). */
  readonly map: string;
  /** How many elements the map ran over. */
  readonly total: number;
  /**
   * The outcomes of up to `size` elements from index `from`, in index order.
   * @param from - the first index to read
   * @param size - how many to read (100 when left out)
   */
  page(from: number, size?: number): Promise<readonly ElementResult<T>[]>;
  /** The values of the completed elements, in index order. */
  successes(): AsyncIterable<T>;
  /** The errors of the failed elements, in index order. */
  failures(): AsyncIterable<{ readonly index: number; readonly error: Error }>;
}
