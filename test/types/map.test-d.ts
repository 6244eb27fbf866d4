import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineReactor, fail, paged } from '../../src/index.js';
import type {
  ArgumentSource,
  CompletedElement,
  DispatchedResult,
  ElementResult,
  MapResults,
  ModeOf,
  OutputOf,
  ResultsOf,
  StepContext,
} from '../../src/index.js';

const order = z.object({ id: z.string(), cents: z.number(), customer: z.object({ name: z.string(), address: z.object({ city: z.string() }) }) });
type Order = z.output<typeof order>;
const billingInput = z.object({ orders: z.array(order), currency: z.string(), customerId: z.string() });

const chargeOne = defineReactor({ name: 'charge-one', input: z.object({ orderId: z.string(), currency: z.string() }) })
  .step('charge', { args: ({ input }) => ({ id: input('orderId') }), run: ({ id }) => ({ chargeId: id, cents: 100 }) })
  .returns('charge')
  .build();
type Charge = OutputOf<typeof chargeOne>;

/** An element reactor whose input is the order itself. */
const shipOne = defineReactor({ name: 'ship-one', input: order })
  .step('ship', { args: ({ input }) => ({ city: input('customer', 'address.city') }), run: () => 'parcel' })
  .returns('ship')
  .build();

/** An element reactor without an input schema: it reads no input. */
const tick = defineReactor({ name: 'tick' })
  .step('tick', { run: () => 1 })
  .returns('tick')
  .build();

const billing = () => defineReactor({ name: 'billing', input: billingInput }).step('open', { run: () => ({ batchId: 'b1' }) });

const runtime = createRuntime();

/** Type-level readers of a definition (this file is type-checked, never run). */
declare function modeOf<R>(definition: R): ModeOf<R>;
declare function resultsOf<R>(definition: R): ResultsOf<R>;

describe('map: element()', () => {
  it('yields the item, and a dotted path into it with its type', () => {
    billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      args: ({ element, input }) => {
        expectTypeOf(element()).toEqualTypeOf<ArgumentSource<Order>>();
        expectTypeOf(element('cents')).toEqualTypeOf<ArgumentSource<number>>();
        expectTypeOf(element('customer.address.city')).toEqualTypeOf<ArgumentSource<string>>();
        return { orderId: element('id'), currency: input('currency') };
      },
    });
  });

  it('yields the items of a step result', () => {
    billing()
      .step('load', { run: async () => [{ sku: 'a', qty: 1 }] })
      .map('charges', chargeOne, {
        source: ({ result }) => result('load'),
        args: ({ element, value }) => {
          expectTypeOf(element('qty')).toEqualTypeOf<ArgumentSource<number>>();
          return { orderId: element('sku'), currency: value('EUR') };
        },
      });
  });

  it('supports transform like every source', () => {
    billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      args: ({ element, input }) => ({ orderId: element('cents').transform((c) => c.toFixed(0)), currency: input('currency') }),
    });
  });

  it('rejects a path the item does not have', () => {
    billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      // @ts-expect-error the order has no "customer.zip"
      args: ({ element, input }) => ({ orderId: element('customer.zip'), currency: input('currency') }),
    });
  });

  it('exists only in a map’s args', () => {
    billing().step('s', {
      // @ts-expect-error element() is not a source of a plain step
      args: ({ element }) => ({ id: element('id') }),
      run: () => undefined,
    });
    billing().compose('c', chargeOne, {
      // @ts-expect-error element() is not a source of a compose
      args: ({ element }) => ({ orderId: element('id') }),
    });
    billing().map('charges', chargeOne, {
      // @ts-expect-error element() is not a source of a map's source
      source: ({ element }) => element(), // eslint-disable-line @typescript-eslint/no-unsafe-return
      args: ({ value }) => ({ orderId: value('x'), currency: value('EUR') }),
    });
  });
});

describe('map: source', () => {
  it('rejects a source that is not an array', () => {
    billing().map('charges', chargeOne, {
      // @ts-expect-error currency is a string, not an array of items
      source: ({ input }) => input('currency'),
      args: ({ value }) => ({ orderId: value('x'), currency: value('EUR') }),
    });
  });

  it('rejects result() of an unknown step and input() of an unknown input', () => {
    billing().map('charges', chargeOne, {
      // @ts-expect-error no step "load"
      source: ({ result }) => result('load'),
    });
    billing().map('charges', chargeOne, {
      // @ts-expect-error no input "items"
      source: ({ input }) => input('items'),
    });
  });

  it('takes a paged source: items from page, ctx.args from its own args, inputs of the reactor', () => {
    billing().map('invoices', chargeOne, {
      source: paged({
        args: ({ input }) => ({ customer: input('customerId') }),
        page: async (offset, limit, ctx) => {
          expectTypeOf(offset).toEqualTypeOf<number>();
          expectTypeOf(limit).toEqualTypeOf<number>();
          expectTypeOf(ctx.args).toEqualTypeOf<{ customer: string }>();
          expectTypeOf(ctx.inputs.currency).toEqualTypeOf<string>();
          expectTypeOf(ctx.signal).toEqualTypeOf<AbortSignal>();
          return [{ invoiceId: 'i1', total: 5 }];
        },
        count: ({ args }) => {
          expectTypeOf(args).toEqualTypeOf<{ customer: string }>();
          return 10;
        },
      }),
      args: ({ element, input }) => {
        expectTypeOf(element()).toEqualTypeOf<ArgumentSource<{ invoiceId: string; total: number }>>();
        return { orderId: element('invoiceId'), currency: input('currency') };
      },
    });
  });

  it('gives page and count no args when the paged source declares none', () => {
    billing().map('invoices', chargeOne, {
      source: paged({
        page: (_offset, _limit, { args }) => {
          expectTypeOf(args).toEqualTypeOf<undefined>();
          return [{ orderId: 'o', currency: 'EUR' }];
        },
      }),
    });
  });

  it('rejects a paged source whose args read an unknown input, or whose page returns no array', () => {
    billing().map('invoices', chargeOne, {
      source: paged({
        // @ts-expect-error no input "customer"
        args: ({ input }) => ({ customer: input('customer') }),
        page: () => [{ orderId: 'o', currency: 'EUR' }],
      }),
    });
    billing().map('invoices', chargeOne, {
      // @ts-expect-error page returns one item, not an array
      source: paged({ page: () => ({ orderId: 'o', currency: 'EUR' }) }),
    });
  });
});

describe('map: the element input', () => {
  it('checks args against the element reactor’s input', () => {
    billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      // @ts-expect-error orderId must be a string, cents is a number
      args: ({ element, input }) => ({ orderId: element('cents'), currency: input('currency') }),
    });
    billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      // @ts-expect-error currency is missing
      args: ({ element }) => ({ orderId: element('id') }),
    });
  });

  it('without args, the items must be the element reactor’s input', () => {
    billing().map('shipments', shipOne, { source: ({ input }) => input('orders') });
    billing().map('charges', chargeOne, {
      // @ts-expect-error an order is not the input of charge-one: wire it with args
      source: ({ input }) => input('orders'),
    });
  });

  it('lets an element reactor without an input schema take any item', () => {
    billing().map('ticks', tick, { source: ({ input }) => input('orders') });
  });

  it('rejects an element reactor with an interrupt, and a builder that was not built', () => {
    const approve = defineReactor({ name: 'approve' }).interrupt('approval').build();
    // @ts-expect-error an interrupt is not supported inside a map element
    billing().map('approvals', approve, { source: ({ input }) => input('orders') });
    const notBuilt = defineReactor({ name: 'one' }).step('a', { run: () => 1 });
    // @ts-expect-error the element reactor must be built
    billing().map('ones', notBuilt, { source: ({ input }) => input('orders') });
  });
});

describe('map: options', () => {
  it('types batchSize, fanOut, atomic, waitFor and rejects unknown options', () => {
    const source = ({ input }: { input: (name: 'orders') => ArgumentSource<Order[]> }) => input('orders');
    billing().map('a', shipOne, { source, batchSize: 10, fanOut: false, atomic: false, waitFor: ['open'] });
    // @ts-expect-error batchSize is a number
    billing().map('b', shipOne, { source, batchSize: '10' });
    // @ts-expect-error atomic is a boolean
    billing().map('c', shipOne, { source, atomic: 'yes' });
    // @ts-expect-error failFast was removed: use atomic
    billing().map('d', shipOne, { source, failFast: true });
    // @ts-expect-error a map takes no undo (declare undoAll)
    billing().map('e', shipOne, { source, undo: () => undefined });
    // @ts-expect-error no step "close"
    billing().map('f', shipOne, { source, waitFor: ['close'] });
  });

  it('rejects a step name already used', () => {
    // @ts-expect-error step "open" is already defined
    billing().map('open', shipOne, { source: ({ input }) => input('orders') });
  });
});

describe('map: the step’s result', () => {
  it('is the MapResults of the element reactor’s output without collect', () => {
    const def = billing().map('charges', chargeOne, {
      source: ({ input }) => input('orders'),
      args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') }),
    }).build();
    expectTypeOf(resultsOf(def).charges).toEqualTypeOf<MapResults<Charge>>();
  });

  it('is collect’s value (awaited, fail(...) left out) with collect, which reads the results', () => {
    const def = billing()
      .map('charged', chargeOne, {
        source: ({ input }) => input('orders'),
        args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') }),
        collect: async (results, ctx) => {
          expectTypeOf(results).toEqualTypeOf<MapResults<Charge>>();
          expectTypeOf(ctx).toEqualTypeOf<StepContext<z.output<typeof billingInput>>>();
          let cents = 0;
          for await (const r of results) {
            expectTypeOf(r).toEqualTypeOf<ElementResult<Charge>>();
            if (r.status === 'completed') cents += r.value.cents;
          }
          return cents > 0 ? { cents } : fail(new Error('nothing charged'));
        },
        undoAll: async (completed) => {
          expectTypeOf(completed).toEqualTypeOf<AsyncIterable<CompletedElement<Charge>>>();
        },
      })
      .build();
    expectTypeOf(resultsOf(def).charged).toEqualTypeOf<{ cents: number }>();
  });

  it('is what later steps read with result() and what returns() makes the run’s value', async () => {
    const def = billing()
      .map('charges', chargeOne, {
        source: ({ input }) => input('orders'),
        args: ({ element, input }) => ({ orderId: element('id'), currency: input('currency') }),
        collect: (results) => results.total,
      })
      .step('report', {
        args: ({ result }) => ({ total: result('charges') }),
        run: ({ total }) => {
          expectTypeOf(total).toEqualTypeOf<number>();
          return `${total} charged`;
        },
      })
      .returns('charges')
      .build();
    const result = await runtime.run(def, { orders: [], currency: 'EUR', customerId: 'c' });
    if (result.status === 'completed') expectTypeOf(result.value).toEqualTypeOf<number>();
  });
});

describe('map: run mode', () => {
  const inline = billing().map('shipments', shipOne, { source: ({ input }) => input('orders') }).build();
  const fanned = billing().map('shipments', shipOne, { source: ({ input }) => input('orders'), fanOut: true }).build();

  it('an inline map keeps the reactor inline: run() returns no dispatched result', async () => {
    expectTypeOf(modeOf(inline)).toEqualTypeOf<'inline'>();
    const result = await runtime.run(inline, { orders: [], currency: 'EUR', customerId: 'c' });
    expectTypeOf(result).extract<DispatchedResult>().toBeNever();
  });

  it('a fan-out map makes run() return a dispatched result', async () => {
    expectTypeOf(modeOf(fanned)).toEqualTypeOf<'background'>();
    const result = await runtime.run(fanned, { orders: [], currency: 'EUR', customerId: 'c' });
    expectTypeOf(result).extract<DispatchedResult>().toEqualTypeOf<DispatchedResult>();
    expectTypeOf(result).extract<{ status: 'paused' }>().toBeNever();
  });

  it('a fanOut that is not known statically counts as fanning out', () => {
    const fanOut = Math.random() > 0.5;
    const def = billing().map('shipments', shipOne, { source: ({ input }) => input('orders'), fanOut }).build();
    expectTypeOf(modeOf(def)).toEqualTypeOf<'background'>();
  });

  it('an element reactor that fans out makes its map’s reactor background', () => {
    const inner = defineReactor({ name: 'inner', input: order })
      .map('lines', tick, { source: ({ value }) => value([1, 2]), fanOut: true })
      .build();
    const def = billing().map('outer', inner, { source: ({ input }) => input('orders') }).build();
    expectTypeOf(modeOf(def)).toEqualTypeOf<'background'>();
  });

  it('compose propagates background from a child with a fan-out map, and pause as before', () => {
    const composed = defineReactor({ name: 'outer' }).compose('bill', fanned).build();
    expectTypeOf(modeOf(composed)).toEqualTypeOf<'background'>();
    const approve = defineReactor({ name: 'approve' }).interrupt('approval').build();
    const both = defineReactor({ name: 'outer' }).compose('bill', fanned).compose('approve', approve).build();
    expectTypeOf(modeOf(both)).toEqualTypeOf<'background' | 'pause'>();
    const plain = defineReactor({ name: 'outer' }).compose('bill', inline).build();
    expectTypeOf(modeOf(plain)).toEqualTypeOf<'inline'>();
  });
});
