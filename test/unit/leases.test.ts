/**
 * Who holds an execution's liveness lease, and which store calls take and release it: a run's
 * create takes it, the commit that hands the run off or ends it releases it (and tells the run's
 * waiters), and a worker takes it together with the execution in one call.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createEngine } from '../../src/runtime/engine.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const silent = pino({ level: 'silent' });

interface Call {
  readonly name: string;
  readonly options: unknown;
}

/** A memory store that records every call, with the options of create / commit. */
function recordingStore(): { store: Store; calls: Call[] } {
  const inner = createMemoryStore();
  const calls: Call[] = [];
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return (...args: unknown[]) => {
        const options = property === 'create' ? args[1] : property === 'commit' ? args[3] : property === 'acquireAndLoad' ? args[1] : undefined;
        calls.push({ name: property, options });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls };
}

const names = (calls: readonly Call[]) => calls.map((c) => c.name);

describe('liveness leases', () => {
  const inline = defineReactor({ name: 'inline_lease' })
    .step('a', { run: () => 1 })
    .step('b', { args: ({ result }) => ({ a: result('a') }), run: ({ a }) => a + 1 })
    .returns('b')
    .build();

  it('an inline run: the create takes the lease, the final commit releases it and announces; no other lease call', async () => {
    const { store, calls } = recordingStore();
    const runtime = createRuntime({ logger: silent, store, generateId: () => 'run-1' });
    expect(await runtime.run(inline, {})).toMatchObject({ status: 'completed', value: 2 });
    const create = calls.find((c) => c.name === 'create')!;
    expect(create.options).toMatchObject({ lease: { owner: expect.any(String) as string, ttlMs: 30_000 }, announce: false });
    const commits = calls.filter((c) => c.name === 'commit');
    // The settling commit also takes the run off the recovery index, and its notification carries the returned result.
    expect(commits.at(-1)!.options).toEqual({ releaseLease: (create.options as { lease: { owner: string } }).lease.owner, announce: true, announceResults: ['b'], unlist: true });
    // Every commit before the last one carries no options.
    expect(commits.slice(0, -1).every((c) => c.options === undefined)).toBe(true);
    expect(names(calls)).not.toContain('acquireLease');
    expect(names(calls)).not.toContain('releaseLease');
    // The result is read from what the run committed: no read after the last commit.
    expect(names(calls)).not.toContain('readResults');
    expect(await store.hasLease('run-1')).toBe(false);
    await runtime.close();
  });

  it('a run whose lease another live process holds is refused and creates nothing', async () => {
    const { store } = recordingStore();
    const runtime = createRuntime({ logger: silent, store });
    await store.acquireLease('taken', 'someone-else', 60_000);
    await expect(runtime.run(inline, {}, { executionId: 'taken' })).rejects.toMatchObject({ code: 'execution_busy' });
    expect(await store.load('taken')).toBeUndefined();
    await runtime.close();
  });

  it('a run interrupted in the caller lets the lease go', async () => {
    const { store } = recordingStore();
    const controller = new AbortController();
    const stuck = defineReactor({ name: 'stuck_lease' })
      .step('wait', {
        run: (_args, { signal }) =>
          new Promise((_resolve, reject) => {
            controller.abort(new Error('stop'));
            signal.addEventListener('abort', () => reject(new Error('aborted')));
          }),
      })
      .build();
    const runtime = createRuntime({ logger: silent, store, generateId: () => 'run-2' });
    await expect(runtime.run(stuck, {}, { signal: controller.signal })).rejects.toMatchObject({ code: 'execution_aborted' });
    expect(await store.hasLease('run-2')).toBe(false);
    await runtime.close();
  });

  it('a hand-off: the hand-off commit releases the lease; the worker takes it with the execution in one call', async () => {
    const { store, calls } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const handedOff = defineReactor({ name: 'handoff_lease' })
      .step('a', { run: () => 1 })
      .step('b', { args: ({ result }) => ({ a: result('a') }), run: ({ a }) => a + 1 })
      .background({ after: 'a' })
      .returns('b')
      .build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-3' });
    expect(await runtime.run(handedOff, {})).toMatchObject({ status: 'dispatched', executionId: 'run-3' });
    const handOff = calls.filter((c) => c.name === 'commit').at(-1)!;
    expect(handOff.options).toMatchObject({ releaseLease: expect.any(String) as string, announce: false });
    expect(await store.hasLease('run-3')).toBe(false);
    expect(queue.pending().map((j) => j.actor?.id)).toEqual(['run-3']);

    calls.length = 0;
    await queue.drain();
    // The job carries the hand-off's state: the worker's first store call is the fenced commit
    // that takes the lease; it reads nothing first.
    expect(names(calls)[0]).toBe('commit');
    expect(calls[0]!.options).toMatchObject({ takeLease: { owner: expect.any(String) as string }, ifSnapshot: expect.any(Uint8Array) as Uint8Array });
    expect(names(calls)).not.toContain('acquireAndLoad');
    expect(names(calls)).not.toContain('acquireLease');
    expect(names(calls)).not.toContain('load');
    expect(calls.filter((c) => c.name === 'commit').at(-1)!.options).toMatchObject({ announce: true });
    expect(await store.hasLease('run-3')).toBe(false);
    expect(await runtime.awaitResult('run-3')).toMatchObject({ status: 'completed', value: 2 });
    await runtime.close();
  });

  it('a background run handed off at once takes no lease at all', async () => {
    const { store, calls } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const all = defineReactor({ name: 'all_lease' }).step('a', { run: () => 1 }).background({ all: true }).build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-4' });
    expect(await runtime.run(all, {})).toMatchObject({ status: 'dispatched' });
    expect(calls.find((c) => c.name === 'create')!.options).toEqual({ announce: false, list: true });
    expect(names(calls)).not.toContain('commit');
    expect(await store.hasLease('run-4')).toBe(false);
    await queue.drain();
    expect(await runtime.awaitResult('run-4')).toMatchObject({ status: 'completed' });
    await runtime.close();
  });

  it('a hand-off job that reaches a worker before the creating commit lands waits for it, then runs the run', async () => {
    const inner = createMemoryStore();
    let releaseCreate: () => void = () => undefined;
    const createGate = new Promise<void>((resolve) => (releaseCreate = resolve));
    const seen: string[] = [];
    // The create is held back until the worker has looked once and found nothing.
    const store = new Proxy(inner, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property === 'create') return async (...args: Parameters<Store['create']>) => {
          await createGate;
          return target.create(...args);
        };
        if (property === 'acquireAndLoad') return async (...args: Parameters<Store['acquireAndLoad']>) => {
          const found = await target.acquireAndLoad(...args);
          seen.push(found.status);
          releaseCreate();
          return found;
        };
        return value;
      },
    });
    const queue = createInProcessQueue({ mode: 'manual' });
    const all = defineReactor({ name: 'early_job' }).step('a', { run: () => 'done' }).background({ all: true }).returns('a').build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-5' });
    const running = runtime.run(all, {});
    // The job is sent alongside the create, before the create lands.
    await new Promise((resolve) => setImmediate(resolve));
    expect(queue.pending().map((j) => j.actor?.id)).toEqual(['run-5']);
    expect(await inner.load('run-5')).toBeUndefined();
    await queue.drain();
    expect(await running).toMatchObject({ status: 'dispatched' });
    expect(seen[0]).toBe('missing');
    expect(seen.at(-1)).toBe('leased');
    expect(await runtime.awaitResult('run-5')).toMatchObject({ status: 'completed', value: 'done' });
    await runtime.close();
  });

  it('a hand-off job sent for a create that is refused wakes a worker for nothing', async () => {
    const { store } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const all = defineReactor({ name: 'refused_job' }).step('a', { run: () => 'done' }).background({ all: true }).returns('a').build();
    const enqueued: string[] = [];
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, middleware: [{ beforeEnqueue: (e) => void enqueued.push(e.job) }] });
    expect(await runtime.run(all, {}, { executionId: 'run-6' })).toMatchObject({ status: 'dispatched' });
    await queue.drain();
    const before = await runtime.find('run-6');
    expect(before).toMatchObject({ status: 'completed' });
    // The same id again: the create is refused (the run answers with the stored outcome), and
    // its hand-off job was already sent.
    expect(await runtime.run(all, {}, { executionId: 'run-6' })).toMatchObject({ status: 'completed', value: 'done' });
    expect(enqueued).toHaveLength(2);
    expect(enqueued[1]).toBe(enqueued[0]);
    // Same job id as the first run's hand-off: the queue does not take it twice; whatever is
    // delivered leaves the run as it was.
    await queue.drain();
    const after = await runtime.find('run-6');
    expect(after).toEqual(before);
    await runtime.close();
  });

  it('a handed-off run: the worker\'s first commit takes the lease (fenced by the carried state), the one that ends the run releases it; no other lease call', async () => {
    const { store, calls } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const single = defineReactor({ name: 'one_commit_job' }).step('a', { run: () => 'done' }).background({ all: true }).returns('a').build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-1c' });
    expect(await runtime.run(single, {})).toMatchObject({ status: 'dispatched' });
    calls.length = 0;
    await queue.drain();
    expect(names(calls)).toEqual(['commit', 'commit']);
    expect(calls[0]!.options).toMatchObject({ takeLease: expect.anything() as unknown, ifSnapshot: expect.anything() as unknown });
    expect(calls[1]!.options).toMatchObject({ releaseLease: expect.any(String) as string, announce: true });
    expect(await store.hasLease('run-1c')).toBe(false);
    expect(await runtime.awaitResult('run-1c')).toMatchObject({ status: 'completed', value: 'done' });
    await runtime.close();
  });

  it('a hand-off job whose carried state is stale (the run was cancelled meanwhile) is refused before anything runs, then reads the store', async () => {
    const { store, calls } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const ran: string[] = [];
    const handedOff = defineReactor({ name: 'stale_carried' })
      .step('a', { run: () => void ran.push('a') })
      .step('b', { waitFor: ['a'], run: () => void ran.push('b') })
      .background({ after: 'a' })
      .build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-7' });
    expect(await runtime.run(handedOff, {})).toMatchObject({ status: 'dispatched' });
    expect(await runtime.cancel('run-7', 'changed my mind')).toMatchObject({ status: 'cancelled' });
    const revision = (await store.load('run-7'))!.revision;
    calls.length = 0;
    await queue.drain();
    // The fenced commit from the carried state is refused; the job then reads the store and finds
    // the run cancelled: b never runs and nothing more is committed.
    expect(names(calls).slice(0, 2)).toEqual(['commit', 'acquireAndLoad']);
    expect(calls.filter((c) => c.name === 'commit')).toHaveLength(1);
    expect(ran).toEqual(['a']);
    expect((await store.load('run-7'))!.revision).toBe(revision);
    expect(await store.hasLease('run-7')).toBe(false);
    expect((await runtime.find('run-7')).status).toBe('cancelled');
    await runtime.close();
  });
  it('a continue that reaches the hand-off releases the lease in that commit: the worker takes the run at once', async () => {
    const { store, calls } = recordingStore();
    const queue = createInProcessQueue({ mode: 'manual' });
    const reactor = defineReactor({ name: 'continue_to_handoff' })
      .step('a', { run: () => 'A' })
      .interrupt('approval', { waitFor: ['a'] })
      .step('b', { waitFor: ['approval'], run: () => 'B' })
      .background({ before: 'b' })
      .returns('b')
      .build();
    const runtime = createRuntime({ logger: silent, store, queue, worker: true, generateId: () => 'run-c' });
    expect(await runtime.run(reactor, {})).toMatchObject({ status: 'paused' });
    calls.length = 0;
    expect(await runtime.continue('run-c', { step: 'approval', payload: 'ok' })).toMatchObject({ status: 'dispatched' });
    expect(calls.filter((c) => c.name === 'commit').at(-1)!.options).toMatchObject({ releaseLease: expect.any(String) as string });
    expect(await store.hasLease('run-c')).toBe(false);
    calls.length = 0;
    await queue.drain();
    // The worker's fenced commit from the carried state is not refused as busy: no read, no retry.
    expect(names(calls)[0]).toBe('commit');
    expect(names(calls)).not.toContain('acquireAndLoad');
    expect(await runtime.awaitResult('run-c')).toMatchObject({ status: 'completed', value: 'B' });
    await runtime.close();
  });

  describe('two jobs of one run in the same worker process (concurrency > 1)', () => {
    /** A background run handed off, then swept (running, no lease), so two jobs wait for it: the hand-off job and the sweep job. */
    async function twoJobs(id: string, steps: readonly string[]) {
      const time = createTestClock();
      const store = createMemoryStore({ clock: time });
      const queue = createInProcessQueue({ mode: 'manual', clock: time });
      const ran: string[] = [];
      const gates: (() => void)[] = [];
      let builder: any = defineReactor({ name: `two_jobs_${id}` });
      let previous: string | undefined;
      for (const step of steps) {
        builder = builder.step(step, {
          ...(previous === undefined ? {} : { waitFor: [previous] }),
          run: () => {
            ran.push(step);
            return new Promise<string>((resolve) => gates.push(() => resolve(step)));
          },
        });
        previous = step;
      }
      const reactor = builder.background({ all: true }).build();
      const caller = createRuntime({ store, queue, clock: time, logger: silent, worker: false, generateId: () => id, reactors: [reactor] });
      expect(await caller.run(reactor, {})).toMatchObject({ status: 'dispatched' });
      expect(await caller.sweepOnce()).toBe(1);
      const [handoff, sweep] = queue.pending();
      // One worker process: one engine, one job handler, both jobs at once.
      const handle = createJobHandler(createEngine({ store, queue, clock: time, logger: silent, reactors: [reactor] }));
      const signal = new AbortController().signal;
      return { store, caller, ran, gates, first: () => handle(handoff!, signal), second: () => handle(sweep!, signal) };
    }

    it('the second job finds the run busy: the step in progress does not run again beside it', async () => {
      const { ran, gates, first, second, caller } = await twoJobs('same-1', ['a']);
      const firstDone = first();
      await expect.poll(() => ran).toEqual(['a']);
      // The second job's acquireAndLoad is refused (busy) through every back-off: BullMQ retries it later.
      await expect(second()).rejects.toMatchObject({ code: 'execution_busy', retryable: true });
      expect(ran).toEqual(['a']);
      gates[0]!();
      await firstDone;
      // Delivered again once the first job is done, it finds the run completed and runs nothing.
      await second();
      expect(ran).toEqual(['a']);
      expect((await caller.find('same-1')).status).toBe('completed');
      await caller.close();
    });

    it("one job's end does not release the lease another job of the same process still works under", async () => {
      const { store, ran, gates, first, second, caller } = await twoJobs('same-2', ['a', 'b']);
      const firstDone = first();
      await expect.poll(() => ran).toEqual(['a']);
      await expect(second()).rejects.toMatchObject({ code: 'execution_busy' });
      gates[0]!();
      await expect.poll(() => ran).toEqual(['a', 'b']);
      // The first job is inside b: its lease still stands, so the sweeper leaves the run alone.
      expect(await store.hasLease('same-2')).toBe(true);
      expect(await caller.sweepOnce()).toBe(0);
      gates[1]!();
      await firstDone;
      expect((await caller.find('same-2')).status).toBe('completed');
      await caller.close();
    });
  });
});
