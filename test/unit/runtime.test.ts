import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createMemoryStore,
  createRuntime,
  defineReactor,
  ExecutionNotFoundError,
  InvalidStateError,
  UnknownReactorError,
  halt,
} from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const silent = pino({ level: 'silent' });

const pricing = defineReactor({ name: 'pricing', input: z.object({ qty: z.number(), unit: z.number() }) })
  .step('subtotal', { args: ({ input }) => ({ qty: input('qty'), unit: input('unit') }), run: ({ qty, unit }) => qty * unit, undo: () => undefined })
  .step('total', { args: ({ result }) => ({ subtotal: result('subtotal').transform((s) => s * 1.2) }), run: ({ subtotal }) => ({ amount: subtotal }) })
  .build();

describe('runtime', () => {
  it('returns every step result without returns, and the returns step result with it', async () => {
    const runtime = createRuntime({ logger: silent });
    expect(await runtime.run(pricing, { qty: 2, unit: 10 })).toMatchObject({ status: 'completed', value: { subtotal: 20, total: { amount: 24 } } });
    const only = defineReactor({ name: 'only' }).step('a', { run: () => 1 }).step('b', { run: () => 'two' }).returns('b').build();
    expect(await runtime.run(only, {})).toMatchObject({ status: 'completed', value: 'two' });
  });

  it('find(id) reports status, result, undo stack and trace', async () => {
    const clock = createTestClock(1000);
    const runtime = createRuntime({ logger: silent, clock, generateId: () => 'exec-1' });
    const result = await runtime.run(pricing, { qty: 1, unit: 5 });
    expect(result.executionId).toBe('exec-1');
    const view = await runtime.find('exec-1');
    expect(view).toMatchObject({
      id: 'exec-1',
      reactor: 'pricing',
      status: 'completed',
      result: { status: 'completed', value: { subtotal: 5, total: { amount: 6 } } },
      undoStack: [
        { step: 'subtotal', args: { qty: 1, unit: 5 }, result: 5 },
        { step: 'total', args: { subtotal: 6 }, result: { amount: 6 } },
      ],
      pendingCompensation: undefined,
      createdAt: 1000,
    });
    expect(view.trace.map((t) => [t.type, t.step])).toEqual([
      ['run', 'subtotal'],
      ['run', 'total'],
    ]);
  });

  it('refuses an execution id that is empty or contains "." (the separator of composed children\'s ids), creating nothing', async () => {
    const store = createMemoryStore();
    const runtime = createRuntime({ logger: silent, store });
    await expect(runtime.run(pricing, { qty: 1, unit: 1 }, { executionId: 'order.7' })).rejects.toMatchObject({ code: 'execution_id_invalid', message: expect.stringContaining('"order.7"') as string });
    await expect(runtime.run(pricing, { qty: 1, unit: 1 }, { executionId: '' })).rejects.toMatchObject({ code: 'execution_id_invalid' });
    expect(await store.load('order.7')).toBeUndefined();
    const generated = createRuntime({ logger: silent, generateId: () => 'a.b' });
    await expect(generated.run(pricing, { qty: 1, unit: 1 })).rejects.toMatchObject({ code: 'execution_id_invalid' });
  });

  it('find(id) in a process that does not know the reactor reports the returned value, as the snapshot recorded it', async () => {
    const store = createMemoryStore();
    const only = defineReactor({ name: 'only_returns' }).step('a', { run: () => 1 }).step('b', { run: () => 'two' }).returns('b').build();
    const all = defineReactor({ name: 'all_results' }).step('a', { run: () => 1 }).build();
    const writer = createRuntime({ logger: silent, store, generateId: (() => { let n = 0; return () => `w-${(n += 1)}`; })() });
    await writer.run(only, {});
    await writer.run(all, {});
    const reader = createRuntime({ logger: silent, store });
    expect((await reader.find('w-1')).result).toMatchObject({ status: 'completed', value: 'two' });
    expect((await reader.find('w-2')).result).toMatchObject({ status: 'completed', value: { a: 1 } });
  });

  it('an unknown id is an ExecutionNotFoundError', async () => {
    const runtime = createRuntime({ logger: silent });
    await expect(runtime.find('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
    await expect(runtime.undo('nope')).rejects.toBeInstanceOf(ExecutionNotFoundError);
  });

  it('undo(id) rolls back a completed run newest-first and refuses a second undo', async () => {
    const undone: string[] = [];
    const r = defineReactor({ name: 'undoable' })
      .step('a', { run: () => 1, undo: () => void undone.push('a') })
      .step('b', { run: () => 2, undo: () => void undone.push('b') })
      .build();
    const runtime = createRuntime({ logger: silent });
    const { executionId } = await runtime.run(r, {});
    expect(await runtime.undo(executionId)).toMatchObject({ status: 'cancelled', reason: 'undo', rollbackFailures: [] });
    expect(undone).toEqual(['b', 'a']);
    await expect(runtime.undo(executionId)).rejects.toBeInstanceOf(InvalidStateError);
    expect((await runtime.find(executionId)).undoStack).toEqual([]);
  });

  it('undo(id) of a halted run undoes the steps completed before the halt', async () => {
    const undone: string[] = [];
    const r = defineReactor({ name: 'halting' })
      .step('a', { run: () => 1, undo: () => void undone.push('a') })
      .step('b', { waitFor: ['a'], run: () => halt('enough'), undo: () => void undone.push('b') })
      .build();
    const runtime = createRuntime({ logger: silent });
    const { executionId } = await runtime.run(r, {});
    await runtime.undo(executionId);
    expect(undone).toEqual(['a']);
  });

  it('undo(id) of a failed run is refused: it rolled back already', async () => {
    const r = defineReactor({ name: 'failing' }).step('a', { run: () => Promise.reject(new Error('x')) }).build();
    const runtime = createRuntime({ logger: silent });
    const { executionId } = await runtime.run(r, {});
    await expect(runtime.undo(executionId)).rejects.toThrow(/is failed; only completed, halted, paused or aborted/);
  });

  it('a runtime sharing the store finds executions and undoes them only for reactors it knows', async () => {
    const store = createMemoryStore();
    const first = createRuntime({ logger: silent, store });
    const { executionId } = await first.run(pricing, { qty: 1, unit: 1 });
    const stranger = createRuntime({ logger: silent, store });
    expect((await stranger.find(executionId)).status).toBe('completed');
    await expect(stranger.undo(executionId)).rejects.toBeInstanceOf(UnknownReactorError);
    const informed = createRuntime({ logger: silent, store, reactors: [pricing] });
    expect((await informed.undo(executionId)).status).toBe('cancelled');
  });

  it('a retried run (same id, same input) returns that execution\'s outcome and runs nothing again', async () => {
    let runs = 0;
    const counted = defineReactor({ name: 'counted', input: z.object({ n: z.number(), tag: z.string().default('x') }) })
      .step('a', { args: ({ input }) => ({ n: input('n') }), run: ({ n }) => ((runs += 1), n * 2) })
      .returns('a')
      .build();
    const runtime = createRuntime({ logger: silent });
    expect(await runtime.run(counted, { n: 2 }, { executionId: 'fixed' })).toMatchObject({ status: 'completed', value: 4, executionId: 'fixed' });
    // The same input as validated (the default filled in, keys in another order) is the same input.
    expect(await runtime.run(counted, { n: 2 }, { executionId: 'fixed' })).toMatchObject({ status: 'completed', value: 4, executionId: 'fixed' });
    expect(await runtime.run(counted, { tag: 'x', n: 2 }, { executionId: 'fixed' })).toMatchObject({ status: 'completed', value: 4 });
    expect(runs).toBe(1);
  });

  it('a run with an existing id and another input, or of another reactor, is refused naming both', async () => {
    const runtime = createRuntime({ logger: silent });
    await runtime.run(pricing, { qty: 1, unit: 1 }, { executionId: 'fixed' });
    await expect(runtime.run(pricing, { qty: 2, unit: 1 }, { executionId: 'fixed' })).rejects.toMatchObject({
      code: 'execution_exists',
      message: expect.stringMatching(/execution fixed of reactor "pricing" already exists with another input \(stored \{"qty":1,"unit":1\}, given \{"qty":2,"unit":1\}\)/) as string,
    });
    const other = defineReactor({ name: 'other' }).step('a', { run: () => 1 }).build();
    await expect(runtime.run(other, undefined as never, { executionId: 'fixed' })).rejects.toMatchObject({
      code: 'execution_exists',
      message: expect.stringContaining('already exists as a run of reactor "pricing", not "other"') as string,
    });
  });

  it('a retried run while the first call still runs it answers dispatched (run_busy), and runs nothing twice', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let runs = 0;
    const slow = defineReactor({ name: 'slow' }).step('a', { run: async () => ((runs += 1), await gate, 'A') }).returns('a').build();
    const runtime = createRuntime({ logger: silent });
    const first = runtime.run(slow, undefined as never, { executionId: 's1' });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await runtime.run(slow, undefined as never, { executionId: 's1' })).toEqual({ status: 'dispatched', executionId: 's1', reason: 'run_busy' });
    release();
    expect(await first).toMatchObject({ status: 'completed', value: 'A' });
    expect(await runtime.awaitResult('s1')).toMatchObject({ status: 'completed', value: 'A' });
    expect(runs).toBe(1);
  });

  it('find(id) of a handed-off run no worker has taken up yet says it waits for a worker', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const runtime = createRuntime({ logger: silent, queue, worker: true });
    const later = defineReactor({ name: 'waits_for_worker' }).step('a', { run: () => 1 }).background({ all: true }).returns('a').build();
    const { executionId } = await runtime.run(later, undefined as never);
    expect((await runtime.find(executionId)).waiting).toEqual({ on: 'worker' });
    await queue.drain();
    expect(await runtime.find(executionId)).toMatchObject({ status: 'completed', waiting: undefined });
    await runtime.close();
  });

  it('a retried run of a failed execution returns its failure; of a dispatched one, dispatched', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const runtime = createRuntime({ logger: silent, queue, worker: true });
    const failing = defineReactor({ name: 'failing' }).step('a', { run: () => { throw new Error('boom'); } }).build();
    expect(await runtime.run(failing, undefined as never, { executionId: 'f1' })).toMatchObject({ status: 'failed', message: 'boom' });
    expect(await runtime.run(failing, undefined as never, { executionId: 'f1' })).toMatchObject({ status: 'failed', message: 'boom' });
    const later = defineReactor({ name: 'later' }).step('a', { run: () => 1 }).background({ all: true }).returns('a').build();
    expect(await runtime.run(later, undefined as never, { executionId: 'b1' })).toMatchObject({ status: 'dispatched' });
    expect(await runtime.run(later, undefined as never, { executionId: 'b1' })).toMatchObject({ status: 'dispatched', executionId: 'b1', reason: 'background' });
    await queue.drain();
    expect(await runtime.run(later, undefined as never, { executionId: 'b1' })).toMatchObject({ status: 'completed', value: 1 });
    await runtime.close();
  });

  it('a failure reading a step dependency fails that step before its body and rolls back', async () => {
    // A worker that loads the run reads its dependencies from the store (the caller had them in hand).
    const inner = createMemoryStore();
    const store = { ...inner, readResults: () => Promise.reject(new Error('results unreadable')) };
    const queue = createInProcessQueue({ mode: 'manual' });
    const events: string[] = [];
    const r = defineReactor({ name: 'unreadable' })
      .step('a', { run: () => 1, undo: () => void events.push('undo:a') })
      .step('b', { args: ({ result }) => ({ a: result('a') }), run: () => void events.push('run:b'), compensate: () => void events.push('compensate:b') })
      .background({ after: 'a' })
      .build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true });
    const dispatched = await runtime.run(r, {});
    await queue.drain();
    expect(events).toEqual(['undo:a']);
    expect(await runtime.awaitResult(dispatched.executionId, { timeoutMs: 100 })).toMatchObject({ status: 'failed', step: 'b', message: 'results unreadable' });
    await runtime.close();
  });
});
