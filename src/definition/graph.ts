import type { AnyReactorDefinition } from './compiled.js';

/** One step of a reactor's graph, as plain data. */
export interface StepGraphNode {
  readonly name: string;
  readonly type: 'step' | 'compose' | 'interrupt';
  /** The child reactor of a compose step, or null. */
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

/** Export a definition's step graph as plain data. */
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
    })),
  };
}
