/**
 * The reactor of the scale-out example, loaded by the caller and by the worker:
 * reserve runs in the caller, the rest is handed to a worker (`background({ after: 'reserve' })`).
 * A declined card (`cardToken: 'tok_declined'`) rolls back the reservation in the worker.
 */
import { z } from 'zod';
import { defineReactor, fail } from 'xreactor';

export const order = defineReactor({
  name: 'scale_out_order',
  input: z.object({ sku: z.string(), quantity: z.number().int().positive(), cardToken: z.string() }),
})
  .step('reserve', {
    args: ({ input }) => ({ sku: input('sku'), quantity: input('quantity') }),
    run: ({ sku, quantity }) => ({ reservation: `res-${sku}-${quantity}`, pid: process.pid }),
    undo: (reserved) => console.log(`released ${reserved.reservation} (in process ${process.pid})`),
  })
  .step('charge', {
    args: ({ input }) => ({ token: input('cardToken') }),
    run: ({ token }) => (token === 'tok_declined' ? fail(new Error('card declined'), { retry: false }) : { charge: 'ch-1', pid: process.pid }),
  })
  .background({ after: 'reserve' })
  .returns('charge')
  .build();
