import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as X from '../../src/errors/index.js';
import {
  decode,
  decodeEnvelope,
  deserializeError,
  encode,
  encodeEnvelope,
  NON_ERROR_THROWN,
  RecordedError,
  serializeError,
} from '../../src/serialization/index.js';
import { alignedStart, FastPacker } from '../../src/serialization/fast-pack.js';
import { packrEncode } from '../../src/serialization/packr.js';

const RUNS = { numRuns: 250 };

// msgpackr renames a "__proto__" key (documented in packr.ts), so data keys exclude it.
const key = fc.string({ maxLength: 8 }).filter((k) => k !== '__proto__');
const text = fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }));
// -0 comes back as 0 (documented in packr.ts); it is checked by a unit test instead.
const float = fc.double().filter((d) => !Object.is(d, -0));
const leaf = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  fc.integer(),
  fc.maxSafeInteger(),
  float,
  text,
  fc.date(),
  fc.bigInt(),
);
const dataOf = (leaves: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
    value: fc.oneof({ depthSize: 'small' }, leaves, tie('array'), tie('object')),
    array: fc.array(tie('value'), { maxLength: 5 }),
    object: fc.dictionary(key, tie('value'), { maxKeys: 6, noNullPrototype: true }),
  })).value;
const data = dataOf(leaf);

const optional = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined });
const options = fc.record({ step: optional(text), reactor: optional(text), retryable: optional(fc.boolean()) });
// Field names that collide with Object.prototype members ("constructor", ...) round-trip too
// (see the unit test), but toStrictEqual compares `.constructor`, so the property leaves them out.
const pathKey = key.filter((k) => !(k in Object.prototype));
const issues = fc.array(
  fc.record({ path: fc.array(fc.oneof(pathKey, fc.nat()), { maxLength: 3 }), message: text }, { noNullPrototype: true }),
  { maxLength: 4 },
);
const messageOnly = [
  X.DefinitionError,
  X.DeprecatedOptionError,
  X.DependencyError,
  X.ArgumentResolutionError,
  X.CompensationError,
  X.UndoError,
  X.InvalidStateError,
  X.DeserializationError,
] as const;

/** One instance of every xreactor error class, with random fields. */
const xreactorError: fc.Arbitrary<X.XreactorError> = fc.oneof(
  fc.tuple(fc.constantFrom(...messageOnly), text, options).map(([Class, m, o]) => new Class(m, o)),
  fc.tuple(key, text, options).map(([code, m, o]) => new X.XreactorError(code, m, o)),
  fc.tuple(text, issues, options).map(([m, i, o]) => new X.InputValidationError(m, i, o)),
  fc.tuple(text, issues, options).map(([m, i, o]) => new X.OutputValidationError(m, i, o)),
  fc.tuple(text, data, options).map(([m, detail, o]) => new X.StepFailure(m, { ...o, detail })),
  fc.tuple(text, fc.nat(), fc.nat()).map(([id, a, b]) => new X.StaleRevisionError(id, a, b)),
  text.map((id) => new X.ExecutionNotFoundError(id)),
  fc.tuple(text, text, options).map(([id, r, o]) => new X.ExecutionAbortedError(id, r, o)),
  text.map((r) => new X.UnknownReactorError(r)),
);

const reserved = new Set(['name', 'message', 'stack', 'cause']);
const className = fc
  .stringMatching(/^[A-Z][A-Za-z0-9]{0,12}$/)
  .filter((n) => !/Error$|^StepFailure$/.test(n) && n !== NON_ERROR_THROWN);
/** An instance of a freshly made user class, with random own enumerable fields. */
const userError = fc
  .tuple(className, text, fc.dictionary(key.filter((k) => !reserved.has(k)), data, { maxKeys: 4, noNullPrototype: true }), fc.boolean())
  .map(([name, message, fields, ownName]) => {
    const Class = { [name]: class extends Error {} }[name]!;
    const error = Object.assign(new Class(message), fields);
    if (ownName) error.name = name;
    return { name, error, fields };
  });

/** Class, message, stack and fields of an error as a comparable value (a recorded error compares as its original). */
function view(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(view);
  if (value instanceof RecordedError) {
    return { class: value.originalName, message: value.message, stack: value.stack, fields: view(value.data), cause: view(value.cause) };
  }
  if (value instanceof Error) {
    const own = Object.keys(value).filter((k) => k !== 'name');
    const fields = Object.fromEntries(own.map((k) => [k, view((value as unknown as Record<string, unknown>)[k])]));
    return { class: value.constructor.name, message: value.message, stack: value.stack, fields, cause: view(value.cause) };
  }
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, view(v)]));
  }
  return value;
}

function expectDeserializationError(run: () => unknown, message?: RegExp | string): void {
  let thrown: unknown;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(X.DeserializationError);
  if (message !== undefined) expect((thrown as Error).message).toMatch(message);
}

describe('encode/decode', () => {
  it('round-trips nested data with dates, undefined members, bigints, floats and unicode', () => {
    fc.assert(fc.property(data, (value) => { expect(decode(encode(value))).toStrictEqual(value); }), RUNS);
  });

  it('round-trips errors nested anywhere inside data', () => {
    const errorLeaf = fc.oneof(xreactorError, userError.map((u) => u.error));
    fc.assert(
      fc.property(dataOf(fc.oneof(leaf, errorLeaf)), (value) => {
        expect(view(decode(encode(value)))).toStrictEqual(view(value));
      }),
      RUNS,
    );
  });
});

describe('encode: the fast writer writes the Packr\'s bytes', () => {
  const same = (value: unknown) => {
    let expected: Buffer | Error;
    try {
      expected = Buffer.from(packrEncode(value));
    } catch (error) {
      expected = error as Error;
    }
    if (expected instanceof Error) {
      expect(() => encode(value)).toThrow(expected.constructor);
      return;
    }
    const got = encode(value);
    expect(Buffer.isBuffer(got)).toBe(true);
    expect(Buffer.from(got).toString('hex')).toBe(expected.toString('hex'));
  };

  it('for nested data with dates, undefined members, bigints, floats, unicode and errors', () => {
    const errorLeaf = fc.oneof(xreactorError, userError.map((u) => u.error));
    fc.assert(fc.property(dataOf(fc.oneof(leaf, errorLeaf)), same), RUNS);
  });

  it('for anything fast-check makes (maps, sets, typed arrays, sparse arrays, null prototypes)', () => {
    const anything = fc.anything({ withBigInt: true, withBoxedValues: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withNullPrototype: true, withSparseArray: true, withObjectString: true, withUnicodeString: true });
    fc.assert(fc.property(anything, same), RUNS);
  });

  it('at every header and number boundary', () => {
    const ascii = (n: number) => 'a'.repeat(n);
    for (const n of [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 255, 256, 65_535, 65_536]) {
      same(ascii(n));
      same(`${ascii(Math.max(0, n - 1))}é`);
      same(`${ascii(Math.max(0, n - 1))}\ud800`);
      same(`${ascii(Math.max(0, n - 2))}😀`);
      same({ [ascii(n)]: n, [`${ascii(n)}é`]: n });
    }
    const numbers = [0, -0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 2 ** 32 - 1, 2 ** 32, -1, -0x20, -0x21, -0x80, -0x81, -0x8000, -0x8001, -(2 ** 31), -(2 ** 31) - 1];
    for (const n of [...numbers, 0.5, -1.5, 1e300, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, Number.NaN, Infinity, -Infinity]) same(n);
    for (const n of [0, 1, 15, 16, 17, 65_535, 65_536]) {
      same(Array.from({ length: n }, (_, i) => i));
      same(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i])));
    }
    same([true, false, null, undefined, new Date(5), 10n, new Set([1]), new Map([['a', 1]]), new Uint8Array([1, 2]), Buffer.from('hi'), { constructor: 'x' }, Object.create(null)]);
  });

  it('leaves values nested too deep to the Packr, which refuses them as before (and writes what it can)', () => {
    const nested = (depth: number, wrap: (inner: unknown) => unknown) => {
      let value: unknown = 1;
      for (let i = 0; i < depth; i++) value = wrap(value);
      return value;
    };
    for (const depth of [63, 64, 65, 200, 1_000, 3_000, 6_000]) {
      for (const value of [nested(depth, (inner) => [inner]), nested(depth, (inner) => ({ a: inner }))]) {
        same(value);
        // Whatever it writes, decode reads back (compared as JSON: deep equality recurses too).
        let bytes: Uint8Array | undefined;
        try {
          bytes = encode(value);
        } catch {
          bytes = undefined;
        }
        if (bytes !== undefined) expect(JSON.stringify(decode(bytes))).toBe(JSON.stringify(value));
      }
    }
  });

  it('writes strings and new keys at every offset up to the end of a pool', () => {
    // A writer of its own per value, so its pool (16 KiB) and key cache start empty. Short strings
    // (8 bytes each, no pool replacement) and a tuning string put what follows at every byte
    // offset just short of the pool's end.
    const check = (packer: FastPacker, value: unknown) => expect(Buffer.from(packer.pack(value)).toString('hex')).toBe(Buffer.from(packrEncode(value)).toString('hex'));
    for (let count = 2_033; count <= 2_045; count += 1) {
      for (let tune = 0; tune < 8; tune += 1) {
        const filler = [...Array.from({ length: count }, () => 'f'.repeat(7)), 't'.repeat(tune)];
        // A string whose UTF-8 cut short at a 4-byte character is exactly as many bytes as it has
        // characters; a key with a non-ASCII character (written by the Packr) and a long ASCII one.
        for (let k = 29; k <= 34; k += 1) {
          const packer = new FastPacker(packrEncode);
          const keys = [`k-é-${count}-${tune}-${k}`, `ascii-${'y'.repeat(40 + k)}`];
          check(packer, [...filler, `${'a'.repeat(k)}\u0800😀`, { [keys[0]!]: 1, [keys[1]!]: 2 }]);
          // The keys' cached bytes, used the second time.
          check(packer, { [keys[0]!]: 3, [keys[1]!]: 4 });
        }
        // A new key written just short of the pool's end, the pool replaced while it is written;
        // its cached bytes, used the second time.
        // (After a first small value, so this one does not start at the pool's first byte.)
        const packer = new FastPacker(packrEncode);
        check(packer, 'first');
        const key = `key-${count}-${tune}-${'z'.repeat(50)}`;
        check(packer, [...filler, { [key]: 1 }]);
        check(packer, { [key]: 2 });
      }
    }
  });

  it('goes on writing correctly after a value it could not write, and keeps what it returned before', () => {
    const packer = new FastPacker(packrEncode);
    const kept = Array.from({ length: 200 }, (_, i) => ({ value: { i, text: `t${i}`.repeat(i % 9) }, bytes: packer.pack({ i, text: `t${i}`.repeat(i % 9) }) }));
    const copies = kept.map((k) => Buffer.from(k.bytes));
    for (const bad of [{ a: 1, b: Symbol('no') }, [1, 2, () => 3, Symbol('x')], { deep: { deeper: [Symbol('s')] } }]) {
      expect(() => packer.pack(bad)).toThrow();
      expect(() => packrEncode(bad)).toThrow();
      const after = { after: 'the failure', n: 5 };
      expect(Buffer.from(packer.pack(after)).equals(Buffer.from(packrEncode(after)))).toBe(true);
    }
    for (let i = 0; i < 3_000; i++) packer.pack({ filler: 'z'.repeat(i % 200) });
    kept.forEach((k, i) => {
      expect(Buffer.from(k.bytes).equals(copies[i]!)).toBe(true);
      expect(decode(k.bytes)).toEqual(k.value);
    });
  });

  it('aligns the start of each value exactly for any position (past 2^31 too)', () => {
    for (const at of [0, 1, 7, 8, 9, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 100, 2 ** 32 + 3, 2 ** 40 + 5]) {
      const start = alignedStart(at);
      expect(start % 8).toBe(0);
      expect(start - at).toBeGreaterThanOrEqual(0);
      expect(start - at).toBeLessThan(8);
    }
  });

  it('writes a value whose toJSON encodes another value (a call made while writing)', () => {
    class Wrapped {
      constructor(readonly inner: unknown) {}
      toJSON(): unknown {
        return { inner: Buffer.from(encode(this.inner)).toString('hex') };
      }
    }
    same({ before: 'a', wrapped: new Wrapped({ deep: [1, 'two'] }), after: 'b' });
    // A getter of a plain object that encodes: the inner bytes it got stay as they were.
    let inner: Uint8Array | undefined;
    const withGetter = {
      get computed() {
        inner = encode({ inner: 'value', n: [1, 2] });
        return 'done';
      },
    };
    same(withGetter);
    const innerCopy = Buffer.from(inner!);
    for (let i = 0; i < 3_000; i++) encode({ filler: i });
    expect(Buffer.from(inner!).equals(innerCopy)).toBe(true);
    expect(decode(inner!)).toEqual({ inner: 'value', n: [1, 2] });
    expect(decode(encode({ wrapped: new Wrapped('x') }))).toEqual({ wrapped: { inner: Buffer.from(packrEncode('x')).toString('hex') } });
  });

  it('keeps the bytes it returned when later values are written (also past a full pool), and caches the right bytes of keys', () => {
    // A writer of its own: its key cache starts empty, whatever the other tests wrote.
    const packer = new FastPacker(packrEncode);
    const check = (value: unknown) => expect(Buffer.from(packer.pack(value)).toString('hex')).toBe(Buffer.from(packrEncode(value)).toString('hex'));
    const first = packer.pack({ executionId: 'run-1', cursor: 1 });
    const copy = Buffer.from(first);
    // Thousands of new keys of 8 to 70 characters fill the pool again and again, so some key is
    // written when the pool is replaced; its cached bytes are used the second time.
    const big = Array.from({ length: 2_000 }, (_, i) => ({ [`name-${i}-${'k'.repeat(i % 63)}`]: 'x'.repeat(i % 70), index: i }));
    check(big);
    check(big);
    expect(Buffer.from(first).equals(copy)).toBe(true);
    check({ executionId: 'run-1', cursor: 1 });
    // Past its key cache's size, new keys are written and not kept.
    const many = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`many-${i}`, i]));
    check(many);
    check(many);
  });
});

describe('serializeError/deserializeError', () => {
  const viaStorage = (e: unknown): Error => decode(encode(e)) as Error;
  const viaPlainData = (e: unknown): Error => deserializeError(decode(encode(serializeError(e))) as never);

  it('returns every xreactor class as the same class with the same fields', () => {
    fc.assert(
      fc.property(xreactorError, optional(xreactorError), (error, cause) => {
        if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
        for (const back of [viaStorage(error), viaPlainData(error), deserializeError(serializeError(error))]) {
          expect(Object.getPrototypeOf(back)).toBe(Object.getPrototypeOf(error));
          expect(back.name).toBe(error.name);
          expect(view(back)).toStrictEqual(view(error));
        }
      }),
      RUNS,
    );
  });

  it('returns user Error subclasses as RecordedError with the original name, message, stack and fields', () => {
    fc.assert(
      fc.property(userError, ({ name, error, fields }) => {
        for (const back of [viaStorage(error), viaPlainData(error)]) {
          expect(back).toBeInstanceOf(RecordedError);
          const recorded = back as RecordedError;
          expect([recorded.originalName, recorded.name, recorded.code]).toStrictEqual([name, name, 'recorded']);
          expect([recorded.message, recorded.stack]).toStrictEqual([error.message, error.stack]);
          expect(recorded.data).toStrictEqual(fields);
        }
      }),
      RUNS,
    );
  });

  it('returns thrown non-Error values as a RecordedError whose detail is the value', () => {
    fc.assert(
      fc.property(data, (value) => {
        const serialized = serializeError(value);
        expect(serialized.name).toBe(NON_ERROR_THROWN);
        for (const back of [viaStorage(serialized), deserializeError(serialized)]) {
          const revived = back instanceof RecordedError ? back : deserializeError(back as never);
          expect(revived).toBeInstanceOf(RecordedError);
          expect((revived as RecordedError).originalName).toBe(NON_ERROR_THROWN);
          expect((revived as RecordedError).detail).toStrictEqual(value);
        }
      }),
      RUNS,
    );
  });
});

describe('envelope', () => {
  const kind = fc.string({ minLength: 1, maxLength: 12 });
  const version = fc.nat({ max: 1000 });

  it('round-trips kind, machine version and payload', () => {
    fc.assert(
      fc.property(kind, version, data, (k, v, payload) => {
        const back = decodeEnvelope(encodeEnvelope(k, v, payload), { kind: k, machineVersions: [v] });
        expect(back).toStrictEqual({ kind: k, machineVersion: v, payload });
      }),
      RUNS,
    );
  });

  it('rejects every strict prefix of an envelope with DeserializationError', () => {
    fc.assert(
      fc.property(kind, version, data, fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (k, v, payload, at) => {
        const bytes = encodeEnvelope(k, v, payload);
        const prefix = bytes.subarray(0, Math.floor(at * bytes.length));
        expectDeserializationError(() => decodeEnvelope(prefix, { kind: k, machineVersions: [v] }));
      }),
      RUNS,
    );
  });

  it('rejects random bytes with DeserializationError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expectDeserializationError(() => decodeEnvelope(bytes, { kind: 'execution', machineVersions: [1] }));
      }),
      RUNS,
    );
  });

  it('rejects foreign msgpack values, including near-misses of the layout, with DeserializationError', () => {
    const nearMiss = fc
      .tuple(fc.constantFrom('xr', 'xs', 1), fc.constantFrom(1, 2, '1'), fc.constantFrom('execution', 'other', 3), fc.anything(), fc.anything())
      .chain((t) => fc.oneof(fc.constant([...t]), fc.constant([...t, 0]), fc.constant(t.slice(0, 4))));
    const foreign = fc.oneof(fc.anything(), nearMiss).filter((v) => !(Array.isArray(v) && v.length === 5 && v[0] === 'xr' && v[1] === 1 && v[2] === 'execution' && v[3] === 1));
    fc.assert(
      fc.property(foreign, (value) => {
        expectDeserializationError(() => decodeEnvelope(encode(value), { kind: 'execution', machineVersions: [1] }));
      }),
      RUNS,
    );
  });

  it('rejects an unknown machine version with a message naming it', () => {
    fc.assert(
      fc.property(version, fc.uniqueArray(version, { maxLength: 4 }), (v, known) => {
        fc.pre(!known.includes(v));
        const bytes = encodeEnvelope('execution', v, { step: 'charge' });
        expectDeserializationError(
          () => decodeEnvelope(bytes, { kind: 'execution', machineVersions: known }),
          new RegExp(`has machine version ${v};.*deploy a build that knows version ${v}`),
        );
      }),
      RUNS,
    );
  });

  it('with a registry of kinds, round-trips every registered kind and version', () => {
    fc.assert(
      fc.property(fc.dictionary(kind, fc.uniqueArray(version, { minLength: 1, maxLength: 3 }), { minKeys: 1 }), data, (machines, payload) => {
        for (const [k, versions] of Object.entries(machines)) {
          for (const v of versions) expect(decodeEnvelope(encodeEnvelope(k, v, payload), { machines })).toStrictEqual({ kind: k, machineVersion: v, payload });
        }
      }),
      { numRuns: 100 },
    );
  });

  it('with a registry of kinds, refuses an unregistered kind or version as retryable, naming it', () => {
    fc.assert(
      fc.property(kind, version, fc.dictionary(kind, fc.uniqueArray(version, { maxLength: 3 })), (k, v, machines) => {
        fc.pre(!(Object.hasOwn(machines, k) && machines[k]!.includes(v)));
        let thrown: unknown;
        try {
          decodeEnvelope(encodeEnvelope(k, v, null), { machines });
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(X.DeserializationError);
        expect((thrown as X.DeserializationError).retryable).toBe(true);
        expect((thrown as Error).message).toContain(Object.hasOwn(machines, k) ? `has machine version ${v};` : `of kind ${JSON.stringify(k.length > 40 ? `${k.slice(0, 40)}...` : k)}, which this build does not know`);
      }),
      RUNS,
    );
  });

  it('rejects a different kind with a message naming both kinds', () => {
    fc.assert(
      fc.property(kind, kind, data, (written, wanted, payload) => {
        fc.pre(written !== wanted);
        expectDeserializationError(
          () => decodeEnvelope(encodeEnvelope(written, 1, payload), { kind: wanted, machineVersions: [1] }),
          `not "${wanted}"`,
        );
      }),
      RUNS,
    );
  });
});
