import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrationEnv } from '../support/orchestration-env.js';
import type { OrchestrationEnv } from '../support/orchestration-env.js';

// A caller process written like the README: once it has closed what it opened, nothing keeps
// its event loop alive, and it exits by itself (no process.exit). A worker process (the real
// CLI) runs the background reactor.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CALLER = fileURLToPath(new URL('./fixtures/readme-caller.ts', import.meta.url));

let env: OrchestrationEnv;
beforeAll(async () => {
  env = await startOrchestrationEnv();
  await env.spawnWorker();
});
afterAll(async () => {
  await env?.close();
});

/** Runs the caller; resolves with its exit code, output, and how long it lived after printing its outcome. */
function runCaller(extraEnv: Record<string, string>): Promise<{ code: number | string | null; output: string; afterOutcomeMs: number }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CALLER], { cwd: ROOT, env: { ...process.env, XREACTOR_REDIS_URL: env.server.url, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let printedAt = Number.NaN;
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (Number.isNaN(printedAt) && output.includes('"status"')) printedAt = Date.now();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    // A caller that hangs is killed after 30 s, and the test reports it.
    const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code, signal) => {
      clearTimeout(kill);
      resolve({ code: code ?? signal, output, afterOutcomeMs: Date.now() - printedAt });
    });
  });
}

describe('a caller process exits by itself once it has closed what it opened', () => {
  it('createRuntime({ backend: connectRedis() }): runtime.close() closes the queue, the store and the connection', async () => {
    const { code, output, afterOutcomeMs } = await runCaller({});
    expect(output).toContain('{"dispatched":"dispatched","status":"completed"}');
    expect(code, output).toBe(0);
    expect(afterOutcomeMs).toBeLessThan(5_000);
  }, 40_000);

  it('a store and queue given separately: closing the runtime, then each, then the connection', async () => {
    const { code, output, afterOutcomeMs } = await runCaller({ CALLER_MODE: 'parts' });
    expect(output).toContain('{"dispatched":"dispatched","status":"completed"}');
    expect(code, output).toBe(0);
    expect(afterOutcomeMs).toBeLessThan(5_000);
  }, 40_000);

  it('with Redis down: run() fails within its timeout naming the server, and the caller still exits by itself after close()', async () => {
    await env.server.down();
    try {
      const started = Date.now();
      const { code, output } = await runCaller({ CALLER_MODE: 'outage', CALLER_TIMEOUT_MS: '500' });
      expect(code, output).toBe(3);
      expect(Date.now() - started).toBeLessThan(15_000);
      const reported = JSON.parse(output.split('\n').find((l) => l.startsWith('{'))!) as { code: string; message: string };
      expect(reported.code).toBe('redis_unavailable');
      expect(reported.message).toContain(`Redis at 127.0.0.1:${env.server.port} did not answer store.create within 500 ms`);
      expect(reported.message).toContain('execution outage-1 may exist');
    } finally {
      await env.server.up();
    }
  }, 40_000);
});
