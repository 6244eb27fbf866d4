import { assertType, describe, expectTypeOf, it } from 'vitest';
import * as v from 'valibot';
import { z } from 'zod';
import { createRuntime, defineReactor, defineStep, describePlanMismatch, fail, halt, planFingerprint, skip } from '../../src/index.js';
import type {
  CompletedResult,
  Fail,
  FailedResult,
  Halt,
  HaltedResult,
  InputOf,
  OutputOf,
  ResultsOf,
  RunResult,
  Skip,
  StepContext,
  StepDefinition,
  StepValue,
} from '../../src/index.js';

const order = z.object({
  orderId: z.string(),
  cents: z.number().int(),
  address: z.object({ city: z.string(), geo: z.object({ lat: z.number(), lng: z.number() }) }),
  coupon: z.string().optional(),
});
type Order = z.output<typeof order>;

const shipment = v.object({
  parcelId: v.string(),
  weightGrams: v.pipe(v.number(), v.integer()),
  to: v.object({ country: v.string(), postcode: v.string() }),
});
type Shipment = v.InferOutput<typeof shipment>;

/** A result type declared as an interface (no index signature), as service clients usually return. */
interface Reservation {
  readonly id: string;
  readonly hold: { readonly warehouse: string; readonly slot: number };
}
declare function reserveStock(sku: string): Promise<Reservation>;

const runtime = createRuntime();

describe('step arguments', () => {
  it('input(name) has the schema output type of that input', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      args: ({ input }) => ({ id: input('orderId'), cents: input('cents'), address: input('address'), coupon: input('coupon') }),
      run: (args) => {
        expectTypeOf(args).toEqualTypeOf<{
          id: string;
          cents: number;
          address: { city: string; geo: { lat: number; lng: number } };
          coupon: string | undefined;
        }>();
      },
    });
  });

  it('input(name, path) has the nested type', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      args: ({ input }) => ({ city: input('address', 'city'), lat: input('address', 'geo.lat') }),
      run: (args) => {
        expectTypeOf(args).toEqualTypeOf<{ city: string; lat: number }>();
      },
    });
  });

  it('result(step) has that step’s result type, and result(step, path) the nested type', () => {
    defineReactor({ name: 'args', input: order })
      .step('reserve', { args: ({ input }) => ({ sku: input('orderId') }), run: ({ sku }) => reserveStock(sku) })
      .step('quote', { run: () => ({ total: { cents: 100, currency: 'EUR' as const } }) })
      .step('ship', {
        args: ({ result }) => ({
          reservation: result('reserve'),
          slot: result('reserve', 'hold.slot'),
          warehouse: result('reserve', 'hold.warehouse'),
          total: result('quote', 'total'),
          currency: result('quote', 'total.currency'),
        }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{
            reservation: Reservation;
            slot: number;
            warehouse: string;
            total: { cents: number; currency: 'EUR' };
            currency: 'EUR';
          }>();
        },
      });
  });

  it('transform changes the type; value(v) keeps v’s type', () => {
    defineReactor({ name: 'args', input: order })
      .step('price', { run: () => 12.5 })
      .step('s', {
        args: ({ input, result, value }) => ({
          euros: input('cents').transform((cents) => {
            expectTypeOf(cents).toEqualTypeOf<number>();
            return (cents / 100).toFixed(2);
          }),
          rounded: result('price').transform(Math.round),
          upper: input('address', 'city')
            .transform((city) => city.toUpperCase())
            .transform((city) => city.length > 3),
          limit: value(3),
          mode: value('fast' as const),
          tags: value(['a', 'b']),
          bumped: value(1).transform((n) => `${n + 1}`),
        }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{
            euros: string;
            rounded: number;
            upper: boolean;
            limit: number;
            mode: 'fast';
            tags: string[];
            bumped: string;
          }>();
        },
      });
  });

  it('a transform receives the source type, not any', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      // @ts-expect-error orderId is a string: toFixed does not exist on it
      args: ({ input }) => ({ id: input('orderId').transform((id) => String(id.toFixed(2))) }),
      run: () => 1,
    });
  });

  it('the body cannot use an argument as another type', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      args: ({ input }) => ({ cents: input('cents') }),
      // @ts-expect-error cents is a number
      run: ({ cents }) => String(cents.toUpperCase()),
    });
  });

  it('an unknown input name is a compile error', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      // @ts-expect-error "orderid" is not an input of the reactor
      args: ({ input }) => ({ id: input('orderid') }),
      run: () => 1,
    });
  });

  it('an unknown input name is a compile error for a reactor without an input schema', () => {
    defineReactor({ name: 'noInput' }).step('s', {
      // @ts-expect-error the reactor declares no inputs
      args: ({ input }) => ({ id: input('orderId') }),
      run: () => 1,
    });
  });

  it('an unknown path into an input is a compile error', () => {
    defineReactor({ name: 'args', input: order }).step('s', {
      // @ts-expect-error address has no "geo.alt"
      args: ({ input }) => ({ alt: input('address', 'geo.alt') }),
      run: () => 1,
    });
  });

  it('result() of an unknown step is a compile error', () => {
    defineReactor({ name: 'args', input: order })
      .step('reserve', { run: () => reserveStock('sku') })
      .step('s', {
        // @ts-expect-error no step "reserved"
        args: ({ result }) => ({ r: result('reserved') }),
        run: () => 1,
      });
  });

  it('result() of a step defined later is a compile error', () => {
    defineReactor({ name: 'args', input: order })
      .step('s', {
        // @ts-expect-error "reserve" is not defined yet
        args: ({ result }) => ({ r: result('reserve') }),
        run: () => 1,
      })
      .step('reserve', { run: () => reserveStock('sku') });
  });

  it('an unknown path into a result is a compile error', () => {
    defineReactor({ name: 'args', input: order })
      .step('reserve', { run: () => reserveStock('sku') })
      .step('s', {
        // @ts-expect-error Reservation.hold has no "shelf"
        args: ({ result }) => ({ r: result('reserve', 'hold.shelf') }),
        run: () => 1,
      });
  });

  it('waitFor accepts declared steps and rejects unknown names', () => {
    const builder = defineReactor({ name: 'args', input: order }).step('audit', { run: () => undefined });
    builder.step('s', { waitFor: ['audit'], run: () => 1 });
    // @ts-expect-error no step "audits"
    builder.step('s', { waitFor: ['audits'], run: () => 1 });
    // @ts-expect-error "later" is defined after this step
    builder.step('s', { waitFor: ['later'], run: () => 1 }).step('later', { run: () => 2 });
  });
});

describe('step names', () => {
  it('a duplicate step name is a compile error', () => {
    const builder = defineReactor({ name: 'names', input: order }).step('a', { run: () => 1 });
    builder.step('b', { run: () => 2 });
    // @ts-expect-error step "a" is already defined
    builder.step('a', { run: () => 2 });
  });

  it('a duplicate name is rejected for reusable steps too', () => {
    const double = defineStep({ name: 'double', run: (args: { n: number }) => args.n * 2 });
    const builder = defineReactor({ name: 'names', input: order }).step('a', double);
    builder.step('b', double);
    // @ts-expect-error step "a" is already defined
    builder.step('a', double);
  });
});

describe('reactor version', () => {
  it('accepts a version and exposes it as a number', () => {
    const def = defineReactor({ name: 'versioned', version: 2, input: order }).step('a', { run: () => 1 }).build();
    expectTypeOf(def.version).toEqualTypeOf<number>();
    expectTypeOf(defineReactor({ name: 'unversioned' }).build().version).toEqualTypeOf<number>();
  });

  it('rejects a version that is not a number', () => {
    // @ts-expect-error version is a number
    defineReactor({ name: 'versioned', version: '2' });
  });

  it('version is read-only on a built definition', () => {
    const def = defineReactor({ name: 'versioned', version: 2 }).build();
    // @ts-expect-error version is readonly
    def.version = 3;
  });
});

describe('plan fingerprint', () => {
  const def = defineReactor({ name: 'fingerprinted' }).step('a', { run: () => 1 }).build();

  it('is a read-only string on a built definition, and planFingerprint returns one', () => {
    expectTypeOf(def.fingerprint).toEqualTypeOf<string>();
    expectTypeOf(planFingerprint(def)).toEqualTypeOf<string>();
    // @ts-expect-error fingerprint is readonly
    def.fingerprint = 'p1-0000000000000000';
  });

  it('planFingerprint takes a built definition, not a builder', () => {
    // @ts-expect-error a builder has no plan yet: call .build()
    planFingerprint(defineReactor({ name: 'unbuilt' }));
  });

  it('describePlanMismatch takes the reactor, its version and the two fingerprints', () => {
    expectTypeOf(describePlanMismatch('checkout', 2, 'p1-a', 'p1-b')).toEqualTypeOf<string>();
    // @ts-expect-error the version is a number
    describePlanMismatch('checkout', '2', 'p1-a', 'p1-b');
  });
});

describe('what a step receives', () => {
  it('a step without args or contract receives all reactor inputs', () => {
    defineReactor({ name: 'all', input: order }).step('s', {
      run: (args, ctx) => {
        expectTypeOf(args).toEqualTypeOf<Order>();
        expectTypeOf(ctx).toEqualTypeOf<StepContext<Order>>();
        expectTypeOf(ctx.inputs).toEqualTypeOf<Readonly<Order>>();
      },
    });
  });

  it('a step with an input contract receives the contract’s output type', () => {
    defineReactor({ name: 'contract', input: order })
      .step('zodContract', {
        input: z.object({ cents: z.number(), note: z.string().default('none') }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{ cents: number; note: string }>();
        },
      })
      .step('valibotContract', {
        args: ({ input }) => ({ weightGrams: input('cents') }),
        input: v.object({ weightGrams: v.pipe(v.number(), v.transform((n) => BigInt(n))) }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{ weightGrams: bigint }>();
        },
      });
  });

  it('a step that ignores its arguments still compiles and produces its result type', () => {
    const def = defineReactor({ name: 'all', input: order })
      .step('s', { run: () => 'done' })
      .build();
    expectTypeOf(def.name).toEqualTypeOf<'all'>();
    expectTypeOf<ResultsOf<typeof def>>().toEqualTypeOf<{ s: string }>();
  });
});

describe('StepValue', () => {
  it('maps outcomes to the value dependants see', () => {
    expectTypeOf<StepValue<Skip<number>>>().toEqualTypeOf<number>();
    expectTypeOf<StepValue<string | Skip<number>>>().toEqualTypeOf<string | number>();
    expectTypeOf<StepValue<string | Fail | Halt>>().toEqualTypeOf<string>();
    expectTypeOf<StepValue<Fail>>().toBeNever();
  });

  it('returning skip(v) gives v’s type; fail() and halt() do not widen the result', () => {
    const def = defineReactor({ name: 'outcomes', input: order })
      .step('skipped', { run: () => skip({ cached: true }) })
      .step('skippedEmpty', { run: () => skip() })
      .step('mixed', { args: ({ input }) => ({ cents: input('cents') }), run: ({ cents }) => (cents > 0 ? cents : skip(0)) })
      .step('guarded', {
        args: ({ input }) => ({ cents: input('cents') }),
        run: ({ cents }) => (cents > 1000 ? fail(new Error('over limit'), { retry: false }) : cents < 0 ? halt('refund') : { approved: cents }),
      })
      .step('onlyFails', { run: () => fail('never succeeds') })
      .build();
    expectTypeOf(def.name).toEqualTypeOf<'outcomes'>();
    expectTypeOf<ResultsOf<typeof def>>().toEqualTypeOf<{
      skipped: { cached: boolean };
      skippedEmpty: undefined;
      mixed: number;
      guarded: { approved: number };
      onlyFails: never;
    }>();
  });

  it('async bodies are unwrapped', () => {
    const def = defineReactor({ name: 'async', input: order })
      .step('reserve', { args: ({ input }) => ({ sku: input('orderId') }), run: ({ sku }) => reserveStock(sku) })
      .step('charge', {
        args: ({ input }) => ({ cents: input('cents') }),
        run: async ({ cents }) => {
          await Promise.resolve();
          if (cents < 0) return fail(new Error('negative'));
          if (cents === 0) return skip(null);
          if (cents > 1e6) return halt('manual review');
          return { chargeId: 'ch_1', cents };
        },
      })
      .step('next', {
        args: ({ result }) => ({ charge: result('charge'), reservation: result('reserve') }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{ charge: { chargeId: string; cents: number } | null; reservation: Reservation }>();
        },
      })
      .build();
    expectTypeOf(def.name).toEqualTypeOf<'async'>();
    expectTypeOf<ResultsOf<typeof def>['charge']>().toEqualTypeOf<{ chargeId: string; cents: number } | null>();
    expectTypeOf<ResultsOf<typeof def>['reserve']>().toEqualTypeOf<Reservation>();
  });
});

describe('compensate and undo', () => {
  it('undo(result, args) receives the step’s result and args; compensate(error, args) gets Error and args', () => {
    defineReactor({ name: 'rollback', input: order }).step('reserve', {
      args: ({ input }) => ({ sku: input('orderId'), qty: input('cents') }),
      run: async ({ sku }) => (sku === '' ? skip<Reservation | undefined>(undefined) : reserveStock(sku)),
      undo: (reservation, args, ctx) => {
        expectTypeOf(reservation).toEqualTypeOf<Reservation | undefined>();
        expectTypeOf(args).toEqualTypeOf<{ sku: string; qty: number }>();
        expectTypeOf(ctx).toEqualTypeOf<StepContext<Order>>();
      },
      compensate: (error, args, ctx) => {
        expectTypeOf(error).toEqualTypeOf<Error>();
        expectTypeOf(args).toEqualTypeOf<{ sku: string; qty: number }>();
        expectTypeOf(ctx.inputs.orderId).toEqualTypeOf<string>();
      },
    });
  });

  it('a step without args gets all inputs in undo and compensate', () => {
    defineReactor({ name: 'rollback', input: order }).step('s', {
      run: () => 42,
      undo: (result, args) => {
        expectTypeOf(result).toEqualTypeOf<number>();
        expectTypeOf(args).toEqualTypeOf<Order>();
      },
      compensate: (_error, args) => {
        expectTypeOf(args).toEqualTypeOf<Order>();
      },
    });
  });

  it('undo cannot declare a result type the body does not produce', () => {
    const builder = defineReactor({ name: 'rollback', input: order });
    builder.step('s', { run: () => 'id', undo: (result: string) => result });
    // @ts-expect-error the result is a string
    builder.step('s', { run: () => 'id', undo: (result: number) => result });
  });
});

describe('reusable steps', () => {
  const chargeCard = defineStep({
    name: 'chargeCard',
    input: z.object({ cardToken: z.string(), amountCents: z.number().int().positive() }),
    retries: { maxAttempts: 3, backoff: 'exponential', baseDelayMs: 200 },
    run: async ({ cardToken, amountCents }) => {
      await Promise.resolve();
      return amountCents > 10_000 ? fail(new Error('limit')) : { chargeId: `ch_${cardToken}`, amountCents };
    },
    undo: (charge, args) => {
      expectTypeOf(charge).toEqualTypeOf<{ chargeId: string; amountCents: number }>();
      expectTypeOf(args).toEqualTypeOf<{ cardToken: string; amountCents: number }>();
    },
    compensate: (error) => {
      expectTypeOf(error).toEqualTypeOf<Error>();
    },
  });
  const labelParcel = defineStep({
    name: 'labelParcel',
    input: shipment,
    run: (parcel) => {
      expectTypeOf(parcel).toEqualTypeOf<Shipment>();
      return { label: `${parcel.to.country}-${parcel.parcelId}`, grams: parcel.weightGrams };
    },
  });
  const double = defineStep({ name: 'double', run: (args: { n: number }) => skip(args.n * 2) });

  it('defineStep types the definition by its contract (zod or valibot) and its body', () => {
    expectTypeOf(chargeCard).toEqualTypeOf<
      StepDefinition<{ cardToken: string; amountCents: number }, { chargeId: string; amountCents: number }>
    >();
    expectTypeOf(labelParcel).toEqualTypeOf<StepDefinition<Shipment, { label: string; grams: number }>>();
    expectTypeOf(double).toEqualTypeOf<StepDefinition<{ n: number }, number>>();
  });

  it('carry their result type into result(name)', () => {
    const def = defineReactor({ name: 'reuse', input: order })
      .step('charge', chargeCard, { args: ({ input }) => ({ cardToken: input('orderId'), amountCents: input('cents') }) })
      .step('label', labelParcel, { waitFor: ['charge'] })
      .step('twice', double, { args: ({ input }) => ({ n: input('cents') }), retries: { maxAttempts: 2 } })
      .step('receipt', {
        args: ({ result }) => ({ id: result('charge', 'chargeId'), label: result('label', 'label'), twice: result('twice') }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{ id: string; label: string; twice: number }>();
          return `${args.id}/${args.label}`;
        },
      })
      .returns('charge')
      .build();
    expectTypeOf(def.returns).toEqualTypeOf<string | undefined>();
    expectTypeOf<ResultsOf<typeof def>>().toEqualTypeOf<{
      charge: { chargeId: string; amountCents: number };
      label: { label: string; grams: number };
      twice: number;
      receipt: string;
    }>();
    expectTypeOf<OutputOf<typeof def>>().toEqualTypeOf<{ chargeId: string; amountCents: number }>();
  });

  it('a reusable step’s use rejects unknown inputs, steps and waitFor names', () => {
    const builder = defineReactor({ name: 'reuse', input: order }).step('charge', chargeCard);
    // @ts-expect-error no input "token"
    builder.step('a', double, { args: ({ input }) => ({ n: input('token') }) });
    // @ts-expect-error no step "charged"
    builder.step('b', double, { args: ({ result }) => ({ n: result('charged') }) });
    // @ts-expect-error no step "charged"
    builder.step('c', double, { waitFor: ['charged'] });
    // @ts-expect-error no path "amount" in the charge
    builder.step('d', double, { args: ({ result }) => ({ n: result('charge', 'amount') }) });
  });
});

describe('returns and the run result', () => {
  const checkout = defineReactor({ name: 'checkout', input: order })
    .step('reserve', { args: ({ input }) => ({ sku: input('orderId') }), run: ({ sku }) => reserveStock(sku) })
    .step('charge', {
      args: ({ input, result }) => ({ cents: input('cents'), slot: result('reserve', 'hold.slot') }),
      run: ({ cents, slot }) => ({ chargeId: `ch_${slot}`, cents }),
    });

  it('returns(step) types the completed value as that step’s result', async () => {
    const def = checkout.returns('charge').build();
    expectTypeOf<OutputOf<typeof def>>().toEqualTypeOf<{ chargeId: string; cents: number }>();
    const result = await runtime.run(def, { orderId: 'o1', cents: 100, address: { city: 'Oslo', geo: { lat: 1, lng: 2 } } });
    expectTypeOf(result).toEqualTypeOf<RunResult<{ chargeId: string; cents: number }>>();
    if (result.status === 'completed') expectTypeOf(result.value).toEqualTypeOf<{ chargeId: string; cents: number }>();
  });

  it('steps added after returns() keep the returned step’s type', () => {
    const def = checkout
      .returns('reserve')
      .step('notify', { run: () => true })
      .build();
    expectTypeOf(def.name).toEqualTypeOf<'checkout'>();
    expectTypeOf<OutputOf<typeof def>>().toEqualTypeOf<Reservation>();
    expectTypeOf<ResultsOf<typeof def>>().toEqualTypeOf<{ reserve: Reservation; charge: { chargeId: string; cents: number }; notify: boolean }>();
  });

  it('without returns the completed value is the record of every step’s result', async () => {
    const def = checkout.build();
    type Expected = { reserve: Reservation; charge: { chargeId: string; cents: number } };
    expectTypeOf<OutputOf<typeof def>>().toEqualTypeOf<Expected>();
    const result = await runtime.run(def, { orderId: 'o1', cents: 100, address: { city: 'Oslo', geo: { lat: 1, lng: 2 } } });
    if (result.status === 'completed') expectTypeOf(result.value).toEqualTypeOf<Expected>();
  });

  it('returns() of an unknown step is a compile error', () => {
    // @ts-expect-error no step "refund"
    checkout.returns('refund');
  });

  it('the run result is a union discriminated on status', async () => {
    const result = await runtime.run(checkout.build(), { orderId: 'o1', cents: 1, address: { city: 'x', geo: { lat: 0, lng: 0 } } });
    expectTypeOf(result.status).toEqualTypeOf<'completed' | 'failed' | 'halted'>();
    // @ts-expect-error value exists only once status is narrowed to completed
    assertType(result.value);
    switch (result.status) {
      case 'completed':
        expectTypeOf(result).toEqualTypeOf<CompletedResult<{ reserve: Reservation; charge: { chargeId: string; cents: number } }>>();
        break;
      case 'failed':
        expectTypeOf(result).toEqualTypeOf<FailedResult>();
        expectTypeOf(result.error).toEqualTypeOf<Error>();
        expectTypeOf(result.validationErrors).toEqualTypeOf<Readonly<Record<string, string[]>> | undefined>();
        break;
      case 'halted':
        expectTypeOf(result).toEqualTypeOf<HaltedResult>();
        expectTypeOf(result.reason).toEqualTypeOf<string>();
        break;
      default:
        expectTypeOf(result).toBeNever();
    }
  });

  it('run(reactor, input) rejects a wrong input type', async () => {
    const def = checkout.build();
    const geo = { lat: 0, lng: 0 };
    await runtime.run(def, { orderId: 'o1', cents: 1, address: { city: 'x', geo } });
    await runtime.run(def, { orderId: 'o1', cents: 1, address: { city: 'x', geo }, coupon: 'SPRING' });
    // @ts-expect-error cents must be a number
    await runtime.run(def, { orderId: 'o1', cents: '1', address: { city: 'x', geo } });
    // @ts-expect-error address is missing
    await runtime.run(def, { orderId: 'o1', cents: 1 });
    // @ts-expect-error nested field of the wrong type
    await runtime.run(def, { orderId: 'o1', cents: 1, address: { city: 2, geo } });
    // @ts-expect-error not an object
    await runtime.run(def, 'o1');
  });

  it('the caller passes the schema’s input type, steps see its output type', async () => {
    const def = defineReactor({ name: 'coerce', input: z.object({ cents: z.string().transform(Number), note: z.string().default('') }) })
      .step('s', {
        args: ({ input }) => ({ cents: input('cents'), note: input('note') }),
        run: (args) => {
          expectTypeOf(args).toEqualTypeOf<{ cents: number; note: string }>();
          return args.cents;
        },
      })
      .returns('s')
      .build();
    expectTypeOf<InputOf<typeof def>>().toEqualTypeOf<{ cents: string; note?: string | undefined }>();
    await runtime.run(def, { cents: '12' });
    // @ts-expect-error callers pass the string the schema parses
    await runtime.run(def, { cents: 12 });
  });

  it('a reactor without an input schema takes an empty input', async () => {
    const def = defineReactor({ name: 'noInput' })
      .step('s', { run: () => 1 })
      .build();
    await runtime.run(def, {});
    // @ts-expect-error the reactor declares no inputs
    await runtime.run(def, { extra: 1 });
  });
});

describe('valibot reactor input', () => {
  const ship = defineReactor({ name: 'ship', input: shipment })
    .step('label', {
      args: ({ input }) => ({ id: input('parcelId'), country: input('to', 'country'), grams: input('weightGrams') }),
      run: ({ id, country, grams }) => ({ label: `${country}/${id}`, kg: grams / 1000 }),
    })
    .step('dispatch', {
      args: ({ result }) => ({ label: result('label', 'label') }),
      run: ({ label }) => label.length,
      undo: (length, args) => {
        expectTypeOf(length).toEqualTypeOf<number>();
        expectTypeOf(args).toEqualTypeOf<{ label: string }>();
      },
    })
    .step('all', {
      run: (args) => {
        expectTypeOf(args).toEqualTypeOf<Shipment>();
      },
    });

  it('types sources, results and the run like a zod schema', async () => {
    const def = ship.returns('label').build();
    expectTypeOf<InputOf<typeof def>>().toEqualTypeOf<Shipment>();
    const result = await runtime.run(def, { parcelId: 'p1', weightGrams: 1200, to: { country: 'NO', postcode: '0150' } });
    if (result.status === 'completed') expectTypeOf(result.value).toEqualTypeOf<{ label: string; kg: number }>();
    // @ts-expect-error weightGrams must be a number
    await runtime.run(def, { parcelId: 'p1', weightGrams: '1200', to: { country: 'NO', postcode: '0150' } });
  });

  it('rejects unknown inputs, steps and paths', () => {
    ship.step('x', {
      // @ts-expect-error no input "parcel"
      args: ({ input }) => ({ id: input('parcel') }),
      run: () => 1,
    });
    ship.step('y', {
      // @ts-expect-error no path "to.city"
      args: ({ input }) => ({ city: input('to', 'city') }),
      run: () => 1,
    });
    ship.step('z', {
      // @ts-expect-error no step "labels"
      args: ({ result }) => ({ l: result('labels') }),
      run: () => 1,
    });
    // @ts-expect-error step "dispatch" is already defined
    ship.step('dispatch', { run: () => 1 });
  });
});
