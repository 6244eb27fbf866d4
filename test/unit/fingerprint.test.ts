import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineReactor, defineStep, describePlanMismatch, paged, planFingerprint } from '../../src/index.js';
import type { AnyReactorDefinition, BackgroundCut, SourceHelpers } from '../../src/index.js';

type Sources = SourceHelpers<any, any>;

const noop = () => undefined;

/** A child reactor; `variant` changes only what the plan fingerprint ignores. */
function payment(variant: 'a' | 'b', extraStep = false) {
  const builder = defineReactor({ name: 'payment', input: variant === 'a' ? z.object({ cents: z.number() }) : z.object({ cents: z.number().int() }) })
    .step('authorize', {
      args: ({ input }) => ({ cents: variant === 'a' ? input('cents') : input('cents').transform((c) => c * 2) }),
      run: variant === 'a' ? () => 'auth' : () => 'other-auth',
      ...(variant === 'b' ? { undo: noop } : {}),
    })
    .step('capture', { args: ({ result }) => ({ auth: result('authorize') }), run: noop });
  return extraStep ? builder.step('receipt', { waitFor: ['capture'], run: noop }).returns('capture').build() : builder.returns('capture').build();
}

interface Variation {
  /** Bodies, transforms, schemas, delays and other things the fingerprint leaves out. */
  readonly variant?: 'a' | 'b';
  readonly reserveName?: string;
  readonly chargeReads?: readonly ['reserve' | 'quote', 'reserve' | 'quote'];
  readonly notifyWaitFor?: readonly ('charge' | 'approval')[];
  readonly chargeMaxAttempts?: number;
  readonly approvalAsStep?: boolean;
  readonly approvalTimeout?: boolean;
  readonly childExtraStep?: boolean;
  readonly extraStep?: boolean;
  readonly background?: BackgroundCut | null;
  readonly returns?: 'charge' | 'notify';
}

/**
 * The reference reactor: steps, a reusable step, a compose, an interrupt, a hand-off and
 * `returns`. Built through an untyped builder so one function can vary every part of it.
 */
function checkout(v: Variation = {}): AnyReactorDefinition {
  const variant = v.variant ?? 'a';
  const reserve = v.reserveName ?? 'reserve';
  const quote = defineStep({
    name: variant === 'a' ? 'quote' : 'quoteV2',
    input: variant === 'a' ? z.object({ sku: z.string() }) : z.object({ sku: z.string().min(1) }),
    run: variant === 'a' ? () => 10 : () => 20,
  });
  let builder: any = (defineReactor as (options: object) => any)({
    name: 'checkout',
    version: variant === 'a' ? 1 : 7,
    input: variant === 'a' ? z.object({ sku: z.string(), cents: z.number() }) : z.object({ sku: z.string(), cents: z.number(), note: z.string().optional() }),
  })
    .step(reserve, {
      args: ({ input }: Sources) => ({ sku: variant === 'a' ? input('sku') : input('sku').transform((s: string) => s.toUpperCase()) }),
      run: variant === 'a' ? () => 'r1' : async () => 'r2',
      ...(variant === 'a' ? { undo: noop } : { compensate: noop, output: z.string() }),
    })
    .step('quote', quote);
  const named = (n: 'reserve' | 'quote') => (n === 'reserve' ? reserve : n);
  const [first, second] = v.chargeReads ?? ['reserve', 'quote'];
  builder = builder.step('charge', {
    args: ({ result }: Sources) => ({ x: result(named(first)), y: result(named(second)) }),
    run: variant === 'a' ? () => 'c1' : () => 'c2',
    retries: { maxAttempts: v.chargeMaxAttempts ?? 3, ...(variant === 'a' ? { backoff: 'fixed', baseDelayMs: 10 } : { backoff: 'linear', baseDelayMs: 999 }) },
  });
  builder = builder.compose('payment', payment(variant, v.childExtraStep), { args: ({ input }: Sources) => ({ cents: input('cents') }), waitFor: ['charge'] });
  builder = v.approvalAsStep
    ? builder.step('approval', { waitFor: ['payment'], run: noop })
    : builder.interrupt('approval', {
        waitFor: ['payment'],
        ...(variant === 'a'
          ? { payload: z.object({ ok: z.boolean() }), ...(v.approvalTimeout === false ? {} : { timeout: { ms: 60_000 } }) }
          : { maxAttempts: 5, correlationId: ({ input }: Sources) => input('sku'), ...(v.approvalTimeout === false ? {} : { timeout: { ms: 1, strategy: 'active' } }) }),
      });
  builder = builder.step('notify', { waitFor: v.notifyWaitFor ?? ['charge', 'approval'], run: noop });
  if (v.extraStep) builder = builder.step('audit', { waitFor: ['notify'], run: noop });
  const background = v.background === undefined ? { after: 'charge' } : v.background;
  if (background !== null) builder = builder.background(background);
  return builder.returns(v.returns ?? 'charge').build() as AnyReactorDefinition;
}

describe('planFingerprint', () => {
  it('is computed at build() and exposed as definition.fingerprint', () => {
    const def = checkout();
    expect(def.fingerprint).toBe(planFingerprint(def));
    expect(Object.isFrozen(def)).toBe(true);
  });

  it('has a known value for the reference reactor (a change here means the encoding changed: bump its p<n>- prefix)', () => {
    expect(checkout().fingerprint).toBe('p1-de8563b804fbd57f');
    expect(payment('a').fingerprint).toBe('p1-17c8b001e803104c');
    expect(defineReactor({ name: 'empty' }).build().fingerprint).toBe('p1-51ce3cc35ada0bd1');
  });

  it('is the first 16 hex digits of a SHA-256 over the documented encoding', () => {
    const sha = (text: string) => `p1-${createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 16)}`;
    // [encoding, name, returns, hand-off index, steps]; a step is [name, kind, reads, waitFor, maxAttempts, tracked, interrupt, child].
    expect(payment('a').fingerprint).toBe(
      sha('["xreactor.plan/1","payment","capture",null,[["authorize","step",[],[],1,true,null,null],["capture","step",["authorize"],[],1,true,null,null]]]'),
    );
    const child = payment('a');
    const parent = defineReactor({ name: 'p' })
      .step('a', { run: noop, retries: { maxAttempts: 2 } })
      .interrupt('i', { waitFor: ['a'], timeout: { ms: 5 } })
      .interrupt('j', { waitFor: ['a'] })
      .compose('c', child, { args: ({ value }) => ({ cents: value(1) }), waitFor: ['i'] })
      .background({ before: 'c' })
      .build();
    expect(parent.fingerprint).toBe(
      sha(
        '["xreactor.plan/1","p",null,3,[' +
          '["a","step",[],[],2,true,null,null],' +
          '["i","interrupt",[],["a"],1,false,[["i","j"],true],null],' +
          '["j","interrupt",[],["a"],1,false,[["j"],false],null],' +
          `["c","compose",[],["i"],1,true,null,"${child.fingerprint}"]]]`,
      ),
    );
  });

  it('is the same for definitions that differ only in bodies, transforms, schemas, delays, interrupt settings and version', () => {
    const a = checkout({ variant: 'a' });
    const b = checkout({ variant: 'b' });
    expect(b.version).not.toBe(a.version);
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(payment('b').fingerprint).toBe(payment('a').fingerprint);
  });

  it('is the same for two hand-off declarations at the same plan index', () => {
    expect(checkout({ background: { before: 'payment' } }).fingerprint).toBe(checkout({ background: { after: 'charge' } }).fingerprint);
  });

  it.each<[string, Variation]>([
    ['a renamed step', { reserveName: 'hold' }],
    ['reordered result dependencies', { chargeReads: ['quote', 'reserve'] }],
    ['reordered waitFor', { notifyWaitFor: ['approval', 'charge'] }],
    ['a removed dependency', { notifyWaitFor: ['approval'] }],
    ['a changed kind (interrupt to step)', { approvalAsStep: true }],
    ['an added step', { extraStep: true }],
    ['a changed compose child plan', { childExtraStep: true }],
    ['a changed hand-off cut', { background: { after: 'quote' } }],
    ['no hand-off', { background: null }],
    ['a hand-off of the whole run', { background: { all: true } }],
    ['a changed returns step', { returns: 'notify' }],
    ['a changed retry maxAttempts', { chargeMaxAttempts: 4 }],
    ['an interrupt that no longer has a timeout', { approvalTimeout: false }],
  ])('differs for %s', (_, variation) => {
    expect(checkout(variation).fingerprint).not.toBe(checkout().fingerprint);
  });

  it('differs for a renamed reactor', () => {
    const a = defineReactor({ name: 'a' }).step('s', { run: noop }).build();
    const b = defineReactor({ name: 'b' }).step('s', { run: noop }).build();
    expect(b.fingerprint).not.toBe(a.fingerprint);
  });

  it('differs for a changed kind (step to compose of the same name and dependencies)', () => {
    const child = defineReactor({ name: 'child' }).build();
    const asStep = defineReactor({ name: 'r' }).step('s', { run: noop }).build();
    const asCompose = defineReactor({ name: 'r' }).compose('s', child).build();
    expect(asCompose.fingerprint).not.toBe(asStep.fingerprint);
  });

  it('differs when interrupts pause together instead of one after the other', () => {
    const together = defineReactor({ name: 'r' }).step('a', { run: noop }).interrupt('i', { waitFor: ['a'] }).interrupt('j', { waitFor: ['a'] }).build();
    const apart = defineReactor({ name: 'r' }).step('a', { run: noop }).interrupt('i', { waitFor: ['a'] }).interrupt('j', { waitFor: ['i'] }).build();
    expect(apart.fingerprint).not.toBe(together.fingerprint);
  });

  it('follows plan order, not definition order', () => {
    const a = defineReactor({ name: 'r' }).step('x', { run: noop }).step('y', { run: noop }).step('z', { waitFor: ['x'], run: noop }).build();
    const b = defineReactor({ name: 'r' }).step('x', { run: noop }).step('z', { waitFor: ['x'], run: noop }).step('y', { run: noop }).build();
    expect(a.plan.map((s) => s.name)).toStrictEqual(['x', 'y', 'z']);
    expect(b.plan.map((s) => s.name)).toStrictEqual(['x', 'y', 'z']);
    expect(b.fingerprint).toBe(a.fingerprint);
  });
});

describe('planFingerprint of a map step', () => {
  const element = (extraStep = false) => {
    const builder = defineReactor({ name: 'charge-one', input: z.object({ orderId: z.string() }) }).step('charge', { run: noop });
    return extraStep ? builder.step('receipt', { waitFor: ['charge'], run: noop }).build() : builder.build();
  };
  const input = z.object({ orders: z.array(z.object({ orderId: z.string() })), currency: z.string() });
  /** A reactor with one map step; `options` vary what the fingerprint may or may not cover. */
  const billing = (options: Record<string, unknown> = {}, child = element()) =>
    (defineReactor as (options: object) => any)({ name: 'billing', input })
      .step('load', { run: noop })
      .step('open', { run: noop })
      .map('charges', child, { source: ({ result }: Sources) => result('load'), ...options })
      .build() as AnyReactorDefinition;

  it('encodes the map kind and the element reactor’s fingerprint in the child slot', () => {
    const sha = (text: string) => `p1-${createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 16)}`;
    const child = element();
    expect(billing({ waitFor: ['open'] }, child).fingerprint).toBe(
      sha(
        '["xreactor.plan/1","billing",null,null,[' +
          '["load","step",[],[],1,true,null,null],' +
          '["open","step",[],[],1,true,null,null],' +
          `["charges","map",["load"],["open"],1,true,null,"${child.fingerprint}"]]]`,
      ),
    );
  });

  it('leaves out fanOut, batchSize and atomic (stored with each map), collect, undoAll and the element wiring', () => {
    const plain = billing().fingerprint;
    expect(billing({ fanOut: true }).fingerprint).toBe(plain);
    expect(billing({ batchSize: 7 }).fingerprint).toBe(plain);
    expect(billing({ atomic: false }).fingerprint).toBe(plain);
    expect(billing({ collect: noop, undoAll: noop }).fingerprint).toBe(plain);
    expect(billing({ args: ({ element: el }: Sources & { element: (path?: string) => any }) => ({ orderId: el('orderId') }) }).fingerprint).toBe(plain);
    expect(billing({ source: ({ result }: Sources) => result('load').transform((x: unknown) => x) }).fingerprint).toBe(plain);
  });

  it.each<[string, () => AnyReactorDefinition]>([
    ['a changed element reactor plan', () => billing({}, element(true))],
    ['a source reading another step', () => billing({ source: ({ result }: Sources) => result('open') })],
    ['args reading a result', () => billing({ args: ({ result }: Sources) => ({ orderId: result('open') }) })],
    ['a paged source reading no result', () => billing({ source: paged({ page: () => [] }) })],
    ['an added waitFor', () => billing({ waitFor: ['open'] })],
  ])('differs for %s', (_, variant) => {
    expect(variant().fingerprint).not.toBe(billing().fingerprint);
  });

  it('differs for a changed kind (compose to map of the same child, name and dependencies)', () => {
    const child = element();
    const asCompose = defineReactor({ name: 'r' }).step('load', { run: noop }).compose('charges', child, { args: ({ result }) => ({ orderId: result('load') }) }).build();
    const asMap = (defineReactor as (options: object) => any)({ name: 'r' })
      .step('load', { run: noop })
      .map('charges', child, { source: ({ result }: Sources) => result('load') })
      .build() as AnyReactorDefinition;
    expect(asMap.plan.map((s) => [s.name, s.reads])).toStrictEqual(asCompose.plan.map((s) => [s.name, s.reads]));
    expect(asMap.fingerprint).not.toBe(asCompose.fingerprint);
  });
});

describe('describePlanMismatch', () => {
  it('names the reactor, the version and both fingerprints, and says how to advance the execution', () => {
    expect(describePlanMismatch('checkout', 2, 'p1-0123456789abcdef', 'p1-fedcba9876543210')).toBe(
      'an execution of reactor "checkout" version 2 was started with plan p1-0123456789abcdef, ' +
        'but this build\'s reactor "checkout" version 2 has plan p1-fedcba9876543210; ' +
        'the execution is left as stored and stays recoverable. ' +
        'To advance it, run a build whose reactor "checkout" version 2 has plan p1-0123456789abcdef, ' +
        'or register the old definition (plan p1-0123456789abcdef) as version 2 and declare the changed one with a new version, ' +
        'e.g. defineReactor({ name: "checkout", version: 3 })',
    );
  });
});
