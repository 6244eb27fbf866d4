/**
 * The one msgpackr `Packr` in xreactor. Nothing else imports msgpackr.
 *
 * What round-trips: plain objects and arrays (members that are `undefined` are kept, as
 * `undefined`), strings, booleans, null, numbers including NaN and ±Infinity, bigint, Date
 * (millisecond precision; an invalid Date stays invalid), Set, RegExp, typed arrays, Buffer,
 * and Errors anywhere in the value (through the error converter, see below).
 *
 * What does not: `-0` is written as the integer 0 and comes back as `0`, as with JSON. A `Map`
 * comes back as a plain object (keys become strings), and so does an object with a null
 * prototype. Class instances come back as plain objects of their own enumerable fields (or of
 * their `toJSON()`). A `"__proto__"` key comes back as `"__proto_"` (msgpackr's
 * prototype-pollution guard). Strings holding lone UTF-16 surrogates are not preserved (UTF-8 has
 * no encoding for them). Functions become `undefined`, symbol keys are dropped, holes in arrays
 * become `undefined`. Cyclic values make `encode` throw a RangeError.
 */
import { addExtension, FLOAT32_OPTIONS, Packr } from 'msgpackr';
import { DeserializationError } from '../errors/index.js';
import { deserializeError, serializeError } from './errors.js';
import { FastPacker } from './fast-pack.js';
import type { SerializedError } from './errors.js';

/** msgpack extension type of a serialized error. msgpackr leaves 1–100 to applications. */
const ERROR_EXTENSION_TYPE = 0x58;
/** msgpackr's own extension type for errors (used by `moreTypes` Packrs). */
const MSGPACKR_ERROR_TYPE = 0x65;

const packr = new Packr({
  // Objects are written as msgpack maps. Records would need their structure table stored and
  // shared by every process that reads Redis; maps are self-describing.
  useRecords: false,
  // Maps decode as plain objects, which is how objects are written (required with useRecords: false).
  mapsAsObjects: true,
  // Objects of any size: the fixed 16-bit map header rejects objects with more than 65535 keys.
  variableMapSize: true,
  // Keep Set, RegExp, typed arrays and ArrayBuffer as their types instead of arrays/objects.
  moreTypes: true,
  // No reference tracking (it costs about a quarter of the speed): shared references are written
  // twice and cycles throw. Nothing we store needs object identity.
  structuredClone: false,
  // bigint survives exactly: int64 on the wire only ever comes from a bigint (numbers beyond 32
  // bits are written as float64), so int64 decodes as bigint, and larger bigints use the extension.
  int64AsType: 'bigint',
  useBigIntExtension: true,
  // `undefined` is written as fixext 0 (not nil), so `{ a: undefined }` keeps its member.
  encodeUndefinedAsNil: false,
  // Every non-integer number as float64: float32 would round.
  useFloat32: FLOAT32_OPTIONS.NEVER,
  // Class instances with a toJSON() are written as its result, as JSON.stringify would.
  useToJSON: true,
  // Decoded binary data is copied, so it never aliases (or keeps alive) the caller's input bytes.
  copyBuffers: true,
});

/** The runtime signature msgpackr calls an extension's `pack` with (its typings show only the first argument). */
type AllocateForWrite = (size: number) => { target: Uint8Array; position: number };
interface PackrFlags {
  readonly moreTypes?: boolean;
  readonly useToJSON?: boolean;
}

// addExtension is process-wide: it applies to every Packr of this msgpackr copy, including other
// libraries'. Only our Packr converts errors; others keep msgpackr's built-in error encoding.
addExtension({
  Class: Error,
  type: ERROR_EXTENSION_TYPE,
  pack(this: PackrFlags, error: Error, allocateForWrite: AllocateForWrite, packValue: (value: unknown) => void): void {
    if (this === packr) {
      writeTag(allocateForWrite, ERROR_EXTENSION_TYPE);
      packValue(serializeError(error));
      return;
    }
    const toJSON = (error as { toJSON?: () => unknown }).toJSON;
    if (error.constructor !== Error && this.useToJSON !== false && typeof toJSON === 'function') {
      allocateForWrite(0);
      packValue(toJSON.call(error));
    } else if (this.moreTypes === true) {
      writeTag(allocateForWrite, MSGPACKR_ERROR_TYPE);
      packValue([error.name, error.message, (error as { cause?: unknown }).cause]);
    } else {
      allocateForWrite(0);
      packValue([error.name, error.message, (error as { cause?: unknown }).cause]);
    }
  },
  read(datum: unknown): Error {
    return deserializeError(datum as SerializedError);
  },
} as unknown as Parameters<typeof addExtension>[0]);

/** A fixext 1 header whose data byte is unused: the extension's value follows as a msgpack value. */
function writeTag(allocateForWrite: AllocateForWrite, type: number): void {
  const { target, position } = allocateForWrite(3);
  target[position] = 0xd4;
  target[position + 1] = type;
  target[position + 2] = 0;
}

/**
 * Encodes a value as msgpack. Errors anywhere inside it are converted with `serializeError`.
 * @throws RangeError when the value is cyclic; Error when it contains a symbol value.
 */
export function encode(value: unknown): Uint8Array {
  return fastPacker.pack(value);
}

/** What `encode` writes: plain data by the fast writer, everything else by the Packr (the same bytes either way). */
const fastPacker = new FastPacker((value) => packr.pack(value));

/** The Packr's own bytes for `value` (for tests that check the fast writer against it). */
export function packrEncode(value: unknown): Uint8Array {
  return packr.pack(value);
}

/**
 * Decodes msgpack written by {@link encode}. Errors come back through `deserializeError`.
 * @throws DeserializationError when the bytes are truncated, not msgpack, or hold a corrupt error.
 */
export function decode(bytes: Uint8Array): unknown {
  try {
    return packr.unpack(bytes) as unknown;
  } catch (error) {
    if (error instanceof DeserializationError) throw error;
    throw new DeserializationError(describeDecodeFailure(bytes, error), { cause: error });
  }
}

function describeDecodeFailure(bytes: Uint8Array, error: unknown): string {
  if (!(bytes instanceof Uint8Array)) {
    return `stored value is ${bytes === null ? 'null' : typeof bytes}, not bytes: read it from Redis as a Buffer`;
  }
  const reason = error instanceof Error ? error.message : String(error);
  if ((error as { incomplete?: unknown } | null)?.incomplete === true) {
    return `stored value ends in the middle of a msgpack value after ${bytes.length} bytes (truncated write or partial read): restore a complete copy or discard it`;
  }
  return `stored value of ${bytes.length} bytes is not msgpack written by xreactor (${reason}): the key holds foreign or corrupt data; discard it`;
}
