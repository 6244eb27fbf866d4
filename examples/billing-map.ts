/**
 * An inline map: charge every order of a batch, one element reactor run per order. A declined
 * card fails the map and refunds the orders already charged, newest first.
 *
 *   npx tsx examples/billing-map.ts
 */
import { z } from 'zod';
import { createRuntime, defineReactor, fail } from 'xreactor';
const charge = defineReactor({ name: 'charge_one', input: z.object({ id: z.string(), cents: z.number() }) })
  .step('charge', { args: ({ input }) => ({ id: input('id'), cents: input('cents') }), run: ({ id, cents }) => (cents > 900 ? fail(new Error(`declined ${id}`)) : { id, charged: cents }), undo: (r) => console.log('refund', r.id) })
  .returns('charge').build();
const billing = defineReactor({ name: 'billing', input: z.object({ orders: z.array(z.object({ id: z.string(), cents: z.number() })) }) })
  .map('charges', charge, { source: ({ input }) => input('orders'), args: ({ element }) => ({ id: element('id'), cents: element('cents') }), collect: async (results) => { let total = 0; for await (const r of results) if (r.status === 'completed') total += r.value.charged; return total; } })
  .returns('charges').build();
const runtime = createRuntime();
console.log(await runtime.run(billing, { orders: [{ id: 'a', cents: 100 }, { id: 'b', cents: 200 }] }));
const declined = await runtime.run(billing, { orders: [{ id: 'a', cents: 100 }, { id: 'b', cents: 950 }, { id: 'c', cents: 5 }] });
console.log(declined.status, declined.status === 'failed' ? declined.message : '');
await runtime.close();
