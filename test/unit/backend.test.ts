import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, DefinitionError, defineReactor } from '../../src/index.js';
import type { Backend, Store } from '../../src/index.js';
import { createInProcessQueue } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });
const reactor = defineReactor({ name: 'owned' }).step('a', { run: () => 1 }).returns('a').build();
/** A memory store that says other processes share it, as the Redis store does. */
const sharedStore = (): Store => ({ ...createMemoryStore(), shared: true });

describe('ownership of the store and queue', () => {
  it('refuses a shared store with the default in-process queue, saying how to opt in', () => {
    expect(() => createRuntime({ logger, store: sharedStore() })).toThrow(DefinitionError);
    expect(() => createRuntime({ logger, store: sharedStore() })).toThrow(/shared store \(Redis\) with the default in-process queue.*pass queue: createBullmqQueue.*createInProcessQueue\(\) from xreactor\/testing and worker: true/);
  });

  it('runs a shared store with an in-process queue given on purpose, and a memory store without one', async () => {
    const opted = createRuntime({ logger, store: sharedStore(), queue: createInProcessQueue(), reactors: [reactor] });
    expect(await opted.run(reactor, undefined as never)).toMatchObject({ status: 'completed', value: 1 });
    await opted.close();
    const plain = createRuntime({ logger, store: createMemoryStore(), reactors: [reactor] });
    expect(await plain.run(reactor, undefined as never)).toMatchObject({ status: 'completed' });
    await plain.close();
  });

  it('closes a backend it was given, once, after its own work; never a store or queue given on their own', async () => {
    const store = createMemoryStore();
    const queue = createInProcessQueue();
    const closeStore = vi.spyOn(store, 'close');
    const closeQueue = vi.spyOn(queue, 'close');
    const backend: Backend = { store, queue, close: vi.fn(async () => undefined) };
    const runtime = createRuntime({ logger, backend, reactors: [reactor] });
    expect(await runtime.run(reactor, undefined as never)).toMatchObject({ status: 'completed' });
    await runtime.close();
    expect(backend.close).toHaveBeenCalledTimes(1);
    expect(closeStore).not.toHaveBeenCalled();
    expect(closeQueue).not.toHaveBeenCalled();

    const given = createRuntime({ logger, store, queue, reactors: [reactor] });
    await given.close();
    expect(closeStore).not.toHaveBeenCalled();
    expect(closeQueue).not.toHaveBeenCalled();
  });

  it('a worker closes the backend it was given after its consumer stopped', async () => {
    const queue = createInProcessQueue();
    const backend: Backend = { store: createMemoryStore(), queue, close: vi.fn(async () => undefined) };
    const worker = createWorker({ logger, backend, reactors: [reactor], sweepIntervalMs: 0 });
    await worker.close();
    expect(backend.close).toHaveBeenCalledTimes(1);
  });

  it('refuses backend beside store or queue, and a worker with neither queue nor backend', () => {
    const backend: Backend = { store: createMemoryStore(), queue: createInProcessQueue(), close: async () => undefined };
    expect(() => createRuntime({ logger, backend, store: createMemoryStore() })).toThrow(/give backend, or store, not both/);
    expect(() => createRuntime({ logger, backend, queue: createInProcessQueue() })).toThrow(/give backend, or queue, not both/);
    expect(() => createWorker({ logger, backend, queue: createInProcessQueue() } as never)).toThrow(/give backend, or queue, not both/);
    expect(() => createWorker({ logger, store: createMemoryStore() } as never)).toThrow(/give the queue to consume/);
  });
});
