/**
 * The Lua scripts of the Redis store: one per atomic operation (`lua/<verbNoun>-<numKeys>.lua`,
 * each opening with its KEYS / ARGV / return codes), registered on the client with ioredis
 * `defineCommand` (EVALSHA, falling back to EVAL when the server does not know the script).
 *
 * Beside each script: a pure argument builder (`xArgs(...) => { keys, argv }`) and, where the
 * reply carries codes, a pure reply reader. Both are unit-tested without Redis.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { DefinitionError, ExecutionNotFoundError, StaleRevisionError, XreactorError } from '../errors/index.js';
import { encode, encodeEnvelope } from '../serialization/index.js';
import type { ExecutionKeys } from './keys.js';
import type { Commit, CreateExecution, PersistedSnapshot } from './store.js';

/** Envelope kind of a stored execution snapshot (the memory store uses the same). */
export const SNAPSHOT_KIND = 'execution';

/** One script call: its KEYS and its ARGV (binary values as Buffers). */
export interface ScriptCall {
  readonly keys: readonly string[];
  readonly argv: readonly (string | Buffer)[];
}

/** The scripts, by operation, with the file holding each and its number of keys. */
export const SCRIPTS = {
  createExecution: { file: 'createExecution-4.lua', numberOfKeys: 4 },
  commitExecution: { file: 'commitExecution-4.lua', numberOfKeys: 4 },
  acquireLease: { file: 'acquireLease-1.lua', numberOfKeys: 1 },
  releaseLease: { file: 'releaseLease-1.lua', numberOfKeys: 1 },
  markActive: { file: 'markActive-1.lua', numberOfKeys: 1 },
} as const;

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

/** Runs the store's scripts on one client. */
export type ScriptRunner = (name: ScriptName, call: ScriptCall) => Promise<unknown>;

/**
 * Registers every script on `redis` (as `xreactor_<name>` commands) and returns a runner.
 * Registering again on the same client is harmless: the scripts are the same.
 */
export function defineScripts(redis: Redis | Cluster): ScriptRunner {
  const commands = redis as unknown as Record<string, (...args: (string | Buffer)[]) => Promise<unknown>>;
  for (const [name, script] of Object.entries(SCRIPTS)) {
    redis.defineCommand(`xreactor_${name}`, { lua: loadLuaScript(script.file), numberOfKeys: script.numberOfKeys });
  }
  return (name, call) => {
    if (call.keys.length !== SCRIPTS[name].numberOfKeys) {
      throw new XreactorError('script_keys_invalid', `script ${SCRIPTS[name].file} takes ${SCRIPTS[name].numberOfKeys} keys, not ${call.keys.length}`);
    }
    return commands[`xreactor_${name}`]!.call(redis, ...call.keys, ...call.argv);
  };
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

/** The envelope bytes of a snapshot. */
export function encodeSnapshot(snapshot: PersistedSnapshot): Uint8Array {
  return encodeEnvelope(SNAPSHOT_KIND, snapshot.machineVersion, { value: snapshot.value, context: snapshot.context });
}

const executionKeys = (keys: ExecutionKeys) => [keys.execution, keys.results, keys.undo, keys.trace];

/** The commit tail both `createExecution-4` and `commitExecution-4` read (layout in `lua/includes/applyCommit.lua`). */
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

/** Arguments of `createExecution-4.lua`. */
export function createArgs(keys: ExecutionKeys, execution: CreateExecution, contextTtlMs: number): ScriptCall {
  return {
    keys: executionKeys(keys),
    argv: [ttlArg(contextTtlMs), execution.reactor, toBuffer(encode(execution.input)), ...commitTail(execution.commit)],
  };
}

/** Arguments of `commitExecution-4.lua`. */
export function commitArgs(keys: ExecutionKeys, expectedRevision: number, commit: Commit, contextTtlMs: number): ScriptCall {
  return { keys: executionKeys(keys), argv: [String(expectedRevision), ttlArg(contextTtlMs), ...commitTail(commit)] };
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

const REPLY = { ok: 0, conflict: 1, missing: 2, undoGap: 3 } as const;

function replyCode(reply: unknown, script: string): [code: number, first: number, second: number] {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new XreactorError('script_reply_invalid', `${script} replied ${JSON.stringify(reply)}, not a reply code: is another program's script loaded under its name?`);
  }
  const [code, first, second] = reply.map(Number);
  return [code!, first ?? Number.NaN, second ?? Number.NaN];
}

function undoGapError(id: string, position: number, length: number): XreactorError {
  return new XreactorError(
    'undo_position_invalid',
    `execution ${id}: an undo entry pushed at position ${position} would leave a gap in a stack of ${length} entries; nothing was written`,
  );
}

/**
 * Reads the reply of `commitExecution-4.lua`: the new revision.
 * @throws StaleRevisionError when another writer advanced the execution; ExecutionNotFoundError
 * when it does not exist; XreactorError `undo_position_invalid` for an undo push past the end.
 */
export function readCommitReply(id: string, expectedRevision: number, reply: unknown): number {
  const [code, first, second] = replyCode(reply, 'commitExecution-4.lua');
  if (code === REPLY.ok) return first;
  if (code === REPLY.conflict) throw new StaleRevisionError(id, expectedRevision, first);
  if (code === REPLY.missing) throw new ExecutionNotFoundError(id);
  if (code === REPLY.undoGap) throw undoGapError(id, first, second);
  throw new XreactorError('script_reply_invalid', `commitExecution-4.lua replied with unknown code ${code}`);
}

/**
 * Reads the reply of `createExecution-4.lua`: the revision (1).
 * @throws XreactorError `execution_exists` when the id exists; `undo_position_invalid` for an undo push past the end.
 */
export function readCreateReply(id: string, reply: unknown): number {
  const [code, first, second] = replyCode(reply, 'createExecution-4.lua');
  if (code === REPLY.ok) return first;
  if (code === REPLY.conflict) throw new XreactorError('execution_exists', `execution ${id} already exists; execution ids must be unique`);
  if (code === REPLY.undoGap) throw undoGapError(id, first, second);
  throw new XreactorError('script_reply_invalid', `createExecution-4.lua replied with unknown code ${code}`);
}
