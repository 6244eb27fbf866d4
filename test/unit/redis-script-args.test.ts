import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DefinitionError, ExecutionNotFoundError, StaleRevisionError, XreactorError } from '../../src/index.js';
import type { Commit } from '../../src/index.js';
import { createKeyBuilder, rootOf } from '../../src/store/keys.js';
import {
  acquireAndLoadArgs,
  acquireLeaseArgs,
  commitArgs,
  createArgs,
  loadLuaScript,
  markActiveArgs,
  readAcquireAndLoadReply,
  readCommitReply,
  readCreateReply,
  releaseLeaseArgs,
  SCRIPTS,
  SNAPSHOT_KIND,
  ttlArg,
} from '../../src/store/redis-scripts.js';
import { encodeSnapshot } from '../../src/store/snapshot-codec.js';
import { retentionRefreshMs } from '../../src/store/redis-store.js';
import { decode, decodeEnvelope } from '../../src/serialization/index.js';

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
      execution: 'app:{e1}:exec:e1',
      results: 'app:{e1}:results:e1',
      undo: 'app:{e1}:undo:e1',
      trace: 'app:{e1}:trace:e1',
      lease: 'app:{e1}:lease:e1',
      settled: 'app:{e1}:settled:e1',
    });
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
  it('lays out the fence, the TTL, the options and the commit as commitExecution-5.lua reads them', () => {
    const call = commitArgs(keys, 7, commit, 86_400_000);
    expect(call.keys).toEqual([keys.execution, keys.results, keys.undo, keys.trace, keys.lease]);
    const [expected, ttl, restamp, release, owner, channel, message, take, takeOwner, takeTtl, check, expectedSnapshot, status, snapshot, outbox, truncate, nResults, nUndo, nTrace, ...rest] =
      call.argv;
    expect([expected, ttl, status, truncate, nResults, nUndo, nTrace]).toEqual(['7', '86400000', 'running', '-1', '2', '1', '1']);
    // No options: re-stamp every key (the safe default), leave the lease alone, announce nothing,
    // check no snapshot (the new slots are flags and empty strings: no extra Redis command).
    expect([restamp, release, owner, channel, message]).toEqual(['1', '0', '', '', '']);
    expect([take, takeOwner, takeTtl, check, expectedSnapshot]).toEqual(['0', '', '', '0', '']);
    expect(decodeEnvelope(bytes(snapshot), { kind: SNAPSHOT_KIND, machineVersions: [3] })).toEqual({
      kind: SNAPSHOT_KIND,
      machineVersion: 3,
      payload: { value: { running: 'b' }, context: { cursor: 1 } },
    });
    expect(decode(bytes(outbox))).toEqual(commit.outbox);
    expect(rest).toHaveLength(2 * 2 + 2 * 1 + 1);
    expect(rest[0]).toBe('a');
    expect(decode(bytes(rest[1]))).toEqual({ id: 1 });
    expect(rest[2]).toBe('b');
    expect(decode(bytes(rest[3]))).toBeNull();
    expect(rest[4]).toBe('0');
    expect(decode(bytes(rest[5]))).toEqual({ step: 'a', args: { x: 1 }, result: { id: 1 } });
    expect(decode(bytes(rest[6]))).toEqual({ type: 'run', step: 'b', at: 5 });
  });

  it('passes a truncation as the number of entries kept', () => {
    const call = commitArgs(keys, 1, { ...commit, writes: { ...commit.writes, truncateUndoTo: 0 } }, 1000);
    expect(call.argv[15]).toBe('0');
  });

  it('passes the re-stamp flag, the lease to release and the announcement', () => {
    const plain = commitArgs(keys, 3, commit, 1000, { restamp: false });
    expect(plain.argv.slice(2, 7)).toEqual(['0', '0', '', '', '']);
    const full = commitArgs(keys, 3, commit, 1000, { restamp: true, releaseLease: 'host-1', announceId: 'e1' });
    expect(full.argv.slice(2, 7)).toEqual(['1', '1', 'host-1', keys.settled, 'e1']);
    // An empty owner is still a release: the flag, not the owner, says whether to release.
    expect(commitArgs(keys, 3, commit, 1000, { releaseLease: '' }).argv.slice(3, 5)).toEqual(['1', '']);
    expect(full.argv.slice(12)).toEqual(plain.argv.slice(12));
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
  it('puts the TTL, reactor, input, lease and announcement before the first commit', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: { at: new Date(9) }, commit }, 5000);
    expect(call.keys).toEqual([keys.execution, keys.results, keys.undo, keys.trace, keys.lease]);
    expect(call.argv.slice(0, 2)).toEqual(['5000', 'checkout']);
    expect(decode(bytes(call.argv[2]))).toEqual({ at: new Date(9) });
    expect(call.argv.slice(3, 8)).toEqual(['0', '', '', '', '']);
    expect(call.argv.slice(8)).toEqual(commitArgs(keys, 0, commit, 5000).argv.slice(12));
  });

  it('passes the lease to take, in whole milliseconds, and the announcement', () => {
    const call = createArgs(keys, { id: 'e1', reactor: 'checkout', input: null, commit }, 5000, { lease: { owner: 'host-1', ttlMs: 2.5 }, announce: true });
    expect(call.argv.slice(3, 8)).toEqual(['1', 'host-1', '3', keys.settled, 'e1']);
    expect(call.argv.slice(8)).toEqual(commitArgs(keys, 0, commit, 5000).argv.slice(12));
  });
});

describe('acquireAndLoadArgs', () => {
  it('names the execution hash and the lease, the owner and the TTL in whole milliseconds', () => {
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 30_000 })).toEqual({ keys: [keys.execution, keys.lease], argv: ['host-1', '30000'] });
    expect(acquireAndLoadArgs(keys, { owner: 'host-1', ttlMs: 0.2 }).argv[1]).toBe('1');
  });
});

describe('lease and active-index args', () => {
  it('names the lease key, owner and TTL in whole milliseconds', () => {
    expect(acquireLeaseArgs(keys, 'host-1', 50)).toEqual({ keys: [keys.lease], argv: ['host-1', '50'] });
    expect(acquireLeaseArgs(keys, 'host-1', 0.2).argv[1]).toBe('1');
    expect(releaseLeaseArgs(keys, 'host-1')).toEqual({ keys: [keys.lease], argv: ['host-1'] });
    expect(markActiveArgs('xr:active', 'e1')).toEqual({ keys: ['xr:active'], argv: ['e1'] });
  });

  it('rounds TTLs up, to at least 1 ms, and rejects NaN', () => {
    expect(ttlArg(1.2)).toBe('2');
    expect(ttlArg(-5)).toBe('1');
    expect(() => ttlArg(Number.NaN)).toThrow(DefinitionError);
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

  it('reads an acquireAndLoad reply: leased with the stored bytes, busy, or missing', () => {
    const rev = Buffer.from('3');
    const snapshot = Buffer.from([1, 2]);
    const outbox = Buffer.from([3]);
    const input = Buffer.from([4]);
    expect(readAcquireAndLoadReply([0, rev, snapshot, outbox, input])).toEqual({ status: 'leased', revision: rev, snapshot, outbox, input });
    expect(readAcquireAndLoadReply([0, rev, null, outbox])).toEqual({ status: 'leased', revision: rev, snapshot: null, outbox, input: null });
    expect(readAcquireAndLoadReply([0, '3', null, null, null])).toEqual({ status: 'leased', revision: Buffer.from('3'), snapshot: null, outbox: null, input: null });
    expect(readAcquireAndLoadReply([1])).toEqual({ status: 'busy' });
    expect(readAcquireAndLoadReply([2])).toEqual({ status: 'missing' });
    expect(() => readAcquireAndLoadReply('OK')).toThrow(/acquireAndLoad-2\.lua replied "OK", not a reply code/);
    expect(() => readAcquireAndLoadReply([])).toThrow(/not a reply code/);
    expect(() => readAcquireAndLoadReply([7])).toThrow(/unknown code 7/);
    expect(() => readAcquireAndLoadReply([0, rev, { not: 'bytes' }, outbox, input])).toThrow(/not bytes/);
  });
});

describe('lua scripts', () => {
  const files = readdirSync(new URL('../../src/store/lua/', import.meta.url)).filter((f) => f.endsWith('.lua'));

  it('registers every script file, each named verbNoun-<numKeys>.lua', () => {
    expect(files.sort()).toEqual(Object.values(SCRIPTS).map((s) => s.file).sort());
    for (const script of Object.values(SCRIPTS)) expect(script.file).toMatch(new RegExp(`^[a-z][A-Za-z]+-${script.numberOfKeys}\\.lua$`));
  });

  it('opens each script with a header listing exactly its KEYS, its ARGV and its return codes', () => {
    for (const script of Object.values(SCRIPTS)) {
      const source = loadLuaScript(script.file);
      const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
      expect(header, script.file).toContain(script.file);
      expect(header, script.file).toMatch(/ARGV\[1\]/);
      expect(header, script.file).toMatch(/Returns/);
      const declared = new Set([...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])));
      expect([...declared].sort(), script.file).toEqual(Array.from({ length: script.numberOfKeys }, (_, i) => i + 1));
      const used = [...source.slice(header.length).matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]));
      for (const index of used) expect(index, script.file).toBeLessThanOrEqual(script.numberOfKeys);
    }
  });

  it('expands includes', () => {
    const source = loadLuaScript(SCRIPTS.commitExecution.file);
    expect(source).not.toMatch(/^--- @include/m);
    expect(source).toMatch(/local function applyCommit/);
  });
});
