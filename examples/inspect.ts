/**
 * XState inspection of a run: every live actor the runtime advances (the execution `order-1` and
 * its composed child `order-1.pay`) appears as its own actor, with its events and committed
 * snapshots. Here an observer prints them; any observer of XState inspection events works.
 *
 *   npx tsx examples/inspect.ts
 *
 * With the Stately inspector instead of the console (see docs/inspector.md):
 *
 *   import { createInspectorServer } from '@statelyai/inspect/server';
 *   import { createWebSocketInspector } from '@statelyai/inspect';
 *   createInspectorServer({ autoOpen: false }); // open http://localhost:8080
 *   const inspect = createWebSocketInspector({ url: 'ws://localhost:8080' }).inspect;
 */
import type { InspectionEvent } from 'xstate';
import { createRuntime, defineReactor } from 'xreactor';

const payment = defineReactor({ name: 'payment' })
  .step('charge', { run: () => ({ id: 'ch_1' }), undo: () => undefined })
  .build();
const order = defineReactor({ name: 'order' })
  .step('reserve', { run: () => 'R1', undo: () => undefined })
  .compose('pay', payment, { waitFor: ['reserve'] })
  .build();

/** One line per inspection event. */
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
    case '@xstate.snapshot': {
      const s = e.snapshot as { status: string; value?: unknown };
      console.log(`snapshot  ${who} ${JSON.stringify(s.value)} ${s.status} after ${e.event.type}`);
      break;
    }
    default:
      break;
  }
}

const runtime = createRuntime({ inspect: print, generateId: () => 'order-1' });
const result = await runtime.run(order, {});
console.log(`\n${result.status}`);
await runtime.close();
