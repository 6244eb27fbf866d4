import { describe, expect, it } from 'vitest';
import { DeserializationError, EXECUTION_MACHINE_VERSION } from '../../src/index.js';
import type { PersistedSnapshot } from '../../src/index.js';
import { encode, encodeEnvelope } from '../../src/serialization/index.js';
import * as scripts from '../../src/store/redis-scripts.js';
import { decodeSnapshot, DEFAULT_MACHINES, encodeSnapshot, SNAPSHOT_KIND } from '../../src/store/snapshot-codec.js';

const snapshot: PersistedSnapshot = {
  kind: 'execution',
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

  it('encodes a snapshot object once (its commit and the job carrying it share the bytes), and later encodings leave them intact', () => {
    const one: PersistedSnapshot = { ...snapshot, context: { n: 1 } };
    const bytes = encodeSnapshot(one);
    const copy = Buffer.from(bytes);
    expect(encodeSnapshot(one)).toBe(bytes);
    // Another object with the same content is encoded on its own, to the same bytes.
    const twin: PersistedSnapshot = { ...one };
    expect(encodeSnapshot(twin)).not.toBe(bytes);
    expect(Buffer.compare(encodeSnapshot(twin), bytes)).toBe(0);
    // msgpackr writes later values after (or beside) earlier ones, never over them.
    for (let i = 0; i < 2_000; i++) encodeSnapshot({ ...snapshot, context: { n: i, pad: 'x'.repeat(i % 300) } });
    expect(Buffer.compare(bytes, copy)).toBe(0);
    expect(decodeSnapshot(bytes).context).toEqual({ n: 1 });
  });

  it('reads the machine versions it is given per kind, by default the registry\'s (executions of versions 6 to 10, maps, element rollbacks and async units of 1)', () => {
    const v11 = encodeSnapshot({ ...snapshot, machineVersion: 11 });
    expect(decodeSnapshot(v11, { execution: [10, 11] }).machineVersion).toBe(11);
    expect(EXECUTION_MACHINE_VERSION).toBe(10);
    expect(DEFAULT_MACHINES).toEqual({ execution: [6, 7, 8, 9, EXECUTION_MACHINE_VERSION], map: [1], 'element-rollback': [1], unit: [1] });
    expect(decodeSnapshot(encodeSnapshot({ ...snapshot, machineVersion: 6 })).machineVersion).toBe(6);
    expect(() => decodeSnapshot(v11)).toThrow(DeserializationError);
    expect(() => decodeSnapshot(v11)).toThrow(new RegExp(`stored execution snapshot has machine version 11; this build knows 6, 7, 8, 9, ${EXECUTION_MACHINE_VERSION}: deploy a build that knows version 11`));
    expect(() => decodeSnapshot(encodeSnapshot(snapshot), { execution: [] })).toThrow(/knows no version/);
  });

  it('stores the actor kind and returns it; a kind or version this build does not know is retryable, naming it', () => {
    const map: PersistedSnapshot = { kind: 'lock', machineVersion: 2, value: 'collecting', context: { done: 3 } };
    const bytes = encodeSnapshot(map);
    expect(decodeSnapshot(bytes, { execution: [1], lock: [1, 2] })).toEqual(map);
    const unknownKind = (() => {
      try {
        decodeSnapshot(bytes);
      } catch (error) {
        return error;
      }
    })();
    expect(unknownKind).toBeInstanceOf(DeserializationError);
    expect(unknownKind).toMatchObject({ retryable: true, code: 'deserialization_failed' });
    expect((unknownKind as Error).message).toMatch(/kind "lock", which this build does not know \(it knows "execution", "map", "element-rollback", "unit"\): a build that knows kind "lock" must advance it/);
    expect(() => decodeSnapshot(bytes, { lock: [1] })).toThrow(expect.objectContaining({ retryable: true, message: expect.stringMatching(/stored lock snapshot has machine version 2; this build knows 1/) }) as Error);
    // A kind named like an Object.prototype member is not registered by accident.
    expect(() => decodeSnapshot(encodeSnapshot({ ...map, kind: 'constructor' }), {})).toThrow(/kind "constructor", which this build does not know \(it knows no kind\)/);
  });

  it('keeps truncated and foreign bytes non-retryable', () => {
    const bytes = encodeSnapshot(snapshot);
    for (const bad of [bytes.subarray(0, bytes.length - 2), Buffer.from('junk'), encode({ not: 'an envelope' }), encode(['xr', 1, 7, 1, {}])]) {
      expect(() => decodeSnapshot(bad)).toThrow(expect.objectContaining({ retryable: false }) as Error);
    }
  });

  it('throws DeserializationError on bytes that are not a snapshot envelope', () => {
    expect(() => decodeSnapshot(new Uint8Array([0xc1, 0xff, 0x00]))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(new Uint8Array())).toThrow(DeserializationError);
    expect(() => decodeSnapshot(Buffer.from('{"json":"from another program"}'))).toThrow(/could not be decoded/);
    expect(() => decodeSnapshot(encode({ not: 'an envelope' }))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(encode({ not: 'an envelope' }))).toThrow(/not an xreactor envelope/);
    expect(() => decodeSnapshot(encodeEnvelope(SNAPSHOT_KIND, EXECUTION_MACHINE_VERSION, null))).toThrow(DeserializationError);
    expect(() => decodeSnapshot(encodeEnvelope(SNAPSHOT_KIND, EXECUTION_MACHINE_VERSION, 'text'))).toThrow(/not \{ value, context \}/);
  });

  it('is what redis-scripts.ts re-exports', () => {
    expect(scripts.SNAPSHOT_KIND).toBe(SNAPSHOT_KIND);
    expect(scripts.encodeSnapshot).toBe(encodeSnapshot);
  });
});
