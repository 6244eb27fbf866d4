/**
 * XState inspection of actors that are stepped purely and persisted: the adapter the runtime
 * reports its live actors to, here driven by hand with xstate's `initialTransition` /
 * `transition` the way the host loop does, and an observer that prints every event.
 *
 *   npx tsx examples/inspect.ts
 *
 * With the Stately inspector instead of the console (see docs/inspector.md):
 *
 *   import { createInspectorServer } from '@statelyai/inspect/server';
 *   import { createWebSocketInspector } from '@statelyai/inspect';
 *   createInspectorServer({ autoOpen: false }); // open http://localhost:8080
 *   const observer = createWebSocketInspector({ url: 'ws://localhost:8080' }).inspect;
 */
import { assign, initialTransition, setup, transition } from 'xstate';
import type { AnyEventObject, InspectionEvent } from 'xstate';
import { createActorInspector } from '../src/observability/inspector.js';

// A root execution `order-1` and its composed child `order-1.pay`.
const order = setup({
  types: { context: {} as { attempts: number }, events: {} as { type: 'pay' } | { type: 'paid' } },
  actions: { notify: (_: unknown, _params: { readonly what: string }) => undefined },
}).createMachine({
  id: 'order',
  initial: 'idle',
  context: { attempts: 0 },
  states: {
    idle: { on: { pay: { target: 'paying', actions: assign({ attempts: ({ context }) => context.attempts + 1 }) } } },
    paying: { entry: { type: 'notify', params: { what: 'charging' } }, on: { paid: 'done' } },
    done: { type: 'final' },
  },
});
const payment = setup({ types: { events: {} as { type: 'charged' } } }).createMachine({
  id: 'payment',
  initial: 'charging',
  states: { charging: { on: { charged: 'charged' } }, charged: { type: 'final' } },
});

/** One line per inspection event: what a `createRuntime({ inspect })` observer receives. */
function print(e: InspectionEvent): void {
  const who = e.actorRef.sessionId;
  switch (e.type) {
    case '@xstate.actor': {
      const parent = (e.actorRef as { _parent?: { sessionId: string } })._parent?.sessionId ?? '-';
      console.log(`actor     ${who} (root ${e.rootId}, parent ${parent})`);
      break;
    }
    case '@xstate.event':
      console.log(`event     ${who} <- ${e.event.type}${e.sourceRef === undefined ? '' : ` from ${e.sourceRef.sessionId}`}`);
      break;
    case '@xstate.action':
      console.log(`action    ${who} ${e.action.type} ${JSON.stringify(e.action.params)}`);
      break;
    case '@xstate.snapshot': {
      const s = e.snapshot as { status: string; value?: unknown; context?: unknown };
      console.log(`snapshot  ${who} ${JSON.stringify(s.value)} ${s.status} ${JSON.stringify(s.context)} after ${e.event.type}`);
      break;
    }
  }
}

const inspector = createActorInspector(print, { onError: (error) => console.error('inspection observer failed', error) });

// The host: announce the actor, then for each event: report it, step, commit, report the snapshot.
let [root, actions] = initialTransition(order);
inspector.actor({ id: 'order-1', kind: 'execution', parentId: null, machine: order }, root, actions);
const step = (event: { type: 'pay' } | { type: 'paid' }, from?: string) => {
  inspector.event('order-1', event, from);
  [root, actions] = transition(order, root, event);
  inspector.snapshot('order-1', root, event, actions);
};
step({ type: 'pay' });

// A composed child runs under its parent and reports its outcome back to it.
let [child] = initialTransition(payment);
inspector.actor({ id: 'order-1.pay', kind: 'execution', parentId: 'order-1', machine: payment }, child);
const charged: AnyEventObject = { type: 'charged' };
inspector.event('order-1.pay', charged);
[child] = transition(payment, child, { type: 'charged' });
inspector.snapshot('order-1.pay', child, charged); // a final state: the child ends here
step({ type: 'paid' }, 'order-1.pay');
inspector.stopped('order-1'); // already done: nothing more to report
