import { describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { PersistedSnapshot } from '../../src/index.js';
import { encode, encodeEnvelope } from '../../src/serialization/index.js';
import * as scripts from '../../src/store/redis-scripts.js';
import { decodeSnapshot, encodeSnapshot, SNAPSHOT_KIND } from '../../src/store/snapshot-codec.js';

const snapshot: PersistedSnapshot = {
  machineVersion: EXECUTION_MACHINE_VERSION,
  value: { running: 'b' },
  context: { at: new Date('2030-01-02T03:04:05.006Z'), big: 2n ** 70n, list: [1, 'two', undefined], set: new Set(['a']) },
};

describe('snapshot codec', () => {
  it('round-trips a snapshot through its envelope bytes, Dates and bigints included', () => {
    const decoded = decodeSnapshot(encodeSnapshot(snapshot));
    expect(decoded).toEqual(snapshot);
    expect((decoded.context as { at: Date }).at).toBeInstanceOf(Date);
  });

  it('encodes the same snapshot to the same bytes, also after a round trip (what ifSnapshot compares)', () => {
    const bytes = encodeSnapshot(snapshot);
    expect(Buffer.compare(encodeSnapshot(snapshot), bytes)).toBe(0);
    expect(Buffer.compare(encodeSnapshot(decodeSnapshot(bytes)), bytes)).toBe(0);
  });

  it('reads the machine versions it is given, by default only EXECUTION_MACHINE_VERSION', () => {
    const v7 = encodeSnapshot({ ...snapshot, machineVersion: 7 });
    expect(decodeSnapshot(v7, [6, 7]).machineVersion).toBe(7);
    expect(() => decodeSnapshot(v7)).toThrow(DeserializationError);
    expect(() => decodeSnapshot(v7)).toThrow(new RegExp(`machine version 7; this build knows ${EXECUTION_MACHINE_VERSION}`));
    expect(() => decodeSnapshot(encodeSnapshot(snapshot), [])).toThrow(/knows no version/);
  });

  it('throws DeserializationError on bytes that are not a snapshot envelope', () => {
    expect(() => decodeSnapshot(new Uint8Array([0xc1, 0xff, 0x00]))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(new Uint8Array())).toThrow(DeserializationError);
    expect(() => decodeSnapshot(Buffer.from('{"json":"from another program"}'))).toThrow(/could not be decoded/);
    expect(() => decodeSnapshot(encode({ not: 'an envelope' }))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(encode({ not: 'an envelope' }))).toThrow(/not an xreactor envelope/);
    expect(() => decodeSnapshot(encodeEnvelope('trace', EXECUTION_MACHINE_VERSION, { value: 1, context: 2 }))).toThrow(/kind "trace", not "execution"/);
    expect(() => decodeSnapshot(encodeEnvelope(SNAPSHOT_KIND, EXECUTION_MACHINE_VERSION, null))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(encodeEnvelope(SNAPSHOT_KIND, EXECUTION_MACHINE_VERSION, 'text'))).toThrow(/not \{ value, context \}/);
  });

  it('is what redis-scripts.ts re-exports', () => {
    expect(scripts.SNAPSHOT_KIND).toBe(SNAPSHOT_KIND);
    expect(scripts.encodeSnapshot).toBe(encodeSnapshot);
  });
});
