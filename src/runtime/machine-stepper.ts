import { createActor } from 'xstate';
import type { ActorScope, AnyStateMachine } from 'xstate';
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
  // The scope's own actor is never started; its input only satisfies the constructor.
  const { scope, take, clear } = collectingScope(machine, { executionId: '', reactor: '', at: 0 });
  return {
    initial(input) {
      clear();
      const snapshot = machine.getInitialSnapshot(scope as never, input);
      return [snapshot, take()];
    },
    next(snapshot, event) {
      clear();
      const next = machine.transition(snapshot, event, scope as never);
      return [next, take()];
    },
  };
}

/** A snapshot of any actor kind's machine, as its host holds it. */
export interface KindSnapshot {
  readonly value: unknown;
  readonly context: unknown;
}

/**
 * Pure transitions of the machine of another kind of actor (a map, an element rollback, an async
 * unit) on one actor scope, as {@link createMachineStepper} does for executions.
 */
export function createKindStepper(machine: AnyStateMachine, input: unknown) {
  const collecting = collectingScope(machine, input);
  const scope = collecting.scope;
  // Only the action's data: XState's action objects also carry the whole context and event.
  const take = (): MachineAction[] => collecting.take().map((a) => ({ type: a.type, params: a.params }));
  return {
    initial(value: unknown): [KindSnapshot, MachineAction[]] {
      collecting.clear();
      const snapshot = machine.getInitialSnapshot(scope as never, value) as KindSnapshot;
      return [snapshot, take()];
    },
    next(snapshot: KindSnapshot, event: { readonly type: string }): [KindSnapshot, MachineAction[]] {
      collecting.clear();
      const next = machine.transition(snapshot as never, event, scope as never) as KindSnapshot;
      return [next, take()];
    },
    resolve(value: unknown, context: unknown): KindSnapshot {
      return machine.resolveState({ value: value as never, context }) as KindSnapshot;
    },
  };
}

/**
 * An actor scope of `machine` made of public API only (an actor that is never started, its system,
 * and an `actionExecutor` that collects the actions of the call in progress instead of running
 * them), `take`, which hands over the actions collected since it was last called, and `clear`.
 */
function collectingScope(machine: AnyStateMachine, input: unknown): { readonly scope: ActorScope<never, never>; readonly take: () => MachineAction[]; readonly clear: () => void } {
  let collected: MachineAction[] = [];
  const self = createActor(machine, { input });
  const scope = {
    self,
    id: '',
    sessionId: '',
    logger: () => undefined,
    defer: () => undefined,
    emit: () => undefined,
    stopChild: () => undefined,
    system: self.system,
    actionExecutor: (action: MachineAction) => void collected.push(action),
  } as unknown as ActorScope<never, never>;
  const take = (): MachineAction[] => {
    const actions = collected;
    collected = [];
    return actions;
  };
  // Before a transition: what a transition that threw left behind is not the next one's.
  const clear = (): void => {
    collected.length = 0;
  };
  return { scope, take, clear };
}
