import { createExecutionMachine } from '../../machines/execution.js';
import type { ExecutionMachine } from '../../machines/execution.js';
import type { ExecutionPlanView } from '../../machines/execution-types.js';
import type { AnyReactorDefinition } from '../definition/compiled.js';
import { interruptGroup } from '../definition/fingerprint.js';

/** What the execution machine needs of a definition. */
export function planView(definition: AnyReactorDefinition): ExecutionPlanView {
  return {
    reactor: definition.name,
    version: definition.version,
    fingerprint: definition.fingerprint,
    handoffIndex: definition.handoff?.index ?? null,
    returns: definition.returns ?? null,
    steps: definition.plan.map((s) => ({
      name: s.name,
      retry: s.retry,
      tracked: s.tracked,
      ...(s.kind === 'map' ? { child: 'map' as const } : {}),
      ...(s.kind === 'asyncStep' ? { async: 'unit' as const } : s.kind === 'asyncReactor' ? { async: 'execution' as const } : {}),
      ...(s.kind === 'interrupt' ? { interrupt: { group: interruptGroup(definition.plan, s.index), timeoutMs: s.interrupt?.timeout?.ms ?? null } } : {}),
    })),
  };
}

const machines = new WeakMap<AnyReactorDefinition, ExecutionMachine>();

/**
 * The execution machine of a reactor: the very XState machine the runtime advances its executions
 * with (pure: its actions are data the host performs). Use it to visualise a reactor (the Stately
 * inspector or editor) or to generate model-based tests with `xstate/graph`. Events carry the host's
 * clock reading (`at`); step outcomes are `xreactor.step.succeeded` / `failed` / `skipped` /
 * `halted` for the step at the cursor; see `machines/execution-types.ts` for every event.
 * @example
 * import { getShortestPaths } from 'xstate/graph';
 * const machine = reactorMachine(checkout);
 * const paths = getShortestPaths(machine, { events: [{ type: 'xreactor.input.accepted', at: 0 }] });
 */
export function reactorMachine(definition: AnyReactorDefinition): ExecutionMachine {
  let machine = machines.get(definition);
  if (machine === undefined) {
    machine = createExecutionMachine(planView(definition));
    machines.set(definition, machine);
  }
  return machine;
}
