/**
 * The environment of the actor-kernel orchestration test: a private Redis, a fresh store prefix and
 * queue name, a caller runtime in the test process, `xreactor worker` processes, fixture processes
 * (a continuer, an inspecting worker) and the effects the kernel fixtures record.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pino from 'pino';
import { createRuntime } from '../../src/index.js';
import type { AnyReactorDefinition, Runtime, Store } from '../../src/index.js';
import { createBullmqQueue, createRedisStore } from '../../src/redis.js';
import type { BullmqQueue } from '../../src/redis.js';
import type * as KernelFixtures from '../orchestration/fixtures/kernel-reactors.js';
import { startRedis } from './redis-server.js';
import type { RedisServer } from './redis-server.js';
import { startWorkerProcess } from './worker-process.js';
import type { WorkerProcess } from './worker-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MODULES = ['test/orchestration/fixtures/kernel-reactors.ts'];

/** Leases, job locks and sweeps short enough that a killed process's work moves on within about a second. */
export const LEASE_TTL_MS = 1_000;
const FAST_RECOVERY = ['--lease-ttl-ms', String(LEASE_TTL_MS), '--lock-duration-ms', '1000', '--stalled-interval-ms', '500', '--sweep-interval-ms', '500'];

/** One recorded effect: `<kind>:<path>/<step>#<attempt>` and the process that ran the body. */
export interface Effect {
  readonly label: string;
  readonly pid: number;
}

/** A fixture script in a child process (through tsx). */
export interface FixtureProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves once the process printed its ready marker (or exited). */
  readonly ready: Promise<void>;
  readonly exited: Promise<number | string | null>;
  output(): string;
  /** Lines it printed to stdout, in order. */
  lines(): string[];
}

/** A continuer's answer to one `continue`: the result's status (and its `reason` when dispatched), or the error's code and message. */
export interface ContinueReply {
  readonly ok: boolean;
  readonly status?: string;
  readonly reason?: string;
  readonly code?: string;
  readonly message?: string;
}

/** A continuer process: `continue` requests answered over its stdin / stdout. */
export interface Continuer {
  readonly process: FixtureProcess;
  continue(root: string, step: string | readonly string[], payload: unknown): Promise<ContinueReply>;
}

/** Poll `check` until it holds (for hooks, where expect.poll is not available). */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface KernelEnv {
  readonly server: RedisServer;
  readonly redis: Redis;
  /** The store prefix and queue name of this suite (fresh). */
  readonly prefix: string;
  readonly queueName: string;
  readonly store: Store;
  readonly queue: BullmqQueue;
  /** A caller runtime (no worker) in the test process. */
  readonly runtime: Runtime;
  readonly fixtures: typeof KernelFixtures;
  readonly reactors: readonly AnyReactorDefinition[];
  readonly workers: Set<WorkerProcess>;
  /** Start an `xreactor worker` process for the kernel fixtures on this suite's prefix and queue. */
  spawnWorker(args?: readonly string[]): Promise<WorkerProcess>;
  /** Start a fixture script with XREACTOR_KERNEL_FIXTURE set to `config` (plus url, prefix, queueName, leaseTtlMs). */
  startFixture(script: string, config: Record<string, unknown>, readyMarker: string): Promise<FixtureProcess>;
  startContinuer(): Promise<Continuer>;
  /** The effects recorded for a tree (all its actors), in order. */
  effects(root: string): Promise<Effect[]>;
  close(): Promise<void>;
}

export async function startKernelEnv(): Promise<KernelEnv> {
  const server = await startRedis();
  process.env['XREACTOR_TEST_REDIS_URL'] = server.url;
  const fixtures = await import('../orchestration/fixtures/kernel-reactors.js');
  const tag = randomUUID().slice(0, 8);
  const prefix = `kt${tag}`;
  const queueName = `kernel-${tag}`;
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const store = createRedisStore({ redis, prefix });
  const queue = createBullmqQueue({ connection: redis, queueName });
  const reactors = [...Object.values(fixtures.kernelTrees), fixtures.kernelChildPausing, fixtures.kernelChildPlain, fixtures.kernelGrand];
  const runtime = createRuntime({ store, queue, worker: false, leaseTtlMs: LEASE_TTL_MS, reactors, logger: pino({ level: 'silent' }) });
  const workers = new Set<WorkerProcess>();
  const others = new Set<FixtureProcess>();

  const startFixture = async (script: string, config: Record<string, unknown>, readyMarker: string): Promise<FixtureProcess> => {
    const env = { ...process.env, XREACTOR_TEST_REDIS_URL: server.url, XREACTOR_KERNEL_FIXTURE: JSON.stringify({ url: server.url, prefix, queueName, leaseTtlMs: LEASE_TTL_MS, ...config }) };
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    let stdout = '';
    let markReady: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      stdout += chunk.toString();
      if (output.includes(readyMarker)) markReady();
    });
    child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    void exited.then(() => markReady());
    const fixture: FixtureProcess = { child, pid: child.pid!, ready, exited, output: () => output, lines: () => stdout.split('\n').filter((l) => l !== '') };
    others.add(fixture);
    void exited.then(() => others.delete(fixture));
    await ready;
    if (child.exitCode !== null) throw new Error(`${script} exited at start:\n${output}`);
    return fixture;
  };

  return {
    server,
    redis,
    prefix,
    queueName,
    store,
    queue,
    runtime,
    fixtures,
    reactors,
    workers,
    async spawnWorker(args = []) {
      const worker = startWorkerProcess({
        redisUrl: server.url,
        modules: MODULES,
        args: ['--prefix', prefix, '--queue', queueName, ...FAST_RECOVERY, ...args],
        env: { XREACTOR_TEST_REDIS_URL: server.url },
      });
      workers.add(worker);
      void worker.exited.then(() => workers.delete(worker));
      await worker.ready;
      if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
      return worker;
    },
    startFixture,
    async startContinuer() {
      const script = fileURLToPath(new URL('../orchestration/fixtures/kernel-continuer.ts', import.meta.url));
      const proc = await startFixture(script, {}, 'continuer ready');
      let next = 0;
      return {
        process: proc,
        async continue(root, step, payload) {
          const tag = `c${(next += 1)}`;
          proc.child.stdin!.write(`${JSON.stringify({ tag, root, step, payload })}\n`);
          const deadline = Date.now() + 30_000;
          for (;;) {
            const reply = proc.lines().map((l) => (l.startsWith('{') ? (JSON.parse(l) as { tag?: string }) : {})).find((r) => r.tag === tag);
            if (reply !== undefined) return reply as ContinueReply;
            if (proc.child.exitCode !== null || proc.child.signalCode !== null || Date.now() > deadline) throw new Error(`the continuer gave no answer to ${tag} (${root} ${JSON.stringify(step)}):\n${proc.output()}`);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        },
      };
    },
    async effects(root) {
      const raw = await redis.lrange(`kev:${root}`, 0, -1);
      return raw.map((entry) => {
        const at = entry.lastIndexOf('@');
        return { label: entry.slice(0, at), pid: Number(entry.slice(at + 1)) };
      });
    },
    async close() {
      for (const worker of workers) worker.child.kill('SIGKILL');
      for (const other of others) other.child.kill('SIGKILL');
      await runtime.close();
      await queue.close();
      await store.close();
      fixtures.kernelRecorder().disconnect();
      redis.disconnect();
      await server.stop();
    },
  };
}
