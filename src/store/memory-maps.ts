/**
 * The map keys of the memory store: one {@link MapRow} per map, mirroring the Redis keys
 * (`docs/redis-keys.md`, map keys) and `lua/includes/mapWrites.lua` step for step, applied inside
 * the memory store's synchronous commit.
 */
import type { RollbackFailure } from '../../machines/execution-types.js';
import { decode, encode } from '../serialization/index.js';
import { bucketOf, ELEMENT_OUTCOME_LETTERS, ELEMENT_OUTCOME_OF, readStats, ROLLBACK_OUTCOMES, startedWindow, stopValue } from './map-writes.js';
import type { MachineVersions } from './snapshot-codec.js';
import { decodeSnapshot } from './snapshot-codec.js';
import type { MapGate, MapPageEntry, MapStats, MapWrites, Signal } from './store.js';

/** One map's keys: the stats hash (as Redis holds it, field → text), the lists and the outcome slots. */
interface MapRow {
  readonly stats: Map<string, string>;
  source: Uint8Array[];
  /** Element index → outcome letter (every bucket). */
  readonly outcomes: Map<number, string>;
  readonly started: number[];
  readonly aborted: number[];
  /** Started-list position → rollback outcome letter (every bucket). */
  readonly rollbackOutcomes: Map<number, string>;
  readonly rollbackFailures: Uint8Array[];
  /** Position → the start payload of a fan-out position (every bucket). */
  readonly starts: Map<number, Uint8Array>;
}

/** A commit's map writes with every value encoded up front (so an unencodable one refuses the commit before anything is written). */
export interface PreparedMapWrites {
  readonly writes: MapWrites;
  readonly source: readonly Uint8Array[];
  readonly failures: readonly Uint8Array[];
}

/** What this step's map writes of one actor decided, for its conditional signals. */
export interface MapFlags {
  reportNew: boolean;
  rollbackReportNew: boolean;
}

const own = (value: unknown): Uint8Array => Buffer.from(encode(value));

/** Encodes a commit's map writes. */
export function prepareMapWrites(writes: MapWrites | undefined): PreparedMapWrites | undefined {
  if (writes === undefined) return undefined;
  return { writes, source: (writes.source ?? []).map(own), failures: (writes.rollbackReport?.failures ?? []).map(own) };
}

/** What the memory store reads of its actor rows for a map page and a gate. */
export interface MemoryActors {
  status(id: string): string | undefined;
  results(id: string): ReadonlyMap<string, Uint8Array> | undefined;
  snapshot(id: string): Uint8Array | undefined;
}

/** The memory store's maps. */
export interface MemoryMaps {
  /** Applies `id`'s map writes of one step (as `applyMapWrites` in mapWrites.lua); returns what its conditional signals read. */
  apply(id: string, prepared: PreparedMapWrites): MapFlags;
  /** Whether a conditional signal lands, after every write of the step (`flags`: its sender's). */
  holds(signal: Signal, flags: MapFlags | undefined): boolean;
  gate(map: string): MapGate;
  stats(map: string): MapStats | undefined;
  source(map: string, from: number, count: number): unknown[];
  starts(map: string, from: number, count: number): (Uint8Array | undefined)[];
  started(map: string, total: number, fromPosition: number, count: number, list: 'started' | 'aborted'): number[];
  page(map: string, from: number, count: number, returns: string | null): MapPageEntry[];
  rollbackFailures(map: string): RollbackFailure[];
}

/** The maps of a memory store whose actors are read through `actors`. */
export function createMemoryMaps(actors: MemoryActors, machines: MachineVersions): MemoryMaps {
  const maps = new Map<string, MapRow>();
  const add = (stats: Map<string, string>, field: string, by: number) => stats.set(field, String(Number(stats.get(field) ?? 0) + by));
  const bumpBuckets = (stats: Map<string, string>, bucket: number) => {
    if (bucket + 1 > Number(stats.get('buckets') ?? 0)) stats.set('buckets', String(bucket + 1));
  };
  const reached = (stats: Map<string, string>, target: string, settled: string) => {
    const goal = stats.get(target);
    return goal !== undefined && Number(goal) === Number(stats.get(settled) ?? 0);
  };
  return {
    apply(id, { writes, source, failures }) {
      const flags: MapFlags = { reportNew: false, rollbackReportNew: false };
      const { init, started, report, target, rollbackTarget, rollbackReport } = writes;
      if (init !== undefined) {
        // A new map under the id: any leftover is replaced.
        const stats = new Map<string, string>([['batch', String(init.batchSize)], ['atomic', init.atomic ? '1' : '0'], ['mode', init.mode]]);
        if (init.total !== null) stats.set('total', String(init.total));
        maps.set(id, { stats, source: [], outcomes: new Map(), started: [], aborted: [], rollbackOutcomes: new Map(), rollbackFailures: [], starts: new Map() });
      }
      const mine = maps.get(id);
      if (source.length > 0) mine?.source.push(...source);
      if (writes.starts !== undefined && mine !== undefined) {
        writes.starts.starts.forEach((bytes, i) => mine.starts.set(writes.starts!.from + i, Uint8Array.from(bytes)));
        bumpBuckets(mine.stats, bucketOf(writes.starts.from + writes.starts.starts.length - 1));
      }
      if (started !== undefined) {
        const map = maps.get(started.map);
        if (map !== undefined) {
          map.started.push(started.index);
          add(map.stats, 'started', 1);
        }
      }
      const reportTo = report === undefined ? undefined : maps.get(report.map);
      if (report !== undefined && reportTo !== undefined && !reportTo.outcomes.has(report.index)) {
        flags.reportNew = true;
        reportTo.outcomes.set(report.index, ELEMENT_OUTCOME_LETTERS[report.outcome]);
        add(reportTo.stats, 'settled', 1);
        add(reportTo.stats, report.outcome, 1);
        reportTo.stats.set('lastReportAt', String(report.at));
        bumpBuckets(reportTo.stats, bucketOf(report.index));
        if (report.stops && !reportTo.stats.has('stop')) reportTo.stats.set('stop', stopValue(report.outcome, report.index));
        if (report.outcome === 'aborted') reportTo.aborted.push(report.index);
      }
      if (target !== undefined) mine?.stats.set('target', String(target.target));
      if (rollbackTarget !== undefined) mine?.stats.set('rb.target', String(rollbackTarget.target));
      const rollbackTo = rollbackReport === undefined ? undefined : maps.get(rollbackReport.map);
      if (rollbackReport !== undefined && rollbackTo !== undefined && !rollbackTo.rollbackOutcomes.has(rollbackReport.position)) {
        flags.rollbackReportNew = true;
        const { letter, counter } = ROLLBACK_OUTCOMES[rollbackReport.outcome];
        rollbackTo.rollbackOutcomes.set(rollbackReport.position, letter);
        add(rollbackTo.stats, 'rb.settled', 1);
        add(rollbackTo.stats, counter, 1);
        bumpBuckets(rollbackTo.stats, bucketOf(rollbackReport.position));
        rollbackTo.rollbackFailures.push(...failures);
      }
      if (writes.dropSource === true && mine !== undefined) {
        mine.source = [];
        mine.starts.clear();
      }
      return flags;
    },
    holds(signal, flags) {
      switch (signal.condition) {
        case undefined:
          return true;
        case 'reportNew':
          return flags?.reportNew === true;
        case 'rollbackReportNew':
          return flags?.rollbackReportNew === true;
        case 'mapSettled': {
          const map = maps.get(signal.to);
          return map !== undefined && reached(map.stats, 'target', 'settled');
        }
        case 'rolledBack': {
          const map = maps.get(signal.to);
          return map !== undefined && reached(map.stats, 'rb.target', 'rb.settled');
        }
      }
    },
    gate(map) {
      return { status: actors.status(map), stop: maps.get(map)?.stats.get('stop') };
    },
    stats(map) {
      const row = maps.get(map);
      return row === undefined ? undefined : readStats(map, Object.fromEntries(row.stats));
    },
    source(map, from, count) {
      if (!(count > 0)) return [];
      return (maps.get(map)?.source ?? []).slice(Math.max(0, from), Math.max(0, from) + count).map((bytes) => decode(bytes));
    },
    starts(map, from, count) {
      const row = maps.get(map);
      return Array.from({ length: Math.max(0, Math.floor(count)) }, (_, i) => row?.starts.get(Math.max(0, Math.floor(from)) + i));
    },
    started(map, total, fromPosition, count, list) {
      const window = startedWindow(total, fromPosition, count);
      if (window === undefined) return [];
      const row = maps.get(map);
      return ((list === 'aborted' ? row?.aborted : row?.started) ?? []).slice(window.first, window.last + 1).reverse();
    },
    page(map, from, count, returns) {
      const row = maps.get(map);
      if (row === undefined || !(count > 0)) return [];
      const target = row.stats.get('target');
      const entries: MapPageEntry[] = [];
      for (let index = Math.max(0, from); index < Math.max(0, from) + count; index += 1) {
        const letter = row.outcomes.get(index);
        const outcome = letter === undefined ? (target !== undefined && index >= Number(target) ? 'skipped' : undefined) : ELEMENT_OUTCOME_OF.get(letter);
        const element = `${map}.${index}`;
        if (outcome === 'completed') {
          const results = actors.results(element);
          const bytes = returns === null ? undefined : results?.get(returns);
          const result = results === undefined ? undefined : returns === null ? new Map([...results].map(([step, value]) => [step, decode(value)])) : bytes === undefined ? undefined : decode(bytes);
          entries.push({ index, outcome, ...(result === undefined ? {} : { result }) });
        } else if (outcome === 'failed' || outcome === 'halted') {
          const snapshot = actors.snapshot(element);
          entries.push({ index, outcome, ...(snapshot === undefined ? {} : { snapshot: decodeSnapshot(snapshot, machines) }) });
        } else {
          entries.push({ index, outcome });
        }
      }
      return entries;
    },
    rollbackFailures(map) {
      return (maps.get(map)?.rollbackFailures ?? []).map((bytes) => decode(bytes) as RollbackFailure);
    },
  };
}
