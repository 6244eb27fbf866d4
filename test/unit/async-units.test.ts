import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, defineStep, DefinitionError, DeprecatedOptionError, EXECUTION_MACHINE_VERSION, fail, planFingerprint } from '../../src/index.js';
import type { Runtime } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { sweepExecution } from '../../src/runtime/execution-sweep.js';
import { deserializeError } from '../../src/serialization/index.js';

const silent = pino({ level: 'silent' });
const runtimes: Runtime[] = [];
function runtime(options: Parameters<typeof createRuntime>[0] = {}): Runtime {
  const created = createRuntime({ logger: silent, ...options });
  runtimes.push(created);
  return created;
}
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.close()));
  vi.restoreAllMocks();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('asyncStep / asyncReactor definitions', () => {
  const child = defineReactor({ name: 'child', input: z.object({ n: z.number() }) })
    .step('c', { run: ({ n }) => n * 2 })
    .returns('c')
    .build();

  it('refuses an undo on an async step, naming the reactor, the step and the fix', () => {
    const build = () =>
      defineReactor({ name: 'r' })
        // @ts-expect-error an async step takes no undo
        .asyncStep('u', { run: () => 1, undo: () => undefined })
        .build();
    expect(build).toThrow(DefinitionError);
    expect(build).toThrow('reactor "r" asyncStep "u": an async step takes no undo; its owner never undoes it (it compensates itself once after its last attempt fails: declare compensate)');
  });

  it('refuses returns naming an async unit, and retries on an async reactor', () => {
    expect(() => defineReactor({ name: 'r' }).asyncStep('u', { run: () => 1 }).returns('u').build()).toThrow(
      'reactor "r": returns("u") names an async unit (asyncStep), which has no value when the run completes; return a step that reads it with result("u")',
    );
    expect(() =>
      defineReactor({ name: 'r' })
        // @ts-expect-error retries are the child's steps'
        .asyncReactor('k', child, { retries: { maxAttempts: 2 } })
        .build(),
    ).toThrow(DeprecatedOptionError);
    expect(() => defineReactor({ name: 'r' }).asyncReactor('k', { kind: 'reactor' } as never).build()).toThrow('reactor "r" asyncReactor "k": the child must be a built reactor definition (call .build() on it)');
  });

  it('warns once at build when a step definition with an undo is used as an async step (its undo never runs)', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const send = defineStep({ name: 'send', run: () => 'sent', undo: () => undefined });
    defineReactor({ name: 'r' }).asyncStep('u', send).build();
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toContain('step definition "send" declares undo, which never runs for an async step');
  });

  it('is part of the plan fingerprint: an async step is not a step', () => {
    const asStep = defineReactor({ name: 'r' }).step('u', { run: () => 1 }).build();
    const asUnit = defineReactor({ name: 'r' }).asyncStep('u', { run: () => 1 }).build();
    expect(planFingerprint(asStep)).not.toBe(planFingerprint(asUnit));
    expect(asUnit.plan[0]).toMatchObject({ kind: 'asyncStep', tracked: false });
  });
});

describe('async units on the embedded runtime', () => {
  it('a reader in the caller waits for the unit the embedded worker runs, and receives its value', async () => {
    const rt = runtime();
    const started: string[] = [];
    const r = defineReactor({ name: 'reads-unit', input: z.object({ to: z.string() }) })
      .asyncStep('send', {
        args: ({ input }) => ({ to: input('to') }),
        run: async ({ to }, ctx) => {
          started.push(`${ctx.step}:${ctx.executionId}`);
          await sleep(30);
          return { messageId: `m-${to}` };
        },
      })
      .step('confirm', {
        args: ({ result }) => ({ sent: result('send') }),
        run: ({ sent }) => (sent.status === 'completed' ? sent.value.messageId : fail(new Error(sent.status))),
      })
      .returns('confirm')
      .build();
    const result = await rt.run(r, { to: 'ada' });
    expect(result).toMatchObject({ status: 'completed', value: 'm-ada' });
    // The unit's hooks and handler context name its owner execution.
    expect(started).toEqual([`send:${result.executionId}`]);
    const unit = await rt.find(`${result.executionId}.send`);
    expect(unit).toMatchObject({ status: 'completed', reactor: 'reads-unit', result: { status: 'completed', value: { messageId: 'm-ada' } } });
    expect(unit.trace.map((t) => t.type)).toEqual(['run']);
    expect(await rt.awaitResult(`${result.executionId}.send`, { timeoutMs: 1_000 })).toEqual(unit.result);
  });

  it('a caller wait past asyncWaitTimeoutMs fails the reader before its body; the unit goes on by itself', async () => {
    const rt = runtime({ asyncWaitTimeoutMs: 20 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const readerRan = vi.fn();
    const r = defineReactor({ name: 'slow-unit' })
      .step('a', { run: () => 'A', undo: vi.fn() })
      .asyncStep('u', { waitFor: ['a'], run: async () => (await gate, 'late') })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: readerRan })
      .build();
    const result = await rt.run(r, {});
    expect(result).toMatchObject({ status: 'failed', step: 'r' });
    const error = (result as unknown as { error: Error & { code: string; cause: Error & { code: string } } }).error;
    expect(error.code).toBe('argument_unresolved');
    expect(error.cause.code).toBe('async_wait_timeout');
    expect(error.message).toMatch(/^reactor "slow-unit" step "r": argument from result\("u"\) cannot be resolved: async unit .*\.u did not settle within 20 ms while step "r" waited for it; raise asyncWaitTimeoutMs/);
    expect(readerRan).not.toHaveBeenCalled();
    release();
    await expect.poll(async () => (await rt.find(`${result.executionId}.u`)).status, { timeout: 2_000 }).toBe('completed');
    // The late signal is consumed by the settled owner: nothing is left in its inbox or the index.
    expect((await rt.find(result.executionId)).status).toBe('failed');
  });

  it("an async step's contract is its unit's (it fails never started, not compensated; the owner goes on); an async reactor's child input is checked at the dispatch", async () => {
    const rt = runtime();
    const undoA = vi.fn();
    const compensate = vi.fn();
    const body = vi.fn();
    const child = defineReactor({ name: 'kid', input: z.object({ n: z.number() }) }).step('c', { run: () => 1 }).build();
    const badStep = defineReactor({ name: 'bad-unit' })
      .step('a', { run: () => 'A', undo: undoA })
      .asyncStep('u', { waitFor: ['a'], input: z.object({ n: z.number() }), args: ({ value }) => ({ n: value('x' as unknown as number) }), run: body, compensate })
      .build();
    const owner = await rt.run(badStep, {});
    expect(owner).toMatchObject({ status: 'completed' });
    await expect.poll(async () => (await rt.find(`${owner.executionId}.u`)).status, { timeout: 2_000 }).toBe('failed');
    expect(await rt.find(`${owner.executionId}.u`)).toMatchObject({ result: { status: 'failed', step: 'u', error: { code: 'input_invalid' } } });
    expect([undoA, compensate, body].map((f) => f.mock.calls.length)).toEqual([0, 0, 0]);
    const badChild = defineReactor({ name: 'bad-child' })
      .asyncReactor('k', child, { args: ({ value }) => ({ n: value('x' as unknown as number) }) })
      .build();
    const failed = await rt.run(badChild, {});
    expect(failed).toMatchObject({ status: 'failed', step: 'k' });
    expect((failed as { message: string }).message).toMatch(/^reactor "bad-child" asyncReactor "k": input of reactor "kid" is invalid/);
    await expect(rt.find(`${failed.executionId}.k`)).rejects.toThrow(/not found|does not exist|unknown/i);
  });

  it('in a worker the reader waits awaiting (no worker held); the unit settling wakes it', async () => {
    const rt = runtime();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = defineReactor({ name: 'bg-reads-unit' })
      .asyncStep('u', { run: async () => (await gate, 21) })
      .step('double', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => (u.status === 'completed' ? u.value * 2 : fail(new Error(u.status))) })
      .returns('double')
      .background({ all: true })
      .build();
    const started = await rt.run(r, {});
    expect(started.status).toBe('dispatched');
    await expect.poll(async () => (await rt.find(started.executionId)).waiting, { timeout: 2_000 }).toEqual({ on: 'actors', step: 'double', actors: [`${started.executionId}.u`] });
    release();
    expect(await rt.awaitResult(started.executionId, { timeoutMs: 2_000 })).toMatchObject({ status: 'completed', value: 42 });
  });

  it('in a worker a wait past asyncParkTimeoutMs (from the dispatch) is failed by a delayed job', async () => {
    const clock = createTestClock();
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const rt = runtime({ clock, queue, worker: true, asyncParkTimeoutMs: 60_000 });
    const r = defineReactor({ name: 'parked-reader' })
      .step('a', { run: () => 'A', undo: () => undefined })
      .asyncStep('u', { waitFor: ['a'], run: () => 'U' })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => u })
      .background({ all: true })
      .build();
    const started = await rt.run(r, {});
    // The owner's jobs only: its unit's job stays queued.
    await queue.drainRounds({ only: ['execution-advance'] });
    expect((await rt.find(started.executionId)).waiting).toMatchObject({ on: 'actors', step: 'r' });
    expect(queue.pending().map((j) => [j.actor?.kind, j.delayMs])).toEqual(expect.arrayContaining([['unit', undefined], ['execution', 60_000]]));
    await queue.drainRounds({ only: ['execution-advance'], delayed: 'as-due' });
    const result = await rt.awaitResult(started.executionId, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'r' });
    expect((result as { error: { cause: { code: string } } }).error.cause.code).toBe('async_wait_timeout');
    // The unit still runs when its job comes, and its late signal is discarded by the failed owner.
    await queue.drainRounds();
    expect((await rt.find(`${started.executionId}.u`)).status).toBe('completed');
  });

  it('a reader of two units waits for each in turn: the first wait\'s timeout job does not fail the second wait', async () => {
    const clock = createTestClock();
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const rt = runtime({ clock, queue, worker: true, asyncParkTimeoutMs: 60 * 60_000 });
    const r = defineReactor({ name: 'two-unit-reader' })
      .asyncStep('u1', { run: () => 1 })
      // The second unit is dispatched 40 minutes after the first.
      .step('later', { waitFor: ['u1'], run: () => void clock.advance(40 * 60_000) })
      .asyncStep('u2', { waitFor: ['later'], run: () => 2 })
      .step('sum', { args: ({ result }) => ({ u1: result('u1'), u2: result('u2') }), run: ({ u1, u2 }) => (u1.status === 'completed' && u2.status === 'completed' ? u1.value + u2.value : fail(new Error('a unit failed'))) })
      .returns('sum')
      .background({ all: true })
      .build();
    const started = await rt.run(r, {});
    await queue.drainRounds({ only: ['execution-advance'] });
    const id = started.executionId;
    expect((await rt.find(id)).waiting).toMatchObject({ on: 'actors', actors: [`${id}.u1`] });
    // u1 settles: the reader goes on to wait for u2 (a timeout job of its own).
    const startOf = (unit: string) => queue.pending().find((j) => j.actor?.id === `${id}.${unit}`)!.id;
    queue.reorder([startOf('u1')]);
    await queue.runNext();
    expect((await rt.find(id)).waiting).toMatchObject({ on: 'actors', actors: [`${id}.u2`] });
    const timeouts = queue.inspect().filter((j) => j.job.event?.type === 'xreactor.unit.timedOut');
    expect(timeouts.map((j) => j.job.event?.['unit'])).toEqual([`${id}.u1`, `${id}.u2`]);
    // Past u1's deadline (60 minutes after its dispatch), not u2's: u1's timeout job is stale.
    clock.advance(21 * 60_000);
    queue.reorder([timeouts[0]!.job.id]);
    await queue.runNext();
    expect((await rt.find(id)).status).toBe('running');
    await queue.drainRounds({ only: ['async-unit', 'execution-advance'] });
    expect(await rt.awaitResult(id, { timeoutMs: 1_000 })).toMatchObject({ status: 'completed', value: 3 });
  });

  it("a map element's record of results leaves its async units out, as a run's does", async () => {
    const rt = runtime();
    const element = defineReactor({ name: 'el-with-unit' }).step('e1', { run: (item: unknown) => Number(item) * 10 }).asyncStep('u', { waitFor: ['e1'], run: () => 'u' }).build();
    const r = defineReactor({ name: 'map-of-units', input: z.object({ items: z.array(z.number()) }) })
      .map('m', element, {
        source: ({ input }) => input('items'),
        collect: async (results) => {
          const values: unknown[] = [];
          for await (const e of results) if (e.status === 'completed') values.push(e.value);
          return values;
        },
      })
      .returns('m')
      .build();
    const result = await rt.run(r, { items: [1, 2] });
    expect(result.status).toBe('completed');
    expect((result as { value: unknown }).value).toEqual([{ e1: 10 }, { e1: 20 }]);
  });

  it('a unit that fails after its retries reports its compensation on find(unit id)', async () => {
    const rt = runtime();
    const r = defineReactor({ name: 'unit-compensation' })
      .asyncStep('u', {
        retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: 1 },
        run: () => fail(new Error('always')),
        compensate: () => {
          throw new Error('compensate broke');
        },
      })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => u.status })
      .returns('r')
      .build();
    const result = await rt.run(r, {});
    expect(result).toMatchObject({ status: 'completed', value: 'failed' });
    const unit = await rt.find(`${result.executionId}.u`);
    expect(unit).toMatchObject({ status: 'failed', result: { status: 'failed', step: 'u', message: 'always', rollbackFailures: [{ step: 'u', kind: 'compensate', reason: 'raised', message: 'compensate broke' }] } });
    expect(unit.trace.map((t) => t.type)).toEqual(['retry', 'failed', 'compensate_failure']);
  });
});

describe('operators and async units (units are independent of their owner)', () => {
  it('cancelling an owner that waits for its unit ends the owner; the unit goes on and is not cancelled', async () => {
    const rt = runtime();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = defineReactor({ name: 'cancel-owner' })
      .asyncStep('u', { run: async () => (await gate, 'done') })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => u.status })
      .background({ all: true })
      .build();
    const started = await rt.run(r, {});
    await expect.poll(async () => (await rt.find(started.executionId)).waiting?.on, { timeout: 2_000 }).toBe('actors');
    expect(await rt.cancel(started.executionId, 'operator stop')).toMatchObject({ status: 'cancelled', reason: 'operator stop' });
    release();
    await expect.poll(async () => (await rt.find(`${started.executionId}.u`)).status, { timeout: 2_000 }).toBe('completed');
    expect((await rt.find(started.executionId)).status).toBe('cancelled');
  });

  it('cancelling an inline owner whose caller waits for its unit ends that wait at once', async () => {
    const rt = runtime({ asyncWaitTimeoutMs: 60_000, generateId: () => 'cancel-inline-1' });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = defineReactor({ name: 'cancel-inline' })
      .asyncStep('u', { run: async () => (await gate, 1) })
      .step('r', { args: ({ result }) => ({ u: result('u') }), run: ({ u }) => u.status })
      .build();
    const running = rt.run(r, {}).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await expect.poll(async () => (await rt.find('cancel-inline-1')).waiting?.on, { timeout: 2_000 }).toBe('actors');
    expect(await rt.cancel('cancel-inline-1', 'stop')).toMatchObject({ status: 'cancelled' });
    // The caller's run() learns it from the owner's announcement, not after asyncWaitTimeoutMs.
    const ended = await Promise.race([running, sleep(2_000).then(() => 'still waiting' as const)]);
    expect(ended).toMatchObject({ error: expect.objectContaining({ message: expect.stringMatching(/was cancelled while this process ran it \(stop\)/) }) });
    release();
  });

  it("undoing a completed owner undoes its steps, never its units", async () => {
    const rt = runtime();
    const undone: string[] = [];
    const kid = defineReactor({ name: 'undo-kid' }).step('k', { run: () => 'K', undo: () => void undone.push('k') }).build();
    const r = defineReactor({ name: 'undo-owner' })
      .step('a', { run: () => 'A', undo: () => void undone.push('a') })
      .asyncStep('u', { waitFor: ['a'], run: () => 'U' })
      .asyncReactor('kid', kid, { waitFor: ['a'] })
      .step('r', { args: ({ result }) => ({ u: result('u'), kid: result('kid') }), run: ({ u, kid: k }) => [u.status, k.status], undo: () => void undone.push('r') })
      .build();
    const result = await rt.run(r, {});
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', r: ['completed', 'completed'] } });
    expect(await rt.undo(result.executionId)).toMatchObject({ status: 'cancelled' });
    expect(undone).toEqual(['r', 'a']);
    expect((await rt.find(`${result.executionId}.u`)).status).toBe('completed');
    expect((await rt.find(`${result.executionId}.kid`)).status).toBe('completed');
    // A unit cannot be cancelled or undone itself: the error says why and what to do.
    await expect(rt.undo(`${result.executionId}.u`)).rejects.toThrow(/is the async unit of step "u" of execution .*; units are independent of their owner and cannot be undone: undo the owner instead/);
    await expect(rt.cancel(`${result.executionId}.u`, 'no')).rejects.toThrow(/cannot be cancelled: cancel the owner instead/);
  });
});

describe('an async reactor child with an interrupt', () => {
  it('pauses on its own (its owner goes on) and is continued by its id or its correlation id', async () => {
    const rt = runtime();
    const approval = defineReactor({ name: 'child-approval', input: z.object({ ref: z.string() }) })
      .step('prepare', { run: () => 'P' })
      .interrupt('signOff', { waitFor: ['prepare'], correlationId: ({ input }) => input('ref') })
      .step('file', { args: ({ result }) => ({ ok: result('signOff') }), run: ({ ok }) => ok })
      .returns('file')
      .build();
    const owner = defineReactor({ name: 'owns-approval', input: z.object({ ref: z.string() }) })
      .asyncReactor('approval', approval, { args: ({ input }) => ({ ref: input('ref') }) })
      .step('after', { run: () => 'A' })
      .build();
    const first = await rt.run(owner, { ref: 'corr-1' });
    expect(first).toMatchObject({ status: 'completed', value: { after: 'A' } });
    const childId = `${first.executionId}.approval`;
    await expect.poll(async () => (await rt.find(childId)).status, { timeout: 2_000 }).toBe('paused');
    expect(await rt.continueByCorrelationId('corr-1', { payload: 'yes' })).toMatchObject({ status: 'completed', value: 'yes' });
    const second = await rt.run(owner, { ref: 'corr-2' });
    const secondChild = `${second.executionId}.approval`;
    await expect.poll(async () => (await rt.find(secondChild)).status, { timeout: 2_000 }).toBe('paused');
    expect(await rt.continue(secondChild, { step: 'signOff', payload: 'direct' })).toMatchObject({ status: 'completed', value: 'direct' });
  });

  it('an interrupt of a reactor composed inside the child is continued by its correlation id too', async () => {
    const rt = runtime();
    const inner = defineReactor({ name: 'inner-approval', input: z.object({ ref: z.string() }) })
      .interrupt('ok', { correlationId: ({ input }) => input('ref') })
      .step('done', { args: ({ result }) => ({ ok: result('ok') }), run: ({ ok }) => ok })
      .returns('done')
      .build();
    const child = defineReactor({ name: 'wraps-approval', input: z.object({ ref: z.string() }) }).compose('inner', inner).returns('inner').build();
    const owner = defineReactor({ name: 'owns-nested', input: z.object({ ref: z.string() }) }).asyncReactor('k', child).build();
    const started = await rt.run(owner, { ref: 'corr-nested' });
    const childId = `${started.executionId}.k`;
    await expect.poll(async () => (await rt.find(childId)).status, { timeout: 2_000 }).toBe('paused');
    expect(await rt.continueByCorrelationId('corr-nested', { payload: 'nested' })).toMatchObject({ status: 'completed', value: 'nested' });
    expect(await rt.find(childId)).toMatchObject({ status: 'completed' });
  });
});

describe('the sweep of an execution whose step waits for an async unit', () => {
  const awaiting = { step: 'r', index: 2, attempt: 1, child: 'x.u', args: undefined, purpose: 'run', position: null, kind: 'unit', until: 1_000 };
  const owner = { snapshot: { kind: 'execution', machineVersion: 8, value: { running: 'awaiting' }, context: { reactor: 'owner', awaiting } }, inbox: { entries: [], seq: 0 }, revision: 3, outbox: [] } as never;
  const unitIn = (value: string) => Promise.resolve({ snapshot: { kind: 'unit', machineVersion: 1, value, context: { dispatchedAt: 400 } } } as never);

  it('keeps it while the unit works and the wait has time left; delivers the unit settle a lost wake would have', async () => {
    expect(await sweepExecution('x', owner, () => unitIn('running'), 999)).toEqual({ action: 'keep' });
    expect(await sweepExecution('x', owner, () => unitIn('completed'), 999)).toEqual({ action: 'deliver', event: { type: 'xreactor.unit.settled', at: 999, child: 'x.u' } });
  });

  it('times the wait out itself past its deadline (its delayed job lost), and fails the reader when the unit is gone', async () => {
    const late = await sweepExecution('x', owner, () => unitIn('running'), 1_000);
    expect(late).toMatchObject({ action: 'deliver', event: { type: 'xreactor.unit.timedOut', unit: 'x.u', index: 2, attempt: 1, started: false, retryable: false } });
    const error = deserializeError((late as unknown as { event: { error: never } }).event.error) as Error & { cause: Error & { code: string } };
    expect(error.message).toBe('reactor "owner" step "r": argument from result("u") cannot be resolved: async unit x.u did not settle within 600 ms while step "r" waited for it; raise asyncParkTimeoutMs (createRuntime / createWorker), or read the unit later in the plan');
    expect(error.cause.code).toBe('async_wait_timeout');
    const gone = await sweepExecution('x', owner, () => Promise.resolve(undefined), 10);
    expect(deserializeError((gone as unknown as { event: { error: never } }).event.error).message).toMatch(/async unit x\.u is gone/);
  });
});

describe('machine versions', () => {
  it('every execution is stored as version 10, one that uses async units or not; a unit as unit version 1', async () => {
    const store = createMemoryStore();
    const rt = runtime({ store });
    const kid = defineReactor({ name: 'v-kid' }).step('k', { run: () => 1 }).build();
    const plain = defineReactor({ name: 'v-plain' }).step('a', { run: () => 1 }).build();
    const units = defineReactor({ name: 'v-units' }).asyncStep('u', { run: () => 1 }).asyncReactor('kid', kid).build();
    const a = await rt.run(plain, {});
    const b = await rt.run(units, {});
    await expect.poll(async () => (await rt.find(`${b.executionId}.kid`)).status, { timeout: 2_000 }).toBe('completed');
    expect(EXECUTION_MACHINE_VERSION).toBe(10);
    expect((await store.load(a.executionId))!.snapshot.machineVersion).toBe(10);
    expect((await store.load(b.executionId))!.snapshot.machineVersion).toBe(10);
    expect((await store.load(`${b.executionId}.kid`))!.snapshot.machineVersion).toBe(10);
    expect((await store.load(`${b.executionId}.u`))!.snapshot).toMatchObject({ kind: 'unit', machineVersion: 1 });
  });
});
