import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrationEnv } from '../support/orchestration-env.js';
import type { OrchestrationEnv } from '../support/orchestration-env.js';

// Async units across processes: real Redis, real BullMQ, two `xreactor worker` processes. A
// unit runs in its own job (in whichever worker takes it); its owner waits for it in a worker
// (awaiting, no worker held, woken by the unit's signal) or in the caller (this process).

let env: OrchestrationEnv;
const count = async (id: string, kind: string, step: string) => Number((await env.redis.get(`count:${id}:${kind}:${step}`)) ?? 0);

beforeAll(async () => {
  env = await startOrchestrationEnv();
  await Promise.all([env.spawnWorker(), env.spawnWorker()]);
});

afterAll(async () => {
  await env?.close();
});

describe('async units across processes', () => {
  it('a background run: the reader waits awaiting in a worker and is woken when the unit settles in a worker', async () => {
    const dispatched = await env.runtime.run(env.fixtures.backgroundUnit, { slowMs: 300 });
    expect(dispatched.status).toBe('dispatched');
    // While the unit runs, its owner waits on it and holds no worker.
    await expect.poll(async () => (await env.runtime.find(dispatched.executionId)).waiting, { timeout: 10_000, interval: 20 }).toEqual({
      on: 'actors',
      step: 'r',
      actors: [`${dispatched.executionId}.u`],
    });
    const result = await env.runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ status: 'completed', value: { unitPid: expect.any(Number), readerPid: expect.any(Number) } });
    const value = (result as { value: { unitPid: number; readerPid: number } }).value;
    expect([...env.workers].map((w) => w.pid)).toContain(value.unitPid);
    expect(await env.events(dispatched.executionId)).toEqual(['run:a', 'run:u', 'run:r']);
    expect(await env.runtime.find(`${dispatched.executionId}.u`)).toMatchObject({ status: 'completed', result: { status: 'completed', value: { unitPid: value.unitPid } } });
  });

  it('an inline run: the caller waits for the unit a worker process runs; a failed unit fails the reader, which rolls back', async () => {
    const ok = await env.runtime.run(env.fixtures.inlineUnit, {});
    expect(ok).toMatchObject({ status: 'completed', value: { readerPid: process.pid } });
    expect((ok as { value: { unitPid: number } }).value.unitPid).not.toBe(process.pid);
    const failed = await env.runtime.run(env.fixtures.inlineUnit, { failUnit: true });
    expect(failed).toMatchObject({ status: 'failed', step: 'r', message: 'u failed' });
    // The unit compensated itself once in its job; the reader is compensated, a undone; the unit is not touched again.
    expect(await env.events(failed.executionId)).toEqual(['run:a', 'run:u', 'compensate:u', 'run:r', 'compensate:r', 'undo:a']);
  });

  it('an async reactor: the child runs as its own execution in a worker; the reader gets its value', async () => {
    const { executionId } = await env.runtime.run(env.fixtures.asyncChild, { n: 21 });
    expect(await env.runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed', value: 42 });
    expect(await env.runtime.find(`${executionId}.child`)).toMatchObject({ status: 'completed', reactor: 'orch-unit-child' });
  });

  it('chaos: the worker running a unit is SIGKILLed mid-body; another worker runs it again and the owner completes (x5)', async () => {
    for (let round = 0; round < 5; round += 1) {
      const { executionId } = await env.runtime.run(env.fixtures.backgroundUnit, { slowMs: 1_500 });
      await expect.poll(() => env.events(executionId), { timeout: 20_000, interval: 20 }).toContain('run:u');
      const victim = Number(await env.redis.get(`pid:${executionId}:u`));
      const dying = [...env.workers].find((w) => w.pid === victim);
      expect(dying, `round ${round}: u ran in an unknown process ${victim}`).toBeDefined();
      dying!.child.kill('SIGKILL');
      await dying!.exited;
      const replacement = env.spawnWorker();
      const result = await env.runtime.awaitResult(executionId, { timeoutMs: 30_000 });
      expect(result, `round ${round}`).toMatchObject({ status: 'completed' });
      // Only the body the kill cut off ran again.
      expect([await count(executionId, 'run', 'a'), await count(executionId, 'run', 'u'), await count(executionId, 'run', 'r')], `round ${round}`).toEqual([1, 2, 1]);
      expect((result as { value: { unitPid: number } }).value.unitPid).not.toBe(victim);
      await replacement;
    }
  }, 300_000);
});
