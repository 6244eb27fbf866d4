/**
 * The settled notification's message as the commit script builds it (`settledMessage` in
 * `lua/includes/fencedCommit.lua`), read by `readSettledNotice`: a notice is read whole; the id
 * alone (a build before notices, a notice too large), truncated bytes or an unreadable snapshot
 * read as no notice, so the waiter loads the actor instead.
 */
import { describe, expect, it } from 'vitest';
import { encode } from '../../src/serialization/index.js';
import { readSettledNotice } from '../../src/store/settled-notice.js';
import { DEFAULT_MACHINES, encodeSnapshot } from '../../src/store/snapshot-codec.js';
import { EXECUTION_MACHINE_VERSION } from '../../machines/execution.js';

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};

/** A message laid out as the script lays it out. */
function message(revision: number, snapshot: Uint8Array, results: readonly (readonly [string, Uint8Array])[]): Buffer {
  return Buffer.concat([
    Buffer.from('\0xr1', 'latin1'),
    u32(revision),
    u32(snapshot.length),
    Buffer.from(snapshot),
    u16(results.length),
    ...results.flatMap(([name, value]) => [u16(Buffer.byteLength(name)), Buffer.from(name), u32(value.length), Buffer.from(value)]),
  ]);
}

const snapshot = { kind: 'execution', machineVersion: EXECUTION_MACHINE_VERSION, value: 'completed', context: { executionId: 'r1' } };

describe('settled notice', () => {
  it('reads the revision, the snapshot and every announced result', () => {
    const notice = readSettledNotice(message(12, encodeSnapshot(snapshot), [['sum', encode({ n: 9 })], ['ünï', encode('x')]]), DEFAULT_MACHINES);
    expect(notice?.revision).toBe(12);
    expect(notice?.snapshot).toMatchObject({ kind: 'execution', value: 'completed', context: { executionId: 'r1' } });
    expect(notice?.results).toEqual(new Map<string, unknown>([['sum', { n: 9 }], ['ünï', 'x']]));
  });

  it('reads the id alone, truncated bytes, trailing bytes, an unreadable snapshot or result as no notice', () => {
    const whole = message(3, encodeSnapshot(snapshot), [['a', encode(1)]]);
    expect(readSettledNotice(Buffer.from('r1'), DEFAULT_MACHINES)).toBeUndefined();
    expect(readSettledNotice(whole.subarray(0, whole.length - 1), DEFAULT_MACHINES)).toBeUndefined();
    expect(readSettledNotice(Buffer.concat([whole, Buffer.from([0])]), DEFAULT_MACHINES)).toBeUndefined();
    expect(readSettledNotice(message(3, Buffer.from('not an envelope'), []), DEFAULT_MACHINES)).toBeUndefined();
    expect(readSettledNotice(message(3, encodeSnapshot(snapshot), [['a', Buffer.from([0x92, 0x01])]]), DEFAULT_MACHINES)).toBeUndefined();
  });
});
