import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DefinitionError, ExecutionNotFoundError, InboxPendingError, MapGateClosedError, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit } from '../../src/index.js';
import type { MapWrites, Signal, SpawnActor } from '../../src/store/store.js';
import { createKeyBuilder, KEY_KINDS, MAP_KEY_KINDS, rootOf } from '../../src/store/keys.js';
import { ELEMENT_OUTCOME_LETTERS, MAP_BUCKET_SIZE, ROLLBACK_OUTCOMES } from '../../src/store/map-writes.js';
import { mapOps, mapSectionArgv, readMapPageArgs, readMapPageReply } from '../../src/store/redis-map-args.js';
import {
  acquireAndLoadArgs,
  acquireLeaseArgs,
  commitArgs,
  commitBatchArgs,
  packArgv,
  createArgs,
  hasKernelWork,
  loadArgs,
  loadLuaScript,
  listedSpawnIds,
  markActiveArgs,
  markActiveManyArgs,
  markUnreadableArgs,
  readAcquireAndLoadReply,
  readCommitReceipt,
  readCommitReply,
  readCreateReply,
  readInboxArgs,
  readInboxReply,
  readLoadReply,
  readMarkUnreadableReply,
  readSignalReply,
  releaseLeaseArgs,
  signalArgs,
  spawnedIds,
  spawnFlags,
  SCRIPTS,
  SNAPSHOT_KIND,
  ttlArg,
} from '../../src/store/redis-scripts.js';
import { encodeSnapshot } from '../../src/store/snapshot-codec.js';
import { MAX_CASCADE_DEPTH } from '../../src/store/store.js';
import { retentionRefreshMs } from '../../src/store/redis-store.js';
import { decode, decodeEnvelope, encode } from '../../src/serialization/index.js';

const keys = createKeyBuilder('app').executionKeys('e1');

const commit: Commit = {
  snapshot: { kind: 'execution', machineVersion: 3, value: { running: 'b' }, context: { cursor: 1 } },
  status: 'running',
  writes: {
    results: [['a', { id: 1 }], ['b', null]],
    pushUndo: [{ position: 0, step: 'a', args: { x: 1 }, result: { id: 1 } }],
    truncateUndoTo: undefined,
    trace: [{ type: 'run', step: 'b', at: 5 }],
  },
  outbox: [{ type: 'enqueue', params: { job: 'j' } }],
};

const bytes = (value: string | Buffer | undefined): Buffer => {
  expect(Buffer.isBuffer(value)).toBe(true);
  return value as Buffer;
};

describe('key builder', () => {
  it('puts every key of an execution under the hash tag of its root, after the prefix', () => {
    expect(keys).toEqual({
      id: 'e1',
      base: 'app:{e1}:',
      execution: 'app:{e1}:exec:e1',
      results: 'app:{e1}:results:e1',
      undo: 'app:{e1}:undo:e1',
      trace: 'app:{e1}:trace:e1',
      lease: 'app:{e1}:lease:e1',
      settled: 'app:{e1}:settled:e1',
      inbox: 'app:{e1}:inbox:e1',
      dedupe: 'app:{e1}:dedupe:e1',
      awaits: 'app:{e1}:awaits:e1',
      children: 'app:{e1}:children:e1',
    });
    // Every key is the root's base, the kind, and the id: how the scripts build other actors' keys.
    for (const [kind, segment] of Object.entries(KEY_KINDS)) expect(keys[kind as keyof typeof KEY_KINDS]).toBe(`${keys.base}${segment}:e1`);
    expect(createKeyBuilder().executionKeys('child', 'root').results).toBe('xr:{root}:results:child');
  });

  it('tags a composed child (`<root>.<step>...`) with its root, so a whole execution tree shares one slot', () => {
    expect(createKeyBuilder().executionKeys('r1.child').execution).toBe('xr:{r1}:exec:r1.child');
    expect(createKeyBuilder().executionKeys('r1.child.grandchild').undo).toBe('xr:{r1}:undo:r1.child.grandchild');
    expect(rootOf('r1')).toBe('r1');
    expect(rootOf('r1.a.b')).toBe('r1');
  });

  it('keeps global keys out of every execution\'s slot', () => {
    expect(createKeyBuilder().active).toBe('xr:active');
  });

  it('rejects a prefix that would capture the hash tag, and empty ids', () => {
    expect(() => createKeyBuilder('a{b}')).toThrow(DefinitionError);
    expect(() => createKeyBuilder('')).toThrow(DefinitionError);
    expect(() => createKeyBuilder().executionKeys('')).toThrow(XreactorError);
    expect(() => createKeyBuilder().executionKeys('e', '')).toThrow(XreactorError);
  });
});

describe('commitArgs', () => {
  /** Where the commit starts in commitExecution-5.lua's ARGV (0-based), and how long the step commit above is. */
  const COMMIT_AT = 14;
  const COMMIT_LENGTH = 7 + 2 * 2 + 2 * 1 + 1;

  it('lays out the fence, the TTL, the options, the inbox seen, the commit and its kernel section as commitExecution-5.lua reads them', () => {
    const call = commitArgs(keys, 7, commit, 86_400_000);
    expect(call.keys).toEqual([keys.execution, keys.results, keys.undo, keys.trace, keys.lease]);
    const [expected, ttl, restamp, release, owner, channel, message, take, takeOwner, takeTtl, check, expectedSnapshot, inboxSeen, rootBase, status, snapshot, outbox, truncate, nResults, nUndo, nTrace, ...rest] =
      call.argv;
    expect([expected, ttl, status, truncate, nResults, nUndo, nTrace]).toEqual(['7', '86400000', 'running', '-1', '2', '1', '1']);
    // No options: re-stamp every key (the safe default), leave the lease alone, announce nothing,
    // check no snapshot (the new slots are flags and empty strings: no extra Redis command).
    expect([restamp, release, owner, channel, message]).toEqual(['1', '0', '', '', '']);
    expect([take, takeOwner, takeTtl, check, expectedSnapshot]).toEqual(['0', '', '', '0', '']);
    // No inboxSeen: the commit has seen no signal. A re-stamp reaches the kernel keys: the root base comes first.
    expect(inboxSeen).toBe('0');
    expect(rootBase).toBe(keys.base);
    expect(decodeEnvelope(bytes(snapshot), { kind: SNAPSHOT_KIND, machineVersions: [3] })).toEqual({
      kind: SNAPSHOT_KIND,
      machineVersion: 3,
      payload: { value: { running: 'b' }, context: { cursor: 1 } },
    });
    expect(decode(bytes(outbox))).toEqual(commit.outbox);
    expect(rest).toHaveLength(2 * 2 + 2 * 1 + 1 + 5 + 4);
    expect(rest[0]).toBe('a');
    expect(decode(bytes(rest[1]))).toEqual({ id: 1 });
    expect(rest[2]).toBe('b');
    expect(decode(bytes(rest[3]))).toBeNull();
    expect(rest[4]).toBe('0');
    expect(decode(bytes(rest[5]))).toEqual({ step: 'a', args: { x: 1 }, result: { id: 1 } });
    expect(decode(bytes(rest[6]))).toEqual({ type: 'run', step: 'b', at: 5 });
    // After the commit: the id, no consumed entries, awaits unchanged, no signals, no spawns;
    // then the index section: no active key (nothing recorded in the index with the commit), and
    // no creation (the actor exists).
    expect(rest.slice(7)).toEqual(['e1', '0', '-1', '0', '0', '', '0', '0', '0']);
  });

  it('passes the active index changes the script makes with the commit: the ids to list, and the unlisting of the committing actor', () => {
    const call = commitArgs(keys, 7, commit, 86_400_000, { restamp: false, index: { activeKey: 'app:active', list: ['e1', 'e1.c', 'e1'], unlist: false } });
    // Index changes need the kernel section (the fast path has none).
    expect(call.argv[13]).toBe(keys.base);
    expect(call.argv.slice(COMMIT_AT + COMMIT_LENGTH)).toEqual(['e1', '0', '-1', '0', '0', 'app:active', '2', 'e1', 'e1.c', '0', '0']);
    const settle = commitArgs(keys, 7, commit, 86_400_000, { restamp: false, index: { activeKey: 'app:active', list: [], unlist: true } });
    expect(settle.argv.slice(COMMIT_AT + COMMIT_LENGTH)).toEqual(['e1', '0', '-1', '0', '0', 'app:active', '0', '1', '0']);
    // Nothing to change: as without an index (the fast path when nothing else needs the kernel section).
    expect(commitArgs(keys, 7, commit, 86_400_000, { restamp: false, index: { activeKey: 'app:active', list: [], unlist: false } }).argv).toEqual(commitArgs(keys, 7, commit, 86_400_000, { restamp: false }).argv);
  });

  it('sends an empty root base and nothing after the commit without kernel work or re-stamp (the per-step fast path)', () => {
    const call = commitArgs(keys, 7, commit, 86_400_000, { restamp: false });
    expect(call.argv).toHaveLength(COMMIT_AT + COMMIT_LENGTH);
    expect(call.argv.slice(12, 14)).toEqual(['0', '']);
    expect(call.argv.slice(0, COMMIT_AT + COMMIT_LENGTH)).toEqual(commitArgs(keys, 7, commit, 86_400_000).argv.slice(0, COMMIT_AT + COMMIT_LENGTH).map((a, i) => (i === 2 ? '0' : i === 13 ? '' : a)));
    expect(hasKernelWork(commit)).toBe(false);
    for (const extra of [{ consumed: [1] }, { awaits: [] }, { signals: [{ to: 'e1.c', event: { type: 't' }, dedupeKey: 'k' }] }, { spawn: [{ id: 'e1.c', reactor: 'r', input: null, commit }] }]) {
      expect(hasKernelWork({ ...commit, ...extra })).toBe(true);
    }
    // An empty list is no work, except awaits: [] (it clears the stored list).
    expect(hasKernelWork({ ...commit, consumed: [], signals: [], spawn: [] })).toBe(false);
  });

  it('passes a creation after the index section: its flag, reactor, encoded input and parent, forcing the kernel section', () => {
    const call = commitArgs(keys, 0, commit, 86_400_000, { restamp: false, create: { reactor: 'leaf', input: encode({ n: 1 }), parent: 'e1.m' } });
    expect(call.argv[0]).toBe('0');
    expect(call.argv[13]).toBe(keys.base);
    const tail = call.argv.slice(COMMIT_AT + COMMIT_LENGTH);
    expect(tail.slice(0, 8)).toEqual(['e1', '0', '-1', '0', '0', '', '0', '0']);
    expect(tail.slice(8, 10)).toEqual(['1', 'leaf']);
    expect(decode(bytes(tail[10]))).toEqual({ n: 1 });
    expect(tail.slice(11)).toEqual(['e1.m']);
    const orphan = commitArgs(keys, 0, commit, 86_400_000, { restamp: false, create: { reactor: 'leaf', input: encode(null), parent: undefined } });
    expect(orphan.argv.at(-1)).toBe('');
  });

  it('passes the inbox seen, the consumed seqs, the awaits (repeats dropped) and the signals with their entry bytes', () => {
    const signals = [
      { to: 'e1', event: { type: 'self', n: 1 }, dedupeKey: 'k1' },
      { to: 'e1.child', event: { type: 'cancel' }, dedupeKey: 'k2', cascade: true },
    ];
    const call = commitArgs(keys, 2, { ...commit, inboxSeen: 4, consumed: [3, 4], awaits: ['e1.a', 'e1.b', 'e1.a'], signals }, 1000, { restamp: false });
    expect(call.argv.slice(12, 14)).toEqual(['4', keys.base]);
    const kernel = call.argv.slice(COMMIT_AT + COMMIT_LENGTH);
    expect(kernel.slice(0, 9)).toEqual(['e1', '2', '3', '4', '2', 'e1.a', 'e1.b', '2', 'e1']);
    expect(kernel[9]).toBe('k1');
    expect(kernel[10]).toBe('0');
    expect(decode(bytes(kernel[11]))).toEqual({ event: { type: 'self', n: 1 }, dedupeKey: 'k1' });
    expect(kernel.slice(12, 15)).toEqual(['e1.child', 'k2', '1']);
    expect(decode(bytes(kernel[15]))).toEqual({ event: { type: 'cancel' }, dedupeKey: 'k2' });
    expect(kernel.slice(16)).toEqual(['0', '', '0', '0', '0']);
  });

  it('passes each spawned actor with its id, reactor, input, lease, first commit and kernel tail, nested depth first', () => {
    const grandchild = { id: 'e1.a.x', reactor: 'leaf', input: 3, commit: { ...commit, consumed: [9], inboxSeen: 9 } };
    const child = { id: 'e1.a', reactor: 'child', input: { n: 1 }, lease: { owner: 'host-1', ttlMs: 1.5 }, commit: { ...commit, awaits: ['e1.a.x'], spawn: [grandchild] } };
    const call = commitArgs(keys, 2, { ...commit, spawn: [child] }, 1000, { restamp: false });
    const kernel = call.argv.slice(COMMIT_AT + COMMIT_LENGTH);
    // The id, no consumed, awaits unchanged, no signals, one spawned actor.
    expect(call.argv[13]).toBe(keys.base);
    expect(kernel.slice(0, 5)).toEqual(['e1', '0', '-1', '0', '1']);
    const [id, reactor, input, take, owner, ttl] = kernel.slice(5, 11);
    expect([id, reactor, take, owner, ttl]).toEqual(['e1.a', 'child', '1', 'host-1', '2']);
    expect(decode(bytes(input))).toEqual({ n: 1 });
    // Its first commit, exactly as a create sends it, then its kernel tail (no consumed entries).
    const childCommit = kernel.slice(11, 11 + COMMIT_LENGTH);
    expect(childCommit).toEqual(commitArgs(keys, 2, commit, 1000).argv.slice(COMMIT_AT, COMMIT_AT + COMMIT_LENGTH));
    const childKernel = kernel.slice(11 + COMMIT_LENGTH);
    expect(childKernel.slice(0, 5)).toEqual(['0', '1', 'e1.a.x', '0', '1']);
    expect(childKernel.slice(5, 7)).toEqual(['e1.a.x', 'leaf']);
    expect(decode(bytes(childKernel[7]))).toBe(3);
    expect(childKernel.slice(8, 11)).toEqual(['0', '', '']);
    // The child's tail, then (at the top level, after the root's tail) the index section.
    expect(childKernel.slice(11 + COMMIT_LENGTH)).toEqual(['0', '-1', '0', '0', '', '0', '0', '0']);
    expect(spawnedIds({ ...commit, spawn: [child, { ...grandchild, id: 'e1.b' }] })).toEqual(['e1.a', 'e1.a.x', 'e1.b']);
  });

  it('passes a spawned actor\'s flags: 1 takes its lease, 2 detaches it (retainWithParent: false); listed ones are the store\'s to list', () => {
    const actor = (extra: Partial<SpawnActor>): SpawnActor => ({ id: 'e1.a', reactor: 'child', input: null, commit, ...extra });
    const lease = { owner: 'host-1', ttlMs: 5 };
    expect([actor({}), actor({ lease }), actor({ retainWithParent: false }), actor({ lease, retainWithParent: false }), actor({ retainWithParent: true })].map(spawnFlags)).toEqual(['0', '1', '2', '3', '0']);
    const call = commitArgs(keys, 2, { ...commit, spawn: [actor({ lease, retainWithParent: false, listed: false })] }, 1000, { restamp: false });
    const kernel = call.argv.slice(COMMIT_AT + COMMIT_LENGTH);
    expect(kernel.slice(5, 7)).toEqual(['e1.a', 'child']);
    expect(kernel.slice(8, 11)).toEqual(['3', 'host-1', '5']);
    const tree = { ...commit, spawn: [actor({ listed: false, commit: { ...commit, spawn: [actor({ id: 'e1.a.x' })] } }), actor({ id: 'e1.b', listed: true }), actor({ id: 'e1.c', listed: false })] };
    expect(listedSpawnIds(tree)).toEqual(['e1.a.x', 'e1.b']);
    expect(spawnedIds(tree)).toEqual(['e1.a', 'e1.a.x', 'e1.b', 'e1.c']);
  });

  it('passes a truncation as the number of entries kept', () => {
    const call = commitArgs(keys, 1, { ...commit, writes: { ...commit.writes, truncateUndoTo: 0 } }, 1000);
    expect(call.argv[COMMIT_AT + 3]).toBe('0');
  });

  it('passes the re-stamp flag, the lease to release and the announcement', () => {
    const plain = commitArgs(keys, 3, commit, 1000, { restamp: false });
    expect(plain.argv.slice(2, 7)).toEqual(['0', '0', '', '', '']);
    const full = commitArgs(keys, 3, commit, 1000, { restamp: true, releaseLease: 'host-1', announceId: 'e1' });
    expect(full.argv.slice(2, 7)).toEqual(['1', '1', 'host-1', keys.settled, 'e1']);
    // An empty owner is still a release: the flag, not the owner, says whether to release.
    expect(commitArgs(keys, 3, commit, 1000, { releaseLease: '' }).argv.slice(3, 5)).toEqual(['1', '']);
    expect(full.argv.slice(COMMIT_AT, COMMIT_AT + COMMIT_LENGTH)).toEqual(plain.argv.slice(COMMIT_AT, COMMIT_AT + COMMIT_LENGTH));
    // Only the re-stamp sends the root base (and the kernel section after the commit).
    expect([full.argv[13], plain.argv[13]]).toEqual([keys.base, '']);
  });

  it('passes the lease to take, in whole milliseconds, and the snapshot bytes to fence on, before the commit', () => {
    const plain = commitArgs(keys, 3, commit, 1000);
    const expected = encodeSnapshot(commit.snapshot);
    const call = commitArgs(keys, 3, commit, 1000, { takeLease: { owner: 'host-2', ttlMs: 2.5 }, ifSnapshot: expected });
    expect(call.argv.slice(0, 7)).toEqual(plain.argv.slice(0, 7));
    expect(call.argv.slice(7, 11)).toEqual(['1', 'host-2', '3', '1']);
    expect(Buffer.compare(bytes(call.argv[11]), expected)).toBe(0);
    expect(call.argv.slice(12)).toEqual(plain.argv.slice(12));
    // Each is independent of the other; an empty snapshot is still a check (the flag says so).
    expect(commitArgs(keys, 3, commit, 1000, { takeLease: { owner: 'h', ttlMs: 10 } }).argv.slice(7, 12)).toEqual(['1', 'h', '10', '0', '']);
    const empty = commitArgs(keys, 3, commit, 1000, { ifSnapshot: new Uint8Array() }).argv.slice(7, 12);
    expect(empty.slice(0, 4)).toEqual(['0', '', '', '1']);
    expect(bytes(empty[4])).toHaveLength(0);
  });

  it('sends the snapshot bytes as a Buffer over the same bytes, whatever the typed array', () => {
    const source = new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4);
    const sent = bytes(commitArgs(keys, 3, commit, 1000, { ifSnapshot: source }).argv[11]);
    expect([...sent]).toEqual([1, 2, 3]);
  });

  it('refuses undo positions and truncations that are not non-negative integers', () => {
    const withPosition = (position: number): Commit => ({ ...commit, writes: { ...commit.writes, pushUndo: [{ position, step: 's', args: null, result: null }] } });
    expect(() => commitArgs(keys, 1, withPosition(-1), 1000)).toThrow(/position -1/);
    expect(() => commitArgs(keys, 1, withPosition(1.5), 1000)).toThrow(/position 1.5/);
    expect(() => commitArgs(keys, 1, { ...commit, writes: { ...commit.writes, truncateUndoTo: -2 } }, 1000)).toThrow(/truncateUndoTo -2/);
  });
});

describe('createArgs', () => {
  it('puts the TTL, reactor, input, lease and announcement before the first commit and its kernel section', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: { at: new Date(9) }, commit }, 5000);
    expect(call.keys).toEqual([keys.execution, keys.results, keys.undo, keys.trace, keys.lease]);
    expect(call.argv.slice(0, 2)).toEqual(['5000', 'checkout']);
    expect(decode(bytes(call.argv[2]))).toEqual({ at: new Date(9) });
    expect(call.argv.slice(3, 8)).toEqual(['0', '', '', '', '']);
    // No active index to record it in (CreateOptions.list not given), then the commit's layout
    // without its index section.
    expect(call.argv[8]).toBe(keys.base);
    expect(call.argv[9]).toBe('');
    expect([call.argv[8], ...call.argv.slice(10)]).toEqual(commitArgs(keys, 0, commit, 5000).argv.slice(13, -4));
  });

  it('names the active index to record the execution in with the create', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: null, commit }, 5000, { activeKey: 'app:active' });
    expect(call.argv[9]).toBe('app:active');
  });

  it('passes the lease to take, in whole milliseconds, and the announcement', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: null, commit }, 5000, { lease: { owner: 'host-1', ttlMs: 2.5 }, announce: true });
    expect(call.argv.slice(3, 8)).toEqual(['1', 'host-1', '3', keys.settled, 'e1']);
    // The commit's layout without its index section.
    expect([call.argv[8], ...call.argv.slice(10)]).toEqual(commitArgs(keys, 0, commit, 5000).argv.slice(13, -4));
  });

  it('always sends the kernel section (the script clears leftovers under the id), without consumed entries', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: null, commit: { ...commit, consumed: [1, 2], inboxSeen: 9, awaits: ['e1.x'] } }, 5000);
    expect(call.argv[8]).toBe(keys.base);
    expect(call.argv.slice(10 + 7 + 2 * 2 + 2 * 1 + 1)).toEqual(['e1', '0', '1', 'e1.x', '0', '0']);
  });
});

describe('acquireAndLoadArgs', () => {
  it('names the execution hash, the lease, the inbox and the undo list, the owner, the TTL in whole milliseconds and whether to read the undo top', () => {
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 30_000 })).toEqual({ keys: [keys.execution, keys.lease, keys.inbox, keys.undo, keys.execution], argv: ['host-1', '30000', '0', '0'] });
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 30_000 }, false, 'asker-hash')).toEqual({ keys: [keys.execution, keys.lease, keys.inbox, keys.undo, 'asker-hash'], argv: ['host-1', '30000', '0', '1'] });
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 0.2 }).argv[1]).toBe('1');
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 30_000 }, true).argv[2]).toBe('1');
  });
});

describe('load, inbox and signal args', () => {
  it('loads from the execution hash, the inbox hash, the lease and the results (the steps asked, or all); reads the inbox from the first two', () => {
    expect(loadArgs(keys)).toEqual({ keys: [keys.execution, keys.inbox, keys.lease, keys.results], argv: [''] });
    expect(loadArgs(keys, 'all')).toEqual({ keys: [keys.execution, keys.inbox, keys.lease, keys.results], argv: ['all'] });
    expect(loadArgs(keys, ['s9', 's1']).argv).toEqual(['some', 's9', 's1']);
    expect(readInboxArgs(keys)).toEqual({ keys: [keys.execution, keys.inbox], argv: [] });
  });

  it('signals through the recipient\'s execution hash, with its root base, the TTL, the signal and the refuse statuses', () => {
    const child = createKeyBuilder('app').executionKeys('e1.c');
    const call = signalArgs(child, { to: 'e1.c', event: { type: 'cancel', at: new Date(3) }, dedupeKey: 'cancel:1', cascade: true }, 2.5, ['rolling_back', 'completed']);
    expect(call.keys).toEqual([child.execution]);
    expect(call.argv.slice(0, 5)).toEqual(['app:{e1}:', '3', 'e1.c', 'cancel:1', '1']);
    expect(decode(bytes(call.argv[5]))).toEqual({ event: { type: 'cancel', at: new Date(3) }, dedupeKey: 'cancel:1' });
    expect(call.argv.slice(6)).toEqual(['2', 'rolling_back', 'completed']);
    expect(signalArgs(keys, { to: 'e1', event: { type: 't' }, dedupeKey: 'k' }, 1000).argv.slice(4).filter((a) => typeof a === 'string')).toEqual(['0', '0']);
  });
});

describe('lease and active-index args', () => {
  it('names the lease key, owner and TTL in whole milliseconds', () => {
    expect(acquireLeaseArgs(keys, 'host-1', 50)).toEqual({ keys: [keys.lease], argv: ['host-1', '50'] });
    expect(acquireLeaseArgs(keys, 'host-1', 0.2).argv[1]).toBe('1');
    expect(releaseLeaseArgs(keys, 'host-1')).toEqual({ keys: [keys.lease], argv: ['host-1'] });
    expect(markActiveArgs('xr:active', 'e1')).toEqual({ keys: ['xr:active'], argv: ['e1'] });
  });

  it('lists several ids in one markActive-1.lua call, in the order given, each once', () => {
    expect(markActiveManyArgs('xr:active', ['b', 'a', 'b', 'c'])).toEqual({ keys: ['xr:active'], argv: ['b', 'a', 'c'] });
    expect(markActiveManyArgs('xr:active', ['e1'])).toEqual(markActiveArgs('xr:active', 'e1'));
  });

  it('rounds TTLs up, to at least 1 ms, and rejects NaN', () => {
    expect(ttlArg(1.2)).toBe('2');
    expect(ttlArg(-5)).toBe('1');
    expect(() => ttlArg(Number.NaN)).toThrow(DefinitionError);
  });
});

describe('unreadable-data args and reply', () => {
  it('names the execution hash and sends the record as msgpack { code, message } only', () => {
    const call = markUnreadableArgs(keys, { code: 'deserialization_failed', message: 'cut', extra: 1 } as never);
    expect(call.keys).toEqual([keys.execution]);
    expect(call.argv).toHaveLength(1);
    expect(decode(bytes(call.argv[0]))).toEqual({ code: 'deserialization_failed', message: 'cut' });
  });

  it('reads what the script did, and refuses a reply of another shape', () => {
    expect([[0], [1], [2], [3]].map(readMarkUnreadableReply)).toEqual(['marked', 'already', 'missing', 'foreign']);
    expect(() => readMarkUnreadableReply([9])).toThrow(/markUnreadable-1\.lua replied with unknown code 9/);
    expect(() => readMarkUnreadableReply('OK')).toThrow(/markUnreadable-1\.lua replied "OK", not a reply code/);
  });
});

describe('retention refresh window', () => {
  it('is max(1000 ms, contextTtlMs / 100), at most half the retention', () => {
    expect(retentionRefreshMs(86_400_000)).toBe(864_000);
    expect(retentionRefreshMs(60_000)).toBe(1_000);
    expect(retentionRefreshMs(100_000)).toBe(1_000);
    expect(retentionRefreshMs(1_000_000)).toBe(10_000);
    expect(retentionRefreshMs(1_500)).toBe(750);
    expect(retentionRefreshMs(10)).toBe(5);
  });
});

describe('script replies', () => {
  it('reads a commit reply as the new revision, or the error it stands for', () => {
    expect(readCommitReply('e1', 3, [0, 4])).toBe(4);
    expect(() => readCommitReply('e1', 3, [1, 5])).toThrow(StaleRevisionError);
    expect(() => readCommitReply('e1', 3, [1, 5])).toThrow(/e1 is at revision 5, not 3/);
    expect(() => readCommitReply('e1', 3, [2, 0])).toThrow(ExecutionNotFoundError);
    expect(() => readCommitReply('e1', 3, [3, '7', 2])).toThrow(/position 7 would leave a gap in a stack of 2/);
    expect(() => readCommitReply('e1', 3, [4, 0])).toThrow(expect.objectContaining({ code: 'execution_busy', retryable: true }) as Error);
    expect(() => readCommitReply('e1', 3, [4, 0])).toThrow(/execution e1 .*another live process holds its lease/);
    expect(() => readCommitReply('e1', 3, 'OK')).toThrow(/not a reply code/);
    expect(() => readCommitReply('e1', 3, [9])).toThrow(/unknown code 9/);
  });

  it('reads a create reply as revision 1, or the refusal of an existing id', () => {
    expect(readCreateReply('e1', [0, 1])).toBe(1);
    expect(() => readCreateReply('e1', [1, 4])).toThrow(expect.objectContaining({ code: 'execution_exists' }) as Error);
    expect(() => readCreateReply('e1', [3, '1', 0])).toThrow(/gap/);
  });

  it('reads a create refused for a lease another owner holds as execution_busy, naming the id', () => {
    expect(() => readCreateReply('e1', [4, 0])).toThrow(expect.objectContaining({ code: 'execution_busy', retryable: true }) as Error);
    expect(() => readCreateReply('e1', [4, 0])).toThrow(/execution e1 .*another live process holds its lease/);
    expect(() => readCreateReply('e1', [9])).toThrow(/createExecution-5\.lua replied with unknown code 9/);
  });

  it('reads an acquireAndLoad reply: leased with the stored bytes, busy, missing, or its asker exists', () => {
    const rev = Buffer.from('3');
    const snapshot = Buffer.from([1, 2]);
    const outbox = Buffer.from([3]);
    const input = Buffer.from([4]);
    const none = { inboxSeq: 0, entries: [] };
    expect(readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, []])).toEqual({ status: 'leased', revision: rev, snapshot, outbox, input, ...none });
    expect(readAcquireAndLoadReply([0, rev, null, outbox])).toEqual({ status: 'leased', revision: rev, snapshot: null, outbox, input: null, ...none });
    expect(readAcquireAndLoadReply([0, '3', null, null, null])).toEqual({ status: 'leased', revision: Buffer.from('3'), snapshot: null, outbox: null, input: null, ...none });
    const entry = Buffer.from([9]);
    expect(readAcquireAndLoadReply([0, rev, snapshot, outbox, input, Buffer.from('4'), [Buffer.from('4'), entry, '2', entry]])).toMatchObject({ inboxSeq: 4, entries: [[4, entry], [2, entry]] });
    expect(readAcquireAndLoadReply([1])).toEqual({ status: 'busy' });
    expect(readAcquireAndLoadReply([2])).toEqual({ status: 'missing' });
    expect(readAcquireAndLoadReply([3])).toEqual({ status: 'exists' });
    expect(() => readAcquireAndLoadReply('OK')).toThrow(/acquireAndLoad-5\.lua replied "OK", not a reply code/);
    expect(() => readAcquireAndLoadReply([])).toThrow(/not a reply code/);
    expect(() => readAcquireAndLoadReply([7])).toThrow(/unknown code 7/);
    expect(() => readAcquireAndLoadReply([0, rev, { not: 'bytes' }, outbox, input])).toThrow(/not bytes/);
    expect(() => readAcquireAndLoadReply([0, rev, snapshot, outbox, input, 'x', []])).toThrow(/inbox seq x, not a whole number/);
    expect(() => readAcquireAndLoadReply([0, rev, snapshot, outbox, input, '1', [entry]])).toThrow(/not field\/value pairs/);
    // Asked for the undo stack's top: its length and last entry (0 and nil for an empty stack).
    const top = Buffer.from([7]);
    expect(readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, [], 3, top])).toMatchObject({ status: 'leased', undoTop: { position: 2, bytes: top } });
    expect(readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, [], 0, null])).not.toHaveProperty('undoTop');
    expect(() => readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, [], 2, null])).toThrow(/acquireAndLoad-5\.lua replied/);
    expect(() => readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, [], 0, top])).toThrow(/acquireAndLoad-5\.lua replied/);
    expect(() => readAcquireAndLoadReply([0, rev, snapshot, outbox, input, null, [], -1, top])).toThrow(/acquireAndLoad-5\.lua replied/);
  });

  it('reads a load reply: the stored fields, the inbox seq, the entries as listed, whether the lease is held, whether it is marked unreadable, and the results read', () => {
    const entry = Buffer.from([7]);
    expect(readLoadReply([Buffer.from('2'), Buffer.from([1]), Buffer.from([2]), Buffer.from('3'), [Buffer.from('3'), entry], 1, 0, 0])).toEqual({
      revision: Buffer.from('2'),
      snapshot: Buffer.from([1]),
      outbox: Buffer.from([2]),
      inboxSeq: 3,
      entries: [[3, entry]],
      leased: true,
      marked: false,
      results: undefined,
    });
    expect(readLoadReply([null, null, null, null, [], 0, 1, 0])).toEqual({ revision: null, snapshot: null, outbox: null, inboxSeq: 0, entries: [], leased: false, marked: true, results: undefined });
    const read = readLoadReply([Buffer.from('2'), Buffer.from([1]), Buffer.from([2]), null, [], 0, 0, [Buffer.from('s9'), Buffer.from([9]), Buffer.from('s1'), Buffer.from([1])]]);
    expect(read.results).toEqual(new Map([['s9', Buffer.from([9])], ['s1', Buffer.from([1])]]));
    expect(readLoadReply([null, null, null, null, [], 0, 0, []]).results).toEqual(new Map());
    expect(() => readLoadReply([null, null, null, null, [], 0, 0, [Buffer.from('s9')]])).toThrow(/results that are not step\/value pairs/);
    expect(() => readLoadReply([null, null, null, null, [], 0, 1])).toThrow(/loadExecution-4\.lua replied/);
    expect(() => readLoadReply([null, null])).toThrow(/loadExecution-4\.lua replied/);
  });

  it('reads an inbox reply and a signal reply', () => {
    expect(readInboxReply([null, []])).toEqual({ seq: 0, entries: [] });
    expect(readInboxReply([Buffer.from('5'), [Buffer.from('5'), Buffer.from([1])]])).toEqual({ seq: 5, entries: [[5, Buffer.from([1])]] });
    expect(() => readInboxReply('OK')).toThrow(/readInbox-2\.lua replied "OK"/);
    expect(readSignalReply([0])).toEqual({ landed: [] });
    expect(readSignalReply([0, 'e1', 'e1.a'])).toEqual({ landed: ['e1', 'e1.a'] });
    expect(readSignalReply([1, 'e1.a', 'rolling_back'])).toEqual({ landed: [], refusedBy: { id: 'e1.a', status: 'rolling_back' } });
    expect(() => readSignalReply([3])).toThrow(/signalActor-1\.lua replied with unknown code 3/);
    expect(() => readSignalReply([])).toThrow(/not a reply code/);
  });

  it('reads the refusals of a spawned actor, naming it, in commit and create replies', () => {
    for (const read of [(reply: unknown) => readCommitReply('e1', 3, reply), (reply: unknown) => readCreateReply('e1', reply)]) {
      expect(() => read([6, 'e1.a'])).toThrow(expect.objectContaining({ code: 'execution_exists', message: 'execution e1.a already exists; execution ids must be unique' }) as Error);
      expect(() => read([4, 'e1.a'])).toThrow(expect.objectContaining({ code: 'execution_busy', message: expect.stringMatching(/^execution e1\.a was not written/) }) as Error);
      expect(() => read([4, 0])).toThrow(expect.objectContaining({ code: 'execution_busy', message: expect.stringMatching(/^execution e1 was not written/) }) as Error);
      expect(() => read([3, '2', 0, 'e1.a'])).toThrow(/execution e1\.a: an undo entry pushed at position 2 would leave a gap in a stack of 0/);
      expect(() => read([3, '2', 1])).toThrow(/execution e1: an undo entry pushed at position 2 would leave a gap in a stack of 1/);
    }
  });

  it('reads a commit refused for a pending inbox entry as InboxPendingError naming the stored revision and seq', () => {
    const refused = (() => {
      try {
        readCommitReply('e1', 3, [5, 3, 8]);
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(InboxPendingError);
    expect(refused).toBeInstanceOf(StaleRevisionError);
    expect(refused).toMatchObject({ code: 'inbox_pending', executionId: 'e1', inboxSeq: 8 });
  });
});

describe('lua scripts', () => {
  const files = readdirSync(new URL('../../src/store/lua/', import.meta.url)).filter((f) => f.endsWith('.lua'));

  it('registers every script file, each named verbNoun-<numKeys>.lua', () => {
    expect(files.sort()).toEqual(Object.values(SCRIPTS).map((s) => s.file).sort());
    for (const script of Object.values(SCRIPTS)) expect(script.file).toMatch(new RegExp(`^[a-z][A-Za-z]+-${typeof script.numberOfKeys === 'number' ? script.numberOfKeys : `${script.numberOfKeys.perItem}n`}\\.lua$`));
  });

  it('opens each script with a header listing exactly its KEYS, its ARGV and its return codes', () => {
    for (const script of Object.values(SCRIPTS) as readonly { readonly file: string; readonly numberOfKeys: number | { readonly perItem: number }; readonly packed?: true }[]) {
      const source = loadLuaScript(script.file);
      // A packed script unpacks its one argument into A before anything reads it; the others read ARGV.
      if (script.packed === true) expect(source, script.file).toMatch(/^local A = cmsgpack\.unpack\(ARGV\[1\]\)$/m);
      else expect(source, script.file).not.toMatch(/cmsgpack/);
      if (typeof script.numberOfKeys !== 'number') continue; // the group calls (commitBatch-1n.lua, acquireAndLoadBatch-5n.lua): keys per item
      const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
      expect(header, script.file).toContain(script.file);
      expect(header, script.file).toMatch(/ARGV\[1\]|ARGV {5}none/);
      expect(header, script.file).toMatch(/Returns/);
      const declared = new Set([...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])));
      expect([...declared].sort(), script.file).toEqual(Array.from({ length: script.numberOfKeys }, (_, i) => i + 1));
      const used = [...source.slice(header.length).matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]));
      for (const index of used) expect(index, script.file).toBeLessThanOrEqual(script.numberOfKeys);
    }
  });

  it('builds the keys of other actors as the key builder does: the include\'s kinds are KEY_KINDS, its cascade bound MAX_CASCADE_DEPTH', () => {
    const source = readFileSync(new URL('../../src/store/lua/includes/actorKeys.lua', import.meta.url), 'utf8');
    const table = /local KIND = \{([^}]*)\}/.exec(source)?.[1] ?? '';
    const kinds = Object.fromEntries([...table.matchAll(/(\w+) = '([^']+)'/g)].map((m) => [m[1], m[2]]));
    const { settled: _channel, ...keyKinds } = KEY_KINDS;
    expect(kinds).toEqual(keyKinds);
    expect(source).toContain("return base .. KIND[kind] .. ':' .. id");
    const deliver = readFileSync(new URL('../../src/store/lua/includes/deliverSignal.lua', import.meta.url), 'utf8');
    expect(deliver).toContain(`local MAX_CASCADE_DEPTH = ${MAX_CASCADE_DEPTH}`);
  });

  it('packs a packed script\'s arguments as one msgpack array of str values holding the raw bytes', () => {
    expect([...packArgv(['a', Buffer.from([0xff, 0x00]), '', 'é'])]).toEqual([
      0xdd, 0, 0, 0, 4, // array 32 of 4
      0xdb, 0, 0, 0, 1, 0x61, // str 32 'a'
      0xdb, 0, 0, 0, 2, 0xff, 0x00, // a Buffer's bytes as they are (Redis's cmsgpack reads no bin type)
      0xdb, 0, 0, 0, 0, // ''
      0xdb, 0, 0, 0, 2, 0xc3, 0xa9, // a string in UTF-8
    ]);
    expect([...packArgv([])]).toEqual([0xdd, 0, 0, 0, 0]);
  });

  it('lays out a group commit: one declared key per commit (its execution hash), then per commit its argument count, root base and id before its arguments', () => {
    const other = createKeyBuilder('app').executionKeys('e2.c');
    const first = commitArgs(keys, 3, commit, 1000, { restamp: false });
    const second = commitArgs(other, 8, commit, 1000, { restamp: false });
    const call = commitBatchArgs([first, second]);
    expect(call.keys).toEqual([keys.execution, other.execution]);
    expect(call.argv).toEqual([String(first.argv.length), keys.base, 'e1', ...first.argv, String(second.argv.length), 'app:{e2}:', 'e2.c', ...second.argv]);
  });

  it('expands includes', () => {
    const source = loadLuaScript(SCRIPTS.commitExecution.file);
    expect(source).not.toMatch(/^--- @include/m);
    expect(source).toMatch(/local function applyCommit/);
  });
});

describe('map writes and reads args', () => {
  const COMMIT_AT = 14;
  const COMMIT_LENGTH = 7 + 2 * 2 + 2 * 1 + 1;
  const mapKeys = createKeyBuilder('app').mapKeys('e1.m');
  const failure = { step: 'e2', kind: 'undo' as const, reason: 'raised' as const, error: { name: 'Error', message: 'no' } };

  it('builds the map keys under the root\'s hash tag, the kind before the map id and the bucket last', () => {
    const { outcomes, rollbackOutcomes, starts, ...lists } = mapKeys;
    expect(lists).toEqual({
      id: 'e1.m',
      base: 'app:{e1}:',
      stats: 'app:{e1}:mapstat:e1.m',
      source: 'app:{e1}:mapsrc:e1.m',
      started: 'app:{e1}:mapstarted:e1.m',
      aborted: 'app:{e1}:mapaborted:e1.m',
      rollbackFailures: 'app:{e1}:rbfail:e1.m',
    });
    expect([outcomes(0), outcomes(9), rollbackOutcomes(2), starts(1)]).toEqual(['app:{e1}:mapout:e1.m:0', 'app:{e1}:mapout:e1.m:9', 'app:{e1}:rbout:e1.m:2', 'app:{e1}:mapstarts:e1.m:1']);
    for (const [kind, segment] of Object.entries(MAP_KEY_KINDS)) {
      const key = kind === 'outcomes' || kind === 'rollbackOutcomes' || kind === 'starts' ? mapKeys[kind](0) : mapKeys[kind as Exclude<keyof typeof MAP_KEY_KINDS, 'outcomes' | 'rollbackOutcomes' | 'starts'>];
      expect(key.startsWith(`${mapKeys.base}${segment}:e1.m`)).toBe(true);
    }
    expect(() => createKeyBuilder().mapKeys('')).toThrow(XreactorError);
  });

  it('lays out the map section after the kernel tail: the committing actor, then its spawned actors, depth first, each op in order', () => {
    const writes: MapWrites = {
      init: { total: null, batchSize: 50, atomic: true, mode: 'fanOut' },
      source: ['a', { b: 1 }],
      target: { target: 7 },
      rollbackTarget: { target: 3 },
      dropSource: true,
    };
    const element = { id: 'e1.m.0', reactor: 'e', input: null, commit: { ...commit, writes: { ...commit.writes, map: { started: { map: 'e1.m', index: 0 } } } }, retainWithParent: false, listed: false };
    const call = commitArgs(keys, 3, { ...commit, writes: { ...commit.writes, map: writes }, spawn: [element] }, 1000, { restamp: false });
    const tail = call.argv.slice(COMMIT_AT + COMMIT_LENGTH);
    // The id, no consumed, awaits unchanged, no signals, one spawned actor (flags 2: detached) with its commit and tail.
    expect(tail.slice(0, 5)).toEqual(['e1', '0', '-1', '0', '1']);
    expect(tail[8]).toBe('2');
    // The index section after the root's kernel tail, then the map section.
    expect(tail.slice(11 + COMMIT_LENGTH + 4, 11 + COMMIT_LENGTH + 8)).toEqual(['', '0', '0', '0']);
    const section = tail.slice(11 + COMMIT_LENGTH + 8);
    expect(section.slice(0, 3)).toEqual(['2', 'e1', '5']);
    expect(section.slice(3, 8)).toEqual(['init', '', '50', '1', 'fanOut']);
    expect(section.slice(8, 10)).toEqual(['source', '2']);
    expect(section.slice(10, 12).map((b) => decode(bytes(b)))).toEqual(['a', { b: 1 }]);
    expect(section.slice(12)).toEqual(['target', '7', 'rbtarget', '3', 'dropsource', 'e1.m.0', '1', 'started', 'e1.m', '0', '0']);
    expect(mapSectionArgv('e1', commit)).toEqual([]);
  });

  it('passes reports, rollback reports and their failures', () => {
    expect(mapOps({ report: { map: 'e1.m', index: 12, outcome: 'failed', stops: true, at: 5.5 } })).toEqual(['1', 'report', 'e1.m', '12', 'failed', '1', '5.5']);
    const rb = mapOps({ rollbackReport: { map: 'e1.m', position: 3, outcome: 'context_unavailable', failures: [failure, failure] } });
    expect(rb.slice(0, 6)).toEqual(['1', 'rbreport', 'e1.m', '3', 'context_unavailable', '2']);
    expect(rb.slice(6).map((b) => decode(bytes(b)))).toEqual([failure, failure]);
    expect(mapOps({ started: { map: 'e1.m', index: 4 }, init: { total: 9, batchSize: 1, atomic: false, mode: 'inline' } })).toEqual(['2', 'init', '9', '1', '0', 'inline', 'started', 'e1.m', '4', '0']);
    // A fan-out element's start is gated: commitExecution-5.lua refuses it ({7, map, why}) once the map stopped.
    expect(mapOps({ started: { map: 'e1.m', index: 4, gate: true } })).toEqual(['1', 'started', 'e1.m', '4', '1']);
    expect(() => readCommitReply('e1.m.4', 2, [7, 'e1.m', 'stopped by failed:2'])).toThrow(MapGateClosedError);
    expect(() => readCommitReply('e1.m.4', 2, [7, 'e1.m', 'cancelled'])).toThrow('element e1.m.4 did not start: its map e1.m no longer dispatches (cancelled); nothing was written');
  });

  it('a commit with map writes or conditional signals takes the kernel section; a group commit batches it with the per-step ones', () => {
    const withMap: Commit = { ...commit, writes: { ...commit.writes, map: { report: { map: 'e1.m', index: 0, outcome: 'completed', stops: false, at: 1 } } } };
    expect(hasKernelWork(withMap)).toBe(true);
    const call = commitArgs(keys, 3, withMap, 1000, { restamp: false });
    const plain = commitArgs(keys, 3, commit, 1000, { restamp: false });
    expect(call.argv[13]).toBe(keys.base);
    expect(plain.argv[13]).toBe('');
    // One declared key per commit; each commit leads with its argument count, root base and id: the script finds where the next one starts.
    const batch = commitBatchArgs([call, plain]);
    expect(batch.keys).toEqual([keys.execution, keys.execution]);
    expect(batch.argv).toEqual([String(call.argv.length), keys.base, keys.id, ...call.argv, String(plain.argv.length), keys.base, keys.id, ...plain.argv]);
  });

  it('passes a conditional signal\'s condition as its mode (in place of the cascade flag)', () => {
    const signals: Signal[] = [
      { to: 'e1.m', event: { type: 't' }, dedupeKey: 'throw.0', condition: 'reportNew' },
      { to: 'e1.m', event: { type: 't' }, dedupeKey: 'settled', condition: 'mapSettled' },
      { to: 'e1.m', event: { type: 't' }, dedupeKey: 'plain' },
    ];
    const tail = commitArgs(keys, 3, { ...commit, signals }, 1000, { restamp: false }).argv.slice(COMMIT_AT + COMMIT_LENGTH);
    expect(tail.slice(3, 6)).toEqual(['3', 'e1.m', 'throw.0']);
    expect([tail[6], tail[10], tail[14]]).toEqual(['reportNew', 'mapSettled', '0']);
  });

  it('reads the receipt of a commit reply: the landed conditional keys, then each landing of its own signals', () => {
    expect(readCommitReceipt([0, 4])).toEqual({ landed: [], landings: [] });
    expect(readCommitReceipt([0, 4, 2, 'throw.1', Buffer.from('settled')])).toEqual({ landed: ['throw.1', 'settled'], landings: [] });
    expect(readCommitReceipt([0, 4, 1, 'throw.1', 1, 'e1.m', 7, 2, Buffer.from('e1.p'), 3])).toEqual({ landed: ['throw.1'], landings: [[0, 'e1.m', 7], [1, 'e1.p', 3]] });
    expect(() => readCommitReceipt([0, 4, 0, 1, 'e1.m'])).toThrow(/commitExecution-5\.lua replied/);
    expect(readCommitReply('e1', 3, [0, 4, 1, 'throw.1'])).toBe(4);
  });

  it('lays out readMapPage-1.lua and reads its reply', () => {
    expect(readMapPageArgs(mapKeys, 5, 3, 'total')).toEqual({ keys: [mapKeys.stats], argv: ['app:{e1}:', 'e1.m', '5', '3', '1', 'total'] });
    expect(readMapPageArgs(mapKeys, -2, 1.5, null).argv).toEqual(['app:{e1}:', 'e1.m', '0', '1', '0', '']);
    const reply = [Buffer.from('1'), Buffer.from('4'), [Buffer.from('c'), Buffer.from('R'), null], [Buffer.from('f'), null, Buffer.from('S')], [null, null, null]];
    expect(readMapPageReply(reply, false)).toEqual({
      exists: true,
      target: 4,
      entries: [
        { letter: 'c', result: Buffer.from('R'), snapshot: null },
        { letter: 'f', result: null, snapshot: Buffer.from('S') },
        { letter: null, result: null, snapshot: null },
      ],
    });
    expect(readMapPageReply([Buffer.from('1'), null, [Buffer.from('c'), [Buffer.from('e1'), Buffer.from('A')], null]], true).entries[0]?.result).toEqual([['e1', Buffer.from('A')]]);
    expect(readMapPageReply(['0', null], false)).toEqual({ exists: false, target: null, entries: [] });
    expect(() => readMapPageReply('nope', false)).toThrow(/not a map page/);
    expect(() => readMapPageReply(['1', null, ['c']], false)).toThrow(XreactorError);
  });

  it('the Lua includes mirror the map key kinds, the outcome tables and the bucket size', () => {
    const keysSource = readFileSync(new URL('../../src/store/lua/includes/actorKeys.lua', import.meta.url), 'utf8');
    const table = /local MAP_KIND = \{([^}]*)\}/.exec(keysSource)?.[1] ?? '';
    expect(Object.fromEntries([...table.matchAll(/(\w+) = '([^']+)'/g)].map((m) => [m[1], m[2]]))).toEqual(MAP_KEY_KINDS);
    const writes = readFileSync(new URL('../../src/store/lua/includes/mapWrites.lua', import.meta.url), 'utf8');
    const letters = /local ELEMENT_LETTER = \{([^}]*)\}/.exec(writes)?.[1] ?? '';
    expect(Object.fromEntries([...letters.matchAll(/(\w+) = '([^']+)'/g)].map((m) => [m[1], m[2]]))).toEqual(ELEMENT_OUTCOME_LETTERS);
    const rollback = /local ROLLBACK_OUTCOME = \{([\s\S]*?)\n\}/.exec(writes)?.[1] ?? '';
    const rows = [...rollback.matchAll(/(\w+) = \{ letter = '([^']+)', counter = '([^']+)' \}/g)].map((m) => [m[1], { letter: m[2], counter: m[3] }]);
    expect(Object.fromEntries(rows)).toEqual(ROLLBACK_OUTCOMES);
    expect(writes).toContain(`local MAP_BUCKET_SIZE = ${MAP_BUCKET_SIZE}`);
  });

  it('docs/redis-keys.md lists a row for every key kind and map key kind', () => {
    const doc = readFileSync(new URL('../../docs/redis-keys.md', import.meta.url), 'utf8');
    const rows = new Set([...doc.matchAll(/^\| `<prefix>:\{<root>\}:(\w+):/gm)].map((m) => m[1]));
    expect([...rows].sort()).toEqual([...Object.values(KEY_KINDS), ...Object.values(MAP_KEY_KINDS)].sort());
  });
});
