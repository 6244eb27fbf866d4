/**
 * What every adapter shares about map writes ({@link MapWrites}): how outcomes are stored (one
 * letter per slot, a counter per outcome), how positions fall into buckets, the rules a commit's
 * map writes and conditional signals must follow (checked before anything is written), and how
 * stored stats read back. `lua/includes/mapWrites.lua` mirrors the tables (a unit test compares them).
 */
import { XreactorError } from '../errors/index.js';
import { rootOf } from './keys.js';
import { signalCrossRootError } from './store.js';
import type { Commit, ElementOutcome, MapStats, MapWrites, RollbackOutcome } from './store.js';

/** Positions per outcome bucket (`mapout:<map>:<bucket>`, `rbout:<map>:<bucket>`): no hash holds more. */
export const MAP_BUCKET_SIZE = 1024;

/** The bucket of a position. */
export function bucketOf(position: number): number {
  return Math.floor(position / MAP_BUCKET_SIZE);
}

/** The letter an element outcome is stored as in its slot; its counter in the stats is the outcome's name. */
export const ELEMENT_OUTCOME_LETTERS: Readonly<Record<ElementOutcome, string>> = { completed: 'c', failed: 'f', halted: 'h', aborted: 'a', skipped: 's', cancelled: 'x' };

/** The letter a rollback outcome is stored as in its slot, and its counter in the stats. */
export const ROLLBACK_OUTCOMES: Readonly<Record<RollbackOutcome, { readonly letter: string; readonly counter: string }>> = {
  undone: { letter: 'u', counter: 'rb.undone' },
  failed: { letter: 'f', counter: 'rb.failed' },
  not_needed: { letter: 'n', counter: 'rb.notNeeded' },
  element_in_flight: { letter: 'i', counter: 'rb.inFlight' },
  context_unavailable: { letter: 'g', counter: 'rb.unavailable' },
};

/** The element outcome stored as `letter`. */
export const ELEMENT_OUTCOME_OF: ReadonlyMap<string, ElementOutcome> = new Map(Object.entries(ELEMENT_OUTCOME_LETTERS).map(([outcome, letter]) => [letter, outcome as ElementOutcome]));

/** The outcomes a report may stop the map with. */
const STOPPING: ReadonlySet<ElementOutcome> = new Set(['failed', 'halted', 'aborted']);

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

const invalid = (id: string, what: string) =>
  new XreactorError('map_write_invalid', `commit of actor ${id} carries an invalid map write: ${what}; nothing was written`);

/**
 * Checks a commit's map writes and conditional signals (not those of its spawned actors: the
 * caller walks them): the maps written to are of the root, positions and counts are whole
 * numbers, outcomes are known, a report stops only with a stopping outcome, a conditional signal
 * does not cascade, and a `reportNew` / `rollbackReportNew` signal comes with its report.
 * @throws XreactorError `signal_cross_root`, `map_write_invalid`, `signal_condition_invalid`
 */
export function checkMapRules(id: string, commit: Commit): void {
  const map = commit.writes.map;
  if (map !== undefined) checkMapWrites(id, map);
  for (const signal of commit.signals ?? []) {
    const condition = signal.condition;
    if (condition === undefined) continue;
    const refuse = (why: string) =>
      new XreactorError('signal_condition_invalid', `actor ${id} sends signal ${JSON.stringify(signal.dedupeKey)} to ${signal.to} with condition ${JSON.stringify(condition)}: ${why}; nothing was written`);
    if (!['reportNew', 'mapSettled', 'rollbackReportNew', 'rolledBack'].includes(condition)) throw refuse('not a condition (reportNew, mapSettled, rollbackReportNew, rolledBack)');
    if (signal.cascade === true) throw refuse('a conditional signal cannot cascade');
    if (condition === 'reportNew' && map?.report === undefined) throw refuse('the commit has no report');
    if (condition === 'rollbackReportNew' && map?.rollbackReport === undefined) throw refuse('the commit has no rollback report');
  }
}

function checkMapWrites(id: string, map: MapWrites): void {
  const root = rootOf(id);
  const { init, started, report, target, rollbackTarget, rollbackReport } = map;
  if (init !== undefined) {
    if (!(init.total === null || isCount(init.total))) throw invalid(id, `init total ${String(init.total)} is not a whole number or null`);
    if (!(isCount(init.batchSize) && init.batchSize > 0)) throw invalid(id, `init batchSize ${String(init.batchSize)} is not a whole number above 0`);
    if (init.mode !== 'inline' && init.mode !== 'fanOut') throw invalid(id, `init mode ${JSON.stringify(init.mode)} is not inline or fanOut`);
  }
  for (const [write, to] of [['started', started?.map], ['report', report?.map], ['rollbackReport', rollbackReport?.map]] as const) {
    if (to !== undefined && rootOf(to) !== root) throw signalCrossRootError(id, to, 'report to');
    if (to === '') throw invalid(id, `${write} names no map`);
  }
  if (started !== undefined && !isCount(started.index)) throw invalid(id, `started index ${String(started.index)} is not a whole number`);
  if (report !== undefined) {
    if (!isCount(report.index)) throw invalid(id, `report index ${String(report.index)} is not a whole number`);
    if (!(report.outcome in ELEMENT_OUTCOME_LETTERS)) throw invalid(id, `report outcome ${JSON.stringify(report.outcome)} is not an element outcome`);
    if (report.stops && !STOPPING.has(report.outcome)) throw invalid(id, `a report with outcome ${report.outcome} cannot stop the map (only failed, halted, aborted)`);
    if (!Number.isFinite(report.at)) throw invalid(id, `report at ${String(report.at)} is not a time`);
  }
  if (map.starts !== undefined) {
    if (!isCount(map.starts.from)) throw invalid(id, `starts from ${String(map.starts.from)} is not a whole number`);
    if (!map.starts.starts.every((bytes) => bytes instanceof Uint8Array && bytes.byteLength > 0)) throw invalid(id, 'a start payload is not bytes (a non-empty Uint8Array)');
  }
  if (target !== undefined && !isCount(target.target)) throw invalid(id, `target ${String(target.target)} is not a whole number`);
  if (rollbackTarget !== undefined && !isCount(rollbackTarget.target)) throw invalid(id, `rollback target ${String(rollbackTarget.target)} is not a whole number`);
  if (rollbackReport !== undefined) {
    if (!isCount(rollbackReport.position)) throw invalid(id, `rollback report position ${String(rollbackReport.position)} is not a whole number`);
    if (!(rollbackReport.outcome in ROLLBACK_OUTCOMES)) throw invalid(id, `rollback report outcome ${JSON.stringify(rollbackReport.outcome)} is not a rollback outcome`);
  }
}

/** The stop a report records: `<outcome>:<index>`. */
export function stopValue(outcome: ElementOutcome, index: number): string {
  return `${outcome}:${index}`;
}

/**
 * A map's stats from its stored fields (field → text, as the stats hash holds them), or undefined
 * when it has none.
 * @throws XreactorError `map_stats_invalid` for fields that are not what a map writes.
 */
export function readStats(map: string, fields: Readonly<Record<string, string>>): MapStats | undefined {
  if (Object.keys(fields).length === 0) return undefined;
  const count = (name: string): number => {
    const text = fields[name];
    if (text === undefined) return 0;
    const n = Number(text);
    if (!Number.isSafeInteger(n)) throw new XreactorError('map_stats_invalid', `map ${map}: stats field ${name} holds ${JSON.stringify(text)}, not a whole number: is another program's data under the key?`);
    return n;
  };
  const optional = (name: string): number | null => (fields[name] === undefined || fields[name] === '' ? null : count(name));
  const stop = fields['stop'];
  const colon = stop === undefined ? -1 : stop.lastIndexOf(':');
  return {
    total: optional('total'),
    batchSize: count('batch'),
    atomic: fields['atomic'] === '1',
    mode: fields['mode'] === 'fanOut' ? 'fanOut' : 'inline',
    target: optional('target'),
    started: count('started'),
    settled: count('settled'),
    completed: count('completed'),
    failed: count('failed'),
    halted: count('halted'),
    aborted: count('aborted'),
    skipped: count('skipped'),
    cancelled: count('cancelled'),
    stop: stop === undefined || colon < 0 ? null : { kind: stop.slice(0, colon) as 'failed' | 'halted' | 'aborted', index: Number(stop.slice(colon + 1)) },
    lastReportAt: fields['lastReportAt'] === undefined ? null : Number(fields['lastReportAt']),
    rollback: {
      target: optional('rb.target'),
      settled: count('rb.settled'),
      undone: count('rb.undone'),
      failed: count('rb.failed'),
      notNeeded: count('rb.notNeeded'),
      inFlight: count('rb.inFlight'),
      unavailable: count('rb.unavailable'),
    },
  };
}

/**
 * The positions of a started list of `total` entries that `[fromPosition, fromPosition + count)`
 * covers, as list indexes `[first, last]` (first <= last), or undefined when none.
 */
export function startedWindow(total: number, fromPosition: number, count: number): { readonly first: number; readonly last: number } | undefined {
  const from = Math.max(0, Math.floor(fromPosition));
  const to = Math.min(total, from + Math.floor(count));
  if (!(to > from)) return undefined;
  return { first: total - to, last: total - 1 - from };
}

/** Why a map no longer dispatches, from its stored status and stop (`Store.readMapGate`), or undefined while it does (the gate of a fan-out element's start). */
export function mapGateClosedWhy(gate: { readonly status: string | undefined; readonly stop: string | undefined }): string | undefined {
  if (gate.stop !== undefined) return `stopped by ${gate.stop}`;
  if (gate.status === undefined) return 'gone';
  return gate.status === 'running' ? undefined : gate.status;
}
