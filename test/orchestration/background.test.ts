import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrationEnv } from '../support/orchestration-env.js';
import type { OrchestrationEnv } from '../support/orchestration-env.js';

// Real Redis, real BullMQ, workers in child processes started with the `xreactor worker` CLI.
// The caller (this process) runs background reactors and gets `dispatched`; workers finish them.

let env: OrchestrationEnv;
const events = (id: string) => env.events(id);
const count = async (id: string, kind: string, step: string) => Number((await env.redis.get(`count:${id}:${kind}:${step}`)) ?? 0);

beforeAll(async () => {
  env = await startOrchestrationEnv();
  await env.spawnWorker();
});

afterAll(async () => {
  await env?.close();
});

describe('background reactors across processes', () => {
  it('S-bg-01: all: dispatched in the caller, run and rolled back by a worker process', async () => {
    const dispatched = await env.runtime.run(env.fixtures.backgroundAll, { failAt: 'c' });
    expect(dispatched.status).toBe('dispatched');
    const result = await env.runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'c', message: 'c failed' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
  });

  it('S-bg-02: after: a runs a in the caller; the worker process undoes it too', async () => {
    const dispatched = await env.runtime.run(env.fixtures.backgroundAfterA, { failAt: 'c' });
    expect(dispatched.status).toBe('dispatched');
    expect(await env.redis.get(`pid:${dispatched.executionId}:a`)).toBe(String(process.pid));
    const result = await env.runtime.awaitResult(dispatched.executionId, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ status: 'failed', step: 'c' });
    expect(await events(dispatched.executionId)).toEqual(['run:a', 'run:b', 'run:c', 'compensate:c', 'undo:b', 'undo:a']);
    expect(await env.redis.get(`pid:${dispatched.executionId}:b`)).not.toBe(String(process.pid));
  });

  it('S-bg-03: worker retries are delayed jobs; compensated once after the last attempt', async () => {
    const { executionId } = await env.runtime.run(env.fixtures.backgroundRetryExhausted, {});
    expect(await env.runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'failed', step: 'b', message: 'b failed #3' });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:b', 'run:b', 'compensate:b', 'undo:a']);
  });

  it('S-bg-04: a worker retry that succeeds continues the run', async () => {
    const { executionId } = await env.runtime.run(env.fixtures.backgroundRetryOnce, {});
    expect(await env.runtime.awaitResult(executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
  });

  it('find(id) works from another process: the caller reads what the worker committed', async () => {
    const { executionId } = await env.runtime.run(env.fixtures.backgroundAll, {});
    await env.runtime.awaitResult(executionId, { timeoutMs: 20_000 });
    const view = await env.runtime.find(executionId);
    expect(view.status).toBe('completed');
    expect(view.undoStack.map((e) => e.step)).toEqual(['a', 'b', 'c']);
  });

  it('chaos: a worker killed with SIGKILL inside b; another worker finishes; only b runs twice (x20)', async () => {
    await env.spawnWorker();
    for (let round = 0; round < 20; round += 1) {
      const { executionId } = await env.runtime.run(env.fixtures.backgroundAll, { slowMs: 1_500 });
      await expect.poll(() => events(executionId), { timeout: 20_000, interval: 20 }).toContain('run:b');
      const victim = Number(await env.redis.get(`pid:${executionId}:b`));
      const dying = [...env.workers].find((w) => w.pid === victim);
      expect(dying, `round ${round}: b ran in an unknown process ${victim}`).toBeDefined();
      dying!.child.kill('SIGKILL');
      await dying!.exited;
      const replacement = env.spawnWorker();
      const result = await env.runtime.awaitResult(executionId, { timeoutMs: 30_000 });
      expect(result, `round ${round}`).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
      expect(await events(executionId), `round ${round}`).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
      expect([await count(executionId, 'run', 'a'), await count(executionId, 'run', 'b'), await count(executionId, 'run', 'c')]).toEqual([1, 2, 1]);
      await replacement;
    }
  }, 600_000);
});
