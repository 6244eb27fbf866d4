import pino from 'pino';
import type { InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createRuntime, defineReactor, fail } from '../../src/index.js';

const logger = pino({ level: 'silent' });

describe('createRuntime({ inspect })', () => {
  it('shows every live actor with its parent, the events it applied (a child signal names its sender) and its committed snapshots', async () => {
    const events: InspectionEvent[] = [];
    const child = defineReactor({ name: 'ir_child' })
      .step('c1', { run: () => 'C1', undo: () => undefined })
      .step('c2', { waitFor: ['c1'], run: () => fail(new Error('no')) })
      .build();
    const root = defineReactor({ name: 'ir_root' }).step('a', { run: () => 'A', undo: () => undefined }).compose('sub', child, { waitFor: ['a'] }).build();
    const runtime = createRuntime({ logger, inspect: (e) => void events.push(e), generateId: () => 'r1' });
    expect(await runtime.run(root, {})).toMatchObject({ status: 'failed', step: 'sub' });
    const actors = events.filter((e) => e.type === '@xstate.actor').map((e) => [e.actorRef.sessionId, (e.actorRef as { _parent?: { sessionId: string } })._parent?.sessionId ?? null]);
    expect(actors).toEqual([
      ['xr:r1', null],
      ['xr:r1.sub', 'xr:r1'],
    ]);
    const applied = events
      .filter((e): e is Extract<InspectionEvent, { type: '@xstate.event' }> => e.type === '@xstate.event' && e.event.type !== 'xstate.init' && e.event.type !== 'xstate.stop')
      .map((e) => `${e.actorRef.sessionId} ${e.event.type}${e.sourceRef === undefined ? '' : ` <- ${e.sourceRef.sessionId}`}`);
    expect(applied).toEqual([
      'xr:r1 xreactor.step.succeeded',
      'xr:r1 xreactor.compose.spawn',
      'xr:r1.sub xreactor.step.succeeded',
      'xr:r1.sub xreactor.step.failed',
      'xr:r1.sub xreactor.compensate.finished',
      'xr:r1.sub xreactor.undo.finished',
      'xr:r1 xreactor.child.settled <- xr:r1.sub',
      'xr:r1 xreactor.step.failed',
      'xr:r1 xreactor.undo.finished',
    ]);
    const last = events.filter((e): e is Extract<InspectionEvent, { type: '@xstate.snapshot' }> => e.type === '@xstate.snapshot' && e.actorRef.sessionId === 'xr:r1').at(-1);
    expect(last?.snapshot).toMatchObject({ status: 'done', value: 'failed' });
    await runtime.close();
  });

  it('shows an async unit as a child actor of its owner, with the events its job applied', async () => {
    const events: InspectionEvent[] = [];
    const r = defineReactor({ name: 'ir_units' })
      .asyncStep('u', { run: () => 'U' })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => u.status })
      .build();
    const runtime = createRuntime({ logger, inspect: (e) => void events.push(e), generateId: () => 'r2' });
    expect(await runtime.run(r, {})).toMatchObject({ status: 'completed', value: { r: 'completed' } });
    const actors = events.filter((e) => e.type === '@xstate.actor').map((e) => [e.actorRef.sessionId, (e.actorRef as { _parent?: { sessionId: string } })._parent?.sessionId ?? null]);
    expect(actors).toContainEqual(['xr:r2.u', 'xr:r2']);
    const applied = events
      .filter((e): e is Extract<InspectionEvent, { type: '@xstate.event' }> => e.type === '@xstate.event' && e.actorRef.sessionId === 'xr:r2.u' && e.event.type !== 'xstate.init' && e.event.type !== 'xstate.stop')
      .map((e) => e.event.type);
    expect(applied).toEqual(['xreactor.unit.start', 'xreactor.unit.succeeded']);
    await runtime.close();
  });
});
