import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor, fail } from '../../src/index.js';
import { createInProcessQueue } from '../../src/queue/in-process-queue.js';
import { createTestClock, recordEvents } from '../../src/testing/index.js';

// Seed 001 §3.5 (S-bg-01..04) and S-edge-02, on the in-process queue in manual mode:
// the caller runs up to the cut and returns `dispatched`; draining the queue is the worker.

function harness() {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const queue = createInProcessQueue({ mode: 'manual', clock });
  const recorder = recordEvents();
  const logger = pino({ level: 'silent' });
  const runtime = createRuntime({ store, queue, clock, logger, middleware: [recorder.middleware], worker: false });
  const events: string[] = [];
  const record = (e: string) => void events.push(e);
  return { clock, store, queue, runtime, events, record, hooks: recorder.events, logger, middleware: recorder.middleware };
}

type Harness = ReturnType<typeof harness>;

function startWorker(h: Harness, reactors: Parameters<typeof createWorker>[0]['reactors']) {
  return createWorker({ store: h.store, queue: h.queue, clock: h.clock, logger: h.logger, middleware: [h.middleware], reactors });
}

function abc(h: Harness, cut: 'all' | 'afterA', c: 'fails' | 'ok') {
  const builder = defineReactor({ name: `bg-${cut}-${c}` })
    .step('a', { run: () => (h.record('run:a'), 'A'), undo: () => h.record('undo:a') })
    .step('b', { args: ({ result }) => ({ a: result('a') }), run: () => (h.record('run:b'), 'B'), undo: () => h.record('undo:b') })
    .step('c', {
      args: ({ result }) => ({ b: result('b') }),
      run: () => (h.record('run:c'), c === 'fails' ? fail(new Error('c failed')) : 'C'),
      compensate: () => h.record('compensate:c'),
      undo: () => h.record('undo:c'),
    });
  return (cut === 'all' ? builder.background({ all: true }) : builder.background({ after: 'a' })).build();
}

describe('seed 3.5 background', () => {
  it('S-bg-01: all: the caller dispatches before any step; the worker runs and rolls back', async () => {
    const h = harness();
    const reactor = abc(h, 'all', 'fails');
    const worker = startWorker(h, [reactor]);
    const dispatched = await h.runtime.run(reactor, {});
    expect(dispatched.status).toBe('dispatched');
    expect(h.events).toEqual([]);
    expect(h.queue.pending().map((j) => j.event?.type)).toEqual(['xreactor.execution.resume']);
    await h.queue.drain();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    const result = await h.runtime.awaitResult(dispatched.executionId, { timeoutMs: 1_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'c', message: 'c failed' });
    await worker.close();
  });

  it('S-bg-02: after: a runs a in the caller; the worker undoes it too', async () => {
    const h = harness();
    const reactor = abc(h, 'afterA', 'fails');
    const worker = startWorker(h, [reactor]);
    const dispatched = await h.runtime.run(reactor, {});
    expect(dispatched.status).toBe('dispatched');
    expect(h.events).toEqual(['run:a']);
    await h.queue.drain();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    expect(await h.runtime.awaitResult(dispatched.executionId, { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'c' });
    await worker.close();
  });

  function retrying(h: Harness, failures: number, maxAttempts: number, withC: boolean) {
    let attempts = 0;
    const builder = defineReactor({ name: `bg-retry-${failures}-${maxAttempts}` })
      .step('a', { run: () => (h.record('run:a'), 'A'), undo: () => h.record('undo:a') })
      .step('b', {
        waitFor: ['a'],
        retries: { maxAttempts, backoff: 'exponential', baseDelayMs: 1000 },
        run: () => {
          h.record('run:b');
          attempts += 1;
          return attempts <= failures ? fail(new Error(`b failed #${attempts}`)) : 'B';
        },
        compensate: () => h.record('compensate:b'),
      });
    const withSteps = withC ? builder.step('c', { waitFor: ['b'], run: () => (h.record('run:c'), 'C') }) : builder;
    return withSteps.background({ all: true }).build();
  }

  it('S-bg-03: retries in the worker are delayed jobs; compensated once, in the delivery that exhausts', async () => {
    const h = harness();
    const reactor = retrying(h, Infinity, 3, false);
    const worker = startWorker(h, [reactor]);
    const { executionId } = await h.runtime.run(reactor, {});
    await h.queue.drain();
    // Each retry leaves a delayed job behind: the worker is free between attempts.
    expect(h.queue.pending().map((j) => [j.event?.type, j.delayMs])).toEqual([['xreactor.timer.fired', 1000]]);
    await h.queue.drain({ includeDelayed: true });
    expect(h.hooks).toEqual(['run:a', 'run:b', 'retry:b#1', 'run:b', 'retry:b#2', 'run:b', 'compensate:b', 'undo:a']);
    expect(h.events).toEqual(['run:a', 'run:b', 'run:b', 'run:b', 'compensate:b', 'undo:a']);
    expect(await h.runtime.awaitResult(executionId, { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'b', message: 'b failed #3' });
    await worker.close();
  });

  it('S-bg-04: a worker retry that succeeds continues the run', async () => {
    const h = harness();
    const reactor = retrying(h, 1, 2, true);
    const worker = startWorker(h, [reactor]);
    const { executionId } = await h.runtime.run(reactor, {});
    await h.queue.drain({ includeDelayed: true });
    expect(h.hooks).toEqual(['run:a', 'run:b', 'retry:b#1', 'run:b', 'run:c']);
    expect(await h.runtime.awaitResult(executionId, { timeoutMs: 1_000 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    await worker.close();
  });

  it('after: x where x halts ends the run halted in the caller, with no hand-off', async () => {
    const h = harness();
    const reactor = defineReactor({ name: 'bg-halt' })
      .step('a', { run: () => (h.record('run:a'), 'A') })
      .step('b', { waitFor: ['a'], run: () => (h.record('run:b'), 'B') })
      .background({ after: 'a' })
      .build();
    const { halt } = await import('../../src/index.js');
    const halting = defineReactor({ name: 'bg-halt-2' })
      .step('a', { run: () => (h.record('run:a'), halt('stop here')) })
      .step('b', { waitFor: ['a'], run: () => (h.record('run:b'), 'B') })
      .background({ after: 'a' })
      .build();
    expect(reactor.handoff).toEqual({ mode: 'after', step: 'a', index: 1 });
    expect(await h.runtime.run(halting, {})).toMatchObject({ status: 'halted', step: 'a', reason: 'stop here' });
    expect(h.queue.pending()).toEqual([]);
  });

  it('validates the input in the caller: invalid input fails at once and nothing is handed off', async () => {
    const h = harness();
    const { z } = await import('zod');
    const reactor = defineReactor({ name: 'bg-input', input: z.object({ sku: z.string() }) })
      .step('a', { run: () => (h.record('run:a'), 'A') })
      .background({ all: true })
      .build();
    const result = await h.runtime.run(reactor, { sku: 42 } as never);
    expect(result).toMatchObject({ status: 'failed', step: undefined, validationErrors: { sku: [expect.any(String)] } });
    expect(h.queue.pending()).toEqual([]);
    expect(h.events).toEqual([]);
  });

  it('the hand-off never re-triggers in the worker, and a redelivered hand-off job is ignored', async () => {
    const h = harness();
    const reactor = abc(h, 'all', 'ok');
    const worker = startWorker(h, [reactor]);
    const { executionId } = await h.runtime.run(reactor, {});
    const [handoff] = h.queue.pending();
    await h.queue.drain();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c']);
    // The same job delivered again (a duplicate delivery) finds a completed run: nothing runs.
    await h.queue.enqueue([{ ...handoff!, id: `${handoff!.id}.again` }]);
    await h.queue.drain();
    expect(h.events).toEqual(['run:a', 'run:b', 'run:c']);
    expect((await h.runtime.find(executionId)).trace.filter((t) => t.type === 'run')).toHaveLength(3);
    await worker.close();
  });

  it('S-compose-06: background all: a, compose(c1, c2), b fails in the worker: same order as inline', async () => {
    const h = harness();
    const rec = (label: string) => ({ run: () => (h.record(`run:${label}`), label), undo: () => h.record(`undo:${label}`) });
    const kid = defineReactor({ name: 'bg-compose-child' }).step('c1', rec('child.c1')).step('c2', { waitFor: ['c1'], ...rec('child.c2') }).build();
    const reactor = defineReactor({ name: 'bg-compose' })
      .step('a', rec('a'))
      .compose('child', kid, { waitFor: ['a'] })
      .step('b', { waitFor: ['child'], run: () => (h.record('run:b'), fail(new Error('b failed'))), compensate: () => h.record('compensate:b') })
      .background({ all: true })
      .build();
    const worker = startWorker(h, [reactor]);
    const { executionId } = await h.runtime.run(reactor, {});
    expect(h.events).toEqual([]);
    await h.queue.drain();
    expect(h.events).toEqual(['run:a', 'run:child.c1', 'run:child.c2', 'run:b', 'compensate:b', 'undo:child.c2', 'undo:child.c1', 'undo:a']);
    expect(await h.runtime.awaitResult(executionId, { timeoutMs: 1_000 })).toMatchObject({ status: 'failed', step: 'b' });
    await worker.close();
  });

  it('S-edge-02: a worker dies inside b; the redelivered job re-runs b only, then c', async () => {
    const h = harness();
    let firstB = true;
    let release: () => void = () => undefined;
    const reactor = defineReactor({ name: 'bg-crash' })
      .step('a', { run: () => (h.record('run:a'), 'A') })
      .step('b', {
        waitFor: ['a'],
        run: async () => {
          h.record('run:b');
          if (firstB) {
            firstB = false;
            await new Promise<void>((resolve) => (release = resolve));
          }
          return 'B';
        },
      })
      .step('c', { waitFor: ['b'], run: () => (h.record('run:c'), 'C') })
      .background({ all: true })
      .build();
    const first = startWorker(h, [reactor]);
    const { executionId } = await h.runtime.run(reactor, {});
    const draining = h.queue.drain();
    await expect.poll(() => h.events).toEqual(['run:a', 'run:b']);
    // The process dies: its work is interrupted and nothing of b is committed.
    await first.close({ force: true });
    release();
    await draining.catch(() => undefined);
    expect((await h.runtime.find(executionId)).status).toBe('running');
    const second = startWorker(h, [reactor]);
    await h.queue.drain({ includeDelayed: true });
    expect(h.events).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
    expect(await h.runtime.awaitResult(executionId, { timeoutMs: 1_000 })).toMatchObject({ status: 'completed' });
    await second.close();
  });
});
