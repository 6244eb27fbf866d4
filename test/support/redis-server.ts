/**
 * Real Redis servers for tests, started from the system `redis-server` binary on free ports,
 * without persistence, and killed on `stop()` or when the test process exits.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running single Redis server. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
  /** Kill the server (as a crash or an outage would): clients see connection refused. */
  down(): Promise<void>;
  /** Start it again on the same port (empty: no persistence), once it answers PING. */
  up(): Promise<void>;
}

/** A running Redis Cluster of three masters, no replicas. */
export interface RedisClusterServer {
  readonly nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 20_000;
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function requireBinaries(): void {
  for (const binary of ['redis-server', 'redis-cli']) {
    const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
    if (probe.error !== undefined) {
      throw new Error(
        `${binary} is not on PATH (${probe.error.message}). The Redis test lane starts its own servers from the system binaries: ` +
          'install them (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`) and run the tests again.',
      );
    }
  }
}

/** A port nobody listens on right now (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function cli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', HOST, '-p', String(port), ...args], { timeout: 5_000 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`redis-cli ${args.join(' ')} on port ${port} failed: ${stderr || error.message}`)),
    );
  });
}

function logTail(logFile: string): string {
  try {
    return readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join('\n');
  } catch {
    return '(no log)';
  }
}

async function until(what: string, check: () => Promise<boolean>, child?: { process: ChildProcess; logFile: string }): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child !== undefined && child.process.exitCode !== null) {
      throw new Error(`redis-server exited with code ${child.process.exitCode} before ${what}:\n${logTail(child.logFile)}`);
    }
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${READY_TIMEOUT_MS} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function spawnServer(port: number, extra: string[], dir: string, logFile: string): ChildProcess {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const child of running) child.kill('SIGKILL');
    });
  }
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--logfile', logFile, ...extra];
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

async function startNode(extra: (port: number, dir: string) => string[], dir: string): Promise<{ port: number; child: ChildProcess }> {
  // A free port can be taken between the probe and the server's bind: try a few.
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    const logFile = join(dir, `redis-${port}.log`);
    const child = spawnServer(port, extra(port, dir), dir, logFile);
    try {
      await until(`redis-server on port ${port} to answer PING`, async () => (await cli(port, 'PING')).trim() === 'PONG', { process: child, logFile });
      return { port, child };
    } catch (error) {
      await kill(child);
      if (attempt === 3) throw error;
    }
  }
}

/** Starts one Redis server on a free port and resolves once it answers PING. */
export async function startRedis(): Promise<RedisServer> {
  requireBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'xreactor-redis-'));
  const started = await startNode(() => [], dir);
  const port = started.port;
  let child: ChildProcess | undefined = started.child;
  return {
    port,
    url: `redis://${HOST}:${port}`,
    async stop() {
      if (child !== undefined) await kill(child);
      child = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
    async down() {
      if (child !== undefined) await kill(child);
      child = undefined;
    },
    async up() {
      if (child !== undefined) return;
      const logFile = join(dir, `redis-${port}-again.log`);
      const again = spawnServer(port, [], dir, logFile);
      await until(`redis-server on port ${port} to answer PING again`, async () => (await cli(port, 'PING')).trim() === 'PONG', { process: again, logFile });
      child = again;
    },
  };
}

/**
 * Starts three cluster-enabled Redis servers, joins them with `redis-cli --cluster create`
 * (three masters, no replicas) and resolves once every node reports `cluster_state:ok`.
 */
export async function startRedisCluster(): Promise<RedisClusterServer> {
  requireBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'xreactor-redis-cluster-'));
  const started: { port: number; child: ChildProcess }[] = [];
  const stop = async () => {
    await Promise.all(started.map(({ child }) => kill(child)));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i += 1) {
      // The cluster bus port is set explicitly: the default (port + 10000) may be taken or out of range.
      const busPort = await freePort();
      started.push(
        await startNode(
          (port, d) => ['--cluster-enabled', 'yes', '--cluster-config-file', join(d, `nodes-${port}.conf`), '--cluster-port', String(busPort), '--cluster-node-timeout', '5000'],
          dir,
        ),
      );
    }
    const addresses = started.map(({ port }) => `${HOST}:${port}`);
    await new Promise<void>((resolve, reject) => {
      execFile('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 }, (error, stdout, stderr) =>
        error === null ? resolve() : reject(new Error(`redis-cli --cluster create failed: ${stderr || stdout || error.message}`)),
      );
    });
    await until('cluster_state:ok on every node', async () => {
      const infos = await Promise.all(started.map(({ port }) => cli(port, 'CLUSTER', 'INFO')));
      return infos.every((info) => info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:3'));
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: started.map(({ port }) => ({ host: HOST, port })), stop };
}
