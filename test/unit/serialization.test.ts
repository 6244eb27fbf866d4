import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { DefinitionError, DeserializationError, InputValidationError, StepFailure, XreactorError } from '../../src/errors/index.js';
import {
  decode,
  decodeEnvelope,
  deserializeError,
  encode,
  encodeEnvelope,
  MAX_CAUSE_DEPTH,
  RecordedError,
  registerErrorClass,
  serializeError,
} from '../../src/serialization/index.js';
import type { SerializedError } from '../../src/serialization/index.js';

function withFrames(count: number): Error {
  const error = new Error('deep');
  const frames = Array.from({ length: count }, (_, i) => `    at frame${i} (file.js:${i}:1)`);
  error.stack = ['Error: deep', ...frames].join('\n');
  return error;
}

function causeDepth(error: unknown): number {
  let depth = 0;
  for (let e = (error as Error).cause; e instanceof Error; e = e.cause) depth++;
  return depth;
}

describe('serializeError', () => {
  it('caps a stack at 100 frames and says how many were dropped', () => {
    const lines = serializeError(withFrames(150)).stack!.split('\n');
    expect(lines).toHaveLength(1 + 100 + 1);
    expect(lines[100]).toBe('    at frame99 (file.js:99:1)');
    expect(lines[101]).toBe('    ... 50 more frames');
  });

  it('keeps a stack of 100 frames unchanged, and capping twice changes nothing', () => {
    const exact = withFrames(100);
    expect(serializeError(exact).stack).toBe(exact.stack);
    const capped = deserializeError(serializeError(withFrames(150)));
    expect(serializeError(capped).stack).toBe(capped.stack);
  });

  it('stops at a cycle in the cause chain', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    const serialized = serializeError(a);
    expect([serialized.message, serialized.cause?.message, serialized.cause?.cause]).toStrictEqual(['a', 'b', undefined]);
    expect(causeDepth(decode(encode(a)))).toBe(1);
  });

  it(`keeps at most ${MAX_CAUSE_DEPTH} levels of cause`, () => {
    let error = new Error('level 0');
    for (let i = 1; i <= 20; i++) error = new Error(`level ${i}`, { cause: error });
    expect(causeDepth(deserializeError(serializeError(error)))).toBe(MAX_CAUSE_DEPTH);
  });

  it('records a class name hidden behind an inherited "Error" name', () => {
    class PaymentDeclined extends Error {
      readonly amount = 42;
    }
    const back = decode(encode(new PaymentDeclined('card declined'))) as RecordedError;
    expect(back).toBeInstanceOf(RecordedError);
    expect([back.name, back.originalName, back.code, back.data]).toStrictEqual(['PaymentDeclined', 'PaymentDeclined', 'recorded', { amount: 42 }]);
    expect(serializeError(back)).toMatchObject({ name: 'PaymentDeclined', data: { amount: 42 } });
  });

  it('turns a thrown string into a NonErrorThrown entry, and a non-Error cause back into the value', () => {
    expect(serializeError('boom')).toStrictEqual({ name: 'NonErrorThrown', message: 'boom', detail: 'boom' });
    expect(serializeError({ reason: 'x' }).message).toBe('non-Error value thrown: {"reason":"x"}');
    const back = deserializeError(serializeError(new Error('wrapped', { cause: { code: 7 } })));
    expect(back.cause).toStrictEqual({ code: 7 });
  });

  it('round-trips built-in classes and AggregateError members', () => {
    const back = decode(encode(new AggregateError([new TypeError('t'), new StepFailure('s')], 'both'))) as AggregateError;
    expect(back).toBeInstanceOf(AggregateError);
    expect(back.errors[0]).toBeInstanceOf(TypeError);
    expect(back.errors[1]).toBeInstanceOf(StepFailure);
  });
});

describe('registerErrorClass', () => {
  class ParkedError extends XreactorError {
    constructor(readonly until: number) {
      super('parked', `parked until ${until}`);
    }
  }

  it('restores a registered class from its data, and refuses a second registration', () => {
    registerErrorClass('ParkedError', (s) => new ParkedError(Number(s.data?.until)));
    const back = decode(encode(new ParkedError(99)));
    expect(back).toBeInstanceOf(ParkedError);
    expect((back as ParkedError).until).toBe(99);
    expect(() => registerErrorClass('ParkedError', () => new Error())).toThrow(DefinitionError);
  });
});

describe('deserializeError', () => {
  it('rejects data that is not a serialized error with DeserializationError', () => {
    for (const bad of [null, 'x', { name: 1, message: 'm' }, { name: 'E', message: 'm', cause: 'c' }]) {
      expect(() => deserializeError(bad as unknown as SerializedError)).toThrow(DeserializationError);
    }
    expect(() => decode(Uint8Array.from([0xd4, 0x58, 0x00, 0x01]))).toThrow(DeserializationError);
  });
});

describe('encode/decode', () => {
  it('keeps undefined members, Dates, NaN and bigint, and writes -0 as 0', () => {
    const value = { a: undefined, when: new Date(-1500), nan: NaN, big: 2n ** 70n, small: 5n, negZero: -0 };
    expect(decode(encode(value))).toStrictEqual({ ...value, negZero: 0 });
  });

  it('returns a Map as a plain object and renames a "__proto__" key', () => {
    expect(decode(encode(new Map([[1, 'a']])))).toStrictEqual({ 1: 'a' });
    expect(decode(encode(JSON.parse('{"__proto__":1}')))).toStrictEqual({ __proto_: 1 });
  });

  it('leaves error encoding of other Packr instances to msgpackr', () => {
    const other = new Packr({ moreTypes: true });
    const bytes = other.pack(new RangeError('r'));
    expect(bytes[1]).toBe(0x65);
    expect(other.unpack(bytes)).toBeInstanceOf(RangeError);
    expect(new Packr().unpack(new Packr().pack(new Error('q')))).toStrictEqual(['Error', 'q', undefined]);
  });

  it('reports truncated and foreign bytes as DeserializationError', () => {
    const bytes = encode({ step: 'charge', attempts: [1, 2, 3] });
    expect(() => decode(bytes.subarray(0, bytes.length - 1))).toThrow(/truncated/);
    expect(() => decode(Buffer.from('{"json":true}'))).toThrow(DeserializationError);
  });
});

describe('envelope', () => {
  const expected = { kind: 'execution', machineVersions: [1, 2] } as const;

  it('says which machine version is unknown and what to do', () => {
    expect(() => decodeEnvelope(encodeEnvelope('execution', 7, {}), expected)).toThrow(
      'stored execution snapshot has machine version 7; this build knows 1, 2: deploy a build that knows version 7, or discard the execution',
    );
  });

  it('names foreign data and a wrong kind', () => {
    expect(() => decodeEnvelope(encode(['something', 'else']), expected)).toThrow(/not an xreactor envelope/);
    expect(() => decodeEnvelope(encodeEnvelope('lock', 1, {}), expected)).toThrow(/kind "lock", not "execution"/);
    expect(() => decodeEnvelope(encode(['xr', 2, 'execution', 1, {}]), expected)).toThrow(/envelope format 2/);
  });

  it('with a registry of kinds, reads each registered kind and says which kind or version is unknown (retryable)', () => {
    const machines = { execution: [1, 2], map: [1] };
    expect(decodeEnvelope(encodeEnvelope('map', 1, { n: 1 }), { machines })).toEqual({ kind: 'map', machineVersion: 1, payload: { n: 1 } });
    expect(() => decodeEnvelope(encodeEnvelope('unit', 1, {}), { machines })).toThrow(
      'stored snapshot is of kind "unit", which this build does not know (it knows "execution", "map"): a build that knows kind "unit" must advance it; deploy one, or discard the actor',
    );
    expect(() => decodeEnvelope(encodeEnvelope('map', 3, {}), { machines })).toThrow(
      'stored map snapshot has machine version 3; this build knows 1: deploy a build that knows version 3, or discard the actor',
    );
    for (const bytes of [encodeEnvelope('unit', 1, {}), encodeEnvelope('map', 3, {})]) {
      expect(() => decodeEnvelope(bytes, { machines })).toThrow(expect.objectContaining({ retryable: true }) as Error);
    }
    expect(() => decodeEnvelope(encode(['xr', 1, 5, 1, {}]), { machines })).toThrow(expect.objectContaining({ retryable: false, message: expect.stringMatching(/names kind 5, not an actor kind/) }) as Error);
    expect(() => decodeEnvelope(encode(['something', 'else']), { machines })).toThrow(expect.objectContaining({ retryable: false }) as Error);
  });

  it('refuses to write an envelope with an invalid machine version', () => {
    expect(() => encodeEnvelope('execution', 1.5, {})).toThrow(DefinitionError);
  });
});

describe('InputValidationError field errors', () => {
  it('groups issues on fields named like Object.prototype members', () => {
    
    const error = new InputValidationError('bad', [
      { path: ['constructor'], message: 'm1' },
      { path: ['__proto__'], message: 'm2' },
      { path: ['toString'], message: 'm3' },
      { path: ['constructor'], message: 'm4' },
    ]);
    expect(Object.keys(error.fieldErrors)).toEqual(['constructor', '__proto__', 'toString']);
    expect(error.fieldErrors['constructor']).toEqual(['m1', 'm4']);
    expect(Object.getPrototypeOf(error.fieldErrors)).toBe(Object.prototype);
  });
});
