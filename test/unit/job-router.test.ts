import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, createWorker, defineReactor, JobRejectedError } from '../../src/index.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';

const logger = pino({ level: 'silent' });

function world() {
  const time = createTestClock();
  const store = createMemoryStore({ clock: time });
  const queue = createInProcessQueue({ mode: 'manual', clock: time, maxAttempts: 3, redeliveryDelayMs: () => 0 });
  const reactor = defineReactor({ name: 'jr' }).step('a', { run: () => 'A' }).background({ all: true }).build();
  const caller = createRuntime({ store, queue, clock: time, logger, worker: false, generateId: () => 'run1', reactors: [reactor] });
  const worker = createWorker({ store, queue, clock: time, logger, reactors: [reactor], sweepIntervalMs: 0 });
  return { time, store, queue, reactor, caller, worker };
}

describe('jobs address actors: the router', () => {
  it('a malformed job (no actor) fails at once, after one delivery, with an error naming what is wrong', async () => {
    const { queue, worker } = world();
    await queue.enqueue([{ id: 'bad-1', kind: 'advance' }]);
    await queue.drain();
    const failed = queue.failed();
    expect(failed.map((f) => [f.job.id, f.attempts])).toEqual([['bad-1', 1]]);
    expect(failed[0]!.error).toBeInstanceOf(JobRejectedError);
    expect(String((failed[0]!.error as Error).message)).toMatch(/job "bad-1" is malformed.*names its actor as \{ kind, id \}/);
    await worker.close();
  });

  it('a job that fences its event by revision and also delivers it through the inbox (dedupeKey) fails at once, naming both, and lands nothing', async () => {
    const { store, queue, caller, reactor, worker } = world();
    expect(await caller.run(reactor, {})).toMatchObject({ status: 'dispatched' });
    const before = await store.load('run1');
    await queue.enqueue([{ id: 'fenced-1', kind: 'advance', actor: { kind: 'execution', id: 'run1' }, event: { type: 'xreactor.timer.fired', at: 0 }, dedupeKey: 'k', ifRevision: 1 }]);
    queue.reorder(['fenced-1']);
    await queue.runNext();
    const failed = queue.failed().find((f) => f.job.id === 'fenced-1');
    expect(failed?.attempts).toBe(1);
    expect(failed?.error).toBeInstanceOf(JobRejectedError);
    expect(String((failed!.error as Error).message)).toMatch(/job fenced-1 .* names ifRevision with dedupeKey/);
    expect((await store.load('run1'))?.inbox.entries).toEqual(before?.inbox.entries);
    await worker.close();
  });

  it('a job for an actor kind this build does not know is retried, and the actor is left untouched and listed', async () => {
    const { store, queue, caller, reactor, worker } = world();
    expect(await caller.run(reactor, {})).toMatchObject({ status: 'dispatched' });
    const before = await store.load('run1');
    await queue.enqueue([{ id: 'future-1', kind: 'advance', actor: { kind: 'map', id: 'run1' } }]);
    for (let delivery = 0; delivery < 3; delivery += 1) {
      queue.reorder(['future-1']);
      await queue.runNext();
    }
    const failed = queue.failed().find((f) => f.job.id === 'future-1');
    expect(failed?.attempts).toBe(3);
    expect(failed?.error).toMatchObject({ code: 'actor_kind_unknown', retryable: true });
    expect(String((failed?.error as Error).message)).toMatch(/knows actor kinds execution, not "map"/);
    expect((await store.load('run1'))?.revision).toBe(before?.revision);
    expect((await store.listActive(10)).ids).toContain('run1');
    await worker.close();
  });

  it('a job for an actor that does not exist fails at once after a bounded grace, naming the actor', async () => {
    const { queue, worker } = world();
    await queue.enqueue([{ id: 'ghost-1', kind: 'advance', actor: { kind: 'execution', id: 'ghost' } }]);
    await queue.drain();
    const failed = queue.failed();
    expect(failed.map((f) => [f.job.id, f.attempts])).toEqual([['ghost-1', 1]]);
    expect(String((failed[0]!.error as Error).message)).toMatch(/execution ghost does not exist/);
    await worker.close();
  });
});
