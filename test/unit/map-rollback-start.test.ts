import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, fail } from '../../src/index.js';
import type { AnyReactorDefinition, JobSpec, Queue } from '../../src/index.js';
import { decodeRollbackStart, encodeRollbackStart } from '../../src/runtime/element-start.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import type { InProcessQueue } from '../../src/testing/index.js';

// A fan-out rollback actor is created by its start job's first commit (docs/design/map.md §19):
// the rollback throw stores no actor, and each start job carries its actor's start payload, which
// the map builds again from its started list when it enqueues after a crash.

const logger = pino({ level: 'silent' });
const input = z.object({ items: z.array(z.number()) });
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** A queue whose enqueue calls `fault` may fail (before anything is enqueued), recording every call's jobs. */
function faultyQueue(inner: InProcessQueue, fault: (jobs: readonly JobSpec[]) => boolean): { readonly queue: Queue; readonly calls: JobSpec[][] } {
  const calls: JobSpec[][] = [];
  const queue = new Proxy(inner, {
    get(target, key, receiver) {
      if (key !== 'enqueue') {
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      }
      return async (jobs: readonly JobSpec[], ...rest: unknown[]) => {
        calls.push([...jobs]);
        if (fault(jobs)) throw new Error('the queue is unreachable (test)');
        return (target.enqueue as (...args: unknown[]) => Promise<void>)(jobs, ...rest);
      };
    },
  }) as unknown as Queue;
  return { queue, calls };
}

function world(fault: (jobs: readonly JobSpec[]) => boolean = () => false, reactors: readonly AnyReactorDefinition[] = []) {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const inner = createInProcessQueue({ mode: 'manual', clock });
  const { queue, calls } = faultyQueue(inner, fault);
  const runtime = createRuntime({ store, queue, clock, logger, worker: true, reactors: [...reactors] });
  return { clock, store, inner, calls, runtime };
}

/** A fan-out map of `n` elements (batch size 3) whose later step fails: every element is undone. */
function reactor(log: string[], name: string) {
  const element = defineReactor({ name: `${name}-element` })
    .step('e', { run: (i: unknown) => (log.push(`run:${String(i)}`), i), undo: (_r: unknown, i: unknown) => void log.push(`undo:${String(i)}`) })
    .build();
  return defineReactor({ name, input })
    .map('m', element, { source: ({ input }) => input('items'), fanOut: true, batchSize: 3 })
    .step('after', { waitFor: ['m'], run: () => fail(new Error('after failed')) })
    .build();
}

const rollbackStarts = (calls: readonly JobSpec[][]) => calls.filter((jobs) => jobs.some((job) => job.actor?.kind === 'element-rollback' && job.id.endsWith('.start')));

describe('fan-out rollback actors created by their start jobs', () => {
  it('start jobs enqueued again after the rollback throw committed carry the same payloads, built from the started list', async () => {
    const log: string[] = [];
    // The first enqueue of each rollback throw fails after its commit landed (the process holding
    // the map "dies" there): the map job is retried, reads the map and performs the enqueue again.
    const failed = new Set<string>();
    const w = world((jobs) => {
      const first = jobs.find((job) => job.actor?.kind === 'element-rollback' && job.id.endsWith('.start'))?.id;
      if (first === undefined || failed.has(first)) return false;
      failed.add(first);
      return true;
    });
    const started = await w.runtime.run(reactor(log, 'rb-start-again'), { items: range(5) });
    const mapId = `${started.executionId}.m`;
    await w.inner.drainRounds({ delayed: 'as-due' });
    expect(w.inner.failed()).toEqual([]);
    const calls = rollbackStarts(w.calls);
    expect(calls.map((jobs) => jobs.length)).toEqual([3, 3, 2, 2]);
    const startOf = (job: JobSpec) => [job.actor?.id, job.start?.map, job.start?.index, Buffer.from(job.start!.payload!).toString('hex')];
    // Byte for byte the payloads the throw's own process built.
    expect(calls[1]!.map(startOf)).toEqual(calls[0]!.map(startOf));
    expect(calls[3]!.map(startOf)).toEqual(calls[2]!.map(startOf));
    // [reactor, step, element index, throw, last of its throw], positions from the newest started.
    const decoded = (jobs: readonly JobSpec[]) => jobs.map((job) => [job.start?.index, decodeRollbackStart(job.actor!.id, job.start!.payload!)]);
    expect([...decoded(calls[1]!), ...decoded(calls[3]!)]).toEqual(
      [4, 3, 2, 1, 0].map((index, position) => [position, { reactor: 'rb-start-again', step: 'm', index, throw: Math.floor(position / 3), lastOfThrow: position === 2 || position === 4 }]),
    );
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'after', rollbackFailures: [] });
    expect(log.filter((l) => l.startsWith('undo:'))).toEqual(['undo:4', 'undo:3', 'undo:2', 'undo:1', 'undo:0']);
    for (const p of range(5)) expect((await w.store.load(`${mapId}.rb-${p}`))?.revision).toBe(2);
    expect((await w.store.listActive(100)).ids).toEqual([]);
  });

  it('a rollback actor is listed by the commit that creates it, and not before its start job ran', async () => {
    const log: string[] = [];
    const w = world();
    const started = await w.runtime.run(reactor(log, 'rb-start-listed'), { items: range(2) });
    const mapId = `${started.executionId}.m`;
    await w.inner.drainRounds({ only: ['execution-advance', 'map-element', 'map-settle'] });
    const [first] = w.inner.pending({ purpose: 'element-rollback' });
    expect(first?.id).toBe(`${mapId}.rb-0.start`);
    expect((await w.store.listActive(100)).ids).not.toContain(`${mapId}.rb-0`);
    expect(await w.store.load(`${mapId}.rb-0`)).toBeUndefined();
    // Its element is held by another process: the actor's resolve finds it contended, and the
    // commit that creates it parks it, listed for the sweeper (its timer job is pending).
    expect(await w.store.acquireLease(`${mapId}.1`, 'intruder', 60_000)).toBe(true);
    await w.inner.runNext();
    const created = await w.store.load(`${mapId}.rb-0`);
    expect([created?.revision, created?.snapshot.value]).toEqual([1, 'parked']);
    expect((await w.store.listActive(100)).ids).toContain(`${mapId}.rb-0`);
    await w.store.releaseLease(`${mapId}.1`, 'intruder');
    w.clock.advance(60_000);
    await w.inner.drainRounds({ delayed: 'as-due' });
    expect(await w.runtime.awaitResult(started.executionId, { timeoutMs: 10 })).toMatchObject({ status: 'failed', step: 'after', rollbackFailures: [] });
    // Position 1 (element 0) went on meanwhile; position 0 (element 1) undid its element once it was free.
    expect(log.filter((l) => l.startsWith('undo:'))).toEqual(['undo:0', 'undo:1']);
    expect((await w.store.listActive(100)).ids).toEqual([]);
  });

  it('a start payload this build cannot read leaves the job for another worker: retried, nothing created', async () => {
    const id = 'nobody.m.rb-0';
    // Not msgpack; msgpack cut short.
    const payloads = [new Uint8Array([0xc1]), encodeRollbackStart({ reactor: 'r', step: 'm', index: 0, throw: 0, lastOfThrow: true }).subarray(0, 3)];
    for (const payload of payloads) {
      // A runtime given a reactor with a map step knows the map kinds.
      const w = world(undefined, [reactor([], 'rb-start-unreadable')]);
      await w.inner.enqueue([{ id: `${id}.start`, kind: 'advance', actor: { kind: 'element-rollback', id }, start: { map: 'nobody.m', index: 0, payload } }]);
      await w.inner.runNext();
      const [pending] = w.inner.inspect({ purpose: 'element-rollback' });
      expect(pending?.attempts).toBe(1);
      expect((pending?.lastError as Error | undefined)?.message).toMatch(/^this worker cannot advance element-rollback actor nobody\.m\.rb-0: the start payload of rollback actor nobody\.m\.rb-0 is not one this build reads.*; the job is retried$/);
      expect(await w.store.load(id)).toBeUndefined();
    }
  });
});
