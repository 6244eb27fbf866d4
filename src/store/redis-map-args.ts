/**
 * Pure argument builders and reply readers of the Redis store's map writes and map reads: the map
 * section of a create or commit (layout in `lua/includes/mapWrites.lua`) and `readMapPage-1.lua`.
 * Unit-tested without Redis.
 */
import { XreactorError } from '../errors/index.js';
import { encode } from '../serialization/index.js';
import type { MapKeys } from './keys.js';
import type { Commit, MapWrites } from './store.js';

/** The file of the map page script. */
export const READ_MAP_PAGE_FILE = 'readMapPage-1.lua';

/** A Buffer over the bytes msgpack encoded (ioredis sends Buffers as binary). */
const bytesOf = (value: unknown): Buffer => {
  const bytes = encode(value);
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};

/** A Buffer over bytes (no copy). */
const asBuffer = (bytes: Uint8Array): Buffer => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

/** The ops of one actor's map writes, in the order mapWrites.lua applies them. */
export function mapOps(writes: MapWrites): (string | Buffer)[] {
  const ops: (string | Buffer)[] = [];
  let n = 0;
  const op = (...args: (string | Buffer)[]) => {
    ops.push(...args);
    n += 1;
  };
  const { init, source, started, report, target, rollbackTarget, rollbackReport } = writes;
  if (init !== undefined) op('init', init.total === null ? '' : String(init.total), String(init.batchSize), init.atomic ? '1' : '0', init.mode);
  if (source !== undefined) op('source', String(source.length), ...source.map(bytesOf));
  if (writes.starts !== undefined) op('starts', String(writes.starts.from), String(writes.starts.starts.length), ...writes.starts.starts.map(asBuffer));
  if (started !== undefined) op('started', started.map, String(started.index), started.gate === true ? '1' : '0');
  if (report !== undefined) op('report', report.map, String(report.index), report.outcome, report.stops ? '1' : '0', String(report.at));
  if (target !== undefined) op('target', String(target.target));
  if (rollbackTarget !== undefined) op('rbtarget', String(rollbackTarget.target));
  if (rollbackReport !== undefined) op('rbreport', rollbackReport.map, String(rollbackReport.position), rollbackReport.outcome, String(rollbackReport.failures.length), ...rollbackReport.failures.map(bytesOf));
  if (writes.dropSource === true) op('dropsource');
  return [String(n), ...ops];
}

/** The actors of a step with map writes, with theirs: the committing actor `id`, then its spawned actors, depth first. */
function mapWriters(id: string, commit: Commit, into: [string, MapWrites][]): [string, MapWrites][] {
  if (commit.writes.map !== undefined) into.push([id, commit.writes.map]);
  for (const actor of commit.spawn ?? []) mapWriters(actor.id, actor.commit, into);
  return into;
}

/** Whether a step (a commit and its spawned actors) has map writes. */
export function hasMapWrites(commit: Commit): boolean {
  return commit.writes.map !== undefined || (commit.spawn ?? []).some((actor) => hasMapWrites(actor.commit));
}

/** The map section of a step, after its kernel tail; empty when no commit of the step has map writes. */
export function mapSectionArgv(id: string, commit: Commit): (string | Buffer)[] {
  const writers = mapWriters(id, commit, []);
  if (writers.length === 0) return [];
  return [String(writers.length), ...writers.flatMap(([actor, writes]) => [actor, ...mapOps(writes)])];
}

/** Arguments of `readMapPage-1.lua`: the map's stats key, the root base, the map, the window, which result of each completed element. */
export function readMapPageArgs(keys: MapKeys, from: number, count: number, returns: string | null): { readonly keys: readonly string[]; readonly argv: readonly string[] } {
  return { keys: [keys.stats], argv: [keys.base, keys.id, String(Math.max(0, Math.floor(from))), String(Math.max(0, Math.floor(count))), returns === null ? '0' : '1', returns ?? ''] };
}

/** One element of a map page as the script replies it, still bytes (the store decodes them). */
export interface MapPageReplyEntry {
  /** The slot's letter, or null when the element has not reported. */
  readonly letter: string | null;
  /** A completed element's result: the named step's bytes, or every result as step / bytes pairs; null when there is none. */
  readonly result: Buffer | readonly (readonly [step: string, bytes: Buffer])[] | null;
  /** A failed or halted element's snapshot envelope bytes; null when it is gone. */
  readonly snapshot: Buffer | null;
}

/** The reply of `readMapPage-1.lua`, read. */
export interface MapPageReply {
  /** Whether the map has stats (none: an unknown or expired map, and no entries). */
  readonly exists: boolean;
  readonly target: number | null;
  readonly entries: readonly MapPageReplyEntry[];
}

const invalid = (reply: unknown) =>
  new XreactorError('script_reply_invalid', `${READ_MAP_PAGE_FILE} replied ${JSON.stringify(reply)}, not a map page: is another program's script loaded under its name?`);

/** A reply field as text (Buffers decoded, strings and numbers as they are), or null when absent. */
const text = (value: unknown): string | null => {
  if (value == null) return null;
  if (Buffer.isBuffer(value)) return value.toString();
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  throw invalid(value);
};
/** A reply field as bytes, or null when absent. */
const bytes = (value: unknown): Buffer | null => (Buffer.isBuffer(value) ? value : value == null ? null : Buffer.from(text(value) ?? ''));

/**
 * Reads the reply of `readMapPage-1.lua` (run with binary replies).
 * @throws XreactorError `script_reply_invalid` for a reply of another shape.
 */
export function readMapPageReply(reply: unknown, returnsAll: boolean): MapPageReply {
  if (!Array.isArray(reply) || reply.length < 2) throw invalid(reply);
  const exists = text(reply[0]) === '1';
  const target = text(reply[1]);
  const entries = reply.slice(2).map((entry: unknown): MapPageReplyEntry => {
    if (!Array.isArray(entry) || entry.length !== 3) throw invalid(reply);
    const [letter, result, snapshot] = entry as unknown[];
    let read: MapPageReplyEntry['result'] = null;
    if (returnsAll && Array.isArray(result)) {
      const pairs: [string, Buffer][] = [];
      for (let i = 0; i + 1 < result.length; i += 2) pairs.push([text(result[i]) ?? '', bytes(result[i + 1]) ?? Buffer.alloc(0)]);
      read = pairs;
    } else if (!returnsAll) {
      read = bytes(result);
    }
    return { letter: text(letter), result: read, snapshot: bytes(snapshot) };
  });
  return { exists, target: target === null || target === '' ? null : Number(target), entries };
}
