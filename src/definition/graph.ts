import type { AnyReactorDefinition } from './compiled.js';

/** How a map step runs its element reactor, as plain data. */
export interface MapGraphNode {
  /** The element reactor's own graph. */
  readonly element: ReactorGraph;
  /** `source`: one source resolving to an array; `paged`: a `paged({ page, count? })` query. */
  readonly source: 'source' | 'paged';
  readonly fanOut: boolean;
  readonly batchSize: number;
  readonly atomic: boolean;
  readonly hasCollect: boolean;
  readonly hasUndoAll: boolean;
}

/** One step of a reactor's graph, as plain data. */
export interface StepGraphNode {
  readonly name: string;
  readonly type: 'step' | 'compose' | 'interrupt' | 'map' | 'asyncStep' | 'asyncReactor';
  /** The child reactor of a compose step, the element reactor of a map step, or null. */
  readonly child: string | null;
  /** Steps whose results it reads. */
  readonly reads: readonly string[];
  /** Ordering-only dependencies. */
  readonly waitFor: readonly string[];
  /** Position in execution order. */
  readonly planIndex: number;
  readonly hasCompensate: boolean;
  readonly hasUndo: boolean;
  readonly hasInputContract: boolean;
  readonly hasOutputContract: boolean;
  readonly retry: { readonly maxAttempts: number; readonly backoff: string; readonly baseDelayMs: number };
  /** The reusable step definition it uses, or null. */
  readonly definition: string | null;
  /** How a map step runs its elements; only on map steps. */
  readonly map?: MapGraphNode;
}

/** A reactor's step graph as plain, JSON-serialisable data (for the dashboard). */
export interface ReactorGraph {
  readonly name: string;
  /** The step whose result is the run's value, or null (the record of every result). */
  readonly returns: string | null;
  readonly steps: readonly StepGraphNode[];
  /** Step names in execution order. */
  readonly plan: readonly string[];
}

/** Export a definition's step graph as plain data; a map step carries its element reactor's graph. */
export function toGraph(definition: AnyReactorDefinition): ReactorGraph {
  return {
    name: definition.name,
    returns: definition.returns ?? null,
    plan: definition.plan.map((s) => s.name),
    steps: definition.steps.map((s) => ({
      name: s.name,
      type: s.kind,
      child: s.child?.name ?? null,
      reads: [...s.reads],
      waitFor: [...s.waitFor],
      planIndex: s.index,
      hasCompensate: s.compensate !== undefined,
      hasUndo: s.undo !== undefined,
      hasInputContract: s.contract !== undefined,
      hasOutputContract: s.output !== undefined,
      retry: { ...s.retry },
      definition: s.definitionName ?? null,
      ...(s.map === undefined
        ? {}
        : {
            map: {
              element: toGraph(s.map.element),
              source: s.map.source.kind,
              fanOut: s.map.fanOut,
              batchSize: s.map.batchSize,
              atomic: s.map.atomic,
              hasCollect: s.map.collect !== undefined,
              hasUndoAll: s.map.undoAll !== undefined,
            },
          }),
    })),
  };
}
