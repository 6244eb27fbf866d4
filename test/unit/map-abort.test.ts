import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMemoryStore, createRuntime, defineReactor, ExecutionAbortedError, halt } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';

// A map that halts: an undo(id) of the halted run rolls back its completed elements first.
// An inline map whose caller is interrupted mid-element (docs/design/map.md §11.3): the element,
// the map and the owner end `aborted`, nothing is rolled back; `undo(id)` then compensates the
// map (its completed and aborted elements) and undoes the owner's stack, ending `cancelled`.

const logger = pino({ level: 'silent' });
const input = z.object({ items: z.array(z.number()) });

function world() {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const runtime = createRuntime({ clock, store, logger });
  return { store, runtime };
}

/** Element e1 → e2; e2 of element `hangAt` waits until the run is interrupted. */
function element(log: string[], hangAt: number, started: () => void) {
  return defineReactor({ name: `abortable-element-${hangAt}` })
    .step('e1', { run: (i: unknown) => void log.push(`run:e1[${String(i)}]`), undo: (_r: unknown, i: unknown) => void log.push(`undo:e1[${String(i)}]`) })
    .step('e2', {
      waitFor: ['e1'],
      run: (i: unknown, ctx) => {
        log.push(`run:e2[${String(i)}]`);
        if (i !== hangAt) return i;
        started();
        return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('interrupted'))));
      },
      undo: (_r: unknown, i: unknown) => void log.push(`undo:e2[${String(i)}]`),
    })
    .build();
}

async function abortAt(hangAt: number, undoAll?: (log: string[]) => (completed: AsyncIterable<{ index: number }>) => Promise<void>) {
  const { runtime, store } = world();
  const log: string[] = [];
  const controller = new AbortController();
  const reactor = defineReactor({ name: `abortable-${hangAt}-${undoAll === undefined ? 'each' : 'all'}`, input })
    .step('a', { run: () => void log.push('run:a'), undo: () => void log.push('undo:a') })
    .map('m', element(log, hangAt, () => controller.abort(new Error('caller stopped'))), {
      source: ({ input }) => input('items'),
      waitFor: ['a'],
      ...(undoAll === undefined ? {} : { undoAll: undoAll(log) }),
    })
    .build();
  // An interrupted run rejects with ExecutionAbortedError, naming the execution.
  const error: unknown = await runtime.run(reactor, { items: [0, 1, 2, 3] }, { signal: controller.signal }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExecutionAbortedError);
  const executionId = (error as ExecutionAbortedError).executionId;
  return { runtime, store, log, result: { status: (await runtime.find(executionId)).status, executionId } };
}

describe('inline map interrupted mid-element', () => {
  it('ends aborted with the map step pending compensation; undo(id) undoes the aborted element, then the completed ones newest first, then a', async () => {
    const { runtime, store, log, result } = await abortAt(2);
    expect(result.status).toBe('aborted');
    expect(log).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'run:e1[1]', 'run:e2[1]', 'run:e1[2]', 'run:e2[2]']);
    const view = await runtime.find(result.executionId);
    expect(view.pendingCompensation).toEqual({ step: 'm' });
    expect((await store.load(`${result.executionId}.m.2`))?.snapshot.value).toBe('aborted');
    log.length = 0;
    const undone = await runtime.undo(result.executionId);
    expect(undone).toMatchObject({ status: 'cancelled' });
    expect(log).toEqual(['undo:e1[2]', 'undo:e2[1]', 'undo:e1[1]', 'undo:e2[0]', 'undo:e1[0]', 'undo:a']);
    expect((await runtime.find(result.executionId)).status).toBe('cancelled');
  });

  it('with undoAll: the aborted element replays its own undo stack, undoAll gets the completed ones, once', async () => {
    const calls: number[][] = [];
    const { runtime, log, result } = await abortAt(2, (log) => async (completed) => {
      const seen: number[] = [];
      for await (const c of completed) seen.push(c.index);
      calls.push(seen);
      log.push('undoAll');
    });
    expect(result.status).toBe('aborted');
    log.length = 0;
    expect(await runtime.undo(result.executionId)).toMatchObject({ status: 'cancelled' });
    expect(log).toEqual(['undo:e1[2]', 'undoAll', 'undo:a']);
    expect(calls).toEqual([[0, 1]]);
  });

  it('a halted map: undo(id) of the halted run rolls back its completed elements (the halted one is not needed), then the undo stack', async () => {
    // The embedded default (system clock, its in-process queue run by its own worker): a fan-out map's jobs run as they come.
    const runtime = createRuntime({ logger });
    const log: string[] = [];
    const element = defineReactor({ name: 'halting-element' })
      .step('e1', { run: (i: unknown) => void log.push(`run:e1[${String(i)}]`), undo: (_r: unknown, i: unknown) => void log.push(`undo:e1[${String(i)}]`) })
      .step('e2', {
        waitFor: ['e1'],
        run: (i: unknown) => {
          log.push(`run:e2[${String(i)}]`);
          return i === 1 ? halt(`e2[1] halted`) : i;
        },
        undo: (_r: unknown, i: unknown) => void log.push(`undo:e2[${String(i)}]`),
      })
      .build();
    for (const fanOut of [false, true]) {
      log.length = 0;
      const reactor = defineReactor({ name: `halting-${String(fanOut)}`, input })
        .step('a', { run: () => void log.push('run:a'), undo: () => void log.push('undo:a') })
        .map('m', element, { source: ({ input }) => input('items'), waitFor: ['a'], fanOut, batchSize: 1 })
        .build();
      const started = await runtime.run(reactor, { items: [0, 1, 2] });
      const result = fanOut ? await runtime.awaitResult(started.executionId, { timeoutMs: 1_000 }) : started;
      expect(result, `fanOut ${String(fanOut)}`).toMatchObject({ status: 'halted', step: 'm', reason: 'e2[1] halted' });
      expect((await runtime.find(result.executionId)).pendingCompensation).toEqual({ step: 'm' });
      log.length = 0;
      const undone = await runtime.undo(result.executionId);
      const end = undone.status === 'dispatched' ? await runtime.awaitResult(result.executionId, { timeoutMs: 1_000 }) : undone;
      expect(end, `fanOut ${String(fanOut)}`).toMatchObject({ status: 'cancelled' });
      // Element 1 halted (its e1 stays, as a halted run's completed steps do); element 0 is undone, then a.
      expect(log, `fanOut ${String(fanOut)}`).toEqual(['undo:e2[0]', 'undo:e1[0]', 'undo:a']);
    }
    await runtime.close();
  });
});
