/**
 * An element of a map as the execution machine (version 7) runs it: its start is on the map's
 * started list, its forward end is a report into the map's slot with the two conditional signals
 * (never a signal to its parent, the map), and its undo for a rollback actor ends with a signal to
 * that actor carrying the element's rollback failures.
 */
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { createExecutionMachine } from '../../machines/execution.js';
import type { ExecutionEvent, ExecutionInput, ExecutionPlanView } from '../../machines/execution-types.js';

const plan: ExecutionPlanView = {
  reactor: 'charge-one',
  steps: [{ name: 'e1', retry: { maxAttempts: 1, backoff: 'fixed', baseDelayMs: 0 }, tracked: true }],
  handoffIndex: null,
};
const link = { id: 'r.m', index: 2, throw: 2, lastOfThrow: true, fanOut: false, atomic: true };
const input: ExecutionInput = { executionId: 'r.m.2', reactor: 'charge-one', at: 1, parentId: 'r.m', path: ['m', '2'], map: link };
const machine = createExecutionMachine(plan);

type Action = { readonly type: string; readonly params?: unknown };
const of = (actions: readonly Action[], type: string) => actions.filter((a) => a.type === type).map((a) => a.params);

function run(events: readonly ExecutionEvent[]) {
  let [snapshot, actions] = initialTransition(machine, input) as unknown as [ReturnType<typeof machine.resolveState>, Action[]];
  const all: Action[][] = [actions];
  for (const event of events) {
    [snapshot, actions] = transition(machine, snapshot, event);
    all.push(actions);
  }
  return { snapshot, all };
}

describe('an element execution (execution machine 7)', () => {
  it('its start writes the started list; its completion reports into the slot with throw.<k> and settled, and signals no parent', () => {
    const { snapshot, all } = run([
      { type: 'xreactor.input.accepted', at: 2 },
      { type: 'xreactor.step.succeeded', at: 3, index: 0, attempt: 1, args: {}, result: 'ok' },
    ]);
    expect(snapshot.value).toBe('completed');
    expect(of(all[1]!, 'xreactor.write.mapReport')).toEqual([{ started: { map: 'r.m', index: 2 } }]);
    const settle = all[2]!;
    expect(of(settle, 'xreactor.write.mapReport')).toEqual([{ report: { map: 'r.m', index: 2, outcome: 'completed', stops: false, at: 3 } }]);
    expect(of(settle, 'xreactor.write.mapSignal')).toEqual([
      { to: 'r.m', event: { type: 'xreactor.map.throwSettled', at: 3, throw: 2 }, dedupeKey: 'throw.2', condition: 'reportNew' },
      { to: 'r.m', event: { type: 'xreactor.map.settled', at: 3 }, dedupeKey: 'settled', condition: 'mapSettled' },
    ]);
    expect(of(settle, 'xreactor.write.signal')).toEqual([]);
  });

  it('a failure under atomic stops the map (after the element rolled itself back); a halt always does', () => {
    const failed = run([
      { type: 'xreactor.input.accepted', at: 2 },
      { type: 'xreactor.step.failed', at: 3, index: 0, attempt: 1, error: { name: 'Error', message: 'no' }, started: true, retryable: false, args: {} },
      { type: 'xreactor.compensate.finished', at: 4, epoch: 1, failure: null },
    ]);
    expect(failed.snapshot.value).toBe('failed');
    expect(of(failed.all[3]!, 'xreactor.write.mapReport')).toEqual([{ report: { map: 'r.m', index: 2, outcome: 'failed', stops: true, at: 4 } }]);
    const halted = run([
      { type: 'xreactor.input.accepted', at: 2 },
      { type: 'xreactor.step.halted', at: 3, index: 0, attempt: 1, reason: 'enough' },
    ]);
    expect(of(halted.all[2]!, 'xreactor.write.mapReport')).toEqual([{ report: { map: 'r.m', index: 2, outcome: 'halted', stops: true, at: 3 } }]);
  });

  it('undone for a rollback actor, it tells that actor (not the map) with its rollback failures, and reports nothing', () => {
    const { snapshot, all } = run([
      { type: 'xreactor.input.accepted', at: 2 },
      { type: 'xreactor.step.succeeded', at: 3, index: 0, attempt: 1, args: {}, result: 'ok' },
      { type: 'xreactor.operator.undo', at: 4, from: 'r.m.rb-0' },
      { type: 'xreactor.undo.finished', at: 5, epoch: 1, position: 0, step: 'e1', failure: { reason: 'raised', error: { name: 'Error', message: 'stuck' } } },
    ]);
    expect(snapshot.value).toBe('cancelled');
    expect(snapshot.context.ending.undoBy).toBe('r.m.rb-0');
    const end = all[4]!;
    expect(of(end, 'xreactor.write.mapReport')).toEqual([]);
    expect(of(end, 'xreactor.write.mapSignal')).toEqual([]);
    expect(of(end, 'xreactor.write.signal')).toEqual([
      {
        to: 'r.m.rb-0',
        kind: 'element-rollback',
        event: {
          type: 'xreactor.child.settled',
          at: 5,
          child: 'r.m.2',
          status: 'cancelled',
          rollbackFailures: [{ step: 'e1', kind: 'undo', reason: 'raised', error: { name: 'Error', message: 'stuck' } }],
        },
        dedupeKey: 'r.m.2.settled.cancelled.1',
      },
    ]);
  });
});

describe('a fan-out element built by its start job (execution machine 10)', () => {
  const fanOutInput: ExecutionInput = { ...input, map: { ...link, fanOut: true } };
  const from = (events: readonly ExecutionEvent[]) => {
    let [snapshot, actions] = initialTransition(machine, fanOutInput) as unknown as [ReturnType<typeof machine.resolveState>, Action[]];
    for (const event of events) [snapshot, actions] = transition(machine, snapshot, event);
    return { snapshot, actions };
  };
  const accepted = { type: 'xreactor.input.accepted', at: 5 } as const;

  it('starts from pending in one transition, to the snapshot and actions of input.accepted then element.start', () => {
    const start = { type: 'xreactor.element.start', at: 5 } as const;
    const two = from([accepted, start]);
    const one = from([start]);
    expect(one.snapshot.value).toEqual({ running: 'executing' });
    expect(one.snapshot.context).toEqual(two.snapshot.context);
    expect(one.snapshot.value).toEqual(two.snapshot.value);
    expect(one.actions.map((a) => ({ type: a.type, params: a.params }))).toEqual(two.actions.map((a) => ({ type: a.type, params: a.params })));
    // The start is gated in the store: the started write carries the gate.
    expect(of(one.actions, 'xreactor.write.mapReport')).toEqual([{ started: { map: 'r.m', index: 2, gate: true } }]);
  });

  it('skips from pending as from queued: cancelled, skipped, never ran', () => {
    const skip = { type: 'xreactor.element.skip', at: 5, reason: 'skipped: its map no longer dispatches (failed:0)' } as const;
    const two = from([accepted, skip]);
    const one = from([skip]);
    expect(one.snapshot.value).toBe('cancelled');
    expect(one.snapshot.context).toEqual(two.snapshot.context);
    expect(one.snapshot.context.map).toMatchObject({ skipped: true });
    expect(one.actions.map((a) => ({ type: a.type, params: a.params }))).toEqual(two.actions.map((a) => ({ type: a.type, params: a.params })));
  });

  it('an element that is not fanned out takes neither in pending', () => {
    const [initial] = initialTransition(machine, input);
    expect(transition(machine, initial, { type: 'xreactor.element.start', at: 5 })[0]).toBe(initial);
    expect(transition(machine, initial, { type: 'xreactor.element.skip', at: 5, reason: 'x' })[0]).toBe(initial);
  });
});
