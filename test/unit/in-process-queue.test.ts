import { describe, expect, it } from 'vitest';
import { XreactorError } from '../../src/errors/index.js';
import { createInProcessQueue } from '../../src/queue/in-process-queue.js';
import { JOB_PURPOSES, jobPurpose } from '../../src/queue/purpose.js';
import type { JobPurpose } from '../../src/queue/purpose.js';
import type { JobHandler, JobSpec } from '../../src/queue/queue.js';
import { createTestClock } from '../../src/testing/test-clock.js';

const job = (id: string, extra: Partial<JobSpec> & { readonly executionId?: string } = {}): JobSpec => {
  const { executionId, ...rest } = extra;
  return { id, kind: 'advance', actor: { kind: 'execution', id: executionId ?? 'e1' }, ...rest };
};

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A handler that records the ids it handles, in order. */
function recorder(extra?: (job: JobSpec) => Promise<void> | void) {
  const handled: string[] = [];
  const handler: JobHandler = async (job) => {
    handled.push(job.id);
    await extra?.(job);
  };
  return { handled, handler };
}

const ids = (jobs: readonly JobSpec[]) => jobs.map((j) => j.id);

describe('in-process queue, manual mode', () => {
  it('keeps jobs pending until drained, then runs them in FIFO order, including jobs enqueued meanwhile', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'a') await queue.enqueue([job('c')]);
    });
    queue.consume(handler);
    await queue.enqueue([job('a'), job('b')]);
    expect(handled).toEqual([]);
    expect(ids(queue.pending())).toEqual(['a', 'b']);

    expect(await queue.drain()).toBe(3);
    expect(handled).toEqual(['a', 'b', 'c']);
    expect(queue.pending()).toEqual([]);
  });

  it('runs one job per runNext and reports when none is due', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder();
    queue.consume(handler);
    expect(await queue.runNext()).toBe(false);
    await queue.enqueue([job('a'), job('b')]);
    expect(await queue.runNext()).toBe(true);
    expect(handled).toEqual(['a']);
    expect(ids(queue.pending())).toEqual(['b']);
  });

  it('filters pending jobs by kind and execution', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    await queue.enqueue([job('a', { executionId: 'e1' }), job('b', { executionId: 'e2' }), job('c', { executionId: 'e1' })]);
    expect(ids(queue.pending({ actorId: 'e1' }))).toEqual(['a', 'c']);
    expect(ids(queue.pending({ kind: 'advance', actorId: 'e2' }))).toEqual(['b']);
  });

  it('hands the handler a copy of the enqueued spec with its data intact', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const seen: JobSpec[] = [];
    queue.consume(async (j) => void seen.push(j));
    const spec = job('a', { event: { type: 'xreactor.step.succeeded', step: 'charge', at: new Date(5) } });
    await queue.enqueue([spec]);
    await queue.drain();
    expect(seen).toEqual([spec]);
  });

  it('throws a clear error when jobs are due but nothing consumes them', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    await queue.enqueue([job('a')]);
    await expect(queue.drain()).rejects.toMatchObject({ code: 'queue_no_consumer', message: /call queue\.consume\(handler\)/ });
    await expect(queue.runNext()).rejects.toMatchObject({ code: 'queue_no_consumer' });
  });
});

describe('in-process queue, deduplication', () => {
  it('does not add an id that is pending, running, or already handled', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'a') await queue.enqueue([job('a')]);
    });
    queue.consume(handler);
    await queue.enqueue([job('a'), job('a'), job('b')]);
    await queue.enqueue([job('b')]);
    expect(ids(queue.pending())).toEqual(['a', 'b']);
    await queue.drain();
    await queue.enqueue([job('a'), job('b')]);
    expect(queue.pending()).toEqual([]);
    expect(handled).toEqual(['a', 'b']);
  });

  it('remembers only the last handledIdsKept handled ids', async () => {
    const queue = createInProcessQueue({ mode: 'manual', handledIdsKept: 2 });
    queue.consume(async () => undefined);
    await queue.enqueue([job('a'), job('b'), job('c')]);
    await queue.drain();
    await queue.enqueue([job('a'), job('b'), job('c')]);
    expect(ids(queue.pending())).toEqual(['a']);
  });

  it('does not add the id of a job that failed every attempt', async () => {
    const queue = createInProcessQueue({ mode: 'manual', maxAttempts: 1 });
    queue.consume(async () => {
      throw new Error('boom');
    });
    await queue.enqueue([job('a')]);
    await queue.drain();
    await queue.enqueue([job('a')]);
    expect(queue.pending()).toEqual([]);
  });
});

describe('in-process queue, reorder', () => {
  it('moves the named jobs to the front in the given order', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([job('a'), job('b'), job('c'), job('d')]);
    queue.reorder(['d', 'b']);
    expect(ids(queue.pending())).toEqual(['d', 'b', 'a', 'c']);
    await queue.drain();
    expect(handled).toEqual(['d', 'b', 'a', 'c']);
  });

  it('refuses ids that are not pending, named twice, or not yet due', async () => {
    const clock = createTestClock(1000);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    await queue.enqueue([job('a'), job('later', { delayMs: 50 })]);
    expect(() => queue.reorder(['nope'])).toThrow(/job "nope" is not pending \(pending: "a"\)/);
    expect(() => queue.reorder(['a', 'a'])).toThrow(/twice/);
    expect(() => queue.reorder(['later'])).toThrow(/job "later" is not due until 1050 \(clock at 1000\)/);
    expect(() => queue.reorder(['nope'])).toThrow(XreactorError);
    clock.advance(50);
    queue.reorder(['later']);
    expect(ids(queue.pending())).toEqual(['later', 'a']);
  });
});

describe('in-process queue, delayed jobs', () => {
  it('keeps a delayed job pending but not due until the clock reaches its time, then appends it to the FIFO', async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([job('timer-200', { delayMs: 200 }), job('timer-100', { delayMs: 100 }), job('now')]);
    expect(ids(queue.pending())).toEqual(['now', 'timer-100', 'timer-200']);
    expect(queue.inspect().map((p) => p.dueAt)).toEqual([0, 100, 200]);

    expect(await queue.drain()).toBe(1);
    expect(handled).toEqual(['now']);

    clock.advance(150);
    await queue.enqueue([job('after-150')]);
    expect(ids(queue.pending())).toEqual(['timer-100', 'after-150', 'timer-200']);
    await queue.drain();
    expect(handled).toEqual(['now', 'timer-100', 'after-150']);
    expect(ids(queue.pending())).toEqual(['timer-200']);
    expect(await queue.runNext()).toBe(false);
  });

  it('drain({ includeDelayed: true }) sleeps on the clock to each due time in turn', async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const runs: [string, number][] = [];
    queue.consume(async (j) => {
      runs.push([j.id, clock.now()]);
      if (j.id === 'a') await queue.enqueue([job('retry', { delayMs: 30 })]);
    });
    await queue.enqueue([job('a', { delayMs: 100 }), job('b', { delayMs: 250 })]);
    expect(await queue.drain({ includeDelayed: true })).toBe(3);
    expect(runs).toEqual([
      ['a', 100],
      ['retry', 130],
      ['b', 250],
    ]);
    expect(clock.sleeps).toEqual([100, 30, 120]);
  });
});

describe('in-process queue, handler errors', () => {
  it('delivers a job again after its handler throws, and counts the attempts', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    let calls = 0;
    const errors: [string, number][] = [];
    const q2 = createInProcessQueue({ mode: 'manual', onError: (_e, j, attempt) => errors.push([j.id, attempt]) });
    const handler: JobHandler = async () => {
      calls += 1;
      if (calls <= 2) throw new Error(`transient ${calls}`);
    };
    queue.consume(handler);
    await queue.enqueue([job('a'), job('b', { executionId: 'e2' })]);
    expect(await queue.runNext()).toBe(true);
    expect(queue.inspect()).toEqual([
      { job: job('b', { executionId: 'e2' }), dueAt: expect.any(Number), attempts: 0 },
      { job: job('a'), dueAt: expect.any(Number), attempts: 1, lastError: new Error('transient 1') },
    ]);
    await queue.drain();
    expect(calls).toBe(4);
    expect(queue.pending()).toEqual([]);
    expect(queue.failed()).toEqual([]);

    q2.consume(async () => {
      throw new Error('always');
    });
    await q2.enqueue([job('x')]);
    await q2.drain();
    expect(errors).toHaveLength(25);
    expect(errors.at(-1)).toEqual(['x', 25]);
    expect(q2.failed()).toEqual([{ job: job('x'), attempts: 25, error: new Error('always') }]);
  });

  it('waits redeliveryDelayMs before delivering a failed job again', async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock, redeliveryDelayMs: (attempt) => 1000 * attempt });
    let calls = 0;
    queue.consume(async () => {
      calls += 1;
      if (calls < 3) throw new Error('transient');
    });
    await queue.enqueue([job('a')]);
    await queue.drain();
    expect(queue.inspect()).toMatchObject([{ job: { id: 'a' }, dueAt: 1000, attempts: 1 }]);
    await queue.drain({ includeDelayed: true });
    expect(calls).toBe(3);
    expect(clock.sleeps).toEqual([1000, 2000]);
  });

  it('stops a drain past maxJobs and names the execution that loops', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    let n = 0;
    queue.consume(async () => {
      n += 1;
      await queue.enqueue([job(`loop-${n}`, { executionId: 'spinning', event: { type: 'xreactor.step.retry' } })]);
    });
    await queue.enqueue([job('start', { executionId: 'spinning' }), job('other', { executionId: 'calm' })]);
    const error = await queue.drain({ maxJobs: 50 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(XreactorError);
    expect(error).toMatchObject({ code: 'queue_drain_limit' });
    expect((error as Error).message).toMatch(
      /drain ran 50 jobs and jobs are still due; likely loop: execution "spinning" got 49 of the last 50 jobs, most often "xreactor\.step\.retry" \(48 times\)/,
    );
    expect(n).toBe(50);
  });
});

describe('in-process queue, inline mode', () => {
  it('runs a job inside enqueue, and jobs enqueued by a handler after it, first in first out', async () => {
    const queue = createInProcessQueue({ mode: 'inline' });
    const events: string[] = [];
    queue.consume(async (j) => {
      events.push(`start ${j.id}`);
      if (j.id === 'a') {
        await queue.enqueue([job('b'), job('c')]);
        events.push('a enqueued b, c');
      }
      if (j.id === 'b') await queue.enqueue([job('d')]);
      events.push(`end ${j.id}`);
    });
    await queue.enqueue([job('a')]);
    events.push('enqueue returned');
    expect(events).toEqual([
      'start a',
      'a enqueued b, c',
      'end a',
      'start b',
      'end b',
      'start c',
      'end c',
      'start d',
      'end d',
      'enqueue returned',
    ]);
  });

  it('works a long chain of nested enqueues from one loop, without recursion', async () => {
    const queue = createInProcessQueue({ mode: 'inline' });
    const depths: number[] = [];
    let ran = 0;
    queue.consume(async (j) => {
      const n = Number(j.id);
      ran += 1;
      if (n % 1000 === 0) depths.push(new Error().stack!.split('\n').length);
      if (n < 20_000) await queue.enqueue([job(String(n + 1))]);
    });
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = Infinity;
    try {
      await queue.enqueue([job('1')]);
    } finally {
      Error.stackTraceLimit = limit;
    }
    expect(ran).toBe(20_000);
    expect(new Set(depths).size).toBe(1);
  });

  it('makes a concurrent outside enqueue wait until its job ran', async () => {
    const queue = createInProcessQueue({ mode: 'inline' });
    const gate = deferred();
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'slow') await gate.promise;
    });
    queue.consume(handler);
    const first = queue.enqueue([job('slow')]);
    let secondDone = false;
    const second = queue.enqueue([job('quick')]).then(() => (secondDone = true));
    await Promise.resolve();
    expect(secondDone).toBe(false);
    gate.resolve();
    await Promise.all([first, second]);
    expect(handled).toEqual(['slow', 'quick']);
  });

  it('starts on jobs enqueued before the consumer once it consumes', async () => {
    const queue = createInProcessQueue({ mode: 'inline' });
    await queue.enqueue([job('a'), job('b')]);
    expect(ids(queue.pending())).toEqual(['a', 'b']);
    const bothRan = deferred();
    const { handled, handler } = recorder(async () => {
      if (handled.length === 2) bothRan.resolve();
    });
    queue.consume(handler);
    expect(handled).toEqual([]);
    await bothRan.promise;
    expect(handled).toEqual(['a', 'b']);
  });

  it('leaves delayed jobs pending until a later enqueue or drain finds them due', async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'inline', clock });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([job('timer', { delayMs: 100 }), job('now')]);
    expect(handled).toEqual(['now']);
    clock.advance(100);
    await queue.enqueue([job('next')]);
    expect(handled).toEqual(['now', 'timer', 'next']);
  });

  it('redelivers a job whose handler threw within the same enqueue', async () => {
    const queue = createInProcessQueue({ mode: 'inline' });
    let calls = 0;
    queue.consume(async () => {
      calls += 1;
      if (calls === 1) throw new Error('transient');
    });
    await queue.enqueue([job('a')]);
    expect(calls).toBe(2);
    expect(queue.pending()).toEqual([]);
  });
});

describe('in-process queue, auto mode', () => {
  it('runs jobs on a later macrotask, not inside enqueue', async () => {
    const queue = createInProcessQueue({ mode: 'auto' });
    const ran = deferred<string>();
    queue.consume(async (j) => ran.resolve(j.id));
    await queue.enqueue([job('a')]);
    expect(ids(queue.pending())).toEqual(['a']);
    expect(await ran.promise).toBe('a');
    await queue.close();
  });

  it('runs up to the consumer concurrency at once', async () => {
    const queue = createInProcessQueue({ mode: 'auto' });
    const gate = deferred();
    let running = 0;
    let peak = 0;
    const threeStarted = deferred();
    const allDone = deferred();
    let done = 0;
    queue.consume(
      async () => {
        running += 1;
        peak = Math.max(peak, running);
        if (running === 3) threeStarted.resolve();
        await gate.promise;
        running -= 1;
        if (++done === 5) allDone.resolve();
      },
      { concurrency: 3 },
    );
    await queue.enqueue(['a', 'b', 'c', 'd', 'e'].map((id) => job(id)));
    await threeStarted.promise;
    expect(ids(queue.pending())).toEqual(['d', 'e']);
    gate.resolve();
    await allDone.promise;
    expect(peak).toBe(3);
    await queue.close();
  });

  it('runs delayed jobs when the clock says they are due (a test clock jumps virtual time)', async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'auto', clock });
    const runs: [string, number][] = [];
    const bothRan = deferred();
    queue.consume(async (j) => {
      runs.push([j.id, clock.now()]);
      if (runs.length === 2) bothRan.resolve();
    });
    await queue.enqueue([job('late', { delayMs: 300 }), job('soon', { delayMs: 100 })]);
    await bothRan.promise;
    expect(runs).toEqual([
      ['soon', 100],
      ['late', 300],
    ]);
    expect(clock.sleeps).toEqual([100, 200]);
    await queue.close();
  });

  it('starts on jobs enqueued before the consumer, and drain waits for jobs in progress', async () => {
    const queue = createInProcessQueue({ mode: 'auto' });
    await queue.enqueue([job('a'), job('b')]);
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.drain();
    expect(handled.sort()).toEqual(['a', 'b']);
    await queue.close();
  });
});

describe('in-process queue, consumers', () => {
  it('refuses a second consumer while one is open, and accepts one after it closed', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const first = queue.consume(async () => undefined);
    expect(() => queue.consume(async () => undefined)).toThrow(/already has a consumer: close it before consuming again/);
    await first.close();
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([job('a')]);
    await queue.drain();
    expect(handled).toEqual(['a']);
  });

  it('fires the job signal on a forced close and delivers the job again', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const started = deferred();
    const consumer = queue.consume(async (_j, signal) => {
      started.resolve();
      await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
    });
    await queue.enqueue([job('a')]);
    const drained = queue.drain();
    await started.promise;
    await consumer.close({ force: true });
    expect(await drained).toBe(1);
    expect(queue.inspect()).toMatchObject([{ job: { id: 'a' }, attempts: 1, lastError: { code: 'consumer_closed' } }]);
  });

  it('lets a forced close abort the jobs a graceful close is waiting for', async () => {
    const queue = createInProcessQueue({ mode: 'auto' });
    const started = deferred();
    const consumer = queue.consume(async (_j, signal) => {
      started.resolve();
      await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
    });
    await queue.enqueue([job('stuck')]);
    await started.promise;
    const graceful = consumer.close();
    await consumer.close({ force: true });
    await graceful;
    expect(queue.inspect()).toMatchObject([{ job: { id: 'stuck' }, attempts: 1 }]);
  });

  it('waits for the job in progress on a graceful close', async () => {
    const queue = createInProcessQueue({ mode: 'auto' });
    const started = deferred();
    const gate = deferred();
    let finished = false;
    const consumer = queue.consume(async () => {
      started.resolve();
      await gate.promise;
      finished = true;
    });
    await queue.enqueue([job('a')]);
    await started.promise;
    const closed = consumer.close();
    gate.resolve();
    await closed;
    expect(finished).toBe(true);
  });

  it('refuses enqueue and consume after close', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    await queue.close();
    await expect(queue.enqueue([job('a')])).rejects.toMatchObject({ code: 'queue_closed' });
    expect(() => queue.consume(async () => undefined)).toThrow(/closed/);
  });

  it('refuses a job without an id', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    await expect(queue.enqueue([job('')])).rejects.toMatchObject({ code: 'queue_job_invalid' });
  });
});

/** A job for an actor of `kind`, with its id as the job id unless given. */
const to = (kind: string, actorId: string, extra: Partial<JobSpec> = {}): JobSpec => ({
  id: actorId,
  kind: 'advance',
  actor: { kind, id: actorId },
  ...extra,
});
/** Root execution, element executions of map `r.m`, the map, its rollback actors, a unit. */
const exec = (id: string, extra?: Partial<JobSpec>) => to('execution', id, extra);
const element = (index: number, extra?: Partial<JobSpec>) => to('execution', `r.m.${index}`, extra);
const map = (extra?: Partial<JobSpec>) => to('map', 'r.m', extra);
const rollback = (position: number, extra?: Partial<JobSpec>) => to('element-rollback', `r.m.rb-${position}`, extra);
const unit = (id: string, extra?: Partial<JobSpec>) => to('unit', id, extra);

describe('jobPurpose', () => {
  it('classifies every job shape by the actor it addresses', () => {
    const shapes: [string, JobSpec][] = [
      ['root execution', { id: 'order-7.handoff', kind: 'advance', actor: { kind: 'execution', id: 'order-7' }, event: { type: 'xreactor.execution.resume' } }],
      ['root execution whose id is all digits', exec('42')],
      ['composed child', exec('order-7.pay')],
      ['composed child of an all-digit root', exec('42.pay')],
      ['step names with digits and dashes', exec('order-7.step2.rb-2')],
      ['element', exec('order-7.lines.3')],
      ['element timer', exec('order-7.lines.3', { id: 'order-7.lines.3.timer.1.1', delayMs: 100, event: { type: 'xreactor.timer.fired', index: 1, attempt: 1 } })],
      ['element sweep redispatch', exec('order-7.lines.3', { id: 'order-7.lines.3.sweep.4.0' })],
      ['composed child inside an element', exec('order-7.lines.3.k')],
      ['element of a map inside a composed child', exec('order-7.child.m.0')],
      ['map', to('map', 'order-7.lines')],
      ['map wake', to('map', 'order-7.lines', { id: 'order-7.lines.wake.5' })],
      ['map inside an element', to('map', 'order-7.lines.3.inner')],
      ['element rollback', to('element-rollback', 'order-7.lines.rb-0')],
      ['async unit', to('unit', 'u-1')],
      ['sweep', { id: 'xreactor-sweeper.1.1', kind: 'sweep' }],
      ['actor of another kind', to('probe', 'order-7.lines.3')],
    ];
    expect(shapes.map(([shape, spec]) => [shape, jobPurpose(spec)])).toEqual([
      ['root execution', 'execution-advance'],
      ['root execution whose id is all digits', 'execution-advance'],
      ['composed child', 'execution-advance'],
      ['composed child of an all-digit root', 'execution-advance'],
      ['step names with digits and dashes', 'execution-advance'],
      ['element', 'map-element'],
      ['element timer', 'map-element'],
      ['element sweep redispatch', 'map-element'],
      ['composed child inside an element', 'map-element'],
      ['element of a map inside a composed child', 'map-element'],
      ['map', 'map-settle'],
      ['map wake', 'map-settle'],
      ['map inside an element', 'map-settle'],
      ['element rollback', 'element-rollback'],
      ['async unit', 'async-unit'],
      ['sweep', 'execution-advance'],
      ['actor of another kind', 'execution-advance'],
    ]);
  });

  it('lists the purposes in the order of a round', () => {
    expect(JOB_PURPOSES).toEqual(['execution-advance', 'map-element', 'map-settle', 'element-rollback', 'async-unit']);
  });
});

describe('in-process queue, purposes', () => {
  it('filters pending and inspected jobs by purpose, keeping the FIFO order', async () => {
    const queue = createInProcessQueue({ mode: 'manual', clock: createTestClock(0) });
    await queue.enqueue([element(1), exec('r'), map(), element(0), rollback(0), element(2, { id: 'r.m.2.timer', delayMs: 5 })]);
    expect(ids(queue.pending({ purpose: 'map-element' }))).toEqual(['r.m.1', 'r.m.0', 'r.m.2.timer']);
    expect(queue.inspect({ purpose: 'map-element', actorId: 'r.m.2' }).map((p) => [p.job.id, p.dueAt])).toEqual([['r.m.2.timer', 5]]);
    expect(ids(queue.pending({ purpose: 'map-settle' }))).toEqual(['r.m']);
    expect(queue.pending({ purpose: 'async-unit' })).toEqual([]);
  });

  it('leaves drain() in one FIFO, whatever the purposes', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([unit('u'), rollback(0), element(0), map(), exec('r')]);
    await queue.drain();
    expect(handled).toEqual(['u', 'r.m.rb-0', 'r.m.0', 'r.m', 'r']);
  });
});

describe('in-process queue, drainRounds', () => {
  it('empties each purpose in the order of a round', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([unit('u'), rollback(1), element(0), map(), exec('r'), rollback(0), element(1), exec('r.child')]);
    expect(await queue.drainRounds()).toEqual({ rounds: 1, jobs: 8 });
    expect(handled).toEqual(['r', 'r.child', 'r.m.0', 'r.m.1', 'r.m', 'r.m.rb-1', 'r.m.rb-0', 'u']);
  });

  it('runs a job enqueued during its purpose pass in that pass, and one of an earlier purpose in the next round', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'r.m.0') await queue.enqueue([element(2), exec('r', { id: 'r.wake' })]);
      if (j.id === 'r.m') await queue.enqueue([rollback(0), element(3)]);
      if (j.id === 'r.m.rb-0') await queue.enqueue([unit('u'), map({ id: 'r.m.wake' })]);
    });
    queue.consume(handler);
    await queue.enqueue([map(), element(1), element(0), exec('r')]);
    expect(await queue.drainRounds()).toEqual({ rounds: 2, jobs: 10 });
    expect(handled).toEqual([
      // round 1
      'r',
      'r.m.1',
      'r.m.0',
      'r.m.2',
      'r.m',
      'r.m.rb-0',
      'u',
      // round 2
      'r.wake',
      'r.m.3',
      'r.m.wake',
    ]);
  });

  it('takes the purposes in the given order', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([exec('r'), element(0), map(), rollback(0), unit('u')]);
    const order: JobPurpose[] = ['async-unit', 'element-rollback', 'map-settle', 'map-element', 'execution-advance'];
    await queue.drainRounds({ order });
    expect(handled).toEqual(['u', 'r.m.rb-0', 'r.m', 'r.m.0', 'r']);
  });

  it('runs only the named purposes and leaves the others pending', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'r.m') await queue.enqueue([element(0), element(1), map({ id: 'r.m.wake' })]);
    });
    queue.consume(handler);
    await queue.enqueue([exec('r'), map()]);
    expect(await queue.drainRounds({ only: ['map-settle'] })).toEqual({ rounds: 1, jobs: 2 });
    expect(handled).toEqual(['r.m', 'r.m.wake']);
    expect(ids(queue.pending())).toEqual(['r', 'r.m.0', 'r.m.1']);
  });

  it('delivers one purpose in reverse after a reorder of its pending jobs (S-map-04b)', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'r.m') await queue.enqueue([element(0), exec('r', { id: 'r.wake' }), element(1), element(2), element(3)]);
    });
    queue.consume(handler);
    await queue.enqueue([map()]);
    await queue.drainRounds({ only: ['map-settle'] });
    queue.reorder(queue.pending({ purpose: 'map-element' }).map((j) => j.id).reverse());
    expect(ids(queue.pending())).toEqual(['r.m.3', 'r.m.2', 'r.m.1', 'r.m.0', 'r.wake']);
    await queue.drainRounds();
    expect(handled).toEqual(['r.m', 'r.wake', 'r.m.3', 'r.m.2', 'r.m.1', 'r.m.0']);
  });

  it('puts a job whose handler threw at the back of its purpose FIFO, in the same pass', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    let failures = 0;
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'r.m.0' && failures++ === 0) throw new Error('transient');
    });
    queue.consume(handler);
    await queue.enqueue([element(0), element(1), map()]);
    expect(await queue.drainRounds()).toEqual({ rounds: 1, jobs: 4 });
    expect(handled).toEqual(['r.m.0', 'r.m.1', 'r.m.0', 'r.m']);
  });

  it("delayed: 'hold' leaves delayed jobs pending and never moves the clock", async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const { handled, handler } = recorder(async (j) => {
      if (j.id === 'r.m.0') await queue.enqueue([element(0, { id: 'r.m.0.timer', delayMs: 100 })]);
    });
    queue.consume(handler);
    await queue.enqueue([element(0), element(1)]);
    expect(await queue.drainRounds({ delayed: 'hold' })).toEqual({ rounds: 1, jobs: 2 });
    expect(handled).toEqual(['r.m.0', 'r.m.1']);
    expect(queue.inspect().map((p) => [p.job.id, p.dueAt])).toEqual([['r.m.0.timer', 100]]);
    expect(clock.sleeps).toEqual([]);

    clock.advance(100);
    await queue.enqueue([element(2)]);
    await queue.drainRounds();
    expect(handled).toEqual(['r.m.0', 'r.m.1', 'r.m.0.timer', 'r.m.2']);
  });

  it("delayed: 'as-due' puts a delayed job at the back of its FIFO when enqueued and moves the clock when it runs (S-map-09)", async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const runs: [string, number][] = [];
    queue.consume(async (j) => {
      runs.push([j.id, clock.now()]);
      if (j.id === 'r.m.0') await queue.enqueue([element(0, { id: 'r.m.0.timer', delayMs: 100 }), element(2)]);
      if (j.id === 'r.m.1') await queue.enqueue([element(1, { id: 'r.m.1.timer', delayMs: 100 }), exec('r', { id: 'r.wake', delayMs: 10 })]);
    });
    await queue.enqueue([element(0), exec('r', { id: 'r.later', delayMs: 500 }), element(1)]);
    expect(await queue.drainRounds({ delayed: 'as-due' })).toEqual({ rounds: 2, jobs: 7 });
    expect(runs).toEqual([
      ['r.later', 500],
      ['r.m.0', 500],
      ['r.m.1', 500],
      ['r.m.0.timer', 600],
      ['r.m.2', 600],
      ['r.m.1.timer', 600],
      ['r.wake', 600],
    ]);
    expect(clock.sleeps).toEqual([500, 100]);
  });

  it("delayed: 'as-due' gives back the jobs it did not run, not due until their time", async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const { handled, handler } = recorder();
    queue.consume(handler);
    await queue.enqueue([exec('r', { id: 'r.timer', delayMs: 100 }), element(0, { id: 'r.m.0.timer', delayMs: 50 })]);
    expect(await queue.drainRounds({ delayed: 'as-due', only: ['map-element'] })).toEqual({ rounds: 1, jobs: 1 });
    expect(handled).toEqual(['r.m.0.timer']);
    expect(queue.inspect().map((p) => [p.job.id, p.dueAt])).toEqual([['r.timer', 100]]);
    expect(await queue.runNext()).toBe(false);
    expect(() => queue.reorder(['r.timer'])).toThrow(/not due until 100 \(clock at 50\)/);
  });

  it("delayed: 'wait' moves the clock to the next due job of a purpose it runs when a round runs nothing", async () => {
    const clock = createTestClock(0);
    const queue = createInProcessQueue({ mode: 'manual', clock });
    const runs: [string, number][] = [];
    queue.consume(async (j) => {
      runs.push([j.id, clock.now()]);
      if (j.id === 'r.m.0.timer') await queue.enqueue([unit('u', { delayMs: 30 })]);
    });
    await queue.enqueue([rollback(0, { delayMs: 900 }), exec('r', { id: 'r.timer', delayMs: 250 }), element(0, { id: 'r.m.0.timer', delayMs: 100 }), element(1)]);
    expect(await queue.drainRounds({ delayed: 'wait', only: ['execution-advance', 'map-element', 'async-unit'] })).toEqual({ rounds: 4, jobs: 4 });
    expect(runs).toEqual([
      ['r.m.1', 0],
      ['r.m.0.timer', 100],
      ['u', 130],
      ['r.timer', 250],
    ]);
    expect(clock.sleeps).toEqual([100, 30, 120]);
    expect(ids(queue.pending())).toEqual(['r.m.rb-0']);
  });

  it('stops a drain past maxJobs and names the actor that loops', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    let n = 0;
    queue.consume(async () => {
      n += 1;
      await queue.enqueue([element(2, { id: `r.m.2.timer.${n}`, event: { type: 'xreactor.timer.fired' } })]);
    });
    await queue.enqueue([exec('r'), element(2)]);
    const error = await queue.drainRounds({ maxJobs: 30 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(XreactorError);
    expect(error).toMatchObject({ code: 'queue_drain_limit' });
    expect((error as Error).message).toMatch(
      /^drainRounds ran 30 jobs and jobs are still due; likely loop: execution "r\.m\.2" got 29 of the last 30 jobs, most often "xreactor\.timer\.fired" \(28 times\)\. .*pass drainRounds\(\{ maxJobs \}\)/,
    );
    expect(n).toBe(30);
  });

  it('refuses to run without a consumer and keeps the job pending', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    await queue.enqueue([exec('r'), element(0)]);
    await expect(queue.drainRounds({ only: ['map-element'] })).rejects.toMatchObject({ code: 'queue_no_consumer', message: /^drainRounds found due jobs/ });
    expect(ids(queue.pending())).toEqual(['r', 'r.m.0']);
    expect(await queue.drainRounds({ only: ['map-settle'] })).toEqual({ rounds: 0, jobs: 0 });
  });

  it('refuses bad options and queues not in manual mode', async () => {
    const queue = createInProcessQueue({ mode: 'manual' });
    const refusal = (options: Parameters<typeof queue.drainRounds>[0]) =>
      queue.drainRounds(options).then(
        () => 'drained',
        (e: unknown) => `${(e as XreactorError).code}: ${(e as Error).message}`,
      );
    expect(await refusal({ order: ['map-element', 'execution-advance', 'map-settle'] })).toBe(
      'queue_option_invalid: drainRounds order must name every purpose once; it leaves out "element-rollback", "async-unit": use `only` to run some purposes only',
    );
    expect(await refusal({ order: [...JOB_PURPOSES, 'map-element'] })).toBe('queue_option_invalid: drainRounds order names "map-element" twice');
    expect(await refusal({ only: ['map-elements' as JobPurpose] })).toBe(
      'queue_option_invalid: drainRounds only names an unknown purpose "map-elements"; purposes: execution-advance, map-element, map-settle, element-rollback, async-unit',
    );
    expect(await refusal({ only: [] })).toBe('queue_option_invalid: drainRounds only is empty, so the drain would run nothing: name at least one purpose');
    expect(await refusal({ delayed: 'later' as 'hold' })).toBe('queue_option_invalid: drainRounds delayed must be one of "as-due", "wait", "hold", got "later"');
    expect(await refusal({ maxJobs: 0 })).toBe('queue_option_invalid: maxJobs must be a positive integer, got 0');

    for (const mode of ['inline', 'auto'] as const) {
      const other = createInProcessQueue({ mode });
      await expect(other.drainRounds()).rejects.toMatchObject({
        code: 'queue_mode_invalid',
        message: `drainRounds drains a manual queue, and this queue's mode is "${mode}": create it with createInProcessQueue({ mode: 'manual' })`,
      });
    }
  });
});
