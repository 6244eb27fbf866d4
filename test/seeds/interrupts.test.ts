import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, fail, InputValidationError, InterruptTimeoutError, InvalidStateError } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { seedHarness } from '../support/seed-kit.js';

// Seed 001 §2.8 and §3.6 (S-intr-*), without lock events until coordination lands.

type H = ReturnType<typeof seedHarness>;
const rec = (h: H, name: string, outcome: 'ok' | 'fail' = 'ok') => ({
  run: () => {
    h.record('run', name);
    return outcome === 'fail' ? fail(new Error(`${name} failed`)) : name.toUpperCase();
  },
  compensate: () => h.record('compensate', name),
  undo: () => h.record('undo', name),
});

const approval = z.object({ approved: z.boolean(), by: z.string() });

function approvalFlow(h: H, c: 'ok' | 'fail' = 'ok', maxAttempts = 1) {
  return defineReactor({ name: `approval-${c}-${maxAttempts}` })
    .step('a', rec(h, 'a'))
    .interrupt('approval', { waitFor: ['a'], payload: approval, maxAttempts })
    .step('c', { args: ({ result }) => ({ decision: result('approval') }), ...rec(h, 'c', c) })
    .build();
}

/** A manual in-process queue, a memory store and a test clock, for tests that drive the jobs by hand. */
function manualWorld() {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const queue = createInProcessQueue({ mode: 'manual', clock });
  return { clock, store, queue };
}

/** A child reactor that pauses at interrupt `signOff` between two steps (their effects recorded as `<prefix>.prepare`, `<prefix>.file`). */
function pausingChild(h: H, name: string, prefix: string) {
  return defineReactor({ name })
    .step('prepare', rec(h, `${prefix}.prepare`))
    .interrupt('signOff', { waitFor: ['prepare'] })
    .step('file', { waitFor: ['signOff'], ...rec(h, `${prefix}.file`) })
    .build();
}

describe('seed interrupts', () => {
  it('S-intr-01: a run pauses at the interrupt; after continue, c fails and a (before the pause) is undone', async () => {
    const h = seedHarness();
    const reactor = approvalFlow(h, 'fail');
    const paused = await h.runtime.run(reactor, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: ['approval'] });
    expect(h.events).toEqual(['run:a']);
    expect((await h.runtime.find(paused.executionId)).status).toBe('paused');
    const result = await h.runtime.continue(paused.executionId, { step: 'approval', payload: { approved: true, by: 'ann' } });
    expect(h.events).toEqual(['run:a', 'run:c', 'compensate:c', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'c' });
  });

  it("the interrupt's result is the validated payload", async () => {
    const h = seedHarness();
    const reactor = approvalFlow(h, 'ok');
    const { executionId } = await h.runtime.run(reactor, {});
    const result = await h.runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'ann' } });
    expect(result).toMatchObject({ status: 'completed', value: { a: 'A', approval: { approved: true, by: 'ann' }, c: 'C' } });
    // The interrupt itself is never on the undo stack.
    expect((await h.runtime.find(executionId)).undoStack.map((e) => e.step)).toEqual(['a', 'c']);
  });

  it('S-intr-02: an invalid payload at maxAttempts 1 undoes the run and fails it at the interrupt', async () => {
    const h = seedHarness();
    const { executionId } = await h.runtime.run(approvalFlow(h), {});
    const result = await h.runtime.continue(executionId, { step: 'approval', payload: { approved: 'yes' } });
    expect(h.events).toEqual(['run:a', 'undo:a']);
    expect(result).toMatchObject({ status: 'failed', step: 'approval' });
    if (result.status === 'failed') expect(result.error).toBeInstanceOf(InputValidationError);
  });

  it('invalid payloads before maxAttempts are refused with field errors; nothing is stored but the count', async () => {
    const h = seedHarness();
    const { executionId } = await h.runtime.run(approvalFlow(h, 'ok', 3), {});
    const before = await h.runtime.find(executionId);
    const refused = await h.runtime.continue(executionId, { step: 'approval', payload: { approved: 1 } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InputValidationError);
    expect((refused as InputValidationError).message).toMatch(/1 of 3 attempts used/);
    expect((refused as InputValidationError).fieldErrors).toHaveProperty('approved');
    expect((await h.runtime.find(executionId)).revision).toBe(before.revision);
    await expect(h.runtime.continue(executionId, { step: 'approval', payload: {} })).rejects.toThrow(/2 of 3 attempts used/);
    expect(await h.runtime.continue(executionId, { step: 'approval', payload: { approved: false, by: 'bo' } })).toMatchObject({ status: 'completed' });
  });

  it('S-intr-03: cancel never rolls back; a stays; resumption is refused afterwards', async () => {
    const h = seedHarness();
    const { executionId } = await h.runtime.run(approvalFlow(h), {});
    expect(await h.runtime.cancel(executionId, 'customer left')).toMatchObject({ status: 'cancelled', reason: 'customer left' });
    expect(h.events).toEqual(['run:a']);
    expect((await h.runtime.find(executionId)).undoStack.map((e) => e.step)).toEqual(['a']);
    await expect(h.runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'x' } })).rejects.toThrow(
      /cannot continue execution .*: it was cancelled; resumption is refused after a cancel/,
    );
    await expect(h.runtime.cancel(executionId, 'again')).rejects.toBeInstanceOf(InvalidStateError);
  });

  it('S-intr-04: undo(id) of a completed run undoes b then a and ends cancelled', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'intr04' }).step('a', rec(h, 'a')).step('b', { waitFor: ['a'], ...rec(h, 'b') }).build();
    const { executionId } = await h.runtime.run(reactor, {});
    expect(await h.runtime.undo(executionId)).toMatchObject({ status: 'cancelled', reason: 'undo' });
    expect(h.events).toEqual(['run:a', 'run:b', 'undo:b', 'undo:a']);
  });

  it('undo(id) of a paused run undoes the steps completed before the pause', async () => {
    const h = seedHarness();
    const { executionId } = await h.runtime.run(approvalFlow(h), {});
    expect(await h.runtime.undo(executionId)).toMatchObject({ status: 'cancelled' });
    expect(h.events).toEqual(['run:a', 'undo:a']);
  });

  it('refusals are clear: unknown interrupt, already resumed, finished run', async () => {
    const h = seedHarness();
    const { executionId } = await h.runtime.run(approvalFlow(h), {});
    await expect(h.runtime.continue(executionId, { step: 'nope', payload: {} })).rejects.toThrow(/"nope" is not an interrupt of reactor "approval-ok-1"; ready interrupts: \["approval"\]/);
    await h.runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'a' } });
    await expect(h.runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'a' } })).rejects.toThrow(/it was already resumed/);
    await expect(h.runtime.continue(executionId, { step: 'other', payload: {} })).rejects.toThrow(/it finished \(completed\)/);
  });

  it('several ready interrupts resume in any order; the run continues once all are resumed', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'two-approvals' })
      .step('quote', rec(h, 'quote'))
      .interrupt('manager', { waitFor: ['quote'] })
      .interrupt('finance', { waitFor: ['quote'] })
      .step('order', { args: ({ result }) => ({ m: result('manager'), f: result('finance') }), ...rec(h, 'order') })
      .build();
    const paused = await h.runtime.run(reactor, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: ['manager', 'finance'] });
    const afterFinance = await h.runtime.continue(paused.executionId, { step: 'finance', payload: 'ok-f' });
    expect(afterFinance).toMatchObject({ status: 'paused', readyInterrupts: ['manager'] });
    await expect(h.runtime.continue(paused.executionId, { step: 'finance', payload: 'again' })).rejects.toThrow(/already resumed/);
    expect(await h.runtime.continue(paused.executionId, { step: 'manager', payload: 'ok-m' })).toMatchObject({
      status: 'completed',
      value: { quote: 'QUOTE', manager: 'ok-m', finance: 'ok-f', order: 'ORDER' },
    });
    expect(h.events).toEqual(['run:quote', 'run:order']);
  });

  it('an interrupt inside a composed child pauses the root and is continued by path', async () => {
    const h = seedHarness();
    const child = defineReactor({ name: 'signoff' })
      .step('prepare', rec(h, 'approval.prepare'))
      .interrupt('managerSignOff', { waitFor: ['prepare'], correlationId: ({ value }) => value('signoff-42') })
      .step('file', { waitFor: ['managerSignOff'], ...rec(h, 'approval.file') })
      .build();
    const reactor = defineReactor({ name: 'nested-approval' })
      .step('a', rec(h, 'a'))
      .compose('approval', child, { waitFor: ['a'] })
      .step('b', { waitFor: ['approval'], ...rec(h, 'b') })
      .build();
    const paused = await h.runtime.run(reactor, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: [['approval', 'managerSignOff']] });
    await expect(h.runtime.continue(paused.executionId, { step: 'managerSignOff', payload: 1 })).rejects.toThrow(/not an interrupt of reactor "nested-approval"/);
    const done = await h.runtime.continueByCorrelationId('signoff-42', { payload: { ok: true } });
    expect(done).toMatchObject({ status: 'completed', value: { a: 'A', approval: { prepare: 'APPROVAL.PREPARE', managerSignOff: { ok: true }, file: 'APPROVAL.FILE' }, b: 'B' } });
    expect(h.events).toEqual(['run:a', 'run:approval.prepare', 'run:approval.file', 'run:b']);
  });

  it('undo(id) of a run paused in a composed child undoes the child steps, then the root steps', async () => {
    const h = seedHarness();
    const child = defineReactor({ name: 'signoff-2' }).step('prepare', rec(h, 'approval.prepare')).interrupt('sign', { waitFor: ['prepare'] }).build();
    const reactor = defineReactor({ name: 'nested-undo' }).step('a', rec(h, 'a')).compose('approval', child, { waitFor: ['a'] }).build();
    const { executionId } = await h.runtime.run(reactor, {});
    await h.runtime.undo(executionId);
    expect(h.events).toEqual(['run:a', 'run:approval.prepare', 'undo:approval.prepare', 'undo:a']);
  });

  it('lazy timeout: a resume that arrives too late fails the run and undoes it', async () => {
    const h = seedHarness();
    const reactor = defineReactor({ name: 'lazy-timeout' })
      .step('a', rec(h, 'a'))
      .interrupt('approval', { waitFor: ['a'], timeout: { ms: 60_000 } })
      .build();
    const { executionId } = await h.runtime.run(reactor, {});
    h.clock.advance(60_001);
    const result = await h.runtime.continue(executionId, { step: 'approval', payload: 1 });
    expect(result).toMatchObject({ status: 'failed', step: 'approval' });
    if (result.status === 'failed') expect(result.error).toBeInstanceOf(InterruptTimeoutError);
    expect(h.events).toEqual(['run:a', 'undo:a']);
  });

  it('a resume that finds the run busy in another process is handed to a worker (dispatched, run_busy)', async () => {
    const { clock, store, queue } = manualWorld();
    const runtime = createRuntime({ store, queue, clock, logger: pino({ level: 'silent' }), worker: true });
    const h = seedHarness();
    const reactor = approvalFlow(h);
    const { executionId } = await runtime.run(reactor, {});
    expect(await store.acquireLease(executionId, 'another-process', 60_000)).toBe(true);
    const dispatched = await runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'ann' } });
    expect(dispatched).toEqual({ status: 'dispatched', executionId, reason: 'run_busy' });
    // The claim is taken in the caller: a second resume is refused at once.
    await expect(runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'bob' } })).rejects.toThrow(/already resumed/);
    await store.releaseLease(executionId, 'another-process');
    await queue.drain();
    expect(await runtime.awaitResult(executionId, { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: { approval: { by: 'ann' } } });
    await runtime.close();
  });

  it("a resume applied in the composed child whose signal to the root is left to the root's lease holder answers dispatched (run_busy), even once that process has finished the root", async () => {
    const { clock, store, queue } = manualWorld();
    const h = seedHarness();
    const child = pausingChild(h, 'signoff-busy', 'approval');
    const reactor = defineReactor({ name: 'nested-approval-busy' })
      .step('a', rec(h, 'a'))
      .compose('approval', child, { waitFor: ['a'] })
      .step('b', { waitFor: ['approval'], ...rec(h, 'b') })
      .build();
    // Another process holds the root's lease when the child's signal reaches it (a duplicate job
    // that finds nothing to do): the wake job goes to the queue. That process lets go and a worker
    // finishes the root, all before this continue reads the root again (the race forced here).
    let root = '';
    const enqueue = queue.enqueue.bind(queue);
    queue.enqueue = async (jobs, options) => {
      await enqueue(jobs, options);
      if (root !== '' && jobs.some((job) => job.actor?.id === root)) {
        await store.releaseLease(root, 'another-process');
        await queue.drain();
      }
    };
    const runtime = createRuntime({ store, queue, clock, logger: pino({ level: 'silent' }), worker: true });
    const paused = await runtime.run(reactor, {});
    expect(paused).toMatchObject({ status: 'paused' });
    root = paused.executionId;
    expect(await store.acquireLease(root, 'another-process', 60_000)).toBe(true);
    const answer = await runtime.continue(root, { step: ['approval', 'signOff'], payload: { ok: true } });
    // The child's part ran here; the root's (b) ran in the worker: the answer says so.
    expect(answer).toEqual({ status: 'dispatched', executionId: root, reason: 'run_busy' });
    expect(h.events).toEqual(['run:a', 'run:approval.prepare', 'run:approval.file', 'run:b']);
    expect(await runtime.awaitResult(root, { timeoutMs: 10 })).toMatchObject({ status: 'completed', value: { b: 'B' } });
    await runtime.close();
  });

  it("an async reactor's child continued by its own id answers its own outcome, though its signal to the owner is left to the owner's lease holder", async () => {
    const { clock, store, queue } = manualWorld();
    const h = seedHarness();
    const kid = pausingChild(h, 'kid-with-approval', 'kid');
    const reactor = defineReactor({ name: 'async-owner' })
      .step('a', rec(h, 'a'))
      .asyncReactor('kid', kid, { waitFor: ['a'] })
      .build();
    const runtime = createRuntime({ store, queue, clock, logger: pino({ level: 'silent' }), worker: true });
    const { executionId: owner } = await runtime.run(reactor, {});
    await queue.drain();
    const child = `${owner}.kid`;
    expect((await runtime.find(child)).status).toBe('paused');
    // Another process holds the owner's lease as the child settles: the owner's part is left to it.
    expect(await store.acquireLease(owner, 'another-process', 60_000)).toBe(true);
    const answer = await runtime.continue(child, { step: 'signOff', payload: { ok: true } });
    expect(answer).toMatchObject({ status: 'completed', executionId: child, value: { file: 'KID.FILE' } });
    expect(h.events).toEqual(['run:a', 'run:kid.prepare', 'run:kid.file']);
    await store.releaseLease(owner, 'another-process');
    await queue.drain();
    await runtime.close();
  });

  it('a sweep that looks at the run the moment the resume lands in its inbox finds it leased: the caller applies the resume, no worker does', async () => {
    const { clock, store: memory, queue } = manualWorld();
    const h = seedHarness();
    const reactor = approvalFlow(h);
    // A worker's sweep runs right after the signal lands, before the resume goes on (the race a
    // real sweeper loses or wins by microseconds, forced here).
    const sweeper = createRuntime({ store: memory, queue, clock, logger: pino({ level: 'silent' }), worker: false, reactors: [reactor] });
    const requeued: number[] = [];
    const store: typeof memory = {
      ...memory,
      signal: async (...args) => {
        const receipt = await memory.signal(...args);
        requeued.push(await sweeper.sweepOnce());
        return receipt;
      },
    };
    const runtime = createRuntime({ store, queue, clock, logger: pino({ level: 'silent' }), worker: false });
    const { executionId } = await runtime.run(reactor, {});
    const result = await runtime.continue(executionId, { step: 'approval', payload: { approved: true, by: 'ann' } });
    expect(requeued).toEqual([0]);
    expect(queue.pending()).toEqual([]);
    expect(result).toMatchObject({ status: 'completed', value: { approval: { by: 'ann' } } });
    expect(h.events).toEqual(['run:a', 'run:c']);
    await Promise.all([runtime.close(), sweeper.close()]);
  });

  it('active timeout: a delayed job fails the run when the pause lasts too long', async () => {
    const { clock, store, queue } = manualWorld();
    const events: string[] = [];
    const runtime = createRuntime({ store, queue, clock, logger: pino({ level: 'silent' }), worker: true });
    const reactor = defineReactor({ name: 'active-timeout' })
      .step('a', { run: () => void events.push('run:a'), undo: () => void events.push('undo:a') })
      .interrupt('approval', { waitFor: ['a'], timeout: { ms: 5_000, strategy: 'active' } })
      .build();
    const { executionId } = await runtime.run(reactor, {});
    expect(queue.inspect().map((j) => [j.job.event?.type, j.dueAt])).toEqual([['xreactor.interrupt.fail', 5_000]]);
    await queue.drain({ includeDelayed: true });
    expect(events).toEqual(['run:a', 'undo:a']);
    expect(await runtime.awaitResult(executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'approval' });
    await runtime.close();
  });
});
