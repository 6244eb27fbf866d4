import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrationEnv } from '../support/orchestration-env.js';
import type { OrchestrationEnv } from '../support/orchestration-env.js';

// A run paused in this process is continued from other processes, against a real Redis.

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONTINUE = fileURLToPath(new URL('./fixtures/continue.ts', import.meta.url));

let env: OrchestrationEnv;

async function continueFromAnotherProcess(id: string, by: string): Promise<{ ok: boolean; by: string; status?: string; value?: unknown; reason?: string; code?: string; message?: string }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', CONTINUE, env.server.url, id, by], {
    cwd: ROOT,
    env: { ...process.env, XREACTOR_TEST_REDIS_URL: env.server.url },
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { ok: boolean; by: string };
}

beforeAll(async () => {
  env = await startOrchestrationEnv();
  // Applies the resumes left to a worker (a continue that found the run's lease held).
  await env.spawnWorker();
});

afterAll(async () => {
  await env?.close();
});

describe('interrupts across processes', () => {
  it('a run paused here is continued from another process', async () => {
    const paused = await env.runtime.run(env.fixtures.approvalFlow, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: ['approval'] });
    expect(await continueFromAnotherProcess(paused.executionId, 'ann')).toEqual({ ok: true, by: 'ann', status: 'completed', value: { quote: 'Q', approval: { by: 'ann' }, order: 'ordered by ann' } });
    expect(await env.runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 })).toMatchObject({ status: 'completed' });
  });

  it('a continue that finds the run leased elsewhere answers dispatched (run_busy); a worker applies it', async () => {
    const paused = await env.runtime.run(env.fixtures.approvalFlow, {});
    expect(await env.store.acquireLease(paused.executionId, 'another-process', 60_000)).toBe(true);
    expect(await continueFromAnotherProcess(paused.executionId, 'cy')).toEqual({ ok: true, by: 'cy', status: 'dispatched', reason: 'run_busy' });
    expect(await continueFromAnotherProcess(paused.executionId, 'dee')).toMatchObject({ ok: false, code: 'invalid_state', message: expect.stringMatching(/already resumed/) });
    await env.store.releaseLease(paused.executionId, 'another-process');
    expect(await env.runtime.awaitResult(paused.executionId, { timeoutMs: 10_000 })).toMatchObject({ status: 'completed', value: { order: 'ordered by cy' } });
    expect(await env.redis.lrange(`events:${paused.executionId}`, 0, -1)).toEqual(['run:quote', 'run:order']);
  });

  it('two concurrent continues of the same interrupt: one wins, the other is refused', async () => {
    for (let round = 0; round < 3; round += 1) {
      const paused = await env.runtime.run(env.fixtures.approvalFlow, {});
      const outcomes = await Promise.all([continueFromAnotherProcess(paused.executionId, 'ann'), continueFromAnotherProcess(paused.executionId, 'bob')]);
      const winners = outcomes.filter((o) => o.ok);
      const losers = outcomes.filter((o) => !o.ok);
      expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
      expect(losers[0]?.code, JSON.stringify(outcomes)).toBe('invalid_state');
      expect(losers[0]?.message).toMatch(/already resumed/);
      // The winner applied its resume (completed), or found the lease held by the loser for the
      // moment between its lease and its signal and left the resume to a worker (dispatched,
      // run_busy): either way the run goes on with the winner's payload.
      const winner = winners[0]!;
      if (winner.status === 'completed') expect(winner.value).toMatchObject({ approval: { by: winner.by } });
      else expect(winner, JSON.stringify(outcomes)).toMatchObject({ status: 'dispatched', reason: 'run_busy' });
      const by = winner.by;
      const result = await env.runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 });
      expect(result).toMatchObject({ status: 'completed', value: { order: `ordered by ${by}` } });
      expect(await env.redis.lrange(`events:${paused.executionId}`, 0, -1)).toEqual(['run:quote', 'run:order']);
    }
  });
});
