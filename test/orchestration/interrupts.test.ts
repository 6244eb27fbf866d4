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

async function continueFromAnotherProcess(id: string, by: string): Promise<{ ok: boolean; status?: string; value?: unknown; code?: string; message?: string }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', CONTINUE, env.server.url, id, by], {
    cwd: ROOT,
    env: { ...process.env, XREACTOR_TEST_REDIS_URL: env.server.url },
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { ok: boolean };
}

beforeAll(async () => {
  env = await startOrchestrationEnv();
});

afterAll(async () => {
  await env?.close();
});

describe('interrupts across processes', () => {
  it('a run paused here is continued from another process', async () => {
    const paused = await env.runtime.run(env.fixtures.approvalFlow, {});
    expect(paused).toMatchObject({ status: 'paused', readyInterrupts: ['approval'] });
    expect(await continueFromAnotherProcess(paused.executionId, 'ann')).toEqual({ ok: true, status: 'completed', value: { quote: 'Q', approval: { by: 'ann' }, order: 'ordered by ann' } });
    expect(await env.runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 })).toMatchObject({ status: 'completed' });
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
      const by = (winners[0]!.value as { approval: { by: string } }).approval.by;
      const result = await env.runtime.awaitResult(paused.executionId, { timeoutMs: 5_000 });
      expect(result).toMatchObject({ status: 'completed', value: { order: `ordered by ${by}` } });
      expect(await env.redis.lrange(`events:${paused.executionId}`, 0, -1)).toEqual(['run:quote', 'run:order']);
    }
  });
});
