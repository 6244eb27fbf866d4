import { createInspector } from '@statelyai/inspect';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { describe, expect, it } from 'vitest';
import { assign, createActor, initialTransition, setup, transition } from 'xstate';
import type { AnyEventObject, InspectionEvent, Snapshot } from 'xstate';
import { createActorInspector } from '../../src/observability/inspector.js';
import type { InspectedActorRef } from '../../src/observability/inspector.js';

/** A small order: idle → paying (a composed payment child) → done. */
const order = setup({
  types: { context: {} as { readonly n: number }, events: {} as { type: 'pay' } | { type: 'paid' } | { type: 'cancel' } },
  actions: { track: (_: unknown, _params: { readonly step: string }) => undefined },
}).createMachine({
  id: 'order',
  initial: 'idle',
  context: { n: 0 },
  states: {
    idle: {
      entry: { type: 'track', params: { step: 'idle' } },
      on: { pay: { target: 'paying', actions: assign({ n: ({ context }) => context.n + 1 }) } },
    },
    paying: { entry: { type: 'track', params: { step: 'paying' } }, on: { paid: 'done', cancel: 'cancelled' } },
    cancelled: {},
    done: { type: 'final' },
  },
});

const payment = setup({ types: { events: {} as { type: 'charge' } } }).createMachine({
  id: 'payment',
  initial: 'charging',
  states: { charging: { on: { charge: 'charged' } }, charged: {} },
});

/** A snapshot as the Stately inspector sends it (`toJSON` of a machine snapshot). */
interface WireSnapshot {
  readonly status: string;
  readonly value: unknown;
  readonly context: unknown;
}

function recorder(): { events: InspectionEvent[]; observer: (e: InspectionEvent) => void } {
  const events: InspectionEvent[] = [];
  return { events, observer: (e) => void events.push(e) };
}

/** One line per event, without the session ids, for comparing sequences. */
function describeEvent(e: InspectionEvent): string {
  switch (e.type) {
    case '@xstate.actor':
      return 'actor';
    case '@xstate.event':
      return `event ${e.event.type}`;
    case '@xstate.action':
      return `action ${e.action.type} ${JSON.stringify(e.action.params)}`;
    case '@xstate.snapshot': {
      const s = e.snapshot as Snapshot<unknown> & { value?: unknown; context?: unknown };
      return `snapshot ${e.event.type} ${s.status} ${JSON.stringify(s.value)} ${JSON.stringify(s.context)}`;
    }
    default:
      return e.type;
  }
}

/** Drive `order` through `events` with xstate's pure functions, reporting like the host. */
function drive(inspector: ReturnType<typeof createActorInspector>, id: string, events: readonly AnyEventObject[], parentId: string | null = null) {
  let [snapshot, actions] = initialTransition(order);
  inspector.actor({ id, kind: 'execution', parentId, machine: order }, snapshot, actions);
  for (const event of events) {
    inspector.event(id, event);
    [snapshot, actions] = transition(order, snapshot, event as never);
    inspector.snapshot(id, snapshot, event, actions);
  }
  return snapshot;
}

describe('createActorInspector', () => {
  it('is disabled without an observer, and every call is a no-op', () => {
    const inspector = createActorInspector(undefined);
    expect(inspector.enabled).toBe(false);
    expect(createActorInspector(undefined)).toBe(inspector);
    expect(() => drive(inspector, 'order-1', [{ type: 'pay' }])).not.toThrow();
    inspector.stopped('order-1');
  });

  it('emits what a running XState actor of the same machine emits, in the same order (without microsteps)', () => {
    const real: InspectionEvent[] = [];
    const actor = createActor(order, { inspect: (e) => void real.push(e) }).start();
    actor.send({ type: 'pay' });
    actor.send({ type: 'paid' });

    const { events, observer } = recorder();
    drive(createActorInspector(observer), 'order-1', [{ type: 'pay' }, { type: 'paid' }]);

    const expected = real.filter((e) => e.type !== '@xstate.microstep').map(describeEvent);
    expect(events.map(describeEvent)).toEqual(expected);
    expect(events.map(describeEvent)).toEqual([
      'actor',
      'event xstate.init',
      'action track {"step":"idle"}',
      'snapshot xstate.init active "idle" {"n":0}',
      'event pay',
      'action track {"step":"paying"}',
      'snapshot pay active "paying" {"n":1}',
      'event paid',
      'snapshot paid done "done" {"n":1}',
    ]);
  });

  it('gives each live actor one stable ref: sessionId xr:<id>, the machine as logic, the latest snapshot', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    const snapshot = drive(inspector, 'order-1', [{ type: 'pay' }]);

    const refs = new Set(events.map((e) => e.actorRef));
    expect(refs.size).toBe(1);
    const ref = events[0]!.actorRef as InspectedActorRef;
    expect(ref).toMatchObject({ id: 'order-1', sessionId: 'xr:order-1', kind: 'execution', logic: order, src: order, _parent: undefined });
    expect(ref.getSnapshot()).toBe(snapshot);
    expect(ref.system.get('order-1')).toBe(ref);
    expect(events.every((e) => e.rootId === 'xr:order-1')).toBe(true);
    expect(JSON.stringify(ref)).toBe('{"xstate$$type":1,"id":"order-1"}');
    expect(ref.getPersistedSnapshot()).toMatchObject({ value: 'paying', context: { n: 1 } });
    expect(() => ref.send({ type: 'paid' })).toThrow(/advanced by the runtime/);

    // Announcing a live id again is a no-op.
    const before = events.length;
    inspector.actor({ id: 'order-1', kind: 'execution', parentId: null, machine: order }, initialTransition(order)[0]);
    expect(events.length).toBe(before);
    expect(ref.getSnapshot()).toBe(snapshot);
  });

  it('links a composed child to its parent and names the sender of a signal between them', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    drive(inspector, 'order-1', [{ type: 'pay' }]);
    const [child] = initialTransition(payment);
    inspector.actor({ id: 'order-1.pay', kind: 'execution', parentId: 'order-1', machine: payment }, child);

    const parentRef = events[0]!.actorRef as InspectedActorRef;
    const announced = events.filter((e) => e.type === '@xstate.actor').map((e) => e.actorRef as InspectedActorRef);
    const childRef = announced[1]!;
    expect(childRef).toMatchObject({ id: 'order-1.pay', sessionId: 'xr:order-1.pay', logic: payment });
    expect(childRef._parent).toBe(parentRef);
    const init = events.find((e) => e.type === '@xstate.event' && e.actorRef === childRef);
    expect(init).toMatchObject({ event: { type: 'xstate.init' }, sourceRef: parentRef, rootId: 'xr:order-1' });

    // The child's outcome reaches the parent from the child; an external event has no sender.
    inspector.event('order-1', { type: 'paid' }, 'order-1.pay');
    inspector.event('order-1', { type: 'cancel' });
    const [fromChild, external] = events.slice(-2);
    expect(fromChild).toMatchObject({ type: '@xstate.event', actorRef: parentRef, sourceRef: childRef, event: { type: 'paid' } });
    expect(external).toMatchObject({ type: '@xstate.event', actorRef: parentRef, sourceRef: undefined });

    // A sender not live here is named by a detached ref.
    inspector.event('order-1', { type: 'cancel' }, 'order-2.pay');
    expect(events.at(-1)).toMatchObject({ sourceRef: { id: 'order-2.pay', sessionId: 'xr:order-2.pay' } });
  });

  it('resolves the parent of a child announced first, and the root from the child id', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    inspector.actor({ id: 'order-9.pay', kind: 'execution', parentId: 'order-9', machine: payment }, initialTransition(payment)[0]);
    const childRef = events[0]!.actorRef as InspectedActorRef;
    expect(events[0]!.rootId).toBe('xr:order-9');
    expect(childRef._parent).toBeUndefined();
    drive(inspector, 'order-9', []);
    expect(childRef._parent?.sessionId).toBe('xr:order-9');
  });

  it('stops an active actor as XState does, forgets it, and announces it again with the same sessionId', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    drive(inspector, 'order-1', [{ type: 'pay' }]);
    const ref = events[0]!.actorRef as InspectedActorRef;
    const seen: string[] = [];
    ref.subscribe({ next: (s) => void seen.push(s.status), complete: () => void seen.push('complete') });

    inspector.stopped('order-1');
    expect(events.at(-1)).toMatchObject({ type: '@xstate.snapshot', event: { type: 'xstate.stop' }, snapshot: { status: 'stopped', value: 'paying', context: { n: 1 } } });
    expect(seen).toEqual(['stopped', 'complete']);
    expect(ref.getSnapshot().status).toBe('stopped');

    // Gone: reports about it are ignored, a second stop too.
    const count = events.length;
    inspector.event('order-1', { type: 'paid' });
    inspector.snapshot('order-1', initialTransition(order)[0], { type: 'paid' });
    inspector.stopped('order-1');
    expect(events.length).toBe(count);

    // Loaded again later: a new ref, the same session.
    drive(inspector, 'order-1', []);
    const again = events[count]!;
    expect(again.type).toBe('@xstate.actor');
    expect(again.actorRef).not.toBe(ref);
    expect(again.actorRef.sessionId).toBe(ref.sessionId);
  });

  it('ends an actor that reaches a final state; stopping it then emits nothing', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    drive(inspector, 'order-1', [{ type: 'pay' }, { type: 'paid' }]);
    const ref = events[0]!.actorRef as InspectedActorRef;
    const count = events.length;
    inspector.stopped('order-1');
    expect(events.length).toBe(count);
    expect(ref.getSnapshot().status).toBe('done');
    expect(ref.system.get('order-1')).toBeUndefined();
  });

  it('keeps observer failures away from the host and reports them', () => {
    const failures: string[] = [];
    const inspector = createActorInspector(
      {
        next: (e) => {
          if (e.type === '@xstate.snapshot') throw new Error('observer broke');
        },
      },
      { onError: (error, event) => void failures.push(`${(error as Error).message} on ${event.type}`) },
    );
    expect(() => drive(inspector, 'order-1', [{ type: 'pay' }])).not.toThrow();
    expect(failures).toEqual(['observer broke on @xstate.snapshot', 'observer broke on @xstate.snapshot']);
  });

  it('shares one adapter per observer, so an actor is announced once per process', () => {
    const { events, observer } = recorder();
    const runtimeSide = createActorInspector(observer);
    const workerSide = createActorInspector(observer);
    expect(workerSide).toBe(runtimeSide);
    drive(runtimeSide, 'order-1', []);
    workerSide.actor({ id: 'order-1', kind: 'execution', parentId: null, machine: order }, initialTransition(order)[0]);
    expect(events.filter((e) => e.type === '@xstate.actor')).toHaveLength(1);
  });

  it('lets more observers join through ref.system.inspect, and select() follows the snapshots', () => {
    const { events, observer } = recorder();
    const inspector = createActorInspector(observer);
    let [snapshot] = initialTransition(order);
    inspector.actor({ id: 'order-1', kind: 'execution', parentId: null, machine: order }, snapshot);
    const ref = events[0]!.actorRef as InspectedActorRef;
    const late: string[] = [];
    const subscription = ref.system.inspect((e) => void late.push(e.type));
    const values: unknown[] = [];
    const selected = ref.select((s) => (s as typeof snapshot).context.n);
    selected.subscribe((n) => void values.push(n));

    for (const event of [{ type: 'pay' }, { type: 'cancel' }] as const) {
      inspector.event('order-1', event);
      [snapshot] = transition(order, snapshot, event);
      inspector.snapshot('order-1', snapshot, event);
    }
    subscription.unsubscribe();
    inspector.stopped('order-1');
    expect(late).toEqual(['@xstate.event', '@xstate.snapshot', '@xstate.event', '@xstate.snapshot']);
    expect(values).toEqual([1]);
    expect(selected.get()).toBe(1);
  });
});

describe('with @statelyai/inspect', () => {
  it('the Stately inspector accepts the events and serialises actor ids, parents, definitions and snapshots', async () => {
    const sent: StatelyInspectionEvent[] = [];
    // An adapter that records what the inspector would send over its transport, as the wire would carry it.
    const stately = createInspector({ send: (event) => void sent.push(JSON.parse(JSON.stringify(event)) as StatelyInspectionEvent) });
    const inspector = createActorInspector(stately.inspect);

    drive(inspector, 'order-1', [{ type: 'pay' }]);
    let [child] = initialTransition(payment);
    inspector.actor({ id: 'order-1.pay', kind: 'execution', parentId: 'order-1', machine: payment }, child);
    inspector.event('order-1.pay', { type: 'charge' });
    [child] = transition(payment, child, { type: 'charge' });
    inspector.snapshot('order-1.pay', child, { type: 'charge' });
    inspector.event('order-1', { type: 'paid' }, 'order-1.pay');
    inspector.stopped('order-1.pay');

    // The Stately inspector converts XState events on a timer (setTimeout 0 under Node).
    await new Promise((resolve) => setTimeout(resolve, 20));

    const actors = sent.filter((e) => e.type === '@xstate.actor');
    expect(actors.map((e) => ({ name: e.name, sessionId: e.sessionId, parentId: e.parentId, rootId: e.rootId }))).toEqual([
      { name: 'order-1', sessionId: 'xr:order-1', parentId: undefined, rootId: 'xr:order-1' },
      { name: 'order-1.pay', sessionId: 'xr:order-1.pay', parentId: 'xr:order-1', rootId: 'xr:order-1' },
    ]);
    const definition = JSON.parse(actors[0]!.definition!) as { id: string; states: Record<string, unknown> };
    expect(definition.id).toBe('order');
    expect(Object.keys(definition.states).sort()).toEqual(['cancelled', 'done', 'idle', 'paying']);
    expect((JSON.parse(actors[1]!.definition!) as { id: string }).id).toBe('payment');

    const snapshots = sent.filter((e) => e.type === '@xstate.snapshot').map((e) => ({ ...e, snapshot: e.snapshot as unknown as WireSnapshot }));
    expect(snapshots.map((e) => [e.sessionId, e.event.type, e.snapshot.status, e.snapshot.value])).toEqual([
      ['xr:order-1', 'xstate.init', 'active', 'idle'],
      ['xr:order-1', 'pay', 'active', 'paying'],
      ['xr:order-1.pay', 'xstate.init', 'active', 'charging'],
      ['xr:order-1.pay', 'charge', 'active', 'charged'],
      ['xr:order-1.pay', 'xstate.stop', 'stopped', 'charged'],
    ]);
    expect(snapshots[1]!.snapshot.context).toEqual({ n: 1 });

    const signals = sent.filter((e) => e.type === '@xstate.event');
    expect(signals.map((e) => [e.sessionId, e.event.type, e.sourceId])).toEqual([
      ['xr:order-1', 'xstate.init', undefined],
      ['xr:order-1', 'pay', undefined],
      ['xr:order-1.pay', 'xstate.init', 'xr:order-1'],
      ['xr:order-1.pay', 'charge', undefined],
      ['xr:order-1', 'paid', 'xr:order-1.pay'],
    ]);
    // Actions are XState events the Stately inspector skips.
    expect(sent.every((e) => e.type !== ('@xstate.action' as string))).toBe(true);
  });
});
