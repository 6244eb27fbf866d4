import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createRuntime, ExecutionNotFoundError } from '../../src/index.js';
import type { CancelledResult, DispatchedResult, Runtime, RunResult } from '../../src/index.js';
import { encodeJobId } from '../../src/queue/bullmq-queue.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import type { KernelInput, KernelTreeName } from './fixtures/kernel-reactors.js';
import { LEASE_TTL_MS, startKernelEnv, until } from '../support/kernel-env.js';
import type { Continuer, ContinueReply, KernelEnv } from '../support/kernel-env.js';
import type { WorkerProcess } from '../support/worker-process.js';

// The actor kernel across processes, on a real Redis and BullMQ: background trees composed to
// depth 2 (root → child → grandchild) advanced by two `xreactor worker` processes, a grandchild
// parked on a retry backoff (a delayed job wakes it), a child paused at an interrupt and continued
// from another process, trees rolled back at every depth; workers SIGKILLed at seeded random points
// (every tree must end exactly as its inline run does); a worker with the Stately inspector; bad
// jobs on the real queue. See test/orchestration/fixtures/kernel-reactors.ts for the trees.

const INSPECT_WORKER = fileURLToPath(new URL('./fixtures/kernel-inspect-worker.ts', import.meta.url));
const APPROVE = ['child', 'approve'] as const;
const ROUNDS = 24;
/** The chaos seed: KERNEL_CHAOS_SEED=<n> replays a run. */
const SEED = Number(process.env['KERNEL_CHAOS_SEED'] ?? Math.floor(Math.random() * 2 ** 31));

let env: KernelEnv;
let continuer: Continuer;
/** The reference: the same definitions run inline by the embedded runtime (memory store, in-process queue). */
let reference: Runtime;

beforeAll(async () => {
  env = await startKernelEnv();
  reference = createRuntime();
  const [c] = await Promise.all([env.startContinuer(), env.spawnWorker(), env.spawnWorker()]);
  continuer = c;
}, 60_000);

afterAll(async () => {
  await reference?.close();
  await env?.close();
});

// ---------------------------------------------------------------------------------------------
// Running a tree, here and inline, and what its end looks like.

type Ended = RunResult<unknown> | CancelledResult;

/** What must be equal between a run across processes and its inline reference. */
interface Summary {
  readonly status: string;
  readonly value?: unknown;
  readonly step?: string | undefined;
  readonly message?: string;
  readonly rollbackFailures?: readonly unknown[];
  /** The stored status of the root, the child and the grandchild. */
  readonly actors: readonly string[];
}

async function summarize(runtime: Runtime, id: string, result: Ended): Promise<Summary> {
  const statusOf = async (a: string): Promise<string> => {
    try {
      return (await runtime.find(a)).status;
    } catch (error) {
      if (error instanceof ExecutionNotFoundError) return 'missing';
      throw error;
    }
  };
  const actors = await Promise.all([id, `${id}.child`, `${id}.child.grand`].map(statusOf));
  switch (result.status) {
    case 'completed':
      return { status: result.status, value: result.value, actors };
    case 'failed':
      return {
        status: result.status,
        step: result.step,
        message: result.message,
        rollbackFailures: result.rollbackFailures.map((f) => ({ step: f.step, kind: f.kind, path: f.path, reason: f.reason, message: f.message })),
        actors,
      };
    default:
      return { status: result.status, actors };
  }
}

/** Start a tree across processes: the caller (this process) gets `dispatched`. */
async function startReal(tree: KernelTreeName, input: KernelInput): Promise<string> {
  const started = await env.runtime.run(env.fixtures.kernelTrees[tree], input);
  expect(started.status).toBe('dispatched');
  return started.executionId;
}

/**
 * Wait for a tree's end; when it pauses, continue it from the continuer process (once). With the
 * end, the continuer's answer: whether it applied the resume itself or left it to a worker.
 */
async function finishReal(id: string, payload: unknown, onPaused?: () => Promise<void>): Promise<{ result: Ended; reply?: ContinueReply }> {
  let reply: ContinueReply | undefined;
  for (;;) {
    const result = await env.runtime.awaitResult(id, { timeoutMs: 45_000 });
    if (result.status !== 'paused') return { result, ...(reply === undefined ? {} : { reply }) };
    if (reply !== undefined) {
      // Continued, and the signal is being applied: wait until the root moved on.
      await expect.poll(async () => (await env.runtime.find(id)).status, { timeout: 20_000, interval: 20 }).not.toBe('paused');
      continue;
    }
    expect(result.readyInterrupts, id).toEqual([[...APPROVE]]);
    await onPaused?.();
    reply = await continuer.continue(id, APPROVE, payload);
    expect(reply, `continue ${id}: ${JSON.stringify(reply)}`).toMatchObject({ ok: true });
  }
}

/** The inline run of the same tree: same definitions, input and payload, the embedded runtime. */
async function runReference(tree: KernelTreeName, input: KernelInput, payload: unknown): Promise<{ id: string; summary: Summary; effects: string[] }> {
  const id = `ref-${randomUUID()}`;
  let result: Awaited<ReturnType<Runtime['run']>> | Awaited<ReturnType<Runtime['continue']>> | Awaited<ReturnType<Runtime['awaitResult']>> = await reference.run(env.fixtures.kernelTrees[tree], input, { executionId: id });
  let continued = false;
  for (;;) {
    if (result.status === 'dispatched') result = await reference.awaitResult(id, { timeoutMs: 30_000 });
    else if (result.status === 'paused') {
      expect(continued, `reference ${id} paused twice`).toBe(false);
      continued = true;
      result = await reference.continue(id, { step: [...APPROVE], payload });
    } else break;
  }
  return { id, summary: await summarize(reference, id, result as Ended), effects: (await env.effects(id)).map((e) => e.label) };
}

function counts(labels: readonly string[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const label of labels) map.set(label, (map.get(label) ?? 0) + 1);
  return map;
}

/**
 * The effects of a run across processes against its reference: every body ran as often as inline,
 * except the one a kill cut off (`cutOff`), which may have run once more; in the same order once
 * that one extra run is taken out.
 */
function expectSameEffects(real: readonly string[], expected: readonly string[], cutOff: string | undefined, why: string): void {
  const got = counts(real);
  const want = counts(expected);
  for (const label of new Set([...got.keys(), ...want.keys()])) {
    const n = got.get(label) ?? 0;
    const m = want.get(label) ?? 0;
    if (label === cutOff) expect([m, m + 1], `${why}: ${label} (cut off by the kill) ran ${n} times, inline ${m}\nreal:     ${real.join(' ')}\nexpected: ${expected.join(' ')}`).toContain(n);
    else expect(n, `${why}: ${label} ran ${n} times, inline ${m}${label.startsWith('undo:') ? ' (an undo ran twice)' : ''}\nreal:     ${real.join(' ')}\nexpected: ${expected.join(' ')}`).toBe(m);
  }
  const trimmed = [...real];
  if (cutOff !== undefined && (got.get(cutOff) ?? 0) > (want.get(cutOff) ?? 0)) trimmed.splice(trimmed.indexOf(cutOff), 1);
  expect(trimmed, `${why}: order`).toEqual(expected);
}

const labels = async (id: string) => (await env.effects(id)).map((e) => e.label);
const rollbackOf = (effects: readonly string[]) => effects.filter((l) => !l.startsWith('run:'));

/** The value of a tree that completed (no `returns`: every step's result, the child's nested). */
function completedValue(gFail: number, by: string | undefined) {
  const child = by === undefined ? { c1: 'C1', grand: { g1: 'G1', g2: `G2#${gFail + 1}` }, c2: 'C2' } : { c1: 'C1', grand: { g1: 'G1', g2: `G2#${gFail + 1}` }, approve: { by }, c2: `C2 by ${by}` };
  return { r1: 'R1', child, r2: 'R2' };
}

/** A tree's bodies in the order they run, for the plan given (what the reference must also record). */
function expectedEffects(input: { gFail: number; failAt?: 'r2' }): string[] {
  const g2 = Array.from({ length: Math.min(input.gFail + 1, 3) }, (_, i) => `run:child.grand/g2#${i + 1}`);
  const head = ['run:/r1#1', 'run:child/c1#1', 'run:child.grand/g1#1', ...g2];
  if (input.gFail >= 3) return [...head, 'compensate:child.grand/g2#1', 'undo:child.grand/g1#1', 'undo:child/c1#1', 'undo:/r1#1'];
  const ran = [...head, 'run:child/c2#1', 'run:/r2#1'];
  if (input.failAt !== 'r2') return ran;
  return [...ran, 'compensate:/r2#1', 'undo:child/c2#1', 'undo:child.grand/g2#1', 'undo:child.grand/g1#1', 'undo:child/c1#1', 'undo:/r1#1'];
}

// ---------------------------------------------------------------------------------------------

describe('actor kernel across processes: depth-2 background trees', () => {
  it('two workers advance them; the grandchild parks on its retry backoff (a delayed job wakes it), the child pauses and is continued from another process, trees roll back at every depth', async () => {
    const plans: { tree: KernelTreeName; input: KernelInput; by: string }[] = [
      { tree: 'kernelPlainAll', input: { gFail: 2 }, by: 'ann' },
      { tree: 'kernelPausingAll', input: { gFail: 1 }, by: 'bob' },
      { tree: 'kernelPlainAfter', input: { gFail: 1, failAt: 'r2' }, by: 'cy' },
      { tree: 'kernelPausingAfter', input: { gFail: 2, failAt: 'r2' }, by: 'dee' },
    ];
    const references = Promise.all(plans.map((p) => runReference(p.tree, p.input, { by: p.by })));
    const ids = await Promise.all(plans.map((p) => startReal(p.tree, p.input)));

    // The first tree's grandchild, parked on g2's backoff: it waits for time (a delayed job on
    // the queue), its parent awaits it, and the root awaits its child; none holds a worker.
    const [watched] = ids as [string];
    const parked = async () => {
      const [root, child, grand] = await Promise.all([watched, `${watched}.child`, `${watched}.child.grand`].map((a) => env.runtime.find(a).catch(() => undefined)));
      const delayed = (await env.queue.bullQueue.getDelayed()).filter((j) => j.data.actor === `execution:${watched}.child.grand`).map((j) => j.id);
      return { root: root?.waiting, child: child?.waiting, grand: grand?.waiting, status: grand?.status, leased: await env.store.hasLease(`${watched}.child.grand`), delayed: delayed.length > 0 };
    };
    await expect
      .poll(parked, { timeout: 20_000, interval: 5 })
      .toEqual({
        root: { on: 'actors', step: 'child', actors: [`${watched}.child`] },
        child: { on: 'actors', step: 'grand', actors: [`${watched}.child.grand`] },
        grand: { on: 'time', step: 'g2' },
        status: 'running',
        leased: false,
        delayed: true,
      });

    const pids = new Set([...env.workers].map((w) => w.pid));
    const ended = await Promise.all(
      ids.map((id, i) =>
        finishReal(id, { by: plans[i]!.by }, async () => {
          // Paused: the child at its interrupt, the root on its child.
          expect((await env.runtime.find(`${id}.child`)).status).toBe('paused');
          expect((await env.runtime.find(`${id}.child.grand`)).status).toBe('completed');
          // The worker that paused them lets go of their leases as its job ends, a moment after
          // the root's pause is stored: a continue before that is left to that worker (`run_busy`),
          // and what follows the interrupt would run there. Continue once they are free.
          await expect.poll(async () => (await Promise.all([id, `${id}.child`].map((a) => env.store.hasLease(a)))).some(Boolean), { timeout: 10_000, interval: 5 }).toBe(false);
        }),
      ),
    );
    const refs = await references;
    for (const [i, plan] of plans.entries()) {
      const id = ids[i]!;
      const why = `${plan.tree} ${JSON.stringify(plan.input)} (${id})`;
      const pausing = plan.tree.startsWith('kernelPausing');
      const summary = await summarize(env.runtime, id, ended[i]!.result);
      expect(summary, why).toEqual(refs[i]!.summary);
      if (plan.input.failAt === 'r2') {
        expect(summary, why).toMatchObject({ status: 'failed', step: 'r2', message: 'r2 failed', rollbackFailures: [], actors: ['failed', 'cancelled', 'cancelled'] });
      } else {
        expect(summary, why).toEqual({ status: 'completed', value: completedValue(plan.input.gFail!, pausing ? plan.by : undefined), actors: ['completed', 'completed', 'completed'] });
      }
      const effects = await env.effects(id);
      expect(effects.map((e) => e.label), why).toEqual(expectedEffects({ gFail: plan.input.gFail!, ...(plan.input.failAt ? { failAt: plan.input.failAt } : {}) }));
      expectSameEffects(
        effects.map((e) => e.label),
        refs[i]!.effects,
        undefined,
        why,
      );
      // Who ran what: the caller only r1 of an `after: r1` tree; the workers everything else but
      // what follows the interrupt, which the continuer ran when it applied the resume itself (it
      // answered the tree's end). When it answered `dispatched` (`run_busy`: a worker held a lease
      // of the tree at that moment, e.g. for a duplicate job that found nothing to do), the
      // process that held it went on with the resume: a worker, or the continuer for the child's
      // part when only the root's signal was left to a worker.
      const appliedHere = ended[i]!.reply?.status !== 'dispatched';
      if (pausing && !appliedHere) {
        expect(ended[i]!.reply, why).toMatchObject({ status: 'dispatched', reason: 'run_busy' });
        console.log(`[kernel] ${why}: the continue was left to a worker (run_busy)`);
      }
      for (const { label, pid } of effects) {
        const afterInterrupt = pausing && !/^run:(\/r1|child\/c1|child\.grand\/)/.test(label);
        const where = label === 'run:/r1#1' && plan.tree.endsWith('After') ? process.pid : afterInterrupt ? (appliedHere ? continuer.process.pid : 'continuer or worker') : 'worker';
        if (where === 'worker') expect(pids.has(pid), `${why}: ${label} ran in ${pid}, not a worker (${[...pids].join(', ')})`).toBe(true);
        else if (where === 'continuer or worker') expect(pids.has(pid) || pid === continuer.process.pid, `${why}: ${label} ran in ${pid}, neither the continuer (${continuer.process.pid}) nor a worker (${[...pids].join(', ')})`).toBe(true);
        else expect(pid, `${why}: ${label}`).toBe(where);
      }
      // The grandchild's trace: each failed attempt a retry, each backoff parked.
      const trace = (await env.runtime.find(`${id}.child.grand`)).trace;
      const gFail = plan.input.gFail!;
      expect(trace.filter((t) => t.type === 'retry').map((t) => [t.step, t.attempt]), why).toEqual(Array.from({ length: gFail }, (_, k) => ['g2', k + 1]));
      expect(trace.filter((t) => t.type === 'retry').map((t) => t.delayMs), why).toEqual(Array.from({ length: gFail }, () => env.fixtures.G2_BACKOFF_MS));
      expect((await env.runtime.find(`${id}.child`)).trace.some((t) => t.type === 'awaiting' && t.step === 'grand'), why).toBe(true);
    }
    // The backoff of the watched tree's grandchild was a delayed job that completed.
    const timer = await env.queue.bullQueue.getJob(encodeJobId(`${watched}.child.grand.timer.1.1`));
    expect(timer?.opts.delay, 'the retry timer of g2 attempt 1').toBeGreaterThan(0);
  }, 60_000);
});

describe('a continuer that dies', () => {
  it('killed inside the step after the interrupt it resumed: a worker\'s sweep finishes the tree, as inline', async () => {
    const input: KernelInput = { gFail: 1, slow: 'run:child/c2', slowMs: 1_000 };
    const payload = { by: 'fay' };
    const expected = runReference('kernelPausingAll', input, payload);
    const dying = continuer;
    // A tree whose resume the continuer took up itself: c2 runs there. Should a worker hold one of
    // the tree's leases at the continue (a duplicate job finding nothing to do), the continue is
    // left to it (dispatched, run_busy) and c2 runs in the worker: that tree ends there, and the
    // test takes another (the continue's own answer says which happened).
    const started = async (attempt: number): Promise<{ id: string; answer: Promise<ContinueReply> }> => {
      const id = await startReal('kernelPausingAll', input);
      expect(await env.runtime.awaitResult(id, { timeoutMs: 20_000 })).toMatchObject({ status: 'paused' });
      // The pause is visible as soon as its commit lands; the worker that paused the tree lets go
      // of the leases a moment later: continue once no lease is held.
      await expect.poll(async () => (await env.store.hasLease(id)) || (await env.store.hasLease(`${id}.child`)), { timeout: 10_000, interval: 10 }).toBe(false);
      const answer = dying.continue(id, APPROVE, payload);
      answer.catch(() => undefined);
      await expect.poll(async () => (await labels(id)).includes('run:child/c2#1'), { timeout: 15_000, interval: 5 }).toBe(true);
      const c2 = (await env.effects(id)).find((e) => e.label === 'run:child/c2#1')!;
      if (c2.pid === dying.process.pid) return { id, answer };
      expect(await answer, `${id}: c2 ran in ${c2.pid}, not the continuer`).toMatchObject({ ok: true, status: 'dispatched', reason: 'run_busy' });
      expect(await env.runtime.awaitResult(id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed' });
      console.log(`[kernel] attempt ${attempt}: the continue of ${id} was left to a worker (run_busy); another tree`);
      expect(attempt, 'three continues in a row left to a worker').toBeLessThan(3);
      return started(attempt + 1);
    };
    const { id, answer } = await started(1);
    dying.process.child.kill('SIGKILL');
    await dying.process.exited;
    await expect(answer).rejects.toThrow(/gave no answer/);
    const replacement = env.startContinuer();
    // The root may still be stored paused, the child's child.resumed in its inbox (the continuer
    // died before the root applied it): the sweep applies it. Wait until the root moved on.
    await expect.poll(async () => (await env.runtime.find(id)).status, { timeout: 20_000, interval: 20 }).not.toBe('paused');
    const ended = await env.runtime.awaitResult(id, { timeoutMs: 30_000 });
    continuer = await replacement;
    const ref = await expected;
    expect(await summarize(env.runtime, id, ended as Ended)).toEqual(ref.summary);
    expect(ref.summary).toMatchObject({ status: 'completed', value: completedValue(1, 'fay') });
    const effects = await env.effects(id);
    expectSameEffects(effects.map((e) => e.label), ref.effects, 'run:child/c2#1', id);
    // c2 ran again in a worker (the sweeper found the child running with no live lease), and r2 after it.
    const workers = new Set([...env.workers].map((w) => w.pid));
    expect(effects.filter((e) => e.label === 'run:child/c2#1').map((e) => (e.pid === dying.process.pid ? 'continuer' : workers.has(e.pid) ? 'worker' : e.pid))).toEqual(['continuer', 'worker']);
    expect(workers.has(effects.find((e) => e.label === 'run:/r2#1')!.pid)).toBe(true);
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------

describe('bad jobs on the real BullMQ queue', () => {
  it('a malformed job fails after one attempt, naming what is wrong', async () => {
    const bull = env.queue.bullQueue;
    const tag = randomUUID().slice(0, 8);
    // No actor, through the adapter; an empty actor id, through the adapter; an actor that does
    // not exist; data that is no xreactor spec, added raw.
    await env.queue.enqueue([{ id: `bad-noactor-${tag}`, kind: 'advance' }]);
    await env.queue.enqueue([{ id: `bad-emptyid-${tag}`, kind: 'advance', actor: { kind: 'execution', id: '' } }]);
    await env.queue.enqueue([{ id: `bad-missing-${tag}`, kind: 'advance', actor: { kind: 'execution', id: `ghost-${tag}` } }]);
    await bull.add('advance', { hello: 'world' } as never, { jobId: `bad-raw-${tag}` });
    for (const [id, reason] of [
      [`bad-noactor-${tag}`, /does not hold an xreactor job spec \(not a job spec\)/],
      [`bad-emptyid-${tag}`, new RegExp(`job "bad-emptyid-${tag}" is malformed: kind "advance", actor \\{"kind":"execution","id":""\\}; an advance job names its actor as \\{ kind, id \\}`)],
      [`bad-missing-${tag}`, new RegExp(`execution ghost-${tag} does not exist`)],
      [`bad-raw-${tag}`, /does not hold an xreactor job spec/],
    ] as const) {
      await expect.poll(() => jobState(id), { timeout: 15_000, interval: 20 }).toMatchObject({ state: 'failed' });
      const failed = await jobState(id);
      expect(failed.attemptsMade, id).toBe(1);
      expect(failed.failedReason, id).toMatch(reason);
    }
    // The workers go on: a tree started now completes.
    const id = await startReal('kernelPlainAll', {});
    expect(await env.runtime.awaitResult(id, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
  });

  it('a job for an unknown actor kind is retried (actor_kind_unknown), and the actor it names is left untouched and listed', async () => {
    // A root awaiting its child while the grandchild is inside a slow g1: listed, and nothing commits on the root meanwhile.
    const id = await startReal('kernelPlainAll', { slow: 'run:child.grand/g1', slowMs: 3_000 });
    await expect.poll(() => labels(id), { timeout: 15_000, interval: 10 }).toContain('run:child.grand/g1#1');
    const before = await env.runtime.find(id);
    expect(before.waiting).toEqual({ on: 'actors', step: 'child', actors: [`${id}.child`] });
    expect(await allActive()).toContain(id);

    // Enqueued with 4 attempts, so it ends (failed) once the adapter has retried it three times.
    const jobs = createBullmqQueue({ connection: env.redis, queueName: env.queueName, maxAttempts: 4 });
    const jobId = `future-map-${randomUUID().slice(0, 8)}`;
    try {
      await jobs.enqueue([{ id: jobId, kind: 'advance', actor: { kind: 'map', id } }]);
      await expect.poll(() => jobState(jobId), { timeout: 15_000, interval: 20 }).toMatchObject({ state: 'failed', attemptsMade: 4 });
    } finally {
      await jobs.close();
    }
    const retried = await jobState(jobId);
    expect(retried.failedReason).toMatch(new RegExp(`this worker knows actor kinds execution, not "map" \\(job ${jobId}, actor ${id}\\); the job is retried`));
    expect([...env.workers].some((w) => w.output().includes('"event":"xreactor.actor.kind_unknown"')), 'a worker logged xreactor.actor.kind_unknown').toBe(true);
    // Still inside g1: the actor it named is as it was, and listed.
    expect(await labels(id)).toEqual(['run:/r1#1', 'run:child/c1#1', 'run:child.grand/g1#1']);
    const after = await env.runtime.find(id);
    expect({ revision: after.revision, status: after.status, waiting: after.waiting, trace: after.trace }).toEqual({ revision: before.revision, status: before.status, waiting: before.waiting, trace: before.trace });
    expect(await allActive()).toContain(id);
    expect(await env.runtime.awaitResult(id, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
  });

  it('a job for an actor whose snapshot is truncated fails after one attempt; the actor is failed in the store with its bytes kept, and its parent is signalled', async () => {
    const id = await startReal('kernelPlainAll', {});
    expect(await env.runtime.awaitResult(id, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
    const grand = `${id}.child.grand`;
    const keys = createKeyBuilder(env.prefix).executionKeys(grand);
    const bytes = (await env.redis.hgetBuffer(keys.execution, EXECUTION_FIELDS.snapshot))!;
    const cut = bytes.subarray(0, bytes.length - 3);
    await env.redis.hset(keys.execution, EXECUTION_FIELDS.snapshot, cut);

    const jobId = `poke-${randomUUID().slice(0, 8)}`;
    await env.queue.enqueue([{ id: jobId, kind: 'advance', actor: { kind: 'execution', id: grand } }]);
    await expect.poll(() => jobState(jobId), { timeout: 15_000, interval: 20 }).toMatchObject({ state: 'failed', attemptsMade: 1 });
    expect((await jobState(jobId)).failedReason).toMatch(new RegExp(`execution ${grand.replace(/\./g, '\\.')} cannot be advanced: stored snapshot could not be decoded: stored value ends in the middle`));
    expect([...env.workers].some((w) => w.output().includes('"event":"xreactor.execution.unreadable"')), 'a worker logged xreactor.execution.unreadable').toBe(true);
    // Failed in the store, the error recorded beside the bytes, which are kept; no longer listed.
    const stored = await env.redis.hgetallBuffer(keys.execution);
    expect(stored[EXECUTION_FIELDS.status]?.toString()).toBe('failed');
    expect(stored[EXECUTION_FIELDS.snapshot]).toEqual(cut);
    expect(await env.store.readUnreadable(grand)).toMatchObject({ code: 'deserialization_failed', message: expect.stringMatching(/ends in the middle/) as string });
    expect(await env.runtime.find(grand)).toMatchObject({ status: 'failed', result: { status: 'failed', message: expect.stringMatching(/ends in the middle/) as string } });
    expect(await allActive()).not.toContain(grand);
    // Its parent was told it failed (the signal's dedupe key is recorded); the completed tree stays completed.
    expect(await env.redis.hexists(createKeyBuilder(env.prefix).executionKeys(`${id}.child`).dedupe, `${grand}.unreadable`)).toBe(1);
    expect((await env.runtime.find(id)).status).toBe('completed');
    // The workers go on: a tree started now completes.
    const next = await startReal('kernelPlainAll', {});
    expect(await env.runtime.awaitResult(next, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
  });
});

async function jobState(id: string): Promise<{ state: string; attemptsMade: number | undefined; failedReason: string | undefined }> {
  const bull = env.queue.bullQueue;
  const job = await bull.getJob(encodeJobId(id));
  return { state: await bull.getJobState(encodeJobId(id)), attemptsMade: job?.attemptsMade, failedReason: job?.failedReason };
}

async function allActive(): Promise<string[]> {
  const ids: string[] = [];
  let after: string | undefined;
  do {
    const page = await env.store.listActive(500, after);
    ids.push(...page.ids);
    after = page.next;
  } while (after !== undefined);
  return ids;
}

// ---------------------------------------------------------------------------------------------

type ActorEvent = Extract<StatelyInspectionEvent, { type: '@xstate.actor' }>;
type EventEvent = Extract<StatelyInspectionEvent, { type: '@xstate.event' }>;
type WireSnapshot = { readonly status: string; readonly value: unknown };
const snapshotOf = (e: StatelyInspectionEvent) => (e as unknown as { snapshot: WireSnapshot }).snapshot;

describe('the Stately inspector in a worker process', () => {
  // Its own store prefix and queue: no other worker (or sweeper) advances these trees, so every
  // actor of them is advanced in the inspecting worker.
  const inspectList = `inspect:${randomUUID()}`;
  let completedRoot: string;
  let rolledBackRoot: string;
  let inspectorPid: number;
  let sent: StatelyInspectionEvent[];

  beforeAll(async () => {
    const prefix = `${env.prefix}i`;
    const queueName = `${env.queueName}-inspect`;
    const worker = await env.startFixture(INSPECT_WORKER, { prefix, queueName, inspectList }, 'xreactor.worker.started');
    inspectorPid = worker.pid;
    const store = createRedisStore({ redis: env.redis, prefix });
    const queue = createBullmqQueue({ connection: env.redis, queueName });
    const caller = createRuntime({ store, queue, worker: false, leaseTtlMs: LEASE_TTL_MS, reactors: env.reactors, logger: pino({ level: 'silent' }) });
    try {
      const ok = (await caller.run(env.fixtures.kernelPlainAll, { gFail: 1 })) as DispatchedResult;
      const rolled = (await caller.run(env.fixtures.kernelPlainAll, { gFail: 0, failAt: 'r2' })) as DispatchedResult;
      [completedRoot, rolledBackRoot] = [ok.executionId, rolled.executionId];
      expect(await caller.awaitResult(completedRoot, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
      expect(await caller.awaitResult(rolledBackRoot, { timeoutMs: 20_000 })).toMatchObject({ status: 'failed', step: 'r2' });
      // The inspector converts events on a timer and the adapter writes them to Redis: wait for
      // each root's last snapshot (its end) to be written, then stop the worker (SIGTERM).
      const read = async () => (await env.redis.lrange(inspectList, 0, -1)).map((e) => JSON.parse(e) as StatelyInspectionEvent);
      for (const [root, end] of [[completedRoot, 'completed'], [rolledBackRoot, 'failed']] as const) {
        const ended = (e: StatelyInspectionEvent) => e.type === '@xstate.snapshot' && e.sessionId === `xr:${root}` && snapshotOf(e).value === end && snapshotOf(e).status !== 'active';
        await until(`the inspector's last snapshot of ${root}`, async () => (await read()).some(ended), 10_000);
      }
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      sent = await read();
    } finally {
      worker.child.kill('SIGKILL');
      await caller.close();
      await queue.close();
      await store.close();
    }
  }, 60_000);

  const session = (id: string) => `xr:${id}`;
  const ofTree = (root: string) => sent.filter((e) => e.rootId === session(root));
  const applied = (root: string, id: string) =>
    ofTree(root)
      .filter((e): e is EventEvent => e.type === '@xstate.event' && e.sessionId === session(id))
      .map((e) => `${e.event.type}${e.sourceId === undefined ? '' : ` <- ${e.sourceId}`}`);
  const snapshots = (root: string, id: string) => ofTree(root).filter((e) => e.type === '@xstate.snapshot' && e.sessionId === session(id)).map(snapshotOf);
  const values = (root: string, id: string) => snapshots(root, id).map((s) => JSON.stringify(s.value));

  it('shows the root, <root>.child under it and <root>.child.grand under that, each created with its parent, all advanced in that worker', async () => {
    for (const root of [completedRoot, rolledBackRoot]) {
      const child = `${root}.child`;
      const grand = `${child}.grand`;
      const actors = ofTree(root).filter((e): e is ActorEvent => e.type === '@xstate.actor');
      // The first appearance of each (its creation here: the root loaded from its hand-off job,
      // each child spawned by its parent's commit) names its parent.
      const first = new Map<string, ActorEvent>();
      for (const a of actors) if (!first.has(a.sessionId)) first.set(a.sessionId, a);
      expect([...first.values()].map((a) => [a.sessionId, a.parentId, a.rootId]), root).toEqual([
        [session(root), undefined, session(root)],
        [session(child), session(root), session(root)],
        [session(grand), session(child), session(root)],
      ]);
      for (const a of first.values()) expect((JSON.parse(a.definition!) as { states: Record<string, unknown> }).states, a.sessionId).toHaveProperty('rolling_back');
      // The created child's init comes from its parent; the ends reach each parent from its child.
      expect(applied(root, child)[0]).toBe(`xstate.init <- ${session(root)}`);
      expect(applied(root, grand)[0]).toBe(`xstate.init <- ${session(child)}`);
      expect(applied(root, root)).toContain(`xreactor.child.settled <- ${session(child)}`);
      expect(applied(root, child)).toContain(`xreactor.child.settled <- ${session(grand)}`);
      expect(applied(root, root)).toContain('xreactor.compose.spawn');
      expect(applied(root, child)).toContain('xreactor.compose.spawn');
      expect(values(root, root).slice(0, 2)).toEqual([JSON.stringify({ running: 'handedOff' }), JSON.stringify({ running: 'executing' })]);
      expect(values(root, root)).toContain(JSON.stringify({ running: 'awaiting' }));
      expect(values(root, child)).toContain(JSON.stringify({ running: 'awaiting' }));
      // Every body of these trees ran in the inspecting worker.
      expect(new Set((await env.effects(root)).map((e) => e.pid)), root).toEqual(new Set([inspectorPid]));
    }
  });

  it('shows the grandchild parked on its retry backoff and woken by the delayed job, and each actor\'s end', () => {
    const root = completedRoot;
    const grand = `${root}.child.grand`;
    expect(applied(root, grand)).toEqual(expect.arrayContaining(['xreactor.step.failed', 'xreactor.timer.fired']));
    expect(values(root, grand)).toContain(JSON.stringify({ running: 'parked' }));
    expect(applied(root, grand).indexOf('xreactor.timer.fired')).toBeGreaterThan(applied(root, grand).indexOf('xreactor.step.failed'));
    // A completed run is not final (it can still be undone): it ends here as stopped.
    for (const id of [root, `${root}.child`, grand]) expect(snapshots(root, id).at(-1), id).toMatchObject({ status: 'stopped', value: 'completed' });
  });

  it('shows the rollback at every depth: the root undoing its child, the child its grandchild, each ending cancelled, the root failed', () => {
    const root = rolledBackRoot;
    const child = `${root}.child`;
    const grand = `${child}.grand`;
    expect(values(root, root)).toEqual(expect.arrayContaining([JSON.stringify({ rolling_back: 'compensating' }), JSON.stringify({ rolling_back: 'undoingChild' })]));
    expect(values(root, child)).toContain(JSON.stringify({ rolling_back: 'undoingChild' }));
    // The child and the grandchild each receive one undo signal (its sender: see the next test).
    expect(applied(root, child).filter((e) => e.startsWith('xreactor.operator.undo'))).toHaveLength(1);
    expect(applied(root, grand).filter((e) => e.startsWith('xreactor.operator.undo'))).toHaveLength(1);
    expect(snapshots(root, root).at(-1)).toMatchObject({ status: 'done', value: 'failed' });
    expect(snapshots(root, child).at(-1)).toMatchObject({ status: 'done', value: 'cancelled' });
    expect(snapshots(root, grand).at(-1)).toMatchObject({ status: 'done', value: 'cancelled' });
  });

  it('names the parent as the sender of its undo signal to its child (docs/inspector.md: sourceRef is the sending actor for a signal between actors)', () => {
    const root = rolledBackRoot;
    const child = `${root}.child`;
    const grand = `${child}.grand`;
    // The root's commit in rolling_back.undoingEntry signals its child xreactor.operator.undo
    // (machines/execution.ts, undo.child), and the child's signals its grandchild the same way.
    expect(applied(root, child).filter((e) => e.startsWith('xreactor.operator.undo'))).toEqual([`xreactor.operator.undo <- ${session(root)}`]);
    expect(applied(root, grand).filter((e) => e.startsWith('xreactor.operator.undo'))).toEqual([`xreactor.operator.undo <- ${session(child)}`]);
  });
});

// ---------------------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface TreePlan {
  readonly tree: KernelTreeName;
  readonly input: { gFail: number; failAt?: 'r2'; slow?: string; slowMs?: number };
  readonly by: string;
}

/** The bodies of a tree that run in a worker (not in the caller, not in the continuer), for its plan. */
function workerBodies(plan: TreePlan): string[] {
  const pausing = plan.tree.startsWith('kernelPausing');
  const all = expectedEffects(plan.input).map((l) => l.slice(0, l.indexOf('#')));
  return [...new Set(all)].filter((label) => {
    if (label === 'run:/r1' && plan.tree.endsWith('After')) return false;
    if (pausing && plan.input.gFail < 3 && !/^run:(\/r1|child\/c1|child\.grand\/)/.test(label)) return false;
    return true;
  });
}

/**
 * How a round kills: a random worker after a random delay from the start; or the worker running a
 * slow body once it started (a step's run, or a compensate / undo of a tree rolling back in workers).
 */
type KillPlan = { readonly mode: 'delay'; readonly delayMs: number; readonly victim: number } | { readonly mode: 'inside'; readonly tree: number; readonly body: string };

const ROLLBACK = /^(undo|compensate):/;

function planRound(random: () => number, round: number): { trees: TreePlan[]; kill: KillPlan } {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const mode = pick(['delay', 'run', 'rollback'] as const);
  const target = Math.floor(random() * 2);
  const trees = [0, 1].map((k): TreePlan => {
    const rollsBackInWorkers = mode === 'rollback' && k === target;
    // A tree that rolls back in workers: no interrupt and r2 failing, or g2 exhausted (the child fails before its interrupt).
    const tree = rollsBackInWorkers ? pick(['kernelPlainAll', 'kernelPlainAfter', 'kernelPausingAll'] as const) : pick(['kernelPlainAll', 'kernelPlainAfter', 'kernelPausingAll', 'kernelPausingAfter'] as const);
    const gFail = rollsBackInWorkers && tree === 'kernelPausingAll' ? 3 : pick([0, 1, 1, 2, 3]);
    const failAt = rollsBackInWorkers ? pick([undefined, 'r2', 'r2'] as const) : pick([undefined, undefined, 'r2'] as const);
    const plan: TreePlan = { tree, input: { gFail: rollsBackInWorkers && failAt === undefined ? 3 : gFail, ...(failAt === undefined ? {} : { failAt }) }, by: `op-${round}-${k}` };
    const bodies = workerBodies(plan).filter((b) => (rollsBackInWorkers ? ROLLBACK.test(b) : mode !== 'run' || k !== target || !ROLLBACK.test(b)));
    return { ...plan, input: { ...plan.input, slow: pick(bodies), slowMs: 300 } };
  });
  if (mode === 'delay') return { trees, kill: { mode, delayMs: Math.floor(random() * 1_500), victim: Math.floor(random() * 2) } };
  return { trees, kill: { mode: 'inside', tree: target, body: trees[target]!.input.slow! } };
}

describe('chaos: workers SIGKILLed at seeded random points', () => {
  it(`every tree ends exactly as its inline run does (x${ROUNDS}, seed ${SEED}; KERNEL_CHAOS_SEED=${SEED} replays)`, async () => {
    const random = prng(SEED);
    let kills = 0;
    let reruns = 0;
    for (let round = 0; round < ROUNDS; round += 1) {
      const began = Date.now();
      const { trees, kill } = planRound(random, round);
      const why = `seed ${SEED} round ${round}: ${JSON.stringify({ trees, kill })}`;
      console.log(`[kernel chaos] ${why}`);
      const references = Promise.all(trees.map((t) => runReference(t.tree, t.input, { by: t.by })));
      const ids = await Promise.all(trees.map((t) => startReal(t.tree, t.input)));
      const finishing = ids.map((id, i) => finishReal(id, { by: trees[i]!.by }));
      for (const p of finishing) p.catch(() => undefined);

      // Kill a worker: after a delay, or inside the slow body once it started.
      let victim: WorkerProcess | undefined;
      if (kill.mode === 'delay') {
        await new Promise((resolve) => setTimeout(resolve, kill.delayMs));
        victim = [...env.workers].sort((a, b) => a.pid - b.pid)[kill.victim % env.workers.size];
      } else {
        const id = ids[kill.tree]!;
        await expect.poll(async () => (await labels(id)).some((l) => l.startsWith(`${kill.body}#`)), { timeout: 20_000, interval: 5, message: `${why}: ${kill.body} never ran` }).toBe(true);
        const ran = (await env.effects(id)).find((e) => e.label.startsWith(`${kill.body}#`))!;
        victim = [...env.workers].find((w) => w.pid === ran.pid);
        expect(victim, `${why}: ${kill.body} ran in ${ran.pid}, not a live worker`).toBeDefined();
      }
      victim!.child.kill('SIGKILL');
      await victim!.exited;
      // What the kill may have cut off, tree by tree: the body recorded last in the tree, when the
      // victim ran it. A tree runs one body at a time, so an earlier body of the victim's in it had
      // committed; but at its concurrency the victim can be inside a body of each tree at once.
      const cuts = (await Promise.all(ids.map((id) => env.effects(id)))).map((effects) => {
        const last = effects.at(-1);
        return last !== undefined && last.pid === victim!.pid ? last.label : undefined;
      });
      kills += 1;
      const replacement = env.spawnWorker();
      replacement.catch(() => undefined);

      const ended = await Promise.all(finishing);
      const refs = await references;
      let reran = false;
      for (const [i, t] of trees.entries()) {
        const id = ids[i]!;
        const cut = cuts[i];
        // Who ran each body, and any lease a worker lost: what tells a doubled body's cause.
        const effects = await env.effects(id);
        const ranBy = effects.map((e) => `${e.label}@${e.pid}`).join(' ');
        const leases = [victim!, ...env.workers].flatMap((w) => w.output().split('\n').filter((l) => l.includes('xreactor.lease.')).map((l) => `${w.pid}: ${l}`));
        const what = `${why}\ntree ${i} ${id}, victim ${victim!.pid}, cut off in this tree: ${cut ?? 'nothing'}\nran by: ${ranBy}\nleases: ${leases.length === 0 ? 'none lost' : leases.join('\n')}\nvictim log:\n${victim!.output().split('\n').slice(-8).join('\n')}`;
        expect(await summarize(env.runtime, id, ended[i]!.result), what).toEqual(refs[i]!.summary);
        const real = effects.map((e) => e.label);
        expectSameEffects(real, refs[i]!.effects, cut, what);
        const again = cut !== undefined && counts(real).get(cut)! > counts(refs[i]!.effects).get(cut)!;
        if (again) reran = true;
        // Killed inside the slow body: that body was cut off, so it ran again.
        if (kill.mode === 'inside' && i === kill.tree) {
          expect(cut?.replace(/#\d+$/, ''), what).toBe(kill.body);
          expect(again, `${what}: the body cut off did not run again`).toBe(true);
        }
        // Rolled back: every completed step at every depth undone once, newest first.
        // The reference itself is what the plan says: every body once, a rollback newest first at every depth.
        expect(refs[i]!.effects, what).toEqual(expectedEffects(t.input));
        if (refs[i]!.summary.status === 'failed') expect(rollbackOf(real).filter((l, k, all) => all.indexOf(l) === k), what).toEqual(rollbackOf(expectedEffects(t.input)));
      }
      await replacement;
      if (reran) reruns += 1;
      console.log(`[kernel chaos] round ${round}: killed ${victim!.pid} (${kill.mode}), cut off ${cuts.map((c, i) => `${c ?? 'nothing'} in tree ${i}`).join(', ')}; ${reran ? 'a body cut off ran again' : 'none ran again'}; ${Date.now() - began} ms`);
    }
    expect(kills).toBe(ROUNDS);
    console.log(`[kernel chaos] seed ${SEED}: ${kills} workers killed, ${reruns} inside a body that then ran again`);
  }, 240_000);
});
