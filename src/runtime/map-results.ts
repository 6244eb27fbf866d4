/**
 * The runtime's {@link MapResults} reader: a lazy view over a map's stored per-element outcomes,
 * one `store.readMapPage` per page (never the whole collection in memory). A map step without
 * `collect` records a {@link MapResultsRef} as its result; whoever reads that result (a later
 * step's `result('m')`, `collect`) gets a reader over it.
 */
import type { ExecutionContext } from '../../machines/execution-types.js';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import type { CompletedElement, ElementResult, MapResults } from '../definition/map-results.js';
import { StepFailure } from '../errors/index.js';
import type { Store } from '../store/store.js';
import { buildResult } from './results.js';
import { isUnitRef } from './unit-ref.js';

/** The stored result of a map step without `collect`: which map, how many elements, which element result is its value. */
export interface MapResultsRef {
  readonly xreactorMapResults: { readonly map: string; readonly total: number; readonly returns: string | null };
}

/** The result a map step without `collect` records. */
export function mapResultsRef(map: string, total: number, returns: string | null): MapResultsRef {
  return { xreactorMapResults: { map, total, returns } };
}

/** Whether a stored result is a map's results reference. */
export function isMapResultsRef(value: unknown): value is MapResultsRef {
  if (typeof value !== 'object' || value === null) return false;
  const ref = (value as { xreactorMapResults?: unknown }).xreactorMapResults;
  return typeof ref === 'object' && ref !== null && typeof (ref as { map?: unknown }).map === 'string';
}

const PAGE = 100;

/** A reader over a map's results. `element`: the element reactor (for failed elements' errors), when known. */
export function mapResultsOf<T = unknown>(store: Store, ref: MapResultsRef, element: AnyReactorDefinition | undefined): MapResults<T> {
  const { map, total, returns } = ref.xreactorMapResults;
  const page = async (from: number, size = PAGE): Promise<readonly ElementResult<T>[]> => {
    if (!Number.isSafeInteger(from) || from < 0 || !Number.isSafeInteger(size) || size < 1) {
      throw new RangeError(`map results ${map}: page(${from}, ${size}) needs a whole from >= 0 and a size >= 1`);
    }
    const count = Math.max(0, Math.min(size, total - from));
    if (count === 0) return [];
    const entries = await store.readMapPage(map, from, count, returns);
    const out: ElementResult<T>[] = [];
    for (const entry of entries) {
      const { index } = entry;
      switch (entry.outcome) {
        case 'completed':
          // Every step's result but for async units' (references to the units, not values), as a run's.
          out.push({ index, status: 'completed', value: (returns === null && entry.result instanceof Map ? Object.fromEntries([...entry.result].filter(([, v]) => !isUnitRef(v))) : entry.result) as T });
          break;
        case 'failed': {
          const context = entry.snapshot?.context as ExecutionContext | undefined;
          const result = context === undefined ? undefined : await buildResult(element, 'failed', context, store);
          out.push({ index, status: 'failed', error: result?.status === 'failed' ? result.error : new StepFailure(`element ${index} of map ${map} failed`) });
          break;
        }
        case 'halted': {
          const context = entry.snapshot?.context as ExecutionContext | undefined;
          out.push({ index, status: 'halted', reason: context?.ending.halt?.reason ?? 'halted' });
          break;
        }
        default:
          out.push({ index, status: 'skipped' });
      }
    }
    return out;
  };
  async function* all(): AsyncGenerator<ElementResult<T>> {
    for (let from = 0; from < total; from += PAGE) for (const result of await page(from, PAGE)) yield result;
  }
  return {
    map,
    total,
    page,
    [Symbol.asyncIterator]: all,
    successes: async function* () {
      for await (const r of all()) if (r.status === 'completed') yield r.value;
    },
    failures: async function* () {
      for await (const r of all()) if (r.status === 'failed') yield { index: r.index, error: r.error };
    },
  };
}

/** The completed elements of a map in index order, as `undoAll` receives them (read a page at a time). */
export async function* completedElements<T>(results: MapResults<T>): AsyncGenerator<CompletedElement<T>> {
  for await (const r of results) if (r.status === 'completed') yield { index: r.index, value: r.value };
}
