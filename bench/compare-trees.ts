/**
 * Before / after: the same Redis benchmarks run against two trees built side by side.
 *
 *   npx tsx bench/compare-trees.ts --before a940047                 (after: this working tree)
 *   npx tsx bench/compare-trees.ts --before a940047 --after kernel  (both from git)
 *     --passes 2        passes over both trees, alternating which tree goes first (default 2)
 *     --only worker-throughput,redis-steps,handoff   (default: all three)
 *     --keep            keep the temporary worktrees (and their node_modules)
 *     --logs <dir>      where every run's full output goes (default: a new temporary directory)
 *   The BENCH_* variables of each benchmark pass through (BENCH_ROUNDS=5, BENCH_SAMPLES=200, ...).
 *
 * A ref is checked out with `git worktree add --detach <tmp> <ref>` and installed with `npm ci`
 * there, so each tree runs its own sources and its own node_modules (callers and workers alike).
 *
 * - worker-throughput: the harness (bench/worker-throughput.ts, its fixtures and
 *   bench/cpu-profile.ts) uses only the public API, so this tree's copy is copied into the other
 *   tree (an older ref does not have it; a ref whose copy differs is overwritten, and that is
 *   reported): both sides run the same harness against their own src/. Its figures come back as
 *   JSON (BENCH_JSON).
 * - redis-steps and handoff reach into internals, so each tree runs its own copy; their ratios
 *   are read from the output.
 *
 * Every run of a benchmark measures its own baseline (bare BullMQ, a bare EVALSHA), so the ratios
 * absorb most of the machine's drift between runs; after ÷ before of those ratios is the figure to
 * read. With the same src/ on both sides, after ÷ before shows the noise of the comparison itself.
 * A benchmark reports, it never gates: the exit code is always 0.
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fmt, loadAverage, machineLine, median, pad, runBench } from './support.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The worker-throughput harness, copied into the other tree. */
const HARNESS = [
  'bench/worker-throughput.ts',
  'bench/cpu-profile.ts',
  'bench/fixtures/worker-throughput-reactor.ts',
  'bench/fixtures/worker-throughput-worker.ts',
  'bench/fixtures/chain-bullmq-worker.ts',
  'bench/fixtures/serve-bench-worker.mjs',
  'bench/fixtures/serve-bench-worker.d.mts',
];
/** What the harness imports from bench/support.ts, which it takes from the tree it runs in. */
const SUPPORT_NAMES = ['benchFile', 'cpuSecondsOf', 'fmt', 'loadAverage', 'machineLine', 'median', 'monotonicMs', 'ownCpuSeconds', 'pad', 'runBench', 'sleep', 'startRedis', 'startTsxProcess', 'stopChild', 'whenReady'];

const BENCHES = ['worker-throughput', 'redis-steps', 'handoff'] as const;
type Bench = (typeof BENCHES)[number];

interface Tree {
  label: string;
  dir: string;
  commit: string;
  temporary: boolean;
}

/** One figure: its value in each run of a tree, and which way is better. */
type Figures = Map<string, number[]>;
const BETTER: Record<string, 'higher' | 'lower' | 'neither'> = {};

function git(args: readonly string[], cwd = ROOT): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function run(command: string, args: readonly string[], cwd: string, env: Record<string, string>, logFile: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => {
      writeFileSync(logFile, output);
      resolve({ code, output });
    });
  });
}

async function prepareTree(ref: string, logs: string): Promise<Tree> {
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const dir = mkdtempSync(join(tmpdir(), `xreactor-tree-${commit.slice(0, 7)}-`));
  console.log(`preparing ${ref} (${commit.slice(0, 7)}) in ${dir}: git worktree add, npm ci ...`);
  git(['worktree', 'add', '--detach', dir, commit]);
  const tree = { label: `${ref} (${commit.slice(0, 7)})`, dir, commit, temporary: true };
  const install = await run('npm', ['ci', '--no-audit', '--no-fund'], dir, {}, join(logs, `npm-ci-${commit.slice(0, 7)}.log`));
  if (install.code !== 0) throw new Error(`npm ci failed in ${dir}:\n${install.output.slice(-2000)}`);
  return tree;
}

/** Copy this tree's worker-throughput harness into `tree`; say what it replaced. */
function overlayHarness(tree: Tree): string {
  if (tree.dir === ROOT) return 'its own copy';
  const support = readFileSync(join(tree.dir, 'bench/support.ts'), 'utf8');
  const missing = SUPPORT_NAMES.filter((name) => !new RegExp(`export (async function|function|const) ${name}\\b|export \\{[^}]*\\b${name}\\b`).test(support));
  if (missing.length > 0) throw new Error(`${tree.label}: its bench/support.ts lacks ${missing.join(', ')}, which the worker-throughput harness needs`);
  const notes: string[] = [];
  for (const file of HARNESS) {
    const target = join(tree.dir, file);
    if (!existsSync(target)) notes.push(`${file} added`);
    else if (readFileSync(target, 'utf8') !== readFileSync(join(ROOT, file), 'utf8')) notes.push(`${file} replaced (it differed)`);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(join(ROOT, file), target);
  }
  return notes.length === 0 ? 'same harness already there' : `this tree's harness copied in: ${notes.join(', ')}`;
}

function num(text: string | undefined): number {
  return text === undefined ? Number.NaN : Number(text.replaceAll(',', ''));
}

function add(figures: Figures, name: string, value: number, better: 'higher' | 'lower' | 'neither'): void {
  BETTER[name] = better;
  if (!figures.has(name)) figures.set(name, []);
  if (Number.isFinite(value)) figures.get(name)!.push(value);
}

function parseRedisSteps(output: string, figures: Figures): void {
  for (const n of ['10', '100', '1000']) {
    const row = new RegExp(`^\\s*${n} \\|\\s*([\\d.,]+) \\|[^|]*\\|\\s*([\\d.]+)×`, 'm').exec(output);
    add(figures, `redis-steps: per step at ${n} steps ÷ EVALSHA`, num(row?.[2]), 'lower');
  }
  add(figures, "redis-steps: a step's commit alone ÷ EVALSHA (floor)", num(/\(floor\) a step's commit alone.*?= ([\d.]+)× EVALSHA/.exec(output)?.[1]), 'lower');
  add(figures, 'redis-steps: bare EVALSHA µs (its baseline)', num(/EVALSHA of a trivial script \(return 1\)\s+([\d.,]+) µs/.exec(output)?.[1]), 'lower');
}

function parseHandoff(output: string, figures: Figures): void {
  const remote = /worker in another process\s+median ([\d.]+)×\s+p95 ([\d.]+)×/.exec(output);
  const local = /worker in the same process\s+median ([\d.]+)×\s+p95 ([\d.]+)×/.exec(output);
  add(figures, 'handoff: worker process, median ÷ bare BullMQ', num(remote?.[1]), 'lower');
  add(figures, 'handoff: worker process, p95 ÷ bare BullMQ', num(remote?.[2]), 'lower');
  add(figures, 'handoff: same process, median ÷ bare BullMQ', num(local?.[1]), 'lower');
  add(figures, "handoff: floor (the design's I/O) ÷ bare BullMQ", num(/÷ bare BullMQ: median ([\d.]+)×/.exec(output)?.[1]), 'lower');
}

interface ThroughputJson {
  aMedian: number;
  bMedian: number;
  ratio: number;
  cpuRatioWorker: number;
  cpuRatioAll: number;
  workerUsPerStep: number;
  callerUsPerStep: number;
  redisUsPerStep: number;
  bareWorkerUsPerJob: number;
  ok: boolean;
  profile?: { busyUs: number; steps: number; groups: { group: string; us: number }[] };
}

function parseThroughput(json: ThroughputJson, figures: Figures): void {
  add(figures, 'worker-throughput: A ÷ B (HEADLINE)', json.ratio, 'higher');
  add(figures, 'worker-throughput: A xreactor runs/s', json.aMedian, 'higher');
  add(figures, 'worker-throughput: B bare BullMQ chains/s', json.bMedian, 'higher');
  add(figures, "worker-throughput: CPU ratio (B/chain ÷ A/run), worker", json.cpuRatioWorker, 'higher');
  add(figures, "worker-throughput: CPU ratio (B/chain ÷ A/run), all 3", json.cpuRatioAll, 'higher');
  add(figures, 'worker-throughput: worker CPU µs per step', json.workerUsPerStep, 'lower');
  add(figures, 'worker-throughput: caller CPU µs per step', json.callerUsPerStep, 'lower');
  add(figures, 'worker-throughput: redis CPU µs per step', json.redisUsPerStep, 'lower');
  add(figures, 'worker-throughput: bare worker CPU µs per job', json.bareWorkerUsPerJob, 'lower');
  if (json.profile !== undefined) {
    // Shares, not µs: the profile's ticks are wall time, which other load on the cores inflates.
    for (const { group, us } of json.profile.groups) add(figures, `profile share %: ${group}`, (100 * us) / json.profile.busyUs, 'neither');
  }
}

async function runOne(tree: Tree, bench: Bench, pass: number, logs: string, figures: Figures): Promise<void> {
  const tag = `${tree.commit.slice(0, 7)}${tree.dir === ROOT ? '-working' : ''}-${bench}-pass${pass}`;
  const log = join(logs, `${tag}.log`);
  const env: Record<string, string> = {};
  let json: string | undefined;
  if (bench === 'worker-throughput') {
    json = join(logs, `${tag}.json`);
    env['BENCH_JSON'] = json;
  }
  const started = Date.now();
  const { output } = await run(process.execPath, ['--import', 'tsx', `bench/${bench}.ts`], tree.dir, env, log);
  const failed = /bench failed/.test(output);
  console.log(`  pass ${pass}  ${bench.padEnd(17)}  ${tree.label.padEnd(28)}  ${fmt((Date.now() - started) / 1000, 0)} s${failed ? '  FAILED (see the log)' : ''}  ${log}`);
  if (bench === 'redis-steps') parseRedisSteps(output, figures);
  else if (bench === 'handoff') parseHandoff(output, figures);
  else if (json !== undefined && existsSync(json)) parseThroughput(JSON.parse(readFileSync(json, 'utf8')) as ThroughputJson, figures);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      before: { type: 'string', default: 'a940047' },
      after: { type: 'string' },
      passes: { type: 'string', default: '2' },
      only: { type: 'string', default: BENCHES.join(',') },
      keep: { type: 'boolean', default: false },
      logs: { type: 'string' },
    },
  });
  const passes = Number(values.passes);
  const benches = values.only.split(',').map((b) => b.trim()) as Bench[];
  for (const b of benches) if (!BENCHES.includes(b)) throw new Error(`--only: unknown benchmark ${b} (known: ${BENCHES.join(', ')})`);
  const logs = values.logs ?? mkdtempSync(join(tmpdir(), 'xreactor-compare-'));
  mkdirSync(logs, { recursive: true });

  console.log('xreactor bench: before / after, two trees side by side');
  console.log(machineLine());
  console.log(`load average at start: ${loadAverage()}`);
  const trees: Tree[] = [];
  try {
    trees.push(await prepareTree(values.before, logs));
    if (values.after !== undefined) trees.push(await prepareTree(values.after, logs));
    else {
      const head = git(['rev-parse', 'HEAD']);
      const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
      trees.push({ label: `working tree (${head.slice(0, 7)}${dirty ? ', modified' : ''})`, dir: ROOT, commit: head, temporary: false });
    }
    const [before, after] = trees as [Tree, Tree];
    if (benches.includes('worker-throughput')) {
      for (const tree of trees) console.log(`worker-throughput harness in ${tree.label}: ${overlayHarness(tree)}`);
    }
    console.log(`before: ${before.label}  ${before.dir}`);
    console.log(`after:  ${after.label}  ${after.dir}`);
    console.log(`${passes} passes, the tree that goes first alternating; logs in ${logs}`);

    const figures = new Map<Tree, Figures>(trees.map((t) => [t, new Map()]));
    for (let pass = 1; pass <= passes; pass++) {
      for (const bench of benches) {
        const order = pass % 2 === 1 ? [before, after] : [after, before];
        for (const tree of order) await runOne(tree, bench, pass, logs, figures.get(tree)!);
      }
    }

    // ---- report
    const names = [...new Set([...figures.get(before)!.keys(), ...figures.get(after)!.keys()])];
    console.log('');
    console.log(`medians over ${passes} pass${passes === 1 ? '' : 'es'} (each pass: one full run of the benchmark per tree; profile groups under 0.5 % left out):`);
    console.log(` ${'figure'.padEnd(58)} | ${pad('before', 9)} | ${pad('after', 9)} | after ÷ before | better if`);
    console.log(`-${'-'.repeat(58)}-|-----------|-----------|----------------|----------`);
    // A profile group absent from a tree's profile had no samples there: 0, not unknown.
    const value = (tree: Tree, name: string) => median(figures.get(tree)!.get(name) ?? (name.startsWith('profile') ? [0] : []));
    const shown = names.filter((n) => !n.startsWith('profile') || Math.max(value(before, n), value(after, n)) >= 0.5);
    for (const name of shown) {
      const b = value(before, name);
      const a = value(after, name);
      const digits = Math.abs(b) >= 100 ? 0 : 2;
      console.log(` ${name.padEnd(58)} | ${pad(fmt(b, digits), 9)} | ${pad(fmt(a, digits), 9)} | ${pad(fmt(a / b, 2) + '×', 14)} | ${BETTER[name]}`);
    }
    console.log('');
    console.log('each run of a tree, for the noise: ');
    for (const name of names.filter((n) => !n.startsWith('profile'))) {
      const list = (t: Tree) => (figures.get(t)!.get(name) ?? []).map((v) => fmt(v, Math.abs(v) >= 100 ? 0 : 2)).join(' / ');
      console.log(`  ${name}: before ${list(before)}; after ${list(after)}`);
    }
    console.log(`load average at end: ${loadAverage()}`);
  } finally {
    for (const tree of trees) {
      if (!tree.temporary) continue;
      if (values.keep) console.log(`kept ${tree.dir} (remove it with: git worktree remove --force ${tree.dir})`);
      else {
        try {
          git(['worktree', 'remove', '--force', tree.dir]);
        } catch (error) {
          console.error(`could not remove the worktree ${tree.dir}: ${String(error)}`);
        }
        rmSync(tree.dir, { recursive: true, force: true });
      }
    }
  }
}

runBench(main);
