import type { TraceEntry } from '../../machines/execution-types.js';
import { ExecutionNotFoundError, InboxPendingError, MapGateClosedError, SignalNotLandedError, StaleRevisionError, XreactorError } from '../errors/index.js';
import { mapGateClosedWhy } from './map-writes.js';
import { decodeLoadedResults } from './results-codec.js';
import { decode, encode } from '../serialization/index.js';
import type { Clock } from '../internal/clock.js';
import { systemClock, timeoutOrAbort } from '../internal/clock.js';
import { decodeSnapshot, DEFAULT_MACHINES, encodeSnapshot } from './snapshot-codec.js';
import type { MachineVersions } from './snapshot-codec.js';
import { checkCommitRules, checkCreateOption, uniqueIds } from './commit-rules.js';
import { decodeInboxEntry, encodeInboxEntry, inboxOf } from './inbox-codec.js';
import { decodeUnreadable, encodeUnreadable } from './unreadable-codec.js';
import { executionBusyError, executionExistsError, MAX_CASCADE_DEPTH, undoGapError } from './store.js';
import type { Commit, CommitOptions, CommitWrites, CreateExecution, CreateOptions, DeliveredSignal, LeasedLoad, LoadedExecution, OutboxEffect, Signal, SpawnActor, Store, UndoEntry } from './store.js';
import { undoTopOf } from './undo-top.js';
import { createMemoryMaps, prepareMapWrites } from './memory-maps.js';
import type { MapFlags, PreparedMapWrites } from './memory-maps.js';

interface Row {
  revision: number;
  snapshot: Uint8Array;
  status: string;
  readonly input: Uint8Array;
  readonly results: Map<string, Uint8Array>;
  readonly undo: Uint8Array[];
  readonly trace: Uint8Array[];
  outbox: Uint8Array;
  /** The highest inbox seq assigned (0: none). */
  inboxSeq: number;
  /** Unconsumed inbox entries: seq -> encoded `{ event, dedupeKey }` (the bytes the Redis store keeps). */
  readonly inbox: Map<number, Uint8Array>;
  /** Every dedupe key that landed -> its seq. */
  readonly dedupe: Map<string, number>;
  /** The actors this one awaits, in the order its commit named them. */
  awaits: readonly string[];
  /** The actors it spawned. */
  readonly children: Set<string>;
  /** The actor that spawned it. */
  readonly parent: string | undefined;
  /** The encoded record of `markUnreadable` (undefined: never marked). */
  unreadable: Uint8Array | undefined;
}

/**
 * A commit with everything it stores already encoded, so that a value that cannot be encoded
 * refuses the commit before anything is written (as the Redis store encodes every argument
 * before it calls its script). Copies: msgpackr returns views into its shared working buffer,
 * which a stored view would pin.
 */
interface Prepared {
  readonly commit: Commit;
  /** Exactly encodeSnapshot's bytes, as the Redis store keeps them: `ifSnapshot` compares them. */
  readonly snapshot: Uint8Array;
  readonly outbox: Uint8Array;
  readonly results: readonly (readonly [string, Uint8Array])[];
  readonly undo: readonly (readonly [number, Uint8Array])[];
  readonly trace: readonly Uint8Array[];
  readonly signals: readonly (readonly [Signal, Uint8Array])[];
  readonly spawn: readonly { readonly actor: SpawnActor; readonly input: Uint8Array; readonly prepared: Prepared }[];
  readonly map: PreparedMapWrites | undefined;
}

const own = (value: unknown): Uint8Array => Buffer.from(encode(value));

const NONE: readonly never[] = [];

function prepare(commit: Commit): Prepared {
  const w = commit.writes;
  return {
    commit,
    snapshot: Buffer.from(encodeSnapshot(commit.snapshot)),
    outbox: own(commit.outbox),
    results: w.results.map(([step, value]) => [step, own(value)] as const),
    undo: w.pushUndo.map((entry) => [entry.position, own({ step: entry.step, args: entry.args, result: entry.result })] as const),
    trace: w.trace.map((entry) => own(entry)),
    signals: commit.signals === undefined ? NONE : commit.signals.map((signal) => [signal, Buffer.from(encodeInboxEntry(signal))] as const),
    spawn: commit.spawn === undefined ? NONE : commit.spawn.map((actor) => ({ actor, input: own(actor.input), prepared: prepare(actor.commit) })),
    map: prepareMapWrites(w.map),
  };
}

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Actor kind -> the machine versions of that kind this build can load. Loading an actor of a
   * kind not listed, or of a version not listed for its kind, fails with a retryable
   * DeserializationError (a build that knows it can advance the actor).
   * @defaultValue `{ execution: [EXECUTION_MACHINE_VERSION] }`
   */
  readonly machines?: MachineVersions;
  /**
   * Time source for lease expiry and waits.
   * @defaultValue the system clock
   */
  readonly clock?: Clock;
}

const isPosition = (n: number) => Number.isSafeInteger(n) && n >= 0;

/**
 * The checks the Redis scripts make on a commit's undo writes, before anything is written: a
 * truncation and every position are non-negative integers, and each push lands on an existing
 * entry or directly after the last one (`length` is the stack's current length).
 */
function checkUndo(id: string, w: CommitWrites, length: number): void {
  if (w.truncateUndoTo !== undefined && !isPosition(w.truncateUndoTo)) {
    throw new XreactorError('undo_position_invalid', `truncateUndoTo ${w.truncateUndoTo} is not a non-negative integer`);
  }
  let len = w.truncateUndoTo === undefined ? length : Math.min(length, w.truncateUndoTo);
  for (const entry of w.pushUndo) {
    if (!isPosition(entry.position)) {
      throw new XreactorError('undo_position_invalid', `undo entry of step "${entry.step}" has position ${entry.position}, not a non-negative integer`);
    }
    if (entry.position > len) throw undoGapError(id, entry.position, len);
    if (entry.position === len) len += 1;
  }
}

/** Whether two byte arrays hold the same bytes. */
const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;

/**
 * The embedded store: everything in process memory, encoded exactly as the
 * Redis adapter stores it, so a caller can never alias stored state. Commits
 * are fenced by revision like every other adapter.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const machines = options.machines ?? DEFAULT_MACHINES;
  const clock = options.clock ?? systemClock;
  const rows = new Map<string, Row>();
  const leases = new Map<string, { owner: string; expiresAt: number }>();
  /** The active index: id → the order it was first marked in. */
  const active = new Map<string, number>();
  let activeSeq = 0;
  const waiters = new Map<string, Set<() => void>>();
  const claims = new Map<string, { value: string; expiresAt: number }>();
  const liveClaim = (key: string) => {
    const claimed = claims.get(key);
    if (claimed !== undefined && claimed.expiresAt <= clock.now()) {
      claims.delete(key);
      return undefined;
    }
    return claimed;
  };
  const liveLease = (id: string) => {
    const lease = leases.get(id);
    if (lease !== undefined && lease.expiresAt <= clock.now()) {
      leases.delete(id);
      return undefined;
    }
    return lease;
  };

  /** Whether an owner other than `owner` holds the execution's live lease. */
  const heldByOther = (id: string, owner: string): boolean => {
    const lease = liveLease(id);
    return lease !== undefined && lease.owner !== owner;
  };
  /** Take (or renew, for the same owner) the lease; false when another owner holds it. */
  const takeLease = (id: string, owner: string, ttlMs: number): boolean => {
    if (heldByOther(id, owner)) return false;
    leases.set(id, { owner, expiresAt: clock.now() + ttlMs });
    return true;
  };
  const releaseLease = (id: string, owner: string): void => {
    if (leases.get(id)?.owner === owner) leases.delete(id);
  };
  const markActive = (id: string, isActive: boolean): void => {
    if (isActive) {
      if (!active.has(id)) active.set(id, (activeSeq += 1));
    } else active.delete(id);
  };
  const publishSettled = (id: string): void => {
    for (const wake of waiters.get(id) ?? []) wake();
  };
  const decodeRow = (id: string, r: Row): LoadedExecution => {
    const snapshot = decodeSnapshot(r.snapshot, machines);
    return { snapshot, revision: r.revision, outbox: decode(r.outbox) as OutboxEffect[], inbox: inboxOf(id, r.inboxSeq, r.inbox) };
  };

  // Signals, exactly as lua/includes/deliverSignal.lua delivers them.
  /** The existing actors a signal to `to` reaches: `to`, and with `cascade` what they await, breadth first, each once, MAX_CASCADE_DEPTH levels down at most. */
  const reach = (to: string, cascade: boolean): (readonly [id: string, row: Row])[] => {
    const reached: (readonly [string, Row])[] = [];
    const seen = new Set([to]);
    let level = [to];
    for (let depth = 0; level.length > 0; depth += 1) {
      const next: string[] = [];
      for (const id of level) {
        const r = rows.get(id);
        if (r === undefined) continue;
        reached.push([id, r]);
        if (!cascade || depth >= MAX_CASCADE_DEPTH) continue;
        for (const awaited of r.awaits) {
          if (seen.has(awaited)) continue;
          seen.add(awaited);
          next.push(awaited);
        }
      }
      level = next;
    }
    return reached;
  };
  /** Lands the entry in `r`'s inbox unless it has seen the key; the seq it landed under, or undefined. */
  const land = (r: Row, dedupeKey: string, entry: Uint8Array): number | undefined => {
    if (r.dedupe.has(dedupeKey)) return undefined;
    r.inboxSeq += 1;
    r.inbox.set(r.inboxSeq, entry);
    r.dedupe.set(dedupeKey, r.inboxSeq);
    return r.inboxSeq;
  };
  const row = (id: string): Row => {
    const found = rows.get(id);
    if (found === undefined) throw new ExecutionNotFoundError(id);
    return found;
  };

  /**
   * The checks the scripts make on the actors a commit spawns (lua/includes/actorKernel.lua,
   * checkSpawns), depth first: each id is new (`seen`: named earlier in this step), its lease is
   * free or its owner's, its undo pushes leave no gap.
   */
  const checkSpawns = (commit: Commit, seen: Set<string>): void => {
    for (const actor of commit.spawn ?? []) {
      if (seen.has(actor.id) || rows.has(actor.id)) throw executionExistsError(actor.id);
      seen.add(actor.id);
      if (actor.lease !== undefined && heldByOther(actor.id, actor.lease.owner)) throw executionBusyError(actor.id);
      checkUndo(actor.id, actor.commit.writes, 0);
      checkSpawns(actor.commit, seen);
    }
  };

  const newRow = (input: Uint8Array, parent: string | undefined): Row => ({
    revision: 0,
    snapshot: new Uint8Array(),
    status: '',
    input,
    results: new Map(),
    undo: [],
    trace: [],
    outbox: new Uint8Array(),
    inboxSeq: 0,
    inbox: new Map(),
    dedupe: new Map(),
    awaits: [],
    children: new Set(),
    parent,
    unreadable: undefined,
  });

  /** Writes a prepared commit's own writes, snapshot, status, revision and awaits on `r`. */
  const apply = (r: Row, p: Prepared): void => {
    for (const [step, bytes] of p.results) r.results.set(step, bytes);
    const w = p.commit.writes;
    if (w.truncateUndoTo !== undefined) r.undo.length = Math.min(r.undo.length, w.truncateUndoTo);
    for (const [position, bytes] of p.undo) r.undo[position] = bytes;
    r.trace.push(...p.trace);
    r.snapshot = p.snapshot;
    r.outbox = p.outbox;
    r.status = p.commit.status;
    r.revision += 1;
    if (p.commit.awaits !== undefined) r.awaits = uniqueIds(p.commit.awaits);
  };
  /**
   * Creates the actors a prepared commit of `parent` spawns (and theirs, depth first), as `create`
   * creates one: a child of `parent` unless detached (`retainWithParent: false`), listed active
   * unless `listed: false`.
   */
  const spawnAll = (parent: string, p: Prepared): void => {
    if (p.spawn.length === 0) return;
    const parentRow = rows.get(parent)!;
    for (const { actor, input, prepared } of p.spawn) {
      const r = newRow(input, parent);
      apply(r, prepared);
      rows.set(actor.id, r);
      if (actor.retainWithParent !== false) parentRow.children.add(actor.id);
      if (actor.lease !== undefined) takeLease(actor.id, actor.lease.owner, actor.lease.ttlMs);
      if (actor.listed !== false) markActive(actor.id, true);
      spawnAll(actor.id, prepared);
    }
  };
  const maps = createMemoryMaps(
    {
      status: (id) => rows.get(id)?.status,
      results: (id) => rows.get(id)?.results,
      snapshot: (id) => rows.get(id)?.snapshot,
    },
    machines,
  );
  /**
   * Applies the map writes of a prepared commit of `id`, then those of its spawned actors, depth
   * first (after every row of the step is written, as mapWrites.lua does); returns what each
   * commit's conditional signals read (undefined: the step has no map writes).
   */
  const applyMaps = (id: string, p: Prepared, flags?: Map<Prepared, MapFlags>): Map<Prepared, MapFlags> | undefined => {
    let found = flags;
    if (p.map !== undefined) (found ??= new Map()).set(p, maps.apply(id, p.map));
    for (const spawned of p.spawn) found = applyMaps(spawned.actor.id, spawned.prepared, found);
    return found;
  };
  /**
   * Delivers a prepared commit's signals, then those of its spawned actors, depth first; a
   * conditional one only when its condition holds, its key then noted in `landed` if it landed.
   */
  const deliverAll = (p: Prepared, flags: ReadonlyMap<Prepared, MapFlags> | undefined, landed: string[] | undefined, delivered?: DeliveredSignal[]): void => {
    if (p.signals.length === 0 && p.spawn.length === 0) return;
    for (const [signal, entry] of p.signals) {
      const conditional = signal.condition !== undefined;
      if (conditional && !maps.holds(signal, flags?.get(p))) continue;
      for (const [to, r] of reach(signal.to, !conditional && signal.cascade === true)) {
        const seq = land(r, signal.dedupeKey, entry);
        if (seq === undefined) continue;
        if (conditional) landed?.push(signal.dedupeKey);
        delivered?.push({ to, entry: decodeInboxEntry(to, seq, entry) });
      }
    }
    for (const spawned of p.spawn) deliverAll(spawned.prepared, flags, landed);
  };

  /** Applies or refuses one commit (see `Store.commit`). */
  const commitNow = async (id: string, expectedRevision: number, commit: Commit, options: CommitOptions | undefined): Promise<number> => {
    checkCommitRules(id, commit);
    checkCreateOption(id, expectedRevision, options);
    const create = options?.create;
    const existing = rows.get(id);
    // A creating commit (a fan-out element's start): fenced by the actor's absence; its row is kept only once every check passed.
    const r = create === undefined ? row(id) : existing === undefined ? newRow(own(create.input), create.parent) : existing;
    if (r.revision !== expectedRevision) throw new StaleRevisionError(id, expectedRevision, r.revision);
    if (options?.ifSnapshot !== undefined && !sameBytes(r.snapshot, options.ifSnapshot)) throw new StaleRevisionError(id, expectedRevision, r.revision);
    if (r.inboxSeq > (commit.inboxSeen ?? 0)) throw new InboxPendingError(id, r.revision, r.inboxSeq);
    if (commit.signalAhead !== undefined && r.dedupe.get(commit.signalAhead) !== commit.inboxSeen) throw new SignalNotLandedError(id, r.revision, commit.inboxSeen ?? 0);
    checkUndo(id, commit.writes, r.undo.length);
    const lease = options?.takeLease;
    if (lease !== undefined && heldByOther(id, lease.owner)) throw executionBusyError(id);
    if (commit.spawn !== undefined) checkSpawns(commit, new Set([id]));
    const gated = commit.writes.map?.started;
    if (gated?.gate === true) {
      const why = mapGateClosedWhy(maps.gate(gated.map));
      if (why !== undefined) throw new MapGateClosedError(id, gated.map, why);
    }
    const prepared = prepare(commit);
    apply(r, prepared);
    if (create !== undefined) rows.set(id, r);
    if (commit.consumed !== undefined) for (const seq of commit.consumed) r.inbox.delete(seq);
    spawnAll(id, prepared);
    deliverAll(prepared, applyMaps(id, prepared), options?.landedSignals, options?.delivered);
    for (const listed of options?.list ?? []) markActive(listed, true);
    if (options?.unlist === true) markActive(id, false);
    if (lease !== undefined) takeLease(id, lease.owner, lease.ttlMs);
    if (options?.releaseLease !== undefined) releaseLease(id, options.releaseLease);
    if (options?.announce === true) publishSettled(id);
    return r.revision;
  };

  return {
    async create(execution: CreateExecution, options?: CreateOptions) {
      checkCommitRules(execution.id, execution.commit);
      if (rows.has(execution.id)) throw executionExistsError(execution.id);
      const lease = options?.lease;
      if (lease !== undefined && heldByOther(execution.id, lease.owner)) throw executionBusyError(execution.id);
      checkUndo(execution.id, execution.commit.writes, 0);
      checkSpawns(execution.commit, new Set([execution.id]));
      const prepared = prepare(execution.commit);
      const r = newRow(own(execution.input), undefined);
      apply(r, prepared);
      rows.set(execution.id, r);
      spawnAll(execution.id, prepared);
      deliverAll(prepared, applyMaps(execution.id, prepared), undefined);
      if (options?.list === true) markActive(execution.id, true);
      if (lease !== undefined) takeLease(execution.id, lease.owner, lease.ttlMs);
      if (options?.announce === true) publishSettled(execution.id);
      return r.revision;
    },
    async load(id, options) {
      const r = rows.get(id);
      if (r === undefined) return undefined;
      const base = { ...decodeRow(id, r), leased: liveLease(id) !== undefined, marked: r.unreadable !== undefined };
      if (options?.results === undefined || r.status !== 'completed') return base;
      const asked = options.results === 'all' ? [...r.results.keys()] : options.results;
      const results = decodeLoadedResults(asked.flatMap((step) => {
        const bytes = r.results.get(step);
        return bytes === undefined ? [] : [[step, bytes] as const];
      }));
      return results === undefined ? base : { ...base, results };
    },
    async readInbox(id) {
      const r = rows.get(id);
      return r === undefined ? { entries: [], seq: 0 } : inboxOf(id, r.inboxSeq, r.inbox);
    },
    async signal(signal, options) {
      const entry = Buffer.from(encodeInboxEntry(signal));
      const reached = reach(signal.to, signal.cascade === true);
      const refuse = new Set(options?.refuseIn ?? []);
      const refusing = reached.find(([, r]) => refuse.has(r.status));
      if (refusing !== undefined) return { landed: [], refusedBy: { id: refusing[0], status: refusing[1].status } };
      return { landed: reached.filter(([, r]) => land(r, signal.dedupeKey, entry)).map(([id]) => id) };
    },
    commit(id, expectedRevision, commit, options) {
      // Applied (or refused) at once: a commit sent from `sending` comes after it.
      const committed = commitNow(id, expectedRevision, commit, options);
      options?.sending?.();
      return committed;
    },
    async acquireAndLoad(id, lease, options): Promise<LeasedLoad> {
      if (options?.unlessExists !== undefined && rows.has(options.unlessExists)) return { status: 'exists' };
      const r = rows.get(id);
      if (r === undefined) return { status: 'missing' };
      if (!takeLease(id, lease.owner, lease.ttlMs)) return { status: 'busy' };
      try {
        const undoTop = options?.undoTop === true ? undoTopOf(r.undo.length - 1, r.undo.at(-1)) : undefined;
        return { status: 'leased', execution: decodeRow(id, r), input: decode(r.input), ...(undoTop && { undoTop }) };
      } catch (error) {
        releaseLease(id, lease.owner);
        throw error;
      }
    },
    async readInput(id) {
      return decode(row(id).input);
    },
    async readResults(id, steps) {
      const r = row(id);
      const out = new Map<string, unknown>();
      for (const step of steps ?? r.results.keys()) {
        const bytes = r.results.get(step);
        if (bytes !== undefined) out.set(step, decode(bytes));
      }
      return out;
    },
    async readUndoEntry(id, position) {
      const bytes = row(id).undo[position];
      return bytes === undefined ? undefined : (decode(bytes) as UndoEntry);
    },
    async readUndoStack(id) {
      return row(id).undo.map((bytes) => decode(bytes) as UndoEntry);
    },
    async readTrace(id) {
      return row(id).trace.map((bytes) => decode(bytes) as TraceEntry);
    },
    async acquireLease(id, owner, ttlMs) {
      return takeLease(id, owner, ttlMs);
    },
    async releaseLease(id, owner) {
      releaseLease(id, owner);
    },
    async hasLease(id) {
      return liveLease(id) !== undefined;
    },
    async markActive(id, isActive) {
      markActive(id, isActive);
    },
    async markActiveMany(ids, isActive) {
      for (const id of ids) markActive(id, isActive);
    },
    async readMapStarts(map, from, count) {
      return maps.starts(map, from, count);
    },
    async readMapGate(map) {
      return maps.gate(map);
    },
    async readMapStats(map) {
      return maps.stats(map);
    },
    async readMapSource(map, from, count) {
      return maps.source(map, from, count);
    },
    async readMapStarted(map, total, fromPosition, count, list = 'started') {
      return maps.started(map, total, fromPosition, count, list);
    },
    async readMapPage(map, from, count, returns) {
      return maps.page(map, from, count, returns);
    },
    async readRollbackFailures(map) {
      return maps.rollbackFailures(map);
    },
    async markUnreadable(id, error) {
      const r = rows.get(id);
      if (r === undefined) return 'missing';
      const record = Buffer.from(encodeUnreadable(error));
      active.delete(id);
      if (r.unreadable !== undefined) return 'already';
      r.unreadable = record;
      r.status = 'failed';
      r.revision += 1;
      return 'marked';
    },
    async readUnreadable(id) {
      const bytes = rows.get(id)?.unreadable;
      return bytes === undefined ? undefined : decodeUnreadable(id, bytes);
    },
    async listActive(limit, after) {
      const count = Math.floor(limit);
      if (!(count > 0)) return { ids: [], next: after };
      const from = after === undefined ? 0 : Number(after);
      const page = [...active].filter(([, seq]) => seq > from).slice(0, count);
      const last = page.at(-1);
      const more = last !== undefined && [...active.values()].some((seq) => seq > last[1]);
      return { ids: page.map(([id]) => id), next: more ? String(last[1]) : undefined };
    },
    async publishSettled(id) {
      publishSettled(id);
    },
    waitSettled(id, timeoutMs, signal) {
      // In one process a waiter listens as soon as it is registered.
      let done: (notified: boolean) => void = () => undefined;
      const settled = new Promise<boolean>((resolve) => {
        const set = waiters.get(id) ?? new Set();
        waiters.set(id, set);
        let cancel = (): void => undefined;
        done = (notified: boolean) => {
          if (!set.has(wake)) return;
          set.delete(wake);
          if (set.size === 0) waiters.delete(id);
          cancel();
          resolve(notified);
        };
        const wake = () => done(true);
        set.add(wake);
        cancel = timeoutOrAbort(clock, timeoutMs, signal, () => done(false));
      });
      return { listening: Promise.resolve(), settled, stop: () => done(false) };
    },
    async claim(key, value, ttlMs) {
      const held = liveClaim(key);
      if (held !== undefined) return held.value;
      claims.set(key, { value, expiresAt: clock.now() + ttlMs });
      return value;
    },
    async readClaim(key) {
      return liveClaim(key)?.value;
    },
    async increment(key, ttlMs) {
      const count = Number(liveClaim(key)?.value ?? 0) + 1;
      claims.set(key, { value: String(count), expiresAt: clock.now() + ttlMs });
      return count;
    },
    async close() {
      waiters.clear();
    },
  };
}
