/**
 * Who holds an execution's liveness lease, and which store calls take and release it: a run's
 * create takes it, the commit that hands the run off or ends it releases it (and tells the run's
 * waiters), and a worker takes it together with the execution in one call.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor } from '../../src/index.js';
import type { Store } from '../../src/index.js';
import { createInProcessQueue } from '../../src/testing/index.js';

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
    expect(commits.at(-1)!.options).toEqual({ releaseLease: (create.options as { lease: { owner: string } }).lease.owner, announce: true });
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
    expect(queue.pending().map((j) => j.executionId)).toEqual(['run-3']);

    calls.length = 0;
    await queue.drain();
    expect(names(calls)[0]).toBe('acquireAndLoad');
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
    expect(calls.find((c) => c.name === 'create')!.options).toEqual({ announce: false });
    expect(names(calls)).not.toContain('commit');
    expect(await store.hasLease('run-4')).toBe(false);
    await queue.drain();
    expect(await runtime.awaitResult('run-4')).toMatchObject({ status: 'completed' });
    await runtime.close();
  });
});
