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

/** A JSON statechart config: one state per step in execution order, with the rollback and final states. */
export interface InspectorMachineConfig {
  readonly id: string;
  readonly initial: string;
  readonly states: Readonly<Record<string, unknown>>;
}

/**
 * Export a definition as an XState machine config for the Stately inspector:
 * each step is a state; success moves to the next step, failure to
 * `rolling_back`, halt to `halted`. Pass it to `createMachine` to visualise.
 */
export function toMachineConfig(definition: AnyReactorDefinition): InspectorMachineConfig {
  const states: Record<string, unknown> = {};
  const plan = definition.plan;
  plan.forEach((step, i) => {
    const next = plan[i + 1]?.name ?? 'completed';
    states[step.name] = {
      meta: { reads: step.reads, waitFor: step.waitFor, maxAttempts: step.retry.maxAttempts },
      on: {
        'xreactor.step.succeeded': next,
        'xreactor.step.skipped': next,
        'xreactor.step.halted': 'halted',
        'xreactor.step.failed': 'rolling_back',
        ...(step.retry.maxAttempts > 1 ? { 'xreactor.step.retry': step.name } : {}),
      },
    };
  });
  states['rolling_back'] = { on: { 'xreactor.rollback.finished': 'failed' } };
  states['completed'] = { type: 'final' };
  states['failed'] = { type: 'final' };
  states['halted'] = { type: 'final' };
  return { id: definition.name, initial: plan[0]?.name ?? 'completed', states };
}
