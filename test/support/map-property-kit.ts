/**
 * The map property's scenarios (test/property/map.test.ts): a root `a → map m (element e1 → e2)
 * → b`, whose handlers write an effects ledger, and what a run over a scenario must leave.
 */
import { z } from 'zod';
import { defineReactor, fail, halt, paged } from '../../src/index.js';
import type { AnyReactorDefinition, RollbackFailureReport } from '../../src/index.js';

/** A step of the element reactor. */
export type ElementStep = 'e1' | 'e2';

/** One element step: element `index`'s `step`. */
export interface ElementStepRef {
  readonly index: number;
  readonly step: ElementStep;
}

/** A map step over `count` items and what goes wrong in it. */
export interface MapScenario {
  readonly count: number;
  readonly batchSize: number;
  readonly atomic: boolean;
  /** The items: an array input, or a paged source (`page` per window of batchSize, with or without `count`). */
  readonly source: 'array' | 'paged' | 'counted';
  /** The mode of the scheduled run (the in-order runs take both). */
  readonly fanOut: boolean;
  /** Element steps that fail for good (`fail(e, { retry: false })`; the step is compensated). */
  readonly failing: readonly ElementStepRef[];
  /** Element steps that halt (`halt(reason)`): the map stops and halts, its owner halts at m, nothing is rolled back. */
  readonly halting: readonly ElementStepRef[];
  /** Elements whose e2 throws on its first attempt and is retried after its backoff (a timer job in a worker). */
  readonly flaky: readonly number[];
  /** Element steps whose undo throws (their effect stays in place, reported as a rollback failure). */
  readonly undoFailing: readonly ElementStepRef[];
  /** The map step has a `collect` (it iterates the results and counts the completed elements). */
  readonly collect: boolean;
  /** The map step has an `undoAll` (it replaces the completed elements' undos on a rollback), which may throw. */
  readonly undoAll: 'none' | 'ok' | 'fails';
  /** A failure after the elements: `collect` fails, or the owner's later step `b`. */
  readonly owner: 'none' | 'collect' | 'b';
  /** A run that completes is undone by `runtime.undo(id)`. */
  readonly undo: boolean;
}

/** Retries of e2: one more attempt after 1 s (element timers are delayed jobs of purpose `map-element`). */
export const E2_RETRY_DELAY_MS = 1_000;

/** The ledger key of an element step (`e2[7]`); owner steps are `a`, `b`. */
export const keyOf = (index: number, step: ElementStep): string => `${step}[${index}]`;

/** The element step a key names, or undefined for an owner step. */
export function refOf(key: string): ElementStepRef | undefined {
  const match = /^(e[12])\[(\d+)\]$/.exec(key);
  return match === null ? undefined : { step: match[1] as ElementStep, index: Number(match[2]) };
}

/**
 * What the step handlers did (`run:e1[3]`, `compensate:e2[3]`, `undo:e1[3]`, `collect`) and
 * what is in place now: a successful run places its key, its undo takes it away; a failing run
 * leaves a partial effect that its compensate takes away.
 */
export class EffectsLedger {
  readonly events: string[] = [];
  readonly placed = new Set<string>();
  /** Every key a run placed, undone since or not. */
  readonly everPlaced = new Set<string>();
  readonly partial = new Set<string>();
  /** Handler calls that should not have happened (an undo of nothing, a compensate of a step that did not fail). */
  readonly problems: string[] = [];

  /** `halt` and `flake` place nothing; `fail` a partial effect, which its compensate takes away. */
  run(key: string, outcome: 'ok' | 'fail' | 'flake' | 'halt'): void {
    this.events.push(`run:${key}`);
    if (outcome === 'ok') {
      this.placed.add(key);
      this.everPlaced.add(key);
    } else if (outcome === 'fail') {
      this.partial.add(key);
    }
  }

  compensate(key: string): void {
    this.events.push(`compensate:${key}`);
    if (!this.partial.has(key) && !this.events.slice(0, -1).includes(`compensate:${key}`)) this.problems.push(`compensate:${key} without a failed run`);
    this.partial.delete(key);
  }

  /** The undo takes the effect away, or (`fails`) throws and leaves it. */
  undo(key: string, fails: boolean): void {
    this.events.push(`undo:${key}`);
    if (!this.everPlaced.has(key)) this.problems.push(`undo:${key} of a step that never ran to success`);
    if (fails) throw new Error(`undo ${key} broke`);
    this.placed.delete(key);
  }

  /** Every call of the map's undoAll, with the indexes it was given. */
  readonly undoAlls: (readonly number[])[] = [];

  /** undoAll over the completed elements: takes both effects of each away, or throws. */
  undoAll(indexes: readonly number[], fails: boolean): void {
    this.events.push('undoAll');
    this.undoAlls.push(indexes);
    for (const index of indexes) {
      for (const step of ['e1', 'e2'] as const) if (!this.everPlaced.has(keyOf(index, step))) this.problems.push(`undoAll of element ${index}, whose ${step} never ran to success`);
    }
    if (fails) throw new Error('undoAll broke');
    for (const index of indexes) for (const step of ['e1', 'e2'] as const) this.placed.delete(keyOf(index, step));
  }

  count(event: string): number {
    return this.events.filter((e) => e === event).length;
  }
}

/** The run's input: the items are the indexes. */
export const mapInput = z.object({ items: z.array(z.number()) });

const hasRef = (refs: readonly ElementStepRef[], index: number, step: ElementStep) => refs.some((r) => r.index === index && r.step === step);

/** What element `index`'s `step` does on its last attempt: fail beats halt. */
export function behaviourOf(sc: MapScenario, index: number, step: ElementStep): 'ok' | 'fail' | 'halt' {
  return hasRef(sc.failing, index, step) ? 'fail' : hasRef(sc.halting, index, step) ? 'halt' : 'ok';
}

/** The step at which element `index` stops (fails or halts), if any, and how. */
export function stopOf(sc: MapScenario, index: number): { readonly step: ElementStep; readonly kind: 'failed' | 'halted' } | undefined {
  for (const step of ['e1', 'e2'] as const) {
    const b = behaviourOf(sc, index, step);
    if (b !== 'ok') return { step, kind: b === 'fail' ? 'failed' : 'halted' };
  }
  return undefined;
}

export const undoFails = (sc: MapScenario, key: string): boolean => {
  const ref = refOf(key);
  return ref !== undefined && hasRef(sc.undoFailing, ref.index, ref.step);
};

/** Attempts a step makes at most (without crashes): e2 of a flaky element twice. */
export function attemptsOf(sc: MapScenario, key: string): number {
  const ref = refOf(key);
  if (ref === undefined || ref.step === 'e1' || !sc.flaky.includes(ref.index)) return 1;
  return 2;
}

/** Options of {@link mapReactor}. */
export interface MapReactorOptions {
  readonly fanOut: boolean;
  /** Hand the root to a worker before its first step (every actor is then advanced by jobs). */
  readonly background: boolean;
}

/** The root reactor of a scenario, its handlers writing `ledger`. */
export function mapReactor(sc: MapScenario, ledger: EffectsLedger, options: MapReactorOptions): AnyReactorDefinition {
  const attempts = new Map<string, number>();
  const elementStep = (step: ElementStep) => ({
    run: (item: unknown) => {
      const index = Number(item);
      const key = keyOf(index, step);
      const attempt = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, attempt);
      if (step === 'e2' && sc.flaky.includes(index) && attempt === 1) {
        ledger.run(key, 'flake');
        throw new Error(`${key} flaked`);
      }
      const behaviour = behaviourOf(sc, index, step);
      if (behaviour === 'fail') {
        ledger.run(key, 'fail');
        return fail(new Error(`${key} failed`), { retry: false });
      }
      if (behaviour === 'halt') {
        ledger.run(key, 'halt');
        return halt(`${key} halted`);
      }
      ledger.run(key, 'ok');
      return `${key}:done`;
    },
    compensate: (_error: unknown, item: unknown) => ledger.compensate(keyOf(Number(item), step)),
    undo: (_result: unknown, item: unknown) => ledger.undo(keyOf(Number(item), step), undoFails(sc, keyOf(Number(item), step))),
  });
  const element = defineReactor({ name: 'map-prop-element' })
    .step('e1', elementStep('e1'))
    .step('e2', { waitFor: ['e1'], retries: { maxAttempts: 2, backoff: 'fixed', baseDelayMs: E2_RETRY_DELAY_MS }, ...elementStep('e2') })
    .build();
  const ownerStep = (key: 'a' | 'b', fails: boolean) => ({
    run: () => {
      ledger.run(key, fails ? 'fail' : 'ok');
      return fails ? fail(new Error(`${key} failed`), { retry: false }) : key;
    },
    compensate: () => ledger.compensate(key),
    undo: () => ledger.undo(key, false),
  });
  const collect = async (results: AsyncIterable<{ readonly status: string }>) => {
    let completed = 0;
    for await (const r of results) if (r.status === 'completed') completed += 1;
    ledger.events.push('collect');
    return sc.owner === 'collect' ? fail(new Error('collect failed'), { retry: false }) : completed;
  };
  const window = (offset: number, limit: number) => Array.from({ length: Math.max(0, Math.min(limit, sc.count - offset)) }, (_, i) => offset + i);
  const pagedSource = paged({ page: window, ...(sc.source === 'counted' ? { count: () => sc.count } : {}) });
  const undoAll = async (completed: AsyncIterable<{ readonly index: number }>) => {
    const indexes: number[] = [];
    for await (const c of completed) indexes.push(c.index);
    ledger.undoAll(indexes, sc.undoAll === 'fails');
  };
  const root = defineReactor({ name: 'map-prop', input: mapInput })
    .step('a', ownerStep('a', false))
    .map('m', element, {
      source: sc.source === 'array' ? ({ input }) => input('items') : pagedSource,
      fanOut: options.fanOut,
      batchSize: sc.batchSize,
      atomic: sc.atomic,
      ...(sc.collect ? { collect } : {}),
      ...(sc.undoAll === 'none' ? {} : { undoAll }),
      waitFor: ['a'],
    })
    .step('b', { waitFor: ['m'], ...ownerStep('b', sc.owner === 'b') });
  return (options.background ? root.background({ all: true }) : root).build();
}

/** The input of a scenario's run. */
export const inputOf = (sc: MapScenario) => ({ items: Array.from({ length: sc.count }, (_, i) => i) });

/** A run's outcome as the property compares it. */
export interface OutcomeShape {
  readonly status: string;
  readonly step?: string | undefined;
  readonly message?: string | undefined;
  readonly reason?: string | undefined;
  /** Sorted, each as `step path kind reason message map`. */
  readonly rollbackFailures?: readonly string[];
}

export function describeFailure(f: Pick<RollbackFailureReport, 'step' | 'path' | 'kind' | 'reason' | 'message' | 'map'>): string {
  return `${f.step} [${f.path.join('.')}] ${f.kind} ${f.reason} "${f.message}"${f.map === undefined ? '' : ` map ${f.map.step}[${f.map.index}]`}`;
}

/** The shape of a run's result: status, failing step, message, rollback failures as a sorted list. */
export function outcomeShape(result: { readonly status: string }): OutcomeShape {
  const { step, message, reason, rollbackFailures } = result as { step?: string; message?: string; reason?: string; rollbackFailures?: readonly RollbackFailureReport[] };
  return {
    status: result.status,
    ...(result.status === 'failed' ? { step, message } : {}),
    ...(result.status === 'halted' ? { step, reason } : {}),
    ...(rollbackFailures === undefined ? {} : { rollbackFailures: rollbackFailures.map(describeFailure).sort() }),
  };
}

/** The rollback failure a failing undoAll is reported as. */
export const UNDO_ALL_FAILURE = describeFailure({ step: 'm', path: [], kind: 'undo_all', reason: 'raised', message: 'undoAll broke' });

/** The rollback failure an element step's failing undo is reported as. */
export function elementUndoFailure(ref: ElementStepRef): string {
  const key = keyOf(ref.index, ref.step);
  return describeFailure({ step: ref.step, path: ['m', String(ref.index)], kind: 'undo', reason: 'raised', message: `undo ${key} broke`, map: { step: 'm', index: ref.index } });
}
