/**
 * The map property (docs/design/map.md §17 step 11). A root `a → map m (element e1 → e2) → b`
 * over 0…200 items (an array input or a paged source, with or without `count`), `batchSize`
 * 1…60, atomic or not, inline or fanned out; element steps that fail for good or halt at random
 * indexes, elements whose e2 fails once and is retried after a backoff (a timer job in a worker),
 * element undos that throw, an `undoAll` that may throw, a failing `collect` or a failing later
 * owner step, and an undo of a run that completed or halted. Every scenario runs three times:
 *
 * - inline and fanned out, jobs drained in rounds in order (`drainRounds`), no crash: both give
 *   the same outcome (status, step, message, rollback failures as a set), run the same element
 *   steps and undo the same ones (I-7) — unless a retried element lets a map that stops run other
 *   elements in the meantime (fan-out parks it on a timer job, S-map-09);
 * - in the scenario's mode with the root handed to workers (`.background({ all: true })`), a
 *   fast-check schedule deciding which due job runs next, which deliveries are duplicated (a copy
 *   under another id, the same job or another due job handled at once by a second worker), when a
 *   sweep runs and when time moves on, and which deliveries are handled by a worker that dies at
 *   its N-th commit, right after it lands or while it is sent; its job is delivered again or fails
 *   for good (then a sweep recovers its actor, a map's stall redispatch its lost start jobs)
 *   (test/support/map-chaos-kit.ts).
 *
 * Required of every run, once everything is drained:
 * - nothing left in place: each element step's effect (an effects ledger) is undone when the root
 *   failed or was undone (by its own undo, or undoAll's), or when its element failed, and left
 *   when the root completed or halted, or its element halted; an undo that throws leaves it, and is
 *   reported as a rollback failure of its step and index when the map rolled it back or its
 *   failing element stopped the map; the outcome is the one the map's stats say (the stopping
 *   element's error or reason, collect's, b's, or completed / cancelled);
 * - no step body, compensate, undo or undoAll runs more often than its attempts, except once more
 *   for each crash that cut off the commit recording it;
 * - every map commit spawns at most `batchSize` actors (inline: one), and enqueues at most
 *   `batchSize` start jobs of one purpose; every dispatched element and every rollback position
 *   gets exactly one start job;
 * - no inbox entry is applied twice;
 * - `undo(id)` returns `cancelled` when the call finished the rollback, else `dispatched` (§11.1);
 * - at the end: no inbox entry on the root, the map, its elements or its rollback actors; every
 *   actor settled; the active index empty; no job pending, none failed but those the schedule
 *   failed; `settled == target` and
 *   `rb.settled == rb.target`, the counters agreeing with the elements' outcomes.
 *
 * Two product bugs it found are pinned as deterministic cases at the end of this file (both fixed
 * since): undo(id) of a run whose fan-out map rolls back in jobs threw instead of returning
 * `dispatched`, and undo(id) of a run whose map halted never rolled the map back.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { elementRollbackTagsOf } from '../../machines/element-rollback.js';
import { executionStatusOf } from '../../machines/execution.js';
import { mapTagsOf } from '../../machines/map.js';
import type { Store } from '../../src/index.js';
import type { MapPageEntry, MapStats } from '../../src/store/store.js';
import { createMapWorld } from '../support/map-chaos-kit.js';
import type { Choice, CrashPlan, Death, Delivery, MapWorld } from '../support/map-chaos-kit.js';
import {
  attemptsOf,
  EffectsLedger,
  elementUndoFailure,
  stopOf,
  inputOf,
  keyOf,
  mapReactor,
  outcomeShape,
  refOf,
  UNDO_ALL_FAILURE,
  undoFails,
} from '../support/map-property-kit.js';
import type { ElementStepRef, MapScenario, OutcomeShape } from '../support/map-property-kit.js';

/** `MAP_PROPERTY_RUNS` overrides the number of runs (for a longer local soak); `MAP_PROPERTY_SEED` replays a reported seed. */
const SEED = process.env['MAP_PROPERTY_SEED'];
const RUNS = { numRuns: Number(process.env['MAP_PROPERTY_RUNS'] ?? 100), ...(SEED === undefined ? {} : { seed: Number(SEED) }) };
/** Generous: a soak with many runs gets about 2 s a run. */
const TEST_TIMEOUT_MS = Math.max(120_000, RUNS.numRuns * 2_000);

// ---------------------------------------------------------------------------
// Scenarios and schedules
// ---------------------------------------------------------------------------

/** Indexes mostly among the first dozen (where most counts are), any of 200 sometimes; those past the count are dropped. */
const indexArb = fc.oneof({ weight: 3, arbitrary: fc.nat({ max: 12 }) }, { weight: 1, arbitrary: fc.nat({ max: 199 }) });
const refArb: fc.Arbitrary<ElementStepRef> = fc.record({ index: indexArb, step: fc.constantFrom<'e1' | 'e2'>('e1', 'e2') });

// No chain: every field shrinks on its own.
const scenarioArb: fc.Arbitrary<MapScenario> = fc
  .record({
    count: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 12 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 200 }) }),
    batchSize: fc.oneof({ weight: 2, arbitrary: fc.integer({ min: 1, max: 5 }) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 60 }) }),
    atomic: fc.boolean(),
    source: fc.constantFrom<MapScenario['source']>('array', 'array', 'paged', 'counted'),
    fanOut: fc.boolean(),
    collect: fc.boolean(),
    undoAll: fc.constantFrom<MapScenario['undoAll']>('none', 'none', 'ok', 'fails'),
    owner: fc.constantFrom<MapScenario['owner']>('none', 'none', 'collect', 'b'),
    undo: fc.boolean(),
    failing: fc.array(refArb, { maxLength: 3 }),
    halting: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(refArb, { maxLength: 2 }) }),
    flaky: fc.uniqueArray(indexArb, { maxLength: 3 }),
    undoFailing: fc.array(refArb, { maxLength: 4 }),
  })
  .map((sc): MapScenario => {
    const within = (refs: readonly ElementStepRef[]) => refs.filter((r) => r.index < sc.count);
    return {
      ...sc,
      owner: sc.owner === 'collect' && !sc.collect ? 'none' : sc.owner,
      failing: within(sc.failing),
      halting: within(sc.halting),
      flaky: sc.flaky.filter((i) => i < sc.count),
      undoFailing: within(sc.undoFailing),
    };
  });

const crashArb: fc.Arbitrary<CrashPlan> = fc.record({
  // Most deliveries make a few commits; a throw or a rollback dozens; an inline map in the root's job up to ~8 per element.
  commit: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 4 }) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 12 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 60 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_600 }) },
  ),
  mode: fc.constantFrom<'after' | 'before'>('after', 'before'),
  notBefore: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat({ max: 100 }) }, { weight: 1, arbitrary: fc.nat({ max: 500 }) }),
  // Any job may fail for good: a sweep recovers its actor, a map's stall redispatch its lost start jobs.
  job: fc.constantFrom<'redelivered' | 'failed'>('redelivered', 'redelivered', 'failed'),
});
const choiceArb: fc.Arbitrary<Choice> = fc.record({
  before: fc.oneof({ weight: 12, arbitrary: fc.constant('none' as const) }, { weight: 1, arbitrary: fc.constantFrom('sweep' as const, 'outlive' as const, 'tick' as const) }),
  // Mostly the front of the FIFO, sometimes any due job.
  pick: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.nat({ max: 63 }) }),
  dup: fc.oneof(
    { weight: 10, arbitrary: fc.constant('none' as const) },
    { weight: 1, arbitrary: fc.constant('later' as const) },
    { weight: 1, arbitrary: fc.constant('concurrent' as const) },
    { weight: 2, arbitrary: fc.constant('parallel' as const) },
  ),
  crash: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: crashArb }),
});
/** Used round and round (so a long run is perturbed all along); three deaths per run at most. */
const scheduleArb = fc.array(choiceArb, { minLength: 1, maxLength: 40 });

// ---------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------

interface RunMode {
  readonly fanOut: boolean;
  /** The root is handed to workers before its first step. */
  readonly background: boolean;
}

/** What a run left, for the comparison of the in-order runs. */
interface RunSummary {
  readonly outcome: OutcomeShape;
  readonly ran: readonly string[];
  readonly undone: readonly string[];
}

const distinct = (events: readonly string[], kind: string) => [...new Set(events.filter((e) => e.startsWith(`${kind}:`)).map((e) => e.slice(kind.length + 1)))].sort();

/** Run a scenario in `mode` with `delivery`, check everything the property requires, and summarise it. */
async function runChecked(sc: MapScenario, mode: RunMode, delivery: Delivery): Promise<RunSummary> {
  const ledger = new EffectsLedger();
  const root = mapReactor(sc, ledger, mode);
  const world = createMapWorld(root, delivery, 4_000 + 40 * sc.count);
  let undoCall: string | undefined;
  let undone = false;
  try {
    const first = await world.runtime.run(root, inputOf(sc), { executionId: world.id });
    expect({ dispatched: first.status === 'dispatched' }).toEqual({ dispatched: mode.fanOut || mode.background });
    await world.drain();
    let result = await world.runtime.awaitResult(world.id, { timeoutMs: 10 });
    if (sc.undo && (result.status === 'completed' || result.status === 'halted')) {
      // §11.1: the call returns `cancelled` when it finished the rollback, else `dispatched` (a fan-out map's rollback runs in jobs).
      const returned = await world.runtime.undo(world.id).then(
        (r) => r.status as string,
        (error: unknown) => `threw ${String(error)}`,
      );
      const after = (await world.runtime.find(world.id)).status;
      undoCall = `undo(id) returned ${returned}, the root was ${after}`;
      undone = true;
      await world.drain();
      expect({ returned, after }).toEqual({ returned: after === 'cancelled' ? 'cancelled' : 'dispatched', after });
      result = await world.runtime.awaitResult(world.id, { timeoutMs: 10 });
    }
    await checkRun(sc, mode, world, ledger, result, undone);
    return { outcome: outcomeShape(result), ran: distinct(ledger.events, 'run'), undone: distinct(ledger.events, 'undo') };
  } catch (error) {
    if (error instanceof Error) error.message += `\n--- world (${mode.fanOut ? 'fan-out' : 'inline'}${mode.background ? ', background' : ''}, ${delivery.kind}) ---\n${await describeWorld(world, sc, ledger, undoCall)}`;
    throw error;
  } finally {
    await world.close();
  }
}

// ---------------------------------------------------------------------------
// What a run must leave
// ---------------------------------------------------------------------------

async function readAll(store: Store, map: string, count: number): Promise<MapPageEntry[]> {
  const entries: MapPageEntry[] = [];
  for (let from = 0; from < count; from += 100) entries.push(...(await store.readMapPage(map, from, Math.min(100, count - from), null)));
  return entries;
}

/** The outcome the map's stats call for. */
function expectedOutcome(sc: MapScenario, stats: MapStats, undone: boolean, reported: readonly string[]): OutcomeShape {
  const stop = stats.stop;
  const key = stop === null ? '' : `${stopOf(sc, stop.index)?.step}[${stop.index}]`;
  if (stop?.kind === 'failed') return { status: 'failed', step: 'm', message: `${key} failed`, rollbackFailures: reported };
  if (stop?.kind === 'halted') return undone ? { status: 'cancelled', rollbackFailures: reported } : { status: 'halted', step: 'm', reason: `${key} halted` };
  if (sc.owner === 'collect') return { status: 'failed', step: 'm', message: 'collect failed', rollbackFailures: reported };
  if (sc.owner === 'b') return { status: 'failed', step: 'b', message: 'b failed', rollbackFailures: reported };
  return undone ? { status: 'cancelled', rollbackFailures: reported } : { status: 'completed' };
}

/** Whether a death cut off the commit recording undoAll's outcome (it may run again). */
function cutsOffUndoAll(death: Death, mapId: string): boolean {
  return !death.landed && death.id === mapId && death.commit.snapshot.value === 'undone';
}

/** The ledger events a death cut off: the bodies, compensates and undos its commit recorded, when it did not land (they may run again). */
function cutOff(death: Death, rootId: string): string[] {
  if (death.landed) return [];
  const element = /^(\d+)$/.exec(death.id.slice(`${rootId}.m.`.length));
  const keyOfStep = (step: string | undefined): string | undefined => {
    if (death.id === rootId) return step === 'a' || step === 'b' ? step : undefined;
    if (element !== null && death.id.startsWith(`${rootId}.m.`) && (step === 'e1' || step === 'e2')) return keyOf(Number(element[1]), step);
    return undefined;
  };
  return death.commit.writes.trace.flatMap((entry) => {
    const key = keyOfStep(entry.step);
    if (key === undefined) return [];
    if (['run', 'skipped', 'halt', 'failed', 'retry'].includes(entry.type)) return [`run:${key}`];
    if (entry.type === 'compensate' || entry.type === 'compensate_failure') return [`compensate:${key}`];
    if (entry.type === 'undo' || entry.type === 'undo_failure') return [`undo:${key}`];
    return [];
  });
}

async function checkRun(sc: MapScenario, mode: RunMode, world: MapWorld, ledger: EffectsLedger, result: { readonly status: string }, undone: boolean): Promise<void> {
  const { store, id, mapId, book } = world;
  const stats = (await store.readMapStats(mapId))!;
  expect(stats, 'the map exists').toBeDefined();
  const entries = await readAll(store, mapId, sc.count);
  const outcomeOf = (index: number) => entries[index]?.outcome;
  // A halted run is left in place (S-map-11), unless it is undone.
  const rootUndone = result.status === 'failed' || result.status === 'cancelled';

  // The outcome is the one the stats call for; the rollback failures are the undos that threw on the elements the map rolled back
  // (by their own undos, or undoAll's), and the stopping element's, which rolled itself back.
  const undoneByAll = (index: number) => sc.undoAll !== 'none' && outcomeOf(index) === 'completed';
  const reported = rootUndone
    ? [
        ...[...new Set(sc.undoFailing.map((r) => keyOf(r.index, r.step)))]
          .filter((key) => ledger.everPlaced.has(key))
          .map((key) => refOf(key)!)
          .filter((r) => (outcomeOf(r.index) === 'completed' && !undoneByAll(r.index)) || (stats.stop?.kind === 'failed' && stats.stop.index === r.index))
          .map(elementUndoFailure),
        ...(sc.undoAll === 'fails' && stats.completed > 0 ? [UNDO_ALL_FAILURE] : []),
      ].sort()
    : [];
  expect(outcomeShape(result)).toEqual(expectedOutcome(sc, stats, undone, reported));
  expect(stats.stop === null || stopOf(sc, stats.stop.index)?.kind === stats.stop.kind, 'the stop is a failing or halting element').toBe(true);
  if (result.status === 'completed' && sc.collect) expect((result as { readonly status: string; readonly value?: { readonly m?: unknown } }).value?.m).toBe(stats.completed);

  // Nothing left in place.
  expect(ledger.problems).toEqual([]);
  expect([...ledger.partial].sort(), 'failed steps left partial effects').toEqual([]);
  // A failed element rolled itself back; a halted one is left as it halted (not_needed, §18 Q3); a completed one goes with the root.
  const mustUndo = (key: string) => {
    const ref = refOf(key);
    const outcome = ref === undefined ? undefined : outcomeOf(ref.index);
    return outcome === 'failed' || (outcome !== 'halted' && rootUndone);
  };
  const undoFailsFor = (key: string) => {
    const ref = refOf(key);
    return ref !== undefined && undoneByAll(ref.index) ? sc.undoAll === 'fails' : undoFails(sc, key);
  };
  const left = [...ledger.everPlaced].filter((key) => !mustUndo(key) || undoFailsFor(key)).sort();
  expect([...ledger.placed].sort(), 'effects in place').toEqual(left);
  // undoAll: once per rollback of a map with completed elements, over them in index order; never otherwise.
  const completed = entries.filter((e) => e.outcome === 'completed').map((e) => e.index);
  const undoAllCalls = rootUndone && sc.undoAll !== 'none' && completed.length > 0 ? 1 : 0;
  expect({ calls: Math.min(ledger.undoAlls.length, undoAllCalls + world.deaths.filter((d) => cutsOffUndoAll(d, mapId)).length), given: [...new Set(ledger.undoAlls.map((i) => i.join(',')))] }).toEqual({
    calls: ledger.undoAlls.length,
    given: ledger.undoAlls.length === 0 ? [] : [completed.join(',')],
  });
  expect(ledger.undoAlls.length >= undoAllCalls, 'undoAll called').toBe(true);

  // Nothing runs more often than its attempts, but for what a crash cut off.
  const repeats = world.deaths.flatMap((d) => cutOff(d, id));
  for (const event of new Set(ledger.events)) {
    const [kind, key] = event.split(':') as [string, string | undefined];
    if (key === undefined) continue;
    // Per-element undos of the completed elements are undoAll's when it is declared.
    const ref = refOf(key);
    const once = kind === 'undo' && ref !== undefined && undoneByAll(ref.index) ? 0 : 1;
    const allowed = (kind === 'run' ? attemptsOf(sc, key) : once) + repeats.filter((e) => e === event).length;
    expect({ event, times: ledger.count(event) }).toEqual({ event, times: Math.min(ledger.count(event), allowed) });
  }

  // The map's counters agree with its elements' outcomes.
  const failing = Array.from({ length: sc.count }, (_, i) => i).filter((i) => stopOf(sc, i)?.kind === 'failed');
  const halting = Array.from({ length: sc.count }, (_, i) => i).filter((i) => stopOf(sc, i)?.kind === 'halted');
  expect(stats.target, 'dispatch ended').not.toBeNull();
  expect(stats.settled).toBe(stats.target);
  expect(stats.completed + stats.failed + stats.halted + stats.skipped).toBe(stats.settled);
  expect(stats.started).toBe(stats.completed + stats.failed + stats.halted);
  expect(entries.filter((e) => e.outcome === 'failed').every((e) => failing.includes(e.index))).toBe(true);
  expect(entries.filter((e) => e.outcome === 'halted').every((e) => halting.includes(e.index))).toBe(true);
  const stops = stats.halted + (sc.atomic ? stats.failed : 0);
  if (halting.length === 0 && (!sc.atomic || failing.length === 0)) {
    expect({ target: stats.target, failed: stats.failed, stop: stats.stop }).toEqual({ target: sc.count, failed: failing.length, stop: null });
  } else {
    expect(stats.stop === null).toBe(stops === 0);
  }
  const map = await store.load(mapId);
  if (rootUndone) {
    expect(map?.snapshot.value).toBe('undone');
    const rb = stats.rollback;
    // With undoAll the rollback throws run over the aborted elements only (none here).
    const byActors = sc.undoAll === 'none';
    expect({ target: rb.target, settled: rb.settled, undoneOrFailed: rb.undone + rb.failed, notNeeded: rb.notNeeded }).toEqual({
      target: byActors ? stats.started : 0,
      settled: byActors ? stats.started : 0,
      undoneOrFailed: byActors ? stats.completed : 0,
      notNeeded: byActors ? stats.failed + stats.halted : 0,
    });
  } else {
    expect({ map: map?.snapshot.value, rollback: stats.rollback.target }).toEqual({ map: result.status, rollback: null });
  }

  // Bounded throws: at most batchSize actors spawned and start jobs enqueued per map commit.
  const bound = mode.fanOut ? sc.batchSize : 1;
  for (const spawn of book.spawns.filter((s) => s.actor === mapId)) expect({ revision: spawn.revision, spawned: spawn.spawned.length }).toEqual({ revision: spawn.revision, spawned: Math.min(spawn.spawned.length, bound) });
  // Start jobs, and those a stall redispatch enqueues again (`.start.r<round>`).
  const startJob = /^(.*)\.(\d+|rb-\d+)\.start(\.r\d+)?$/;
  const starts = new Map<string, Set<string>>();
  for (const call of book.enqueues) {
    for (const purpose of new Set(call.jobs.map((j) => j.purpose))) {
      const n = call.jobs.filter((j) => j.purpose === purpose).length;
      expect({ purpose, jobs: n }).toEqual({ purpose, jobs: Math.min(n, sc.batchSize) });
    }
    for (const job of call.jobs) {
      if (startJob.exec(job.id)?.[1] !== mapId) continue;
      const key = `${call.mapRevision} ${job.purpose}`;
      starts.set(key, (starts.get(key) ?? new Set()).add(job.id));
    }
  }
  for (const [key, jobs] of starts) expect({ key, jobs: jobs.size }).toEqual({ key, jobs: Math.min(jobs.size, sc.batchSize) });
  const started = new Set([...starts.values()].flatMap((s) => [...s]).filter((j) => j.endsWith('.start')));
  const elementStarts = [...started].filter((j) => !j.includes('.rb-')).length;
  const rollbackStarts = [...started].filter((j) => j.includes('.rb-')).length;
  expect({ elementStarts, rollbackStarts }).toEqual(mode.fanOut ? { elementStarts: stats.target, rollbackStarts: stats.rollback.target ?? 0 } : { elementStarts: 0, rollbackStarts: 0 });

  // No inbox entry applied twice.
  for (const [actor, consumed] of book.consumed) {
    const keys = consumed.map((e) => e.dedupeKey);
    expect({ actor, keys: [...new Set(keys)] }).toEqual({ actor, keys });
  }

  // Nothing left behind.
  const actors = [id, mapId, ...Array.from({ length: sc.count }, (_, i) => `${mapId}.${i}`), ...Array.from({ length: sc.count }, (_, p) => `${mapId}.rb-${p}`)];
  for (const actor of actors) {
    const loaded = await store.load(actor);
    const [, rb, n] = /^\.(rb-)?(\d+)$/.exec(actor.slice(mapId.length)) ?? [];
    if (n !== undefined) expect({ actor, exists: loaded !== undefined }).toEqual({ actor, exists: Number(n) < (rb === undefined ? stats.target! : (stats.rollback.target ?? 0)) });
    if (loaded === undefined) continue;
    expect({ actor, inbox: loaded.inbox.entries.map((e) => e.dedupeKey) }).toEqual({ actor, inbox: [] });
    const { kind, value } = loaded.snapshot;
    const settled = kind === 'map' ? mapTagsOf(value).has('settled') : kind === 'element-rollback' ? elementRollbackTagsOf(value).has('settled') : ['completed', 'failed', 'halted', 'cancelled'].includes(executionStatusOf(value));
    expect({ actor, value, settled }).toEqual({ actor, value, settled: true });
  }
  expect((await store.listActive(10_000)).ids, 'active index').toEqual([]);
  expect(world.queue.inspect().map((p) => p.job.id), 'pending jobs').toEqual([]);
  // Only the jobs a dead worker held and the schedule failed for good.
  const failedForGood = new Set(world.deaths.filter((d) => d.failed).map((d) => d.job));
  expect(world.queue.failed().filter((f) => !failedForGood.has(f.job.id)).map((f) => `${f.job.id}: ${String(f.error)}`), 'failed jobs').toEqual([]);
}

async function describeWorld(world: MapWorld, sc: MapScenario, ledger: EffectsLedger, undoCall: string | undefined): Promise<string> {
  const lines: string[] = [`scenario: ${JSON.stringify(sc)}`];
  if (undoCall !== undefined) lines.push(undoCall);
  const ids = [world.id, world.mapId, ...Array.from({ length: Math.min(sc.count, 20) }, (_, i) => `${world.mapId}.${i}`), ...Array.from({ length: Math.min(sc.count, 20) }, (_, p) => `${world.mapId}.rb-${p}`)];
  for (const actor of ids) {
    const loaded = await world.store.load(actor).catch(() => undefined);
    if (loaded === undefined) continue;
    lines.push(`${actor}: ${JSON.stringify(loaded.snapshot.value)} rev ${loaded.revision} inbox ${JSON.stringify(loaded.inbox.entries.map((e) => e.dedupeKey))} leased ${await world.store.hasLease(actor)}`);
  }
  lines.push(`stats: ${JSON.stringify(await world.store.readMapStats(world.mapId).catch(() => undefined))}`);
  lines.push(`active: ${JSON.stringify((await world.store.listActive(50)).ids)}`);
  lines.push(`pending: ${JSON.stringify(world.queue.inspect().slice(0, 50).map((p) => [p.job.id, p.dueAt]))} at ${world.time.now()}`);
  lines.push(`failed jobs: ${JSON.stringify(world.queue.failed().map((f) => [f.job.id, String(f.error)]))}`);
  lines.push(`events: ${ledger.events.slice(0, 300).join(' ')}`);
  lines.push(...world.journal.slice(-200));
  return lines.join('\n');
}

/** The property: the in-order runs of both modes agree, and the scheduled run is as required. */
async function checkScenario(sc: MapScenario, schedule: readonly Choice[]): Promise<void> {
  const inline = await runChecked(sc, { fanOut: false, background: false }, { kind: 'rounds' });
  const fanned = await runChecked(sc, { fanOut: true, background: false }, { kind: 'rounds' });
  // A retried element parks on its timer in fan-out (later elements start meanwhile, S-map-09), and sleeps in place inline:
  // which elements a map that stops (atomic, or an element halts) runs then depends on the mode.
  const stops = sc.atomic || sc.halting.length > 0;
  if (!stops || sc.flaky.length === 0) expect(fanned, 'fan-out in order equals inline').toEqual(inline);
  // The same kind of end, unless one element may stop the map by failing and another by halting (then either may come first).
  else if (!(sc.atomic && sc.failing.length > 0 && sc.halting.length > 0)) expect({ status: fanned.outcome.status, step: fanned.outcome.step }).toEqual({ status: inline.outcome.status, step: inline.outcome.step });
  // Inline, the first element that stops the map (in index order) is the one whose error or reason the run reports.
  const first = Array.from({ length: sc.count }, (_, i) => i).find((i) => stopOf(sc, i)?.kind === 'halted' || (sc.atomic && stopOf(sc, i) !== undefined));
  const stop = first === undefined ? undefined : stopOf(sc, first);
  if (stop !== undefined && (stop.kind === 'failed' || !sc.undo)) {
    expect(inline.outcome).toMatchObject(stop.kind === 'failed' ? { status: 'failed', message: `${stop.step}[${first}] failed` } : { status: 'halted', reason: `${stop.step}[${first}] halted` });
  }
  await runChecked(sc, { fanOut: sc.fanOut, background: true }, { kind: 'schedule', choices: schedule });
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

describe('map under chaos: inline and fan-out, random failures, delivery orders, duplicates and crashes', () => {
  it(
    'nothing is left in place, nothing runs twice but what a crash cut off, throws are bounded, in-order modes agree, and nothing is left behind',
    async () => {
      await fc.assert(
        fc.asyncProperty(scenarioArb, scheduleArb, async (sc, schedule) => {
          await checkScenario(sc, schedule);
        }),
        RUNS,
      );
    },
    TEST_TIMEOUT_MS,
  );
});

// ---------------------------------------------------------------------------
// Found by the property, fixed on main (1af2006): undo(id) of a run whose fan-out map rolls back in jobs
// ---------------------------------------------------------------------------

describe('fixed: undo(id) of a completed run with a fan-out map', () => {
  // The property's minimal counterexample: one element, fanned out, jobs in order, no failure, the
  // completed run undone. The undo is applied in the caller: the root undoes b, reaches the map's
  // entry (rolling_back.undoingChild) and signals the map, whose rollback throw enqueues the
  // element-rollback job, so the call cannot finish the rollback. runtime.undo used to find the
  // root rolling_back with no operator.undo left in its inbox and throw InvalidStateError "it
  // ended by itself before the undo reached it (the undo was discarded); there is nothing to
  // undo", while the rollback was under way. §11.1 (and §18 Q8): the call returns
  // { status: 'dispatched', executionId, reason: 'awaiting' }, and awaitResult(id) gives the
  // cancelled result once the rollback jobs ran.
  const sc: MapScenario = { count: 1, batchSize: 1, atomic: true, source: 'array', fanOut: true, collect: false, undoAll: 'none', owner: 'none', undo: true, failing: [], halting: [], flaky: [], undoFailing: [] };

  async function undoFannedOut(check: (world: MapWorld, undo: () => Promise<unknown>) => Promise<void>): Promise<EffectsLedger> {
    const ledger = new EffectsLedger();
    const root = mapReactor(sc, ledger, { fanOut: true, background: false });
    const world = createMapWorld(root, { kind: 'rounds' }, 1_000);
    try {
      expect(await world.runtime.run(root, inputOf(sc), { executionId: world.id })).toMatchObject({ status: 'dispatched' });
      await world.drain();
      expect(await world.runtime.awaitResult(world.id, { timeoutMs: 10 })).toMatchObject({ status: 'completed' });
      await check(world, () => world.runtime.undo(world.id));
    } finally {
      await world.close();
    }
    return ledger;
  }

  it('the rollback the undo started runs in jobs to the end: every effect undone, the root cancelled', async () => {
    const ledger = await undoFannedOut(async (world, undo) => {
      await undo().catch(() => undefined);
      expect((await world.runtime.find(world.id)).status).toBe('rolling_back');
      expect(world.queue.pending({ purpose: 'element-rollback' }).map((job) => job.id)).toEqual([`${world.mapId}.rb-0.start`]);
      await world.drain();
      expect(await world.runtime.awaitResult(world.id, { timeoutMs: 10 })).toMatchObject({ status: 'cancelled', rollbackFailures: [] });
    });
    expect(ledger.events).toEqual(['run:a', 'run:e1[0]', 'run:e2[0]', 'run:b', 'undo:b', 'undo:e2[0]', 'undo:e1[0]', 'undo:a']);
    expect([...ledger.placed]).toEqual([]);
  });

  it('undo(id) returns dispatched while the rollback runs in jobs (§11.1), not InvalidStateError', async () => {
    await undoFannedOut(async (world, undo) => {
      expect(await undo()).toEqual({ status: 'dispatched', executionId: world.id, reason: 'awaiting' });
    });
  });
});

// ---------------------------------------------------------------------------
// Found by the property, fixed on main (25ad5d1): undo(id) of a run halted at its map left the completed elements
// ---------------------------------------------------------------------------

describe('fixed: undo(id) of a run whose map halted', () => {
  // The property's minimal counterexample with a completed element: two elements, inline, element
  // 1's e1 halts. The map halts and the run halts at m with nothing rolled back (S-map-11), as
  // designed. undo(id) used to undo a and return cancelled with no rollback failure, leaving
  // element 0's e1 and e2 in place: the halted map step was neither on the root's undo stack (only
  // completed steps are) nor recorded as pending compensation (as an aborted map step is, §11.3),
  // so the root's rollback never reached the map, which stayed `halted` (undoable) for good. The
  // design rolls a halted map back like any forward end (compensateMap: `completed`, `failed`,
  // `halted`, `aborted` → compensate.child; §10.5 and §18 Q3: the halted element is `not_needed`,
  // its own completed steps stay), as a composed child that halted is undone with its run.
  const sc: MapScenario = {
    count: 2,
    batchSize: 1,
    atomic: true,
    source: 'array',
    fanOut: false,
    collect: false,
    undoAll: 'none',
    owner: 'none',
    undo: true,
    failing: [],
    halting: [{ index: 1, step: 'e1' }],
    flaky: [],
    undoFailing: [],
  };

  async function haltThenUndo(): Promise<{ ledger: EffectsLedger; world: MapWorld; undone: unknown; map: unknown }> {
    const ledger = new EffectsLedger();
    const root = mapReactor(sc, ledger, { fanOut: false, background: false });
    const world = createMapWorld(root, { kind: 'rounds' }, 1_000);
    try {
      expect(await world.runtime.run(root, inputOf(sc), { executionId: world.id })).toMatchObject({ status: 'halted', step: 'm', reason: 'e1[1] halted' });
      expect([...ledger.placed].sort()).toEqual(['a', 'e1[0]', 'e2[0]']);
      const undone = await world.runtime.undo(world.id);
      await world.drain();
      return { ledger, world, undone, map: (await world.store.load(world.mapId))?.snapshot.value };
    } finally {
      await world.close();
    }
  }

  it('the run halts at m with nothing rolled back; undo(id) ends it cancelled', async () => {
    const { undone } = await haltThenUndo();
    expect(undone).toMatchObject({ status: 'cancelled', rollbackFailures: [] });
  });

  it('undo(id) rolls the halted map back: element 0 is undone, element 1 stays as it halted (not_needed)', async () => {
    const { ledger, map } = await haltThenUndo();
    expect({ events: ledger.events, placed: [...ledger.placed], map }).toEqual({
      events: ['run:a', 'run:e1[0]', 'run:e2[0]', 'run:e1[1]', 'undo:e2[0]', 'undo:e1[0]', 'undo:a'],
      placed: [],
      map: 'undone',
    });
  });
});
