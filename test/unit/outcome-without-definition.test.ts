import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor } from '../../src/index.js';
import { createInProcessQueue } from '../../src/testing/index.js';

const silent = pino({ level: 'silent' });

// Reading an outcome needs no definition: a process that does not have the reactor (a
// dashboard, a CLI, a service that only waits) can await and find every run.
describe('outcomes in a process without the reactor', () => {
  const store = createMemoryStore();
  const owner = createRuntime({ logger: silent, store });
  const reader = createRuntime({ logger: silent, store });

  it('awaitResult and find of a completed and of a failed run', async () => {
    const done = defineReactor({ name: 'elsewhere_done' }).step('a', { run: () => ({ total: 5 }) }).returns('a').build();
    const broken = defineReactor({ name: 'elsewhere_failed' })
      .step('a', {
        run: () => {
          throw new Error('nope');
        },
      })
      .build();
    const { executionId: ok } = await owner.run(done, undefined as never);
    const { executionId: bad } = await owner.run(broken, undefined as never);
    expect(await reader.awaitResult(ok)).toMatchObject({ status: 'completed', value: { total: 5 } });
    expect(await reader.awaitResult(bad)).toMatchObject({ status: 'failed', message: 'nope' });
    expect((await reader.find(ok)).status).toBe('completed');
  });

  it('awaitResult of a run paused at an interrupt names the interrupt ready', async () => {
    const approval = defineReactor({ name: 'elsewhere_paused' }).step('a', { run: () => 1 }).interrupt('approve', {}).build();
    const paused = await owner.run(approval, undefined as never);
    expect(paused.status).toBe('paused');
    expect(await reader.awaitResult(paused.executionId)).toEqual({ status: 'paused', executionId: paused.executionId, readyInterrupts: ['approve'] });
  });
});

describe('a worker without the reactor', () => {
  it('leaves the job for a worker that has it, with advice a worker can follow', async () => {
    const store = createMemoryStore();
    const failures: unknown[] = [];
    const queue = createInProcessQueue({ mode: 'manual', onError: (error) => void failures.push(error) });
    const later = defineReactor({ name: 'worker_lacks_it' }).step('a', { run: () => 1 }).background({ all: true }).build();
    const caller = createRuntime({ logger: silent, store, queue, worker: false, reactors: [later] });
    const { executionId } = await caller.run(later, undefined as never);
    const worker = createWorker({ logger: silent, store, queue, reactors: [], sweepIntervalMs: 0 });
    await queue.runNext();
    await worker.close();
    expect((await caller.find(executionId)).status).toBe('running');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ code: 'execution_not_here', retryable: true });
    expect(String((failures[0] as Error).message)).toMatch(/reactor "worker_lacks_it" is not registered with this worker; pass it to createWorker\(\{ reactors \}\); the job is retried/);
  });
});
