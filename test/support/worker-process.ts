import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = fileURLToPath(new URL('../../src/cli/xreactor.ts', import.meta.url));

/** A worker process started with the real `xreactor worker` command line. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves once the worker logged that it started. */
  readonly ready: Promise<void>;
  /** Resolves with the exit code (or signal) when the process ends. */
  readonly exited: Promise<number | string | null>;
  /** Everything it wrote, for failure messages. */
  output(): string;
}

/** Start `xreactor worker` (through tsx) for the given reactor modules. */
export function startWorkerProcess(options: {
  readonly redisUrl: string;
  readonly modules: readonly string[];
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}): WorkerProcess {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', CLI, 'worker', '--redis', options.redisUrl, '--log-level', 'info', ...(options.args ?? []), ...options.modules],
    { cwd: ROOT, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  let started = false;
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    // Searched in the new chunk with the tail before it (a marker may span two chunks), not in
    // the whole output: a worker logging a line per step writes megabytes.
    if (!started && (output.slice(-64) + text).includes('xreactor.worker.started')) {
      started = true;
      markReady();
    }
    output += text;
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  void exited.then(() => markReady());
  return { child, pid: child.pid!, ready, exited, output: () => output };
}
