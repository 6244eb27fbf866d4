/**
 * Shared by the model tests of the map and element-rollback machines: every declared transition
 * of a machine with no delayed, invoked or eventless transitions, labelled
 * `source --event[guard]--> target` (each label unique), for the tests that require generated
 * paths to reach every one.
 */
import { expect } from 'vitest';
import type { AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { getStateNodes } from 'xstate/graph';

/** A state node's id without the machine's id (`(root)` for the root). */
export const shortIdOf = (machineId: string) => (node: AnyStateNode) => node.id.replace(new RegExp(`^${machineId}\\.?`), '') || '(root)';

/** The name of a transition's guard: its type, `else` without one, `inline` for a function. */
export function guardName(t: AnyTransitionDefinition): string {
  const guard: unknown = t.guard;
  if (guard === undefined) return 'else';
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && guard !== null && 'type' in guard) return String(guard.type);
  return 'inline';
}

/** Every transition of every state node, labelled; asserts the machine has only evented transitions. */
export function declaredTransitions(machine: { readonly id: string; readonly root: AnyStateNode }): Map<AnyTransitionDefinition, string> {
  const shortId = shortIdOf(machine.id);
  const labels = new Map<AnyTransitionDefinition, string>();
  for (const node of [machine.root, ...getStateNodes(machine.root)]) {
    expect(node.after, `${node.id} declares delayed transitions`).toEqual([]);
    expect(node.invoke, `${node.id} invokes actors`).toEqual([]);
    expect(node.always, `${node.id} declares eventless transitions`).toBeUndefined();
    for (const [eventType, alternatives] of node.transitions) {
      for (const t of alternatives) {
        const guard = alternatives.length > 1 ? `[${guardName(t)}]` : '';
        const targets = t.target === undefined ? '(self, targetless)' : t.target.map(shortId).join(',');
        labels.set(t, `${shortId(node)} --${eventType}${guard}--> ${targets}`);
      }
    }
  }
  expect(new Set(labels.values()).size, 'transition labels are not unique').toBe(labels.size);
  return labels;
}

/** A generated path's events (the init left out), each named by `variant`: for failure messages. */
export function describePath<E extends { readonly type: string }>(path: { readonly steps: readonly { readonly event: E }[] }, variant: (event: E) => string): string {
  return path.steps
    .map((step) => step.event)
    .filter((event) => (event.type) !== 'xstate.init')
    .map(variant)
    .join(' → ');
}
