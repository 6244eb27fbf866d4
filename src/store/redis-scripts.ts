/**
 * The Lua scripts of the Redis store: one per atomic operation (`lua/<verbNoun>-<numKeys>.lua`,
 * each opening with its KEYS / ARGV / return codes), registered on the client with ioredis
 * `defineCommand` (EVALSHA, falling back to EVAL when the server does not know the script).
 *
 * Beside each script: a pure argument builder (`xArgs(...) => { keys, argv }`) and, where the
 * reply carries codes, a pure reply reader. Both are unit-tested without Redis.
 */
import { readFileSync } from 'node:fs';
import { ReplyError } from 'ioredis';
import type { Cluster, Redis } from 'ioredis';
import { DefinitionError, ExecutionNotFoundError, InboxPendingError, MapGateClosedError, SignalNotLandedError, StaleRevisionError, XreactorError } from '../errors/index.js';
import { encode } from '../serialization/index.js';
import { uniqueIds } from './commit-rules.js';
import { encodeInboxEntry } from './inbox-codec.js';
import type { ExecutionKeys } from './keys.js';
import { encodeSnapshot } from './snapshot-codec.js';
import { executionBusyError, executionExistsError, undoGapError } from './store.js';
import type { Commit, CreateExecution, LeaseRequest, Signal, SpawnActor } from './store.js';
import type { UnreadableMark, UnreadableRecord } from './store.js';
import { encodeUnreadable } from './unreadable-codec.js';
import { hasMapWrites, mapSectionArgv, READ_MAP_PAGE_FILE } from './redis-map-args.js';

// Moved to snapshot-codec.ts; re-exported for existing importers.
export { encodeSnapshot, SNAPSHOT_KIND } from './snapshot-codec.js';

/** One script call: its KEYS and its ARGV (binary values as Buffers). */
export interface ScriptCall {
  readonly keys: readonly string[];
  readonly argv: readonly (string | Buffer)[];
}

/** A commit's call (`commitArgs`): its KEYS and ARGV, and the actor they are of (a group commit declares one key per commit and builds the others in the script). */
export interface CommitCall extends ScriptCall {
  readonly actor: { readonly base: string; readonly id: string };
}

/**
 * The scripts, by operation, with the file holding each and its number of keys. A `packed`
 * script takes its arguments as one (see {@link packArgv}): the hot ones, whose many arguments
 * would otherwise cost the client a command argument each.
 */
export const SCRIPTS = {
  createExecution: { file: 'createExecution-5.lua', numberOfKeys: 5, packed: true },
  commitExecution: { file: 'commitExecution-5.lua', numberOfKeys: 5, packed: true },
  // Group calls: `perItem` keys for each commit or load they carry; the call passes its number of keys.
  commitBatch: { file: 'commitBatch-1n.lua', numberOfKeys: { perItem: 1 }, packed: true },
  acquireAndLoadBatch: { file: 'acquireAndLoadBatch-5n.lua', numberOfKeys: { perItem: 5 } },
  loadExecution: { file: 'loadExecution-4.lua', numberOfKeys: 4 },
  readInbox: { file: 'readInbox-2.lua', numberOfKeys: 2 },
  signalActor: { file: 'signalActor-1.lua', numberOfKeys: 1 },
  acquireLease: { file: 'acquireLease-1.lua', numberOfKeys: 1 },
  acquireAndLoad: { file: 'acquireAndLoad-5.lua', numberOfKeys: 5 },
  releaseLease: { file: 'releaseLease-1.lua', numberOfKeys: 1 },
  markActive: { file: 'markActive-1.lua', numberOfKeys: 1 },
  markUnreadable: { file: 'markUnreadable-1.lua', numberOfKeys: 1 },
  readMapPage: { file: READ_MAP_PAGE_FILE, numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;

/** A script's file, its number of keys (or keys per item of a group call), and whether it takes its arguments packed. */
interface ScriptSpec {
  readonly file: string;
  readonly numberOfKeys: number | { readonly perItem: number };
  readonly packed?: true;
}

/** Name of an atomic operation with a script. */
export type ScriptName = keyof typeof SCRIPTS;

const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"[ \t]*$/gm;

/**
 * The source of a script, with its `--- @include "name"` lines replaced by `lua/includes/name.lua`.
 * The `.lua` files sit beside the compiled module: the build copies `src/store/lua` to `dist/src/store/lua`.
 */
export function loadLuaScript(file: string): string {
  const source = readFileSync(new URL(`./lua/${file}`, import.meta.url), 'utf8');
  return source.replace(INCLUDE, (_line, name: string) => readFileSync(new URL(`./lua/includes/${name}.lua`, import.meta.url), 'utf8'));
}

/**
 * Runs the store's scripts on one client. Bulk replies come back as strings, or as Buffers when
 * `binary` is true (for scripts that return stored bytes).
 */
export type ScriptRunner = (name: ScriptName, call: ScriptCall, binary?: boolean) => Promise<unknown>;

/**
 * Registers every script on `redis` (as `xreactor_<name>` commands, with ioredis's
 * `xreactor_<name>Buffer` twins for binary replies) and returns a runner.
 * Registering again on the same client is harmless: the scripts are the same.
 */
export function defineScripts(redis: Redis | Cluster): ScriptRunner {
  const commands = redis as unknown as Record<string, (...args: (string | Buffer)[]) => Promise<unknown>>;
  for (const [name, script] of Object.entries(SCRIPTS)) {
    // Without numberOfKeys, ioredis takes the number of keys as the call's first argument.
    redis.defineCommand(`xreactor_${name}`, { lua: loadLuaScript(script.file), ...(typeof script.numberOfKeys === 'number' ? { numberOfKeys: script.numberOfKeys } : {}) });
  }
  return (name, call, binary = false) => {
    const script: ScriptSpec = SCRIPTS[name];
    const command = commands[`xreactor_${name}${binary ? 'Buffer' : ''}`]!;
    const argv = script.packed === true ? [packArgv(call.argv)] : call.argv;
    if (typeof script.numberOfKeys !== 'number') {
      const { perItem } = script.numberOfKeys;
      if (call.keys.length === 0 || call.keys.length % perItem !== 0) throw new XreactorError('script_keys_invalid', `script ${script.file} takes ${perItem} key(s) per item, and at least one item (got ${call.keys.length})`);
      return command.call(redis, String(call.keys.length), ...call.keys, ...argv);
    }
    if (call.keys.length !== script.numberOfKeys) {
      throw new XreactorError('script_keys_invalid', `script ${script.file} takes ${script.numberOfKeys} keys, not ${call.keys.length}`);
    }
    return command.call(redis, ...call.keys, ...argv);
  };
}

/**
 * A script's arguments as one: a msgpack array (array 32) of strings (str 32, raw bytes: a
 * Buffer's as they are, a string's in UTF-8), which the script unpacks with Redis's built-in
 * `cmsgpack.unpack(ARGV[1])` into the table it reads as it would read ARGV. One argument instead
 * of dozens: the client builds, measures and copies one (ioredis's per-argument cost was most of
 * a commit's client side), and the server parses one. Redis's cmsgpack reads no msgpack `bin`
 * type, hence `str` for binary values too.
 */
export function packArgv(argv: readonly (string | Buffer)[]): Buffer {
  let size = 5;
  for (const arg of argv) size += 5 + (typeof arg === 'string' ? Buffer.byteLength(arg) : arg.length);
  const out = Buffer.allocUnsafe(size);
  out[0] = 0xdd;
  out.writeUInt32BE(argv.length, 1);
  let at = 5;
  for (const arg of argv) {
    out[at] = 0xdb;
    const length = typeof arg === 'string' ? out.write(arg, at + 5) : arg.copy(out, at + 5);
    out.writeUInt32BE(length, at + 1);
    at += 5 + length;
  }
  return out;
}

/** A Buffer over the same bytes (ioredis sends Buffers as binary, other typed arrays as text). */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A TTL as Redis takes it: whole milliseconds, at least 1. */
export function ttlArg(ttlMs: number): string {
  if (Number.isNaN(ttlMs)) throw new DefinitionError('a TTL is NaN: pass a number of milliseconds');
  return String(Math.max(1, Math.ceil(ttlMs)));
}

const executionKeys = (keys: ExecutionKeys) => [keys.execution, keys.results, keys.undo, keys.trace, keys.lease];

/** The commit both `createExecution-5` and `commitExecution-5` read, also for each spawned actor (layout in `lua/includes/applyCommit.lua`). */
function commitTail(commit: Commit): (string | Buffer)[] {
  const w = commit.writes;
  if (w.truncateUndoTo !== undefined && !(Number.isSafeInteger(w.truncateUndoTo) && w.truncateUndoTo >= 0)) {
    throw new XreactorError('undo_position_invalid', `truncateUndoTo ${w.truncateUndoTo} is not a non-negative integer`);
  }
  const argv: (string | Buffer)[] = [
    commit.status,
    toBuffer(encodeSnapshot(commit.snapshot)),
    toBuffer(encode(commit.outbox)),
    String(w.truncateUndoTo ?? -1),
    String(w.results.length),
    String(w.pushUndo.length),
    String(w.trace.length),
  ];
  for (const [step, value] of w.results) argv.push(step, toBuffer(encode(value)));
  for (const entry of w.pushUndo) {
    if (!(Number.isSafeInteger(entry.position) && entry.position >= 0)) {
      throw new XreactorError('undo_position_invalid', `undo entry of step "${entry.step}" has position ${entry.position}, not a non-negative integer`);
    }
    argv.push(String(entry.position), toBuffer(encode({ step: entry.step, args: entry.args, result: entry.result })));
  }
  for (const entry of w.trace) argv.push(toBuffer(encode(entry)));
  return argv;
}

/**
 * Whether a commit has kernel work (consumed entries, awaits, signals, spawned actors or map
 * writes): without it, and without a re-stamp, the commit has no kernel section (the per-step
 * fast path).
 */
export function hasKernelWork(commit: Commit): boolean {
  return (commit.consumed?.length ?? 0) > 0 || commit.awaits !== undefined || (commit.signals?.length ?? 0) > 0 || (commit.spawn?.length ?? 0) > 0 || commit.writes.map !== undefined;
}

/** The mode of a signal in a kernel tail: '1' cascading, '0' the recipient only, or its condition's name. */
function signalMode(signal: Signal): string {
  return signal.condition ?? (signal.cascade === true ? '1' : '0');
}

/** The signals of a kernel tail: recipient, dedupe key, mode, entry bytes. */
function signalArgv(signals: readonly Signal[]): (string | Buffer)[] {
  const argv: (string | Buffer)[] = [String(signals.length)];
  for (const signal of signals) argv.push(signal.to, signal.dedupeKey, signalMode(signal), toBuffer(encodeInboxEntry(signal)));
  return argv;
}

/**
 * The kernel tail of a commit (layout in `lua/includes/actorKernel.lua`): consumed seqs (none for
 * a new actor: `consumed` false), the awaits list (-1: unchanged; repeats dropped), the signals,
 * the spawned actors (each with its first commit and its own kernel tail).
 */
function kernelTail(commit: Commit, consumed: boolean): (string | Buffer)[] {
  const seqs = consumed ? (commit.consumed ?? []) : [];
  const awaits = commit.awaits === undefined ? undefined : uniqueIds(commit.awaits);
  const spawn = commit.spawn ?? [];
  const argv: (string | Buffer)[] = [String(seqs.length), ...seqs.map(String), ...(awaits === undefined ? ['-1'] : [String(awaits.length), ...awaits]), ...signalArgv(commit.signals ?? []), String(spawn.length)];
  for (const actor of spawn) {
    const lease = actor.lease;
    argv.push(actor.id, actor.reactor, toBuffer(encode(actor.input)), spawnFlags(actor), lease?.owner ?? '', lease === undefined ? '' : ttlArg(lease.ttlMs));
    argv.push(...commitTail(actor.commit), ...kernelTail(actor.commit, false));
  }
  return argv;
}

/**
 * The flags of a spawned actor in a kernel tail (`lua/includes/actorKernel.lua`): 1 = take its
 * lease, 2 = detached (`retainWithParent: false`: not in the parent's children set, its re-stamp
 * does not climb to the parent). `'0'` and `'1'` are an attached actor without and with its lease.
 */
export function spawnFlags(actor: SpawnActor): string {
  return String((actor.lease === undefined ? 0 : 1) + (actor.retainWithParent === false ? 2 : 0));
}

/** The ids a commit spawns, at any depth (depth first): the actors a successful commit created. */
export function spawnedIds(commit: Commit): string[] {
  return (commit.spawn ?? []).flatMap((actor) => [actor.id, ...spawnedIds(actor.commit)]);
}

/** The ids a commit spawns that are listed in the active index ({@link SpawnActor.listed}), at any depth (depth first). */
export function listedSpawnIds(commit: Commit): string[] {
  return (commit.spawn ?? []).flatMap((actor) => [...(actor.listed === false ? [] : [actor.id]), ...listedSpawnIds(actor.commit)]);
}

/** What `createExecution-5.lua` does besides creating (the script side of `CreateOptions`). */
export interface CreateScriptOptions {
  /** Take the lease for this owner, refusing the create when another owner holds it. */
  readonly lease?: LeaseRequest;
  /** Publish the execution id on its settled channel after the create. */
  readonly announce?: boolean;
  /** Record the execution in this active index with the create (a standalone server only). */
  readonly activeKey?: string;
}

/** Arguments of `createExecution-5.lua` (the commit starts at ARGV[11]). Every key of the execution gets `contextTtlMs`. The kernel section is always sent (the script clears leftovers under the id). */
export function createArgs(keys: ExecutionKeys, execution: CreateExecution, contextTtlMs: number, options: CreateScriptOptions = {}): ScriptCall {
  const lease = options.lease;
  return {
    keys: executionKeys(keys),
    argv: [
      ttlArg(contextTtlMs),
      execution.reactor,
      toBuffer(encode(execution.input)),
      lease === undefined ? '0' : '1',
      lease?.owner ?? '',
      lease === undefined ? '' : ttlArg(lease.ttlMs),
      options.announce === true ? keys.settled : '',
      options.announce === true ? execution.id : '',
      keys.base,
      options.activeKey ?? '',
      ...commitTail(execution.commit),
      keys.id,
      ...kernelTail(execution.commit, false),
      ...mapSectionArgv(keys.id, execution.commit),
    ],
  };
}

/** What `commitExecution-5.lua` does besides committing (the script side of `CommitOptions`). */
export interface CommitScriptOptions {
  /**
   * Re-stamp the retention on every key of the execution; when false, only the keys the commit
   * creates get it.
   * @defaultValue true
   */
  readonly restamp?: boolean;
  /** Release the lease if this owner holds it. */
  readonly releaseLease?: string;
  /** Publish this execution id on the settled channel (`keys.settled`) after the commit. */
  readonly announceId?: string;
  /** With `announceId`: publish a notice instead (the committed snapshot and these steps' results, none when empty; see `settled-notice.ts`). */
  readonly announceResults?: readonly string[];
  /** Take (or renew) the lease for this owner once every check has passed; refuse the commit when another owner holds it. */
  readonly takeLease?: LeaseRequest;
  /** Refuse the commit (as stale) unless the stored snapshot is exactly these bytes. */
  readonly ifSnapshot?: Uint8Array;
  /**
   * The active index changes the script makes with the commit (standalone Redis: the index is a
   * global key, reachable from the script there, not on a Cluster): ids to record, and whether
   * to remove the committing actor.
   */
  readonly index?: { readonly activeKey: string; readonly list: readonly string[]; readonly unlist: boolean };
  /** The commit creates the actor (expected revision 0; `CommitOptions.create`): its reactor, encoded input and parent. */
  readonly create?: { readonly reactor: string; readonly input: Uint8Array; readonly parent: string | undefined };
}

/**
 * Arguments of `commitExecution-5.lua` (layout in its header; the commit starts at ARGV[15]).
 * For a commit without kernel work and without a re-stamp (the per-step fast path) the root base
 * before the commit is '' and nothing follows the commit; else the id and the kernel tail follow it.
 */
export function commitArgs(keys: ExecutionKeys, expectedRevision: number, commit: Commit, contextTtlMs: number, options: CommitScriptOptions = {}): CommitCall {
  const { takeLease, ifSnapshot, index, create } = options;
  const restamp = options.restamp !== false;
  const indexed = index !== undefined && (index.list.length > 0 || index.unlist);
  const kernel = restamp || indexed || create !== undefined || hasKernelWork(commit);
  const list = indexed ? uniqueIds(index.list) : [];
  const creation = create === undefined ? ['0'] : ['1', create.reactor, toBuffer(create.input), create.parent ?? ''];
  const indexSection = [indexed ? index.activeKey : '', String(list.length), ...list, indexed && index.unlist ? '1' : '0', ...creation];
  return {
    keys: executionKeys(keys),
    actor: { base: keys.base, id: keys.id },
    argv: [
      String(expectedRevision),
      ttlArg(contextTtlMs),
      restamp ? '1' : '0',
      options.releaseLease === undefined ? '0' : '1',
      options.releaseLease ?? '',
      options.announceId === undefined ? '' : keys.settled,
      options.announceId === undefined ? '' : settledMessageSpec(options.announceId, options.announceResults),
      takeLease === undefined ? '0' : '1',
      takeLease?.owner ?? '',
      takeLease === undefined ? '' : ttlArg(takeLease.ttlMs),
      ifSnapshot === undefined ? '0' : '1',
      ifSnapshot === undefined ? '' : toBuffer(ifSnapshot),
      commit.signalAhead === undefined ? String(commit.inboxSeen ?? 0) : `${commit.inboxSeen ?? 0}\0${keys.dedupe}\0${commit.signalAhead}`,
      kernel ? keys.base : '',
      ...commitTail(commit),
      ...(kernel ? [keys.id, ...kernelTail(commit, true), ...indexSection, ...(hasMapWrites(commit) ? mapSectionArgv(keys.id, commit) : [])] : []),
    ],
  };
}

/**
 * What `settledMessage` (`lua/includes/fencedCommit.lua`) reads from the commit's message
 * argument: the id alone (no notice), or the id, a NUL and the names of the results to announce,
 * NUL-separated (a notice; an id or name holding a NUL: the id alone, and the waiter reads).
 */
function settledMessageSpec(id: string, steps: readonly string[] | undefined): string {
  if (steps === undefined || id.includes('\0') || steps.some((step) => step.includes('\0'))) return id;
  return `${id}\0${steps.join('\0')}`;
}

/** ioredis's error class for an error reply (typed `any` there). */
const RedisReplyError = ReplyError as new (message: string) => Error;

/**
 * Arguments of `commitBatch-1n.lua`: commit calls (`commitArgs`, with or without a kernel
 * section), applied in this order. Each commit declares its execution hash; the script builds its
 * other four keys from the root base and id that lead its arguments.
 */
export function commitBatchArgs(calls: readonly CommitCall[]): ScriptCall {
  const keys: string[] = [];
  const argv: (string | Buffer)[] = [];
  for (const call of calls) {
    keys.push(call.keys[0]!);
    argv.push(String(call.argv.length), call.actor.base, call.actor.id, ...call.argv);
  }
  return { keys, argv };
}

/**
 * Reads the reply of a group call (`commitBatch-1n.lua` by default, `file` names another) for
 * `n` items: each item's own reply (as `commitExecution-5.lua` replies a commit, for
 * {@link readCommitReply}; as `acquireAndLoad-5.lua` replies a load), or an Error carrying the
 * message of the Redis error one of its commands raised (an ioredis `ReplyError`, as a script
 * run alone raises).
 */
export function readBatchReplies(reply: unknown, n: number, file: string = SCRIPTS.commitBatch.file): unknown[] {
  if (!Array.isArray(reply) || reply.length !== n) {
    throw new XreactorError('script_reply_invalid', `${file} replied ${JSON.stringify(reply)}, not ${n} replies: is another program's script loaded under its name?`);
  }
  // The same error class ioredis raises when a script run alone fails.
  return reply.map((one: unknown) => (Array.isArray(one) && Number(one[0]) === -1 ? new RedisReplyError(`${String(one[1])} (in ${file})`) : one));
}

/**
 * Arguments of `acquireAndLoad-5.lua`; with `undoTop`, it also reads the undo stack's top entry;
 * with `unlessExists` (the asking actor's hash key), it takes nothing while that actor exists.
 */
export function acquireAndLoadArgs(keys: ExecutionKeys, lease: LeaseRequest, undoTop = false, unlessExists?: string): ScriptCall {
  return {
    keys: [keys.execution, keys.lease, keys.inbox, keys.undo, unlessExists ?? keys.execution],
    argv: [lease.owner, ttlArg(lease.ttlMs), undoTop ? '1' : '0', unlessExists === undefined ? '0' : '1'],
  };
}

/** Arguments of `loadExecution-4.lua`: with `results`, the steps whose results it also reads when the execution is completed (`'all'`: every step's). */
export function loadArgs(keys: ExecutionKeys, results?: readonly string[] | 'all'): ScriptCall {
  const argv = results === undefined ? [''] : results === 'all' ? ['all'] : ['some', ...results];
  return { keys: [keys.execution, keys.inbox, keys.lease, keys.results], argv };
}

/** Arguments of `readInbox-2.lua`. */
export function readInboxArgs(keys: ExecutionKeys): ScriptCall {
  return { keys: [keys.execution, keys.inbox], argv: [] };
}

/** Arguments of `signalActor-1.lua`: the recipient's keys, the signal, the TTL for keys it creates, the refuse statuses. */
export function signalArgs(keys: ExecutionKeys, signal: Signal, contextTtlMs: number, refuseIn: readonly string[] = []): ScriptCall {
  return {
    keys: [keys.execution],
    argv: [keys.base, ttlArg(contextTtlMs), keys.id, signal.dedupeKey, signal.cascade === true ? '1' : '0', toBuffer(encodeInboxEntry(signal)), String(refuseIn.length), ...refuseIn],
  };
}

/** Arguments of `acquireLease-1.lua`. */
export function acquireLeaseArgs(keys: ExecutionKeys, owner: string, ttlMs: number): ScriptCall {
  return { keys: [keys.lease], argv: [owner, ttlArg(ttlMs)] };
}

/** Arguments of `releaseLease-1.lua`. */
export function releaseLeaseArgs(keys: ExecutionKeys, owner: string): ScriptCall {
  return { keys: [keys.lease], argv: [owner] };
}

/** Arguments of `markActive-1.lua`. */
export function markActiveArgs(activeKey: string, id: string): ScriptCall {
  return { keys: [activeKey], argv: [id] };
}

/** Arguments of `markActive-1.lua` recording several ids, in this order (an id given twice counts once). */
export function markActiveManyArgs(activeKey: string, ids: readonly string[]): ScriptCall {
  return { keys: [activeKey], argv: uniqueIds(ids) };
}

const REPLY = { ok: 0, conflict: 1, missing: 2, undoGap: 3, busy: 4, inboxPending: 5, spawnExists: 6, mapGateClosed: 7, signalNotLanded: 8 } as const;

/** The spawned actor a refusal names (`{4, id}`, `{3, position, length, id}`, `{6, id}`), or `id` when it names none. */
const refusedActor = (id: string, named: unknown): string => (typeof named === 'string' || Buffer.isBuffer(named) ? String(named) : id);

/** The refusals of a spawned actor, as create and commit reply them. */
function spawnRefusal(id: string, code: number, reply: unknown[]): XreactorError | undefined {
  if (code === REPLY.spawnExists) return executionExistsError(refusedActor(id, reply[1]));
  if (code === REPLY.busy) return executionBusyError(refusedActor(id, reply[1]));
  if (code === REPLY.undoGap) return undoGapError(refusedActor(id, reply[3]), String(reply[1]), Number(reply[2]));
  return undefined;
}

function replyCode(reply: unknown, script: string): [code: number, first: number, second: number] {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new XreactorError('script_reply_invalid', `${script} replied ${JSON.stringify(reply)}, not a reply code: is another program's script loaded under its name?`);
  }
  const [code, first, second] = reply.map(Number);
  return [code!, first ?? Number.NaN, second ?? Number.NaN];
}

/**
 * Reads the reply of `commitExecution-5.lua`: the new revision (the receipt of the signals that
 * landed, which follows it, is {@link readCommitReceipt}'s).
 * @throws StaleRevisionError when another writer advanced the execution (or its snapshot is not
 * the `ifSnapshot` bytes); InboxPendingError when a signal landed that the commit has not seen;
 * SignalNotLandedError when the signal a commit was computed ahead of did not land under its seq;
 * ExecutionNotFoundError when it does not exist; XreactorError `undo_position_invalid` for an undo
 * push past the end; `execution_busy` when another owner holds the lease the commit was to take;
 * and for a spawned actor (named in the message): `execution_exists`, `execution_busy`,
 * `undo_position_invalid`.
 */
export function readCommitReply(id: string, expectedRevision: number, reply: unknown): number {
  const [code, first, second] = replyCode(reply, SCRIPTS.commitExecution.file);
  if (code === REPLY.ok) return first;
  if (code === REPLY.conflict) throw new StaleRevisionError(id, expectedRevision, first);
  if (code === REPLY.missing) throw new ExecutionNotFoundError(id);
  if (code === REPLY.inboxPending) throw new InboxPendingError(id, first, second);
  if (code === REPLY.signalNotLanded) throw new SignalNotLandedError(id, first, second);
  if (code === REPLY.mapGateClosed) throw new MapGateClosedError(id, String((reply as unknown[])[1]), String((reply as unknown[])[2]));
  const refused = spawnRefusal(id, code, reply as unknown[]);
  if (refused !== undefined) throw refused;
  throw new XreactorError('script_reply_invalid', `${SCRIPTS.commitExecution.file} replied with unknown code ${code}`);
}

/** A landing of a commit's own signal as `commitExecution-5.lua` replies it: the signal's index in `commit.signals`, the actor, the seq. */
export type CommitLanding = readonly [index: number, to: string, seq: number];

/**
 * The receipt in the success reply of `commitExecution-5.lua` (`{0, revision}` or
 * `{0, revision, n, key1..keyn, (i, to, seq)...}`): the dedupe keys of the conditional signals
 * that landed, and each landing of the commit's own signals.
 * @throws XreactorError `script_reply_invalid` for a receipt of another shape.
 */
export function readCommitReceipt(reply: unknown): { readonly landed: string[]; readonly landings: CommitLanding[] } {
  if (!Array.isArray(reply) || reply.length <= 2) return { landed: [], landings: [] };
  const file = SCRIPTS.commitExecution.file;
  const n = Number(reply[2]);
  const rest = reply.length - 3 - n;
  if (!Number.isSafeInteger(n) || n < 0 || rest < 0 || rest % 3 !== 0) throw invalidReply(file, reply);
  const landed = reply.slice(3, 3 + n).map((key: unknown) => String(key));
  const landings: CommitLanding[] = [];
  for (let i = 3 + n; i < reply.length; i += 3) landings.push([Number(reply[i]) - 1, String(reply[i + 1]), Number(reply[i + 2])]);
  return { landed, landings };
}

/**
 * Reads the reply of `createExecution-5.lua`: the revision (1).
 * @throws XreactorError `execution_exists` when the id exists; `execution_busy` when another
 * owner holds the lease the create was to take; `undo_position_invalid` for an undo push past the
 * end; and the same for a spawned actor of the first commit (named in the message).
 */
export function readCreateReply(id: string, reply: unknown): number {
  const [code, first] = replyCode(reply, SCRIPTS.createExecution.file);
  if (code === REPLY.ok) return first;
  if (code === REPLY.conflict) throw executionExistsError(id);
  const refused = spawnRefusal(id, code, reply as unknown[]);
  if (refused !== undefined) throw refused;
  throw new XreactorError('script_reply_invalid', `${SCRIPTS.createExecution.file} replied with unknown code ${code}`);
}

/** Stored inbox entries as a script replies them: seq and entry bytes, in the order HGETALL listed them. */
export type InboxReplyEntries = readonly (readonly [seq: number, bytes: Buffer])[];

/** An execution's stored fields as `loadExecution-4.lua` and `acquireAndLoad-5.lua` reply them, still bytes (the store decodes and checks them). */
export interface LoadReply {
  readonly revision: Buffer | null;
  readonly snapshot: Buffer | null;
  readonly outbox: Buffer | null;
  /** The inbox seq (0: none landed). */
  readonly inboxSeq: number;
  readonly entries: InboxReplyEntries;
}

/**
 * The reply of `acquireAndLoad-5.lua`, read: the stored fields are still bytes (the store decodes
 * and checks them). `undoTop`, when it was asked for and the stack is not empty: the position and
 * bytes of the stack's last entry.
 */
export type AcquireAndLoadReply =
  | ({ readonly status: 'leased'; readonly input: Buffer | null; readonly undoTop?: { readonly position: number; readonly bytes: Buffer } } & LoadReply)
  | { readonly status: 'busy' }
  | { readonly status: 'missing' }
  | { readonly status: 'exists' };

/** `acquireAndLoad-5.lua`'s reply when the asker it was given exists (`unlessExists`). */
const ASKER_EXISTS = 3;

/** A field of a script reply as bytes: Buffers as they are, strings and numbers (a reply read as text) encoded. */
const bytesOrNull = (value: unknown, script: string): Buffer | null => {
  if (value == null) return null;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string' || typeof value === 'number') return Buffer.from(String(value));
  throw new XreactorError('script_reply_invalid', `${script} replied a field that is not bytes (${typeof value}): is another program's script loaded under its name?`);
};

const invalidReply = (file: string, reply: unknown) =>
  new XreactorError('script_reply_invalid', `${file} replied ${JSON.stringify(reply)}, not a reply code: is another program's script loaded under its name?`);

/** An inbox seq as a script replies it (nil: 0). */
function seqOf(value: unknown, file: string): number {
  if (value == null) return 0;
  const text = Buffer.isBuffer(value) ? value.toString() : typeof value === 'string' || typeof value === 'number' ? String(value) : typeof value;
  const seq = Number(text);
  if (!Number.isSafeInteger(seq) || seq < 0) throw new XreactorError('script_reply_invalid', `${file} replied inbox seq ${text}, not a whole number: is another program's data under the key?`);
  return seq;
}

/** Inbox entries from an HGETALL reply (field, value, field, value, ...). */
function entriesOf(value: unknown, file: string): InboxReplyEntries {
  if (value == null) return [];
  if (!Array.isArray(value) || value.length % 2 !== 0) throw new XreactorError('script_reply_invalid', `${file} replied inbox entries that are not field/value pairs`);
  const entries: [number, Buffer][] = [];
  for (let i = 0; i < value.length; i += 2) entries.push([seqOf(value[i], file), bytesOrNull(value[i + 1], file) ?? Buffer.alloc(0)]);
  return entries;
}

/**
 * Reads the reply of `loadExecution-4.lua` (run with binary replies): the stored fields (null
 * when absent), the inbox seq and the entries, whether the lease is held, whether the
 * execution is marked unreadable, and the results it read (undefined when it read none: not
 * asked, or not completed), still bytes.
 * @throws XreactorError `script_reply_invalid` for a reply of another shape.
 */
export function readLoadReply(reply: unknown): LoadReply & { readonly leased: boolean; readonly marked: boolean; readonly results: ReadonlyMap<string, Buffer> | undefined } {
  const file = SCRIPTS.loadExecution.file;
  if (!Array.isArray(reply) || reply.length !== 8) throw invalidReply(file, reply);
  return {
    revision: bytesOrNull(reply[0], file),
    snapshot: bytesOrNull(reply[1], file),
    outbox: bytesOrNull(reply[2], file),
    inboxSeq: seqOf(reply[3], file),
    entries: entriesOf(reply[4], file),
    leased: reply[5] === 1,
    marked: reply[6] === 1,
    results: resultsOf(reply[7], file),
  };
}

/** Results from a script's field/value list (0: none read). */
function resultsOf(value: unknown, file: string): ReadonlyMap<string, Buffer> | undefined {
  if (value === 0) return undefined;
  if (!Array.isArray(value) || value.length % 2 !== 0) throw new XreactorError('script_reply_invalid', `${file} replied results that are not step/value pairs`);
  const results = new Map<string, Buffer>();
  for (let i = 0; i < value.length; i += 2) results.set(String(value[i]), bytesOrNull(value[i + 1], file) ?? Buffer.alloc(0));
  return results;
}

/**
 * Reads the reply of `readInbox-2.lua` (run with binary replies): the inbox seq and the entries.
 * @throws XreactorError `script_reply_invalid` for a reply of another shape.
 */
export function readInboxReply(reply: unknown): { readonly seq: number; readonly entries: InboxReplyEntries } {
  const file = SCRIPTS.readInbox.file;
  if (!Array.isArray(reply) || reply.length !== 2) throw invalidReply(file, reply);
  return { seq: seqOf(reply[0], file), entries: entriesOf(reply[1], file) };
}

/**
 * Reads the reply of `signalActor-1.lua`: the ids the signal landed in, or the actor and status
 * that refused it.
 * @throws XreactorError `script_reply_invalid` for a reply of another shape.
 */
export function readSignalReply(reply: unknown): { readonly landed: string[]; readonly refusedBy?: { readonly id: string; readonly status: string } } {
  const file = SCRIPTS.signalActor.file;
  if (!Array.isArray(reply) || reply.length === 0) throw invalidReply(file, reply);
  const code = Number(reply[0]);
  if (code === REPLY.ok) return { landed: reply.slice(1).map(String) };
  if (code === REPLY.conflict && reply.length === 3) return { landed: [], refusedBy: { id: String(reply[1]), status: String(reply[2]) } };
  throw new XreactorError('script_reply_invalid', `${file} replied with unknown code ${String(reply[0])}`);
}

/**
 * Reads the reply of `acquireAndLoad-5.lua` (run with binary replies): the lease was taken with
 * the stored fields, or another owner holds it, or the execution does not exist.
 * @throws XreactorError `script_reply_invalid` for a reply that is not one of those.
 */
export function readAcquireAndLoadReply(reply: unknown): AcquireAndLoadReply {
  const file = SCRIPTS.acquireAndLoad.file;
  if (!Array.isArray(reply) || reply.length === 0) throw invalidReply(file, reply);
  const code = Number(reply[0]);
  if (code === REPLY.ok) {
    const field = (index: number) => bytesOrNull(reply[index], file);
    const read = { status: 'leased', revision: field(1), snapshot: field(2), outbox: field(3), input: field(4), inboxSeq: seqOf(reply[5], file), entries: entriesOf(reply[6], file) } as const;
    if (reply.length <= 7) return read;
    const length = Number(reply[7]);
    const top = field(8);
    if (!Number.isSafeInteger(length) || length < 0 || (length > 0) !== (top !== null)) throw invalidReply(file, reply);
    return top === null ? read : { ...read, undoTop: { position: length - 1, bytes: top } };
  }
  if (code === REPLY.conflict) return { status: 'busy' };
  if (code === REPLY.missing) return { status: 'missing' };
  if (code === ASKER_EXISTS) return { status: 'exists' };
  throw new XreactorError('script_reply_invalid', `${file} replied with unknown code ${String(reply[0])}`);
}

/** Arguments of `markUnreadable-1.lua`: the actor's execution hash and the encoded record. */
export function markUnreadableArgs(keys: ExecutionKeys, record: UnreadableRecord): ScriptCall {
  return { keys: [keys.execution], argv: [toBuffer(encodeUnreadable(record))] };
}

/** The replies of `markUnreadable-1.lua`, by code. */
const MARK_REPLY: readonly UnreadableMark[] = ['marked', 'already', 'missing', 'foreign'];

/**
 * Reads the reply of `markUnreadable-1.lua`: what it did.
 * @throws XreactorError `script_reply_invalid` for a reply of another shape.
 */
export function readMarkUnreadableReply(reply: unknown): UnreadableMark {
  const file = SCRIPTS.markUnreadable.file;
  if (!Array.isArray(reply) || reply.length !== 1) throw invalidReply(file, reply);
  const mark = MARK_REPLY[Number(reply[0])];
  if (mark === undefined) throw new XreactorError('script_reply_invalid', `${file} replied with unknown code ${String(reply[0])}`);
  return mark;
}
