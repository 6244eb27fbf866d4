/**
 * Async units under chaos: random `.background({ all: true })` owners of 2–5 steps, each a plain
 * step (ok / fails), an `asyncStep` (its body ok, failing always, failing its first attempt with
 * two attempts declared, or halting; with or without compensate) or an `asyncReactor` of a small
 * child (ok / fails), plus 0–2 reader steps that read one or two earlier units with `result(...)`
 * and either return what they saw or fail when a unit did not complete. Steps depend on earlier
 * ones at random (waitFor), and are declared in a random order that respects their dependencies.
 *
 * One memory store (seen through a recording wrapper) and a manual in-process queue on a test
 * clock, as in test/property/kernel-chaos.test.ts (both driven by test/support/chaos-schedule.ts):
 * a fast-check schedule decides which due job runs next (owner jobs, unit jobs, async children's
 * jobs, wakes, sweep jobs, redeliveries), which deliveries are duplicated (a copy under another
 * id, or the same job handled at once by a second worker), when a sweep runs and when time moves
 * on; and which deliveries are handled by a worker that dies at its N-th commit, right after it
 * lands (before its outbox is performed) or while it is sent (it never lands). A dead worker's job is delivered again or fails for good (then only a
 * sweep recovers the actor: a unit whose start job was lost is sent again after `mapStallMs`).
 *
 * Required of every run, against a reference interpreter written from the docs (docs/
 * defining-reactors.md "Async units", docs/actor-kernel.md "Async units on the kernel"), itself
 * checked against the same definitions run on a fresh plain runtime (no crash, jobs in order):
 * 1. the owner's outcome (status, failing step, message; a completed run's value, which holds
 *    what each reader received);
 * 2. every dispatched unit ends in the status the reference says (units run to their end even
 *    when the owner failed first) and its handlers ran as the reference says: the body once per
 *    attempt, compensate exactly once iff it failed with its body started (and compensate is
 *    declared); units the owner never reached do not exist;
 * 3. each actor's handler effects (owner steps, unit bodies, async children's steps) equal the
 *    reference's, except that the body (or compensate, undo) whose outcome commit a crash cut off
 *    (the commit never landed) may run once more, right after itself; each actor's stored trace
 *    equals the plain run's (the owner's but for its waits and discarded signals);
 * 4. no signal applied twice: each inbox entry is consumed by at most one landed commit, every
 *    entry that landed in an owner's inbox is consumed, and each unit's `<unit>.settled` lands in
 *    its owner's inbox exactly once;
 * 5. at the end: every actor settled, no inbox entry left on any actor, the active index empty.
 *
 * The first property runs with `asyncParkTimeoutMs: Infinity` (no wait times out). The second
 * gives it 100 ms – 20 s: a reader may then time out (it fails before its body and the owner rolls
 * back; the reference is the one in which that reader timed out), but only when the unit it waited
 * for had not settled by its deadline (dispatch + asyncParkTimeoutMs). Every process, a dying one
 * too, lives on the one test clock: a unit's backoff slept in a job is time passing for all.
 *
 * `ASYNC_CHAOS_RUNS` sets the number of runs (default 150; the timeout property as many,
 * or `ASYNC_CHAOS_TIMEOUT_RUNS`); `ASYNC_CHAOS_SEED` (with `ASYNC_CHAOS_PATH` from a failure
 * report, and `-t` naming the property) replays a run. Deterministic cases found by the
 * properties are pinned at the end of the file.
 */
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryStore, createRuntime, defineReactor, fail, halt } from '../../src/index.js';
import type { AnyReactorDefinition, AsyncOutcome, RunResult, Store, TraceEntry } from '../../src/index.js';
import type { Clock } from '../../src/internal/clock.js';
import { createEngine } from '../../src/runtime/engine.js';
import { statusOf } from '../../src/runtime/host.js';
import { createJobHandler } from '../../src/runtime/worker.js';
import type { JobHandler } from '../../src/queue/queue.js';
import type { Commit, InboxEntry, SpawnActor } from '../../src/store/store.js';
import { unitTagsOf } from '../../machines/unit.js';
import { createInProcessQueue, createTestClock } from '../../src/testing/index.js';
import { definitionOrder, referenceWaves } from './support/reference-plan.js';
import type { CommitDeath } from '../support/dying-store.js';
import { chaosScheduleArb, DOOMED_LEASE_TTL_MS, driveSchedule, equalsWithRepeats, REDELIVERY_MS, scheduleReport } from '../support/chaos-schedule.js';
import type { ChaosWorld, Choice } from '../support/chaos-schedule.js';
import { recordingStore } from '../support/recording-store.js';
import type { CommitLedger } from '../support/recording-store.js';

const RUNS = Number(process.env['ASYNC_CHAOS_RUNS'] ?? 150);
const SEED = process.env['ASYNC_CHAOS_SEED'] === undefined ? (Date.now() ^ (Math.random() * 0x100000000)) | 0 : Number(process.env['ASYNC_CHAOS_SEED']);
const PATH = process.env['ASYNC_CHAOS_PATH'];
const TEST_TIMEOUT_MS = Math.max(60_000, RUNS * 400);
const silent = pino({ level: 'silent' });
const INPUT = { x: 7 };

/** A unit queued this long (its start job lost, or failed for good) is sent again by a sweep. */
const STALL_MS = 20_000;
/** Deaths per run at most. */
const MAX_CRASHES = 3;
/** Scheduler steps before a run that has not settled and gone quiet is declared stuck. */
const MAX_LOOP = 600;
/** `ASYNC_CHAOS_TIMEOUT_RUNS`: runs of the property whose readers may time out (default as many as the other's). */
const TIMEOUT_RUNS = Number(process.env['ASYNC_CHAOS_TIMEOUT_RUNS'] ?? RUNS);

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

/** An async step's body: `flaky` throws on its first attempt and succeeds on its second. */
type UnitBody = 'ok' | 'fails' | 'flaky' | 'halts';

interface Common {
  readonly name: string;
  /** Units a reader reads (its dependencies through `result`); empty for the others. */
  readonly reads: readonly string[];
  readonly waitFor: readonly string[];
}
interface PlainSpec extends Common {
  readonly kind: 'plain';
  readonly fails: boolean;
  readonly compensate: boolean;
  readonly undo: boolean;
}
interface UnitSpec extends Common {
  readonly kind: 'asyncStep';
  readonly body: UnitBody;
  readonly maxAttempts: number;
  readonly delayMs: number;
  readonly compensate: boolean;
}
interface ChildSpec extends Common {
  readonly kind: 'asyncReactor';
  /** The child's steps: `c0` (and `c1`, waiting for `c0`); the last one fails when `fails`. */
  readonly steps: 1 | 2;
  readonly fails: boolean;
}
interface ReaderSpec extends Common {
  readonly kind: 'reader';
  /** Fails on the first unit it reads that did not complete; else returns what it read. */
  readonly strict: boolean;
  readonly compensate: boolean;
  readonly undo: boolean;
}
type StepSpec = PlainSpec | UnitSpec | ChildSpec | ReaderSpec;

interface Scenario {
  readonly steps: readonly StepSpec[];
  /** The order the steps are given to the builder (dependencies first). */
  readonly defOrder: readonly string[];
}

const isUnit = (s: StepSpec): s is UnitSpec | ChildSpec => s.kind === 'asyncStep' || s.kind === 'asyncReactor';

const mainNodeArb: fc.Arbitrary<Omit<PlainSpec, keyof Common> | Omit<UnitSpec, keyof Common> | Omit<ChildSpec, keyof Common>> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('plain' as const),
      fails: fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      compensate: fc.boolean(),
      undo: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({
        kind: fc.constant('asyncStep' as const),
        body: fc.oneof(
          { weight: 3, arbitrary: fc.constant<UnitBody>('ok') },
          { weight: 2, arbitrary: fc.constant<UnitBody>('fails') },
          { weight: 2, arbitrary: fc.constant<UnitBody>('flaky') },
          { weight: 1, arbitrary: fc.constant<UnitBody>('halts') },
        ),
        maxAttempts: fc.integer({ min: 1, max: 2 }),
        delayMs: fc.constantFrom(0, 100, 7_000),
        compensate: fc.boolean(),
      })
      // A flaky body declares two attempts; the others one or two.
      .map((u) => (u.body === 'flaky' ? { ...u, maxAttempts: 2 } : u)),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('asyncReactor' as const), steps: fc.constantFrom<1 | 2>(1, 2), fails: fc.boolean() }),
  },
);

const MAX_MAIN = 5;
const rawArb = fc.record({
  main: fc.array(fc.record({ node: mainNodeArb, deps: fc.array(fc.boolean(), { minLength: MAX_MAIN, maxLength: MAX_MAIN }), priority: fc.nat({ max: 100 }) }), { minLength: 2, maxLength: MAX_MAIN }),
  readers: fc.array(
    fc.record({
      // The units it reads (indices into the units, mod their number; a second one when given).
      first: fc.nat({ max: 10 }),
      second: fc.option(fc.nat({ max: 10 }), { nil: undefined }),
      strict: fc.boolean(),
      compensate: fc.boolean(),
      undo: fc.boolean(),
      deps: fc.array(fc.boolean(), { minLength: MAX_MAIN + 1, maxLength: MAX_MAIN + 1 }),
      priority: fc.nat({ max: 100 }),
    }),
    { maxLength: 2 },
  ),
});

const scenarioArb: fc.Arbitrary<Scenario> = rawArb.map((raw) => {
  const main: StepSpec[] = raw.main.map((m, i): StepSpec => ({ ...m.node, name: `s${i}`, reads: [], waitFor: m.deps.slice(0, i).flatMap((d, j) => (d ? [`s${j}`] : [])) }));
  const units = main.filter(isUnit).map((s) => s.name);
  const readers: ReaderSpec[] =
    units.length === 0
      ? []
      : raw.readers.map((r, i) => {
          const first = units[r.first % units.length]!;
          const second = r.second === undefined ? undefined : units[r.second % units.length];
          const reads = second === undefined || second === first ? [first] : [first, second];
          // A reader may also wait for other main steps, and the second reader for the first.
          const others = [...main.map((s) => s.name), ...(i === 1 ? ['r0'] : [])];
          const waitFor = others.filter((n, j) => r.deps[j] === true && !reads.includes(n));
          return { kind: 'reader', name: `r${i}`, reads, waitFor, strict: r.strict, compensate: r.compensate, undo: r.undo };
        });
  const steps = [...main, ...readers];
  const priorities = [...raw.main.map((m) => m.priority), ...raw.readers.slice(0, readers.length).map((r) => r.priority)];
  return { steps, defOrder: definitionOrder(steps, priorities) };
});

// ---------------------------------------------------------------------------
// Values the generated steps produce
// ---------------------------------------------------------------------------

const plainValue = (name: string) => ({ v: name });
const unitValue = (name: string) => `unit ${name}`;
const childValue = (name: string, steps: 1 | 2) => `${name}.c${steps - 1}`;
const failMessage = (what: string) => `${what} failed`;
const haltReason = (name: string) => `${name} halted`;

/** What a reader returns for what it read. */
function seen(outcome: AsyncOutcome<unknown>): string {
  switch (outcome.status) {
    case 'completed':
      return `completed:${String(outcome.value)}`;
    case 'failed':
      return `failed:${outcome.error.message}`;
    case 'halted':
      return `halted:${outcome.reason}`;
    case 'cancelled':
      return `cancelled:${outcome.reason}`;
  }
}

const strictMessage = (reader: string, unit: string, status: string) => `${reader}: unit ${unit} ${status}`;

// ---------------------------------------------------------------------------
// The reference interpreter (from the docs, not the implementation)
// ---------------------------------------------------------------------------

/** Handler effects by actor, keyed relative to the owner: '' (the owner), '.<unit>' (a unit or async child). */
type Effects = Map<string, string[]>;

interface UnitEnd {
  readonly status: 'completed' | 'failed' | 'halted';
  readonly outcome: AsyncOutcome<unknown>;
}

interface Reference {
  readonly result: Record<string, unknown>;
  /** Every unit the owner dispatched, with its end. */
  readonly units: Map<string, UnitEnd>;
  /** Units the owner never reached (their actors do not exist). */
  readonly undispatched: string[];
  readonly effects: Effects;
}

/**
 * `timedOut`: the reader whose wait timed out (asyncParkTimeoutMs); it fails before its body (it
 * is not compensated; the steps before it are undone). Its message is checked apart.
 */
function reference(sc: Scenario, timedOut?: string): Reference {
  const effects: Effects = new Map([['', []]]);
  const owner = effects.get('')!;
  const units = new Map<string, UnitEnd>();
  const stack: (PlainSpec | ReaderSpec)[] = [];
  const value: Record<string, unknown> = {};
  const plan = referenceWaves(sc.steps, sc.defOrder);
  let result: Record<string, unknown> | undefined;
  const rollBack = (step: PlainSpec | ReaderSpec, message: string | undefined, started = true) => {
    if (started && step.compensate) owner.push(`compensate:${step.name}`);
    for (const done of [...stack].reverse()) if (done.undo) owner.push(`undo:${done.name}`);
    result = { status: 'failed', step: step.name, message };
  };
  for (const step of plan) {
    switch (step.kind) {
      case 'plain':
        owner.push(`run:${step.name}`);
        if (step.fails) rollBack(step, failMessage(step.name));
        else {
          stack.push(step);
          value[step.name] = plainValue(step.name);
        }
        break;
      case 'asyncStep': {
        const log: string[] = [];
        effects.set(`.${step.name}`, log);
        if (step.body === 'fails') {
          for (let a = 0; a < step.maxAttempts; a++) log.push(`run:${step.name}`);
          if (step.compensate) log.push(`compensate:${step.name}`);
          units.set(step.name, { status: 'failed', outcome: { status: 'failed', error: new Error(failMessage(step.name)) } });
        } else if (step.body === 'halts') {
          log.push(`run:${step.name}`);
          units.set(step.name, { status: 'halted', outcome: { status: 'halted', reason: haltReason(step.name) } });
        } else {
          log.push(`run:${step.name}`);
          if (step.body === 'flaky') log.push(`run:${step.name}`);
          units.set(step.name, { status: 'completed', outcome: { status: 'completed', value: unitValue(step.name) } });
        }
        break;
      }
      case 'asyncReactor': {
        const log = step.steps === 1 ? ['run:c0'] : ['run:c0', 'run:c1'];
        const last = `c${step.steps - 1}`;
        if (step.fails) {
          log.push(`compensate:${last}`);
          if (step.steps === 2) log.push('undo:c0');
          units.set(step.name, { status: 'failed', outcome: { status: 'failed', error: new Error(failMessage(`${step.name}.${last}`)) } });
        } else {
          units.set(step.name, { status: 'completed', outcome: { status: 'completed', value: childValue(step.name, step.steps) } });
        }
        effects.set(`.${step.name}`, log);
        break;
      }
      case 'reader': {
        if (step.name === timedOut) {
          rollBack(step, undefined, false);
          break;
        }
        owner.push(`run:${step.name}`);
        const outcomes = step.reads.map((u) => ({ u, end: units.get(u)! }));
        const bad = outcomes.find((o) => o.end.status !== 'completed');
        if (step.strict && bad !== undefined) rollBack(step, strictMessage(step.name, bad.u, bad.end.status));
        else {
          stack.push(step);
          value[step.name] = outcomes.map((o) => seen(o.end.outcome));
        }
        break;
      }
    }
    if (result !== undefined) break;
  }
  const undispatched = sc.steps.filter((s) => isUnit(s) && !units.has(s.name)).map((s) => s.name);
  return { result: result ?? { status: 'completed', value }, units, undispatched, effects };
}

/** A run's result in the shape of the reference's. */
function resultShape(result: RunResult<unknown> | { readonly status: string }): Record<string, unknown> {
  const r = result as RunResult<unknown>;
  switch (r.status) {
    case 'completed':
      return { status: 'completed', value: r.value };
    case 'failed':
      return { status: 'failed', step: r.step, message: r.message };
    case 'halted':
      return { status: 'halted', step: r.step, reason: r.reason };
    default:
      return { status: result.status };
  }
}

// ---------------------------------------------------------------------------
// Building the real reactors
// ---------------------------------------------------------------------------

/** Where the built handlers report: effects by actor id, and inconsistencies seen inside handlers. */
interface HandlerLog {
  readonly effects: Map<string, string[]>;
  readonly problems: string[];
}

const record = (log: HandlerLog, actor: string, effect: string) => {
  const list = log.effects.get(actor) ?? [];
  list.push(effect);
  log.effects.set(actor, list);
};

let reactors = 0;

type Ctx = { readonly executionId: string; readonly attempt: number };

function buildChild(step: ChildSpec, log: HandlerLog, prefix: string): AnyReactorDefinition {
  reactors += 1;
  let builder: any = defineReactor({ name: `${prefix}_child_${reactors}` });
  for (let i = 0; i < step.steps; i++) {
    const name = `c${i}`;
    const failing = step.fails && i === step.steps - 1;
    builder = builder.step(name, {
      ...(i === 0 ? {} : { waitFor: ['c0'] }),
      run: (_args: unknown, ctx: Ctx) => {
        record(log, ctx.executionId, `run:${name}`);
        return failing ? fail(new Error(failMessage(`${step.name}.${name}`))) : `${step.name}.${name}`;
      },
      compensate: (_error: unknown, _args: unknown, ctx: Ctx) => record(log, ctx.executionId, `compensate:${name}`),
      undo: (_result: unknown, _args: unknown, ctx: Ctx) => record(log, ctx.executionId, `undo:${name}`),
    });
  }
  return builder.returns(`c${step.steps - 1}`).build() as AnyReactorDefinition;
}

/** The owner of a scenario, `.background({ all: true })`, whose handlers report to `log`. */
function buildOwner(sc: Scenario, log: HandlerLog, prefix: string): AnyReactorDefinition {
  reactors += 1;
  let builder: any = defineReactor({ name: `${prefix}_owner_${reactors}` });
  for (const name of sc.defOrder) {
    const step = sc.steps.find((s) => s.name === name)!;
    const use: Record<string, unknown> = step.waitFor.length > 0 ? { waitFor: step.waitFor } : {};
    switch (step.kind) {
      case 'plain': {
        let produced = false;
        builder = builder.step(name, {
          ...use,
          run: (_args: unknown, ctx: Ctx) => {
            record(log, ctx.executionId, `run:${name}`);
            if (step.fails) return fail(new Error(failMessage(name)));
            produced = true;
            return plainValue(name);
          },
          ...(step.compensate ? { compensate: (_e: unknown, _a: unknown, ctx: Ctx) => record(log, ctx.executionId, `compensate:${name}`) } : {}),
          ...(step.undo
            ? {
                undo: (result: unknown, _a: unknown, ctx: Ctx) => {
                  record(log, ctx.executionId, `undo:${name}`);
                  if (!produced) log.problems.push(`${name}: undone but its body never produced a value`);
                  else if (JSON.stringify(result) !== JSON.stringify(plainValue(name))) log.problems.push(`${name}: undo received ${JSON.stringify(result)}`);
                },
              }
            : {}),
        });
        break;
      }
      case 'asyncStep':
        builder = builder.asyncStep(name, {
          ...use,
          args: ({ input }: { input: (n: string) => unknown }) => ({ n: input('x') }),
          ...(step.maxAttempts > 1 ? { retries: { maxAttempts: step.maxAttempts, backoff: 'fixed', baseDelayMs: step.delayMs } } : {}),
          run: (args: { n: number }, ctx: Ctx) => {
            // A unit's handlers see its owner's execution id; its effects are the unit's.
            record(log, `${ctx.executionId}.${name}`, `run:${name}`);
            if (args?.n !== INPUT.x) log.problems.push(`${name}: its body got ${JSON.stringify(args)}`);
            switch (step.body) {
              case 'ok':
                return unitValue(name);
              case 'fails':
                throw new Error(failMessage(name));
              case 'flaky':
                if (ctx.attempt === 1) throw new Error(`${name} flaked`);
                return unitValue(name);
              case 'halts':
                return halt(haltReason(name));
            }
          },
          ...(step.compensate
            ? {
                compensate: (error: Error, _a: unknown, ctx: Ctx) => {
                  record(log, `${ctx.executionId}.${name}`, `compensate:${name}`);
                  if (error?.message !== failMessage(name)) log.problems.push(`${name}: compensated for ${String(error?.message)}`);
                },
              }
            : {}),
        });
        break;
      case 'asyncReactor':
        builder = builder.asyncReactor(name, buildChild(step, log, prefix), use);
        break;
      case 'reader': {
        let produced: unknown;
        builder = builder.step(name, {
          ...use,
          args: ({ result }: { result: (n: string) => unknown }) => Object.fromEntries(step.reads.map((u) => [u, result(u)])),
          run: (args: Record<string, AsyncOutcome<unknown>>, ctx: Ctx) => {
            record(log, ctx.executionId, `run:${name}`);
            const outcomes = step.reads.map((u) => ({ u, outcome: args[u]! }));
            const bad = outcomes.find((o) => o.outcome.status !== 'completed');
            if (step.strict && bad !== undefined) return fail(new Error(strictMessage(name, bad.u, bad.outcome.status)));
            produced = outcomes.map((o) => seen(o.outcome));
            return produced;
          },
          ...(step.compensate ? { compensate: (_e: unknown, _a: unknown, ctx: Ctx) => record(log, ctx.executionId, `compensate:${name}`) } : {}),
          ...(step.undo
            ? {
                undo: (result: unknown, _a: unknown, ctx: Ctx) => {
                  record(log, ctx.executionId, `undo:${name}`);
                  if (JSON.stringify(result) !== JSON.stringify(produced)) log.problems.push(`${name}: undo received ${JSON.stringify(result)}, its body returned ${JSON.stringify(produced)}`);
                },
              }
            : {}),
        });
        break;
      }
    }
  }
  return builder.background({ all: true }).build() as AnyReactorDefinition;
}

/** A world's effects keyed relative to the owner `id` ('' for the owner, '.<unit>' for a unit or async child). */
function relative(log: HandlerLog, id: string): Effects {
  const out: Effects = new Map();
  for (const [actor, list] of log.effects) {
    const key = actor === id ? '' : actor.startsWith(`${id}.`) ? actor.slice(id.length) : `?${actor}`;
    out.set(key, [...list]);
  }
  return out;
}

/** Effects without the actors that had none. */
const nonEmpty = (effects: Effects): Effects => new Map([...effects].filter(([, list]) => list.length > 0));

// ---------------------------------------------------------------------------
// Schedules
// ---------------------------------------------------------------------------

// A dead worker's job is mostly delivered again (as a stalled BullMQ job), sometimes failed for good.
const scheduleArb = chaosScheduleArb({ maxCommit: 30, job: fc.oneof({ weight: 3, arbitrary: fc.constant('redelivered' as const) }, { weight: 1, arbitrary: fc.constant('failed' as const) }), noCrashWeight: 2 });

// ---------------------------------------------------------------------------
// What the store saw: the inbox entries each landed commit consumed
// ---------------------------------------------------------------------------

class CommitBook implements CommitLedger {
  /** Inbox entries consumed by landed commits, by actor. */
  readonly consumed = new Map<string, InboxEntry[]>();
  /** When (on the world's clock) each actor's first settling commit landed. */
  readonly settledAt = new Map<string, number>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  created(actor: SpawnActor | { readonly id: string; readonly commit: Commit }): void {
    for (const child of actor.commit.spawn ?? []) this.created(child);
  }

  landed(id: string, _revision: number, commit: Commit, consumed: readonly InboxEntry[]): void {
    if (consumed.length > 0) this.consumed.set(id, [...(this.consumed.get(id) ?? []), ...consumed]);
    if (!this.settledAt.has(id) && SETTLED.includes(storedStatus(commit.snapshot))) this.settledAt.set(id, this.#clock.now());
    for (const child of commit.spawn ?? []) this.created(child);
  }
}

// ---------------------------------------------------------------------------
// One run in the chaos world
// ---------------------------------------------------------------------------

/** The world the schedule drives (time, store, queue, runtime, deaths, journal), and what this test reads of it. */
interface World extends ChaosWorld {
  readonly book: CommitBook;
  readonly log: HandlerLog;
  readonly id: string;
  readonly dispatched: RunResult<unknown> | { readonly status: string };
}

let executions = 0;

const engineOptions = (asyncParkTimeoutMs: number) => ({ logger: silent, asyncParkTimeoutMs, mapStallMs: STALL_MS }) as const;

async function chaosRun(sc: Scenario, schedule: readonly Choice[], parkTimeoutMs: number): Promise<World> {
  const time = createTestClock();
  const base = createMemoryStore({ clock: time });
  const book = new CommitBook(time);
  const store = recordingStore(base, book);
  const journal: string[] = [];
  const queue = createInProcessQueue({
    mode: 'manual',
    clock: time,
    redeliveryDelayMs: () => REDELIVERY_MS,
    onError: (error, job, attempt) => void journal.push(`  ${job.id} threw (delivery ${attempt}): ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`),
  });
  const log: HandlerLog = { effects: new Map(), problems: [] };
  const owner = buildOwner(sc, log, 'chaos');
  const reactorList: AnyReactorDefinition[] = [owner];
  const runtime = createRuntime({ ...engineOptions(parkTimeoutMs), store, queue, clock: time, worker: false, reactors: reactorList });
  const liveWorker = (): JobHandler => createJobHandler(createEngine({ ...engineOptions(parkTimeoutMs), store, queue, clock: time, reactors: reactorList }));
  const workerA = liveWorker();
  const workerB = liveWorker();
  const deaths: CommitDeath[] = [];
  executions += 1;
  const id = `async-${executions}`;

  const dispatched = await runtime.run(owner, INPUT, { executionId: id });
  const world: World = { time, store, queue, book, runtime, log, deaths, id, dispatched, journal };
  expect(dispatched.status).toBe('dispatched');

  await driveSchedule(world, schedule, {
    workers: [workerA, workerB],
    // A dying worker lives on the world's clock (a unit's backoff it sleeps is time passing for
    // every process), but its timers (lease renewals) stop when it dies.
    doomedEngine: (doomed) => {
      const timers = new Set<() => void>();
      const clock: Clock = {
        now: () => time.now(),
        sleep: (ms, signal) => time.sleep(ms, signal),
        every: (ms, fn) => {
          const stop = time.every(ms, fn);
          timers.add(stop);
          return () => (timers.delete(stop), stop());
        },
      };
      return {
        engine: createEngine({ ...engineOptions(parkTimeoutMs), store: doomed, queue, clock, reactors: reactorList, leaseTtlMs: DOOMED_LEASE_TTL_MS }),
        stop: () => {
          for (const stop of timers) stop();
        },
      };
    },
    describe: () => describeWorld(world, sc),
    // Nothing pending: let every dead worker's lease run out (and a queued unit's stall pass) and
    // sweep. Quiet once two sweeps in a row find nothing.
    maxSteps: MAX_LOOP,
    maxCrashes: MAX_CRASHES,
    settleMs: Math.max(DOOMED_LEASE_TTL_MS, STALL_MS) + 1,
    quiet: 'in-a-row',
  });
  return world;
}

/** The actor ids a scenario's run can have: the owner and one per unit. */
function actorIds(sc: Scenario, id: string): string[] {
  return [id, ...sc.steps.filter(isUnit).map((s) => `${id}.${s.name}`)];
}

const SETTLED = ['completed', 'failed', 'halted', 'cancelled'];

/** An actor's status as stored: a unit's, or an execution's. */
function storedStatus(snapshot: { readonly kind: string; readonly value: unknown }): string {
  if (snapshot.kind === 'unit') return unitTagsOf(snapshot.value).has('settled') ? String(snapshot.value) : `unit:${JSON.stringify(snapshot.value)}`;
  return statusOf(snapshot.value);
}

async function describeWorld(world: World, sc: Scenario): Promise<string> {
  const lines: string[] = [`scenario: ${JSON.stringify(sc)}`];
  for (const actor of actorIds(sc, world.id)) {
    const loaded = await world.store.load(actor);
    if (loaded === undefined) continue;
    lines.push(`${actor}: ${loaded.snapshot.kind} ${JSON.stringify(loaded.snapshot.value)} rev ${loaded.revision} inbox ${JSON.stringify(loaded.inbox.entries.map((e) => e.dedupeKey))} (seq ${loaded.inbox.seq}) outbox ${JSON.stringify(loaded.outbox.map((e) => e.type))} leased ${await world.store.hasLease(actor)}`);
  }
  lines.push(`effects: ${JSON.stringify([...world.log.effects])}`);
  lines.push(...scheduleReport(world));
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// The same definitions on a fresh plain runtime, its jobs run in order by its own worker
// ---------------------------------------------------------------------------

/**
 * The reference run in the runtime: no crash, no duplicate, each job in the order it was
 * enqueued. (A manual queue drained to the end rather than an `inline` one: every inline queue
 * leaves an AsyncLocalStorage enabled after close, which slows every later promise of the
 * process; see the report of this test.)
 */
async function plainRun(sc: Scenario, id: string) {
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const queue = createInProcessQueue({ mode: 'manual', clock });
  const log: HandlerLog = { effects: new Map(), problems: [] };
  const owner = buildOwner(sc, log, 'plain');
  const runtime = createRuntime({ ...engineOptions(Infinity), clock, store, queue, worker: true, reactors: [owner] });
  try {
    const dispatched = await runtime.run(owner, INPUT, { executionId: id });
    await queue.drain({ includeDelayed: true });
    const result = dispatched.status === 'dispatched' ? await runtime.awaitResult(id, { timeoutMs: 10 }) : dispatched;
    const units = new Map<string, string>();
    for (const s of sc.steps.filter(isUnit)) {
      const loaded = await store.load(`${id}.${s.name}`);
      if (loaded !== undefined) units.set(s.name, storedStatus(loaded.snapshot));
    }
    return { result: resultShape(result), effects: relative(log, id), problems: log.problems, units, traces: await tracesOf(store, sc, id) };
  } finally {
    await runtime.close();
    await queue.close();
  }
}

// ---------------------------------------------------------------------------
// Checking a run
// ---------------------------------------------------------------------------

/**
 * Each actor's stored trace without times and error details. The owner's without its `awaiting`
 * and `signal_discarded` entries: whether a reader finds its unit settled, and whether a unit's
 * settle reaches its owner before or after the owner settled, depend on the delivery order.
 */
async function tracesOf(store: Store, sc: Scenario, id: string): Promise<Map<string, unknown[]>> {
  const traces = new Map<string, unknown[]>();
  for (const actor of actorIds(sc, id)) {
    if ((await store.load(actor)) === undefined) continue;
    const entries = (await store.readTrace(actor)).filter((t) => actor !== id || (t.type !== 'awaiting' && t.type !== 'signal_discarded'));
    traces.set(
      actor,
      entries.map(({ type, step, attempt, reason, actors, signal, delayMs }) => Object.fromEntries(Object.entries({ type, step, attempt, reason, actors, signal, delayMs }).filter(([, v]) => v !== undefined))),
    );
  }
  return traces;
}

/**
 * The handler effects a death cut off, by actor: the body, compensate or undo whose outcome the
 * commit it died at records, when that commit did not land (it may run again). None when the
 * commit landed: the process died before performing its outbox, so nothing had started.
 */
function cutOff(death: CommitDeath, id: string): { readonly key: string; readonly effect: string }[] {
  if (death.landed) return [];
  const key = death.id === id ? '' : death.id.slice(id.length);
  return death.commit.writes.trace.flatMap((entry: TraceEntry) => {
    const step = entry.step ?? '';
    if (['run', 'skipped', 'halt', 'failed', 'retry'].includes(entry.type)) return [{ key, effect: `run:${step}` }];
    if (entry.type === 'compensate' || entry.type === 'compensate_failure') return [{ key, effect: `compensate:${step}` }];
    if (entry.type === 'undo' || entry.type === 'undo_failure') return [{ key, effect: `undo:${step}` }];
    return [];
  });
}

/** The reader whose wait for a unit timed out, when the run failed for it (with its message's pattern). */
function timedOutReader(sc: Scenario, id: string, result: RunResult<unknown> | { readonly status: string }): { readonly reader: string; readonly message: RegExp } | undefined {
  const r = result as RunResult<unknown>;
  if (r.status !== 'failed') return undefined;
  const cause = (r.error as { cause?: { code?: string } } | undefined)?.cause;
  const reader = sc.steps.find((s): s is ReaderSpec => s.kind === 'reader' && s.name === r.step);
  if (reader === undefined || cause?.code !== 'async_wait_timeout') return undefined;
  const units = reader.reads.join('|');
  return {
    reader: reader.name,
    message: new RegExp(`^reactor "[^"]+" step "${reader.name}": argument from result\\("(${units})"\\) cannot be resolved: async unit ${id}\\.(${units}) did not settle within \\d+ ms while step "${reader.name}" waited for it`),
  };
}

/**
 * One run in the chaos world, checked. `parkTimeoutMs` finite: a reader may time out (the
 * schedule decides when time passes); the reference is then the one in which the reader the run
 * failed for timed out, and no plain run is compared (its own timing differs).
 */
async function checkRun(sc: Scenario, schedule: readonly Choice[], parkTimeoutMs = Infinity): Promise<void> {
  const world = await chaosRun(sc, schedule, parkTimeoutMs);
  const { store, id, runtime } = world;
  try {
    const result = await runtime.awaitResult(id, { timeoutMs: 10 });
    const timeout = Number.isFinite(parkTimeoutMs) ? timedOutReader(sc, id, result) : undefined;
    const ref = reference(sc, timeout?.reader);
    const plain = Number.isFinite(parkTimeoutMs) ? undefined : await plainRun(sc, id);
    if (plain !== undefined) {
      // The plain run is the reference run in the runtime: it must agree with the interpreter.
      expect({ plain: 'problems', problems: plain.problems }).toEqual({ plain: 'problems', problems: [] });
      expect({ plain: 'result', result: plain.result }).toEqual({ plain: 'result', result: ref.result });
      expect({ plain: 'effects', effects: nonEmpty(plain.effects) }).toEqual({ plain: 'effects', effects: nonEmpty(ref.effects) });
      expect({ plain: 'units', units: plain.units }).toEqual({ plain: 'units', units: new Map([...ref.units].map(([u, end]) => [u, end.status])) });
    }

    // 1. The owner's outcome (a timed-out reader's message by its pattern).
    expect({ owner: id, result: resultShape(result) }).toEqual({ owner: id, result: timeout === undefined ? ref.result : { ...ref.result, message: expect.stringMatching(timeout.message) } });
    if (timeout !== undefined) {
      // A wait times out only when its unit did not settle within asyncParkTimeoutMs of its
      // dispatch: a unit that settled in time (its signal in the owner's inbox) is read.
      const unit = timeout.message.exec((result as { message: string }).message)![2]!;
      const dispatchedAt = (await store.readTrace(id)).find((t) => t.type === 'dispatched' && t.step === unit)?.at;
      const settledAt = world.book.settledAt.get(`${id}.${unit}`);
      const deadline = dispatchedAt === undefined ? undefined : dispatchedAt + parkTimeoutMs;
      expect({ reader: timeout.reader, unit, dispatchedAt, deadline, settledInTime: settledAt !== undefined && deadline !== undefined && settledAt < deadline, settledAt }).toEqual({
        reader: timeout.reader,
        unit,
        dispatchedAt,
        deadline,
        settledInTime: false,
        settledAt,
      });
    }

    // 2. Every dispatched unit ends as the reference says; the units never reached do not exist.
    for (const [unit, end] of ref.units) {
      const view = await runtime.find(`${id}.${unit}`);
      expect({ unit, status: view.status }).toEqual({ unit, status: end.status });
    }
    for (const unit of ref.undispatched) expect({ unit, exists: (await store.load(`${id}.${unit}`)) !== undefined }).toEqual({ unit, exists: false });

    // 2 + 3. Effects: the reference's, per actor, but for the handlers a death cut off, which may run once more.
    expect(world.log.problems).toEqual([]);
    const actual = relative(world.log, id);
    const cut = world.deaths.flatMap((d) => cutOff(d, id));
    const keys = new Set([...actual.keys(), ...ref.effects.keys()]);
    for (const key of keys) {
      const got = actual.get(key) ?? [];
      const want = ref.effects.get(key) ?? [];
      const repeats = cut.filter((c) => c.key === key).map((c) => c.effect);
      if (!equalsWithRepeats(got, want, repeats)) expect({ actor: `${id}${key}`, effects: got, mayRepeatOnce: repeats }).toEqual({ actor: `${id}${key}`, effects: want, mayRepeatOnce: repeats });
    }
    // A unit's compensate: exactly once iff it failed with its body started (once more only when a crash cut its commit off).
    for (const s of sc.steps) {
      if (s.kind !== 'asyncStep' || !ref.units.has(s.name)) continue;
      const key = `.${s.name}`;
      const compensations = (actual.get(key) ?? []).filter((e) => e === `compensate:${s.name}`).length;
      const expected = s.compensate && ref.units.get(s.name)!.status === 'failed' ? 1 : 0;
      const extra = cut.filter((c) => c.key === key && c.effect === `compensate:${s.name}`).length;
      const once = expected === 0 ? compensations === 0 : compensations >= 1 && compensations <= 1 + extra;
      expect({ unit: s.name, compensations, expected, cutOff: extra, once }).toEqual({ unit: s.name, compensations, expected, cutOff: extra, once: true });
      const runs = (actual.get(key) ?? []).filter((e) => e === `run:${s.name}`).length;
      const attempts = ref.effects.get(key)!.filter((e) => e === `run:${s.name}`).length;
      expect({ unit: s.name, attemptsRan: runs >= attempts }).toEqual({ unit: s.name, attemptsRan: true });
    }

    // 4. No signal applied twice; every entry that landed in an owner's inbox was consumed, each unit's settle exactly once.
    for (const [actor, entries] of world.book.consumed) {
      const dedupeKeys = entries.map((e) => e.dedupeKey);
      expect({ actor, keys: [...new Set(dedupeKeys)] }).toEqual({ actor, keys: dedupeKeys });
      const seqs = entries.map((e) => e.seq);
      expect({ actor, seqs: [...new Set(seqs)] }).toEqual({ actor, seqs });
    }
    const ownerConsumed = world.book.consumed.get(id) ?? [];
    const ownerInbox = await store.readInbox(id);
    expect({ owner: id, landed: ownerInbox.seq }).toEqual({ owner: id, landed: ownerConsumed.length + ownerInbox.entries.length });
    for (const unit of ref.units.keys()) {
      const settles = ownerConsumed.filter((e) => e.dedupeKey === `${id}.${unit}.settled`);
      expect({ unit, settlesApplied: settles.length, event: settles[0]?.event.type }).toEqual({ unit, settlesApplied: 1, event: 'xreactor.unit.settled' });
    }

    // Each actor's trace, entry for entry, is the plain run's (the owner's but for its waits and discarded signals).
    if (plain !== undefined) expect(await tracesOf(store, sc, id)).toEqual(plain.traces);

    // 5. Nothing left behind.
    for (const actor of actorIds(sc, id)) {
      const loaded = await store.load(actor);
      if (loaded === undefined) continue;
      expect({ actor, inbox: (await store.readInbox(actor)).entries }).toEqual({ actor, inbox: [] });
      const status = storedStatus(loaded.snapshot);
      expect({ actor, status, settled: SETTLED.includes(status) }).toEqual({ actor, status, settled: true });
    }
    expect((await store.listActive(1_000)).ids).toEqual([]);
  } catch (error) {
    if (error instanceof Error) error.message += `\n--- world (seed ${SEED}) ---\n${await describeWorld(world, sc)}`;
    throw error;
  } finally {
    await world.runtime.close();
    await world.queue.close();
  }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/** Runs `property` with the seed (and path) of this file, naming them in a failure report. */
async function assertProperty(property: fc.IAsyncProperty<any>, numRuns: number): Promise<void> {
  try {
    await fc.assert(property, { numRuns, seed: SEED, ...(PATH === undefined ? {} : { path: PATH, endOnFailure: true }) });
  } catch (error) {
    if (error instanceof Error) error.message = `replay: ASYNC_CHAOS_SEED=${SEED} ASYNC_CHAOS_PATH=<path below>\n${error.message}`;
    throw error;
  }
}

describe('async units under chaos: background owners in workers, random delivery orders, duplicates and crashes', () => {
  it(
    `owner outcome, unit ends, effects (but for the bodies a crash cut off), traces and signals equal the reference; nothing is left behind (${RUNS} runs, seed ${SEED})`,
    async () => {
      await assertProperty(
        fc.asyncProperty(scenarioArb, scheduleArb, async (sc, schedule) => {
          await checkRun(sc, schedule);
        }),
        RUNS,
      );
    },
    TEST_TIMEOUT_MS,
  );

  it(
    `with a finite asyncParkTimeoutMs a reader may time out (failing before its body, the owner rolled back); everything else holds as without (${TIMEOUT_RUNS} runs, seed ${SEED})`,
    async () => {
      await assertProperty(
        fc.asyncProperty(scenarioArb, scheduleArb, fc.constantFrom(100, 1_000, 5_000, 20_000), async (sc, schedule, park) => {
          await checkRun(sc, schedule, park);
        }),
        TIMEOUT_RUNS,
      );
    },
    TEST_TIMEOUT_MS,
  );
});

// ---------------------------------------------------------------------------
// Found by the property: a unit's settle applied by a recovering owner drops the owner's pending work
// ---------------------------------------------------------------------------

describe('a recovering owner that applies a unit settle first keeps its pending work', () => {
  const unit = (name: string): UnitSpec => ({ kind: 'asyncStep', name, reads: [], waitFor: [], body: 'ok', maxAttempts: 1, delayMs: 0, compensate: false });
  const plain = (name: string): PlainSpec => ({ kind: 'plain', name, reads: [], waitFor: [], fails: false, compensate: false, undo: false });

  // s0 dispatches a unit; the worker running the owner's hand-off job dies while it sends the
  // commit of s1's outcome (it never lands: the owner stays at the dispatch commit, whose outbox,
  // running s1, is pending). The unit's job runs and settles: its signal lands in the owner's inbox.
  // Whatever job recovers the owner applies its inbox first (xreactor.unit.settled, consumed in
  // `executing` with nothing else changing): that commit must not replace the pending outbox with
  // an empty one, or the owner stays `running` for good (no lease, nothing to perform, every sweep
  // job a no-op) and s1 never runs again.
  it('an owner whose worker died after dispatching a unit completes once the unit settled (hand-off job delivered again)', async () => {
    const sc: Scenario = { steps: [unit('s0'), plain('s1')], defOrder: ['s0', 's1'] };
    await checkRun(sc, [{ kind: 'run', pick: 0, dup: 'none', crash: { commit: 3, mode: 'before', job: 'redelivered' } }]);
  });

  it('the same when the hand-off job failed for good (a sweep recovers the owner)', async () => {
    const sc: Scenario = { steps: [unit('s0'), unit('s1')], defOrder: ['s0', 's1'] };
    await checkRun(sc, [{ kind: 'run', pick: 0, dup: 'none', crash: { commit: 3, mode: 'before', job: 'failed' } }]);
  });
});

// ---------------------------------------------------------------------------
// Found by the property: a reader timed out although its unit settled in time
// ---------------------------------------------------------------------------

describe('a reader whose unit settled before its deadline reads it (asyncParkTimeoutMs)', () => {
  const unit = (name: string, body: UnitBody = 'ok'): UnitSpec => ({ kind: 'asyncStep', name, reads: [], waitFor: [], body, maxAttempts: 1, delayMs: 0, compensate: false });
  const reader = (name: string, reads: readonly string[]): ReaderSpec => ({ kind: 'reader', name, reads, waitFor: [], strict: false, compensate: false, undo: false });

  // The owner dispatches s0 and waits in r0 for it (its timeout job due at 0 + 100). The unit's
  // worker dies right after its settling commit landed, before it wakes the owner: the settle is
  // in the owner's inbox, the owner idle (it left its worker when it began to wait). At 100 ms the
  // timeout job comes: r0 must read the unit (completed at 0 ms), not fail with "async unit …
  // did not settle within 100 ms".
  it('the timeout job of a wait whose unit settled (its wake lost with its worker) does not fail the reader', async () => {
    const sc: Scenario = { steps: [unit('s0'), reader('r0', ['s0'])], defOrder: ['s0', 'r0'] };
    await checkRun(
      sc,
      [
        { kind: 'run', pick: 0, dup: 'none', crash: undefined },
        { kind: 'run', pick: 0, dup: 'none', crash: { commit: 2, mode: 'after', job: 'failed' } },
      ],
      100,
    );
  });

  // The owner dispatches s0, s1, s2 and waits in r0 for s1 (its timeout job due at 0 + 5 000).
  // s0's job settles s0; s2's job, in a worker that dies right after the owner's commit it makes
  // while waking the owner in-process (it lands; the owner's lease stays taken until its TTL, 5 s).
  // s1's job settles s1 at 0 ms: its signal lands in the owner's inbox, its wake job finds the
  // owner busy. At 5 000 ms the lease ran out and the due timeout job comes first: r0 must read s1
  // (completed at 0 ms, its settle in the inbox), not fail with "async unit … did not settle
  // within 5000 ms".
  it('the timeout job of a wait whose unit settled (its signal not applied yet, the owner\'s worker dead) does not fail the reader', async () => {
    const sc: Scenario = { steps: [unit('s0', 'halts'), unit('s1'), unit('s2', 'halts'), reader('r0', ['s1'])], defOrder: ['s0', 's1', 's2', 'r0'] };
    await checkRun(
      sc,
      [
        { kind: 'run', pick: 0, dup: 'none', crash: undefined },
        { kind: 'run', pick: 0, dup: 'none', crash: undefined },
        { kind: 'run', pick: 7, dup: 'none', crash: { commit: 3, mode: 'after', job: 'redelivered' } },
      ],
      5_000,
    );
  });
});
