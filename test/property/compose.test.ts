/**
 * Property tests of compose (seed 001, §2.2, with the rollback rules R1–R7 of
 * §1) on random trees of reactors: each reactor has 2..5 steps in a random
 * linear-or-DAG shape, a step is a plain step or a compose step whose child is
 * itself a random reactor, nesting up to 3 reactor levels deep. At most one
 * plain step anywhere in the tree fails (by throwing or by returning fail());
 * compensate / undo handlers may raise or return a failure; steps may skip,
 * and may halt (a halt stops only the reactor it happens in). The expected
 * behaviour comes from a small reference interpreter written from the rules,
 * not from the implementation.
 */
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CompensationError, createMemoryStore, createRuntime } from '../../src/index.js';
import type { AnyReactorDefinition, RollbackFailure, RunResult, RunReturn, Runtime, Store } from '../../src/index.js';
import { createTestClock, recordEvents } from '../../src/testing/index.js';
import type { EventRecorder } from '../../src/testing/index.js';
import { bodyErrorMessage, buildTree, completingScenarioArb, INPUT, reference, scenarioArb, Trace } from './support/compose-tree.js';
import type { ExpectedFailure, HandlerLog, PlainSpec, ReactorSpec, RefEntry, RefOutcome, Scenario } from './support/compose-tree.js';

const RUNS = { numRuns: 200 };
const anyScenario = scenarioArb();
const completingScenario = completingScenarioArb();

function referenceUndo(stack: readonly RefEntry[], children: ReadonlyMap<string, string>): Trace {
  const t = new Trace();
  for (const [path, status] of children) t.children.set(path, status);
  t.undoStack(stack);
  return t;
}

// ---------------------------------------------------------------------------
// Building and running the real reactors
// ---------------------------------------------------------------------------

interface Harness {
  readonly runtime: Runtime;
  readonly store: Store;
  readonly recorder: EventRecorder;
  /** Events pushed by the step handlers themselves. */
  readonly log: string[];
  /** Inconsistencies seen inside handlers (an undo given the wrong result...). */
  readonly problems: string[];
  readonly reactor: AnyReactorDefinition;
  readonly id: string;
}

let executions = 0;

function harness(sc: Scenario): Harness {
  const log: HandlerLog = { events: [], problems: [] };
  const clock = createTestClock();
  const store = createMemoryStore({ clock });
  const recorder = recordEvents();
  const runtime = createRuntime({ clock, store, middleware: [recorder.middleware], logger: pino({ level: 'silent' }) });
  executions += 1;
  return { runtime, store, recorder, log: log.events, problems: log.problems, reactor: buildTree(sc, log, { prefix: 'compose_property', background: false }), id: `compose-${executions}` };
}

async function runScenario(sc: Scenario) {
  const h = harness(sc);
  try {
    const result = await h.runtime.run(h.reactor, INPUT, { executionId: h.id });
    return { h, result, ...reference(sc) };
  } catch (error) {
    await h.runtime.close();
    throw error;
  }
}

/** Rollback failures as stored, with the compose path the caller-facing report leaves out. */
async function storedFailures(h: Harness): Promise<ExpectedFailure[]> {
  const loaded = await h.store.load(h.id);
  const context = loaded!.snapshot.context as { rollbackFailures: readonly RollbackFailure[] };
  return context.rollbackFailures.map(({ step, path, kind, reason }) => ({ step, path: path ?? [], kind, reason }));
}

const reported = (result: { rollbackFailures: readonly { step: string; kind: string; reason: string }[] }) =>
  result.rollbackFailures.map(({ step, kind, reason }) => ({ step, kind, reason }));
const unpathed = (failures: readonly ExpectedFailure[]) => failures.map(({ step, kind, reason }) => ({ step, kind, reason }));

/** Status of every composed child execution (ids are the root id plus the compose path). */
async function childStatuses(h: Harness, expected: ReadonlyMap<string, string>): Promise<Map<string, string>> {
  const actual = new Map<string, string>();
  for (const path of expected.keys()) actual.set(path, (await h.runtime.find(`${h.id}.${path}`)).status);
  return actual;
}

const isLifecycle = (e: string) => e.startsWith('run:') || e.startsWith('compensate:') || e.startsWith('undo:');
const pathOf = (e: string) => e.slice(e.indexOf(':') + 1);

function plainSteps(r: ReactorSpec): PlainSpec[] {
  return r.steps.flatMap((s) => (s.kind === 'plain' ? [s] : plainSteps(s.child)));
}

function checkOutcome(outcomeOfRun: RunReturn<AnyReactorDefinition>, outcome: RefOutcome): void {
  // Inline reactors of these tests never dispatch nor pause.
  if (outcomeOfRun.status === 'dispatched' || outcomeOfRun.status === 'paused') throw new Error(`unexpected ${outcomeOfRun.status}`);
  const result: RunResult<unknown> = outcomeOfRun;
  expect(result.status).toBe(outcome.status);
  if (outcome.status === 'failed' && result.status === 'failed') {
    expect(result.step).toBe(outcome.step);
    const message = bodyErrorMessage(outcome.origin.path);
    if (outcome.compensationFailed) {
      // R4: the failing step's compensate did not complete: a CompensationError naming that step.
      expect(result.error).toBeInstanceOf(CompensationError);
      expect(result.message).toContain(message);
      expect(result.message).toContain(`"${outcome.origin.name}"`);
    } else {
      expect(result.message).toBe(message);
    }
  } else if (outcome.status === 'halted' && result.status === 'halted') {
    expect({ step: result.step, reason: result.reason }).toEqual({ step: outcome.step, reason: outcome.reason });
  } else if (outcome.status === 'completed' && result.status === 'completed') {
    expect(result.value).toEqual(outcome.value);
  }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

describe('compose properties (seed 001 §2.2 with R1–R7) on random trees of reactors', () => {
  it('1. the handler and middleware event sequences equal the reference interpreter', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, trace } = await runScenario(sc);
        try {
          expect(h.problems).toEqual([]);
          expect(h.log).toEqual(trace.handlers);
          expect(h.recorder.events).toEqual(trace.hooks);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('2. every completed non-skipped step at every depth is undone once, newest first across levels; nothing runs after the failure; the failing step is compensated', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, outcome } = await runScenario(sc);
        try {
          const byPath = new Map(plainSteps(sc.root).map((s) => [s.path, s]));
          const events = h.recorder.events.filter(isLifecycle);
          const runs = events.filter((e) => e.startsWith('run:')).map(pathOf);
          const undos = events.filter((e) => e.startsWith('undo:')).map(pathOf);
          const compensates = events.filter((e) => e.startsWith('compensate:')).map(pathOf);
          // Completion order as it actually happened: the steps that ran and succeed without skipping.
          const completed = runs.filter((p) => byPath.get(p)!.behaviour === 'ok');
          expect(new Set(runs).size).toBe(runs.length);
          if (outcome.status === 'failed') {
            expect(undos).toEqual([...completed].reverse());
            for (const p of runs) if (byPath.get(p)!.behaviour === 'skip') expect(undos).not.toContain(p);
            // A plain step's body always starts: the failing step (and nothing else) is compensated.
            expect(compensates).toEqual([sc.failing]);
            expect(runs.at(-1)).toBe(sc.failing);
            const firstRollback = events.findIndex((e) => !e.startsWith('run:'));
            expect(events.slice(firstRollback).filter((e) => e.startsWith('run:'))).toEqual([]);
            expect(events[firstRollback]).toBe(`compensate:${sc.failing}`);
          } else {
            expect(undos).toEqual([]);
            expect(compensates).toEqual([]);
            if (sc.failing !== undefined) expect(runs).not.toContain(sc.failing);
          }
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('3. status, failing root step, error, rollbackFailures (with their compose paths) and child statuses match the reference', async () => {
    await fc.assert(
      fc.asyncProperty(anyScenario, async (sc) => {
        const { h, result, trace, outcome } = await runScenario(sc);
        try {
          checkOutcome(result, outcome);
          if (result.status === 'failed') expect(reported(result)).toEqual(unpathed(trace.failures));
          else expect(trace.failures).toEqual([]);
          expect(await storedFailures(h)).toEqual(trace.failures);
          const view = await h.runtime.find(h.id);
          expect(view.status).toBe(outcome.status);
          if (outcome.status === 'failed') expect(view.undoStack).toEqual([]);
          else expect(view.undoStack.map((e) => e.step)).toEqual(outcome.stack.map((e) => e.step.name));
          expect(await childStatuses(h, trace.children)).toEqual(trace.children);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });

  it('4. undo(id) of a completed run undoes every completed step at every depth once, newest first, and ends cancelled', async () => {
    await fc.assert(
      fc.asyncProperty(completingScenario, async (sc) => {
        const { h, result, trace, outcome } = await runScenario(sc);
        try {
          expect(outcome.status).toBe('completed');
          checkOutcome(result, outcome);
          if (outcome.status !== 'completed') return;
          const before = h.log.length;
          const hooksBefore = h.recorder.events.length;
          const cancelled = await h.runtime.undo(h.id);
          const undone = referenceUndo(outcome.stack, trace.children);
          expect(cancelled.status).toBe('cancelled');
          if (cancelled.status !== 'cancelled') return; // undo may return dispatched (a fan-out map); these runs have none
          expect(reported(cancelled)).toEqual(unpathed(undone.failures));
          expect(await storedFailures(h)).toEqual(undone.failures);
          expect(h.log.slice(before)).toEqual(undone.handlers);
          const undos = h.recorder.events.slice(hooksBefore);
          expect(undos).toEqual(undone.hooks);
          // Independently of the reference: exactly the completed steps, each once, in reverse completion order.
          expect(undos).toEqual([...trace.completed].reverse().map((p) => `undo:${p}`));
          expect(h.problems).toEqual([]);
          const view = await h.runtime.find(h.id);
          expect(view.status).toBe('cancelled');
          expect(view.undoStack).toEqual([]);
          expect(await childStatuses(h, undone.children)).toEqual(undone.children);
        } finally {
          await h.runtime.close();
        }
      }),
      RUNS,
    );
  });
});
