import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis } from '../support/redis-server.js';
import type { RedisServer } from '../support/redis-server.js';
import { startWorkerProcess } from '../support/worker-process.js';
import type { WorkerProcess } from '../support/worker-process.js';

// An `xreactor worker` process (the real CLI) whose Redis goes away: it says so once, its health
// endpoint turns 503, and SIGTERM still stops it within its shutdown timeout.

const MODULES = ['test/orchestration/fixtures/reactors.ts'];
const SHUTDOWN_MS = 1_500;
let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

/** The port the worker's health endpoint listens on, from its log. */
async function healthPort(worker: WorkerProcess): Promise<number> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    const line = worker.output().split('\n').find((l) => l.includes('"xreactor.worker.health"'));
    if (line !== undefined) return (JSON.parse(line) as { port: number }).port;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no health endpoint in the worker's log:\n${worker.output()}`);
}

const health = async (port: number) => {
  const response = await fetch(`http://127.0.0.1:${port}/health`);
  return { code: response.status, body: (await response.json()) as { status: string; redis?: string } };
};

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; ) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const start = () =>
  startWorkerProcess({
    redisUrl: server.url,
    modules: MODULES,
    args: ['--health-port', '0', '--shutdown-timeout-ms', String(SHUTDOWN_MS), '--sweep-interval-ms', '0'],
    env: { XREACTOR_TEST_REDIS_URL: server.url },
  });

describe('a worker process whose Redis goes down', () => {
  it('reports ready, then not connected (once), and stops on SIGTERM within its shutdown timeout', async () => {
    const worker = start();
    try {
      await worker.ready;
      const port = await healthPort(worker);
      expect(await health(port)).toEqual({ code: 200, body: { status: 'ready' } });

      await server.down();
      const down = await until('health 503', async () => {
        const h = await health(port);
        return h.code === 503 ? h : undefined;
      });
      expect(down.body).toMatchObject({ status: 'not_connected', redis: `redis://127.0.0.1:${server.port}` });
      // Several reconnection attempts later, the outage is still one warning per kind, not a flood.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const warnings = worker.output().split('\n').filter((l) => l.includes('ECONNREFUSED'));
      expect(warnings.length, worker.output()).toBeLessThanOrEqual(3);

      const stoppedAt = Date.now();
      worker.child.kill('SIGTERM');
      const code = await worker.exited;
      expect(Date.now() - stoppedAt, worker.output()).toBeLessThan(SHUTDOWN_MS + 1_000);
      expect([0, 1]).toContain(code);
    } finally {
      worker.child.kill('SIGKILL');
      await server.up();
    }
  }, 60_000);

  it('started while Redis is down: says it is not connected, serves 503, and stops on SIGTERM', async () => {
    await server.down();
    const worker = start();
    try {
      await worker.ready;
      const port = await healthPort(worker);
      // Said once the usual moment to connect has passed.
      await until('the not_connected warning', async () => (worker.output().includes('"xreactor.worker.not_connected"') ? true : undefined), 10_000);
      expect((await health(port)).code).toBe(503);
      const stoppedAt = Date.now();
      worker.child.kill('SIGTERM');
      await worker.exited;
      expect(Date.now() - stoppedAt, worker.output()).toBeLessThan(SHUTDOWN_MS + 1_000);
    } finally {
      worker.child.kill('SIGKILL');
      await server.up();
    }
  }, 60_000);

  it('a bad flag or a health port in use ends the process at once, before anything connects', async () => {
    const { createServer } = await import('node:net');
    const busy = createServer().listen(0);
    await new Promise((resolve) => busy.once('listening', resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      for (const [args, says] of [
        [['--lease-ttl-ms', 'soon'], /--lease-ttl-ms must be a positive integer, got "soon"/],
        [['--bundle-size', '0'], /--bundle-size must be a positive integer, got "0"/],
        [['--health-port', String(port)], /EADDRINUSE/],
      ] as const) {
        const worker = startWorkerProcess({ redisUrl: server.url, modules: MODULES, args: [...args], env: { XREACTOR_TEST_REDIS_URL: server.url } });
        const started = Date.now();
        const kill = setTimeout(() => worker.child.kill('SIGKILL'), 15_000);
        const code = await worker.exited;
        clearTimeout(kill);
        expect(code, worker.output()).toBe(1);
        expect(Date.now() - started).toBeLessThan(10_000);
        expect(worker.output()).toMatch(says);
        expect(worker.output()).not.toContain('xreactor.worker.started');
      }
    } finally {
      busy.close();
    }
  }, 60_000);
});
