import type { StandardSchemaV1 } from '@standard-schema/spec';
import pino from 'pino';
import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineReactor, InputValidationError, OutputValidationError } from '../../src/index.js';

interface Order {
  orderId: string;
  cents: number;
  address: { city: string };
}

/** The same contracts written with one validator library. */
interface Contracts {
  readonly library: string;
  readonly order: StandardSchemaV1<unknown, Order>;
  readonly charge: StandardSchemaV1<unknown, { cents: number }>;
  readonly receipt: StandardSchemaV1<unknown, { chargeId: string }>;
}

const zodContracts: Contracts = {
  library: 'zod',
  order: z.object({ orderId: z.string(), cents: z.number().int(), address: z.object({ city: z.string() }) }),
  charge: z.object({ cents: z.number().positive() }),
  receipt: z.object({ chargeId: z.string().startsWith('ch_') }),
};

const valibotContracts: Contracts = {
  library: 'valibot',
  order: v.object({ orderId: v.string(), cents: v.pipe(v.number(), v.integer()), address: v.object({ city: v.string() }) }),
  charge: v.object({ cents: v.pipe(v.number(), v.minValue(1)) }),
  receipt: v.object({ chargeId: v.pipe(v.string(), v.startsWith('ch_')) }),
};

const silent = pino({ level: 'silent' });
const validOrder: Order = { orderId: 'o1', cents: 1200, address: { city: 'Oslo' } };

describe.each([zodContracts, valibotContracts])('input and output contracts ($library)', (contracts) => {
  /** reserve → charge (input contract) → receipt (output contract), recording every handler call. */
  function checkout(options: { chargeCents?: number; chargeId?: string } = {}) {
    const events: string[] = [];
    const def = defineReactor({ name: `checkout_${contracts.library}`, input: contracts.order })
      .step('reserve', {
        args: ({ input }) => ({ orderId: input('orderId') }),
        run: ({ orderId }) => {
          events.push('run:reserve');
          return { holdId: `h_${orderId}` };
        },
        compensate: () => void events.push('compensate:reserve'),
        undo: () => void events.push('undo:reserve'),
      })
      .step('charge', {
        args: ({ input, value }) => ({ cents: options.chargeCents === undefined ? input('cents') : value(options.chargeCents) }),
        input: contracts.charge,
        run: ({ cents }) => {
          events.push('run:charge');
          return { chargeId: options.chargeId ?? `ch_${cents}` };
        },
        compensate: () => void events.push('compensate:charge'),
        undo: () => void events.push('undo:charge'),
      })
      .step('receipt', {
        args: ({ result }) => ({ chargeId: result('charge', 'chargeId') }),
        output: contracts.receipt,
        run: ({ chargeId }) => {
          events.push('run:receipt');
          return { chargeId };
        },
        compensate: () => void events.push('compensate:receipt'),
        undo: () => void events.push('undo:receipt'),
      })
      .returns('receipt')
      .build();
    return { def, events };
  }

  it('runs every step when inputs, arguments and outputs are valid', async () => {
    const { def, events } = checkout();
    const result = await createRuntime({ logger: silent }).run(def, validOrder);
    expect(result).toMatchObject({ status: 'completed', value: { chargeId: 'ch_1200' } });
    expect(events).toEqual(['run:reserve', 'run:charge', 'run:receipt']);
  });

  it('fails invalid reactor input with field errors before any step runs', async () => {
    const { def, events } = checkout();
    const result = await createRuntime({ logger: silent }).run(def, { orderId: 7, cents: 12.5, address: {} });
    expect(result).toMatchObject({
      status: 'failed',
      step: undefined,
      rollbackFailures: [],
      validationErrors: {
        orderId: [expect.any(String)],
        cents: [expect.any(String)],
        'address.city': [expect.any(String)],
      },
    });
    if (result.status !== 'failed') throw new Error('expected a failed run');
    expect(Object.keys(result.validationErrors ?? {}).sort()).toEqual(['address.city', 'cents', 'orderId']);
    expect(result.error).toBeInstanceOf(InputValidationError);
    expect(result.message).toMatch(new RegExp(`^reactor "checkout_${contracts.library}": input is invalid: `));
    expect(events).toEqual([]);
  });

  it('fails a step whose arguments break its input contract before its body: not compensated, earlier steps undone', async () => {
    const { def, events } = checkout({ chargeCents: -5 });
    const result = await createRuntime({ logger: silent }).run(def, validOrder);
    expect(result).toMatchObject({ status: 'failed', step: 'charge', rollbackFailures: [], validationErrors: { cents: [expect.any(String)] } });
    if (result.status !== 'failed') throw new Error('expected a failed run');
    expect(result.error).toBeInstanceOf(InputValidationError);
    expect(result.error).not.toBeInstanceOf(OutputValidationError);
    expect(result.message).toMatch(new RegExp(`^reactor "checkout_${contracts.library}" step "charge": arguments are invalid: cents: `));
    expect(events).toEqual(['run:reserve', 'undo:reserve']);
  });

  it('fails a step whose returned value breaks its output contract: compensated, earlier steps undone newest first', async () => {
    const { def, events } = checkout({ chargeId: 'refund_1' });
    const result = await createRuntime({ logger: silent }).run(def, validOrder);
    expect(result).toMatchObject({ status: 'failed', step: 'receipt', rollbackFailures: [], validationErrors: { chargeId: [expect.any(String)] } });
    if (result.status !== 'failed') throw new Error('expected a failed run');
    expect(result.error).toBeInstanceOf(OutputValidationError);
    expect(result.message).toMatch(new RegExp(`^reactor "checkout_${contracts.library}" step "receipt": returned value is invalid: chargeId: `));
    expect(events).toEqual(['run:reserve', 'run:charge', 'run:receipt', 'compensate:receipt', 'undo:charge', 'undo:reserve']);
  });
});
