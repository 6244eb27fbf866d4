import { createActor } from 'xstate';
import type { ActorScope } from 'xstate';
import type { ExecutionMachine } from '../../machines/execution.js';
import type { ExecutionEvent, ExecutionInput } from '../../machines/execution-types.js';

/** A snapshot of the execution machine. */
export type ExecutionSnapshot = ReturnType<ExecutionMachine['transition']>;

/** An action a transition asked for, as the host reads it: its type and its params. */
export interface MachineAction {
  readonly type: string;
  readonly params?: unknown;
}

/**
 * Pure transitions of one machine, like xstate's `transition()` / `initialTransition()`, on an
 * actor scope made once per machine instead of once per call.
 *
 * xstate's free functions build a throwaway actor (and actor system) for every call; that
 * construction is most of what a transition of the execution machine costs. The scope here is
 * made of public API only: an actor of the machine that is never started, its system, and an
 * `actionExecutor` that collects the actions of the call in progress instead of running them.
 * Transitions are synchronous, so one scope serves every execution of the machine. Nothing in
 * the execution machine spawns, sends or emits: the only thing a transition leaves behind is its
 * snapshot and its actions (effects and writes as data).
 *
 * The model tests replay every transition through both this stepper and xstate's own
 * `transition()` and require identical snapshots and actions.
 */
export interface MachineStepper {
  /** The initial snapshot for `input`, with the actions of entering it. */
  initial(input: ExecutionInput): [ExecutionSnapshot, MachineAction[]];
  /** The snapshot after `event`, with the actions of the transition; the same snapshot object when no transition applies. */
  next(snapshot: ExecutionSnapshot, event: ExecutionEvent): [ExecutionSnapshot, MachineAction[]];
}

export function createMachineStepper(machine: ExecutionMachine): MachineStepper {
  let collected: MachineAction[] = [];
  // The scope's own actor is never started; its input only satisfies the constructor.
  const self = createActor(machine, { input: { executionId: '', reactor: '', at: 0 } });
  const scope: ActorScope<ExecutionSnapshot, ExecutionEvent> = {
    self: self,
    id: '',
    sessionId: '',
    logger: () => undefined,
    defer: () => undefined,
    emit: () => undefined,
    stopChild: () => undefined,
    system: self.system,
    actionExecutor: (action) => {
      collected.push(action);
    },
  };
  const take = (): MachineAction[] => {
    const actions = collected;
    collected = [];
    return actions;
  };
  return {
    initial(input) {
      collected = [];
      const snapshot = machine.getInitialSnapshot(scope as never, input);
      return [snapshot, take()];
    },
    next(snapshot, event) {
      collected = [];
      const next = machine.transition(snapshot, event, scope as never);
      return [next, take()];
    },
  };
}
