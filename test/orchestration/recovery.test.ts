import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBullmqQueue } from '../../src/redis.js';
import { createKeyBuilder, EXECUTION_FIELDS } from '../../src/store/keys.js';
import { startOrchestrationEnv } from '../support/orchestration-env.js';
import type { OrchestrationEnv } from '../support/orchestration-env.js';

// Recovery across processes: graceful SIGTERM, the sweeper resuming a run whose caller died,
// and unreadable stored data that fails one execution without stopping the worker.

const CALLER = fileURLToPath(new URL('./fixtures/caller.ts', import.meta.url));

let env: OrchestrationEnv;
const events = (id: string) => env.events(id);

beforeAll(async () => {
  env = await startOrchestrationEnv();
});

afterAll(async () => {
  await env?.close();
});

describe('recovery across processes', () => {
  it('SIGTERM: the worker finishes the step in progress (and its job), then exits 0', async () => {
    const worker = await env.spawnWorker(['--sweep-interval-ms', '0']);
    const { executionId } = await env.runtime.run(env.fixtures.backgroundAll, { slowMs: 1_000 });
    await expect.poll(() => events(executionId), { timeout: 20_000, interval: 20 }).toContain('run:b');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(await env.runtime.awaitResult(executionId, { timeoutMs: 5_000 })).toMatchObject({ status: 'completed' });
    expect(await events(executionId)).toEqual(['run:a', 'run:b', 'run:c']);
    expect(worker.output()).toContain('xreactor.worker.stopped');
  });

  it('the sweeper resumes a run whose caller process died mid-step; only that step runs twice', async () => {
    const id = randomUUID();
    const caller = spawn(process.execPath, ['--import', 'tsx', CALLER, env.server.url, id, '5000'], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      env: { ...process.env, XREACTOR_TEST_REDIS_URL: env.server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const callerExit = new Promise((resolve) => caller.once('exit', resolve));
    await expect.poll(() => events(id), { timeout: 20_000, interval: 20 }).toEqual(['run:a', 'run:b']);
    caller.kill('SIGKILL');
    await callerExit;
    expect((await env.runtime.find(id)).status).toBe('running');
    await env.spawnWorker(['--sweep-interval-ms', '500']);
    // b sleeps 5 s per attempt: the recovered attempt sleeps too.
    expect(await env.runtime.awaitResult(id, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', value: { a: 'A', b: 'B', c: 'C' } });
    expect(await events(id)).toEqual(['run:a', 'run:b', 'run:b', 'run:c']);
  }, 60_000);

  it('a worker killed inside a composed child step resumes without re-running completed child steps', async () => {
    await env.spawnWorker(['--sweep-interval-ms', '0']);
    const { executionId } = await env.runtime.run(env.fixtures.backgroundCompose, { slowMs: 1_500 });
    const childId = `${executionId}.child`;
    await expect.poll(() => events(childId), { timeout: 20_000, interval: 20 }).toEqual(['run:c1', 'run:c2']);
    // Kill the worker that is running c2 (other tests' workers may be alive too).
    const victim = Number(await env.redis.get(`pid:${childId}:c2`));
    const running = [...env.workers].find((w) => w.pid === victim);
    expect(running, `c2 ran in an unknown process ${victim}`).toBeDefined();
    running!.child.kill('SIGKILL');
    await running!.exited;
    await env.spawnWorker(['--sweep-interval-ms', '0']);
    expect(await env.runtime.awaitResult(executionId, { timeoutMs: 30_000 })).toMatchObject({ status: 'completed', value: { a: 'A', child: { c1: 'C1', c2: 'C2' }, b: 'B' } });
    expect(await events(executionId)).toEqual(['run:a', 'run:b']);
    expect(await events(childId)).toEqual(['run:c1', 'run:c2', 'run:c2']);
  });

  it('unreadable stored data fails that execution with a clear error; the worker keeps running', async () => {
    if (env.workers.size === 0) await env.spawnWorker();
    const { executionId } = await env.runtime.run(env.fixtures.backgroundAll, {});
    await env.runtime.awaitResult(executionId, { timeoutMs: 20_000 });
    const keys = createKeyBuilder().executionKeys(executionId);
    await env.redis.hset(keys.execution, EXECUTION_FIELDS.snapshot, Buffer.from('definitely not msgpack'));
    const view = await env.runtime.find(executionId);
    expect(view.status).toBe('failed');
    expect(view.result).toMatchObject({ status: 'failed' });
    expect(view.result?.status === 'failed' && view.result.message).toMatch(/snapshot|foreign|truncated|envelope/i);
    // A job for it reaches the worker: reported, dropped, and the worker goes on with other work.
    const queue = createBullmqQueue({ connection: env.redis });
    await queue.enqueue([{ id: `${executionId}.poke`, kind: 'advance', actor: { kind: 'execution', id: executionId } }]);
    // Whichever worker takes the job reports it.
    await expect.poll(() => [...env.workers].some((w) => w.output().includes('xreactor.execution.unreadable')), { timeout: 10_000 }).toBe(true);
    const next = await env.runtime.run(env.fixtures.backgroundAll, {});
    expect(await env.runtime.awaitResult(next.executionId, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
    await queue.close();
  });
});
