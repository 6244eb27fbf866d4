/**
 * A checkout saga on the embedded runtime (no server): reserve stock, charge
 * the card, send the receipt. A declined card rolls back the reservation.
 *
 *   npm run example
 */
import { z } from 'zod';
import { createRuntime, defineReactor, defineStep, fail } from 'xreactor';

const stock = new Map<string, number>([['sku-1', 5]]);
const charges = new Map<string, number>();

const chargeCard = defineStep({
  name: 'chargeCard',
  input: z.object({ cardToken: z.string(), amountCents: z.number().int().positive() }),
  retries: { maxAttempts: 3, backoff: 'exponential', baseDelayMs: 50 },
  run: ({ cardToken, amountCents }) => {
    if (cardToken === 'tok_declined') return fail(new Error('card declined'), { retry: false });
    const id = `ch_${charges.size + 1}`;
    charges.set(id, amountCents);
    return { chargeId: id, amountCents };
  },
  undo: ({ chargeId }) => {
    charges.delete(chargeId);
  },
});

const checkout = defineReactor({
  name: 'checkout',
  input: z.object({ sku: z.string(), quantity: z.number().int().positive(), cardToken: z.string(), email: z.email() }),
})
  .step('reserve', {
    args: ({ input }) => ({ sku: input('sku'), quantity: input('quantity') }),
    run: ({ sku, quantity }) => {
      const left = stock.get(sku) ?? 0;
      if (left < quantity) return fail(new Error(`only ${left} of ${sku} left`));
      stock.set(sku, left - quantity);
      return { sku, quantity, unitCents: 1250 };
    },
    undo: ({ sku, quantity }) => {
      stock.set(sku, (stock.get(sku) ?? 0) + quantity);
    },
  })
  .step('charge', chargeCard, {
    args: ({ input, result }) => ({
      cardToken: input('cardToken'),
      amountCents: result('reserve').transform((r) => r.quantity * r.unitCents),
    }),
  })
  .step('receipt', {
    args: ({ input, result }) => ({ email: input('email'), charge: result('charge') }),
    run: ({ email, charge }) => ({ sentTo: email, text: `charged ${(charge.amountCents / 100).toFixed(2)}` }),
  })
  .returns('receipt')
  .build();

const runtime = createRuntime();

const ok = await runtime.run(checkout, { sku: 'sku-1', quantity: 2, cardToken: 'tok_visa', email: 'ada@example.com' });
console.log('first order:', ok.status, ok.status === 'completed' ? ok.value : ok);
console.log('  stock left:', stock.get('sku-1'), 'charges:', [...charges.entries()]);

const declined = await runtime.run(checkout, { sku: 'sku-1', quantity: 1, cardToken: 'tok_declined', email: 'bob@example.com' });
console.log('second order:', declined.status, declined.status === 'failed' ? `${declined.step}: ${declined.message}` : '');
console.log('  stock left:', stock.get('sku-1'), '(reservation undone)');

const view = await runtime.find(declined.executionId);
console.log('  trace:', view.trace.map((t) => `${t.type}${t.step ? `:${t.step}` : ''}`).join(' '));

const invalid = await runtime.run(checkout, { sku: 'sku-1', quantity: 0, cardToken: 'tok_visa', email: 'nope' });
console.log('third order:', invalid.status, invalid.status === 'failed' ? invalid.validationErrors : '');
