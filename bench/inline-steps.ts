/**
 * In-memory step cost of linear reactors (10, 100, 1,000 steps), against raw baselines measured
 * in the same run: a bare XState v5 `transition()` with one `assign`, and an awaited no-op promise.
 *
 *   npx tsx bench/inline-steps.ts        (or: npm run bench)
 *
 * Each step reads the previous step's result and returns a small object. Per-step cost is the
 * time of `runtime.run(...)` divided by the number of steps; samples of every kind are
 * interleaved and every figure is a median. A benchmark reports, it never gates: the exit code is
 * always 0, and the targets are printed as TARGET MET / TARGET MISSED lines.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import pino from 'pino';
import { assign, createActor, initialTransition, setup, transition } from 'xstate';
import type * as ExecutionModule from '../machines/execution.js';
import type * as Xreactor from '../src/index.js';
import type { AnyReactorDefinition, Commit, Middleware, Runtime, Store } from '../src/index.js';
import type * as Serialization from '../src/serialization/index.js';
import type * as StepperModule from '../src/runtime/machine-stepper.js';
import { linearReactor, runBench } from './support.js';

// The library is imported in main(), so that even a broken build is reported and exits 0.
let xr: typeof Xreactor;
let execution: typeof ExecutionModule;
let serialization: typeof Serialization;
let stepperModule: typeof StepperModule;

const SIZES = [10, 100, 1000] as const;
/** Steps per timed sample: the 10-step reactor runs 100 executions per sample, the 1,000-step one 1. */
const STEPS_PER_SAMPLE = 1000;
const WARMUP_ROUNDS = 5;
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 21);
const BASELINE_OPS = 20_000;
const HEAP_EXECUTIONS = 20;
/** Targets from the issue. */
const MAX_RATIO_TO_TRANSITION = 10;
const MAX_FLATNESS = 1.5;

const logger = pino({ level: 'silent' });

// ---------------------------------------------------------------------------------------------
// Reactors under test


let reactors: Map<number, AnyReactorDefinition>;

function freshRuntime(reactor: AnyReactorDefinition, store?: Store, middleware?: Middleware): Runtime {
  // `reactors` registers the definition (builds its execution machine) outside the timed region.
  return xr.createRuntime({
    logger,
    reactors: [reactor],
    ...(store === undefined ? {} : { store }),
    ...(middleware === undefined ? {} : { middleware: [middleware] }),
  });
}

/**
 * Close a runtime after its sample, outside the timed region, and let the event loop turn once.
 * A run in memory completes on microtasks alone, so without this turn the tasks the runtime's
 * embedded queue scheduled (setImmediate) would pile up and keep every runtime alive.
 */
async function dispose(runtime: Runtime): Promise<void> {
  await runtime.close();
  await new Promise<void>((resolve) => setImmediate(resolve));
}

async function runOnce(runtime: Runtime, reactor: AnyReactorDefinition, steps: number, executionId?: string): Promise<void> {
  const result = await runtime.run(reactor as any, {}, executionId === undefined ? {} : { executionId });
  if (result.status !== 'completed' || (result.value as { n: number }).n !== steps - 1) {
    throw new Error(`linear_${steps}: unexpected result ${JSON.stringify(result)}`);
  }
}

/** One sample: STEPS_PER_SAMPLE steps in executions of `steps` steps, on a fresh runtime; µs per step. */
async function sampleReactor(steps: number): Promise<number> {
  const reactor = reactors.get(steps)!;
  const runtime = freshRuntime(reactor);
  const executions = Math.max(1, Math.round(STEPS_PER_SAMPLE / steps));
  const start = performance.now();
  for (let i = 0; i < executions; i++) await runOnce(runtime, reactor, steps);
  const elapsed = performance.now() - start;
  await dispose(runtime);
  return (elapsed * 1000) / (executions * steps);
}

// ---------------------------------------------------------------------------------------------
// Raw baselines

const tinyMachine = setup({
  types: { context: {} as { count: number }, events: {} as { type: 'inc' } },
}).createMachine({
  context: { count: 0 },
  on: { inc: { actions: assign({ count: ({ context }) => context.count + 1 }) } },
});
const incEvent = { type: 'inc' } as const;

/** µs per bare `transition()` of a tiny machine with one `assign`. */
function sampleTransition(): number {
  let [snapshot] = initialTransition(tinyMachine);
  const start = performance.now();
  for (let i = 0; i < BASELINE_OPS; i++) [snapshot] = transition(tinyMachine, snapshot, incEvent);
  const elapsed = performance.now() - start;
  if (snapshot.context.count !== BASELINE_OPS) throw new Error('transition baseline miscounted');
  return (elapsed * 1000) / BASELINE_OPS;
}

/** µs per `actor.send()` of the same machine (for reference only: the targets use `transition()`). */
function sampleSend(): number {
  const actor = createActor(tinyMachine).start();
  const start = performance.now();
  for (let i = 0; i < BASELINE_OPS; i++) actor.send(incEvent);
  const elapsed = performance.now() - start;
  if (actor.getSnapshot().context.count !== BASELINE_OPS) throw new Error('send baseline miscounted');
  actor.stop();
  return (elapsed * 1000) / BASELINE_OPS;
}

let sink = 0;
async function noop(): Promise<void> {
  sink++;
}

/** µs per awaited no-op promise. */
async function samplePromise(): Promise<number> {
  const ops = BASELINE_OPS * 10;
  const start = performance.now();
  for (let i = 0; i < ops; i++) await noop();
  const elapsed = performance.now() - start;
  return (elapsed * 1000) / ops;
}

// ---------------------------------------------------------------------------------------------
// Helpers

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const fmt = (value: number, digits = 2) => value.toFixed(digits);
const pad = (text: string, width: number) => text.padStart(width);

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  return () => {
    gc();
    gc();
  };
}

// ---------------------------------------------------------------------------------------------
// Breakdown: a Store that delegates to the memory store and times what the host asks of it

interface Timings {
  /** Time inside store.commit (the memory store encodes snapshot, writes and outbox there). */
  commitMs: number;
  /** Time inside store.readResults (decoding the results a step reads). */
  readResultsMs: number;
  /** From a step's outcome (stepComplete hook) to the next commit: the host's transition(), partition and persist. */
  transitionMs: number;
  /** performance.now() at the last stepComplete hook, or undefined when no step outcome awaits its commit. */
  outcomeAt: number | undefined;
  lastCommit: Commit | undefined;
}

const newTimings = (): Timings => ({ commitMs: 0, readResultsMs: 0, transitionMs: 0, outcomeAt: undefined, lastCommit: undefined });

/**
 * A Store that delegates to the memory store and times the calls the host makes on the step
 * path. With the middleware below it also times what happens between a step's outcome and the
 * next commit: in the host loop that is the pure `transition()` of the execution machine (plus
 * `partition` of its actions and `persist`, which are a few property copies).
 */
function timedStore(timings: Timings): Store {
  const inner = xr.createMemoryStore();
  const commit: Store['commit'] = async (id, expectedRevision, next) => {
    const start = performance.now();
    if (timings.outcomeAt !== undefined) {
      timings.transitionMs += start - timings.outcomeAt;
      timings.outcomeAt = undefined;
    }
    const revision = await inner.commit(id, expectedRevision, next);
    timings.commitMs += performance.now() - start;
    if (next.writes.results.length > 0) timings.lastCommit = next;
    return revision;
  };
  const readResults: Store['readResults'] = async (id, steps) => {
    const start = performance.now();
    const results = await inner.readResults(id, steps);
    timings.readResultsMs += performance.now() - start;
    return results;
  };
  // Every other method of the Store port goes straight to the memory store.
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'commit') return commit;
      if (key === 'readResults') return readResults;
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Marks the moment a step's outcome is known; the host's next call is transition(), then commit. */
const outcomeMarker = (timings: Timings): Middleware => ({
  stepComplete: () => {
    timings.outcomeAt = performance.now();
  },
});

const machines = new Map<AnyReactorDefinition, ExecutionModule.ExecutionMachine>();
const machineOf = (reactor: AnyReactorDefinition) => {
  let machine = machines.get(reactor);
  if (machine === undefined) {
    // The plan view the runtime builds for a reactor that runs wholly in process.
    machine = execution.createExecutionMachine({
      reactor: reactor.name,
      steps: reactor.plan.map((s) => ({ name: s.name, retry: s.retry, tracked: s.tracked })),
      handoffIndex: null,
    });
    machines.set(reactor, machine);
  }
  return machine;
};

/**
 * The pure transitions the host performs for executions of `reactor`, replayed on the same
 * execution machine outside the host: input accepted, then one `step.succeeded` per step (each
 * with its `always` hop to the next step). µs per step.
 *
 * `hostStepper: true` replays them through the host's own stepper (`createMachineStepper`: the
 * machine's `transition(snapshot, event, scope)` with one actor scope per machine), which is what
 * the host calls. `hostStepper: false` calls xstate's free `transition()`, which builds a
 * throwaway actor (and two actor systems) on every call: what the host paid before the stepper.
 */
function sampleExecutionTransitions(reactor: AnyReactorDefinition, hostStepper = false): number {
  const machine = machineOf(reactor);
  const steps = reactor.plan.length;
  const executions = Math.max(1, Math.round(STEPS_PER_SAMPLE / steps));
  // Events are built before timing: the host builds them in the step performer, not in transition().
  const at = Date.now();
  const events = reactor.plan.map((_, index) => ({
    type: 'xreactor.step.succeeded' as const,
    at,
    index,
    attempt: 1,
    args: { prev: { n: index - 1, tag: 'step' } },
    result: { n: index, tag: 'step' },
  }));
  const accepted = { type: 'xreactor.input.accepted' as const, at };
  const stepper = stepperModule.createMachineStepper(machine);
  const start = performance.now();
  for (let e = 0; e < executions; e++) {
    const input = { executionId: `x${e}`, reactor: reactor.name, at };
    let [snapshot] = initialTransition(machine, input);
    if (hostStepper) {
      [snapshot] = stepper.next(snapshot, accepted);
      for (const event of events) [snapshot] = stepper.next(snapshot, event);
    } else {
      [snapshot] = transition(machine, snapshot, accepted);
      for (const event of events) [snapshot] = transition(machine, snapshot, event);
    }
    if (snapshot.value !== 'completed') throw new Error(`replay ended in ${JSON.stringify(snapshot.value)}`);
  }
  const elapsed = performance.now() - start;
  return (elapsed * 1000) / (executions * steps);
}

/** Each encoding the memory store performs for one step's commit: median µs over batches, and its size. */
function encodingParts(commit: Commit): { what: string; us: number; bytes: number }[] {
  const time = (fn: () => Uint8Array) => {
    const batches: number[] = [];
    for (let b = 0; b < 9; b++) {
      const start = performance.now();
      for (let i = 0; i < 1000; i++) fn();
      batches.push(performance.now() - start); // ms per 1,000 = µs each
    }
    return { us: median(batches), bytes: fn().length };
  };
  const [, value] = commit.writes.results[0]!;
  const undo = commit.writes.pushUndo[0]!;
  const trace = commit.writes.trace[0]!;
  const snapshot = commit.snapshot;
  return [
    { what: 'snapshot envelope', ...time(() => serialization.encodeEnvelope('execution', snapshot.machineVersion, { value: snapshot.value, context: snapshot.context })) },
    { what: 'step result', ...time(() => serialization.encode(value)) },
    { what: 'undo entry (args + result)', ...time(() => serialization.encode({ step: undo.step, args: undo.args, result: undo.result })) },
    { what: 'trace entry', ...time(() => serialization.encode(trace)) },
    { what: 'outbox, as the host passes it', ...time(() => serialization.encode(commit.outbox)) },
    { what: 'outbox, type + params only', ...time(() => serialization.encode(commit.outbox.map((e) => ({ type: e.type, params: e.params })))) },
  ];
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  [xr, execution, serialization, stepperModule] = await Promise.all([
    import('../src/index.js'),
    import('../machines/execution.js'),
    import('../src/serialization/index.js'),
    import('../src/runtime/machine-stepper.js'),
  ]);
  reactors = new Map(SIZES.map((n) => [n, linearReactor(xr.defineReactor, 'linear', n)]));
  const fullGc = exposeGc();
  const cpus = os.cpus();
  console.log('xreactor bench: inline steps, in memory');
  console.log(
    `node ${process.version}, ${os.platform()} ${os.arch()}, ${cpus.length} vCPU (${cpus[0]?.model.trim() ?? 'unknown'}), ` +
      `${ROUNDS} interleaved rounds after ${WARMUP_ROUNDS} warm-up rounds, ${STEPS_PER_SAMPLE} steps per sample`,
  );
  console.log(`load average at start: ${os.loadavg().map((l) => fmt(l)).join(' ')} (other processes on the machine inflate every figure alike)`);

  const kinds: { name: string; sample: () => number | Promise<number> }[] = [
    { name: 'transition', sample: sampleTransition },
    { name: 'promise', sample: samplePromise },
    { name: 'send', sample: sampleSend },
    ...SIZES.map((n) => ({ name: `steps${n}`, sample: () => sampleReactor(n) })),
  ];
  const samples = new Map<string, number[]>(kinds.map((k) => [k.name, []]));
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    // Rotate the order so no kind always runs right after the same other kind.
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(k + round) % kinds.length]!;
      const value = await kind.sample();
      if (round >= WARMUP_ROUNDS) samples.get(kind.name)!.push(value);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  const transitionUs = median(samples.get('transition')!);
  const promiseUs = median(samples.get('promise')!);
  const perStep = new Map(SIZES.map((n) => [n, median(samples.get(`steps${n}`)!)]));
  const spread = (name: string) => {
    const values = samples.get(name)!;
    return `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;
  };

  console.log('');
  console.log('baselines (median µs per operation, min–max over rounds):');
  console.log(`  bare XState transition() with one assign   ${pad(fmt(transitionUs, 3), 8)} µs   (${spread('transition')})`);
  console.log(`  awaited no-op promise                      ${pad(fmt(promiseUs, 3), 8)} µs   (${spread('promise')})`);
  console.log(`  (reference) actor.send() of that machine   ${pad(fmt(median(samples.get('send')!), 3), 8)} µs   (${spread('send')})`);
  console.log('');
  console.log(' steps | per-step µs | min–max µs    | ÷ transition | ÷ promise');
  console.log('-------|-------------|---------------|--------------|----------');
  for (const n of SIZES) {
    const us = perStep.get(n)!;
    console.log(
      `${pad(String(n), 6)} | ${pad(fmt(us), 11)} | ${spread(`steps${n}`).padEnd(13)} | ${pad(fmt(us / transitionUs, 1) + '×', 12)} | ${pad(fmt(us / promiseUs, 0) + '×', 9)}`,
    );
  }
  const flatness = perStep.get(1000)! / perStep.get(10)!;
  console.log('');
  console.log(`flatness (per-step cost at 1,000 steps ÷ at 10 steps): ${fmt(flatness)}`);

  // ---- memory retained by the memory store after runs of 1,000 steps
  {
    const reactor = reactors.get(1000)!;
    await new Promise<void>((resolve) => setImmediate(resolve));
    fullGc();
    const before = process.memoryUsage();
    const runtime = freshRuntime(reactor);
    for (let i = 0; i < HEAP_EXECUTIONS; i++) await runOnce(runtime, reactor, 1000, `mem-${i}`);
    fullGc();
    const after = process.memoryUsage();
    const heap = (after.heapUsed - before.heapUsed) / HEAP_EXECUTIONS;
    const buffers = (after.arrayBuffers - before.arrayBuffers) / HEAP_EXECUTIONS;
    const view = await runtime.find('mem-0'); // keeps the runtime (and its store) alive until here
    await dispose(runtime);
    console.log('');
    console.log(`memory after ${HEAP_EXECUTIONS} executions of 1,000 steps kept by one runtime's memory store (after full GC):`);
    console.log(`  heap used ${fmt(after.heapUsed / 2 ** 20, 1)} MiB (+${fmt((after.heapUsed - before.heapUsed) / 2 ** 20, 1)} MiB), array buffers +${fmt((after.arrayBuffers - before.arrayBuffers) / 2 ** 20, 1)} MiB`);
    console.log(
      `  retained per execution: heap ${fmt(heap / 1024, 0)} KiB + buffers ${fmt(buffers / 1024, 0)} KiB ` +
        `(${fmt((heap + buffers) / 1000, 0)} B per step; the stored execution has ${view.undoStack.length} undo entries and ${view.trace.length} trace entries)`,
    );
  }

  // ---- breakdown (sizes interleaved within each round, like the main samples)
  interface Parts {
    total: number;
    transition: number;
    commit: number;
    read: number;
    rest: number;
    replay: number;
  }
  const parts = new Map<number, Parts[]>(SIZES.map((n) => [n, []]));
  let lastCommit: Commit | undefined;
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    for (let k = 0; k < SIZES.length; k++) {
      const n = SIZES[(k + round) % SIZES.length]!;
      const reactor = reactors.get(n)!;
      const executions = Math.max(1, Math.round(STEPS_PER_SAMPLE / n));
      const timings = newTimings();
      const runtime = freshRuntime(reactor, timedStore(timings), outcomeMarker(timings));
      const start = performance.now();
      for (let i = 0; i < executions; i++) await runOnce(runtime, reactor, n);
      const elapsed = performance.now() - start;
      await dispose(runtime);
      const replay = sampleExecutionTransitions(reactor, true);
      if (round < WARMUP_ROUNDS) continue;
      const perStepUs = (ms: number) => (ms * 1000) / (executions * n);
      const total = perStepUs(elapsed);
      const transitionUs = perStepUs(timings.transitionMs);
      const commit = perStepUs(timings.commitMs);
      const read = perStepUs(timings.readResultsMs);
      parts.get(n)!.push({ total, transition: transitionUs, commit, read, rest: total - transitionUs - commit - read, replay });
      lastCommit = timings.lastCommit;
    }
  }
  console.log('');
  console.log('breakdown per step: median µs (median share of the sample); a timed Store wrapper and a stepComplete middleware, in the same runs:');
  console.log(' steps | total µs | transition in host   | store.commit  | readResults | rest (host loop, step body, hooks) | replayed transitions alone');
  console.log('-------|----------|----------------------|---------------|-------------|------------------------------------|----------------------------');
  for (const n of SIZES) {
    const rows = parts.get(n)!;
    const col = (key: keyof Parts) => `${fmt(median(rows.map((r) => r[key])))} (${fmt(median(rows.map((r) => (100 * r[key]) / r.total)), 0)} %)`;
    console.log(
      `${pad(String(n), 6)} | ${pad(fmt(median(rows.map((r) => r.total))), 8)} | ${pad(col('transition'), 20)} | ${pad(col('commit'), 13)} | ${pad(col('read'), 11)} | ${pad(col('rest'), 34)} | ${pad(fmt(median(rows.map((r) => r.replay))), 8)}`,
    );
  }
  if (lastCommit !== undefined) {
    console.log('');
    console.log("encodings in one step's commit to the memory store (measured apart; median µs each, bytes):");
    for (const { what, us, bytes } of encodingParts(lastCommit)) console.log(`  ${what.padEnd(30)} ${pad(fmt(us), 6)} µs ${pad(String(bytes), 5)} B`);
    const outboxKeys = Object.keys(lastCommit.outbox[0] ?? {}).join(', ');
    console.log(`  (an outbox entry as the host builds it has the keys: ${outboxKeys})`);
  }

  // ---- what a transition of the execution machine costs, with and without xstate's per-call actor
  {
    const reactor = reactors.get(1000)!;
    const asHost: number[] = [];
    const reused: number[] = [];
    for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
      const a = sampleExecutionTransitions(reactor, round % 2 === 0);
      const b = sampleExecutionTransitions(reactor, round % 2 !== 0);
      if (round < WARMUP_ROUNDS) continue;
      asHost.push(round % 2 === 0 ? b : a);
      reused.push(round % 2 === 0 ? a : b);
    }
    console.log('');
    console.log('execution-machine transition per step, replayed (1,000-step plan, median µs):');
    console.log(`  the host's stepper (machine.transition, one actor scope per machine)   ${pad(fmt(median(reused)), 7)} µs`);
    console.log(`  xstate's free transition() (a new inert actor per call; the old host)   ${pad(fmt(median(asHost)), 7)} µs`);
  }

  // ---- targets
  console.log('');
  const worstRatio = Math.max(...[...perStep.values()].map((us) => us / transitionUs));
  console.log(
    `${worstRatio <= MAX_RATIO_TO_TRANSITION ? 'TARGET MET' : 'TARGET MISSED'}: per-step cost within ${MAX_RATIO_TO_TRANSITION}× a bare XState transition ` +
      `(worst ${fmt(worstRatio, 1)}×: ${fmt(Math.max(...perStep.values()))} µs vs ${fmt(transitionUs, 3)} µs)`,
  );
  console.log(
    `${flatness <= MAX_FLATNESS ? 'TARGET MET' : 'TARGET MISSED'}: per-step cost flat from 10 to 1,000 steps ` +
      `(flatness ${fmt(flatness)}, target ≤ ${MAX_FLATNESS})`,
  );
  console.log(`load average at end: ${os.loadavg().map((l) => fmt(l)).join(' ')}`);
  if (sink < 0) console.log(sink);
}

runBench(main);
