import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineReactor, defineStep } from '../../src/index.js';
import type { AsyncOutcome, ModeOf, OutputOf, ResultsOf } from '../../src/index.js';

describe('async units: types', () => {
  const child = defineReactor({ name: 'child', input: z.object({ n: z.number() }) })
    .step('c', { run: ({ n }) => ({ doubled: n * 2 }) })
    .returns('c')
    .build();
  const send = defineStep({ name: 'send', input: z.object({ to: z.string() }), run: ({ to }) => ({ messageId: to }) });

  const reactor = defineReactor({ name: 'units', input: z.object({ to: z.string(), n: z.number() }) })
    .asyncStep('email', { args: ({ input }) => ({ to: input('to') }), run: ({ to }) => to.length })
    .asyncStep('sms', send, { args: ({ input }) => ({ to: input('to') }) })
    .asyncReactor('kid', child, { args: ({ input }) => ({ n: input('n') }) })
    .step('read', {
      args: ({ result }) => ({ email: result('email'), sms: result('sms'), kid: result('kid') }),
      run: ({ email, sms, kid }) => {
        expectTypeOf(email).toEqualTypeOf<AsyncOutcome<number>>();
        expectTypeOf(sms).toEqualTypeOf<AsyncOutcome<{ messageId: string }>>();
        expectTypeOf(kid).toEqualTypeOf<AsyncOutcome<{ doubled: number }>>();
        // The outcome narrows by status: a value only when completed, an Error when failed.
        if (email.status === 'completed') expectTypeOf(email.value).toEqualTypeOf<number>();
        if (kid.status === 'failed') expectTypeOf(kid.error).toEqualTypeOf<Error>();
        return email.status;
      },
    })
    .returns('read')
    .build();

  it('a reader of a unit receives its AsyncOutcome; the run stays inline', () => {
    expectTypeOf<ResultsOf<typeof reactor>['email']>().toEqualTypeOf<AsyncOutcome<number>>();
    expectTypeOf<ModeOf<typeof reactor>>().toEqualTypeOf<'inline'>();
    const runtime = createRuntime();
    expectTypeOf(runtime.run(reactor, { to: 'a', n: 1 })).resolves.toHaveProperty('status');
  });

  it("a run's record of every result leaves its async units out, as the runtime does", () => {
    const _noReturns = defineReactor({ name: 'record' })
      .step('a', { run: () => 1 })
      .asyncStep('u', { run: () => 'u' })
      .asyncReactor('k', child, { args: ({ value }) => ({ n: value(1) }) })
      .build();
    expectTypeOf<OutputOf<typeof _noReturns>>().toEqualTypeOf<{ a: number }>();
    // A result typed any (an untyped step) is kept.
    const _untyped = defineReactor({ name: 'untyped' }).step('x', { run: (): any => 1 }).build();
    expectTypeOf<keyof OutputOf<typeof _untyped>>().toEqualTypeOf<'x'>();
  });

  it('an async step takes no undo', () => {
    defineReactor({ name: 'no-undo' })
      // @ts-expect-error undo is not available on an async step
      .asyncStep('u', { run: () => 1, undo: () => undefined });
  });
});
